//! Placement against the simulator, through `check`'s reconcile and apply
//! with the real backend: a Provider's resource pool (by name) and folder
//! (its last level made) per failure domain, a VirtualMachine's own folder,
//! a storage class on a datastore cluster (Storage DRS's recommendation, and
//! the most free space where Storage DRS is off), a standalone host as a
//! failure domain, a missing pool or folder as the Provider's reason, and a
//! VirtualMachine's own missing pool as its machine's (`PlacementNotFound`).
//! Each VM's pool, folder, datastore and host are read back from vCenter and
//! compared with the VSphereMachine's `status.placement`.

use std::time::{Duration, Instant};

use banlieue::api::{PlacementStatus, Provider, VSphereMachine};
use banlieue::check::{self, parse_documents, World};
use banlieue::conditions;
use banlieue::vsphere::vcenter::VCenter;
use vsphere_client::types::{
    AnyVirtualDevice, AnyVirtualDeviceBackingInfo, ManagedObjectReference, StorageDrsConfigSpec,
    StorageDrsPodConfigSpec,
};
use vsphere_client::{mo, Client};
use vsphere_tests::{Simulator, SimulatorOptions, Template};

const PASSWORD: &str = "s3cret-Pw";

/// DC0 with a cluster `DC0_C0` (one host, a pool `DC0_C0_RP1`), a standalone
/// host `DC0_H0`, datastores `LocalDS_0` and `LocalDS_1`, a datastore cluster
/// `DC0_POD0`, the template `golden`.
async fn simulator() -> Simulator {
    start(false).await
}

