//! The vSphere boundary: everything the operator asks of vCenter, as plain
//! data and one trait family, with no Kubernetes type in it.
//!
//! - [`VSphere`] opens (or reuses) a Provider's [`Session`];
//! - [`Session`] reads the inventory and finds templates;
//! - [`Machines`] (a supertrait of every session) creates, changes and
//!   destroys VMs, and reports their facts and tasks;
//! - [`Snapshots`] (also a supertrait of every session, in [`snapshots`])
//!   takes, reverts and removes VM snapshots;
//! - [`Error`] is the one error of the boundary, with an [`ErrorKind`] whose
//!   [`label`](ErrorKind::label) is stable (metrics, condition reasons).
//!
//! The real backend is [`vcenter`] (on `vsphere-client`); `mock` (only under
//! `cfg(test)` or the `testing` feature) is a scripted one, so the same
//! reconcile code runs in a cluster, in tests and in `check`.
//!
//! Contract for implementations:
//! - `connect` is called on every Provider reconcile. It returns the Provider's
//!   live session, logging in only when there is none yet or when the
//!   connection parameters changed (rotated credentials or CA): one session per
//!   Provider, never a login per reconcile.
//! - Errors carry an [`ErrorKind`] the roles map onto condition reasons, and a
//!   message that names the cause (TLS, login, fault) and never a secret.
//! - Every call ends within the Provider's call deadline
//!   ([`ConnectParams::call_deadline`]); one that does not is
//!   [`ErrorKind::Unresponsive`], and the session that met it is given back
//!   with [`VSphere::session_unresponsive`] so the next `connect` logs in anew.
//! - Every started VM operation returns its task's reference at once, so it is
//!   recorded before it is waited for.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::future::Future;
use std::time::Duration;

use crate::api::{Firmware, NamespacedReference, Provisioning};

#[cfg(any(test, feature = "testing"))]
pub mod mock;
pub mod snapshots;
pub mod vcenter;

pub use snapshots::{SnapshotFacts, SnapshotRequest, Snapshots};

/// A password or other secret: never printed, not even by `Debug`.
#[derive(Clone, PartialEq, Eq)]
pub struct SecretString(String);

impl SecretString {
    pub fn new(value: impl Into<String>) -> Self {
        SecretString(value.into())
    }
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for SecretString {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

/// How to verify vCenter's certificate.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Tls {
    /// The system roots.
    SystemRoots,
    /// A private CA (PEM, one or more certificates).
    CaBundle(String),
    /// No verification (`insecureSkipTLSVerify`).
    Insecure,
}

/// Everything needed to open a session for one Provider.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConnectParams {
    pub provider: NamespacedReference,
    /// The SDK URL, e.g. `https://vcenter.example.com/sdk`.
    pub endpoint: String,
    pub username: String,
    pub password: SecretString,
    pub tls: Tls,
    /// Longest one call may take, its retries included (`spec.connection.callDeadline`).
    pub call_deadline: Duration,
}

/// What a vCenter holds that failure domains are made of: datacenters, their
/// clusters with the datastores mounted on each, and their portgroups.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Inventory {
    pub datacenters: Vec<Datacenter>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Datacenter {
    pub name: String,
    pub clusters: Vec<Cluster>,
    /// Names of the standard and distributed portgroups of the datacenter.
    pub portgroups: Vec<String>,
}

/// A compute resource VMs can go to: a cluster, or a host outside any
/// cluster (a standalone host, whose compute resource bears its name).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Cluster {
    pub name: String,
    /// Names of the datastores mounted on (every host of) the cluster.
    pub datastores: Vec<String>,
    /// Names of the datastore clusters (StoragePods) holding one of `datastores`.
    pub datastore_clusters: Vec<String>,
    /// A standalone host (`ComputeResource`), not a cluster.
    pub standalone: bool,
}

/// A resource pool and folder a Provider gives a failure domain, verified at
/// its reconcile ([`Session::verify_placement`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PlacementTarget {
    pub datacenter: String,
    /// The cluster's (or standalone host's) name.
    pub cluster: String,
    /// A path under the compute resource's root pool, or a pool's name.
    pub resource_pool: Option<String>,
    /// A path under the datacenter's VM folder; its last level is made when absent.
    pub folder: Option<String>,
}

/// Why a [`PlacementTarget`] cannot be had: what is missing, said in full.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PlacementMissing {
    ResourcePool(String),
    Folder(String),
}

