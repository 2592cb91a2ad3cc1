//! The type families behind features (`all-events`, `all-faults`, `admin`):
//! built without them, an event, a rare fault or an administration type
//! decodes as its nearest ancestor the
//! crate holds, with what that ancestor knows, and a fault keeps its wire name;
//! built with them, as its own type. `make test` runs this file both ways.

use vsphere_client::types::*;
use vsphere_client::xml::{skipped, soap};
use vsphere_client::xml::{Decode, Value, XmlReader};

fn decode<T: Decode>(xml: &str) -> T {
    let mut r = XmlReader::new(xml.as_bytes(), &REGISTRY);
    r.root().expect("a root element");
    T::decode(&mut r).unwrap_or_else(|e| panic!("{e}\n{xml}"))
}

const XSI: &str = r#"xmlns="urn:vim25" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance""#;

/// A `VmPoweredOnEvent` (extends `VmEvent`, which extends `Event`) as
/// `QueryEvents` returns it: `template` is `VmEvent`'s own field.
fn powered_on_event(tag: &str) -> String {
    format!(
        r#"<{tag} {XSI} xsi:type="VmPoweredOnEvent"><key>7</key><chainId>7</chainId><createdTime>2026-01-02T03:04:05Z</createdTime><userName>VSPHERE.LOCAL\admin</userName><vm><name>web-1</name><vm type="VirtualMachine">vm-42</vm></vm><fullFormattedMessage>web-1 on esx-1 is powered on</fullFormattedMessage><template>false</template></{tag}>"#
    )
}

fn assert_event_base(event: &Event) {
    assert_eq!(event.key, 7);
    assert_eq!(event.user_name, r"VSPHERE.LOCAL\admin");
    assert_eq!(
        event.full_formatted_message.as_deref(),
        Some("web-1 on esx-1 is powered on")
    );
    let vm = event.vm.as_ref().expect("the event's VM");
    assert_eq!(vm.name, "web-1");
    assert_eq!(vm.vm.value, "vm-42");
}

#[test]
fn an_event_decodes_as_its_own_type_only_with_all_events() {
    let (event, noted) = skipped::collect(|| decode::<AnyEvent>(&powered_on_event("returnval")));
    assert_event_base(event.base());
    #[cfg(not(feature = "all-events"))]
    {
        // `VmEvent` is gated too: the nearest ancestor compiled in is `Event`,
        // and the call's stats count a type the bindings did not decode as itself.
        assert_eq!(event.type_name(), "Event");
        assert!(matches!(event, AnyEvent::Event(_)));
        assert_eq!((noted.types, noted.faults), (1, 0), "{noted:?}");
    }
    #[cfg(feature = "all-events")]
    {
        assert!(noted.is_empty(), "{noted:?}");
        assert_eq!(event.type_name(), "VmPoweredOnEvent");
        match &event {
            AnyEvent::VmPoweredOnEvent(e) => assert!(!e.template),
            other => panic!("expected a VmPoweredOnEvent, got {other:?}"),
        }
    }
}

#[test]
fn an_event_in_an_any_type_slot_decodes_as_its_nearest_compiled_in_type() {
    let value: Value = decode(&powered_on_event("val"));
    let object = value.as_object().expect("an object, not raw XML");
    #[cfg(not(feature = "all-events"))]
    {
        assert_eq!(object.type_name(), "Event");
        assert_event_base(object.downcast_ref::<Event>().expect("an Event"));
    }
    #[cfg(feature = "all-events")]
    {
        assert_eq!(object.type_name(), "VmPoweredOnEvent");
        let event = object
            .downcast_ref::<VmPoweredOnEvent>()
            .expect("a VmPoweredOnEvent");
        assert_event_base(event);
    }
}

#[test]
fn a_rare_fault_decodes_as_its_nearest_common_ancestor_and_keeps_its_name() {
    // `FileTooLarge` extends `FileFault` (a common fault, always compiled in).
    let document = format!(
        r#"<?xml version="1.0" encoding="UTF-8"?>
<soapenv:Envelope xmlns:soapenv="http://schemas.xmlsoap.org/soap/envelope/" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance">
<soapenv:Body><soapenv:Fault><faultcode>ServerFaultCode</faultcode><faultstring>File is larger than the maximum size supported by datastore</faultstring>
<detail><FileTooLargeFault {XSI} xsi:type="FileTooLarge"><file>[ds1] big.vmdk</file><datastore>ds1</datastore><fileSize>4398046511104</fileSize></FileTooLargeFault></detail></soapenv:Fault></soapenv:Body></soapenv:Envelope>"#
    );
    let (fault, noted) = skipped::collect(|| soap::decode_fault(document.as_bytes()));
    let fault = fault.expect("a fault");
    assert_eq!(fault.fault_type(), Some("FileTooLarge"));
    let detail = fault.detail.as_ref().expect("the fault's detail");
    #[cfg(not(feature = "all-faults"))]
    assert_eq!(noted.faults, 1, "{noted:?}");
    #[cfg(feature = "all-faults")]
    assert!(noted.is_empty(), "{noted:?}");
    #[cfg(not(feature = "all-faults"))]
    match detail {
        AnyMethodFault::FileFault(f) => assert_eq!(f.file, "[ds1] big.vmdk"),
        other => panic!("expected the FileFault part, got {other:?}"),
    }
    #[cfg(feature = "all-faults")]
    match detail {
        AnyMethodFault::FileTooLarge(f) => {
            assert_eq!(f.file, "[ds1] big.vmdk");
            assert_eq!(f.file_size, 4_398_046_511_104);
        }
        other => panic!("expected a FileTooLarge, got {other:?}"),
    }
    // Whatever the build, the common faults are types of their own.
    let login = document
        .replace("FileTooLargeFault", "InvalidLoginFault")
        .replace(r#"xsi:type="FileTooLarge""#, r#"xsi:type="InvalidLogin""#);
    let fault = soap::decode_fault(login.as_bytes()).expect("a fault");
    assert!(matches!(
        fault.detail,
        Some(AnyMethodFault::InvalidLogin(_))
    ));
}

#[test]
fn an_administration_type_in_an_any_type_slot_decodes_as_far_as_the_build_knows_it() {
    // `LicenseUsageInfo` (extends `DynamicData`) is held only by
    // `LicenseManager` (an `admin` managed object).
    let xml = format!(
        r#"<val {XSI} xsi:type="LicenseUsageInfo"><source xsi:type="EvaluationLicenseSource"><remainingHours>12</remainingHours></source><sourceAvailable>true</sourceAvailable></val>"#
    );
    let value: Value = decode(&xml);
    #[cfg(not(feature = "admin"))]
    {
        let object = value.as_object().expect("an object, not raw XML");
        assert_eq!(object.type_name(), "DynamicData");
        // Still in the registry: its name and place in the hierarchy answer.
        assert!(REGISTRY.is_subtype_of("LicenseUsageInfo", "DynamicData"));
    }
    #[cfg(feature = "admin")]
    {
        let usage = value
            .downcast_ref::<LicenseUsageInfo>()
            .expect("a LicenseUsageInfo");
        assert!(usage.source_available);
        match &usage.source {
            AnyLicenseSource::EvaluationLicenseSource(e) => assert_eq!(e.remaining_hours, Some(12)),
            other => panic!("expected an EvaluationLicenseSource, got {other:?}"),
        }
    }
}
