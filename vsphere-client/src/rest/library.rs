//! Content libraries (`com.vmware.content`) and deployment from them: OVF
//! items (`com.vmware.vcenter.ovf.library_item`) and VM-template items
//! (`vcenter.vm_template.library_items`: made from a VM, deployed as one).

use std::collections::BTreeMap;
use std::fmt;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::Method;
use serde::{Deserialize, Serialize};

use super::error::{rest_error, LocalizableMessage, RestError, RestErrorType};
use super::{ApiFlavor, ApiUrl, DynamicId, RestClient};
use crate::error::{Error, ErrorKind};
use crate::types::ManagedObjectReference;

const LIBRARY: &str = "content/library";
const LOCAL_LIBRARY: &str = "content/local-library";
const ITEM: &str = "content/library/item";
const UPDATE_SESSION: &str = "content/library/item/update-session";
const UPDATE_SESSION_FILE: &str = "content/library/item/updatesession/file";
const OVF_LIBRARY_ITEM: &str = "vcenter/ovf/library-item";
const VM_TEMPLATE_ITEMS: &str = "vcenter/vm-template/library-items";

super::open_enum! {
    /// What kind of library: its own content, or a subscription to another's.
    LibraryType {
        Local = "LOCAL",
        Subscribed = "SUBSCRIBED",
    }
}

super::open_enum! {
    /// Where a library's storage backing is.
    StorageBackingType {
        /// A datastore ([`StorageBacking::datastore_id`]).
        Datastore = "DATASTORE",
        /// A file system URI ([`StorageBacking::storage_uri`]).
        Other = "OTHER",
    }
}

super::open_enum! {
    /// What a library item holds. Open: libraries hold any file type.
    LibraryItemType {
        /// An OVF template.
        Ovf = "ovf",
        /// A VM template (vCenter 6.7 U1 and later).
        VmTemplate = "vm-template",
        /// An ISO image.
        Iso = "iso",
    }
}

super::open_enum! {
    /// How the disks of a VM deployed from an OVF are allocated.
    StorageProvisioning {
        /// Blocks allocated as they are written.
        Thin = "thin",
        /// All blocks allocated up front.
        Thick = "thick",
        /// All blocks allocated and zeroed up front.
        EagerZeroedThick = "eagerZeroedThick",
    }
}

/// Where a library keeps its content.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct StorageBacking {
    #[serde(rename = "type")]
    pub type_: StorageBackingType,
    /// The datastore's managed object id (`datastore-12`), for `DATASTORE`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub datastore_id: Option<String>,
    /// A file system URI, for `OTHER`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub storage_uri: Option<String>,
}

impl StorageBacking {
    /// Content kept on this datastore.
    pub fn datastore(datastore: &ManagedObjectReference) -> Self {
        StorageBacking {
            type_: StorageBackingType::Datastore,
            datastore_id: Some(datastore.value.clone()),
            storage_uri: None,
        }
    }
}

/// A content library.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Library {
    pub id: String,
    pub name: String,
    pub description: Option<String>,
    #[serde(rename = "type")]
    pub type_: LibraryType,
    pub storage_backings: Vec<StorageBacking>,
    pub version: Option<String>,
    /// RFC 3339 time stamps, as sent.
    pub creation_time: Option<String>,
    pub last_modified_time: Option<String>,
    pub last_sync_time: Option<String>,
    pub server_guid: Option<String>,
}

/// An item of a library (an OVF template, a VM template, an ISO...).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct LibraryItem {
    pub id: String,
    pub library_id: String,
    pub name: String,
    pub description: Option<String>,
    #[serde(rename = "type")]
    pub type_: Option<LibraryItemType>,
    pub size: Option<i64>,
    pub cached: Option<bool>,
    pub content_version: Option<String>,
    pub metadata_version: Option<String>,
    pub version: Option<String>,
    pub source_id: Option<String>,
    pub creation_time: Option<String>,
    pub last_modified_time: Option<String>,
    pub last_sync_time: Option<String>,
}

/// Criteria to find libraries; unset criteria match everything.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct LibraryFind {
    /// The name, compared without regard to case.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(rename = "type", skip_serializing_if = "Option::is_none")]
    pub type_: Option<LibraryType>,
}

