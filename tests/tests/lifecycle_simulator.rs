//! The VM lifecycle against the simulator: clone with a config spec (checked
//! back through properties), reconfigure, power, guest shutdown, wait for an
//! IP address, destroy, mark as template.
//!
//! govmomi 0.24's simulator applies only `extraConfig`, `instanceUuid` and
//! device changes of a clone's config spec (CPUs, memory and firmware are
//! copied from the source); those are checked through `reconfigure`, which it
//! applies in full.

use std::time::Duration;

use vsphere_client::inventory::NetworkKind;
use vsphere_client::types::{
    AnyOptionValue, AnyVirtualDevice, AnyVirtualDeviceBackingInfo, VirtualMachinePowerState,
};
use vsphere_client::vm::{CloneSpec, ConfigSpec, DiskProvisioning, Firmware};
use vsphere_client::xml::Value;
use vsphere_client::{mo, Client, ErrorKind};
use vsphere_tests::{Simulator, SimulatorOptions, Template};

async fn simulator(options: SimulatorOptions) -> Simulator {
    tokio::task::spawn_blocking(move || Simulator::start(options))
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

fn with_template() -> SimulatorOptions {
    SimulatorOptions {
        templates: vec![Template::everywhere("golden")],
        ..Default::default()
    }
}

const INSTANCE_UUID: &str = "5a0d3c18-8e4f-4c1b-9d2a-3f7e6b5c4d3e";

fn extra_config(vm: &mo::VirtualMachine, key: &str) -> Option<String> {
    vm.config
        .as_ref()?
        .extra_config
        .iter()
        .find_map(|o| match o {
            AnyOptionValue::OptionValue(o) if o.key == key => match &o.value {
                Some(Value::String(s)) => Some(s.clone()),
                _ => None,
            },
            _ => None,
        })
}

fn disks(vm: &mo::VirtualMachine) -> Vec<i64> {
    vm.config
        .as_ref()
        .map(|c| {
            c.hardware
                .device
                .iter()
                .filter_map(|d| match d {
                    AnyVirtualDevice::VirtualDisk(d) => Some(d.capacity_in_kb),
                    _ => None,
                })
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test]
async fn clone_a_template_with_a_full_config_spec() {
    let sim = simulator(with_template()).await;
    let client = connect(&sim).await;
    let finder = client.finder().in_datacenter("DC0");
    let template = client.vm(finder.virtual_machine("golden").await.unwrap().reference);
    let folder = finder.find_one("vm").await.unwrap().reference;
    let cluster = finder.clusters().await.unwrap().remove(0);
    let pool = cluster.resource_pool.clone().expect("root pool");
    let datastore = finder.datastores().await.unwrap().remove(0).mo_ref;
    let dvpg = finder
        .networks()
        .await
        .unwrap()
        .into_iter()
        .find(|n| {
            matches!(n.kind(), NetworkKind::Distributed { .. }) && !n.name().contains("Uplink")
        })
        .expect("a distributed port group");
    let source = client
        .properties::<mo::VirtualMachine>(&["config.hardware.device"])
        .unwrap()
        .get(template.reference())
        .await
        .unwrap();
    let source_disks = disks(&source);
    assert!(!source_disks.is_empty());

    let config = ConfigSpec::new()
        .grow_disk(0, source_disks[0] + 1024 * 1024)
        .add_disk(2 * 1024 * 1024, DiskProvisioning::Thin, None)
        .replace_nics()
        .nic(dvpg.clone())
        .vtpm()
        .guestinfo("userdata", "I2Nsb3VkLWNvbmZpZwo=")
        .guestinfo("userdata.encoding", "base64")
        .extra_config("disk.EnableUUID", "TRUE");
    let spec = CloneSpec::new(folder.clone())
        .pool(pool.clone())
        .datastore(datastore.clone())
        .config(config)
        .instance_uuid(INSTANCE_UUID)
        .power_on();
    let vm = match template.clone_vm("web-1", &spec).await {
        Ok(vm) => vm,
        Err(err) => panic!("clone: {err:?}\n{}", sim.log()),
    };

    let got = client
        .properties::<mo::VirtualMachine>(&[
            "name",
            "parent",
            "resourcePool",
            "datastore",
            "config.instanceUuid",
            "config.extraConfig",
            "config.hardware.device",
            "config.template",
            "runtime.powerState",
        ])
        .unwrap()
        .get(vm.reference())
        .await
        .unwrap();
    assert_eq!(got.name.as_deref(), Some("web-1"));
    assert_eq!(got.parent.as_ref(), Some(&folder));
    assert_eq!(got.resource_pool.as_ref(), Some(&pool));
    assert!(got.datastore.as_ref().unwrap().contains(&datastore));
    let config = got.config.as_ref().unwrap();
    assert_eq!(config.instance_uuid.as_deref(), Some(INSTANCE_UUID));
    assert!(!config.template);
    assert_eq!(
        got.runtime.as_ref().unwrap().power_state,
        VirtualMachinePowerState::PoweredOn
    );
    assert_eq!(
        extra_config(&got, "guestinfo.userdata").as_deref(),
        Some("I2Nsb3VkLWNvbmZpZwo=")
    );
    assert_eq!(
        extra_config(&got, "guestinfo.userdata.encoding").as_deref(),
        Some("base64")
    );
    assert_eq!(
        extra_config(&got, "disk.EnableUUID").as_deref(),
        Some("TRUE")
    );
    let got_disks = disks(&got);
    assert_eq!(got_disks.len(), source_disks.len() + 1, "{got_disks:?}");
    assert!(
        got_disks.contains(&(2 * 1024 * 1024)),
        "the added disk: {got_disks:?}"
    );
    assert_eq!(
        got_disks[0],
        source_disks[0] + 1024 * 1024,
        "the first disk grown by 1 GiB"
    );
    let devices = &config.hardware.device;
    assert!(
        devices
            .iter()
            .any(|d| matches!(d, AnyVirtualDevice::VirtualTPM(_))),
        "vTPM"
    );
    let nics: Vec<&AnyVirtualDevice> = devices
        .iter()
        .filter(|d| {
            matches!(
                d,
                AnyVirtualDevice::VirtualVmxnet3(_) | AnyVirtualDevice::VirtualE1000(_)
            )
        })
        .collect();
    assert_eq!(nics.len(), 1, "the template's NIC replaced: {nics:?}");
    let AnyVirtualDevice::VirtualVmxnet3(nic) = nics[0] else {
        panic!("{:?}", nics[0])
    };
    let NetworkKind::Distributed { portgroup_key, .. } = dvpg.kind() else {
        unreachable!()
    };
    match &nic.backing {
        Some(
            AnyVirtualDeviceBackingInfo::VirtualEthernetCardDistributedVirtualPortBackingInfo(b),
        ) => {
            assert_eq!(b.port.portgroup_key.as_ref(), Some(portgroup_key));
        }
        other => panic!("{other:?}"),
    }

    // Found again by instance UUID (what a controller does after a crash).
    assert_eq!(
        client
            .search_vm_by_uuid(INSTANCE_UUID, true, None)
            .await
            .unwrap()
            .as_ref(),
        Some(vm.reference())
    );

    // What the simulator ignores at clone time, through reconfigure.
    vm.power_off().await.unwrap();
    vm.reconfigure(
        &ConfigSpec::new()
            .cpus(4)
            .cores_per_socket(2)
            .memory_mb(4096)
            .cpu_hot_add(true)
            .memory_hot_add(true)
            .firmware(Firmware::Efi { secure_boot: true }),
    )
    .await
    .expect("reconfigure");
    let shaped = client
        .properties::<mo::VirtualMachine>(&[
            "config.hardware.numCPU",
            "config.hardware.numCoresPerSocket",
            "config.hardware.memoryMB",
            "config.firmware",
            "config.bootOptions",
            "config.cpuHotAddEnabled",
            "config.memoryHotAddEnabled",
        ])
        .unwrap()
        .get(vm.reference())
        .await
        .unwrap();
    let c = shaped.config.unwrap();
    assert_eq!(
        (c.hardware.num_cpu, c.hardware.num_cores_per_socket),
        (4, Some(2))
    );
    assert_eq!(c.hardware.memory_mb, 4096);
    assert_eq!(c.firmware.as_deref(), Some("efi"));
    assert_eq!(
        c.boot_options.and_then(|b| b.efi_secure_boot_enabled),
        Some(true)
    );
    assert_eq!(
        (c.cpu_hot_add_enabled, c.memory_hot_add_enabled),
        (Some(true), Some(true))
    );
}

#[tokio::test]
async fn bad_clone_requests_fail_before_the_clone() {
    let sim = simulator(with_template()).await;
    let client = connect(&sim).await;
    let finder = client.finder();
    let template = client.vm(finder.virtual_machine("golden").await.unwrap().reference);
    let folder = finder.find_one("vm").await.unwrap().reference;
    let spec = CloneSpec::new(folder.clone()).linked();
    let err = template.clone_vm("linked", &spec).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument);
    assert!(err.to_string().contains("snapshot"), "{err}");
    let err = template
        .clone_vm(
            "x",
            &CloneSpec::new(folder.clone()).instance_uuid("not-a-uuid"),
        )
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument);
    let err = template
        .clone_vm(
            "x",
            &CloneSpec::new(folder).config(ConfigSpec::new().firmware(Firmware::Bios).vtpm()),
        )
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument);
    assert_eq!(
        client
            .call_stats()
            .get("CloneVM_Task")
            .map_or(0, |s| s.calls),
        0
    );
}

