use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{
    conditions_schema, Condition, LabelSelector, LocalObjectReference, PowerState,
    SnapshotRetention,
};

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
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placement: Option<Placement>,
    #[serde(default)]
    pub desired_power_state: PowerState,
    /// How many of the VM's VMSnapshots are kept (see VMSnapshot).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot_retention: Option<SnapshotRetention>,
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
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub storage: Vec<ResolvedStorage>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub network: Vec<ResolvedNetwork>,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResolvedStorage {
    pub storage_class: String,
    pub datastore: String,
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
