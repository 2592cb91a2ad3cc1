//! Runs one VMSnapshot: observe, [`step`], act, until there is nothing to
//! do but wait. The same code serves the provider role's controller,
//! `check --apply` and the tests; what differs is in [`Hooks`] (where the
//! status goes, events, crash points).

use std::future::Future;
use std::time::Duration;

use tracing::{debug, info};

use super::step::{self, operation, Action, Observation, Step};
use crate::api::{revert_state, TaskStatus, VMSnapshot};
use crate::conditions::{self, Observed, Status, READY};
use crate::vsphere::{Snapshots, TaskFacts};
use crate::Error;

/// Points where a test can stop the driver, as a crash would.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Checkpoint {
    /// `CreateSnapshot_Task` returned its task, not yet written to the status.
    CreateSent,
    /// The create's task reference is written to the status.
    TaskRecorded,
    /// `RevertToSnapshot_Task` returned its task, not yet written to the status.
    RevertSent,
}

/// Where the driver's effects go.
pub trait Hooks: Send {
    /// Persists the object's status. A failure stops the reconcile: nothing
    /// is done that the status does not record.
    fn persist(&mut self, snapshot: &VMSnapshot) -> impl Future<Output = Result<(), Error>> + Send;

    /// A step happened (for Kubernetes events and logs).
    fn event(
        &mut self,
        snapshot: &VMSnapshot,
        reason: &str,
        message: &str,
    ) -> impl Future<Output = ()> + Send {
        let _ = (snapshot, reason, message);
        async {}
    }

    /// Called at each [`Checkpoint`]; an error stops the driver there.
    fn checkpoint(&mut self, point: Checkpoint) -> Result<(), Error> {
        let _ = point;
        Ok(())
    }
}

/// Driver settings.
#[derive(Clone, Debug)]
pub struct Options {
    /// How long one task may run before the reconcile gives up waiting (the
    /// task goes on, recorded in the status; the next reconcile waits again).
    pub task_timeout: Duration,
    /// At most this many steps per reconcile (a guard against a loop).
    pub max_steps: usize,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            task_timeout: Duration::from_secs(30 * 60),
            max_steps: 12,
        }
    }
}

/// How a reconcile ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The snapshot exists (and any revert asked for is handled).
    Ready,
    /// Waiting for the VM to exist.
    Waiting(String),
    /// vCenter refused the snapshot: another task runs on the VM.
    Busy(String),
    /// Failed (the message says why); retried after a backoff.
    Failed(String),
    /// Deleting, and vCenter confirms the snapshot is gone.
    Released,
}

