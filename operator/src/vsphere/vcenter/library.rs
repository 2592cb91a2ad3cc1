//! Content library images on a vCenter session, through the SDK's REST
//! side: an item found by library and item names (the library's `find`,
//! the item's `find`, one `get` each), and deployed into a datacenter as a
//! template VMs are cloned from (OVF or VM-template deploy, then
//! `MarkAsTemplate`). The REST clients are made once per session: one
//! bounded by the Provider's call deadline for lookups, one for deploys,
//! which copy disks and may take far longer.

use std::time::Duration;

use vsphere_client::inventory::escape_name;
use vsphere_client::mo;
use vsphere_client::rest::{OvfDeploySpec, RestClient, VmTemplateDeploySpec};

use super::facts::{call_error, error};
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
        let dc = escape_name(&target.datacenter);
        let folder = match self
            .vm_folder(&target.datacenter, IMAGES_FOLDER, false, false)
            .await?
        {
            Ok(at) => super::placement::reference(&at),
            Err(why) => return Err(Error::fault("NotFound", why)),
        };
        let path = format!(
            "{dc}/vm/{}/{}",
            escape_name(IMAGES_FOLDER),
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
                    .required(
                        &format!("{dc}/host/{}/Resources", escape_name(&target.cluster)),
                        "resource pool",
                    )
                    .await?;
                let rest = self.rest(true).await?;
                let content = rest.library();
                let deployed = if item.item_type == "vm-template" {
                    let mut spec = VmTemplateDeploySpec::new(&target.name, pool);
                    spec.folder = Some(folder);
                    content.deploy_vm_template(&item.id, &spec).await
                } else {
                    let mut spec = OvfDeploySpec::new(&target.name, pool);
                    spec.folder = Some(folder);
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
