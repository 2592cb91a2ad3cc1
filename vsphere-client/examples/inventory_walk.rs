//! Walk the inventory: datacenters, clusters, hosts, datastores, networks,
//! then every VM page by page with a few properties.
//!
//! ```text
//! GOVC_URL=https://user:pass@vcenter/sdk GOVC_INSECURE=1 \
//!     cargo run -p vsphere-client --example inventory_walk
//! ```
//!
//! Each list is one round trip (per page), whatever the inventory's size;
//! VMs arrive 100 at a time, so memory stays flat on a large vCenter.

use vsphere_client::inventory::NetworkKind;
use vsphere_client::{mo, Client};

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let url = std::env::var("GOVC_URL").map_err(|_| "set GOVC_URL=https://user:pass@host/sdk")?;
    let insecure = std::env::var("GOVC_INSECURE").is_ok_and(|v| v == "1" || v == "true");
    let client = Client::builder(&url).insecure(insecure).connect().await?;
    let finder = client.finder();

    for dc in finder.datacenter_objects().await? {
        println!("datacenter {}", dc.path);
        let in_dc = client.finder().under(dc.reference.clone());
        for cluster in in_dc.clusters().await? {
            let hosts = cluster.host.as_ref().map_or(0, Vec::len);
            println!(
                "  cluster {} ({hosts} hosts)",
                cluster.name.unwrap_or_default()
            );
        }
        for host in in_dc.hosts().await? {
            let runtime = host.runtime.unwrap_or_default();
            println!(
                "  host {} {} {}",
                host.name.unwrap_or_default(),
                runtime.connection_state.as_str(),
                runtime.power_state.as_str()
            );
        }
        for ds in in_dc.datastores().await? {
            let summary = ds.summary.unwrap_or_default();
            println!(
                "  datastore {} {} GiB free of {} GiB",
                summary.name,
                summary.free_space >> 30,
                summary.capacity >> 30
            );
        }
        for network in in_dc.networks().await? {
            let kind = match network.kind() {
                NetworkKind::Standard => "standard",
                NetworkKind::Distributed { .. } => "distributed",
                NetworkKind::Opaque => "opaque",
            };
            println!("  network {} ({kind})", network.path());
        }
    }

    // Every VM under the root folder, a page at a time.
    let root = client.service_content().root_folder.clone();
    let mut pages = client
        .properties::<mo::VirtualMachine>(&[
            "name",
            "runtime.powerState",
            "guest.ipAddress",
            "config.template",
        ])?
        .max_objects(100)
        .in_container(&root);
    while let Some(page) = pages.next_page().await? {
        for vm in page {
            let state = vm
                .runtime
                .map(|r| r.power_state.as_str().to_string())
                .unwrap_or_default();
            let ip = vm.guest.and_then(|g| g.ip_address).unwrap_or_default();
            let template = if vm.config.is_some_and(|c| c.template) {
                " (template)"
            } else {
                ""
            };
            println!("vm {}{template} {state} {ip}", vm.name.unwrap_or_default());
        }
    }
    println!(
        "{} VMs in {} pages",
        pages.objects_read(),
        pages.pages_read()
    );
    client.close().await?;
    Ok(())
}
