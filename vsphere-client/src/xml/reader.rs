//! `XmlReader`: a pull reader over a byte slice that knows where it is.

use std::borrow::Cow;
use std::fmt;

use quick_xml::events::{BytesStart, Event};
use quick_xml::name::ResolveResult;
use quick_xml::NsReader;

use super::schema::Registry;
use super::{Decode, Fields};

/// Elements nested deeper than this are rejected: it bounds the recursion of
/// the generated decoders (a `MethodFault` chain, hostile input) well inside a
/// 2 MiB thread stack. Real vSphere payloads stay under 30 levels.
pub const MAX_DEPTH: usize = 128;

const XSI_NAMESPACE: &[u8] = b"http://www.w3.org/2001/XMLSchema-instance";

/// What went wrong while decoding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum DecodeErrorKind {
    /// The input is not well-formed XML (bad syntax, mismatched end tag, bad entity).
    Syntax,
    /// The input ended inside an element: a truncated body.
    UnexpectedEof,
    /// A text value does not parse as its declared type (`<int>abc</int>`).
    InvalidValue,
    /// Elements nested deeper than [`MAX_DEPTH`].
    TooDeep,
    /// The document is well-formed but not what was expected (another root
    /// element, an element where text was expected, no SOAP envelope).
    UnexpectedContent,
}

/// A decoding failure, naming the element path where it happened
/// (`RetrievePropertiesExResponse/returnval/objects[3]/propSet/val`).
///
/// Boxed so that the `Result`s threaded through thousands of generated
/// functions stay one pointer wide.
#[derive(Clone, PartialEq)]
pub struct DecodeError(Box<ErrorInner>);

#[derive(Clone, PartialEq)]
struct ErrorInner {
    kind: DecodeErrorKind,
    path: String,
    offset: u64,
    message: String,
}

impl DecodeError {
    pub(crate) fn new(
        kind: DecodeErrorKind,
        path: String,
        offset: u64,
        message: impl Into<String>,
    ) -> Self {
        DecodeError(Box::new(ErrorInner {
            kind,
            path,
            offset,
            message: message.into(),
        }))
    }

    /// The kind of failure.
    pub fn kind(&self) -> DecodeErrorKind {
        self.0.kind
    }

    /// The element path, `/`-separated, repeated siblings indexed from 0
    /// (`objects[3]`; the first of a run is shown without an index).
    pub fn path(&self) -> &str {
        &self.0.path
    }

    /// Byte offset in the input where the failure was detected.
    pub fn offset(&self) -> u64 {
        self.0.offset
    }

    /// What was wrong, without the path.
    pub fn message(&self) -> &str {
        &self.0.message
    }
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.path.is_empty() {
            write!(f, "{} (at byte {})", self.0.message, self.0.offset)
        } else {
            write!(
                f,
                "{} at {} (byte {})",
                self.0.message, self.0.path, self.0.offset
            )
        }
    }
}

impl fmt::Debug for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DecodeError")
            .field("kind", &self.0.kind)
            .field("path", &self.0.path)
            .field("offset", &self.0.offset)
            .field("message", &self.0.message)
            .finish()
    }
}

impl std::error::Error for DecodeError {}

struct Frame<'a> {
    name: &'a str,
    /// Position among consecutive siblings of the same name.
    index: u32,
    last_child: &'a str,
    last_child_count: u32,
}

/// The attributes of the element just entered that decoding cares about.
#[derive(Default)]
struct Current<'a> {
    xsi_type: Option<Cow<'a, str>>,
    nil: bool,
    /// The unprefixed `type` attribute (of a `ManagedObjectReference`).
    type_attr: Option<Cow<'a, str>>,
    /// Where the element's content starts in the input.
    content_start: usize,
}

