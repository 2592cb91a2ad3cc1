//! The operator in cluster mode, end to end: the real `banlieue controller` and
//! `banlieue provider vsphere` binaries as processes, against the Kubernetes API
//! emulator (`tests/kube-emulator/`) and the vCenter simulator, with the guide's
//! manifests (Secret, Provider, VMClass, VMImage, two VirtualMachines) plus a
//! Provider whose Secret does not exist.
//!
//! Asserted as a user would see it through the API: the Provider Ready with its
//! failure domain, the broken one saying why (status and a warn line), the VMImage
//! ready on the Provider, both VirtualMachines scheduled, their VSphereMachines
//! created with the finalizer, the VMs cloned with the class's shape and powered on
//! in vCenter, the VSphereMachine's status mirrored to its VirtualMachine; the
//! provider killed while a clone runs and started again makes no second VM; deleting
//! a VirtualMachine destroys its VM and releases the finalizer.

use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use vsphere_client::{mo, Client};
use vsphere_tests::{banlieue_binary, KubeEmulator, Simulator, SimulatorOptions, Template, TestCa};

const PASSWORD: &str = "Cluster-Pw-7f3a";
const NS: &str = "banlieue-system";
const VMS: [&str; 2] = ["db-prod-01", "db-prod-02"];
/// How long the simulator takes over each clone: long enough to kill the provider
/// while one runs.
const CLONE_DELAY: Duration = Duration::from_secs(3);
/// Each step's limit (the whole flow takes well under a minute when it works).
const STEP: Duration = Duration::from_secs(90);
const BANLIEUE: &str = "/apis/banlieue.io/v1alpha1";
/// The roles' lease duration here (renewed every 3 s; the emulator is slow under load).
const LEASE: &str = "6s";

fn manifests(sim: &Simulator, ca: &TestCa) -> String {
    let ca_pem: String = ca
        .ca_pem()
        .lines()
        .map(|l| format!("        {l}\n"))
        .collect();
    let mut text = format!(
        r#"apiVersion: v1
kind: Secret
metadata: {{ name: vsphere-creds, namespace: {NS} }}
stringData: {{ username: "{user}", password: "{PASSWORD}" }}
---
apiVersion: banlieue.io/v1alpha1
kind: Provider
metadata:
  name: prod-vsphere
  namespace: {NS}
  labels: {{ dc: dc1, env: prod }}
spec:
  providerClassRef: {{ name: vsphere }}
  connection:
    endpoint: "{url}"
    credentialsRef: {{ name: vsphere-creds }}
    caBundle:
      inline: |
{ca_pem}  capabilities:
    storageClasses:
      - {{ name: gold, target: {{ datastore: LocalDS_0 }} }}
    networkClasses:
      - {{ name: prod, target: {{ portGroup: DC0_DVPG0 }} }}
    features: [hotAddCPU, hotAddMemory, efiSecureBoot]
  failureDomainNameOverrides:
    - {{ datacenter: DC0, cluster: DC0_C0, name: dc0-compute }}
---
apiVersion: banlieue.io/v1alpha1
kind: Provider
metadata:
  name: staging-vsphere
  namespace: {NS}
  labels: {{ env: staging }}
spec:
  providerClassRef: {{ name: vsphere }}
  connection:
    endpoint: "{url}"
    credentialsRef: {{ name: staging-creds }}
  capabilities:
    storageClasses:
      - {{ name: gold, target: {{ datastore: LocalDS_0 }} }}
---
apiVersion: banlieue.io/v1alpha1
kind: VMClass
metadata: {{ name: db-prod-large }}
spec:
  hardware:
    cpus: 8
    memoryMiB: 32768
    disks:
      - {{ name: root, sizeGiB: 80, storageClass: gold, provisioning: thin }}
      - {{ name: data, sizeGiB: 500, storageClass: gold, provisioning: eagerZeroed }}
  network:
    interfaces:
      - {{ name: eth0, networkClass: prod, ipam: {{}} }}
  firmware: efi-secure
  features: [hotAddCPU, hotAddMemory, efiSecureBoot]
---
apiVersion: banlieue.io/v1alpha1
kind: VMImage
metadata: {{ name: ubuntu-22.04-cloudinit }}
spec:
  osFamily: linux
  osDistribution: ubuntu
  osVersion: "22.04"
  architecture: amd64
  guestAgent: cloud-init
  sources:
    - {{ providerClass: vsphere, kind: Template, ref: golden }}
"#,
        user = sim.username(),
        url = sim.sdk_url()
    );
    for name in VMS {
        text.push_str(&format!(
            r"---
apiVersion: banlieue.io/v1alpha1
kind: VirtualMachine
metadata: {{ name: {name}, namespace: {NS}, labels: {{ app: db-prod }} }}
spec:
  classRef: {{ name: db-prod-large }}
  imageRef: {{ name: ubuntu-22.04-cloudinit }}
  placement:
    providerSelector:
      matchLabels: {{ dc: dc1, env: prod }}
  desiredPowerState: PoweredOn
"
        ));
    }
    text
}

