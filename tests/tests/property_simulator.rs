//! Typed property retrieval, views, traversal and paging against the
//! simulator.

use vsphere_client::types::{ManagedObjectReference, VirtualMachinePowerState};
use vsphere_client::{mo, paths, property, Client, ErrorKind};
use vsphere_tests::{Simulator, SimulatorOptions};

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

fn root(client: &Client) -> ManagedObjectReference {
    client.service_content().root_folder.clone()
}

#[tokio::test]
async fn vms_under_the_root_folder_with_nested_paths() {
    // Default model: 2 VMs in the cluster's pool + 2 on the standalone host.
    let sim = simulator(SimulatorOptions::default()).await;
    let client = connect(&sim).await;
    let vms = client
        .properties::<mo::VirtualMachine>(&[
            "name",
            "runtime.powerState",
            "runtime.host",
            "config.uuid",
            "config.hardware.numCPU",
            "summary.storage",
            "datastore",
        ])
        .expect("valid paths")
        .in_container(&root(&client))
        .collect_all()
        .await
        .expect("retrieve");
    assert_eq!(vms.len(), 4, "{vms:#?}");
    let mut names: Vec<String> = vms.iter().filter_map(|vm| vm.name.clone()).collect();
    names.sort();
    assert_eq!(
        names,
        [
            "DC0_C0_RP0_VM0",
            "DC0_C0_RP0_VM1",
            "DC0_H0_VM0",
            "DC0_H0_VM1"
        ]
    );
    for vm in &vms {
        assert_eq!(vm.mo_ref.type_, "VirtualMachine");
        assert!(!vm.mo_ref.value.is_empty());
        let runtime = vm
            .runtime
            .as_ref()
            .expect("runtime set by its nested paths");
        assert_eq!(runtime.power_state, VirtualMachinePowerState::PoweredOn);
        // Two paths under `runtime` share the parent.
        assert_eq!(
            runtime.host.as_ref().map(|h| h.type_.as_str()),
            Some("HostSystem")
        );
        let config = vm.config.as_ref().expect("config");
        assert_eq!(config.uuid.len(), 36, "uuid {:?}", config.uuid);
        assert!(config.hardware.num_cpu >= 1);
        // `memory_mb` was not asked for: it reads 0, and the object says so.
        assert_eq!(config.hardware.memory_mb, 0);
        assert!(vm.retrieved.contains("config.hardware.numCPU"));
        assert!(!vm.retrieved.contains("config.hardware.memoryMB"));
        assert!(vm.retrieved.contains("summary.storage.committed"));
        assert!(!vm.retrieved.contains("guest"));
        assert!(vm
            .summary
            .as_ref()
            .and_then(|s| s.storage.as_ref())
            .is_some());
        assert!(!vm.datastore.as_ref().expect("datastore").is_empty());
        // Not asked for: not set.
        assert!(vm.guest.is_none() && vm.parent.is_none());
    }
}

#[tokio::test]
async fn typed_paths_retrieve_what_their_strings_do() {
    let sim = simulator(SimulatorOptions::default()).await;
    let client = connect(&sim).await;
    let vm = paths::VirtualMachine;
    let typed = [
        vm.name(),
        vm.runtime().power_state(),
        vm.config().hardware().num_cpu(),
        vm.summary().storage().into_path(),
    ];
    let strings = [
        "name",
        "runtime.powerState",
        "config.hardware.numCPU",
        "summary.storage",
    ];
    assert_eq!(
        typed
            .iter()
            .map(property::PropertyPath::as_str)
            .collect::<Vec<_>>(),
        strings
    );
    let mut by_type = Vec::new();
    for query in [
        client.properties::<mo::VirtualMachine>(&typed),
        client.properties::<mo::VirtualMachine>(&strings),
    ] {
        let mut vms = query
            .expect("valid paths")
            .in_container(&root(&client))
            .collect_all()
            .await
            .expect("retrieve");
        vms.sort_by(|a, b| a.name.cmp(&b.name));
        by_type.push(vms);
    }
    let (typed_vms, string_vms) = (&by_type[0], &by_type[1]);
    assert_eq!(typed_vms.len(), 4);
    assert_eq!(typed_vms, string_vms, "the same objects either way");
    for found in typed_vms {
        assert!(found.retrieved.contains(vm.config().hardware().num_cpu()));
        assert!(!found.retrieved.contains(vm.config().hardware().memory_mb()));
        assert!(found
            .config
            .as_ref()
            .is_some_and(|c| c.hardware.num_cpu >= 1));
    }
}

