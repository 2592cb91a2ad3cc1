//! The lifecycle's pure core: given a VSphereMachine and what vCenter says
//! about its VM and its recorded task, the next action and the status to
//! write. No I/O; the driver performs the action and calls it again.
//!
//! Safety rules it encodes:
//! - a task in flight is waited for, never repeated (a clone above all);
//! - a clone is only asked for when no VM has the machine's instance UUID
//!   (the driver confirms that with vCenter itself, not a cache, first);
//! - a delete ends (finalizer removed) only when the VM is confirmed gone.

use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::identity;
use crate::api::{
    DiskStatus, InstallMode, MachineDisk, PlacementStatus, PowerState, ResizeStatus, RestartPhase,
    RestartStatus, TaskStatus, UpdatePolicy, VSphereMachine, VSphereMachineStatus,
};
use crate::conditions::{self, Observed, Status, READY};
use crate::vsphere::{
    DiskChanges, ExtraDisk, Resize, ServerIdentity, Shape, TaskFacts, TaskState, VmFacts,
};

/// `Ready` condition reasons (what each means: [`crate::api::reasons`]).
pub mod reason {
    pub use crate::api::reasons::vspheremachine::*;
}

/// Task operations, as recorded in `status.task.operation`.
pub mod operation {
    pub const CLONE: &str = "clone";
    pub const RECONFIGURE: &str = "reconfigure";
    /// CPUs and memory of a provisioned VM.
    pub const RESIZE: &str = "resize";
    /// Disks of a provisioned VM grown or added.
    pub const DISKS: &str = "disks";
    pub const POWER_ON: &str = "powerOn";
    pub const DESTROY: &str = "destroy";
}

/// How long a guest gets to shut down before a hard power-off.
pub const GUEST_SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(60);

/// What vCenter says, as far as this machine is concerned.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Observation {
    /// The VM with the machine's instance UUID.
    pub vm: Option<VmFacts>,
    /// The task recorded in the status (`None`: none, or vCenter forgot it).
    pub task: Option<TaskFacts>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// Nothing to do until something changes (or a retry after a failure).
    Idle,
    /// Wait for the recorded task.
    WaitTask(String),
    Clone,
    /// Apply CPUs and memory to the VM (a clone that did not take them).
    Reconfigure(String),
    /// Change a provisioned VM's CPUs and memory (recorded in
    /// `status.resize` before it is sent).
    Resize {
        vm: String,
        resize: Resize,
    },
    /// Grow and add disks of a provisioned VM (added ones recorded in
    /// `status.disks` before they are sent).
    Disks {
        vm: String,
        changes: DiskChanges,
    },
    PowerOn(String),
    /// Guest shutdown with a timeout, then hard; `graceful` off for a delete.
    PowerOff {
        vm: String,
        graceful: bool,
    },
    Destroy(String),
    RemoveFinalizer,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Step {
    pub action: Action,
    pub status: VSphereMachineStatus,
    /// The Ready condition as computed (also in `status`).
    pub ready: Observed,
    /// Whether Ready's status changed (an event worth recording).
    pub transitioned: bool,
    /// The `Reconfigured` condition of a provisioned VM, and whether its
    /// status changed.
    pub reconfigured: Option<(Observed, bool)>,
}

impl Step {
    pub fn failed(&self) -> bool {
        self.ready.reason == reason::FAILED
    }
}

fn power_label(vsphere: &str) -> String {
    match vsphere {
        "poweredOn" => "PoweredOn".into(),
        "poweredOff" => "PoweredOff".into(),
        "suspended" => "Suspended".into(),
        other => other.to_string(),
    }
}

/// A task as `status.task` records it.
pub(crate) fn task_status(t: &TaskFacts, operation: Option<String>) -> TaskStatus {
    TaskStatus {
        mo_ref: t.mo_ref.clone(),
        progress: t.progress,
        state: t.state.as_str().into(),
        operation,
    }
}

fn reason_of(operation: Option<&str>) -> &'static str {
    match operation {
        Some(operation::CLONE) => reason::CLONING,
        Some(operation::RECONFIGURE | operation::RESIZE | operation::DISKS) => {
            reason::RECONFIGURING
        }
        Some(operation::POWER_ON) => reason::POWERING_ON,
        Some(operation::DESTROY) => reason::DELETING,
        _ => reason::CLONING,
    }
}

/// Does the machine need a guest IP before it is Ready? Not for a deferred
/// install (Ready as soon as the clone powers on: its installer is running,
/// see the guide), nor without a guest agent to report one.
pub fn needs_ip(machine: &VSphereMachine) -> bool {
    machine.spec.install_mode != InstallMode::Deferred
        && !machine
            .spec
            .guest_agent
            .as_deref()
            .is_some_and(|a| a.eq_ignore_ascii_case("none"))
}

pub fn step(
    machine: &VSphereMachine,
    observed: &Observation,
    deleting: bool,
    server: &ServerIdentity,
    now: &Time,
) -> Step {
    let previous = machine.status.clone().unwrap_or_default();
    let mut status = previous.clone();
    status.instance_uuid = Some(identity::instance_uuid(machine));
    status.observed_generation = machine.metadata.generation;
    let recorded_operation = previous.task.as_ref().and_then(|t| t.operation.clone());

    // The VM's facts, whatever happens next.
    match &observed.vm {
        Some(vm) => {
            status.mo_ref = Some(vm.mo_ref.clone());
            status.power_state = Some(power_label(&vm.power_state));
            status.ip_addresses = vm.ip_addresses.clone();
            status.host = Some(vm.host.clone()).filter(|h| !h.is_empty());
            status.console_url = (!server.host.is_empty())
                .then(|| identity::console_url(&server.host, &vm.mo_ref, &server.server_guid));
        }
        None => {
            status.mo_ref = None;
            status.power_state = None;
            status.ip_addresses = Vec::new();
            status.host = None;
            status.console_url = None;
            status.provisioned = false;
        }
    }

    let mut reconfigured = None;
    let (action, ready) = decide(
        machine,
        observed,
        deleting,
        &mut status,
        recorded_operation.as_deref(),
        &mut reconfigured,
    );
    let transitioned = conditions::set(
        &mut status.conditions,
        ready.clone(),
        machine.metadata.generation,
        now,
    );
    let reconfigured = reconfigured.map(|c| {
        let moved = conditions::set(
            &mut status.conditions,
            c.clone(),
            machine.metadata.generation,
            now,
        );
        (c, moved)
    });
    Step {
        action,
        status,
        ready,
        transitioned,
        reconfigured,
    }
}

