//! Cluster API's IPAM contract (`ipam.cluster.x-k8s.io/v1beta1`), the
//! fields banlieue reads and writes: a machine's NIC asks for an address with
//! an `IPAddressClaim` naming a pool by API group, kind and name; whichever
//! IPAM provider owns that pool kind binds it with an `IPAddress` of the
//! claim's name. The CRDs are Cluster API's; `deploy/crds/ipam/` ships these
//! for clusters without Cluster API.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{conditions_schema, Condition, LocalObjectReference};

pub const IPAM_GROUP: &str = "ipam.cluster.x-k8s.io";

/// A pool by API group, kind and name, in the claim's namespace.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TypedLocalObjectReference {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_group: Option<String>,
    #[schemars(length(min = 1))]
    pub kind: String,
    #[schemars(length(min = 1))]
    pub name: String,
}

/// A request for one address from a pool.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "ipam.cluster.x-k8s.io",
    version = "v1beta1",
    kind = "IPAddressClaim",
    plural = "ipaddressclaims",
    namespaced,
    status = "IPAddressClaimStatus",
    derive = "PartialEq",
    printcolumn(name = "POOL", type_ = "string", json_path = ".spec.poolRef.name"),
    printcolumn(name = "KIND", type_ = "string", json_path = ".spec.poolRef.kind")
)]
#[serde(rename_all = "camelCase")]
pub struct IPAddressClaimSpec {
    pub pool_ref: TypedLocalObjectReference,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct IPAddressClaimStatus {
    /// The `IPAddress` bound to the claim (of the claim's name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address_ref: Option<LocalObjectReference>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "conditions_schema")]
    pub conditions: Vec<Condition>,
}

/// An address bound to a claim, by the provider of the claim's pool.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "ipam.cluster.x-k8s.io",
    version = "v1beta1",
    kind = "IPAddress",
    plural = "ipaddresses",
    namespaced,
    derive = "PartialEq",
    printcolumn(name = "ADDRESS", type_ = "string", json_path = ".spec.address"),
    printcolumn(name = "POOL", type_ = "string", json_path = ".spec.poolRef.name")
)]
#[serde(rename_all = "camelCase")]
pub struct IPAddressSpec {
    pub claim_ref: LocalObjectReference,
    pub pool_ref: TypedLocalObjectReference,
    /// The address, without its prefix length.
    #[schemars(length(min = 1))]
    pub address: String,
    #[schemars(range(min = 0, max = 128))]
    pub prefix: i32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gateway: Option<String>,
}
