//! `XmlReader`: a pull reader over a byte slice that knows where it is.

use std::borrow::Cow;
use std::fmt;

use super::lexer::{
    lone_attribute, same_name, Attribute, Attributes, EndTag, LexError, Lexer, Token,
};

use super::schema::Registry;
use super::{skipped, Decode, Fields};

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
    #[doc(hidden)]
    pub fn new(
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
    /// The end tag the element must close with (`</soapenv:Body>`).
    end_tag: EndTag<'a>,
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

/// A namespace prefix declared by an open element (`xmlns:PREFIX="..."`).
/// Only whether it names the XML Schema instance namespace matters: element
/// names are matched by their local part, and `xsi:type`/`xsi:nil` are the
/// only namespaced attributes vim25 uses.
struct PrefixBinding<'a> {
    /// Depth of the declaring element (its frame's 1-based index).
    depth: usize,
    prefix: &'a [u8],
    is_xsi: bool,
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
    /// The input as text when all of it is UTF-8 (checked once, in one
    /// pass): names and values are then sliced out of it without checking
    /// each again. `None` for other input, which is checked piece by piece
    /// so that the error names the element.
    text: Option<&'a str>,
    lexer: Lexer<'a>,
    stack: Vec<Frame<'a>>,
    /// Prefix declarations of the open elements, innermost last: vSphere
    /// declares prefixes on a few elements, and most elements carry none.
    prefixes: Vec<PrefixBinding<'a>>,
    /// Names of the elements open inside one being skipped (reused).
    skipped: Vec<&'a [u8]>,
    /// Frames below this index are not shown in error paths (the SOAP envelope).
    path_base: usize,
    current: Current<'a>,
    registry: &'static Registry,
    /// Set once an error was returned: the stream position is then unreliable.
    failed: bool,
}

/// Where the reader is, not what it holds (the input may carry secrets).
impl fmt::Debug for XmlReader<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("XmlReader")
            .field("input_len", &self.input.len())
            .field("depth", &self.stack.len())
            .field("failed", &self.failed)
            .finish_non_exhaustive()
    }
}

impl<'a> XmlReader<'a> {
    /// A reader over `input`, resolving `xsi:type` names of `anyType` values
    /// through `registry`.
    pub fn new(input: &'a [u8], registry: &'static Registry) -> Self {
        XmlReader {
            input,
            text: std::str::from_utf8(input).ok(),
            lexer: Lexer::new(input),
            stack: Vec::with_capacity(32),
            prefixes: Vec::new(),
            skipped: Vec::new(),
            path_base: 0,
            current: Current::default(),
            registry,
            failed: false,
        }
    }

