//! The inventory finder against the simulator: paths, globs, names, lists,
//! SearchIndex helpers, and round trips that do not grow with the inventory.

use vsphere_client::inventory::NetworkKind;
use vsphere_client::{mo, Client, ErrorKind};
use vsphere_tests::{Simulator, SimulatorOptions, Template};

async fn simulator(options: SimulatorOptions) -> Simulator {
    tokio::task::spawn_blocking(move || Simulator::start(options))
        .await
        .expect("join")
        .unwrap_or_else(|e| panic!("simulator: {e}"))
}

async fn connect(sim: &Simulator) -> Client {
    Client::builder(&sim.sdk_url())
        .credentials(sim.username(), sim.password())
        .insecure(true)
        .keepalive(None)
        .connect()
        .await
        .expect("connect")
}

fn calls(client: &Client, method: &str) -> u64 {
    client.call_stats().get(method).map_or(0, |s| s.calls)
}

fn paths(objects: &[vsphere_client::inventory::InventoryObject]) -> Vec<&str> {
    objects.iter().map(|o| o.path.as_str()).collect()
}

#[tokio::test]
async fn paths_and_globs_like_govc() {
    let sim = simulator(SimulatorOptions::default()).await;
    let client = connect(&sim).await;
    let finder = client.finder();

    let before = calls(&client, "RetrievePropertiesEx");
    let vms = finder.find("/DC0/vm/*").await.expect("find");
    assert_eq!(
        paths(&vms),
        [
            "/DC0/vm/DC0_C0_RP0_VM0",
            "/DC0/vm/DC0_C0_RP0_VM1",
            "/DC0/vm/DC0_H0_VM0",
            "/DC0/vm/DC0_H0_VM1"
        ]
    );
    assert!(vms.iter().all(|vm| vm.type_name() == "VirtualMachine"));
    assert_eq!(vms[2].name, "DC0_H0_VM0");
    // One round trip per path component.
    assert_eq!(calls(&client, "RetrievePropertiesEx") - before, 3);

    let hosts = finder.find("/DC0/host/DC0_C0/DC0_C0_H?").await.unwrap();
    assert_eq!(hosts.len(), 3);
    assert!(hosts.iter().all(|h| h.type_name() == "HostSystem"));

    assert_eq!(finder.find("/*/vm/*_VM1").await.unwrap().len(), 2);
    // Relative to the only datacenter.
    let one = finder.find_one("vm/DC0_H0_VM1").await.expect("relative");
    assert_eq!(one.path, "/DC0/vm/DC0_H0_VM1");
    assert!(finder.find("/DC0/vm/nope").await.unwrap().is_empty());
    let err = finder.find_one("/DC0/vm/nope").await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotFound);
    let err = finder.find_one("/DC0/vm/*").await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument);
    assert!(err.to_string().contains("matches 4"), "{err}");

    // A name alone is searched for in every folder.
    let vm = finder
        .virtual_machine("DC0_C0_RP0_VM1")
        .await
        .expect("by name");
    assert_eq!(vm.path, "/DC0/vm/DC0_C0_RP0_VM1");
    assert_eq!(finder.virtual_machines("DC0_H0_*").await.unwrap().len(), 2);
}

#[tokio::test]
async fn ls_lists_children_and_find_walks_a_subtree() {
    let sim = simulator(SimulatorOptions {
        folders: 1,
        ..Default::default()
    })
    .await;
    let client = connect(&sim).await;
    let finder = client.finder();
    // With -folder, the datacenter sits in a folder: paths say so.
    let dc = finder
        .default_datacenter()
        .await
        .expect("the only datacenter");
    assert_eq!(dc.name(), "DC0");
    assert_eq!(dc.path().matches('/').count(), 2, "{}", dc.path());
    let listed = finder.list(dc.path()).await.unwrap();
    let names: Vec<&str> = listed.iter().map(|o| o.name.as_str()).collect();
    assert_eq!(names, ["datastore", "host", "network", "vm"]);
    // A leaf is listed as itself.
    let vm = finder.virtual_machine("DC0_H0_VM0").await.unwrap();
    assert_eq!(
        paths(&finder.list(&vm.path).await.unwrap()),
        [vm.path.as_str()]
    );

    let all_vms = finder.find_under("/", &["VirtualMachine"]).await.unwrap();
    assert_eq!(all_vms.len(), 4);
    for found in &all_vms {
        // The path found by the walk is the one the path lookup resolves.
        let again = finder.find_one(&found.path).await.unwrap();
        assert_eq!(again.reference, found.reference);
    }
    let hosts = finder.find_under(dc.path(), &["HostSystem"]).await.unwrap();
    assert_eq!(hosts.len(), 4);
    let described = finder
        .describe(&[all_vms[0].reference.clone()])
        .await
        .unwrap();
    assert_eq!(described, vec![all_vms[0].clone()]);
}

