//! The VMSnapshot controller against a mocked API server (tower-test) and
//! the scripted vCenter: the finalizer first, the owner reference, status
//! patches (the task before the wait), a delete that keeps the finalizer
//! until vCenter confirms the snapshot gone, and retention.

use std::sync::Arc;

use kube::runtime::controller::Action;
use serde_json::{json, Value};

use super::driver::{self, Hooks};
use super::step::{self, tests::snapshot};
use super::{reconcile_snapshot, FINALIZER};
use crate::api::{VMSnapshot, VSphereMachineStatus};
use crate::fixtures;
use crate::fixtures::provider::{credentials, serving_all_with, Seen, World, RESYNC};
use crate::vsphere;
use crate::vsphere::mock::{MockMachines, MockVSphere, Script};
use crate::vsphere::{CloneRequest, Machines};

const SNAPSHOTS: &str = "/apis/banlieue.io/v1alpha1/namespaces/ns/vmsnapshots";
const VM: &str = "/apis/banlieue.io/v1alpha1/namespaces/ns/virtualmachines/web";

/// A vCenter with the VM of machine `ns/web` (returned: its reference).
async fn vcenter() -> (MockVSphere, MockMachines, String) {
    let machines = MockMachines::new();
    let task = machines
        .start_clone(&CloneRequest {
            name: "ns-web".into(),
            instance_uuid: "u-web".into(),
            ..Default::default()
        })
        .await
        .expect("clone");
    machines.finish(&task);
    let vm = machines.vms()[0].mo_ref.clone();
    let vsphere = MockVSphere::new(Script {
        password: Some("REPLACE-ME".into()),
        machines: machines.clone(),
        ..Default::default()
    });
    (vsphere, machines, vm)
}

/// The Provider, its credentials, and machine `ns/web` (owned by
/// VirtualMachine `web`) with its VM cloned as `vm`.
fn world(vm: &str) -> World {
    let mut machine = fixtures::machine("web");
    machine.metadata.owner_references = Some(vec![serde_json::from_value(json!({
        "apiVersion": "banlieue.io/v1alpha1", "kind": "VirtualMachine", "name": "web",
        "uid": "uid-vm-web", "controller": true}))
    .expect("owner")]);
    machine.status = Some(VSphereMachineStatus {
        instance_uuid: Some("u-web".into()),
        mo_ref: Some(vm.into()),
        ..Default::default()
    });
    World {
        providers: vec![fixtures::provider(
            "vc",
            json!({}),
            fixtures::guide_capabilities(),
        )],
        machines: vec![machine],
        secrets: vec![credentials("REPLACE-ME")],
        ..Default::default()
    }
}

fn with_finalizer(mut s: VMSnapshot) -> VMSnapshot {
    s.metadata.finalizers = Some(vec![FINALIZER.to_string()]);
    s
}

/// The VirtualMachine `ns/web`, with `retention` (JSON) when given.
fn virtual_machine(retention: Option<Value>) -> Value {
    let mut vm = json!({
        "apiVersion": "banlieue.io/v1alpha1", "kind": "VirtualMachine",
        "metadata": {"name": "web", "namespace": "ns", "uid": "uid-vm-web"},
        "spec": {"classRef": {"name": "c"}, "imageRef": {"name": "i"}},
    });
    if let Some(r) = retention {
        vm["spec"]["snapshotRetention"] = r;
    }
    vm
}

/// One reconcile of `s` while the API server answers everything: the
/// VirtualMachine is `vm`, the namespace's VMSnapshots are `listed`.
async fn reconcile(
    s: VMSnapshot,
    vsphere: &MockVSphere,
    world: World,
    vm: Value,
    listed: Vec<VMSnapshot>,
) -> (crate::Result<Action>, Seen) {
    let (ctx, server) = world.context(vsphere.clone());
    let object = serde_json::to_value(&s).unwrap_or_default();
    let list = json!({"apiVersion": "banlieue.io/v1alpha1", "kind": "VMSnapshotList",
                      "metadata": {}, "items": listed});
    let answer = move |method: &str, path: &str| match (method, path) {
        ("GET", VM) => Some(vm.clone()),
        ("GET", SNAPSHOTS) => Some(list.clone()),
        ("DELETE", p) if p.starts_with(SNAPSHOTS) => {
            Some(json!({"kind": "Status", "apiVersion": "v1", "status": "Success"}))
        }
        _ => None,
    };
    serving_all_with(
        ctx.clone(),
        server,
        object,
        answer,
        reconcile_snapshot(Arc::new(s), ctx),
    )
    .await
}

fn requests<'a>(seen: &'a Seen, method: &str, path: &str) -> Vec<&'a Value> {
    seen.iter()
        .filter(|(m, p, _, _)| m == method && p == path)
        .map(|(_, _, _, b)| b)
        .collect()
}

