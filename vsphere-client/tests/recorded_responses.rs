//! Decoding what real vCenter 9.0 servers sent (tests/fixtures/recorded, see
//! its README): every element of each recording must land in a field of the
//! decoded value. Two checks: decoding skips no element (the count of
//! unknown elements is zero), and encoding the decoded value again writes
//! every recorded element back, with the same text, in the recorded order
//! (the recording's elements are a subsequence of ours at every level: ours
//! adds the required fields a recording leaves out). The order check is
//! the XML sequence order of each type against the server's.

use std::io::Read;

use quick_xml::events::Event;
use vsphere_client::types::{QueryConfigOptionExRequestType, QueryConfigTargetRequestType};
use vsphere_client::xml::{skipped, Encode, Request, XmlWriter};

fn recording(name: &str) -> String {
    let path = format!(
        "{}/tests/fixtures/recorded/{name}.xml.gz",
        env!("CARGO_MANIFEST_DIR")
    );
    let file = std::fs::File::open(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let mut xml = String::new();
    flate2::read::GzDecoder::new(file)
        .read_to_string(&mut xml)
        .unwrap_or_else(|e| panic!("{path}: {e}"));
    xml
}

/// The recording (one element: the operation's result) as the body of the
/// operation's SOAP response, as the server sends it.
fn response_envelope(operation: &str, recorded: &str) -> String {
    let start = recorded.find('>').expect("a root start tag") + 1;
    let end = recorded.rfind("</").expect("a root end tag");
    let root_tag = &recorded[..start];
    // The root's attributes (namespace declarations) stay on `returnval`.
    let attributes = root_tag
        .trim_start_matches('<')
        .trim_end_matches('>')
        .split_once(' ')
        .map(|(_, a)| format!(" {a}"))
        .unwrap_or_default();
    format!(
        r#"<soapenv:Envelope xmlns:soapenv="http://schemas.xmlsoap.org/soap/envelope/" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"><soapenv:Body><{operation}Response xmlns="urn:vim25"><returnval{attributes}>{}</returnval></{operation}Response></soapenv:Body></soapenv:Envelope>"#,
        &recorded[start..end]
    )
}

/// An element: local name, `xsi:type`, trimmed text, children.
#[derive(Debug)]
struct Node {
    name: String,
    xsi_type: Option<String>,
    text: String,
    children: Vec<Node>,
}

fn local(name: &[u8]) -> String {
    let name = String::from_utf8_lossy(name);
    name.rsplit(':').next().unwrap_or_default().to_string()
}

fn parse(xml: &str) -> Node {
    let mut reader = quick_xml::Reader::from_str(xml);
    let mut stack: Vec<Node> = vec![Node {
        name: String::new(),
        xsi_type: None,
        text: String::new(),
        children: Vec::new(),
    }];
    loop {
        let event = reader.read_event().expect("well-formed XML");
        match event {
            Event::Start(ref e) | Event::Empty(ref e) => {
                let xsi_type = e
                    .attributes()
                    .filter_map(Result::ok)
                    .find(|a| {
                        let key = a.key.as_ref();
                        key.ends_with(b":type") && key != b"type"
                    })
                    .map(|a| local(&a.value));
                let node = Node {
                    name: local(e.name().as_ref()),
                    xsi_type,
                    text: String::new(),
                    children: Vec::new(),
                };
                if matches!(event, Event::Empty(_)) {
                    stack.last_mut().expect("parent").children.push(node);
                } else {
                    stack.push(node);
                }
            }
            Event::Text(t) => {
                let text = t.xml_content().expect("text");
                stack.last_mut().expect("open").text.push_str(text.trim());
            }
            Event::GeneralRef(r) => {
                let resolved = match r.as_ref() {
                    b"amp" => "&",
                    b"lt" => "<",
                    b"gt" => ">",
                    b"quot" => "\"",
                    b"apos" => "'",
                    other => panic!("entity {}", String::from_utf8_lossy(other)),
                };
                stack.last_mut().expect("open").text.push_str(resolved);
            }
            Event::End(_) => {
                let node = stack.pop().expect("open element");
                stack.last_mut().expect("parent").children.push(node);
            }
            Event::Eof => break,
            _ => {}
        }
    }
    let mut document = stack.pop().expect("document");
    assert_eq!(document.children.len(), 1, "one root element");
    document.children.pop().expect("root")
}

fn same_text(recorded: &str, ours: &str) -> bool {
    if recorded == ours {
        return true;
    }
    // An unsigned `xsd:byte` (a PCI bus number, 138) reads as the signed
    // byte of the same bits (-118).
    if let (Ok(a @ 128..=255), Ok(b)) = (recorded.parse::<i16>(), ours.parse::<i8>()) {
        return a as u8 == b as u8;
    }
    // Numbers may be written differently (`1.0` / `1`, `+0` / `0`).
    match (recorded.parse::<f64>(), ours.parse::<f64>()) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}

/// Whether `ours` holds everything `recorded` does: same text, and the
/// recorded children, in their order, among ours (greedily, by name).
/// Returns the path of the first recorded element that is missing.
fn missing_in(recorded: &Node, ours: &Node, path: &str) -> Option<String> {
    let here = format!("{path}/{}", recorded.name);
    if recorded.children.is_empty() && !same_text(&recorded.text, &ours.text) {
        return Some(format!(
            "{here}: text {:?}, re-encoded {:?}",
            recorded.text, ours.text
        ));
    }
    if let (Some(a), Some(b)) = (&recorded.xsi_type, &ours.xsi_type) {
        if a != b {
            return Some(format!("{here}: xsi:type {a}, re-encoded {b}"));
        }
    }
    let mut candidates = ours.children.iter();
    for (index, child) in recorded.children.iter().enumerate() {
        let found = candidates.by_ref().find(|c| c.name == child.name);
        match found {
            Some(theirs) => {
                if let Some(missing) = missing_in(child, theirs, &here) {
                    return Some(missing);
                }
            }
            None => {
                let before = index
                    .checked_sub(1)
                    .map(|i| recorded.children[i].name.as_str())
                    .unwrap_or("(first)");
                return Some(format!(
                    "{here}/{}[{index}]: not re-encoded after <{before}> (missing, or out of the recorded order)",
                    child.name
                ));
            }
        }
    }
    None
}

fn count_elements(node: &Node) -> usize {
    1 + node.children.iter().map(count_elements).sum::<usize>()
}

/// Decodes recording `name` as the result of `R`, checks that nothing was
/// skipped, and that every recorded element is in the re-encoded value.
/// Returns the decoded result and how many elements the recording has.
fn check<R, T>(name: &str) -> (T, usize)
where
    R: Request<Response = Option<T>>,
    T: Encode,
{
    let recorded = recording(name);
    let envelope = response_envelope(R::NAME, &recorded);
    let (decoded, skipped) =
        skipped::collect(|| vsphere_client::codec::decode_response::<R>(envelope.as_bytes()));
    let decoded = decoded
        .unwrap_or_else(|e| panic!("{name}: {}", e.report()))
        .unwrap_or_else(|| panic!("{name}: no returnval"));
    assert!(
        skipped.is_empty(),
        "{name}: {} elements unknown to the bindings: {:?}",
        skipped.total,
        skipped.elements
    );

    let tree = parse(&recorded);
    let mut w = XmlWriter::new();
    decoded.encode(&mut w, &tree.name);
    let ours = parse(std::str::from_utf8(w.as_bytes()).expect("UTF-8"));
    if let Some(missing) = missing_in(&tree, &ours, "") {
        panic!("{name}: {missing}");
    }
    (decoded, count_elements(&tree))
}

#[test]
fn config_options_of_vsphere_8_0_u2_and_9_0_hardware_decode_whole() {
    for (name, version, description) in [
        (
            "normal-config-option-vmx-21",
            "vmx-21",
            "ESXi 8.0 U2 virtual machine",
        ),
        (
            "normal-config-option-vmx-22",
            "vmx-22",
            "ESXi 9.0 virtual machine",
        ),
    ] {
        let (option, elements) = check::<QueryConfigOptionExRequestType, _>(name);
        assert_eq!(
            (option.version.as_str(), option.description.as_str()),
            (version, description)
        );
        assert!(option.guest_os_descriptor.len() > 100, "{name}");
        assert!(elements > 20_000, "{name}: {elements} elements");
        // Fields added after 7.0.3.0 are there, decoded.
        let alma = option
            .guest_os_descriptor
            .iter()
            .find(|g| g.id == "almalinux_64Guest")
            .expect("AlmaLinux");
        assert_eq!(alma.vsgx_remote_attestation_supported, Some(true));
        assert_eq!(alma.vwdt_supported, Some(true));
    }
}

#[test]
fn config_targets_of_a_vsphere_9_0_host_and_cluster_decode_whole() {
    for name in [
        "normal-config-target-HostSystem-host-15",
        "normal-config-target-ClusterComputeResource-domain-c52",
        "vgpus-and-sriov-config-target-HostSystem-ha-host",
    ] {
        let (target, elements) = check::<QueryConfigTargetRequestType, _>(name);
        assert!(
            target.num_cpus > 0 && !target.datastore.is_empty(),
            "{name}"
        );
        assert!(elements > 100, "{name}: {elements} elements");
    }
}