/// Runs the snapshot's lifecycle on the VM `vm` (`None`: it has none in
/// vCenter) until it is Ready, waits, failed, or (when `deleting`) the
/// snapshot is confirmed gone. `snapshot.status` is updated in place and
/// persisted through `hooks` before every action that depends on it.
pub async fn reconcile<S: Snapshots, H: Hooks>(
    snapshot: &mut VMSnapshot,
    deleting: bool,
    vm: Option<&str>,
    backend: &S,
    hooks: &mut H,
    options: &Options,
) -> Result<Outcome, Error> {
    let mut vm = vm.map(String::from);
    // The last task seen finishing, so it is not read again.
    let mut finished: Option<TaskFacts> = None;
    for _ in 0..options.max_steps {
        let observation = observe(snapshot, &mut vm, backend, finished.as_ref()).await?;
        let step = step::step(snapshot, &observation, deleting, &conditions::now());
        apply(snapshot, &step, hooks).await?;
        debug!(snapshot = %name(snapshot), action = ?step.action, reason = %step.ready.reason, "snapshot step");
        match step.action {
            Action::Idle => {
                return Ok(match step.ready.status {
                    Status::True => Outcome::Ready,
                    _ if step.ready.reason == step::reason::WAITING_FOR_VM => {
                        Outcome::Waiting(step.ready.message)
                    }
                    _ => Outcome::Failed(step.ready.message),
                })
            }
            Action::RemoveFinalizer => {
                hooks.event(snapshot, "Removed", &step.ready.message).await;
                return Ok(Outcome::Released);
            }
            Action::WaitTask(task) => {
                finished = Some(wait(backend, &task, options).await?);
            }
            Action::Create(on) => {
                let request = step::request(snapshot);
                let task = match backend.start_create_snapshot(&on, &request).await {
                    Ok(task) => task,
                    // vCenter runs one task at a time on a VM: perhaps our own
                    // request, sent before a restart, is still running.
                    Err(e) if e.is_fault("TaskInProgress") || e.is_fault("InvalidState") => {
                        info!(snapshot = %name(snapshot), error = %e, "snapshot refused while the VM is busy; will look again");
                        let message =
                            format!("{e}; looking for the snapshot again before asking again");
                        set_ready(snapshot, hooks, step::reason::VM_BUSY, &message).await?;
                        return Ok(Outcome::Busy(message));
                    }
                    Err(e) if e.is_not_found() => {
                        // The VM went away under us: the next look says so.
                        vm = None;
                        continue;
                    }
                    Err(e) if e.fault.is_some() => {
                        let message = format!("snapshotting {on}: {e}");
                        set_ready(snapshot, hooks, step::reason::FAILED, &message).await?;
                        return Ok(Outcome::Failed(message));
                    }
                    Err(e) => return Err(e.into()),
                };
                hooks.checkpoint(Checkpoint::CreateSent)?;
                record(snapshot, hooks, &task, operation::CREATE).await?;
                hooks
                    .event(
                        snapshot,
                        "Snapshotting",
                        &format!("snapshotting {on} as {:?} (task {task})", request.name),
                    )
                    .await;
                hooks.checkpoint(Checkpoint::TaskRecorded)?;
                finished = Some(settle(backend, &task, options).await?);
            }
            Action::Revert(to) => {
                // The request is in the status (persisted by `apply`) before it is sent.
                let task = match backend.start_revert_snapshot(&to).await {
                    Ok(task) => task,
                    Err(e) if e.fault.is_some() => {
                        if let Some(last) = snapshot
                            .status
                            .as_mut()
                            .and_then(|s| s.last_revert.as_mut())
                        {
                            last.state = revert_state::FAILED.into();
                            last.message = Some(e.to_string());
                        }
                        hooks.persist(snapshot).await?;
                        hooks.event(snapshot, "RevertFailed", &e.to_string()).await;
                        continue;
                    }
                    Err(e) => return Err(e.into()),
                };
                hooks.checkpoint(Checkpoint::RevertSent)?;
                record(snapshot, hooks, &task, operation::REVERT).await?;
                hooks
                    .event(
                        snapshot,
                        "Reverting",
                        &format!("reverting to {to} (task {task})"),
                    )
                    .await;
                finished = Some(settle(backend, &task, options).await?);
            }
            Action::Remove(which) => match backend.start_remove_snapshot(&which).await {
                Ok(task) => {
                    record(snapshot, hooks, &task, operation::REMOVE).await?;
                    hooks
                        .event(
                            snapshot,
                            "Removing",
                            &format!("removing {which} (task {task})"),
                        )
                        .await;
                    finished = Some(settle(backend, &task, options).await?);
                }
                // Gone already: the next look confirms it.
                Err(e) if e.is_not_found() => {}
                Err(e) => return Err(e.into()),
            },
        }
    }
    Ok(Outcome::Failed(format!(
        "no settled state after {} steps",
        options.max_steps
    )))
}

/// A task just started: one read (quick tasks are done by then), and a wait
/// only when it is still running.
async fn settle<S: Snapshots>(
    backend: &S,
    task: &str,
    options: &Options,
) -> Result<TaskFacts, Error> {
    match backend.task(task).await? {
        Some(facts) if !facts.state.in_progress() => Ok(facts),
        _ => wait(backend, task, options).await,
    }
}

