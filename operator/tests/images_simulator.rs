//! Images against the simulator, through `check --apply`: linked clones
//! (the template's snapshot taken once, each clone's disk a child of it, the
//! VMClass's `cloneMode` winning over the VMImage's), and a content library
//! item (an OVF template uploaded to a library) verified, deployed once as a
//! template and cloned from, a VM-template item deployed the same way, a
//! missing one reported with its library.
//!
//! The launcher runs with `-linked-clones`: govmomi 0.24's simulator copies
//! a linked clone's disks; with the flag a clone whose spec has the
//! template's snapshot and `diskMoveType: createNewChildDiskBacking` gets
//! disks whose backing's parent is the snapshot's disk, as on vCenter. So
//! the parent is there only if both were sent. And with
//! `-refuse-template-snapshots`: the simulator snapshots a VM marked as a
//! template, vCenter does not (`NotSupported`); with the flag neither does
//! the simulator, so the snapshot is there only if the template was turned
//! into a VM for it (and it is a template again only if marked back). A
//! template left halfway through that (a provider stopped) is made here by
//! hand, as the operator leaves it, and finished by the next run.

use std::time::{Duration, Instant};

use banlieue::check::{self, parse_documents, World};
use banlieue::conditions;
use banlieue::controllers::provider::readiness::{image_on_provider, Fetched};
use banlieue::vsphere::vcenter::linked::CONVERTING;
use banlieue::vsphere::vcenter::machines::LINKED_CLONE_SNAPSHOT;
use banlieue::vsphere::vcenter::VCenter;
use vsphere_client::mo;
use vsphere_client::rest::{ItemSpec, LibraryItemType, LocalLibrarySpec, VmTemplateSpec};
use vsphere_client::types::{
    AnyVirtualDevice, AnyVirtualDeviceBackingInfo, ManagedObjectReference, VirtualMachineConfigSpec,
};
use vsphere_client::vm::snapshot::SnapshotSpec;
use vsphere_client::vm::CloneSpec;
use vsphere_client::Client;
use vsphere_tests::{ServerTls, Simulator, SimulatorOptions, Template, TINY_OVF as OVF};

const PASSWORD: &str = "s3cret-Pw";

/// A simulator with `extra_args`, serving plain HTTP when `plain` (its vAPI
/// side deploys an OVF through a SOAP client of its own, which fails on
/// its TLS).
async fn simulator(extra_args: &[&str], plain: bool) -> Simulator {
    let options = SimulatorOptions {
        tls: if plain {
            ServerTls::Plain
        } else {
            SimulatorOptions::default().tls
        },
        password: PASSWORD.into(),
        templates: vec![Template::everywhere("golden")],
        hosts_per_cluster: 1,
        standalone_hosts: 0,
        vms: 1,
        extra_args: extra_args.iter().map(ToString::to_string).collect(),
        ..Default::default()
    };
    tokio::task::spawn_blocking(move || Simulator::start(options))
        .await
        .expect("simulator start task")
        .unwrap_or_else(|e| panic!("simulator: {e}"))
}

/// The linked-clone test's image: template `golden`, linked clones.
const GOLDEN_LINKED: &str =
    "cloneMode: linked\n  sources: [{ providerClass: vsphere, kind: Template, ref: golden }]\n  \
                             template: { installMode: deferred }";

/// A Provider, the image `golden` of spec `image`, class `linked` (no
/// `cloneMode`: the image's), class `full` (`cloneMode: full`, which wins)
/// and class `nodisk`, and VirtualMachines `team-a/<name>` of `classes`.
fn manifests(sim: &Simulator, image: &str, vms: &[(&str, &str)]) -> String {
    manifests_with(sim, "LocalDS_0", "", image, vms)
}

