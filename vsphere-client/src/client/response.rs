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
pub(crate) fn decode<R: Request>(reply: &SoapReply, url: &str) -> Result<R::Response, Error> {
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
    url: &str,
) -> Result<R::Response, Error> {
    if !looks_like_soap(body) {
        return Err(not_soap(body, status, content_type, url));
    }
    match crate::xml::soap::decode_response::<R>(body) {
        Ok(response) => Ok(response),
        Err(SoapError::Fault(fault)) => {
            let type_name = fault_type_name(body);
            Err(Error::from_fault(Fault::new(
                fault.faultcode,
                fault.faultstring,
                type_name,
                fault.detail,
            )))
        }
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

fn not_soap(body: &[u8], status: StatusCode, content_type: Option<&str>, url: &str) -> Error {
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

/// The fault's vim25 type, read from the first element inside `detail`:
/// its `xsi:type` when present, else its name without the `Fault` suffix
/// (`<InvalidLoginFault xsi:type="InvalidLogin">`). Reading it from the
/// body keeps the name of fault types newer than the generated code.
pub(crate) fn fault_type_name(body: &[u8]) -> Option<String> {
    let text = String::from_utf8_lossy(body);
    let detail_start = find_start_tag(&text, "detail")?;
    let after = &text[detail_start..];
    let open = after.find('<')?;
    let tag_text = &after[open + 1..];
    let end = tag_text.find('>')?;
    let tag = &tag_text[..end];
    if tag.starts_with('/') {
        return None; // empty detail
    }
    let element = tag.trim_end_matches('/').split_whitespace().next()?;
    if let Some(xsi_type) = attribute(tag, "type") {
        let local = xsi_type.rsplit(':').next().unwrap_or(xsi_type);
        if !local.is_empty() {
            return Some(local.to_owned());
        }
    }
    let local = element.rsplit(':').next().unwrap_or(element);
    let name = local.strip_suffix("Fault").unwrap_or(local);
    (!name.is_empty()).then(|| name.to_owned())
}

/// Byte offset just past the start tag of the first element named `local`
/// (any prefix).
fn find_start_tag(text: &str, local: &str) -> Option<usize> {
    let mut offset = 0;
    while let Some(pos) = text[offset..].find('<') {
        let start = offset + pos + 1;
        let end = start + text[start..].find('>')?;
        let tag = &text[start..end];
        let name = tag.split_whitespace().next().unwrap_or("");
        if name.rsplit(':').next() == Some(local) && !tag.starts_with('/') {
            return Some(end + 1);
        }
        offset = end + 1;
    }
    None
}

/// The value of the attribute whose local name is `local` (`xsi:type`,
/// `type`) in a start tag's text.
fn attribute<'a>(tag: &'a str, local: &str) -> Option<&'a str> {
    let mut rest = tag;
    while let Some(eq) = rest.find('=') {
        let name = rest[..eq].split_whitespace().last().unwrap_or("");
        let value_part = rest[eq + 1..].trim_start();
        let quote = value_part.chars().next()?;
        if quote != '"' && quote != '\'' {
            return None;
        }
        let value_end = value_part[1..].find(quote)?;
        let value = &value_part[1..1 + value_end];
        if name.rsplit(':').next() == Some(local) && name.contains(':') {
            return Some(value);
        }
        rest = &value_part[1 + value_end + 1..];
    }
    None
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
    fn fault_type_from_xsi_type_or_element_name() {
        let body = br#"<soapenv:Envelope><soapenv:Body><soapenv:Fault><faultcode>ServerFaultCode</faultcode><faultstring>x</faultstring><detail><InvalidLoginFault xmlns="urn:vim25" xsi:type="InvalidLogin"></InvalidLoginFault></detail></soapenv:Fault></soapenv:Body></soapenv:Envelope>"#;
        assert_eq!(fault_type_name(body).as_deref(), Some("InvalidLogin"));
        let body = br#"<Envelope><Body><Fault><detail><NotAuthenticatedFault xmlns="urn:vim25"/></detail></Fault></Body></Envelope>"#;
        assert_eq!(fault_type_name(body).as_deref(), Some("NotAuthenticated"));
        assert_eq!(fault_type_name(b"<Fault><detail></detail></Fault>"), None);
        assert_eq!(fault_type_name(b"<Fault/>"), None);
        for junk in ["<detail", "<detail><", "<detail><x a=", "<detail><x a='"] {
            let _ = fault_type_name(junk.as_bytes());
        }
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
