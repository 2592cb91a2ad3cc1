//! Task waits through the PropertyCollector against the simulator: results,
//! typed failures, and many concurrent waits sharing one filter.

use vsphere_client::types::{AnyMethodFault, ManagedObjectReference, TaskInfoState};
use vsphere_client::{mo, task, Client, ErrorKind};
use vsphere_tests::{Simulator, SimulatorOptions};

async fn simulator(options: SimulatorOptions) -> Simulator {
    tokio::task::spawn_blocking(move || Simulator::start(options))
        .await
        .expect("join")
        .unwrap_or_else(|e| panic!("simulator: {e}"))
}

async fn connect(sim: &Simulator) -> Client {
    Client::builder(&sim.sdk_url())
        .credentials(sim.username(), sim.password())
        .insecure(true)
        .keepalive(None)
        .connect()
        .await
        .expect("connect")
}

fn calls(client: &Client, method: &str) -> u64 {
    client.call_stats().get(method).map_or(0, |s| s.calls)
}

async fn vms(client: &Client) -> Vec<ManagedObjectReference> {
    let root = client.service_content().root_folder.clone();
    let mut vms = client
        .properties::<mo::VirtualMachine>(&["name"])
        .unwrap()
        .in_container(&root)
        .collect_all()
        .await
        .expect("vms");
    vms.sort_by(|a, b| a.name.cmp(&b.name));
    vms.into_iter().map(|vm| vm.mo_ref).collect()
}

#[tokio::test]
async fn a_successful_task_gives_its_final_info() {
    let sim = simulator(SimulatorOptions::default()).await;
    let client = connect(&sim).await;
    let vm = vms(&client).await.remove(0);
    let task = client.task(client.vim().power_off_vm_task(&vm).await.unwrap());
    let mut seen = Vec::new();
    let info = task
        .wait_with_progress(Some(std::time::Duration::from_secs(30)), |info| {
            seen.push(info.state.clone())
        })
        .await
        .expect("success");
    assert_eq!(info.state, TaskInfoState::Success);
    assert_eq!(info.task, *task.reference());
    assert_eq!(
        seen.last(),
        Some(&TaskInfoState::Success),
        "progress reported"
    );
    // Read directly, the same task says the same.
    assert_eq!(
        task.info().await.expect("info").state,
        TaskInfoState::Success
    );
}

#[tokio::test]
async fn a_failed_task_is_an_error_with_the_typed_fault() {
    let sim = simulator(SimulatorOptions::default()).await;
    let client = connect(&sim).await;
    let vm = vms(&client).await.remove(0);
    // Already powered on: the task fails with InvalidPowerState.
    let task = client.task(client.vim().power_on_vm_task(&vm, None).await.unwrap());
    let err = task.wait().await.expect_err("the VM is already on");
    assert_eq!(err.kind(), ErrorKind::Fault);
    let fault = err.fault().expect("fault");
    assert_eq!(fault.type_name(), Some("InvalidPowerState"), "{err}");
    assert!(
        matches!(fault.detail(), Some(AnyMethodFault::InvalidPowerState(_))),
        "{fault:?}"
    );
}

#[tokio::test]
async fn many_concurrent_waits_share_one_filter() {
    // 10 VMs per pool and standalone host: 20 VMs, 20 tasks at once.
    let sim = simulator(SimulatorOptions {
        vms: 10,
        ..Default::default()
    })
    .await;
    let client = connect(&sim).await;
    let vms = vms(&client).await;
    assert_eq!(vms.len(), 20);
    let mut waits = Vec::new();
    for vm in &vms {
        let client = client.clone();
        let vm = vm.clone();
        waits.push(tokio::spawn(async move {
            let task = client.task(client.vim().power_off_vm_task(&vm).await?);
            task.wait_timeout(std::time::Duration::from_secs(60)).await
        }));
    }
    for wait in waits {
        let info = wait.await.expect("join").expect("task");
        assert_eq!(info.state, TaskInfoState::Success);
    }
    assert_eq!(calls(&client, "CreatePropertyCollector"), 1);
    assert_eq!(
        calls(&client, "CreateFilter"),
        1,
        "{:?}",
        client.call_stats()
    );
    assert_eq!(calls(&client, "CreateListView"), 1);
    assert!(
        calls(&client, "WaitForUpdatesEx") < 20,
        "{:?}",
        client.call_stats()
    );

    // A later burst reuses the same collector and filter.
    let task = client.task(client.vim().power_on_vm_task(&vms[0], None).await.unwrap());
    task.wait().await.expect("power on");
    assert_eq!(calls(&client, "CreateFilter"), 1);
    // The new VM the clone task returns is its result.
    let folder = client
        .properties::<mo::VirtualMachine>(&["parent"])
        .unwrap()
        .get(&vms[0])
        .await
        .unwrap()
        .parent
        .expect("parent folder");
    let spec = vsphere_client::types::VirtualMachineCloneSpec::default();
    let clone = client.task(
        client
            .vim()
            .clone_vm_task(&vms[0], &folder, "clone-1", &spec)
            .await
            .unwrap(),
    );
    let info = clone.wait().await.expect("clone");
    let new_vm = task::task_result_reference(&info).expect("the clone's reference");
    assert_eq!(new_vm.type_, "VirtualMachine");
    assert_eq!(calls(&client, "CreateFilter"), 1);
}

#[tokio::test]
async fn a_wait_for_a_task_that_does_not_exist_fails() {
    let sim = simulator(SimulatorOptions::default()).await;
    let client = connect(&sim).await;
    let task = client.task(ManagedObjectReference::new("Task", "task-404"));
    let err = task
        .wait_timeout(std::time::Duration::from_secs(10))
        .await
        .expect_err("no such task");
    assert!(
        matches!(err.kind(), ErrorKind::NotFound | ErrorKind::Fault),
        "{err:?}"
    );
}

#[tokio::test]
async fn the_task_watcher_survives_a_lost_session() {
    let sim = simulator(SimulatorOptions {
        session_idle_timeout: Some(std::time::Duration::from_secs(1)),
        ..Default::default()
    })
    .await;
    let client = connect(&sim).await;
    let vms = vms(&client).await;
    let task = client.task(client.vim().power_off_vm_task(&vms[0]).await.unwrap());
    task.wait_timeout(std::time::Duration::from_secs(30))
        .await
        .expect("first wait");
    // The session (and the watcher's collector and view with it) expires.
    tokio::time::sleep(std::time::Duration::from_secs(3)).await;
    let task = client.task(client.vim().power_off_vm_task(&vms[1]).await.unwrap());
    let info = task
        .wait_timeout(std::time::Duration::from_secs(30))
        .await
        .expect("a wait after the session was renewed");
    assert_eq!(info.state, TaskInfoState::Success);
    assert!(calls(&client, "Login") >= 2);
    assert_eq!(
        calls(&client, "CreateFilter"),
        2,
        "made again once in the new session"
    );
}
