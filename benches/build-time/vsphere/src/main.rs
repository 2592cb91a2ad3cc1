//! The user-seat build benchmark's program on vsphere-client (benches/build-time/run):
//! connect, list every VM with the property collector, clone one and power the clone on.
//! usage: GOVC_URL=https://user:pass@host/sdk GOVC_INSECURE=1 seat SOURCE_VM NEW_NAME

use vsphere_client::vm::CloneSpec;
use vsphere_client::{mo, Client};

/// Changed by the benchmark to time a rebuild after an edit of `main`.
const EDIT: &str = "0";

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [source, name] = args.as_slice() else {
        return Err("usage: seat SOURCE_VM NEW_NAME".into());
    };
    let url = std::env::var("GOVC_URL").map_err(|_| "set GOVC_URL=https://user:pass@host/sdk")?;
    let insecure = std::env::var("GOVC_INSECURE").is_ok_and(|v| v == "1" || v == "true");
    let client = Client::builder(&url).insecure(insecure).connect().await?;

    let root = client.service_content().root_folder.clone();
    let mut pages = client
        .properties::<mo::VirtualMachine>(&["name", "runtime.powerState", "parent", "resourcePool"])?
        .max_objects(100)
        .in_container(&root);
    let mut found = None;
    while let Some(page) = pages.next_page().await? {
        for vm in page {
            let vm_name = vm.name.clone().unwrap_or_default();
            let state = vm.runtime.as_ref().map(|r| r.power_state.as_str()).unwrap_or("");
            println!("{vm_name} {state}");
            if &vm_name == source {
                found = Some(vm);
            }
        }
    }
    let source = found.ok_or_else(|| format!("no VM named {source}"))?;
    let folder = source.parent.clone().ok_or("the source VM has no folder")?;
    let mut spec = CloneSpec::new(folder);
    if let Some(pool) = source.resource_pool.clone() {
        spec = spec.pool(pool);
    }
    let clone = client.vm(source.mo_ref.clone()).clone_vm(name, &spec).await?;
    clone.power_on().await?;
    println!("{name} is {:?} (edit {EDIT})", clone.state().await?.power_state);
    client.close().await?;
    Ok(())
}
