//! Task waits against a scripted vCenter (vsphere-testkit), for what the
//! simulator cannot show: tasks that run for a while (progress), never
//! finish (timeout), fail with a typed fault, waits that are abandoned, and
//! the `WaitForUpdatesEx` traffic of several waits sharing one filter.

use std::time::Duration;

use vsphere_client::types::{
    AnyMethodFault, CancelTaskRequestType, CreateFilterRequestType, CreateListViewRequestType,
    CreatePropertyCollectorRequestType, DuplicateName, ManagedObjectReference, TaskInfoState,
    WaitForUpdatesExRequestType,
};
use vsphere_client::{task, ErrorKind};
use vsphere_testkit::{MockVCenter, TaskScript};

#[tokio::test]
async fn progress_is_reported_until_the_task_succeeds() {
    let vc = MockVCenter::start().await;
    let vm = ManagedObjectReference::new("VirtualMachine", "vm-99");
    let task = vc.task(
        TaskScript::new()
            .running(10)
            .running(60)
            .succeeds_with(vm.clone()),
    );
    let client = vc.client().await;
    let mut seen = Vec::new();
    let info = client
        .task(task)
        .wait_with_progress(Some(Duration::from_secs(10)), |info| {
            seen.push((info.state.clone(), info.progress))
        })
        .await
        .expect("success");
    assert_eq!(
        seen,
        [
            (TaskInfoState::Running, Some(10)),
            (TaskInfoState::Running, Some(60)),
            (TaskInfoState::Success, None)
        ]
    );
    assert_eq!(task::task_result_reference(&info), Some(vm));
    // Versions are passed on: the second and third waits continue from the
    // version received.
    let versions: Vec<Option<String>> = vc
        .received::<WaitForUpdatesExRequestType>()
        .await
        .into_iter()
        .map(|r| r.version)
        .collect();
    assert_eq!(
        versions[..3],
        [None, Some("1".to_string()), Some("2".to_string())]
    );
}

#[tokio::test]
async fn a_task_that_never_finishes_times_out_with_its_last_state() {
    let vc = MockVCenter::start().await;
    let task = vc.task(TaskScript::new().running(42));
    let client = vc.client().await;
    let started = std::time::Instant::now();
    let err = client
        .task(task.clone())
        .wait_timeout(Duration::from_secs(1))
        .await
        .expect_err("never finishes");
    assert_eq!(err.kind(), ErrorKind::Timeout);
    assert!(err.to_string().contains("running, 42%"), "{err}");
    assert!(started.elapsed() < Duration::from_secs(3));
    // The task goes on; it can be cancelled.
    client.task(task).cancel().await.expect("cancel");
    assert_eq!(vc.count::<CancelTaskRequestType>().await, 1);
}

#[tokio::test]
async fn a_failed_task_carries_its_typed_fault() {
    let vc = MockVCenter::start().await;
    let duplicate = DuplicateName {
        name: "web-1".to_string(),
        object: ManagedObjectReference::new("VirtualMachine", "vm-1"),
        ..Default::default()
    };
    let task = vc.task(TaskScript::error(
        duplicate,
        "The name 'web-1' already exists.",
    ));
    let client = vc.client().await;
    let err = client.task(task).wait().await.expect_err("failed");
    assert_eq!(err.kind(), ErrorKind::Fault);
    let fault = err.fault().expect("fault");
    assert_eq!(fault.type_name(), Some("DuplicateName"));
    assert_eq!(fault.message(), "The name 'web-1' already exists.");
    match fault.detail() {
        Some(AnyMethodFault::DuplicateName(dup)) => assert_eq!(dup.name, "web-1"),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn concurrent_and_abandoned_waits_share_one_filter() {
    let vc = MockVCenter::start().await;
    let script = TaskScript::new()
        .running(5)
        .after(Duration::from_millis(400))
        .succeeds();
    let (task_4, task_5) = (vc.task(script.clone()), vc.task(script));
    let client = vc.client().await;
    // An abandoned wait (dropped by its timeout) does not disturb the others.
    let abandoned = client
        .task(task_4.clone())
        .wait_timeout(Duration::from_millis(100))
        .await;
    assert_eq!(abandoned.expect_err("abandoned").kind(), ErrorKind::Timeout);
    let (task_4, task_5) = (client.task(task_4), client.task(task_5));
    let (a, b) = tokio::join!(
        task_4.wait_timeout(Duration::from_secs(10)),
        task_5.wait_timeout(Duration::from_secs(10)),
    );
    assert_eq!(a.expect("task-4").state, TaskInfoState::Success);
    assert_eq!(b.expect("task-5").state, TaskInfoState::Success);
    assert_eq!(vc.count::<CreatePropertyCollectorRequestType>().await, 1);
    assert_eq!(vc.count::<CreateFilterRequestType>().await, 1);
    assert_eq!(vc.count::<CreateListViewRequestType>().await, 1);
}
