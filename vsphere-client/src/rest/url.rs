//! The URLs of REST calls: the server's origin, a path built segment by
//! segment (each percent-encoded), and a query.

use std::fmt;

use http::Uri;

/// `scheme://host[:port]` + path + `?query`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ApiUrl {
    /// `https://host:port`, no trailing slash.
    origin: String,
    /// Empty or `/segment/...`, percent-encoded.
    path: String,
    query: Option<String>,
}

impl ApiUrl {
    /// The root of `base`'s server (its path and query dropped).
    pub(crate) fn root(base: &Uri) -> ApiUrl {
        let scheme = base.scheme_str().unwrap_or("https");
        let authority = base.authority().map_or("", |a| a.as_str());
        ApiUrl {
            origin: format!("{scheme}://{authority}"),
            path: String::new(),
            query: None,
        }
    }

    /// Appends one path segment, percent-encoding what a segment cannot
    /// hold (`/`, `?`, `#`, `%`, spaces, non-ASCII...).
    pub(crate) fn push(&mut self, segment: &str) {
        self.path.push('/');
        for &byte in segment.as_bytes() {
            if byte.is_ascii_graphic() && !b"\"#%/<>?`{}".contains(&byte) {
                self.path.push(byte as char);
            } else {
                push_escaped(&mut self.path, byte);
            }
        }
    }

    /// Appends the segments of a `/`-separated service path.
    pub(crate) fn extend<'a>(&mut self, segments: impl IntoIterator<Item = &'a str>) {
        for segment in segments {
            if !segment.is_empty() {
                self.push(segment);
            }
        }
    }

    /// Replaces path and query with those of an already encoded
    /// `path?query` (an endpoint the server named).
    pub(crate) fn set_path_and_query(&mut self, path_and_query: &http::uri::PathAndQuery) {
        self.path = path_and_query.path().to_owned();
        self.query = path_and_query.query().map(str::to_owned);
    }

    pub(crate) fn path(&self) -> &str {
        if self.path.is_empty() {
            "/"
        } else {
            &self.path
        }
    }

    pub(crate) fn query(&self) -> Option<&str> {
        self.query.as_deref()
    }

    /// `None` or an already encoded query (`a=1&b=2`).
    pub(crate) fn set_query(&mut self, query: Option<&str>) {
        self.query = query.map(str::to_owned);
    }
}

impl fmt::Display for ApiUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}{}", self.origin, self.path())?;
        match &self.query {
            Some(query) => write!(f, "?{query}"),
            None => Ok(()),
        }
    }
}

/// A query value as a form encodes it: letters, digits and `*-._` as they
/// are, a space as `+`, anything else `%XX`.
pub(crate) fn encode_query_value(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for &byte in value.as_bytes() {
        match byte {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'*' | b'-' | b'.' | b'_' => {
                out.push(byte as char);
            }
            b' ' => out.push('+'),
            _ => push_escaped(&mut out, byte),
        }
    }
    out
}

fn push_escaped(out: &mut String, byte: u8) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    out.push('%');
    out.push(HEX[usize::from(byte >> 4)] as char);
    out.push(HEX[usize::from(byte & 15)] as char);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segments_are_escaped_and_the_origin_kept() {
        let base: Uri = "https://vc.example.com:8443/sdk?x=1".parse().unwrap();
        let mut url = ApiUrl::root(&base);
        assert_eq!(url.to_string(), "https://vc.example.com:8443/");
        url.extend("api/vcenter//vm".split('/'));
        url.push("id:a b/c?d#e%f\u{e9}");
        assert_eq!(
            url.to_string(),
            "https://vc.example.com:8443/api/vcenter/vm/id:a%20b%2Fc%3Fd%23e%25f%C3%A9"
        );
        url.set_query(Some("action=clone"));
        assert_eq!(url.query(), Some("action=clone"));
        assert!(url.to_string().ends_with("?action=clone"));
        // What the HTTP layer parses.
        let uri: Uri = url.to_string().parse().expect("a valid URI");
        assert_eq!(uri.path(), url.path());
    }

    #[test]
    fn a_named_endpoint_keeps_only_its_path_and_query() {
        let mut url = ApiUrl::root(&"https://10.0.0.5/".parse().unwrap());
        let named: Uri = "https://vc.internal:443/cls-data/update/abc?k=v%20w"
            .parse()
            .unwrap();
        url.set_path_and_query(named.path_and_query().unwrap());
        assert_eq!(
            url.to_string(),
            "https://10.0.0.5/cls-data/update/abc?k=v%20w"
        );
    }

    #[test]
    fn query_values_are_form_encoded() {
        assert_eq!(
            encode_query_value("a b&c=d/é~*-._"),
            "a+b%26c%3Dd%2F%C3%A9%7E*-._"
        );
    }
}