#[tokio::test]
async fn power_operations_guest_shutdown_ip_destroy_and_template() {
    let sim = simulator(SimulatorOptions::default()).await;
    let client = connect(&sim).await;
    let vm = client.vm(client
        .finder()
        .virtual_machine("DC0_H0_VM0")
        .await
        .unwrap()
        .reference);
    assert_eq!(
        vm.state().await.unwrap().power_state,
        VirtualMachinePowerState::PoweredOn
    );

    // Graceful shutdown through the guest; the VM is seen off through updates.
    assert!(
        vm.shutdown(Duration::from_secs(20))
            .await
            .expect("shutdown"),
        "graceful"
    );
    assert_eq!(
        vm.state().await.unwrap().power_state,
        VirtualMachinePowerState::PoweredOff
    );
    // Already off: nothing to do.
    assert!(vm.shutdown(Duration::from_secs(5)).await.unwrap());
    let err = vm.power_off().await.unwrap_err();
    assert_eq!(
        err.fault().and_then(|f| f.type_name()),
        Some("InvalidPowerState"),
        "{err}"
    );

    vm.power_on().await.unwrap();
    vm.reset().await.unwrap();
    vm.suspend().await.unwrap();
    assert_eq!(
        vm.state().await.unwrap().power_state,
        VirtualMachinePowerState::Suspended
    );
    vm.power_on().await.unwrap();

    // The simulator sets the guest IP from the `SET.guest.ipAddress` key:
    // the waiter sees it arrive through WaitForUpdatesEx.
    let waiter = {
        let vm = vm.clone();
        tokio::spawn(async move { vm.wait_for_ip(Duration::from_secs(20)).await })
    };
    tokio::time::sleep(Duration::from_millis(500)).await;
    vm.reconfigure(&ConfigSpec::new().extra_config("SET.guest.ipAddress", "10.1.2.3"))
        .await
        .unwrap();
    assert_eq!(waiter.await.unwrap().expect("an IP"), "10.1.2.3");
    assert_eq!(
        vm.state().await.unwrap().ip_address.as_deref(),
        Some("10.1.2.3")
    );

    // Destroying a running VM fails with its typed fault; off, it goes.
    let err = vm.destroy().await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Fault);
    vm.power_off().await.unwrap();
    let other = client.vm(client
        .finder()
        .virtual_machine("DC0_H0_VM1")
        .await
        .unwrap()
        .reference);
    other.power_off().await.unwrap();
    other.mark_as_template().await.unwrap();
    assert!(other.state().await.unwrap().template);
    assert_eq!(
        client.finder().templates().await.unwrap()[0].mo_ref,
        *other.reference()
    );
    vm.destroy().await.expect("destroy");
    let err = vm.state().await.unwrap_err();
    assert_eq!(
        err.fault().and_then(|f| f.type_name()),
        Some("ManagedObjectNotFound"),
        "{err}"
    );
    assert!(client
        .finder()
        .virtual_machines("DC0_H0_VM0")
        .await
        .unwrap()
        .is_empty());
}

