//! Sending one REST request and turning the reply into JSON or an error.
//!
//! The HTTP client is the SOAP client's (same TLS mode, CA bundle, proxy,
//! connect timeout, user agent); the per-attempt timeout, the call deadline
//! (every attempt and backoff), the watch on response bodies, the body size
//! limit and the retry policy are read from the same configuration, so both
//! sides behave alike: a retry starts only when its backoff and
//! [`MIN_ATTEMPT`] fit before the deadline.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::header::{HeaderValue, ACCEPT, AUTHORIZATION, CONTENT_TYPE};
use http::{Method, StatusCode};
use serde::de::DeserializeOwned;
use tower::retry::backoff::{Backoff, ExponentialBackoffMaker, MakeBackoff};
use tower::util::rng::HasherRng;

use crate::error::{Error, ErrorKind, TimeoutCause};
use crate::http_client::HttpClient;
use crate::redact::{redact_body, Secret};
use crate::rest::error::{
    parse_error_body, rest_error, LocalizableMessage, RestError, RestErrorType,
};
use crate::rest::{ApiFlavor, ApiUrl};
use crate::session::Credentials;
use crate::transport::{
    format_duration, note_maybe_run, read_limited, BodyProgress, Deadline, RetryConfig,
    MIN_ATTEMPT, WIRE_LOG_TARGET,
};

/// The session header of the Automation API.
pub(crate) const SESSION_HEADER: &str = "vmware-api-session-id";

/// Connection settings shared with the SOAP client.
#[derive(Clone)]
pub(crate) struct Transport {
    pub http: HttpClient,
    /// `https://host:port/`: the API paths go under it.
    pub base: http::Uri,
    /// One attempt's bound.
    pub call_timeout: Option<Duration>,
    /// The bound on a whole call, retries and backoff included (the SOAP
    /// handle's [`call_deadline`](crate::Client::call_deadline)).
    pub call_deadline: Option<Duration>,
    pub max_response_size: u64,
    pub body_progress: BodyProgress,
    pub retry: RetryConfig,
    pub limit: Option<Arc<tokio::sync::Semaphore>>,
    /// Values never to log (passwords).
    pub secrets: Arc<[Secret]>,
}

/// One request.
pub(crate) struct Call {
    /// What the call does, for spans and error messages (`create category`).
    pub operation: &'static str,
    /// What it acts on (a name, an id), for error messages:
    /// `create category "zone": ALREADY_EXISTS`.
    pub subject: Option<String>,
    pub method: Method,
    pub url: ApiUrl,
    pub body: Option<Bytes>,
    /// The content type of `body` (JSON unless uploading a file).
    pub content_type: &'static str,
    /// Whether repeating the call after it may have reached the server is safe.
    pub idempotent: bool,
    /// Basic authentication, for creating a session.
    pub basic_auth: Option<Credentials>,
    /// Whether the bodies may go to the wire log (not for file uploads, nor
    /// for the session creation reply, which is the session id).
    pub log_request_body: bool,
    pub log_response_body: bool,
}

impl Call {
    pub(crate) fn new(operation: &'static str, method: Method, url: ApiUrl) -> Call {
        Call {
            operation,
            subject: None,
            method,
            url,
            body: None,
            content_type: "application/json",
            idempotent: false,
            basic_auth: None,
            log_request_body: true,
            log_response_body: true,
        }
    }
}

impl Call {
    /// The operation and its subject, as errors name them
    /// (`create category "zone"`).
    pub(crate) fn label(&self) -> String {
        match &self.subject {
            Some(subject) => format!("{} {subject:?}", self.operation),
            None => self.operation.to_owned(),
        }
    }
}

/// A reply, body read in full (within the limit).
pub(crate) struct Reply {
    pub status: StatusCode,
    pub content_type: Option<String>,
    pub body: Bytes,
}

