use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{CloneMode, Firmware, Provisioning};

/// A reusable hardware shape plus the classes and features a backend must offer.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "banlieue.io",
    version = "v1alpha1",
    kind = "VMClass",
    plural = "vmclasses",
    derive = "PartialEq",
    printcolumn(name = "CPUS", type_ = "integer", json_path = ".spec.hardware.cpus"),
    printcolumn(
        name = "MEMORY",
        type_ = "integer",
        json_path = ".spec.hardware.memoryMiB"
    ),
    printcolumn(name = "FIRMWARE", type_ = "string", json_path = ".spec.firmware")
)]
#[serde(rename_all = "camelCase")]
pub struct VMClassSpec {
    pub hardware: Hardware,
    #[serde(default)]
    pub network: Network,
    #[serde(default)]
    pub firmware: Firmware,
    /// Features a Provider must advertise (`hotAddCPU`, `hotAddMemory`, `efiSecureBoot`, `vtpm`, ...).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub features: Vec<String>,
    /// Attach a virtual TPM; needs a Provider advertising the `vtpm` feature.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub tpm_enabled: bool,
    /// `full` (a copy of the template's disks) or `linked` (child disks of
    /// the template's current snapshot, taken once if it has none). Wins over
    /// the VMImage's `cloneMode`; unset: the VMImage's, else `full`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clone_mode: Option<CloneMode>,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Hardware {
    #[schemars(range(min = 1))]
    pub cpus: u32,
    #[serde(rename = "memoryMiB")]
    #[schemars(range(min = 4))]
    pub memory_mib: u64,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub disks: Vec<Disk>,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Disk {
    #[schemars(length(min = 1))]
    pub name: String,
    #[serde(rename = "sizeGiB")]
    #[schemars(range(min = 1))]
    pub size_gib: u64,
    /// A storage class the Provider maps to a datastore.
    #[schemars(length(min = 1))]
    pub storage_class: String,
    /// How the disk is allocated on its datastore (`thin`, `thick` lazy-zeroed,
    /// `eagerZeroed`). The first disk is the template's root disk, copied with
    /// it at clone time; the others are created with it.
    #[serde(default)]
    pub provisioning: Provisioning,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
pub struct Network {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub interfaces: Vec<NetworkInterface>,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NetworkInterface {
    #[schemars(length(min = 1))]
    pub name: String,
    /// A network class the Provider maps to a portgroup.
    #[schemars(length(min = 1))]
    pub network_class: String,
    /// Address management; empty (`{}`) for DHCP.
    #[serde(default)]
    pub ipam: Ipam,
}

/// Empty for DHCP; otherwise a static address or a named pool (at most one).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
#[schemars(extend("x-kubernetes-validations" = [{
    "rule": "!(has(self.static) && has(self.pool))",
    "message": "ipam: set at most one of static or pool (neither for DHCP)",
}]))]
pub struct Ipam {
    #[serde(default, rename = "static", skip_serializing_if = "Option::is_none")]
    pub static_: Option<StaticIp>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pool: Option<IpPool>,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StaticIp {
    /// Address with prefix length, e.g. `10.0.0.10/24`.
    #[schemars(length(min = 1))]
    pub address: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gateway: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nameservers: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub search_domains: Vec<String>,
}

/// The API group of banlieue's built-in pool kind, a pool reference's default.
pub const BUILTIN_POOL_GROUP: &str = "banlieue.io";
/// The built-in pool kind, a pool reference's default.
pub const BUILTIN_POOL_KIND: &str = "IPPool";
/// The CEL rule of a pool reference: its group and kind go together.
pub const POOL_GROUP_KIND_RULE: &str = "has(self.apiGroup) == has(self.kind)";
pub const POOL_GROUP_KIND_MESSAGE: &str =
    "pool: set both apiGroup and kind, or neither (banlieue.io IPPool)";

/// A pool in the Provider's namespace that an IPAM provider hands addresses
/// out of (Cluster API's IPAM contract): by default banlieue's built-in
/// `IPPool`; `apiGroup` and `kind` name another provider's pool kind (e.g.
/// `ipam.cluster.x-k8s.io` `InClusterIPPool`), both or neither.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [{
    "rule": POOL_GROUP_KIND_RULE,
    "message": POOL_GROUP_KIND_MESSAGE,
}]))]
pub struct IpPool {
    #[schemars(length(min = 1))]
    pub name: String,
    /// The pool kind's API group (a DNS subdomain); default `banlieue.io`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(
        length(min = 1, max = 253),
        regex(pattern = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
    )]
    pub api_group: Option<String>,
    /// The pool's kind (`UpperCamelCase`); default `IPPool`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 63), regex(pattern = r"^[A-Z][A-Za-z0-9]*$"))]
    pub kind: Option<String>,
}

impl IpPool {
    /// The pool's API group and kind, the built-in pool's when not given.
    pub fn group_kind(&self) -> (&str, &str) {
        (
            self.api_group.as_deref().unwrap_or(BUILTIN_POOL_GROUP),
            self.kind.as_deref().unwrap_or(BUILTIN_POOL_KIND),
        )
    }

    /// Is this a pool of banlieue's built-in kind?
    pub fn is_builtin(&self) -> bool {
        self.group_kind() == (BUILTIN_POOL_GROUP, BUILTIN_POOL_KIND)
    }
}
