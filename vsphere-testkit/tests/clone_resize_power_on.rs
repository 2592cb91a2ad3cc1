//! The example of the guide: a user's function that clones a VM from a
//! template, resizes it and powers it on, and its contract tests.

use vsphere_client::task::task_result_reference;
use vsphere_client::types::*;
use vsphere_client::{Client, Error};

/// What `provision` can fail with.
#[derive(Debug)]
enum ProvisionError {
    Vsphere(Error),
    NoVm,
}

impl From<Error> for ProvisionError {
    fn from(err: Error) -> Self {
        ProvisionError::Vsphere(err)
    }
}

/// The code under test: clone `template` as `name`, give it `cpus` and
/// `memory_mb`, power it on; returns the new VM.
async fn provision(
    client: &Client,
    template: &ManagedObjectReference,
    folder: &ManagedObjectReference,
    name: &str,
    cpus: i32,
    memory_mb: i64,
) -> Result<ManagedObjectReference, ProvisionError> {
    let spec = VirtualMachineCloneSpec::default();
    let clone = client
        .vim()
        .clone_vm_task(template, folder, name, &spec)
        .await?;
    let info = client.task(clone).wait().await?;
    let vm = task_result_reference(&info).ok_or(ProvisionError::NoVm)?;
    let size = VirtualMachineConfigSpec {
        num_cpus: Some(cpus),
        memory_mb: Some(memory_mb),
        ..Default::default()
    };
    client
        .task(client.vim().reconfig_vm_task(&vm, &size).await?)
        .wait()
        .await?;
    client
        .task(client.vim().power_on_vm_task(&vm, None).await?)
        .wait()
        .await?;
    Ok(vm)
}

// The contract test: under 40 lines.
use std::time::Duration;
use vsphere_testkit::{MockVCenter, TaskScript};

fn mo(type_: &str, value: &str) -> ManagedObjectReference {
    ManagedObjectReference::new(type_, value)
}

#[tokio::test]
async fn provision_clones_resizes_and_powers_on() {
    let vc = MockVCenter::start().await;
    let (template, folder) = (mo("VirtualMachine", "vm-7"), mo("Folder", "group-v3"));
    let vm = mo("VirtualMachine", "vm-42");
    let clone = TaskScript::new()
        .running(30)
        .after(Duration::from_millis(100))
        .succeeds_with(vm.clone());
    vc.on::<CloneVMRequestType>()
        .when(|r| r.name == "web-1")
        .expect(1)
        .returns_task(clone)
        .await;
    let done = TaskScript::success();
    vc.on::<ReconfigVMRequestType>()
        .returns_task(done.clone())
        .await;
    vc.on::<PowerOnVMRequestType>().returns_task(done).await;

    let client = vc.client().await;
    let made = provision(&client, &template, &folder, "web-1", 4, 8192).await;

    assert_eq!(made.expect("provisioned"), vm);
    let resize = vc.received::<ReconfigVMRequestType>().await;
    assert_eq!(resize.len(), 1);
    let (cpus, memory) = (resize[0].spec.num_cpus, resize[0].spec.memory_mb);
    assert_eq!((&resize[0].this, cpus, memory), (&vm, Some(4), Some(8192)));
    let power_on = vc.received::<PowerOnVMRequestType>().await;
    assert_eq!(power_on.iter().map(|r| &r.this).collect::<Vec<_>>(), [&vm]);
}

#[tokio::test]
async fn a_taken_name_fails_with_the_typed_fault_and_touches_nothing() {
    let vc = MockVCenter::start().await;
    let taken = DuplicateName {
        name: "web-1".into(),
        ..Default::default()
    };
    let fails = TaskScript::error(taken, "The name 'web-1' already exists.");
    vc.on::<CloneVMRequestType>().returns_task(fails).await;

    let client = vc.client().await;
    let (template, folder) = (mo("VirtualMachine", "vm-7"), mo("Folder", "group-v3"));
    let err = provision(&client, &template, &folder, "web-1", 4, 8192).await;

    let Err(ProvisionError::Vsphere(err)) = err else {
        panic!("the name is taken: {err:?}")
    };

    assert!(err.is_fault::<DuplicateName>(), "{err}");
    assert!(err.to_string().contains("already exists"), "{err}");
    assert_eq!(vc.count::<ReconfigVMRequestType>().await, 0);
    assert_eq!(vc.count::<PowerOnVMRequestType>().await, 0);
}
