//! Stage 1: read the WSDL and its XSDs as they are, into a raw model that
//! mirrors the documents (no interpretation beyond resolving file includes).
//!
//! Only the XML Schema subset vim25 uses is accepted; anything else is an
//! error naming the file and construct, so a new bundle with new constructs
//! cannot be generated wrongly in silence.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use roxmltree::{Document, Node};

use crate::bail;
use crate::error::{Error, Result};

const XSD_NS: &str = "http://www.w3.org/2001/XMLSchema";
const WSDL_NS: &str = "http://schemas.xmlsoap.org/wsdl/";

/// A qualified name as written (`vim25:VirtualDevice`, `xsd:string`), split.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct QName {
    /// The namespace URI the prefix resolved to.
    pub namespace: String,
    /// The local part.
    pub local: String,
}

impl QName {
    /// Whether this is an XML Schema built-in type.
    pub fn is_xsd(&self) -> bool {
        self.namespace == XSD_NS
    }
}

/// `<element>` inside a sequence.
#[derive(Debug, Clone)]
pub struct RawElement {
    pub name: String,
    /// `None` for an element with an inline anonymous complex type.
    pub type_name: Option<QName>,
    pub min_occurs: u32,
    /// `None` for `unbounded`.
    pub max_occurs: Option<u32>,
    /// The sequence of an inline anonymous complex type.
    pub inline_sequence: Option<Vec<RawElement>>,
}

/// `<complexType name=...>`.
#[derive(Debug, Clone)]
pub struct RawComplexType {
    pub name: String,
    pub file: String,
    pub content: RawContent,
}

/// What a complex type contains.
#[derive(Debug, Clone)]
pub enum RawContent {
    /// `<sequence>` (possibly inside `<complexContent><extension base=...>`).
    Sequence {
        base: Option<QName>,
        elements: Vec<RawElement>,
    },
    /// `<simpleContent><extension base=...>` with attributes.
    SimpleContent {
        base: QName,
        attributes: Vec<(String, QName)>,
    },
}

/// `<simpleType name=...><restriction base=...><enumeration value=.../>`.
#[derive(Debug, Clone)]
pub struct RawSimpleType {
    pub name: String,
    pub file: String,
    pub base: QName,
    pub values: Vec<String>,
}

/// A WSDL `portType` operation.
#[derive(Debug, Clone)]
pub struct RawOperation {
    pub name: String,
    pub input_message: String,
    pub output_message: String,
    pub fault_messages: Vec<String>,
}

/// Everything read from a bundle.
#[derive(Debug, Default)]
pub struct RawBundle {
    pub complex_types: Vec<RawComplexType>,
    pub simple_types: Vec<RawSimpleType>,
    /// Top-level `<element>`s of every schema (request, response and fault elements).
    pub elements: Vec<RawElement>,
    /// WSDL message name -> the element of its single part.
    pub messages: BTreeMap<String, QName>,
    pub operations: Vec<RawOperation>,
    /// Every file read, with its contents' bytes (for the bundle hash).
    pub files: BTreeMap<String, Vec<u8>>,
}

/// Reads `vim.wsdl` in `dir` and every schema it includes or imports.
pub fn read_bundle(dir: &Path) -> Result<RawBundle> {
    let mut bundle = RawBundle::default();
    let wsdl_path = dir.join("vim.wsdl");
    let text = read_file(&wsdl_path, &mut bundle)?;
    let doc = Document::parse(&text).map_err(|e| Error::new(format!("vim.wsdl: {e}")))?;
    let root = doc.root_element();
    expect_name(root, WSDL_NS, "definitions", "vim.wsdl")?;

    let mut pending: Vec<PathBuf> = Vec::new();
    for child in element_children(root) {
        match (child.tag_name().namespace(), child.tag_name().name()) {
            (Some(WSDL_NS), "types") => {
                for schema in element_children(child) {
                    expect_name(schema, XSD_NS, "schema", "vim.wsdl types")?;
                    read_schema(schema, "vim.wsdl", dir, &mut bundle, &mut pending)?;
                }
            }
            (Some(WSDL_NS), "message") => read_message(child, &mut bundle)?,
            (Some(WSDL_NS), "portType") => {
                for op in element_children(child) {
                    bundle.operations.push(read_operation(op)?);
                }
            }
            // The binding only repeats the portType with `document/literal`
            // and the SOAPAction, which the runtime negotiates itself.
            (Some(WSDL_NS), "binding" | "service") => {}
            (ns, name) => bail!("vim.wsdl: unexpected element {{{ns:?}}}{name}"),
        }
    }

    while let Some(path) = pending.pop() {
        let file = file_name(&path);
        if bundle.files.contains_key(&file) {
            continue;
        }
        let text = read_file(&path, &mut bundle)?;
        let doc = Document::parse(&text).map_err(|e| Error::new(format!("{file}: {e}")))?;
        let schema = doc.root_element();
        expect_name(schema, XSD_NS, "schema", &file)?;
        read_schema(schema, &file, dir, &mut bundle, &mut pending)?;
    }
    Ok(bundle)
}

