//! Runs the lifecycle of one VSphereMachine: observe, [`step`], act, until
//! there is nothing to do but wait for vCenter or the guest. The same code
//! serves the provider role's controller, `check --apply` and the tests; what
//! differs is in [`Hooks`] (where the status goes, events, crash points).

use std::future::Future;
use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use tracing::{debug, info};

use super::step::{self, operation, Action, Observation, Step};
use super::{clone_request, identity};
use crate::api::{TaskStatus, VSphereMachine};
use crate::vsphere::{self, Machines, TaskFacts, TaskState};

/// Points where a test can stop the driver, as a crash would.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Checkpoint {
    /// `CloneVM_Task` returned its task, not yet written to the status.
    CloneSent,
    /// The clone's task reference is written to the status.
    TaskRecorded,
    /// A power-on task finished.
    PoweredOn,
}

/// Where the driver's effects go.
pub trait Hooks: Send {
    /// Persists the machine's status (the caller may skip an unchanged one).
    /// A failure stops the reconcile: nothing is done that the status does not record.
    fn persist(
        &mut self,
        machine: &VSphereMachine,
    ) -> impl Future<Output = Result<(), vsphere::Error>> + Send;

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
    fn checkpoint(&mut self, point: Checkpoint) -> Result<(), vsphere::Error> {
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
) -> Result<Outcome, vsphere::Error> {
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
                    Err(e) => return Err(e),
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
                Err(e) => return Err(e),
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
) -> Result<TaskFacts, vsphere::Error> {
    hooks.tasks_in_flight(1);
    let result = match backend.task(task).await {
        Ok(Some(facts)) if !facts.state.in_progress() => Ok(facts),
        Ok(_) => wait(machine, backend, hooks, task, options).await,
        Err(e) => Err(e),
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
) -> Result<TaskFacts, vsphere::Error> {
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
            other => return other,
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
) -> Result<(Observation, bool), vsphere::Error> {
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
) -> Result<(), vsphere::Error> {
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
    Ok(())
}

/// Records a started task in the status, and persists it before anything else.
async fn record<H: Hooks>(
    machine: &mut VSphereMachine,
    hooks: &mut H,
    task: &str,
    op: &str,
) -> Result<(), vsphere::Error> {
    let status = machine.status.get_or_insert_with(Default::default);
    status.task = Some(TaskStatus {
        mo_ref: task.to_string(),
        progress: None,
        state: "running".into(),
        operation: Some(op.into()),
    });
    hooks.persist(machine).await
}

async fn fail<H: Hooks>(
    machine: &mut VSphereMachine,
    hooks: &mut H,
    message: String,
) -> Result<Outcome, vsphere::Error> {
    let status = machine.status.get_or_insert_with(Default::default);
    let observed = crate::conditions::Observed::new(
        crate::conditions::READY,
        crate::conditions::Status::False,
        step::reason::FAILED,
        message.clone(),
    );
    if crate::conditions::set(
        &mut status.conditions,
        observed,
        machine.metadata.generation,
        &crate::conditions::now(),
    ) {
        hooks.event(machine, step::reason::FAILED, &message).await;
    }
    hooks.persist(machine).await?;
    Ok(Outcome::Failed(message))
}
