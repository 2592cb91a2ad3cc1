//! The driver against the mock: the whole lifecycle, crashes at each step
//! (a fresh driver from the last persisted status), deletes that meet faults.

use super::driver::{reconcile, Checkpoint, Hooks, Options, Outcome};
use super::step::reason;
use super::testing::machine;
use crate::api::{PowerState, VSphereMachine};
use crate::conditions;
use crate::vsphere;
use crate::vsphere::mock::MockMachines;

/// Persists like the API server would (the last written copy survives a
/// crash), records events, and crashes at one checkpoint.
#[derive(Default)]
struct Store {
    persisted: Option<VSphereMachine>,
    writes: usize,
    events: Vec<String>,
    crash_at: Option<Checkpoint>,
    fail_writes: bool,
}

impl Hooks for Store {
    async fn persist(&mut self, machine: &VSphereMachine) -> Result<(), vsphere::Error> {
        if self.fail_writes {
            return Err(vsphere::Error::operation("API server unavailable"));
        }
        self.writes += 1;
        self.persisted = Some(machine.clone());
        Ok(())
    }

    async fn event(&mut self, _machine: &VSphereMachine, reason: &str, _message: &str) {
        self.events.push(reason.to_string());
    }

    fn checkpoint(&mut self, point: Checkpoint) -> Result<(), vsphere::Error> {
        if self.crash_at == Some(point) {
            return Err(vsphere::Error::operation(format!("crashed at {point:?}")));
        }
        Ok(())
    }
}

async fn run(
    m: &mut VSphereMachine,
    deleting: bool,
    mock: &MockMachines,
    store: &mut Store,
) -> Result<Outcome, vsphere::Error> {
    reconcile(m, deleting, &[], mock, store, &Options::default()).await
}

fn ready_reason(m: &VSphereMachine) -> String {
    m.status
        .as_ref()
        .and_then(|s| conditions::find(&s.conditions, conditions::READY))
        .map(|c| c.reason.clone())
        .unwrap_or_default()
}

#[tokio::test]
async fn clone_power_on_wait_for_ip_then_ready() {
    let mock = MockMachines::new();
    mock.clone_ignores_shape(true);
    let mut m = machine("web");
    let mut store = Store::default();
    let outcome = run(&mut m, false, &mock, &mut store)
        .await
        .expect("reconcile");
    assert!(matches!(outcome, Outcome::Waiting(_)), "{outcome:?}");
    assert_eq!(ready_reason(&m), reason::WAITING_FOR_IP);
    let vms = mock.vms();
    assert_eq!(vms.len(), 1);
    assert_eq!(
        (vms[0].cpus, vms[0].memory_mib, vms[0].power_state.as_str()),
        (2, 2048, "poweredOn"),
        "reconfigured, then on"
    );
    assert_eq!(
        (
            mock.calls("clone"),
            mock.calls("reconfigure"),
            mock.calls("powerOn")
        ),
        (1, 1, 1)
    );
    for step in [reason::CLONING, reason::RECONFIGURING, reason::POWERING_ON] {
        assert!(
            store.events.iter().any(|e| e == step),
            "event {step} in {:?}",
            store.events
        );
    }

    mock.set_ip(&vms[0].mo_ref, "10.0.0.7");
    let outcome = run(&mut m, false, &mock, &mut store)
        .await
        .expect("reconcile");
    assert_eq!(outcome, Outcome::Ready);
    let status = m.status.clone().unwrap_or_default();
    assert_eq!(status.ip_addresses, vec!["10.0.0.7"]);
    assert_eq!(status.mo_ref.as_deref(), Some(vms[0].mo_ref.as_str()));
    assert_eq!(
        status.instance_uuid.as_deref(),
        Some(vms[0].instance_uuid.as_str())
    );
    assert!(status.provisioned && status.task.is_none());
    assert!(status
        .console_url
        .as_deref()
        .is_some_and(|u| u.contains(&vms[0].mo_ref)));
    let writes = store.writes;
    assert_eq!(
        run(&mut m, false, &mock, &mut store).await.expect("again"),
        Outcome::Ready
    );
    assert_eq!(store.writes, writes, "no status write when nothing changed");
    assert_eq!(mock.calls("clone"), 1);
}

/// With an update stream, "no such VM" is still vCenter's answer (the cache
/// only ever says "here it is"), so a new machine costs one look-up by
/// instance UUID before its clone, not two.
#[tokio::test]
async fn a_new_machine_is_looked_up_once_before_its_clone() {
    let mock = MockMachines::new();
    mock.stream_cache(true);
    let mut m = machine("web");
    m.spec.guest_agent = Some("none".into());
    let mut store = Store::default();
    // The second reconcile is a resync of the Ready machine: no look-up at all.
    for round in ["create", "resync"] {
        assert_eq!(
            run(&mut m, false, &mock, &mut store).await.expect(round),
            Outcome::Ready
        );
        assert_eq!((mock.calls("find"), mock.calls("clone")), (1, 1), "{round}");
    }
}