impl Transport {
    /// Sends a call, repeating it with backoff when that is safe: always when
    /// the request cannot have reached the server, and for idempotent calls
    /// also after transport errors, timeouts and HTTP 502/503/504.
    /// The call ends within the transport's call deadline.
    pub(crate) async fn send(&self, call: &Call, session: Option<&Secret>) -> Result<Reply, Error> {
        self.send_within(call, session, self.deadline()).await
    }

    /// A deadline for a call starting now.
    pub(crate) fn deadline(&self) -> Option<Deadline> {
        self.call_deadline.map(Deadline::after)
    }

    /// [`send`](Self::send) with a deadline fixed by the caller (shared by
    /// a call and its repetition after a re-login).
    pub(crate) async fn send_within(
        &self,
        call: &Call,
        session: Option<&Secret>,
        deadline: Option<Deadline>,
    ) -> Result<Reply, Error> {
        let mut retries_left = self.retry.max_retries;
        let max = self.retry.max_backoff.max(self.retry.initial_backoff);
        let mut backoff = ExponentialBackoffMaker::new(
            self.retry.initial_backoff,
            max,
            0.5,
            HasherRng::default(),
        )
        .map_err(|e| Error::invalid_config("invalid retry backoff").with_source(e))?
        .make_backoff();
        loop {
            let mut result = self.bounded_attempt(call, session, deadline).await;
            let retry = match &result {
                Ok(reply) => {
                    call.idempotent
                        && matches!(
                            reply.status,
                            StatusCode::BAD_GATEWAY
                                | StatusCode::SERVICE_UNAVAILABLE
                                | StatusCode::GATEWAY_TIMEOUT
                        )
                }
                // The call is over: nothing to retry in.
                Err(err) if err.timeout_cause() == Some(TimeoutCause::CallDeadline) => false,
                Err(err) => {
                    err.request_not_sent()
                        || (call.idempotent
                            && matches!(err.kind(), ErrorKind::Transport | ErrorKind::Timeout))
                }
            };
            if !retry || retries_left == 0 {
                return result;
            }
            let why = match &result {
                Ok(reply) => format!("HTTP {}", reply.status.as_u16()),
                Err(err) => err.to_string(),
            };
            let pause = backoff.next_backoff();
            if let Some(deadline) = deadline {
                if pause.deadline() + MIN_ATTEMPT > deadline.at {
                    tracing::debug!(
                        operation = call.operation,
                        "not retrying after {why}: no room for another attempt before the call deadline"
                    );
                    if let Err(err) = result {
                        result = Err(err.with_note(&format!(
                            "not tried again: no room for another attempt before the call deadline ({})",
                            format_duration(deadline.bound)
                        )));
                    }
                    return result;
                }
            }
            retries_left -= 1;
            tracing::debug!(
                operation = call.operation,
                retries_left,
                "retrying after {why}"
            );
            pause.await;
        }
    }

    /// One attempt, ended by the earlier of the per-attempt timeout and the
    /// call's deadline (the wait for a concurrency permit included).
    async fn bounded_attempt(
        &self,
        call: &Call,
        session: Option<&Secret>,
        deadline: Option<Deadline>,
    ) -> Result<Reply, Error> {
        let started = tokio::time::Instant::now();
        if let Some(d) = deadline.filter(|d| d.at <= started) {
            return Err(d.error(None));
        }
        let attempt_end = self.call_timeout.map(|limit| started + limit);
        let (end, by_deadline) = match (attempt_end, deadline) {
            (Some(a), Some(d)) if d.at < a => (Some(d.at), true),
            (Some(a), _) => (Some(a), false),
            (None, Some(d)) => (Some(d.at), true),
            (None, None) => (None, false),
        };
        let result = match end {
            None => self.attempt(call, session).await,
            Some(end) => match tokio::time::timeout_at(end, self.attempt(call, session)).await {
                Ok(result) => result,
                Err(_elapsed) => Err(match deadline {
                    Some(d) if by_deadline => d.error(Some(&call.url.to_string())),
                    _ => Error::timeout(
                        TimeoutCause::AttemptTimeout,
                        format!(
                            "no complete answer from {} within the call timeout ({})",
                            call.url,
                            format_duration(self.call_timeout.unwrap_or_default())
                        ),
                    ),
                }),
            },
        };
        result.map_err(|err| note_maybe_run(err, call.idempotent))
    }

