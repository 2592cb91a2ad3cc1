//! What the lifecycle needs from vCenter, as plain data: the [`Machines`]
//! trait the real backend (`lifecycle::vcenter`), the mock and check mode
//! implement, and the facts it reports.

use std::fmt;
use std::future::Future;
use std::time::Duration;

use crate::api::{Firmware, Provisioning};

/// A VM as vCenter reports it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct VmFacts {
    /// Managed object reference value (`vm-42`).
    pub mo_ref: String,
    pub name: String,
    pub instance_uuid: String,
    /// `poweredOn`, `poweredOff` or `suspended` (vSphere's spelling).
    pub power_state: String,
    pub cpus: i32,
    pub memory_mib: i64,
    /// The guest's addresses (VMware tools), primary first.
    pub ip_addresses: Vec<String>,
    /// `bios` or `efi`.
    pub firmware: String,
    pub secure_boot: bool,
    pub cpu_hot_add: bool,
    pub memory_hot_add: bool,
}

impl VmFacts {
    pub fn powered_on(&self) -> bool {
        self.power_state == "poweredOn"
    }

    /// Does the VM have what `shape` asks of its configuration (CPUs,
    /// memory, firmware, secure boot, hot add)? Devices are set at clone
    /// time; these are what a clone may not take (a simulator does not).
    pub fn has_shape(&self, shape: &Shape) -> bool {
        let (firmware, secure_boot) = match shape.firmware {
            Firmware::Bios => ("bios", false),
            Firmware::Efi => ("efi", false),
            Firmware::EfiSecure => ("efi", true),
        };
        self.cpus == shape.cpus
            && self.memory_mib == shape.memory_mib
            && self.firmware == firmware
            && self.secure_boot == secure_boot
            && (!shape.hot_add_cpu || self.cpu_hot_add)
            && (!shape.hot_add_memory || self.memory_hot_add)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TaskState {
    Queued,
    Running,
    Success,
    Error,
}

impl TaskState {
    pub fn as_str(self) -> &'static str {
        match self {
            TaskState::Queued => "queued",
            TaskState::Running => "running",
            TaskState::Success => "success",
            TaskState::Error => "error",
        }
    }

    pub fn parse(s: &str) -> Option<TaskState> {
        Some(match s {
            "queued" => TaskState::Queued,
            "running" => TaskState::Running,
            "success" => TaskState::Success,
            "error" => TaskState::Error,
            _ => return None,
        })
    }

    pub fn in_progress(self) -> bool {
        matches!(self, TaskState::Queued | TaskState::Running)
    }
}

/// A vSphere task as vCenter reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TaskFacts {
    pub mo_ref: String,
    pub state: TaskState,
    pub progress: Option<i32>,
    /// The fault's type and message, when the task failed.
    pub error: Option<MachineError>,
    /// The task's result when it is a reference (a clone's new VM).
    pub result: Option<String>,
}

/// A failure reaching or changing vCenter: the fault type when vCenter
/// returned one (`DuplicateName`, `ManagedObjectNotFound`...), and a message
/// that never holds a secret.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MachineError {
    pub fault: Option<String>,
    pub message: String,
    /// A wait that gave up (the operation itself goes on).
    pub timed_out: bool,
}

impl MachineError {
    pub fn new(message: impl Into<String>) -> Self {
        MachineError {
            fault: None,
            message: message.into(),
            timed_out: false,
        }
    }

    pub fn fault(fault: impl Into<String>, message: impl Into<String>) -> Self {
        MachineError {
            fault: Some(fault.into()),
            message: message.into(),
            timed_out: false,
        }
    }

    pub fn timeout(message: impl Into<String>) -> Self {
        MachineError {
            fault: None,
            message: message.into(),
            timed_out: true,
        }
    }

    pub fn is_fault(&self, name: &str) -> bool {
        self.fault.as_deref() == Some(name)
    }

    /// The object is gone: the one answer that lets a delete finish.
    pub fn is_not_found(&self) -> bool {
        self.is_fault("ManagedObjectNotFound")
    }
}

impl fmt::Display for MachineError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.fault {
            Some(fault) if !self.message.contains(fault.as_str()) => {
                write!(f, "{fault}: {}", self.message)
            }
            _ => f.write_str(&self.message),
        }
    }
}

impl std::error::Error for MachineError {}

