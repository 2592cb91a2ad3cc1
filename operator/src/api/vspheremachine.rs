use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{
    conditions_schema, CloneMode, Condition, Firmware, InstallMode, Ipam, LocalObjectReference,
    NamespacedReference, PowerState, Provisioning, UpdatePolicy,
};

/// The fully resolved backend request for one VirtualMachine, created by the
/// controller and reconciled by the vSphere provider.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "banlieue.io",
    version = "v1alpha1",
    kind = "VSphereMachine",
    namespaced,
    status = "VSphereMachineStatus",
    derive = "PartialEq",
    printcolumn(
        name = "PROVIDER",
        type_ = "string",
        json_path = ".spec.providerRef.name"
    ),
    printcolumn(
        name = "FAILURE-DOMAIN",
        type_ = "string",
        json_path = ".spec.failureDomain"
    ),
    printcolumn(name = "POWER", type_ = "string", json_path = ".status.powerState"),
    printcolumn(
        name = "READY",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Ready\")].status"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct VSphereMachineSpec {
    pub provider_ref: NamespacedReference,
    pub failure_domain: String,
    pub datacenter: String,
    pub cluster: String,
    pub template: TemplateRef,
    /// `full` or `linked` (the VMClass's `cloneMode`, else the VMImage's):
    /// used at clone time only.
    #[serde(default, skip_serializing_if = "is_full")]
    pub clone_mode: CloneMode,
    #[schemars(range(min = 1))]
    pub cpus: u32,
    #[serde(rename = "memoryMiB")]
    #[schemars(range(min = 4))]
    pub memory_mib: u64,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub disks: Vec<MachineDisk>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub network_interfaces: Vec<MachineNetworkInterface>,
    #[serde(default)]
    pub firmware: Firmware,
    /// Attach a virtual TPM.
    #[serde(default)]
    pub vtpm: bool,
    #[serde(default, rename = "hotAddCPU")]
    pub hot_add_cpu: bool,
    #[serde(default)]
    pub hot_add_memory: bool,
    #[serde(default)]
    pub desired_power_state: PowerState,
    /// Whether the clone installs its OS at first boot (`deferred`).
    #[serde(default)]
    pub install_mode: InstallMode,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub guest_agent: Option<String>,
    /// Secrets in the Provider's namespace with the cloud-config for the guest.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cloud_config_secret_refs: Vec<LocalObjectReference>,
    /// The VirtualMachine's update policy: whether a change that needs the
    /// VM off may restart it (default: wait for a power cycle).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub update_policy: Option<UpdatePolicy>,
    /// The VirtualMachine's `banlieue.io/restart-requested-at` annotation:
    /// the guest is restarted once per distinct value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restart_requested_at: Option<String>,
    /// The guest's host name (the VirtualMachine's `hostname`; this
    /// object's name when unset).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hostname: Option<String>,
    /// Secrets in this object's namespace (the VirtualMachine's) with its own
    /// cloud-config, merged after `cloudConfigSecretRefs`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub machine_cloud_config_secret_refs: Vec<LocalObjectReference>,
    /// The clone's resource pool (a path under the failure domain's root
    /// pool, or a pool's name): the VirtualMachine's, else its failure
    /// domain's; the root pool when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_pool: Option<String>,
    /// The clone's VM folder (a path under the datacenter's VM folder, its
    /// last level made when absent): the VirtualMachine's, else its failure
    /// domain's; `banlieue-<failure domain>` when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub folder: Option<String>,
}

fn is_full(mode: &CloneMode) -> bool {
    *mode == CloneMode::Full
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TemplateRef {
    /// The template's name in vCenter.
    pub name: String,
    /// The template's managed object reference in the scheduled datacenter, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mo_ref: Option<String>,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MachineDisk {
    pub name: String,
    #[serde(rename = "sizeGiB")]
    #[schemars(range(min = 1))]
    pub size_gib: u64,
    pub storage_class: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub datastore: String,
    /// The datastore cluster the disk's datastore is chosen from (at clone
    /// time; the choice is in `status.placement`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub datastore_cluster: Option<String>,
    #[serde(default)]
    pub provisioning: Provisioning,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MachineNetworkInterface {
    pub name: String,
    pub network_class: String,
    pub port_group: String,
    #[serde(default)]
    pub ipam: Ipam,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VSphereMachineStatus {
    /// The VM's instance UUID, derived from this object and set at clone time.
    #[serde(
        default,
        rename = "instanceUUID",
        skip_serializing_if = "Option::is_none"
    )]
    pub instance_uuid: Option<String>,
    /// Managed object reference value of the VM (`vm-123`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mo_ref: Option<String>,
    /// `PoweredOn`, `PoweredOff` or `Suspended`, as vCenter reports it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub power_state: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ip_addresses: Vec<String>,
    /// The ESXi host the VM runs on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// The vSphere task in progress (clone, reconfigure, power).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task: Option<TaskStatus>,
    #[serde(default)]
    pub provisioned: bool,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "conditions_schema")]
    pub conditions: Vec<Condition>,
    #[serde(
        default,
        rename = "consoleURL",
        skip_serializing_if = "Option::is_none"
    )]
    pub console_url: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// A change of CPUs and memory, recorded before it is sent to vCenter
    /// and cleared once the VM has it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resize: Option<ResizeStatus>,
    /// A restart under way, recorded before the VM is shut down.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restart: Option<RestartStatus>,
    /// The last `restartRequestedAt` value handled (the VM restarted for it,
    /// or it was off and stays off).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restarted_at: Option<String>,
    /// Which of the VM's virtual disks (by device key) is which of
    /// `spec.disks`: recorded once the VM is provisioned, and for a disk
    /// added later before it is sent (no key yet: an addition in flight,
    /// given the key of the disk that appears).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub disks: Vec<DiskStatus>,
    /// The VM's `config.changeVersion` the disk additions in flight were
    /// decided on (see `resize.changeVersion`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disks_change_version: Option<String>,
    /// Where the clone was placed, as decided before it was sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placement: Option<PlacementStatus>,
}