/// The simulator above; `trace` puts every SOAP request into its log.
async fn start(trace: bool) -> Simulator {
    let options = SimulatorOptions {
        password: PASSWORD.into(),
        templates: vec![Template::everywhere("golden")],
        hosts_per_cluster: 1,
        standalone_hosts: 1,
        resource_pools: 1,
        datastores: 2,
        storage_pods: 1,
        vms: 1,
        trace,
        ..Default::default()
    };
    tokio::task::spawn_blocking(move || Simulator::start(options))
        .await
        .expect("simulator start task")
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

async fn at(client: &Client, path: &str) -> ManagedObjectReference {
    client
        .search_inventory_path(path)
        .await
        .expect("FindByInventoryPath")
        .unwrap_or_else(|| panic!("{path} not found"))
}

async fn wait(client: &Client, task: ManagedObjectReference) {
    client.task(task).wait().await.expect("task");
}

/// Moves `datastores` into the datastore cluster `DC0_POD0`, and makes the
/// folder `DC0/vm/apps`; the datastores' references (the simulator finds no
/// inventory path through a datastore cluster).
async fn arrange(client: &Client, datastores: &[&str]) -> Vec<(String, ManagedObjectReference)> {
    let pod = at(client, "DC0/datastore/DC0_POD0").await;
    let mut list = Vec::new();
    let mut named = Vec::new();
    for ds in datastores {
        let found = at(client, &format!("DC0/datastore/{ds}")).await;
        named.push((ds.to_string(), found.clone()));
        list.push(found);
    }
    let task = client
        .vim()
        .move_into_folder_task(&pod, &list)
        .await
        .expect("MoveIntoFolder_Task");
    wait(client, task).await;
    let vm_folder = at(client, "DC0/vm").await;
    client
        .vim()
        .create_folder(&vm_folder, "apps")
        .await
        .expect("CreateFolder");
    named
}

async fn storage_drs(client: &Client, enabled: bool) {
    let pod = at(client, "DC0/datastore/DC0_POD0").await;
    let srm = client
        .service_content()
        .storage_resource_manager
        .clone()
        .expect("StorageResourceManager");
    let spec = StorageDrsConfigSpec {
        pod_config_spec: Some(StorageDrsPodConfigSpec {
            enabled: Some(enabled),
            ..Default::default()
        }),
        ..Default::default()
    };
    let task = client
        .vim()
        .configure_storage_drs_for_pod_task(&srm, &pod, &spec, true)
        .await
        .expect("ConfigureStorageDrsForPod_Task");
    wait(client, task).await;
}

const COMMON: &str = r"apiVersion: banlieue.io/v1alpha1
kind: VMClass
metadata: { name: web }
spec:
  hardware: { cpus: 1, memoryMiB: 64, disks: [{ name: root, sizeGiB: 1, storageClass: gold }] }
  network: { interfaces: [{ name: eth0, networkClass: mgmt }] }
---
apiVersion: banlieue.io/v1alpha1
kind: VMClass
metadata: { name: db }
spec:
  hardware:
    cpus: 1
    memoryMiB: 64
    disks: [{ name: root, sizeGiB: 1, storageClass: pooled }, { name: data, sizeGiB: 1, storageClass: pooled }]
  network: { interfaces: [{ name: eth0, networkClass: mgmt }] }
---
apiVersion: banlieue.io/v1alpha1
kind: VMImage
metadata: { name: golden }
spec:
  sources: [{ providerClass: vsphere, kind: Template, ref: golden }]
---
";

/// The Secret and a Provider `name` whose `spec.placement` is `placement`
/// (YAML lines indented for `spec`).
fn provider(sim: &Simulator, name: &str, placement: &str) -> String {
    format!(
        r#"apiVersion: v1
kind: Secret
metadata: {{ name: vsphere-creds, namespace: banlieue-system }}
stringData: {{ username: "{user}", password: "{PASSWORD}" }}
---
apiVersion: banlieue.io/v1alpha1
kind: Provider
metadata: {{ name: {name}, namespace: banlieue-system }}
spec:
  providerClassRef: {{ name: vsphere }}
  connection:
    endpoint: "{url}"
    credentialsRef: {{ name: vsphere-creds }}
    insecureSkipTLSVerify: true
  capabilities:
    storageClasses:
      - {{ name: gold, target: {{ datastore: LocalDS_0 }} }}
      - {{ name: pooled, target: {{ datastoreCluster: DC0_POD0 }} }}
    networkClasses:
      - {{ name: mgmt, target: {{ portGroup: VM Network }} }}
  failureDomainNameOverrides:
    - {{ datacenter: DC0, cluster: DC0_C0, name: cluster-zone }}
    - {{ datacenter: DC0, cluster: DC0_H0, name: single-esxi }}
{placement}---
"#,
        user = sim.username(),
        url = sim.sdk_url()
    )
}

/// A powered-off VirtualMachine of `class` in failure domain `zone`, with
/// `extra` placement lines (indented for `placement`).
fn vm(name: &str, class: &str, zone: &str, extra: &str) -> String {
    format!(
        "apiVersion: banlieue.io/v1alpha1\nkind: VirtualMachine\nmetadata: {{ name: {name}, namespace: team-a }}\n\
         spec:\n  classRef: {{ name: {class} }}\n  imageRef: {{ name: golden }}\n  desiredPowerState: PoweredOff\n  \
         placement:\n    failureDomainSelector: {{ matchLabels: {{ name: {zone} }} }}\n{extra}---\n"
    )
}

fn world_of(text: &str) -> World {
    let mut world = World::default();
    for doc in parse_documents(text).expect("test manifests") {
        world.add("test", doc);
    }
    assert!(world.rejected.is_empty(), "{:?}", world.rejected);
    world
}

fn provider_named<'a>(world: &'a World, name: &str) -> &'a Provider {
    world
        .providers
        .iter()
        .find(|p| p.metadata.name.as_deref() == Some(name))
        .expect("provider")
}

fn ready(world: &World, name: &str) -> (String, String, String) {
    let c = provider_named(world, name)
        .ready_condition()
        .expect("Ready condition");
    (c.status.clone(), c.reason.clone(), c.message.clone())
}

fn machine<'a>(world: &'a World, name: &str) -> &'a VSphereMachine {
    world
        .machines
        .iter()
        .find(|m| m.metadata.name.as_deref() == Some(name))
        .unwrap_or_else(|| panic!("no VSphereMachine {name}: {:?}", world.vms))
}