/// An inventory object a placement chose: its path and reference.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Located {
    /// The inventory path (`/DC0/host/C0/Resources/team-a`).
    pub path: String,
    /// Its managed object type and reference value.
    pub type_: String,
    pub mo_ref: String,
}

impl Located {
    /// The last level of the path, unescaped: the object's name.
    pub fn name(&self) -> String {
        let last = self.path.rsplit('/').next().unwrap_or_default();
        vsphere_client::inventory::unescape_name(last)
    }
}

/// Where a clone goes, decided before it is sent ([`Machines::place`]) and
/// recorded in the VSphereMachine's status.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Placement {
    pub resource_pool: Located,
    pub folder: Located,
    /// The VM's datastore; `None`: the template's.
    pub datastore: Option<Located>,
    /// The datastore cluster `datastore` was chosen from.
    pub datastore_cluster: Option<String>,
    /// The host, when the compute resource is a standalone host.
    pub host: Option<Located>,
    /// How the datastore was chosen from the datastore cluster.
    pub note: Option<String>,
    /// A linked clone's base snapshot, `<template>@<snapshot reference>`
    /// (see [`CloneRequest::linked`]).
    pub linked_clone_base: Option<String>,
}

/// A template found in one datacenter.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FoundTemplate {
    /// Managed object reference value (`vm-42`).
    pub mo_ref: String,
}

/// A content library item, as the REST side describes it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LibraryItemFacts {
    pub id: String,
    pub name: String,
    /// The library's name.
    pub library: String,
    /// `ovf`, `vm-template`, or another type (`iso`, `file`...).
    pub item_type: String,
    /// Moves with each change of the item's content (empty when unknown).
    pub content_version: String,
}

impl LibraryItemFacts {
    /// Can it be deployed as a VM (an OVF template or a VM template)?
    pub fn deployable(&self) -> bool {
        matches!(self.item_type.as_str(), "ovf" | "vm-template")
    }

    /// What the templates of every version of this item are named with.
    pub fn template_prefix(&self) -> String {
        format!("banlieue-{}-v", self.id)
    }

    /// The template a deploy of this item's content makes in each
    /// datacenter: named after the item's id and content version, so a
    /// changed item is deployed anew and the name is a plain VM name.
    pub fn template_name(&self) -> String {
        let version = Some(self.content_version.as_str())
            .filter(|v| !v.is_empty())
            .unwrap_or("0");
        format!("{}{version}", self.template_prefix())
    }
}

/// A content library item looked up by library and item names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LibraryItemLookup {
    NoLibrary,
    NoItem,
    Found(LibraryItemFacts),
}

/// Where a content library item's template is deployed: a failure domain
/// of `datacenter` (`cluster`, its resource pool and folder), and the
/// datastore of one of its storage classes; resolved as a clone's
/// placement is.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ImageTarget {
    pub datacenter: String,
    pub cluster: String,
    /// The template's name ([`LibraryItemFacts::template_name`]).
    pub name: String,
    /// The failure domain's resource pool (a path under the compute
    /// resource's root pool, or a pool's name); its root pool when `None`.
    pub resource_pool: Option<String>,
    /// The failure domain's VM folder (a path under the datacenter's VM
    /// folder, its last level made when absent); [`IMAGES_FOLDER`] when `None`.
    pub folder: Option<String>,
    /// The datastore (by name), or the datastore cluster it is chosen from
    /// (the one with the most free space); vCenter's choice when neither.
    pub datastore: Option<String>,
    pub datastore_cluster: Option<String>,
}

/// The VM folder (under each datacenter's) of content library items'
/// templates, made when missing.
pub const IMAGES_FOLDER: &str = "banlieue-images";

/// What failed at the boundary.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    /// TLS, network or login failure, or a session lost during a call.
    Connect,
    /// Logged in, but walking the inventory failed.
    Inventory,
    /// A lookup (templates, VMs) failed.
    Lookup,
    /// A VM or task operation failed; vCenter's fault type, when it sent one,
    /// is in [`Error::fault`].
    Operation,
    /// A wait gave up (the operation itself goes on in vCenter).
    Timeout,
    /// vCenter did not answer a call within the call deadline (a wedged
    /// server, or a half-dead connection through a proxy): nothing is known
    /// of the call's effect.
    Unresponsive,
}

