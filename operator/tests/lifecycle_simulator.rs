//! The VSphereMachine lifecycle against the simulator, through `check`'s
//! reconcile functions and the `banlieue check --apply` binary: a
//! VirtualMachine ends Ready with its VM cloned, shaped (read back),
//! powered on and mirrored; power off and on; delete; crashes at each step
//! leave exactly one VM (counted by instance UUID and by name); re-runs make
//! no second VM; the SOAP calls per VM.

use std::collections::BTreeMap;
use std::process::Command;
use std::time::{Duration, Instant};

use banlieue::api::{PowerState, Provisioning, VSphereMachine};
use banlieue::check::{self, parse_documents, World};
use banlieue::conditions;
use banlieue::controllers::vspheremachine::driver::{self, Checkpoint, Hooks, Outcome};
use banlieue::controllers::vspheremachine::{guestinfo, identity};
use banlieue::vsphere::vcenter::VCenter;
use banlieue::vsphere::VSphere;
use vsphere_client::types::{AnyOptionValue, AnyVirtualDevice, AnyVirtualDeviceBackingInfo};
use vsphere_client::xml::Value;
use vsphere_client::{mo, Client};
use vsphere_tests::{CapturedLogs, Simulator, SimulatorOptions, Template};

const PASSWORD: &str = "s3cret-Pw";

async fn simulator(options: SimulatorOptions) -> Simulator {
    let options = SimulatorOptions {
        password: PASSWORD.into(),
        templates: vec![Template::everywhere("golden")],
        ..options
    };
    tokio::task::spawn_blocking(move || Simulator::start(options))
        .await
        .expect("simulator start task")
        .unwrap_or_else(|e| panic!("simulator: {e}"))
}

fn small() -> SimulatorOptions {
    SimulatorOptions {
        hosts_per_cluster: 1,
        standalone_hosts: 0,
        vms: 1,
        ..Default::default()
    }
}

/// Provider, credentials, a cloud-config Secret, a class with two disks, two
/// NICs (one static), EFI secure boot, vTPM and hot add, an image, and
/// VirtualMachines `names` in namespace `team-a`.
fn manifests(sim: &Simulator, install_mode: &str, names: &[&str]) -> String {
    let mut text = format!(
        r#"apiVersion: v1
kind: Secret
metadata: {{ name: vsphere-creds, namespace: banlieue-system }}
stringData: {{ username: "{user}", password: "{PASSWORD}" }}
---
apiVersion: v1
kind: Secret
metadata: {{ name: web-cloud-config, namespace: banlieue-system }}
stringData:
  userdata: |
    #cloud-config
    packages: [nginx]
---
apiVersion: banlieue.io/v1alpha1
kind: Provider
metadata: {{ name: vc, namespace: banlieue-system }}
spec:
  providerClassRef: {{ name: vsphere }}
  connection:
    endpoint: "{url}"
    credentialsRef: {{ name: vsphere-creds }}
    insecureSkipTLSVerify: true
  capabilities:
    storageClasses:
      - {{ name: gold, target: {{ datastore: LocalDS_0 }} }}
    networkClasses:
      - {{ name: prod, target: {{ portGroup: DC0_DVPG0 }} }}
      - {{ name: mgmt, target: {{ portGroup: VM Network }} }}
    features: [hotAddCPU, vtpm, efiSecureBoot]
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
      - {{ name: data, sizeGiB: 3, storageClass: gold, provisioning: eagerZeroed }}
  network:
    interfaces:
      - name: eth0
        networkClass: prod
        ipam: {{ static: {{ address: 10.0.0.10/24, gateway: 10.0.0.1, nameservers: [10.0.0.2] }} }}
      - {{ name: eth1, networkClass: mgmt, ipam: {{}} }}
  firmware: efi-secure
  features: [hotAddCPU]
  tpmEnabled: true
---
apiVersion: banlieue.io/v1alpha1
kind: VMImage
metadata: {{ name: golden }}
spec:
  guestAgent: open-vm-tools
  sources: [{{ providerClass: vsphere, kind: Template, ref: golden }}]
  template: {{ firmware: efi, installMode: {install_mode} }}
  cloudConfigs: [{{ secretRef: {{ name: web-cloud-config }} }}]
---
"#,
        user = sim.username(),
        url = sim.sdk_url()
    );
    for name in names {
        text.push_str(&format!(
            "apiVersion: banlieue.io/v1alpha1\nkind: VirtualMachine\nmetadata: {{ name: {name}, namespace: team-a }}\n\
             spec: {{ classRef: {{ name: web }}, imageRef: {{ name: golden }}, desiredPowerState: PoweredOn }}\n---\n"
        ));
    }
    text
}

