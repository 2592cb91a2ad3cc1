//! The REST decoders: a failed reply's body into a RestError (or an HTTP
//! status error), a successful one into the typed models. The first two bytes
//! pick the HTTP status and the content type.
#![no_main]

use libfuzzer_sys::fuzz_target;
use vsphere_client::rest::fuzzing::{decode_bodies, error_from_body};

const STATUSES: [u16; 8] = [400, 401, 403, 404, 409, 500, 503, 599];
const CONTENT_TYPES: [Option<&str>; 4] =
    [None, Some("application/json"), Some("text/html; charset=utf-8"), Some("application/JSON;charset=UTF-8")];

fuzz_target!(|data: &[u8]| {
    let Some(([status, content_type], body)) = data.split_first_chunk::<2>() else { return };
    let content_type = CONTENT_TYPES[usize::from(*content_type) % CONTENT_TYPES.len()];
    let error = error_from_body(STATUSES[usize::from(*status) % STATUSES.len()], content_type, body);
    let _ = error.to_string();
    let _ = error.rest_error().map(|e| e.messages().len());
    decode_bodies(content_type, body);
});