/// Criteria to find library items; unset criteria match everything.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct ItemFind {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub library_id: Option<String>,
    #[serde(rename = "type", skip_serializing_if = "Option::is_none")]
    pub type_: Option<LibraryItemType>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cached: Option<bool>,
}

/// What to create a local library with.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct LocalLibrarySpec {
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Always `LOCAL`.
    #[serde(rename = "type")]
    type_: LibraryType,
    pub storage_backings: Vec<StorageBacking>,
}

impl LocalLibrarySpec {
    /// A library named `name` keeping its content on `datastore`.
    pub fn on_datastore(name: impl Into<String>, datastore: &ManagedObjectReference) -> Self {
        LocalLibrarySpec {
            name: name.into(),
            description: None,
            type_: LibraryType::Local,
            storage_backings: vec![StorageBacking::datastore(datastore)],
        }
    }
}

/// What to create a library item with.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct ItemSpec {
    pub library_id: String,
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Unset lets the server decide from the files.
    #[serde(rename = "type", skip_serializing_if = "Option::is_none")]
    pub type_: Option<LibraryItemType>,
}

impl ItemSpec {
    pub fn new(
        library_id: impl Into<String>,
        name: impl Into<String>,
        type_: Option<LibraryItemType>,
    ) -> Self {
        ItemSpec {
            library_id: library_id.into(),
            name: name.into(),
            description: None,
            type_,
        }
    }
}

/// Maps a network named in the OVF descriptor to an inventory network.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NetworkMapping {
    /// The network's name in the OVF descriptor.
    pub ovf_network: String,
    /// The network (`Network`, `DistributedVirtualPortgroup`...).
    pub network: ManagedObjectReference,
}

/// Where and how to deploy an OVF library item as a virtual machine.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct OvfDeploySpec {
    /// The new virtual machine's name.
    pub name: String,
    /// The resource pool to run in (required).
    pub resource_pool: ManagedObjectReference,
    /// The VM folder to put the machine in (default: the datacenter's).
    pub folder: Option<ManagedObjectReference>,
    /// The host to place the machine on (default: the server chooses).
    pub host: Option<ManagedObjectReference>,
    /// The datastore for the machine's files and disks.
    pub datastore: Option<ManagedObjectReference>,
    pub annotation: Option<String>,
    /// Accept the OVF's end-user license agreements (needed when it has any).
    pub accept_all_eula: bool,
    pub network_mappings: Vec<NetworkMapping>,
    pub storage_provisioning: Option<StorageProvisioning>,
}

impl OvfDeploySpec {
    /// A machine `name` in `resource_pool`, everything else by default.
    pub fn new(name: impl Into<String>, resource_pool: ManagedObjectReference) -> Self {
        OvfDeploySpec {
            name: name.into(),
            resource_pool,
            ..Default::default()
        }
    }
}

/// Where and how to deploy a VM-template library item (type `vm-template`)
/// as a virtual machine.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct VmTemplateDeploySpec {
    /// The new virtual machine's name.
    pub name: String,
    pub description: Option<String>,
    /// The VM folder to put the machine in.
    pub folder: Option<ManagedObjectReference>,
    /// Where it runs: a resource pool, a host or a cluster (at least one).
    pub resource_pool: Option<ManagedObjectReference>,
    pub host: Option<ManagedObjectReference>,
    pub cluster: Option<ManagedObjectReference>,
    /// The datastore for the machine's files and disks (the template's
    /// storage otherwise).
    pub datastore: Option<ManagedObjectReference>,
    /// Power the machine on once deployed.
    pub powered_on: bool,
}

impl VmTemplateDeploySpec {
    /// A machine `name` in `resource_pool`, everything else by default.
    pub fn new(name: impl Into<String>, resource_pool: ManagedObjectReference) -> Self {
        VmTemplateDeploySpec {
            name: name.into(),
            resource_pool: Some(resource_pool),
            ..Default::default()
        }
    }
}

/// What to make a VM-template library item from: a virtual machine, cloned
/// into the library as a template.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct VmTemplateSpec {
    /// The item's name.
    pub name: String,
    pub description: Option<String>,
    /// The virtual machine to make it from.
    pub source_vm: ManagedObjectReference,
    /// The library to put it in.
    pub library_id: String,
    /// Where the template lives in the inventory (vCenter's defaults otherwise).
    pub folder: Option<ManagedObjectReference>,
    pub resource_pool: Option<ManagedObjectReference>,
    pub host: Option<ManagedObjectReference>,
    pub cluster: Option<ManagedObjectReference>,
    /// The datastore for its files and disks (the library's otherwise).
    pub datastore: Option<ManagedObjectReference>,
}

