//! Contract tests of what the bindings do across vSphere versions, against
//! the scripted vCenter of the project's test kit (the simulator speaks 6.5
//! and cannot announce another version nor send elements newer than the
//! bindings; those answers are raw bytes here, since the bindings cannot
//! write them):
//!
//! - a request carrying a field newer than the negotiated version fails
//!   before it is sent (`ErrorKind::NewerThanServer`), and goes out whole to
//!   a server that knows the field;
//! - an element the bindings do not know is skipped, counted in the call
//!   statistics each time, and reported in one `debug` event per client;
//! - a data object or fault of an `xsi:type` the bindings do not know is
//!   decoded as the type its field declares, counted (`unknown_types`,
//!   `unknown_faults`) and reported the same way.

use vsphere_client::types::{
    AboutInfo, AnyVirtualDevice, ManagedObjectReference, PowerOnVMRequestType,
    ReconfigVMRequestType, RetrievePropertiesExRequestType, RetrieveServiceContentRequestType,
    TaskInfo, VirtualEthernetCard, VirtualMachineConfigSpec,
};
use vsphere_client::{Client, ErrorKind};
use vsphere_testkit::{MockVCenter, Reply};
use vsphere_tests::CapturedLogs;
use wiremock::ResponseTemplate;

/// Raw bytes, for what the bindings cannot write: elements, types and
/// faults newer than they are.
fn soap_raw<R: vsphere_client::Request>(status: u16, body: &str) -> Reply<R> {
    Reply::http(ResponseTemplate::new(status).set_body_raw(
        format!(
            r#"<?xml version="1.0" encoding="UTF-8"?>
<soapenv:Envelope xmlns:soapenv="http://schemas.xmlsoap.org/soap/envelope/" xmlns:xsd="http://www.w3.org/2001/XMLSchema" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance">
<soapenv:Body>{body}</soapenv:Body></soapenv:Envelope>"#
        ),
        "text/xml; charset=utf-8",
    ))
}

/// A server announcing `api_version` (version file and service content).
async fn server(api_version: &str) -> MockVCenter {
    MockVCenter::builder()
        .api_version(Some(api_version))
        .about(AboutInfo {
            name: "VMware vCenter Server".to_string(),
            full_name: "VMware vCenter Server".to_string(),
            vendor: "VMware, Inc.".to_string(),
            version: api_version.to_string(),
            build: "1".to_string(),
            api_type: "VirtualCenter".to_string(),
            api_version: api_version.to_string(),
            ..AboutInfo::default()
        })
        .start()
        .await
}

async fn anonymous(server: &MockVCenter) -> Client {
    Client::builder(&server.url())
        .keepalive(None)
        .connect()
        .await
        .expect("connects")
}

fn vm() -> ManagedObjectReference {
    ManagedObjectReference::new("VirtualMachine", "vm-42")
}

#[tokio::test]
async fn a_field_newer_than_the_server_fails_before_sending_and_goes_to_a_server_that_knows_it() {
    // `tdxEnabled` is vSphere API 9.0.0.0.
    let spec = VirtualMachineConfigSpec {
        memory_mb: Some(2048),
        tdx_enabled: Some(true),
        ..Default::default()
    };
    let task = ManagedObjectReference::new("Task", "task-7");

    let old = server("7.0.3.0").await;
    old.on::<ReconfigVMRequestType>()
        .returns(task.clone())
        .await;
    let client = old.client().await;
    assert_eq!(client.api_version(), "7.0.3.0");
    let err = client
        .vim()
        .reconfig_vm_task(&vm(), &spec)
        .await
        .expect_err("newer than the server");
    assert_eq!(err.kind(), ErrorKind::NewerThanServer, "{err}");
    let message = err.to_string();
    for part in ["VirtualMachineConfigSpec.tdxEnabled", "9.0.0.0", "7.0.3.0"] {
        assert!(message.contains(part), "{part} in {message}");
    }
    assert_eq!(err.method(), Some("ReconfigVM_Task"));
    assert_eq!(
        old.count::<ReconfigVMRequestType>().await,
        0,
        "nothing reached the server"
    );
    // Nothing was sent, so no call was counted.
    assert!(!client.call_stats().contains_key("ReconfigVM_Task"));

    // Unset, the newer field is not sent and the call goes ahead.
    let plain = VirtualMachineConfigSpec {
        tdx_enabled: None,
        ..spec.clone()
    };
    let sent = client
        .vim()
        .reconfig_vm_task(&vm(), &plain)
        .await
        .expect("sent");
    assert_eq!(sent, task);
    let raw = old.received_raw::<ReconfigVMRequestType>().await;
    assert_eq!(raw.len(), 1);
    let body = String::from_utf8_lossy(&raw[0].body);
    assert!(
        body.contains("<memoryMB>2048</memoryMB>") && !body.contains("tdxEnabled"),
        "{body}"
    );

    // A 9.0 server gets the field.
    let new = server("9.0.0.0").await;
    new.on::<ReconfigVMRequestType>().returns(task).await;
    let client = new.client().await;
    assert_eq!(client.api_version(), "9.0.0.0");
    client
        .vim()
        .reconfig_vm_task(&vm(), &spec)
        .await
        .expect("sent");
    let sent = new.received::<ReconfigVMRequestType>().await;
    assert_eq!(sent[0].spec.tdx_enabled, Some(true), "{:?}", sent[0].spec);
}