fn decide(
    machine: &VSphereMachine,
    observed: &Observation,
    deleting: bool,
    status: &mut VSphereMachineStatus,
    recorded_operation: Option<&str>,
    reconfigured: &mut Option<Observed>,
) -> (Action, Observed) {
    let spec = &machine.spec;
    let not_ready =
        |reason: &str, message: String| Observed::new(READY, Status::False, reason, message);

    // A task in flight is waited for, whatever else is true.
    if let Some(task) = observed.task.as_ref().filter(|t| t.state.in_progress()) {
        status.task = Some(task_status(task, recorded_operation.map(String::from)));
        let reason = if deleting {
            reason::DELETING
        } else {
            reason_of(recorded_operation)
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
    // A finished (or forgotten) task is done with; a failure is reported,
    // and the next reconcile (after a backoff) tries again.
    // A resize refused because the VM's configuration changed since it was
    // decided (it landed before, sent twice; or another change) is decided
    // afresh from what the VM has, not a failure.
    let superseded = |t: &&TaskFacts| {
        recorded_operation == Some(operation::RESIZE)
            && t.error
                .as_ref()
                .is_some_and(|e| e.is_fault("ConcurrentAccess"))
    };
    let failure = observed
        .task
        .as_ref()
        .filter(|t| t.state == TaskState::Error && !superseded(t))
        .map(|t| {
            let op = recorded_operation.unwrap_or("task");
            let why = t
                .error
                .as_ref()
                .map(std::string::ToString::to_string)
                .unwrap_or_else(|| "no reason given".into());
            format!("{op} ({}) failed: {why}", t.mo_ref)
        });
    let duplicate = recorded_operation == Some(operation::CLONE)
        && observed
            .task
            .as_ref()
            .and_then(|t| t.error.as_ref())
            .is_some_and(|e| e.is_fault("DuplicateName") || e.is_fault("FileAlreadyExists"));
    status.task = None;

    match (&observed.vm, deleting) {
        (None, true) => (
            Action::RemoveFinalizer,
            not_ready(reason::DELETING, "the VM is gone".into()),
        ),
        (Some(vm), true) if vm.power_state != "poweredOff" => (
            Action::PowerOff {
                vm: vm.mo_ref.clone(),
                graceful: false,
            },
            not_ready(
                reason::DELETING,
                format!("powering {} off before destroying it", vm.mo_ref),
            ),
        ),
        (Some(vm), true) => (
            Action::Destroy(vm.mo_ref.clone()),
            not_ready(reason::DELETING, format!("destroying {}", vm.mo_ref)),
        ),
        (None, false) => match failure {
            // A clone refused because its name is taken: most likely our own
            // clone sent before (a lost response, a crash) that vCenter is
            // still making; wait to find it by instance UUID.
            Some(message) if duplicate => (
                Action::Idle,
                not_ready(
                    reason::CLONING,
                    format!("{message}; waiting to find the VM by instance UUID"),
                ),
            ),
            Some(message) => (Action::Idle, not_ready(reason::FAILED, message)),
            None => match unsupported(machine) {
                Some(message) => (Action::Idle, not_ready(reason::FAILED, message)),
                None => (
                    Action::Clone,
                    not_ready(
                        reason::CLONING,
                        format!(
                            "cloning {} in {}/{}",
                            spec.template.name, spec.datacenter, spec.cluster
                        ),
                    ),
                ),
            },
        },
        (Some(vm), false) => {
            if let Some(message) = failure {
                return (Action::Idle, not_ready(reason::FAILED, message));
            }
            if !status.provisioned && !vm.has_shape(&configured_shape(machine)) && !vm.powered_on()
            {
                return (
                    Action::Reconfigure(vm.mo_ref.clone()),
                    not_ready(
                        reason::RECONFIGURING,
                        format!(
                            "{} has {} CPUs, {} MiB, {} firmware; applying {} CPUs, {} MiB, {}",
                            vm.mo_ref,
                            vm.cpus,
                            vm.memory_mib,
                            vm.firmware,
                            spec.cpus,
                            spec.memory_mib,
                            spec.firmware.as_str()
                        ),
                    ),
                );
            }
            status.provisioned = true;
            let power = power(machine, vm);
            let resize = resize(machine, vm, status);
            let disks = disks(machine, vm, status);
            // The condition that matters most: a refusal, then what the
            // CPUs and memory need, then disks being changed, then kept ones.
            *reconfigured = Some(
                [
                    disks.refused.clone(),
                    Some(resize.condition.clone()).filter(|c| c.status != Status::True),
                    disks.action.as_ref().map(|_| disks.condition.clone()),
                    disks.kept.clone(),
                ]
                .into_iter()
                .flatten()
                .next()
                .unwrap_or_else(|| resize.condition.clone()),
            );
            // Off: a pending change is applied before the VM is on again.
            if let (Some(action), false) = (&resize.action, vm.powered_on()) {
                return (
                    action.clone(),
                    not_ready(reason::RECONFIGURING, resize.condition.message.clone()),
                );
            }
            // Disks are grown and added whether the VM runs or not.
            if let Some(action) = disks.action {
                let ready = if vm.powered_on() {
                    power.1.clone()
                } else {
                    not_ready(reason::RECONFIGURING, disks.condition.message.clone())
                };
                return (action, ready);
            }
            if let Some(step) = restart(machine, vm, status) {
                return step;
            }
            if matches!(power.0, Action::PowerOff { .. }) {
                return power;
            }
            match resize.action {
                Some(action) => (action, power.1),
                None if resize.restart => (
                    Action::PowerOff {
                        vm: vm.mo_ref.clone(),
                        graceful: true,
                    },
                    not_ready(
                        reason::POWERING_OFF,
                        format!(
                            "restarting {} to apply a change (update policy AllowRestart): {}",
                            vm.mo_ref, resize.condition.message
                        ),
                    ),
                ),
                None => power,
            }
        }
    }
}

/// The power action and `Ready` of a provisioned VM as its spec asks.
fn power(machine: &VSphereMachine, vm: &VmFacts) -> (Action, Observed) {
    let spec = &machine.spec;
    let not_ready =
        |reason: &str, message: String| Observed::new(READY, Status::False, reason, message);
    match spec.desired_power_state {
        PowerState::PoweredOn if !vm.powered_on() => (
            Action::PowerOn(vm.mo_ref.clone()),
            not_ready(reason::POWERING_ON, format!("powering {} on", vm.mo_ref)),
        ),
        PowerState::PoweredOn if needs_ip(machine) && vm.ip_addresses.is_empty() => (
            Action::Idle,
            not_ready(
                reason::WAITING_FOR_IP,
                format!(
                    "{} is on; waiting for the guest to report an IP address",
                    vm.mo_ref
                ),
            ),
        ),
        PowerState::PoweredOn => (
            Action::Idle,
            Observed::new(
                READY,
                Status::True,
                reason::POWERED_ON,
                format!("{} is on{}", vm.mo_ref, ip_suffix(vm)),
            ),
        ),
        PowerState::PoweredOff if vm.power_state == "poweredOn" => (
            Action::PowerOff {
                vm: vm.mo_ref.clone(),
                graceful: true,
            },
            not_ready(reason::POWERING_OFF, format!("shutting {} down", vm.mo_ref)),
        ),
        PowerState::PoweredOff => (
            Action::Idle,
            Observed::new(
                READY,
                Status::True,
                reason::POWERED_OFF,
                format!("{} is off, as asked", vm.mo_ref),
            ),
        ),
    }
}

/// What a provisioned VM's CPUs and memory need: an action now (live on a
/// running VM with hot add for what grows, or while it is off), a restart
/// (the update policy allows one), or nothing until a power cycle.
struct ResizeNeed {
    action: Option<Action>,
    restart: bool,
    /// `Reconfigured`.
    condition: Observed,
}

fn resize(machine: &VSphereMachine, vm: &VmFacts, status: &mut VSphereMachineStatus) -> ResizeNeed {
    let spec = &machine.spec;
    let shape = configured_shape(machine);
    let (cpus, memory) = (shape.cpus, shape.memory_mib);
    let condition = |s: Status, reason: &str, message: String| {
        Observed::new(conditions::RECONFIGURED, s, reason, message)
    };
    if vm.cpus == cpus && vm.memory_mib == memory {
        status.resize = None;
        return ResizeNeed {
            action: None,
            restart: false,
            condition: condition(
                Status::True,
                reason::UP_TO_DATE,
                format!("{} has {cpus} CPUs and {memory} MiB, as asked", vm.mo_ref),
            ),
        };
    }
    // A change recorded before: still the one asked for, on the
    // configuration it was decided on (not applied yet: never sent, or
    // refused), it is sent again under the same change version; otherwise
    // it is decided afresh.
    if let Some(recorded) = &status.resize {
        let same = recorded.cpus == spec.cpus && recorded.memory_mib == spec.memory_mib;
        let moved = recorded
            .change_version
            .as_deref()
            .is_some_and(|v| v != vm.change_version);
        if !same || moved {
            status.resize = None;
        }
    }
    let what = format!(
        "{cpus} CPUs and {memory} MiB (it has {} CPUs and {} MiB)",
        vm.cpus, vm.memory_mib
    );
    let grows_cpu = cpus > vm.cpus;
    let grows_memory = memory > vm.memory_mib;
    let shrinks = cpus < vm.cpus || memory < vm.memory_mib;
    let live = vm.powered_on()
        && !shrinks
        && (!grows_cpu || vm.cpu_hot_add)
        && (!grows_memory || vm.memory_hot_add);
    if live || vm.power_state == "poweredOff" {
        let recorded = status.resize.get_or_insert_with(|| ResizeStatus {
            cpus: spec.cpus,
            memory_mib: spec.memory_mib,
            change_version: Some(vm.change_version.clone()).filter(|v| !v.is_empty()),
        });
        let how = if live { "live" } else { "while it is off" };
        return ResizeNeed {
            action: Some(Action::Resize {
                vm: vm.mo_ref.clone(),
                resize: Resize {
                    cpus,
                    memory_mib: memory,
                    change_version: recorded.change_version.clone(),
                },
            }),
            restart: false,
            condition: condition(
                Status::False,
                reason::APPLYING,
                format!("giving {} {what} {how}", vm.mo_ref),
            ),
        };
    }
    status.resize = None;
    let why = if shrinks {
        "fewer CPUs or less memory need the VM off"
    } else {
        "the VM has no hot add for what grows"
    };
    let restart = spec.update_policy == Some(UpdatePolicy::AllowRestart);
    ResizeNeed {
        action: None,
        restart,
        condition: condition(
            Status::False,
            reason::POWER_CYCLE_REQUIRED,
            format!(
                "{} is to get {what}: {why}; {}",
                vm.mo_ref,
                if restart {
                    "restarting it (update policy AllowRestart)"
                } else {
                    "applied the next time it is off (or set spec.updatePolicy: AllowRestart)"
                }
            ),
        ),
    }
}

/// What a provisioned VM's disks need (see [`disks`]).
struct DiskNeed {
    action: Option<Action>,
    /// `Reconfigured` while the action is under way.
    condition: Observed,
    /// A shrink asked for and refused.
    refused: Option<Observed>,
    /// Disks the VM has that the spec no longer names.
    kept: Option<Observed>,
}

/// Disks of a provisioned VM against `spec.disks`, by the device keys in
/// `status.disks` (recorded at first sight: the first disk is the root, the
/// last ones those the clone added after the template's own): what grows is
/// grown, what is new added (recorded first, keyless, with the change
/// version it is decided on, and given the key of the disk that appears), a
/// shrink refused and never attempted, a disk gone from the spec kept with
/// its data.
fn disks(machine: &VSphereMachine, vm: &VmFacts, status: &mut VSphereMachineStatus) -> DiskNeed {
    let spec = &machine.spec.disks;
    let condition = |s: Status, reason: &str, message: String| {
        Observed::new(conditions::RECONFIGURED, s, reason, message)
    };
    let mut need = DiskNeed {
        action: None,
        condition: condition(Status::True, reason::UP_TO_DATE, String::new()),
        refused: None,
        kept: None,
    };
    if spec.is_empty() || vm.disks.is_empty() {
        return need;
    }
    if status.disks.is_empty() {
        // The clone's disks: the root, the template's others, then the added ones.
        let Some(first_added) = (vm.disks.len() + 1)
            .checked_sub(spec.len())
            .filter(|t| *t >= 1)
        else {
            return need;
        };
        status.disks = spec
            .iter()
            .enumerate()
            .map(|(i, d)| DiskStatus {
                name: d.name.clone(),
                key: vm
                    .disks
                    .get(if i == 0 { 0 } else { first_added - 1 + i })
                    .map(|(key, _)| *key),
            })
            .collect();
    }
    // Additions in flight take the disks that appeared, in order; while
    // none did and the configuration has not moved they are sent again under
    // the same change version, and once it has moved they are decided afresh.
    let appeared: Vec<i32> = vm
        .disks
        .iter()
        .map(|(key, _)| *key)
        .filter(|key| !status.disks.iter().any(|d| d.key == Some(*key)))
        .collect();
    let mut appeared = appeared.into_iter();
    for d in status.disks.iter_mut().filter(|d| d.key.is_none()) {
        d.key = appeared.next();
    }
    let moved = status
        .disks_change_version
        .as_deref()
        .is_some_and(|v| v != vm.change_version);
    if moved {
        status.disks.retain(|d| d.key.is_some());
    }
    if status.disks.iter().all(|d| d.key.is_some()) {
        status.disks_change_version = None;
    }
    let mut grow = Vec::new();
    let mut add = Vec::new();
    let mut refused = Vec::new();
    // A linked clone's root disk is a child of the template's: it keeps the
    // template's size (vCenter does not grow a disk with a parent).
    let linked = machine.spec.clone_mode.is_linked();
    for (index, disk) in spec.iter().enumerate() {
        let wanted = disk.size_gib.min(i64::MAX as u64 / 1024 / 1024) as i64 * 1024 * 1024;
        let extra = ExtraDisk {
            size_gib: disk.size_gib,
            provisioning: disk.provisioning,
            datastore: disk_datastore(disk, status.placement.as_ref()),
            datastore_cluster: disk.datastore_cluster.clone(),
        };
        let recorded = status.disks.iter().find(|d| d.name == disk.name);
        let on_vm = recorded
            .and_then(|d| d.key)
            .and_then(|key| vm.disks.iter().find(|(k, _)| *k == key));
        match (recorded, on_vm) {
            (Some(_), Some(_)) if linked && index == 0 => {}
            (Some(_), Some(&(key, has))) if wanted > has => grow.push((key, wanted)),
            (Some(_), Some(&(_, has))) if wanted < has => refused.push(format!(
                "{} is {} GiB, not {} GiB: disks never shrink",
                disk.name,
                has / 1024 / 1024,
                disk.size_gib
            )),
            (Some(_), Some(_)) => {}
            // In flight, or its disk is gone from the VM: (again) added.
            (Some(_), None) => add.push(extra),
            (None, _) => {
                status.disks.push(DiskStatus {
                    name: disk.name.clone(),
                    key: None,
                });
                add.push(extra);
            }
        }
    }
    if !refused.is_empty() {
        need.refused = Some(condition(
            Status::False,
            reason::DISK_SHRINK_REFUSED,
            format!("{}: nothing attempted", refused.join("; ")),
        ));
    }
    let gone: Vec<&str> = status
        .disks
        .iter()
        .filter(|d| !spec.iter().any(|s| s.name == d.name))
        .map(|d| d.name.as_str())
        .collect();
    if !gone.is_empty() {
        need.kept = Some(condition(
            Status::False,
            reason::DISK_KEPT,
            format!(
                "{} no longer in the spec: kept with its data (remove it in vCenter if it is not wanted)",
                gone.join(", ")
            ),
        ));
    }
    if grow.is_empty() && add.is_empty() {
        return need;
    }
    let current = Some(vm.change_version.clone()).filter(|v| !v.is_empty());
    if !add.is_empty() && status.disks_change_version.is_none() {
        status.disks_change_version = current.clone();
    }
    need.condition = condition(
        Status::False,
        reason::APPLYING,
        format!(
            "growing {} and adding {} disk(s) on {}",
            grow.len(),
            add.len(),
            vm.mo_ref
        ),
    );
    need.action = Some(Action::Disks {
        vm: vm.mo_ref.clone(),
        changes: DiskChanges {
            datacenter: machine.spec.datacenter.clone(),
            grow,
            add,
            change_version: status.disks_change_version.clone().or(current),
        },
    });
    need
}

/// A restart asked for by `spec.restartRequestedAt` (the VirtualMachine's
/// annotation), once per distinct value: recorded (`Stopping`) before the
/// guest is shut down, `Starting` before the power-on, handled
/// (`status.restartedAt`) once the VM is on again. A VM that is off, or
/// asked to be, is not restarted: the value is handled as it is.
fn restart(
    machine: &VSphereMachine,
    vm: &VmFacts,
    status: &mut VSphereMachineStatus,
) -> Option<(Action, Observed)> {
    let restarting =
        |message: String| Observed::new(READY, Status::False, reason::RESTARTING, message);
    let power_off = Action::PowerOff {
        vm: vm.mo_ref.clone(),
        graceful: true,
    };
    let Some(mut running) = status.restart.clone() else {
        let asked = machine.spec.restart_requested_at.as_deref()?;
        if status.restarted_at.as_deref() == Some(asked) {
            return None;
        }
        if !vm.powered_on() || machine.spec.desired_power_state == PowerState::PoweredOff {
            status.restarted_at = Some(asked.to_string());
            return None;
        }
        status.restart = Some(RestartStatus {
            requested_at: asked.to_string(),
            phase: RestartPhase::Stopping,
        });
        return Some((
            power_off,
            restarting(format!(
                "restarting {} (asked at {asked}): shutting the guest down",
                vm.mo_ref
            )),
        ));
    };
    let asked = running.requested_at.clone();
    match (running.phase, vm.power_state.as_str()) {
        (RestartPhase::Stopping, "poweredOn") => Some((
            power_off,
            restarting(format!(
                "restarting {} (asked at {asked}): shutting the guest down",
                vm.mo_ref
            )),
        )),
        (RestartPhase::Stopping, _) | (RestartPhase::Starting, "poweredOff" | "suspended") => {
            running.phase = RestartPhase::Starting;
            status.restart = Some(running);
            Some((
                Action::PowerOn(vm.mo_ref.clone()),
                restarting(format!(
                    "restarting {} (asked at {asked}): powering it on",
                    vm.mo_ref
                )),
            ))
        }
        (RestartPhase::Starting, _) => {
            status.restart = None;
            status.restarted_at = Some(asked);
            None
        }
    }
}

/// Why the machine cannot be made as asked, before anything is cloned: a
/// NIC still on an IP pool has no bound address (the provider role binds
/// pool NICs before the driver runs and hands it static addresses; `check`
/// binds only the manifests' built-in pools with a free address), and a NIC
/// silently on DHCP would be a machine other than the one asked for.
fn unsupported(machine: &VSphereMachine) -> Option<String> {
    let nic = machine
        .spec
        .network_interfaces
        .iter()
        .find(|n| n.ipam.pool.is_some())?;
    let pool = nic
        .ipam
        .pool
        .as_ref()
        .map(|p| p.name.as_str())
        .unwrap_or_default();
    Some(format!(
        "interface {} asks for IP pool {pool:?} but has no address from it: check binds only a banlieue.io IPPool of the manifests with a free address (in a cluster the provider role binds any pool kind's claims); use ipam.static or DHCP (ipam: {{}}) otherwise",
        nic.name
    ))
}

/// The configuration part of the machine's shape (no devices, no guestinfo).
pub fn configured_shape(machine: &VSphereMachine) -> Shape {
    let spec = &machine.spec;
    Shape {
        cpus: spec.cpus.min(i32::MAX as u32) as i32,
        memory_mib: spec.memory_mib.min(i64::MAX as u64) as i64,
        firmware: spec.firmware,
        hot_add_cpu: spec.hot_add_cpu,
        hot_add_memory: spec.hot_add_memory,
        ..Default::default()
    }
}

fn ip_suffix(vm: &VmFacts) -> String {
    vm.ip_addresses
        .first()
        .map(|ip| format!(" at {ip}"))
        .unwrap_or_default()
}

/// The datastore a disk added later goes to: its own, or for a disk on a
/// datastore cluster the one chosen for the VM from that cluster (empty when
/// the VM's came from another: the cluster's with the most free space).
fn disk_datastore(disk: &MachineDisk, placement: Option<&PlacementStatus>) -> String {
    if !disk.datastore.is_empty() || disk.datastore_cluster.is_none() {
        return disk.datastore.clone();
    }
    placement
        .filter(|p| p.datastore_cluster == disk.datastore_cluster)
        .and_then(|p| p.datastore.as_deref())
        .and_then(|path| path.rsplit('/').next())
        .map(vsphere_client::inventory::unescape_name)
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::machine;
    use crate::vsphere;

    fn server() -> ServerIdentity {
        ServerIdentity {
            host: "vc".into(),
            server_guid: "g".into(),
        }
    }

    fn vm(power: &str, cpus: i32, memory: i64, ips: &[&str]) -> VmFacts {
        VmFacts {
            mo_ref: "vm-9".into(),
            name: "ns-web".into(),
            instance_uuid: "u".into(),
            power_state: power.into(),
            cpus,
            memory_mib: memory,
            ip_addresses: ips.iter().map(std::string::ToString::to_string).collect(),
            firmware: "bios".into(),
            ..Default::default()
        }
    }

    fn task(state: TaskState) -> TaskFacts {
        TaskFacts {
            mo_ref: "task-1".into(),
            state,
            progress: Some(40),
            error: None,
            result: None,
        }
    }

    fn run(m: &VSphereMachine, o: Observation, deleting: bool) -> Step {
        step(m, &o, deleting, &server(), &crate::conditions::now())
    }

    #[test]
    fn nothing_there_clones() {
        let s = run(&machine("web"), Observation::default(), false);
        assert_eq!(s.action, Action::Clone);
        assert_eq!(s.ready.reason, reason::CLONING);
        assert!(s.status.instance_uuid.is_some());
    }

    #[test]
    fn an_ip_pool_fails_clearly_instead_of_cloning_on_dhcp() {
        let m = crate::fixtures::with_pool_nic(machine("web"), "prod-pool");
        let s = run(&m, Observation::default(), false);
        assert_eq!(s.action, Action::Idle, "nothing is cloned");
        assert_eq!(s.ready.reason, reason::FAILED);
        assert!(
            s.ready.message.contains("eth0") && s.ready.message.contains("prod-pool"),
            "{}",
            s.ready.message
        );
        // A VM that exists already (made before) is still mirrored and managed.
        let s = run(
            &m,
            Observation {
                vm: Some(vm("poweredOn", 2, 2048, &["10.0.0.5"])),
                task: None,
            },
            false,
        );
        assert_ne!(s.ready.reason, reason::FAILED);
    }

    #[test]
    fn a_running_clone_is_waited_for_never_repeated() {
        let mut m = machine("web");
        m.status = Some(VSphereMachineStatus {
            task: Some(TaskStatus {
                mo_ref: "task-1".into(),
                progress: None,
                state: "running".into(),
                operation: Some(operation::CLONE.into()),
            }),
            ..Default::default()
        });
        for deleting in [false, true] {
            let s = run(
                &m,
                Observation {
                    vm: None,
                    task: Some(task(TaskState::Running)),
                },
                deleting,
            );
            assert_eq!(s.action, Action::WaitTask("task-1".into()));
            assert_eq!(s.status.task.as_ref().and_then(|t| t.progress), Some(40));
        }
        assert_eq!(
            run(
                &m,
                Observation {
                    vm: None,
                    task: Some(task(TaskState::Queued))
                },
                false
            )
            .ready
            .reason,
            reason::CLONING
        );
    }

    #[test]
    fn a_failed_clone_reports_the_fault_and_clears_the_task() {
        let mut m = machine("web");
        m.status = Some(VSphereMachineStatus {
            task: Some(TaskStatus {
                mo_ref: "task-1".into(),
                progress: None,
                state: "running".into(),
                operation: Some(operation::CLONE.into()),
            }),
            ..Default::default()
        });
        let mut failed = task(TaskState::Error);
        failed.error = Some(vsphere::Error::fault(
            "InsufficientResourcesFault",
            "not enough CPU",
        ));
        let s = run(
            &m,
            Observation {
                vm: None,
                task: Some(failed),
            },
            false,
        );
        assert_eq!(s.action, Action::Idle);
        assert!(s.failed());
        assert!(
            s.ready.message.contains("InsufficientResourcesFault")
                && s.ready.message.contains("clone"),
            "{}",
            s.ready.message
        );
        assert!(s.status.task.is_none());
        m.status = Some(s.status);
        assert_eq!(
            run(&m, Observation::default(), false).action,
            Action::Clone,
            "retried on the next reconcile"
        );
    }

    #[test]
    fn a_clone_without_the_shape_is_reconfigured_then_powered_on_then_waits_for_ip() {
        let m = machine("web"); // 2 CPUs, 2048 MiB
        let s = run(
            &m,
            Observation {
                vm: Some(vm("poweredOff", 1, 32, &[])),
                task: None,
            },
            false,
        );
        assert_eq!(s.action, Action::Reconfigure("vm-9".into()));
        assert_eq!(s.ready.reason, reason::RECONFIGURING);
        let s = run(
            &m,
            Observation {
                vm: Some(vm("poweredOff", 2, 2048, &[])),
                task: None,
            },
            false,
        );
        assert_eq!(s.action, Action::PowerOn("vm-9".into()));
        assert!(s.status.provisioned);
        let s = run(
            &m,
            Observation {
                vm: Some(vm("poweredOn", 2, 2048, &[])),
                task: None,
            },
            false,
        );
        assert_eq!(
            (s.action.clone(), s.ready.reason.as_str()),
            (Action::Idle, reason::WAITING_FOR_IP)
        );
        let s = run(
            &m,
            Observation {
                vm: Some(vm("poweredOn", 2, 2048, &["10.0.0.5"])),
                task: None,
            },
            false,
        );
        assert_eq!(s.ready.status, Status::True);
        assert_eq!(s.status.ip_addresses, vec!["10.0.0.5"]);
        assert_eq!(s.status.power_state.as_deref(), Some("PoweredOn"));
        assert_eq!(
            s.status.console_url.as_deref(),
            Some("https://vc/ui/app/vm;nav=h/urn:vmomi:VirtualMachine:vm-9:g")
        );
    }

    #[test]
    fn deferred_install_is_ready_once_on() {
        let mut m = machine("web");
        m.spec.install_mode = InstallMode::Deferred;
        let s = run(
            &m,
            Observation {
                vm: Some(vm("poweredOn", 2, 2048, &[])),
                task: None,
            },
            false,
        );
        assert_eq!(s.ready.status, Status::True);
    }

    #[test]
    fn desired_off_shuts_down_gracefully() {
        let mut m = machine("web");
        m.spec.desired_power_state = PowerState::PoweredOff;
        let s = run(
            &m,
            Observation {
                vm: Some(vm("poweredOn", 2, 2048, &[])),
                task: None,
            },
            false,
        );
        assert_eq!(
            s.action,
            Action::PowerOff {
                vm: "vm-9".into(),
                graceful: true
            }
        );
        let s = run(
            &m,
            Observation {
                vm: Some(vm("poweredOff", 2, 2048, &[])),
                task: None,
            },
            false,
        );
        assert_eq!((s.action, s.ready.status), (Action::Idle, Status::True));
    }

    #[test]
    fn delete_powers_off_destroys_then_releases() {
        let m = machine("web");
        assert_eq!(
            run(
                &m,
                Observation {
                    vm: Some(vm("poweredOn", 2, 2048, &[])),
                    task: None
                },
                true
            )
            .action,
            Action::PowerOff {
                vm: "vm-9".into(),
                graceful: false
            }
        );
        assert_eq!(
            run(
                &m,
                Observation {
                    vm: Some(vm("poweredOff", 2, 2048, &[])),
                    task: None
                },
                true
            )
            .action,
            Action::Destroy("vm-9".into())
        );
        assert_eq!(
            run(&m, Observation::default(), true).action,
            Action::RemoveFinalizer
        );
    }

    fn provisioned(mut m: VSphereMachine) -> VSphereMachine {
        m.spec.guest_agent = Some("none".into());
        m.status = Some(VSphereMachineStatus {
            provisioned: true,
            ..Default::default()
        });
        m
    }

    fn hot_add(mut v: VmFacts) -> VmFacts {
        v.cpu_hot_add = true;
        v.memory_hot_add = true;
        v.change_version = "7".into();
        v
    }

    fn on_vm(v: VmFacts) -> Observation {
        Observation {
            vm: Some(v),
            task: None,
        }
    }

    fn reconfigured(s: &Step) -> (Status, String) {
        s.reconfigured
            .as_ref()
            .map(|(c, _)| (c.status, c.reason.clone()))
            .expect("Reconfigured")
    }

    #[test]
    fn more_cpus_and_memory_on_a_running_hot_add_vm_are_applied_live_and_recorded_first() {
        let mut m = provisioned(machine("web"));
        m.spec.cpus = 4;
        m.spec.memory_mib = 4096;
        let s = run(&m, on_vm(hot_add(vm("poweredOn", 2, 2048, &[]))), false);
        assert_eq!(
            s.action,
            Action::Resize {
                vm: "vm-9".into(),
                resize: Resize {
                    cpus: 4,
                    memory_mib: 4096,
                    change_version: Some("7".into())
                }
            }
        );
        assert_eq!(
            s.status.resize,
            Some(ResizeStatus {
                cpus: 4,
                memory_mib: 4096,
                change_version: Some("7".into())
            }),
            "recorded before it is sent"
        );
        assert_eq!(s.ready.status, Status::True, "the running VM stays Ready");
        assert_eq!(reconfigured(&s), (Status::False, reason::APPLYING.into()));
        // Once the VM has it, the record goes.
        m.status = Some(s.status);
        let s = run(&m, on_vm(hot_add(vm("poweredOn", 4, 4096, &[]))), false);
        assert_eq!(s.action, Action::Idle);
        assert_eq!(s.status.resize, None);
        assert_eq!(reconfigured(&s), (Status::True, reason::UP_TO_DATE.into()));
    }

    #[test]
    fn a_decrease_or_growth_without_hot_add_waits_for_a_power_cycle_then_lands_while_off() {
        let mut m = provisioned(machine("web"));
        m.spec.cpus = 1;
        let s = run(&m, on_vm(hot_add(vm("poweredOn", 2, 2048, &[]))), false);
        assert_eq!(s.action, Action::Idle, "no surprise restart");
        assert_eq!(s.ready.status, Status::True);
        assert_eq!(
            reconfigured(&s),
            (Status::False, reason::POWER_CYCLE_REQUIRED.into())
        );
        assert_eq!(s.status.resize, None, "nothing recorded: nothing sent");
        let mut grows = provisioned(machine("web"));
        grows.spec.cpus = 4;
        let s = run(&grows, on_vm(vm("poweredOn", 2, 2048, &[])), false);
        assert_eq!(
            (s.action.clone(), reconfigured(&s).1),
            (Action::Idle, reason::POWER_CYCLE_REQUIRED.to_string()),
            "no hot add"
        );
        // Powered off (desired on): the change first, then on again.
        let s = run(&m, on_vm(hot_add(vm("poweredOff", 2, 2048, &[]))), false);
        assert!(
            matches!(&s.action, Action::Resize { resize, .. } if resize.cpus == 1),
            "{:?}",
            s.action
        );
        assert_eq!(s.ready.reason, reason::RECONFIGURING);
        let s = run(&m, on_vm(hot_add(vm("poweredOff", 1, 2048, &[]))), false);
        assert_eq!(s.action, Action::PowerOn("vm-9".into()));
        // Asked off: shut down first, the change applied once it is off.
        m.spec.desired_power_state = PowerState::PoweredOff;
        let s = run(&m, on_vm(hot_add(vm("poweredOn", 2, 2048, &[]))), false);
        assert!(
            matches!(s.action, Action::PowerOff { graceful: true, .. }),
            "{:?}",
            s.action
        );
    }

    #[test]
    fn allow_restart_shuts_the_guest_down_to_apply_at_once() {
        let mut m = provisioned(machine("web"));
        m.spec.cpus = 1;
        m.spec.update_policy = Some(UpdatePolicy::AllowRestart);
        let s = run(&m, on_vm(hot_add(vm("poweredOn", 2, 2048, &[]))), false);
        assert_eq!(
            s.action,
            Action::PowerOff {
                vm: "vm-9".into(),
                graceful: true
            }
        );
        assert_eq!(s.ready.reason, reason::POWERING_OFF);
    }

    #[test]
    fn a_recorded_resize_is_sent_again_only_on_the_configuration_it_was_decided_on() {
        let mut m = provisioned(machine("web"));
        m.spec.cpus = 4;
        let recorded = ResizeStatus {
            cpus: 4,
            memory_mib: 2048,
            change_version: Some("7".into()),
        };
        if let Some(st) = m.status.as_mut() {
            st.resize = Some(recorded.clone());
        }
        let mut v = hot_add(vm("poweredOn", 2, 2048, &[]));
        let s = run(&m, on_vm(v.clone()), false);
        assert!(
            matches!(&s.action, Action::Resize { resize, .. } if resize.change_version.as_deref() == Some("7"))
        );
        // The configuration moved since (another change landed): decided afresh.
        v.change_version = "8".into();
        let s = run(&m, on_vm(v), false);
        assert!(
            matches!(&s.action, Action::Resize { resize, .. } if resize.change_version.as_deref() == Some("8"))
        );
        assert_eq!(
            s.status.resize.and_then(|r| r.change_version).as_deref(),
            Some("8")
        );
        // A resize refused as superseded is no failure.
        if let Some(st) = m.status.as_mut() {
            st.task = Some(TaskStatus {
                mo_ref: "task-1".into(),
                progress: None,
                state: "running".into(),
                operation: Some(operation::RESIZE.into()),
            });
        }
        let mut refused = task(TaskState::Error);
        refused.error = Some(vsphere::Error::fault("ConcurrentAccess", "changed"));
        let s = run(
            &m,
            Observation {
                vm: Some(hot_add(vm("poweredOn", 4, 2048, &[]))),
                task: Some(refused),
            },
            false,
        );
        assert!(!s.failed(), "{:?}", s.ready);
        assert_eq!(s.action, Action::Idle);
    }

    #[test]
    fn a_restart_request_restarts_once_through_recorded_phases() {
        let mut m = provisioned(machine("web"));
        m.spec.restart_requested_at = Some("2026-12-06T10:00:00Z".into());
        let on = on_vm(vm("poweredOn", 2, 2048, &[]));
        let off = on_vm(vm("poweredOff", 2, 2048, &[]));
        let s = run(&m, on.clone(), false);
        assert_eq!(
            s.action,
            Action::PowerOff {
                vm: "vm-9".into(),
                graceful: true
            }
        );
        assert_eq!(s.ready.reason, reason::RESTARTING);
        assert_eq!(
            s.status.restart.as_ref().map(|r| r.phase),
            Some(RestartPhase::Stopping),
            "recorded before the shutdown"
        );
        m.status = Some(s.status);
        // Still on (a crash before the shutdown): shut down, not yet restarted.
        assert!(matches!(
            run(&m, on.clone(), false).action,
            Action::PowerOff { .. }
        ));
        let s = run(&m, off.clone(), false);
        assert_eq!(s.action, Action::PowerOn("vm-9".into()));
        assert_eq!(
            s.status.restart.as_ref().map(|r| r.phase),
            Some(RestartPhase::Starting),
            "recorded before the power-on"
        );
        m.status = Some(s.status);
        // On again: handled, never a second restart for the value.
        let s = run(&m, on.clone(), false);
        assert_eq!(s.action, Action::Idle);
        assert_eq!(s.status.restart, None);
        assert_eq!(
            s.status.restarted_at.as_deref(),
            Some("2026-12-06T10:00:00Z")
        );
        m.status = Some(s.status);
        assert_eq!(run(&m, on.clone(), false).action, Action::Idle);
        // A VM that is off is not restarted: the value is handled as it is.
        m.spec.restart_requested_at = Some("2026-12-06T11:00:00Z".into());
        let s = run(&m, off, false);
        assert_eq!(s.action, Action::PowerOn("vm-9".into()), "desired on");
        assert_eq!(
            s.status.restarted_at.as_deref(),
            Some("2026-12-06T11:00:00Z")
        );
        assert_eq!(s.status.restart, None);
    }

    #[test]
    fn conditions_do_not_move_when_nothing_changed() {
        let mut m = machine("web");
        let o = Observation {
            vm: Some(vm("poweredOn", 2, 2048, &["10.0.0.5"])),
            task: None,
        };
        let first = run(&m, o.clone(), false);
        assert!(first.transitioned);
        m.status = Some(first.status.clone());
        let second = run(&m, o, false);
        assert!(!second.transitioned);
        assert_eq!(second.status, first.status);
    }

    #[test]
    fn a_linked_clone_s_root_disk_keeps_the_template_s_size_a_full_clone_s_grows() {
        // The fixture asks for a 20 GiB root disk; the VM's is 10 GiB.
        let mut v = vm("poweredOn", 2, 2048, &[]);
        v.disks = vec![(2000, 10 * 1024 * 1024)];
        let full = provisioned(machine("web"));
        let s = run(&full, on_vm(v.clone()), false);
        assert!(
            matches!(&s.action, Action::Disks { changes, .. } if changes.grow == [(2000, 20 * 1024 * 1024)]),
            "{:?}",
            s.action
        );
        let mut linked = provisioned(machine("web"));
        linked.spec.clone_mode = crate::api::CloneMode::Linked;
        let s = run(&linked, on_vm(v), false);
        assert_eq!(s.action, Action::Idle);
        assert_eq!(reconfigured(&s), (Status::True, reason::UP_TO_DATE.into()));
    }
}

#[cfg(test)]
mod disk_datastore_tests {
    use super::*;

    /// A disk added later on a datastore cluster goes where the VM's disks
    /// on that cluster went; on another cluster, the one with the most free
    /// space (empty); a disk on a datastore, there.
    #[test]
    fn an_added_disk_on_a_datastore_cluster_follows_the_vms_choice() {
        let disk = |datastore: &str, pod: Option<&str>| MachineDisk {
            name: "data".into(),
            size_gib: 1,
            storage_class: "c".into(),
            datastore: datastore.into(),
            datastore_cluster: pod.map(Into::into),
            provisioning: Default::default(),
        };
        let placed = PlacementStatus {
            datastore: Some("/DC0/datastore/pod-1/ds%2f1".into()),
            datastore_cluster: Some("pod-1".into()),
            ..Default::default()
        };
        assert_eq!(
            disk_datastore(&disk("", Some("pod-1")), Some(&placed)),
            "ds/1"
        );
        assert_eq!(disk_datastore(&disk("", Some("pod-2")), Some(&placed)), "");
        assert_eq!(disk_datastore(&disk("", Some("pod-1")), None), "");
        assert_eq!(
            disk_datastore(&disk("LocalDS_0", None), Some(&placed)),
            "LocalDS_0"
        );
    }
}