fn world_of(text: &str) -> World {
    let mut world = World::default();
    for doc in parse_documents(text).expect("test manifests") {
        world.add("test", doc);
    }
    assert!(world.rejected.is_empty(), "{:?}", world.rejected);
    world
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

/// Every VM of the simulator with name, instance UUID, power, parent.
async fn all_vms(client: &Client) -> Vec<mo::VirtualMachine> {
    let root = client.service_content().root_folder.clone();
    client
        .properties::<mo::VirtualMachine>(&["name", "config.instanceUuid", "runtime.powerState"])
        .expect("paths")
        .in_container(&root)
        .collect_all()
        .await
        .expect("VMs")
}

/// VMs with this instance UUID and VMs with this name, over every VM (the
/// simulator has no `FindAllByUuid`).
async fn count(client: &Client, uuid: &str, name: &str) -> (usize, usize) {
    let vms = all_vms(client).await;
    let by_uuid = vms
        .iter()
        .filter(|v| v.config.as_ref().and_then(|c| c.instance_uuid.as_deref()) == Some(uuid))
        .count();
    let by_name = vms
        .iter()
        .filter(|v| v.name.as_deref() == Some(name))
        .count();
    (by_uuid, by_name)
}

fn extra_config(vm: &mo::VirtualMachine) -> BTreeMap<String, String> {
    vm.config
        .iter()
        .flat_map(|c| &c.extra_config)
        .filter_map(|o| match o {
            AnyOptionValue::OptionValue(o) => match &o.value {
                Some(Value::String(s)) => Some((o.key.clone(), s.clone())),
                _ => None,
            },
            _ => None,
        })
        .collect()
}

/// The cloud-init user data of a VM's guestinfo (decoded).
fn user_data(extra: &BTreeMap<String, String>) -> String {
    guestinfo::decode(
        extra
            .get("guestinfo.userdata")
            .map(String::as_str)
            .unwrap_or_default(),
    )
    .unwrap_or_default()
}

/// The cloud-init metadata of a VM's guestinfo (decoded JSON).
fn metadata(extra: &BTreeMap<String, String>) -> serde_json::Value {
    serde_json::from_str(
        &guestinfo::decode(
            extra
                .get("guestinfo.metadata")
                .map(String::as_str)
                .unwrap_or_default(),
        )
        .unwrap_or_default(),
    )
    .expect("metadata JSON")
}

/// The guest reports an address once its VM is on (the simulator's
/// `SET.guest.ipAddress` extraConfig stands in for VMware tools).
async fn guest_reports_ip(client: Client, uuid: String, ip: &'static str) {
    for _ in 0..300 {
        if let Ok(Some(vm)) = client.search_vm_by_uuid(&uuid, true, None).await {
            let state = client.vm(vm.clone()).state().await;
            if state.is_ok_and(|s| {
                s.power_state == vsphere_client::types::VirtualMachinePowerState::PoweredOn
            }) {
                let config =
                    vsphere_client::vm::ConfigSpec::new().extra_config("SET.guest.ipAddress", ip);
                client
                    .vm(vm)
                    .reconfigure(&config)
                    .await
                    .expect("set the guest IP");
                return;
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the VM never powered on");
}

fn ready_of(world: &World, name: &str) -> (String, String, String) {
    condition_of(world, name, conditions::READY)
}

fn machine<'a>(world: &'a World, name: &str) -> &'a VSphereMachine {
    world
        .machines
        .iter()
        .find(|m| m.metadata.name.as_deref() == Some(name))
        .expect("VSphereMachine")
}

#[tokio::test]
async fn a_virtual_machine_ends_ready_cloned_shaped_on_and_mirrored() {
    let sim = simulator(small()).await;
    let mut world = world_of(&manifests(&sim, "immediate", &["web-1"]));
    let vcenter = VCenter::default();
    check::reconcile(&mut world, &vcenter, &conditions::now()).await;
    assert_eq!(
        world.machines.len(),
        1,
        "scheduled: {:?}",
        world.vms[0].status
    );
    let uuid = identity::instance_uuid(&world.machines[0]);
    let guest = tokio::spawn(guest_reports_ip(
        connect(&sim).await,
        uuid.clone(),
        "10.0.0.10",
    ));
    check::apply(
        &mut world,
        &vcenter,
        Instant::now() + Duration::from_secs(60),
        &conditions::now(),
    )
    .await;
    guest.await.expect("guest");

    let (ready, reason, message) = ready_of(&world, "web-1");
    assert_eq!(
        (ready.as_str(), reason.as_str()),
        ("True", "PoweredOn"),
        "{message}\n{}",
        sim.log()
    );
    let vm_status = world.vms[0].status.clone().unwrap_or_default();
    assert_eq!(
        vm_status.power_state.as_deref(),
        Some("PoweredOn"),
        "the VirtualMachine mirrors POWER"
    );
    let status = machine(&world, "web-1").status.clone().unwrap_or_default();
    assert_eq!(status.instance_uuid.as_deref(), Some(uuid.as_str()));
    assert_eq!(status.ip_addresses, vec!["10.0.0.10"]);
    assert!(status.provisioned && status.task.is_none());
    let mo_ref = status.mo_ref.clone().expect("moref");
    let console = status.console_url.clone().expect("console URL");
    assert!(
        console.starts_with(&format!(
            "https://127.0.0.1:{}/ui/app/vm;nav=h/urn:vmomi:VirtualMachine:{mo_ref}:",
            sim.port()
        )),
        "{console}"
    );

    // Read the VM back.
    let client = connect(&sim).await;
    assert_eq!(count(&client, &uuid, "team-a-web-1").await, (1, 1));
    let vm_ref = vsphere_client::types::ManagedObjectReference {
        type_: "VirtualMachine".into(),
        value: mo_ref,
    };
    let vm = client
        .properties::<mo::VirtualMachine>(&[
            "name",
            "parent",
            "config.instanceUuid",
            "config.hardware",
            "config.firmware",
            "config.bootOptions",
            "config.cpuHotAddEnabled",
            "config.extraConfig",
            "runtime.powerState",
        ])
        .expect("paths")
        .get(&vm_ref)
        .await
        .expect("the VM");
    let config = vm.config.clone().expect("config");
    assert_eq!(
        (config.hardware.num_cpu, config.hardware.memory_mb),
        (2, 2048)
    );
    assert_eq!(config.firmware.as_deref(), Some("efi"));
    assert_eq!(
        config
            .boot_options
            .as_ref()
            .and_then(|b| b.efi_secure_boot_enabled),
        Some(true)
    );
    assert_eq!(config.cpu_hot_add_enabled, Some(true));
    let devices = &config.hardware.device;
    let disks: Vec<(i64, Option<bool>)> = devices
        .iter()
        .filter_map(|d| match d {
            AnyVirtualDevice::VirtualDisk(d) => Some((
                d.capacity_in_kb,
                match &d.backing {
                    Some(AnyVirtualDeviceBackingInfo::VirtualDiskFlatVer2BackingInfo(b)) => {
                        b.eagerly_scrub
                    }
                    _ => None,
                },
            )),
            _ => None,
        })
        .collect();
    assert_eq!(disks.len(), 2, "{disks:?}");
    assert_eq!(disks[0].0, 10 * 1024 * 1024, "root grown to 10 GiB");
    assert_eq!(
        disks[1],
        (3 * 1024 * 1024, Some(true)),
        "data disk eager-zeroed"
    );
    assert!(
        devices
            .iter()
            .any(|d| matches!(d, AnyVirtualDevice::VirtualTPM(_))),
        "vTPM"
    );
    let macs: Vec<String> = devices
        .iter()
        .filter_map(|d| match d {
            AnyVirtualDevice::VirtualVmxnet3(n) => n.mac_address.clone(),
            _ => None,
        })
        .collect();
    assert_eq!(
        macs,
        vec![
            identity::mac_address(&uuid, 0),
            identity::mac_address(&uuid, 1)
        ],
        "two NICs with their fixed MACs"
    );
    let extra = extra_config(&vm);
    assert_eq!(
        extra.get("guestinfo.userdata.encoding").map(String::as_str),
        Some("base64")
    );
    assert_eq!(
        extra.get("guestinfo.metadata.encoding").map(String::as_str),
        Some("base64")
    );
    let user = user_data(&extra);
    assert!(user.contains("packages: [nginx]"), "{user}");
    let meta = metadata(&extra);
    assert_eq!(meta["instance-id"], uuid.as_str());
    assert_eq!(
        meta["network"]["ethernets"]["eth0"]["addresses"][0],
        "10.0.0.10/24"
    );
    // In the failure domain's folder.
    let parent = vm.parent.clone().expect("parent");
    let folder = client
        .properties::<mo::Folder>(&["name"])
        .expect("paths")
        .get(&parent)
        .await
        .expect("folder");
    assert_eq!(
        folder.name.as_deref(),
        Some(identity::folder_name(&machine(&world, "web-1").spec.failure_domain).as_str())
    );
    vcenter.close_all().await;
}

/// Keeps the last persisted copy (what the API server would hold) and stops
/// at one checkpoint, as a crash would.
#[derive(Default)]
struct Store {
    persisted: Option<VSphereMachine>,
    crash_at: Option<Checkpoint>,
}

impl Hooks for Store {
    async fn persist(&mut self, machine: &VSphereMachine) -> Result<(), banlieue::Error> {
        self.persisted = Some(machine.clone());
        Ok(())
    }

    fn checkpoint(&mut self, point: Checkpoint) -> Result<(), banlieue::Error> {
        match self.crash_at {
            Some(p) if p == point => Err(banlieue::Error::Stopped(format!("crashed at {point:?}"))),
            _ => Ok(()),
        }
    }
}

/// A fresh process: new vCenter sessions, only the persisted machine.
async fn run_fresh(
    world: &World,
    machine: &mut VSphereMachine,
    deleting: bool,
    hooks: &mut Store,
) -> Result<Outcome, banlieue::Error> {
    let vcenter = VCenter::default();
    let provider = &world.providers[0];
    let params = banlieue::controllers::provider::readiness::connect_params(provider, world)
        .expect("params");
    let session = vcenter.connect(&params).await.expect("connect");
    let secrets = banlieue::controllers::vspheremachine::cloud_config_secrets(machine, world)
        .expect("secrets");
    let result = driver::reconcile(
        machine,
        deleting,
        &secrets,
        &session,
        hooks,
        &driver::Options::default(),
    )
    .await;
    vcenter.close_all().await;
    result
}

async fn scheduled_world(sim: &Simulator, names: &[&str]) -> World {
    let mut world = world_of(&manifests(sim, "deferred", names));
    let vcenter = VCenter::default();
    check::reconcile(&mut world, &vcenter, &conditions::now()).await;
    vcenter.close_all().await;
    assert_eq!(world.machines.len(), names.len());
    world
}

/// The root disk is cloned with the class's provisioning: the clone request
/// carries a disk locator for the template's first disk with that backing.
/// The simulator copies a template's disks as they are (it ignores disk
/// locators), so what vCenter is asked is what shows it.
#[tokio::test]
async fn the_root_disk_is_cloned_with_the_class_provisioning() {
    let sim = simulator(small()).await;
    let world = scheduled_world(&sim, &["web-1"]).await;
    let mut m = world.machines[0].clone();
    m.spec.disks[0].provisioning = Provisioning::EagerZeroed;
    let logs = CapturedLogs::default();
    let outcome = {
        let _wire = tracing::subscriber::set_default(logs.subscriber(tracing::Level::TRACE));
        let mut store = Store {
            crash_at: Some(Checkpoint::CloneSent),
            ..Default::default()
        };
        run_fresh(&world, &mut m, false, &mut store).await
    };
    assert!(
        matches!(&outcome, Err(banlieue::Error::Stopped(_))),
        "{outcome:?}"
    );
    let text = logs.text();
    let clone = text
        .lines()
        .find(|l| l.contains("request: ") && l.contains("<CloneVM_Task"))
        .unwrap_or_else(|| panic!("no CloneVM_Task in the wire log:\n{text}"));
    let locator = clone
        .split("<disk>")
        .nth(1)
        .and_then(|rest| rest.split("</disk>").next())
        .unwrap_or_else(|| panic!("no disk locator: {clone}"));
    for part in [
        "<diskId>",
        "type=\"Datastore\">",
        "VirtualDiskFlatVer2BackingInfo",
        "<thinProvisioned>false</thinProvisioned>",
        "<eagerlyScrub>true</eagerlyScrub>",
    ] {
        assert!(locator.contains(part), "{part} in {locator}");
    }
    assert!(!text.contains(PASSWORD), "no password in the wire log");
}

#[tokio::test]
async fn power_off_and_on_again_then_delete_removes_the_vm() {
    let sim = simulator(small()).await;
    let world = scheduled_world(&sim, &["web-1"]).await;
    let mut m = world.machines[0].clone();
    let uuid = identity::instance_uuid(&m);
    let mut store = Store::default();
    assert_eq!(
        run_fresh(&world, &mut m, false, &mut store)
            .await
            .as_ref()
            .ok(),
        Some(&Outcome::Ready)
    );
    let client = connect(&sim).await;
    let power = |vms: Vec<mo::VirtualMachine>| {
        vms.into_iter()
            .find(|v| v.name.as_deref() == Some("team-a-web-1"))
            .and_then(|v| v.runtime)
            .map(|r| r.power_state.as_str().to_string())
    };
    assert_eq!(power(all_vms(&client).await).as_deref(), Some("poweredOn"));

    m.spec.desired_power_state = PowerState::PoweredOff;
    assert_eq!(
        run_fresh(&world, &mut m, false, &mut store)
            .await
            .as_ref()
            .ok(),
        Some(&Outcome::Ready)
    );
    assert_eq!(power(all_vms(&client).await).as_deref(), Some("poweredOff"));
    assert_eq!(
        m.status.as_ref().and_then(|s| s.power_state.as_deref()),
        Some("PoweredOff")
    );
    m.spec.desired_power_state = PowerState::PoweredOn;
    assert_eq!(
        run_fresh(&world, &mut m, false, &mut store)
            .await
            .as_ref()
            .ok(),
        Some(&Outcome::Ready)
    );
    assert_eq!(power(all_vms(&client).await).as_deref(), Some("poweredOn"));
    assert_eq!(count(&client, &uuid, "team-a-web-1").await, (1, 1));

    assert_eq!(
        run_fresh(&world, &mut m, true, &mut store)
            .await
            .as_ref()
            .ok(),
        Some(&Outcome::Released)
    );
    assert_eq!(
        count(&client, &uuid, "team-a-web-1").await,
        (0, 0),
        "deletion removes the VM"
    );
}

/// `check`'s reconcilers, then `check --apply` (up to a minute): what a
/// user re-running `banlieue check --apply` on edited manifests gets.
async fn converge(world: &mut World, vcenter: &VCenter) {
    check::reconcile(world, vcenter, &conditions::now()).await;
    check::apply(
        world,
        vcenter,
        Instant::now() + Duration::from_secs(60),
        &conditions::now(),
    )
    .await;
}

/// The properties `paths` of the VM `mo_ref`, read from vCenter.
async fn read_vm(client: &Client, mo_ref: &str, paths: &[&str]) -> mo::VirtualMachine {
    client
        .properties::<mo::VirtualMachine>(paths)
        .expect("paths")
        .get(&vsphere_client::types::ManagedObjectReference {
            type_: "VirtualMachine".into(),
            value: mo_ref.into(),
        })
        .await
        .expect("the VM")
}

/// The guestinfo keys (extraConfig) of a VM, read from vCenter.
async fn extra_config_of(client: &Client, mo_ref: &str) -> BTreeMap<String, String> {
    extra_config(&read_vm(client, mo_ref, &["config.extraConfig"]).await)
}

/// CPUs, memory, power state and boot time of a VM, read from vCenter.
async fn hardware(client: &Client, mo_ref: &str) -> (i32, i32, String, String) {
    let vm = read_vm(
        client,
        mo_ref,
        &[
            "config.hardware",
            "runtime.powerState",
            // vcsim updates the summary's boot time at power-on.
            "summary.runtime.bootTime",
        ],
    )
    .await;
    let config = vm.config.expect("config");
    let runtime = vm.runtime.expect("runtime");
    let boot = vm.summary.and_then(|s| s.runtime.boot_time);
    (
        config.hardware.num_cpu,
        config.hardware.memory_mb,
        runtime.power_state.as_str().to_string(),
        format!("{boot:?}"),
    )
}

fn condition_of(world: &World, name: &str, type_: &str) -> (String, String, String) {
    let vm = world
        .vms
        .iter()
        .find(|v| v.metadata.name.as_deref() == Some(name))
        .expect("VirtualMachine");
    let c = vm
        .status
        .as_ref()
        .and_then(|s| conditions::find(&s.conditions, type_))
        .unwrap_or_else(|| panic!("{type_} on {name}: {:?}", vm.status));
    (c.status.clone(), c.reason.clone(), c.message.clone())
}

/// The manifests' VirtualMachine `web-1` (deferred install) made Ready by
/// `check --apply` on a simulator: the simulator (kept while it runs), the
/// world, the sessions and a client of the test's own.
async fn web_1_on_the_simulator() -> (Simulator, World, VCenter, Client) {
    let sim = simulator(small()).await;
    let mut world = world_of(&manifests(&sim, "deferred", &["web-1"]));
    let vcenter = VCenter::default();
    converge(&mut world, &vcenter).await;
    let client = connect(&sim).await;
    (sim, world, vcenter, client)
}

/// The reference of the VM of the VirtualMachine `name`.
fn mo_ref_of(world: &World, name: &str) -> String {
    machine(world, name)
        .status
        .as_ref()
        .and_then(|s| s.mo_ref.clone())
        .expect("moref")
}

/// The manifests' class with CPU and memory hot add (the Provider offering both).
fn hot_add_manifests(sim: &Simulator, names: &[&str]) -> String {
    let text = manifests(sim, "deferred", names)
        .replace(
            "features: [hotAddCPU, vtpm, efiSecureBoot]",
            "features: [hotAddCPU, hotAddMemory, vtpm, efiSecureBoot]",
        )
        .replace(
            "  features: [hotAddCPU]\n",
            "  features: [hotAddCPU, hotAddMemory]\n",
        );
    assert!(text.contains("  features: [hotAddCPU, hotAddMemory]\n"));
    text
}

/// [`converge`], and the methods it called on the Provider's session.
async fn converge_counting(world: &mut World, vcenter: &VCenter) -> BTreeMap<&'static str, u64> {
    check::reconcile(world, vcenter, &conditions::now()).await;
    let provider = banlieue::api::NamespacedReference {
        namespace: "banlieue-system".into(),
        name: "vc".into(),
    };
    let client = vcenter.client(&provider).await.expect("session");
    let before = client.call_stats();
    converge(world, vcenter).await;
    calls_since(&client, &before).1
}

/// A VMClass edit reaches the running VM through `check`'s reconcilers:
/// more CPUs and memory on a VM with hot add are read back from vCenter
/// with the VM on and its boot time unchanged (no power cycle); fewer wait
/// with `Reconfigured=False PowerCycleRequired` and land once the VM is off.
/// vcsim 0.24 accepts any CPU or memory change on a running VM (it enforces
/// no hot-add rule), so that the decrease is never tried on the running VM
/// is proven by what is sent: no `ReconfigVM_Task` until it is off.
#[tokio::test]
async fn class_changes_reach_the_running_vm_live_or_at_the_next_power_off() {
    let sim = simulator(small()).await;
    let mut world = world_of(&hot_add_manifests(&sim, &["web-1"]));
    let vcenter = VCenter::default();
    converge(&mut world, &vcenter).await;
    let (ready, reason, message) = ready_of(&world, "web-1");
    assert_eq!(ready, "True", "{reason}: {message}");
    let mo_ref = mo_ref_of(&world, "web-1");
    let client = connect(&sim).await;
    let (cpus, memory, power, booted) = hardware(&client, &mo_ref).await;
    assert_eq!((cpus, memory, power.as_str()), (2, 2048, "poweredOn"));
    let host = world.vms[0].status.as_ref().and_then(|s| s.host.clone());
    assert!(
        host.as_deref().is_some_and(|h| h.starts_with("DC0_")),
        "the VirtualMachine names its host: {host:?}"
    );

    // More: live.
    world.classes[0].spec.hardware.cpus = 4;
    world.classes[0].spec.hardware.memory_mib = 4096;
    let methods = converge_counting(&mut world, &vcenter).await;
    assert_eq!(
        machine(&world, "web-1").spec.cpus,
        4,
        "the machine carries the shape"
    );
    assert_eq!(methods.get("ReconfigVM_Task"), Some(&1), "{methods:?}");
    for power_call in ["PowerOffVM_Task", "ShutdownGuest", "PowerOnVM_Task"] {
        assert!(!methods.contains_key(power_call), "{methods:?}");
    }
    assert_eq!(
        hardware(&client, &mo_ref).await,
        (4, 4096, "poweredOn".to_string(), booted.clone()),
        "read back from vCenter, no power cycle (same boot time)"
    );
    let (status, reason, _) = condition_of(&world, "web-1", "Reconfigured");
    assert_eq!((status.as_str(), reason.as_str()), ("True", "UpToDate"));

    // Fewer: waits for a power cycle, nothing sent.
    world.classes[0].spec.hardware.cpus = 2;
    world.classes[0].spec.hardware.memory_mib = 2048;
    let methods = converge_counting(&mut world, &vcenter).await;
    assert!(!methods.contains_key("ReconfigVM_Task"), "{methods:?}");
    assert_eq!(
        hardware(&client, &mo_ref).await,
        (4, 4096, "poweredOn".to_string(), booted),
        "never a surprise restart"
    );
    let (status, reason, message) = condition_of(&world, "web-1", "Reconfigured");
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("False", "PowerCycleRequired"),
        "{message}"
    );
    assert_eq!(ready_of(&world, "web-1").0, "True", "still Ready");

    // Powered off: it lands.
    world.vms[0].spec.desired_power_state = PowerState::PoweredOff;
    converge(&mut world, &vcenter).await;
    let (cpus, memory, power, _) = hardware(&client, &mo_ref).await;
    assert_eq!((cpus, memory, power.as_str()), (2, 2048, "poweredOff"));
    world.vms[0].spec.desired_power_state = PowerState::PoweredOn;
    converge(&mut world, &vcenter).await;
    let (cpus, memory, power, _) = hardware(&client, &mo_ref).await;
    assert_eq!((cpus, memory, power.as_str()), (2, 2048, "poweredOn"));
    let (status, reason, _) = condition_of(&world, "web-1", "Reconfigured");
    assert_eq!((status.as_str(), reason.as_str()), ("True", "UpToDate"));
    vcenter.close_all().await;
}