/// A streaming reader over an XML document in memory.
///
/// The reader is always *inside* an element: [`next_child`](Self::next_child)
/// enters the next child (or leaves the current element when there is none),
/// and whoever receives a child consumes it entirely with one of
/// [`read_text`](Self::read_text), [`read_fields`](Self::read_fields),
/// [`skip`](Self::skip) or a `read_*` helper.
pub struct XmlReader<'a> {
    input: &'a [u8],
    inner: NsReader<&'a [u8]>,
    stack: Vec<Frame<'a>>,
    /// Frames below this index are not shown in error paths (the SOAP envelope).
    path_base: usize,
    current: Current<'a>,
    registry: &'static Registry,
    /// Set once an error was returned: the stream position is then unreliable.
    failed: bool,
}

impl<'a> XmlReader<'a> {
    /// A reader over `input`, resolving `xsi:type` names of `anyType` values
    /// through `registry`.
    pub fn new(input: &'a [u8], registry: &'static Registry) -> Self {
        let mut inner = NsReader::from_reader(input);
        let config = inner.config_mut();
        config.expand_empty_elements = true;
        config.check_end_names = true;
        config.trim_text(false);
        XmlReader {
            input,
            inner,
            stack: Vec::new(),
            path_base: 0,
            current: Current::default(),
            registry,
            failed: false,
        }
    }

