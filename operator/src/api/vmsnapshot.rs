use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{conditions_schema, Condition, LocalObjectReference, TaskStatus};

/// A vCenter snapshot of a VirtualMachine's VM, taken once, removed (its
/// disks consolidated) when this object is deleted, and reverted to on
/// request. Owned by its VirtualMachine: deleting the VirtualMachine deletes
/// its VMSnapshots (the VM goes with its snapshots).
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "banlieue.io",
    version = "v1alpha1",
    kind = "VMSnapshot",
    namespaced,
    shortname = "vmsnap",
    status = "VMSnapshotStatus",
    derive = "PartialEq",
    printcolumn(name = "VM", type_ = "string", json_path = ".spec.vmRef.name"),
    printcolumn(name = "SNAPSHOT", type_ = "string", json_path = ".status.snapshotID"),
    printcolumn(
        name = "READY",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Ready\")].status"
    ),
    printcolumn(name = "CREATED", type_ = "string", json_path = ".status.creationTime")
)]
#[serde(rename_all = "camelCase")]
pub struct VMSnapshotSpec {
    /// The VirtualMachine (same namespace) whose VM is snapshotted. Immutable.
    #[schemars(extend("x-kubernetes-validations" = [{"rule": "self == oldSelf", "message": "vmRef is immutable"}]))]
    pub vm_ref: LocalObjectReference,
    /// Include the VM's memory, so a revert resumes a running VM. Immutable.
    #[serde(default)]
    #[schemars(extend("x-kubernetes-validations" = [{"rule": "self == oldSelf", "message": "memory is immutable"}]))]
    pub memory: bool,
    /// Quiesce the guest's file systems first (needs VMware Tools). Immutable.
    #[serde(default)]
    #[schemars(extend("x-kubernetes-validations" = [{"rule": "self == oldSelf", "message": "quiesce is immutable"}]))]
    pub quiesce: bool,
    /// The snapshot's description in vCenter (the operator appends a line
    /// naming this object, by which it finds the snapshot again).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Reverts the VM to this snapshot, once per value: set it to a new
    /// value (a timestamp, a counter) to ask for one more revert. The last
    /// value handled and its outcome are in `status.lastRevert`; a value
    /// already handled does nothing, and neither does one present when the
    /// snapshot is first taken.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253))]
    pub revert_request: Option<String>,
}

/// How many of a VirtualMachine's VMSnapshots are kept (on the
/// VirtualMachine's `spec.snapshotRetention`). Only VMSnapshots count and
/// only they are deleted (their finalizers then remove their vCenter
/// snapshots): a snapshot made in vCenter by hand is never touched.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SnapshotRetention {
    /// Keep the newest this many Ready VMSnapshots; older ones are deleted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub keep_last: Option<u32>,
    /// Delete Ready VMSnapshots older than this (`36h`, `90m`: units ms, s, m, h).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_age: Option<String>,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VMSnapshotStatus {
    /// The snapshot's managed object reference value in vCenter (`snapshot-42`).
    #[serde(
        default,
        rename = "snapshotID",
        skip_serializing_if = "Option::is_none"
    )]
    pub snapshot_id: Option<String>,
    /// The VM's managed object reference value (`vm-42`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vm_mo_ref: Option<String>,
    /// When vCenter took the snapshot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub creation_time: Option<Time>,
    /// The snapshot's files (state, memory, its delta disks) in bytes, where
    /// vCenter reports the VM's file layout.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size_bytes: Option<i64>,
    /// The vSphere task in progress (`createSnapshot`, `revertSnapshot`,
    /// `removeSnapshot`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task: Option<TaskStatus>,
    /// The last `spec.revertRequest` handled, and how it went.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_revert: Option<RevertStatus>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "conditions_schema")]
    pub conditions: Vec<Condition>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}

/// One revert request and its outcome.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RevertStatus {
    /// The `spec.revertRequest` value handled.
    pub request: String,
    /// `Reverting` (sent, or being sent), `Reverted`, `Failed`, `Skipped`
    /// (present when the snapshot was taken: nothing to revert), or
    /// `Unknown` (the provider stopped while sending it: look at the VM's
    /// tasks in vCenter; a new value asks again).
    pub state: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// When the outcome was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time: Option<Time>,
}

/// `status.lastRevert.state` values.
pub mod revert_state {
    pub const REVERTING: &str = "Reverting";
    pub const REVERTED: &str = "Reverted";
    pub const FAILED: &str = "Failed";
    pub const SKIPPED: &str = "Skipped";
    pub const UNKNOWN: &str = "Unknown";
}

impl VMSnapshot {
    pub fn ready_condition(&self) -> Option<&Condition> {
        self.status
            .as_ref()
            .and_then(|s| s.conditions.iter().find(|c| c.type_ == "Ready"))
    }
}
