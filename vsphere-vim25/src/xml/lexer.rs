//! The XML tokens `XmlReader` needs, cut straight out of the input bytes.
//!
//! A SOAP body is elements, attributes and text; the lexer returns those as
//! slices of the input (nothing is copied or allocated) and passes over the
//! XML declaration, comments, processing instructions and a DOCTYPE. What
//! the tokens mean (names, namespaces, entities, matching end tags) is the
//! reader's business; the lexer only guarantees that each token is complete
//! and delimited as XML says, and reports where it is not.

/// One token. Slices borrow the input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Token<'a> {
    /// `<name attributes>`; an empty element `<name/>` comes as `Start`
    /// followed by its `End`.
    Start {
        /// `</qname>`, ready to be recognised where the element ends; it
        /// holds the name as written (`soapenv:Body`).
        end_tag: EndTag<'a>,
        /// The name without its prefix (`Body` of `soapenv:Body`).
        local: &'a [u8],
        /// Everything between the name and `>` or `/>` (may be blank).
        attributes: &'a [u8],
    },
    /// `</name>`, or the end of an empty element.
    End { qname: &'a [u8] },
    /// Character data up to the next markup, entity references unresolved.
    Text(&'a [u8]),
    /// The content of a `<![CDATA[...]]>` section.
    CData(&'a [u8]),
    /// The end of the input.
    Eof,
}

/// Where and why the input is not XML.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LexError {
    pub position: usize,
    pub message: &'static str,
    /// The input ended inside a construct: a truncated document.
    pub truncated: bool,
}

pub(crate) struct Lexer<'a> {
    input: &'a [u8],
    position: usize,
    /// The name of an empty element just returned as `Start`: its `End` is next.
    empty_end: Option<&'a [u8]>,
}

const BOM: &[u8] = b"\xef\xbb\xbf";

impl<'a> Lexer<'a> {
    pub(super) fn new(input: &'a [u8]) -> Self {
        let position = if input.starts_with(BOM) { BOM.len() } else { 0 };
        Lexer {
            input,
            position,
            empty_end: None,
        }
    }

    /// Offset of the next byte to read.
    pub(super) fn position(&self) -> usize {
        self.position
    }