async fn wait<S: Snapshots>(
    backend: &S,
    task: &str,
    options: &Options,
) -> Result<TaskFacts, Error> {
    Ok(backend
        .wait_task(task, options.task_timeout, |_| {})
        .await?)
}

fn name(snapshot: &VMSnapshot) -> String {
    format!(
        "{}/{}",
        snapshot.metadata.namespace.as_deref().unwrap_or_default(),
        snapshot.metadata.name.as_deref().unwrap_or_default()
    )
}

/// The VM's snapshots (fresh, from vCenter) and the recorded task (unless
/// it is the one just seen finishing). A VM gone is no VM from then on.
async fn observe<S: Snapshots>(
    snapshot: &VMSnapshot,
    vm: &mut Option<String>,
    backend: &S,
    finished: Option<&TaskFacts>,
) -> Result<Observation, Error> {
    let snapshots = match vm.as_deref() {
        Some(v) => backend.snapshots(v).await?,
        None => None,
    };
    if snapshots.is_none() {
        *vm = None;
    }
    let task = match snapshot.status.as_ref().and_then(|s| s.task.as_ref()) {
        None => None,
        Some(t) => match finished.filter(|f| f.mo_ref == t.mo_ref) {
            Some(f) => Some(f.clone()),
            None => backend.task(&t.mo_ref).await?,
        },
    };
    Ok(Observation {
        vm: vm.clone(),
        snapshots: snapshots.unwrap_or_default(),
        task,
    })
}

async fn apply<H: Hooks>(
    snapshot: &mut VMSnapshot,
    step: &Step,
    hooks: &mut H,
) -> Result<(), Error> {
    let changed = snapshot.status.as_ref() != Some(&step.status);
    snapshot.status = Some(step.status.clone());
    if changed {
        hooks.persist(snapshot).await?;
    }
    if step.transitioned {
        hooks
            .event(snapshot, &step.ready.reason, &step.ready.message)
            .await;
    }
    Ok(())
}

/// Records a started task in the status, and persists it before anything else.
async fn record<H: Hooks>(
    snapshot: &mut VMSnapshot,
    hooks: &mut H,
    task: &str,
    op: &str,
) -> Result<(), Error> {
    let status = snapshot.status.get_or_insert_with(Default::default);
    status.task = Some(TaskStatus {
        mo_ref: task.to_string(),
        progress: None,
        state: "running".into(),
        operation: Some(op.into()),
    });
    hooks.persist(snapshot).await
}

/// Sets `Ready=False` with `reason`, persisted when it changed (an event on
/// the transition).
pub async fn set_ready<H: Hooks>(
    snapshot: &mut VMSnapshot,
    hooks: &mut H,
    reason: &str,
    message: &str,
) -> Result<(), Error> {
    let before = snapshot.status.clone();
    let generation = snapshot.metadata.generation;
    let status = snapshot.status.get_or_insert_with(Default::default);
    let observed = Observed::new(READY, Status::False, reason, message.to_string());
    let transitioned = conditions::set(
        &mut status.conditions,
        observed,
        generation,
        &conditions::now(),
    );
    if snapshot.status != before {
        hooks.persist(snapshot).await?;
    }
    if transitioned {
        hooks.event(snapshot, reason, message).await;
    }
    Ok(())
}

// The driver against the mock: create, crashes at each step (a fresh
// driver from the last persisted status), revert, delete, faults.
#[cfg(test)]
mod tests {
    use super::{reconcile, Checkpoint, Hooks, Options, Outcome};
    use crate::api::{revert_state, VMSnapshot};
    use crate::controllers::vmsnapshot::step::{self, reason};
    use crate::vsphere;
    use crate::vsphere::mock::MockMachines;
    use crate::vsphere::{CloneRequest, Machines};
    use crate::Error;

