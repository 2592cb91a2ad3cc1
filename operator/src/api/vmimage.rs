use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{CloneMode, Firmware, LocalObjectReference};

/// A backend-agnostic OS image mapped to a source per backend kind.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "banlieue.io",
    version = "v1alpha1",
    kind = "VMImage",
    plural = "vmimages",
    status = "VMImageStatus",
    derive = "PartialEq",
    printcolumn(name = "OS", type_ = "string", json_path = ".spec.osDistribution"),
    printcolumn(name = "VERSION", type_ = "string", json_path = ".spec.osVersion")
)]
#[serde(rename_all = "camelCase")]
pub struct VMImageSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub os_family: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub os_distribution: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub os_version: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub architecture: Option<String>,
    /// `cloud-init`, `ignition`, ...
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub guest_agent: Option<String>,
    #[schemars(length(min = 1))]
    pub sources: Vec<ImageSource>,
    /// How the template was built. `firmware`: the firmware it boots with; a
    /// VMClass of the other boot firmware (`bios` against `efi` or
    /// `efi-secure`) is not scheduled with this image (`FirmwareMismatch`),
    /// and secure boot follows the VMClass.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template: Option<TemplateSettings>,
    /// Secrets (in the Provider's namespace) with the cloud-config handed to the guest.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cloud_configs: Vec<CloudConfig>,
    /// `full` or `linked` (see the VMClass's `cloneMode`, which wins when
    /// set); unset: `full`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clone_mode: Option<CloneMode>,
}

/// The CEL rule of an image source: a content library item names its library.
pub const SOURCE_LIBRARY_RULE: &str = "self.kind != 'ContentLibraryItem' || has(self.library)";
pub const SOURCE_LIBRARY_MESSAGE: &str = "a ContentLibraryItem source names its library";

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [{
    "rule": SOURCE_LIBRARY_RULE,
    "message": SOURCE_LIBRARY_MESSAGE,
}]))]
pub struct ImageSource {
    /// The Provider class this source is for (`vsphere`).
    #[schemars(length(min = 1))]
    pub provider_class: String,
    pub kind: SourceKind,
    /// For `Template`: the template's name in vCenter. For
    /// `ContentLibraryItem`: the item's name in `library`.
    #[serde(rename = "ref")]
    #[schemars(length(min = 1))]
    pub reference: String,
    /// For `ContentLibraryItem`: the content library's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1))]
    pub library: Option<String>,
}

#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default, JsonSchema)]
pub enum SourceKind {
    /// A VM template present in every failure-domain datacenter.
    #[default]
    Template,
    /// An item of a vCenter content library (an OVF template or a VM
    /// template), deployed once into each failure-domain datacenter as a
    /// template (`banlieue-images/banlieue-<item id>-v<content version>`)
    /// that VMs are then cloned from.
    ContentLibraryItem,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TemplateSettings {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub firmware: Option<Firmware>,
    #[serde(default)]
    pub install_mode: InstallMode,
}

/// When the OS is installed: into the golden template (`immediate`) or by
/// each clone at its first boot (`deferred`, needed for TPM-sealed disks).
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default, JsonSchema)]
pub enum InstallMode {
    #[default]
    #[serde(rename = "immediate")]
    Immediate,
    #[serde(rename = "deferred")]
    Deferred,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CloudConfig {
    pub secret_ref: LocalObjectReference,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VMImageStatus {
    /// Readiness of the image on each Provider that has a source for it.
    /// Keyed by (namespace, provider): the provider role of each namespace
    /// owns its own entries under server-side apply.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "per_provider_schema")]
    pub per_provider: Vec<ImageProviderStatus>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ImageProviderStatus {
    /// The Provider's name.
    pub provider: String,
    /// The Provider's namespace.
    pub namespace: String,
    pub ready: bool,
    /// `TemplateFound`, `LibraryItemDeployed`, or why the image is not ready (see the API reference's reasons).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// The template found (or, for a content library item, deployed) in
    /// each failure-domain datacenter.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub templates: Vec<DatacenterTemplate>,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DatacenterTemplate {
    pub datacenter: String,
    pub name: String,
    /// Managed object reference value (`vm-42`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mo_ref: Option<String>,
}

fn per_provider_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
    let mut schema = generator.subschema_for::<Vec<ImageProviderStatus>>();
    schema.insert("x-kubernetes-list-type".into(), "map".into());
    schema.insert(
        "x-kubernetes-list-map-keys".into(),
        serde_json::json!(["namespace", "provider"]),
    );
    schema
}

impl VMImage {
    /// This image's per-provider entry for `namespace/name`, if the provider role wrote one.
    pub fn on_provider(&self, namespace: &str, name: &str) -> Option<&ImageProviderStatus> {
        self.status
            .as_ref()?
            .per_provider
            .iter()
            .find(|p| p.provider == name && p.namespace == namespace)
    }

    pub fn source_for_class(&self, provider_class: &str) -> Option<&ImageSource> {
        self.spec
            .sources
            .iter()
            .find(|s| s.provider_class == provider_class)
    }
}
