//! [`Session`] on a vCenter session: the failure-domain inventory and the
//! template lookup. Each reads the whole inventory it needs through the
//! PropertyCollector with traversal specs, in a fixed number of paged
//! `RetrievePropertiesEx` calls whatever its size.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use tracing::warn;

use vsphere_client::inventory::unescape_name;
use vsphere_client::mo;
use vsphere_client::property::traversal_spec;
use vsphere_client::types::{AnySelectionSpec, HostSystemConnectionState, ManagedObjectReference};

use super::facts::call_error;
use super::VCenterSession;
use crate::vsphere::{
    Cluster, Datacenter, Error, ErrorKind, FoundTemplate, ImageTarget, Inventory, LibraryItemFacts,
    LibraryItemLookup, PlacementMissing, PlacementTarget, Session,
};

impl Session for VCenterSession {
    async fn inventory(&self) -> Result<Inventory, Error> {
        let root = self.client().service_content().root_folder.clone();
        let fail = |e: vsphere_client::Error| {
            call_error(ErrorKind::Inventory, "walking the inventory", &e)
        };
        // Two walks of the same traversal (datacenters, their host, network
        // and datastore folders, clusters and their hosts; never the VMs):
        // names and parents of everything, then the hosts' datastores.
        let entities = self
            .client
            .properties::<mo::ManagedEntity>(&["name", "parent"])
            .map_err(fail)?
            .max_objects(self.page_size)
            .traverse(&root, failure_domain_traversal())
            .collect_all()
            .await
            .map_err(fail)?;
        let hosts = self
            .client
            .properties::<mo::HostSystem>(&["datastore", "runtime.connectionState"])
            .map_err(fail)?
            .max_objects(self.page_size)
            .traverse(&root, failure_domain_traversal())
            .collect_all()
            .await
            .map_err(fail)?;
        let entities = entities
            .into_iter()
            .map(|e| Entity {
                mo_ref: e.mo_ref,
                name: e.name,
                parent: e.parent,
            })
            .collect();
        let hosts = hosts
            .into_iter()
            .map(|h| Host {
                connected: h
                    .runtime
                    .as_ref()
                    .is_some_and(|r| r.connection_state == HostSystemConnectionState::Connected),
                datastores: h.datastore.unwrap_or_default(),
                mo_ref: h.mo_ref,
            })
            .collect();
        Ok(assemble(entities, hosts))
    }

    async fn verify_placement(
        &self,
        target: &PlacementTarget,
    ) -> Result<Option<PlacementMissing>, Error> {
        self.check_placement(target).await
    }

    async fn find_template(
        &self,
        name: &str,
        datacenters: &[String],
    ) -> Result<BTreeMap<String, Option<FoundTemplate>>, Error> {
        let fail = |e: vsphere_client::Error| {
            call_error(
                ErrorKind::Lookup,
                &format!("looking up template {name:?}"),
                &e,
            )
        };
        // Names and parents of the VM folders' contents, then `config.template`
        // of the few VMs with the right name: never every VM's config.
        let entities = self.vm_folder_entities().await.map_err(fail)?;
        let tree = Tree::new(&entities);
        let candidates: Vec<ManagedObjectReference> = entities
            .iter()
            .filter(|e| {
                e.mo_ref.type_ == "VirtualMachine"
                    && e.name.as_deref().map(unescape_name).as_deref() == Some(name)
            })
            .map(|e| e.mo_ref.clone())
            .collect();
        let mut found: BTreeMap<String, Option<FoundTemplate>> =
            datacenters.iter().map(|dc| (dc.clone(), None)).collect();
        if candidates.is_empty() {
            return Ok(found);
        }
        let mut vms = self
            .client
            .properties::<mo::VirtualMachine>(&["config.template", "config.annotation"])
            .map_err(fail)?
            .get_many(&candidates)
            .await
            .map_err(fail)?;
        // Two templates of one name in a datacenter (in different folders): the
        // same one every time.
        vms.sort_by(|a, b| a.mo_ref.value.cmp(&b.mo_ref.value));
        for vm in vms {
            let template = vm.config.as_ref().is_some_and(|c| c.template);
            // A template of ours halfway through its linked-clone
            // conversion (a VM for now): finished here when it was left so.
            let converting = vm
                .config
                .as_ref()
                .and_then(|c| c.annotation.as_deref())
                .and_then(super::linked::converting_since)
                .is_some();
            if !template && !converting {
                continue;
            }
            if converting {
                if let Err(e) = self.linked_clone_base(&vm.mo_ref, name, None).await {
                    warn!(template = %name, vm = %vm.mo_ref.value, error = %e, "finishing the linked-clone conversion of a template failed; retried at the next lookup or linked clone");
                }
            }
            if let Some(slot) = tree
                .datacenter_of(&vm.mo_ref)
                .and_then(|dc| found.get_mut(&dc))
            {
                slot.get_or_insert(FoundTemplate {
                    mo_ref: vm.mo_ref.value.clone(),
                });
            }
        }
        Ok(found)
    }