/// [`manifests`] with the storage class `gold` on `datastore` and the
/// Provider's spec ending with `placement` (a YAML line, or nothing).
fn manifests_with(
    sim: &Simulator,
    datastore: &str,
    placement: &str,
    image: &str,
    vms: &[(&str, &str)],
) -> String {
    let mut text = format!(
        r#"apiVersion: v1
kind: Secret
metadata: {{ name: vsphere-creds, namespace: banlieue-system }}
stringData: {{ username: "{user}", password: "{PASSWORD}" }}
---
apiVersion: banlieue.io/v1alpha1
kind: Provider
metadata: {{ name: vc, namespace: banlieue-system }}
spec:
  providerClassRef: {{ name: vsphere }}
  connection: {{ endpoint: "{url}", credentialsRef: {{ name: vsphere-creds }}, insecureSkipTLSVerify: true }}
  capabilities:
    storageClasses: [{{ name: gold, target: {{ datastore: {datastore} }} }}]
    networkClasses: [{{ name: prod, target: {{ portGroup: DC0_DVPG0 }} }}]
  {placement}
---
{linked}{full}{nodisk}apiVersion: banlieue.io/v1alpha1
kind: VMImage
metadata: {{ name: golden }}
spec:
  {image}
---
"#,
        user = sim.username(),
        url = sim.sdk_url(),
        linked = class("linked", "", ROOT_DISK),
        full = class("full", "cloneMode: full", ROOT_DISK),
        nodisk = class("nodisk", "", ""),
    );
    for (name, class) in vms {
        text.push_str(&format!(
            "apiVersion: banlieue.io/v1alpha1\nkind: VirtualMachine\nmetadata: {{ name: {name}, namespace: team-a }}\n\
             spec: {{ classRef: {{ name: {class} }}, imageRef: {{ name: golden }} }}\n---\n"
        ));
    }
    text
}

const ROOT_DISK: &str = ", disks: [{ name: root, sizeGiB: 1, storageClass: gold }]";