    pub(super) fn next_token(&mut self) -> Result<Token<'a>, LexError> {
        if let Some(qname) = self.empty_end.take() {
            return Ok(Token::End { qname });
        }
        loop {
            let rest = &self.input[self.position..];
            let Some(&first) = rest.first() else {
                return Ok(Token::Eof);
            };
            if first != b'<' {
                let length = find_byte(b'<', rest).unwrap_or(rest.len());
                self.position += length;
                return Ok(Token::Text(&rest[..length]));
            }
            match rest.get(1) {
                Some(b'/') => return self.end_tag(),
                Some(b'!') => {
                    if let Some(token) = self.markup_declaration()? {
                        return Ok(token);
                    }
                }
                Some(b'?') => self.skip_past(b"?>", 2, "unterminated processing instruction")?,
                Some(_) => return self.start_tag(),
                None => return Err(self.truncated(self.position, "unterminated tag")),
            }
        }
    }

    /// The fast path for an element the reader has entered: when what
    /// follows is its end tag (or the element was written empty), moves
    /// past it and says so.
    pub(super) fn at_end_of(&mut self, end_tag: &EndTag<'_>) -> bool {
        if let Some(pending) = self.empty_end {
            if same_name(pending, end_tag.qname) {
                self.empty_end = None;
                return true;
            }
            return false;
        }
        if end_tag.is_at(&self.input[self.position..]) {
            self.position += end_tag.qname.len() + 3;
            return true;
        }
        false
    }

    /// The fast path for a leaf element the reader has entered: when what
    /// follows is character data without markup and then `</qname>`,
    /// returns the character data (raw) and moves past the end tag. The
    /// flag says whether the text is plain: no reference (`&`) and no `\r`
    /// to normalise, found in the same pass that looked for the `<`.
    pub(super) fn leaf_text(&mut self, end_tag: &EndTag<'_>) -> Option<(&'a [u8], bool)> {
        if self.empty_end.is_some() {
            // Empty, as a slice of the input like every other token.
            let empty = &self.input[self.position..self.position];
            return self.at_end_of(end_tag).then_some((empty, true));
        }
        let rest = &self.input[self.position..];
        let (length, plain) = match memchr::memchr3(b'<', b'&', b'\r', rest) {
            Some(at) if rest[at] == b'<' => (at, true),
            Some(at) => (at + find_byte(b'<', &rest[at..])?, false),
            None => return None,
        };
        if !end_tag.is_at(&rest[length..]) {
            return None;
        }
        self.position += length + end_tag.qname.len() + 3;
        Some((&rest[..length], plain))
    }

    fn start_tag(&mut self) -> Result<Token<'a>, LexError> {
        let start = self.position;
        let tag = &self.input[start + 1..];
        let (name_length, colon) = scan_name(tag);
        if name_length == 0 {
            return Err(self.error(start, "a start tag without a name"));
        }
        // The tag ends at the first `>` outside a quoted attribute value.
        let mut at = name_length;
        let close = loop {
            // Most tags end right after the name; attributes are searched
            // with SIMD (they are long: `xmlns:...="http://..."`).
            let offset = match tag.get(at) {
                Some(b'>') => 0,
                _ => match memchr::memchr3(b'>', b'"', b'\'', &tag[at..]) {
                    Some(offset) => offset,
                    None => return Err(self.truncated(start, "unterminated start tag")),
                },
            };
            at += offset;
            let quote = tag[at];
            if quote == b'>' {
                break at;
            }
            // The value ends at its quote; a `<` in it is not XML.
            match memchr::memchr2(quote, b'<', &tag[at + 1..]) {
                Some(length) if tag[at + 1 + length] == b'<' => {
                    return Err(self.error(start, "`<` in an attribute value"))
                }
                Some(length) => at += length + 2,
                None => return Err(self.truncated(start, "unterminated attribute value")),
            }
        };
        let qname = &tag[..name_length];
        let local = match colon {
            Some(colon) if colon < name_length => &qname[colon + 1..],
            _ => qname,
        };
        let empty = close > name_length && tag[close - 1] == b'/';
        let attributes = &tag[name_length..if empty { close - 1 } else { close }];
        self.position = start + 1 + close + 1;
        if empty {
            self.empty_end = Some(qname);
        }
        Ok(Token::Start {
            end_tag: EndTag::new(qname, self.input[start..].first_chunk()),
            local,
            attributes,
        })
    }

    fn end_tag(&mut self) -> Result<Token<'a>, LexError> {
        let start = self.position;
        let tag = &self.input[start + 2..];
        let Some(close) = find_byte(b'>', tag) else {
            return Err(self.truncated(start, "unterminated end tag"));
        };
        let inside = &tag[..close];
        let name_length = inside
            .iter()
            .position(|&b| is_space(b))
            .unwrap_or(inside.len());
        if name_length == 0 || !inside[name_length..].iter().all(|&b| is_space(b)) {
            return Err(self.error(start, "malformed end tag"));
        }
        self.position = start + 2 + close + 1;
        Ok(Token::End {
            qname: &inside[..name_length],
        })
    }

    /// `<!--...-->` and `<!DOCTYPE ...>` are passed over (`None`); CDATA is a token.
    fn markup_declaration(&mut self) -> Result<Option<Token<'a>>, LexError> {
        let start = self.position;
        let rest = &self.input[start..];
        if rest.starts_with(b"<!--") {
            self.skip_past(b"-->", 4, "unterminated comment")?;
            return Ok(None);
        }
        if rest.starts_with(b"<![CDATA[") {
            let content = &rest[9..];
            let Some(length) = find(b"]]>", content) else {
                return Err(self.truncated(start, "unterminated CDATA section"));
            };
            self.position = start + 9 + length + 3;
            return Ok(Some(Token::CData(&content[..length])));
        }
        if rest.starts_with(b"<!DOCTYPE") {
            // Passed over, internal subset included; its entities are not
            // defined for the reader, so a document using them fails there.
            let mut depth = 0usize;
            let mut quote = None;
            for (offset, &b) in rest.iter().enumerate().skip(9) {
                match (quote, b) {
                    (Some(q), _) if b == q => quote = None,
                    (Some(_), _) => {}
                    (None, b'"' | b'\'') => quote = Some(b),
                    (None, b'[') => depth += 1,
                    (None, b']') => depth = depth.saturating_sub(1),
                    (None, b'>') if depth == 0 => {
                        self.position = start + offset + 1;
                        return Ok(None);
                    }
                    _ => {}
                }
            }
            return Err(self.truncated(start, "unterminated DOCTYPE"));
        }
        if b"<![CDATA[".starts_with(rest) || b"<!DOCTYPE".starts_with(rest) || rest == b"<!-" {
            return Err(self.truncated(start, "unterminated markup declaration"));
        }
        Err(self.error(
            start,
            "unknown markup declaration (expected a comment or CDATA)",
        ))
    }

    /// Moves past the next `terminator`, searching from `skip` bytes in.
    fn skip_past(
        &mut self,
        terminator: &[u8],
        skip: usize,
        message: &'static str,
    ) -> Result<(), LexError> {
        let start = self.position;
        let rest = self.input.get(start + skip..).unwrap_or_default();
        match find(terminator, rest) {
            Some(length) => {
                self.position = start + skip + length + terminator.len();
                Ok(())
            }
            None => Err(self.truncated(start, message)),
        }
    }

    fn error(&self, position: usize, message: &'static str) -> LexError {
        LexError {
            position,
            message,
            truncated: false,
        }
    }

    fn truncated(&self, position: usize, message: &'static str) -> LexError {
        LexError {
            position,
            message,
            truncated: true,
        }
    }
}

