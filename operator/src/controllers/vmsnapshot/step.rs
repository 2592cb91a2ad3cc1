//! The VMSnapshot's pure core: given the object and what vCenter says (its
//! VM, the VM's snapshots, the recorded task), the next action and the
//! status to write. No I/O; the driver performs the action and calls it again.
//!
//! Safety rules it encodes:
//! - a task in flight is waited for, never repeated;
//! - the snapshot is ours when its description carries the object's
//!   [`marker`]; one is only asked for when the VM has none with it, and
//!   never again once one was taken (a lost snapshot is reported, since a new
//!   one would be another point in time);
//! - a revert happens once per `spec.revertRequest` value: the value is
//!   written to `status.lastRevert` before the request is sent, and a value
//!   recorded without its task (a stop while sending) is `Unknown`, not sent
//!   again;
//! - a delete ends (finalizer removed) only when vCenter's fresh answer has
//!   no snapshot with the marker, or no VM at all.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::ResourceExt;

use crate::api::{revert_state, RevertStatus, VMSnapshot, VMSnapshotStatus};
use crate::conditions::{self, Observed, Status, READY};
use crate::controllers::vspheremachine::step::task_status;
use crate::vsphere::{SnapshotFacts, SnapshotRequest, TaskFacts, TaskState};

/// `Ready` condition reasons (what each means: [`crate::api::reasons`]).
pub mod reason {
    pub use crate::api::reasons::vmsnapshot::*;
}

/// Task operations, as recorded in `status.task.operation`.
pub mod operation {
    pub const CREATE: &str = "createSnapshot";
    pub const REVERT: &str = "revertSnapshot";
    pub const REMOVE: &str = "removeSnapshot";
}

/// The longest snapshot name vCenter takes.
const NAME_LIMIT: usize = 80;

/// The line of a snapshot's description that makes it this object's: its
/// namespace, name and UID (`check`'s objects have no UID: namespace and
/// name, so a re-run finds its snapshot).
pub fn marker(snapshot: &VMSnapshot) -> String {
    let namespace = snapshot.namespace().unwrap_or_default();
    let name = snapshot.name_any();
    match snapshot.metadata.uid.as_deref() {
        Some(uid) => format!("banlieue.io/vmsnapshot: {namespace}/{name} uid {uid}"),
        None => format!("banlieue.io/vmsnapshot: {namespace}/{name}"),
    }
}

/// Is this vCenter snapshot the one `marker` names?
pub fn is_ours(facts: &SnapshotFacts, marker: &str) -> bool {
    facts.description.lines().any(|l| l.trim() == marker)
}

/// The snapshot the object asks for: its name, the description with the marker.
pub fn request(snapshot: &VMSnapshot) -> SnapshotRequest {
    let marker = marker(snapshot);
    let description = match snapshot.spec.description.as_deref() {
        Some(d) if !d.trim().is_empty() => format!("{}\n{marker}", d.trim_end()),
        _ => marker,
    };
    SnapshotRequest {
        name: snapshot.name_any().chars().take(NAME_LIMIT).collect(),
        description,
        memory: snapshot.spec.memory,
        quiesce: snapshot.spec.quiesce,
    }
}

/// A vCenter time (`xsd:dateTime` with a zone) as a Kubernetes one.
pub fn parse_time(text: &str) -> Option<Time> {
    text.trim()
        .parse::<k8s_openapi::jiff::Timestamp>()
        .ok()
        .map(Time)
}

/// What vCenter says, as far as this snapshot is concerned.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Observation {
    /// The VM's reference (`None`: gone, or never made).
    pub vm: Option<String>,
    /// The VM's snapshots (fresh from vCenter).
    pub snapshots: Vec<SnapshotFacts>,
    /// The task recorded in the status (`None`: none, or vCenter forgot it).
    pub task: Option<TaskFacts>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// Nothing to do until something changes (or a retry after a failure).
    Idle,
    /// Wait for the recorded task.
    WaitTask(String),
    /// Take the snapshot of this VM.
    Create(String),
    /// Revert the VM to this snapshot (the request is in `status.lastRevert`).
    Revert(String),
    /// Remove this snapshot, consolidating.
    Remove(String),
    RemoveFinalizer,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Step {
    pub action: Action,
    pub status: VMSnapshotStatus,
    /// The Ready condition as computed (also in `status`).
    pub ready: Observed,
    /// Whether Ready's status changed (an event worth recording).
    pub transitioned: bool,
}

