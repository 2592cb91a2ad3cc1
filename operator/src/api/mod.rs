//! The `banlieue.io/v1alpha1` API: one module per kind, shared pieces here.
//!
//! Field names are camelCase on the wire; every optional field is `Option` or
//! defaults, so the manifests of the user guide deserialize unchanged.

// kube's repeated `printcolumn(...)` arguments look like duplicated attributes to clippy.
#![allow(clippy::duplicated_attributes)]

mod provider;
pub mod validate;
mod virtualmachine;
mod vmclass;
mod vmimage;
mod vspheremachine;

pub use provider::*;
pub use virtualmachine::*;
pub use vmclass::*;
pub use vmimage::*;
pub use vspheremachine::*;

pub use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, LabelSelector};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub const GROUP: &str = "banlieue.io";
pub const VERSION: &str = "v1alpha1";
pub const API_VERSION: &str = "banlieue.io/v1alpha1";

/// Label put on every object the operator creates.
pub const MANAGED_BY_LABEL: (&str, &str) = ("app.kubernetes.io/name", "banlieue");

/// A reference to an object by name (same namespace, or cluster-scoped).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default, JsonSchema)]
pub struct LocalObjectReference {
    #[schemars(length(min = 1))]
    pub name: String,
}

/// A reference to a namespaced object by namespace and name.
#[derive(
    Serialize, Deserialize, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Default, JsonSchema,
)]
pub struct NamespacedReference {
    pub namespace: String,
    pub name: String,
}

impl std::fmt::Display for NamespacedReference {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// Disk provisioning on the datastore.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default, JsonSchema)]
pub enum Provisioning {
    #[default]
    #[serde(rename = "thin")]
    Thin,
    #[serde(rename = "thick")]
    Thick,
    #[serde(rename = "eagerZeroed")]
    EagerZeroed,
}

/// Virtual machine firmware.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default, JsonSchema)]
pub enum Firmware {
    #[default]
    #[serde(rename = "bios")]
    Bios,
    #[serde(rename = "efi")]
    Efi,
    /// EFI with secure boot enabled.
    #[serde(rename = "efi-secure")]
    EfiSecure,
}

impl Firmware {
    pub fn as_str(self) -> &'static str {
        match self {
            Firmware::Bios => "bios",
            Firmware::Efi => "efi",
            Firmware::EfiSecure => "efi-secure",
        }
    }
}

/// The power state a VirtualMachine should be in.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default, JsonSchema)]
pub enum PowerState {
    #[default]
    PoweredOn,
    PoweredOff,
}

impl PowerState {
    pub fn as_str(self) -> &'static str {
        match self {
            PowerState::PoweredOn => "PoweredOn",
            PowerState::PoweredOff => "PoweredOff",
        }
    }
}

/// Schema for a `conditions` list: a map keyed by `type`, so server-side apply
/// merges conditions one by one.
pub(crate) fn conditions_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
    let mut schema = generator.subschema_for::<Vec<Condition>>();
    schema.insert("x-kubernetes-list-type".into(), "map".into());
    schema.insert(
        "x-kubernetes-list-map-keys".into(),
        serde_json::json!(["type"]),
    );
    schema
}
