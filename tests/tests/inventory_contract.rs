//! SearchIndex calls the simulator lacks (FindAllByUuid), against a
//! scripted vCenter (vsphere-testkit).

use vsphere_client::types::{FindAllByUuidRequestType, ManagedObjectReference};
use vsphere_testkit::MockVCenter;

#[tokio::test]
async fn every_vm_with_a_uuid_is_found_in_one_call() {
    let vc = MockVCenter::start().await;
    let vms = vec![
        ManagedObjectReference::new("VirtualMachine", "vm-1"),
        ManagedObjectReference::new("VirtualMachine", "vm-2"),
    ];
    // The instance UUID flag must be sent: BIOS and instance UUIDs are different searches.
    vc.on::<FindAllByUuidRequestType>()
        .when(|r| r.instance_uuid == Some(true) && r.vm_search)
        .returns(vms.clone())
        .await;
    let client = vc.client().await;
    let found = client
        .search_all_vms_by_uuid("5a0d3c18-8e4f-4c1b-9d2a-3f7e6b5c4d3e", true, None)
        .await
        .expect("search");
    assert_eq!(found, vms);
    let calls = vc.received::<FindAllByUuidRequestType>().await;
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].uuid, "5a0d3c18-8e4f-4c1b-9d2a-3f7e6b5c4d3e");
}
