//! `Clone` of a `Value` holding an object (an `anyType` slot's data object,
//! fault, enumeration or array) makes a deep copy of the same type, equal
//! to the original, for every type the registry decodes.

use vsphere_client::types::*;
use vsphere_client::xml::{DataObject, ManagedObjectReference, Value, XmlReader, XmlWriter};

fn decode_object(type_name: &str, xml: &str) -> Box<dyn DataObject> {
    let mut r = XmlReader::new(xml.as_bytes(), &REGISTRY);
    r.root().expect("root");
    REGISTRY
        .decode_object(type_name, &mut r)
        .unwrap_or_else(|| panic!("{type_name} is not decoded as an object"))
        .unwrap_or_else(|e| panic!("{type_name}: {e}"))
}

fn xml_of(object: &dyn DataObject) -> String {
    let mut w = XmlWriter::new();
    object.encode_typed(&mut w, "v");
    String::from_utf8(w.into_bytes()).expect("UTF-8")
}

#[test]
fn every_registered_type_clones_as_itself() {
    let mut cloned = 0;
    for info in REGISTRY
        .iter()
        .filter(vsphere_client::xml::TypeInfo::decodes_as_object)
    {
        let name = info.name();
        let mut r = XmlReader::new(b"<v/>", &REGISTRY);
        r.root().expect("root");
        let Some(decoded) = info.decode(&mut r) else {
            continue; // a type of a family this build leaves out
        };
        let original = Value::Object(decoded.unwrap_or_else(|e| panic!("{name}: {e}")));
        let copy = original.clone();
        let (Value::Object(a), Value::Object(b)) = (&original, &copy) else {
            panic!("{name}: the copy is not an object");
        };
        assert_eq!(b.type_name(), a.type_name(), "{name}: the copy's type");
        assert_eq!(copy, original, "{name}: the copy is not equal");
        assert_eq!(xml_of(&**b), xml_of(&**a), "{name}: the copy's XML");
        cloned += 1;
    }
    assert!(cloned > 1000, "only {cloned} types cloned");
}

#[test]
fn a_cloned_object_is_a_deep_copy_with_every_field() {
    // A VM's config as a property collector hands it over: nested
    // structures, polymorphic devices and backings, repeated fields, a
    // secret-free option list holding anyType values.
    let xml = r#"<v xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" xmlns:xsd="http://www.w3.org/2001/XMLSchema">
        <changeVersion>2026-12-06T10:00:00.5Z</changeVersion>
        <modified>1970-01-01T00:00:00Z</modified>
        <name>web-01</name>
        <guestFullName>Ubuntu Linux (64-bit)</guestFullName>
        <version>vmx-19</version>
        <uuid>4207aa7e-0000-0000-0000-000000000001</uuid>
        <template>false</template>
        <guestId>ubuntu64Guest</guestId>
        <files><vmPathName>[ds1] web-01/web-01.vmx</vmPathName></files>
        <hardware>
            <numCPU>2</numCPU>
            <memoryMB>4096</memoryMB>
            <device xsi:type="VirtualDisk">
                <key>2000</key>
                <deviceInfo><label>Hard disk 1</label><summary>16,777,216 KB</summary></deviceInfo>
                <backing xsi:type="VirtualDiskFlatVer2BackingInfo">
                    <fileName>[ds1] web-01/web-01.vmdk</fileName>
                    <datastore type="Datastore">datastore-1</datastore>
                    <diskMode>persistent</diskMode>
                    <thinProvisioned>true</thinProvisioned>
                </backing>
                <controllerKey>1000</controllerKey>
                <unitNumber>0</unitNumber>
                <capacityInKB>16777216</capacityInKB>
            </device>
            <device xsi:type="VirtualVmxnet3">
                <key>4000</key>
                <backing xsi:type="VirtualEthernetCardNetworkBackingInfo">
                    <deviceName>VM Network &amp; &lt;test&gt;</deviceName>
                    <network type="Network">network-7</network>
                </backing>
                <addressType>generated</addressType>
                <macAddress>00:50:56:aa:bb:cc</macAddress>
            </device>
        </hardware>
        <extraConfig><key>guestinfo.a</key><value xsi:type="xsd:string">1.5</value></extraConfig>
        <extraConfig><key>numa.nodeAffinity</key><value xsi:type="xsd:int">-3</value></extraConfig>
    </v>"#;
    let original = Value::Object(decode_object("VirtualMachineConfigInfo", xml));
    let copy = original.clone();
    assert_eq!(copy, original);
    assert_eq!(format!("{copy:#?}"), format!("{original:#?}"));

    let (Value::Object(a), Value::Object(b)) = (&original, &copy) else {
        panic!("not objects");
    };
    let (a, b) = (
        a.downcast_ref::<VirtualMachineConfigInfo>().expect("typed"),
        b.downcast_ref::<VirtualMachineConfigInfo>().expect("typed"),
    );
    assert!(!std::ptr::eq(a, b), "the copy is a new value");
    let devices = &b.hardware.device;
    assert_eq!(devices.len(), 2);
    let AnyVirtualDevice::VirtualDisk(disk) = &devices[0] else {
        panic!("the first device is not a disk: {:?}", devices[0]);
    };
    assert_eq!(disk.capacity_in_kb, 16_777_216);
    let Some(AnyVirtualDeviceBackingInfo::VirtualDiskFlatVer2BackingInfo(backing)) = &disk.backing
    else {
        panic!("the disk's backing: {:?}", disk.backing);
    };
    assert_eq!(
        backing.datastore,
        Some(ManagedObjectReference::new("Datastore", "datastore-1"))
    );
    assert_eq!(b.extra_config.len(), 2);
    assert_eq!(b.extra_config[1].base().value, Some(Value::Int(-3)));
    assert_eq!(b.change_version, "2026-12-06T10:00:00.5Z");
}

#[test]
fn arrays_and_enumerations_in_any_type_slots_clone_too() {
    let devices = decode_object(
        "ArrayOfVirtualDevice",
        r#"<v><VirtualDevice xsi:type="VirtualCdrom"><key>3000</key></VirtualDevice><VirtualDevice xsi:type="VirtualFloppy"><key>8000</key></VirtualDevice></v>"#,
    );
    let state = decode_object("VirtualMachinePowerState", "<v>poweredOn</v>");
    for original in [Value::Object(devices), Value::Object(state)] {
        let copy = original.clone();
        assert_eq!(copy, original);
        assert_eq!(format!("{copy:?}"), format!("{original:?}"));
    }
}
