use std::collections::BTreeMap;
use std::time::Duration;

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{conditions_schema, Condition, LocalObjectReference};

/// The CEL rule the API server enforces on `spec.connection.caBundle`; `validate`
/// enforces the same where no API server runs (check mode, the provider role).
pub const CA_BUNDLE_EXACTLY_ONE_RULE: &str =
    "(has(self.inline) ? 1 : 0) + (has(self.configMapRef) ? 1 : 0) + (has(self.secretRef) ? 1 : 0) == 1";
pub const CA_BUNDLE_EXACTLY_ONE_MESSAGE: &str =
    "spec.connection.caBundle: set exactly one of inline, configMapRef or secretRef";

/// The CEL rules the API server enforces on `spec.failureDomainNameOverrides`
/// (`validate` enforces the same where no API server runs): one entry per
/// (datacenter, cluster), and no two entries naming one failure domain, so a
/// clash shows at admission, not only once both clusters exist in vCenter.
/// The list holds at most `validate::MAX_OVERRIDES` (64) entries.
pub const OVERRIDE_PAIRS_UNIQUE_RULE: &str =
    "self.all(o, self.filter(p, p.datacenter == o.datacenter && p.cluster == o.cluster).size() == 1)";
pub const OVERRIDE_NAMES_UNIQUE_RULE: &str =
    "self.all(o, self.filter(p, p.name == o.name).size() == 1)";

/// One vCenter, the classes it exposes and how to reach it.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "banlieue.io",
    version = "v1alpha1",
    kind = "Provider",
    namespaced,
    status = "ProviderStatus",
    derive = "PartialEq",
    printcolumn(
        name = "CLASS",
        type_ = "string",
        json_path = ".spec.providerClassRef.name"
    ),
    printcolumn(
        name = "READY",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Ready\")].status"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct ProviderSpec {
    /// The backend kind (`vsphere`); matched against a VMImage source's `providerClass`.
    pub provider_class_ref: LocalObjectReference,
    pub connection: Connection,
    #[serde(default)]
    pub capabilities: Capabilities,
    /// Friendlier names for chosen (datacenter, cluster) failure domains:
    /// each pair at most once, each name at most once.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 64), extend("x-kubernetes-validations" = [
        {"rule": OVERRIDE_PAIRS_UNIQUE_RULE, "message": "a (datacenter, cluster) pair is listed twice"},
        {"rule": OVERRIDE_NAMES_UNIQUE_RULE, "message": "two overrides give one failure-domain name"},
    ]))]
    pub failure_domain_name_overrides: Vec<FailureDomainNameOverride>,
    /// Where VMs go within each failure domain: the resource pool and VM
    /// folder of every failure domain, and of chosen ones. Verified at each
    /// reconcile: a pool that is not there, or a folder that cannot be made,
    /// makes the Provider `Ready=False` (`ResourcePoolNotFound`, `FolderNotFound`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placement: Option<ProviderPlacement>,
}

/// The CEL rule of a storage target: a datastore or a datastore cluster, one of them.
pub const STORAGE_TARGET_ONE_RULE: &str = "has(self.datastore) != has(self.datastoreCluster)";
pub const STORAGE_TARGET_ONE_MESSAGE: &str =
    "target: set exactly one of datastore or datastoreCluster";

/// The CEL rule of `spec.placement.failureDomains`: one entry per failure domain.
pub const PLACEMENT_NAMES_UNIQUE_RULE: &str =
    "self.all(o, self.filter(p, p.name == o.name).size() == 1)";

/// A resource pool and a VM folder within a failure domain, each optional.
/// A name holding a `/` is written `%2f`, as in vSphere inventory paths.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PoolAndFolder {
    /// A path under the failure domain's root resource pool (`team-a`,
    /// `team-a/web`), an inventory path under it
    /// (`/DC0/host/C0/Resources/team-a`), or the name of a pool anywhere
    /// under it (one pool of that name). The root pool when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 1024))]
    pub resource_pool: Option<String>,
    /// A path under the datacenter's VM folder (`apps/web`, or the inventory
    /// path `/DC0/vm/apps/web`): its last level is made when absent (as
    /// `mkdir` would), the levels above must exist. `banlieue-<failure
    /// domain>` when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 1024))]
    pub folder: Option<String>,
}

