//! Decoding property values straight into partial managed objects.
//!
//! A `DynamicProperty` (or `PropertyChange`) names a property path and holds
//! its value as `xsd:anyType`. A top-level path (`name`, `config`) decodes to a
//! [`Value`] and is stored with the generated `set_property`. A nested path
//! (`runtime.powerState`, `config.hardware`) is kept as the raw XML of its
//! value (borrowed from the response, no copy); once the object's properties
//! are all read, the nested values sharing a top-level property are written
//! as one small document (`<runtime><powerState>poweredOn</powerState>...`)
//! and decoded as that property's declared type, so that
//! `vm.runtime.power_state` is set and siblings retrieved together survive.

use std::borrow::Cow;

use crate::mo::MANAGED_OBJECTS;
use crate::xml::{
    skipped, Decode, DecodeError, DecodeErrorKind, Occurs, RetrievedPaths, Value, XmlReader,
};
use vsphere_vim25::REGISTRY;

use super::ManagedObject;

/// The raw XML of one value: its `xsi:type` (local name) and content.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct RawValue<'a> {
    pub xsi_type: Option<String>,
    /// The plain `type` attribute: a `ManagedObjectReference`'s type.
    pub type_attr: Option<String>,
    pub nil: bool,
    pub content: Cow<'a, [u8]>,
}

impl RawValue<'_> {
    pub(crate) fn into_owned(self) -> RawValue<'static> {
        RawValue {
            xsi_type: self.xsi_type,
            type_attr: self.type_attr,
            nil: self.nil,
            content: Cow::Owned(self.content.into_owned()),
        }
    }

    /// Captures the element the reader has just entered, consuming it.
    pub(crate) fn capture<'a>(r: &mut XmlReader<'a>) -> Result<RawValue<'a>, DecodeError> {
        let xsi_type = r.xsi_type().map(str::to_string);
        let type_attr = r.type_attribute().map(str::to_string);
        let nil = r.is_nil();
        let content = r.skip_raw()?;
        Ok(RawValue {
            xsi_type,
            type_attr,
            nil,
            content: Cow::Borrowed(content),
        })
    }
}

/// The value of a nested path: one value, or the items of an array (a
/// repeated field is written as one element per item).
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum NestedValue<'a> {
    One(RawValue<'a>),
    Items(Vec<RawValue<'a>>),
}

impl NestedValue<'_> {
    pub(crate) fn into_owned(self) -> NestedValue<'static> {
        match self {
            NestedValue::One(v) => NestedValue::One(v.into_owned()),
            NestedValue::Items(items) => {
                NestedValue::Items(items.into_iter().map(RawValue::into_owned).collect())
            }
        }
    }
}

/// Whether the leaf of `path` on managed object type `mo_type` is repeated,
/// through a small per-decode cache (pages repeat the same few paths).
#[derive(Default)]
pub(crate) struct PathCache {
    entries: Vec<(String, Option<Occurs>)>,
    /// The last object's retrieved paths, which the next ones most often share.
    last_retrieved: RetrievedPaths,
}

impl PathCache {
    fn leaf_occurs(&mut self, mo_type: &str, path: &str) -> Option<Occurs> {
        if let Some((_, occurs)) = self.entries.iter().find(|(p, _)| p == path) {
            return *occurs;
        }
        let occurs = MANAGED_OBJECTS
            .resolve_path(&REGISTRY, mo_type, path)
            .ok()
            .map(|f| f.occurs);
        if self.entries.len() < 64 {
            self.entries.push((path.to_string(), occurs));
        }
        occurs
    }
}

/// A property value read off the wire.
pub(crate) enum PropertyValue<'a> {
    /// A top-level property, decoded.
    TopLevel(Value),
    /// A nested path, kept raw until the object is complete.
    Nested(NestedValue<'a>),
    /// A path this version of the bindings does not know: skipped.
    Unknown,
}

/// Reads a `val` element for property `path` of `T` (the reader has just
/// entered it); `object_type` is the type of the object it belongs to (`T`
/// or a subtype of it).
pub(crate) fn read_value<'a, T: ManagedObject>(
    r: &mut XmlReader<'a>,
    path: &str,
    cache: &mut PathCache,
    object_type: &str,
) -> Result<PropertyValue<'a>, DecodeError> {
    if !path.contains('.') {
        return Ok(PropertyValue::TopLevel(Value::decode(r)?));
    }
    match cache.leaf_occurs(T::TYPE_NAME, path) {
        None => {
            note_unknown_property::<T>(object_type, path);
            r.skip()?;
            Ok(PropertyValue::Unknown)
        }
        Some(Occurs::Repeated) => {
            let mut items = Vec::new();
            if !r.is_nil() {
                while r.next_child()?.is_some() {
                    items.push(RawValue::capture(r)?);
                }
            } else {
                r.skip()?;
            }
            Ok(PropertyValue::Nested(NestedValue::Items(items)))
        }
        Some(_) => Ok(PropertyValue::Nested(NestedValue::One(RawValue::capture(
            r,
        )?))),
    }
}

