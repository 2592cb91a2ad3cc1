//! SearchIndex calls the simulator lacks (FindAllByUuid), against a
//! scripted vCenter.

use vsphere_client::types::ManagedObjectReference;
use vsphere_client::Client;
use wiremock::matchers::{body_string_contains, method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

fn soap_ok(body: &str) -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_raw(
        format!(
            r#"<?xml version="1.0" encoding="UTF-8"?><soapenv:Envelope xmlns:soapenv="http://schemas.xmlsoap.org/soap/envelope/" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"><soapenv:Body>{body}</soapenv:Body></soapenv:Envelope>"#
        ),
        "text/xml; charset=utf-8",
    )
}

#[tokio::test]
async fn every_vm_with_a_uuid_is_found_in_one_call() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/sdk/vimServiceVersions.xml"))
        .respond_with(ResponseTemplate::new(404))
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(body_string_contains("<RetrieveServiceContent"))
        .respond_with(soap_ok(
            r#"<RetrieveServiceContentResponse xmlns="urn:vim25"><returnval><rootFolder type="Folder">group-d1</rootFolder><propertyCollector type="PropertyCollector">propertyCollector</propertyCollector><searchIndex type="SearchIndex">SearchIndex</searchIndex><about><name>VMware vCenter Server</name><fullName>vCenter</fullName><vendor>VMware, Inc.</vendor><version>8.0.2</version><build>1</build><osType>linux-x64</osType><productLineId>vpx</productLineId><apiType>VirtualCenter</apiType><apiVersion>8.0.2.0</apiVersion></about></returnval></RetrieveServiceContentResponse>"#,
        ))
        .mount(&server)
        .await;
    // The instance UUID flag must be sent: BIOS and instance UUIDs are different searches.
    Mock::given(method("POST"))
        .and(body_string_contains("<FindAllByUuid"))
        .and(body_string_contains("<instanceUuid>true</instanceUuid>"))
        .and(body_string_contains("<vmSearch>true</vmSearch>"))
        .respond_with(soap_ok(
            r#"<FindAllByUuidResponse xmlns="urn:vim25"><returnval type="VirtualMachine">vm-1</returnval><returnval type="VirtualMachine">vm-2</returnval></FindAllByUuidResponse>"#,
        ))
        .mount(&server)
        .await;
    let client = Client::builder(&format!("{}/sdk", server.uri()))
        .anonymous()
        .keepalive(None)
        .connect()
        .await
        .expect("connect");
    let found = client
        .search_all_vms_by_uuid("5a0d3c18-8e4f-4c1b-9d2a-3f7e6b5c4d3e", true, None)
        .await
        .expect("search");
    assert_eq!(
        found,
        [
            ManagedObjectReference::new("VirtualMachine", "vm-1"),
            ManagedObjectReference::new("VirtualMachine", "vm-2")
        ]
    );
    let calls = server.received_requests().await.unwrap_or_default();
    assert_eq!(
        calls
            .iter()
            .filter(|r| String::from_utf8_lossy(&r.body).contains("<FindAllByUuid"))
            .count(),
        1
    );
}
