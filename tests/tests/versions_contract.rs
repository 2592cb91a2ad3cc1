//! Contract tests of what the bindings do across vSphere versions, against a
//! scripted server (wiremock: the simulator speaks 6.5 and cannot announce
//! another version nor send elements newer than the bindings):
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
    AnyVirtualDevice, ManagedObjectReference, TaskInfo, VirtualEthernetCard,
    VirtualMachineConfigSpec,
};
use vsphere_client::{Client, ErrorKind};
use vsphere_tests::CapturedLogs;
use wiremock::matchers::{body_string_contains, method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

fn envelope(body: &str) -> String {
    format!(
        r#"<?xml version="1.0" encoding="UTF-8"?>
<soapenv:Envelope xmlns:soapenv="http://schemas.xmlsoap.org/soap/envelope/" xmlns:xsd="http://www.w3.org/2001/XMLSchema" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance">
<soapenv:Body>{body}</soapenv:Body></soapenv:Envelope>"#
    )
}

fn soap_ok(body: &str) -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_raw(envelope(body), "text/xml; charset=utf-8")
}

/// Service content with `extra` inside `about` (elements a newer server sends).
fn service_content(api_version: &str, extra: &str) -> String {
    format!(
        r#"<RetrieveServiceContentResponse xmlns="urn:vim25"><returnval>
<rootFolder type="Folder">group-d1</rootFolder>
<propertyCollector type="PropertyCollector">propertyCollector</propertyCollector>
<about><name>VMware vCenter Server</name><fullName>VMware vCenter Server</fullName><vendor>VMware, Inc.</vendor><version>{api_version}</version><build>1</build><osType>linux-x64</osType><productLineId>vpx</productLineId><apiType>VirtualCenter</apiType><apiVersion>{api_version}</apiVersion>{extra}</about>
</returnval></RetrieveServiceContentResponse>"#
    )
}

/// A server announcing `api_version`, whose service content carries `extra`
/// in `about`, answering `ReconfigVM_Task` with a task.
async fn server(api_version: &str, extra: &str) -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/sdk/vimServiceVersions.xml"))
        .respond_with(ResponseTemplate::new(200).set_body_string(format!(
            r#"<?xml version="1.0" encoding="UTF-8" ?><namespaces version="1.0"><namespace><name>urn:vim25</name><version>{api_version}</version></namespace></namespaces>"#
        )))
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(body_string_contains("<RetrieveServiceContent"))
        .respond_with(soap_ok(&service_content(api_version, extra)))
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(body_string_contains("<ReconfigVM_Task"))
        .respond_with(soap_ok(
            r#"<ReconfigVM_TaskResponse xmlns="urn:vim25"><returnval type="Task">task-7</returnval></ReconfigVM_TaskResponse>"#,
        ))
        .mount(&server)
        .await;
    server
}

async fn connect(server: &MockServer) -> Client {
    Client::builder(&format!("{}/sdk", server.uri()))
        .keepalive(None)
        .connect()
        .await
        .expect("connects")
}

async fn reconfig_bodies(server: &MockServer) -> Vec<String> {
    server
        .received_requests()
        .await
        .unwrap_or_default()
        .into_iter()
        .map(|r| String::from_utf8_lossy(&r.body).into_owned())
        .filter(|body| body.contains("<ReconfigVM_Task"))
        .collect()
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

    let old = server("7.0.3.0", "").await;
    let client = connect(&old).await;
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
    assert!(
        reconfig_bodies(&old).await.is_empty(),
        "nothing reached the server"
    );
    // Nothing was sent, so no call was counted.
    assert!(!client.call_stats().contains_key("ReconfigVM_Task"));

    // Unset, the newer field is not sent and the call goes ahead.
    let plain = VirtualMachineConfigSpec {
        tdx_enabled: None,
        ..spec.clone()
    };
    let task = client
        .vim()
        .reconfig_vm_task(&vm(), &plain)
        .await
        .expect("sent");
    assert_eq!(task.value, "task-7");
    let sent = reconfig_bodies(&old).await;
    assert_eq!(sent.len(), 1);
    assert!(
        sent[0].contains("<memoryMB>2048</memoryMB>") && !sent[0].contains("tdxEnabled"),
        "{}",
        sent[0]
    );

    // A 9.0 server gets the field.
    let new = server("9.0.0.0", "").await;
    let client = connect(&new).await;
    assert_eq!(client.api_version(), "9.0.0.0");
    client
        .vim()
        .reconfig_vm_task(&vm(), &spec)
        .await
        .expect("sent");
    let sent = reconfig_bodies(&new).await;
    assert!(
        sent[0].contains("<tdxEnabled>true</tdxEnabled>"),
        "{}",
        sent[0]
    );
}

#[tokio::test]
async fn an_unknown_element_is_counted_each_time_and_reported_once_per_client() {
    let captured = CapturedLogs::default();
    let subscriber = captured.subscriber(tracing::Level::DEBUG);
    let _guard = tracing::subscriber::set_default(subscriber);

    // A server newer than the bindings: `about` holds an element they do
    // not know, twice, and one they do (`name`).
    let server = server(
        "10.0.0.0",
        "<quantumLink>on</quantumLink><quantumLink>off</quantumLink>",
    )
    .await;
    let client = connect(&server).await;
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
    let other = connect(&server).await;
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

    let server = server("10.0.0.0", "").await;
    Mock::given(method("POST"))
        .and(body_string_contains("<RetrievePropertiesEx"))
        .respond_with(soap_ok(NEWER_TYPES))
        .mount(&server)
        .await;
    let client = connect(&server).await;
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
    let server = server("9.1.1.0", "").await;
    Mock::given(method("POST"))
        .and(body_string_contains("<PowerOnVM_Task"))
        .respond_with(
            ResponseTemplate::new(500).set_body_raw(
                envelope(
                    r#"<soapenv:Fault><faultcode>ServerFaultCode</faultcode><faultstring>The qubits decohered.</faultstring><detail><QuantumDecoherenceFaultFault xmlns="urn:vim25" xsi:type="QuantumDecoherenceFault"><faultMessage><key>decoherence</key><message>decohered</message></faultMessage><qubits>64</qubits></QuantumDecoherenceFaultFault></detail></soapenv:Fault>"#,
                ),
                "text/xml; charset=utf-8",
            ),
        )
        .mount(&server)
        .await;
    let client = connect(&server).await;
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
        fault.detail().map(|d| d.type_name()),
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