impl Step {
    pub fn failed(&self) -> bool {
        self.ready.reason == reason::FAILED || self.ready.reason == reason::SNAPSHOT_LOST
    }
}

/// The revert `spec.revertRequest` asks for that is not handled yet.
pub fn pending_revert(snapshot: &VMSnapshot) -> Option<&str> {
    let asked = snapshot.spec.revert_request.as_deref()?;
    let handled = snapshot
        .status
        .as_ref()
        .and_then(|s| s.last_revert.as_ref())
        .map(|r| r.request.as_str());
    (handled != Some(asked)).then_some(asked)
}

fn revert_outcome(request: &str, state: &str, message: Option<String>, now: &Time) -> RevertStatus {
    RevertStatus {
        request: request.to_string(),
        state: state.to_string(),
        message,
        time: Some(now.clone()),
    }
}

pub fn step(snapshot: &VMSnapshot, observed: &Observation, deleting: bool, now: &Time) -> Step {
    let previous = snapshot.status.clone().unwrap_or_default();
    let mut status = previous.clone();
    status.observed_generation = snapshot.metadata.generation;
    let recorded = previous.task.as_ref().and_then(|t| t.operation.clone());
    let (action, ready) = decide(
        snapshot,
        observed,
        deleting,
        &mut status,
        recorded.as_deref(),
        now,
    );
    let transitioned = conditions::set(
        &mut status.conditions,
        ready.clone(),
        snapshot.metadata.generation,
        now,
    );
    Step {
        action,
        status,
        ready,
        transitioned,
    }
}