impl PoolAndFolder {
    /// `self`'s values, `under`'s where `self` has none.
    pub fn or(&self, under: &PoolAndFolder) -> PoolAndFolder {
        PoolAndFolder {
            resource_pool: self
                .resource_pool
                .clone()
                .or_else(|| under.resource_pool.clone()),
            folder: self.folder.clone().or_else(|| under.folder.clone()),
        }
    }
}

/// A Provider's placement: defaults for every failure domain, and per
/// failure domain (by its name) values that win over them. A
/// VirtualMachine's `spec.placement` wins over both.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProviderPlacement {
    #[serde(flatten)]
    pub defaults: PoolAndFolder,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 64), extend("x-kubernetes-validations" = [
        {"rule": PLACEMENT_NAMES_UNIQUE_RULE, "message": "a failure domain is listed twice"},
    ]))]
    pub failure_domains: Vec<FailureDomainPlacement>,
}

/// The resource pool and folder of one failure domain.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FailureDomainPlacement {
    /// The failure domain's name (`status.failureDomains[].name`).
    #[schemars(length(min = 1, max = 63))]
    pub name: String,
    #[serde(flatten)]
    pub placement: PoolAndFolder,
}

impl ProviderSpec {
    /// The resource pool and folder the Provider gives failure domain `name`.
    pub fn placement_of(&self, name: &str) -> PoolAndFolder {
        let Some(placement) = &self.placement else {
            return PoolAndFolder::default();
        };
        placement
            .failure_domains
            .iter()
            .find(|f| f.name == name)
            .map(|f| f.placement.or(&placement.defaults))
            .unwrap_or_else(|| placement.defaults.clone())
    }
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Connection {
    /// vCenter SDK URL, e.g. `https://vcenter.example.com/sdk`.
    #[schemars(length(min = 1))]
    pub endpoint: String,
    /// Secret in the Provider's namespace with `username` and `password` keys.
    pub credentials_ref: LocalObjectReference,
    /// Skip TLS verification (self-signed vCenters only; prefer `caBundle`).
    #[serde(
        default,
        rename = "insecureSkipTLSVerify",
        skip_serializing_if = "std::ops::Not::not"
    )]
    pub insecure_skip_tls_verify: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_bundle: Option<CaBundle>,
    /// Longest one vCenter call may take, its retries and their backoff
    /// included (`30s`, `2m`, `1m30s`; from 1s to 30m; default 60s). A
    /// vCenter that does not answer within it makes the Provider, and each
    /// VSphereMachine whose reconcile met it, `Ready=False` with reason
    /// `VCenterUnresponsive`; they are retried with backoff, on a new session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call_deadline: Option<String>,
}

/// A Provider's call deadline when `spec.connection.callDeadline` is not set.
pub const DEFAULT_CALL_DEADLINE: Duration = Duration::from_secs(60);
/// The shortest and longest `spec.connection.callDeadline`.
pub const CALL_DEADLINE_RANGE: (Duration, Duration) =
    (Duration::from_secs(1), Duration::from_secs(30 * 60));

impl Connection {
    /// `callDeadline`, or the default when it is not set; an error says
    /// what is wrong with the value.
    pub fn call_deadline(&self) -> Result<Duration, String> {
        let Some(text) = &self.call_deadline else {
            return Ok(DEFAULT_CALL_DEADLINE);
        };
        let deadline = super::parse_interval(text)?;
        let (min, max) = CALL_DEADLINE_RANGE;
        if deadline < min || deadline > max {
            return Err(format!(
                "{text:?} is out of range: from {}s to {}m",
                min.as_secs(),
                max.as_secs() / 60
            ));
        }
        Ok(deadline)
    }
}