fn read_file(path: &Path, bundle: &mut RawBundle) -> Result<String> {
    let bytes = std::fs::read(path)
        .map_err(|e| Error::new(format!("cannot read {}: {e}", path.display())))?;
    let text = String::from_utf8(bytes.clone())
        .map_err(|_| Error::new(format!("{} is not UTF-8", path.display())))?;
    bundle.files.insert(file_name(path), bytes);
    Ok(text)
}

fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

fn element_children<'a, 'input>(node: Node<'a, 'input>) -> impl Iterator<Item = Node<'a, 'input>> {
    node.children().filter(roxmltree::Node::is_element)
}

fn expect_name(node: Node<'_, '_>, namespace: &str, name: &str, file: &str) -> Result<()> {
    if node.tag_name().namespace() != Some(namespace) || node.tag_name().name() != name {
        bail!(
            "{file}: expected <{name}>, found <{}>",
            node.tag_name().name()
        );
    }
    Ok(())
}

fn attribute<'a>(node: Node<'a, '_>, name: &str, file: &str) -> Result<&'a str> {
    node.attribute(name).ok_or_else(|| {
        Error::new(format!(
            "{file}: <{}> without a {name} attribute",
            node.tag_name().name()
        ))
    })
}

fn resolve_qname(node: Node<'_, '_>, value: &str, file: &str) -> Result<QName> {
    let (prefix, local) = match value.split_once(':') {
        Some((p, l)) => (Some(p), l),
        None => (None, value),
    };
    let namespace = node
        .lookup_namespace_uri(prefix)
        .ok_or_else(|| Error::new(format!("{file}: unbound namespace prefix in {value:?}")))?;
    Ok(QName {
        namespace: namespace.to_string(),
        local: local.to_string(),
    })
}

fn read_schema(
    schema: Node<'_, '_>,
    file: &str,
    dir: &Path,
    bundle: &mut RawBundle,
    pending: &mut Vec<PathBuf>,
) -> Result<()> {
    for child in element_children(schema) {
        if child.tag_name().namespace() != Some(XSD_NS) {
            bail!(
                "{file}: unexpected element {:?} in schema",
                child.tag_name()
            );
        }
        match child.tag_name().name() {
            "include" | "import" => {
                let location = attribute(child, "schemaLocation", file)?;
                pending.push(dir.join(location));
            }
            "complexType" => {
                let name = attribute(child, "name", file)?.to_string();
                let content = read_complex_content(child, file)
                    .map_err(|e| e.context(format!("complexType {name}")))?;
                bundle.complex_types.push(RawComplexType {
                    name,
                    file: file.to_string(),
                    content,
                });
            }
            "simpleType" => bundle.simple_types.push(read_simple_type(child, file)?),
            "element" => bundle.elements.push(read_element(child, file)?),
            other => bail!("{file}: unsupported schema construct <{other}>"),
        }
    }
    Ok(())
}

fn read_complex_content(node: Node<'_, '_>, file: &str) -> Result<RawContent> {
    let children: Vec<_> = element_children(node).collect();
    match children.as_slice() {
        [] => Ok(RawContent::Sequence {
            base: None,
            elements: Vec::new(),
        }),
        [seq] if seq.tag_name().name() == "sequence" => Ok(RawContent::Sequence {
            base: None,
            elements: read_sequence(*seq, file)?,
        }),
        [content] if content.tag_name().name() == "complexContent" => {
            let ext = single_child(*content, "extension", file)?;
            let base = resolve_qname(ext, attribute(ext, "base", file)?, file)?;
            let elements = match element_children(ext).collect::<Vec<_>>().as_slice() {
                [] => Vec::new(),
                [seq] if seq.tag_name().name() == "sequence" => read_sequence(*seq, file)?,
                _ => bail!("{file}: unsupported content in <extension>"),
            };
            Ok(RawContent::Sequence {
                base: Some(base),
                elements,
            })
        }
        [content] if content.tag_name().name() == "simpleContent" => {
            let ext = single_child(*content, "extension", file)?;
            let base = resolve_qname(ext, attribute(ext, "base", file)?, file)?;
            let mut attributes = Vec::new();
            for attr in element_children(ext) {
                if attr.tag_name().name() != "attribute" {
                    bail!(
                        "{file}: unsupported <{}> in simpleContent",
                        attr.tag_name().name()
                    );
                }
                let name = attribute(attr, "name", file)?.to_string();
                let ty = resolve_qname(attr, attribute(attr, "type", file)?, file)?;
                attributes.push((name, ty));
            }
            Ok(RawContent::SimpleContent { base, attributes })
        }
        _ => bail!("{file}: unsupported complexType content"),
    }
}

