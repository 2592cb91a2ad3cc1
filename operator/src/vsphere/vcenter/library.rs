//! Content library images on a vCenter session, through the SDK's REST
//! side: an item found by library and item names (the library's `find`,
//! the item's `find`, one `get` each), and deployed into a datacenter as a
//! template VMs are cloned from (OVF or VM-template deploy, then
//! `MarkAsTemplate`), placed as a clone is: the failure domain's resource
//! pool and folder (the folder `banlieue-images` unless the failure domain
//! names one), a standalone host's host, the storage class's datastore (a
//! datastore cluster's with the most free space: Storage DRS recommends
//! for clones of a VM, and a deploy has none). The REST clients are made once per session: one
//! bounded by the Provider's call deadline for lookups, one for deploys,
//! which copy disks and may take far longer.

use std::time::Duration;

use tracing::info;

use vsphere_client::inventory::escape_name;
use vsphere_client::mo;
use vsphere_client::rest::{OvfDeploySpec, RestClient, VmTemplateDeploySpec};

use super::facts::{call_error, error};
use super::placement::{not_found, reference};
use super::VCenterSession;
use crate::vsphere::{
    Error, ErrorKind, FoundTemplate, ImageTarget, LibraryItemFacts, LibraryItemLookup,
    IMAGES_FOLDER,
};

/// How long one deploy may take, its retries included.
const DEPLOY_DEADLINE: Duration = Duration::from_secs(30 * 60);

impl VCenterSession {
    /// The session's REST client for lookups, or (`deploy`) for deploys.
    async fn rest(&self, deploy: bool) -> Result<RestClient, Error> {
        let cell = if deploy {
            &self.placement().rest_deploy
        } else {
            &self.placement().rest
        };
        cell.get_or_try_init(|| async {
            let soap = if deploy {
                self.client().with_call_deadline(DEPLOY_DEADLINE)
            } else {
                self.client().clone()
            };
            soap.rest()
                .await
                .map_err(|e| call_error(ErrorKind::Connect, "logging in to the REST API", &e))
        })
        .await
        .cloned()
    }

    pub(super) async fn library_item(
        &self,
        library: &str,
        item: &str,
    ) -> Result<LibraryItemLookup, Error> {
        let rest = self.rest(false).await?;
        let fail = |e: vsphere_client::Error| {
            call_error(
                ErrorKind::Lookup,
                &format!("looking up item {item:?} of content library {library:?}"),
                &e,
            )
        };
        let content = rest.library();
        let Some(found_library) = content.by_name(library).await.map_err(fail)? else {
            return Ok(LibraryItemLookup::NoLibrary);
        };
        let Some(found) = content
            .item_by_name(&found_library.id, item)
            .await
            .map_err(fail)?
        else {
            return Ok(LibraryItemLookup::NoItem);
        };
        Ok(LibraryItemLookup::Found(LibraryItemFacts {
            id: found.id,
            name: found.name,
            library: found_library.name,
            item_type: found
                .type_
                .map(|t| t.as_str().to_string())
                .unwrap_or_default(),
            content_version: found.content_version.unwrap_or_default(),
        }))
    }

    pub(super) async fn deploy_item(
        &self,
        item: &LibraryItemFacts,
        target: &ImageTarget,
    ) -> Result<FoundTemplate, Error> {
        let dc = &target.datacenter;
        // The failure domain's placement, through a clone's resolvers.
        let folder = match &target.folder {
            Some(folder) => self.vm_folder(dc, folder, true, false).await?,
            None => self.vm_folder(dc, IMAGES_FOLDER, false, false).await?,
        }
        .map_err(not_found)?;
        let path = format!(
            "{}/{}",
            folder.path.trim_start_matches('/'),
            escape_name(&target.name)
        );
        let existing = self
            .client()
            .search_inventory_path(&path)
            .await
            .map_err(|e| error(&format!("looking up {path}"), &e))?;
        let vm = match existing {
            Some(vm) => vm,
            None => {
                let pool = self
                    .resource_pool(dc, &target.cluster, target.resource_pool.as_deref(), false)
                    .await?
                    .map_err(not_found)?;
                let host = self.standalone_host(dc, &target.cluster).await?;
                let datastore = match (&target.datastore_cluster, &target.datastore) {
                    (Some(pod), _) => Some(self.disk_datastore(dc, "", Some(pod)).await?),
                    (None, Some(name)) => Some(self.disk_datastore(dc, name, None).await?),
                    (None, None) => None,
                };
                info!(
                    item = %item.name, library = %item.library, template = %target.name,
                    pool = %pool.path, folder = %folder.path,
                    datastore = datastore.as_ref().map_or("", |d| d.value.as_str()),
                    "deploying a content library item"
                );
                let pool = reference(&pool);
                let folder = reference(&folder);
                let host = host.as_ref().map(reference);
                let rest = self.rest(true).await?;
                let content = rest.library();
                let deployed = if item.item_type == "vm-template" {
                    let mut spec = VmTemplateDeploySpec::new(&target.name, pool);
                    spec.folder = Some(folder);
                    spec.host = host;
                    spec.datastore = datastore;
                    content.deploy_vm_template(&item.id, &spec).await
                } else {
                    let mut spec = OvfDeploySpec::new(&target.name, pool);
                    spec.folder = Some(folder);
                    spec.host = host;
                    spec.datastore = datastore;
                    spec.accept_all_eula = true;
                    content.deploy_ovf(&item.id, &spec).await
                };
                deployed.map_err(|e| {
                    error(
                        &format!(
                            "deploying item {:?} of content library {:?} into datacenter {}",
                            item.name, item.library, target.datacenter
                        ),
                        &e,
                    )
                })?
            }
        };
        // Read even after a fresh deploy: a VM-template item can come out a
        // template already (the simulator's does), and marking one fails.
        let is_template = self
            .client()
            .properties::<mo::VirtualMachine>(&["config.template"])
            .map_err(|e| error("reading the deployed VM", &e))?
            .get(&vm)
            .await
            .map_err(|e| error(&format!("reading {}", vm.value), &e))?
            .config
            .is_some_and(|c| c.template);
        if !is_template {
            self.client()
                .vm(vm.clone())
                .mark_as_template()
                .await
                .map_err(|e| error(&format!("marking {path} a template"), &e))?;
        }
        Ok(FoundTemplate { mo_ref: vm.value })
    }
}
