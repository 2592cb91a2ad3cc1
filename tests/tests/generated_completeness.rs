//! The generated bindings cover the whole WSDL bundle and what later API
//! versions added (`wsdl/additions.json`): every operation, every complex
//! type that is not an `ArrayOf*` wrapper (with every field), and every
//! enumeration value. Reads the bundle and the table themselves, so it fails
//! if generation dropped anything. Skipped (with a message) where the bundle
//! is absent.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use quick_xml::events::Event;
use quick_xml::Reader;
use vsphere_client::types::REGISTRY;
use vsphere_client::xml::{TypeKind, Value, XmlReader};

fn bundle_dir() -> Option<PathBuf> {
    let dir = match std::env::var_os("WSDL_DIR") {
        Some(dir) => PathBuf::from(dir),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/wsdl/vim25-7.0.3"),
    };
    dir.join("vim.wsdl").exists().then_some(dir)
}

#[derive(Default)]
struct Bundle {
    /// complex type -> its own element names
    complex_types: BTreeMap<String, Vec<String>>,
    enums: BTreeMap<String, Vec<String>>,
    operations: Vec<String>,
}

fn attribute(e: &quick_xml::events::BytesStart<'_>, name: &[u8]) -> Option<String> {
    e.attributes()
        .flatten()
        .find(|a| a.key.as_ref() == name)
        .map(|a| String::from_utf8_lossy(&a.value).into_owned())
}

/// Reads the schema files' complex types, enumerations and the port type's operations.
fn read_bundle(dir: &Path) -> Bundle {
    let mut bundle = Bundle::default();
    for file in [
        "core-types.xsd",
        "query-types.xsd",
        "vim-types.xsd",
        "query-messagetypes.xsd",
        "vim-messagetypes.xsd",
        "vim.wsdl",
    ] {
        let text = std::fs::read_to_string(dir.join(file)).expect("bundle file");
        let mut reader = Reader::from_str(&text);
        let mut current_complex: Option<String> = None;
        let mut current_enum: Option<String> = None;
        let mut depth = 0usize;
        let mut complex_depth = 0usize;
        let mut in_port_type = false;
        loop {
            let event = reader.read_event().expect("well-formed bundle");
            let (start, empty) = match &event {
                Event::Start(e) => (Some(e.clone()), false),
                Event::Empty(e) => (Some(e.clone()), true),
                Event::End(e) => {
                    let name = e.local_name();
                    if name.as_ref() == b"complexType" && depth == complex_depth {
                        current_complex = None;
                    }
                    if name.as_ref() == b"simpleType" {
                        current_enum = None;
                    }
                    if name.as_ref() == b"portType" {
                        in_port_type = false;
                    }
                    depth -= 1;
                    continue;
                }
                Event::Eof => break,
                _ => continue,
            };
            let e = start.expect("start");
            if !empty {
                depth += 1;
            }
            match e.local_name().as_ref() {
                b"complexType" => {
                    if let Some(name) = attribute(&e, b"name") {
                        bundle.complex_types.insert(name.clone(), Vec::new());
                        current_complex = Some(name);
                        complex_depth = depth;
                    }
                }
                b"element" if file != "vim.wsdl" => {
                    if let (Some(ty), Some(name)) = (&current_complex, attribute(&e, b"name")) {
                        bundle
                            .complex_types
                            .get_mut(ty)
                            .expect("open type")
                            .push(name);
                    }
                }
                b"simpleType" => {
                    if let Some(name) = attribute(&e, b"name") {
                        bundle.enums.insert(name.clone(), Vec::new());
                        current_enum = Some(name);
                    }
                }
                b"enumeration" => {
                    if let (Some(ty), Some(value)) = (&current_enum, attribute(&e, b"value")) {
                        bundle.enums.get_mut(ty).expect("open enum").push(value);
                    }
                }
                b"portType" => in_port_type = true,
                b"operation" if in_port_type => bundle
                    .operations
                    .push(attribute(&e, b"name").expect("operation name")),
                _ => {}
            }
        }
    }
    bundle
}

