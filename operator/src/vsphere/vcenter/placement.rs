//! Where a clone goes, on a real vCenter: its resource pool, VM folder,
//! datastore and host, and the Provider's check of the pools and folders it
//! names ([`Session::verify_placement`](crate::vsphere::Session)).
//!
//! - A resource pool is a path under the compute resource's root pool
//!   (`team-a/web`), an inventory path under it (`/DC0/host/C0/Resources/team-a`)
//!   or, written without `/`, a pool's name anywhere under it (exactly one
//!   pool of that name).
//! - A configured folder is a path under the datacenter's VM folder
//!   (`apps/web`, or `/DC0/vm/apps/web`): its last level is made when absent,
//!   the levels above must exist. The default folder (`banlieue-<failure domain>`) is made right
//!   under the VM folder.
//! - A datastore cluster (StoragePod, by name in the datacenter's datastore
//!   folder) gives the datastore Storage DRS recommends for this clone
//!   (`RecommendDatastores`, the recommendation's datastore used in the
//!   clone); where Storage DRS is off or recommends nothing, its accessible
//!   datastore with the most free space, with a note saying why.
//! - A standalone host's compute resource places the clone on its host.
//! - A linked clone's base, the template's current snapshot, is made ready
//!   here (see [`super::linked`]) and named in the placement.
//!
//! Paths resolve through `FindByInventoryPath`, cached for the session with
//! the rest of a clone's placement; the Provider's check looks afresh.

use vsphere_client::inventory::{escape_name, unescape_name};
use vsphere_client::mo;
use vsphere_client::types::{
    DuplicateName, ManagedObjectReference, StorageDrsPodSelectionSpec, StoragePlacementAction,
    StoragePlacementSpec, VirtualMachineCloneSpec, VirtualMachineRelocateSpec,
    VmPodConfigForPlacement,
};
use vsphere_client::vm::CloneSpec;

use super::facts::error;
use super::VCenterSession;
use crate::vsphere::{
    CloneRequest, Error, ErrorKind, Located, Placement, PlacementMissing, PlacementTarget,
};

/// `path` (escaped, without a leading `/`) and the object found there.
fn located(path: &str, found: ManagedObjectReference) -> Located {
    Located {
        path: format!("/{}", path.trim_start_matches('/')),
        type_: found.type_,
        mo_ref: found.value,
    }
}

/// A placement object's reference.
pub(super) fn reference(at: &Located) -> ManagedObjectReference {
    ManagedObjectReference {
        type_: at.type_.clone(),
        value: at.mo_ref.clone(),
    }
}

/// A user's path with its empty levels (leading, trailing, doubled `/`) dropped.
fn clean(path: &str) -> String {
    path.split('/')
        .filter(|level| !level.is_empty())
        .collect::<Vec<_>>()
        .join("/")
}

/// A missing placement object: the fault the driver reports as `PlacementNotFound`.
pub(super) fn not_found(message: String) -> Error {
    Error::fault("NotFound", message)
}

impl VCenterSession {
    /// The resource pool `pool` of compute resource `cluster` (its root pool
    /// when `None`), or what is wrong with it.
    pub(super) async fn resource_pool(
        &self,
        datacenter: &str,
        cluster: &str,
        pool: Option<&str>,
        fresh: bool,
    ) -> Result<Result<Located, String>, Error> {
        let root_path = format!(
            "{}/host/{}/Resources",
            escape_name(datacenter),
            escape_name(cluster)
        );
        let Some(root) = self.lookup(&root_path, fresh).await? else {
            return Ok(Err(format!(
                "no cluster or host {cluster:?} with a root resource pool in datacenter {datacenter:?}"
            )));
        };
        let absolute = pool.is_some_and(|p| p.starts_with('/'));
        let Some(mut pool) = pool.map(clean).filter(|p| !p.is_empty()) else {
            return Ok(Ok(located(&root_path, root)));
        };
        if absolute {
            // An inventory path: under this failure domain's root pool.
            match pool.strip_prefix(&format!("{root_path}/")) {
                Some(under) => pool = under.to_string(),
                None if pool == root_path => return Ok(Ok(located(&root_path, root))),
                None => {
                    return Ok(Err(format!(
                        "resource pool /{pool} is not under the failure domain's root pool /{root_path}"
                    )))
                }
            }
        }
        let path = format!("{root_path}/{pool}");
        if let Some(found) = self.lookup(&path, fresh).await? {
            if matches!(found.type_.as_str(), "ResourcePool" | "VirtualApp") {
                return Ok(Ok(located(&path, found)));
            }
            return Ok(Err(format!(
                "/{path} is a {}, not a resource pool",
                found.type_
            )));
        }
        if absolute || pool.contains('/') {
            return Ok(Err(format!("resource pool /{path} not found")));
        }
        self.pool_named(&root_path, &root, &pool).await
    }

