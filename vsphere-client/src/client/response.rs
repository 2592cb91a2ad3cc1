//! Turning an HTTP reply into a typed response or a clear error.

use http::StatusCode;

use crate::error::{Error, ErrorKind, Fault};
use crate::transport::SoapReply;
use crate::xml::soap::SoapError;
use crate::xml::Request;

/// Decodes a reply for request type `R`.
///
/// - A SOAP envelope (any status) decodes to the response or to the fault.
/// - Anything else is `NotSoap` on a 2xx status and `HttpStatus` otherwise,
///   with a short excerpt of the body to say what the server meant (an HTML
///   "503 Service Unavailable" page, a proxy's message...).
pub(crate) fn decode<R: Request>(
    reply: &SoapReply,
    url: &dyn std::fmt::Display,
) -> Result<R::Response, Error> {
    decode_body::<R>(
        &reply.body,
        reply.status,
        reply.content_type.as_deref(),
        url,
    )
}

/// [`decode`] for a body with its status and content type.
pub(crate) fn decode_body<R: Request>(
    body: &[u8],
    status: StatusCode,
    content_type: Option<&str>,
    url: &dyn std::fmt::Display,
) -> Result<R::Response, Error> {
    if !looks_like_soap(body) {
        return Err(not_soap(body, status, content_type, url));
    }
    match crate::xml::soap::decode_response::<R>(body) {
        Ok(response) => Ok(response),
        Err(SoapError::Fault(fault)) => Err(Error::from_fault(Fault::new(
            fault.faultcode,
            fault.faultstring,
            fault.type_name,
            fault.detail,
        ))),
        Err(SoapError::Decode(decode)) => {
            let err = if status.is_success() || status == StatusCode::INTERNAL_SERVER_ERROR {
                Error::new(
                    ErrorKind::Decode,
                    format!("cannot decode the response from {url}"),
                )
            } else {
                Error::new(
                    ErrorKind::HttpStatus(status.as_u16()),
                    format!("HTTP {status} from {url}"),
                )
            };
            Err(err.with_source(decode))
        }
    }
}

fn not_soap(
    body: &[u8],
    status: StatusCode,
    content_type: Option<&str>,
    url: &dyn std::fmt::Display,
) -> Error {
    let what = match content_type {
        Some(ct) => format!(
            "not a SOAP response ({})",
            ct.split(';').next().unwrap_or(ct).trim()
        ),
        None if body.is_empty() => "not a SOAP response (empty body)".to_owned(),
        None => "not a SOAP response".to_owned(),
    };
    let excerpt = text_excerpt(body, 160);
    let tail = if excerpt.is_empty() {
        String::new()
    } else {
        format!(": {excerpt}")
    };
    if status.is_success() {
        Error::new(
            ErrorKind::NotSoap,
            format!("{url} answered HTTP {status} but {what}{tail}"),
        )
    } else {
        Error::new(
            ErrorKind::HttpStatus(status.as_u16()),
            format!("HTTP {status} from {url}, {what}{tail}"),
        )
    }
}

/// Whether the body's first element is a SOAP `Envelope` (any prefix).
pub(crate) fn looks_like_soap(body: &[u8]) -> bool {
    let head = &body[..body.len().min(4096)];
    let text = String::from_utf8_lossy(head);
    let mut rest = text.trim_start_matches('\u{feff}');
    loop {
        rest = rest.trim_start();
        if let Some(after) = rest.strip_prefix("<?") {
            match after.find("?>") {
                Some(end) => rest = &after[end + 2..],
                None => return false,
            }
        } else if let Some(after) = rest.strip_prefix("<!--") {
            match after.find("-->") {
                Some(end) => rest = &after[end + 3..],
                None => return false,
            }
        } else if let Some(after) = rest.strip_prefix('<') {
            let name: String = after
                .chars()
                .take_while(|c| !c.is_whitespace() && *c != '>' && *c != '/')
                .collect();
            return name.rsplit(':').next() == Some("Envelope");
        } else {
            return false;
        }
    }
}

/// A short, single-line, tag-free excerpt of a body for error messages.
fn text_excerpt(body: &[u8], max_chars: usize) -> String {
    let text = String::from_utf8_lossy(&body[..body.len().min(16 * 1024)]);
    let mut out = String::new();
    let mut in_tag = false;
    let mut last_space = true;
    for c in text.chars() {
        match c {
            '<' => in_tag = true,
            '>' if in_tag => {
                in_tag = false;
                if !last_space {
                    out.push(' ');
                    last_space = true;
                }
            }
            _ if in_tag => {}
            c if c.is_whitespace() || c.is_control() => {
                if !last_space {
                    out.push(' ');
                    last_space = true;
                }
            }
            c => {
                out.push(c);
                last_space = false;
            }
        }
        if out.chars().count() >= max_chars {
            out.push('…');
            break;
        }
    }
    out.trim().to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recognises_envelopes_only() {
        assert!(looks_like_soap(
            b"<?xml version=\"1.0\"?>\n<soapenv:Envelope xmlns:soapenv=\"x\">"
        ));
        assert!(looks_like_soap(b"  <Envelope>"));
        assert!(looks_like_soap(b"\xef\xbb\xbf<!-- c --><S:Envelope>"));
        assert!(!looks_like_soap(
            b"<!DOCTYPE html><html><body>503</body></html>"
        ));
        assert!(!looks_like_soap(b"<html>"));
        assert!(!looks_like_soap(b""));
        assert!(!looks_like_soap(b"Service Unavailable"));
        assert!(!looks_like_soap(b"<?xml"));
    }

    #[test]
    fn excerpts_strip_tags() {
        let html = b"<html><head><title>503 Service Unavailable</title></head>\n<body><h1>Too many\n outstanding operations</h1></body></html>";
        assert_eq!(
            text_excerpt(html, 200),
            "503 Service Unavailable Too many outstanding operations"
        );
    }
}
