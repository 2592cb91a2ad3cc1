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
//! the parent is there only if both were sent.

use std::time::{Duration, Instant};

use banlieue::check::{self, parse_documents, World};
use banlieue::conditions;
use banlieue::vsphere::vcenter::machines::LINKED_CLONE_SNAPSHOT;
use banlieue::vsphere::vcenter::VCenter;
use vsphere_client::mo;
use vsphere_client::rest::{ItemSpec, LibraryItemType, LocalLibrarySpec, VmTemplateSpec};
use vsphere_client::types::{
    AnyVirtualDevice, AnyVirtualDeviceBackingInfo, ManagedObjectReference,
};
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
    storageClasses: [{{ name: gold, target: {{ datastore: LocalDS_0 }} }}]
    networkClasses: [{{ name: prod, target: {{ portGroup: DC0_DVPG0 }} }}]
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

fn machine_ref(world: &World, name: &str) -> ManagedObjectReference {
    let machine = world
        .machines
        .iter()
        .find(|m| m.metadata.name.as_deref() == Some(name))
        .unwrap_or_else(|| panic!("machine {name}"));
    let status = machine.status.clone().unwrap_or_default();
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

#[tokio::test]
async fn linked_clones_share_the_template_snapshot_s_disk_taken_once_and_the_class_wins() {
    let sim = simulator(&["-linked-clones"], false).await;
    let client = connect(&sim).await;
    let template = client
        .search_inventory_path("DC0/vm/golden")
        .await
        .expect("lookup")
        .expect("the template");
    let mut world = world_of(&manifests(
        &sim,
        GOLDEN_LINKED,
        &[("web-1", "linked"), ("web-2", "linked"), ("db", "full")],
    ));
    apply(&mut world).await;
    for name in ["web-1", "web-2", "db"] {
        machine_ref(&world, name);
    }

    // One snapshot of the template, taken for the first linked clone.
    let tree = client
        .vm(template.clone())
        .snapshot_tree()
        .await
        .expect("the template's snapshots");
    let names: Vec<String> = tree.iter().map(|(_, s)| s.name.clone()).collect();
    assert_eq!(names, [LINKED_CLONE_SNAPSHOT], "taken once for two clones");
    let base = tree.current.clone().expect("a current snapshot");
    let snapshot = client
        .properties::<mo::VirtualMachineSnapshot>(&["config.hardware.device"])
        .expect("paths")
        .get(&base)
        .await
        .expect("the snapshot's devices");
    let base_disks = disk_files(
        &snapshot
            .config
            .map(|c| c.hardware.device)
            .unwrap_or_default(),
    );
    let base_disk = base_disks
        .first()
        .expect("the snapshot has a disk")
        .0
        .clone();
    assert!(!base_disk.is_empty());

    for name in ["web-1", "web-2"] {
        let disks = vm_disks(&client, &machine_ref(&world, name)).await;
        let (file, parent) = disks.first().expect("a disk").clone();
        assert_eq!(
            parent.as_deref(),
            Some(base_disk.as_str()),
            "{name}'s disk is a child of the template snapshot's"
        );
        assert_ne!(file, base_disk, "{name} has its own child disk");
    }
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

#[tokio::test]
async fn a_content_library_item_is_verified_deployed_once_as_a_template_and_cloned() {
    let sim = simulator(&[], true).await;
    let client = connect(&sim).await;
    let rest = client.rest().await.expect("REST");
    let content = rest.library();
    let datastore = client
        .search_inventory_path("DC0/datastore/LocalDS_0")
        .await
        .expect("lookup")
        .expect("the datastore");
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
    let deployed = client
        .search_inventory_path(&format!("DC0/vm/banlieue-images/{template}"))
        .await
        .expect("lookup")
        .expect("the item deployed into the images folder");
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
    let folder = client
        .search_inventory_path("DC0/vm/banlieue-images")
        .await
        .expect("lookup")
        .expect("the images folder");
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
    let pool = client
        .search_inventory_path("DC0/host/DC0_C0/Resources")
        .await
        .expect("lookup")
        .expect("the pool");
    let source = client
        .search_inventory_path("DC0/vm/DC0_C0_RP0_VM0")
        .await
        .expect("lookup")
        .expect("a VM");
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
