//! Runs the lifecycle of one VSphereMachine: observe, [`step`], act, until
//! there is nothing to do but wait for vCenter or the guest. The same code
//! serves the provider role's controller, `check --apply` and the tests; what
//! differs is in [`Hooks`] (where the status goes, events, crash points).

use std::future::Future;
use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use tracing::{debug, info};

use super::identity;
use super::request::clone_request;
use super::step::{self, operation, Action, Observation, Step};
use crate::api::{PlacementStatus, TaskStatus, VSphereMachine};
use crate::vsphere::{CloneRequest, Machines, Placement, TaskFacts, TaskState};
use crate::Error;

/// Points where a test can stop the driver, as a crash would.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Checkpoint {
    /// `CloneVM_Task` returned its task, not yet written to the status.
    CloneSent,
    /// The clone's task reference is written to the status.
    TaskRecorded,
    /// A power-on task finished.
    PoweredOn,
    /// A resize or disk change request (`ReconfigVM_Task`) returned its
    /// task, not yet written to the status (the change itself is recorded
    /// before it is sent).
    ResizeSent,
    /// The resize's or disk change's task reference is written to the status.
    ResizeRecorded,
}

/// Where the driver's effects go.
pub trait Hooks: Send {
    /// Persists the machine's status (the caller may skip an unchanged one).
    /// A failure stops the reconcile: nothing is done that the status does not record.
    fn persist(
        &mut self,
        machine: &VSphereMachine,
    ) -> impl Future<Output = Result<(), Error>> + Send;

    /// A lifecycle step happened (for Kubernetes events and logs).
    fn event(
        &mut self,
        machine: &VSphereMachine,
        reason: &str,
        message: &str,
    ) -> impl Future<Output = ()> + Send {
        let _ = (machine, reason, message);
        async {}
    }

    /// A task is being waited for (+1) or no longer (-1).
    fn tasks_in_flight(&mut self, delta: i64) {
        let _ = delta;
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
    /// Guest shutdown time before a hard power-off.
    pub guest_shutdown_timeout: Duration,
    /// At most this many steps per reconcile (a guard against a loop).
    pub max_steps: usize,
    /// While waiting for a task, its progress goes to the status this often.
    pub progress_interval: Duration,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            task_timeout: Duration::from_secs(30 * 60),
            guest_shutdown_timeout: step::GUEST_SHUTDOWN_TIMEOUT,
            max_steps: 16,
            progress_interval: Duration::from_secs(30),
        }
    }
}

/// How a reconcile ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Ready (as asked: on, or off).
    Ready,
    /// Waiting for something vCenter or the guest will report (an IP).
    Waiting(String),
    /// Failed with the vSphere fault; retried after a backoff.
    Failed(String),
    /// Deleting, and the VM is confirmed gone: the finalizer may go.
    Released,
}

