//! The operator under faults, through `banlieue check --apply` (the
//! lifecycle's one-shot mode) against the simulator:
//!
//! - the vCenter dies while the operator clones: the run ends (no hang) with
//!   the VirtualMachines not Ready and the cause shown (the cut clone may
//!   have run); once it is back, a new run makes every VirtualMachine Ready
//!   with exactly one VM each;
//! - the operator dies (SIGKILL) while vCenter clones: the next run finds
//!   the clone by its instance UUID and makes no second VM.
//!
//! The simulator loses its inventory on restart, so a duplicate across a
//! vCenter restart cannot be staged with it; the second test is the one that
//! would catch a duplicate.

use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use vsphere_client::{mo, Client};
use vsphere_tests::{banlieue_binary, ServerTls, Simulator, SimulatorOptions, Template};

const PASSWORD: &str = "Fault-Pw-91e2";
const MACHINES: [&str; 2] = ["web-1", "web-2"];

fn options(clone_delay: Duration) -> SimulatorOptions {
    SimulatorOptions {
        tls: ServerTls::Plain,
        password: PASSWORD.into(),
        templates: vec![Template::everywhere("golden")],
        hosts_per_cluster: 1,
        standalone_hosts: 0,
        // The launcher makes the template from a VM of the model.
        vms: 1,
        trace: true,
        method_delays: vec![("CloneVM_Task".into(), clone_delay)],
        ..Default::default()
    }
}

/// Credentials, a Provider, a small class, an image in deferred install
/// mode (Ready once on: no guest agent needed) and two VirtualMachines.
fn manifests(sim: &Simulator) -> String {
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
  connection:
    endpoint: "{url}"
    credentialsRef: {{ name: vsphere-creds }}
  capabilities:
    storageClasses:
      - {{ name: gold, target: {{ datastore: LocalDS_0 }} }}
    networkClasses:
      - {{ name: prod, target: {{ portGroup: DC0_DVPG0 }} }}
---
apiVersion: banlieue.io/v1alpha1
kind: VMClass
metadata: {{ name: web }}
spec:
  hardware:
    cpus: 2
    memoryMiB: 2048
    disks:
      - {{ name: root, sizeGiB: 10, storageClass: gold, provisioning: thin }}
  network:
    interfaces:
      - {{ name: eth0, networkClass: prod, ipam: {{}} }}
---
apiVersion: banlieue.io/v1alpha1
kind: VMImage
metadata: {{ name: golden }}
spec:
  guestAgent: open-vm-tools
  sources: [{{ providerClass: vsphere, kind: Template, ref: golden }}]
  template: {{ installMode: deferred }}
---
"#,
        user = sim.username(),
        url = sim.sdk_url()
    );
    for name in MACHINES {
        text.push_str(&format!(
            "apiVersion: banlieue.io/v1alpha1\nkind: VirtualMachine\nmetadata: {{ name: {name}, namespace: team-a }}\n\
             spec: {{ classRef: {{ name: web }}, imageRef: {{ name: golden }}, desiredPowerState: PoweredOn }}\n---\n"
        ));
    }
    text
}

fn check_apply(dir: &std::path::Path, timeout: &str) -> Command {
    let mut command = Command::new(banlieue_binary());
    command
        .args(["check", "--apply", "--timeout", timeout, "-f"])
        .arg(dir)
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    command
}

/// Waits for `child` to exit, at most `limit` (then kills it and fails).
fn wait_bounded(mut child: Child, limit: Duration) -> Output {
    let deadline = Instant::now() + limit;
    loop {
        match child.try_wait() {
            Ok(Some(_)) => return child.wait_with_output().expect("output"),
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(50)),
            _ => {
                let _ = child.kill();
                let out = child.wait_with_output().expect("output");
                panic!(
                    "banlieue check --apply hung for {limit:?}:\n{}\n{}",
                    String::from_utf8_lossy(&out.stdout),
                    String::from_utf8_lossy(&out.stderr)
                );
            }
        }
    }
}

