//! A managed object of vsphere-client's `admin` family against the
//! simulator: a standard port group added through the host's
//! `HostNetworkSystem` (its `Vim` method and request type exist only with
//! the feature) and read back through the system's own properties typed as
//! `mo::HostNetworkSystem`, and the host's `config` (a property the feature
//! compiles in) typed.
//!
//! Built only with the feature (`required-features` in Cargo.toml):
//! `make test` runs it in its pass with the type families compiled in.

use vsphere_client::types::{HostNetworkPolicy, HostPortGroupSpec};
use vsphere_client::{mo, paths, Client};
use vsphere_tests::{Simulator, SimulatorOptions};

#[tokio::test]
async fn a_port_group_added_through_the_host_network_system_is_in_the_hosts_config() {
    let sim = tokio::task::spawn_blocking(|| Simulator::start(SimulatorOptions::default()))
        .await
        .expect("join")
        .unwrap_or_else(|e| panic!("simulator: {e}"));
    let client = Client::builder(&sim.sdk_url())
        .credentials(sim.username(), sim.password())
        .insecure(true)
        .keepalive(None)
        .connect()
        .await
        .expect("connect");
    let root = client.service_content().root_folder.clone();
    let hosts = client
        .properties::<mo::HostSystem>(&["name", "configManager.networkSystem"])
        .unwrap()
        .in_container(&root)
        .collect_all()
        .await
        .expect("hosts");
    let host = hosts.first().expect("a host");
    let network_system = host
        .config_manager
        .as_ref()
        .and_then(|c| c.network_system.clone())
        .expect("the host's network system");

    let spec = HostPortGroupSpec {
        name: "banlieue-vlan-42".into(),
        vlan_id: 42,
        vswitch_name: "vSwitch0".into(),
        policy: HostNetworkPolicy::default(),
    };
    client
        .vim()
        .add_port_group(&network_system, &spec)
        .await
        .expect("AddPortGroup");

    let system = client
        .properties::<mo::HostNetworkSystem>(&["networkInfo.portgroup"])
        .unwrap()
        .get(&network_system)
        .await
        .expect("the network system's properties");
    let groups = system
        .network_info
        .as_ref()
        .map(|n| n.portgroup.as_slice())
        .unwrap_or_default();
    let added = groups
        .iter()
        .find(|g| g.spec.name == "banlieue-vlan-42")
        .unwrap_or_else(|| panic!("the port group is not in {groups:?}"));
    assert_eq!(added.spec.vlan_id, 42);
    assert_eq!(added.spec.vswitch_name, "vSwitch0");

    // The host's configuration tree is compiled in with the feature too
    // (the simulator keeps the network system's port groups apart from it:
    // the host's own are there, typed).
    let host = client
        .properties::<mo::HostSystem>(&[paths::HostSystem.config().network().into_path()])
        .unwrap()
        .get(&host.mo_ref)
        .await
        .expect("the host's network configuration");
    let groups = host
        .config
        .as_ref()
        .and_then(|c| c.network.as_ref())
        .map(|n| n.portgroup.as_slice())
        .unwrap_or_default();
    let vm_network = groups
        .iter()
        .find(|g| g.spec.name == "VM Network")
        .unwrap_or_else(|| panic!("no VM Network in the host's config.network: {groups:?}"));
    assert_eq!(vm_network.spec.vswitch_name, "vSwitch0");
    assert_eq!(
        vm_network.vswitch.as_deref(),
        Some("key-vim.host.VirtualSwitch-vSwitch0")
    );
    let _ = client.close().await;
}