impl ErrorKind {
    /// A stable name for metrics and logs (the `error` label of
    /// `banlieue_reconcile_errors_total`).
    pub fn label(self) -> &'static str {
        match self {
            ErrorKind::Connect => "vsphere_connect",
            ErrorKind::Inventory => "vsphere_inventory",
            ErrorKind::Lookup => "vsphere_lookup",
            ErrorKind::Operation => "vsphere_operation",
            ErrorKind::Timeout => "vsphere_timeout",
            ErrorKind::Unresponsive => "vsphere_unresponsive",
        }
    }
}

/// A failure reaching or changing vCenter: its kind, the fault type when
/// vCenter returned one (`DuplicateName`, `ManagedObjectNotFound`...), and a
/// message that names the cause and never holds a secret.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error {
    pub kind: ErrorKind,
    pub fault: Option<String>,
    pub message: String,
}

impl Error {
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Error {
            kind,
            fault: None,
            message: message.into(),
        }
    }

    /// An operation that failed without a fault of vCenter's.
    pub fn operation(message: impl Into<String>) -> Self {
        Error::new(ErrorKind::Operation, message)
    }

    /// An operation vCenter refused with `fault`.
    pub fn fault(fault: impl Into<String>, message: impl Into<String>) -> Self {
        Error {
            kind: ErrorKind::Operation,
            fault: Some(fault.into()),
            message: message.into(),
        }
    }

    /// A wait that gave up.
    pub fn timeout(message: impl Into<String>) -> Self {
        Error::new(ErrorKind::Timeout, message)
    }

    pub fn timed_out(&self) -> bool {
        self.kind == ErrorKind::Timeout
    }

    /// vCenter did not answer within the call deadline.
    pub fn unresponsive(&self) -> bool {
        self.kind == ErrorKind::Unresponsive
    }

    pub fn is_fault(&self, name: &str) -> bool {
        self.fault.as_deref() == Some(name)
    }

    /// The object is gone: the one answer that lets a delete finish.
    pub fn is_not_found(&self) -> bool {
        self.is_fault("ManagedObjectNotFound")
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.fault {
            Some(fault) if !self.message.contains(fault.as_str()) => {
                write!(f, "{fault}: {}", self.message)
            }
            _ => f.write_str(&self.message),
        }
    }
}

impl std::error::Error for Error {}

/// Opens (or reuses) the session of a Provider.
pub trait VSphere: Send + Sync + 'static {
    type Session: Session;

    fn connect(
        &self,
        params: &ConnectParams,
    ) -> impl Future<Output = Result<Self::Session, Error>> + Send;

    /// The instance UUIDs of VMs that changed (from the Providers' update
    /// streams), when the implementation watches them.
    fn machine_changes(&self) -> Option<tokio::sync::broadcast::Receiver<String>> {
        None
    }

    /// `session` met a call vCenter did not answer within the deadline
    /// ([`ErrorKind::Unresponsive`]): it is dropped, so the next `connect`
    /// of its Provider logs in on a new connection rather than reusing what
    /// may be a wedged session (its update stream included).
    fn session_unresponsive(&self, session: &Self::Session) {
        let _ = session;
    }

    /// Ends the sessions of Providers not in `keep` (deleted ones; all of
    /// them when `keep` is empty, as the role stops).
    fn retain_sessions(
        &self,
        keep: &BTreeSet<NamespacedReference>,
    ) -> impl Future<Output = ()> + Send {
        let _ = keep;
        async {}
    }
}

/// A logged-in vCenter session: the inventory and templates, and (through
/// [`Machines`]) the VMs. Cheap to clone.
pub trait Session: Machines + Snapshots {
    /// Datacenters, clusters, mounted datastores and portgroups, in as few
    /// round trips as the PropertyCollector allows.
    fn inventory(&self) -> impl Future<Output = Result<Inventory, Error>> + Send;

    /// Verifies a failure domain's resource pool and folder, making the
    /// folder's last level when it is absent; what is missing, if anything.
    fn verify_placement(
        &self,
        target: &PlacementTarget,
    ) -> impl Future<Output = Result<Option<PlacementMissing>, Error>> + Send;

    /// For each datacenter in `datacenters`, the template named `name` there
    /// (a template, not a plain VM; or a template banlieue was giving its
    /// linked-clone snapshot when it stopped, a VM for now, which the real
    /// backend finishes), or `None` when it has none.
    fn find_template(
        &self,
        name: &str,
        datacenters: &[String],
    ) -> impl Future<Output = Result<BTreeMap<String, Option<FoundTemplate>>, Error>> + Send;

