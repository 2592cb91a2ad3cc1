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

/// Rewrites a SOAP body for logging: the text of every element whose local
/// name ends in `password` (any case: `password`, `newPassword`...) is
/// replaced, and so is every occurrence of each secret (raw or XML-escaped)
/// in text content. Markup is left alone, so a short password that happens
/// to spell part of a tag name does not mangle the log.
pub(crate) fn redact_body(body: &[u8], secrets: &[&Secret]) -> String {
    let text = String::from_utf8_lossy(body);
    let mut needles: Vec<String> = Vec::new();
    for secret in secrets {
        // Cookie values may be quoted on the wire but not in bodies.
        let raw = secret.expose().trim_matches('"');
        // Tiny values would blank out unrelated text and do not identify
        // anything; a real cookie or password is longer.
        if raw.len() < 4 {
            continue;
        }
        needles.push(raw.to_owned());
        let escaped = xml_escape(raw);
        if escaped != raw {
            needles.push(escaped);
        }
    }
    let scrub = |segment: &str| -> String {
        let mut segment = segment.to_owned();
        for needle in &needles {
            if segment.contains(needle.as_str()) {
                segment = segment.replace(needle.as_str(), REDACTED);
            }
        }
        segment
    };

    let mut out = String::with_capacity(text.len());
    let mut rest: &str = &text;
    let mut in_password = false;
    loop {
        let Some(open) = rest.find('<') else {
            out.push_str(&scrub(rest));
            return out;
        };
        let content = &rest[..open];
        if in_password && !content.is_empty() {
            out.push_str(REDACTED);
        } else {
            out.push_str(&scrub(content));
        }
        let markup = &rest[open..];
        let Some(close) = markup.find('>') else {
            out.push_str(&scrub(markup));
            return out;
        };
        let tag = &markup[..=close];
        out.push_str(tag);
        in_password = is_password_start_tag(tag);
        rest = &markup[close + 1..];
    }
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
        let cookie = Secret::new("\"52a1-b&c\"");
        let body = "<key>52a1-b&amp;c</key><x>cookie=52a1-b&c</x>";
        let out = redact_body(body.as_bytes(), &[&cookie]);
        assert!(!out.contains("52a1"), "{out}");
        assert_eq!(out, "<key><redacted></key><x>cookie=<redacted></x>");
    }

    #[test]
    fn short_passwords_do_not_mangle_tags() {
        let password = Secret::new("pass");
        let body =
            b"<Login><userName>user</userName><password>pass</password></Login><x>a pass b</x>";
        let out = redact_body(body, &[&password]);
        assert_eq!(
            out,
            "<Login><userName>user</userName><password><redacted></password></Login><x>a <redacted> b</x>"
        );
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