/// Adds what `wsdl/additions.json` lists: new types with their fields, new
/// fields of bundle types, new enumerations and values, new operations.
fn add_additions(bundle: &mut Bundle) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../wsdl/additions.json");
    let text = std::fs::read_to_string(path).expect("wsdl/additions.json");
    let table: serde_json::Value = serde_json::from_str(&text).expect("additions.json is JSON");
    let names = |items: &serde_json::Value| -> Vec<String> {
        items
            .as_array()
            .expect("a list")
            .iter()
            .map(|item| item["name"].as_str().expect("a name").to_string())
            .collect()
    };
    for ty in table["types"].as_array().expect("types") {
        let name = ty["name"].as_str().expect("type name").to_string();
        let fields = names(&ty["fields"]);
        bundle.complex_types.entry(name).or_default().extend(fields);
    }
    for e in table["enums"].as_array().expect("enums") {
        let name = e["name"].as_str().expect("enum name").to_string();
        let values = names(&e["values"]);
        let known = bundle.enums.entry(name).or_default();
        for (value, after) in values
            .into_iter()
            .zip(e["values"].as_array().expect("values"))
        {
            // In the schema's order: after the value it follows.
            let at = match after["after"].as_str() {
                Some(prev) => known.iter().position(|v| v == prev).map_or(0, |i| i + 1),
                None if after.get("after").is_some() => 0,
                None => known.len(),
            };
            known.insert(at, value);
        }
    }
    for op in table["operations"].as_array().expect("operations") {
        let name = op["name"].as_str().expect("operation name");
        if op["since"].is_string() {
            bundle.operations.push(name.to_string());
            let stem = name.strip_suffix("_Task").unwrap_or(name);
            let mut params = vec!["_this".to_string()];
            params.extend(names(&op["params"]));
            bundle
                .complex_types
                .insert(format!("{stem}RequestType"), params);
        } else {
            let stem = name.strip_suffix("_Task").unwrap_or(name);
            bundle
                .complex_types
                .get_mut(&format!("{stem}RequestType"))
                .expect("request type of a bundle operation")
                .extend(names(&op["params"]));
        }
    }
}

fn generated_sources() -> String {
    let mut all = String::new();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut stack = vec![
        root.join("../vsphere-vim25/src/generated"),
        root.join("../vsphere-client/src/methods"),
    ];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(dir).expect("generated dir") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                stack.push(path);
            } else {
                all.push_str(&std::fs::read_to_string(path).expect("source"));
            }
        }
    }
    all
}