/// Reconciles and applies `world`, then checks every machine is Ready.
async fn provision(world: &mut World, vcenter: &VCenter, sim: &Simulator) {
    check::reconcile(world, vcenter, &conditions::now()).await;
    check::apply(
        world,
        vcenter,
        Instant::now() + Duration::from_secs(60),
        &conditions::now(),
    )
    .await;
    for m in &world.machines {
        let c = m.ready_condition().expect("Ready");
        assert_eq!(
            (c.status.as_str(), c.reason.as_str()),
            ("True", "PoweredOff"),
            "{}: {}\n{}",
            m.metadata.name.as_deref().unwrap_or_default(),
            c.message,
            sim.log()
        );
    }
}

/// Where vCenter has the machine's VM: its pool, folder, its disks'
/// datastores, host.
struct Landed {
    pool: String,
    folder: String,
    /// The datastore of the VM's files (`config.files.vmPathName`), by name.
    home: String,
    /// Its disks' datastores, in device order.
    disks: Vec<String>,
    host: String,
}

/// The datastores of a VM's virtual disks, in device order.
fn disk_datastores(vm: &mo::VirtualMachine) -> Vec<String> {
    let mut found: Vec<String> = Vec::new();
    let devices = vm
        .config
        .as_ref()
        .map(|c| c.hardware.device.as_slice())
        .unwrap_or_default();
    for device in devices {
        let AnyVirtualDevice::VirtualDisk(disk) = device else {
            continue;
        };
        if let Some(AnyVirtualDeviceBackingInfo::VirtualDiskFlatVer2BackingInfo(b)) = &disk.backing
        {
            if let Some(ds) = &b.virtual_device_file_backing_info.datastore {
                found.push(ds.value.clone());
            }
        }
    }
    found
}

async fn landed(client: &Client, m: &VSphereMachine) -> Landed {
    let mo_ref = m
        .status
        .as_ref()
        .and_then(|s| s.mo_ref.clone())
        .expect("moRef");
    let vm = client
        .properties::<mo::VirtualMachine>(&[
            "resourcePool",
            "parent",
            "config.hardware.device",
            "config.files.vmPathName",
            "runtime.host",
        ])
        .unwrap()
        .get(&ManagedObjectReference {
            type_: "VirtualMachine".into(),
            value: mo_ref,
        })
        .await
        .expect("the VM");
    let home = vm
        .config
        .as_ref()
        .and_then(|c| c.files.vm_path_name.clone())
        .and_then(|p| {
            p.strip_prefix('[')
                .and_then(|p| p.split_once(']'))
                .map(|(ds, _)| ds.to_string())
        })
        .unwrap_or_default();
    Landed {
        disks: disk_datastores(&vm),
        home,
        pool: vm.resource_pool.expect("pool").value,
        folder: vm.parent.expect("folder").value,
        host: vm
            .runtime
            .and_then(|r| r.host)
            .map(|h| h.value)
            .unwrap_or_default(),
    }
}

fn placement(m: &VSphereMachine) -> PlacementStatus {
    m.status
        .as_ref()
        .and_then(|s| s.placement.clone())
        .expect("status.placement")
}