/// A small VMClass `name` with `extra` in its spec and `disks` in its hardware.
fn class(name: &str, extra: &str, disks: &str) -> String {
    format!(
        "apiVersion: banlieue.io/v1alpha1\nkind: VMClass\nmetadata: {{ name: {name} }}\nspec:\n  {extra}\n  \
         hardware: {{ cpus: 1, memoryMiB: 256{disks} }}\n---\n"
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

/// `check --apply`: Providers and images reconciled, VMs scheduled, then made.
async fn apply(world: &mut World) {
    let vcenter = VCenter::default();
    check::reconcile(world, &vcenter, &conditions::now()).await;
    check::apply(
        world,
        &vcenter,
        Instant::now() + Duration::from_secs(60),
        &conditions::now(),
    )
    .await;
    vcenter.close_all().await;
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

/// The status of the VSphereMachine `name`.
fn machine_status(world: &World, name: &str) -> banlieue::api::VSphereMachineStatus {
    world
        .machines
        .iter()
        .find(|m| m.metadata.name.as_deref() == Some(name))
        .unwrap_or_else(|| panic!("machine {name}"))
        .status
        .clone()
        .unwrap_or_default()
}

fn machine_ref(world: &World, name: &str) -> ManagedObjectReference {
    let status = machine_status(world, name);
    assert!(
        status.provisioned,
        "{name} provisioned: {:?} {:?}",
        status.conditions,
        world.vms.iter().map(|v| &v.status).collect::<Vec<_>>()
    );
    ManagedObjectReference::new("VirtualMachine", status.mo_ref.expect("the VM is made"))
}

/// The file names of the disks in `devices` and of their backings' parents.
fn disk_files(devices: &[AnyVirtualDevice]) -> Vec<(String, Option<String>)> {
    devices
        .iter()
        .filter_map(|d| match d {
            AnyVirtualDevice::VirtualDisk(disk) => match &disk.virtual_device.backing {
                Some(AnyVirtualDeviceBackingInfo::VirtualDiskFlatVer2BackingInfo(b)) => Some((
                    b.virtual_device_file_backing_info.file_name.clone(),
                    b.parent
                        .as_ref()
                        .map(|p| p.virtual_device_file_backing_info.file_name.clone()),
                )),
                _ => None,
            },
            _ => None,
        })
        .collect()
}

async fn vm_disks(client: &Client, vm: &ManagedObjectReference) -> Vec<(String, Option<String>)> {
    let vm = client
        .properties::<mo::VirtualMachine>(&["config.hardware.device"])
        .expect("paths")
        .get(vm)
        .await
        .expect("the VM's devices");
    disk_files(&vm.config.map(|c| c.hardware.device).unwrap_or_default())
}

/// The template's flag, annotation, power state and snapshot names.
async fn template_state(
    client: &Client,
    template: &ManagedObjectReference,
) -> (bool, String, String, Vec<String>) {
    let vm = client
        .properties::<mo::VirtualMachine>(&[
            "config.template",
            "config.annotation",
            "runtime.powerState",
        ])
        .expect("paths")
        .get(template)
        .await
        .expect("the template");
    let tree = client
        .vm(template.clone())
        .snapshot_tree()
        .await
        .expect("the template's snapshots");
    let config = vm.config.unwrap_or_default();
    (
        config.template,
        config.annotation.unwrap_or_default(),
        vm.runtime
            .map(|r| r.power_state.as_str().to_string())
            .unwrap_or_default(),
        tree.iter().map(|(_, s)| s.name.clone()).collect(),
    )
}

/// The object at inventory path `path`, which must be there.
async fn found(client: &Client, path: &str, what: &str) -> ManagedObjectReference {
    client
        .search_inventory_path(path)
        .await
        .expect("lookup")
        .unwrap_or_else(|| panic!("{what} at {path}"))
}

async fn golden(client: &Client) -> ManagedObjectReference {
    found(client, "DC0/vm/golden", "the template").await
}

/// The linked-clone snapshot's first disk file.
async fn snapshot_disk(client: &Client, template: &ManagedObjectReference) -> String {
    let tree = client
        .vm(template.clone())
        .snapshot_tree()
        .await
        .expect("the template's snapshots");
    let base = tree.current.clone().expect("a current snapshot");
    let snapshot = client
        .properties::<mo::VirtualMachineSnapshot>(&["config.hardware.device"])
        .expect("paths")
        .get(&base)
        .await
        .expect("the snapshot's devices");
    let disks = disk_files(
        &snapshot
            .config
            .map(|c| c.hardware.device)
            .unwrap_or_default(),
    );
    let disk = disks.first().expect("the snapshot has a disk").0.clone();
    assert!(!disk.is_empty());
    disk
}

async fn assert_linked(client: &Client, world: &World, name: &str, base_disk: &str) {
    let disks = vm_disks(client, &machine_ref(world, name)).await;
    let (file, parent) = disks.first().expect("a disk").clone();
    assert_eq!(
        parent.as_deref(),
        Some(base_disk),
        "{name}'s disk is a child of the template snapshot's"
    );
    assert_ne!(file, base_disk, "{name} has its own child disk");
}

#[tokio::test]
async fn linked_clones_share_the_template_snapshot_s_disk_taken_once_and_the_class_wins() {
    let sim = simulator(&["-linked-clones", "-refuse-template-snapshots"], false).await;
    let client = connect(&sim).await;
    let template = golden(&client).await;
    // As on vCenter: a VM marked as a template is not snapshotted.
    let refused = client
        .vm(template.clone())
        .start_create_snapshot(&SnapshotSpec::new("direct"))
        .await;
    let refused = match refused {
        Ok(task) => task.wait_timeout(Duration::from_secs(30)).await.map(|_| ()),
        Err(e) => Err(e),
    };
    assert!(
        refused.as_ref().is_err_and(|e| e
            .fault()
            .and_then(|f| f.type_name())
            .is_some_and(|t| t == "NotSupported")),
        "{refused:?}"
    );
    let mut world = world_of(&manifests(
        &sim,
        GOLDEN_LINKED,
        &[("web-1", "linked"), ("web-2", "linked"), ("db", "full")],
    ));
    apply(&mut world).await;
    for name in ["web-1", "web-2", "db"] {
        machine_ref(&world, name);
    }

    // One snapshot of the template, taken for the first linked clone while
    // it was a VM; a template again, never powered on, its notes as they were.
    let (is_template, notes, power, names) = template_state(&client, &template).await;
    assert_eq!(names, [LINKED_CLONE_SNAPSHOT], "taken once for two clones");
    assert!(is_template, "marked a template again");
    assert_eq!(power, "poweredOff");
    assert!(
        !notes.contains(CONVERTING),
        "the conversion line removed: {notes:?}"
    );
    let base_disk = snapshot_disk(&client, &template).await;
    let current = client
        .vm(template.clone())
        .snapshot_tree()
        .await
        .expect("the template's snapshots")
        .current
        .expect("a current snapshot");
    for name in ["web-1", "web-2"] {
        assert_linked(&client, &world, name, &base_disk).await;
        // The status names the base the clone was made from.
        let placement = machine_status(&world, name).placement.expect("a placement");
        assert_eq!(
            placement.linked_clone_base,
            Some(format!("golden@{}", current.value)),
            "{name}"
        );
    }
    let full = machine_status(&world, "db").placement.expect("a placement");
    assert_eq!(full.linked_clone_base, None);
    // `cloneMode: full` on the class wins over the image's `linked`.
    let disks = vm_disks(&client, &machine_ref(&world, "db")).await;
    assert_eq!(disks.first().and_then(|d| d.1.clone()), None, "a full copy");

    // A second run takes no second snapshot and makes no VM.
    apply(&mut world).await;
    let tree = client
        .vm(template)
        .snapshot_tree()
        .await
        .expect("the template's snapshots");
    assert_eq!(tree.len(), 1);
}

/// Two providers' sessions (two logins) placing a linked clone of one
/// template at once: one converts it, the other waits for it and finds the
/// snapshot; both clones get the same base.
#[tokio::test]
async fn two_linked_clones_placed_at_once_convert_the_template_once() {
    use banlieue::api::NamespacedReference;
    use banlieue::vsphere::{CloneRequest, ConnectParams, Machines, SecretString, Tls, VSphere};
    let sim = simulator(&["-linked-clones", "-refuse-template-snapshots"], false).await;
    let client = connect(&sim).await;
    let template = golden(&client).await;
    let params = |provider: &str| ConnectParams {
        provider: NamespacedReference {
            namespace: "banlieue-system".into(),
            name: provider.into(),
        },
        endpoint: sim.sdk_url(),
        username: sim.username().into(),
        password: SecretString::new(sim.password()),
        tls: Tls::Insecure,
        call_deadline: Duration::from_secs(60),
    };
    let request = |name: &str| CloneRequest {
        name: name.into(),
        datacenter: "DC0".into(),
        cluster: "DC0_C0".into(),
        folder: "banlieue-at-once".into(),
        template_name: "golden".into(),
        template_mo_ref: Some(template.value.clone()),
        linked: true,
        ..Default::default()
    };
    let (one, two) = (VCenter::default(), VCenter::default());
    let (a, b) = (
        one.connect(&params("one")).await.expect("session one"),
        two.connect(&params("two")).await.expect("session two"),
    );
    let (ra, rb) = (request("a"), request("b"));
    let (pa, pb) = tokio::join!(a.place(&ra), b.place(&rb));
    let (pa, pb) = (pa.expect("placed a"), pb.expect("placed b"));
    let (is_template, _, power, names) = template_state(&client, &template).await;
    assert_eq!(names, [LINKED_CLONE_SNAPSHOT], "taken once");
    assert!(is_template);
    assert_eq!(power, "poweredOff");
    assert!(pa.linked_clone_base.is_some());
    assert_eq!(pa.linked_clone_base, pb.linked_clone_base);
    one.close_all().await;
    two.close_all().await;
}

/// Writes `annotation` on `vm` (a template takes it too).
async fn annotate(client: &Client, vm: &ManagedObjectReference, annotation: &str) {
    let spec = VirtualMachineConfigSpec {
        annotation: Some(annotation.to_string()),
        ..Default::default()
    };
    let task = client
        .vim()
        .reconfig_vm_task(vm, &spec)
        .await
        .expect("reconfigure");
    client.task(task).wait().await.expect("annotated");
}

/// The template as a provider that stopped halfway leaves it: the
/// conversion line (written at `since`) on it, then turned into a VM in the
/// cluster's root pool; snapshotted as well when `snapshotted`.
async fn left_halfway(client: &Client, since: &str, snapshotted: bool) -> ManagedObjectReference {
    let template = golden(client).await;
    annotate(
        client,
        &template,
        &format!("Ubuntu 24.04\n{CONVERTING}{since}"),
    )
    .await;
    let pool = found(client, "DC0/host/DC0_C0/Resources", "the pool").await;
    client
        .vim()
        .mark_as_virtual_machine(&template, &pool, None)
        .await
        .expect("turned into a VM");
    if snapshotted {
        client
            .vm(template.clone())
            .start_create_snapshot(&SnapshotSpec::new(LINKED_CLONE_SNAPSHOT))
            .await
            .expect("snapshot")
            .wait_timeout(Duration::from_secs(30))
            .await
            .expect("snapshot taken");
    }
    template
}

/// The reason and message of the machine's `Ready` condition.
fn ready_condition(world: &World, name: &str) -> (String, String) {
    let status = machine_status(world, name);
    conditions::find(&status.conditions, conditions::READY)
        .map(|c| (c.reason.clone(), c.message.clone()))
        .unwrap_or_default()
}

/// A simulator whose template was left halfway (the line written at
/// `since`, snapshotted when `snapshotted`), and a run of `check --apply`
/// with VMs `vms` of the linked image: the image is found all the same.
async fn run_on_halfway(
    since: &str,
    snapshotted: bool,
    vms: &[(&str, &str)],
) -> (Simulator, Client, ManagedObjectReference, World) {
    let sim = simulator(&["-linked-clones", "-refuse-template-snapshots"], false).await;
    let client = connect(&sim).await;
    let template = left_halfway(&client, since, snapshotted).await;
    let mut world = world_of(&manifests(&sim, GOLDEN_LINKED, vms));
    apply(&mut world).await;
    let (ready, reason, message, _) = image_entry(&world);
    assert_eq!(
        (ready, reason.as_str()),
        (true, "TemplateFound"),
        "{message}"
    );
    (sim, client, template, world)
}

/// Finished: one snapshot, a template again, off, the notes without the line.
async fn assert_finished(client: &Client, template: &ManagedObjectReference) {
    let (is_template, notes, power, names) = template_state(client, template).await;
    assert_eq!(names, [LINKED_CLONE_SNAPSHOT], "taken once");
    assert!(is_template, "marked a template again");
    assert_eq!(power, "poweredOff");
    assert_eq!(notes, "Ubuntu 24.04", "the line gone, the notes kept");
}

const LONG_AGO: &str = "2020-01-01T00:00:00Z";

#[tokio::test]
async fn a_template_left_halfway_through_its_conversion_is_finished_by_the_next_run() {
    // Stopped after turning it into a VM, before the snapshot: the image is
    // still found (not a template for now), the snapshot taken once, the
    // template marked again, the line gone, the clone linked.
    let (sim, client, template, world) =
        run_on_halfway(LONG_AGO, false, &[("web-1", "linked")]).await;
    assert_finished(&client, &template).await;
    let base_disk = snapshot_disk(&client, &template).await;
    assert_linked(&client, &world, "web-1", &base_disk).await;
    drop(sim);

    // Stopped after the snapshot, before marking it a template again: no
    // second snapshot, and the lookup alone finishes it (no VM asked for).
    let (sim, client, template, _) = run_on_halfway(LONG_AGO, true, &[]).await;
    assert_finished(&client, &template).await;
    drop(sim);

    // Another provider converting right now (a line within the lease that
    // this one did not write): the image is found, the linked clone waits
    // and nothing is taken; once the lease is over, it is taken over.
    let now = conditions::now().0.to_string();
    let (sim, client, template, world) = run_on_halfway(&now, false, &[("web-1", "linked")]).await;
    let (reason, waiting) = ready_condition(&world, "web-1");
    assert_eq!(reason, "LinkedCloneBaseBusy", "{waiting}");
    assert!(waiting.contains("by another provider"), "{waiting}");
    let (is_template, _, _, names) = template_state(&client, &template).await;
    assert!(
        !is_template && names.is_empty(),
        "left to the other provider"
    );
    annotate(
        &client,
        &template,
        &format!("Ubuntu 24.04\n{CONVERTING}{LONG_AGO}"),
    )
    .await;
    let mut world = world_of(&manifests(&sim, GOLDEN_LINKED, &[("web-1", "linked")]));
    apply(&mut world).await;
    assert_finished(&client, &template).await;
    let base_disk = snapshot_disk(&client, &template).await;
    assert_linked(&client, &world, "web-1", &base_disk).await;
}

fn library_image(item: &str) -> String {
    format!(
        "sources: [{{ providerClass: vsphere, kind: ContentLibraryItem, library: images, ref: {item} }}]\n  \
         template: {{ installMode: deferred }}"
    )
}

fn image_entry(world: &World) -> (bool, String, String, Vec<String>) {
    let entry = world.images[0]
        .status
        .as_ref()
        .and_then(|s| s.per_provider.first())
        .cloned()
        .expect("the image's entry");
    (
        entry.ready,
        entry.reason.unwrap_or_default(),
        entry.message.unwrap_or_default(),
        entry.templates.iter().map(|t| t.name.clone()).collect(),
    )
}

/// A library `images` on LocalDS_0 with the OVF item `tiny`: the library's
/// and item's ids, and the name of the item's template.
async fn tiny_library(client: &Client) -> (String, String, String) {
    let rest = client.rest().await.expect("REST");
    let content = rest.library();
    let datastore = found(client, "DC0/datastore/LocalDS_0", "the datastore").await;
    let library = content
        .create_local(&LocalLibrarySpec::on_datastore("images", &datastore))
        .await
        .expect("library");
    let item = content
        .create_item(&ItemSpec::new(&library, "tiny", Some(LibraryItemType::Ovf)))
        .await
        .expect("item");
    content
        .upload_files(&item, [("tiny.ovf", OVF.as_bytes().to_vec())])
        .await
        .expect("upload");
    let version = content
        .get_item(&item)
        .await
        .expect("the item")
        .content_version
        .unwrap_or_else(|| "0".into());
    let template = format!("banlieue-{item}-v{version}");
    (library, item, template)
}

#[tokio::test]
async fn a_content_library_item_is_deployed_into_the_failure_domain_s_pool_folder_and_datastore() {
    let sim = simulator(&["-ds=2", "-pool=1"], true).await;
    let client = connect(&sim).await;
    let (_, _, template) = tiny_library(&client).await;
    let mut world = world_of(&manifests_with(
        &sim,
        "LocalDS_1",
        "placement: { resourcePool: DC0_C0_RP1, folder: golden-images }",
        &library_image("tiny"),
        &[],
    ));
    apply(&mut world).await;
    let (ready, reason, message, _) = image_entry(&world);
    assert_eq!(
        (ready, reason.as_str()),
        (true, "LibraryItemDeployed"),
        "{message}"
    );
    // In the failure domain's folder (made), not banlieue-images.
    let deployed = found(
        &client,
        &format!("DC0/vm/golden-images/{template}"),
        "the item deployed into the failure domain's folder",
    )
    .await;
    // On the storage class's datastore (the simulator takes the first one
    // when the deploy names none).
    let vm = client
        .properties::<mo::VirtualMachine>(&["datastore", "config.template"])
        .expect("paths")
        .get(&deployed)
        .await
        .expect("read");
    assert!(vm.config.is_some_and(|c| c.template), "marked a template");
    let datastore = found(&client, "DC0/datastore/LocalDS_1", "LocalDS_1").await;
    assert_eq!(vm.datastore.unwrap_or_default(), [datastore]);
    // In the failure domain's pool (a template has no resourcePool: the
    // simulator keeps it in the pool's VMs, where the deploy put it).
    for (path, holds) in [
        ("DC0/host/DC0_C0/Resources/DC0_C0_RP1", true),
        ("DC0/host/DC0_C0/Resources", false),
    ] {
        let pool = found(&client, path, "the pool").await;
        let vms = client
            .properties::<mo::ResourcePool>(&["vm"])
            .expect("paths")
            .get(&pool)
            .await
            .expect("read")
            .vm
            .unwrap_or_default();
        assert_eq!(vms.contains(&deployed), holds, "{path}: {vms:?}");
    }
}

/// A template `name` in the images folder (made if need be): a copy of
/// `golden`, as an older deploy of an item would have left.
async fn older_template(client: &Client, name: &str) -> ManagedObjectReference {
    let vm_folder = found(client, "DC0/vm", "the VM folder").await;
    let folder = match client
        .search_inventory_path("DC0/vm/banlieue-images")
        .await
        .expect("lookup")
    {
        Some(folder) => folder,
        None => client
            .vim()
            .create_folder(&vm_folder, "banlieue-images")
            .await
            .expect("the images folder"),
    };
    let pool = found(client, "DC0/host/DC0_C0/Resources", "the pool").await;
    client
        .vm(golden(client).await)
        .clone_vm(name, &CloneSpec::new(folder).pool(pool).template())
        .await
        .expect("the older template")
        .reference()
        .clone()
}

async fn exists(client: &Client, name: &str) -> bool {
    client
        .search_inventory_path(&format!("DC0/vm/banlieue-images/{name}"))
        .await
        .expect("lookup")
        .is_some()
}

#[tokio::test]
async fn the_templates_of_an_item_s_older_versions_go_once_the_new_one_is_published_and_unused() {
    let sim = simulator(&[], true).await;
    let client = connect(&sim).await;
    let (_, item, template) = tiny_library(&client).await;
    // Another content version than the current one (the simulator's first is 0).
    let older = format!("banlieue-{item}-v7");
    assert_ne!(older, template);
    let other = "banlieue-another-item-v0";
    older_template(&client, &older).await;
    older_template(&client, other).await;

    // The first run deploys the new version: the image's status did not
    // name it yet (a VSphereMachine may be made from the older one), so the
    // older one stays.
    let mut world = world_of(&manifests(
        &sim,
        &library_image("tiny"),
        &[("web", "nodisk")],
    ));
    apply(&mut world).await;
    machine_ref(&world, "web");
    assert!(exists(&client, &template).await);
    assert!(
        exists(&client, &older).await,
        "kept until the status names the new one"
    );

    // The next one: removed; another item's and the current one stay.
    apply(&mut world).await;
    let (ready, _, message, _) = image_entry(&world);
    assert!(ready, "{message}");
    assert!(
        message.contains(&format!("older versions removed: {older}")),
        "{message}"
    );
    assert!(!exists(&client, &older).await, "removed");
    assert!(exists(&client, other).await, "another item's");
    assert!(exists(&client, &template).await, "the current one");

    // One a VSphereMachine still needs (being cloned, or a linked clone's
    // base) stays, and so does any while the machines are not known.
    older_template(&client, &older).await;
    let vcenter = VCenter::default();
    let objects = |in_use: Option<&[&str]>| Fetched {
        secrets: world.secrets.clone(),
        templates_in_use: in_use.map(|names| names.iter().map(ToString::to_string).collect()),
        ..Default::default()
    };
    let (image, provider) = (&world.images[0], &world.providers[0]);
    for in_use in [Some(&[older.as_str()][..]), None] {
        let entry = image_on_provider(image, provider, &objects(in_use), &vcenter).await;
        assert!(entry.ready, "{:?}", entry.message);
        assert!(exists(&client, &older).await, "kept for {in_use:?}");
    }
    image_on_provider(image, provider, &objects(Some(&[])), &vcenter).await;
    assert!(!exists(&client, &older).await, "removed once unused");
    vcenter.close_all().await;
}

#[tokio::test]
async fn a_content_library_item_is_verified_deployed_once_as_a_template_and_cloned() {
    let sim = simulator(&[], true).await;
    let client = connect(&sim).await;
    let (library, _, template) = tiny_library(&client).await;
    let rest = client.rest().await.expect("REST");
    let content = rest.library();

    let mut world = world_of(&manifests(
        &sim,
        &library_image("tiny"),
        &[("web", "nodisk")],
    ));
    apply(&mut world).await;
    let (ready, reason, message, templates) = image_entry(&world);
    assert_eq!(
        (ready, reason.as_str()),
        (true, "LibraryItemDeployed"),
        "{message}"
    );
    assert_eq!(templates, std::slice::from_ref(&template));
    let deployed = found(
        &client,
        &format!("DC0/vm/banlieue-images/{template}"),
        "the item deployed into the images folder",
    )
    .await;
    let is_template = client
        .properties::<mo::VirtualMachine>(&["config.template"])
        .expect("paths")
        .get(&deployed)
        .await
        .expect("read")
        .config
        .is_some_and(|c| c.template);
    assert!(is_template, "marked a template");
    machine_ref(&world, "web");
    assert_eq!(
        world.machines[0].spec.template.name, template,
        "cloned from the deployed template"
    );

    // A second run deploys nothing more and makes no VM.
    apply(&mut world).await;
    let folder = found(&client, "DC0/vm/banlieue-images", "the images folder").await;
    let children = client
        .properties::<mo::Folder>(&["childEntity"])
        .expect("paths")
        .get(&folder)
        .await
        .expect("read")
        .child_entity
        .unwrap_or_default();
    assert_eq!(children, [deployed], "one deploy in all");

    // A VM-template item (made from a VM of the simulator): deployed the same way.
    let pool = found(&client, "DC0/host/DC0_C0/Resources", "the pool").await;
    let source = found(&client, "DC0/vm/DC0_C0_RP0_VM0", "a VM").await;
    let vmtx = content
        .create_vm_template(&VmTemplateSpec {
            name: "golden-vmtx".into(),
            source_vm: source,
            library_id: library.clone(),
            folder: Some(folder.clone()),
            resource_pool: Some(pool),
            ..Default::default()
        })
        .await
        .expect("the VM-template item");
    let mut from_vmtx = world_of(&manifests(&sim, &library_image("golden-vmtx"), &[]));
    apply(&mut from_vmtx).await;
    let (ready, reason, message, templates) = image_entry(&from_vmtx);
    assert_eq!(
        (ready, reason.as_str()),
        (true, "LibraryItemDeployed"),
        "{message}"
    );
    assert!(
        templates[0].starts_with(&format!("banlieue-{vmtx}-v")),
        "{templates:?}"
    );

    // An item the library does not have: not ready, the library named.
    let mut missing = world_of(&manifests(&sim, &library_image("nope"), &[]));
    apply(&mut missing).await;
    let (ready, reason, message, _) = image_entry(&missing);
    assert_eq!((ready, reason.as_str()), (false, "LibraryItemNotFound"));
    assert!(
        message.contains("\"nope\"") && message.contains("content library \"images\""),
        "{message}"
    );
}
