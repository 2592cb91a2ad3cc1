//! VM snapshots against the simulator: create, the typed tree, lookup by
//! name, path and id, an ambiguous name, revert, remove with and without
//! children, remove all.
//!
//! govmomi 0.24's simulator keeps the tree, the current snapshot, ids,
//! creation times, descriptions and `quiesced`, and lists each snapshot in
//! `layoutEx` (its files have no size: 0 bytes). It does not save memory
//! (`memory` changes nothing), consolidate, or change the VM's power state
//! or disks on a revert; a revert only moves the current snapshot.

use std::time::{Duration, SystemTime};

use vsphere_client::task::{task_result_reference, Task};
use vsphere_client::vm::snapshot::{RemoveOptions, SnapshotSpec};
use vsphere_client::vm::VirtualMachine;
use vsphere_client::{mo, Client, Error, ErrorKind};
use vsphere_tests::{Simulator, SimulatorOptions};

async fn simulator() -> Simulator {
    tokio::task::spawn_blocking(|| Simulator::start(SimulatorOptions::default()))
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

/// The simulator's VM `name`, through a new session.
async fn vm_named(sim: &Simulator, name: &str) -> (Client, VirtualMachine) {
    let client = connect(sim).await;
    let object = client.finder().virtual_machine(name).await.unwrap();
    let vm = client.vm(object.reference);
    (client, vm)
}

/// Waits for a task that must start and succeed.
async fn finish(task: Result<Task, Error>) {
    task.expect("start").wait().await.expect("task");
}

async fn snapshot(vm: &VirtualMachine, spec: SnapshotSpec) -> String {
    let info = vm
        .start_create_snapshot(&spec)
        .await
        .expect("create")
        .wait()
        .await
        .expect("create task");
    task_result_reference(&info)
        .expect("the task returns the snapshot")
        .value
}

/// The tree as `path id` lines, the current one marked with `*`.
async fn shape(vm: &VirtualMachine) -> Vec<String> {
    let tree = vm.snapshot_tree().await.expect("tree");
    tree.iter()
        .map(|(path, s)| {
            let mark = if tree.current.as_ref() == Some(&s.reference) {
                " *"
            } else {
                ""
            };
            format!("{path} {}{mark}", s.reference.value)
        })
        .collect()
}

#[tokio::test]
async fn create_find_revert_and_remove_snapshots() {
    let sim = simulator().await;
    let (client, vm) = vm_named(&sim, "DC0_H0_VM0").await;
    assert!(vm.snapshot_tree().await.unwrap().is_empty());

    let before = SystemTime::now() - Duration::from_secs(5);
    let base = snapshot(
        &vm,
        SnapshotSpec::new("base")
            .description("first one")
            .quiesce(true),
    )
    .await;
    let app = snapshot(&vm, SnapshotSpec::new("app").memory(true)).await;
    let nested = snapshot(&vm, SnapshotSpec::new("app")).await;
    finish(vm.start_revert_to_snapshot("base", false).await).await;
    let db = snapshot(&vm, SnapshotSpec::new("db")).await;
    assert_eq!(
        shape(&vm).await,
        [
            format!("base {base}"),
            format!("base/app {app}"),
            format!("base/app/app {nested}"),
            format!("base/db {db} *"),
        ]
    );

    // The typed tree: names, both ids, times, the current one, sizes.
    let tree = vm.snapshot_tree().await.unwrap();
    let first = &tree.roots[0];
    assert_eq!(first.name, "base");
    assert_eq!(first.description, "first one");
    assert!(first.quiesced);
    assert_eq!(first.reference.type_, "VirtualMachineSnapshot");
    let ids: Vec<Option<i32>> = tree.iter().map(|(_, s)| s.id).collect();
    assert_eq!(ids, [Some(1), Some(2), Some(3), Some(4)]);
    let created = first.created_at().expect("a creation time");
    assert!(
        created > before && created < SystemTime::now() + Duration::from_secs(5),
        "{}",
        first.created
    );
    assert_eq!(tree.current_snapshot().map(|s| s.name.as_str()), Some("db"));
    for (path, s) in tree.iter() {
        assert!(tree.size(&s.reference).is_some(), "{path}: no size");
    }

    // Lookup by name, path and id; an ambiguous name names its matches.
    assert_eq!(tree.find("db").unwrap().reference.value, db);
    assert_eq!(tree.find("base/app").unwrap().reference.value, app);
    assert_eq!(tree.find("base/app/app").unwrap().reference.value, nested);
    assert_eq!(tree.find(&nested).unwrap().name, "app");
    let err = vm.find_snapshot("app").await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument);
    let text = err.to_string();
    assert!(
        text.contains(&format!("base/app ({app})"))
            && text.contains(&format!("base/app/app ({nested})")),
        "{text}"
    );
    let err = vm.find_snapshot("nope").await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotFound, "{err}");
    // The ambiguous name reverts nothing.
    assert!(vm.start_revert_to_snapshot("app", false).await.is_err());

    // Revert by path, then to the current snapshot.
    finish(vm.start_revert_to_snapshot("base/app/app", true).await).await;
    let tree = vm.snapshot_tree().await.unwrap();
    assert_eq!(
        tree.current.as_ref().map(|r| r.value.as_str()),
        Some(nested.as_str())
    );
    finish(vm.start_revert_to_current_snapshot(false).await).await;
    finish(vm.start_revert_to_snapshot("db", false).await).await;

    // Remove one: its children move up to its parent.
    finish(vm.start_remove_snapshot("base", RemoveOptions::one()).await).await;
    assert_eq!(
        shape(&vm).await,
        [
            format!("app {app}"),
            format!("app/app {nested}"),
            format!("db {db} *"),
        ]
    );
    // Remove a subtree, by id (its name and path are ambiguous now).
    let err = vm
        .start_remove_snapshot("app", RemoveOptions::subtree())
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err}");
    finish(
        vm.start_remove_snapshot(&app, RemoveOptions::subtree())
            .await,
    )
    .await;
    assert_eq!(shape(&vm).await, [format!("db {db} *")]);
    let gone = client
        .properties::<mo::VirtualMachineSnapshot>(&["vm"])
        .unwrap()
        .get(&vsphere_client::types::ManagedObjectReference::new(
            "VirtualMachineSnapshot",
            app.clone(),
        ))
        .await;
    assert!(gone.is_err(), "the removed snapshot still exists: {gone:?}");

    // Remove all; then there is no current snapshot to revert to.
    snapshot(&vm, SnapshotSpec::new("last")).await;
    finish(vm.start_remove_all_snapshots(true).await).await;
    let tree = vm.snapshot_tree().await.unwrap();
    assert!(tree.is_empty() && tree.current.is_none(), "{tree:?}");
    let err = vm
        .start_revert_to_current_snapshot(false)
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("NotFound") || err.kind() == ErrorKind::Fault,
        "{err}"
    );
    let err = vm
        .start_remove_snapshot("db", RemoveOptions::one())
        .await
        .unwrap_err();
    assert!(err.to_string().contains("no snapshots"), "{err}");
}

#[tokio::test]
async fn a_snapshot_handle_removes_by_reference() {
    let sim = simulator().await;
    let (_client, vm) = vm_named(&sim, "DC0_H0_VM1").await;
    let created = snapshot(&vm, SnapshotSpec::new("one")).await;
    let handle = vm.find_snapshot(&created).await.unwrap();
    assert_eq!(handle.reference().value, created);
    finish(
        handle
            .start_remove(RemoveOptions::one().consolidate(false))
            .await,
    )
    .await;
    assert!(vm.snapshot_tree().await.unwrap().is_empty());
    // Removing it again: the server no longer knows it.
    let err = handle.start_remove(RemoveOptions::one()).await.unwrap_err();
    assert!(err.to_string().contains("ManagedObjectNotFound"), "{err}");
}