/// Whether `text` starts with `</qname>`.
fn is_end_tag(text: &[u8], qname: &[u8]) -> bool {
    text.len() > qname.len() + 2
        && text.starts_with(b"</")
        && same_name(&text[2..2 + qname.len()], qname)
        && text[2 + qname.len()] == b'>'
}

/// The end tag of an element, `</qname>`. Most element names are at most
/// 13 bytes long, so that the whole end tag fits in 16 bytes: it is then
/// recognised with one compare of two 16-byte words instead of a branch for
/// each of `</`, the name and `>` (whether an element ends here is as good
/// as random to a branch predictor, and so is the length of a name).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct EndTag<'a> {
    qname: &'a [u8],
    /// The bytes of `</qname>`, little-endian, zero-padded.
    bytes: u128,
    /// Which bytes of a word `bytes` covers; 0 when the end tag is longer
    /// than 16 bytes (or the start tag too near the end of the input to
    /// read it in one word), which is then compared byte by byte.
    mask: u128,
}

impl<'a> EndTag<'a> {
    /// The end tag of `qname`, given the 16 bytes of input from its start
    /// tag's `<`, when there are as many.
    fn new(qname: &'a [u8], start_tag: Option<&[u8; 16]>) -> Self {
        let n = qname.len();
        let (bytes, mask) = match start_tag {
            Some(block) if (1..=13).contains(&n) => {
                let block = u128::from_le_bytes(*block);
                let name = (block >> 8) & (u128::MAX >> (128 - 8 * n));
                let bytes = u128::from(b'<')
                    | u128::from(b'/') << 8
                    | name << 16
                    | u128::from(b'>') << (8 * (n + 2));
                (bytes, u128::MAX >> (128 - 8 * (n + 3)))
            }
            _ => (0, 0),
        };
        EndTag { qname, bytes, mask }
    }

    /// The name as written (`soapenv:Body`).
    pub(super) fn qname(&self) -> &'a [u8] {
        self.qname
    }

    /// Whether `text` starts with this end tag.
    #[inline]
    fn is_at(&self, text: &[u8]) -> bool {
        match text.first_chunk::<16>() {
            Some(word) if self.mask != 0 => {
                (u128::from_le_bytes(*word) ^ self.bytes) & self.mask == 0
            }
            _ => is_end_tag(text, self.qname),
        }
    }
}

/// Where the element name at the start of `tag` ends (at white space, `/`
/// or `>`; the whole of `tag` when it does not) and where its first `:` is.
/// The first 16 bytes are looked at all at once: a name's length is as good
/// as random to a branch predictor, and a byte loop pays for a mispredicted
/// exit on nearly every start tag.
#[inline]
fn scan_name(tag: &[u8]) -> (usize, Option<usize>) {
    if let Some((ends, colons)) = tag.first_chunk::<16>().and_then(name_bytes) {
        if ends != 0 {
            let length = ends.trailing_zeros() as usize;
            // Bytes up to 0x20 take in XML's four white-space bytes; a
            // control byte, which ends no name, is left to the byte loop.
            if tag[length] > b' ' || is_space(tag[length]) {
                let colons = colons & ((1 << length) - 1);
                let colon = (colons != 0).then(|| colons.trailing_zeros() as usize);
                return (length, colon);
            }
        }
    }
    split_name(tag, &NAME_CLASS)
}