fn decide(
    snapshot: &VMSnapshot,
    observed: &Observation,
    deleting: bool,
    status: &mut VMSnapshotStatus,
    recorded: Option<&str>,
    now: &Time,
) -> (Action, Observed) {
    let not_ready =
        |reason: &str, message: String| Observed::new(READY, Status::False, reason, message);

    // A task in flight is waited for, whatever else is true.
    if let Some(task) = observed.task.as_ref().filter(|t| t.state.in_progress()) {
        status.task = Some(task_status(task, recorded.map(String::from)));
        let reason = match recorded {
            _ if deleting => reason::DELETING,
            Some(operation::REVERT) => reason::REVERTING,
            Some(operation::REMOVE) => reason::DELETING,
            _ => reason::CREATING,
        };
        let progress = task
            .progress
            .map(|p| format!(" ({p}%)"))
            .unwrap_or_default();
        return (
            Action::WaitTask(task.mo_ref.clone()),
            not_ready(
                reason,
                format!("task {} {}{progress}", task.mo_ref, task.state.as_str()),
            ),
        );
    }
    // A finished (or forgotten) task is done with.
    let failure = observed
        .task
        .as_ref()
        .filter(|t| t.state == TaskState::Error)
        .map(|t| {
            let why = t
                .error
                .as_ref()
                .map(std::string::ToString::to_string)
                .unwrap_or_else(|| "no reason given".into());
            format!(
                "{} ({}) failed: {why}",
                recorded.unwrap_or("task"),
                t.mo_ref
            )
        });
    // A revert's outcome: its task's, or Unknown when it was being sent
    // (or its task expired) and nothing tells how it went.
    if let Some(last) = status
        .last_revert
        .as_mut()
        .filter(|r| r.state == revert_state::REVERTING)
    {
        let (state, message) = match (&observed.task, recorded) {
            (Some(t), Some(operation::REVERT)) if t.state == TaskState::Success => {
                (revert_state::REVERTED, Some(format!("task {}", t.mo_ref)))
            }
            (Some(_), Some(operation::REVERT)) => (revert_state::FAILED, failure.clone()),
            _ => (
                revert_state::UNKNOWN,
                Some(
                    "the provider stopped while sending the revert (or vCenter forgot its task): look at the VM's \
                     tasks in vCenter; a new spec.revertRequest value asks again"
                        .into(),
                ),
            ),
        };
        *last = revert_outcome(&last.request, state, message, now);
    }
    status.task = None;

    let marker = marker(snapshot);
    let ours = observed.snapshots.iter().find(|s| is_ours(s, &marker));

    if deleting {
        return match (&observed.vm, ours) {
            (None, _) => (
                Action::RemoveFinalizer,
                not_ready(
                    reason::DELETING,
                    "the VM is gone, and its snapshots with it".into(),
                ),
            ),
            // A removal that failed is retried after a backoff, not at once.
            (Some(_), Some(_)) if recorded == Some(operation::REMOVE) && failure.is_some() => (
                Action::Idle,
                not_ready(reason::DELETING, failure.unwrap_or_default()),
            ),
            (Some(vm), Some(s)) => (
                Action::Remove(s.mo_ref.clone()),
                not_ready(reason::DELETING, format!("removing {} of {vm}", s.mo_ref)),
            ),
            (Some(vm), None) => (
                Action::RemoveFinalizer,
                not_ready(
                    reason::DELETING,
                    format!("{vm} has no snapshot of this object"),
                ),
            ),
        };
    }

    let Some(vm) = observed.vm.as_ref() else {
        return match status.snapshot_id.clone() {
            Some(id) => (
                Action::Idle,
                not_ready(
                    reason::SNAPSHOT_LOST,
                    format!("{id} is gone: its VM is no longer in vCenter"),
                ),
            ),
            None => (
                Action::Idle,
                not_ready(
                    reason::WAITING_FOR_VM,
                    format!(
                        "VirtualMachine {} has no VM in vCenter yet",
                        snapshot.spec.vm_ref.name
                    ),
                ),
            ),
        };
    };
    status.vm_mo_ref = Some(vm.clone());
    match ours {
        Some(s) => {
            status.snapshot_id = Some(s.mo_ref.clone());
            status.creation_time = parse_time(&s.created);
            status.size_bytes = s.size_bytes;
            if let Some(request) = pending_revert(snapshot) {
                status.last_revert =
                    Some(revert_outcome(request, revert_state::REVERTING, None, now));
                return (
                    Action::Revert(s.mo_ref.clone()),
                    not_ready(reason::REVERTING, format!("reverting {vm} to {}", s.mo_ref)),
                );
            }
            (
                Action::Idle,
                Observed::new(
                    READY,
                    Status::True,
                    reason::CREATED,
                    format!("{} of {vm}, taken {}", s.mo_ref, s.created),
                ),
            )
        }
        None => {
            if let Some(id) = status.snapshot_id.clone() {
                return (
                    Action::Idle,
                    not_ready(
                        reason::SNAPSHOT_LOST,
                        format!("{id} is no longer a snapshot of {vm}; it is not taken again (delete this object)"),
                    ),
                );
            }
            if let Some(message) = failure.filter(|_| recorded == Some(operation::CREATE)) {
                return (Action::Idle, not_ready(reason::FAILED, message));
            }
            // A revert asked for before the snapshot exists has nothing to go back to.
            if let Some(request) = pending_revert(snapshot) {
                status.last_revert = Some(revert_outcome(
                    request,
                    revert_state::SKIPPED,
                    Some("asked for before the snapshot was taken".into()),
                    now,
                ));
            }
            (
                Action::Create(vm.clone()),
                not_ready(reason::CREATING, format!("snapshotting {vm}")),
            )
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::api::{LocalObjectReference, TaskStatus, VMSnapshotSpec};
    use crate::vsphere;

    pub(crate) fn snapshot(name: &str) -> VMSnapshot {
        let mut s = VMSnapshot::new(
            name,
            VMSnapshotSpec {
                vm_ref: LocalObjectReference { name: "web".into() },
                memory: false,
                quiesce: false,
                description: Some("before the upgrade".into()),
                revert_request: None,
            },
        );
        s.metadata.namespace = Some("ns".into());
        s.metadata.uid = Some(format!("uid-{name}"));
        s
    }

    fn facts(mo_ref: &str, description: &str) -> SnapshotFacts {
        SnapshotFacts {
            mo_ref: mo_ref.into(),
            name: "x".into(),
            description: description.into(),
            created: "2026-12-02T06:55:39.5Z".into(),
            size_bytes: Some(10),
            current: true,
        }
    }

    fn run(s: &VMSnapshot, o: Observation, deleting: bool) -> Step {
        step(s, &o, deleting, &conditions::now())
    }

    fn on_vm(snapshots: Vec<SnapshotFacts>) -> Observation {
        Observation {
            vm: Some("vm-9".into()),
            snapshots,
            task: None,
        }
    }

    #[test]
    fn the_request_carries_the_marker_and_only_the_marked_one_is_ours() {
        let s = snapshot("pre-upgrade");
        let r = request(&s);
        assert_eq!(r.name, "pre-upgrade");
        assert_eq!(
            r.description,
            "before the upgrade\nbanlieue.io/vmsnapshot: ns/pre-upgrade uid uid-pre-upgrade"
        );
        assert!(is_ours(&facts("snapshot-1", &r.description), &marker(&s)));
        // Same name, made by hand, or another object's: not ours.
        assert!(!is_ours(
            &facts("snapshot-2", "before the upgrade"),
            &marker(&s)
        ));
        let mut other = s.clone();
        other.metadata.uid = Some("uid-2".into());
        assert!(!is_ours(
            &facts("snapshot-1", &r.description),
            &marker(&other)
        ));
    }

    #[test]
    fn none_of_ours_creates_and_ours_is_ready_with_its_id_time_and_size() {
        let s = snapshot("a");
        let hand_made = facts("snapshot-1", "by hand");
        let step = run(&s, on_vm(vec![hand_made.clone()]), false);
        assert_eq!(step.action, Action::Create("vm-9".into()));
        assert_eq!(step.ready.reason, reason::CREATING);
        let ours = facts("snapshot-2", &request(&s).description);
        let step = run(&s, on_vm(vec![hand_made, ours]), false);
        assert_eq!(step.action, Action::Idle);
        assert_eq!(
            (step.ready.status, step.ready.reason.as_str()),
            (Status::True, reason::CREATED)
        );
        assert_eq!(step.status.snapshot_id.as_deref(), Some("snapshot-2"));
        assert_eq!(step.status.size_bytes, Some(10));
        assert_eq!(
            step.status.creation_time,
            parse_time("2026-12-02T06:55:39.5Z")
        );
        assert!(step.status.creation_time.is_some());
    }

    #[test]
    fn a_snapshot_taken_then_lost_is_reported_not_taken_again() {
        let mut s = snapshot("a");
        s.status = Some(VMSnapshotStatus {
            snapshot_id: Some("snapshot-2".into()),
            ..Default::default()
        });
        let step = run(&s, on_vm(vec![]), false);
        assert_eq!(step.action, Action::Idle);
        assert_eq!(step.ready.reason, reason::SNAPSHOT_LOST);
    }

    #[test]
    fn a_revert_is_sent_once_per_request_and_its_outcome_recorded() {
        let mut s = snapshot("a");
        let ours = facts("snapshot-2", &request(&s).description);
        s.spec.revert_request = Some("1".into());
        let step = run(&s, on_vm(vec![ours.clone()]), false);
        assert_eq!(step.action, Action::Revert("snapshot-2".into()));
        let last = step
            .status
            .last_revert
            .clone()
            .expect("recorded before it is sent");
        assert_eq!(
            (last.request.as_str(), last.state.as_str()),
            ("1", revert_state::REVERTING)
        );
        // The task recorded and finished: Reverted, and nothing more to do.
        let mut status = step.status.clone();
        status.task = Some(TaskStatus {
            mo_ref: "task-7".into(),
            progress: None,
            state: "running".into(),
            operation: Some(operation::REVERT.into()),
        });
        s.status = Some(status);
        let done = Observation {
            task: Some(TaskFacts {
                mo_ref: "task-7".into(),
                state: TaskState::Success,
                progress: Some(100),
                error: None,
                result: None,
            }),
            ..on_vm(vec![ours.clone()])
        };
        let step = run(&s, done, false);
        assert_eq!(step.action, Action::Idle);
        assert_eq!(step.ready.status, Status::True);
        let last = step.status.last_revert.clone().expect("outcome");
        assert_eq!(last.state, revert_state::REVERTED);
        assert!(step.status.task.is_none());
        s.status = Some(step.status);
        assert_eq!(
            run(&s, on_vm(vec![ours.clone()]), false).action,
            Action::Idle,
            "handled once"
        );
        // A new value asks again.
        s.spec.revert_request = Some("2".into());
        assert_eq!(
            run(&s, on_vm(vec![ours]), false).action,
            Action::Revert("snapshot-2".into())
        );
    }

    #[test]
    fn a_revert_recorded_without_its_task_is_unknown_not_sent_again() {
        let mut s = snapshot("a");
        let ours = facts("snapshot-2", &request(&s).description);
        s.spec.revert_request = Some("1".into());
        s.status = Some(VMSnapshotStatus {
            snapshot_id: Some("snapshot-2".into()),
            last_revert: Some(RevertStatus {
                request: "1".into(),
                state: revert_state::REVERTING.into(),
                ..Default::default()
            }),
            ..Default::default()
        });
        let step = run(&s, on_vm(vec![ours]), false);
        assert_eq!(step.action, Action::Idle);
        assert_eq!(
            step.status.last_revert.map(|r| r.state),
            Some(revert_state::UNKNOWN.to_string())
        );
    }

    #[test]
    fn a_revert_asked_before_the_snapshot_exists_is_skipped() {
        let mut s = snapshot("a");
        s.spec.revert_request = Some("1".into());
        let step = run(&s, on_vm(vec![]), false);
        assert_eq!(step.action, Action::Create("vm-9".into()));
        assert_eq!(
            step.status.last_revert.map(|r| r.state),
            Some(revert_state::SKIPPED.to_string())
        );
    }

    #[test]
    fn a_failed_create_is_reported_then_retried() {
        let mut s = snapshot("a");
        s.status = Some(VMSnapshotStatus {
            task: Some(TaskStatus {
                mo_ref: "task-3".into(),
                progress: None,
                state: "running".into(),
                operation: Some(operation::CREATE.into()),
            }),
            ..Default::default()
        });
        let failed = Observation {
            task: Some(TaskFacts {
                mo_ref: "task-3".into(),
                state: TaskState::Error,
                progress: None,
                error: Some(vsphere::Error::fault("InvalidState", "quiesce failed")),
                result: None,
            }),
            ..on_vm(vec![])
        };
        let step = run(&s, failed, false);
        assert_eq!(step.action, Action::Idle);
        assert!(
            step.failed() && step.ready.message.contains("quiesce failed"),
            "{}",
            step.ready.message
        );
        s.status = Some(step.status);
        assert_eq!(
            run(&s, on_vm(vec![]), false).action,
            Action::Create("vm-9".into())
        );
    }

    #[test]
    fn delete_removes_ours_then_releases_and_a_gone_vm_releases() {
        let s = snapshot("a");
        let ours = facts("snapshot-2", &request(&s).description);
        let hand_made = facts("snapshot-1", "by hand");
        let step = run(&s, on_vm(vec![hand_made.clone(), ours]), true);
        assert_eq!(step.action, Action::Remove("snapshot-2".into()));
        assert_eq!(
            run(&s, on_vm(vec![hand_made]), true).action,
            Action::RemoveFinalizer
        );
        assert_eq!(
            run(&s, Observation::default(), true).action,
            Action::RemoveFinalizer
        );
    }
}
