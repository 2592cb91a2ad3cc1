//! The Automation API's session: `POST`/`GET`/`DELETE /api/session`, and
//! 401 for `/api` calls without a live session.

use std::sync::Arc;
use std::time::Instant;

use wiremock::{Match, Mock, Respond, ResponseTemplate};

use crate::server::{Answer, Latent, MockVCenter, Shared, BUILT_IN, SCENARIO};

/// The header carrying an Automation API session id.
pub const SESSION_HEADER: &str = "vmware-api-session-id";

fn json(status: u16, body: String) -> Answer {
    Answer::new(status, body, "application/json")
}

fn unauthenticated() -> Answer {
    json(
        401,
        r#"{"error_type":"UNAUTHENTICATED","messages":[{"args":[],"default_message":"Authentication required.","id":"com.vmware.vapi.endpoint.method.authentication.required"}]}"#
            .to_string(),
    )
}

fn session_id(request: &wiremock::Request) -> Option<&str> {
    request.headers.get(SESSION_HEADER)?.to_str().ok()
}

impl Shared {
    fn rest_session_valid(&self, id: &str) -> bool {
        self.state().rest_sessions.iter().any(|s| s == id)
            || (self.config.share_soap_session && self.soap_session_valid(id))
    }
}

fn is_session_path(request: &wiremock::Request) -> bool {
    request.url.path() == "/api/session"
}

/// An `/api` call without a live session (creating one excepted).
struct NoRestSession(Arc<Shared>);

impl Match for NoRestSession {
    fn matches(&self, request: &wiremock::Request) -> bool {
        if !request.url.path().starts_with("/api/") {
            return false;
        }
        if is_session_path(request) && request.method.as_str() == "POST" {
            return false;
        }
        session_id(request).is_none_or(|id| !self.0.rest_session_valid(id))
    }
}

struct Session(Arc<Shared>);

impl Respond for Session {
    fn respond(&self, request: &wiremock::Request) -> ResponseTemplate {
        let shared = &self.0;
        let received = Instant::now();
        let answer = match request.method.as_str() {
            "POST" => {
                let expected = format!(
                    "Basic {}",
                    base64(format!("{}:{}", shared.config.user, shared.config.password).as_bytes())
                );
                let given = request
                    .headers
                    .get("authorization")
                    .and_then(|v| v.to_str().ok());
                if given == Some(expected.as_str()) {
                    let id = shared.new_session_id("testkit-api-session");
                    let mut state = shared.state();
                    state.rest_sessions.push(id.clone());
                    state.rest_sessions_issued.push(id.clone());
                    drop(state);
                    json(201, format!("\"{id}\""))
                } else {
                    unauthenticated()
                }
            }
            "GET" => json(
                200,
                format!(
                    r#"{{"user":"{}","created_time":"2024-01-01T00:00:00.000Z","last_accessed_time":"2024-01-01T00:00:00.000Z"}}"#,
                    shared.config.user.replace('"', "\\\"")
                ),
            ),
            "DELETE" => {
                if let Some(id) = session_id(request) {
                    shared.state().rest_sessions.retain(|s| s != id);
                }
                Answer::empty(204)
            }
            _ => Answer::empty(405),
        };
        shared.send(request, received, answer)
    }
}

pub(crate) async fn mount_session(vc: &MockVCenter) {
    let shared = vc.shared();
    Mock::given(NoRestSession(shared.clone()))
        .respond_with(Latent(shared.clone(), unauthenticated()))
        .with_priority(SCENARIO)
        .mount(vc.server())
        .await;
    Mock::given(wiremock::matchers::path("/api/session"))
        .respond_with(Session(shared.clone()))
        .with_priority(BUILT_IN)
        .mount(vc.server())
        .await;
}

/// Standard base64 with padding (for the expected basic authorization).
fn base64(input: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(input.len().div_ceil(3) * 4);
    for chunk in input.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn base64_matches_the_rfc_4648_vectors() {
        for (input, expected) in [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ] {
            assert_eq!(super::base64(input.as_bytes()), expected);
        }
    }
}