/// Runs the machine's lifecycle until it is Ready, waits on the guest, failed,
/// or (when `deleting`) the VM is gone. `machine.status` is updated in place
/// and persisted through `hooks` before every action that depends on it.
pub async fn reconcile<M: Machines, H: Hooks>(
    machine: &mut VSphereMachine,
    deleting: bool,
    secrets: &[Secret],
    backend: &M,
    hooks: &mut H,
    options: &Options,
) -> Result<Outcome, Error> {
    let uuid = identity::instance_uuid(machine);
    let server = backend.server();
    // The last task we saw finish, so it is not read again.
    let mut finished: Option<TaskFacts> = None;
    // The first look may come from the update stream's cache; after an
    // action of ours, only vCenter itself knows its effect for sure.
    let mut fresh = false;
    for _ in 0..options.max_steps {
        let (observation, authoritative) =
            observe(machine, &uuid, backend, finished.as_ref(), fresh).await?;
        fresh = true;
        let step = step::step(
            machine,
            &observation,
            deleting,
            &server,
            &crate::conditions::now(),
        );
        apply(machine, &step, hooks).await?;
        debug!(machine = %name(machine), action = ?step.action, reason = %step.ready.reason, "lifecycle step");
        match step.action {
            Action::Idle => {
                return Ok(match step.ready.status {
                    crate::conditions::Status::True => Outcome::Ready,
                    _ if step.failed() => Outcome::Failed(step.ready.message),
                    _ => Outcome::Waiting(step.ready.message),
                })
            }
            Action::RemoveFinalizer => {
                // Gone by an update stream is not enough: vCenter must say so.
                if authoritative || backend.find_vm(&uuid, true).await?.is_none() {
                    hooks.event(machine, "Destroyed", "the VM is gone").await;
                    return Ok(Outcome::Released);
                }
            }
            Action::WaitTask(task) => {
                // Seen running just now: wait for it, without reading it again first.
                hooks.tasks_in_flight(1);
                let waited = wait(machine, backend, hooks, &task, options).await;
                hooks.tasks_in_flight(-1);
                finished = Some(waited?);
            }
            Action::Clone => {
                // The one action that must never be repeated: vCenter itself
                // must say that no VM has this instance UUID.
                if !authoritative && backend.find_vm(&uuid, true).await?.is_some() {
                    continue;
                }
                let request = match clone_request(machine, secrets) {
                    Ok(r) => r,
                    Err(message) => return fail(machine, hooks, message).await,
                };
                let request = match place(machine, backend, hooks, request).await? {
                    Ok(request) => request,
                    Err(outcome) => return Ok(outcome),
                };
                let task = match backend.start_clone(&request).await {
                    Ok(task) => task,
                    // Its twin exists, or a lost request was carried out after all:
                    // the next look-up by instance UUID finds it.
                    Err(e) if e.is_fault("DuplicateName") || e.is_fault("FileAlreadyExists") => {
                        info!(machine = %name(machine), error = %e, "clone refused as a duplicate; will look the VM up again");
                        return Ok(Outcome::Waiting(format!(
                            "a VM named {} exists or is being made (a clone sent before?); waiting to find it by instance UUID {uuid}",
                            request.name
                        )));
                    }
                    Err(e) if e.is_fault("NotFound") || e.is_fault("InvalidArgument") => {
                        return fail(machine, hooks, e.to_string()).await
                    }
                    Err(e) => return Err(e.into()),
                };
                hooks.checkpoint(Checkpoint::CloneSent)?;
                record(machine, hooks, &task, operation::CLONE).await?;
                hooks
                    .event(
                        machine,
                        "Cloning",
                        &format!(
                            "cloning {} as {} (task {task})",
                            request.template_name, request.name
                        ),
                    )
                    .await;
                hooks.checkpoint(Checkpoint::TaskRecorded)?;
                finished = Some(settle(machine, backend, hooks, &task, options).await?);
            }
            Action::Reconfigure(vm) => {
                let shape = step::configured_shape(machine);
                let task = backend.start_reconfigure(&vm, &shape).await?;
                record(machine, hooks, &task, operation::RECONFIGURE).await?;
                hooks
                    .event(
                        machine,
                        "Reconfiguring",
                        &format!(
                            "setting {} CPUs and {} MiB on {vm}",
                            shape.cpus, shape.memory_mib
                        ),
                    )
                    .await;
                finished = Some(settle(machine, backend, hooks, &task, options).await?);
            }
            Action::Resize { vm, resize } => {
                // The change is in the status already (`apply` wrote it).
                let task = backend.start_resize(&vm, &resize).await?;
                hooks.checkpoint(Checkpoint::ResizeSent)?;
                record(machine, hooks, &task, operation::RESIZE).await?;
                hooks
                    .event(
                        machine,
                        "Resizing",
                        &format!(
                            "setting {} CPUs and {} MiB on {vm} (task {task})",
                            resize.cpus, resize.memory_mib
                        ),
                    )
                    .await;
                hooks.checkpoint(Checkpoint::ResizeRecorded)?;
                finished = Some(settle(machine, backend, hooks, &task, options).await?);
            }
            Action::Disks { vm, changes } => {
                // Added disks are in the status already (`apply` wrote them).
                let task = backend.start_disks(&vm, &changes).await?;
                hooks.checkpoint(Checkpoint::ResizeSent)?;
                record(machine, hooks, &task, operation::DISKS).await?;
                hooks
                    .event(
                        machine,
                        "ChangingDisks",
                        &format!(
                            "growing {} and adding {} disk(s) on {vm} (task {task})",
                            changes.grow.len(),
                            changes.add.len()
                        ),
                    )
                    .await;
                hooks.checkpoint(Checkpoint::ResizeRecorded)?;
                finished = Some(settle(machine, backend, hooks, &task, options).await?);
            }
            Action::PowerOn(vm) => {
                let task = backend.start_power_on(&vm).await?;
                record(machine, hooks, &task, operation::POWER_ON).await?;
                hooks
                    .event(machine, "PoweringOn", &format!("powering {vm} on"))
                    .await;
                let done = settle(machine, backend, hooks, &task, options).await?;
                let succeeded = done.state == TaskState::Success;
                finished = Some(done);
                if succeeded {
                    hooks.checkpoint(Checkpoint::PoweredOn)?;
                }
            }
            Action::PowerOff { vm, graceful } => {
                hooks
                    .event(machine, "PoweringOff", &format!("powering {vm} off"))
                    .await;
                backend
                    .power_off(&vm, graceful.then_some(options.guest_shutdown_timeout))
                    .await?;
            }
            Action::Destroy(vm) => match backend.start_destroy(&vm).await {
                Ok(task) => {
                    record(machine, hooks, &task, operation::DESTROY).await?;
                    hooks
                        .event(machine, "Destroying", &format!("destroying {vm}"))
                        .await;
                    finished = Some(settle(machine, backend, hooks, &task, options).await?);
                }
                Err(e) if e.is_not_found() => {}
                Err(e) => return Err(e.into()),
            },
        }
    }
    Ok(Outcome::Waiting(format!(
        "no settled state after {} steps",
        options.max_steps
    )))
}

