//! The `banlieue.io/v1alpha1` API: one module per kind, shared pieces here;
//! and the part of Cluster API's IPAM contract banlieue uses (`ipaddress`).
//!
//! Field names are camelCase on the wire; every optional field is `Option` or
//! defaults, so the manifests of the user guide deserialize unchanged.

// kube's repeated `printcolumn(...)` arguments look like duplicated attributes to clippy.
#![allow(clippy::duplicated_attributes)]

mod ipaddress;
mod ippool;
mod provider;
pub mod reasons;
pub mod validate;
mod virtualmachine;
mod vmclass;
mod vmimage;
mod vmsnapshot;
mod vspheremachine;

pub use ipaddress::*;
pub use ippool::*;
pub use provider::*;
pub use virtualmachine::*;
pub use vmclass::*;
pub use vmimage::*;
pub use vmsnapshot::*;
pub use vspheremachine::*;

pub use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, LabelSelector};
use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub const GROUP: &str = "banlieue.io";
pub const VERSION: &str = "v1alpha1";
pub const API_VERSION: &str = "banlieue.io/v1alpha1";

/// Parses an interval: a number with a unit (`90s`, `5m`, `1h`; several
/// parts add up, `1m30s`), or plain seconds.
pub fn parse_interval(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    if let Ok(seconds) = text.parse::<u64>() {
        return Ok(Duration::from_secs(seconds));
    }
    let mut total = Duration::ZERO;
    let mut number = String::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c.is_ascii_digit() {
            number.push(c);
            continue;
        }
        let mut unit = c.to_string();
        if c == 'm' && chars.peek() == Some(&'s') {
            unit.push('s');
            chars.next();
        }
        let n: u64 = number
            .parse()
            .map_err(|_| format!("invalid interval {text:?}: expected e.g. 30s, 5m, 1h"))?;
        number.clear();
        total += match unit.as_str() {
            "ms" => Duration::from_millis(n),
            "s" => Duration::from_secs(n),
            "m" => Duration::from_secs(n * 60),
            "h" => Duration::from_secs(n * 3600),
            _ => {
                return Err(format!(
                    "invalid interval {text:?}: unknown unit {unit:?} (use ms, s, m or h)"
                ))
            }
        };
    }
    if !number.is_empty() || total.is_zero() {
        return Err(format!(
            "invalid interval {text:?}: expected e.g. 30s, 5m, 1h"
        ));
    }
    Ok(total)
}

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

/// How a VM is made from its template: a `full` copy of its disks (the
/// default), or a `linked` clone whose disks are child disks of the
/// template's current snapshot (made in seconds, sharing the template's
/// blocks; the root disk keeps the template's size and provisioning). Set on
/// a VMClass or a VMImage: the VMClass's value wins when both are set.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default, JsonSchema)]
pub enum CloneMode {
    #[default]
    #[serde(rename = "full")]
    Full,
    #[serde(rename = "linked")]
    Linked,
}

impl CloneMode {
    /// The mode a VM of `class` from `image` is cloned with: the class's
    /// when it sets one, else the image's, else `full`.
    pub fn resolve(class: Option<CloneMode>, image: Option<CloneMode>) -> CloneMode {
        class.or(image).unwrap_or_default()
    }

    pub fn is_linked(self) -> bool {
        self == CloneMode::Linked
    }
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
    /// Does it boot through EFI (`efi`, `efi-secure`) rather than the BIOS?
    pub fn is_efi(self) -> bool {
        self != Firmware::Bios
    }

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intervals() {
        assert_eq!(parse_interval("5m"), Ok(Duration::from_secs(300)));
        assert_eq!(parse_interval("90s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_interval("1h"), Ok(Duration::from_secs(3600)));
        assert_eq!(parse_interval("1m30s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_interval("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_interval("120"), Ok(Duration::from_secs(120)));
        for bad in ["", "5x", "m", "5m3", "0s"] {
            assert!(parse_interval(bad).is_err(), "{bad}");
        }
    }
}