/// Blocks until the simulator has received a CloneVM_Task request.
fn wait_for_clone_request(sim: &Simulator) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while clone_requests(sim) == 0 {
        assert!(
            Instant::now() < deadline,
            "no clone was started:\n{}",
            sim.log()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// CloneVM_Task requests the simulator received (its trace log has each
/// request on one `Request:` line; responses do not count).
fn clone_requests(sim: &Simulator) -> usize {
    sim.log()
        .lines()
        .filter(|l| l.starts_with("Request:") && l.contains("<CloneVM_Task "))
        .count()
}

/// The simulator's VMs named `team-a-*`, sorted, with their instance UUIDs.
fn team_vms(runtime: &tokio::runtime::Runtime, sim: &Simulator) -> Vec<(String, String)> {
    runtime.block_on(async {
        let client = Client::builder(&sim.sdk_url())
            .credentials(sim.username(), sim.password())
            .keepalive(None)
            .connect()
            .await
            .expect("connect");
        let root = client.service_content().root_folder.clone();
        let mut vms: Vec<(String, String)> = client
            .properties::<mo::VirtualMachine>(&["name", "config.instanceUuid"])
            .expect("paths")
            .in_container(&root)
            .collect_all()
            .await
            .expect("VMs")
            .into_iter()
            .filter_map(|vm| {
                let name = vm.name.filter(|n| n.starts_with("team-a-"))?;
                let uuid = vm.config.and_then(|c| c.instance_uuid).unwrap_or_default();
                Some((name, uuid))
            })
            .collect();
        vms.sort();
        let _ = client.close().await;
        vms
    })
}

fn text(out: &Output) -> String {
    format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Every VirtualMachine Ready, one VM each with distinct instance UUIDs.
fn assert_converged(runtime: &tokio::runtime::Runtime, sim: &Simulator, out: &Output) {
    let all = text(out);
    assert!(out.status.success(), "{all}");
    assert!(
        all.contains("2 VirtualMachine(s), 2 scheduled, 2 Ready"),
        "{all}"
    );
    let vms = team_vms(runtime, sim);
    let names: Vec<&str> = vms.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        ["team-a-web-1", "team-a-web-2"],
        "one VM per VirtualMachine"
    );
    assert!(vms.iter().all(|(_, uuid)| !uuid.is_empty()));
    assert_ne!(vms[0].1, vms[1].1);
}

#[test]
fn vcenter_dies_mid_clone_then_a_new_run_converges() {
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let mut sim = Simulator::start(options(Duration::from_secs(3))).expect("simulator");
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("all.yaml"), manifests(&sim)).expect("write");

    let child = check_apply(dir.path(), "8s").spawn().expect("run banlieue");
    wait_for_clone_request(&sim);
    sim.kill();
    // The run ends (it does not hang) and fails: no VirtualMachine Ready.
    let out = wait_bounded(child, Duration::from_secs(60));
    let all = text(&out);
    assert_eq!(out.status.code(), Some(1), "{all}");
    assert!(
        all.contains("2 VirtualMachine(s), 2 scheduled, 0 Ready"),
        "{all}"
    );
    // The cause is shown: the cut clone, which may have run.
    assert!(
        all.contains("CloneVM_Task") && all.contains("the request may have reached the server"),
        "{all}"
    );
    assert!(!all.contains(PASSWORD));

    // Back (a fresh inventory), without the delay: the next run converges.
    sim.options_mut().method_delays.clear();
    sim.restart().expect("restart");
    let out = wait_bounded(
        check_apply(dir.path(), "60s")
            .spawn()
            .expect("run banlieue"),
        Duration::from_secs(90),
    );
    assert_converged(&runtime, &sim, &out);
}

#[test]
fn the_operator_dies_mid_clone_and_the_next_run_makes_no_second_vm() {
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let clone_delay = Duration::from_secs(2);
    let sim = Simulator::start(options(clone_delay)).expect("simulator");
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("all.yaml"), manifests(&sim)).expect("write");

    // SIGKILL while vCenter holds the first clone request.
    let mut child = check_apply(dir.path(), "60s")
        .spawn()
        .expect("run banlieue");
    wait_for_clone_request(&sim);
    child.kill().expect("kill banlieue");
    let _ = child.wait();
    // vCenter finishes that clone on its own.
    let deadline = Instant::now() + Duration::from_secs(30);
    while team_vms(&runtime, &sim).is_empty() {
        assert!(Instant::now() < deadline, "the clone never finished");
        std::thread::sleep(Duration::from_millis(200));
    }
    let clones_before = clone_requests(&sim);
    assert_eq!(
        clones_before, 1,
        "one clone was under way when the operator died"
    );

    let out = wait_bounded(
        check_apply(dir.path(), "60s")
            .spawn()
            .expect("run banlieue"),
        Duration::from_secs(90),
    );
    assert_converged(&runtime, &sim, &out);
    assert_eq!(
        clone_requests(&sim),
        clones_before + 1,
        "only the VM that was never started is cloned: {}",
        text(&out)
    );
}