/// `vcenter.vm_template.LibraryItems` placement: managed object ids.
#[derive(Serialize, Default)]
struct WirePlacement {
    #[serde(skip_serializing_if = "Option::is_none")]
    folder: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    resource_pool: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    host: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    cluster: Option<String>,
}

impl WirePlacement {
    fn of(
        folder: &Option<ManagedObjectReference>,
        resource_pool: &Option<ManagedObjectReference>,
        host: &Option<ManagedObjectReference>,
        cluster: &Option<ManagedObjectReference>,
    ) -> Self {
        let id = |r: &Option<ManagedObjectReference>| r.as_ref().map(|r| r.value.clone());
        WirePlacement {
            folder: id(folder),
            resource_pool: id(resource_pool),
            host: id(host),
            cluster: id(cluster),
        }
    }
}

#[derive(Serialize)]
struct WireStorage {
    datastore: String,
}

impl WireStorage {
    fn of(datastore: &Option<ManagedObjectReference>) -> Option<Self> {
        datastore.as_ref().map(|d| WireStorage {
            datastore: d.value.clone(),
        })
    }
}

/// Where a VM-template item's machine goes: placement and storage.
#[derive(Serialize)]
struct WireLocation {
    placement: WirePlacement,
    #[serde(skip_serializing_if = "Option::is_none")]
    vm_home_storage: Option<WireStorage>,
    #[serde(skip_serializing_if = "Option::is_none")]
    disk_storage: Option<WireStorage>,
}

impl WireLocation {
    fn of(
        folder: &Option<ManagedObjectReference>,
        resource_pool: &Option<ManagedObjectReference>,
        host: &Option<ManagedObjectReference>,
        cluster: &Option<ManagedObjectReference>,
        datastore: &Option<ManagedObjectReference>,
    ) -> Self {
        WireLocation {
            placement: WirePlacement::of(folder, resource_pool, host, cluster),
            vm_home_storage: WireStorage::of(datastore),
            disk_storage: WireStorage::of(datastore),
        }
    }
}

#[derive(Serialize)]
struct WireTemplateDeploy {
    name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    description: Option<String>,
    #[serde(flatten)]
    location: WireLocation,
    powered_on: bool,
}

#[derive(Serialize)]
struct WireTemplateCreate {
    source_vm: String,
    name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    description: Option<String>,
    library: String,
    #[serde(flatten)]
    location: WireLocation,
}

#[derive(Serialize)]
struct WireDeployTarget {
    resource_pool_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    host_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    folder_id: Option<String>,
}

#[derive(Serialize)]
struct WireDeploymentSpec {
    name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    annotation: Option<String>,
    #[serde(rename = "accept_all_EULA")]
    accept_all_eula: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    default_datastore_id: Option<String>,
    /// `/api`: a JSON object; `/rest`: a list of `{key, value}`.
    #[serde(skip_serializing_if = "Option::is_none")]
    network_mappings: Option<serde_json::Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    storage_provisioning: Option<StorageProvisioning>,
}