/// The VM's disk sizes in GiB, smallest first (vcsim moves an edited disk
/// to the end of the device list).
async fn disk_sizes(client: &Client, mo_ref: &str) -> Vec<i64> {
    let vm = read_vm(client, mo_ref, &["config.hardware.device"]).await;
    let mut sizes: Vec<i64> = vm
        .config
        .iter()
        .flat_map(|c| &c.hardware.device)
        .filter_map(|d| match d {
            AnyVirtualDevice::VirtualDisk(d) => Some(d.capacity_in_kb / 1024 / 1024),
            _ => None,
        })
        .collect();
    sizes.sort();
    sizes
}

/// A VMClass's disk edits reach the running VM through `check --apply`: a
/// grown disk and an added one are read back from vCenter with the VM on
/// and its boot time unchanged; a shrink is refused with
/// `Reconfigured=False DiskShrinkRefused` and nothing is sent; a disk
/// removed from the class is kept (`DiskKept`).
#[tokio::test]
async fn disk_changes_reach_the_running_vm_a_shrink_is_refused_a_removal_keeps_the_data() {
    let (_sim, mut world, vcenter, client) = web_1_on_the_simulator().await;
    let mo_ref = mo_ref_of(&world, "web-1");
    assert_eq!(disk_sizes(&client, &mo_ref).await, vec![3, 10]);
    let booted = hardware(&client, &mo_ref).await.3;

    fn hardware_of(world: &mut World) -> &mut banlieue::api::Hardware {
        &mut world.classes[0].spec.hardware
    }
    hardware_of(&mut world).disks[1].size_gib = 5;
    let mut logs = hardware_of(&mut world).disks[0].clone();
    logs.name = "logs".into();
    logs.size_gib = 2;
    hardware_of(&mut world).disks.push(logs);
    let methods = converge_counting(&mut world, &vcenter).await;
    assert_eq!(methods.get("ReconfigVM_Task"), Some(&1), "{methods:?}");
    assert_eq!(disk_sizes(&client, &mo_ref).await, vec![2, 5, 10]);
    let (_, _, power, boot) = hardware(&client, &mo_ref).await;
    assert_eq!((power.as_str(), boot), ("poweredOn", booted), "live");
    let (status, reason, message) = condition_of(&world, "web-1", "Reconfigured");
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("True", "UpToDate"),
        "{message}"
    );

    hardware_of(&mut world).disks[1].size_gib = 4;
    let methods = converge_counting(&mut world, &vcenter).await;
    assert!(!methods.contains_key("ReconfigVM_Task"), "{methods:?}");
    assert_eq!(disk_sizes(&client, &mo_ref).await, vec![2, 5, 10]);
    let (status, reason, message) = condition_of(&world, "web-1", "Reconfigured");
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("False", "DiskShrinkRefused"),
        "{message}"
    );
    assert!(message.contains("data"), "{message}");

    hardware_of(&mut world).disks[1].size_gib = 5;
    hardware_of(&mut world).disks.pop();
    let methods = converge_counting(&mut world, &vcenter).await;
    assert!(!methods.contains_key("ReconfigVM_Task"), "{methods:?}");
    assert_eq!(disk_sizes(&client, &mo_ref).await, vec![2, 5, 10], "kept");
    let (status, reason, message) = condition_of(&world, "web-1", "Reconfigured");
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("False", "DiskKept"),
        "{message}"
    );
    vcenter.close_all().await;
}