#[tokio::test]
async fn power_off_and_on_again() {
    let mock = MockMachines::new();
    let mut m = machine("web");
    m.spec.guest_agent = Some("none".into());
    let mut store = Store::default();
    assert_eq!(
        run(&mut m, false, &mock, &mut store).await.expect("create"),
        Outcome::Ready
    );
    m.spec.desired_power_state = PowerState::PoweredOff;
    assert_eq!(
        run(&mut m, false, &mock, &mut store).await.expect("off"),
        Outcome::Ready
    );
    assert_eq!(mock.vms()[0].power_state, "poweredOff");
    assert_eq!(
        m.status
            .as_ref()
            .and_then(|s| s.power_state.clone())
            .as_deref(),
        Some("PoweredOff")
    );
    m.spec.desired_power_state = PowerState::PoweredOn;
    assert_eq!(
        run(&mut m, false, &mock, &mut store).await.expect("on"),
        Outcome::Ready
    );
    assert_eq!(mock.vms()[0].power_state, "poweredOn");
    assert_eq!(
        (
            mock.calls("clone"),
            mock.calls("powerOn"),
            mock.calls("powerOff")
        ),
        (1, 2, 1)
    );
}

/// A crash at `point`, then a fresh driver from what was persisted.
async fn crash_and_restart(point: Checkpoint, vcenter_finishes_first: bool) -> MockMachines {
    let mock = MockMachines::new();
    let mut first = Store {
        crash_at: Some(point),
        ..Default::default()
    };
    let mut m = machine("web");
    m.spec.guest_agent = Some("none".into());
    let err = run(&mut m, false, &mock, &mut first)
        .await
        .expect_err("crashed");
    assert!(err.message.contains("crashed"), "{err}");
    if vcenter_finishes_first {
        mock.finish_all();
    }
    // The new process knows only what the API server kept.
    let mut restarted = first.persisted.clone().unwrap_or_else(|| machine("web"));
    restarted.spec.guest_agent = Some("none".into());
    let mut second = Store::default();
    let mut outcome = run(&mut restarted, false, &mock, &mut second).await;
    if !matches!(outcome, Ok(Outcome::Ready)) {
        // The lost clone was still running and the retry was refused as a
        // duplicate: once vCenter finishes it, the next reconcile adopts it.
        mock.finish_all();
        outcome = run(&mut restarted, false, &mock, &mut second).await;
    }
    assert_eq!(outcome, Ok(Outcome::Ready), "{point:?}");
    assert_eq!(mock.vms().len(), 1, "{point:?}: exactly one VM");
    mock
}

#[tokio::test]
async fn crash_after_the_clone_request_is_sent_never_clones_twice() {
    let mock = crash_and_restart(Checkpoint::CloneSent, true).await;
    assert_eq!(
        mock.calls("clone"),
        1,
        "found by instance UUID, not cloned again"
    );
    // Restarted while the lost clone is still running: the second request is
    // refused by name, and the first VM is adopted.
    let mock = crash_and_restart(Checkpoint::CloneSent, false).await;
    assert_eq!(mock.vms().len(), 1);
}

#[tokio::test]
async fn crash_after_the_task_ref_is_written_waits_for_that_task() {
    let mock = crash_and_restart(Checkpoint::TaskRecorded, false).await;
    assert_eq!(
        mock.calls("clone"),
        1,
        "the recorded clone is waited for, not repeated"
    );
}

#[tokio::test]
async fn crash_after_power_on_does_not_power_on_or_clone_again() {
    let mock = crash_and_restart(Checkpoint::PoweredOn, false).await;
    assert_eq!((mock.calls("clone"), mock.calls("powerOn")), (1, 1));
}

#[tokio::test]
async fn a_status_that_cannot_be_written_stops_before_the_clone_is_waited_for() {
    let mock = MockMachines::new();
    let mut m = machine("web");
    let mut store = Store {
        fail_writes: true,
        ..Default::default()
    };
    assert!(run(&mut m, false, &mock, &mut store).await.is_err());
    assert_eq!(
        mock.calls("clone"),
        0,
        "nothing is started that the status cannot record"
    );
}