    async fn find_library_item(
        &self,
        library: &str,
        item: &str,
    ) -> Result<LibraryItemLookup, Error> {
        self.library_item(library, item).await
    }

    async fn deploy_library_item(
        &self,
        item: &LibraryItemFacts,
        target: &ImageTarget,
    ) -> Result<FoundTemplate, Error> {
        self.deploy_item(item, target).await
    }

    async fn remove_library_templates(
        &self,
        item: &LibraryItemFacts,
        datacenters: &[String],
        keep: &BTreeSet<String>,
    ) -> Result<Vec<String>, Error> {
        let fail = |e: vsphere_client::Error| {
            call_error(
                ErrorKind::Lookup,
                &format!("looking up the older templates of item {:?}", item.name),
                &e,
            )
        };
        let entities = self.vm_folder_entities().await.map_err(fail)?;
        let tree = Tree::new(&entities);
        let (prefix, current) = (item.template_prefix(), item.template_name());
        let older: Vec<(ManagedObjectReference, String)> = entities
            .iter()
            .filter(|e| e.mo_ref.type_ == "VirtualMachine")
            .filter_map(|e| Some((e.mo_ref.clone(), tree.name_of(&e.mo_ref)?)))
            .filter(|(_, name)| {
                name.strip_prefix(&prefix)
                    .is_some_and(|v| !v.is_empty() && !v.contains('-'))
                    && *name != current
                    && !keep.contains(name)
            })
            .filter(|(vm, _)| {
                tree.datacenter_of(vm)
                    .is_some_and(|dc| datacenters.contains(&dc))
            })
            .collect();
        if older.is_empty() {
            return Ok(Vec::new());
        }
        let refs: Vec<ManagedObjectReference> = older.iter().map(|(r, _)| r.clone()).collect();
        let templates: BTreeSet<String> = self
            .client
            .properties::<mo::VirtualMachine>(&["config.template"])
            .map_err(fail)?
            .get_many(&refs)
            .await
            .map_err(fail)?
            .into_iter()
            .filter(|vm| vm.config.as_ref().is_some_and(|c| c.template))
            .map(|vm| vm.mo_ref.value)
            .collect();
        let mut removed = Vec::new();
        for (vm, name) in older {
            // A VM of that name (a deploy that stopped halfway, or not ours): left.
            if !templates.contains(&vm.value) {
                continue;
            }
            self.client()
                .vm(vm.clone())
                .destroy()
                .await
                .map_err(|e| super::facts::error(&format!("destroying template {name}"), &e))?;
            removed.push(name);
        }
        Ok(removed)
    }
}

impl VCenterSession {
    /// Names and parents of everything in the datacenters' VM folders.
    async fn vm_folder_entities(&self) -> Result<Vec<Entity>, vsphere_client::Error> {
        let root = self.client().service_content().root_folder.clone();
        Ok(self
            .client
            .properties::<mo::ManagedEntity>(&["name", "parent"])?
            .max_objects(self.page_size)
            .traverse(&root, vm_folder_traversal())
            .collect_all()
            .await?
            .into_iter()
            .map(|e| Entity {
                mo_ref: e.mo_ref,
                name: e.name,
                parent: e.parent,
            })
            .collect())
    }
}