    /// How many bytes of the input are still to read.
    pub fn remaining(&self) -> usize {
        self.input.len().saturating_sub(self.lexer.position())
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
            match self.read_token()? {
                Token::Start {
                    end_tag,
                    local,
                    attributes,
                } => return self.enter(end_tag, local, attributes),
                Token::Eof => {
                    return Err(self.error(DecodeErrorKind::UnexpectedEof, "empty document"))
                }
                Token::Text(text) if is_blank(text) => continue,
                Token::End { .. } => {
                    self.failed = true;
                    return Err(
                        self.error(DecodeErrorKind::Syntax, "end tag before the root element")
                    );
                }
                Token::Text(_) | Token::CData(_) => {
                    return Err(self.error(
                        DecodeErrorKind::UnexpectedContent,
                        "text before the root element",
                    ))
                }
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
        if let Some(frame) = self.stack.last() {
            if !self.failed && self.lexer.at_end_of(&frame.end_tag) {
                self.leave();
                return Ok(None);
            }
        }
        loop {
            match self.read_token()? {
                Token::Start {
                    end_tag,
                    local,
                    attributes,
                } => return self.enter(end_tag, local, attributes).map(Some),
                Token::End { qname } => {
                    self.close(qname)?;
                    return Ok(None);
                }
                Token::Eof => return Err(self.eof_error()),
                Token::Text(_) | Token::CData(_) => continue,
            }
        }
    }

    /// The local part of the current element's `xsi:type` (`VirtualDisk` for
    /// `xsi:type="vim25:VirtualDisk"`).
    pub fn xsi_type(&self) -> Option<&str> {
        self.current.xsi_type.as_deref()
    }

    /// [`xsi_type`](Self::xsi_type), borrowed from the input rather than
    /// from the reader, so the reader can go on.
    pub(crate) fn xsi_type_text(&self) -> Option<Cow<'a, str>> {
        self.current.xsi_type.clone()
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
        // Most elements read as text are `<name>text</name>`: one scan.
        if let Some(frame) = self.stack.last() {
            if !self.failed {
                if let Some((raw, plain)) = self.lexer.leaf_text(&frame.end_tag) {
                    let text = if plain {
                        self.plain_text(raw)?
                    } else {
                        self.character_data(raw)?
                    };
                    self.leave();
                    return Ok(text);
                }
            }
        }
        let mut text: Cow<'a, str> = Cow::Borrowed("");
        loop {
            match self.read_token()? {
                Token::Text(raw) => {
                    let part = self.character_data(raw)?;
                    append(&mut text, part);
                }
                Token::CData(raw) => {
                    let Some(part) = self.as_str(raw) else {
                        self.failed = true;
                        return Err(self.error(DecodeErrorKind::Syntax, "CDATA is not UTF-8"));
                    };
                    append(&mut text, Cow::Borrowed(part));
                }
                Token::End { qname } => {
                    self.close(qname)?;
                    return Ok(text);
                }
                Token::Start {
                    end_tag,
                    local,
                    attributes,
                } => {
                    let name = self.enter(end_tag, local, attributes)?;
                    return Err(self.error(
                        DecodeErrorKind::UnexpectedContent,
                        format!("element <{name}> where text was expected"),
                    ));
                }
                Token::Eof => return Err(self.eof_error()),
            }
        }
    }

