use std::collections::BTreeMap;

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{conditions_schema, Condition};
use crate::ipam::PoolSpec;

/// banlieue's built-in IP pool: addresses handed to Cluster API
/// `IPAddressClaim`s whose `poolRef` is `banlieue.io` `IPPool`, so a NIC's
/// `ipam.pool` works with no other IPAM provider installed. Lives in the
/// Provider's namespace, with the claims it binds.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "banlieue.io",
    version = "v1alpha1",
    kind = "IPPool",
    plural = "ippools",
    namespaced,
    status = "IPPoolStatus",
    derive = "PartialEq",
    printcolumn(name = "PREFIX", type_ = "integer", json_path = ".spec.prefix"),
    printcolumn(name = "GATEWAY", type_ = "string", json_path = ".spec.gateway"),
    printcolumn(name = "USED", type_ = "integer", json_path = ".status.used"),
    printcolumn(name = "FREE", type_ = "integer", json_path = ".status.free")
)]
#[serde(rename_all = "camelCase")]
pub struct IPPoolSpec {
    /// What the pool hands out, one address family throughout: CIDRs
    /// (`10.0.0.0/24`: its hosts, not its network address nor an IPv4
    /// broadcast address), ranges (`10.0.0.10-10.0.0.50`) and single addresses.
    #[schemars(length(min = 1))]
    pub addresses: Vec<String>,
    /// The prefix length the guest gets with its address.
    #[schemars(range(min = 1, max = 128))]
    pub prefix: u8,
    /// The guests' default gateway; never handed out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gateway: Option<String>,
    /// Never handed out: the same forms as `addresses`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub excluded_addresses: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nameservers: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub search_domains: Vec<String>,
}

impl IPPoolSpec {
    /// The part of the spec the allocator decides with.
    pub fn pool_spec(&self) -> PoolSpec {
        PoolSpec {
            addresses: self.addresses.clone(),
            prefix: self.prefix,
            gateway: self.gateway.clone(),
            excluded_addresses: self.excluded_addresses.clone(),
        }
    }
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct IPPoolStatus {
    /// Address -> the name of the `IPAddressClaim` (in the pool's namespace)
    /// that holds it. Written under the pool's resourceVersion, so two
    /// allocators never hand one address to two claims.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub allocations: BTreeMap<String, String>,
    /// Addresses in use.
    #[serde(default)]
    pub used: u64,
    /// Addresses left (saturating).
    #[serde(default)]
    pub free: u64,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "conditions_schema")]
    pub conditions: Vec<Condition>,
}