#[tokio::test]
async fn unknown_paths_fail_before_any_call() {
    let sim = simulator(SimulatorOptions::default()).await;
    let client = connect(&sim).await;
    let err = client
        .properties::<mo::VirtualMachine>(&["name", "runtime.powerStat"])
        .expect_err("typo");
    assert_eq!(err.kind(), ErrorKind::InvalidArgument);
    assert!(err.to_string().contains("runtime.powerStat"), "{err}");
    let err = client
        .properties::<mo::HostSystem>(&["config.hardware.device"])
        .expect_err("hosts have no such path");
    assert!(err.to_string().contains("config.hardware.device"), "{err}");
    // Below an array: not traversable.
    let err = client
        .properties::<mo::VirtualMachine>(&["config.hardware.device.key"])
        .expect_err("below an array");
    assert_eq!(err.kind(), ErrorKind::InvalidArgument);
}

/// Without vsphere-client's `admin` feature (this file runs without it),
/// `mo::HostSystem` holds no configuration tree: a path into one fails
/// before any call, naming the feature, and every property of a host is
/// every property the struct holds (the server is not asked for `config`).
#[tokio::test]
async fn a_property_left_out_by_a_feature_is_named_and_not_asked_for() {
    let sim = simulator(SimulatorOptions::default()).await;
    let client = connect(&sim).await;
    let err = client
        .properties::<mo::HostSystem>(&["name", "config.network"])
        .expect_err("config is compiled in with admin");
    assert_eq!(err.kind(), ErrorKind::InvalidArgument);
    let message = err.to_string();
    assert!(
        message.contains("config.network") && message.contains("`admin` feature"),
        "{message}"
    );
    let before = calls(&client, "RetrievePropertiesEx");
    let hosts = client
        .all_properties::<mo::HostSystem>()
        .in_container(&root(&client))
        .collect_all()
        .await
        .expect("every property of every host");
    assert_eq!(hosts.len(), 4);
    assert_eq!(calls(&client, "RetrievePropertiesEx"), before + 1);
    for host in &hosts {
        assert!(host.retrieved.contains("summary"), "{:?}", host.retrieved);
        assert!(host.retrieved.contains("runtime"), "{:?}", host.retrieved);
        assert!(!host.retrieved.contains("config"), "{:?}", host.retrieved);
        let summary = host.summary.as_ref().expect("summary");
        assert!(summary
            .hardware
            .as_ref()
            .is_some_and(|h| h.num_cpu_cores > 0));
    }
}

#[tokio::test]
async fn one_object_a_list_and_all_properties() {
    let sim = simulator(SimulatorOptions::default()).await;
    let client = connect(&sim).await;
    let refs: Vec<ManagedObjectReference> = client
        .properties::<mo::VirtualMachine>(&["name"])
        .unwrap()
        .in_container(&root(&client))
        .collect_all()
        .await
        .unwrap()
        .into_iter()
        .map(|vm| vm.mo_ref)
        .collect();
    assert_eq!(refs.len(), 4);

    let query = client
        .properties::<mo::VirtualMachine>(&["name", "guest.toolsRunningStatus"])
        .unwrap();
    let one = query.get(&refs[1]).await.expect("get");
    assert_eq!(one.mo_ref, refs[1]);
    assert!(one.name.is_some());

    let two = query.get_many(&refs[..2]).await.expect("get_many");
    assert_eq!(
        two.iter().map(|vm| &vm.mo_ref).collect::<Vec<_>>(),
        refs[..2].iter().collect::<Vec<_>>()
    );

    let gone = ManagedObjectReference::new("VirtualMachine", "vm-does-not-exist");
    let err = query.get(&gone).await.expect_err("no such VM");
    assert_eq!(err.kind(), ErrorKind::Fault, "{err}");

    let everything = client
        .all_properties::<mo::VirtualMachine>()
        .get(&refs[0])
        .await
        .expect("all properties");
    assert!(
        everything.name.is_some() && everything.config.is_some() && everything.runtime.is_some()
    );
}

