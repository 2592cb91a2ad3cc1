//! Decoding real simulator responses (tests/fixtures, captured with
//! `benches/capture-soap fixtures`) into the generated types. The assertions
//! check what the captured inventory fixes (names, subtypes, capacities, task
//! states), not what changes per capture (timestamps, UUIDs).

use vsphere_client::types::*;
use vsphere_client::xml::soap::{self, SoapError, SoapFault};
use vsphere_client::xml::{ManagedObjectReference, Request, Value};

fn fixture(name: &str) -> Vec<u8> {
    let path = format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn decode<R: Request>(name: &str) -> R::Response {
    soap::decode_response::<R>(&fixture(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn fault(name: &str) -> SoapFault {
    match soap::decode_response::<PowerOnVMRequestType>(&fixture(name)) {
        Err(SoapError::Fault(fault)) => fault,
        other => panic!("{name}: expected a SOAP fault, got {other:?}"),
    }
}

/// The value of property `name` of an object.
fn prop<'a>(object: &'a ObjectContent, name: &str) -> &'a Value {
    &object
        .prop_set
        .iter()
        .find(|p| p.name == name)
        .unwrap_or_else(|| panic!("{} has no property {name}", object.obj.value))
        .val
}

fn devices(value: &Value) -> &[AnyVirtualDevice] {
    value
        .downcast_ref::<Vec<AnyVirtualDevice>>()
        .unwrap_or_else(|| panic!("expected ArrayOfVirtualDevice, got {}", value.type_name()))
}

fn the_disk(devices: &[AnyVirtualDevice]) -> &VirtualDisk {
    let disks: Vec<&VirtualDisk> = devices.iter().filter_map(|d| d.downcast_ref()).collect();
    assert_eq!(disks.len(), 1, "one disk per simulator VM");
    disks[0]
}

#[test]
fn service_content() {
    let content: ServiceContent =
        decode::<RetrieveServiceContentRequestType>("retrieve-service-content.xml");
    assert_eq!(content.root_folder.type_, "Folder");
    assert!(!content.root_folder.value.is_empty());
    assert_eq!(content.property_collector.type_, "PropertyCollector");
    assert_eq!(
        content.view_manager.as_ref().map(|m| m.type_.as_str()),
        Some("ViewManager")
    );
    assert_eq!(
        content.session_manager.as_ref().map(|m| m.type_.as_str()),
        Some("SessionManager")
    );
    assert_eq!(content.about.api_type, "VirtualCenter");
    assert_eq!(content.about.product_line_id, "vpx");
    assert!(!content.about.api_version.is_empty());
}

#[test]
fn properties_of_vms_with_devices_and_summary() {
    let page =
        decode::<RetrievePropertiesExRequestType>("retrieve-properties-vms.xml").expect("a result");
    // maxObjects 2 of 3 VMs: a page and a token for the rest.
    assert!(page.token.as_deref().is_some_and(|t| !t.is_empty()));
    assert_eq!(page.objects.len(), 2);
    for (i, vm) in page.objects.iter().enumerate() {
        assert_eq!(vm.obj.type_, "VirtualMachine");
        assert!(vm.missing_set.is_empty());
        let name = format!("DC0_C0_RP0_VM{i}");
        assert_eq!(prop(vm, "name"), &Value::String(name.clone()));

        let devices = devices(prop(vm, "config.hardware.device"));
        let disk = the_disk(devices);
        assert_eq!(disk.capacity_in_kb, 1024);
        assert!(disk.controller_key.is_some());
        let backing = disk
            .backing
            .as_ref()
            .and_then(|b| b.downcast_ref::<VirtualDiskFlatVer2BackingInfo>())
            .expect("a flat ver2 backing");
        assert_eq!(backing.file_name, format!("[LocalDS_0] {name}/disk1.vmdk"));
        assert_eq!(backing.disk_mode, "persistent");
        assert_eq!(backing.thin_provisioned, Some(true));
        assert_eq!(
            backing.datastore.as_ref().map(|d| d.type_.as_str()),
            Some("Datastore")
        );
        // Other subtypes of the same slot, each decoded as itself.
        assert!(devices
            .iter()
            .any(|d| d.downcast_ref::<VirtualE1000>().is_some()));
        assert!(devices
            .iter()
            .any(|d| d.downcast_ref::<ParaVirtualSCSIController>().is_some()));
        assert!(devices
            .iter()
            .any(|d| d.downcast_ref::<VirtualIDEController>().is_some()));
        let nic: &VirtualE1000 = devices
            .iter()
            .find_map(|d| d.downcast_ref())
            .expect("a NIC");
        assert!(nic
            .backing
            .as_ref()
            .and_then(|b| b.downcast_ref::<VirtualEthernetCardDistributedVirtualPortBackingInfo>())
            .is_some_and(|b| b
                .port
                .portgroup_key
                .as_deref()
                .is_some_and(|k| k.starts_with("dvportgroup-"))));

        let summary = prop(vm, "summary")
            .downcast_ref::<VirtualMachineSummary>()
            .expect("a VirtualMachineSummary");
        assert_eq!(summary.vm.as_ref(), Some(&vm.obj));
        assert_eq!(summary.config.name, name);
        assert_eq!(summary.config.num_virtual_disks, Some(1));
        assert_eq!(summary.config.memory_size_mb, Some(32));
        assert_eq!(
            summary.runtime.power_state,
            VirtualMachinePowerState::PoweredOn
        );
        assert_eq!(
            summary.runtime.host.as_ref().map(|h| h.type_.as_str()),
            Some("HostSystem")
        );
        assert!(summary.storage.is_some());
        assert_eq!(summary.overall_status, ManagedEntityStatus::Green);
    }
}

#[test]
fn continued_page_is_the_rest() {
    let page =
        decode::<ContinueRetrievePropertiesExRequestType>("continue-retrieve-properties-vms.xml");
    assert_eq!(page.token, None, "the last page has no token");
    assert_eq!(page.objects.len(), 1);
    assert_eq!(
        prop(&page.objects[0], "name"),
        &Value::String("DC0_C0_RP0_VM2".into())
    );
    assert_eq!(
        the_disk(devices(prop(&page.objects[0], "config.hardware.device"))).capacity_in_kb,
        1024
    );
}

fn task_info(name: &str) -> TaskInfo {
    let result = decode::<RetrievePropertiesExRequestType>(name).expect("a result");
    assert_eq!(result.objects.len(), 1);
    let task = &result.objects[0];
    assert_eq!(task.obj.type_, "Task");
    let info = prop(task, "info")
        .downcast_ref::<TaskInfo>()
        .expect("a TaskInfo")
        .clone();
    assert_eq!(info.task, task.obj);
    info
}

#[test]
fn power_off_task_info() {
    let info = task_info("task-info-power-off.xml");
    assert_eq!(info.state, TaskInfoState::Success);
    assert_eq!(info.description_id, "VirtualMachine.powerOff");
    assert_eq!(
        info.entity.as_ref().map(|e| e.type_.as_str()),
        Some("VirtualMachine")
    );
    assert_eq!(info.error, None);
    assert_eq!(info.result, None, "PowerOff returns nothing");
    assert!(info.reason.downcast_ref::<TaskReasonUser>().is_some());
    assert!(info.complete_time.is_some());
}

#[test]
fn clone_task_result_is_the_new_vm() {
    let info = task_info("task-info-clone.xml");
    assert_eq!(info.state, TaskInfoState::Success);
    assert_eq!(info.description_id, "VirtualMachine.cloneVm");
    match &info.result {
        Some(Value::ManagedObjectReference(vm)) => {
            assert_eq!(vm.type_, "VirtualMachine");
            assert_ne!(Some(vm), info.entity.as_ref(), "the clone, not its source");
        }
        other => panic!("expected a VirtualMachine reference, got {other:?}"),
    }
}

#[test]
fn initial_update_set_enters_every_vm() {
    let updates =
        decode::<WaitForUpdatesExRequestType>("wait-for-updates-enter.xml").expect("updates");
    assert!(!updates.version.is_empty());
    assert_eq!(updates.filter_set.len(), 1);
    let filter = &updates.filter_set[0];
    assert_eq!(filter.filter.type_, "PropertyFilter");
    assert_eq!(filter.object_set.len(), 3);
    for vm in &filter.object_set {
        assert_eq!(vm.kind, ObjectUpdateKind::Enter);
        assert_eq!(vm.obj.type_, "VirtualMachine");
        let change = |name: &str| {
            vm.change_set
                .iter()
                .find(|c| c.name == name)
                .unwrap_or_else(|| panic!("no change of {name}"))
        };
        assert_eq!(change("name").op, PropertyChangeOp::Assign);
        assert!(
            matches!(&change("name").val, Some(Value::String(n)) if n.starts_with("DC0_C0_RP0_VM"))
        );
        assert_eq!(
            change("runtime.powerState")
                .val
                .as_ref()
                .and_then(|v| v.downcast_ref::<VirtualMachinePowerState>()),
            Some(&VirtualMachinePowerState::PoweredOn)
        );
        let devices = devices(
            change("config.hardware.device")
                .val
                .as_ref()
                .expect("devices"),
        );
        assert_eq!(the_disk(devices).capacity_in_kb, 1024);
    }
}

#[test]
fn next_update_set_has_the_power_off_and_the_clone() {
    let updates =
        decode::<WaitForUpdatesExRequestType>("wait-for-updates-modify.xml").expect("updates");
    // The simulator may report one filter in several filterSet entries.
    let objects: Vec<&ObjectUpdate> = updates
        .filter_set
        .iter()
        .flat_map(|f| &f.object_set)
        .collect();
    let powered_off: Vec<&ManagedObjectReference> = objects
        .iter()
        .filter(|o| o.kind == ObjectUpdateKind::Modify)
        .filter(|o| {
            o.change_set.iter().any(|c| {
                c.name == "runtime.powerState"
                    && c.val
                        .as_ref()
                        .and_then(|v| v.downcast_ref::<VirtualMachinePowerState>())
                        == Some(&VirtualMachinePowerState::PoweredOff)
            })
        })
        .map(|o| &o.obj)
        .collect();
    assert_eq!(powered_off.len(), 1, "the powered-off VM: {objects:?}");
    let entered: Vec<&&ObjectUpdate> = objects
        .iter()
        .filter(|o| o.kind == ObjectUpdateKind::Enter)
        .collect();
    assert_eq!(entered.len(), 1, "the clone enters the view");
    assert!(entered[0]
        .change_set
        .iter()
        .any(|c| c.name == "name" && c.val == Some(Value::String("captured-clone".into()))));
}

#[test]
fn invalid_login_fault() {
    let fault = fault("fault-invalid-login.xml");
    assert_eq!(fault.faultcode, "ServerFaultCode");
    assert_eq!(fault.faultstring, "Login failure");
    assert_eq!(fault.fault_type(), Some("InvalidLogin"));
    assert!(fault
        .detail
        .as_ref()
        .and_then(|d| d.downcast_ref::<InvalidLogin>())
        .is_some());
}

#[test]
fn managed_object_not_found_fault() {
    let fault = fault("fault-managed-object-not-found.xml");
    assert_eq!(fault.fault_type(), Some("ManagedObjectNotFound"));
    let detail = fault
        .detail
        .as_ref()
        .and_then(|d| d.downcast_ref::<ManagedObjectNotFound>())
        .expect("typed detail");
    assert_eq!(
        detail.obj,
        ManagedObjectReference::new("VirtualMachine", "vm-does-not-exist")
    );
    assert!(fault.faultstring.contains("vm-does-not-exist"));
    // The same fault through the operation-independent entry point.
    assert_eq!(
        soap::decode_fault(&fixture("fault-managed-object-not-found.xml")),
        Ok(fault)
    );
}
