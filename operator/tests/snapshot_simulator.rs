//! VMSnapshots against the simulator, through `check --apply`'s functions
//! and the provider role's snapshot driver: each VMSnapshot is one vCenter
//! snapshot (found by its description's line, never taken twice, a crash
//! after the request included), a revert happens once per request, delete
//! removes it, and a VirtualMachine's retention keeps exactly N and leaves a
//! snapshot made by hand alone.

use std::time::{Duration, Instant};

use banlieue::api::{revert_state, VMSnapshot};
use banlieue::check::{self, parse_documents, World};
use banlieue::conditions;
use banlieue::controllers::vmsnapshot::driver::{self, Checkpoint, Hooks, Outcome};
use banlieue::controllers::vmsnapshot::{step, vm_of};
use banlieue::vsphere::vcenter::VCenter;
use banlieue::vsphere::VSphere;
use vsphere_client::types::ManagedObjectReference;
use vsphere_client::vm::snapshot::{SnapshotSpec, SnapshotTree};
use vsphere_client::Client;
use vsphere_tests::{Simulator, SimulatorOptions, Template};

const PASSWORD: &str = "s3cret-Pw";

async fn simulator() -> Simulator {
    let options = SimulatorOptions {
        password: PASSWORD.into(),
        templates: vec![Template::everywhere("golden")],
        hosts_per_cluster: 1,
        standalone_hosts: 0,
        vms: 1,
        ..Default::default()
    };
    tokio::task::spawn_blocking(move || Simulator::start(options))
        .await
        .expect("simulator start task")
        .unwrap_or_else(|e| panic!("simulator: {e}"))
}

/// A Provider, a small class, an image, VirtualMachine `team-a/web` keeping
/// its last 2 snapshots.
fn manifests(sim: &Simulator) -> String {
    format!(
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
apiVersion: banlieue.io/v1alpha1
kind: VMClass
metadata: {{ name: small }}
spec:
  hardware:
    cpus: 1
    memoryMiB: 256
    disks: [{{ name: root, sizeGiB: 1, storageClass: gold }}]
  network:
    interfaces: [{{ name: eth0, networkClass: prod, ipam: {{}} }}]
---
apiVersion: banlieue.io/v1alpha1
kind: VMImage
metadata: {{ name: golden }}
spec:
  sources: [{{ providerClass: vsphere, kind: Template, ref: golden }}]
  template: {{ installMode: deferred }}
---
apiVersion: banlieue.io/v1alpha1
kind: VirtualMachine
metadata: {{ name: web, namespace: team-a }}
spec:
  classRef: {{ name: small }}
  imageRef: {{ name: golden }}
  snapshotRetention: {{ keepLast: 2 }}
---
"#,
        user = sim.username(),
        url = sim.sdk_url()
    )
}

/// VMSnapshots `names` of `team-a/web`.
fn snapshots(names: &[&str]) -> String {
    names
        .iter()
        .map(|name| {
            format!(
                "apiVersion: banlieue.io/v1alpha1\nkind: VMSnapshot\nmetadata: {{ name: {name}, namespace: team-a }}\n\
                 spec: {{ vmRef: {{ name: web }}, description: \"{name} of web\" }}\n---\n"
            )
        })
        .collect()
}

fn add(world: &mut World, text: &str) {
    for doc in parse_documents(text).expect("test manifests") {
        world.add("test", doc);
    }
    assert!(world.rejected.is_empty(), "{:?}", world.rejected);
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

async fn apply(world: &mut World) {
    let vcenter = VCenter::default();
    check::apply(
        world,
        &vcenter,
        Instant::now() + Duration::from_secs(60),
        &conditions::now(),
    )
    .await;
    vcenter.close_all().await;
}

fn vm_ref(world: &World) -> ManagedObjectReference {
    let value = world.machines[0]
        .status
        .as_ref()
        .and_then(|s| s.mo_ref.clone())
        .expect("the VM is made");
    ManagedObjectReference::new("VirtualMachine", value)
}

async fn tree(client: &Client, world: &World) -> SnapshotTree {
    client
        .vm(vm_ref(world))
        .snapshot_tree()
        .await
        .expect("tree")
}

/// The names in the VM's tree, depth first.
async fn names(client: &Client, world: &World) -> Vec<String> {
    tree(client, world)
        .await
        .iter()
        .map(|(_, s)| s.name.clone())
        .collect()
}

fn snapshot<'a>(world: &'a World, name: &str) -> &'a VMSnapshot {
    world
        .snapshots
        .iter()
        .find(|s| s.metadata.name.as_deref() == Some(name))
        .unwrap_or_else(|| panic!("VMSnapshot {name}"))
}

