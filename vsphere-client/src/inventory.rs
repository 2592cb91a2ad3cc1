//! Finding things in the inventory: by inventory path (`/DC0/vm/folder/vm-1`,
//! with `*` and `?` globs as govc accepts them), by name, by UUID, and typed
//! lists of datacenters, clusters, hosts, resource pools, datastores,
//! networks, VMs and templates.
//!
//! Like govmomi's `find.Finder`, the [`Finder`] hands out typed handles
//! ([`Datacenter`], [`Folder`], [`ResourcePool`], [`Datastore`],
//! [`HostSystem`], [`Network`]) that the VM lifecycle takes as they are, and
//! finds the default of each kind as govc does: the only one there is, or an
//! error that lists the choices.
//!
//! ```no_run
//! # async fn demo(client: vsphere_client::Client) -> Result<(), vsphere_client::Error> {
//! use vsphere_client::vm::CloneSpec;
//! let finder = client.finder().in_datacenter("DC0");
//! let folder = finder.default_folder().await?; // /DC0/vm
//! let pool = finder.resource_pool("DC0_C0/Resources").await?;
//! let datastore = finder.default_datastore().await?; // the only one, else an error naming each
//! let spec = CloneSpec::new(&folder).pool(&pool).datastore(&datastore);
//! # let _ = spec;
//! for vm in finder.find("vm/web-*").await? {
//!     println!("{} {}", vm.path, vm.reference);
//! }
//! let vm = finder.virtual_machine("web-1").await?; // any folder of the datacenter
//! for ds in finder.datastores().await? {
//!     let summary = ds.summary.unwrap_or_default();
//!     println!("{} {} free of {}", summary.name, summary.free_space, summary.capacity);
//! }
//! # Ok(()) }
//! ```
//!
//! A lookup by name (no `/`) searches every folder of the scope; a relative
//! path starts at the datacenter's folder of that kind (`datastore/`,
//! `host/`, `network/`; `host/` for resource pools, the datacenter itself
//! for folders); an absolute path is taken as it is. Exactly one object must
//! match: none is [`ErrorKind::NotFound`], several is
//! [`ErrorKind::InvalidArgument`] naming them.
//!
//! Every lookup costs one round trip per page of results (or per level of a
//! path), never one per object.

use std::collections::HashMap;

use crate::error::{Error, ErrorKind};
use crate::mo;
use crate::property::{traversal_spec, ManagedObject};
use crate::types::{AnySelectionSpec, ManagedObjectReference, ObjectSpec};
use crate::Client;

mod handles;
pub use handles::{Datacenter, Datastore, Folder, HostSystem, Network, NetworkKind, ResourcePool};

/// An inventory object with its name and inventory path.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct InventoryObject {
    /// The inventory path (`/DC0/vm/web-1`), names as the server spells them
    /// (a `/` inside a name is `%2f`).
    pub path: String,
    /// The object's name.
    pub name: String,
    /// The object.
    pub reference: ManagedObjectReference,
}

impl InventoryObject {
    /// The managed object type (`VirtualMachine`, `Folder`...).
    pub fn type_name(&self) -> &str {
        &self.reference.type_
    }
}

/// What the finder searches in: everything, one datacenter (by name or
/// path, resolved when first needed), or any container.
#[derive(Debug, Clone)]
enum Scope {
    Default,
    Datacenter(String),
    Container(ManagedObjectReference),
}

/// Finds inventory objects. Made by [`Client::finder`]; cheap to clone.
///
/// Relative paths (`vm/web-1`) are relative to the datacenter: the one
/// given with [`in_datacenter`](Self::in_datacenter), or the only one there is.
#[derive(Debug, Clone)]
pub struct Finder {
    client: Client,
    scope: Scope,
    /// The datacenter relative paths start from, once resolved.
    resolved: std::sync::Arc<tokio::sync::OnceCell<InventoryObject>>,
}

impl Client {
    /// A [`Finder`] over the whole inventory.
    pub fn finder(&self) -> Finder {
        Finder {
            client: self.clone(),
            scope: Scope::Default,
            resolved: Default::default(),
        }
    }

    /// `SearchIndex.FindByInventoryPath`: the object at an exact inventory
    /// path (`/DC0/vm/web-1` or `DC0/vm/web-1`, no globs), if any. One call.
    pub async fn search_inventory_path(
        &self,
        path: &str,
    ) -> Result<Option<ManagedObjectReference>, Error> {
        let index = search_index(self)?;
        self.vim()
            .find_by_inventory_path(&index, path.trim_start_matches('/'))
            .await
    }

    /// `SearchIndex.FindByUuid` for a VM: by its BIOS UUID (`config.uuid`),
    /// or by its instance UUID (`config.instanceUuid`, the one vCenter keeps
    /// unique) when `instance_uuid` is set. Searches every datacenter unless
    /// one is given.
    pub async fn search_vm_by_uuid(
        &self,
        uuid: &str,
        instance_uuid: bool,
        datacenter: Option<&ManagedObjectReference>,
    ) -> Result<Option<ManagedObjectReference>, Error> {
        check_uuid(uuid)?;
        let index = search_index(self)?;
        self.vim()
            .find_by_uuid(&index, datacenter, uuid, true, Some(instance_uuid))
            .await
    }