    async fn attempt(&self, call: &Call, session: Option<&Secret>) -> Result<Reply, Error> {
        let _permit =
            match &self.limit {
                Some(limit) => Some(limit.clone().acquire_owned().await.map_err(|_| {
                    Error::new(ErrorKind::Transport, "the client is shutting down")
                })?),
                None => None,
            };
        let url = &*call.url.to_string();
        let wire = tracing::enabled!(target: WIRE_LOG_TARGET, tracing::Level::TRACE);
        if wire {
            let body = match (&call.body, call.log_request_body) {
                (None, _) => String::new(),
                (Some(body), true) => self.redacted(body, session),
                (Some(body), false) => format!("<{} bytes not logged>", body.len()),
            };
            tracing::trace!(target: WIRE_LOG_TARGET, method = %call.method, url, "request: {body}");
        }
        let uri: http::Uri = url.parse().map_err(|e| {
            Error::new(
                ErrorKind::InvalidArgument,
                format!("{url} is not a valid HTTP URI"),
            )
            .with_source(e)
        })?;
        let mut request = http::Request::builder()
            .method(call.method.clone())
            .uri(uri)
            .header(ACCEPT, "application/json");
        if let Some(id) = session {
            let mut value = HeaderValue::from_str(id.expose()).map_err(|_| {
                Error::new(
                    ErrorKind::InvalidConfig,
                    "the REST session id is not a valid header value",
                )
            })?;
            value.set_sensitive(true);
            request = request.header(SESSION_HEADER, value);
        }
        if let Some(credentials) = &call.basic_auth {
            // Keeps the server from also setting a session cookie.
            request = request
                .header(AUTHORIZATION, basic_auth(credentials)?)
                .header("vmware-use-header-authn", "true");
        }
        if call.body.is_some() {
            request = request.header(CONTENT_TYPE, call.content_type);
        }
        let request = request
            .body(call.body.clone().unwrap_or_default())
            .map_err(|e| {
                Error::new(ErrorKind::InvalidConfig, "cannot build the HTTP request").with_source(e)
            })?;
        let response = self.http.send(request).await?;
        let status = response.status;
        let content_type = response
            .headers
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let body = read_limited(
            response,
            Default::default(),
            self.max_response_size,
            url,
            &self.body_progress,
        )
        .await?;
        if wire {
            let text = if call.log_response_body {
                self.redacted(&body, session)
            } else {
                format!("<{} bytes not logged>", body.len())
            };
            tracing::trace!(target: WIRE_LOG_TARGET, status = status.as_u16(), url, "response: {text}");
        }
        Ok(Reply {
            status,
            content_type,
            body,
        })
    }

    fn redacted(&self, body: &[u8], session: Option<&Secret>) -> String {
        let mut secrets: Vec<&Secret> = self.secrets.iter().collect();
        secrets.extend(session);
        redact_body(body, &secrets)
    }
}

/// `Authorization: Basic ...` for these credentials, marked sensitive (kept
/// out of debug output).
fn basic_auth(credentials: &Credentials) -> Result<HeaderValue, Error> {
    let pair = format!("{}:{}", credentials.username, credentials.password.expose());
    let mut value = HeaderValue::from_str(&format!(
        "Basic {}",
        crate::xml::primitives::base64_encode(pair.as_bytes())
    ))
    .map_err(|_| Error::invalid_config("the user name is not a valid header value"))?;
    value.set_sensitive(true);
    Ok(value)
}