#[tokio::test]
async fn vms_land_in_the_named_pool_and_folder_on_the_recommended_datastore_and_a_standalone_host()
{
    let sim = simulator().await;
    let client = connect(&sim).await;
    let in_pod = arrange(&client, &["LocalDS_1"]).await;
    let placement_yaml = "  placement:\n    folder: apps/web\n    failureDomains:\n      \
                          - { name: cluster-zone, resourcePool: DC0_C0_RP1 }\n      \
                          - { name: single-esxi, folder: edge }\n";
    let text = provider(&sim, "vc", placement_yaml)
        + COMMON
        + &vm("web-1", "web", "cluster-zone", "")
        + &vm("db-1", "db", "cluster-zone", "    folder: apps/db\n")
        + &vm("edge-1", "web", "single-esxi", "");
    let mut world = world_of(&text);
    let vcenter = VCenter::default();
    provision(&mut world, &vcenter, &sim).await;

    // The Provider: two failure domains, the standalone host one of them,
    // with the pool and folder each gets.
    let status = provider_named(&world, "vc").status.clone().unwrap();
    let fds: Vec<(&str, bool, Option<&str>, Option<&str>)> = status
        .failure_domains
        .iter()
        .map(|f| {
            (
                f.name.as_str(),
                f.standalone_host,
                f.resource_pool.as_deref(),
                f.folder.as_deref(),
            )
        })
        .collect();
    assert_eq!(
        fds,
        [
            ("cluster-zone", false, Some("DC0_C0_RP1"), Some("apps/web")),
            ("single-esxi", true, None, Some("edge")),
        ]
    );
    let pooled: Vec<&Vec<String>> = status
        .failure_domains
        .iter()
        .map(|f| &f.storage_classes)
        .collect();
    assert!(
        pooled
            .iter()
            .all(|classes| classes.contains(&"pooled".to_string())),
        "the datastore cluster's datastore is mounted everywhere: {pooled:?}"
    );

    // web-1: the cluster's pool named DC0_C0_RP1, the Provider's folder apps/web (made).
    let web = machine(&world, "web-1");
    let rp1 = at(&client, "DC0/host/DC0_C0/Resources/DC0_C0_RP1").await;
    let apps_web = at(&client, "DC0/vm/apps/web").await;
    let on = landed(&client, web).await;
    assert_eq!(
        (on.pool.as_str(), on.folder.as_str()),
        (rp1.value.as_str(), apps_web.value.as_str())
    );
    assert_eq!(on.home, "LocalDS_0");
    assert_eq!(
        placement(web),
        PlacementStatus {
            resource_pool: "/DC0/host/DC0_C0/Resources/DC0_C0_RP1".into(),
            folder: "/DC0/vm/apps/web".into(),
            datastore: Some("/DC0/datastore/LocalDS_0".into()),
            ..Default::default()
        }
    );

    // db-1: its own folder apps/db, and the datastore Storage DRS recommended
    // from the datastore cluster (its one datastore), for both its disks.
    let db = machine(&world, "db-1");
    let ds1 = in_pod[0].1.clone();
    let on = landed(&client, db).await;
    assert_eq!(
        (on.pool.as_str(), on.folder.as_str()),
        (
            rp1.value.as_str(),
            at(&client, "DC0/vm/apps/db").await.value.as_str()
        )
    );
    // The VM's files, and the disk the clone adds, are on it (the simulator
    // leaves a cloned disk's backing on the template's datastore).
    assert_eq!(on.home, "LocalDS_1");
    assert_eq!(on.disks.get(1), Some(&ds1.value), "{:?}", on.disks);
    assert_eq!(
        placement(db),
        PlacementStatus {
            resource_pool: "/DC0/host/DC0_C0/Resources/DC0_C0_RP1".into(),
            folder: "/DC0/vm/apps/db".into(),
            datastore: Some("/DC0/datastore/DC0_POD0/LocalDS_1".into()),
            datastore_cluster: Some("DC0_POD0".into()),
            note: Some("recommended by Storage DRS".into()),
            ..Default::default()
        }
    );
    let provider_client = vcenter
        .client(&banlieue::api::NamespacedReference {
            namespace: "banlieue-system".into(),
            name: "vc".into(),
        })
        .await
        .expect("the Provider's session");
    let stats = provider_client.call_stats();
    assert_eq!(
        stats
            .iter()
            .find(|(m, _)| **m == "RecommendDatastores")
            .map(|(_, s)| s.calls),
        Some(1),
        "one recommendation, for the one clone on the datastore cluster"
    );

    // edge-1: the standalone host's failure domain, its root pool, folder edge.
    let edge = machine(&world, "edge-1");
    let h0 = at(&client, "DC0/host/DC0_H0/DC0_H0").await;
    let on = landed(&client, edge).await;
    assert_eq!(
        (on.pool.as_str(), on.folder.as_str(), on.host.as_str()),
        (
            at(&client, "DC0/host/DC0_H0/Resources")
                .await
                .value
                .as_str(),
            at(&client, "DC0/vm/edge").await.value.as_str(),
            h0.value.as_str()
        )
    );
    assert_eq!(
        placement(edge),
        PlacementStatus {
            resource_pool: "/DC0/host/DC0_H0/Resources".into(),
            folder: "/DC0/vm/edge".into(),
            datastore: Some("/DC0/datastore/LocalDS_0".into()),
            host: Some("/DC0/host/DC0_H0/DC0_H0".into()),
            ..Default::default()
        }
    );
    assert_eq!(edge.spec.cluster, "DC0_H0");
    let _ = client.close().await;
}