/// A resize stopped after its request is sent (not yet recorded) or after
/// its task is recorded: the re-run applies it once, never twice, never
/// none (the `ReconfigVM_Task` requests counted on the wire).
#[tokio::test]
async fn a_crash_during_a_resize_applies_it_once() {
    let sim = simulator(small()).await;
    let names = ["rs-sent", "rs-recorded"];
    let world = scheduled_world(&sim, &names).await;
    let client = connect(&sim).await;
    for (name, point) in names
        .into_iter()
        .zip([Checkpoint::ResizeSent, Checkpoint::ResizeRecorded])
    {
        let mut m = world
            .machines
            .iter()
            .find(|m| m.metadata.name.as_deref() == Some(name))
            .cloned()
            .expect("machine");
        let outcome = run_fresh(&world, &mut m, false, &mut Store::default()).await;
        assert_eq!(outcome.as_ref().ok(), Some(&Outcome::Ready), "{name}");
        let mo_ref = m
            .status
            .as_ref()
            .and_then(|s| s.mo_ref.clone())
            .expect("moref");
        // The class has CPU hot add: 2 -> 4 CPUs is a live change.
        m.spec.cpus = 4;
        let logs = CapturedLogs::default();
        let restarted = {
            let _wire = tracing::subscriber::set_default(logs.subscriber(tracing::Level::TRACE));
            let mut first = Store {
                crash_at: Some(point),
                ..Default::default()
            };
            let crashed = run_fresh(&world, &mut m, false, &mut first).await;
            assert!(
                matches!(&crashed, Err(banlieue::Error::Stopped(_))),
                "{point:?}: {crashed:?}"
            );
            let mut restarted = first.persisted.clone().expect("persisted");
            assert!(
                restarted
                    .status
                    .as_ref()
                    .is_some_and(|s| s.resize.is_some()),
                "{point:?}: recorded before it was sent"
            );
            let outcome = run_fresh(&world, &mut restarted, false, &mut Store::default()).await;
            assert_eq!(outcome.as_ref().ok(), Some(&Outcome::Ready), "{point:?}");
            restarted
        };
        let sent = logs
            .text()
            .lines()
            .filter(|l| l.contains("request: ") && l.contains("<ReconfigVM_Task"))
            .count();
        assert_eq!(sent, 1, "{point:?}: one request, never two");
        let (cpus, _, power, _) = hardware(&client, &mo_ref).await;
        assert_eq!(
            (cpus, power.as_str()),
            (4, "poweredOn"),
            "{point:?}: applied"
        );
        assert!(restarted
            .status
            .as_ref()
            .is_some_and(|s| s.resize.is_none()));
    }
}