    /// Every VM with this UUID (BIOS UUIDs may repeat; instance UUIDs should not).
    pub async fn search_all_vms_by_uuid(
        &self,
        uuid: &str,
        instance_uuid: bool,
        datacenter: Option<&ManagedObjectReference>,
    ) -> Result<Vec<ManagedObjectReference>, Error> {
        check_uuid(uuid)?;
        let index = search_index(self)?;
        self.vim()
            .find_all_by_uuid(&index, datacenter, uuid, true, Some(instance_uuid))
            .await
    }
}

fn search_index(client: &Client) -> Result<ManagedObjectReference, Error> {
    client
        .service_content()
        .search_index
        .clone()
        .ok_or_else(|| Error::new(ErrorKind::InvalidArgument, "the server has no SearchIndex"))
}

/// A UUID is 32 hex digits, dashes and spaces aside (vSphere prints BIOS
/// UUIDs both ways).
fn check_uuid(uuid: &str) -> Result<(), Error> {
    let digits: Vec<char> = uuid.chars().filter(|c| *c != '-' && *c != ' ').collect();
    if digits.len() == 32 && digits.iter().all(char::is_ascii_hexdigit) {
        Ok(())
    } else {
        Err(Error::new(
            ErrorKind::InvalidArgument,
            format!("{uuid:?} is not a UUID (32 hex digits)"),
        ))
    }
}

/// An entity name as vCenter stores it and inventory paths spell it: `%`,
/// `/` and `\` escaped as `%25`, `%2f` and `%5c` (so `/` only ever separates
/// path components). [`unescape_name`] is its inverse.
///
/// ```
/// use vsphere_client::inventory::{escape_name, unescape_name};
/// assert_eq!(escape_name("DC/Paris 100%"), "DC%2fParis 100%25");
/// assert_eq!(unescape_name("DC%2fParis 100%25"), "DC/Paris 100%");
/// ```
pub fn escape_name(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for c in name.chars() {
        match c {
            '%' => out.push_str("%25"),
            '/' => out.push_str("%2f"),
            '\\' => out.push_str("%5c"),
            c => out.push(c),
        }
    }
    out
}