#[tokio::test]
async fn several_datacenters_need_a_choice() {
    let sim = simulator(SimulatorOptions {
        datacenters: 2,
        ..Default::default()
    })
    .await;
    let client = connect(&sim).await;
    let err = client.finder().find("vm/*").await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument);
    let dc1 = client.finder().in_datacenter("DC1");
    let vms = dc1.find("vm/*").await.unwrap();
    assert_eq!(vms.len(), 4);
    assert!(vms.iter().all(|vm| vm.path.starts_with("/DC1/vm/")));
    assert_eq!(dc1.virtual_machines("*").await.unwrap().len(), 4);
    assert_eq!(
        client.finder().virtual_machines("*").await.unwrap().len(),
        8
    );
    let err = client
        .finder()
        .in_datacenter("DC9")
        .find("vm")
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotFound);
}

#[tokio::test]
async fn typed_lists_of_the_inventory() {
    let sim = simulator(SimulatorOptions {
        datacenters: 2,
        clusters: 2,
        templates: vec![Template::in_datacenters("ubuntu", &["DC0"])],
        ..Default::default()
    })
    .await;
    let client = connect(&sim).await;
    let dc0 = client.finder().in_datacenter("DC0");
    assert_eq!(client.finder().datacenters().await.unwrap().len(), 2);
    let clusters = dc0.clusters().await.unwrap();
    assert_eq!(clusters.len(), 2);
    assert!(clusters
        .iter()
        .all(|c| c.host.as_ref().is_some_and(|h| h.len() == 3)));
    assert!(clusters
        .iter()
        .all(|c| c.datastore.as_ref().is_some_and(|d| !d.is_empty())));
    let hosts = dc0.hosts().await.unwrap();
    assert_eq!(hosts.len(), 7, "3 per cluster and a standalone host");
    assert!(hosts.iter().all(|h| h.runtime.is_some()));
    assert!(!dc0.resource_pools().await.unwrap().is_empty());
    let datastores = dc0.datastores().await.unwrap();
    assert!(!datastores.is_empty());
    for ds in &datastores {
        let summary = ds.summary.as_ref().expect("summary");
        assert!(
            summary.capacity > 0
                && summary.free_space > 0
                && summary.free_space <= summary.capacity
        );
    }
    let networks = dc0.networks().await.unwrap();
    assert!(networks
        .iter()
        .any(|n| n.name() == "VM Network" && *n.kind() == NetworkKind::Standard));
    let dvpg = networks
        .iter()
        .find(|n| matches!(n.kind(), NetworkKind::Distributed { .. }))
        .expect("a distributed port group");
    let NetworkKind::Distributed {
        portgroup_key,
        switch_uuid,
        switch,
    } = dvpg.kind()
    else {
        unreachable!()
    };
    assert!(!portgroup_key.is_empty() && !switch_uuid.is_empty() && switch.is_some());
    assert_eq!(dc0.network(dvpg.name()).await.unwrap(), *dvpg);

    let vms = dc0.vms().await.unwrap();
    let templates = dc0.templates().await.unwrap();
    assert_eq!(templates.len(), 1);
    assert_eq!(templates[0].name.as_deref(), Some("ubuntu"));
    assert_eq!(
        vms.len(),
        2 * 2 + 2 + 1,
        "2 per cluster pool, 2 standalone, 1 template"
    );
    assert!(dc0.template("ubuntu").await.unwrap().is_some());
    // A plain VM is not a template; DC1 has none.
    assert!(dc0.template("DC0_H0_VM0").await.unwrap().is_none());
    assert!(client
        .finder()
        .in_datacenter("DC1")
        .template("ubuntu")
        .await
        .unwrap()
        .is_none());
}