/// The `RetrievePropertiesEx` requests in the simulator's trace that read
/// `property` of a `type_`.
fn reads(sim: &Simulator, type_: &str, property: &str) -> usize {
    let (type_, property) = (
        format!("<type>{type_}</type>"),
        format!("<pathSet>{property}</pathSet>"),
    );
    sim.log()
        .lines()
        .filter(|l| l.starts_with("Request: ") && l.contains("RetrievePropertiesEx"))
        .filter(|l| l.contains(&type_) && l.contains(&property))
        .count()
}

#[tokio::test]
async fn a_standalone_hosts_host_is_read_once_for_every_vm_placed_on_it() {
    let sim = start(true).await;
    let placement_yaml =
        "  placement:\n    failureDomains:\n      - { name: single-esxi, folder: edge }\n";
    let text = provider(&sim, "vc", placement_yaml)
        + COMMON
        + &vm("edge-1", "web", "single-esxi", "")
        + &vm("edge-2", "web", "single-esxi", "")
        + &vm("edge-3", "web", "single-esxi", "");
    let mut world = world_of(&text);
    let vcenter = VCenter::default();
    provision(&mut world, &vcenter, &sim).await;

    for name in ["edge-1", "edge-2", "edge-3"] {
        assert_eq!(
            placement(machine(&world, name)).host.as_deref(),
            Some("/DC0/host/DC0_H0/DC0_H0"),
            "{name}"
        );
    }
    assert_eq!(
        (
            reads(&sim, "ComputeResource", "host"),
            reads(&sim, "HostSystem", "name")
        ),
        (1, 1),
        "the standalone host and its name, read once for the three clones"
    );
}

#[tokio::test]
async fn with_storage_drs_off_the_datastore_cluster_gives_its_datastore_with_the_most_free_space() {
    let sim = simulator().await;
    let client = connect(&sim).await;
    let pooled = arrange(&client, &["LocalDS_0", "LocalDS_1"]).await;
    storage_drs(&client, false).await;
    let text = provider(&sim, "vc", "") + COMMON + &vm("db-1", "db", "cluster-zone", "");
    let mut world = world_of(&text);
    let vcenter = VCenter::default();
    provision(&mut world, &vcenter, &sim).await;

    // The simulator's datastores share one directory: equal free space, so
    // the first most free one; what matters is the note and no recommendation.
    let db = machine(&world, "db-1");
    let placed = placement(db);
    assert_eq!(placed.datastore_cluster.as_deref(), Some("DC0_POD0"));
    assert_eq!(
        placed.note.as_deref(),
        Some("Storage DRS is off: the datastore with the most free space")
    );
    let chosen = placed.datastore.clone().expect("a datastore");
    assert!(
        chosen.starts_with("/DC0/datastore/DC0_POD0/LocalDS_"),
        "{chosen}"
    );
    let on = landed(&client, db).await;
    let (name, expected) = pooled
        .iter()
        .find(|(name, _)| chosen.ends_with(&format!("/{name}")))
        .expect("one of the cluster's datastores");
    assert_eq!(&on.home, name);
    assert_eq!(on.disks.get(1), Some(&expected.value), "{:?}", on.disks);
    assert_eq!(
        placed.folder, "/DC0/vm/banlieue-cluster-zone",
        "the default folder stays"
    );
    let stats = vcenter
        .client(&banlieue::api::NamespacedReference {
            namespace: "banlieue-system".into(),
            name: "vc".into(),
        })
        .await
        .expect("session")
        .call_stats();
    assert!(
        !stats.iter().any(|(m, _)| *m == "RecommendDatastores"),
        "Storage DRS is off: not asked"
    );
    let _ = client.close().await;
}

