//! The user-seat build benchmark's program on vim_rs 0.7 (benches/build-time/run), over SOAP
//! like vsphere-client: connect, list every VM through a container view and the property
//! collector (pages of 100), clone one and power the clone on.
//! usage: seat HOST:PORT USER PASSWORD SOURCE_VM NEW_NAME

use vim_rs::core::client::{ClientBuilder, TransportMode};
use vim_rs::core::tasks::TaskTracker;
use vim_rs::mo::{PropertyCollector, ViewManager, VirtualMachine};
use vim_rs::types::structs::{
    ManagedObjectReference, ObjectContent, ObjectSpec, PropertyFilterSpec, PropertySpec, RetrieveOptions,
    SelectionSpec, TraversalSpec, VirtualMachineCloneSpec, VirtualMachineRelocateSpec,
};
use vim_rs::types::vim_any::VimAny;

/// Changed by the benchmark to time a rebuild after an edit of `main`.
const EDIT: &str = "0";

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let a: Vec<String> = std::env::args().skip(1).collect();
    let [host, user, password, source, name] = a.as_slice() else {
        return Err("usage: seat HOST:PORT USER PASSWORD SOURCE_VM NEW_NAME".into());
    };
    let client = ClientBuilder::new(host)
        .insecure(true)
        .basic_authn(user, password)
        .app_details("seat", "0.1")
        .transport(TransportMode::Soap)
        .build()
        .await?;
    let sc = client.service_content();
    let views = ViewManager::new(client.clone(), &sc.view_manager.as_ref().ok_or("no viewManager")?.value);
    let view = views.create_container_view(&sc.root_folder, Some(&["VirtualMachine".to_string()]), true).await?;
    let pc = PropertyCollector::new(client.clone(), &sc.property_collector.value);
    let props = ["name", "runtime.powerState", "parent", "resourcePool"];
    let spec = PropertyFilterSpec {
        prop_set: vec![PropertySpec {
            all: Some(false),
            path_set: Some(props.iter().map(|p| p.to_string()).collect()),
            r#type: "VirtualMachine".to_string(),
        }],
        object_set: vec![ObjectSpec {
            obj: view.clone(),
            skip: Some(true),
            select_set: Some(vec![Box::new(TraversalSpec {
                selection_spec_: SelectionSpec { name: Some("view".to_string()) },
                r#type: "ContainerView".to_string(),
                path: "view".to_string(),
                skip: Some(false),
                select_set: None,
            })]),
        }],
        report_missing_objects_in_results: None,
    };
    let mut found = None;
    let mut page = pc.retrieve_properties_ex(&[spec], &RetrieveOptions { max_objects: Some(100) }).await?;
    while let Some(result) = page {
        for object in result.objects {
            let vm = Vm::from(object);
            println!("{} {}", vm.name, vm.power_state);
            if &vm.name == source {
                found = Some(vm);
            }
        }
        page = match result.token {
            Some(token) => Some(pc.continue_retrieve_properties_ex(&token).await?),
            None => None,
        };
    }
    let source = found.ok_or_else(|| format!("no VM named {source}"))?;
    let folder = source.parent.ok_or("the source VM has no folder")?;
    let spec = VirtualMachineCloneSpec {
        location: VirtualMachineRelocateSpec {
            service: None,
            folder: None,
            datastore: None,
            disk_move_type: None,
            pool: source.pool,
            host: None,
            disk: None,
            transform: None,
            device_change: None,
            profile: None,
            crypto_spec: None,
            tag_specs: None,
            vm_placement_policies: None,
        },
        template: false,
        config: None,
        customization: None,
        power_on: false,
        snapshot: None,
        memory: None,
        tpm_provision_policy: None,
    };
    let tasks = TaskTracker::new(client.clone());
    let vm = VirtualMachine::new(client.clone(), &source.reference.value);
    let task = vm.clone_vm_task(&folder, name, &spec).await?;
    let clone: ManagedObjectReference = tasks.wait(task).await?;
    let task = VirtualMachine::new(client.clone(), &clone.value).power_on_vm_task(None).await?;
    tasks.wait::<()>(task).await?;
    println!("{name} is powered on ({}, edit {EDIT})", clone.value);
    tasks.shutdown().await;
    Ok(())
}

/// The properties read for one VM.
struct Vm {
    reference: ManagedObjectReference,
    name: String,
    power_state: String,
    parent: Option<ManagedObjectReference>,
    pool: Option<ManagedObjectReference>,
}

impl From<ObjectContent> for Vm {
    fn from(object: ObjectContent) -> Self {
        let mut vm = Vm { reference: object.obj, name: String::new(), power_state: String::new(), parent: None, pool: None };
        for prop in object.prop_set.unwrap_or_default() {
            match prop.name.as_str() {
                "name" => vm.name = text(prop.val),
                "runtime.powerState" => vm.power_state = text(prop.val),
                "parent" => vm.parent = reference(prop.val),
                "resourcePool" => vm.pool = reference(prop.val),
                _ => {}
            }
        }
        vm
    }
}

fn text(value: VimAny) -> String {
    match value.into_any().downcast::<String>() {
        Ok(s) => *s,
        Err(other) => format!("{other:?}"),
    }
}

fn reference(value: VimAny) -> Option<ManagedObjectReference> {
    value.into_any().downcast::<ManagedObjectReference>().ok().map(|r| *r)
}
