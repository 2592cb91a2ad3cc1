//! Resolving XML references in text and attribute values: the five
//! predefined entities (`&lt;` `&gt;` `&amp;` `&apos;` `&quot;`) and
//! character references (`&#233;`, `&#xE9;`). A SOAP body declares no
//! other entity (a DOCTYPE is refused by the lexer), so any other name is
//! an error, as is a reference to a code point XML does not allow.

use std::borrow::Cow;
use std::fmt;

/// A reference that could not be resolved, with its byte offset in the text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct EscapeError {
    offset: usize,
    problem: Problem,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Problem {
    Unterminated,
    UnknownEntity(String),
    BadCharacter(String),
}

impl fmt::Display for EscapeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.problem {
            Problem::Unterminated => {
                write!(f, "a reference at byte {} has no closing ';'", self.offset)
            }
            Problem::UnknownEntity(name) => {
                write!(f, "unknown entity '&{name};' at byte {}", self.offset)
            }
            Problem::BadCharacter(reference) => write!(
                f,
                "'&{reference};' at byte {} is not a character XML allows",
                self.offset
            ),
        }
    }
}

impl std::error::Error for EscapeError {}

/// How far a reference's `;` is looked for: every valid one is much shorter.
const MAX_REFERENCE: usize = 32;

/// `text` with its references resolved; borrowed when it holds none.
pub(crate) fn unescape(text: &str) -> Result<Cow<'_, str>, EscapeError> {
    let Some(first) = text.find('&') else {
        return Ok(Cow::Borrowed(text));
    };
    let mut out = String::with_capacity(text.len());
    out.push_str(&text[..first]);
    let mut rest = &text[first..];
    let mut offset = first;
    while let Some(at) = rest.find('&') {
        out.push_str(&rest[..at]);
        offset += at;
        let after = &rest[at + 1..];
        let window = &after.as_bytes()[..after.len().min(MAX_REFERENCE)];
        let Some(end) = window.iter().position(|&b| b == b';') else {
            return Err(EscapeError {
                offset,
                problem: Problem::Unterminated,
            });
        };
        let reference = &after[..end];
        match resolve(reference) {
            Ok(c) => out.push(c),
            Err(problem) => return Err(EscapeError { offset, problem }),
        }
        rest = &after[end + 1..];
        offset += end + 2;
    }
    out.push_str(rest);
    Ok(Cow::Owned(out))
}

fn resolve(reference: &str) -> Result<char, Problem> {
    let number = match reference.as_bytes() {
        [b'#', b'x', hex @ ..] => parse_digits(hex, 16),
        [b'#', decimal @ ..] => parse_digits(decimal, 10),
        _ => {
            return match reference {
                "lt" => Ok('<'),
                "gt" => Ok('>'),
                "amp" => Ok('&'),
                "apos" => Ok('\''),
                "quot" => Ok('"'),
                other => Err(Problem::UnknownEntity(other.to_string())),
            }
        }
    };
    number
        .and_then(char::from_u32)
        .filter(|&c| is_xml_char(c))
        .ok_or_else(|| Problem::BadCharacter(reference.to_string()))
}

/// The value of a non-empty run of digits in `radix`; `None` for anything
/// else (signs, spaces, no digits) or past `u32`.
fn parse_digits(digits: &[u8], radix: u32) -> Option<u32> {
    if digits.is_empty() {
        return None;
    }
    digits.iter().try_fold(0u32, |value, &b| {
        let digit = (b as char).to_digit(radix)?;
        value.checked_mul(radix)?.checked_add(digit)
    })
}

/// XML 1.0's `Char`: tab, line feed, carriage return and everything from
/// space up, but the surrogates (which `char` already excludes) and
/// U+FFFE, U+FFFF.
fn is_xml_char(c: char) -> bool {
    matches!(c, '\t' | '\n' | '\r' | ' '..='\u{D7FF}' | '\u{E000}'..='\u{FFFD}' | '\u{10000}'..)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_without_references_is_borrowed() {
        assert!(matches!(
            unescape("plain text"),
            Ok(Cow::Borrowed("plain text"))
        ));
        assert!(matches!(unescape(""), Ok(Cow::Borrowed(""))));
    }

    #[test]
    fn resolves_entities_and_character_references() {
        let text = "a &lt;b&gt; &amp; &apos;c&quot; &#233;&#xE9;&#x1F600; &#10;";
        assert_eq!(unescape(text).unwrap(), "a <b> & 'c\" éé😀 \n");
        assert_eq!(unescape("&amp;lt;").unwrap(), "&lt;", "resolved once");
        assert_eq!(unescape("x&#x41;").unwrap(), "xA");
    }

    #[test]
    fn refuses_what_is_not_a_reference_with_its_offset() {
        let error = |text: &str| unescape(text).unwrap_err().to_string();
        assert_eq!(error("ab &nbsp; c"), "unknown entity '&nbsp;' at byte 3");
        assert_eq!(
            error("tail &amp"),
            "a reference at byte 5 has no closing ';'"
        );
        assert_eq!(error("& alone;"), "unknown entity '& alone;' at byte 0");
        assert_eq!(error("&;"), "unknown entity '&;' at byte 0");
        assert_eq!(
            error("ok &amp; then &verylongentityname;"),
            "unknown entity '&verylongentityname;' at byte 14"
        );
        assert_eq!(
            error(&format!("&{};", "a".repeat(40))),
            "a reference at byte 0 has no closing ';'"
        );
        for bad in [
            "&#0;",
            "&#x0;",
            "&#xD800;",
            "&#x110000;",
            "&#xFFFE;",
            "&#1;",
            "&#;",
            "&#x;",
            "&#-1;",
            "&#99999999999;",
            "&#x+41;",
        ] {
            assert!(
                error(bad).contains("is not a character XML allows"),
                "{bad}: {}",
                error(bad)
            );
        }
    }

    #[test]
    fn multibyte_text_around_references_is_kept() {
        assert_eq!(unescape("é&amp;ü").unwrap(), "é&ü");
        // A '&' inside a multi-byte window: the ';' search stays on bytes.
        assert_eq!(
            unescape("&éééééééééééééééé;").unwrap_err().to_string(),
            "a reference at byte 0 has no closing ';'"
        );
    }
}
