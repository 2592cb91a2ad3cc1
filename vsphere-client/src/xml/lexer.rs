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
        qname: &'a [u8],
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
    pub fn new(input: &'a [u8]) -> Self {
        let position = if input.starts_with(BOM) { BOM.len() } else { 0 };
        Lexer {
            input,
            position,
            empty_end: None,
        }
    }

    /// Offset of the next byte to read.
    pub fn position(&self) -> usize {
        self.position
    }

    pub fn next_token(&mut self) -> Result<Token<'a>, LexError> {
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
    /// follows is `</qname>` (or the element was written empty), moves past
    /// it and says so.
    pub fn at_end_of(&mut self, qname: &[u8]) -> bool {
        if let Some(pending) = self.empty_end {
            if pending == qname {
                self.empty_end = None;
                return true;
            }
            return false;
        }
        let rest = &self.input[self.position..];
        if is_end_tag(rest, qname) {
            self.position += qname.len() + 3;
            return true;
        }
        false
    }

    /// The fast path for a leaf element the reader has entered: when what
    /// follows is character data without markup and then `</qname>`,
    /// returns the character data (raw) and moves past the end tag.
    pub fn leaf_text(&mut self, qname: &[u8]) -> Option<&'a [u8]> {
        if self.empty_end.is_some() {
            // Empty, as a slice of the input like every other token.
            let empty = &self.input[self.position..self.position];
            return self.at_end_of(qname).then_some(empty);
        }
        let rest = &self.input[self.position..];
        let length = find_byte(b'<', rest)?;
        if !is_end_tag(&rest[length..], qname) {
            return None;
        }
        self.position += length + qname.len() + 3;
        Some(&rest[..length])
    }

    fn start_tag(&mut self) -> Result<Token<'a>, LexError> {
        let start = self.position;
        let tag = &self.input[start + 1..];
        // The name ends at white space, `/` or `>`; its prefix at the first `:`.
        let mut name_length = tag.len();
        let mut colon = None;
        for (at, &b) in tag.iter().enumerate() {
            match b {
                b':' if colon.is_none() => colon = Some(at),
                b' ' | b'\t' | b'\r' | b'\n' | b'/' | b'>' => {
                    name_length = at;
                    break;
                }
                _ => {}
            }
        }
        if name_length == 0 {
            return Err(self.error(start, "a start tag without a name"));
        }
        // The tag ends at the first `>` outside a quoted attribute value.
        let mut at = name_length;
        let close = loop {
            let Some(offset) = tag[at..]
                .iter()
                .position(|&b| matches!(b, b'>' | b'"' | b'\''))
            else {
                return Err(self.truncated(start, "unterminated start tag"));
            };
            at += offset;
            let quote = tag[at];
            if quote == b'>' {
                break at;
            }
            // The value ends at its quote; a `<` in it is not XML.
            match tag[at + 1..].iter().position(|&b| b == quote || b == b'<') {
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
            qname,
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
        && &text[2..2 + qname.len()] == qname
        && text[2 + qname.len()] == b'>'
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
    pub fn new(attributes: &'a [u8]) -> Self {
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

fn split_attribute(text: &[u8]) -> Result<(Attribute<'_>, &[u8]), &'static str> {
    let mut key_length = text.len();
    let mut colon = None;
    for (at, &b) in text.iter().enumerate() {
        match b {
            b':' if colon.is_none() => colon = Some(at),
            b'=' | b' ' | b'\t' | b'\r' | b'\n' | b'"' | b'\'' => {
                key_length = at;
                break;
            }
            _ => {}
        }
    }
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
    let Some(length) = find_byte(quote, rest) else {
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
    let blank = text
        .iter()
        .position(|&b| !is_space(b))
        .unwrap_or(text.len());
    &text[blank..]
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
                    qname,
                    local,
                    attributes,
                } => {
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
        let start = |lexer: &mut Lexer<'_>| match lexer.next_token().unwrap() {
            Token::Start { qname, .. } => qname.to_vec(),
            other => panic!("{other:?}"),
        };
        assert_eq!(start(&mut lexer), b"a");
        assert!(!lexer.at_end_of(b"a"));
        assert_eq!(start(&mut lexer), b"b");
        assert_eq!(lexer.leaf_text(b"b"), Some(&b"1 &amp; 2"[..]));
        assert_eq!(start(&mut lexer), b"c");
        assert_eq!(lexer.leaf_text(b"c"), Some(&b""[..]));
        assert_eq!(start(&mut lexer), b"d");
        // `</d >` is left to the general path.
        assert_eq!(lexer.leaf_text(b"d"), None);
        assert_eq!(lexer.next_token().unwrap(), Token::Text(b"x"));
        assert_eq!(lexer.next_token().unwrap(), Token::End { qname: b"d" });
        assert_eq!(start(&mut lexer), b"e");
        assert_eq!(lexer.leaf_text(b"e"), None);
        assert_eq!(start(&mut lexer), b"f");
        assert!(lexer.at_end_of(b"f"));
        assert!(lexer.at_end_of(b"e"));
        assert!(!lexer.at_end_of(b"x"));
        assert!(lexer.at_end_of(b"a"));
        assert_eq!(lexer.next_token().unwrap(), Token::Eof);
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
