use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{
    conditions_schema, CloudConfig, Condition, LabelSelector, LocalObjectReference, PoolAndFolder,
    PowerState, SnapshotRetention, StaticIp,
};

/// The annotation that asks for a restart of the guest, holding a timestamp
/// (as `kubectl rollout restart`'s `restartedAt`): the provider restarts the
/// VM once per distinct value.
pub const RESTART_ANNOTATION: &str = "banlieue.io/restart-requested-at";

/// The only resource an end user writes: a VM of a class, from an image.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "banlieue.io",
    version = "v1alpha1",
    kind = "VirtualMachine",
    namespaced,
    shortname = "vm",
    status = "VirtualMachineStatus",
    derive = "PartialEq",
    printcolumn(name = "CLASS", type_ = "string", json_path = ".spec.classRef.name"),
    printcolumn(name = "IMAGE", type_ = "string", json_path = ".spec.imageRef.name"),
    printcolumn(
        name = "PROVIDER",
        type_ = "string",
        json_path = ".status.scheduled.provider"
    ),
    printcolumn(name = "POWER", type_ = "string", json_path = ".status.powerState"),
    printcolumn(
        name = "READY",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Ready\")].status"
    ),
    printcolumn(name = "IP", type_ = "string", json_path = ".status.ipAddresses[0]")
)]
#[serde(rename_all = "camelCase")]
pub struct VirtualMachineSpec {
    /// The VMClass (cluster-scoped). Immutable.
    #[schemars(extend("x-kubernetes-validations" = [{"rule": "self == oldSelf", "message": "classRef is immutable"}]))]
    pub class_ref: LocalObjectReference,
    /// The VMImage (cluster-scoped). Immutable.
    #[schemars(extend("x-kubernetes-validations" = [{"rule": "self == oldSelf", "message": "imageRef is immutable"}]))]
    pub image_ref: LocalObjectReference,
    /// Where the VM may go (Provider and failure domain selectors) and where
    /// in vCenter: its own `resourcePool` and `folder`, written as the
    /// Provider's `spec.placement` ones are and in place of them. These are
    /// not verified before the clone: one that is not in vCenter makes the
    /// VSphereMachine `Ready=False`, reason `PlacementNotFound`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placement: Option<Placement>,
    #[serde(default)]
    pub desired_power_state: PowerState,
    /// How many of the VM's VMSnapshots are kept (see VMSnapshot).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot_retention: Option<SnapshotRetention>,
    /// What the provider may do when a change of the VM's class cannot be
    /// applied to the running VM (fewer CPUs or less memory, or no hot
    /// add): `WaitForPowerCycle` (the default) applies it the next time the
    /// VM is off; `AllowRestart` shuts the guest down, applies it and powers
    /// the VM on again at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub update_policy: Option<UpdatePolicy>,
    /// The guest's host name (cloud-init's `local-hostname`): a DNS name;
    /// the VirtualMachine's name when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253))]
    pub hostname: Option<String>,
    /// This VM's own addresses: a static address (with prefix), gateway,
    /// nameservers and search domains for an interface of the VMClass, by
    /// its name, in place of the class's `ipam`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub network_overrides: Vec<NetworkOverride>,
    /// Cloud-init data of this VM: Secrets in the VirtualMachine's
    /// namespace with `userdata` and/or `metadata` keys, merged after the
    /// VMImage's `cloudConfigs` (user data parts in order, later metadata
    /// keys winning; the instance id, host name and network config the
    /// operator sets win over both).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cloud_configs: Vec<CloudConfig>,
}

/// One interface of the VMClass with this VM's own static address.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NetworkOverride {
    /// The interface's name in the VMClass (`spec.network.interfaces[].name`).
    #[schemars(length(min = 1))]
    pub name: String,
    #[serde(rename = "static")]
    pub static_: StaticIp,
}

/// When a change that needs the VM off is applied.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default, JsonSchema)]
pub enum UpdatePolicy {
    /// The next time the VM is off (powered off by the user or through
    /// `desiredPowerState`); never a restart the user did not ask for.
    #[default]
    WaitForPowerCycle,
    /// At once: the guest is shut down (hard after a timeout), the change
    /// applied, and the VM powered on again.
    AllowRestart,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Placement {
    /// Matched against Provider labels.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider_selector: Option<LabelSelector>,
    /// Matched against `status.failureDomains[].labels` of the Provider.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_domain_selector: Option<LabelSelector>,
    /// This VM's resource pool and folder (see `placement`).
    #[serde(flatten)]
    pub target: PoolAndFolder,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VirtualMachineStatus {
    /// Where the VM was placed; never changes once set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheduled: Option<ScheduledPlacement>,
    /// Mirrored from the VSphereMachine.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub power_state: Option<String>,
    /// The guest's IP addresses as VMware Tools reports them, the primary
    /// first (mirrored from the VSphereMachine).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ip_addresses: Vec<String>,
    /// The VM's page in the vSphere Client (mirrored from the VSphereMachine).
    #[serde(
        default,
        rename = "consoleURL",
        skip_serializing_if = "Option::is_none"
    )]
    pub console_url: Option<String>,
    /// The VM's instance UUID in vCenter (mirrored from the VSphereMachine).
    #[serde(
        default,
        rename = "instanceUUID",
        skip_serializing_if = "Option::is_none"
    )]
    pub instance_uuid: Option<String>,
    /// The ESXi host the VM runs on (mirrored from the VSphereMachine).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// The last `banlieue.io/restart-requested-at` value the provider
    /// handled (mirrored from the VSphereMachine).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restarted_at: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "conditions_schema")]
    pub conditions: Vec<Condition>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}

/// The scheduler's decision: provider, failure domain and resolved classes.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ScheduledPlacement {
    /// The Provider's name.
    pub provider: String,
    /// The Provider's namespace.
    pub provider_namespace: String,
    pub failure_domain: String,
    pub datacenter: String,
    pub cluster: String,
    /// The resource pool: the VirtualMachine's `spec.placement`, else the
    /// failure domain's (none: the root pool).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_pool: Option<String>,
    /// The VM folder: the VirtualMachine's `spec.placement`, else the
    /// failure domain's (none: `banlieue-<failure domain>`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub folder: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub storage: Vec<ResolvedStorage>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub network: Vec<ResolvedNetwork>,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResolvedStorage {
    pub storage_class: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub datastore: String,
    /// The datastore cluster, when the storage class targets one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub datastore_cluster: Option<String>,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResolvedNetwork {
    pub network_class: String,
    pub port_group: String,
}

impl VirtualMachine {
    pub fn scheduled(&self) -> Option<&ScheduledPlacement> {
        self.status.as_ref()?.scheduled.as_ref()
    }
}