/// From the root folder: folders, datacenters, their host, network and
/// datastore folders with what they hold (clusters, networks, datastores,
/// nested folders and storage pods), and the clusters' hosts. Not the VM
/// folders: a failure domain walk costs the same with 10 VMs or 10,000.
fn failure_domain_traversal() -> Vec<AnySelectionSpec> {
    const NEXT: &[&str] = &[
        "folderChildren",
        "datacenterHosts",
        "datacenterNetworks",
        "datacenterDatastores",
        "computeHosts",
    ];
    vec![
        traversal_spec("folderChildren", "Folder", "childEntity", NEXT),
        traversal_spec(
            "datacenterHosts",
            "Datacenter",
            "hostFolder",
            &["folderChildren"],
        ),
        traversal_spec(
            "datacenterNetworks",
            "Datacenter",
            "networkFolder",
            &["folderChildren"],
        ),
        traversal_spec(
            "datacenterDatastores",
            "Datacenter",
            "datastoreFolder",
            &["folderChildren"],
        ),
        traversal_spec("computeHosts", "ComputeResource", "host", &[]),
    ]
}

/// From the root folder: folders, datacenters and their VM folders' contents
/// (VMs, templates, nested folders).
fn vm_folder_traversal() -> Vec<AnySelectionSpec> {
    vec![
        traversal_spec(
            "folderChildren",
            "Folder",
            "childEntity",
            &["folderChildren", "datacenterVms"],
        ),
        traversal_spec(
            "datacenterVms",
            "Datacenter",
            "vmFolder",
            &["folderChildren"],
        ),
    ]
}

/// A managed entity's name and parent.
#[derive(Clone, Debug)]
struct Entity {
    mo_ref: ManagedObjectReference,
    name: Option<String>,
    parent: Option<ManagedObjectReference>,
}

#[derive(Clone, Debug)]
struct Host {
    mo_ref: ManagedObjectReference,
    datastores: Vec<ManagedObjectReference>,
    connected: bool,
}

/// Parent links, to find the datacenter an entity belongs to.
struct Tree<'a> {
    by_value: HashMap<&'a str, &'a Entity>,
}

impl<'a> Tree<'a> {
    fn new(entities: &'a [Entity]) -> Self {
        Tree {
            by_value: entities
                .iter()
                .map(|e| (e.mo_ref.value.as_str(), e))
                .collect(),
        }
    }

    fn name_of(&self, mo_ref: &ManagedObjectReference) -> Option<String> {
        self.by_value
            .get(mo_ref.value.as_str())
            .and_then(|e| e.name.as_deref())
            .map(unescape_name)
    }

    /// The name of the datacenter above `mo_ref`.
    fn datacenter_of(&self, mo_ref: &ManagedObjectReference) -> Option<String> {
        let mut current = self.by_value.get(mo_ref.value.as_str())?.parent.as_ref()?;
        // Bounded: a malformed answer with a parent cycle must not hang the reconcile.
        for _ in 0..self.by_value.len() {
            if current.type_ == "Datacenter" {
                return self.name_of(current);
            }
            current = self.by_value.get(current.value.as_str())?.parent.as_ref()?;
        }
        None
    }
}