#[tokio::test]
async fn delete_powers_off_destroys_and_releases() {
    let mock = MockMachines::new();
    let mut m = machine("web");
    m.spec.guest_agent = Some("none".into());
    let mut store = Store::default();
    run(&mut m, false, &mock, &mut store).await.expect("create");
    assert_eq!(
        run(&mut m, true, &mock, &mut store).await.expect("delete"),
        Outcome::Released
    );
    assert!(mock.vms().is_empty());
    assert_eq!((mock.calls("powerOff"), mock.calls("destroy")), (1, 1));
}

#[tokio::test]
async fn a_delete_that_meets_a_fault_keeps_the_machine_and_a_retry_finishes() {
    let mock = MockMachines::new();
    let mut m = machine("web");
    m.spec.guest_agent = Some("none".into());
    let mut store = Store::default();
    run(&mut m, false, &mock, &mut store).await.expect("create");
    for (operation, fault) in [
        ("powerOff", "TaskInProgress"),
        ("destroy", "NotAuthenticated"),
        ("vm", "RequestTimeout"),
    ] {
        mock.fail_next(operation, vsphere::Error::fault(fault, "injected"));
        let result = run(&mut m, true, &mock, &mut store).await;
        assert!(
            !matches!(result, Ok(Outcome::Released)),
            "{operation} {fault}: {result:?}"
        );
        assert_eq!(mock.vms().len(), 1, "{operation}: the VM is still there");
    }
    assert_eq!(
        run(&mut m, true, &mock, &mut store).await.expect("retry"),
        Outcome::Released
    );
    assert!(mock.vms().is_empty());
}

#[tokio::test]
async fn a_delete_during_a_running_clone_waits_for_it_then_destroys() {
    let mock = MockMachines::new();
    let mut m = machine("web");
    let mut store = Store {
        crash_at: Some(Checkpoint::TaskRecorded),
        ..Default::default()
    };
    run(&mut m, false, &mock, &mut store)
        .await
        .expect_err("stopped with the clone running");
    let mut deleting = store.persisted.clone().expect("persisted");
    assert!(deleting
        .status
        .as_ref()
        .and_then(|s| s.task.as_ref())
        .is_some());
    let outcome = run(&mut deleting, true, &mock, &mut Store::default())
        .await
        .expect("delete");
    assert_eq!(outcome, Outcome::Released);
    assert_eq!(mock.calls("clone"), 1);
    assert_eq!(
        mock.calls("destroy"),
        1,
        "the clone finished, then was destroyed"
    );
    assert!(mock.vms().is_empty());
}

#[tokio::test]
async fn a_failed_clone_reports_the_fault_then_retries() {
    let mock = MockMachines::new();
    let mut m = machine("web");
    m.spec.guest_agent = Some("none".into());
    let mut store = Store::default();
    mock.fail_next(
        "clone",
        vsphere::Error::fault("NotFound", "template golden not found"),
    );
    let outcome = run(&mut m, false, &mock, &mut store)
        .await
        .expect("reconcile");
    assert!(
        matches!(&outcome, Outcome::Failed(msg) if msg.contains("golden")),
        "{outcome:?}"
    );
    assert_eq!(ready_reason(&m), reason::FAILED);
    assert_eq!(
        run(&mut m, false, &mock, &mut store).await.expect("retry"),
        Outcome::Ready
    );
    assert_eq!(mock.vms().len(), 1);
}

#[derive(Default)]
struct Progress {
    seen: Vec<(String, Option<i32>)>,
}

impl Hooks for Progress {
    async fn persist(&mut self, machine: &VSphereMachine) -> Result<(), vsphere::Error> {
        if let Some(t) = machine.status.as_ref().and_then(|s| s.task.as_ref()) {
            self.seen.push((t.state.clone(), t.progress));
        }
        Ok(())
    }
}

#[tokio::test]
async fn a_long_task_writes_its_progress_while_it_runs() {
    let mock = MockMachines::new();
    mock.slow_waits(2);
    let mut m = machine("web");
    m.spec.guest_agent = Some("none".into());
    let mut hooks = Progress::default();
    let options = Options {
        progress_interval: std::time::Duration::from_millis(10),
        ..Options::default()
    };
    let outcome = reconcile(&mut m, false, &[], &mock, &mut hooks, &options)
        .await
        .expect("reconcile");
    assert_eq!(outcome, Outcome::Ready);
    assert!(
        hooks.seen.contains(&("running".to_string(), Some(30))),
        "{:?}",
        hooks.seen
    );
    assert!(
        hooks.seen.contains(&("running".to_string(), Some(60))),
        "{:?}",
        hooks.seen
    );
    assert_eq!(
        mock.calls("clone"),
        1,
        "a slow clone is waited for, not repeated"
    );
}