/// `banlieue.io/restart-requested-at` restarts the guest once per value:
/// two reconciles of one value change the VM's boot time once, a new value
/// once more; the handled value is in the VirtualMachine's status.
#[tokio::test]
async fn a_restart_annotation_restarts_the_vm_once_per_value() {
    let (_sim, mut world, vcenter, client) = web_1_on_the_simulator().await;
    let mo_ref = mo_ref_of(&world, "web-1");
    let mut boots = vec![hardware(&client, &mo_ref).await.3];
    for value in [
        "2026-12-06T10:00:00Z",
        "2026-12-06T10:00:00Z",
        "2026-12-06T11:00:00Z",
    ] {
        // Boot times a second apart at least.
        tokio::time::sleep(Duration::from_millis(1100)).await;
        world.vms[0].metadata.annotations = Some(
            [(
                banlieue::api::RESTART_ANNOTATION.to_string(),
                value.to_string(),
            )]
            .into(),
        );
        converge(&mut world, &vcenter).await;
        let (_, _, power, boot) = hardware(&client, &mo_ref).await;
        assert_eq!(power, "poweredOn", "{value}");
        boots.push(boot);
        assert_eq!(
            world.vms[0]
                .status
                .as_ref()
                .and_then(|s| s.restarted_at.as_deref()),
            Some(value)
        );
    }
    assert_ne!(boots[1], boots[0], "restarted for the first value");
    assert_eq!(boots[2], boots[1], "not again for the same value");
    assert_ne!(boots[3], boots[2], "again for a new value");
    vcenter.close_all().await;
}