/// A task just started: one read (quick tasks are done by then), and a
/// wait through the shared task filter only when it is still running.
async fn settle<M: Machines, H: Hooks>(
    machine: &mut VSphereMachine,
    backend: &M,
    hooks: &mut H,
    task: &str,
    options: &Options,
) -> Result<TaskFacts, Error> {
    hooks.tasks_in_flight(1);
    let result = match backend.task(task).await {
        Ok(Some(facts)) if !facts.state.in_progress() => Ok(facts),
        Ok(_) => wait(machine, backend, hooks, task, options).await,
        Err(e) => Err(e.into()),
    };
    hooks.tasks_in_flight(-1);
    result
}

/// Waits for a task through the shared task filter, writing its progress to
/// the status every `progress_interval`, up to `task_timeout` in all.
async fn wait<M: Machines, H: Hooks>(
    machine: &mut VSphereMachine,
    backend: &M,
    hooks: &mut H,
    task: &str,
    options: &Options,
) -> Result<TaskFacts, Error> {
    let deadline = tokio::time::Instant::now() + options.task_timeout;
    loop {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        let mut latest: Option<TaskFacts> = None;
        match backend
            .wait_task(task, options.progress_interval.min(left), |f| {
                latest = Some(f.clone())
            })
            .await
        {
            Err(e) if e.timed_out() && !left.is_zero() && left > options.progress_interval => {
                let progress = latest.map(|f| (f.state, f.progress));
                let recorded = machine
                    .status
                    .as_mut()
                    .and_then(|s| s.task.as_mut())
                    .filter(|t| t.mo_ref == task);
                if let (Some(t), Some((state, pct))) = (recorded, progress) {
                    if t.progress != pct || t.state != state.as_str() {
                        t.progress = pct;
                        t.state = state.as_str().to_string();
                        hooks.persist(machine).await?;
                    }
                }
            }
            other => return other.map_err(Error::from),
        }
    }
}

fn name(machine: &VSphereMachine) -> String {
    format!(
        "{}/{}",
        machine.metadata.namespace.as_deref().unwrap_or_default(),
        machine.metadata.name.as_deref().unwrap_or_default()
    )
}

/// The VM (by its recorded reference when there is one: one read; by
/// instance UUID otherwise) and the recorded task (unless it is the one
/// just seen finishing). Also whether the answer came from vCenter itself.
async fn observe<M: Machines>(
    machine: &VSphereMachine,
    uuid: &str,
    backend: &M,
    finished: Option<&TaskFacts>,
    fresh: bool,
) -> Result<(Observation, bool), Error> {
    let status = machine.status.as_ref();
    // A clone just finished names its VM in its result.
    let known = status
        .and_then(|s| s.mo_ref.as_deref())
        .or_else(|| finished.and_then(|f| f.result.as_deref()));
    let by_ref = match known {
        Some(mo_ref) => backend
            .vm(mo_ref, fresh)
            .await?
            .filter(|vm| vm.instance_uuid.eq_ignore_ascii_case(uuid)),
        None => None,
    };
    let vm = match by_ref {
        Some(vm) => Some(vm),
        None => backend.find_vm(uuid, fresh).await?,
    };
    // A cache only ever says "here it is": "no such VM" is vCenter's answer.
    let authoritative = fresh || !backend.cached() || vm.is_none();
    let task = match status.and_then(|s| s.task.as_ref()) {
        None => None,
        Some(t) => match finished.filter(|f| f.mo_ref == t.mo_ref) {
            Some(f) => Some(f.clone()),
            None => backend.task(&t.mo_ref).await?,
        },
    };
    Ok((Observation { vm, task }, authoritative))
}

async fn apply<H: Hooks>(
    machine: &mut VSphereMachine,
    step: &Step,
    hooks: &mut H,
) -> Result<(), Error> {
    let changed = machine.status.as_ref() != Some(&step.status);
    machine.status = Some(step.status.clone());
    if changed {
        hooks.persist(machine).await?;
    }
    if step.transitioned {
        hooks
            .event(machine, &step.ready.reason, &step.ready.message)
            .await;
    }
    if let Some((reconfigured, true)) = &step.reconfigured {
        hooks
            .event(machine, &reconfigured.reason, &reconfigured.message)
            .await;
    }
    Ok(())
}

/// Records a started task in the status, and persists it before anything else.
async fn record<H: Hooks>(
    machine: &mut VSphereMachine,
    hooks: &mut H,
    task: &str,
    op: &str,
) -> Result<(), Error> {
    let status = machine.status.get_or_insert_with(Default::default);
    status.task = Some(TaskStatus {
        mo_ref: task.to_string(),
        progress: None,
        state: "running".into(),
        operation: Some(op.into()),
    });
    hooks.persist(machine).await
}

