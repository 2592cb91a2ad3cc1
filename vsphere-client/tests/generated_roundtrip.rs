//! Encode -> decode -> equal for representative generated types, and the
//! decoder's behaviour on what real servers and broken networks send:
//! unknown elements, unknown `xsi:type`s and enumeration values, `xsi:nil`,
//! malformed and truncated documents (an error naming the path, no panic).

// Inherited fields are set through the deref after `Default`, as the crate
// documents; clippy would have every field in the literal.
#![allow(clippy::field_reassign_with_default)]

use vsphere_client::types::*;
use vsphere_client::xml::soap::{self, SoapError};
use vsphere_client::xml::{
    Decode, DecodeErrorKind, Encode, ManagedObjectReference, Value, XmlReader, XmlWriter,
};

fn encode<T: Encode>(value: &T, tag: &str) -> String {
    let mut w = XmlWriter::new();
    value.encode(&mut w, tag);
    String::from_utf8(w.into_bytes()).expect("UTF-8")
}

fn decode<T: Decode>(xml: &str) -> Result<T, vsphere_client::xml::DecodeError> {
    let mut r = XmlReader::new(xml.as_bytes(), &REGISTRY);
    r.root()?;
    T::decode(&mut r)
}

fn round_trip<T: Encode + Decode + PartialEq + std::fmt::Debug>(value: &T) -> T {
    let xml = encode(value, "value");
    let back: T = decode(&xml).unwrap_or_else(|e| panic!("{e}\n{xml}"));
    assert_eq!(&back, value, "round trip changed the value:\n{xml}");
    back
}

fn mor(type_: &str, value: &str) -> ManagedObjectReference {
    ManagedObjectReference::new(type_, value)
}

fn device_change(device: impl Into<AnyVirtualDevice>) -> VirtualDeviceConfigSpec {
    VirtualDeviceConfigSpec {
        operation: Some(VirtualDeviceConfigSpecOperation::Add),
        device: device.into(),
        ..Default::default()
    }
}