/// Two VirtualMachines of one class, each with its own identity: a static
/// address for eth0 in place of the class's, a host name, and user data from
/// a Secret in its namespace. `check --apply` clones both with their own
/// addresses and host names in guestinfo, the VM's user data after the
/// image's.
#[tokio::test]
async fn two_vms_of_one_class_get_their_own_identity_in_guestinfo() {
    let sim = simulator(small()).await;
    let mut text = manifests(&sim, "deferred", &[]);
    for (name, ip) in [("id-1", "10.0.0.31/24"), ("id-2", "10.0.0.32/24")] {
        text.push_str(&format!(
            "apiVersion: v1\nkind: Secret\nmetadata: {{ name: {name}-user-data, namespace: team-a }}\n\
             stringData: {{ userdata: \"#cloud-config\\nruncmd: [echo {name}]\\n\" }}\n---\n\
             apiVersion: banlieue.io/v1alpha1\nkind: VirtualMachine\nmetadata: {{ name: {name}, namespace: team-a }}\n\
             spec:\n  classRef: {{ name: web }}\n  imageRef: {{ name: golden }}\n  hostname: {name}.example.com\n\
             \x20 networkOverrides:\n    - {{ name: eth0, static: {{ address: {ip}, gateway: 10.0.0.1, nameservers: [10.0.0.2], searchDomains: [example.com] }} }}\n\
             \x20 cloudConfigs: [{{ secretRef: {{ name: {name}-user-data }} }}]\n---\n"
        ));
    }
    let mut world = world_of(&text);
    let vcenter = VCenter::default();
    converge(&mut world, &vcenter).await;
    let client = connect(&sim).await;
    for (name, ip) in [("id-1", "10.0.0.31/24"), ("id-2", "10.0.0.32/24")] {
        let (ready, reason, message) = ready_of(&world, name);
        assert_eq!(ready, "True", "{name}: {reason}: {message}");
        let status = machine(&world, name).status.clone().unwrap_or_default();
        let extra = extra_config_of(&client, &status.mo_ref.clone().expect("moref")).await;
        let meta = metadata(&extra);
        assert_eq!(meta["local-hostname"], format!("{name}.example.com"));
        let eth0 = &meta["network"]["ethernets"]["eth0"];
        assert_eq!(eth0["addresses"], serde_json::json!([ip]), "{meta}");
        assert_eq!(eth0["dhcp4"], false);
        assert_eq!(
            eth0["nameservers"],
            serde_json::json!({"addresses": ["10.0.0.2"], "search": ["example.com"]})
        );
        let user = user_data(&extra);
        let image_part = user.find("packages: [nginx]").expect("the image's part");
        let own_part = user
            .find(&format!("echo {name}"))
            .unwrap_or_else(|| panic!("{name}'s own part: {user}"));
        assert!(image_part < own_part, "the image's first: {user}");
    }
    vcenter.close_all().await;
}