/// How long the name at the start of `text` is (up to its first byte of
/// class `NAME_END` in `classes`, or all of `text`) and where its first `:` is.
fn split_name(text: &[u8], classes: &[u8; 256]) -> (usize, Option<usize>) {
    let mut colon = None;
    for (at, &b) in text.iter().enumerate() {
        match classes[b as usize] {
            NAME_BYTE => {}
            NAME_COLON => {
                if colon.is_none() {
                    colon = Some(at)
                }
            }
            _ => return (at, colon),
        }
    }
    (text.len(), colon)
}

/// Which of 16 bytes may end a name (up to 0x20, `/`, `>`) and which are
/// `:`, a bit for each byte, with SSE2 (part of every x86-64 processor).
#[cfg(target_arch = "x86_64")]
#[inline]
fn name_bytes(block: &[u8; 16]) -> Option<(u32, u32)> {
    use std::arch::x86_64::{
        _mm_cmpeq_epi8, _mm_min_epu8, _mm_movemask_epi8, _mm_or_si128, _mm_set1_epi8,
        _mm_set_epi64x,
    };
    let word = u128::from_le_bytes(*block);
    // These intrinsics take no pointer and SSE2 is always enabled on
    // x86-64: calling them is sound (and no longer `unsafe` from Rust 1.87).
    // `unsafe` for the Rust versions before 1.87 that the crate supports.
    #[allow(unsafe_code, unused_unsafe)]
    let (ends, colons) = unsafe {
        let v = _mm_set_epi64x((word >> 64) as i64, word as i64);
        let low = _mm_cmpeq_epi8(_mm_min_epu8(v, _mm_set1_epi8(b' ' as i8)), v);
        let slash = _mm_cmpeq_epi8(v, _mm_set1_epi8(b'/' as i8));
        let close = _mm_cmpeq_epi8(v, _mm_set1_epi8(b'>' as i8));
        let colon = _mm_cmpeq_epi8(v, _mm_set1_epi8(b':' as i8));
        (
            _mm_movemask_epi8(_mm_or_si128(low, _mm_or_si128(slash, close))),
            _mm_movemask_epi8(colon),
        )
    };
    Some((ends as u32, colons as u32))
}

/// Elsewhere the byte loop of [`scan_name`] reads every name.
#[cfg(not(target_arch = "x86_64"))]
fn name_bytes(_: &[u8; 16]) -> Option<(u32, u32)> {
    None
}

/// `a == b` for element names, which are short: two overlapping word
/// compares instead of a call to `memcmp` (one per element otherwise).
#[inline]
pub(crate) fn same_name(a: &[u8], b: &[u8]) -> bool {
    let n = a.len();
    if n != b.len() {
        return false;
    }
    match n {
        8..=16 => word::<8>(a, 0) == word::<8>(b, 0) && word::<8>(a, n - 8) == word::<8>(b, n - 8),
        4..=7 => word::<4>(a, 0) == word::<4>(b, 0) && word::<4>(a, n - 4) == word::<4>(b, n - 4),
        _ => a == b,
    }
}

/// `N` bytes of `s` from `at` as a number (`N` is 4 or 8).
#[inline]
fn word<const N: usize>(s: &[u8], at: usize) -> u64 {
    let mut bytes = [0u8; 8];
    bytes[..N].copy_from_slice(&s[at..at + N]);
    u64::from_ne_bytes(bytes)
}

/// One attribute of a start tag: `key="value"` (value raw, entities unresolved).
pub(crate) struct Attribute<'a> {
    pub key: &'a [u8],
    /// The key's prefix (`xsi` of `xsi:type`), if any.
    pub prefix: Option<&'a [u8]>,
    /// The key without its prefix.
    pub local: &'a [u8],
    pub value: &'a [u8],
}

/// The attributes of a start tag, in order. Malformed syntax ends the
/// iteration with an error.
pub(crate) struct Attributes<'a> {
    rest: &'a [u8],
}