    /// The item `item` of the content library `library` (names, as the
    /// REST side finds them).
    fn find_library_item(
        &self,
        library: &str,
        item: &str,
    ) -> impl Future<Output = Result<LibraryItemLookup, Error>> + Send {
        let _ = (library, item);
        async {
            Err(Error::new(
                ErrorKind::Lookup,
                "content libraries are not supported by this backend",
            ))
        }
    }

    /// The template `target.name` in `target`'s folder (by default
    /// [`IMAGES_FOLDER`]): `item` deployed there as a VM (OVF or VM-template
    /// deploy) into `target`'s resource pool and datastore, and marked a
    /// template, unless it exists (a VM of that name there is marked a
    /// template: a deploy that stopped halfway).
    fn deploy_library_item(
        &self,
        item: &LibraryItemFacts,
        target: &ImageTarget,
    ) -> impl Future<Output = Result<FoundTemplate, Error>> + Send {
        let _ = (item, target);
        async {
            Err(Error::operation(
                "content libraries are not supported by this backend",
            ))
        }
    }

    /// Destroys the templates of `datacenters` named as an older version of
    /// `item` would be (`banlieue-<item id>-v<other>`, templates only), but
    /// those named in `keep`; the names of those destroyed.
    fn remove_library_templates(
        &self,
        item: &LibraryItemFacts,
        datacenters: &[String],
        keep: &BTreeSet<String>,
    ) -> impl Future<Output = Result<Vec<String>, Error>> + Send {
        let _ = (item, datacenters, keep);
        async { Ok(Vec::new()) }
    }
}

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
    /// `config.changeVersion`: moves with every change of the VM's
    /// configuration (empty when vCenter does not report one).
    pub change_version: String,
    /// The ESXi host it runs on, by name (its reference when the name
    /// cannot be read; empty when vCenter reports none).
    pub host: String,
    /// Its virtual disks in device order: (device key, capacity in KiB).
    pub disks: Vec<(i32, i64)>,
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
    pub error: Option<Error>,
    /// The task's result when it is a reference (a clone's new VM).
    pub result: Option<String>,
}

/// A disk added to the clone.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExtraDisk {
    pub size_gib: u64,
    pub provisioning: Provisioning,
    /// The datastore's name (empty: the one of `datastore_cluster` with the most free space).
    pub datastore: String,
    /// The datastore cluster holding `datastore`.
    pub datastore_cluster: Option<String>,
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
    /// The template's first disk copied with this provisioning.
    pub root_disk_provisioning: Option<Provisioning>,
    pub extra_disks: Vec<ExtraDisk>,
    pub nics: Vec<Nic>,
    pub firmware: Firmware,
    pub vtpm: bool,
    pub hot_add_cpu: bool,
    pub hot_add_memory: bool,
    /// `extraConfig` keys: the `guestinfo.*` cloud-init data.
    pub extra_config: Vec<(String, String)>,
}

/// A provisioned VM's CPUs and memory, changed in place (live on a running
/// VM with hot add, or while it is off).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Resize {
    pub cpus: i32,
    pub memory_mib: i64,
    /// The VM's `config.changeVersion` the change applies to: vCenter refuses
    /// it (`ConcurrentAccess`) once the configuration changed since, so a
    /// request sent again after a crash is never applied twice.
    pub change_version: Option<String>,
}

/// Disk changes of a provisioned VM, applied whether it runs or not: disks
/// grown (by device key, to a size in KiB) and added.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DiskChanges {
    /// Where the added disks' datastores are.
    pub datacenter: String,
    pub grow: Vec<(i32, i64)>,
    pub add: Vec<ExtraDisk>,
    /// As for [`Resize`]: vCenter refuses the change once the VM's
    /// configuration moved since it was decided.
    pub change_version: Option<String>,
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
    /// Where the VM's files and root disk go (the template's datastore when
    /// `None` and no `datastore_cluster`).
    pub datastore: Option<String>,
    /// The datastore cluster the VM's datastore is chosen from (Storage DRS).
    pub datastore_cluster: Option<String>,
    /// A path under the compute resource's root pool, or a pool's name (the root pool when `None`).
    pub resource_pool: Option<String>,
    /// `folder` is a path under the datacenter's VM folder whose levels
    /// above the last must exist (a configured folder); otherwise a folder
    /// made right under the VM folder (`banlieue-<failure domain>`).
    pub folder_is_path: bool,
    /// Where it goes, once [`Machines::place`] decided (see [`CloneRequest::placed`]).
    pub placement: Option<Placement>,
    /// A linked clone: child disks of the template's current snapshot (taken
    /// once, on a template that is not running, when it has none: the
    /// template turned into a VM in the clone's resource pool for it, and
    /// back); the root disk keeps the template's size and provisioning.
    pub linked: bool,
    pub shape: Shape,
}