fn ready(s: &VMSnapshot) -> (String, String) {
    s.ready_condition()
        .map(|c| (c.status.clone(), c.reason.clone()))
        .unwrap_or_default()
}

#[tokio::test]
async fn snapshots_taken_once_reverted_once_retained_and_a_hand_made_one_left_alone() {
    let sim = simulator().await;
    let client = connect(&sim).await;
    let mut world = World::default();
    add(&mut world, &manifests(&sim));
    add(&mut world, &snapshots(&["mon"]));
    let vcenter = VCenter::default();
    check::reconcile(&mut world, &vcenter, &conditions::now()).await;
    vcenter.close_all().await;
    apply(&mut world).await;
    let mon = snapshot(&world, "mon");
    assert_eq!(
        ready(mon),
        ("True".into(), "Created".into()),
        "{:?}",
        mon.status
    );
    let status = mon.status.clone().unwrap_or_default();
    let tree_now = tree(&client, &world).await;
    let found = tree_now.find("mon").expect("one snapshot named mon");
    assert_eq!(status.snapshot_id.as_ref(), Some(&found.reference.value));
    assert!(status.creation_time.is_some());
    assert_eq!(
        status.size_bytes,
        tree_now.size(&found.reference),
        "the size vCenter's layout gives"
    );
    assert!(found
        .description
        .starts_with("mon of web\nbanlieue.io/vmsnapshot: team-a/mon"));

    // A snapshot made by hand, then Tuesday's and Wednesday's: the VM keeps
    // its last 2 VMSnapshots, and the hand-made one is not counted or touched.
    client
        .vm(vm_ref(&world))
        .start_create_snapshot(&SnapshotSpec::new("by-hand"))
        .await
        .expect("by hand")
        .wait()
        .await
        .expect("taken");
    add(&mut world, &snapshots(&["tue", "wed"]));
    apply(&mut world).await;
    let kept: Vec<&str> = world
        .snapshots
        .iter()
        .filter_map(|s| s.metadata.name.as_deref())
        .collect();
    assert_eq!(kept, ["tue", "wed"], "mon is past the retention");
    assert_eq!(names(&client, &world).await, ["by-hand", "tue", "wed"]);

    // A re-run takes nothing.
    apply(&mut world).await;
    assert_eq!(names(&client, &world).await, ["by-hand", "tue", "wed"]);

    // Revert to Tuesday's, once per request: another snapshot made by hand
    // after it stays current through a second run with the same request.
    let tue_id = snapshot(&world, "tue")
        .status
        .as_ref()
        .and_then(|s| s.snapshot_id.clone())
        .expect("id");
    for s in &mut world.snapshots {
        if s.metadata.name.as_deref() == Some("tue") {
            s.spec.revert_request = Some("2026-12-06T10:00:00Z".into());
        }
    }
    apply(&mut world).await;
    let last = snapshot(&world, "tue")
        .status
        .as_ref()
        .and_then(|s| s.last_revert.clone())
        .expect("recorded");
    assert_eq!(last.state, revert_state::REVERTED, "{last:?}");
    let current = tree(&client, &world).await.current.map(|r| r.value);
    assert_eq!(current.as_deref(), Some(tue_id.as_str()));
    client
        .vm(vm_ref(&world))
        .start_create_snapshot(&SnapshotSpec::new("after"))
        .await
        .expect("after")
        .wait()
        .await
        .expect("taken");
    apply(&mut world).await;
    let current = tree(&client, &world)
        .await
        .current_snapshot()
        .map(|s| s.name.clone());
    assert_eq!(
        current.as_deref(),
        Some("after"),
        "not reverted a second time"
    );
}

/// Stops at one checkpoint, as a crash would.
struct Crash(Option<Checkpoint>, Option<VMSnapshot>);

impl Hooks for Crash {
    async fn persist(&mut self, snapshot: &VMSnapshot) -> Result<(), banlieue::Error> {
        self.1 = Some(snapshot.clone());
        Ok(())
    }
    fn checkpoint(&mut self, point: Checkpoint) -> Result<(), banlieue::Error> {
        if self.0 == Some(point) {
            return Err(banlieue::Error::Stopped(format!("{point:?}")));
        }
        Ok(())
    }
}