/// One of the two roles, its output in a log file.
struct Role {
    child: Child,
    log: PathBuf,
}

impl Role {
    fn start(args: &[&str], kubeconfig: &Path, log: PathBuf) -> Role {
        let out = File::create(&log).expect("role log");
        let child = Command::new(banlieue_binary())
            .args(args)
            .args(["--health-addr", "127.0.0.1:0"])
            .env("KUBECONFIG", kubeconfig)
            // Leader election on, as in a cluster, with short Leases: a role
            // started again after a kill takes its Lease within 7 s.
            .env("BANLIEUE_LEASE_DURATION", LEASE)
            .env("BANLIEUE_LEASE_GRACE", "3s")
            .env("RUST_LOG", "info")
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(out.try_clone().expect("log"))
            .stderr(out)
            .spawn()
            .expect("start banlieue");
        Role { child, log }
    }

    fn log(&self) -> String {
        fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// SIGKILL: no shutdown, no logout, whatever it was doing is cut.
    fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Role {
    fn drop(&mut self) {
        self.kill();
    }
}

struct Harness {
    http: reqwest::Client,
    api: KubeEmulator,
    sim: Simulator,
    vcenter: Client,
    controller: Role,
    provider: Role,
    /// Logs of provider processes killed on purpose.
    earlier_providers: Vec<String>,
    dir: PathBuf,
    kubeconfig: PathBuf,
}

impl Harness {
    async fn get(&self, path: &str) -> Option<Value> {
        let response = self
            .http
            .get(format!("{}{path}", self.api.url()))
            .send()
            .await
            .unwrap_or_else(|e| self.fail(&format!("GET {path}: {e}")));
        if response.status() == reqwest::StatusCode::NOT_FOUND {
            return None;
        }
        let status = response.status();
        let bytes = response
            .bytes()
            .await
            .unwrap_or_else(|e| self.fail(&format!("GET {path}: body: {e}")));
        let body: Value = serde_json::from_slice(&bytes)
            .unwrap_or_else(|e| self.fail(&format!("GET {path}: body: {e}")));
        if !status.is_success() {
            self.fail(&format!("GET {path}: {status}: {body}"));
        }
        Some(body)
    }

    async fn post(&self, path: &str, body: &Value) {
        let response = self
            .http
            .post(format!("{}{path}", self.api.url()))
            .header("content-type", "application/json")
            .body(body.to_string())
            .send()
            .await
            .unwrap_or_else(|e| self.fail(&format!("POST {path}: {e}")));
        if !response.status().is_success() {
            self.fail(&format!("POST {path}: {}", response.status()));
        }
    }

    async fn delete(&self, path: &str) {
        let response = self
            .http
            .delete(format!("{}{path}", self.api.url()))
            .send()
            .await
            .unwrap_or_else(|e| self.fail(&format!("DELETE {path}: {e}")));
        if !response.status().is_success() {
            self.fail(&format!("DELETE {path}: {}", response.status()));
        }
    }

    /// Polls `probe` until it returns Some, for at most [`STEP`]; fails naming `what`
    /// with the last value seen and every log.
    async fn eventually<T, F, Fut>(&self, what: &str, mut probe: F) -> T
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = Result<T, String>>,
    {
        let deadline = Instant::now() + STEP;
        loop {
            match probe().await {
                Ok(v) => return v,
                Err(last) if Instant::now() >= deadline => {
                    self.fail(&format!("{what}: not within {STEP:?}; last seen: {last}"))
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
            }
        }
    }

    fn logs(&self) -> String {
        let tail = |text: &str| {
            let lines: Vec<&str> = text.lines().collect();
            lines[lines.len().saturating_sub(60)..].join("\n")
        };
        let mut out = String::new();
        for (i, log) in self.earlier_providers.iter().enumerate() {
            out += &format!("\n--- provider (run {}, killed) ---\n{}", i + 1, tail(log));
        }
        out += &format!("\n--- provider ---\n{}", tail(&self.provider.log()));
        out += &format!("\n--- controller ---\n{}", tail(&self.controller.log()));
        out += &format!("\n--- emulator ---\n{}", tail(&self.api.log()));
        out
    }

    fn fail(&self, message: &str) -> ! {
        panic!("{message}\n{}", self.logs())
    }

    fn start_provider(&self, run: usize) -> Role {
        Role::start(
            &["provider", "vsphere", "--namespace", NS],
            &self.kubeconfig,
            self.dir.join(format!("provider-{run}.log")),
        )
    }

    /// The simulator's VMs named `banlieue-system-db-prod-*`: (name, instance UUID,
    /// power state, CPUs, memory MiB), sorted.
    async fn cloned_vms(&self) -> Vec<(String, String, String, i32, i32)> {
        let root = self.vcenter.service_content().root_folder.clone();
        let vms = self
            .vcenter
            .properties::<mo::VirtualMachine>(&[
                "name",
                "config.instanceUuid",
                "config.hardware",
                "runtime.powerState",
            ])
            .expect("paths")
            .in_container(&root)
            .collect_all()
            .await
            .unwrap_or_else(|e| self.fail(&format!("listing the simulator's VMs: {e}")));
        let mut out: Vec<_> = vms
            .into_iter()
            .filter_map(|vm| {
                let name = vm
                    .name
                    .filter(|n| n.starts_with("banlieue-system-db-prod-"))?;
                let config = vm.config.unwrap_or_default();
                let hardware = config.hardware;
                let power = vm
                    .runtime
                    .map(|r| r.power_state.as_str().to_string())
                    .unwrap_or_default();
                Some((
                    name,
                    config.instance_uuid.unwrap_or_default(),
                    power,
                    hardware.num_cpu,
                    hardware.memory_mb,
                ))
            })
            .collect();
        out.sort();
        out
    }

    /// CloneVM_Task requests the simulator received.
    fn clone_requests(&self) -> usize {
        self.sim
            .log()
            .lines()
            .filter(|l| l.starts_with("Request:") && l.contains("<CloneVM_Task "))
            .count()
    }

    /// The guest of every powered-on VM of a machine reports an address, as VMware
    /// tools would (the simulator's `SET.guest.ipAddress`); once per VM.
    async fn guests_report_addresses(&self, done: &mut Vec<String>) {
        for (i, name) in VMS.iter().enumerate() {
            let Some(machine) = self.get(&machine_path(name)).await else {
                continue;
            };
            let Some(uuid) = machine["status"]["instanceUUID"].as_str() else {
                continue;
            };
            if done.iter().any(|d| d == uuid) {
                continue;
            }
            let Ok(Some(vm)) = self.vcenter.search_vm_by_uuid(uuid, true, None).await else {
                continue;
            };
            let on = self.vcenter.vm(vm.clone()).state().await.is_ok_and(|s| {
                s.power_state == vsphere_client::types::VirtualMachinePowerState::PoweredOn
            });
            if on {
                let spec = vsphere_client::vm::ConfigSpec::new()
                    .extra_config("SET.guest.ipAddress", format!("10.0.0.{}", 10 + i));
                self.vcenter
                    .vm(vm)
                    .reconfigure(&spec)
                    .await
                    .unwrap_or_else(|e| self.fail(&format!("setting the guest IP: {e}")));
                done.push(uuid.to_string());
            }
        }
    }
}

fn provider_path(name: &str) -> String {
    format!("{BANLIEUE}/namespaces/{NS}/providers/{name}")
}

fn vm_path(name: &str) -> String {
    format!("{BANLIEUE}/namespaces/{NS}/virtualmachines/{name}")
}

fn machine_path(name: &str) -> String {
    format!("{BANLIEUE}/namespaces/{NS}/vspheremachines/{name}")
}

fn condition<'a>(object: &'a Value, type_: &str) -> Option<&'a Value> {
    object["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)
}

/// `(status, reason)` of a condition, for messages.
fn brief(object: &Value, type_: &str) -> String {
    match condition(object, type_) {
        Some(c) => format!(
            "{}={} ({}: {})",
            type_, c["status"], c["reason"], c["message"]
        ),
        None => format!("no {type_} condition; status: {}", object["status"]),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_binaries_provision_schedule_mirror_and_delete_in_cluster_mode() {
    let dir = tempfile::tempdir().expect("temp dir");
    let ca = TestCa::new().expect("test CA");
    let sim = tokio::task::spawn_blocking({
        let tls = ca.server_tls();
        move || {
            Simulator::start(SimulatorOptions {
                tls,
                password: PASSWORD.into(),
                templates: vec![Template::everywhere("golden")],
                hosts_per_cluster: 1,
                standalone_hosts: 0,
                vms: 1,
                trace: true,
                // As vCenter: a second VM of the same name in a folder is refused.
                extra_args: vec!["-unique-vm-names".into()],
                method_delays: vec![("CloneVM_Task".into(), CLONE_DELAY)],
                ..Default::default()
            })
        }
    })
    .await
    .expect("simulator task")
    .unwrap_or_else(|e| panic!("simulator: {e}"));

    let manifest_dir = dir.path().join("manifests");
    fs::create_dir_all(&manifest_dir).expect("manifest dir");
    fs::write(manifest_dir.join("guide.yaml"), manifests(&sim, &ca)).expect("manifests");
    let api = KubeEmulator::start(&manifest_dir, &dir.path().join("emulator.log"))
        .unwrap_or_else(|e| panic!("{e}"));
    let kubeconfig = dir.path().join("kubeconfig");
    api.write_kubeconfig(&kubeconfig).expect("kubeconfig");

    let vcenter = Client::builder(&sim.sdk_url())
        .credentials(sim.username(), sim.password())
        .ca_bundle_pem(ca.ca_pem().as_bytes())
        .expect("CA")
        .keepalive(None)
        .connect()
        .await
        .expect("the test's own vCenter session");

    let controller = Role::start(
        &["controller"],
        &kubeconfig,
        dir.path().join("controller.log"),
    );
    let provider = Role::start(
        &["provider", "vsphere", "--namespace", NS],
        &kubeconfig,
        dir.path().join("provider-1.log"),
    );
    let mut h = Harness {
        http: emulator_http(),
        api,
        sim,
        vcenter,
        controller,
        provider,
        earlier_providers: Vec::new(),
        dir: dir.path().to_path_buf(),
        kubeconfig,
    };
    let started = Instant::now();

    // The Provider: logged in, one failure domain per (datacenter, cluster), by override.
    let provider = h
        .eventually("Provider prod-vsphere Ready=True", || async {
            let p = h
                .get(&provider_path("prod-vsphere"))
                .await
                .ok_or("absent")?;
            match condition(&p, "Ready") {
                Some(c) if c["status"] == "True" => Ok(p),
                _ => Err(brief(&p, "Ready")),
            }
        })
        .await;
    assert_eq!(
        condition(&provider, "Ready").unwrap()["reason"],
        "Connected"
    );
    let domains = provider["status"]["failureDomains"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let names: Vec<&str> = domains.iter().filter_map(|d| d["name"].as_str()).collect();
    assert_eq!(names, ["dc0-compute"], "{}", provider["status"]);
    assert_eq!(domains[0]["datacenter"], "DC0");
    assert_eq!(domains[0]["cluster"], "DC0_C0");
    assert_eq!(domains[0]["labels"]["name"], "dc0-compute");

    // A Provider that cannot be reconciled says why, in its status and at warn level.
    // (Until the provider's caches are synced its Ready is False for that reason; the
    // warn line follows the status write.)
    let staging = h
        .eventually(
            "Provider staging-vsphere Ready=False, SecretMissing",
            || async {
                let p = h
                    .get(&provider_path("staging-vsphere"))
                    .await
                    .ok_or("absent")?;
                match condition(&p, "Ready") {
                    Some(c) if c["status"] == "False" && c["reason"] == "SecretMissing" => Ok(p),
                    _ => Err(brief(&p, "Ready")),
                }
            },
        )
        .await;
    let ready = condition(&staging, "Ready").unwrap();
    assert!(
        ready["message"]
            .as_str()
            .unwrap_or_default()
            .contains("Secret banlieue-system/staging-creds"),
        "{ready}"
    );
    h.eventually(
        "a warn line for the Provider that cannot be reconciled",
        || async {
            let warned = h.provider.log().lines().any(|l| {
                l.contains(" WARN ") && l.contains("staging-vsphere") && l.contains("SecretMissing")
            });
            warned.then_some(()).ok_or_else(|| "none yet".to_string())
        },
    )
    .await;

    // The VMImage: ready on the Provider (the template found in its datacenter).
    let image_path = format!("{BANLIEUE}/vmimages/ubuntu-22.04-cloudinit");
    let entry = h
        .eventually("VMImage ready on prod-vsphere", || async {
            let image = h.get(&image_path).await.ok_or("absent")?;
            image["status"]["perProvider"]
                .as_array()
                .and_then(|entries| {
                    entries
                        .iter()
                        .find(|e| e["provider"] == "prod-vsphere" && e["ready"] == true)
                        .cloned()
                })
                .ok_or_else(|| image["status"].to_string())
        })
        .await;
    assert_eq!(entry["namespace"], NS);
    assert_eq!(entry["reason"], "TemplateFound", "{entry}");

    // Both VirtualMachines scheduled on it; a VSphereMachine each, owned, with the finalizer.
    for name in VMS {
        let vm = h
            .eventually(&format!("VirtualMachine {name} Scheduled=True"), || async {
                let vm = h.get(&vm_path(name)).await.ok_or("absent")?;
                match condition(&vm, "Scheduled") {
                    Some(c) if c["status"] == "True" => Ok(vm),
                    _ => Err(brief(&vm, "Scheduled")),
                }
            })
            .await;
        let scheduled = &vm["status"]["scheduled"];
        assert_eq!(scheduled["provider"], "prod-vsphere", "{scheduled}");
        assert_eq!(scheduled["failureDomain"], "dc0-compute", "{scheduled}");
        let machine = h
            .eventually(
                &format!("VSphereMachine {name} with its finalizer"),
                || async {
                    let m = h.get(&machine_path(name)).await.ok_or("absent")?;
                    let finalizers = &m["metadata"]["finalizers"];
                    if finalizers
                        .as_array()
                        .is_some_and(|f| f.iter().any(|f| f == "banlieue.io/vm-cleanup"))
                    {
                        Ok(m)
                    } else {
                        Err(format!("finalizers: {finalizers}"))
                    }
                },
            )
            .await;
        let owner = &machine["metadata"]["ownerReferences"][0];
        assert_eq!(owner["kind"], "VirtualMachine");
        assert_eq!(owner["uid"], vm["metadata"]["uid"]);
        assert_eq!(machine["spec"]["cpus"], 8);
        assert_eq!(machine["spec"]["template"]["name"], "golden");
    }

    // The provider is killed while vCenter holds a clone request, then started
    // again at once: whatever it finds, it makes no second VM.
    h.eventually("a clone request at vCenter", || async {
        match h.clone_requests() {
            0 => Err("no CloneVM_Task yet".to_string()),
            _ => Ok(()),
        }
    })
    .await;
    h.provider.kill();
    h.earlier_providers.push(h.provider.log());
    let restarted = h.start_provider(2);
    h.provider = restarted;

    // Each VM cloned once, powered on, its guest reporting an address; Ready mirrored.
    let reported = std::sync::Mutex::new(Vec::new());
    for name in VMS {
        let (vm, machine) = h
            .eventually(&format!("VirtualMachine {name} Ready=True"), || {
                let (h, reported) = (&h, &reported);
                async move {
                    let mut done = reported.lock().map(|d| d.clone()).unwrap_or_default();
                    h.guests_report_addresses(&mut done).await;
                    if let Ok(mut d) = reported.lock() {
                        *d = done;
                    }
                    let vm = h.get(&vm_path(name)).await.ok_or("absent")?;
                    let machine = h
                        .get(&machine_path(name))
                        .await
                        .ok_or("no VSphereMachine")?;
                    match condition(&vm, "Ready") {
                        Some(c) if c["status"] == "True" => Ok((vm, machine)),
                        _ => Err(format!(
                            "{}; VSphereMachine: {}",
                            brief(&vm, "Ready"),
                            brief(&machine, "Ready")
                        )),
                    }
                }
            })
            .await;
        let (vm_ready, machine_ready) = (
            condition(&vm, "Ready").unwrap(),
            condition(&machine, "Ready").unwrap(),
        );
        assert_eq!(vm_ready["reason"], machine_ready["reason"]);
        assert_eq!(vm_ready["message"], machine_ready["message"]);
        assert_eq!(
            machine["status"]["powerState"], "PoweredOn",
            "{}",
            machine["status"]
        );
        assert_eq!(vm["status"]["powerState"], machine["status"]["powerState"]);
        assert_eq!(machine["status"]["provisioned"], true);
        assert!(
            machine["status"]["ipAddresses"]
                .as_array()
                .is_some_and(|a| !a.is_empty()),
            "{}",
            machine["status"]
        );
    }
    let vms = h.cloned_vms().await;
    let names: Vec<&str> = vms.iter().map(|v| v.0.as_str()).collect();
    assert_eq!(
        names,
        ["banlieue-system-db-prod-01", "banlieue-system-db-prod-02"],
        "one VM per VirtualMachine, none made twice: {vms:?}"
    );
    for (name, uuid, power, cpus, memory) in &vms {
        assert_eq!(power, "poweredOn", "{name}");
        assert_eq!((*cpus, *memory), (8, 32768), "{name}: the class's shape");
        let machine = h
            .get(&machine_path(name.trim_start_matches("banlieue-system-")))
            .await
            .expect("VSphereMachine");
        assert_eq!(machine["status"]["instanceUUID"], uuid.as_str());
    }

    // A VMSnapshot of db-prod-02: taken, Ready with its id, owned by the VirtualMachine.
    let snapshots = format!("/apis/banlieue.io/v1alpha1/namespaces/{NS}/vmsnapshots");
    h.post(
        &snapshots,
        &serde_json::json!({"apiVersion": "banlieue.io/v1alpha1", "kind": "VMSnapshot",
            "metadata": {"name": "before-upgrade", "namespace": NS},
            "spec": {"vmRef": {"name": "db-prod-02"}, "description": "before the upgrade"}}),
    )
    .await;
    let snapshot_path = format!("{snapshots}/before-upgrade");
    let snapshot = h
        .eventually("VMSnapshot before-upgrade Ready=True", || async {
            let s = h.get(&snapshot_path).await.ok_or("absent")?;
            match condition(&s, "Ready") {
                Some(c) if c["status"] == "True" => Ok(s),
                _ => Err(format!("{}, {}", brief(&s, "Ready"), s["metadata"])),
            }
        })
        .await;
    assert!(
        snapshot["status"]["snapshotID"]
            .as_str()
            .is_some_and(|id| id.starts_with("snapshot-")),
        "{}",
        snapshot["status"]
    );
    let vm = h.get(&vm_path("db-prod-02")).await.expect("VirtualMachine");
    let owner = &snapshot["metadata"]["ownerReferences"][0];
    assert_eq!(
        (&owner["kind"], &owner["uid"]),
        (&serde_json::json!("VirtualMachine"), &vm["metadata"]["uid"])
    );

    // Deleting a VirtualMachine: its VSphereMachine goes (owner reference), the VM is
    // destroyed, the finalizer released; the other VM stays; its VMSnapshot goes too.
    h.delete(&vm_path("db-prod-02")).await;
    for (what, path) in [
        ("VSphereMachine db-prod-02", machine_path("db-prod-02")),
        ("VMSnapshot before-upgrade", snapshot_path),
    ] {
        h.eventually(&format!("{what} gone"), || async {
            match h.get(&path).await {
                None => Ok(()),
                Some(m) => Err(format!(
                    "finalizers {}, deletionTimestamp {}, {}",
                    m["metadata"]["finalizers"],
                    m["metadata"]["deletionTimestamp"],
                    brief(&m, "Ready")
                )),
            }
        })
        .await;
    }
    let vms = h.cloned_vms().await;
    let names: Vec<&str> = vms.iter().map(|v| v.0.as_str()).collect();
    assert_eq!(names, ["banlieue-system-db-prod-01"], "{vms:?}");
    assert_eq!(vms[0].2, "poweredOn");

    let took = started.elapsed();
    for log in h
        .earlier_providers
        .iter()
        .chain([&h.provider.log(), &h.controller.log()])
    {
        assert!(!log.contains(PASSWORD), "a password reached a log");
    }
    eprintln!(
        "cluster-mode flow took {took:?}, {} clone request(s)",
        h.clone_requests()
    );
}

/// Plain http to the emulator (reqwest is built here without a TLS provider).
fn emulator_http() -> reqwest::Client {
    reqwest::Client::builder()
        .use_preconfigured_tls(
            rustls::ClientConfig::builder_with_provider(std::sync::Arc::new(
                rustls::crypto::ring::default_provider(),
            ))
            .with_safe_default_protocol_versions()
            .expect("TLS versions")
            .with_root_certificates(rustls::RootCertStore::empty())
            .with_no_client_auth(),
        )
        .build()
        .expect("HTTP client")
}

/// An emulator loaded with `manifests` (in `dir`), and a kubeconfig for it.
fn emulator(dir: &Path, manifests: &str) -> (KubeEmulator, PathBuf) {
    let manifest_dir = dir.join("manifests");
    fs::create_dir_all(&manifest_dir).expect("manifest dir");
    fs::write(manifest_dir.join("objects.yaml"), manifests).expect("manifests");
    let api = KubeEmulator::start(&manifest_dir, &dir.join("emulator.log"))
        .unwrap_or_else(|e| panic!("{e}"));
    let kubeconfig = dir.join("kubeconfig");
    api.write_kubeconfig(&kubeconfig).expect("kubeconfig");
    (api, kubeconfig)
}

/// A Provider of [`NS`] whose Secret `secret` does not exist: nothing reaches a vCenter.
fn provider_without_secret(name: &str, secret: &str) -> String {
    format!(
        "apiVersion: banlieue.io/v1alpha1
kind: Provider
metadata: {{ name: {name}, namespace: {NS} }}
spec:
  providerClassRef: {{ name: vsphere }}
  connection:
    endpoint: https://vcenter.invalid/sdk
    credentialsRef: {{ name: {secret} }}
  capabilities:
    storageClasses:
      - {{ name: gold, target: {{ datastore: ds }} }}
"
    )
}

/// Two `banlieue controller` processes on one Lease ([`LEASE`], as [`Role::start`]
/// sets it): one holds it and reconciles, the other stands by; the holder is
/// killed (SIGKILL: no release) and the other takes the Lease within its
/// duration plus the Lease manager's pause, then reconciles a VirtualMachine
/// posted after the kill.
///
/// The second starts once the first leads: two instances that find the Lease
/// free at the same moment are told apart by server-side apply's field
/// ownership (the loser's apply is a 409), which the emulator does not have
/// (its README): there both applies succeed and the later one's name stands.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_controllers_one_leads_and_the_other_takes_over_when_it_is_killed() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (api, kubeconfig) = emulator(dir.path(), "");
    let http = emulator_http();
    let lease_url = format!(
        "{}/apis/coordination.k8s.io/v1/namespaces/{NS}/leases/banlieue-controller",
        api.url()
    );
    let holder = || async {
        let bytes = http.get(&lease_url).send().await.ok()?.bytes().await.ok()?;
        let lease: Value = serde_json::from_slice(&bytes).ok()?;
        lease["spec"]["holderIdentity"].as_str().map(String::from)
    };
    let start = |i: usize| {
        Role::start(
            &["controller"],
            &kubeconfig,
            dir.path().join(format!("controller-{i}.log")),
        )
    };
    let mut roles: Vec<Role> = vec![start(0)];
    let logs = |roles: &[Role]| {
        roles
            .iter()
            .enumerate()
            .map(|(i, r)| format!("\n--- controller {i} ---\n{}", r.log()))
            .collect::<String>()
            + &format!("\n--- emulator ---\n{}", api.log())
    };
    // Identities are banlieue-<pid>-<nanos> outside a pod.
    let owner = |roles: &[Role], identity: &String| {
        roles
            .iter()
            .position(|r| identity.starts_with(&format!("banlieue-{}-", r.child.id())))
    };

    let (leader, follower) = (0, 1);
    let deadline = Instant::now() + Duration::from_secs(30);
    while holder().await.and_then(|h| owner(&roles, &h)) != Some(leader)
        || !roles[leader].log().contains("leading lease=")
    {
        assert!(Instant::now() < deadline, "no leader{}", logs(&roles));
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    roles.push(start(follower));
    // Several renewals later the Lease still names the same one, and only it says it leads.
    tokio::time::sleep(Duration::from_secs(8)).await;
    let named = holder().await.and_then(|h| owner(&roles, &h));
    assert_eq!(named, Some(leader), "{}", logs(&roles));
    assert!(
        roles[leader].log().contains("leading lease="),
        "{}",
        logs(&roles)
    );
    assert!(
        !roles[leader].log().contains("not leading"),
        "the leader kept its Lease{}",
        logs(&roles)
    );
    assert!(
        !roles[follower].log().contains("leading lease="),
        "the standby never led{}",
        logs(&roles)
    );

    roles[leader].kill();
    let killed = Instant::now();
    let took_over = loop {
        if holder().await.and_then(|h| owner(&roles, &h)) == Some(follower) {
            break killed.elapsed();
        }
        assert!(
            killed.elapsed() < Duration::from_secs(20),
            "no takeover{}",
            logs(&roles)
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    // Expiry at most the lease duration after the kill, then the crate's 0.1-1 s pause.
    assert!(
        took_over <= Duration::from_millis(7500),
        "took over {took_over:?} after the kill{}",
        logs(&roles)
    );
    eprintln!("the standby held the Lease {took_over:?} after the leader was killed");

    // The new leader reconciles: a VirtualMachine posted now gets a status.
    let vm: Value = serde_json::json!({
        "apiVersion": "banlieue.io/v1alpha1", "kind": "VirtualMachine",
        "metadata": {"name": "after-takeover", "namespace": NS},
        "spec": {"classRef": {"name": "no-such-class"}, "imageRef": {"name": "no-such-image"},
                 "placement": {}, "desiredPowerState": "PoweredOn"},
    });
    let posted = http
        .post(format!(
            "{}{BANLIEUE}/namespaces/{NS}/virtualmachines",
            api.url()
        ))
        .header("content-type", "application/json")
        .body(vm.to_string())
        .send()
        .await
        .expect("POST");
    assert!(posted.status().is_success(), "{}", posted.status());
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let vm: Option<Value> = async {
            let bytes = http
                .get(format!("{}{}", api.url(), vm_path("after-takeover")))
                .send()
                .await
                .ok()?
                .bytes()
                .await
                .ok()?;
            serde_json::from_slice(&bytes).ok()
        }
        .await;
        if vm
            .as_ref()
            .and_then(|v| v["status"]["conditions"].as_array())
            .is_some_and(|c| !c.is_empty())
        {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the new leader did not reconcile: {vm:?}{}",
            logs(&roles)
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// A provider workload (`provider vsphere --provider a-vsphere`, as the
/// operator-managed controller runs it) serves its one Provider: of two
/// Providers whose Secrets are missing, only its own says so, and it holds a
/// Lease of its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_provider_workload_serves_its_own_provider_only() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (api, kubeconfig) = emulator(
        dir.path(),
        &format!(
            "{}---\n{}",
            provider_without_secret("a-vsphere", "a-vsphere-creds"),
            provider_without_secret("b-vsphere", "b-vsphere-creds")
        ),
    );
    let role = Role::start(
        &[
            "provider",
            "vsphere",
            "--namespace",
            NS,
            "--provider",
            "a-vsphere",
        ],
        &kubeconfig,
        dir.path().join("provider.log"),
    );
    let http = emulator_http();
    let get = |path: String| {
        let http = http.clone();
        let url = format!("{}{path}", api.url());
        async move {
            let bytes = http.get(url).send().await.ok()?.bytes().await.ok()?;
            serde_json::from_slice::<Value>(&bytes).ok()
        }
    };
    let ready_reason = |p: Option<Value>| {
        p.as_ref()
            .and_then(|p| condition(p, "Ready"))
            .map(|c| c["reason"].as_str().unwrap_or_default().to_string())
    };
    let provider_path = |name: &str| format!("{BANLIEUE}/namespaces/{NS}/providers/{name}");
    let deadline = Instant::now() + Duration::from_secs(60);
    while ready_reason(get(provider_path("a-vsphere")).await).as_deref() != Some("SecretMissing") {
        assert!(
            Instant::now() < deadline,
            "a-vsphere not reconciled\n{}\n{}",
            role.log(),
            api.log()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // Several seconds later the other Provider is still untouched: no status, no finalizer.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let b = get(provider_path("b-vsphere")).await.expect("b-vsphere");
    assert!(b["status"]["conditions"].is_null(), "{b}\n{}", role.log());
    assert!(b["metadata"]["finalizers"].is_null(), "{b}");
    let a = get(provider_path("a-vsphere")).await.expect("a-vsphere");
    assert_eq!(
        a["metadata"]["finalizers"][0],
        "banlieue.io/provider-in-use"
    );
    let lease = get(format!(
        "/apis/coordination.k8s.io/v1/namespaces/{NS}/leases/banlieue-provider-a-vsphere"
    ))
    .await
    .expect("its own Lease");
    assert!(lease["spec"]["holderIdentity"].is_string(), "{lease}");
}

/// `banlieue controller --provider-workloads` (operator-managed mode): a
/// Provider gets its provider workload (Deployment, ServiceAccount, Role
/// reading its Secret by name, RoleBinding, ClusterRoleBinding, Lease), its
/// availability becomes the Provider's `WorkloadReady`, and deleting the
/// Provider removes the ClusterRoleBinding, releases it, and its owned
/// objects are garbage-collected.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_operator_managed_controller_makes_and_removes_a_providers_workload() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (api, kubeconfig) = emulator(dir.path(), &provider_without_secret("a-vsphere", "a-creds"));
    let role = Role::start(
        &[
            "controller",
            "--provider-workloads",
            "--image",
            "example.com/banlieue:v9",
        ],
        &kubeconfig,
        dir.path().join("controller.log"),
    );
    let http = emulator_http();
    let url = |path: &str| format!("{}{path}", api.url());
    let get = |path: String| {
        let (http, url) = (http.clone(), url(&path));
        async move {
            let response = http.get(url).send().await.ok()?;
            if !response.status().is_success() {
                return None;
            }
            serde_json::from_slice::<Value>(&response.bytes().await.ok()?).ok()
        }
    };
    let fail = |what: &str| -> ! { panic!("{what}\n{}\n{}", role.log(), api.log()) };
    let until = |what: &'static str, path: String, done: fn(&Value) -> bool| {
        let get = &get;
        let fail = &fail;
        async move {
            let deadline = Instant::now() + Duration::from_secs(60);
            loop {
                if let Some(v) = get(path.clone()).await {
                    if done(&v) {
                        return v;
                    }
                }
                if Instant::now() > deadline {
                    fail(what);
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    };
    let name = "banlieue-provider-a-vsphere";
    let deployment_path = format!("/apis/apps/v1/namespaces/{NS}/deployments/{name}");
    let deployment = until("the workload's Deployment", deployment_path.clone(), |_| {
        true
    })
    .await;
    let container = &deployment["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(container["image"], "example.com/banlieue:v9");
    assert_eq!(
        container["args"],
        serde_json::json!([
            "provider",
            "vsphere",
            "--namespace",
            NS,
            "--provider",
            "a-vsphere"
        ])
    );
    assert_eq!(
        deployment["metadata"]["ownerReferences"][0]["name"],
        "a-vsphere"
    );
    let rbac = "/apis/rbac.authorization.k8s.io/v1";
    let role_object = get(format!("{rbac}/namespaces/{NS}/roles/{name}"))
        .await
        .unwrap_or_else(|| fail("the workload's Role"));
    assert_eq!(
        role_object["rules"][0],
        serde_json::json!({"apiGroups": [""], "resources": ["secrets"],
                           "resourceNames": ["a-creds"], "verbs": ["get"]})
    );
    for path in [
        format!("/api/v1/namespaces/{NS}/serviceaccounts/{name}"),
        format!("{rbac}/namespaces/{NS}/rolebindings/{name}"),
        format!("{rbac}/clusterrolebindings/banlieue-provider-banlieue-system-a-vsphere"),
        format!("/apis/coordination.k8s.io/v1/namespaces/{NS}/leases/{name}"),
    ] {
        assert!(get(path.clone()).await.is_some(), "{path}");
    }
    let provider_path = format!("{BANLIEUE}/namespaces/{NS}/providers/a-vsphere");
    until("WorkloadReady=False", provider_path.clone(), |p| {
        condition(p, "WorkloadReady").is_some_and(|c| c["status"] == "False")
    })
    .await;

    // A replica becomes available: the condition follows.
    let patched = http
        .patch(url(&format!("{deployment_path}/status")))
        .header("content-type", "application/merge-patch+json")
        .body(r#"{"status": {"availableReplicas": 1, "updatedReplicas": 2}}"#)
        .send()
        .await
        .expect("PATCH");
    assert!(patched.status().is_success(), "{}", patched.status());
    until("WorkloadReady=True", provider_path.clone(), |p| {
        condition(p, "WorkloadReady")
            .is_some_and(|c| c["status"] == "True" && c["reason"] == "WorkloadAvailable")
    })
    .await;

    // Deleted (no machine uses it): the binding goes, the Provider goes, its workload with it.
    let deleted = http
        .delete(url(&provider_path))
        .send()
        .await
        .expect("DELETE");
    assert!(deleted.status().is_success(), "{}", deleted.status());
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let left = [
            provider_path.clone(),
            deployment_path.clone(),
            format!("{rbac}/clusterrolebindings/banlieue-provider-banlieue-system-a-vsphere"),
            format!("{rbac}/namespaces/{NS}/roles/{name}"),
        ];
        let mut remaining = Vec::new();
        for path in left {
            if get(path.clone()).await.is_some() {
                remaining.push(path);
            }
        }
        if remaining.is_empty() {
            break;
        }
        if Instant::now() > deadline {
            fail(&format!("still there: {remaining:?}"));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