impl CloneRequest {
    /// The request with its placement decided: added disks on the VM's
    /// datastore cluster go to the datastore chosen for the VM.
    pub fn placed(mut self, placement: Placement) -> CloneRequest {
        if let (Some(pod), Some(datastore)) = (&placement.datastore_cluster, &placement.datastore) {
            for disk in &mut self.shape.extra_disks {
                if disk.datastore.is_empty() && disk.datastore_cluster.as_ref() == Some(pod) {
                    disk.datastore = datastore.name();
                }
            }
        }
        self.placement = Some(placement);
        self
    }
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
/// The mock's VM store implements it alone (the driver's tests need no
/// inventory); every [`Session`] implements it.
pub trait Machines: Clone + Send + Sync + 'static {
    /// The VM with this instance UUID. `fresh` asks vCenter directly; otherwise
    /// an implementation may answer from the Provider's update stream, but
    /// only with a VM it has: `None` is always vCenter's own answer (the
    /// driver clones on it without asking again).
    fn find_vm(
        &self,
        instance_uuid: &str,
        fresh: bool,
    ) -> impl Future<Output = Result<Option<VmFacts>, Error>> + Send;

    /// The VM by its reference (one read); `None` when it is gone. `fresh`
    /// as for [`find_vm`](Self::find_vm).
    fn vm(
        &self,
        mo_ref: &str,
        fresh: bool,
    ) -> impl Future<Output = Result<Option<VmFacts>, Error>> + Send;

    /// Whether `find_vm(_, false)` may answer from a cache (an update stream)
    /// rather than vCenter itself.
    fn cached(&self) -> bool {
        false
    }

    /// A task's state; `None` when vCenter no longer knows it (old tasks expire).
    fn task(&self, mo_ref: &str) -> impl Future<Output = Result<Option<TaskFacts>, Error>> + Send;

    /// Waits (up to `timeout`) for a task to finish; `on_progress` sees each change.
    fn wait_task(
        &self,
        mo_ref: &str,
        timeout: Duration,
        on_progress: impl FnMut(&TaskFacts) + Send,
    ) -> impl Future<Output = Result<TaskFacts, Error>> + Send;

    /// Decides where the clone of `request` goes (resource pool, folder,
    /// datastore, host), making its folder when absent; a pool, folder
    /// parent, datastore or datastore cluster that is not there is an error
    /// with the fault `NotFound`.
    fn place(
        &self,
        request: &CloneRequest,
    ) -> impl Future<Output = Result<Placement, Error>> + Send;

    /// Sends the clone; where it goes is `request.placement` (decided by
    /// [`place`](Self::place) when `None`).
    fn start_clone(
        &self,
        request: &CloneRequest,
    ) -> impl Future<Output = Result<String, Error>> + Send;

    /// Applies CPUs and memory to an existing VM (a clone whose shape differs).
    fn start_reconfigure(
        &self,
        vm: &str,
        shape: &Shape,
    ) -> impl Future<Output = Result<String, Error>> + Send;

    /// Changes a provisioned VM's CPUs and memory (only those: no device,
    /// no firmware), under the change version it was decided on.
    fn start_resize(
        &self,
        vm: &str,
        resize: &Resize,
    ) -> impl Future<Output = Result<String, Error>> + Send;

    /// Grows and adds disks of a provisioned VM (never shrinks or removes
    /// one), under the change version it was decided on.
    fn start_disks(
        &self,
        vm: &str,
        changes: &DiskChanges,
    ) -> impl Future<Output = Result<String, Error>> + Send;

    fn start_power_on(&self, vm: &str) -> impl Future<Output = Result<String, Error>> + Send;

    /// Powers off: asks the guest first when `graceful` is set and waits for
    /// it that long, then hard. Returns once the VM is off.
    fn power_off(
        &self,
        vm: &str,
        graceful: Option<Duration>,
    ) -> impl Future<Output = Result<(), Error>> + Send;

    fn start_destroy(&self, vm: &str) -> impl Future<Output = Result<String, Error>> + Send;

    fn server(&self) -> ServerIdentity;
}