/// Reads a value captured before its property's name was known.
pub(crate) fn read_late_value<T: ManagedObject>(
    raw: RawValue<'_>,
    path: &str,
    cache: &mut PathCache,
    object_type: &str,
) -> Result<PropertyValue<'static>, DecodeError> {
    let mut doc = Vec::with_capacity(raw.content.len() + 256);
    let mut prefixes = Vec::new();
    xsi_prefixes(&raw.content, &mut prefixes);
    doc.extend_from_slice(b"<v");
    write_namespaces(&mut doc, &prefixes);
    doc.push(b'>');
    write_element(&mut doc, "val", &raw);
    doc.extend_from_slice(b"</v>");
    let mut reader = XmlReader::new(&doc, &REGISTRY);
    let value = reader
        .root()
        .and_then(|_| reader.next_child())
        .and_then(|_| read_value::<T>(&mut reader, path, cache, object_type))
        .map_err(|e| DecodeError::new(e.kind(), path.to_string(), 0, e.message()))?;
    Ok(match value {
        PropertyValue::TopLevel(value) => PropertyValue::TopLevel(value),
        PropertyValue::Nested(value) => PropertyValue::Nested(value.into_owned()),
        PropertyValue::Unknown => PropertyValue::Unknown,
    })
}

/// Stores a top-level value; a value of the wrong type is a decode error
/// naming the property.
pub(crate) fn set_top_level<T: ManagedObject>(
    object: &mut T,
    name: &str,
    value: Value,
) -> Result<(), DecodeError> {
    match object.set_property(name, value) {
        Ok(true) => Ok(()),
        Ok(false) => {
            note_unknown_property::<T>(&object.mo_ref().type_, name);
            Ok(())
        }
        Err(e) => Err(invalid(format!("{}.{name}: {e}", T::TYPE_NAME))),
    }
}

/// Notes a property `T` does not hold as one the bindings do not know,
/// unless the object's own type has it: an object of a subtype retrieved as
/// `T` (a `DistributedVirtualPortgroup` among the `Network`s, with every
/// property asked) carries the subtype's properties, which the bindings know
/// and `T` has no place for.
#[cold]
#[inline(never)]
fn note_unknown_property<T: ManagedObject>(object_type: &str, path: &str) {
    let subtype_has_it = object_type != T::TYPE_NAME
        && MANAGED_OBJECTS
            .resolve_path(&REGISTRY, object_type, path)
            .is_ok();
    if !subtype_has_it {
        skipped::note(T::TYPE_NAME, path);
    }
}

/// An error about a property value (the position in the response is not
/// known once values are regrouped).
pub(crate) fn invalid(message: String) -> DecodeError {
    DecodeError::new(
        DecodeErrorKind::UnexpectedContent,
        String::new(),
        0,
        message,
    )
}

/// Decodes the nested values of one object, grouped by top-level property,
/// into `object`. `nested` holds `(path, value)` pairs; paths whose top-level
/// property is in `skip_top` (set whole already) are ignored.
pub(crate) fn apply_nested<T: ManagedObject>(
    object: &mut T,
    nested: &mut [(Cow<'_, str>, &NestedValue<'_>)],
    skip_top: &[&str],
) -> Result<(), DecodeError> {
    if nested.is_empty() {
        return Ok(());
    }
    nested.sort_by(|a, b| a.0.split('.').cmp(b.0.split('.')));
    let mut start = 0;
    while start < nested.len() {
        let top = top_segment(&nested[start].0).to_string();
        let end = start
            + nested[start..]
                .iter()
                .take_while(|(p, _)| top_segment(p) == top)
                .count();
        if !skip_top.contains(&top.as_str()) {
            let value = decode_group::<T>(&top, &nested[start..end])?;
            set_top_level(object, &top, value)?;
        }
        start = end;
    }
    Ok(())
}

fn top_segment(path: &str) -> &str {
    path.split('.').next().unwrap_or(path)
}