    /// The one pool named `name` anywhere under the root pool `root`.
    async fn pool_named(
        &self,
        root_path: &str,
        root: &ManagedObjectReference,
        name: &str,
    ) -> Result<Result<Located, String>, Error> {
        let fail = |e: vsphere_client::Error| error("listing resource pools", &e);
        let pools = self
            .client()
            .properties::<mo::ResourcePool>(&["name", "parent"])
            .map_err(fail)?
            .in_container(root)
            .collect_all()
            .await
            .map_err(fail)?;
        let wanted = unescape_name(name);
        let named: Vec<&mo::ResourcePool> = pools
            .iter()
            .filter(|p| p.name.as_deref().map(unescape_name).as_deref() == Some(wanted.as_str()))
            .collect();
        let [found] = named.as_slice() else {
            return Ok(Err(if named.is_empty() {
                format!("no resource pool {name:?} under /{root_path}")
            } else {
                format!(
                    "{} resource pools are named {name:?} under /{root_path}: give its path",
                    named.len()
                )
            }));
        };
        // Its path, from its parents up to the root pool (bounded: a cycle
        // in a malformed answer must not hang the reconcile).
        let mut levels = vec![found.name.clone().unwrap_or_default()];
        let mut parent = found.parent.clone();
        for _ in 0..pools.len() {
            let Some(up) = parent.filter(|p| p.value != root.value) else {
                break;
            };
            let Some(p) = pools.iter().find(|p| p.mo_ref.value == up.value) else {
                break;
            };
            levels.push(p.name.clone().unwrap_or_default());
            parent = p.parent.clone();
        }
        levels.reverse();
        Ok(Ok(located(
            &format!("{root_path}/{}", levels.join("/")),
            found.mo_ref.clone(),
        )))
    }