/// The `Ready` condition of a machine whose reconcile ended on `error`:
/// `VCenterUnresponsive` when vCenter did not answer within the Provider's
/// call deadline, `Failed` for anything else.
pub fn error_condition(error: &Error) -> crate::conditions::Observed {
    let (reason, message) = match error {
        Error::VSphere(e) if e.unresponsive() => {
            (step::reason::VCENTER_UNRESPONSIVE, error.to_string())
        }
        Error::ProviderNotFound(provider) => (
            step::reason::PROVIDER_NOT_FOUND,
            format!(
                "Provider {provider} not found: its VM cannot be reached in vCenter. Recreate the \
                 Provider (same namespace and name) and the machine goes on; or, to leave the VM \
                 in vCenter, remove the finalizer {}",
                super::FINALIZER
            ),
        ),
        _ => (step::reason::FAILED, error.to_string()),
    };
    crate::conditions::Observed::new(
        crate::conditions::READY,
        crate::conditions::Status::False,
        reason,
        message,
    )
}

/// Records `error` in the machine's `Ready` condition and persists it (an
/// event on the transition); a status that cannot be written is logged, as
/// the reconcile fails with `error` anyway.
pub async fn report_error<H: Hooks>(machine: &mut VSphereMachine, hooks: &mut H, error: &Error) {
    let observed = error_condition(error);
    let (reason, message) = (observed.reason.clone(), observed.message.clone());
    let status = machine.status.get_or_insert_with(Default::default);
    let transitioned = crate::conditions::set(
        &mut status.conditions,
        observed,
        machine.metadata.generation,
        &crate::conditions::now(),
    );
    if let Err(e) = hooks.persist(machine).await {
        tracing::warn!(machine = %name(machine), error = %e, "could not record the reconcile's error in the status");
        return;
    }
    if transitioned {
        hooks.event(machine, &reason, &message).await;
    }
}

/// The machine waits for something outside vCenter (an IP pool's address):
/// `Ready=False` with `reason` and `message`, persisted when it changed, an
/// event on the transition.
pub async fn report_waiting<H: Hooks>(
    machine: &mut VSphereMachine,
    hooks: &mut H,
    reason: &str,
    message: String,
) -> Result<(), Error> {
    let before = machine.status.clone();
    let status = machine.status.get_or_insert_with(Default::default);
    let transitioned = crate::conditions::set(
        &mut status.conditions,
        crate::conditions::Observed::new(
            crate::conditions::READY,
            crate::conditions::Status::False,
            reason,
            message.clone(),
        ),
        machine.metadata.generation,
        &crate::conditions::now(),
    );
    if machine.status != before {
        hooks.persist(machine).await?;
    }
    if transitioned {
        hooks.event(machine, reason, &message).await;
    }
    Ok(())
}

async fn fail<H: Hooks>(
    machine: &mut VSphereMachine,
    hooks: &mut H,
    message: String,
) -> Result<Outcome, Error> {
    fail_with(machine, hooks, step::reason::FAILED, message).await
}

async fn fail_with<H: Hooks>(
    machine: &mut VSphereMachine,
    hooks: &mut H,
    reason: &str,
    message: String,
) -> Result<Outcome, Error> {
    let status = machine.status.get_or_insert_with(Default::default);
    let observed = crate::conditions::Observed::new(
        crate::conditions::READY,
        crate::conditions::Status::False,
        reason,
        message.clone(),
    );
    if crate::conditions::set(
        &mut status.conditions,
        observed,
        machine.metadata.generation,
        &crate::conditions::now(),
    ) {
        hooks.event(machine, reason, &message).await;
    }
    hooks.persist(machine).await?;
    Ok(Outcome::Failed(message))
}

/// Decides where the clone goes and records it in `status.placement`
/// before the clone is sent; the request carries it. A pool, folder,
/// datastore or datastore cluster that is not in vCenter fails the machine
/// with `PlacementNotFound` (the `Err` outcome), retried with backoff; a
/// linked clone's template busy with its base snapshot, `LinkedCloneBaseBusy`.
async fn place<M: Machines, H: Hooks>(
    machine: &mut VSphereMachine,
    backend: &M,
    hooks: &mut H,
    request: CloneRequest,
) -> Result<Result<CloneRequest, Outcome>, Error> {
    let placement = match backend.place(&request).await {
        Ok(placement) => placement,
        // Missing in vCenter, or (a linked clone) its template being
        // converted by another provider: nothing is cloned.
        Err(e) if e.is_fault("NotFound") || (request.linked && e.is_fault("TaskInProgress")) => {
            let reason = if e.is_fault("NotFound") {
                step::reason::PLACEMENT_NOT_FOUND
            } else {
                step::reason::LINKED_CLONE_BASE_BUSY
            };
            let message = format!("placing {}: {e}", request.name);
            return Ok(Err(fail_with(machine, hooks, reason, message).await?));
        }
        Err(e) => return Err(e.into()),
    };
    let status = machine.status.get_or_insert_with(Default::default);
    let recorded = Some(placement_status(&placement));
    if status.placement != recorded {
        status.placement = recorded;
        hooks.persist(machine).await?;
    }
    Ok(Ok(request.placed(placement)))
}