#[test]
fn every_type_field_enum_value_and_operation_is_generated() {
    let Some(dir) = bundle_dir() else {
        eprintln!(
            "SKIPPED: no WSDL bundle (set WSDL_DIR or place it at ../shared/wsdl/vim25-7.0.3)"
        );
        return;
    };
    let mut bundle = read_bundle(&dir);
    let bundle_operations = bundle.operations.len();
    add_additions(&mut bundle);
    assert!(
        bundle.operations.len() > bundle_operations + 40,
        "additions read"
    );
    let sources = generated_sources();
    // Index the generated code once: decoder arm literals, struct names,
    // method docs and request names.
    let mut arms = BTreeSet::new();
    let mut lines = BTreeSet::new();
    // Types of a feature-gated family (`#[cfg(feature = ..)]` above the
    // item): generated, but decodable only in a build with the feature.
    let mut gated = BTreeSet::new();
    let mut gate_above = false;
    for line in sources.lines() {
        if line.starts_with("#[cfg(feature") {
            gate_above = true;
        } else if let Some(item) = line
            .strip_prefix("pub enum ")
            .or_else(|| line.strip_prefix("pub struct "))
        {
            if gate_above {
                gated.insert(item.split([' ', '{', '(']).next().unwrap_or("").to_string());
            }
            gate_above = false;
        } else if !(line.starts_with("///") || line.starts_with("#[")) {
            gate_above = false;
        }
        let line = line.trim();
        if let Some(rest) = line.strip_prefix('"') {
            if let Some((literal, tail)) = rest.split_once('"') {
                if tail.starts_with(" => r.") || tail == " => {" {
                    arms.insert(literal.to_string());
                }
            }
        }
        lines.insert(line.to_string());
    }
    let mut missing = Vec::new();

    for (name, fields) in &bundle.complex_types {
        if name.starts_with("ArrayOf") || name == "ManagedObjectReference" {
            continue;
        }
        let Some(info) = REGISTRY.get(name) else {
            missing.push(format!("type {name}"));
            continue;
        };
        if info.kind() != TypeKind::Structure {
            missing.push(format!("type {name} is not a structure"));
        }
        for field in fields {
            if !info.fields().any(|f| f.name == field) {
                missing.push(format!("field {name}.{field}"));
            }
            // The XML name is kept as a literal in the decoder and encoder.
            if !arms.contains(field.as_str()) {
                missing.push(format!("decoder arm for {name}.{field}"));
            }
        }
        let rust = name.replace('_', "");
        let rust = rust[..1].to_uppercase() + &rust[1..];
        if !lines.contains(&format!("pub struct {rust} {{"))
            && !lines.contains(&format!("pub struct {rust} {{}}"))
        {
            missing.push(format!("struct {rust}"));
        }
    }

    for (name, values) in &bundle.enums {
        let Some(info) = REGISTRY.get(name) else {
            missing.push(format!("enum {name}"));
            continue;
        };
        if !info.values().eq(values.iter().map(String::as_str)) {
            missing.push(format!("enum {name}'s values in the registry"));
        }
        if !info.decodes_as_object() {
            missing.push(format!("enum {name} has no decoder"));
            continue;
        }
        for value in values {
            // Decode the value through the registry: a known value must not
            // land in the open `Unrecognized` variant.
            let xml = format!("<v>{value}</v>");
            let mut r = XmlReader::new(xml.as_bytes(), &REGISTRY);
            r.root().expect("root");
            let Some(decoded) = info.decode(&mut r) else {
                // Not compiled in: its family's feature is off in this build.
                assert!(gated.contains(name), "enumeration {name} has no decoder");
                break;
            };
            let decoded = decoded.expect("enum decodes");
            if format!("{decoded:?}").starts_with("Unrecognized") {
                missing.push(format!("enum value {name}::{value}"));
            }
            let mut w = vsphere_client::xml::XmlWriter::new();
            decoded.encode_dyn(&mut w, "v", None);
            let written = String::from_utf8_lossy(w.as_bytes()).into_owned();
            assert!(
                written.ends_with(&format!(">{value}</v>")),
                "{name}::{value} round trip: {written}"
            );
        }
    }

    // Each `Vim` method returns the future of its call.
    let methods = sources.matches("-> impl std::future::Future<").count();
    assert_eq!(methods, bundle.operations.len(), "one method per operation");
    for op in &bundle.operations {
        let invokes = format!("/// Invokes `{op}`");
        if !lines
            .iter()
            .any(|l| l.starts_with(&invokes) && l[invokes.len()..].starts_with([' ', '.']))
        {
            missing.push(format!("method for {op}"));
        }
        if !lines.contains(&format!("const NAME: &'static str = {op:?};")) {
            missing.push(format!("request for {op}"));
        }
    }

    assert!(
        missing.is_empty(),
        "missing from the generated code:\n{}",
        missing.join("\n")
    );
    // Sanity: the test saw the bundle it expects.
    assert!(bundle.complex_types.len() > 4000 && bundle.enums.len() > 390);
    let _ = Value::Nil;
}