    /// Character data known to hold no reference and no `\r`: only UTF-8 to check.
    fn plain_text(&mut self, raw: &'a [u8]) -> Result<Cow<'a, str>, DecodeError> {
        match self.as_str(raw) {
            Some(text) => Ok(Cow::Borrowed(text)),
            None => {
                self.failed = true;
                Err(self.error(DecodeErrorKind::Syntax, "text is not UTF-8"))
            }
        }
    }

    /// Raw character data as text: UTF-8, line ends normalised, references resolved.
    fn character_data(&mut self, raw: &'a [u8]) -> Result<Cow<'a, str>, DecodeError> {
        let Some(raw) = self.as_str(raw) else {
            self.failed = true;
            return Err(self.error(DecodeErrorKind::Syntax, "text is not UTF-8"));
        };
        match character_data(raw) {
            Ok(text) => Ok(text),
            Err(e) => {
                self.failed = true;
                Err(self.syntax_error(e))
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
            match self.read_token()? {
                Token::Eof => return Ok(()),
                Token::Text(text) if is_blank(text) => continue,
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
        self.skipped.clear();
        loop {
            let before = self.lexer.position();
            match self.read_token()? {
                Token::Start { end_tag, .. } => self.skipped.push(end_tag.qname()),
                Token::End { qname } => match self.skipped.pop() {
                    None => {
                        self.close(qname)?;
                        return Ok(self.input.get(start..before).unwrap_or_default());
                    }
                    Some(open) if open == qname => {}
                    Some(open) => return Err(self.mismatched_end(open, qname)),
                },
                Token::Eof => return Err(self.eof_error()),
                Token::Text(_) | Token::CData(_) => {}
            }
        }
    }

    /// Reads child elements into `target`, of XML type `type_name`, until
    /// the current element ends. Children `target` does not know are
    /// skipped (forward compatibility) and noted ([`skipped::note`]).
    pub fn read_fields(
        &mut self,
        target: &mut dyn Fields,
        type_name: &'static str,
    ) -> Result<(), DecodeError> {
        // An `xsi:nil` structure has no fields: its default. What decodes a
        // structure in place (a boxed one: a polymorphic enum's variant, an
        // `anyType` object) need not look first.
        if self.current.nil {
            return self.skip();
        }
        // An `xsi:type` other than the type decoded is one the bindings do
        // not know (a known one picks its own variant): decoded as
        // `type_name`, and noted.
        if let Some(xsi_type) = self.current.xsi_type.as_deref() {
            if xsi_type != type_name {
                note_unknown_type(type_name, xsi_type);
            }
        }
        while let Some(name) = self.next_child()? {
            if !target.decode_field(self, name)? {
                skipped::note(type_name, name);
                self.skip()?;
            }
        }
        Ok(())
    }

    /// [`read_fields`](Self::read_fields) into a boxed structure, the box
    /// given back as it came in (dropped on an error): the non-generic part
    /// of [`Decode::decode_boxed`] for structures.
    pub(crate) fn read_boxed_fields(
        &mut self,
        mut target: super::BoxedFields,
        type_name: &'static str,
    ) -> Result<super::BoxedFields, DecodeError> {
        match self.read_fields(&mut *target, type_name) {
            Ok(()) => Ok(target),
            Err(e) => Err(e),
        }
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

    /// Decodes the current element into a new box (a field that would
    /// otherwise make its type infinitely large). A polymorphic enum decodes
    /// its variants with [`Decode::decode_boxed`] instead: a structure's
    /// decoder gives `xsi:nil` its default itself, so no copy of this
    /// function is made for each of them.
    pub fn read_boxed<T: Decode>(&mut self) -> Result<Box<T>, DecodeError> {
        if self.current.nil {
            return match self.skip() {
                Ok(()) => Ok(Box::new(T::default())),
                Err(e) => Err(e),
            };
        }
        T::decode_boxed(self)
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
        match parse(trim_xml_space(&text)) {
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
        self.lexer.position() as u64
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

    fn read_token(&mut self) -> Result<Token<'a>, DecodeError> {
        if self.failed {
            return Err(self.error(
                DecodeErrorKind::UnexpectedContent,
                "reader used after an error",
            ));
        }
        match self.lexer.next_token() {
            Ok(token) => Ok(token),
            Err(LexError {
                position,
                message,
                truncated,
            }) => {
                self.failed = true;
                let kind = if truncated {
                    DecodeErrorKind::UnexpectedEof
                } else {
                    DecodeErrorKind::Syntax
                };
                Err(DecodeError::new(
                    kind,
                    self.path(),
                    position as u64,
                    message,
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
    fn enter(
        &mut self,
        end_tag: EndTag<'a>,
        local: &'a [u8],
        attributes: &'a [u8],
    ) -> Result<&'a str, DecodeError> {
        let Some(name) = self.as_str(local) else {
            self.failed = true;
            return Err(self.error(DecodeErrorKind::Syntax, "element name is not UTF-8"));
        };

        let index = match self.stack.last_mut() {
            Some(parent) => {
                if same_name(parent.last_child.as_bytes(), local)
                    && parent.last_child_count != u32::MAX
                {
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
            end_tag,
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
        if is_blank(attributes) {
            return Ok(name);
        }
        self.read_attributes(attributes)?;
        Ok(name)
    }

    /// Records the element's `xmlns:PREFIX` declarations and the attributes
    /// decoding cares about: `xsi:type`, `xsi:nil` and the plain `type`.
    ///
    /// One pass over the attributes, repeated only when a declaration comes
    /// after a prefixed attribute it may apply to (the declarations of an
    /// element apply to all of its attributes, whatever the order).
    // Out of line: most elements have no attributes, and `enter` stays small.
    #[inline(never)]
    fn read_attributes(&mut self, attributes: &'a [u8]) -> Result<(), DecodeError> {
        if let Some(attribute) = lone_attribute(attributes) {
            if self.read_lone_attribute(attribute)? {
                return Ok(());
            }
        }
        let depth = self.stack.len();
        let mut declarations_read = false;
        loop {
            let mut prefixed_seen = false;
            let mut declared_late = false;
            let mut nil_seen = false;
            for attribute in Attributes::new(attributes) {
                let attribute = match attribute {
                    Ok(a) => a,
                    Err(message) => {
                        self.failed = true;
                        return Err(self.error(DecodeErrorKind::Syntax, message));
                    }
                };
                let key = attribute.key;
                let (prefix, local_name) = (attribute.prefix, attribute.local);
                if prefix == Some(b"xmlns".as_slice()) {
                    if !declarations_read {
                        self.prefixes.push(PrefixBinding {
                            depth,
                            prefix: local_name,
                            is_xsi: attribute.value == XSI_NAMESPACE,
                        });
                        declared_late |= prefixed_seen;
                    }
                    continue;
                }
                if local_name != b"type" && local_name != b"nil" {
                    continue;
                }
                let is_xsi = match prefix {
                    Some(prefix) => {
                        prefixed_seen = true;
                        self.is_xsi_prefix(prefix)
                    }
                    None => false,
                };
                if !is_xsi && (prefix.is_some() || local_name != b"type") {
                    continue;
                }
                let value = self.attribute_text(attribute.value)?;
                let duplicate = if !is_xsi {
                    self.current.type_attr.replace(value).is_some()
                } else if local_name == b"type" {
                    let type_name = match value {
                        Cow::Borrowed(s) => Cow::Borrowed(local_part(s)),
                        Cow::Owned(s) => Cow::Owned(local_part(&s).to_string()),
                    };
                    self.current.xsi_type.replace(type_name).is_some()
                } else {
                    self.current.nil = matches!(trim_xml_space(&value), "true" | "1");
                    std::mem::replace(&mut nil_seen, true)
                };
                if duplicate {
                    self.failed = true;
                    let shown = String::from_utf8_lossy(key).into_owned();
                    return Err(self.error(
                        DecodeErrorKind::Syntax,
                        format!("attribute {shown} given twice"),
                    ));
                }
            }
            if !declared_late {
                return Ok(());
            }
            // Read again, now that every declaration of the element is known.
            declarations_read = true;
            self.current.xsi_type = None;
            self.current.nil = false;
            self.current.type_attr = None;
        }
    }

    /// The usual case of [`read_attributes`](Self::read_attributes): one
    /// `xsi:type`, `xsi:nil` or `type` attribute whose value holds no
    /// reference ([`lone_attribute`] takes only those; every device, backing
    /// and description in a response carries one). Returns `false`, having
    /// recorded nothing, for anything else: a namespace declaration.
    fn read_lone_attribute(&mut self, attribute: Attribute<'a>) -> Result<bool, DecodeError> {
        let is_xsi = match attribute.prefix {
            Some(b"xmlns") => return Ok(false),
            Some(prefix) => self.is_xsi_prefix(prefix),
            None => false,
        };
        let (type_attribute, xsi_type, xsi_nil) = match attribute.local {
            b"type" => (!is_xsi && attribute.prefix.is_none(), is_xsi, false),
            b"nil" => (false, false, is_xsi),
            _ => (false, false, false),
        };
        if !(type_attribute || xsi_type || xsi_nil) {
            // An attribute decoding does not use (`xml:lang`, say).
            return Ok(true);
        }
        let Some(value) = self.as_str(attribute.value) else {
            return Ok(false);
        };
        if type_attribute {
            self.current.type_attr = Some(Cow::Borrowed(value));
        } else if xsi_type {
            self.current.xsi_type = Some(Cow::Borrowed(local_part(value)));
        } else {
            self.current.nil = matches!(trim_xml_space(value), "true" | "1");
        }
        Ok(true)
    }

    /// Whether `prefix` names the XML Schema instance namespace here. An
    /// undeclared `xsi` prefix is taken in its conventional meaning.
    fn is_xsi_prefix(&self, prefix: &[u8]) -> bool {
        match self
            .prefixes
            .iter()
            .rev()
            .find(|b| same_name(b.prefix, prefix))
        {
            Some(binding) => binding.is_xsi,
            None => prefix == b"xsi",
        }
    }

    /// Leaves the current element at its end tag, which must name it.
    fn close(&mut self, qname: &[u8]) -> Result<(), DecodeError> {
        match self.stack.last() {
            Some(frame) if same_name(frame.end_tag.qname(), qname) => {
                self.leave();
                Ok(())
            }
            Some(frame) => Err(self.mismatched_end(frame.end_tag.qname(), qname)),
            None => {
                self.failed = true;
                Err(self.error(DecodeErrorKind::Syntax, "end tag without a start tag"))
            }
        }
    }

    fn mismatched_end(&mut self, open: &[u8], found: &[u8]) -> DecodeError {
        self.failed = true;
        self.error(
            DecodeErrorKind::Syntax,
            format!(
                "expected </{}>, found </{}>",
                String::from_utf8_lossy(open),
                String::from_utf8_lossy(found)
            ),
        )
    }

    fn leave(&mut self) {
        self.stack.pop();
        let depth = self.stack.len();
        while self.prefixes.last().is_some_and(|b| b.depth > depth) {
            self.prefixes.pop();
        }
    }

    fn attribute_text(&mut self, raw: &'a [u8]) -> Result<Cow<'a, str>, DecodeError> {
        let Some(text) = self.as_str(raw) else {
            self.failed = true;
            return Err(self.error(DecodeErrorKind::Syntax, "attribute value is not UTF-8"));
        };
        if memchr::memchr(b'&', raw).is_none() {
            return Ok(Cow::Borrowed(text));
        }
        match super::escape::unescape(text) {
            Ok(unescaped) => Ok(Cow::Owned(unescaped.into_owned())),
            Err(e) => {
                self.failed = true;
                Err(self.syntax_error(e))
            }
        }
    }

    /// `part` (a slice of the input) as text, if it is UTF-8.
    fn as_str(&self, part: &'a [u8]) -> Option<&'a str> {
        if let Some(text) = self.text {
            let start = (part.as_ptr() as usize).wrapping_sub(self.input.as_ptr() as usize);
            if let Some(text) = text.get(start..start.wrapping_add(part.len())) {
                return Some(text);
            }
        }
        // Not UTF-8 as a whole, or (defensively) a slice from elsewhere.
        std::str::from_utf8(part).ok()
    }
}

fn append<'a>(text: &mut Cow<'a, str>, part: Cow<'a, str>) {
    if text.is_empty() {
        *text = part;
    } else {
        text.to_mut().push_str(&part);
    }
}

/// XML 1.0 end-of-line handling: `\r\n` and a lone `\r` read as `\n`.
/// Character data as the document means it: line ends normalised (on the
/// raw text, so a `&#13;` stays a carriage return), then references resolved.
/// One pass finds out whether either is needed (rarely).
fn character_data(raw: &str) -> Result<Cow<'_, str>, super::escape::EscapeError> {
    if !raw.bytes().any(|b| b == b'\r' || b == b'&') {
        return Ok(Cow::Borrowed(raw));
    }
    let text = normalize_line_ends(raw);
    if !text.contains('&') {
        return Ok(text);
    }
    let unescaped = super::escape::unescape(&text)?.into_owned();
    Ok(Cow::Owned(unescaped))
}

/// XML 1.0 end-of-line handling: `\r\n` and a lone `\r` read as `\n`.
fn normalize_line_ends(text: &str) -> Cow<'_, str> {
    if !text.contains('\r') {
        return Cow::Borrowed(text);
    }
    Cow::Owned(text.replace("\r\n", "\n").replace('\r', "\n"))
}

/// `VirtualDisk` of `vim25:VirtualDisk`, without surrounding XML spaces.
fn local_part(qname: &str) -> &str {
    let qname = trim_xml_space(qname);
    match qname.bytes().rposition(|b| b == b':') {
        Some(colon) => &qname[colon + 1..],
        None => qname,
    }
}

/// Trims XML's spaces; values almost never have any, so check the ends first.
pub(crate) fn trim_xml_space(text: &str) -> &str {
    let bytes = text.as_bytes();
    match (bytes.first(), bytes.last()) {
        (Some(first), Some(last))
            if !is_xml_space(*first as char) && !is_xml_space(*last as char) =>
        {
            text
        }
        _ => text.trim_matches(is_xml_space),
    }
}

fn is_blank(text: &[u8]) -> bool {
    text.iter().all(u8::is_ascii_whitespace)
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

/// Notes an `xsi:type` decoded as `declared`, as a fault when `declared`
/// is one.
#[cold]
#[inline(never)]
fn note_unknown_type(declared: &'static str, xsi_type: &str) {
    let kind = if crate::generated::REGISTRY.is_subtype_of(declared, "MethodFault") {
        skipped::SkippedKind::Fault
    } else {
        skipped::SkippedKind::Type
    };
    skipped::note_type(kind, declared, xsi_type);
}

#[cfg(test)]
mod tests {
    use super::*;

    const XSI: &str = "http://www.w3.org/2001/XMLSchema-instance";

    /// Every element in document order: name, `xsi:type`, `xsi:nil`, plain `type`.
    fn attributes_of(xml: &str) -> Result<Vec<String>, DecodeError> {
        fn walk(r: &mut XmlReader<'_>, out: &mut Vec<String>) -> Result<(), DecodeError> {
            while let Some(name) = r.next_child()? {
                out.push(describe(r, name));
                walk(r, out)?;
            }
            Ok(())
        }
        fn describe(r: &XmlReader<'_>, name: &str) -> String {
            format!(
                "{name} xsi:type={} nil={} type={}",
                r.xsi_type().unwrap_or("-"),
                r.is_nil(),
                r.type_attribute().unwrap_or("-")
            )
        }
        let mut r = XmlReader::new(xml.as_bytes(), &crate::generated::REGISTRY);
        let root = r.root()?;
        let mut out = vec![describe(&r, root)];
        walk(&mut r, &mut out)?;
        r.finish()?;
        Ok(out)
    }

    #[test]
    fn xsi_is_recognised_by_namespace_whatever_the_prefix() {
        let xml = format!(
            r#"<r><val xmlns:XMLSchema-instance="{XSI}" XMLSchema-instance:type="xsd:int" XMLSchema-instance:nil="true"/><b xsi:type="vim25:VirtualDisk"/></r>"#
        );
        assert_eq!(
            attributes_of(&xml).unwrap(),
            [
                "r xsi:type=- nil=false type=-",
                "val xsi:type=int nil=true type=-",
                // Undeclared, `xsi` keeps its conventional meaning.
                "b xsi:type=VirtualDisk nil=false type=-",
            ]
        );
    }

    #[test]
    fn prefix_declarations_end_with_their_element() {
        let xml = format!(
            r#"<r xmlns:p="urn:other"><a xmlns:p="{XSI}" p:type="A"><b p:type="B"/></a><c p:type="C"/><d xmlns:q="{XSI}"/><e q:type="E"/></r>"#
        );
        assert_eq!(
            attributes_of(&xml).unwrap(),
            [
                "r xsi:type=- nil=false type=-",
                "a xsi:type=A nil=false type=-",
                "b xsi:type=B nil=false type=-",
                // `p` is `urn:other` again, `q` is not declared any more.
                "c xsi:type=- nil=false type=-",
                "d xsi:type=- nil=false type=-",
                "e xsi:type=- nil=false type=-",
            ]
        );
    }

    #[test]
    fn a_declaration_after_the_attribute_using_it_applies() {
        let xml = format!(
            r#"<r xmlns:p="urn:other"><a p:type="A" p:nil="1" xmlns:p="{XSI}"/><b p:type="B"/></r>"#
        );
        assert_eq!(
            attributes_of(&xml).unwrap(),
            [
                "r xsi:type=- nil=false type=-",
                "a xsi:type=A nil=true type=-",
                "b xsi:type=- nil=false type=-",
            ]
        );
    }

    #[test]
    fn xsi_bound_to_another_namespace_is_not_xsi() {
        let xml =
            r#"<r xmlns:xsi="urn:other"><a xsi:type="A" xsi:nil="true" type="HostSystem"/></r>"#;
        assert_eq!(
            attributes_of(xml).unwrap()[1],
            "a xsi:type=- nil=false type=HostSystem"
        );
    }

    #[test]
    fn a_repeated_attribute_is_an_error() {
        for xml in [
            format!(r#"<r xmlns:xsi="{XSI}" xmlns:x="{XSI}"><a xsi:type="A" x:type="B"/></r>"#),
            format!(r#"<r xmlns:xsi="{XSI}"><a xsi:nil="false" xsi:nil="true"/></r>"#),
            r#"<r><a type="A" type="B"/></r>"#.to_string(),
        ] {
            let error = attributes_of(&xml).unwrap_err();
            assert_eq!(error.kind(), DecodeErrorKind::Syntax, "{xml}: {error}");
            assert!(error.message().contains("given twice"), "{error}");
            assert_eq!(error.path(), "r/a");
        }
    }

    #[test]
    fn a_nil_polymorphic_variant_is_its_default_whatever_it_holds() {
        use crate::types::{AnyVirtualDeviceBackingInfo, VirtualDiskFlatVer2BackingInfo};
        let xml = format!(
            "<backing xmlns:xsi=\"{XSI}\" xsi:type=\"VirtualDiskFlatVer2BackingInfo\" \
             xsi:nil=\"true\"><diskMode>persistent</diskMode><fileName>[ds] a.vmdk</fileName></backing>"
        );
        let mut r = XmlReader::new(xml.as_bytes(), &crate::generated::REGISTRY);
        r.root().unwrap();
        let decoded = AnyVirtualDeviceBackingInfo::decode(&mut r).unwrap();
        r.finish().unwrap();
        assert_eq!(
            decoded.downcast_ref::<VirtualDiskFlatVer2BackingInfo>(),
            Some(&VirtualDiskFlatVer2BackingInfo::default())
        );
    }

    #[test]
    fn empty_and_written_out_elements_read_the_same() {
        for xml in [
            "<r><a/><b></b><c>x &amp; y</c><d>1<!-- c --><![CDATA[<2>]]></d></r>",
            "<r><a></a><b/><c>x &amp; y</c><d>1<![CDATA[<2>]]><?pi?></d></r>",
        ] {
            let mut r = XmlReader::new(xml.as_bytes(), &crate::generated::REGISTRY);
            r.root().unwrap();
            let mut texts = Vec::new();
            while r.next_child().unwrap().is_some() {
                texts.push(r.read_text().unwrap().into_owned());
            }
            r.finish().unwrap();
            assert_eq!(texts, ["", "", "x & y", "1<2>"], "{xml}");
        }
    }

    #[test]
    fn end_tags_must_match_in_read_and_in_skipped_content() {
        // Read element by element.
        let error = attributes_of("<r><a><b></a></b></r>").unwrap_err();
        assert_eq!(error.kind(), DecodeErrorKind::Syntax);
        assert_eq!(error.message(), "expected </b>, found </a>");
        assert_eq!(error.path(), "r/a/b");

        // Skipped whole: the names are still checked.
        let xml = b"<r><a><x:b><c></c></x:c></a></r>";
        let mut r = XmlReader::new(xml, &crate::generated::REGISTRY);
        r.root().unwrap();
        assert_eq!(r.next_child().unwrap(), Some("a"));
        let error = r.skip().unwrap_err();
        assert_eq!(error.kind(), DecodeErrorKind::Syntax);
        assert_eq!(error.message(), "expected </x:b>, found </x:c>");

        // A skip that matches returns the content as written.
        let xml = b"<r><a><x:b><c/></x:b></a></r>";
        let mut r = XmlReader::new(xml, &crate::generated::REGISTRY);
        r.root().unwrap();
        r.next_child().unwrap();
        assert_eq!(r.skip_raw().unwrap(), b"<x:b><c/></x:b>");
        r.finish().unwrap();
    }
}