/// A placement as the status shows it: inventory paths.
pub fn placement_status(placement: &Placement) -> PlacementStatus {
    PlacementStatus {
        resource_pool: placement.resource_pool.path.clone(),
        folder: placement.folder.path.clone(),
        datastore: placement.datastore.as_ref().map(|d| d.path.clone()),
        datastore_cluster: placement.datastore_cluster.clone(),
        host: placement.host.as_ref().map(|h| h.path.clone()),
        note: placement.note.clone(),
        linked_clone_base: placement.linked_clone_base.clone(),
    }
}

// The driver against the mock: the whole lifecycle, crashes at each step
// (a fresh driver from the last persisted status), deletes that meet faults.
#[cfg(test)]
mod tests {
    use super::step::reason;
    use super::{reconcile, Checkpoint, Hooks, Options, Outcome};
    use crate::api::{PowerState, VSphereMachine};
    use crate::conditions;
    use crate::fixtures::machine;
    use crate::vsphere;
    use crate::vsphere::mock::MockMachines;
    use crate::Error;

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
        async fn persist(&mut self, machine: &VSphereMachine) -> Result<(), Error> {
            if self.fail_writes {
                return Err(Error::StatusWrite("API server unavailable".into()));
            }
            self.writes += 1;
            self.persisted = Some(machine.clone());
            Ok(())
        }

        async fn event(&mut self, _machine: &VSphereMachine, reason: &str, _message: &str) {
            self.events.push(reason.to_string());
        }