fn status_patches<'a>(seen: &'a Seen, name: &str) -> Vec<&'a Value> {
    requests(seen, "PATCH", &format!("{SNAPSHOTS}/{name}/status"))
        .into_iter()
        .map(|b| &b["status"])
        .collect()
}

fn finalizer_patches<'a>(seen: &'a Seen, name: &str) -> Vec<&'a Value> {
    seen.iter()
        .filter(|(m, p, t, _)| {
            m == "PATCH" && p == &format!("{SNAPSHOTS}/{name}") && t.contains("json-patch")
        })
        .map(|(_, _, _, b)| b)
        .collect()
}

#[tokio::test]
async fn a_new_snapshot_gets_the_finalizer_before_anything_else() {
    let (vsphere, machines, vm) = vcenter().await;
    let (result, seen) = reconcile(
        snapshot("a"),
        &vsphere,
        world(&vm),
        virtual_machine(None),
        vec![],
    )
    .await;
    assert_eq!(result.expect("reconcile"), Action::await_change());
    assert_eq!(finalizer_patches(&seen, "a").len(), 1, "{seen:?}");
    assert_eq!(seen.len(), 1, "nothing but the finalizer: {seen:?}");
    assert!(vsphere.connects().is_empty());
    assert!(machines.snapshots_of(&vm).is_empty());
}

#[tokio::test]
async fn create_is_ready_with_the_snapshot_id_and_owned_by_the_virtual_machine() {
    let (vsphere, machines, vm) = vcenter().await;
    let (result, seen) = reconcile(
        with_finalizer(snapshot("a")),
        &vsphere,
        world(&vm),
        virtual_machine(None),
        vec![],
    )
    .await;
    assert_eq!(
        result.expect("reconcile"),
        Action::requeue(RESYNC),
        "{seen:?}"
    );
    let taken = machines.snapshots_of(&vm);
    assert_eq!(taken.len(), 1);
    // Owned by the VirtualMachine, so deleting it garbage-collects the snapshot.
    let merges: Vec<&Value> = seen
        .iter()
        .filter(|(m, p, t, _)| {
            m == "PATCH" && p == &format!("{SNAPSHOTS}/a") && t.contains("merge")
        })
        .map(|(_, _, _, b)| b)
        .collect();
    assert_eq!(merges.len(), 1, "{seen:?}");
    assert_eq!(
        merges[0]["metadata"]["ownerReferences"],
        json!([{"apiVersion": "banlieue.io/v1alpha1", "kind": "VirtualMachine", "name": "web", "uid": "uid-vm-web"}])
    );
    let patches = status_patches(&seen, "a");
    assert_eq!(
        patches[0]["conditions"][0]["reason"], "Creating",
        "{seen:?}"
    );
    assert!(
        patches
            .iter()
            .any(|p| p["task"]["operation"] == "createSnapshot"),
        "the task is recorded before it is waited for: {patches:?}"
    );
    let last = patches.last().copied().unwrap_or(&Value::Null);
    assert_eq!(last["conditions"][0]["status"], "True");
    assert_eq!(last["conditions"][0]["reason"], "Created");
    assert_eq!(last["snapshotID"], json!(taken[0].mo_ref));
    assert_eq!(last["vmMoRef"], json!(vm));
    assert!(
        last["creationTime"]
            .as_str()
            .is_some_and(|t| t.starts_with("2026-12-01T")),
        "{last}"
    );
    assert_eq!(last["sizeBytes"], 4096);
    assert!(last.get("task").is_none());
    assert!(taken[0].description.contains(&step::marker(&snapshot("a"))));
}

#[tokio::test]
async fn a_snapshot_of_a_virtual_machine_not_cloned_yet_waits() {
    let (vsphere, _, vm) = vcenter().await;
    let mut w = world(&vm);
    w.machines[0].status = None;
    let (result, seen) = reconcile(
        with_finalizer(snapshot("a")),
        &vsphere,
        w,
        virtual_machine(None),
        vec![],
    )
    .await;
    assert_eq!(
        result.expect("reconcile"),
        Action::requeue(super::WAITING_RECHECK)
    );
    let last = status_patches(&seen, "a")
        .last()
        .copied()
        .cloned()
        .unwrap_or_default();
    assert_eq!(last["conditions"][0]["reason"], "WaitingForVM");
    assert!(vsphere.connects().is_empty());
}

/// Records nothing: to set a snapshot up in the mock before a controller test.
struct Quiet;

impl Hooks for Quiet {
    async fn persist(&mut self, _snapshot: &VMSnapshot) -> Result<(), crate::Error> {
        Ok(())
    }
}