    /// The registry used for `anyType` values.
    pub fn registry(&self) -> &'static Registry {
        self.registry
    }

    /// Enters the document's root element and returns its local name.
    pub fn root(&mut self) -> Result<&'a str, DecodeError> {
        if !self.stack.is_empty() {
            return Err(self.error(
                DecodeErrorKind::UnexpectedContent,
                "root() called twice".to_string(),
            ));
        }
        loop {
            match self.read_event()? {
                Event::Start(start) => return self.enter(&start),
                Event::Eof => {
                    return Err(self.error(DecodeErrorKind::UnexpectedEof, "empty document"))
                }
                Event::Text(text) if !is_blank(&text) => {
                    return Err(self.error(
                        DecodeErrorKind::UnexpectedContent,
                        "text before the root element",
                    ))
                }
                _ => continue,
            }
        }
    }

    /// Enters the root element and checks its local name.
    pub fn expect_root_named(&mut self, expected: &str) -> Result<(), DecodeError> {
        let name = self.root()?;
        if name != expected {
            return Err(self.error(
                DecodeErrorKind::UnexpectedContent,
                format!("expected element <{expected}>, found <{name}>"),
            ));
        }
        Ok(())
    }

    /// Enters the next child element of the current element and returns its
    /// local name, or leaves the current element at its end tag and returns `None`.
    /// Text and comments between children are ignored.
    pub fn next_child(&mut self) -> Result<Option<&'a str>, DecodeError> {
        loop {
            match self.read_event()? {
                Event::Start(start) => return self.enter(&start).map(Some),
                Event::End(_) => {
                    self.leave();
                    return Ok(None);
                }
                Event::Eof => return Err(self.eof_error()),
                _ => continue,
            }
        }
    }

    /// The local part of the current element's `xsi:type` (`VirtualDisk` for
    /// `xsi:type="vim25:VirtualDisk"`).
    pub fn xsi_type(&self) -> Option<&str> {
        self.current.xsi_type.as_deref()
    }

    /// Sets the `xsi:type` of the current element when the document left it
    /// implicit (a SOAP fault detail named after its type).
    pub(crate) fn set_xsi_type(&mut self, type_name: String) {
        self.current.xsi_type = Some(Cow::Owned(type_name));
    }

    /// Whether the current element has `xsi:nil="true"`.
    pub fn is_nil(&self) -> bool {
        self.current.nil
    }

    /// The current element's unprefixed `type` attribute.
    pub fn type_attribute(&self) -> Option<&str> {
        self.current.type_attr.as_deref()
    }

    /// Reads the text content of the current element and leaves it.
    /// Entities and character references are resolved, CDATA is included.
    pub fn read_text(&mut self) -> Result<Cow<'a, str>, DecodeError> {
        let mut text: Cow<'a, str> = Cow::Borrowed("");
        loop {
            match self.read_event()? {
                Event::Text(t) => {
                    let part = t.xml10_content().map_err(|e| self.syntax_error(e))?;
                    append(&mut text, part);
                }
                Event::CData(c) => {
                    let part = c.decode().map_err(|e| self.syntax_error(e))?;
                    append(&mut text, part);
                }
                Event::GeneralRef(reference) => {
                    let resolved = match reference.resolve_char_ref() {
                        Ok(Some(ch)) => ch.to_string(),
                        Ok(None) => {
                            let name = reference.decode().map_err(|e| self.syntax_error(e))?;
                            match quick_xml::escape::resolve_predefined_entity(&name) {
                                Some(s) => s.to_string(),
                                None => {
                                    return Err(self.error(
                                        DecodeErrorKind::Syntax,
                                        format!("unknown entity &{name};"),
                                    ))
                                }
                            }
                        }
                        Err(e) => return Err(self.syntax_error(e)),
                    };
                    text.to_mut().push_str(&resolved);
                }
                Event::End(_) => {
                    self.leave();
                    return Ok(text);
                }
                Event::Start(start) => {
                    let name = self.enter(&start)?;
                    return Err(self.error(
                        DecodeErrorKind::UnexpectedContent,
                        format!("element <{name}> where text was expected"),
                    ));
                }
                Event::Eof => return Err(self.eof_error()),
                _ => continue,
            }
        }
    }

    /// Reads the rest of the document: every open element must close and
    /// nothing but whitespace, comments or processing instructions may follow.
    /// Catches a body truncated after the interesting part.
    pub fn finish(&mut self) -> Result<(), DecodeError> {
        while !self.stack.is_empty() {
            if self.next_child()?.is_some() {
                self.skip()?;
            }
        }
        loop {
            match self.read_event()? {
                Event::Eof => return Ok(()),
                Event::Text(text) if is_blank(&text) => continue,
                Event::Comment(_) | Event::PI(_) => continue,
                _ => {
                    return Err(self.error(
                        DecodeErrorKind::UnexpectedContent,
                        "content after the document element",
                    ))
                }
            }
        }
    }

    /// Skips the rest of the current element, whatever it contains, and leaves it.
    pub fn skip(&mut self) -> Result<(), DecodeError> {
        self.skip_raw().map(|_| ())
    }

    /// Skips the rest of the current element and returns its raw content
    /// (the bytes between its start and end tags).
    pub fn skip_raw(&mut self) -> Result<&'a [u8], DecodeError> {
        let start = self.current.content_start;
        let mut depth = 0usize;
        loop {
            let before = self.position();
            match self.read_event()? {
                Event::Start(_) => depth += 1,
                Event::End(_) if depth == 0 => {
                    self.leave();
                    let end = usize::try_from(before).unwrap_or(usize::MAX);
                    return Ok(self.input.get(start..end).unwrap_or_default());
                }
                Event::End(_) => depth -= 1,
                Event::Eof => return Err(self.eof_error()),
                _ => continue,
            }
        }
    }

    /// Reads child elements into `target` until the current element ends.
    /// Children `target` does not know are skipped (forward compatibility).
    pub fn read_fields(&mut self, target: &mut dyn Fields) -> Result<(), DecodeError> {
        while let Some(name) = self.next_child()? {
            if !target.decode_field(self, name)? {
                self.skip()?;
            }
        }
        Ok(())
    }

    // The generic helpers below avoid `?` on `Result<T, _>`: each `?` would
    // instantiate `Try` machinery once per decoded type, thousands of times.

    /// Decodes the current element into a required field; `xsi:nil` gives the default.
    pub fn read<T: Decode>(&mut self, slot: &mut T) -> Result<(), DecodeError> {
        if self.current.nil {
            *slot = T::default();
            return self.skip();
        }
        match T::decode(self) {
            Ok(value) => {
                *slot = value;
                Ok(())
            }
            Err(e) => Err(e),
        }
    }

    /// Decodes the current element into an optional field; `xsi:nil` gives `None`.
    pub fn read_opt<T: Decode>(&mut self, slot: &mut Option<T>) -> Result<(), DecodeError> {
        if self.current.nil {
            *slot = None;
            return self.skip();
        }
        match T::decode(self) {
            Ok(value) => {
                *slot = Some(value);
                Ok(())
            }
            Err(e) => Err(e),
        }
    }

    /// Decodes the current element as one more item of a repeated field;
    /// an `xsi:nil` item is dropped.
    pub fn read_push<T: Decode>(&mut self, slot: &mut Vec<T>) -> Result<(), DecodeError> {
        if self.current.nil {
            return self.skip();
        }
        match T::decode(self) {
            Ok(value) => {
                slot.push(value);
                Ok(())
            }
            Err(e) => Err(e),
        }
    }

    /// Decodes the current element into a boxed required field (a field that
    /// would otherwise make its type infinitely large).
    pub fn read_box<T: Decode>(&mut self, slot: &mut Box<T>) -> Result<(), DecodeError> {
        match self.read_boxed() {
            Ok(value) => {
                *slot = value;
                Ok(())
            }
            Err(e) => Err(e),
        }
    }

    /// Decodes the current element into a boxed optional field.
    pub fn read_opt_box<T: Decode>(
        &mut self,
        slot: &mut Option<Box<T>>,
    ) -> Result<(), DecodeError> {
        if self.current.nil {
            *slot = None;
            return self.skip();
        }
        match self.read_boxed() {
            Ok(value) => {
                *slot = Some(value);
                Ok(())
            }
            Err(e) => Err(e),
        }
    }

    /// Decodes the current element into a new box (a polymorphic variant).
    pub fn read_boxed<T: Decode>(&mut self) -> Result<Box<T>, DecodeError> {
        if self.current.nil {
            return match self.skip() {
                Ok(()) => Ok(Box::new(T::default())),
                Err(e) => Err(e),
            };
        }
        match T::decode(self) {
            Ok(value) => Ok(Box::new(value)),
            Err(e) => Err(e),
        }
    }

    /// `returnval` handling for an operation without a result: skips the content.
    pub fn read_no_returnval(&mut self) -> Result<(), DecodeError> {
        while self.next_child()?.is_some() {
            self.skip()?;
        }
        Ok(())
    }

    /// The first `returnval` child (others are skipped); default when absent.
    pub fn read_returnval<T: Decode>(&mut self) -> Result<T, DecodeError> {
        Ok(self.read_returnval_opt()?.unwrap_or_default())
    }

    /// The first `returnval` child, if any.
    pub fn read_returnval_opt<T: Decode>(&mut self) -> Result<Option<T>, DecodeError> {
        let mut value = None;
        while let Some(name) = self.next_child()? {
            if name == "returnval" && value.is_none() {
                self.read_opt(&mut value)?;
            } else {
                self.skip()?;
            }
        }
        Ok(value)
    }

    /// Every `returnval` child.
    pub fn read_returnval_vec<T: Decode>(&mut self) -> Result<Vec<T>, DecodeError> {
        let mut values = Vec::new();
        while let Some(name) = self.next_child()? {
            if name == "returnval" {
                self.read_push(&mut values)?;
            } else {
                self.skip()?;
            }
        }
        Ok(values)
    }

    /// Parses the current element's text with `parse`, naming the type on failure.
    pub fn read_parsed<T>(
        &mut self,
        type_name: &str,
        parse: fn(&str) -> Option<T>,
    ) -> Result<T, DecodeError> {
        let text = self.read_text()?;
        match parse(text.trim_matches(is_xml_space)) {
            Some(value) => Ok(value),
            None => {
                let shown: String = text.chars().take(40).collect();
                Err(self.error_at_last(
                    DecodeErrorKind::InvalidValue,
                    format!("invalid {type_name} value {shown:?}"),
                ))
            }
        }
    }

    /// Hides the frames entered so far from error paths (used after the SOAP
    /// envelope and body so paths start at the response element).
    pub(crate) fn hide_path_prefix(&mut self) {
        self.path_base = self.stack.len();
    }

    /// Depth of the element currently inside (0 before the root).
    pub fn depth(&self) -> usize {
        self.stack.len()
    }

    /// The path of the current element, as shown in errors.
    pub fn path(&self) -> String {
        render_path(&self.stack[self.path_base.min(self.stack.len())..])
    }

    /// An error of `kind` at the current element.
    pub fn error(&self, kind: DecodeErrorKind, message: impl Into<String>) -> DecodeError {
        DecodeError::new(kind, self.path(), self.position(), message)
    }

    fn position(&self) -> u64 {
        self.inner.buffer_position()
    }

    /// An error about the element just left (after its text was read).
    fn error_at_last(&self, kind: DecodeErrorKind, message: String) -> DecodeError {
        let mut path = self.path();
        if let Some(frame) = self.stack.last() {
            let child = render_frame(frame.last_child, frame.last_child_count);
            if !path.is_empty() {
                path.push('/');
            }
            path.push_str(&child);
        }
        DecodeError::new(kind, path, self.position(), message)
    }

    fn read_event(&mut self) -> Result<Event<'a>, DecodeError> {
        if self.failed {
            return Err(self.error(
                DecodeErrorKind::UnexpectedContent,
                "reader used after an error",
            ));
        }
        match self.inner.read_event() {
            Ok(event) => Ok(event),
            Err(e) => {
                self.failed = true;
                let kind = match &e {
                    quick_xml::Error::Syntax(_) if self.position() as usize >= self.input.len() => {
                        DecodeErrorKind::UnexpectedEof
                    }
                    quick_xml::Error::IllFormed(
                        quick_xml::errors::IllFormedError::MissingEndTag(_),
                    ) => DecodeErrorKind::UnexpectedEof,
                    _ => DecodeErrorKind::Syntax,
                };
                Err(DecodeError::new(
                    kind,
                    self.path(),
                    self.inner.error_position(),
                    e.to_string(),
                ))
            }
        }
    }

    fn syntax_error(&self, e: impl fmt::Display) -> DecodeError {
        self.error(DecodeErrorKind::Syntax, e.to_string())
    }

    fn eof_error(&mut self) -> DecodeError {
        self.failed = true;
        self.error(
            DecodeErrorKind::UnexpectedEof,
            "unexpected end of input (truncated document?)",
        )
    }

    /// Pushes the frame of a start tag and records its interesting attributes.
    fn enter(&mut self, start: &BytesStart<'_>) -> Result<&'a str, DecodeError> {
        let qname = self.rebase(start.name().into_inner())?;
        let local = match qname.iter().position(|&b| b == b':') {
            Some(colon) => &qname[colon + 1..],
            None => qname,
        };
        let name = match std::str::from_utf8(local) {
            Ok(name) => name,
            Err(_) => {
                self.failed = true;
                return Err(self.error(DecodeErrorKind::Syntax, "element name is not UTF-8"));
            }
        };

        let index = match self.stack.last_mut() {
            Some(parent) => {
                if parent.last_child == name && parent.last_child_count != u32::MAX {
                    parent.last_child_count += 1;
                } else {
                    parent.last_child = name;
                    parent.last_child_count = 0;
                }
                parent.last_child_count
            }
            None => 0,
        };
        self.stack.push(Frame {
            name,
            index,
            last_child: "",
            last_child_count: 0,
        });
        if self.stack.len() > MAX_DEPTH {
            self.failed = true;
            return Err(self.error(
                DecodeErrorKind::TooDeep,
                format!("elements nested deeper than {MAX_DEPTH} levels"),
            ));
        }

        self.current = Current {
            content_start: usize::try_from(self.position()).unwrap_or(usize::MAX),
            ..Current::default()
        };
        let raw_attributes = start.attributes_raw();
        if raw_attributes.iter().all(|b| b.is_ascii_whitespace()) {
            return Ok(name);
        }
        for attribute in start.attributes() {
            let attribute = match attribute {
                Ok(a) => a,
                Err(e) => {
                    self.failed = true;
                    return Err(self.syntax_error(e));
                }
            };
            let key = attribute.key;
            let (namespace, local_name) = self.inner.resolver().resolve_attribute(key);
            if local_name.as_ref() != b"type" && local_name.as_ref() != b"nil" {
                continue;
            }
            let is_xsi = match namespace {
                ResolveResult::Bound(ns) => ns.as_ref() == XSI_NAMESPACE,
                // An undeclared `xsi` prefix: accept the conventional spelling.
                ResolveResult::Unknown(prefix) => prefix == b"xsi",
                ResolveResult::Unbound => false,
            };
            let raw_value = self.rebase(&attribute.value)?;
            let value = self.attribute_text(raw_value)?;
            match (local_name.as_ref(), is_xsi) {
                (b"type", true) => {
                    self.current.xsi_type = Some(match value {
                        Cow::Borrowed(s) => Cow::Borrowed(s.rsplit(':').next().unwrap_or(s).trim()),
                        Cow::Owned(s) => {
                            Cow::Owned(s.rsplit(':').next().unwrap_or(&s).trim().to_string())
                        }
                    })
                }
                (b"nil", true) => {
                    self.current.nil = matches!(value.trim(), "true" | "1");
                }
                (b"type", false) if key.prefix().is_none() => {
                    self.current.type_attr = Some(value);
                }
                _ => {}
            }
        }
        Ok(name)
    }

    fn leave(&mut self) {
        self.stack.pop();
    }

    fn attribute_text(&mut self, raw: &'a [u8]) -> Result<Cow<'a, str>, DecodeError> {
        let text = match std::str::from_utf8(raw) {
            Ok(text) => text,
            Err(_) => {
                self.failed = true;
                return Err(self.error(DecodeErrorKind::Syntax, "attribute value is not UTF-8"));
            }
        };
        if !text.contains('&') {
            return Ok(Cow::Borrowed(text));
        }
        match quick_xml::escape::unescape(text) {
            Ok(unescaped) => Ok(Cow::Owned(unescaped.into_owned())),
            Err(e) => {
                self.failed = true;
                Err(self.syntax_error(e))
            }
        }
    }

    /// Turns a slice that quick-xml borrowed from the input back into a slice
    /// with the input's lifetime, by its address. Events of a slice reader
    /// always borrow the input; anything else is reported, not trusted.
    fn rebase(&mut self, part: &[u8]) -> Result<&'a [u8], DecodeError> {
        let base = self.input.as_ptr() as usize;
        let start = (part.as_ptr() as usize).wrapping_sub(base);
        match self.input.get(start..start.wrapping_add(part.len())) {
            Some(slice) if slice.as_ptr() == part.as_ptr() => Ok(slice),
            _ => {
                self.failed = true;
                Err(self.error(
                    DecodeErrorKind::UnexpectedContent,
                    "internal: XML event does not borrow the input",
                ))
            }
        }
    }
}

fn append<'a>(text: &mut Cow<'a, str>, part: Cow<'a, str>) {
    if text.is_empty() {
        *text = part;
    } else {
        text.to_mut().push_str(&part);
    }
}

fn is_blank(text: &[u8]) -> bool {
    text.iter().all(|b| b.is_ascii_whitespace())
}

/// XML's whitespace (what `xsd:int` and friends may be padded with).
pub(crate) fn is_xml_space(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\n' | '\r')
}

fn render_frame(name: &str, index: u32) -> String {
    if index == 0 {
        name.to_string()
    } else {
        format!("{name}[{index}]")
    }
}

fn render_path(frames: &[Frame<'_>]) -> String {
    let mut path = String::new();
    for frame in frames {
        if !path.is_empty() {
            path.push('/');
        }
        if frame.index == 0 {
            path.push_str(frame.name);
        } else {
            path.push_str(frame.name);
            path.push('[');
            path.push_str(&frame.index.to_string());
            path.push(']');
        }
    }
    path
}