#[tokio::test]
async fn a_crash_after_the_request_leaves_one_snapshot_and_delete_removes_it() {
    let sim = simulator().await;
    let client = connect(&sim).await;
    let mut world = World::default();
    add(&mut world, &manifests(&sim));
    let vcenter = VCenter::default();
    check::reconcile(&mut world, &vcenter, &conditions::now()).await;
    apply(&mut world).await;
    let params =
        banlieue::controllers::provider::readiness::connect_params(&world.providers[0], &world)
            .expect("params");
    let mut s: VMSnapshot = serde_json::from_value(serde_json::json!({
        "apiVersion": "banlieue.io/v1alpha1", "kind": "VMSnapshot",
        "metadata": {"name": "pre-upgrade", "namespace": "team-a", "uid": "0f0e7c1a-1111-4222-8333-944455556666"},
        "spec": {"vmRef": {"name": "web"}, "memory": false, "quiesce": true},
    }))
    .expect("snapshot");
    for point in [Checkpoint::CreateSent, Checkpoint::TaskRecorded] {
        let session = vcenter.connect(&params).await.expect("connect");
        let vm = vm_of(&session, &world.machines[0]).await.expect("vm");
        let mut crash = Crash(Some(point), None);
        let err = driver::reconcile(
            &mut s,
            false,
            vm.as_deref(),
            &session,
            &mut crash,
            &driver::Options::default(),
        )
        .await
        .expect_err("crashed");
        assert!(err.to_string().contains("stopped"), "{err}");
        // A new process, from what was persisted, on a new session.
        vcenter.close_all().await;
        let mut restarted = crash.1.clone().unwrap_or_else(|| s.clone());
        let session = vcenter.connect(&params).await.expect("connect");
        let outcome = driver::reconcile(
            &mut restarted,
            false,
            vm.as_deref(),
            &session,
            &mut Crash(None, None),
            &driver::Options::default(),
        )
        .await
        .expect("restarted");
        assert_eq!(outcome, Outcome::Ready, "{point:?}");
        let marker = step::marker(&s);
        let ours: Vec<String> = tree(&client, &world)
            .await
            .iter()
            .filter(|(_, x)| x.description.lines().any(|l| l == marker))
            .map(|(_, x)| x.reference.value.clone())
            .collect();
        assert_eq!(ours.len(), 1, "{point:?}: exactly one snapshot: {ours:?}");
        assert_eq!(
            restarted
                .status
                .as_ref()
                .and_then(|x| x.snapshot_id.as_ref()),
            Some(&ours[0])
        );

        // Delete: removed, and vCenter confirms it before the finalizer goes.
        let outcome = driver::reconcile(
            &mut restarted,
            true,
            vm.as_deref(),
            &session,
            &mut Crash(None, None),
            &driver::Options::default(),
        )
        .await
        .expect("delete");
        assert_eq!(outcome, Outcome::Released);
        assert!(tree(&client, &world).await.is_empty());
        s.status = None;
    }
    vcenter.close_all().await;
}

/// `banlieue check --apply` on manifests with VMSnapshots: they are taken
/// and listed Ready; a second run finds them and takes none.
#[test]
fn check_apply_twice_takes_each_snapshot_once() {
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let sim = runtime.block_on(simulator());
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(
        dir.path().join("all.yaml"),
        manifests(&sim) + &snapshots(&["mon", "tue"]),
    )
    .expect("write");
    for run in 0..2 {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_banlieue"))
            .args(["check", "--apply", "--timeout", "60s", "-f"])
            .arg(dir.path())
            .output()
            .expect("run banlieue");
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "run {run}:\n{stdout}\n{stderr}");
        assert!(
            stderr.contains("2 VMSnapshot(s), 2 Ready -> PASS"),
            "{stderr}"
        );
        let mon = stdout
            .lines()
            .find(|l| l.starts_with("team-a/mon"))
            .unwrap_or_default();
        assert!(
            mon.contains("snapshot-") && mon.contains("Created"),
            "{stdout}"
        );
        assert_eq!(
            stderr.contains("Snapshotting"),
            run == 0,
            "run {run} takes snapshots only the first time: {stderr}"
        );
    }
}
