//! The crate's quick start as a program: connect, list VMs with a few
//! properties, clone a template, power the clone on, watch it change, tell
//! errors apart, clean up. `make demo` runs it against the simulator.
//!
//! ```text
//! GOVC_URL=vcenter.example.com GOVC_USERNAME=administrator@vsphere.local GOVC_PASSWORD=... \
//! GOVC_TLS_CA_CERTS=/etc/ssl/vcenter-ca.pem \
//!     cargo run -p vsphere-client --example quickstart -- [DATACENTER [TEMPLATE [CLUSTER]]]
//! ```
//!
//! `GOVC_INSECURE=1` instead of `GOVC_TLS_CA_CERTS` accepts any certificate
//! (a lab only). The defaults are the simulator's: `DC0`, `golden`, `DC0_C0`.
//! The clone is called `quickstart-1` and destroyed at the end.

use vsphere_client::property::UpdateKind;
use vsphere_client::types::InvalidPowerState;
use vsphere_client::vm::{CloneSpec, ConfigSpec};
use vsphere_client::{mo, paths, Client};

#[tokio::main(flavor = "current_thread")]
async fn main() {
    if let Err(err) = run().await {
        // The error with its chain of causes, on one line.
        eprintln!("quickstart: {}", vsphere_client::report(&*err));
        std::process::exit(1);
    }
}

async fn run() -> Result<(), Box<dyn std::error::Error>> {
    let env = |name: &str| std::env::var(name).map_err(|_| format!("set {name}"));
    let args: Vec<String> = std::env::args().skip(1).collect();
    let arg = |i: usize, default: &'static str| args.get(i).map_or(default, String::as_str);
    let (datacenter, template, cluster) = (arg(0, "DC0"), arg(1, "golden"), arg(2, "DC0_C0"));

    // Connect: verify vCenter's certificate against its CA bundle, or, in a
    // lab, accept any certificate.
    let builder = Client::builder(&env("GOVC_URL")?)
        .credentials(env("GOVC_USERNAME")?, env("GOVC_PASSWORD")?);
    let builder = match std::env::var("GOVC_TLS_CA_CERTS") {
        Ok(ca_file) => builder.ca_bundle_file(ca_file)?,
        Err(_) => builder.insecure(std::env::var("GOVC_INSECURE").is_ok_and(|v| v == "1")),
    };
    let client = builder.connect().await?;
    println!("connected to {}", client.service_content().about.full_name);

    // List VMs with a few properties: one round trip per page of objects.
    // Typed paths are checked by the compiler; strings work too.
    let root = client.service_content().root_folder.clone();
    let p = paths::VirtualMachine;
    let vms = client
        .properties::<mo::VirtualMachine>(&[
            p.name(),
            p.runtime().power_state(),
            p.summary().config().num_cpu(),
        ])?
        .in_container(&root)
        .collect_all()
        .await?;
    for vm in &vms {
        let name = vm.name.as_deref().unwrap_or("?");
        let power = vm.runtime.as_ref().map_or("?", |r| r.power_state.as_str());
        let cpus = vm.summary.as_ref().and_then(|s| s.config.num_cpu);
        println!("{name:24} {power:12} {cpus:?} CPUs");
    }

    // Clone a template into the datacenter's VM folder with its own shape,
    // wait for the clone task, power the clone on.
    let finder = client.finder().in_datacenter(datacenter);
    let source = client.vm(finder.virtual_machine(template).await?.reference);
    let folder = finder.default_folder().await?;
    let pool = finder
        .resource_pool(&format!("{cluster}/Resources"))
        .await?;
    let spec = CloneSpec::new(&folder)
        .pool(&pool)
        .config(ConfigSpec::new().cpus(2).memory_mb(2048));
    let vm = source.clone_vm("quickstart-1", &spec).await?;
    vm.power_on().await?;
    println!("quickstart-1 is {:?}", vm.state().await?.power_state);

    // Watch it: the first change reports the VM as it is (Enter), then each
    // change as it happens (WaitForUpdatesEx, no polling).
    let mut changes = client
        .properties::<mo::VirtualMachine>(&["name", "runtime.powerState"])?
        .watch(std::slice::from_ref(vm.reference()))
        .await?;
    for _ in 0..2 {
        let change = changes.next().await?;
        let power = change
            .object
            .runtime
            .as_ref()
            .map(|r| r.power_state.as_str());
        println!(
            "{}: {} {power:?}",
            change.kind,
            change.object.name.as_deref().unwrap_or("?")
        );
        if change.kind == UpdateKind::Enter {
            vm.power_off().await?;
        }
    }
    changes.close().await?;

    // Errors: branch on the typed vSphere fault (subtypes included), or on
    // err.kind() for transport, timeout, TLS, login and the like. The VM is
    // off already, so powering it off again is refused.
    match vm.power_off().await {
        Err(err) if err.is_fault::<InvalidPowerState>() => {
            println!("as expected: {}", err.report())
        }
        Err(err) => return Err(err.into()),
        Ok(()) => return Err("a VM that was off was powered off again".into()),
    }

    vm.destroy().await?;
    client.close().await?;
    Ok(())
}