        fn checkpoint(&mut self, point: Checkpoint) -> Result<(), Error> {
            if self.crash_at == Some(point) {
                return Err(Error::Stopped(format!("crashed at {point:?}")));
            }
            Ok(())
        }
    }

    async fn run(
        m: &mut VSphereMachine,
        deleting: bool,
        mock: &MockMachines,
        store: &mut Store,
    ) -> Result<Outcome, Error> {
        reconcile(m, deleting, &[], mock, store, &Options::default()).await
    }

    fn ready_reason(m: &VSphereMachine) -> String {
        m.status
            .as_ref()
            .and_then(|s| conditions::find(&s.conditions, conditions::READY))
            .map(|c| c.reason.clone())
            .unwrap_or_default()
    }

    /// The placement is decided and written before the clone, and the clone
    /// carries it: its pool and folder, the datastore chosen from the
    /// datastore cluster, for the added disk on that cluster too.
    #[tokio::test]
    async fn the_placement_is_recorded_before_the_clone_which_carries_it() {
        let mock = MockMachines::new();
        let mut m = machine("web");
        m.spec.resource_pool = Some("team-a".into());
        m.spec.folder = Some("apps/web".into());
        m.spec.disks[0].datastore = String::new();
        m.spec.disks[0].datastore_cluster = Some("pod-1".into());
        let mut data = m.spec.disks[0].clone();
        data.name = "data".into();
        m.spec.disks.push(data);
        let mut store = Store {
            crash_at: Some(Checkpoint::CloneSent),
            ..Default::default()
        };
        let _ = run(&mut m, false, &mock, &mut store).await;
        let persisted = store.persisted.clone().expect("persisted");
        let status = persisted.status.unwrap_or_default();
        assert!(
            status.task.is_none(),
            "crashed before the task was recorded"
        );
        assert_eq!(
            status.placement,
            Some(crate::api::PlacementStatus {
                resource_pool: "/DC0/host/DC0_C0/Resources/team-a".into(),
                folder: "/DC0/vm/apps/web".into(),
                datastore: Some("/DC0/datastore/pod-1/pod-1-ds0".into()),
                datastore_cluster: Some("pod-1".into()),
                host: None,
                note: Some("recommended by Storage DRS".into()),
                linked_clone_base: None,
            }),
            "written before the clone was sent"
        );
        let sent = mock.clone_requests();
        assert_eq!(sent.len(), 1);
        let placement = sent[0]
            .placement
            .clone()
            .expect("the clone carries its placement");
        assert_eq!(
            super::placement_status(&placement),
            status.placement.clone().unwrap()
        );
        assert_eq!(
            (
                sent[0].folder_is_path,
                sent[0].shape.extra_disks[0].datastore.as_str()
            ),
            (true, "pod-1-ds0"),
            "the added disk goes to the datastore chosen from its cluster"
        );
    }

    /// A pool, folder or datastore that is not there fails the machine with
    /// `PlacementNotFound` (retried with backoff), and nothing is cloned.
    #[tokio::test]
    async fn a_placement_that_is_not_there_fails_the_machine_and_clones_nothing() {
        let mock = MockMachines::new();
        mock.fail_next(
            "place",
            vsphere::Error::fault(
                "NotFound",
                "resource pool /DC0/host/DC0_C0/Resources/team-z not found",
            ),
        );
        let mut m = machine("web");
        m.spec.resource_pool = Some("team-z".into());
        let mut store = Store::default();
        let outcome = run(&mut m, false, &mock, &mut store)
            .await
            .expect("reconcile");
        assert!(
            matches!(&outcome, Outcome::Failed(message) if message.contains("team-z not found")),
            "{outcome:?}"
        );
        assert_eq!(ready_reason(&m), reason::PLACEMENT_NOT_FOUND);
        assert!(mock.clone_requests().is_empty(), "nothing cloned");
        assert_eq!(mock.calls("clone"), 0);
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
        assert!(err.to_string().contains("crashed"), "{err}");
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
        assert_eq!(outcome.as_ref().ok(), Some(&Outcome::Ready), "{point:?}");
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

    fn condition(m: &VSphereMachine, type_: &str) -> (String, String) {
        m.status
            .as_ref()
            .and_then(|s| conditions::find(&s.conditions, type_))
            .map(|c| (c.status.clone(), c.reason.clone()))
            .unwrap_or_default()
    }

    /// A Ready machine with hot add on a running VM of 2 CPUs, 2048 MiB.
    async fn running(mock: &MockMachines, store: &mut Store) -> VSphereMachine {
        let mut m = machine("web");
        m.spec.guest_agent = Some("none".into());
        m.spec.hot_add_cpu = true;
        m.spec.hot_add_memory = true;
        assert_eq!(
            run(&mut m, false, mock, store).await.expect("create"),
            Outcome::Ready
        );
        m
    }

    fn shape(mock: &MockMachines) -> (i32, i64, String, String) {
        let vm = &mock.vms()[0];
        (
            vm.cpus,
            vm.memory_mib,
            vm.power_state.clone(),
            vm.change_version.clone(),
        )
    }

    #[tokio::test]
    async fn a_class_change_reaches_a_running_hot_add_vm_live() {
        let mock = MockMachines::new();
        let mut store = Store::default();
        let mut m = running(&mock, &mut store).await;
        let version = shape(&mock).3;
        m.spec.cpus = 4;
        m.spec.memory_mib = 4096;
        assert_eq!(
            run(&mut m, false, &mock, &mut store).await.expect("grow"),
            Outcome::Ready
        );
        let (cpus, memory, power, _) = shape(&mock);
        assert_eq!((cpus, memory, power.as_str()), (4, 4096, "poweredOn"));
        assert_eq!(
            (
                mock.calls("resize"),
                mock.calls("powerOff"),
                mock.calls("powerOn")
            ),
            (1, 0, 1),
            "live: no power cycle"
        );
        assert_eq!(
            mock.resize_requests()[0].change_version,
            Some(version),
            "under the version it was decided on"
        );
        assert_eq!(
            condition(&m, conditions::RECONFIGURED),
            ("True".into(), reason::UP_TO_DATE.into())
        );
        assert!(m.status.as_ref().is_some_and(|s| s.resize.is_none()));
        assert!(
            store.events.iter().any(|e| e == "Resizing"),
            "{:?}",
            store.events
        );
        assert_eq!(
            m.status.as_ref().and_then(|s| s.host.as_deref()),
            Some("esx-01.test"),
            "the host in the status"
        );
    }

    #[tokio::test]
    async fn a_decrease_waits_for_a_power_cycle_then_lands_once_off() {
        let mock = MockMachines::new();
        let mut store = Store::default();
        let mut m = running(&mock, &mut store).await;
        m.spec.cpus = 1;
        m.spec.memory_mib = 1024;
        for _ in 0..2 {
            assert_eq!(
                run(&mut m, false, &mock, &mut store).await.expect("wait"),
                Outcome::Ready
            );
        }
        assert_eq!(shape(&mock).0, 2, "not applied to the running VM");
        assert_eq!((mock.calls("resize"), mock.calls("powerOff")), (0, 0));
        assert_eq!(
            condition(&m, conditions::RECONFIGURED),
            ("False".into(), reason::POWER_CYCLE_REQUIRED.into())
        );
        assert!(store
            .events
            .iter()
            .any(|e| e == reason::POWER_CYCLE_REQUIRED));
        // Powered off as asked: the change lands, then on again as asked.
        m.spec.desired_power_state = PowerState::PoweredOff;
        run(&mut m, false, &mock, &mut store).await.expect("off");
        let (cpus, memory, power, _) = shape(&mock);
        assert_eq!((cpus, memory, power.as_str()), (1, 1024, "poweredOff"));
        m.spec.desired_power_state = PowerState::PoweredOn;
        run(&mut m, false, &mock, &mut store).await.expect("on");
        assert_eq!(shape(&mock).2, "poweredOn");
        assert_eq!(mock.calls("resize"), 1);
        assert_eq!(
            condition(&m, conditions::RECONFIGURED),
            ("True".into(), reason::UP_TO_DATE.into())
        );
    }

    #[tokio::test]
    async fn a_vm_powered_off_behind_our_back_gets_the_change_before_it_is_on_again() {
        let mock = MockMachines::new();
        let mut store = Store::default();
        let mut m = running(&mock, &mut store).await;
        m.spec.cpus = 1;
        run(&mut m, false, &mock, &mut store).await.expect("wait");
        let vm = mock.vms()[0].mo_ref.clone();
        mock.set_power(&vm, "poweredOff");
        run(&mut m, false, &mock, &mut store).await.expect("cycle");
        let (cpus, _, power, _) = shape(&mock);
        assert_eq!((cpus, power.as_str()), (1, "poweredOn"));
    }

    #[tokio::test]
    async fn allow_restart_applies_a_decrease_at_once() {
        let mock = MockMachines::new();
        let mut store = Store::default();
        let mut m = running(&mock, &mut store).await;
        m.spec.cpus = 1;
        m.spec.update_policy = Some(crate::api::UpdatePolicy::AllowRestart);
        assert_eq!(
            run(&mut m, false, &mock, &mut store)
                .await
                .expect("restart"),
            Outcome::Ready
        );
        let (cpus, _, power, _) = shape(&mock);
        assert_eq!((cpus, power.as_str()), (1, "poweredOn"));
        assert_eq!(
            (
                mock.calls("powerOff"),
                mock.calls("resize"),
                mock.calls("powerOn")
            ),
            (1, 1, 2)
        );
    }

    /// A crash at a resize checkpoint, then a fresh driver from what was
    /// persisted; `vcenter_finishes_first`: the lost request is carried out
    /// before the restart (else it is still queued when the new one comes).
    async fn resize_crash(point: Checkpoint, vcenter_finishes_first: bool) -> MockMachines {
        let mock = MockMachines::new();
        let mut store = Store::default();
        let mut m = running(&mock, &mut store).await;
        let before = shape(&mock).3.parse::<u32>().expect("a version");
        m.spec.cpus = 4;
        store.crash_at = Some(point);
        let err = run(&mut m, false, &mock, &mut store)
            .await
            .expect_err("crashed");
        assert!(err.to_string().contains("crashed"), "{err}");
        let mut restarted = store.persisted.clone().expect("persisted");
        assert!(
            restarted
                .status
                .as_ref()
                .is_some_and(|s| s.resize.is_some()),
            "{point:?}: the change was recorded before it was sent"
        );
        if vcenter_finishes_first {
            mock.finish_all();
        }
        let outcome = run(&mut restarted, false, &mock, &mut Store::default()).await;
        assert_eq!(outcome.as_ref().ok(), Some(&Outcome::Ready), "{point:?}");
        // What vCenter still had queued runs now.
        mock.finish_all();
        let (cpus, _, power, after) = shape(&mock);
        assert_eq!(
            (cpus, power.as_str()),
            (4, "poweredOn"),
            "{point:?}: applied"
        );
        assert_eq!(
            after.parse::<u32>().expect("a version"),
            before + 1,
            "{point:?}: applied once, never twice"
        );
        mock
    }

    #[tokio::test]
    async fn a_crash_after_the_resize_request_is_sent_applies_it_once() {
        let mock = resize_crash(Checkpoint::ResizeSent, true).await;
        assert_eq!(mock.calls("resize"), 1, "it landed: not sent again");
        // Restarted while the lost request is still queued: sent again under
        // the same version, and vCenter refuses whichever comes second.
        let mock = resize_crash(Checkpoint::ResizeSent, false).await;
        assert_eq!(mock.calls("resize"), 2);
    }

    #[tokio::test]
    async fn a_crash_after_the_resize_task_is_recorded_waits_for_that_task() {
        let mock = resize_crash(Checkpoint::ResizeRecorded, false).await;
        assert_eq!(mock.calls("resize"), 1, "the recorded task is waited for");
    }

    #[tokio::test]
    async fn a_restart_annotation_restarts_once_per_value() {
        let mock = MockMachines::new();
        let mut store = Store::default();
        let mut m = running(&mock, &mut store).await;
        m.spec.restart_requested_at = Some("2026-12-06T10:00:00Z".into());
        for _ in 0..2 {
            assert_eq!(
                run(&mut m, false, &mock, &mut store)
                    .await
                    .expect("restart"),
                Outcome::Ready
            );
        }
        assert_eq!(
            (mock.calls("powerOff"), mock.calls("powerOn")),
            (1, 2),
            "one restart for two reconciles of one value"
        );
        assert_eq!(
            m.status.as_ref().and_then(|s| s.restarted_at.as_deref()),
            Some("2026-12-06T10:00:00Z")
        );
        m.spec.restart_requested_at = Some("2026-12-06T11:00:00Z".into());
        run(&mut m, false, &mock, &mut store).await.expect("again");
        assert_eq!((mock.calls("powerOff"), mock.calls("powerOn")), (2, 3));
        assert_eq!(shape(&mock).2, "poweredOn");
    }

    #[tokio::test]
    async fn a_crash_after_the_restart_power_on_does_not_restart_again() {
        let mock = MockMachines::new();
        let mut store = Store::default();
        let mut m = running(&mock, &mut store).await;
        m.spec.restart_requested_at = Some("t1".into());
        store.crash_at = Some(Checkpoint::PoweredOn);
        run(&mut m, false, &mock, &mut store)
            .await
            .expect_err("crashed");
        let mut restarted = store.persisted.clone().expect("persisted");
        assert_eq!(
            run(&mut restarted, false, &mock, &mut Store::default())
                .await
                .expect("re-run"),
            Outcome::Ready
        );
        assert_eq!((mock.calls("powerOff"), mock.calls("powerOn")), (1, 2));
        assert_eq!(
            restarted
                .status
                .as_ref()
                .and_then(|s| s.restarted_at.as_deref()),
            Some("t1")
        );
    }

    fn disks_gib(mock: &MockMachines) -> Vec<i64> {
        mock.vms()[0]
            .disks
            .iter()
            .map(|(_, k)| k / 1024 / 1024)
            .collect()
    }

    fn data_disk(name: &str, gib: u64) -> crate::api::MachineDisk {
        crate::api::MachineDisk {
            name: name.into(),
            size_gib: gib,
            storage_class: "fast".into(),
            datastore: "LocalDS_0".into(),
            datastore_cluster: None,
            provisioning: Default::default(),
        }
    }

    #[tokio::test]
    async fn disks_grow_and_are_added_live_a_shrink_is_refused_a_removed_one_kept() {
        let mock = MockMachines::new();
        let mut store = Store::default();
        let mut m = machine("web");
        m.spec.guest_agent = Some("none".into());
        m.spec.disks.push(data_disk("data", 3));
        run(&mut m, false, &mock, &mut store).await.expect("create");
        assert_eq!(disks_gib(&mock), vec![20, 3]);
        // Grow the data disk, add a log disk: live, one request.
        m.spec.disks[1].size_gib = 5;
        m.spec.disks.push(data_disk("logs", 2));
        assert_eq!(
            run(&mut m, false, &mock, &mut store).await.expect("grow"),
            Outcome::Ready
        );
        assert_eq!(disks_gib(&mock), vec![20, 5, 2]);
        assert_eq!((mock.calls("disks"), mock.calls("powerOff")), (1, 0));
        let recorded: Vec<(String, Option<i32>)> = m
            .status
            .as_ref()
            .map(|s| s.disks.iter().map(|d| (d.name.clone(), d.key)).collect())
            .unwrap_or_default();
        assert_eq!(
            recorded,
            vec![
                ("root".into(), Some(2000)),
                ("data".into(), Some(2001)),
                ("logs".into(), Some(2002))
            ],
            "by device key"
        );
        assert_eq!(
            condition(&m, conditions::RECONFIGURED),
            ("True".into(), reason::UP_TO_DATE.into())
        );
        // A shrink: refused, never sent.
        m.spec.disks[1].size_gib = 4;
        run(&mut m, false, &mock, &mut store).await.expect("shrink");
        assert_eq!(disks_gib(&mock), vec![20, 5, 2]);
        assert_eq!(mock.calls("disks"), 1, "nothing attempted");
        assert_eq!(
            condition(&m, conditions::RECONFIGURED),
            ("False".into(), reason::DISK_SHRINK_REFUSED.into())
        );
        // Removed from the spec: kept with its data.
        m.spec.disks[1].size_gib = 5;
        m.spec.disks.pop();
        run(&mut m, false, &mock, &mut store)
            .await
            .expect("removed");
        assert_eq!(disks_gib(&mock), vec![20, 5, 2], "never deleted");
        assert_eq!(
            condition(&m, conditions::RECONFIGURED),
            ("False".into(), reason::DISK_KEPT.into())
        );
        assert_eq!(mock.calls("disks"), 1);
    }

    #[tokio::test]
    async fn a_crash_after_a_disk_addition_is_sent_adds_it_once() {
        for finishes_first in [true, false] {
            let mock = MockMachines::new();
            let mut store = Store::default();
            let mut m = machine("web");
            m.spec.guest_agent = Some("none".into());
            run(&mut m, false, &mock, &mut store).await.expect("create");
            m.spec.disks.push(data_disk("data", 3));
            store.crash_at = Some(Checkpoint::ResizeSent);
            run(&mut m, false, &mock, &mut store)
                .await
                .expect_err("crashed");
            let mut restarted = store.persisted.clone().expect("persisted");
            assert!(
                restarted
                    .status
                    .as_ref()
                    .is_some_and(|s| s.disks.iter().any(|d| d.name == "data")),
                "recorded before it was sent"
            );
            if finishes_first {
                mock.finish_all();
            }
            run(&mut restarted, false, &mock, &mut Store::default())
                .await
                .expect("re-run");
            mock.finish_all();
            assert_eq!(
                disks_gib(&mock),
                vec![20, 3],
                "{finishes_first}: added once"
            );
        }
    }

    #[derive(Default)]
    struct Progress {
        seen: Vec<(String, Option<i32>)>,
    }

    impl Hooks for Progress {
        async fn persist(&mut self, machine: &VSphereMachine) -> Result<(), Error> {
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
}