/// The placement of a clone: every choice made for it, as inventory paths.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PlacementStatus {
    /// The resource pool (`/DC0/host/C0/Resources/team-a`).
    pub resource_pool: String,
    /// The VM folder (`/DC0/vm/apps/web`).
    pub folder: String,
    /// The datastore of the VM's files and first disk; absent when the
    /// clone stays on the template's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub datastore: Option<String>,
    /// The datastore cluster `datastore` was chosen from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub datastore_cluster: Option<String>,
    /// The host, where the placement names one (a standalone host's failure
    /// domain); in a cluster DRS chooses (`status.host` is where it runs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// How the datastore was chosen from its datastore cluster: Storage DRS's
    /// recommendation, or the most free space and why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// A linked clone's base: the template's snapshot its disks are
    /// children of (`golden@snapshot-42`, the snapshot's reference), made
    /// ready (taken when the template had none) before the clone is sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub linked_clone_base: Option<String>,
}

/// One of `spec.disks` and its place among the VM's virtual disks.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DiskStatus {
    pub name: String,
    /// The disk's device key on the VM; absent while it is being added.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<i32>,
}

/// A restart under way: the value asked for, and how far it got.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RestartStatus {
    pub requested_at: String,
    /// `Stopping` (the guest is being shut down) or `Starting` (the VM is
    /// off and being powered on: recorded before the power-on is sent).
    pub phase: RestartPhase,
}

#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default, JsonSchema)]
pub enum RestartPhase {
    #[default]
    Stopping,
    Starting,
}

/// A CPU and memory change of a provisioned VM, as recorded before it is
/// sent: the values, and the VM's configuration version it applies to
/// (vCenter refuses it once the configuration changed since, so a request
/// sent again after a crash is applied once).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResizeStatus {
    pub cpus: u32,
    #[serde(rename = "memoryMiB")]
    pub memory_mib: u64,
    /// The VM's `config.changeVersion` when the change was decided.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub change_version: Option<String>,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TaskStatus {
    pub mo_ref: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 100))]
    pub progress: Option<i32>,
    /// `queued`, `running`, `success` or `error`.
    pub state: String,
    /// What the task does: `clone`, `reconfigure`, `resize`, `powerOn`, `destroy`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operation: Option<String>,
}

impl VSphereMachine {
    pub fn ready_condition(&self) -> Option<&Condition> {
        self.status
            .as_ref()
            .and_then(|s| s.conditions.iter().find(|c| c.type_ == "Ready"))
    }
}