impl From<crate::vsphere::Error> for MachineError {
    fn from(e: crate::vsphere::Error) -> Self {
        MachineError::new(e.message)
    }
}

/// A disk added to the clone.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExtraDisk {
    pub size_gib: u64,
    pub provisioning: Provisioning,
    pub datastore: String,
}

/// A NIC of the clone (the template's NICs are replaced).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Nic {
    pub port_group: String,
    /// A fixed MAC in VMware's manual range, so the guest's network config
    /// can match it before the VM exists.
    pub mac_address: String,
}

/// The hardware and guest configuration the clone gets.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Shape {
    pub cpus: i32,
    pub memory_mib: i64,
    /// The template's first disk grown to this size.
    pub root_disk_gib: Option<u64>,
    pub extra_disks: Vec<ExtraDisk>,
    pub nics: Vec<Nic>,
    pub firmware: Firmware,
    pub vtpm: bool,
    pub hot_add_cpu: bool,
    pub hot_add_memory: bool,
    /// `extraConfig` keys: the `guestinfo.*` cloud-init data.
    pub extra_config: Vec<(String, String)>,
}

/// Everything a clone needs, resolved from the VSphereMachine.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CloneRequest {
    pub name: String,
    pub instance_uuid: String,
    pub datacenter: String,
    pub cluster: String,
    /// The VM folder (under the datacenter's VM folder), made when missing.
    pub folder: String,
    pub template_name: String,
    pub template_mo_ref: Option<String>,
    /// Where the VM's files and root disk go (the template's datastore when `None`).
    pub datastore: Option<String>,
    pub shape: Shape,
}

/// The vCenter a console URL points at.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ServerIdentity {
    /// Host (and port, if not 443) of the vCenter.
    pub host: String,
    /// `AboutInfo.instanceUuid`: the server GUID in the vSphere Client's URLs.
    pub server_guid: String,
}

/// VM operations of one Provider's session. Every started operation returns
/// its task's reference at once, so it is recorded before it is waited for.
pub trait Machines: Clone + Send + Sync + 'static {
    /// The VM with this instance UUID. `fresh` asks vCenter directly; otherwise
    /// an implementation may answer from the Provider's update stream, but
    /// only with a VM it has: `None` is always vCenter's own answer (the
    /// driver clones on it without asking again).
    fn find_vm(
        &self,
        instance_uuid: &str,
        fresh: bool,
    ) -> impl Future<Output = Result<Option<VmFacts>, MachineError>> + Send;

    /// The VM by its reference (one read); `None` when it is gone. `fresh`
    /// as for [`find_vm`](Self::find_vm).
    fn vm(
        &self,
        mo_ref: &str,
        fresh: bool,
    ) -> impl Future<Output = Result<Option<VmFacts>, MachineError>> + Send;

    /// Whether `find_vm(_, false)` may answer from a cache (an update stream)
    /// rather than vCenter itself.
    fn cached(&self) -> bool {
        false
    }

    /// A task's state; `None` when vCenter no longer knows it (old tasks expire).
    fn task(
        &self,
        mo_ref: &str,
    ) -> impl Future<Output = Result<Option<TaskFacts>, MachineError>> + Send;

    /// Waits (up to `timeout`) for a task to finish; `on_progress` sees each change.
    fn wait_task(
        &self,
        mo_ref: &str,
        timeout: Duration,
        on_progress: impl FnMut(&TaskFacts) + Send,
    ) -> impl Future<Output = Result<TaskFacts, MachineError>> + Send;

    fn start_clone(
        &self,
        request: &CloneRequest,
    ) -> impl Future<Output = Result<String, MachineError>> + Send;

    /// Applies CPUs and memory to an existing VM (a clone whose shape differs).
    fn start_reconfigure(
        &self,
        vm: &str,
        shape: &Shape,
    ) -> impl Future<Output = Result<String, MachineError>> + Send;

    fn start_power_on(&self, vm: &str)
        -> impl Future<Output = Result<String, MachineError>> + Send;

    /// Powers off: asks the guest first when `graceful` is set and waits for
    /// it that long, then hard. Returns once the VM is off.
    fn power_off(
        &self,
        vm: &str,
        graceful: Option<Duration>,
    ) -> impl Future<Output = Result<(), MachineError>> + Send;

    fn start_destroy(&self, vm: &str) -> impl Future<Output = Result<String, MachineError>> + Send;

    fn server(&self) -> ServerIdentity;
}
