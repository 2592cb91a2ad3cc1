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
use crate::api::{InstallMode, PowerState, TaskStatus, VSphereMachine, VSphereMachineStatus};
use crate::conditions::{self, Observed, Status, READY};
use crate::vsphere::{ServerIdentity, Shape, TaskFacts, TaskState, VmFacts};

/// `Ready` condition reasons (what each means: [`crate::api::reasons`]).
pub mod reason {
    pub use crate::api::reasons::vspheremachine::*;
}

/// Task operations, as recorded in `status.task.operation`.
pub mod operation {
    pub const CLONE: &str = "clone";
    pub const RECONFIGURE: &str = "reconfigure";
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
        Some(operation::RECONFIGURE) => reason::RECONFIGURING,
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
            status.console_url = (!server.host.is_empty())
                .then(|| identity::console_url(&server.host, &vm.mo_ref, &server.server_guid));
        }
        None => {
            status.mo_ref = None;
            status.power_state = None;
            status.ip_addresses = Vec::new();
            status.console_url = None;
            status.provisioned = false;
        }
    }

    let (action, ready) = decide(
        machine,
        observed,
        deleting,
        &mut status,
        recorded_operation.as_deref(),
    );
    let transitioned = conditions::set(
        &mut status.conditions,
        ready.clone(),
        machine.metadata.generation,
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
    machine: &VSphereMachine,
    observed: &Observation,
    deleting: bool,
    status: &mut VSphereMachineStatus,
    recorded_operation: Option<&str>,
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
    let failure = observed
        .task
        .as_ref()
        .filter(|t| t.state == TaskState::Error)
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
}