#[tokio::test]
async fn a_missing_pool_or_folder_is_the_providers_reason_and_a_vms_own_its_machines() {
    let sim = simulator().await;
    let client = connect(&sim).await;
    arrange(&client, &[]).await;
    let text = provider(&sim, "no-pool", "  placement: { resourcePool: team-z }\n")
        + &provider(
            &sim,
            "no-parent",
            "  placement: { folder: missing/leaf }\n",
        )
        + &provider(
            &sim,
            "not-a-path",
            "  placement: { failureDomains: [{ name: cluster-zone, resourcePool: DC0_C0/DC0_C0_RP1 }] }\n",
        )
        + &provider(
            &sim,
            "fine",
            "  placement: { folder: apps/new, failureDomains: [{ name: cluster-zone, resourcePool: /DC0/host/DC0_C0/Resources/DC0_C0_RP1 }, \
             { name: single-esxi, folder: /DC0/vm/apps/edge }] }\n",
        )
        + &provider(
            &sim,
            "elsewhere",
            "  placement: { failureDomains: [{ name: single-esxi, resourcePool: /DC0/host/DC0_C0/Resources/DC0_C0_RP1 }] }\n",
        )
        + COMMON
        // A VirtualMachine's own pool is checked when its clone is placed.
        + &vm("lost", "web", "cluster-zone", "    resourcePool: team-y\n");
    let mut world = world_of(&text);
    let vcenter = VCenter::default();
    check::reconcile(&mut world, &vcenter, &conditions::now()).await;

    let (status, reason, message) = ready(&world, "no-pool");
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("False", "ResourcePoolNotFound")
    );
    assert!(
        message.contains("team-z") && message.contains("failure domain cluster-zone"),
        "{message}"
    );
    let (status, reason, message) = ready(&world, "no-parent");
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("False", "FolderNotFound")
    );
    assert!(
        message.contains("/DC0/vm/missing does not exist"),
        "{message}"
    );
    // A path is looked for under the failure domain's root pool, where
    // `DC0_C0/DC0_C0_RP1` is not.
    let (status, reason, message) = ready(&world, "not-a-path");
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("False", "ResourcePoolNotFound"),
        "{message}"
    );
    assert!(
        message.contains("/DC0/host/DC0_C0/Resources/DC0_C0/DC0_C0_RP1 not found"),
        "{message}"
    );
    // An inventory path must be under the failure domain's own root pool.
    let (status, reason, message) = ready(&world, "elsewhere");
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("False", "ResourcePoolNotFound"),
        "{message}"
    );
    assert!(
        message.contains("is not under the failure domain's root pool /DC0/host/DC0_H0/Resources"),
        "{message}"
    );
    let (status, reason, message) = ready(&world, "fine");
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("True", "Connected"),
        "{message}"
    );
    // Its folders were made at readiness, before any VM.
    for made in ["DC0/vm/apps/new", "DC0/vm/apps/edge"] {
        assert!(
            client.search_inventory_path(made).await.unwrap().is_some(),
            "{made}"
        );
    }

    // The one Ready Provider takes the VM, whose own pool is not there:
    // PlacementNotFound, and nothing cloned.
    check::apply(
        &mut world,
        &vcenter,
        Instant::now() + Duration::from_secs(30),
        &conditions::now(),
    )
    .await;
    let lost = machine(&world, "lost");
    assert_eq!(lost.spec.provider_ref.name, "fine");
    let c = lost.ready_condition().expect("Ready");
    assert_eq!(
        (c.status.as_str(), c.reason.as_str()),
        ("False", "PlacementNotFound"),
        "{}",
        c.message
    );
    assert!(c.message.contains("team-y"), "{}", c.message);
    assert!(
        lost.status.as_ref().unwrap().task.is_none(),
        "no clone sent"
    );
    assert!(client
        .search_inventory_path("DC0/vm/apps/new/team-a-lost")
        .await
        .unwrap()
        .is_none());
    let _ = client.close().await;
}
