//! `XmlWriter`: appends elements to a byte buffer, escaping as it goes.

use std::fmt::{self, Debug};

use super::{Encode, Fields};
use crate::version::ApiLevel;

const ENVELOPE_START: &str = concat!(
    r#"<?xml version="1.0" encoding="UTF-8"?>"#,
    r#"<soapenv:Envelope xmlns:soapenv="http://schemas.xmlsoap.org/soap/envelope/""#,
    r#" xmlns:xsd="http://www.w3.org/2001/XMLSchema""#,
    r#" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance">"#,
    "<soapenv:Body>"
);
const ENVELOPE_END: &str = "</soapenv:Body></soapenv:Envelope>";

/// Writes XML into memory. Writing cannot fail.
///
/// A writer made [`for_server`](Self::for_server) checks what it writes
/// against the server's API version: every type, field and enumeration value
/// added after the base bundle (7.0.3.0) carries its version in the
/// generated code, which asks [`since`](Self::since) before writing it.
#[derive(Debug)]
pub struct XmlWriter {
    buf: Vec<u8>,
    /// Whether an enclosing element (the envelope) declares `xmlns:xsi`;
    /// otherwise every top-level element declares it.
    xsi_declared: bool,
    /// Open elements.
    depth: usize,
    /// The newest API version the reader of this XML knows.
    server: ApiLevel,
    /// The first item written that is newer than `server`.
    newer: Option<NewerItem>,
    /// Set by [`debug_fields`]: the fields are shown for `Debug`, not
    /// written as XML.
    debug: Option<DebugFields>,
}

/// The fields of a structure as `Debug` shows them, in schema order: the
/// element name and the value's own `Debug` text.
#[derive(Debug, Default)]
struct DebugFields {
    /// `{:#?}`: each value formatted alternate too.
    alternate: bool,
    fields: Vec<(String, String)>,
}

impl DebugFields {
    fn push(&mut self, tag: &str, value: &dyn Debug) {
        let text = if self.alternate {
            format!("{value:#?}")
        } else {
            format!("{value:?}")
        };
        self.fields.push((tag.to_owned(), text));
    }
}

/// What `Debug` shows for a secret field (a password, a ticket) that is set.
const REDACTED: &str = "<redacted>";

/// Something a request carries that the server's API version does not have:
/// a field, enumeration value, type or operation (`HostCapability.fptHotplugSupported`,
/// `GuestOsDescriptorFirmwareType value efi`, `type X`, `operation X`) and the
/// version that added it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NewerItem {
    /// What it is, as above.
    pub item: &'static str,
    /// The API version that added it.
    pub since: ApiLevel,
}

impl Default for XmlWriter {
    fn default() -> Self {
        XmlWriter {
            buf: Vec::new(),
            xsi_declared: false,
            depth: 0,
            server: ApiLevel::MAX,
            newer: None,
            debug: None,
        }
    }
}

impl XmlWriter {
    /// An empty writer that writes everything the bindings know.
    pub fn new() -> Self {
        XmlWriter::default()
    }

    /// An empty writer for a server that speaks API `server` at most: see
    /// [`since`](Self::since).
    pub fn for_server(server: ApiLevel) -> Self {
        XmlWriter {
            server,
            ..XmlWriter::default()
        }
    }

    /// Whether to write an item (field, value, type) that API `since`
    /// added: `true` when the server knows it. When it does not and
    /// `present` (the field is set, non-empty, not its default; a value or a
    /// type always is), the item is recorded for
    /// [`newer_than_server`](Self::newer_than_server), and the request it
    /// belongs to must not be sent. `since` is an [`ApiLevel`]'s number
    /// (`0x0800_0100` for 8.0.1.0); the generated code calls this once per
    /// such item.
    #[inline]
    pub fn since(&mut self, since: u32, item: &'static str, present: bool) -> bool {
        if since <= self.server.0 {
            return true;
        }
        if present {
            self.record_newer(since, item);
        }
        false
    }

    #[cold]
    #[inline(never)]
    fn record_newer(&mut self, since: u32, item: &'static str) {
        if self.newer.is_none() {
            self.newer = Some(NewerItem {
                item,
                since: ApiLevel(since),
            });
        }
    }

    /// The first item written that the server's API version does not have.
    pub fn newer_than_server(&self) -> Option<NewerItem> {
        self.newer
    }

    /// The bytes written so far.
    pub fn into_bytes(self) -> Vec<u8> {
        self.buf
    }

    /// The bytes written so far.
    pub fn as_bytes(&self) -> &[u8] {
        &self.buf
    }

    /// `<tag>` or `<tag xsi:type="...">`.
    pub fn start(&mut self, tag: &str, xsi_type: Option<&str>) {
        self.start_with_attribute(tag, xsi_type, None);
    }