#[tokio::test]
async fn a_traversal_reaches_the_whole_inventory() {
    let sim = simulator(SimulatorOptions {
        datacenters: 2,
        folders: 1,
        ..Default::default()
    })
    .await;
    let client = connect(&sim).await;
    let entities = client
        .properties::<mo::ManagedEntity>(&["name", "parent"])
        .unwrap()
        .traverse(&root(&client), property::inventory_traversal())
        .collect_all()
        .await
        .expect("walk");
    let count = |t: &str| entities.iter().filter(|e| e.mo_ref.type_ == t).count();
    assert_eq!(count("Datacenter"), 2);
    assert_eq!(count("VirtualMachine"), 8);
    assert_eq!(
        count("HostSystem"),
        8,
        "3 per cluster + 1 standalone, per datacenter"
    );
    assert_eq!(count("ClusterComputeResource"), 2);
    assert!(count("Folder") > 8);
    // Each object once.
    let mut refs: Vec<_> = entities.iter().map(|e| e.mo_ref.clone()).collect();
    refs.sort();
    refs.dedup();
    assert_eq!(refs.len(), entities.len());
}

/// Every property of every object of the simulated inventory (VMs with
/// their devices, hosts with their hardware and capabilities, datastores,
/// networks, clusters, pools) and a failed task's fault decode with nothing
/// left unknown: the simulator speaks an older API than the bindings, so an
/// unknown element, type or fault counted on its traffic would be a gap in
/// the bindings or a false note.
#[tokio::test]
async fn the_whole_simulated_inventory_decodes_with_nothing_unknown() {
    let sim = simulator(SimulatorOptions::default()).await;
    let client = connect(&sim).await;
    async fn every_object<T: property::ManagedObject>(client: &Client) -> usize {
        client
            .all_properties::<T>()
            .traverse(&root(client), property::inventory_traversal())
            .collect_all()
            .await
            .unwrap_or_else(|e| panic!("every property of every {}: {e}", T::TYPE_NAME))
            .len()
    }
    assert_eq!(every_object::<mo::VirtualMachine>(&client).await, 4);
    assert_eq!(every_object::<mo::HostSystem>(&client).await, 4);
    assert!(every_object::<mo::Datastore>(&client).await >= 1);
    assert!(every_object::<mo::Network>(&client).await >= 1);
    assert_eq!(every_object::<mo::ClusterComputeResource>(&client).await, 1);
    assert!(every_object::<mo::ResourcePool>(&client).await >= 2);
    assert_eq!(every_object::<mo::Datacenter>(&client).await, 1);
    assert!(every_object::<mo::Folder>(&client).await >= 4);
    // A fault in a failed task's info: the VMs start powered on.
    let vm = client
        .properties::<mo::VirtualMachine>(&["name"])
        .unwrap()
        .in_container(&root(&client))
        .collect_all()
        .await
        .unwrap()
        .remove(0)
        .mo_ref;
    let task = client.task(client.vim().power_on_vm_task(&vm, None).await.unwrap());
    let err = task.wait().await.expect_err("already powered on");
    assert_eq!(err.kind(), ErrorKind::Fault, "{err}");
    // A SOAP fault's detail.
    let gone = ManagedObjectReference::new("VirtualMachine", "vm-does-not-exist");
    let err = client
        .properties::<mo::VirtualMachine>(&["name"])
        .unwrap()
        .get(&gone)
        .await
        .expect_err("no such VM");
    assert_eq!(err.kind(), ErrorKind::Fault, "{err}");

    let stats = client.call_stats();
    assert!(stats["RetrievePropertiesEx"].calls >= 8);
    let unknown: Vec<_> = stats
        .iter()
        .filter(|(_, s)| s.unknown_elements + s.unknown_types + s.unknown_faults > 0)
        .collect();
    assert!(unknown.is_empty(), "{unknown:?}");
}

fn calls(client: &Client, method: &str) -> u64 {
    client.call_stats().get(method).map_or(0, |s| s.calls)
}

/// 60 VMs per pool and per standalone host: 120 VMs, more than a page.
fn large_inventory(extra_args: &[&str]) -> SimulatorOptions {
    SimulatorOptions {
        vms: 60,
        autostart: false,
        extra_args: extra_args
            .iter()
            .map(std::string::ToString::to_string)
            .collect(),
        ..Default::default()
    }
}