/// Writes the group as one document rooted at the top-level property and
/// decodes it as the property's declared type.
fn decode_group<T: ManagedObject>(
    top: &str,
    group: &[(Cow<'_, str>, &NestedValue<'_>)],
) -> Result<Value, DecodeError> {
    let field = MANAGED_OBJECTS
        .property(T::TYPE_NAME, top)
        .ok_or_else(|| invalid(format!("{} has no property {top}", T::TYPE_NAME)))?;
    let info = REGISTRY
        .get(field.type_name)
        .ok_or_else(|| invalid(format!("{top} of type {} has no fields", field.type_name)))?;

    let mut doc = Vec::with_capacity(
        256 + group
            .iter()
            .map(|(_, v)| match v {
                NestedValue::One(v) => v.content.len() + 64,
                NestedValue::Items(items) => items.iter().map(|i| i.content.len() + 64).sum(),
            })
            .sum::<usize>(),
    );
    let mut prefixes: Vec<&str> = Vec::new();
    for (_, value) in group {
        match value {
            NestedValue::One(v) => xsi_prefixes(&v.content, &mut prefixes),
            NestedValue::Items(items) => {
                for item in items {
                    xsi_prefixes(&item.content, &mut prefixes);
                }
            }
        }
    }
    doc.extend_from_slice(b"<");
    doc.extend_from_slice(top.as_bytes());
    write_namespaces(&mut doc, &prefixes);
    doc.push(b'>');
    // Open elements below the root, as path segments.
    let mut open: Vec<&str> = Vec::new();
    let mut previous: Option<&str> = None;
    for (path, value) in group {
        // A path below one already written (config.hardware, then
        // config.hardware.device) adds nothing the ancestor did not carry.
        if let Some(prev) = previous {
            if path.len() > prev.len()
                && path.starts_with(prev)
                && path.as_bytes()[prev.len()] == b'.'
            {
                continue;
            }
        }
        previous = Some(path);
        let segments: Vec<&str> = path.split('.').skip(1).collect();
        let Some((leaf, parents)) = segments.split_last() else {
            continue;
        };
        if !segments.iter().all(|s| is_name(s)) {
            continue;
        }
        let common = open
            .iter()
            .zip(parents.iter())
            .take_while(|(a, b)| a == b)
            .count();
        while open.len() > common {
            if let Some(name) = open.pop() {
                close(&mut doc, name);
            }
        }
        for segment in &parents[common..] {
            doc.push(b'<');
            doc.extend_from_slice(segment.as_bytes());
            doc.push(b'>');
            open.push(segment);
        }
        match value {
            NestedValue::One(v) => write_element(&mut doc, leaf, v),
            NestedValue::Items(items) => {
                for item in items {
                    write_element(&mut doc, leaf, item);
                }
            }
        }
    }
    while let Some(name) = open.pop() {
        close(&mut doc, name);
    }
    close(&mut doc, top);

    let mut reader = XmlReader::new(&doc, &REGISTRY);
    let decoded = reader.root().and_then(|_| {
        info.decode(&mut reader).unwrap_or_else(|| {
            Err(invalid(format!(
                "{top} of type {} has no fields",
                field.type_name
            )))
        })
    });
    match decoded {
        Ok(object) => Ok(Value::Object(object)),
        Err(e) => Err(DecodeError::new(
            e.kind(),
            format!("{}.{top}/{}", T::TYPE_NAME, e.path()),
            0,
            e.message(),
        )),
    }
}

const XSI_NAMESPACE: &str = "http://www.w3.org/2001/XMLSchema-instance";

/// Declares `xsi`, `xsd`, and every other prefix the raw values use for
/// `xsi:type`/`xsi:nil`: the values were cut out of a document whose root
/// declared them, and servers differ in the prefix (vCenter writes `xsi:`,
/// Go's encoder `XMLSchema-instance:`).
fn write_namespaces(doc: &mut Vec<u8>, prefixes: &[&str]) {
    doc.extend_from_slice(b" xmlns:xsi=\"");
    doc.extend_from_slice(XSI_NAMESPACE.as_bytes());
    doc.extend_from_slice(b"\" xmlns:xsd=\"http://www.w3.org/2001/XMLSchema\"");
    for prefix in prefixes {
        doc.extend_from_slice(b" xmlns:");
        doc.extend_from_slice(prefix.as_bytes());
        doc.extend_from_slice(b"=\"");
        doc.extend_from_slice(XSI_NAMESPACE.as_bytes());
        doc.push(b'"');
    }
}

/// Adds to `found` the prefixes of `PREFIX:type="` and `PREFIX:nil="`
/// attributes in `content` (other than `xsi` and `xsd`).
fn xsi_prefixes<'c>(content: &'c [u8], found: &mut Vec<&'c str>) {
    let mut rest = content;
    while let Some(colon) = rest.iter().position(|&b| b == b':') {
        let after = &rest[colon + 1..];
        let is_attribute = after.starts_with(b"type=") || after.starts_with(b"nil=");
        if is_attribute {
            let start = rest[..colon]
                .iter()
                .rposition(u8::is_ascii_whitespace)
                .map_or(0, |i| i + 1);
            if let Ok(prefix) = std::str::from_utf8(&rest[start..colon]) {
                let valid = !prefix.is_empty()
                    && prefix
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.');
                if valid && prefix != "xsi" && prefix != "xsd" && !found.contains(&prefix) {
                    found.push(prefix);
                }
            }
        }
        rest = after;
    }
}