    /// The VM folder `folder` of `datacenter`: a path under its VM folder
    /// (levels above the last must exist) when `is_path`, else one folder
    /// right under it; made when absent (two makers racing: the loser's
    /// `DuplicateName` means it exists). What is wrong with it otherwise.
    pub(super) async fn vm_folder(
        &self,
        datacenter: &str,
        folder: &str,
        is_path: bool,
        fresh: bool,
    ) -> Result<Result<Located, String>, Error> {
        let vm_folder = format!("{}/vm", escape_name(datacenter));
        let relative = if !is_path {
            escape_name(folder)
        } else if folder.starts_with('/') {
            // An inventory path: under this datacenter's VM folder.
            let absolute = clean(folder);
            match absolute.strip_prefix(&format!("{vm_folder}/")) {
                Some(under) => under.to_string(),
                None => {
                    return Ok(Err(format!(
                        "folder /{absolute} is not under the datacenter's VM folder /{vm_folder}"
                    )))
                }
            }
        } else {
            clean(folder)
        };
        let path = format!("{vm_folder}/{relative}");
        if let Some(found) = self.lookup(&path, fresh).await? {
            if found.type_ == "Folder" {
                return Ok(Ok(located(&path, found)));
            }
            return Ok(Err(format!("/{path} is a {}, not a folder", found.type_)));
        }
        let (above, leaf) = match relative.rsplit_once('/') {
            Some((above, leaf)) => (format!("{vm_folder}/{above}"), leaf.to_string()),
            None => (vm_folder.clone(), relative.clone()),
        };
        let Some(parent) = self.lookup(&above, fresh).await? else {
            return Ok(Err(format!(
                "folder /{above} does not exist (only the last level of a folder is made)"
            )));
        };
        if parent.type_ != "Folder" {
            return Ok(Err(format!("/{above} is a {}, not a folder", parent.type_)));
        }
        let made = match self
            .client()
            .vim()
            .create_folder(&parent, &unescape_name(&leaf))
            .await
        {
            Ok(made) => made,
            Err(e) if e.is_fault::<DuplicateName>() => match self.lookup(&path, true).await? {
                Some(found) => found,
                None => return Ok(Err(format!("folder /{path} exists but cannot be found"))),
            },
            Err(e) => {
                let e = error(&format!("creating folder /{path}"), &e);
                // A refusal (no permission...) is what the folder's reason says.
                return match e.fault {
                    Some(_) => Ok(Err(e.to_string())),
                    None => Err(e),
                };
            }
        };
        self.remember(&path, &made);
        Ok(Ok(located(&path, made)))
    }

    /// The Provider's check of a failure domain's pool and folder.
    pub(super) async fn check_placement(
        &self,
        target: &PlacementTarget,
    ) -> Result<Option<PlacementMissing>, Error> {
        if let Some(pool) = &target.resource_pool {
            if let Err(what) = self
                .resource_pool(&target.datacenter, &target.cluster, Some(pool), true)
                .await?
            {
                return Ok(Some(PlacementMissing::ResourcePool(what)));
            }
        }
        if let Some(folder) = &target.folder {
            if let Err(what) = self
                .vm_folder(&target.datacenter, folder, true, true)
                .await?
            {
                return Ok(Some(PlacementMissing::Folder(format!(
                    "{what} (datacenter {:?})",
                    target.datacenter
                ))));
            }
        }
        Ok(None)
    }

    /// Where the clone of `request` goes; see the module's documentation.
    pub(super) async fn decide_placement(
        &self,
        request: &CloneRequest,
    ) -> Result<Placement, Error> {
        let dc = &request.datacenter;
        let resource_pool = self
            .resource_pool(
                dc,
                &request.cluster,
                request.resource_pool.as_deref(),
                false,
            )
            .await?
            .map_err(not_found)?;
        let folder = self
            .vm_folder(dc, &request.folder, request.folder_is_path, false)
            .await?
            .map_err(not_found)?;
        let host = self.standalone_host(dc, &request.cluster).await?;
        let mut placement = Placement {
            resource_pool,
            folder,
            host,
            ..Default::default()
        };
        match (&request.datastore_cluster, &request.datastore) {
            (Some(pod), _) => {
                let (datastore, note) = self.datastore_of_pod(request, pod, &placement).await?;
                placement.datastore = Some(datastore);
                placement.datastore_cluster = Some(pod.clone());
                placement.note = Some(note);
            }
            (None, Some(name)) => {
                let path = format!("{}/datastore/{}", escape_name(dc), escape_name(name));
                let found = self.required(&path, "datastore").await?;
                placement.datastore = Some(located(&path, found));
            }
            (None, None) => {}
        }
        if request.linked {
            // Made ready now (the template's snapshot taken, in this pool,
            // when it has none), so the status shows what the clone uses.
            let template = self.template_of(request).await?;
            placement.linked_clone_base = self
                .linked_clone_base_of(&template, &request.template_name, &placement)
                .await?;
        }
        Ok(placement)
    }