    /// Persists like the API server would (the last written copy survives a
    /// crash), records events, and crashes at one checkpoint.
    #[derive(Default)]
    pub(crate) struct Store {
        pub persisted: Option<VMSnapshot>,
        pub events: Vec<String>,
        pub crash_at: Option<Checkpoint>,
    }

    impl Hooks for Store {
        async fn persist(&mut self, snapshot: &VMSnapshot) -> Result<(), Error> {
            self.persisted = Some(snapshot.clone());
            Ok(())
        }

        async fn event(&mut self, _snapshot: &VMSnapshot, reason: &str, _message: &str) {
            self.events.push(reason.to_string());
        }

        fn checkpoint(&mut self, point: Checkpoint) -> Result<(), Error> {
            if self.crash_at == Some(point) {
                return Err(Error::Stopped(format!("crashed at {point:?}")));
            }
            Ok(())
        }
    }

    /// A mock vCenter with one VM (`vm-N`, returned).
    async fn with_vm() -> (MockMachines, String) {
        let mock = MockMachines::new();
        let task = mock
            .start_clone(&CloneRequest {
                name: "web".into(),
                instance_uuid: "u".into(),
                ..Default::default()
            })
            .await
            .expect("clone");
        mock.finish(&task);
        let vm = mock.vms()[0].mo_ref.clone();
        (mock, vm)
    }

    async fn run(
        s: &mut VMSnapshot,
        deleting: bool,
        vm: &str,
        mock: &MockMachines,
        store: &mut Store,
    ) -> Result<Outcome, Error> {
        reconcile(s, deleting, Some(vm), mock, store, &Options::default()).await
    }

    fn ours(mock: &MockMachines, vm: &str, s: &VMSnapshot) -> Vec<String> {
        let marker = step::marker(s);
        mock.snapshots_of(vm)
            .iter()
            .filter(|f| step::is_ours(f, &marker))
            .map(|f| f.mo_ref.clone())
            .collect()
    }

    #[tokio::test]
    async fn create_is_ready_with_the_snapshot_id_and_a_rerun_takes_none() {
        let (mock, vm) = with_vm().await;
        let mut s = step::tests::snapshot("pre-upgrade");
        let mut store = Store::default();
        assert_eq!(
            run(&mut s, false, &vm, &mock, &mut store)
                .await
                .expect("create"),
            Outcome::Ready
        );
        let taken = ours(&mock, &vm, &s);
        assert_eq!(taken.len(), 1);
        let status = s.status.clone().unwrap_or_default();
        assert_eq!(status.snapshot_id.as_ref(), Some(&taken[0]));
        assert_eq!(status.vm_mo_ref.as_deref(), Some(vm.as_str()));
        assert!(status.creation_time.is_some() && status.size_bytes.is_some());
        assert!(status.task.is_none());
        assert!(
            store.events.iter().any(|e| e == reason::CREATED),
            "{:?}",
            store.events
        );
        assert_eq!(
            run(&mut s, false, &vm, &mock, &mut store)
                .await
                .expect("again"),
            Outcome::Ready
        );
        assert_eq!(mock.calls("createSnapshot"), 1);
    }