#[tokio::test]
async fn an_inventory_larger_than_a_page_arrives_whole_page_by_page() {
    let sim = simulator(large_inventory(&[])).await;
    let client = connect(&sim).await;
    let mut pages = client
        .properties::<mo::VirtualMachine>(&["name", "runtime.powerState"])
        .unwrap()
        .max_objects(25)
        .in_container(&root(&client));
    let mut names = Vec::new();
    let mut page_sizes = Vec::new();
    while let Some(page) = pages.next_page().await.expect("page") {
        page_sizes.push(page.len());
        for vm in page {
            assert_eq!(
                vm.runtime.map(|r| r.power_state),
                Some(VirtualMachinePowerState::PoweredOff)
            );
            names.push(vm.name.expect("name"));
        }
    }
    assert_eq!(page_sizes, [25, 25, 25, 25, 20]);
    assert_eq!(pages.pages_read(), 5);
    assert_eq!(pages.objects_read(), 120);
    names.sort();
    names.dedup();
    assert_eq!(names.len(), 120, "every VM once");
    assert_eq!(calls(&client, "RetrievePropertiesEx"), 1);
    assert_eq!(calls(&client, "ContinueRetrievePropertiesEx"), 4);
    // The walk's container view was made and destroyed.
    assert_eq!(calls(&client, "CreateContainerView"), 1);
    assert_eq!(calls(&client, "DestroyView"), 1);
}

#[tokio::test]
async fn the_server_page_cap_wins_and_the_stream_reads_every_page() {
    use futures_util::TryStreamExt;
    // The server caps pages at 10 even though the client asks for 100.
    let sim = simulator(large_inventory(&["-page-size=10"])).await;
    let client = connect(&sim).await;
    let pages: Vec<_> = client
        .properties::<mo::VirtualMachine>(&["name"])
        .unwrap()
        .max_objects(100)
        .in_container(&root(&client))
        .into_stream()
        .try_collect()
        .await
        .expect("stream");
    assert_eq!(pages.len(), 12);
    assert!(pages.iter().all(|p| p.len() == 10));
    let all = client
        .properties::<mo::VirtualMachine>(&["name"])
        .unwrap()
        .in_container(&root(&client))
        .collect_all()
        .await
        .expect("collect_all");
    assert_eq!(all.len(), 120);
}

