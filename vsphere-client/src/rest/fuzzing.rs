//! Entry points for the fuzz targets in `fuzz/` (built only with
//! `--cfg fuzzing`, which cargo-fuzz sets; not API):
//! the body-to-value and body-to-error paths of the REST transport, which
//! are otherwise private.

use bytes::Bytes;
use http::StatusCode;

use super::transport::{decode_json, error_from_reply, Reply};
use super::{ApiFlavor, Category, Library, LibraryItem, SessionInfo, Tag};
use crate::Error;

fn reply(status: u16, content_type: Option<&str>, body: &[u8]) -> Reply {
    Reply {
        status: StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
        content_type: content_type.map(str::to_owned),
        body: Bytes::copy_from_slice(body),
    }
}

/// The error a failed reply turns into (vAPI error JSON in either shape, or
/// an HTTP status error with an excerpt of the body).
pub fn error_from_body(status: u16, content_type: Option<&str>, body: &[u8]) -> Error {
    error_from_reply("fuzz", &reply(status, content_type, body))
}

/// Decodes a successful reply's body into each of the typed REST models the
/// client reads, in both API flavors; returns how many decoded.
pub fn decode_bodies(content_type: Option<&str>, body: &[u8]) -> usize {
    let reply = reply(200, content_type, body);
    let mut decoded = 0;
    for flavor in [ApiFlavor::Api, ApiFlavor::Rest] {
        decoded += usize::from(decode_json::<Vec<String>>("fuzz", flavor, &reply).is_ok());
        decoded += usize::from(decode_json::<Option<String>>("fuzz", flavor, &reply).is_ok());
        decoded += usize::from(decode_json::<Category>("fuzz", flavor, &reply).is_ok());
        decoded += usize::from(decode_json::<Tag>("fuzz", flavor, &reply).is_ok());
        decoded += usize::from(decode_json::<Library>("fuzz", flavor, &reply).is_ok());
        decoded += usize::from(decode_json::<LibraryItem>("fuzz", flavor, &reply).is_ok());
        decoded += usize::from(decode_json::<SessionInfo>("fuzz", flavor, &reply).is_ok());
    }
    decoded
}
