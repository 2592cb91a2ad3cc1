//! Images against the simulator, through `check --apply`: linked clones
//! (the template's snapshot taken once, each clone's disk a child of it, the
//! VMClass's `cloneMode` winning over the VMImage's).
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
use vsphere_client::types::{
    AnyVirtualDevice, AnyVirtualDeviceBackingInfo, ManagedObjectReference,
};
use vsphere_client::Client;
use vsphere_tests::{Simulator, SimulatorOptions, Template};

const PASSWORD: &str = "s3cret-Pw";

async fn simulator(extra_args: &[&str]) -> Simulator {
    let options = SimulatorOptions {
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

/// A Provider, the image `golden` (linked clones), class `linked` (no
/// `cloneMode`: the image's) and class `full` (`cloneMode: full`, which
/// wins), and VirtualMachines `team-a/<name>` of `classes`.
fn manifests(sim: &Simulator, vms: &[(&str, &str)]) -> String {
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
{linked}{full}apiVersion: banlieue.io/v1alpha1
kind: VMImage
metadata: {{ name: golden }}
spec:
  cloneMode: linked
  sources: [{{ providerClass: vsphere, kind: Template, ref: golden }}]
  template: {{ installMode: deferred }}
---
"#,
        user = sim.username(),
        url = sim.sdk_url(),
        linked = class("linked", ""),
        full = class("full", "cloneMode: full"),
    );
    for (name, class) in vms {
        text.push_str(&format!(
            "apiVersion: banlieue.io/v1alpha1\nkind: VirtualMachine\nmetadata: {{ name: {name}, namespace: team-a }}\n\
             spec: {{ classRef: {{ name: {class} }}, imageRef: {{ name: golden }} }}\n---\n"
        ));
    }
    text
}

/// A small VMClass `name` with `extra` in its spec.
fn class(name: &str, extra: &str) -> String {
    format!(
        "apiVersion: banlieue.io/v1alpha1\nkind: VMClass\nmetadata: {{ name: {name} }}\nspec:\n  {extra}\n  \
         hardware: {{ cpus: 1, memoryMiB: 256, disks: [{{ name: root, sizeGiB: 1, storageClass: gold }}] }}\n---\n"
    )
}

fn world(text: &str) -> World {
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
    let sim = simulator(&["-linked-clones"]).await;
    let client = connect(&sim).await;
    let template = client
        .search_inventory_path("DC0/vm/golden")
        .await
        .expect("lookup")
        .expect("the template");
    let mut world = world(&manifests(
        &sim,
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