#[test]
fn vm_config_spec_with_devices_of_several_subtypes() {
    // Inherited fields are set through `DerefMut` (a subtype embeds its
    // parent: `disk.virtual_device.key`), own fields in the literal.
    let mut disk_backing = VirtualDiskFlatVer2BackingInfo {
        disk_mode: "persistent".into(),
        thin_provisioned: Some(true),
        ..Default::default()
    };
    disk_backing.file_name = "[datastore1] vm/vm.vmdk".into();
    disk_backing.datastore = Some(mor("Datastore", "datastore-1"));
    let mut disk = VirtualDisk {
        capacity_in_kb: 16 * 1024 * 1024,
        ..Default::default()
    };
    disk.key = -101;
    disk.controller_key = Some(1000);
    disk.unit_number = Some(0);
    disk.backing = Some(disk_backing.into());

    let mut nic_backing = VirtualEthernetCardNetworkBackingInfo {
        network: Some(mor("Network", "network-7")),
        ..Default::default()
    };
    nic_backing.device_name = "VM Network & <test> ünïcode".into();
    let mut nic = VirtualVmxnet3::default();
    nic.key = -102;
    nic.address_type = Some("generated".into());
    nic.backing = Some(nic_backing.into());
    nic.connectable = Some(VirtualDeviceConnectInfo {
        start_connected: true,
        connected: false,
        allow_guest_control: true,
        ..Default::default()
    });
    assert_eq!(
        nic.virtual_vmxnet.virtual_ethernet_card.virtual_device.key,
        -102
    );

    // Or nested literals, one per level of the inheritance chain.
    let cdrom = VirtualCdrom {
        virtual_device: VirtualDevice {
            key: -103,
            backing: Some(
                VirtualCdromIsoBackingInfo {
                    virtual_device_file_backing_info: VirtualDeviceFileBackingInfo {
                        file_name: "[iso] ubuntu.iso".into(),
                        ..Default::default()
                    },
                }
                .into(),
            ),
            ..Default::default()
        },
    };
    let spec = VirtualMachineConfigSpec {
        name: Some("web-01".into()),
        num_cpus: Some(4),
        memory_mb: Some(8192),
        annotation: Some("line 1\r\nline 2 \"quoted\" 'single' \t tab".into()),
        device_change: vec![
            device_change(disk).into(),
            device_change(nic).into(),
            device_change(cdrom).into(),
        ],
        extra_config: vec![
            OptionValue {
                key: "guestinfo.a".into(),
                value: Some(Value::String("x&y".into())),
            }
            .into(),
            OptionValue {
                key: "n".into(),
                value: Some(Value::Int(-3)),
            }
            .into(),
            OptionValue {
                key: "b".into(),
                value: Some(Value::Boolean(true)),
            }
            .into(),
            OptionValue {
                key: "l".into(),
                value: Some(Value::ArrayOfLong(vec![1, i64::MAX])),
            }
            .into(),
            OptionValue {
                key: "nil".into(),
                value: None,
            }
            .into(),
        ],
        ..Default::default()
    };
    let xml = encode(&spec, "spec");
    assert!(xml.contains(r#"<device xsi:type="VirtualDisk">"#), "{xml}");
    assert!(
        xml.contains(r#"<backing xsi:type="VirtualDiskFlatVer2BackingInfo">"#),
        "{xml}"
    );
    assert!(
        xml.contains(r#"<value xsi:type="xsd:string">x&amp;y</value>"#),
        "{xml}"
    );
    let back = round_trip(&spec);
    let device = |i: usize| {
        &back.device_change[i]
            .downcast_ref::<VirtualDeviceConfigSpec>()
            .expect("spec")
            .device
    };
    match device(0) {
        AnyVirtualDevice::VirtualDisk(disk) => assert_eq!(disk.capacity_in_kb, 16 * 1024 * 1024),
        other => panic!("expected a VirtualDisk, got {}", other.type_name()),
    }
    assert_eq!(device(1).type_name(), "VirtualVmxnet3");
    assert!(device(2).downcast_ref::<VirtualCdrom>().is_some());
}

#[test]
fn property_filter_spec_with_traversal_specs() {
    let traverse_folders = TraversalSpec {
        selection_spec: SelectionSpec {
            name: Some("folderTraversal".into()),
        },
        type_: "Folder".into(),
        path: "childEntity".into(),
        skip: Some(false),
        select_set: vec![SelectionSpec {
            name: Some("folderTraversal".into()),
        }
        .into()],
    };
    let spec = PropertyFilterSpec {
        prop_set: vec![PropertySpec {
            type_: "VirtualMachine".into(),
            all: Some(false),
            path_set: vec![
                "name".into(),
                "runtime.powerState".into(),
                "config.hardware.device".into(),
            ],
        }],
        object_set: vec![ObjectSpec {
            obj: mor("Folder", "group-d1"),
            skip: Some(true),
            select_set: vec![
                traverse_folders.into(),
                SelectionSpec {
                    name: Some("dc".into()),
                }
                .into(),
            ],
        }],
        report_missing_objects_in_results: Some(true),
    };
    let xml = encode(&spec, "specSet");
    assert!(
        xml.contains(
            r#"<selectSet xsi:type="TraversalSpec"><name>folderTraversal</name><type>Folder</type>"#
        ),
        "{xml}"
    );
    assert!(
        xml.contains(r"<selectSet><name>dc</name></selectSet>"),
        "the declared type has no xsi:type: {xml}"
    );
    assert!(
        xml.contains(r#"<obj type="Folder">group-d1</obj>"#),
        "{xml}"
    );
    round_trip(&spec);
}

#[test]
fn faults_round_trip_and_decode_from_a_soap_fault() {
    let mut login = InvalidLogin::default();
    login.fault_message = vec![LocalizableMessage {
        key: "vim.fault.InvalidLogin".into(),
        message: Some("Cannot complete login".into()),
        ..Default::default()
    }];
    let fault: AnyMethodFault = login.into();
    round_trip(&fault);

    let mut not_authenticated = NotAuthenticated::default();
    not_authenticated.object = mor("Folder", "group-d1");
    not_authenticated.privilege_id = "System.View".into();
    let mut not_found = FileNotFound::default();
    not_found.file = "[ds] missing.vmdk".into();
    not_found.fault_cause = Some(LocalizedMethodFault {
        fault: not_authenticated.into(),
        localized_message: Some("not authenticated".into()),
    });
    let nested: AnyMethodFault = not_found.into();
    round_trip(&nested);

    let document = r#"<?xml version="1.0" encoding="UTF-8"?>
<soapenv:Envelope xmlns:soapenv="http://schemas.xmlsoap.org/soap/envelope/" xmlns:xsd="http://www.w3.org/2001/XMLSchema" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance">
<soapenv:Body><soapenv:Fault><faultcode>ServerFaultCode</faultcode><faultstring>Cannot complete login due to an incorrect user name or password.</faultstring>
<detail><InvalidLoginFault xmlns="urn:vim25" xsi:type="InvalidLogin"></InvalidLoginFault></detail></soapenv:Fault></soapenv:Body></soapenv:Envelope>"#;
    let fault = soap::decode_fault(document.as_bytes()).expect("a fault");
    assert_eq!(fault.faultcode, "ServerFaultCode");
    assert_eq!(fault.fault_type(), Some("InvalidLogin"));
    assert!(matches!(
        fault.detail,
        Some(AnyMethodFault::InvalidLogin(_))
    ));

    // Without xsi:type the element name minus "Fault" names the type.
    let untyped = document
        .replace(r#" xsi:type="InvalidLogin""#, "")
        .replace("InvalidLoginFault", "NotAuthenticatedFault");
    let err =
        soap::decode_response::<CurrentTimeRequestType>(untyped.as_bytes()).expect_err("a fault");
    match err {
        SoapError::Fault(fault) => assert_eq!(fault.fault_type(), Some("NotAuthenticated")),
        other => panic!("expected a fault, got {other}"),
    }

    // A fault type newer than the bindings decodes as MethodFault and keeps
    // its name, offline as in a call.
    let newer = document.replace(
        r#"<InvalidLoginFault xmlns="urn:vim25" xsi:type="InvalidLogin"></InvalidLoginFault>"#,
        r#"<QuantumFluxFault xmlns="urn:vim25" xsi:type="QuantumFlux"><faultMessage><key>k</key><message>m</message></faultMessage><flux>3</flux></QuantumFluxFault>"#,
    );
    let fault = soap::decode_fault(newer.as_bytes()).expect("a fault");
    assert_eq!(fault.fault_type(), Some("QuantumFlux"));
    assert!(matches!(fault.detail, Some(AnyMethodFault::MethodFault(_))));
    assert!(fault.to_string().starts_with("QuantumFlux: "), "{fault}");
    let err = vsphere_client::codec::decode_response::<CurrentTimeRequestType>(newer.as_bytes())
        .expect_err("a fault");
    let fault = err.fault().expect("the fault");
    assert_eq!(fault.type_name(), Some("QuantumFlux"));
    assert_eq!(
        fault.detail().map(AnyMethodFault::type_name),
        Some("MethodFault")
    );
}

#[test]
fn request_envelope_and_response() {
    let request = RetrievePropertiesExRequestType {
        this: mor("PropertyCollector", "propertyCollector"),
        spec_set: vec![PropertyFilterSpec::default()],
        options: RetrieveOptions {
            max_objects: Some(100),
        },
    };
    let body = String::from_utf8(soap::encode_request_envelope(&request)).expect("UTF-8");
    assert!(
        body.starts_with(r#"<?xml version="1.0" encoding="UTF-8"?><soapenv:Envelope"#),
        "{body}"
    );
    assert!(body.contains(r#"<RetrievePropertiesEx xmlns="urn:vim25"><_this type="PropertyCollector">propertyCollector</_this><specSet>"#), "{body}");
    assert!(
        body.contains("<options><maxObjects>100</maxObjects></options>"),
        "{body}"
    );

    let response = r#"<?xml version="1.0" encoding="UTF-8"?>
<soapenv:Envelope xmlns:soapenv="http://schemas.xmlsoap.org/soap/envelope/" xmlns:xsd="http://www.w3.org/2001/XMLSchema" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance">
<soapenv:Body><RetrievePropertiesExResponse xmlns="urn:vim25"><returnval>
<objects><obj type="VirtualMachine">vm-42</obj>
 <propSet><name>name</name><val xsi:type="xsd:string">web &amp; db</val></propSet>
 <propSet><name>runtime.powerState</name><val xsi:type="VirtualMachinePowerState">poweredOn</val></propSet>
 <propSet><name>config.hardware.device</name><val xsi:type="ArrayOfVirtualDevice">
   <VirtualDevice xsi:type="VirtualDisk"><key>2000</key><capacityInKB>1024</capacityInKB><futureField>kept out</futureField></VirtualDevice>
   <VirtualDevice xsi:type="VirtualFutureDevice"><key>4000</key><unknownThing><a/></unknownThing></VirtualDevice>
 </val></propSet>
 <propSet><name>summary.quickStats.uptimeSeconds</name><val xsi:type="xsd:int">42</val></propSet>
 <propSet><name>datastore</name><val xsi:type="ArrayOfManagedObjectReference"><ManagedObjectReference type="Datastore">ds-1</ManagedObjectReference></val></propSet>
 <propSet><name>future</name><val xsi:type="SomethingNew"><x>1</x></val></propSet>
</objects></returnval></RetrievePropertiesExResponse></soapenv:Body></soapenv:Envelope>"#;
    let result = soap::decode_response::<RetrievePropertiesExRequestType>(response.as_bytes())
        .expect("decodes")
        .expect("a result");
    let props = &result.objects[0].prop_set;
    assert_eq!(result.objects[0].obj, mor("VirtualMachine", "vm-42"));
    assert_eq!(props[0].val, Value::String("web & db".into()));
    assert_eq!(
        props[1].val.downcast_ref::<VirtualMachinePowerState>(),
        Some(&VirtualMachinePowerState::PoweredOn)
    );
    let devices = props[2]
        .val
        .downcast_ref::<Vec<AnyVirtualDevice>>()
        .expect("typed array");
    assert_eq!(devices.len(), 2);
    assert_eq!(
        devices[0]
            .downcast_ref::<VirtualDisk>()
            .map(|d| d.capacity_in_kb),
        Some(1024)
    );
    // An unknown subtype falls back to the declared type, keeping what it knows.
    match &devices[1] {
        AnyVirtualDevice::VirtualDevice(device) => assert_eq!(device.key, 4000),
        other => panic!("expected the declared type, got {}", other.type_name()),
    }
    assert_eq!(props[3].val, Value::Int(42));
    assert_eq!(
        props[4].val,
        Value::ArrayOfManagedObjectReference(vec![mor("Datastore", "ds-1")])
    );
    match &props[5].val {
        Value::Unknown { type_name, raw_xml } => {
            assert_eq!(type_name, "SomethingNew");
            assert_eq!(raw_xml, "<x>1</x>");
        }
        other => panic!("expected an unknown value, got {other:?}"),
    }

    // Managed object structs take the top-level properties.
    use vsphere_client::xml::ManagedObjectType;
    let mut vm = vsphere_client::mo::VirtualMachine::default();
    for prop in result.objects[0].prop_set.iter().cloned() {
        let known = vm.set_property(&prop.name, prop.val).expect("typed");
        assert_eq!(
            known,
            prop.name == "name" || prop.name == "datastore",
            "{}",
            prop.name
        );
    }
    assert_eq!(vm.name.as_deref(), Some("web & db"));
    assert_eq!(vm.datastore, Some(vec![mor("Datastore", "ds-1")]));
    let field = vsphere_client::mo::property_type("VirtualMachine", "runtime.powerState")
        .expect("valid path");
    assert_eq!(field.type_name, "VirtualMachinePowerState");
    assert!(vsphere_client::mo::property_type("VirtualMachine", "runtime.powerStat").is_err());
    assert!(
        vsphere_client::mo::property_type("VirtualMachine", "config.hardware.device.key").is_err()
    );
}

#[test]
fn unknown_enum_values_are_kept_and_nil_is_honoured() {
    let state: VirtualMachinePowerState = decode("<s>hibernating</s>").expect("decodes");
    assert_eq!(
        state,
        VirtualMachinePowerState::Unrecognized("hibernating".into())
    );
    assert!(encode(&state, "s").ends_with(">hibernating</s>"));
    assert_eq!(
        HostSystemPowerState::from("unknown"),
        HostSystemPowerState::Unknown
    );

    let xml = r#"<info xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"><name xsi:nil="true"/><fullName>x</fullName><patchLevel xsi:nil="true"/></info>"#;
    let about: AboutInfo = decode(xml).expect("decodes");
    assert_eq!(about.name, "");
    assert_eq!(about.full_name, "x");
    assert_eq!(about.patch_level, None);
}

#[test]
fn strings_survive_escaping_both_ways() {
    for text in [
        "a&b",
        "<tag>",
        "quote\" apostrophe'",
        "ünïcødé ✓ 日本",
        "cr\rlf\nboth\r\n",
        "  spaced  ",
        "]]>",
    ] {
        let value = Description {
            label: text.into(),
            summary: text.into(),
        };
        round_trip(&value);
        let mor = ManagedObjectReference::new(text, "v");
        let back: ManagedObjectReference = decode(&encode(&mor, "m")).expect("decodes");
        assert_eq!(back, mor, "attribute {text:?}");
    }
    let entities: Description = decode("<d><label>&#x41;&#66;&lt;&amp;&gt;&quot;&apos;</label><summary><![CDATA[<raw>&]]></summary></d>").expect("decodes");
    assert_eq!(entities.label, "AB<&>\"'");
    assert_eq!(entities.summary, "<raw>&");
}

#[test]
fn malformed_and_truncated_input_is_an_error_naming_the_path() {
    let good = r#"<soapenv:Envelope xmlns:soapenv="http://schemas.xmlsoap.org/soap/envelope/" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"><soapenv:Body><RetrievePropertiesExResponse xmlns="urn:vim25"><returnval><objects><obj type="VirtualMachine">vm-1</obj><propSet><name>a</name><val xsi:type="xsd:int">1</val></propSet></objects><objects><obj type="VirtualMachine">vm-2</obj><propSet><name>a</name><val xsi:type="xsd:int">2</val></propSet><propSet><name>b</name><val xsi:type="xsd:int">x</val></propSet></objects></returnval></RetrievePropertiesExResponse></soapenv:Body></soapenv:Envelope>"#;
    let err = match soap::decode_response::<RetrievePropertiesExRequestType>(good.as_bytes()) {
        Err(SoapError::Decode(e)) => e,
        other => panic!("expected a decode error, got {other:?}"),
    };
    assert_eq!(err.kind(), DecodeErrorKind::InvalidValue);
    assert_eq!(
        err.path(),
        "RetrievePropertiesExResponse/returnval/objects[1]/propSet[1]/val"
    );

    // Every truncation of a valid document is an error, never a panic.
    let valid = good.replace(">x<", ">3<");
    assert!(soap::decode_response::<RetrievePropertiesExRequestType>(valid.as_bytes()).is_ok());
    for end in 0..valid.len() {
        let result =
            soap::decode_response::<RetrievePropertiesExRequestType>(&valid.as_bytes()[..end]);
        assert!(result.is_err(), "truncated at {end} decoded");
    }
    // Byte-level damage: also errors or values, never a panic.
    for i in (0..valid.len()).step_by(7) {
        let mut damaged = valid.clone().into_bytes();
        damaged[i] = b'<';
        let _ = soap::decode_response::<RetrievePropertiesExRequestType>(&damaged);
    }

    let mismatched = "<a><b></c></a>";
    let err = decode::<Description>(mismatched).expect_err("mismatched end tag");
    assert_eq!(err.kind(), DecodeErrorKind::Syntax);

    let html = "<html><body>503 Service Unavailable</body></html>";
    let err =
        soap::decode_response::<CurrentTimeRequestType>(html.as_bytes()).expect_err("not SOAP");
    assert!(
        err.to_string().contains("expected a SOAP Envelope"),
        "{err}"
    );

    let err = decode::<Description>("<d><label><x/></label></d>").expect_err("element in text");
    assert_eq!(err.path(), "d/label/x");
}

#[test]
fn deep_nesting_is_rejected_not_a_stack_overflow() {
    // A fault chain nested far past any real payload, decoded on a small stack.
    let depth = 5_000;
    let mut xml = String::from(r#"<f xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance">"#);
    for _ in 0..depth {
        xml.push_str(r#"<faultCause><fault xsi:type="SystemError">"#);
    }
    for _ in 0..depth {
        xml.push_str("</fault></faultCause>");
    }
    xml.push_str("</f>");
    let result = std::thread::Builder::new()
        .stack_size(2 * 1024 * 1024)
        .spawn(move || decode::<AnyMethodFault>(&xml).map(|_| ()))
        .expect("thread")
        .join()
        .expect("no stack overflow");
    let err = result.expect_err("too deep");
    assert_eq!(err.kind(), DecodeErrorKind::TooDeep);

    // Within the limit it decodes.
    let mut ok = String::from(r#"<f xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance">"#);
    for _ in 0..30 {
        ok.push_str(r#"<faultCause><fault xsi:type="SystemError">"#);
    }
    for _ in 0..30 {
        ok.push_str("</fault></faultCause>");
    }
    ok.push_str("</f>");
    assert!(decode::<AnyMethodFault>(&ok).is_ok());
}

/// What a program listing a VM's hardware does: walk the devices, read the
/// fields every device has through `base()`, pick the NICs with `is`.
#[test]
fn any_enums_give_the_declared_type_and_a_subtype_test() {
    let xml = r#"<hardware xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance">
<numCPU>2</numCPU><numCoresPerSocket>1</numCoresPerSocket><memoryMB>4096</memoryMB>
<device xsi:type="VirtualLsiLogicController"><key>1000</key><deviceInfo><label>SCSI controller 0</label><summary>LSI Logic</summary></deviceInfo><busNumber>0</busNumber><hotAddRemove>true</hotAddRemove><sharedBus>noSharing</sharedBus><scsiCtlrUnitNumber>7</scsiCtlrUnitNumber></device>
<device xsi:type="VirtualDisk"><key>2000</key><controllerKey>1000</controllerKey><unitNumber>0</unitNumber><capacityInKB>1024</capacityInKB></device>
<device xsi:type="VirtualE1000"><key>4000</key><deviceInfo><label>Network adapter 1</label><summary>VM Network</summary></deviceInfo><addressType>generated</addressType><macAddress>00:50:56:aa:bb:01</macAddress></device>
<device xsi:type="VirtualVmxnet3"><key>4001</key><addressType>assigned</addressType><macAddress>00:50:56:aa:bb:02</macAddress></device>
<device xsi:type="VirtualSriovEthernetCard"><key>4002</key><allowGuestOSMtuChange>false</allowGuestOSMtuChange></device>
<device xsi:type="VirtualFutureDevice"><key>9000</key><unitNumber>3</unitNumber><futureField>1</futureField></device>
</hardware>"#;
    let mut hardware: VirtualHardware = decode(xml).expect("decodes");
    let keys: Vec<i32> = hardware.device.iter().map(|d| d.base().key).collect();
    assert_eq!(keys, [1000, 2000, 4000, 4001, 4002, 9000]);
    let labels: Vec<Option<&str>> = hardware
        .device
        .iter()
        .map(|d| {
            d.base()
                .device_info
                .as_ref()
                .map(|i| i.base().label.as_str())
        })
        .collect();
    assert_eq!(
        labels,
        [
            Some("SCSI controller 0"),
            None,
            Some("Network adapter 1"),
            None,
            None,
            None
        ]
    );
    // An unknown xsi:type decodes as the declared type, its known fields kept.
    assert_eq!(hardware.device[5].type_name(), "VirtualDevice");
    assert_eq!(hardware.device[5].base().unit_number, Some(3));

    let nics: Vec<i32> = hardware
        .device
        .iter()
        .filter(|d| d.is::<VirtualEthernetCard>())
        .map(|d| d.base().key)
        .collect();
    assert_eq!(nics, [4000, 4001, 4002]);
    assert!(hardware
        .device
        .iter()
        .all(vsphere_client::types::AnyVirtualDevice::is::<VirtualDevice>));
    assert!(hardware.device[0].is::<VirtualSCSIController>());
    assert!(
        hardware.device[0].is::<VirtualController>() && !hardware.device[0].is::<VirtualDisk>()
    );
    assert!(!hardware.device[1].is::<VirtualEthernetCard>());

    // Every NIC kind of the schema is a VirtualEthernetCard.
    let kinds: Vec<AnyVirtualDevice> = vec![
        VirtualE1000::default().into(),
        VirtualE1000e::default().into(),
        VirtualPCNet32::default().into(),
        VirtualVmxnet::default().into(),
        VirtualVmxnet2::default().into(),
        VirtualVmxnet3::default().into(),
        VirtualVmxnet3Vrdma::default().into(),
        VirtualSriovEthernetCard::default().into(),
        VirtualEthernetCard::default().into(),
    ];
    assert!(kinds
        .iter()
        .all(vsphere_client::types::AnyVirtualDevice::is::<VirtualEthernetCard>));

    // base_mut changes the value held: renumbered keys are what is encoded.
    for (key, device) in (-100..).zip(hardware.device.iter_mut()) {
        device.base_mut().key = key;
    }
    let again = encode(&hardware, "hardware");
    assert!(
        again.contains(r#"<device xsi:type="VirtualE1000"><key>-98</key>"#),
        "{again}"
    );

    // The same on faults: the MethodFault part of any fault.
    let mut fault: AnyMethodFault = FileNotFound::default().into();
    fault.base_mut().fault_message.push(LocalizableMessage {
        key: "msg.file".into(),
        ..Default::default()
    });
    assert_eq!(fault.base().fault_message[0].key, "msg.file");
    assert!(fault.is::<FileFault>() && fault.is::<VimFault>() && !fault.is::<InvalidState>());
}

#[test]
fn any_type_objects_become_the_polymorphic_variant_or_stay_what_they_are() {
    // VirtualDisk and VirtualEthernetCard sit in two different registry
    // chunks; VirtualDiskFlatVer2BackingInfo shares VirtualDisk's chunk
    // without being a device; AboutInfo is of another chunk and family.
    let mut disk = VirtualDisk::default();
    disk.capacity_in_kb = 42;
    match Value::object(disk.clone()).into_typed::<AnyVirtualDevice>() {
        Ok(AnyVirtualDevice::VirtualDisk(held)) => assert_eq!(*held, disk),
        other => panic!("not the disk: {other:?}"),
    }
    let mut card = VirtualEthernetCard::default();
    card.address_type = Some("manual".into());
    match Value::object(card.clone()).into_typed::<AnyVirtualDevice>() {
        Ok(AnyVirtualDevice::VirtualEthernetCard(held)) => assert_eq!(*held, card),
        other => panic!("not the card: {other:?}"),
    }
    let backing = VirtualDiskFlatVer2BackingInfo::default();
    let error = Value::object(backing)
        .into_typed::<AnyVirtualDevice>()
        .unwrap_err();
    assert_eq!(
        (error.expected, error.found.as_str()),
        ("VirtualDevice", "VirtualDiskFlatVer2BackingInfo")
    );
    let error = Value::object(AboutInfo::default())
        .into_typed::<AnyVirtualDevice>()
        .unwrap_err();
    assert_eq!(error.found, "AboutInfo");
}