#[tokio::test]
async fn a_crash_after_each_step_leaves_exactly_one_vm() {
    let sim = simulator(small()).await;
    let names = ["crash-sent", "crash-recorded", "crash-on"];
    let world = scheduled_world(&sim, &names).await;
    let client = connect(&sim).await;
    for (i, point) in [
        Checkpoint::CloneSent,
        Checkpoint::TaskRecorded,
        Checkpoint::PoweredOn,
    ]
    .into_iter()
    .enumerate()
    {
        let mut m = world
            .machines
            .iter()
            .find(|m| m.metadata.name.as_deref() == Some(names[i]))
            .cloned()
            .expect("machine");
        let uuid = identity::instance_uuid(&m);
        let vm_name = identity::vm_name(&m);
        let mut first = Store {
            crash_at: Some(point),
            ..Default::default()
        };
        let crashed = run_fresh(&world, &mut m, false, &mut first).await;
        assert!(crashed.is_err(), "{point:?}: {crashed:?}");
        assert_eq!(
            count(&client, &uuid, &vm_name).await,
            (1, 1),
            "{point:?}: the clone was made"
        );
        // The new process knows only what was persisted (nothing, for a crash
        // before the task reference was written).
        let mut restarted = first.persisted.clone().unwrap_or_else(|| {
            world
                .machines
                .iter()
                .find(|m| m.metadata.name.as_deref() == Some(names[i]))
                .cloned()
                .expect("machine")
        });
        let outcome = run_fresh(&world, &mut restarted, false, &mut Store::default()).await;
        assert_eq!(outcome.as_ref().ok(), Some(&Outcome::Ready), "{point:?}");
        assert_eq!(
            count(&client, &uuid, &vm_name).await,
            (1, 1),
            "{point:?}: exactly one VM"
        );
    }
    assert_eq!(
        all_vms(&client)
            .await
            .iter()
            .filter(|v| v.name.as_deref().is_some_and(|n| n.starts_with("team-a-")))
            .count(),
        3
    );
}

#[tokio::test]
async fn a_clone_request_lost_in_flight_and_sent_again_makes_one_vm() {
    // The clone takes 2 s to answer: the first process gives up (crashes)
    // while its request is in flight; the second sends its own.
    // `-unique-vm-names`: a second VM of the same name in a folder is refused, as on vCenter.
    let sim = simulator(SimulatorOptions {
        method_delays: vec![("CloneVM_Task".into(), Duration::from_secs(2))],
        extra_args: vec!["-unique-vm-names".into()],
        ..small()
    })
    .await;
    let world = scheduled_world(&sim, &["web-1"]).await;
    let original = world.machines[0].clone();
    let uuid = identity::instance_uuid(&original);
    let mut first = original.clone();
    let lost = tokio::time::timeout(
        Duration::from_millis(700),
        run_fresh(&world, &mut first, false, &mut Store::default()),
    )
    .await;
    assert!(lost.is_err(), "the first run was cut off mid-clone");
    let mut second = original.clone();
    let mut outcome = run_fresh(&world, &mut second, false, &mut Store::default()).await;
    for _ in 0..5 {
        if matches!(outcome, Ok(Outcome::Ready)) {
            break;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
        outcome = run_fresh(&world, &mut second, false, &mut Store::default()).await;
    }
    assert_eq!(outcome.as_ref().ok(), Some(&Outcome::Ready));
    let client = connect(&sim).await;
    assert_eq!(count(&client, &uuid, "team-a-web-1").await, (1, 1));
}

fn calls_since(
    client: &Client,
    before: &BTreeMap<&'static str, vsphere_client::MethodStats>,
) -> (u64, BTreeMap<&'static str, u64>) {
    let per_method: BTreeMap<&str, u64> = client
        .call_stats()
        .iter()
        .map(|(m, s)| (*m, s.calls - before.get(m).map(|b| b.calls).unwrap_or(0)))
        .filter(|(_, n)| *n > 0)
        .collect();
    (per_method.values().sum(), per_method)
}

#[tokio::test]
async fn soap_calls_per_vm_stay_few() {
    let sim = simulator(small()).await;
    let names = ["a", "b", "c", "d", "e", "f"];
    let vcenter = VCenter::default();
    let deadline = || Instant::now() + Duration::from_secs(60);

    // The first VM pays for resolving the placement (folder, pool, datastore,
    // port groups, the template's devices), cached for the session.
    let mut world = world_of(&manifests(&sim, "deferred", &names[..1]));
    check::reconcile(&mut world, &vcenter, &conditions::now()).await;
    let provider = banlieue::api::NamespacedReference {
        namespace: "banlieue-system".into(),
        name: "vc".into(),
    };
    let client = vcenter.client(&provider).await.expect("session");
    let before = client.call_stats();
    check::apply(&mut world, &vcenter, deadline(), &conditions::now()).await;
    let (first, first_methods) = calls_since(&client, &before);
    eprintln!("SOAP calls, first VM cloned -> Ready: {first} {first_methods:?}");

    // Five more on the same session: what each VM costs, amortised (the
    // first one, known from a run before, is found again too).
    let mut world = world_of(&manifests(&sim, "deferred", &names));
    check::reconcile(&mut world, &vcenter, &conditions::now()).await;
    let before = client.call_stats();
    check::apply(&mut world, &vcenter, deadline(), &conditions::now()).await;
    for name in names {
        assert_eq!(
            ready_of(&world, name).0,
            "True",
            "{name}: {:?}",
            ready_of(&world, name)
        );
    }
    let (next, next_methods) = calls_since(&client, &before);
    let per_vm = next as f64 / 5.0;
    eprintln!("SOAP calls, 5 more VMs cloned -> Ready (and 1 found again): {next} = {per_vm:.1}/VM {next_methods:?}");
    assert!(per_vm <= 12.0, "{per_vm} calls per VM: {next_methods:?}");
    assert_eq!(next_methods.get("CloneVM_Task"), Some(&5));

    // A re-run (a resync) clones nothing and reads each VM once.
    let before = client.call_stats();
    check::apply(&mut world, &vcenter, deadline(), &conditions::now()).await;
    let (resync, resync_methods) = calls_since(&client, &before);
    eprintln!("SOAP calls, resync of 6 Ready VMs: {resync} {resync_methods:?}");
    assert_eq!(
        resync_methods.keys().copied().collect::<Vec<_>>(),
        ["RetrievePropertiesEx"],
        "{resync_methods:?}"
    );
    assert_eq!(resync, names.len() as u64);
    vcenter.close_all().await;
}

#[test]
fn check_apply_twice_leaves_one_vm_per_virtual_machine() {
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let sim = runtime.block_on(simulator(small()));
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(
        dir.path().join("all.yaml"),
        manifests(&sim, "deferred", &["web-1", "web-2"]),
    )
    .expect("write");
    for run in 0..2 {
        let out = Command::new(env!("CARGO_BIN_EXE_banlieue"))
            .args(["check", "--apply", "--timeout", "60s", "-f"])
            .arg(dir.path())
            .output()
            .expect("run banlieue");
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "run {run}:\n{stdout}\n{stderr}");
        assert!(
            stderr.contains("2 VirtualMachine(s), 2 scheduled, 2 Ready"),
            "{stderr}"
        );
        let web1 = stdout
            .lines()
            .find(|l| l.starts_with("team-a/web-1"))
            .unwrap_or_default();
        assert!(web1.contains("PoweredOn"), "{stdout}");
        if run == 0 {
            assert!(stderr.contains("Cloning"), "events on stderr: {stderr}");
        } else {
            assert!(
                !stderr.contains("Cloning"),
                "the second run clones nothing: {stderr}"
            );
        }
    }
    let vms = runtime.block_on(async {
        let client = connect(&sim).await;
        all_vms(&client).await
    });
    let mut names: Vec<String> = vms
        .iter()
        .filter_map(|v| v.name.clone())
        .filter(|n| n.starts_with("team-a-"))
        .collect();
    names.sort();
    assert_eq!(names, ["team-a-web-1", "team-a-web-2"]);
}