    /// A crash at `point`, then a fresh driver from what was persisted.
    async fn crash_and_restart(
        point: Checkpoint,
        vcenter_finishes_first: bool,
    ) -> (MockMachines, String) {
        let (mock, vm) = with_vm().await;
        let mut first = Store {
            crash_at: Some(point),
            ..Default::default()
        };
        let mut s = step::tests::snapshot("a");
        let err = run(&mut s, false, &vm, &mock, &mut first)
            .await
            .expect_err("crashed");
        assert!(err.to_string().contains("crashed"), "{err}");
        if vcenter_finishes_first {
            mock.finish_all();
        }
        let mut restarted = first
            .persisted
            .clone()
            .unwrap_or_else(|| step::tests::snapshot("a"));
        let mut second = Store::default();
        let mut outcome = run(&mut restarted, false, &vm, &mock, &mut second).await;
        if let Ok(Outcome::Busy(_)) = outcome {
            // The lost request still runs: vCenter refused a second one on
            // the VM. Once it is done, the next reconcile finds its snapshot.
            assert_eq!(
                restarted
                    .ready_condition()
                    .map(|c| c.reason.clone())
                    .as_deref(),
                Some(reason::VM_BUSY)
            );
            mock.finish_all();
            outcome = run(&mut restarted, false, &vm, &mock, &mut second).await;
        }
        assert_eq!(outcome.as_ref().ok(), Some(&Outcome::Ready), "{point:?}");
        assert_eq!(
            ours(&mock, &vm, &restarted).len(),
            1,
            "{point:?}: exactly one snapshot"
        );
        (mock, vm)
    }

    #[tokio::test]
    async fn a_crash_after_the_create_request_never_yields_two_snapshots() {
        let (mock, _) = crash_and_restart(Checkpoint::CreateSent, true).await;
        assert_eq!(
            mock.calls("createSnapshot"),
            1,
            "found by its marker, not taken again"
        );
        let (mock, vm) = crash_and_restart(Checkpoint::CreateSent, false).await;
        assert_eq!(mock.snapshots_of(&vm).len(), 1);
        assert_eq!(
            mock.calls("createSnapshot"),
            2,
            "the second request was refused"
        );
        let (mock, _) = crash_and_restart(Checkpoint::TaskRecorded, false).await;
        assert_eq!(
            mock.calls("createSnapshot"),
            1,
            "the recorded task is waited for"
        );
    }

    #[tokio::test]
    async fn a_revert_happens_once_per_request() {
        let (mock, vm) = with_vm().await;
        let mut s = step::tests::snapshot("a");
        let mut store = Store::default();
        // Asked for at creation: there is nothing to go back to yet.
        s.spec.revert_request = Some("r0".into());
        run(&mut s, false, &vm, &mock, &mut store)
            .await
            .expect("create");
        let last = |s: &VMSnapshot| {
            s.status
                .as_ref()
                .and_then(|x| x.last_revert.clone())
                .unwrap_or_default()
        };
        assert_eq!(last(&s).state, revert_state::SKIPPED);
        assert_eq!(mock.calls("revertSnapshot"), 0);
        // Someone takes another snapshot by hand, so ours is no longer current.
        mock.add_snapshot(&vm, "by-hand", "");
        s.spec.revert_request = Some("r1".into());
        for _ in 0..2 {
            assert_eq!(
                run(&mut s, false, &vm, &mock, &mut store)
                    .await
                    .expect("revert"),
                Outcome::Ready
            );
            assert_eq!(mock.calls("revertSnapshot"), 1, "once for r1");
        }
        assert_eq!(
            (last(&s).request.as_str(), last(&s).state.as_str()),
            ("r1", revert_state::REVERTED)
        );
        let id = s.status.as_ref().and_then(|x| x.snapshot_id.clone());
        let current: Vec<String> = mock
            .snapshots_of(&vm)
            .into_iter()
            .filter(|f| f.current)
            .map(|f| f.mo_ref)
            .collect();
        assert_eq!(
            Some(current),
            id.map(|i| vec![i]),
            "the VM runs from our snapshot"
        );
        s.spec.revert_request = Some("r2".into());
        run(&mut s, false, &vm, &mock, &mut store)
            .await
            .expect("again");
        assert_eq!(mock.calls("revertSnapshot"), 2, "a new value reverts again");
        assert!(
            store.events.iter().any(|e| e == "Reverting"),
            "{:?}",
            store.events
        );
    }

