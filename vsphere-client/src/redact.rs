//! Secrets (passwords, the session cookie) and their removal from logs.
//!
//! A [`Secret`] never prints its value; [`redact_body`] rewrites a SOAP body
//! for the wire log so that neither password elements nor any known secret
//! value appear in it.

use std::fmt;
use std::sync::Arc;

/// What a redacted value is replaced with.
pub(crate) const REDACTED: &str = "<redacted>";

/// A string that must never appear in logs, errors or `Debug` output.
/// Cheap to clone.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct Secret(Arc<str>);

impl Secret {
    pub(crate) fn new(value: impl Into<Arc<str>>) -> Self {
        Secret(value.into())
    }

    /// The secret itself: only for putting it on the wire.
    pub(crate) fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(REDACTED)
    }
}

/// Rewrites a SOAP body for logging: the content of every element whose
/// local name ends in `password` (any case: `password`, `newPassword`...)
/// is replaced, then every occurrence of each secret (raw or XML-escaped) is.
pub(crate) fn redact_body(body: &[u8], secrets: &[&Secret]) -> String {
    let text = String::from_utf8_lossy(body);
    let mut out = redact_password_elements(&text);
    for secret in secrets {
        // Cookie values may be quoted on the wire but not in bodies.
        let raw = secret.expose().trim_matches('"');
        // Tiny values would blank out unrelated text and do not identify
        // anything; a real cookie or password is longer.
        if raw.len() < 4 {
            continue;
        }
        if out.contains(raw) {
            out = out.replace(raw, REDACTED);
        }
        let escaped = xml_escape(raw);
        if escaped != raw && out.contains(escaped.as_str()) {
            out = out.replace(escaped.as_str(), REDACTED);
        }
    }
    out
}

fn redact_password_elements(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(open) = rest.find('<') {
        let (before, tag_and_after) = rest.split_at(open);
        out.push_str(before);
        let Some(close) = tag_and_after.find('>') else {
            out.push_str(tag_and_after);
            return out;
        };
        let tag = &tag_and_after[..=close];
        out.push_str(tag);
        rest = &tag_and_after[close + 1..];
        if is_password_start_tag(tag) {
            // Skip the element's text up to the next tag (its end tag).
            let end = rest.find('<').unwrap_or(rest.len());
            out.push_str(REDACTED);
            rest = &rest[end..];
        }
    }
    out.push_str(rest);
    out
}

fn is_password_start_tag(tag: &str) -> bool {
    // `tag` is `<...>`: skip end tags, self-closing tags, declarations.
    let inner = &tag[1..tag.len() - 1];
    if inner.starts_with('/')
        || inner.starts_with('?')
        || inner.starts_with('!')
        || inner.ends_with('/')
    {
        return false;
    }
    let name = inner
        .split(|c: char| c.is_whitespace())
        .next()
        .unwrap_or("");
    let local = name.rsplit(':').next().unwrap_or(name);
    local.to_ascii_lowercase().ends_with("password")
}

fn xml_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            _ => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_debug_is_redacted() {
        let s = Secret::new("hunter2-password");
        assert_eq!(format!("{s:?}"), REDACTED);
        assert!(!format!("{:?}", Some(s)).contains("hunter2"));
    }

    #[test]
    fn password_elements_are_blanked() {
        let body = br#"<Login xmlns="urn:vim25"><_this type="SessionManager">SessionManager</_this><userName>root</userName><password>s3cr&amp;t</password></Login>"#;
        let out = redact_body(body, &[]);
        assert!(!out.contains("s3cr"), "{out}");
        assert!(out.contains("<password><redacted></password>"), "{out}");
        assert!(out.contains("<userName>root</userName>"));
        let body = b"<x:newPassword a=\"1\">p1</x:newPassword><oldPassword>p2</oldPassword><passwordHint/>";
        let out = redact_body(body, &[]);
        assert!(!out.contains("p1") && !out.contains("p2"), "{out}");
    }

    #[test]
    fn known_secrets_are_blanked_raw_and_escaped() {
        let cookie = Secret::new("\"52a1-b<c>\"");
        let body = "<key>52a1-b&lt;c&gt;</key> cookie=\"52a1-b<c>\"";
        let out = redact_body(body.as_bytes(), &[&cookie]);
        assert!(!out.contains("52a1"), "{out}");
    }

    #[test]
    fn malformed_text_does_not_panic() {
        for body in [
            "<",
            "<password",
            "<password>",
            "a<b>c</",
            "<>",
            "</>",
            "<password/>x",
        ] {
            let _ = redact_body(body.as_bytes(), &[]);
        }
    }
}