fn single_child<'a, 'i>(node: Node<'a, 'i>, name: &str, file: &str) -> Result<Node<'a, 'i>> {
    let children: Vec<_> = element_children(node).collect();
    match children.as_slice() {
        [child] if child.tag_name().name() == name => Ok(*child),
        _ => bail!(
            "{file}: expected a single <{name}> in <{}>",
            node.tag_name().name()
        ),
    }
}

fn read_sequence(seq: Node<'_, '_>, file: &str) -> Result<Vec<RawElement>> {
    element_children(seq)
        .map(|el| {
            if el.tag_name().name() != "element" {
                bail!("{file}: unsupported <{}> in sequence", el.tag_name().name());
            }
            read_element(el, file)
        })
        .collect()
}

fn read_element(el: Node<'_, '_>, file: &str) -> Result<RawElement> {
    for attr in el.attributes() {
        if !matches!(attr.name(), "name" | "type" | "minOccurs" | "maxOccurs") {
            bail!(
                "{file}: unsupported attribute {} on element {:?}",
                attr.name(),
                el.attribute("name")
            );
        }
    }
    let name = attribute(el, "name", file)?.to_string();
    let type_name = match el.attribute("type") {
        Some(t) => Some(resolve_qname(el, t, file)?),
        None => None,
    };
    let min_occurs = match el.attribute("minOccurs") {
        None => 1,
        Some(v) => v
            .parse()
            .map_err(|_| Error::new(format!("{file}: element {name}: bad minOccurs {v:?}")))?,
    };
    let max_occurs = match el.attribute("maxOccurs") {
        None => Some(1),
        Some("unbounded") => None,
        Some(v) => Some(
            v.parse()
                .map_err(|_| Error::new(format!("{file}: element {name}: bad maxOccurs {v:?}")))?,
        ),
    };
    let inline_sequence = match (type_name.is_some(), element_children(el).next()) {
        (true, None) => None,
        (false, Some(ct)) if ct.tag_name().name() == "complexType" => {
            match read_complex_content(ct, file)? {
                RawContent::Sequence {
                    base: None,
                    elements,
                } => Some(elements),
                _ => bail!("{file}: element {name}: unsupported inline type"),
            }
        }
        _ => bail!("{file}: element {name} needs either a type or an inline complexType"),
    };
    Ok(RawElement {
        name,
        type_name,
        min_occurs,
        max_occurs,
        inline_sequence,
    })
}

fn read_simple_type(node: Node<'_, '_>, file: &str) -> Result<RawSimpleType> {
    let name = attribute(node, "name", file)?.to_string();
    let restriction = single_child(node, "restriction", file)
        .map_err(|e| e.context(format!("simpleType {name}")))?;
    let base = resolve_qname(restriction, attribute(restriction, "base", file)?, file)?;
    let mut values = Vec::new();
    for facet in element_children(restriction) {
        if facet.tag_name().name() != "enumeration" {
            bail!(
                "{file}: simpleType {name}: unsupported facet <{}>",
                facet.tag_name().name()
            );
        }
        values.push(attribute(facet, "value", file)?.to_string());
    }
    Ok(RawSimpleType {
        name,
        file: file.to_string(),
        base,
        values,
    })
}

fn read_message(node: Node<'_, '_>, bundle: &mut RawBundle) -> Result<()> {
    let name = attribute(node, "name", "vim.wsdl")?.to_string();
    let part =
        single_child(node, "part", "vim.wsdl").map_err(|e| e.context(format!("message {name}")))?;
    let element = resolve_qname(part, attribute(part, "element", "vim.wsdl")?, "vim.wsdl")?;
    bundle.messages.insert(name, element);
    Ok(())
}

fn read_operation(op: Node<'_, '_>) -> Result<RawOperation> {
    let file = "vim.wsdl";
    expect_name(op, WSDL_NS, "operation", file)?;
    let name = attribute(op, "name", file)?.to_string();
    let mut input_message = None;
    let mut output_message = None;
    let mut fault_messages = Vec::new();
    for child in element_children(op) {
        let message = resolve_qname(child, attribute(child, "message", file)?, file)?.local;
        match child.tag_name().name() {
            "input" => input_message = Some(message),
            "output" => output_message = Some(message),
            "fault" => fault_messages.push(message),
            other => bail!("{file}: operation {name}: unexpected <{other}>"),
        }
    }
    match (input_message, output_message) {
        (Some(input_message), Some(output_message)) => Ok(RawOperation {
            name,
            input_message,
            output_message,
            fault_messages,
        }),
        _ => bail!("{file}: operation {name} lacks an input or output message"),
    }
}
