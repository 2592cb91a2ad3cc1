//! Traversal specs: how the PropertyCollector walks from one object to the
//! next without a view.

use crate::types::{AnySelectionSpec, SelectionSpec, TraversalSpec};

/// One traversal step: from objects of `type_` along their property `path`,
/// named `name` so other steps can come back to it, then on to the steps
/// named in `next` (by name; recursive walks name themselves). Never skips
/// the objects it reaches.
///
/// ```
/// use vsphere_client::property::traversal_spec;
/// // Every folder below a folder, at any depth.
/// let folders = traversal_spec("folders", "Folder", "childEntity", &["folders"]);
/// # let _ = folders;
/// ```
pub fn traversal_spec(name: &str, type_: &str, path: &str, next: &[&str]) -> AnySelectionSpec {
    AnySelectionSpec::TraversalSpec(Box::new(TraversalSpec {
        selection_spec: SelectionSpec {
            name: Some(name.to_string()),
        },
        type_: type_.to_string(),
        path: path.to_string(),
        skip: Some(false),
        select_set: next
            .iter()
            .map(|name| {
                AnySelectionSpec::SelectionSpec(Box::new(SelectionSpec {
                    name: Some(name.to_string()),
                }))
            })
            .collect(),
    }))
}

/// The select set of a whole-inventory walk from the root folder (or any
/// folder, datacenter, compute resource or resource pool): folders'
/// children, a datacenter's four folders, a compute resource's hosts and
/// root pool, pools' child pools and vApps' VMs. Every managed entity of the
/// inventory is reached once per path that leads to it; the collector
/// reports each object once.
///
/// ```no_run
/// # async fn demo(client: vsphere_client::Client) -> Result<(), vsphere_client::Error> {
/// use vsphere_client::{mo, property::inventory_traversal};
/// let root = client.service_content().root_folder.clone();
/// let entities = client
///     .properties::<mo::ManagedEntity>(&["name", "parent"])?
///     .traverse(&root, inventory_traversal())
///     .collect_all()
///     .await?;
/// # Ok(()) }
/// ```
pub fn inventory_traversal() -> Vec<AnySelectionSpec> {
    const ALL: &[&str] = &[
        "folderChildren",
        "datacenterVmFolder",
        "datacenterHostFolder",
        "datacenterDatastoreFolder",
        "datacenterNetworkFolder",
        "computeResourceHosts",
        "computeResourcePool",
        "poolChildren",
        "vappVms",
    ];
    vec![
        traversal_spec("folderChildren", "Folder", "childEntity", ALL),
        traversal_spec(
            "datacenterVmFolder",
            "Datacenter",
            "vmFolder",
            &["folderChildren"],
        ),
        traversal_spec(
            "datacenterHostFolder",
            "Datacenter",
            "hostFolder",
            &["folderChildren"],
        ),
        traversal_spec(
            "datacenterDatastoreFolder",
            "Datacenter",
            "datastoreFolder",
            &["folderChildren"],
        ),
        traversal_spec(
            "datacenterNetworkFolder",
            "Datacenter",
            "networkFolder",
            &["folderChildren"],
        ),
        traversal_spec("computeResourceHosts", "ComputeResource", "host", &[]),
        traversal_spec(
            "computeResourcePool",
            "ComputeResource",
            "resourcePool",
            &["poolChildren", "vappVms"],
        ),
        traversal_spec(
            "poolChildren",
            "ResourcePool",
            "resourcePool",
            &["poolChildren", "vappVms"],
        ),
        traversal_spec("vappVms", "VirtualApp", "vm", &[]),
    ]
}