    /// The host of a standalone host's compute resource (`None` for a
    /// cluster). Read once per session, like the paths: a clone onto a host
    /// that is gone clears the cache (see `clone_source`).
    pub(super) async fn standalone_host(
        &self,
        datacenter: &str,
        cluster: &str,
    ) -> Result<Option<Located>, Error> {
        let path = format!("{}/host/{}", escape_name(datacenter), escape_name(cluster));
        let compute = self.required(&path, "cluster or host").await?;
        if compute.type_ != "ComputeResource" {
            return Ok(None);
        }
        let cached = self
            .placement()
            .standalone_hosts
            .lock()
            .ok()
            .and_then(|hosts| hosts.get(&path).cloned());
        if cached.is_some() {
            return Ok(cached);
        }
        let hosts = self
            .client()
            .properties::<mo::ComputeResource>(&["host"])
            .map_err(|e| error("reading the host", &e))?
            .get(&compute)
            .await
            .map_err(|e| error(&format!("reading the host of /{path}"), &e))?
            .host
            .unwrap_or_default();
        let Some(host) = hosts.into_iter().next() else {
            return Err(not_found(format!("standalone host /{path} has no host")));
        };
        let name = self
            .client()
            .properties::<mo::HostSystem>(&["name"])
            .map_err(|e| error("reading the host", &e))?
            .get(&host)
            .await
            .map_err(|e| error(&format!("reading host {}", host.value), &e))?
            .name
            .unwrap_or_else(|| host.value.clone());
        self.placement().name_host(&host.value, &name);
        let found = located(&format!("{path}/{name}"), host);
        if let Ok(mut hosts) = self.placement().standalone_hosts.lock() {
            hosts.insert(path, found.clone());
        }
        Ok(Some(found))
    }

    /// The datacenter's datastore cluster `pod` (directly in its datastore folder).
    async fn storage_pod(
        &self,
        datacenter: &str,
        pod: &str,
    ) -> Result<(String, mo::StoragePod), Error> {
        let path = format!("{}/datastore/{}", escape_name(datacenter), escape_name(pod));
        let found = self
            .path(&path)
            .await?
            .filter(|r| r.type_ == "StoragePod")
            .ok_or_else(|| {
                not_found(format!(
                    "datastore cluster {pod:?} not found in datacenter {datacenter:?}"
                ))
            })?;
        let read = self
            .client()
            .properties::<mo::StoragePod>(&[
                "childEntity",
                "podStorageDrsEntry.storageDrsConfig.podConfig.enabled",
            ])
            .map_err(|e| error("reading the datastore cluster", &e))?
            .get(&found)
            .await
            .map_err(|e| error(&format!("reading datastore cluster /{path}"), &e))?;
        Ok((path, read))
    }

    /// The datastore of `pod` for this clone, and how it was chosen.
    async fn datastore_of_pod(
        &self,
        request: &CloneRequest,
        pod: &str,
        placement: &Placement,
    ) -> Result<(Located, String), Error> {
        let (path, read) = self.storage_pod(&request.datacenter, pod).await?;
        let enabled = read
            .pod_storage_drs_entry
            .as_ref()
            .is_some_and(|e| e.storage_drs_config.pod_config.enabled);
        let why = if enabled {
            match self
                .recommend(request, &path, &read.mo_ref, placement)
                .await
            {
                Ok(Some(found)) => {
                    let name = self.datastore_name(&found).await?;
                    let at = located(&format!("{path}/{}", escape_name(&name)), found);
                    return Ok((at, "recommended by Storage DRS".to_string()));
                }
                Ok(None) => "Storage DRS recommended no datastore".to_string(),
                // vCenter not answering, or the session lost: not a choice to make here.
                Err(e) if matches!(e.kind, ErrorKind::Unresponsive | ErrorKind::Connect) => {
                    return Err(e)
                }
                Err(e) => format!("Storage DRS failed ({e})"),
            }
        } else {
            "Storage DRS is off".to_string()
        };
        let at = self.most_free(&path, &read).await?;
        Ok((at, format!("{why}: the datastore with the most free space")))
    }