/// A successful reply as is; any other status as the crate error: a vAPI
/// error when the body is one, else by status (401, 403 and 404 have a vAPI
/// meaning of their own), else `HttpStatus` with an excerpt of the body.
pub(crate) fn check_status(operation: &str, reply: Reply) -> Result<Reply, Error> {
    if reply.status.is_success() {
        return Ok(reply);
    }
    Err(error_from_reply(operation, &reply))
}

pub(crate) fn error_from_reply(operation: &str, reply: &Reply) -> Error {
    let status = reply.status.as_u16();
    if let Some(error) = parse_error_body(&reply.body, status) {
        return rest_error(operation, error);
    }
    let excerpt = excerpt(&reply.body, 160);
    let status_line = match reply.status.canonical_reason() {
        Some(reason) => format!("HTTP {status} {reason}"),
        None => format!("HTTP {status}"),
    };
    let described = if excerpt.is_empty() {
        status_line
    } else {
        format!("{status_line}: {excerpt}")
    };
    match RestErrorType::from_status(status) {
        Some(error_type) => {
            let message = LocalizableMessage {
                default_message: described,
                ..Default::default()
            };
            rest_error(operation, RestError::new(error_type, vec![message], status))
        }
        None => Error::new(
            ErrorKind::HttpStatus(status),
            format!("{operation}: {described}"),
        ),
    }
}

/// Decodes a successful reply's JSON into `T`, unwrapping `/rest`'s
/// `{"value": ...}`. An empty body (204, or a `/rest` reply without value)
/// decodes as JSON `null`.
pub(crate) fn decode_json<T: DeserializeOwned>(
    operation: &str,
    flavor: ApiFlavor,
    reply: &Reply,
) -> Result<T, Error> {
    let text = reply.body.as_ref();
    let value = if text.iter().all(u8::is_ascii_whitespace) {
        serde_json::Value::Null
    } else {
        match serde_json::from_slice::<serde_json::Value>(text) {
            Ok(value) => value,
            Err(e) => {
                let declared_json = reply
                    .content_type
                    .as_deref()
                    .is_some_and(|ct| ct.to_ascii_lowercase().contains("json"));
                let (kind, what) = if declared_json {
                    (ErrorKind::Decode, "malformed JSON".to_owned())
                } else {
                    let ct = reply.content_type.as_deref().unwrap_or("no content type");
                    (
                        ErrorKind::NotJson,
                        format!("not JSON ({})", ct.split(';').next().unwrap_or(ct).trim()),
                    )
                };
                let excerpt = excerpt(text, 160);
                let tail = if excerpt.is_empty() {
                    String::new()
                } else {
                    format!(": {excerpt}")
                };
                return Err(Error::new(
                    kind,
                    format!(
                        "{operation}: the server answered HTTP {} but {what}{tail}",
                        reply.status.as_u16()
                    ),
                )
                .with_source(e));
            }
        }
    };
    let value = match (flavor, value) {
        (ApiFlavor::Rest, serde_json::Value::Object(mut fields)) => {
            fields.remove("value").unwrap_or(serde_json::Value::Null)
        }
        (_, value) => value,
    };
    serde_json::from_value(value).map_err(|e| {
        Error::new(
            ErrorKind::Decode,
            format!("{operation}: unexpected JSON in the response"),
        )
        .with_source(e)
    })
}

