//! Watch the power state of every VM: each change is printed as it happens
//! (WaitForUpdatesEx, no polling), VMs created later included.
//!
//! ```text
//! GOVC_URL=https://user:pass@vcenter/sdk GOVC_INSECURE=1 \
//!     cargo run -p vsphere-client --example watch_power_state -- [MAX_CHANGES]
//! ```
//!
//! Stops after MAX_CHANGES changes (default: never, Ctrl-C ends it and the
//! server drops the watch's collector with the session); a watch that ends
//! normally destroys its collector on the way out.

use vsphere_client::property::UpdateKind;
use vsphere_client::{mo, Client};

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let max_changes: Option<usize> = std::env::args().nth(1).map(|n| n.parse()).transpose()?;
    let url = std::env::var("GOVC_URL").map_err(|_| "set GOVC_URL=https://user:pass@host/sdk")?;
    let insecure = std::env::var("GOVC_INSECURE").is_ok_and(|v| v == "1" || v == "true");
    let client = Client::builder(&url).insecure(insecure).connect().await?;

    let root = client.service_content().root_folder.clone();
    let mut changes = client
        .properties::<mo::VirtualMachine>(&["name", "runtime.powerState"])?
        .watch_container(&root)
        .await?;
    let mut seen = 0;
    loop {
        let change = changes.next().await?;
        let vm = &change.object;
        let name = vm.name.as_deref().unwrap_or("?");
        let state = vm
            .runtime
            .as_ref()
            .map(|r| r.power_state.as_str())
            .unwrap_or("?");
        match change.kind {
            UpdateKind::Enter => println!("{name}: {state}"),
            UpdateKind::Modify => println!("{name}: now {state}"),
            UpdateKind::Leave => println!("{name}: gone"),
        }
        seen += 1;
        if max_changes.is_some_and(|max| seen >= max) {
            break;
        }
    }
    changes.close().await?;
    client.close().await?;
    Ok(())
}