    /// `StorageResourceManager.RecommendDatastores` for this clone: the
    /// first recommendation's datastore.
    async fn recommend(
        &self,
        request: &CloneRequest,
        pod_path: &str,
        pod: &ManagedObjectReference,
        placement: &Placement,
    ) -> Result<Option<ManagedObjectReference>, Error> {
        let content = self.client().service_content();
        let Some(srm) = content.storage_resource_manager.clone() else {
            return Ok(None);
        };
        let template = self.template_of(request).await?;
        let pool = reference(&placement.resource_pool);
        let folder = reference(&placement.folder);
        let host = placement.host.as_ref().map(reference);
        let spec = StoragePlacementSpec {
            type_: "clone".into(),
            vm: Some(template),
            clone_name: Some(request.name.clone()),
            clone_spec: Some(VirtualMachineCloneSpec {
                location: VirtualMachineRelocateSpec {
                    folder: Some(folder.clone()),
                    pool: Some(pool.clone()),
                    host: host.clone(),
                    ..Default::default()
                },
                ..Default::default()
            }),
            folder: Some(folder),
            resource_pool: Some(pool),
            host,
            pod_selection_spec: StorageDrsPodSelectionSpec {
                storage_pod: Some(pod.clone()),
                // The VM's own configuration on the pod (its disks with it).
                initial_vm_config: vec![VmPodConfigForPlacement {
                    storage_pod: pod.clone(),
                    ..Default::default()
                }],
            },
            ..Default::default()
        };
        let result = self
            .client()
            .vim()
            .recommend_datastores(&srm, &spec)
            .await
            .map_err(|e| error(&format!("Storage DRS recommendation on /{pod_path}"), &e))?;
        Ok(result
            .recommendations
            .iter()
            .flat_map(|r| r.action.iter())
            .find_map(|a| a.downcast_ref::<StoragePlacementAction>())
            .map(|a| a.destination.clone()))
    }

    async fn datastore_name(&self, datastore: &ManagedObjectReference) -> Result<String, Error> {
        Ok(self
            .client()
            .properties::<mo::Datastore>(&["name"])
            .map_err(|e| error("reading the datastore", &e))?
            .get(datastore)
            .await
            .map_err(|e| error(&format!("reading datastore {}", datastore.value), &e))?
            .name
            .map(|n| unescape_name(&n))
            .unwrap_or_else(|| datastore.value.clone()))
    }

    /// The accessible datastore of the pod with the most free space.
    async fn most_free(&self, pod_path: &str, pod: &mo::StoragePod) -> Result<Located, Error> {
        let children: Vec<ManagedObjectReference> = pod
            .child_entity
            .clone()
            .unwrap_or_default()
            .into_iter()
            .filter(|c| c.type_ == "Datastore")
            .collect();
        let fail =
            |e: vsphere_client::Error| error("reading the datastore cluster's datastores", &e);
        let datastores = if children.is_empty() {
            Vec::new()
        } else {
            self.client()
                .properties::<mo::Datastore>(&["name", "summary.freeSpace", "summary.accessible"])
                .map_err(fail)?
                .get_many(&children)
                .await
                .map_err(fail)?
        };
        let best = datastores
            .into_iter()
            .filter(|d| d.summary.as_ref().is_some_and(|s| s.accessible))
            .max_by_key(|d| d.summary.as_ref().map_or(0, |s| s.free_space));
        let Some(best) = best else {
            return Err(not_found(format!(
                "datastore cluster /{pod_path} has no accessible datastore"
            )));
        };
        let name = best
            .name
            .clone()
            .unwrap_or_else(|| best.mo_ref.value.clone());
        Ok(located(&format!("{pod_path}/{name}"), best.mo_ref))
    }