impl<'a> Attributes<'a> {
    pub(super) fn new(attributes: &'a [u8]) -> Self {
        Attributes { rest: attributes }
    }
}

impl<'a> Iterator for Attributes<'a> {
    type Item = Result<Attribute<'a>, &'static str>;

    fn next(&mut self) -> Option<Self::Item> {
        let rest = trim_start(self.rest);
        if rest.is_empty() {
            self.rest = rest;
            return None;
        }
        let result = split_attribute(rest);
        match result {
            Ok((attribute, after)) => {
                if !after.first().is_none_or(|&b| is_space(b)) {
                    self.rest = &[];
                    return Some(Err("attributes must be separated by white space"));
                }
                self.rest = after;
                Some(Ok(attribute))
            }
            Err(message) => {
                self.rest = &[];
                Some(Err(message))
            }
        }
    }
}

/// The attributes of a start tag when they are exactly one
/// ` key="value"` whose value holds no reference (the common case, taken
/// without the general parse); `None` for anything else, which
/// [`Attributes`] then reads.
pub(crate) fn lone_attribute(attributes: &[u8]) -> Option<Attribute<'_>> {
    // One pass over the key and one over the value: these strings are too
    // short for a vectorised search to pay for its setup.
    let inside = attributes.strip_prefix(b" ")?.strip_suffix(b"\"")?;
    let (equals, colon) = split_name(inside, &KEY_CLASS);
    if equals == 0 || inside.get(equals) != Some(&b'=') {
        return None;
    }
    let key = &inside[..equals];
    let value = inside[equals + 1..].strip_prefix(b"\"")?;
    // No quote inside (it would be two attributes) and no reference to
    // resolve: a loop without an early exit, which compiles to vector code.
    if value
        .iter()
        .fold(false, |found, &b| found | (b == b'"') | (b == b'&'))
    {
        return None;
    }
    let (prefix, local) = match colon {
        Some(colon) => (Some(&key[..colon]), &key[colon + 1..]),
        None => (None, key),
    };
    Some(Attribute {
        key,
        prefix,
        local,
        value,
    })
}

fn split_attribute(text: &[u8]) -> Result<(Attribute<'_>, &[u8]), &'static str> {
    let (key_length, colon) = split_name(text, &KEY_CLASS);
    if key_length == 0 {
        return Err("an attribute without a name");
    }
    let key = &text[..key_length];
    let (prefix, local) = match colon {
        Some(colon) if colon < key_length => (Some(&key[..colon]), &key[colon + 1..]),
        _ => (None, key),
    };
    let rest = trim_start(&text[key_length..]);
    let Some(rest) = rest.strip_prefix(b"=") else {
        return Err("an attribute without a value");
    };
    let rest = trim_start(rest);
    let Some((&quote, rest)) = rest
        .split_first()
        .filter(|(q, _)| matches!(q, b'"' | b'\''))
    else {
        return Err("an attribute value must be quoted");
    };
    // The lexer found the closing quote already; a missing one is a bug
    // there, reported like bad input rather than trusted.
    let Some(length) = memchr::memchr(quote, rest) else {
        return Err("unterminated attribute value");
    };
    // (The lexer refused a `<` in the value already.)
    let value = &rest[..length];
    Ok((
        Attribute {
            key,
            prefix,
            local,
            value,
        },
        &rest[length + 1..],
    ))
}

/// XML's white space (a form feed, say, is not).
fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\r' | b'\n')
}

fn trim_start(text: &[u8]) -> &[u8] {
    if text.first().is_some_and(|&b| !is_space(b)) {
        return text;
    }
    let blank = text
        .iter()
        .position(|&b| !is_space(b))
        .unwrap_or(text.len());
    &text[blank..]
}

/// How a byte reads in a name: part of it, its prefix separator, or its end.
const NAME_BYTE: u8 = 0;
const NAME_COLON: u8 = 1;
const NAME_END: u8 = 2;

/// Element names end at white space, `/` or `>`.
static NAME_CLASS: [u8; 256] = byte_classes(b" \t\r\n/>");
/// Attribute names end at white space, `=` or a quote.
static KEY_CLASS: [u8; 256] = byte_classes(b" \t\r\n=\"'");