#[tokio::test]
async fn waiting_for_an_ip_times_out() {
    let sim = simulator(SimulatorOptions::default()).await;
    let client = connect(&sim).await;
    let vm = client.vm(client
        .finder()
        .virtual_machine("DC0_H0_VM0")
        .await
        .unwrap()
        .reference);
    let started = std::time::Instant::now();
    let err = vm.wait_for_ip(Duration::from_secs(1)).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Timeout, "{err}");
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[tokio::test]
async fn a_linked_clone_from_a_snapshot() {
    let sim = simulator(SimulatorOptions::default()).await;
    let client = connect(&sim).await;
    let finder = client.finder();
    let source = client.vm(finder
        .virtual_machine("DC0_H0_VM0")
        .await
        .unwrap()
        .reference);
    let snapshot = client
        .vim()
        .create_snapshot_task(source.reference(), "base", None, false, false)
        .await
        .unwrap();
    client.task(snapshot).wait().await.expect("snapshot");
    let folder = finder.find_one("vm").await.unwrap().reference;
    let clone = source
        .clone_vm("linked-1", &CloneSpec::new(folder).linked())
        .await
        .expect("linked clone");
    assert_eq!(
        finder.virtual_machine("linked-1").await.unwrap().reference,
        *clone.reference()
    );
}