#[tokio::test]
async fn search_index_by_path_and_uuid() {
    let sim = simulator(SimulatorOptions::default()).await;
    let client = connect(&sim).await;
    let vm = client
        .search_inventory_path("/DC0/vm/DC0_H0_VM0")
        .await
        .unwrap()
        .expect("found");
    assert_eq!(vm.type_, "VirtualMachine");
    assert!(client
        .search_inventory_path("DC0/vm/nope")
        .await
        .unwrap()
        .is_none());
    let config = client
        .properties::<mo::VirtualMachine>(&["config.uuid", "config.instanceUuid"])
        .unwrap()
        .get(&vm)
        .await
        .unwrap()
        .config
        .unwrap();
    assert_eq!(
        client
            .search_vm_by_uuid(&config.uuid, false, None)
            .await
            .unwrap(),
        Some(vm.clone())
    );
    let instance = config.instance_uuid.expect("instance uuid");
    assert_eq!(
        client
            .search_vm_by_uuid(&instance, true, None)
            .await
            .unwrap(),
        Some(vm.clone())
    );
    // (FindAllByUuid: vcsim 0.24 does not implement it; see the contract tests.)
    let err = client
        .search_vm_by_uuid("nope", false, None)
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument);
    assert!(client
        .search_vm_by_uuid("00000000-0000-0000-0000-000000000000", true, None)
        .await
        .unwrap()
        .is_none());
}

#[tokio::test]
async fn a_path_lookup_costs_the_same_in_a_large_inventory() {
    let small = simulator(SimulatorOptions::default()).await;
    let large = simulator(SimulatorOptions {
        vms: 100,
        clusters: 3,
        ..Default::default()
    })
    .await;
    let mut costs = Vec::new();
    for sim in [&small, &large] {
        let client = connect(sim).await;
        let before = client.total_calls();
        let found = client.finder().find("/DC0/vm/DC0_H0_VM1").await.unwrap();
        assert_eq!(found.len(), 1);
        let by_name = client.finder().virtual_machine("DC0_H0_VM1").await.unwrap();
        assert_eq!(by_name.reference, found[0].reference);
        let dc0 = client.finder().in_datacenter("DC0");
        for count in [
            dc0.clusters().await.unwrap().len(),
            dc0.hosts().await.unwrap().len(),
            dc0.datastores().await.unwrap().len(),
            dc0.networks().await.unwrap().len(),
            dc0.vms().await.unwrap().len(),
        ] {
            assert!(count > 0);
        }
        costs.push(client.total_calls() - before);
    }
    assert_eq!(costs[0], costs[1], "calls do not grow with the inventory");
}