    #[tokio::test]
    async fn a_crash_while_sending_a_revert_never_reverts_twice() {
        let (mock, vm) = with_vm().await;
        let mut s = step::tests::snapshot("a");
        run(&mut s, false, &vm, &mock, &mut Store::default())
            .await
            .expect("create");
        s.spec.revert_request = Some("r1".into());
        let mut first = Store {
            crash_at: Some(Checkpoint::RevertSent),
            ..Default::default()
        };
        run(&mut s, false, &vm, &mock, &mut first)
            .await
            .expect_err("crashed");
        let mut restarted = first
            .persisted
            .clone()
            .expect("the request was persisted first");
        restarted.spec.revert_request = Some("r1".into());
        assert_eq!(
            run(&mut restarted, false, &vm, &mock, &mut Store::default())
                .await
                .expect("restart"),
            Outcome::Ready
        );
        assert_eq!(mock.calls("revertSnapshot"), 1);
        let last = restarted
            .status
            .and_then(|x| x.last_revert)
            .unwrap_or_default();
        assert_eq!(
            (last.request.as_str(), last.state.as_str()),
            ("r1", revert_state::UNKNOWN)
        );
    }

    #[tokio::test]
    async fn delete_removes_ours_and_leaves_a_hand_made_one() {
        let (mock, vm) = with_vm().await;
        let hand_made = mock.add_snapshot(&vm, "a", "made by hand");
        let mut s = step::tests::snapshot("a");
        let mut store = Store::default();
        run(&mut s, false, &vm, &mock, &mut store)
            .await
            .expect("create");
        assert_eq!(mock.snapshots_of(&vm).len(), 2);
        assert_eq!(
            run(&mut s, true, &vm, &mock, &mut store)
                .await
                .expect("delete"),
            Outcome::Released
        );
        let left: Vec<String> = mock
            .snapshots_of(&vm)
            .into_iter()
            .map(|f| f.mo_ref)
            .collect();
        assert_eq!(left, [hand_made]);
        assert_eq!(mock.calls("removeSnapshot"), 1);
    }

    #[tokio::test]
    async fn a_fault_on_delete_keeps_the_snapshot_and_a_retry_removes_it() {
        let (mock, vm) = with_vm().await;
        let mut s = step::tests::snapshot("a");
        let mut store = Store::default();
        run(&mut s, false, &vm, &mock, &mut store)
            .await
            .expect("create");
        for (operation, fault) in [
            ("removeSnapshot", "NotAuthenticated"),
            ("snapshots", "RequestTimeout"),
        ] {
            mock.fail_next(operation, vsphere::Error::fault(fault, "injected"));
            let result = run(&mut s, true, &vm, &mock, &mut store).await;
            assert!(
                !matches!(result, Ok(Outcome::Released)),
                "{operation}: {result:?}"
            );
            assert_eq!(ours(&mock, &vm, &s).len(), 1, "{operation}: still there");
        }
        assert_eq!(
            run(&mut s, true, &vm, &mock, &mut store)
                .await
                .expect("retry"),
            Outcome::Released
        );
        assert!(mock.snapshots_of(&vm).is_empty());
    }

    #[tokio::test]
    async fn a_vm_not_there_waits_and_a_deleted_vm_releases() {
        let mock = MockMachines::new();
        let mut s = step::tests::snapshot("a");
        let mut store = Store::default();
        let outcome = reconcile(&mut s, false, None, &mock, &mut store, &Options::default()).await;
        assert!(matches!(outcome, Ok(Outcome::Waiting(_))), "{outcome:?}");
        assert_eq!(
            s.ready_condition().map(|c| c.reason.clone()).as_deref(),
            Some(reason::WAITING_FOR_VM)
        );
        // A VM reference that vCenter no longer knows: gone, with its snapshots.
        let outcome = reconcile(
            &mut s,
            true,
            Some("vm-404"),
            &mock,
            &mut store,
            &Options::default(),
        )
        .await;
        assert_eq!(outcome.expect("released"), Outcome::Released);
    }
}