#[tokio::test]
async fn an_unknown_element_is_counted_each_time_and_reported_once_per_client() {
    let captured = CapturedLogs::default();
    let subscriber = captured.subscriber(tracing::Level::DEBUG);
    let _guard = tracing::subscriber::set_default(subscriber);

    // A server newer than the bindings: `about` holds an element they do
    // not know, twice, and one they do (`name`).
    let server = server("10.0.0.0").await;
    server
        .on::<RetrieveServiceContentRequestType>()
        .reply(soap_raw(
            200,
            r#"<RetrieveServiceContentResponse xmlns="urn:vim25"><returnval>
<rootFolder type="Folder">group-d1</rootFolder>
<propertyCollector type="PropertyCollector">propertyCollector</propertyCollector>
<about><name>VMware vCenter Server</name><fullName>VMware vCenter Server</fullName><vendor>VMware, Inc.</vendor><version>10.0.0.0</version><build>1</build><osType>linux-x64</osType><productLineId>vpx</productLineId><apiType>VirtualCenter</apiType><apiVersion>10.0.0.0</apiVersion><quantumLink>on</quantumLink><quantumLink>off</quantumLink></about>
</returnval></RetrieveServiceContentResponse>"#,
        ))
        .await;
    // Anonymous: this service content names no session manager.
    let client = anonymous(&server).await;
    assert_eq!(client.service_content().about.name, "VMware vCenter Server");
    let service_instance = ManagedObjectReference::new("ServiceInstance", "ServiceInstance");
    let content = client
        .vim()
        .retrieve_service_content(&service_instance)
        .await
        .expect("decodes");
    assert_eq!(content.about.api_version, "10.0.0.0");

    let stats = client.call_stats()["RetrieveServiceContent"];
    assert_eq!(
        (stats.calls, stats.unknown_elements),
        (2, 4),
        "two calls, two unknown elements each"
    );
    let log = captured.text();
    let events: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("skipped an element the bindings do not know"))
        .collect();
    assert_eq!(events.len(), 1, "one event per (type, element): {log}");
    assert!(
        events[0].contains("DEBUG")
            && events[0].contains("type_name=\"AboutInfo\"")
            && events[0].contains("element=quantumLink"),
        "{}",
        events[0]
    );

    // Another client reports it again, once.
    let other = anonymous(&server).await;
    drop(other);
    let log = captured.text();
    let events = log
        .lines()
        .filter(|l| l.contains("skipped an element the bindings do not know"))
        .count();
    assert_eq!(events, 2, "{log}");
}

/// A `RetrievePropertiesEx` answer of a server newer than the bindings: a VM
/// with a device of a type they do not know, and a task that failed with a
/// fault they do not know.
const NEWER_TYPES: &str = r#"<RetrievePropertiesExResponse xmlns="urn:vim25"><returnval>
<objects><obj type="VirtualMachine">vm-42</obj>
<propSet><name>config.hardware.device</name><val xsi:type="ArrayOfVirtualDevice">
<VirtualDevice xsi:type="VirtualQuantumDevice"><key>16000</key><deviceInfo><label>Quantum device 1</label><summary>qubits</summary></deviceInfo><qubits>64</qubits></VirtualDevice>
<VirtualDevice xsi:type="VirtualE1000"><key>4000</key><deviceInfo><label>Network adapter 1</label><summary>VM Network</summary></deviceInfo><addressType>generated</addressType></VirtualDevice>
</val></propSet></objects>
<objects><obj type="Task">task-7</obj>
<propSet><name>info</name><val xsi:type="TaskInfo"><key>task-7</key><task type="Task">task-7</task><name>QuantumLeap_Task</name><descriptionId>VirtualMachine.quantumLeap</descriptionId><entity type="VirtualMachine">vm-42</entity><state>error</state><cancelled>false</cancelled><cancelable>false</cancelable>
<error><fault xsi:type="QuantumDecoherenceFault"><faultMessage><key>decoherence</key><message>decohered</message></faultMessage></fault><localizedMessage>The qubits decohered.</localizedMessage></error>
<reason xsi:type="TaskReasonUser"><userName>root</userName></reason><queueTime>2026-12-03T09:00:00Z</queueTime><eventChainId>1</eventChainId></val></propSet></objects>
</returnval></RetrievePropertiesExResponse>"#;