/// An entity name as people write it, from vCenter's spelling (`%2f`, `%5c`
/// and `%25`, either case, become `/`, `\` and `%`); any other `%` stays as
/// it is.
pub fn unescape_name(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut rest = name;
    while let Some(i) = rest.find('%') {
        out.push_str(&rest[..i]);
        let code = rest.get(i + 1..i + 3).map(str::to_ascii_lowercase);
        let decoded = match code.as_deref() {
            Some("2f") => Some('/'),
            Some("5c") => Some('\\'),
            Some("25") => Some('%'),
            _ => None,
        };
        match decoded {
            Some(c) => {
                out.push(c);
                rest = &rest[i + 3..];
            }
            None => {
                out.push('%');
                rest = &rest[i + 1..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// Whether `name` matches the glob `pattern` (`*` any run, `?` one
/// character; everything else literal).
pub fn glob_match(pattern: &str, name: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let n: Vec<char> = name.chars().collect();
    let (mut pi, mut ni) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ni < n.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == n[ni]) {
            pi += 1;
            ni += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some((pi, ni));
            pi += 1;
        } else if let Some((sp, sn)) = star {
            pi = sp + 1;
            ni = sn + 1;
            star = Some((sp, sn + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|c| *c == '*')
}

fn has_glob(component: &str) -> bool {
    component.contains('*') || component.contains('?')
}

fn join(parent: &str, name: &str) -> String {
    if parent == "/" {
        format!("/{name}")
    } else {
        format!("{parent}/{name}")
    }
}

fn hop(name: &str, type_: &str, path: &str) -> AnySelectionSpec {
    traversal_spec(name, type_, path, &[])
}

/// One step from an object to its inventory children (what a path
/// component names): a folder's entities, a datacenter's four folders, a
/// compute resource's hosts and root pool, a pool's child pools.
fn child_hops() -> Vec<AnySelectionSpec> {
    vec![
        hop("folderChildren", "Folder", "childEntity"),
        hop("dcVm", "Datacenter", "vmFolder"),
        hop("dcHost", "Datacenter", "hostFolder"),
        hop("dcDatastore", "Datacenter", "datastoreFolder"),
        hop("dcNetwork", "Datacenter", "networkFolder"),
        hop("crHost", "ComputeResource", "host"),
        hop("crPool", "ComputeResource", "resourcePool"),
        hop("poolChildren", "ResourcePool", "resourcePool"),
    ]
}

impl Finder {
    /// Scopes the finder to the datacenter `name` (a name, or an inventory
    /// path to a datacenter in a folder), as govc's `-dc`: relative paths
    /// start there, lists, name searches and defaults look only there.
    /// Resolved when first needed.
    pub fn in_datacenter(mut self, name: &str) -> Finder {
        self.scope = Scope::Datacenter(name.to_string());
        self.resolved = Default::default();
        self
    }

    /// Scopes the finder's lists and name searches to a container (a
    /// datacenter, folder, cluster...).
    pub fn under(mut self, container: ManagedObjectReference) -> Finder {
        self.scope = Scope::Container(container);
        self.resolved = Default::default();
        self
    }

    fn root(&self) -> InventoryObject {
        InventoryObject {
            path: "/".to_string(),
            name: String::new(),
            reference: self.client.service_content().root_folder.clone(),
        }
    }

    /// The children of each of `parents` (one round trip per page), sorted
    /// by name within each parent.
    async fn children(&self, parents: &[InventoryObject]) -> Result<Vec<InventoryObject>, Error> {
        if parents.is_empty() {
            return Ok(Vec::new());
        }
        let object_set = parents
            .iter()
            .map(|p| ObjectSpec {
                obj: p.reference.clone(),
                skip: Some(true),
                select_set: child_hops(),
            })
            .collect();
        let entities = self
            .client
            .properties::<mo::ManagedEntity>(&["name", "parent"])?
            .select(object_set)
            .collect_all()
            .await?;
        let by_parent: HashMap<&ManagedObjectReference, &InventoryObject> =
            parents.iter().map(|p| (&p.reference, p)).collect();
        let mut children: Vec<InventoryObject> = entities
            .into_iter()
            .filter_map(|e| {
                let parent = by_parent.get(e.parent.as_ref()?)?;
                let name = e.name?;
                Some(InventoryObject {
                    path: join(&parent.path, &name),
                    name,
                    reference: e.mo_ref,
                })
            })
            .collect();
        children.sort();
        Ok(children)
    }

    /// The datacenters, with their paths (datacenters may sit in folders):
    /// one round trip through the folders above them.
    pub async fn datacenter_objects(&self) -> Result<Vec<InventoryObject>, Error> {
        let root = self.root();
        let folders = traversal_spec("folders", "Folder", "childEntity", &["folders"]);
        let entities = self
            .client
            .properties::<mo::ManagedEntity>(&["name", "parent"])?
            .traverse(&root.reference, vec![folders])
            .collect_all()
            .await?;
        let by_ref: HashMap<&ManagedObjectReference, &mo::ManagedEntity> =
            entities.iter().map(|e| (&e.mo_ref, e)).collect();
        let mut paths: HashMap<ManagedObjectReference, String> = HashMap::new();
        paths.insert(root.reference.clone(), root.path.clone());
        let mut dcs: Vec<InventoryObject> = entities
            .iter()
            .filter(|e| e.mo_ref.type_ == "Datacenter")
            .filter_map(|e| {
                Some(InventoryObject {
                    path: path_of(&e.mo_ref, &by_ref, &mut paths)?,
                    name: e.name.clone()?,
                    reference: e.mo_ref.clone(),
                })
            })
            .collect();
        dcs.sort();
        Ok(dcs)
    }

    /// The datacenter relative paths start from (resolved once per finder):
    /// the one the finder is scoped to, or the only one there is
    /// ([`ErrorKind::InvalidArgument`] listing them when there are several).
    pub async fn default_datacenter(&self) -> Result<Datacenter, Error> {
        Datacenter::try_from(self.base_datacenter().await?)
    }

    async fn base_datacenter(&self) -> Result<InventoryObject, Error> {
        self.resolved
            .get_or_try_init(|| self.resolve_datacenter())
            .await
            .cloned()
    }

    /// A datacenter by name or inventory path (datacenters may sit in
    /// folders: `/Europe/Paris`), whatever the finder's scope.
    pub async fn datacenter(&self, name: &str) -> Result<Datacenter, Error> {
        let dcs = self.datacenter_objects().await?;
        Datacenter::try_from(pick_datacenter(dcs, name)?)
    }

    async fn resolve_datacenter(&self) -> Result<InventoryObject, Error> {
        let dcs = self.datacenter_objects().await?;
        match &self.scope {
            Scope::Datacenter(name) => pick_datacenter(dcs, name),
            Scope::Container(container) => match dcs.iter().find(|dc| &dc.reference == container) {
                Some(dc) => Ok(dc.clone()),
                None => Err(Error::new(
                    ErrorKind::InvalidArgument,
                    format!("the finder is scoped to {container}, not a datacenter"),
                )),
            },
            Scope::Default => only_one(dcs, "datacenter", "the inventory", "-dc"),
        }
    }

    /// Where a relative path starts.
    async fn base(&self) -> Result<InventoryObject, Error> {
        match &self.scope {
            Scope::Container(container) => {
                let mut described = self.describe(std::slice::from_ref(container)).await?;
                described.pop().ok_or_else(|| {
                    Error::new(ErrorKind::NotFound, format!("{container} not found"))
                })
            }
            _ => self.base_datacenter().await,
        }
    }

    /// What the scope is called in messages: the datacenter's path, a
    /// container's reference, or the whole inventory.
    async fn scope_label(&self) -> String {
        match &self.scope {
            Scope::Default => "the inventory".to_string(),
            Scope::Container(container) => container.to_string(),
            Scope::Datacenter(name) => match self.base_datacenter().await {
                Ok(dc) => dc.path,
                Err(_) => name.clone(),
            },
        }
    }

    /// A folder by inventory path: relative to the datacenter (`vm`,
    /// `vm/web`, `host/prod`) or absolute.
    pub async fn folder(&self, path: &str) -> Result<Folder, Error> {
        Folder::try_from(self.find_one(path).await?)
    }

    /// The datacenter's VM folder (`/DC0/vm`), where govc puts new VMs.
    pub async fn default_folder(&self) -> Result<Folder, Error> {
        let dc = self.base_datacenter().await?;
        self.folder(&join(&dc.path, "vm")).await
    }

    /// A resource pool or vApp by name or inventory path (`DC0_C0/Resources`
    /// is the root pool of cluster `DC0_C0`; relative paths start at the
    /// datacenter's host folder).
    pub async fn resource_pool(&self, path_or_name: &str) -> Result<ResourcePool, Error> {
        let found = self
            .entities_named::<mo::ResourcePool>(path_or_name, "host", ResourcePool::TYPE_NAMES)
            .await?;
        ResourcePool::try_from(one(found, path_or_name)?)
    }

    /// The default resource pool, as govc chooses it: the root pool of the
    /// only compute resource (cluster or standalone host) in the scope;
    /// with several, an error listing their root pools.
    pub async fn default_resource_pool(&self) -> Result<ResourcePool, Error> {
        let scope = self.scope_container().await?;
        let roots: Vec<ManagedObjectReference> = self
            .client
            .properties::<mo::ResourcePool>(&["parent"])?
            .in_container(&scope)
            .collect_all()
            .await?
            .into_iter()
            .filter(|pool| {
                pool.mo_ref.type_ == "ResourcePool"
                    && pool.parent.as_ref().is_some_and(|p| {
                        p.type_ == "ComputeResource" || p.type_ == "ClusterComputeResource"
                    })
            })
            .map(|pool| pool.mo_ref)
            .collect();
        let mut described = self.describe(&roots).await?;
        described.sort();
        let label = self.scope_label().await;
        ResourcePool::try_from(only_one(described, "resource pool", &label, "-pool")?)
    }

    /// A datastore by name or inventory path (relative paths start at the
    /// datacenter's datastore folder).
    pub async fn datastore(&self, path_or_name: &str) -> Result<Datastore, Error> {
        let found = self
            .entities_named::<mo::Datastore>(path_or_name, "datastore", Datastore::TYPE_NAMES)
            .await?;
        Datastore::try_from(one(found, path_or_name)?)
    }

    /// The only datastore in the scope; with several, an error listing them.
    pub async fn default_datastore(&self) -> Result<Datastore, Error> {
        let all = self
            .entities_named::<mo::Datastore>("*", "datastore", Datastore::TYPE_NAMES)
            .await?;
        let label = self.scope_label().await;
        Datastore::try_from(only_one(all, "datastore", &label, "-ds")?)
    }

    /// A host by name or inventory path (relative paths start at the
    /// datacenter's host folder: `DC0_C0/DC0_C0_H0`).
    pub async fn host(&self, path_or_name: &str) -> Result<HostSystem, Error> {
        let found = self
            .entities_named::<mo::HostSystem>(path_or_name, "host", HostSystem::TYPE_NAMES)
            .await?;
        HostSystem::try_from(one(found, path_or_name)?)
    }

    /// The only host in the scope; with several, an error listing them.
    pub async fn default_host(&self) -> Result<HostSystem, Error> {
        let all = self
            .entities_named::<mo::HostSystem>("*", "host", HostSystem::TYPE_NAMES)
            .await?;
        let label = self.scope_label().await;
        HostSystem::try_from(only_one(all, "host", &label, "-host")?)
    }

    /// The objects whose inventory path matches `path`. `*` and `?` glob
    /// within a component; `.` and empty components are ignored; a
    /// relative path starts at the datacenter. One round trip per component.
    pub async fn find(&self, path: &str) -> Result<Vec<InventoryObject>, Error> {
        let (mut current, rest) = if path.starts_with('/') {
            (vec![self.root()], path)
        } else {
            (vec![self.base().await?], path)
        };
        for component in rest.split('/').filter(|c| !c.is_empty() && *c != ".") {
            let children = self.children(&current).await?;
            current = children
                .into_iter()
                .filter(|c| {
                    if has_glob(component) {
                        glob_match(component, &c.name)
                    } else {
                        c.name == component
                    }
                })
                .collect();
            if current.is_empty() {
                break;
            }
        }
        Ok(current)
    }

    /// Exactly one object at `path`: [`ErrorKind::NotFound`] when none,
    /// [`ErrorKind::InvalidArgument`] when the path matches several.
    pub async fn find_one(&self, path: &str) -> Result<InventoryObject, Error> {
        one(self.find(path).await?, path)
    }

    /// What `ls` shows: the children of each object `path` matches (an
    /// object without children is shown itself). No path: the datacenter's
    /// (or the root's) children.
    pub async fn list(&self, path: &str) -> Result<Vec<InventoryObject>, Error> {
        let matches = if path.is_empty() {
            match self.base().await {
                Ok(base) => vec![base],
                Err(_) => vec![self.root()],
            }
        } else {
            self.find(path).await?
        };
        if matches.is_empty() {
            return Err(Error::new(
                ErrorKind::NotFound,
                format!("{path}: not found"),
            ));
        }
        let children = self.children(&matches).await?;
        let mut shown = Vec::new();
        for m in &matches {
            let mine: Vec<&InventoryObject> = children
                .iter()
                .filter(|c| c.path.starts_with(&m.path) && is_child(&m.path, &c.path))
                .collect();
            if mine.is_empty() && !is_container_type(m.type_name()) {
                shown.push(m.clone());
            } else {
                shown.extend(mine.into_iter().cloned());
            }
        }
        Ok(shown)
    }

    /// Every object under the objects `path` matches, recursively, of the
    /// given types (all types when empty), with their paths: what `find`
    /// shows. One walk (paged) per matched object.
    pub async fn find_under(
        &self,
        path: &str,
        types: &[&str],
    ) -> Result<Vec<InventoryObject>, Error> {
        let roots = if path.is_empty() || path == "/" {
            vec![self.root()]
        } else {
            self.find(path).await?
        };
        if roots.is_empty() {
            return Err(Error::new(
                ErrorKind::NotFound,
                format!("{path}: not found"),
            ));
        }
        let mut found = Vec::new();
        for root in &roots {
            if types.is_empty() || types.contains(&root.type_name()) {
                found.push(root.clone());
            }
            // Every entity below, with its parent: paths follow parents up to the root.
            let entities = self
                .client
                .properties::<mo::ManagedEntity>(&["name", "parent"])?
                .in_container(&root.reference)
                .collect_all()
                .await?;
            let by_ref: HashMap<&ManagedObjectReference, &mo::ManagedEntity> =
                entities.iter().map(|e| (&e.mo_ref, e)).collect();
            let mut paths: HashMap<ManagedObjectReference, String> = HashMap::new();
            paths.insert(root.reference.clone(), root.path.clone());
            for entity in &entities {
                if !types.is_empty() && !types.contains(&entity.mo_ref.type_.as_str()) {
                    continue;
                }
                if let Some(path) = path_of(&entity.mo_ref, &by_ref, &mut paths) {
                    found.push(InventoryObject {
                        path,
                        name: entity.name.clone().unwrap_or_default(),
                        reference: entity.mo_ref.clone(),
                    });
                }
            }
        }
        found.sort();
        found.dedup();
        Ok(found)
    }

    /// Names and inventory paths of objects, in one round trip (following
    /// each object's `parent` chain up to the root).
    pub async fn describe(
        &self,
        objects: &[ManagedObjectReference],
    ) -> Result<Vec<InventoryObject>, Error> {
        if objects.is_empty() {
            return Ok(Vec::new());
        }
        let up = traversal_spec("up", "ManagedEntity", "parent", &["up"]);
        let object_set = objects
            .iter()
            .map(|obj| ObjectSpec {
                obj: obj.clone(),
                skip: Some(false),
                select_set: vec![up.clone()],
            })
            .collect();
        let entities = self
            .client
            .properties::<mo::ManagedEntity>(&["name", "parent"])?
            .select(object_set)
            .collect_all()
            .await?;
        let by_ref: HashMap<&ManagedObjectReference, &mo::ManagedEntity> =
            entities.iter().map(|e| (&e.mo_ref, e)).collect();
        let root = self.root().reference;
        let mut paths: HashMap<ManagedObjectReference, String> = HashMap::new();
        paths.insert(root, "/".to_string());
        let mut described = Vec::with_capacity(objects.len());
        for obj in objects {
            let Some(entity) = by_ref.get(obj) else {
                continue;
            };
            if let Some(path) = path_of(obj, &by_ref, &mut paths) {
                described.push(InventoryObject {
                    path,
                    name: entity.name.clone().unwrap_or_default(),
                    reference: obj.clone(),
                });
            }
        }
        Ok(described)
    }

    /// A VM or template by inventory path, or by name alone (searched in
    /// every folder of the scope). Exactly one must match.
    pub async fn virtual_machine(&self, path_or_name: &str) -> Result<InventoryObject, Error> {
        one(self.virtual_machines(path_or_name).await?, path_or_name)
    }

    /// VMs and templates by inventory path or name, globs allowed. A name
    /// without `/` is searched for in every folder of the scope; a relative
    /// path starts at the datacenter's VM folder.
    pub async fn virtual_machines(&self, pattern: &str) -> Result<Vec<InventoryObject>, Error> {
        self.entities_named::<mo::VirtualMachine>(pattern, "vm", &["VirtualMachine"])
            .await
    }

    /// Hosts by inventory path or name, globs allowed (see
    /// [`virtual_machines`](Self::virtual_machines); [`host`](Self::host)
    /// for exactly one).
    pub async fn host_systems(&self, pattern: &str) -> Result<Vec<InventoryObject>, Error> {
        self.entities_named::<mo::HostSystem>(pattern, "host", HostSystem::TYPE_NAMES)
            .await
    }

    /// Objects of type `T` (any of `types`, `T` and its subtypes) by name
    /// (globs allowed; searched in the whole scope) or by inventory path
    /// (a relative one starts at the datacenter's `folder`), sorted by path.
    async fn entities_named<T: ManagedObject>(
        &self,
        pattern: &str,
        folder: &str,
        types: &[&str],
    ) -> Result<Vec<InventoryObject>, Error> {
        if pattern.contains('/') {
            let path = if pattern.starts_with('/') {
                pattern.to_string()
            } else {
                join(&join(&self.base_datacenter().await?.path, folder), pattern)
            };
            return Ok(self
                .find(&path)
                .await?
                .into_iter()
                .filter(|o| types.contains(&o.type_name()))
                .collect());
        }
        let scope = self.scope_container().await?;
        let named: Vec<ManagedObjectReference> = self
            .client
            .properties::<mo::ManagedEntity>(&["name"])?
            .in_container_of_types(&scope, &[T::TYPE_NAME])
            .collect_all()
            .await?
            .into_iter()
            .filter(|e| e.name.as_deref().is_some_and(|n| glob_match(pattern, n)))
            .map(|e| e.mo_ref)
            .collect();
        let mut described = self.describe(&named).await?;
        described.sort();
        Ok(described)
    }

    /// The container lists and name searches look in.
    async fn scope_container(&self) -> Result<ManagedObjectReference, Error> {
        match &self.scope {
            Scope::Default => Ok(self.root().reference),
            Scope::Container(container) => Ok(container.clone()),
            Scope::Datacenter(_) => Ok(self.base_datacenter().await?.reference),
        }
    }

    async fn list_of<T: ManagedObject>(&self, paths: &[&str]) -> Result<Vec<T>, Error> {
        let scope = self.scope_container().await?;
        self.client
            .properties::<T>(paths)?
            .in_container(&scope)
            .collect_all()
            .await
    }

    /// The datacenters (`name`, `parent`, the four folders).
    pub async fn datacenters(&self) -> Result<Vec<mo::Datacenter>, Error> {
        self.list_of(&[
            "name",
            "parent",
            "vmFolder",
            "hostFolder",
            "datastoreFolder",
            "networkFolder",
        ])
        .await
    }

    /// The clusters (`name`, `parent`, `host`, `datastore`, `network`,
    /// `resourcePool`).
    pub async fn clusters(&self) -> Result<Vec<mo::ClusterComputeResource>, Error> {
        self.list_of(&[
            "name",
            "parent",
            "host",
            "datastore",
            "network",
            "resourcePool",
        ])
        .await
    }

    /// The hosts (`name`, `parent`, `datastore`, `network`,
    /// `runtime.connectionState`, `runtime.powerState`,
    /// `runtime.inMaintenanceMode`).
    pub async fn hosts(&self) -> Result<Vec<mo::HostSystem>, Error> {
        self.list_of(&[
            "name",
            "parent",
            "datastore",
            "network",
            "runtime.connectionState",
            "runtime.powerState",
            "runtime.inMaintenanceMode",
        ])
        .await
    }

    /// The resource pools, vApps included (`name`, `parent`, `owner`).
    pub async fn resource_pools(&self) -> Result<Vec<mo::ResourcePool>, Error> {
        self.list_of(&["name", "parent", "owner"]).await
    }

    /// The datastores (`name`, `summary`: capacity, free space, type, URL,
    /// accessibility; `host`: the hosts that mount it).
    pub async fn datastores(&self) -> Result<Vec<mo::Datastore>, Error> {
        self.list_of(&["name", "summary", "host"]).await
    }

    /// The networks of the scope, sorted by path: standard port groups,
    /// distributed port groups (with their key and switch UUID, what a NIC
    /// backing needs) and opaque networks. Four round trips whatever their
    /// number.
    pub async fn networks(&self) -> Result<Vec<Network>, Error> {
        let all = self
            .entities_named::<mo::Network>("*", "network", Network::TYPE_NAMES)
            .await?;
        self.with_kinds(all).await
    }

    /// A network (port group) by name or inventory path (relative paths
    /// start at the datacenter's network folder), globs allowed: exactly
    /// one must match.
    pub async fn network(&self, path_or_name: &str) -> Result<Network, Error> {
        let found = self
            .entities_named::<mo::Network>(path_or_name, "network", Network::TYPE_NAMES)
            .await?;
        let found = one(found, path_or_name)?;
        let mut networks = self.with_kinds(vec![found]).await?;
        networks.pop().ok_or_else(|| {
            Error::new(
                ErrorKind::NotFound,
                format!("network {path_or_name:?} not found"),
            )
        })
    }

    /// The only network in the scope; with several, an error listing them.
    pub async fn default_network(&self) -> Result<Network, Error> {
        let all = self
            .entities_named::<mo::Network>("*", "network", Network::TYPE_NAMES)
            .await?;
        let label = self.scope_label().await;
        let only = only_one(all, "network", &label, "-net")?;
        let mut networks = self.with_kinds(vec![only]).await?;
        networks
            .pop()
            .ok_or_else(|| Error::new(ErrorKind::NotFound, "the network is gone"))
    }

    /// Network handles for network objects: distributed port groups get
    /// their key and switch UUID (two round trips when there are any).
    async fn with_kinds(&self, objects: Vec<InventoryObject>) -> Result<Vec<Network>, Error> {
        let portgroup_refs: Vec<ManagedObjectReference> = objects
            .iter()
            .filter(|o| o.type_name() == "DistributedVirtualPortgroup")
            .map(|o| o.reference.clone())
            .collect();
        let portgroups = if portgroup_refs.is_empty() {
            Vec::new()
        } else {
            self.client
                .properties::<mo::DistributedVirtualPortgroup>(&[
                    "key",
                    "config.distributedVirtualSwitch",
                ])?
                .get_many(&portgroup_refs)
                .await?
        };
        let switches: Vec<ManagedObjectReference> = {
            let mut s: Vec<ManagedObjectReference> = portgroups
                .iter()
                .filter_map(|pg| pg.config.as_ref()?.distributed_virtual_switch.clone())
                .collect();
            s.sort();
            s.dedup();
            s
        };
        let switch_uuids: HashMap<ManagedObjectReference, String> = if switches.is_empty() {
            HashMap::new()
        } else {
            self.client
                .properties::<mo::DistributedVirtualSwitch>(&["uuid"])?
                .get_many(&switches)
                .await?
                .into_iter()
                .filter_map(|s| Some((s.mo_ref, s.uuid?)))
                .collect()
        };
        let portgroups: HashMap<ManagedObjectReference, mo::DistributedVirtualPortgroup> =
            portgroups
                .into_iter()
                .map(|pg| (pg.mo_ref.clone(), pg))
                .collect();
        objects
            .into_iter()
            .map(|object| {
                let kind = match object.type_name() {
                    "DistributedVirtualPortgroup" => {
                        let pg = portgroups.get(&object.reference);
                        let switch = pg
                            .and_then(|pg| pg.config.as_ref()?.distributed_virtual_switch.clone());
                        NetworkKind::Distributed {
                            portgroup_key: pg.and_then(|pg| pg.key.clone()).unwrap_or_default(),
                            switch_uuid: switch
                                .as_ref()
                                .and_then(|s| switch_uuids.get(s).cloned())
                                .unwrap_or_default(),
                            switch,
                        }
                    }
                    "OpaqueNetwork" => NetworkKind::Opaque,
                    _ => NetworkKind::Standard,
                };
                Network::new(object, kind)
            })
            .collect()
    }

    /// The VMs and templates (`name`, `parent`, `resourcePool`,
    /// `config.template`, `config.uuid`, `config.instanceUuid`,
    /// `runtime.powerState`).
    pub async fn vms(&self) -> Result<Vec<mo::VirtualMachine>, Error> {
        self.list_of(&[
            "name",
            "parent",
            "resourcePool",
            "config.template",
            "config.uuid",
            "config.instanceUuid",
            "runtime.powerState",
        ])
        .await
    }

    /// The templates only (same properties as [`vms`](Self::vms)).
    pub async fn templates(&self) -> Result<Vec<mo::VirtualMachine>, Error> {
        Ok(self
            .vms()
            .await?
            .into_iter()
            .filter(|vm| vm.config.as_ref().is_some_and(|c| c.template))
            .collect())
    }

    /// The template called `name` in the scope (a datacenter, typically):
    /// `Ok(None)` when there is none, [`ErrorKind::InvalidArgument`] when
    /// several templates share the name. A VM of that name that is not a
    /// template does not count. One walk over the scope's VMs (name and
    /// template flag only).
    pub async fn template(&self, name: &str) -> Result<Option<mo::VirtualMachine>, Error> {
        let scope = self.scope_container().await?;
        let mut found: Vec<mo::VirtualMachine> = self
            .client
            .properties::<mo::VirtualMachine>(&[
                "name",
                "config.template",
                "config.uuid",
                "config.instanceUuid",
            ])?
            .in_container(&scope)
            .collect_all()
            .await?
            .into_iter()
            .filter(|vm| {
                vm.name.as_deref() == Some(name) && vm.config.as_ref().is_some_and(|c| c.template)
            })
            .collect();
        match found.len() {
            0 => Ok(None),
            1 => Ok(found.pop()),
            n => Err(Error::new(
                ErrorKind::InvalidArgument,
                format!("{n} templates are named {name:?}"),
            )),
        }
    }
}

fn one(mut found: Vec<InventoryObject>, what: &str) -> Result<InventoryObject, Error> {
    match found.len() {
        1 => Ok(found.remove(0)),
        0 => Err(Error::new(
            ErrorKind::NotFound,
            format!("{what}: not found"),
        )),
        n => Err(Error::new(
            ErrorKind::InvalidArgument,
            format!(
                "{what} matches {n} objects: {}",
                found
                    .iter()
                    .map(|o| o.path.as_str())
                    .take(5)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        )),
    }
}

/// The datacenter called `name` or at path `name` among `dcs`.
fn pick_datacenter(dcs: Vec<InventoryObject>, name: &str) -> Result<InventoryObject, Error> {
    let wanted = name.trim_end_matches('/');
    let mut found: Vec<InventoryObject> = dcs
        .into_iter()
        .filter(|dc| dc.name == wanted || dc.path == wanted || dc.path == format!("/{wanted}"))
        .collect();
    match found.len() {
        1 => Ok(found.remove(0)),
        0 => Err(Error::new(
            ErrorKind::NotFound,
            format!("datacenter {name:?} not found"),
        )),
        _ => Err(Error::new(
            ErrorKind::InvalidArgument,
            format!(
                "datacenter {name:?} is ambiguous, give its path: {}",
                found
                    .iter()
                    .map(|o| o.path.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        )),
    }
}

/// The default of a kind, as govc's finder picks it: the only one there
/// is. None is [`ErrorKind::NotFound`]; several is
/// [`ErrorKind::InvalidArgument`] listing them, so the user can choose.
fn only_one(
    mut found: Vec<InventoryObject>,
    kind: &str,
    scope: &str,
    flag: &str,
) -> Result<InventoryObject, Error> {
    match found.len() {
        1 => Ok(found.remove(0)),
        0 => Err(Error::new(
            ErrorKind::NotFound,
            format!("no {kind} in {scope}"),
        )),
        n => {
            const SHOWN: usize = 20;
            let mut choices: Vec<&str> =
                found.iter().map(|o| o.path.as_str()).take(SHOWN).collect();
            if n > SHOWN {
                choices.push("...");
            }
            Err(Error::new(
                ErrorKind::InvalidArgument,
                format!(
                    "default {kind}: {n} in {scope}, choose one (govc {flag}): {}",
                    choices.join(", ")
                ),
            ))
        }
    }
}

fn is_child(parent: &str, path: &str) -> bool {
    let rest = if parent == "/" {
        path.strip_prefix('/')
    } else {
        path.strip_prefix(parent).and_then(|r| r.strip_prefix('/'))
    };
    rest.is_some_and(|r| !r.is_empty() && !r.contains('/'))
}

fn is_container_type(type_name: &str) -> bool {
    matches!(
        type_name,
        "Folder"
            | "Datacenter"
            | "ComputeResource"
            | "ClusterComputeResource"
            | "ResourcePool"
            | "VirtualApp"
    )
}

/// The path of `obj`, from the known paths and the parent chain.
fn path_of(
    obj: &ManagedObjectReference,
    by_ref: &HashMap<&ManagedObjectReference, &mo::ManagedEntity>,
    paths: &mut HashMap<ManagedObjectReference, String>,
) -> Option<String> {
    if let Some(path) = paths.get(obj) {
        return Some(path.clone());
    }
    // Climb to the first ancestor whose path is known, then come back down.
    let mut chain = vec![obj.clone()];
    let mut current = obj.clone();
    for _ in 0..256 {
        let parent = by_ref.get(&current)?.parent.clone()?;
        if paths.contains_key(&parent) {
            break;
        }
        chain.push(parent.clone());
        current = parent;
    }
    for object in chain.into_iter().rev() {
        let entity = by_ref.get(&object)?;
        let parent_path = paths.get(entity.parent.as_ref()?)?.clone();
        paths.insert(object, join(&parent_path, entity.name.as_deref()?));
    }
    paths.get(obj).cloned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_escape_and_unescape() {
        assert_eq!(escape_name("a/b\\c%d"), "a%2fb%5cc%25d");
        assert_eq!(unescape_name("a%2fb%5cc%25d"), "a/b\\c%d");
        assert_eq!(unescape_name("a%2Fb%5Cc"), "a/b\\c");
        // Escaped once only: an escaped "%2f" stays a literal "%2f".
        assert_eq!(unescape_name("%252f"), "%2f");
        assert_eq!(unescape_name(&escape_name("%2f")), "%2f");
        // A lone or unknown escape, or one cut short, is kept as written.
        assert_eq!(unescape_name("100% %zz %2"), "100% %zz %2");
        assert_eq!(unescape_name("é%2fü"), "é/ü");
        for name in ["", "plain", "DC/Paris", "a\\b", "50%", "%", "/%/\\"] {
            assert_eq!(unescape_name(&escape_name(name)), name);
        }
    }

    #[test]
    fn globs() {
        assert!(glob_match("*", "anything"));
        assert!(glob_match("DC*", "DC0"));
        assert!(glob_match("DC?_C*", "DC0_C12"));
        assert!(glob_match("*VM1", "DC0_H0_VM1"));
        assert!(!glob_match("*VM1", "DC0_H0_VM10"));
        assert!(glob_match("a*b*c", "aXXbYYc"));
        assert!(!glob_match("a*b*c", "aXXbYY"));
        assert!(glob_match("", ""));
        assert!(!glob_match("", "x"));
        assert!(glob_match("web-1", "web-1"));
    }

    #[test]
    fn children_are_one_level_down() {
        assert!(is_child("/", "/DC0"));
        assert!(!is_child("/", "/DC0/vm"));
        assert!(is_child("/DC0/vm", "/DC0/vm/x"));
        assert!(!is_child("/DC0/vm", "/DC0/vm2"));
        assert!(!is_child("/DC0/vm", "/DC0/vm/x/y"));
    }

    #[test]
    fn uuids() {
        assert!(check_uuid("42033ad2-5b3c-8a52-4c3f-0d5e1f2a3b4c").is_ok());
        assert!(check_uuid("42 03 3a d2 5b 3c 8a 52-4c 3f 0d 5e 1f 2a 3b 4c").is_ok());
        assert!(check_uuid("not-a-uuid").is_err());
    }
}