#[derive(Serialize)]
struct WireDeploy {
    target: WireDeployTarget,
    deployment_spec: WireDeploymentSpec,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct WireDeploymentResult {
    succeeded: bool,
    resource_id: Option<DynamicId>,
    error: Option<WireDeploymentError>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct WireDeploymentError {
    errors: Vec<WireOvfError>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct WireOvfError {
    category: Option<String>,
    error: Option<WireVapiError>,
    message: Option<LocalizableMessage>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct WireVapiError {
    #[serde(rename = "@class")]
    class: Option<String>,
    messages: Vec<LocalizableMessage>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct WireUpdateFile {
    name: String,
    upload_endpoint: Option<WireEndpoint>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct WireEndpoint {
    uri: String,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct WireUpdateSession {
    state: String,
    error_message: Option<LocalizableMessage>,
}

/// Content library operations; from [`RestClient::library`].
#[derive(Clone, Copy)]
pub struct ContentLibrary<'a> {
    client: &'a RestClient,
}

impl fmt::Debug for ContentLibrary<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ContentLibrary")
            .field("client", self.client)
            .finish()
    }
}

impl<'a> ContentLibrary<'a> {
    pub(super) fn new(client: &'a RestClient) -> Self {
        ContentLibrary { client }
    }

    // ---- libraries ----

    /// The ids of all libraries.
    pub async fn list(&self) -> Result<Vec<String>, Error> {
        let ids: Option<Vec<String>> = self
            .client
            .request("list libraries", Method::GET, LIBRARY)
            .idempotent()
            .send()
            .await?;
        Ok(ids.unwrap_or_default())
    }

    /// One library.
    pub async fn get(&self, id: &str) -> Result<Library, Error> {
        self.client
            .request("get library", Method::GET, LIBRARY)
            .id(id)
            .idempotent()
            .send()
            .await
    }

    /// Every library, in full.
    pub async fn libraries(&self) -> Result<Vec<Library>, Error> {
        let mut libraries = Vec::new();
        for id in self.list().await? {
            libraries.push(self.get(&id).await?);
        }
        Ok(libraries)
    }

    /// The ids of the libraries matching `criteria`.
    pub async fn find(&self, criteria: &LibraryFind) -> Result<Vec<String>, Error> {
        let ids: Option<Vec<String>> = self
            .client
            .request("find libraries", Method::POST, LIBRARY)
            .action("find")
            .spec("spec", criteria)
            .idempotent()
            .send()
            .await?;
        Ok(ids.unwrap_or_default())
    }

    /// The library named `name` (without regard to case), if any.
    pub async fn by_name(&self, name: &str) -> Result<Option<Library>, Error> {
        let criteria = LibraryFind {
            name: Some(name.to_owned()),
            type_: None,
        };
        match self.find(&criteria).await?.first() {
            Some(id) => self.get(id).await.map(Some),
            None => Ok(None),
        }
    }

    /// Creates a local library; returns its id.
    pub async fn create_local(&self, spec: &LocalLibrarySpec) -> Result<String, Error> {
        self.client
            .request("create local library", Method::POST, LOCAL_LIBRARY)
            .subject(&spec.name)
            .spec("create_spec", spec)
            .send()
            .await
    }

    /// Deletes a local library and its items.
    pub async fn delete_local(&self, id: &str) -> Result<(), Error> {
        self.client
            .request("delete local library", Method::DELETE, LOCAL_LIBRARY)
            .id(id)
            .send_unit()
            .await
    }

    // ---- items ----

    /// The ids of a library's items.
    pub async fn list_items(&self, library_id: &str) -> Result<Vec<String>, Error> {
        let ids: Option<Vec<String>> = self
            .client
            .request("list library items", Method::GET, ITEM)
            .query("library_id", library_id)
            .idempotent()
            .send()
            .await?;
        Ok(ids.unwrap_or_default())
    }

    /// One library item.
    pub async fn get_item(&self, id: &str) -> Result<LibraryItem, Error> {
        self.client
            .request("get library item", Method::GET, ITEM)
            .id(id)
            .idempotent()
            .send()
            .await
    }

    /// Every item of a library, in full.
    pub async fn items(&self, library_id: &str) -> Result<Vec<LibraryItem>, Error> {
        let mut items = Vec::new();
        for id in self.list_items(library_id).await? {
            items.push(self.get_item(&id).await?);
        }
        Ok(items)
    }

    /// The ids of the items matching `criteria`.
    pub async fn find_items(&self, criteria: &ItemFind) -> Result<Vec<String>, Error> {
        let ids: Option<Vec<String>> = self
            .client
            .request("find library items", Method::POST, ITEM)
            .action("find")
            .spec("spec", criteria)
            .idempotent()
            .send()
            .await?;
        Ok(ids.unwrap_or_default())
    }

    /// The item named `name` in the library `library_id`, if any.
    pub async fn item_by_name(
        &self,
        library_id: &str,
        name: &str,
    ) -> Result<Option<LibraryItem>, Error> {
        let criteria = ItemFind {
            name: Some(name.to_owned()),
            library_id: Some(library_id.to_owned()),
            ..Default::default()
        };
        match self.find_items(&criteria).await?.first() {
            Some(id) => self.get_item(id).await.map(Some),
            None => Ok(None),
        }
    }

    /// Creates an (empty) item; returns its id. Give it content with
    /// [`upload_files`](Self::upload_files).
    pub async fn create_item(&self, spec: &ItemSpec) -> Result<String, Error> {
        self.client
            .request("create library item", Method::POST, ITEM)
            .subject(&spec.name)
            .spec("create_spec", spec)
            .send()
            .await
    }

    /// Deletes an item.
    pub async fn delete_item(&self, id: &str) -> Result<(), Error> {
        self.client
            .request("delete library item", Method::DELETE, ITEM)
            .id(id)
            .send_unit()
            .await
    }

    /// Uploads files (name and content) into an item through an update
    /// session: one session, each file added and pushed to the upload
    /// endpoint the server names, then the session completed and waited for.
    /// On failure the session is deleted, leaving the item as it was.
    ///
    /// The whole of each file is in memory and goes in one request bounded
    /// by the call timeout: this suits OVF descriptors and small images.
    pub async fn upload_files<N, C>(
        &self,
        item_id: &str,
        files: impl IntoIterator<Item = (N, C)>,
    ) -> Result<(), Error>
    where
        N: Into<String>,
        C: Into<Bytes>,
    {
        let files: Vec<(String, Bytes)> = files
            .into_iter()
            .map(|(n, c)| (n.into(), c.into()))
            .collect();
        #[derive(Serialize)]
        struct SessionSpec<'p> {
            library_item_id: &'p str,
        }
        let session_id: String = self
            .client
            .request("create update session", Method::POST, UPDATE_SESSION)
            .spec(
                "create_spec",
                &SessionSpec {
                    library_item_id: item_id,
                },
            )
            .send()
            .await?;
        let result = self.upload_in_session(&session_id, &files).await;
        if result.is_err() {
            let cleanup = self
                .client
                .request("delete update session", Method::DELETE, UPDATE_SESSION)
                .id(&session_id)
                .send_unit()
                .await;
            if let Err(err) = cleanup {
                tracing::debug!(error = %err, "could not delete the failed update session");
            }
        }
        result
    }

    async fn upload_in_session(
        &self,
        session_id: &str,
        files: &[(String, Bytes)],
    ) -> Result<(), Error> {
        #[derive(Serialize)]
        struct AddSpec<'p> {
            name: &'p str,
            source_type: &'static str,
            size: u64,
        }
        for (name, content) in files {
            let added: WireUpdateFile = self
                .client
                .request(
                    "add file to update session",
                    Method::POST,
                    UPDATE_SESSION_FILE,
                )
                .id(session_id)
                .action("add")
                .spec(
                    "file_spec",
                    &AddSpec {
                        name,
                        source_type: "PUSH",
                        size: content.len() as u64,
                    },
                )
                .send()
                .await?;
            let endpoint = added
                .upload_endpoint
                .map(|e| e.uri)
                .filter(|uri| !uri.is_empty())
                .ok_or_else(|| {
                    Error::new(
                        ErrorKind::Decode,
                        format!("add file to update session: the server named no upload endpoint for {:?}", added.name),
                    )
                })?;
            let url = self.same_server(&endpoint)?;
            self.client
                .request("upload library file", Method::PUT, ITEM)
                .url(url)
                .raw_body(content.clone(), "application/octet-stream")
                .idempotent()
                .send_unit()
                .await?;
        }
        self.client
            .request("complete update session", Method::POST, UPDATE_SESSION)
            .id(session_id)
            .action("complete")
            .send_unit()
            .await?;
        self.wait_for_session(session_id).await
    }

    /// The upload endpoint on the server the client talks to: vCenter names
    /// itself as it knows itself (a host name the client may not resolve, or
    /// reach only through an address it was given); the path is what counts.
    /// Keeps the session id from ever going to another host.
    fn same_server(&self, endpoint: &str) -> Result<ApiUrl, Error> {
        let named: http::Uri = endpoint.parse().map_err(|e| {
            Error::new(
                ErrorKind::Decode,
                "the server named an invalid upload endpoint",
            )
            .with_source(e)
        })?;
        let mut url = ApiUrl::root(self.client.base_url());
        if let Some(path_and_query) = named.path_and_query() {
            url.set_path_and_query(path_and_query);
        }
        Ok(url)
    }

    /// Waits until a completed update session is done (the server may still
    /// be validating the files).
    async fn wait_for_session(&self, session_id: &str) -> Result<(), Error> {
        const OPERATION: &str = "get update session";
        let deadline = Instant::now() + Duration::from_secs(600);
        loop {
            let result: Result<Option<WireUpdateSession>, Error> = self
                .client
                .request(OPERATION, Method::GET, UPDATE_SESSION)
                .id(session_id)
                .idempotent()
                .send()
                .await;
            let session = match result {
                // Finished sessions are soon forgotten.
                Err(err) if err.is_rest_error(&RestErrorType::NotFound) => return Ok(()),
                other => other?.unwrap_or_default(),
            };
            match session.state.as_str() {
                "DONE" => return Ok(()),
                "ERROR" | "CANCELED" => {
                    let messages = session.error_message.into_iter().collect();
                    return Err(rest_error(
                        "upload library files",
                        RestError::new(RestErrorType::Error, messages, 0),
                    ));
                }
                _ if Instant::now() >= deadline => {
                    return Err(Error::new(
                        ErrorKind::Timeout,
                        format!(
                            "the update session is still {} after 10 minutes",
                            session.state
                        ),
                    ))
                }
                _ => tokio::time::sleep(Duration::from_millis(500)).await,
            }
        }
    }

    // ---- deployment ----

    /// Deploys an OVF library item as a virtual machine and returns the new
    /// machine's reference. A deployment the server reports as failed is an
    /// [`ErrorKind::Rest`] error with the server's messages.
    pub async fn deploy_ovf(
        &self,
        item_id: &str,
        spec: &OvfDeploySpec,
    ) -> Result<ManagedObjectReference, Error> {
        const OPERATION: &str = "deploy OVF library item";
        let network_mappings =
            (!spec.network_mappings.is_empty()).then(|| match self.client.flavor() {
                ApiFlavor::Api => serde_json::Value::Object(
                    spec.network_mappings
                        .iter()
                        .map(|m| {
                            (
                                m.ovf_network.clone(),
                                serde_json::Value::String(m.network.value.clone()),
                            )
                        })
                        .collect::<BTreeMap<_, _>>()
                        .into_iter()
                        .collect(),
                ),
                _ => serde_json::Value::Array(
                    spec.network_mappings
                        .iter()
                        .map(
                            |m| serde_json::json!({"key": m.ovf_network, "value": m.network.value}),
                        )
                        .collect(),
                ),
            });
        let body = WireDeploy {
            target: WireDeployTarget {
                resource_pool_id: spec.resource_pool.value.clone(),
                host_id: spec.host.as_ref().map(|h| h.value.clone()),
                folder_id: spec.folder.as_ref().map(|f| f.value.clone()),
            },
            deployment_spec: WireDeploymentSpec {
                name: spec.name.clone(),
                annotation: spec.annotation.clone(),
                accept_all_eula: spec.accept_all_eula,
                default_datastore_id: spec.datastore.as_ref().map(|d| d.value.clone()),
                network_mappings,
                storage_provisioning: spec.storage_provisioning.clone(),
            },
        };
        let result: Option<WireDeploymentResult> = self
            .client
            .request(OPERATION, Method::POST, OVF_LIBRARY_ITEM)
            .id(item_id)
            .action("deploy")
            .fields(&body)
            .send()
            .await?;
        deployment_outcome(OPERATION, result.unwrap_or_default())
    }
}

impl ContentLibrary<'_> {
    /// Makes a VM-template library item of a virtual machine (cloned into
    /// the library as a template) and returns the item's id.
    pub async fn create_vm_template(&self, spec: &VmTemplateSpec) -> Result<String, Error> {
        let body = WireTemplateCreate {
            source_vm: spec.source_vm.value.clone(),
            name: spec.name.clone(),
            description: spec.description.clone(),
            library: spec.library_id.clone(),
            location: WireLocation::of(
                &spec.folder,
                &spec.resource_pool,
                &spec.host,
                &spec.cluster,
                &spec.datastore,
            ),
        };
        self.client
            .vcenter_request(
                "create VM template library item",
                Method::POST,
                VM_TEMPLATE_ITEMS,
            )
            .subject(&spec.name)
            .spec("spec", &body)
            .send()
            .await
    }

    /// Deploys a VM-template library item (type `vm-template`) as a virtual
    /// machine and returns its reference: `POST
    /// /api/vcenter/vm-template/library-items/{item}?action=deploy` (`/rest`:
    /// the same path under `/rest`, the spec as `{"spec": ...}`). The
    /// placement needs a resource pool, a host or a cluster; without one
    /// nothing is sent ([`ErrorKind::InvalidConfig`]).
    pub async fn deploy_vm_template(
        &self,
        item_id: &str,
        spec: &VmTemplateDeploySpec,
    ) -> Result<ManagedObjectReference, Error> {
        const OPERATION: &str = "deploy VM template library item";
        if spec.resource_pool.is_none() && spec.host.is_none() && spec.cluster.is_none() {
            return Err(Error::new(
                ErrorKind::InvalidConfig,
                format!("{OPERATION} {item_id}: the placement needs a resource pool, a host or a cluster"),
            ));
        }
        let body = WireTemplateDeploy {
            name: spec.name.clone(),
            description: spec.description.clone(),
            location: WireLocation::of(
                &spec.folder,
                &spec.resource_pool,
                &spec.host,
                &spec.cluster,
                &spec.datastore,
            ),
            powered_on: spec.powered_on,
        };
        let vm: String = self
            .client
            .vcenter_request(OPERATION, Method::POST, VM_TEMPLATE_ITEMS)
            .id(item_id)
            .action("deploy")
            .spec("spec", &body)
            .send()
            .await?;
        if vm.is_empty() {
            return Err(Error::new(
                ErrorKind::Decode,
                format!("{OPERATION} {item_id}: the server names no virtual machine"),
            ));
        }
        Ok(ManagedObjectReference::new("VirtualMachine", vm))
    }
}

/// The new machine of a deployment result, or its first error.
fn deployment_outcome(
    operation: &str,
    result: WireDeploymentResult,
) -> Result<ManagedObjectReference, Error> {
    if result.succeeded {
        if let Some(id) = result.resource_id {
            return Ok(id.into());
        }
        return Err(Error::new(
            ErrorKind::Decode,
            format!("{operation}: the server reports success but names no virtual machine"),
        ));
    }
    let first = result
        .error
        .and_then(|e| e.errors.into_iter().next())
        .unwrap_or_default();
    let (error_type, mut messages) = match first.error {
        Some(error) => (
            error
                .class
                .as_deref()
                .map(RestErrorType::parse)
                .unwrap_or(RestErrorType::Error),
            error.messages,
        ),
        None => (RestErrorType::Error, Vec::new()),
    };
    messages.extend(first.message);
    if messages.is_empty() {
        messages.push(LocalizableMessage {
            default_message: format!(
                "the deployment failed ({} error)",
                first.category.as_deref().unwrap_or("unspecified")
            ),
            ..Default::default()
        });
    }
    Err(rest_error(
        operation,
        RestError::new(error_type, messages, 0),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deployment_success_names_the_vm() {
        let result: WireDeploymentResult = serde_json::from_str(
            r#"{"succeeded":true,"resource_id":{"type":"VirtualMachine","id":"vm-77"}}"#,
        )
        .unwrap();
        assert_eq!(
            deployment_outcome("deploy", result).unwrap(),
            ManagedObjectReference::new("VirtualMachine", "vm-77")
        );
    }

    #[test]
    fn deployment_failure_is_a_rest_error() {
        let result: WireDeploymentResult = serde_json::from_str(
            r#"{"error":{"errors":[{"category":"SERVER","error":{"@class":"com.vmware.vapi.std.errors.error","messages":[{"default_message":"no .ovf"}]}}]}}"#,
        )
        .unwrap();
        let err = deployment_outcome("deploy", result).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Rest);
        assert_eq!(
            *err.rest_error().unwrap().error_type(),
            RestErrorType::Error
        );
        assert!(err.to_string().contains("no .ovf"), "{err}");
        let err = deployment_outcome("deploy", WireDeploymentResult::default()).unwrap_err();
        assert!(err.to_string().contains("deployment failed"), "{err}");
    }

    #[test]
    fn local_library_spec_wire_shape() {
        let ds = ManagedObjectReference::new("Datastore", "datastore-12");
        let json = serde_json::to_value(LocalLibrarySpec::on_datastore("images", &ds)).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"name": "images", "type": "LOCAL", "storage_backings": [{"type": "DATASTORE", "datastore_id": "datastore-12"}]})
        );
    }
}