#[tokio::test]
async fn a_type_and_a_fault_the_bindings_do_not_know_decode_as_declared_and_are_noted_once() {
    let captured = CapturedLogs::default();
    let subscriber = captured.subscriber(tracing::Level::DEBUG);
    let _guard = tracing::subscriber::set_default(subscriber);

    let server = server("10.0.0.0").await;
    server
        .on::<RetrievePropertiesExRequestType>()
        .reply(soap_raw(200, NEWER_TYPES))
        .await;
    let client = server.client().await;
    let collector = client.service_content().property_collector.clone();
    for _ in 0..2 {
        let result = client
            .vim()
            .retrieve_properties_ex(&collector, &[], &Default::default())
            .await
            .expect("decodes")
            .expect("objects");

        // The unknown device is a `VirtualDevice` with the fields it shares;
        // the known one keeps its own type.
        let devices = result.objects[0].prop_set[0]
            .val
            .downcast_ref::<Vec<AnyVirtualDevice>>()
            .expect("devices");
        assert_eq!(devices.len(), 2);
        assert_eq!(devices[0].type_name(), "VirtualDevice");
        assert_eq!(devices[0].base().key, 16000);
        assert_eq!(
            devices[0]
                .base()
                .device_info
                .as_ref()
                .map(|d| d.base().label.as_str()),
            Some("Quantum device 1")
        );
        assert!(devices[1].is::<VirtualEthernetCard>());
        // The unknown fault is a `MethodFault` with its message.
        let info = result.objects[1].prop_set[0]
            .val
            .downcast_ref::<TaskInfo>()
            .expect("task info");
        let error = info.error.as_ref().expect("error");
        assert_eq!(error.fault.type_name(), "MethodFault");
        assert_eq!(
            error.localized_message.as_deref(),
            Some("The qubits decohered.")
        );
    }

    let stats = client.call_stats()["RetrievePropertiesEx"];
    assert_eq!(
        (
            stats.calls,
            stats.unknown_types,
            stats.unknown_faults,
            stats.unknown_elements
        ),
        (2, 2, 2, 2),
        "per call: one unknown device type, one unknown fault, the device's unknown <qubits>"
    );
    let log = captured.text();
    let types: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("decoded a type the bindings do not know"))
        .collect();
    assert_eq!(types.len(), 1, "one event per (declared, xsi:type): {log}");
    assert!(
        types[0].contains("declared=\"VirtualDevice\"")
            && types[0].contains("xsi_type=VirtualQuantumDevice"),
        "{}",
        types[0]
    );
    let faults: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("decoded a fault type the bindings do not know"))
        .collect();
    assert_eq!(faults.len(), 1, "{log}");
    assert!(
        faults[0].contains("declared=\"MethodFault\"")
            && faults[0].contains("fault=QuantumDecoherenceFault"),
        "{}",
        faults[0]
    );
}

#[tokio::test]
async fn a_soap_fault_of_an_unknown_type_keeps_its_name_and_is_counted() {
    let server = server("9.1.1.0").await;
    server
        .on::<PowerOnVMRequestType>()
        .reply(soap_raw(
            500,
            r#"<soapenv:Fault><faultcode>ServerFaultCode</faultcode><faultstring>The qubits decohered.</faultstring><detail><QuantumDecoherenceFaultFault xmlns="urn:vim25" xsi:type="QuantumDecoherenceFault"><faultMessage><key>decoherence</key><message>decohered</message></faultMessage><qubits>64</qubits></QuantumDecoherenceFaultFault></detail></soapenv:Fault>"#,
        ))
        .await;
    let client = server.client().await;
    let err = client
        .vim()
        .power_on_vm_task(&vm(), None)
        .await
        .expect_err("a fault");
    assert_eq!(err.kind(), ErrorKind::Fault, "{err}");
    let fault = err.fault().expect("fault");
    assert_eq!(fault.type_name(), Some("QuantumDecoherenceFault"));
    assert_eq!(fault.message(), "The qubits decohered.");
    assert_eq!(
        fault
            .detail()
            .map(vsphere_client::types::AnyMethodFault::type_name),
        Some("MethodFault"),
        "decoded as the declared fault"
    );
    let stats = client.call_stats()["PowerOnVM_Task"];
    assert_eq!(
        (stats.faults, stats.unknown_faults, stats.unknown_elements),
        (1, 1, 1),
        "the fault, its unknown type, its unknown <qubits>"
    );
}