/// A table lookup per byte instead of a chain of comparisons.
const fn byte_classes(ends: &[u8]) -> [u8; 256] {
    let mut table = [NAME_BYTE; 256];
    table[b':' as usize] = NAME_COLON;
    let mut i = 0;
    while i < ends.len() {
        table[ends[i] as usize] = NAME_END;
        i += 1;
    }
    table
}

/// A byte loop: the strings searched here (names, short values) are too
/// short for a vectorised search to pay for its setup.
fn find_byte(needle: u8, haystack: &[u8]) -> Option<usize> {
    haystack.iter().position(|&b| b == needle)
}

fn find(needle: &[u8], haystack: &[u8]) -> Option<usize> {
    let first = *needle.first()?;
    let mut from = 0;
    while let Some(offset) = find_byte(first, &haystack[from..]) {
        let at = from + offset;
        if haystack[at..].starts_with(needle) {
            return Some(at);
        }
        from = at + 1;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tokens(xml: &str) -> Result<Vec<String>, LexError> {
        let mut lexer = Lexer::new(xml.as_bytes());
        let mut out = Vec::new();
        loop {
            let token = lexer.next_token()?;
            let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
            out.push(match token {
                Token::Start {
                    end_tag,
                    local,
                    attributes,
                } => {
                    let qname = end_tag.qname();
                    assert!(qname.ends_with(local));
                    format!("<{}|{}>", text(qname), text(attributes))
                }
                Token::End { qname } => format!("</{}>", text(qname)),
                Token::Text(t) => format!("T{:?}", text(t)),
                Token::CData(t) => format!("C{:?}", text(t)),
                Token::Eof => return Ok(out),
            });
        }
    }

    #[test]
    fn elements_text_and_everything_passed_over() {
        let xml = "\u{feff}<?xml version=\"1.0\"?><!DOCTYPE x [<!ENTITY e \"]>\">]><!-- c --><a x=\"1>2\" y='q\"'><b/><c\n/>t&amp;<![CDATA[<raw>]]><?pi x?></a >";
        assert_eq!(
            tokens(xml).unwrap(),
            [
                "<a| x=\"1>2\" y='q\"'>",
                "<b|>",
                "</b>",
                "<c|\n>",
                "</c>",
                "T\"t&amp;\"",
                "C\"<raw>\"",
                "</a>",
            ]
        );
    }

    #[test]
    fn fast_paths_take_only_what_they_recognise() {
        let mut lexer = Lexer::new(b"<a><b>1 &amp; 2</b><c/><d>x</d ><e><f/></e></a>");
        let start = |lexer: &mut Lexer<'static>, name: &[u8]| match lexer.next_token().unwrap() {
            Token::Start { end_tag, .. } => {
                assert_eq!(end_tag.qname(), name);
                end_tag
            }
            other => panic!("{other:?}"),
        };
        let a = start(&mut lexer, b"a");
        assert!(!lexer.at_end_of(&a));
        let b = start(&mut lexer, b"b");
        assert_eq!(lexer.leaf_text(&b), Some((&b"1 &amp; 2"[..], false)));
        let c = start(&mut lexer, b"c");
        assert_eq!(lexer.leaf_text(&c), Some((&b""[..], true)));
        let d = start(&mut lexer, b"d");
        // `</d >` is left to the general path.
        assert_eq!(lexer.leaf_text(&d), None);
        assert_eq!(lexer.next_token().unwrap(), Token::Text(b"x"));
        assert_eq!(lexer.next_token().unwrap(), Token::End { qname: b"d" });
        let e = start(&mut lexer, b"e");
        assert_eq!(lexer.leaf_text(&e), None);
        let f = start(&mut lexer, b"f");
        assert!(lexer.at_end_of(&f));
        assert!(lexer.at_end_of(&e));
        assert!(!lexer.at_end_of(&EndTag::new(b"x", None)));
        assert!(lexer.at_end_of(&a));
        assert_eq!(lexer.next_token().unwrap(), Token::Eof);
    }

    /// The word-at-a-time name scan and end-tag compare against plain byte
    /// loops, for every name length around the 13- and 16-byte limits and
    /// every byte that can follow a name.
    #[test]
    fn word_compares_agree_with_byte_loops() {
        fn reference_name(tag: &[u8]) -> (usize, Option<usize>) {
            let length = tag
                .iter()
                .position(|&b| matches!(b, b' ' | b'\t' | b'\r' | b'\n' | b'/' | b'>'))
                .unwrap_or(tag.len());
            (length, tag[..length].iter().position(|&b| b == b':'))
        }
        for length in 1..=20 {
            for colon in [None, Some(0), Some(2), Some(length - 1)] {
                let mut name: Vec<u8> = (0..length)
                    .map(|i| b"abcdefghijklmnopqrstuvwxyz"[i])
                    .collect();
                if let Some(at) = colon.filter(|&at| at < length) {
                    name[at] = b':';
                }
                for follow in [
                    &b" x=\"1\">"[..],
                    b">",
                    b"/>",
                    b"\t>",
                    b"\n>",
                    b"\x01>",
                    b"\xc3\xa9>",
                    b"",
                ] {
                    for padding in [0, 16] {
                        let mut tag = name.clone();
                        tag.extend_from_slice(follow);
                        tag.resize(tag.len() + padding, b'z');
                        assert_eq!(
                            scan_name(&tag),
                            reference_name(&tag),
                            "{:?}",
                            String::from_utf8_lossy(&tag)
                        );
                    }
                }
                let mut start_tag = b"<".to_vec();
                start_tag.extend_from_slice(&name);
                start_tag.extend_from_slice(b" a=\"1\">....");
                let qname = &start_tag[1..=length];
                let word = start_tag.first_chunk::<16>();
                for end_tag in [EndTag::new(qname, word), EndTag::new(qname, None)] {
                    for mut text in [
                        [b"</", qname, b">"].concat(),
                        [b"</", qname, b" >"].concat(),
                        [b"</", qname, b"x>"].concat(),
                        [b"</", &qname[..length - 1], b">"].concat(),
                        [b"</", &qname[..length - 1], b"q>"].concat(),
                        [b"<", qname, b">"].concat(),
                    ] {
                        let expected = is_end_tag(&text, qname);
                        assert_eq!(end_tag.is_at(&text), expected);
                        text.extend_from_slice(b"<more>and more</more>");
                        assert_eq!(end_tag.is_at(&text), expected);
                    }
                }
            }
        }
    }

    #[test]
    fn truncated_and_malformed_input_is_reported() {
        for (xml, truncated) in [
            ("<a", true),
            ("<a x='1", true),
            ("<a></a", true),
            ("<!-- x", true),
            ("<![CDATA[x", true),
            ("<!DOCTYPE a [", true),
            ("<?pi", true),
            ("<", true),
            ("<!-", true),
            ("< a>", false),
            ("<a></ a>", false),
            ("<a></a b>", false),
            ("<!ELEMENT a>", false),
            ("<a x=\"<\">", false),
        ] {
            let error = tokens(xml).unwrap_err();
            assert_eq!(error.truncated, truncated, "{xml}: {error:?}");
        }
    }

    #[test]
    fn a_lone_attribute_is_taken_only_when_it_is_one() {
        let lone = lone_attribute(b" xsi:type=\"vim25:VirtualDisk\"").unwrap();
        assert_eq!(
            (lone.key, lone.prefix, lone.local, lone.value),
            (
                &b"xsi:type"[..],
                Some(&b"xsi"[..]),
                &b"type"[..],
                &b"vim25:VirtualDisk"[..]
            )
        );
        let plain = lone_attribute(b" type=\"VirtualMachine\"").unwrap();
        assert_eq!((plain.prefix, plain.local), (None, &b"type"[..]));
        for other in [
            " a=\"1\" b=\"2\"",
            " a='1'",
            " a = \"1\"",
            "  a=\"1\"",
            " =\"1\"",
            " a b=\"1\"",
            " a=\"1\" ",
            "",
        ] {
            assert!(lone_attribute(other.as_bytes()).is_none(), "{other}");
        }
    }

    #[test]
    fn attributes_are_split_and_checked() {
        let parsed: Vec<_> = Attributes::new(b" a=\"1\"  b = 'x y' xsi:type=\"T\" ")
            .map(|a| a.map(|a| (a.key, a.value)))
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(
            parsed,
            [(&b"a"[..], &b"1"[..]), (b"b", b"x y"), (b"xsi:type", b"T")]
        );
        for bad in [" a", " a=1", " =\"1\"", " a=\"1\"b=\"2\""] {
            assert!(Attributes::new(bad.as_bytes()).any(|a| a.is_err()), "{bad}");
        }
    }
}