#[tokio::test]
async fn finder_handles_and_defaults_like_govc() {
    use vsphere_client::inventory::{Datastore, Folder};
    let sim = simulator(SimulatorOptions::default()).await;
    let client = connect(&sim).await;
    let finder = client.finder();

    let dc = finder
        .default_datacenter()
        .await
        .expect("the only datacenter");
    assert_eq!((dc.name(), dc.path()), ("DC0", "/DC0"));
    assert_eq!(finder.datacenter("DC0").await.unwrap(), dc);
    assert_eq!(dc.reference().type_, "Datacenter");

    let folder = finder.default_folder().await.expect("the VM folder");
    assert_eq!(folder.path(), "/DC0/vm");
    assert_eq!(finder.folder("vm").await.unwrap(), folder);
    // A path to something that is not a folder says what it is.
    let err = finder.folder("datastore/LocalDS_0").await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument);
    assert!(
        err.to_string().contains("is a Datastore, not a folder"),
        "{err}"
    );

    // The only datastore is the default; by name or by path alike.
    let ds = finder
        .default_datastore()
        .await
        .expect("the only datastore");
    assert_eq!(ds.path(), "/DC0/datastore/LocalDS_0");
    assert_eq!(finder.datastore("LocalDS_0").await.unwrap(), ds);
    assert_eq!(
        finder.datastore("/DC0/datastore/LocalDS_0").await.unwrap(),
        ds
    );
    // A relative path starts at the datacenter's datastore folder (as
    // govc's -ds), so the folder's own name is not repeated.
    assert_eq!(
        finder
            .datastore("datastore/LocalDS_0")
            .await
            .unwrap_err()
            .kind(),
        ErrorKind::NotFound
    );
    assert_eq!(
        finder.datastore("nope").await.unwrap_err().kind(),
        ErrorKind::NotFound
    );

    // Two compute resources (the cluster and the standalone host): no
    // default pool, and the error names both root pools.
    let err = finder.default_resource_pool().await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument);
    let message = err.to_string();
    assert!(
        message.contains("/DC0/host/DC0_C0/Resources")
            && message.contains("/DC0/host/DC0_H0/Resources"),
        "{message}"
    );
    let pool = finder.resource_pool("DC0_C0/Resources").await.unwrap();
    assert_eq!(pool.path(), "/DC0/host/DC0_C0/Resources");
    // A name shared by both root pools is ambiguous, and says where they are.
    let err = finder.resource_pool("Resources").await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument);
    assert!(
        err.to_string().contains("/DC0/host/DC0_H0/Resources"),
        "{err}"
    );

    // Four hosts: a host by name or path, no default.
    let host = finder.host("DC0_C0_H1").await.unwrap();
    assert_eq!(host.path(), "/DC0/host/DC0_C0/DC0_C0_H1");
    assert_eq!(finder.host("DC0_C0/DC0_C0_H1").await.unwrap(), host);
    let err = finder.default_host().await.unwrap_err();
    assert!(err.to_string().contains("4 in"), "{err}");

    // Networks: a standard one and a distributed port group by name, no default.
    let standard = finder.network("VM Network").await.unwrap();
    assert_eq!(*standard.kind(), NetworkKind::Standard);
    assert_eq!(standard.path(), "/DC0/network/VM Network");
    let dvpg = finder.network("DC0_DVPG0").await.unwrap();
    assert!(
        matches!(dvpg.kind(), NetworkKind::Distributed { portgroup_key, switch_uuid, .. }
            if !portgroup_key.is_empty() && !switch_uuid.is_empty()),
        "{dvpg:?}"
    );
    assert_eq!(
        finder.default_network().await.unwrap_err().kind(),
        ErrorKind::InvalidArgument
    );

    // Handles and records convert both ways, checking the type.
    let object = ds.clone().into_object();
    assert!(Folder::try_from(object.clone()).is_err());
    assert_eq!(Datastore::try_from(object).unwrap(), ds);
}

#[tokio::test]
async fn a_clone_placed_with_default_handles() {
    use vsphere_client::vm::CloneSpec;
    // One standalone host, no cluster: one pool, one host, one datastore.
    let sim = simulator(SimulatorOptions {
        clusters: 0,
        ..Default::default()
    })
    .await;
    let client = connect(&sim).await;
    let finder = client.finder().in_datacenter("DC0");
    let folder = finder.default_folder().await.unwrap();
    let pool = finder
        .default_resource_pool()
        .await
        .expect("the host's pool");
    assert_eq!(pool.path(), "/DC0/host/DC0_H0/Resources");
    let host = finder.default_host().await.expect("the only host");
    let datastore = finder.default_datastore().await.unwrap();

    let source = client.vm(finder
        .virtual_machine("DC0_H0_VM0")
        .await
        .unwrap()
        .reference);
    let spec = CloneSpec::new(&folder)
        .pool(&pool)
        .host(&host)
        .datastore(&datastore);
    let clone = source.clone_vm("placed-1", &spec).await.expect("clone");
    let placed = client
        .properties::<mo::VirtualMachine>(&["parent", "resourcePool", "runtime.host", "datastore"])
        .unwrap()
        .get(clone.reference())
        .await
        .unwrap();
    assert_eq!(placed.parent.as_ref(), Some(folder.reference()));
    assert_eq!(placed.resource_pool.as_ref(), Some(pool.reference()));
    assert_eq!(
        placed.runtime.and_then(|r| r.host).as_ref(),
        Some(host.reference())
    );
    assert_eq!(placed.datastore, Some(vec![datastore.reference().clone()]));

    // A handle of the wrong kind in the wrong place fails before any call.
    let before = client.total_calls();
    let wrong = CloneSpec::new(datastore.reference().clone());
    let err = source.clone_vm("placed-2", &wrong).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument);
    assert!(err.to_string().contains("not a Folder"), "{err}");
    assert_eq!(client.total_calls() - before, 0, "nothing sent");
}