/// `name` taken on `vm` (through the driver), as the API server would hold it.
async fn taken(name: &str, vm: &str, machines: &MockMachines) -> VMSnapshot {
    let mut s = with_finalizer(snapshot(name));
    let outcome = driver::reconcile(
        &mut s,
        false,
        Some(vm),
        machines,
        &mut Quiet,
        &driver::Options::default(),
    )
    .await
    .expect("taken");
    assert_eq!(outcome, driver::Outcome::Ready);
    s
}

#[tokio::test]
async fn delete_removes_the_snapshot_and_a_fault_keeps_the_finalizer() {
    let (vsphere, machines, vm) = vcenter().await;
    let hand_made = machines.add_snapshot(&vm, "a", "made by hand");
    let mut s = taken("a", &vm, &machines).await;
    s.metadata.deletion_timestamp = Some(crate::conditions::now());

    machines.fail_next(
        "removeSnapshot",
        vsphere::Error::fault("NotAuthenticated", "the session is gone"),
    );
    let (result, seen) = reconcile(
        s.clone(),
        &vsphere,
        world(&vm),
        virtual_machine(None),
        vec![],
    )
    .await;
    assert_eq!(result.expect_err("kept").label(), "vsphere_operation");
    assert!(
        finalizer_patches(&seen, "a").is_empty(),
        "the finalizer stays: {seen:?}"
    );
    assert_eq!(machines.snapshots_of(&vm).len(), 2);

    // The retry removes it, then the finalizer; the hand-made one stays.
    let (result, seen) = reconcile(s, &vsphere, world(&vm), virtual_machine(None), vec![]).await;
    assert_eq!(result.expect("released"), Action::await_change());
    let patches = finalizer_patches(&seen, "a");
    assert_eq!(patches.len(), 1, "{seen:?}");
    assert!(patches[0].to_string().contains("remove"), "{}", patches[0]);
    let left: Vec<String> = machines
        .snapshots_of(&vm)
        .into_iter()
        .map(|f| f.mo_ref)
        .collect();
    assert_eq!(left, [hand_made]);
}

#[tokio::test]
async fn a_snapshot_whose_virtual_machine_is_gone_is_released() {
    let (vsphere, machines, vm) = vcenter().await;
    let mut s = taken("a", &vm, &machines).await;
    s.metadata.deletion_timestamp = Some(crate::conditions::now());
    // The machine is gone (its finalizer saw the VM, and its snapshots, destroyed).
    let mut w = world(&vm);
    w.machines.clear();
    let (result, seen) = reconcile(s, &vsphere, w, virtual_machine(None), vec![]).await;
    assert_eq!(result.expect("released"), Action::await_change());
    assert_eq!(finalizer_patches(&seen, "a").len(), 1);
    assert!(vsphere.connects().is_empty());
}

#[tokio::test]
async fn retention_keeps_exactly_n_and_leaves_a_hand_made_snapshot_alone() {
    let (vsphere, machines, vm) = vcenter().await;
    let hand_made = machines.add_snapshot(&vm, "weekly", "made by hand");
    let mut existing = Vec::new();
    for name in ["mon", "tue", "wed", "thu"] {
        existing.push(taken(name, &vm, &machines).await);
    }
    // A reconcile of a Ready one applies the VM's retention: keep the last 2.
    let retention = Some(json!({"keepLast": 2}));
    let (result, seen) = reconcile(
        existing[3].clone(),
        &vsphere,
        world(&vm),
        virtual_machine(retention.clone()),
        existing.clone(),
    )
    .await;
    assert_eq!(result.expect("reconcile"), Action::requeue(RESYNC));
    let deleted: Vec<String> = seen
        .iter()
        .filter(|(m, _, _, _)| m == "DELETE")
        .map(|(_, p, _, _)| p.trim_start_matches(&format!("{SNAPSHOTS}/")).to_string())
        .collect();
    assert_eq!(deleted, ["mon", "tue"], "{seen:?}");
    assert_eq!(machines.calls("createSnapshot"), 4, "nothing taken again");
    // Each deleted object's own reconcile removes its vCenter snapshot.
    for mut gone in existing.drain(..2) {
        gone.metadata.deletion_timestamp = Some(crate::conditions::now());
        let (result, _) = reconcile(
            gone,
            &vsphere,
            world(&vm),
            virtual_machine(retention.clone()),
            vec![],
        )
        .await;
        assert_eq!(result.expect("removed"), Action::await_change());
    }
    let left: Vec<String> = machines
        .snapshots_of(&vm)
        .into_iter()
        .map(|f| f.name)
        .collect();
    assert_eq!(left, ["weekly", "wed", "thu"]);
    assert!(machines
        .snapshots_of(&vm)
        .iter()
        .any(|f| f.mo_ref == hand_made));
}