/// The inventory from the walk's entities and hosts: per datacenter, its
/// clusters and standalone hosts with the datastores mounted on every
/// connected host of each (and the datastore clusters holding them), and its
/// networks (standard, distributed and opaque).
fn assemble(entities: Vec<Entity>, hosts: Vec<Host>) -> Inventory {
    let tree = Tree::new(&entities);
    let mut datacenters: BTreeMap<String, Datacenter> = entities
        .iter()
        .filter(|e| e.mo_ref.type_ == "Datacenter")
        .filter_map(|e| tree.name_of(&e.mo_ref))
        .map(|name| {
            (
                name.clone(),
                Datacenter {
                    name,
                    ..Default::default()
                },
            )
        })
        .collect();

    let mut hosts_of: HashMap<&str, Vec<&Host>> = HashMap::new();
    for host in &hosts {
        let parent = tree
            .by_value
            .get(host.mo_ref.value.as_str())
            .and_then(|e| e.parent.as_ref());
        if let Some(parent) = parent {
            hosts_of
                .entry(parent.value.as_str())
                .or_default()
                .push(host);
        }
    }

    // (datacenter, datastore) -> the datastore cluster (StoragePod) holding it.
    let pod_of: HashMap<(String, String), String> = entities
        .iter()
        .filter(|e| e.mo_ref.type_ == "Datastore")
        .filter_map(|e| {
            let parent = e.parent.as_ref().filter(|p| p.type_ == "StoragePod")?;
            Some((
                (tree.datacenter_of(&e.mo_ref)?, tree.name_of(&e.mo_ref)?),
                tree.name_of(parent)?,
            ))
        })
        .collect();

    for entity in &entities {
        let Some(dc) = tree
            .datacenter_of(&entity.mo_ref)
            .and_then(|name| datacenters.get_mut(&name))
        else {
            continue;
        };
        let Some(name) = tree.name_of(&entity.mo_ref) else {
            continue;
        };
        match entity.mo_ref.type_.as_str() {
            kind @ ("ClusterComputeResource" | "ComputeResource") => {
                let connected: Vec<&Host> = hosts_of
                    .get(entity.mo_ref.value.as_str())
                    .into_iter()
                    .flatten()
                    .copied()
                    .filter(|h| h.connected)
                    .collect();
                let mut mounted: Option<BTreeSet<String>> = None;
                for host in &connected {
                    let names: BTreeSet<String> = host
                        .datastores
                        .iter()
                        .filter_map(|ds| tree.name_of(ds))
                        .collect();
                    mounted = Some(match mounted {
                        None => names,
                        Some(so_far) => so_far.intersection(&names).cloned().collect(),
                    });
                }
                let datastores: Vec<String> = mounted.unwrap_or_default().into_iter().collect();
                let mut datastore_clusters: Vec<String> = datastores
                    .iter()
                    .filter_map(|ds| pod_of.get(&(dc.name.clone(), ds.clone())))
                    .cloned()
                    .collect();
                datastore_clusters.sort();
                datastore_clusters.dedup();
                dc.clusters.push(Cluster {
                    name,
                    datastores,
                    datastore_clusters,
                    standalone: kind == "ComputeResource",
                });
            }
            "Network" | "DistributedVirtualPortgroup" | "OpaqueNetwork" => dc.portgroups.push(name),
            _ => {}
        }
    }
    let mut inventory = Inventory {
        datacenters: datacenters.into_values().collect(),
    };
    for dc in &mut inventory.datacenters {
        dc.clusters.sort_by(|a, b| a.name.cmp(&b.name));
        dc.portgroups.sort();
        dc.portgroups.dedup();
    }
    inventory
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(type_: &str, value: &str) -> ManagedObjectReference {
        ManagedObjectReference {
            type_: type_.into(),
            value: value.into(),
        }
    }

    fn entity(
        type_: &str,
        value: &str,
        name: &str,
        parent: Option<&ManagedObjectReference>,
    ) -> Entity {
        Entity {
            mo_ref: r(type_, value),
            name: Some(name.into()),
            parent: parent.cloned(),
        }
    }

    #[test]
    fn assembles_clusters_standalone_hosts_datastores_pods_and_networks_per_datacenter() {
        let root = r("Folder", "group-d1");
        let dcs_folder = r("Folder", "group-d2");
        let dc1 = r("Datacenter", "datacenter-1");
        let hosts1 = r("Folder", "group-h1");
        let nested = r("Folder", "group-h9");
        let nets1 = r("Folder", "group-n1");
        let dss1 = r("Folder", "group-s1");
        let c1 = r("ClusterComputeResource", "domain-c1");
        let c2 = r("ClusterComputeResource", "domain-c2");
        let standalone = r("ComputeResource", "domain-s1");
        let ds_a = r("Datastore", "datastore-a");
        let ds_b = r("Datastore", "datastore-b");
        let pod = r("StoragePod", "group-p1");
        let ds_c = r("Datastore", "datastore-c");
        let entities = vec![
            entity("Folder", "group-d1", "Datacenters", None),
            entity("Folder", "group-d2", "EMEA", Some(&root)),
            entity(
                "Datacenter",
                "datacenter-1",
                "DC%2fParis",
                Some(&dcs_folder),
            ),
            entity("Folder", "group-h1", "host", Some(&dc1)),
            entity("Folder", "group-h9", "prod", Some(&hosts1)),
            entity("Folder", "group-n1", "network", Some(&dc1)),
            entity("Folder", "group-s1", "datastore", Some(&dc1)),
            entity("ClusterComputeResource", "domain-c1", "C1", Some(&hosts1)),
            entity("ClusterComputeResource", "domain-c2", "C2", Some(&nested)),
            entity("ComputeResource", "domain-s1", "standalone", Some(&hosts1)),
            entity("HostSystem", "host-1", "h1", Some(&c1)),
            entity("HostSystem", "host-2", "h2", Some(&c1)),
            entity("HostSystem", "host-3", "h3", Some(&c1)),
            entity("HostSystem", "host-4", "h4", Some(&c2)),
            entity("HostSystem", "host-5", "h5", Some(&standalone)),
            entity("Datastore", "datastore-a", "ds-a", Some(&dss1)),
            entity("Datastore", "datastore-b", "ds-b", Some(&dss1)),
            entity("StoragePod", "group-p1", "gold-pod", Some(&dss1)),
            entity("Datastore", "datastore-c", "ds-c", Some(&pod)),
            entity("Network", "network-1", "VM Network", Some(&nets1)),
            entity(
                "DistributedVirtualPortgroup",
                "dvportgroup-1",
                "prod",
                Some(&nets1),
            ),
            entity(
                "VmwareDistributedVirtualSwitch",
                "dvs-1",
                "DSwitch",
                Some(&nets1),
            ),
        ];
        let host = |value: &str, ds: &[&ManagedObjectReference], connected: bool| Host {
            mo_ref: r("HostSystem", value),
            datastores: ds.iter().map(|d| (*d).clone()).collect(),
            connected,
        };
        let hosts = vec![
            host("host-1", &[&ds_a, &ds_b], true),
            host("host-2", &[&ds_a], true),
            // Disconnected: what it mounts does not narrow the cluster's set.
            host("host-3", &[], false),
            host("host-4", &[&ds_b], true),
            host("host-5", &[&ds_a, &ds_c], true),
        ];
        let inventory = assemble(entities, hosts);
        assert_eq!(
            inventory,
            Inventory {
                datacenters: vec![Datacenter {
                    name: "DC/Paris".into(),
                    clusters: vec![
                        Cluster {
                            name: "C1".into(),
                            datastores: vec!["ds-a".into()],
                            ..Default::default()
                        },
                        Cluster {
                            name: "C2".into(),
                            datastores: vec!["ds-b".into()],
                            ..Default::default()
                        },
                        // A host outside any cluster is a compute resource too.
                        Cluster {
                            name: "standalone".into(),
                            datastores: vec!["ds-a".into(), "ds-c".into()],
                            datastore_clusters: vec!["gold-pod".into()],
                            standalone: true,
                        },
                    ],
                    portgroups: vec!["VM Network".into(), "prod".into()],
                }]
            }
        );
    }

    #[test]
    fn a_cluster_without_connected_hosts_offers_no_datastore() {
        let dc = r("Datacenter", "dc");
        let hf = r("Folder", "hf");
        let entities = vec![
            entity("Datacenter", "dc", "DC", None),
            entity("Folder", "hf", "host", Some(&dc)),
            entity("ClusterComputeResource", "c", "empty", Some(&hf)),
        ];
        let inventory = assemble(entities, Vec::new());
        assert_eq!(
            inventory.datacenters[0].clusters,
            [Cluster {
                name: "empty".into(),
                ..Default::default()
            }]
        );
    }

    #[test]
    fn parent_cycles_end() {
        let a = r("Folder", "a");
        let b = r("Folder", "b");
        let entities = vec![
            entity("Folder", "a", "a", Some(&b)),
            entity("Folder", "b", "b", Some(&a)),
        ];
        assert_eq!(Tree::new(&entities).datacenter_of(&a), None);
    }
}