    /// A start tag with an optional plain attribute (`type="VirtualMachine"`).
    pub fn start_with_attribute(
        &mut self,
        tag: &str,
        xsi_type: Option<&str>,
        attribute: Option<(&str, &str)>,
    ) {
        self.buf.push(b'<');
        self.buf.extend_from_slice(tag.as_bytes());
        self.declare_xsi_at_top();
        self.depth += 1;
        if let Some(ty) = xsi_type {
            self.buf.extend_from_slice(b" xsi:type=\"");
            escape_into(&mut self.buf, ty, true);
            self.buf.push(b'"');
        }
        if let Some((name, value)) = attribute {
            self.buf.push(b' ');
            self.buf.extend_from_slice(name.as_bytes());
            self.buf.extend_from_slice(b"=\"");
            escape_into(&mut self.buf, value, true);
            self.buf.push(b'"');
        }
        self.buf.push(b'>');
    }

    /// `<tag xsi:nil="true"/>`.
    pub fn nil(&mut self, tag: &str) {
        self.buf.push(b'<');
        self.buf.extend_from_slice(tag.as_bytes());
        self.declare_xsi_at_top();
        self.buf.extend_from_slice(b" xsi:nil=\"true\"/>");
    }

    /// `</tag>`.
    pub fn end(&mut self, tag: &str) {
        self.depth = self.depth.saturating_sub(1);
        self.buf.extend_from_slice(b"</");
        self.buf.extend_from_slice(tag.as_bytes());
        self.buf.push(b'>');
    }

    /// Escaped character data.
    pub fn text(&mut self, text: &str) {
        escape_into(&mut self.buf, text, false);
    }

    /// Already well-formed XML content, written as is.
    pub fn raw(&mut self, xml: &str) {
        self.buf.extend_from_slice(xml.as_bytes());
    }

    /// `<tag>text</tag>`.
    pub fn text_element(&mut self, tag: &str, xsi_type: Option<&str>, text: &str) {
        self.start(tag, xsi_type);
        self.text(text);
        self.end(tag);
    }

    /// A structure: start tag, its fields, end tag.
    pub fn write_struct(&mut self, tag: &str, xsi_type: Option<&str>, fields: &dyn Fields) {
        self.start(tag, xsi_type);
        fields.encode_fields(self);
        self.end(tag);
    }

    /// A required field.
    pub fn write<T: Encode + Debug>(&mut self, tag: &str, value: &T) {
        match &mut self.debug {
            Some(debug) => debug.push(tag, value),
            None => value.encode_as(self, tag, None),
        }
    }

    /// An optional field: nothing when `None`.
    pub fn write_opt<T: Encode + Debug>(&mut self, tag: &str, value: &Option<T>) {
        if let Some(value) = value {
            self.write(tag, value);
        }
    }

    /// An optional boxed field: nothing when `None`.
    pub fn write_opt_box<T: Encode + Debug>(&mut self, tag: &str, value: &Option<Box<T>>) {
        if let Some(value) = value {
            self.write(tag, value.as_ref());
        }
    }

    /// A repeated field: one element per item (`Debug` shows the list,
    /// when it is not empty).
    pub fn write_vec<T: Encode + Debug>(&mut self, tag: &str, values: &[T]) {
        if let Some(debug) = &mut self.debug {
            if !values.is_empty() {
                debug.push(tag, &values);
            }
            return;
        }
        for value in values {
            value.encode_as(self, tag, None);
        }
    }

    /// A required secret field (a password): written like
    /// [`write`](Self::write), never shown by `Debug`.
    pub fn write_secret<T: Encode>(&mut self, tag: &str, value: &T) {
        match &mut self.debug {
            Some(debug) => debug.push(tag, &Shown(REDACTED)),
            None => value.encode_as(self, tag, None),
        }
    }

    /// A repeated secret field (session keys): never shown by `Debug` (one
    /// `<redacted>` for the list, like [`write_vec`](Self::write_vec)'s one entry).
    pub fn write_vec_secret<T: Encode>(&mut self, tag: &str, values: &[T]) {
        match &mut self.debug {
            Some(debug) if !values.is_empty() => debug.push(tag, &Shown(REDACTED)),
            Some(_) => {}
            None => {
                for value in values {
                    value.encode_as(self, tag, None);
                }
            }
        }
    }

    /// An optional secret field: nothing when `None`; never shown by `Debug`.
    pub fn write_opt_secret<T: Encode>(&mut self, tag: &str, value: &Option<T>) {
        if let Some(value) = value {
            self.write_secret(tag, value);
        }
    }

    /// The body element of a request (`<NAME xmlns="urn:vim25">...</NAME>`).
    pub fn write_request_body(&mut self, name: &str, fields: &dyn Fields) {
        self.buf.push(b'<');
        self.buf.extend_from_slice(name.as_bytes());
        self.buf.extend_from_slice(b" xmlns=\"urn:vim25\"");
        self.declare_xsi_at_top();
        self.depth += 1;
        self.buf.push(b'>');
        fields.encode_fields(self);
        self.end(name);
    }

