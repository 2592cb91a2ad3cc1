//! The server side of `vsphere_client::xml::soap` the kit is built on:
//! what `encode_response_envelope` and `encode_fault_envelope` write, the
//! client's decoders read back unchanged; `request_operation` and
//! `decode_request_envelope` read what the client's encoder writes, and
//! refuse what is not that request.

use vsphere_client::types::{
    AnyMethodFault, CurrentTimeRequestType, DuplicateName, DynamicProperty, LogoutRequestType,
    ManagedObjectReference, ModifyListViewRequestType, ObjectContent, PowerOnVMRequestType,
    RetrievePropertiesExRequestType, RetrieveResult, SessionIsActiveRequestType,
};
use vsphere_client::xml::soap::{
    decode_fault, decode_request_envelope, decode_response, encode_fault_envelope,
    encode_request_envelope, encode_response_envelope, request_operation, SoapError, SoapFault,
};
use vsphere_client::{DateTime, Value};

fn vm() -> ManagedObjectReference {
    ManagedObjectReference::new("VirtualMachine", "vm-42")
}

fn text(document: &[u8]) -> &str {
    std::str::from_utf8(document).expect("UTF-8")
}

#[test]
fn a_response_envelope_holds_the_return_value_in_the_response_element() {
    let document = encode_response_envelope::<PowerOnVMRequestType>(&vm());
    let text = text(&document);
    assert!(text.contains("<soapenv:Envelope"), "{text}");
    assert!(
        text.contains(r#"<PowerOnVM_TaskResponse xmlns="urn:vim25"><returnval type="VirtualMachine">vm-42</returnval></PowerOnVM_TaskResponse>"#),
        "{text}"
    );
}

#[test]
fn responses_of_each_return_shape_decode_to_what_was_encoded() {
    let now = DateTime::new("2024-05-01T12:00:00Z");
    let document = encode_response_envelope::<CurrentTimeRequestType>(&now);
    assert_eq!(
        decode_response::<CurrentTimeRequestType>(&document),
        Ok(now)
    );

    let document = encode_response_envelope::<PowerOnVMRequestType>(&vm());
    assert_eq!(decode_response::<PowerOnVMRequestType>(&document), Ok(vm()));

    let document = encode_response_envelope::<LogoutRequestType>(&());
    assert!(!text(&document).contains("returnval"));
    assert_eq!(decode_response::<LogoutRequestType>(&document), Ok(()));

    for active in [true, false] {
        let document = encode_response_envelope::<SessionIsActiveRequestType>(&active);
        assert_eq!(
            decode_response::<SessionIsActiveRequestType>(&document),
            Ok(active)
        );
    }

    // Option: absent, then present with an anyType value inside.
    let document = encode_response_envelope::<RetrievePropertiesExRequestType>(&None);
    assert_eq!(
        decode_response::<RetrievePropertiesExRequestType>(&document),
        Ok(None)
    );
    let result = Some(RetrieveResult {
        token: Some("page-2".to_string()),
        objects: vec![ObjectContent {
            obj: vm(),
            prop_set: vec![DynamicProperty {
                name: "name".to_string(),
                val: Value::String("web <1> & co".to_string()),
            }],
            missing_set: Vec::new(),
        }],
    });
    let document = encode_response_envelope::<RetrievePropertiesExRequestType>(&result);
    assert_eq!(
        decode_response::<RetrievePropertiesExRequestType>(&document),
        Ok(result)
    );

    // Vec: none, then one returnval per item.
    for refs in [
        Vec::new(),
        vec![vm(), ManagedObjectReference::new("Task", "task-1")],
    ] {
        let document = encode_response_envelope::<ModifyListViewRequestType>(&refs);
        assert_eq!(
            text(&document).matches("<returnval").count(),
            refs.len(),
            "{}",
            text(&document)
        );
        assert_eq!(
            decode_response::<ModifyListViewRequestType>(&document),
            Ok(refs)
        );
    }
}

#[test]
fn a_fault_envelope_decodes_to_the_same_typed_fault() {
    let duplicate = DuplicateName {
        name: "web <1> & co".to_string(),
        object: ManagedObjectReference::new("Folder", "group-v3"),
        ..Default::default()
    };
    let fault = SoapFault {
        faultcode: "ServerFaultCode".to_string(),
        faultstring: "The name 'web <1> & co' already exists.".to_string(),
        type_name: Some("DuplicateName".to_string()),
        detail: Some(AnyMethodFault::from(duplicate)),
    };
    let document = encode_fault_envelope(&fault);
    let written = text(&document);
    assert!(
        written.contains("<detail><DuplicateNameFault")
            && written.contains(r#"xsi:type="DuplicateName""#),
        "the detail element as vCenter names it: {written}"
    );
    assert_eq!(decode_fault(&document), Ok(fault.clone()));
    // What a client reading the operation's response gets.
    assert_eq!(
        decode_response::<PowerOnVMRequestType>(&document),
        Err(SoapError::Fault(fault))
    );
}

#[test]
fn a_fault_without_detail_keeps_its_code_and_message() {
    let fault = SoapFault {
        faultcode: "ClientFaultCode".to_string(),
        faultstring: "Cannot decode the request".to_string(),
        type_name: None,
        detail: None,
    };
    let document = encode_fault_envelope(&fault);
    assert!(!text(&document).contains("<detail"), "{}", text(&document));
    assert_eq!(decode_fault(&document), Ok(fault));
}

#[test]
fn request_operation_names_the_body_element_of_a_request() {
    let power_on = PowerOnVMRequestType {
        this: vm(),
        host: None,
    };
    let document = encode_request_envelope(&power_on);
    assert_eq!(request_operation(&document), Ok("PowerOnVM_Task"));
    let document = encode_request_envelope(&CurrentTimeRequestType {
        this: ManagedObjectReference::new("ServiceInstance", "ServiceInstance"),
    });
    assert_eq!(request_operation(&document), Ok("CurrentTime"));
}

#[test]
fn request_operation_refuses_what_is_not_a_request() {
    for (document, why) in [
        (&b"<html><body>Not SOAP</body></html>"[..], "not an envelope"),
        (
            &br#"<soapenv:Envelope xmlns:soapenv="http://schemas.xmlsoap.org/soap/envelope/"><soapenv:Body></soapenv:Body></soapenv:Envelope>"#[..],
            "an empty body",
        ),
        (
            &br#"<soapenv:Envelope xmlns:soapenv="http://schemas.xmlsoap.org/soap/envelope/"><soapenv:Header/></soapenv:Envelope>"#[..],
            "no body",
        ),
        (&b"<soapenv:Envelope xmlns:soapenv="[..], "truncated"),
        (&b""[..], "empty"),
    ] {
        assert!(
            matches!(request_operation(document), Err(SoapError::Decode(_))),
            "{why}: {:?}",
            request_operation(document)
        );
    }
    let fault = encode_fault_envelope(&SoapFault {
        faultcode: "ServerFaultCode".to_string(),
        faultstring: "boom".to_string(),
        ..SoapFault::default()
    });
    assert!(matches!(
        request_operation(&fault),
        Err(SoapError::Fault(f)) if f.faultstring == "boom"
    ));
}

#[test]
fn a_request_envelope_decodes_into_the_typed_request() {
    let power_on = PowerOnVMRequestType {
        this: vm(),
        host: Some(ManagedObjectReference::new("HostSystem", "host-9")),
    };
    let document = encode_request_envelope(&power_on);
    assert_eq!(
        decode_request_envelope::<PowerOnVMRequestType>(&document),
        Ok(power_on)
    );
}

#[test]
fn a_request_of_another_operation_or_cut_short_is_refused() {
    let document = encode_request_envelope(&PowerOnVMRequestType {
        this: vm(),
        host: None,
    });
    match decode_request_envelope::<CurrentTimeRequestType>(&document) {
        Err(SoapError::Decode(err)) => assert!(
            err.to_string()
                .contains("expected <CurrentTime>, found <PowerOnVM_Task>"),
            "{err}"
        ),
        other => panic!("another operation decoded: {other:?}"),
    }
    let cut = &document[..document.len() - 30];
    assert!(matches!(
        decode_request_envelope::<PowerOnVMRequestType>(cut),
        Err(SoapError::Decode(_))
    ));
}