/// A private CA to verify vCenter with: exactly one of `inline`, `configMapRef`, `secretRef`.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [{
    "rule": CA_BUNDLE_EXACTLY_ONE_RULE,
    "message": CA_BUNDLE_EXACTLY_ONE_MESSAGE,
}]))]
pub struct CaBundle {
    /// PEM certificates.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inline: Option<String>,
    /// ConfigMap in the Provider's namespace holding the PEM under `key`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_map_ref: Option<LocalObjectReference>,
    /// Secret in the Provider's namespace holding the PEM under `key`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_ref: Option<LocalObjectReference>,
    /// Key of the ConfigMap or Secret holding the PEM.
    #[serde(default = "default_ca_key")]
    pub key: String,
}

fn default_ca_key() -> String {
    "ca.crt".to_string()
}

/// What the scheduler matches a VMClass against.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Capabilities {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub storage_classes: Vec<StorageClass>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub network_classes: Vec<NetworkClass>,
    /// Features such as `hotAddCPU`, `hotAddMemory`, `efiSecureBoot`, `vtpm`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub features: Vec<String>,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
pub struct StorageClass {
    #[schemars(length(min = 1))]
    pub name: String,
    pub target: StorageTarget,
}

/// Where a storage class's disks go: a datastore, or a datastore cluster
/// (StoragePod) whose datastore Storage DRS recommends for each clone (the
/// one with the most free space where Storage DRS is off).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [{
    "rule": STORAGE_TARGET_ONE_RULE,
    "message": STORAGE_TARGET_ONE_MESSAGE,
}]))]
pub struct StorageTarget {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(length(min = 1))]
    pub datastore: String,
    /// A datastore cluster's name, instead of `datastore`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1))]
    pub datastore_cluster: Option<String>,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
pub struct NetworkClass {
    #[schemars(length(min = 1))]
    pub name: String,
    pub target: NetworkTarget,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NetworkTarget {
    #[schemars(length(min = 1))]
    pub port_group: String,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
pub struct FailureDomainNameOverride {
    // vSphere inventory names are at most 80 characters; the bound also
    // keeps the list's CEL rules within the API server's cost budget.
    #[schemars(length(min = 1, max = 80))]
    pub datacenter: String,
    #[schemars(length(min = 1, max = 80))]
    pub cluster: String,
    /// The failure domain's name instead of `<provider>-<datacenter>-<cluster>`.
    #[schemars(length(min = 1, max = 63))]
    pub name: String,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProviderStatus {
    /// One per (datacenter, cluster or standalone host) the provider found in vCenter.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failure_domains: Vec<FailureDomain>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "conditions_schema")]
    pub conditions: Vec<Condition>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}

/// A placement zone: one vSphere cluster, or one standalone host, of one datacenter.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FailureDomain {
    pub name: String,
    pub datacenter: String,
    /// The cluster's name, or the standalone host's (its compute resource's).
    pub cluster: String,
    /// A host outside any cluster (a `ComputeResource`), not a cluster.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub standalone_host: bool,
    /// The resource pool VMs go to (`spec.placement`), verified to exist;
    /// the root pool when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_pool: Option<String>,
    /// The VM folder VMs go to (`spec.placement`), verified or made;
    /// `banlieue-<name>` when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub folder: Option<String>,
    /// `name`, `datacenter`, `cluster`: what `failureDomainSelector` matches.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// Storage classes whose datastore is mounted on this cluster (for a
    /// datastore cluster: one of its datastores is).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub storage_classes: Vec<String>,
    /// Network classes whose portgroup exists in this datacenter.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub network_classes: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub features: Vec<String>,
}

impl Provider {
    pub fn ready_condition(&self) -> Option<&Condition> {
        self.status
            .as_ref()
            .and_then(|s| s.conditions.iter().find(|c| c.type_ == "Ready"))
    }
}