    /// A whole SOAP request: envelope, body, request element.
    pub(crate) fn write_request_envelope(&mut self, name: &str, fields: &dyn Fields) {
        self.envelope_start();
        self.write_request_body(name, fields);
        self.envelope_end();
    }

    /// The start of a SOAP document, up to and including `<soapenv:Body>`:
    /// what follows is one body element (a response, a fault).
    pub(crate) fn envelope_start(&mut self) {
        self.buf.extend_from_slice(ENVELOPE_START.as_bytes());
        self.xsi_declared = true;
    }

    /// The end of a SOAP document (`</soapenv:Body></soapenv:Envelope>`).
    pub(crate) fn envelope_end(&mut self) {
        self.buf.extend_from_slice(ENVELOPE_END.as_bytes());
    }

    /// A top-level element declares the `xsi`/`xsd` prefixes for everything
    /// inside it (unless an envelope already did).
    fn declare_xsi_at_top(&mut self) {
        if self.depth == 0 && !self.xsi_declared {
            self.buf.extend_from_slice(
                b" xmlns:xsd=\"http://www.w3.org/2001/XMLSchema\" xmlns:xsi=\"http://www.w3.org/2001/XMLSchema-instance\"",
            );
        }
    }
}

/// `Debug` of a generated structure: its name and the fields
/// [`Fields::encode_fields`] writes, by element name, in schema order
/// (inherited fields first, unset optional and empty repeated fields left
/// out, secret fields redacted). One function for every structure instead of
/// a derived `Debug` per type.
pub fn debug_fields(f: &mut fmt::Formatter<'_>, name: &str, fields: &dyn Fields) -> fmt::Result {
    let mut w = XmlWriter {
        debug: Some(DebugFields {
            alternate: f.alternate(),
            fields: Vec::new(),
        }),
        ..XmlWriter::default()
    };
    fields.encode_fields(&mut w);
    let shown = w.debug.take().unwrap_or_default();
    let mut out = f.debug_struct(name);
    for (tag, text) in &shown.fields {
        out.field(tag, &Shown(text));
    }
    out.finish()
}

/// Text already formatted by `Debug`, written as is (through the
/// formatter's indentation in `{:#?}`).
struct Shown<'a>(&'a str);

impl Debug for Shown<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0)
    }
}

/// `==` of generated structures: the same fields, compared as the XML they
/// encode to (what the server would receive). One function for every
/// structure instead of a derived `PartialEq` per type; it writes both
/// values, so compare single fields where it matters.
pub fn same_fields(a: &dyn Fields, b: &dyn Fields) -> bool {
    same_xml(&|w| a.encode_fields(w), &|w| b.encode_fields(w))
}

/// `==` of values that encode themselves (the polymorphic `AnyX` enums,
/// whose encoding names the variant's type): the same XML.
pub fn same_encoding(a: &dyn Encode, b: &dyn Encode) -> bool {
    same_xml(&|w| a.encode_as(w, "v", None), &|w| {
        b.encode_as(w, "v", None)
    })
}

/// Whether two writes produce the same XML: what every generated `==` asks.
pub(crate) fn same_xml(a: &dyn Fn(&mut XmlWriter), b: &dyn Fn(&mut XmlWriter)) -> bool {
    let (mut wa, mut wb) = (XmlWriter::new(), XmlWriter::new());
    a(&mut wa);
    b(&mut wb);
    wa.buf == wb.buf
}

/// Escapes markup characters, and the characters a parser would otherwise
/// normalise away (`\r` everywhere; tabs and newlines inside attributes), so
/// that every string survives a round trip exactly.
fn escape_into(buf: &mut Vec<u8>, text: &str, attribute: bool) {
    let bytes = text.as_bytes();
    let mut plain_from = 0;
    for (i, &b) in bytes.iter().enumerate() {
        let replacement: &[u8] = match b {
            b'&' => b"&amp;",
            b'<' => b"&lt;",
            b'>' => b"&gt;",
            b'\r' => b"&#13;",
            b'"' if attribute => b"&quot;",
            b'\n' if attribute => b"&#10;",
            b'\t' if attribute => b"&#9;",
            _ => continue,
        };
        buf.extend_from_slice(&bytes[plain_from..i]);
        buf.extend_from_slice(replacement);
        plain_from = i + 1;
    }
    buf.extend_from_slice(&bytes[plain_from..]);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_text_and_attributes() {
        let mut buf = Vec::new();
        escape_into(&mut buf, "a&b<c>d\"e\r\n\t", false);
        assert_eq!(buf, b"a&amp;b&lt;c&gt;d\"e&#13;\n\t");
        buf.clear();
        escape_into(&mut buf, "a&b\"c\n\t", true);
        assert_eq!(buf, b"a&amp;b&quot;c&#10;&#9;");
    }
}