fn is_name(segment: &str) -> bool {
    !segment.is_empty()
        && segment
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

fn close(doc: &mut Vec<u8>, name: &str) {
    doc.extend_from_slice(b"</");
    doc.extend_from_slice(name.as_bytes());
    doc.push(b'>');
}

fn write_element(doc: &mut Vec<u8>, tag: &str, value: &RawValue<'_>) {
    doc.push(b'<');
    doc.extend_from_slice(tag.as_bytes());
    if value.nil {
        doc.extend_from_slice(b" xsi:nil=\"true\"/>");
        return;
    }
    if let Some(xsi_type) = &value.xsi_type {
        write_attribute(doc, b" xsi:type=\"", xsi_type);
    }
    if let Some(type_attr) = &value.type_attr {
        write_attribute(doc, b" type=\"", type_attr);
    }
    doc.push(b'>');
    doc.extend_from_slice(&value.content);
    close(doc, tag);
}

/// Collects the properties of one object as they are read, then builds it.
pub(crate) struct ObjectBuilder<'a, T> {
    pub object: T,
    top_level: Vec<String>,
    nested: Vec<(String, NestedValue<'a>)>,
}

impl<'a, T: ManagedObject> ObjectBuilder<'a, T> {
    pub(crate) fn new(object: T) -> Self {
        ObjectBuilder {
            object,
            top_level: Vec::new(),
            nested: Vec::new(),
        }
    }

    /// Reads the `val` element of property `path` (just entered).
    pub(crate) fn read_property(
        &mut self,
        r: &mut XmlReader<'a>,
        path: &str,
        cache: &mut PathCache,
    ) -> Result<(), DecodeError> {
        match read_value::<T>(r, path, cache, &self.object.mo_ref().type_)? {
            PropertyValue::TopLevel(value) => self.set_top_level(path, value),
            PropertyValue::Nested(value) => {
                self.nested.push((path.to_string(), value));
                Ok(())
            }
            PropertyValue::Unknown => Ok(()),
        }
    }

    /// Stores a property whose `val` came before its `name` (not what
    /// servers send, but the schema does not forbid it).
    pub(crate) fn late_property(
        &mut self,
        raw: RawValue<'_>,
        path: &str,
        cache: &mut PathCache,
    ) -> Result<(), DecodeError> {
        match read_late_value::<T>(raw, path, cache, &self.object.mo_ref().type_)? {
            PropertyValue::TopLevel(value) => self.set_top_level(path, value),
            PropertyValue::Nested(value) => {
                self.nested.push((path.to_string(), value.into_owned()));
                Ok(())
            }
            PropertyValue::Unknown => Ok(()),
        }
    }

    fn set_top_level(&mut self, name: &str, value: Value) -> Result<(), DecodeError> {
        set_top_level(&mut self.object, name, value)?;
        self.top_level.push(name.to_string());
        Ok(())
    }

    /// Decodes the nested values into the object and returns it, with the
    /// paths it got values for.
    pub(crate) fn finish(mut self, cache: &mut PathCache) -> Result<T, DecodeError> {
        let sent = self
            .top_level
            .iter()
            .chain(self.nested.iter().map(|(p, _)| p));
        let retrieved = RetrievedPaths::of(sent.map(String::as_str), &cache.last_retrieved);
        cache.last_retrieved = retrieved.clone();
        *self.object.retrieved_mut() = retrieved;
        let skip: Vec<&str> = self.top_level.iter().map(String::as_str).collect();
        let mut refs: Vec<(Cow<'_, str>, &NestedValue<'_>)> = self
            .nested
            .iter()
            .map(|(p, v)| (Cow::Borrowed(p.as_str()), v))
            .collect();
        apply_nested(&mut self.object, &mut refs, &skip)?;
        Ok(self.object)
    }
}

fn write_attribute(doc: &mut Vec<u8>, start: &[u8], value: &str) {
    doc.extend_from_slice(start);
    for b in value.bytes() {
        match b {
            b'"' => doc.extend_from_slice(b"&quot;"),
            b'<' => doc.extend_from_slice(b"&lt;"),
            b'&' => doc.extend_from_slice(b"&amp;"),
            _ => doc.push(b),
        }
    }
    doc.push(b'"');
}