#[tokio::test]
async fn one_update_stream_per_provider_reports_vm_changes_and_serves_resyncs_without_calls() {
    let sim = simulator(small()).await;
    let mut world = world_of(&manifests(&sim, "immediate", &["web-1"]));
    let vcenter = VCenter::new(banlieue::vsphere::vcenter::Options {
        watch_vms: true,
        ..Default::default()
    });
    check::reconcile(&mut world, &vcenter, &conditions::now()).await;
    let mut changes = vcenter.machine_changes().expect("the VM watch is on");
    let params =
        banlieue::controllers::provider::readiness::connect_params(&world.providers[0], &world)
            .expect("params");
    let session = vcenter.connect(&params).await.expect("connect");
    let mut m = world.machines[0].clone();
    let uuid = identity::instance_uuid(&m);
    let secrets =
        banlieue::controllers::vspheremachine::cloud_config_secrets(&m, &world).expect("secrets");
    let mut store = Store::default();
    let outcome = driver::reconcile(
        &mut m,
        false,
        &secrets,
        &session,
        &mut store,
        &driver::Options::default(),
    )
    .await;
    assert!(
        matches!(&outcome, Ok(Outcome::Waiting(w)) if w.contains("IP")),
        "{outcome:?}"
    );

    // The guest reports its address: the stream announces the VM's change.
    guest_reports_ip(connect(&sim).await, uuid.clone(), "10.0.0.10").await;
    let watch = session.watch().expect("watch");
    let announced = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            match changes.recv().await {
                Ok(changed)
                    if changed.eq_ignore_ascii_case(&uuid)
                        && watch
                            .by_uuid(&uuid)
                            .is_some_and(|vm| !vm.ip_addresses.is_empty()) =>
                {
                    return true
                }
                Ok(_) => continue,
                Err(_) => return false,
            }
        }
    })
    .await;
    assert_eq!(
        announced,
        Ok(true),
        "the IP arrived through the update stream"
    );

    // The reconcile it triggers, and any resync after, read the VM from the
    // stream's cache: no SOAP call at all.
    let before = session.client().call_stats();
    let outcome = driver::reconcile(
        &mut m,
        false,
        &secrets,
        &session,
        &mut store,
        &driver::Options::default(),
    )
    .await;
    assert_eq!(outcome.as_ref().ok(), Some(&Outcome::Ready));
    assert_eq!(
        m.status.as_ref().map(|s| s.ip_addresses.clone()),
        Some(vec!["10.0.0.10".to_string()])
    );
    let resync = driver::reconcile(
        &mut m,
        false,
        &secrets,
        &session,
        &mut store,
        &driver::Options::default(),
    )
    .await;
    assert_eq!(resync.as_ref().ok(), Some(&Outcome::Ready));
    let (calls, methods) = calls_since(session.client(), &before);
    let waits = methods.get("WaitForUpdatesEx").copied().unwrap_or(0);
    assert_eq!(
        calls - waits,
        0,
        "only the stream's own WaitForUpdatesEx: {methods:?}"
    );
    vcenter.close_all().await;
}

/// Two VirtualMachines whose class takes eth0 from one built-in IPPool:
/// `check --apply` clones both with two distinct addresses of the pool,
/// each in its guestinfo network config exactly as a static address.
#[tokio::test]
async fn two_vms_from_one_pool_get_distinct_addresses_in_guestinfo() {
    let sim = simulator(small()).await;
    let text = manifests(&sim, "deferred", &["p1", "p2"]).replace(
        "ipam: { static: { address: 10.0.0.10/24, gateway: 10.0.0.1, nameservers: [10.0.0.2] } }",
        "ipam: { pool: { name: prod } }",
    ) + "apiVersion: banlieue.io/v1alpha1\nkind: IPPool\nmetadata: { name: prod, namespace: banlieue-system }\n\
         spec: { addresses: [10.0.0.20-10.0.0.29], prefix: 24, gateway: 10.0.0.1, nameservers: [10.0.0.2] }\n";
    assert!(
        text.contains("pool: { name: prod }"),
        "the class asks for the pool"
    );
    let mut world = world_of(&text);
    let vcenter = VCenter::default();
    converge(&mut world, &vcenter).await;
    let client = connect(&sim).await;
    let mut addresses = Vec::new();
    for name in ["p1", "p2"] {
        let (ready, reason, message) = ready_of(&world, name);
        assert_eq!(ready, "True", "{name}: {reason}: {message}");
        let status = machine(&world, name).status.clone().unwrap_or_default();
        let extra = extra_config_of(&client, &status.mo_ref.clone().expect("moref")).await;
        let meta = metadata(&extra);
        let eth0 = &meta["network"]["ethernets"]["eth0"];
        assert_eq!(eth0["dhcp4"], false, "{meta}");
        assert_eq!(
            eth0["routes"],
            serde_json::json!([{"to": "default", "via": "10.0.0.1"}])
        );
        addresses.push(
            eth0["addresses"][0]
                .as_str()
                .unwrap_or_default()
                .to_string(),
        );
    }
    addresses.sort();
    assert_eq!(addresses, ["10.0.0.20/24", "10.0.0.21/24"]);
    vcenter.close_all().await;
}