    /// An added disk's datastore: by name (in its datastore cluster when it
    /// has one), or the cluster's with the most free space.
    pub(super) async fn disk_datastore(
        &self,
        datacenter: &str,
        datastore: &str,
        pod: Option<&str>,
    ) -> Result<ManagedObjectReference, Error> {
        let Some(pod) = pod else {
            let path = format!(
                "{}/datastore/{}",
                escape_name(datacenter),
                escape_name(datastore)
            );
            return self.required(&path, "datastore").await;
        };
        let (path, read) = self.storage_pod(datacenter, pod).await?;
        if datastore.is_empty() {
            return Ok(reference(&self.most_free(&path, &read).await?));
        }
        // By name among the cluster's datastores (what an inventory path
        // through a datastore cluster finds differs between servers).
        let children = read.child_entity.unwrap_or_default();
        let fail =
            |e: vsphere_client::Error| error("reading the datastore cluster's datastores", &e);
        let named = self
            .client()
            .properties::<mo::Datastore>(&["name"])
            .map_err(fail)?
            .get_many(&children)
            .await
            .map_err(fail)?
            .into_iter()
            .find(|d| d.name.as_deref().map(unescape_name).as_deref() == Some(datastore));
        named.map(|d| d.mo_ref).ok_or_else(|| {
            not_found(format!(
                "datastore {datastore:?} not found in datastore cluster /{path}"
            ))
        })
    }
}

/// The clone spec's placement (folder, pool, datastore, host), from a decided placement.
pub(super) fn placed_clone_spec(placement: &Placement) -> CloneSpec {
    let mut spec =
        CloneSpec::new(reference(&placement.folder)).pool(reference(&placement.resource_pool));
    if let Some(datastore) = &placement.datastore {
        spec = spec.datastore(reference(datastore));
    }
    if let Some(host) = &placement.host {
        spec = spec.host(reference(host));
    }
    spec
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(path: &str, type_: &str, mo_ref: &str) -> Located {
        Located {
            path: path.into(),
            type_: type_.into(),
            mo_ref: mo_ref.into(),
        }
    }

    /// What `CloneVM_Task` carries of a placement: its folder, pool,
    /// datastore and (a standalone host's) host in the relocate spec.
    #[test]
    fn the_clone_spec_carries_the_whole_placement() {
        let placement = Placement {
            resource_pool: at("/DC0/host/DC0_H0/Resources", "ResourcePool", "resgroup-9"),
            folder: at("/DC0/vm/edge", "Folder", "group-v7"),
            datastore: Some(at("/DC0/datastore/pod/ds-2", "Datastore", "datastore-2")),
            datastore_cluster: Some("pod".into()),
            host: Some(at("/DC0/host/DC0_H0/DC0_H0", "HostSystem", "host-5")),
            note: None,
            linked_clone_base: None,
        };
        let template = ManagedObjectReference {
            type_: "VirtualMachine".into(),
            value: "vm-1".into(),
        };
        let spec = placed_clone_spec(&placement)
            .to_vim(&template, &[], None)
            .expect("a clone spec");
        let r = |type_: &str, value: &str| {
            Some(ManagedObjectReference {
                type_: type_.into(),
                value: value.into(),
            })
        };
        let location = spec.location;
        assert_eq!(location.folder, r("Folder", "group-v7"));
        assert_eq!(location.pool, r("ResourcePool", "resgroup-9"));
        assert_eq!(location.datastore, r("Datastore", "datastore-2"));
        assert_eq!(location.host, r("HostSystem", "host-5"));

        // A cluster's: no host (DRS chooses), the template's datastore.
        let cluster = Placement {
            host: None,
            datastore: None,
            ..placement
        };
        let location = placed_clone_spec(&cluster)
            .to_vim(&template, &[], None)
            .expect("a clone spec")
            .location;
        assert_eq!((location.host, location.datastore), (None, None));
    }

    #[test]
    fn user_paths_lose_their_empty_levels() {
        assert_eq!(clean("/team-a//web/"), "team-a/web");
        assert_eq!(clean("a%2fb"), "a%2fb");
        assert_eq!(
            located("DC0/vm/apps", ManagedObjectReference::default()).path,
            "/DC0/vm/apps"
        );
    }
}