#[tokio::test]
async fn a_walk_dropped_midway_cancels_its_result_set() {
    let sim = simulator(large_inventory(&[])).await;
    let client = connect(&sim).await;
    let mut pages = client
        .properties::<mo::VirtualMachine>(&["name"])
        .unwrap()
        .max_objects(50)
        .in_container(&root(&client));
    let first = pages.next_page().await.expect("page").expect("some");
    assert_eq!(first.len(), 50);
    drop(pages);
    // The cancel and the view's destruction run in the background.
    for _ in 0..50 {
        if calls(&client, "CancelRetrievePropertiesEx") == 1 && calls(&client, "DestroyView") == 1 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let cancel = client
        .call_stats()
        .get("CancelRetrievePropertiesEx")
        .copied()
        .unwrap_or_default();
    assert_eq!(
        (cancel.calls, cancel.faults),
        (1, 0),
        "cancelled once, token known"
    );
    assert_eq!(calls(&client, "DestroyView"), 1);
}

async fn vm_refs(client: &Client) -> Vec<ManagedObjectReference> {
    let mut vms = client
        .properties::<mo::VirtualMachine>(&["name"])
        .unwrap()
        .in_container(&root(client))
        .collect_all()
        .await
        .expect("vms");
    vms.sort_by(|a, b| a.name.cmp(&b.name));
    vms.into_iter().map(|vm| vm.mo_ref).collect()
}

/// The next change within 10 s.
async fn next_change<T: property::ManagedObject>(
    stream: &mut property::UpdateStream<T>,
) -> property::ObjectChange<T> {
    tokio::time::timeout(std::time::Duration::from_secs(10), stream.next())
        .await
        .expect("a change within 10 s")
        .expect("change")
}

#[tokio::test]
async fn an_update_stream_sees_a_power_change() {
    let sim = simulator(SimulatorOptions::default()).await;
    let client = connect(&sim).await;
    let vm = vm_refs(&client).await.remove(0);
    let mut stream = client
        .properties::<mo::VirtualMachine>(&["name", "runtime.powerState"])
        .unwrap()
        .watch(std::slice::from_ref(&vm))
        .await
        .expect("watch");
    let enter = next_change(&mut stream).await;
    assert_eq!(enter.kind, property::UpdateKind::Enter);
    assert_eq!(enter.object.mo_ref, vm);
    assert_eq!(
        enter.object.runtime.as_ref().map(|r| r.power_state.clone()),
        Some(VirtualMachinePowerState::PoweredOn)
    );
    let version = stream.version().to_string();
    assert!(!version.is_empty());

    let task = client
        .vim()
        .power_off_vm_task(&vm)
        .await
        .expect("power off");
    client.task(task).wait().await.expect("powered off");
    let change = next_change(&mut stream).await;
    assert_eq!(change.kind, property::UpdateKind::Modify);
    assert!(
        change.changed.iter().any(|p| p == "runtime.powerState"),
        "{:?}",
        change.changed
    );
    assert_eq!(
        change
            .object
            .runtime
            .as_ref()
            .map(|r| r.power_state.clone()),
        Some(VirtualMachinePowerState::PoweredOff)
    );
    // The stream keeps the object's other properties, and what was sent.
    assert!(change.object.name.is_some());
    let sent: Vec<&str> = change.object.retrieved.iter().collect();
    assert_eq!(sent, ["name", "runtime.powerState"]);
    assert!(!change.object.retrieved.contains("runtime.host"));

    let collectors = calls(&client, "CreatePropertyCollector");
    stream.close().await.expect("close");
    assert_eq!(calls(&client, "DestroyPropertyCollector"), 1);
    assert!(collectors >= 1);
}

#[tokio::test]
async fn a_container_watch_sees_vms_come_and_go() {
    let sim = simulator(SimulatorOptions::default()).await;
    let client = connect(&sim).await;
    let vms = vm_refs(&client).await;
    let mut stream = client
        .properties::<mo::VirtualMachine>(&["name"])
        .unwrap()
        .watch_container(&root(&client))
        .await
        .expect("watch");
    let mut entered = Vec::new();
    while entered.len() < vms.len() {
        let change = next_change(&mut stream).await;
        assert_eq!(change.kind, property::UpdateKind::Enter);
        entered.push(change.object.mo_ref);
    }
    entered.sort();
    let mut expected = vms.clone();
    expected.sort();
    assert_eq!(entered, expected);

    // Destroying a VM (powered off first) makes it leave.
    let victim = vms[0].clone();
    // A `Vim` method builds its request when called: the future outlives
    // its arguments and the `Vim` handle (it borrows the client only).
    let power_off = {
        let vim = client.vim();
        let target = victim.clone();
        vim.power_off_vm_task(&target)
    };
    let off = power_off.await.unwrap();
    client.task(off).wait().await.unwrap();
    let destroy = client.vim().destroy_task(&victim).await.unwrap();
    client.task(destroy).wait().await.expect("destroyed");
    let leave = loop {
        let change = next_change(&mut stream).await;
        if change.kind == property::UpdateKind::Leave {
            break change;
        }
    };
    assert_eq!(leave.object.mo_ref, victim);
    assert!(leave.object.name.is_some(), "last known state");
    drop(stream);
    // Dropped: the collector and the view are destroyed in the background.
    for _ in 0..50 {
        if calls(&client, "DestroyPropertyCollector") == 1 && calls(&client, "DestroyView") >= 2 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert_eq!(calls(&client, "DestroyPropertyCollector"), 1);
}

#[tokio::test]
async fn an_update_stream_survives_a_lost_session() {
    let sim = simulator(SimulatorOptions {
        session_idle_timeout: Some(std::time::Duration::from_secs(1)),
        ..Default::default()
    })
    .await;
    let client = connect(&sim).await;
    let vm = vm_refs(&client).await.remove(0);
    let spec = vec![vsphere_client::types::ObjectSpec {
        obj: vm.clone(),
        skip: Some(false),
        select_set: Vec::new(),
    }];
    let mut stream = client
        .properties::<mo::VirtualMachine>(&["runtime.powerState"])
        .unwrap()
        .watch_select(
            spec,
            property::UpdateStreamOptions {
                max_wait: Some(std::time::Duration::from_secs(1)),
                max_object_updates: None,
            },
        )
        .await
        .expect("watch");
    assert_eq!(
        next_change(&mut stream).await.kind,
        property::UpdateKind::Enter
    );
    // The session expires while nobody calls; the power-off logs in again.
    tokio::time::sleep(std::time::Duration::from_secs(3)).await;
    let task = client
        .vim()
        .power_off_vm_task(&vm)
        .await
        .expect("power off after re-login");
    client.task(task).wait().await.expect("powered off");
    assert!(calls(&client, "Login") >= 2, "{:?}", client.call_stats());
    // The stream's collector went with the old session: it is made again
    // and the VM enters anew, as it is now.
    let change = next_change(&mut stream).await;
    assert_eq!(change.kind, property::UpdateKind::Enter);
    assert_eq!(
        change.object.runtime.map(|r| r.power_state),
        Some(VirtualMachinePowerState::PoweredOff)
    );
    assert_eq!(
        calls(&client, "CreateFilter"),
        2 + 1,
        "stream twice, task watcher once"
    );
}