/// A short, single-line, tag-free excerpt of a body for error messages.
pub(crate) fn excerpt(body: &[u8], max_chars: usize) -> String {
    let text = String::from_utf8_lossy(&body[..body.len().min(16 * 1024)]);
    let mut out = String::new();
    let mut in_tag = false;
    let mut last_space = true;
    for c in text.chars() {
        let space = match c {
            '<' => {
                in_tag = true;
                continue;
            }
            '>' if in_tag => {
                in_tag = false;
                true
            }
            _ if in_tag => continue,
            c => c.is_whitespace() || c.is_control(),
        };
        if space {
            if !last_space {
                out.push(' ');
                last_space = true;
            }
            continue;
        }
        if out.chars().count() >= max_chars {
            out.push('…');
            break;
        }
        out.push(c);
        last_space = false;
    }
    out.trim().to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reply(status: u16, content_type: Option<&str>, body: &str) -> Reply {
        Reply {
            status: StatusCode::from_u16(status).unwrap(),
            content_type: content_type.map(str::to_owned),
            body: Bytes::from(body.to_owned()),
        }
    }

    #[test]
    fn basic_auth_is_encoded_and_sensitive() {
        let credentials = Credentials {
            username: "administrator@vsphere.local".into(),
            password: Secret::new("p:ss"),
        };
        let value = basic_auth(&credentials).unwrap();
        // base64("administrator@vsphere.local:p:ss")
        assert_eq!(
            value.to_str().unwrap(),
            "Basic YWRtaW5pc3RyYXRvckB2c3BoZXJlLmxvY2FsOnA6c3M="
        );
        assert!(value.is_sensitive());
    }

    #[test]
    fn rest_values_are_unwrapped_and_api_bodies_are_not() {
        let r = reply(200, Some("application/json"), r#"{"value":["a","b"]}"#);
        let ids: Vec<String> = decode_json("list", ApiFlavor::Rest, &r).unwrap();
        assert_eq!(ids, ["a", "b"]);
        let r = reply(200, Some("application/json"), r#"["a"]"#);
        let ids: Vec<String> = decode_json("list", ApiFlavor::Api, &r).unwrap();
        assert_eq!(ids, ["a"]);
        let r = reply(204, None, "");
        let none: Option<Vec<String>> = decode_json("list", ApiFlavor::Api, &r).unwrap();
        assert!(none.is_none());
        let r = reply(200, Some("application/json"), "{}");
        let none: Option<String> = decode_json("x", ApiFlavor::Rest, &r).unwrap();
        assert!(none.is_none());
    }

    #[test]
    fn html_is_not_json_and_bad_json_is_a_decode_error() {
        let r = reply(
            200,
            Some("text/html; charset=utf-8"),
            "<html><body><h1>Service Unavailable</h1></body></html>",
        );
        let err = decode_json::<Vec<String>>("list categories", ApiFlavor::Api, &r).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::NotJson);
        assert!(err.to_string().contains("not JSON (text/html)"), "{err}");
        assert!(err.to_string().contains("Service Unavailable"), "{err}");
        let r = reply(200, Some("application/json"), r#"{"value": ["a""#);
        assert_eq!(
            decode_json::<Vec<String>>("x", ApiFlavor::Rest, &r)
                .unwrap_err()
                .kind(),
            ErrorKind::Decode
        );
        let r = reply(200, Some("application/json"), r#"{"value": 3}"#);
        assert_eq!(
            decode_json::<Vec<String>>("x", ApiFlavor::Rest, &r)
                .unwrap_err()
                .kind(),
            ErrorKind::Decode
        );
    }

    #[test]
    fn statuses_without_vapi_bodies() {
        let err = error_from_reply(
            "get tag",
            &reply(404, Some("text/plain"), "404 page not found\n"),
        );
        assert_eq!(err.kind(), ErrorKind::Rest);
        let rest = err.rest_error().unwrap();
        assert_eq!(*rest.error_type(), RestErrorType::NotFound);
        assert!(err.to_string().contains("404 page not found"), "{err}");
        let err = error_from_reply("list tags", &reply(401, None, ""));
        assert!(err.is_rest_error(&RestErrorType::Unauthenticated));
        let err = error_from_reply("list tags", &reply(500, Some("text/html"), "<h1>oops</h1>"));
        assert_eq!(err.kind(), ErrorKind::HttpStatus(500));
        assert_eq!(
            err.to_string(),
            "list tags: HTTP 500 Internal Server Error: oops"
        );
    }

    #[test]
    fn excerpts_are_short_and_single_line() {
        assert_eq!(excerpt(b"<p>a\n\n b</p>", 10), "a b");
        let long = "x".repeat(500);
        assert_eq!(excerpt(long.as_bytes(), 5), "xxxxx…");
    }
}
