//! Clone a template into a new VM with its own shape, power it on and wait
//! for its IP address.
//!
//! ```text
//! GOVC_URL=https://user:pass@vcenter/sdk GOVC_INSECURE=1 \
//!     cargo run -p vsphere-client --example clone_and_power_on -- TEMPLATE NEW_NAME [NETWORK]
//! ```
//!
//! The clone gets a fresh instance UUID, chosen here before cloning: if this
//! program died mid-clone, the VM could be found again with
//! `client.search_vm_by_uuid(uuid, true, None)` instead of cloning twice.

use std::time::Duration;

use vsphere_client::vm::{CloneSpec, ConfigSpec};
use vsphere_client::{Client, ErrorKind};

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (template, name) = match args.as_slice() {
        [template, name, ..] => (template.as_str(), name.as_str()),
        _ => return Err("usage: clone_and_power_on TEMPLATE NEW_NAME [NETWORK]".into()),
    };
    let url = std::env::var("GOVC_URL").map_err(|_| "set GOVC_URL=https://user:pass@host/sdk")?;
    let insecure = std::env::var("GOVC_INSECURE").is_ok_and(|v| v == "1" || v == "true");
    let client = Client::builder(&url).insecure(insecure).connect().await?;

    let finder = client.finder();
    let source = finder.virtual_machine(template).await?;
    // The datacenter's VM folder, and the only cluster's or host's root
    // pool (an error naming each when there are several: GOVC_POOL picks one).
    let folder = finder.default_folder().await?;
    let pool = match std::env::var("GOVC_POOL") {
        Ok(pool) => finder.resource_pool(&pool).await?,
        Err(_) => finder.default_resource_pool().await?,
    };

    let instance_uuid = new_uuid();
    let mut config = ConfigSpec::new()
        .cpus(2)
        .memory_mb(2048)
        .guestinfo("metadata", format!("{{\"local-hostname\": \"{name}\"}}"))
        .guestinfo("metadata.encoding", "json");
    if let Some(network) = args.get(2) {
        config = config.replace_nics().nic(finder.network(network).await?);
    }
    let spec = CloneSpec::new(&folder)
        .pool(&pool)
        .config(config)
        .instance_uuid(&instance_uuid)
        .power_on();

    println!(
        "cloning {} to {name} (instance UUID {instance_uuid})",
        source.path
    );
    let vm = client.vm(source.reference).clone_vm(name, &spec).await?;
    println!("{name} is {:?}", vm.state().await?.power_state);
    match vm.wait_for_ip(Duration::from_secs(300)).await {
        Ok(ip) => println!("{name} has IP address {ip}"),
        Err(err) if err.kind() == ErrorKind::Timeout => {
            println!("{name} reported no IP address (no VMware tools?)")
        }
        Err(err) => return Err(err.into()),
    }
    client.close().await?;
    Ok(())
}

/// A random (version 4) UUID from the system's randomness.
fn new_uuid() -> String {
    use std::io::Read;
    let mut bytes = [0u8; 16];
    let random = std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut bytes));
    match random {
        Ok(()) => {}
        Err(_) => {
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or_default();
            bytes.copy_from_slice(&nanos.to_le_bytes());
        }
    }
    bytes[6] = (bytes[6] & 0x0f) | 0x40;
    bytes[8] = (bytes[8] & 0x3f) | 0x80;
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &hex[..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..]
    )
}
