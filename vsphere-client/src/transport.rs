//! The HTTP transport as a tower stack.
//!
//! ```text
//! [ConcurrencyLimit] -> Retry(RetryPolicy) -> MapErr -> Timeout -> HttpService (hyper, src/http_client.rs)
//! ```
//!
//! `HttpService` posts one SOAP body and reads the reply with a size limit
//! and a watch on the body's progress ([`BodyProgress`]); each attempt is
//! bounded by the per-attempt timeout and by the call's deadline; the retry
//! policy repeats an attempt only when that cannot run an operation twice,
//! and only when another attempt fits before the deadline (see
//! [`RetryPolicy`]). [`send`] bounds the whole call, the wait for a
//! concurrency permit included, by the deadline.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use http::header::{HeaderValue, CONTENT_TYPE, COOKIE, SET_COOKIE};
use http::StatusCode;
use tower::retry::backoff::{Backoff, ExponentialBackoff, ExponentialBackoffMaker, MakeBackoff};
use tower::util::rng::HasherRng;
use tower::util::BoxCloneSyncService;
use tower::{Service, ServiceBuilder, ServiceExt};

use crate::error::{Error, ErrorKind, TimeoutCause};
use crate::http_client::{HttpClient, Response};
use crate::redact::{redact_body, Secret};

/// The tracing target of the wire log (request and response bodies, at
/// trace level, with passwords and the session cookie redacted).
pub const WIRE_LOG_TARGET: &str = "vsphere_client::wire";

/// Longest body shown in one wire-log event; the rest is summarised.
const WIRE_LOG_MAX_BODY: usize = 1 << 20;

/// A body for the wire log: redacted first, then cut (cutting first could
/// leave half a secret outside the redaction's reach).
fn wire_log_body(body: &[u8], secrets: &[&Secret]) -> String {
    let mut text = redact_body(body, secrets);
    if text.len() > WIRE_LOG_MAX_BODY {
        let mut cut = WIRE_LOG_MAX_BODY;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        let total = text.len();
        text.truncate(cut);
        text.push_str(&format!("... ({total} bytes in all)"));
    }
    text
}

/// Name of vSphere's SOAP session cookie.
pub(crate) const SESSION_COOKIE: &str = "vmware_soap_session";

/// One SOAP POST.
#[derive(Clone)]
pub(crate) struct SoapCall {
    /// The operation name, for logs and errors.
    pub method: &'static str,
    /// `urn:vim25/<version>`.
    pub soap_action: Arc<str>,
    /// The whole envelope.
    pub body: Bytes,
    /// The session cookie value to send, if any.
    pub cookie: Option<Secret>,
    /// Whether the operation is safe to repeat after it may have reached
    /// the server.
    pub idempotent: bool,
    /// Other values to keep out of the wire log (the password).
    pub secrets: Arc<[Secret]>,
    /// This call's per-attempt timeout, instead of the client's.
    pub timeout: Option<Duration>,
    /// When the whole call (every attempt and backoff) must be over.
    pub deadline: Option<Deadline>,
}

/// The end of a call: the instant, and the bound it came from (for errors).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Deadline {
    pub at: tokio::time::Instant,
    pub bound: Duration,
}

impl Deadline {
    /// A deadline `bound` from now.
    pub(crate) fn after(bound: Duration) -> Deadline {
        Deadline {
            at: tokio::time::Instant::now() + bound,
            bound,
        }
    }

    /// The error of a call whose deadline passed, waiting for `url` (or
    /// before it could be sent).
    pub(crate) fn error(&self, url: Option<&str>) -> Error {
        let bound = format_duration(self.bound);
        Error::timeout(
            TimeoutCause::CallDeadline,
            match url {
                Some(url) => format!("the call deadline ({bound}) passed before {url} answered"),
                None => format!("the call deadline ({bound}) passed"),
            },
        )
    }
}

/// The shortest attempt a retry must have room for before the deadline
/// (after its backoff): a retry that would be cut at once is not started.
pub const MIN_ATTEMPT: Duration = Duration::from_secs(1);

/// A duration as a person writes it: `10m`, `30s`, `1.5s`, `400ms`.
pub(crate) fn format_duration(d: Duration) -> String {
    let ms = d.as_millis();
    if ms == 0 && !d.is_zero() {
        return format!("{}us", d.as_micros());
    }
    if ms % 1000 != 0 {
        return if ms < 1000 {
            format!("{ms}ms")
        } else {
            format!("{}s", d.as_secs_f64())
        };
    }
    let secs = d.as_secs();
    if secs >= 3600 && secs % 3600 == 0 {
        format!("{}h", secs / 3600)
    } else if secs >= 60 && secs % 60 == 0 {
        format!("{}m", secs / 60)
    } else {
        format!("{secs}s")
    }
}

/// How a response body must keep coming once the headers are in: a body
/// that stops (no byte for `idle`) or trickles (fewer than
/// `min_bytes_per_second` over a `window`) fails the attempt with
/// [`ErrorKind::Timeout`] and the cause named. A body that is complete
/// within one window is never measured, however small.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct BodyProgress {
    pub idle: Option<Duration>,
    pub min_bytes_per_second: u64,
    pub window: Duration,
}

impl BodyProgress {
    fn measures_rate(&self) -> bool {
        self.min_bytes_per_second > 0 && !self.window.is_zero()
    }
}

/// The server's answer, body read in full (within the limit).
#[derive(Clone)]
pub(crate) struct SoapReply {
    pub status: StatusCode,
    pub content_type: Option<String>,
    /// A new session cookie the server set, if any.
    pub new_cookie: Option<Secret>,
    pub body: Bytes,
}

/// Retry settings.
#[derive(Debug, Clone)]
pub struct RetryConfig {
    /// How many times a call may be repeated after its first attempt.
    pub max_retries: u32,
    /// The first backoff delay; it doubles on each retry.
    pub initial_backoff: Duration,
    /// The cap on a backoff delay.
    pub max_backoff: Duration,
}

impl Default for RetryConfig {
    fn default() -> Self {
        RetryConfig {
            max_retries: 3,
            initial_backoff: Duration::from_millis(250),
            max_backoff: Duration::from_secs(10),
        }
    }
}

impl RetryConfig {
    /// No retry at all.
    pub fn none() -> Self {
        RetryConfig {
            max_retries: 0,
            ..RetryConfig::default()
        }
    }
}

/// Settings of the stack, from the builder.
pub(crate) struct TransportConfig {
    pub url: http::Uri,
    pub call_timeout: Option<Duration>,
    /// The bound on a whole call, retries and backoff included.
    pub call_deadline: Option<Duration>,
    /// The watch on response bodies.
    pub body_progress: BodyProgress,
    pub max_response_size: u64,
    pub retry: RetryConfig,
    pub concurrency_limit: Option<usize>,
    /// Response buffers reused from call to call.
    pub body_buffers: Arc<BodyBuffers>,
}

pub(crate) type SoapService = BoxCloneSyncService<SoapCall, SoapReply, Error>;

/// Assembles the tower stack around the HTTP client.
pub(crate) fn build_stack(
    http: HttpClient,
    config: &TransportConfig,
) -> Result<SoapService, Error> {
    // The per-attempt timeout is applied by HttpService itself, inside the
    // retry: a hung attempt of a safe call can be retried, and the bound on
    // attempts bounds the total. (In the service rather than a tower
    // timeout layer, so that one call can bring its own.)
    let base = HttpService {
        http,
        url: config.url.to_string().into(),
        uri: config.url.clone(),
        max_response_size: config.max_response_size,
        default_timeout: config.call_timeout,
        body_progress: config.body_progress,
        body_buffers: config.body_buffers.clone(),
    };
    let policy = RetryPolicy::new(&config.retry)?;
    let stack = ServiceBuilder::new()
        .option_layer(
            config
                .concurrency_limit
                .map(tower::limit::ConcurrencyLimitLayer::new),
        )
        .layer(tower::retry::RetryLayer::new(policy))
        .service(base);
    Ok(BoxCloneSyncService::new(stack))
}

/// Decides which failed attempts to repeat.
///
/// - The request cannot have reached the server (connection refused, DNS):
///   always retried, whatever the operation.
/// - Any other transport error, a timeout, or HTTP 502/503/504: retried only
///   for idempotent operations, since the server may have started the work.
/// - Everything else (faults, TLS, decoding, 500): never retried here.
///
/// A retry starts only when its backoff and [`MIN_ATTEMPT`] fit before the
/// call's deadline; otherwise the last attempt's error is the call's, saying
/// so.
#[derive(Clone)]
pub(crate) struct RetryPolicy {
    retries_left: u32,
    backoff: ExponentialBackoff<HasherRng>,
}

impl RetryPolicy {
    fn new(config: &RetryConfig) -> Result<Self, Error> {
        let max = config.max_backoff.max(config.initial_backoff);
        let maker =
            ExponentialBackoffMaker::new(config.initial_backoff, max, 0.5, HasherRng::default())
                .map_err(|e| Error::invalid_config("invalid retry backoff").with_source(e))?;
        let mut maker = maker;
        Ok(RetryPolicy {
            retries_left: config.max_retries,
            backoff: maker.make_backoff(),
        })
    }
}

impl tower::retry::Policy<SoapCall, SoapReply, Error> for RetryPolicy {
    type Future = tokio::time::Sleep;

    fn retry(
        &mut self,
        req: &mut SoapCall,
        result: &mut Result<SoapReply, Error>,
    ) -> Option<Self::Future> {
        if self.retries_left == 0 {
            return None;
        }
        let retry = match result {
            Ok(reply) => {
                req.idempotent
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
                    || (req.idempotent
                        && matches!(err.kind(), ErrorKind::Transport | ErrorKind::Timeout))
            }
        };
        if !retry {
            return None;
        }
        let why = match result {
            Ok(reply) => format!("HTTP {}", reply.status.as_u16()),
            Err(err) => err.to_string(),
        };
        let backoff = self.backoff.next_backoff();
        if let Some(deadline) = req.deadline {
            if backoff.deadline() + MIN_ATTEMPT > deadline.at {
                tracing::debug!(
                    method = req.method,
                    "not retrying after {why}: no room for another attempt before the call deadline"
                );
                if let Err(err) = result {
                    let taken = std::mem::replace(err, Error::new(ErrorKind::Timeout, ""));
                    *err = taken.with_note(&format!(
                        "not tried again: no room for another attempt before the call deadline ({})",
                        format_duration(deadline.bound)
                    ));
                }
                return None;
            }
        }
        self.retries_left -= 1;
        tracing::debug!(
            method = req.method,
            retries_left = self.retries_left,
            "retrying after {why}"
        );
        Some(backoff)
    }

    fn clone_request(&mut self, req: &SoapCall) -> Option<SoapCall> {
        Some(req.clone())
    }
}

/// Posts a SOAP envelope and reads the reply.
#[derive(Clone)]
pub(crate) struct HttpService {
    http: HttpClient,
    /// `uri` as text, for errors.
    url: Arc<str>,
    uri: http::Uri,
    max_response_size: u64,
    /// Per-attempt timeout of calls that bring none.
    default_timeout: Option<Duration>,
    body_progress: BodyProgress,
    body_buffers: Arc<BodyBuffers>,
}

impl Service<SoapCall> for HttpService {
    type Response = SoapReply;
    type Error = Error;
    type Future = Pin<Box<dyn Future<Output = Result<SoapReply, Error>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, call: SoapCall) -> Self::Future {
        let this = self.clone();
        let limit = call.timeout.or(this.default_timeout);
        let idempotent = call.idempotent;
        let deadline = call.deadline;
        Box::pin(async move {
            let started = tokio::time::Instant::now();
            // Whichever ends first: this attempt's timeout or the call's deadline.
            let attempt_end = limit.map(|limit| started + limit);
            let (end, by_deadline) = match (attempt_end, deadline) {
                (Some(a), Some(d)) if d.at < a => (Some(d.at), true),
                (Some(a), _) => (Some(a), false),
                (None, Some(d)) => (Some(d.at), true),
                (None, None) => (None, false),
            };
            if let Some(d) = deadline.filter(|d| d.at <= started) {
                // Nothing sent: no note about the server having run it.
                return Err(d.error(None));
            }
            let result = match end {
                None => this.post(call).await,
                Some(end) => match tokio::time::timeout_at(end, this.post(call)).await {
                    Ok(result) => result,
                    Err(_elapsed) => Err(match deadline {
                        Some(d) if by_deadline => d.error(Some(&this.url)),
                        _ => Error::timeout(
                            TimeoutCause::AttemptTimeout,
                            format!(
                                "no complete answer from {} within the call timeout ({})",
                                this.url,
                                format_duration(limit.unwrap_or_default())
                            ),
                        ),
                    }),
                },
            };
            result.map_err(|err| note_maybe_run(err, idempotent))
        })
    }
}

/// An unsafe call's transport error or timeout after the request may have
/// reached the server says so: the caller must know before trying again
/// (another clone, another power-on...).
pub(crate) fn note_maybe_run(err: Error, idempotent: bool) -> Error {
    if !idempotent
        && matches!(err.kind(), ErrorKind::Transport | ErrorKind::Timeout)
        && !err.request_not_sent()
    {
        err.with_note(
            "the request may have reached the server, which may have run it: not repeated",
        )
    } else {
        err
    }
}

impl HttpService {
    async fn post(&self, call: SoapCall) -> Result<SoapReply, Error> {
        let url = &*self.url;
        if tracing::enabled!(target: WIRE_LOG_TARGET, tracing::Level::TRACE) {
            let mut secrets: Vec<&Secret> = call.secrets.iter().collect();
            secrets.extend(call.cookie.as_ref());
            tracing::trace!(
                target: WIRE_LOG_TARGET,
                "request: {}",
                wire_log_body(&call.body, &secrets)
            );
        }
        let mut request = http::Request::post(self.uri.clone())
            .header(CONTENT_TYPE, "text/xml; charset=utf-8")
            .header("SOAPAction", &*call.soap_action);
        if let Some(cookie) = &call.cookie {
            let mut value = HeaderValue::from_str(&format!("{SESSION_COOKIE}={}", cookie.expose()))
                .map_err(|_| {
                    Error::new(
                        ErrorKind::InvalidConfig,
                        "the session cookie is not a valid header value",
                    )
                })?;
            // Keeps the value out of hyper's own debug output.
            value.set_sensitive(true);
            request = request.header(COOKIE, value);
        }
        let request = request.body(call.body.clone()).map_err(|e| {
            Error::new(ErrorKind::InvalidConfig, "cannot build the HTTP request").with_source(e)
        })?;
        let response = self.http.send(request).await?;
        let status = response.status;
        tracing::Span::current().record("http.status", status.as_u16());
        let content_type = response
            .headers
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let new_cookie = response
            .headers
            .get_all(SET_COOKIE)
            .iter()
            .find_map(|v| v.to_str().ok().and_then(parse_session_cookie));
        let buffer = self.body_buffers.take();
        let body = read_limited(
            response,
            buffer,
            self.max_response_size,
            url,
            &self.body_progress,
        )
        .await?;
        if tracing::enabled!(target: WIRE_LOG_TARGET, tracing::Level::TRACE) {
            let mut secrets: Vec<&Secret> = call.secrets.iter().collect();
            secrets.extend(call.cookie.as_ref());
            secrets.extend(new_cookie.as_ref());
            tracing::trace!(
                target: WIRE_LOG_TARGET,
                status = status.as_u16(),
                "response: {}",
                wire_log_body(&body, &secrets)
            );
        }
        Ok(SoapReply {
            status,
            content_type,
            new_cookie,
            body,
        })
    }
}

/// Response body buffers kept from one call for the next.
///
/// A paged retrieval reads one large body after another (about 700 KB per
/// 100 VMs with their devices). Grown afresh for each, a body buffer went
/// through every doubling up to 1 MB, and the allocator's heap ended up
/// fragmented by those transient blocks: `vsphere walk` over 1,000 VMs held
/// 6.3 MB of heap for 3.3 MB live. A buffer given back after decoding is
/// reused as it is.
#[derive(Default)]
pub(crate) struct BodyBuffers {
    free: std::sync::Mutex<Vec<BytesMut>>,
}

impl BodyBuffers {
    /// Buffers kept (concurrent calls beyond this allocate their own).
    const KEEP: usize = 2;
    /// A buffer grown past this (a rare huge response) is not kept.
    const KEEP_CAPACITY: usize = 8 << 20;

    /// A buffer to read a body into (empty, with whatever capacity it has).
    pub(crate) fn take(&self) -> BytesMut {
        self.free
            .lock()
            .ok()
            .and_then(|mut free| free.pop())
            .unwrap_or_default()
    }

    /// Gives a decoded body back, if nothing else holds it.
    pub(crate) fn give_back(&self, body: Bytes) {
        let Ok(mut buffer) = body.try_into_mut() else {
            return;
        };
        if buffer.capacity() > Self::KEEP_CAPACITY {
            return;
        }
        buffer.clear();
        if let Ok(mut free) = self.free.lock() {
            if free.len() < Self::KEEP {
                free.push(buffer);
            }
        }
    }
}

/// Reads a body chunk by chunk into `body` (emptied first), failing as soon
/// as it passes `limit`, so a huge or endless body never gets buffered, and
/// as soon as it stops or trickles (`progress`).
pub(crate) async fn read_limited(
    mut response: Response,
    mut body: BytesMut,
    limit: u64,
    url: &str,
    progress: &BodyProgress,
) -> Result<Bytes, Error> {
    let too_large = || {
        Error::new(
            ErrorKind::BodyTooLarge,
            format!("the response from {url} is larger than the {limit}-byte limit"),
        )
    };
    if response.content_length().is_some_and(|len| len > limit) {
        return Err(too_large());
    }
    let initial = response
        .content_length()
        .unwrap_or(0)
        .min(limit)
        .min(1 << 20);
    body.clear();
    body.reserve(initial as usize);
    let mut window_start = tokio::time::Instant::now();
    let mut window_bytes = 0u64;
    loop {
        let now = tokio::time::Instant::now();
        let window_end = progress
            .measures_rate()
            .then(|| window_start + progress.window);
        if let Some(end) = window_end.filter(|end| now >= *end) {
            let least =
                (progress.min_bytes_per_second as f64 * progress.window.as_secs_f64()) as u64;
            if window_bytes < least {
                return Err(Error::timeout(
                    TimeoutCause::BodyTooSlow,
                    format!(
                        "the response body from {url} came too slowly: {window_bytes} bytes in {}, \
                         under the minimum of {} bytes/s",
                        format_duration(progress.window),
                        progress.min_bytes_per_second
                    ),
                ));
            }
            window_start = end;
            window_bytes = 0;
            continue;
        }
        let idle_end = progress.idle.map(|idle| now + idle);
        let wake = match (idle_end, window_end) {
            (Some(i), Some(w)) => Some(i.min(w)),
            (i, w) => i.or(w),
        };
        let next = match wake {
            None => response.chunk(limit).await,
            // `chunk` only polls the body: dropping it when the timer wins
            // loses nothing.
            Some(wake) => match tokio::time::timeout_at(wake, response.chunk(limit)).await {
                Ok(next) => next,
                Err(_elapsed) if Some(wake) == idle_end => {
                    return Err(Error::timeout(
                        TimeoutCause::BodyIdle,
                        format!(
                            "the response body from {url} stopped: no data for {} (after {} bytes)",
                            format_duration(progress.idle.unwrap_or_default()),
                            body.len()
                        ),
                    ));
                }
                // The window ended: measured at the top of the loop.
                Err(_elapsed) => continue,
            },
        };
        let Some(chunk) = next? else {
            break;
        };
        if (body.len() + chunk.len()) as u64 > limit {
            return Err(too_large());
        }
        window_bytes += chunk.len() as u64;
        body.extend_from_slice(&chunk);
    }
    Ok(body.freeze())
}

/// The value of `vmware_soap_session` in a `Set-Cookie` header, as sent
/// (vCenter quotes it; it goes back the same way).
fn parse_session_cookie(header: &str) -> Option<Secret> {
    let pair = header.split(';').next()?.trim();
    let (name, value) = pair.split_once('=')?;
    (name.trim() == SESSION_COOKIE && !value.is_empty()).then(|| Secret::new(value.trim()))
}

/// Sends a call through the stack, within its deadline (which also bounds
/// the wait for a concurrency permit).
pub(crate) async fn send(service: &SoapService, call: SoapCall) -> Result<SoapReply, Error> {
    let Some(deadline) = call.deadline else {
        return service.clone().oneshot(call).await;
    };
    match tokio::time::timeout_at(deadline.at, service.clone().oneshot(call)).await {
        Ok(result) => result,
        Err(_elapsed) => Err(deadline.error(None)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_decoded_body_buffer_is_reused_by_the_next_call() {
        let buffers = BodyBuffers::default();
        let mut first = buffers.take();
        first.extend_from_slice(&[b'x'; 700_000]);
        let capacity = first.capacity();
        buffers.give_back(first.freeze());
        let again = buffers.take();
        assert!(again.is_empty());
        assert_eq!(again.capacity(), capacity, "the same buffer, not a new one");
        // It was the only one kept: the next call starts a new buffer.
        assert_eq!(buffers.take().capacity(), 0);
    }

    #[test]
    fn a_body_still_held_elsewhere_or_huge_is_not_kept() {
        let buffers = BodyBuffers::default();
        let mut held = BytesMut::new();
        held.extend_from_slice(b"<soap/>");
        let held = held.freeze();
        let other = held.clone();
        buffers.give_back(held);
        assert_eq!(buffers.take().capacity(), 0, "shared: not reused");
        assert_eq!(
            &other[..],
            b"<soap/>",
            "the other holder's bytes are intact"
        );

        let huge = BytesMut::with_capacity(BodyBuffers::KEEP_CAPACITY + 1);
        buffers.give_back(huge.freeze());
        assert_eq!(buffers.take().capacity(), 0, "huge: not kept");

        for _ in 0..=BodyBuffers::KEEP {
            buffers.give_back(BytesMut::with_capacity(64).freeze());
        }
        let kept = std::iter::from_fn(|| Some(buffers.take()))
            .take_while(|b| b.capacity() > 0)
            .count();
        assert_eq!(kept, BodyBuffers::KEEP);
    }

    #[test]
    fn session_cookie_is_found_in_set_cookie() {
        let cookie =
            parse_session_cookie("vmware_soap_session=\"52ab\"; Path=/; HttpOnly; Secure;")
                .unwrap();
        assert_eq!(cookie.expose(), "\"52ab\"");
        assert!(parse_session_cookie("other=1; Path=/").is_none());
        assert!(parse_session_cookie("vmware_soap_session=").is_none());
        assert!(parse_session_cookie("").is_none());
    }
}

#[cfg(test)]
mod duration_tests {
    use super::*;

    #[test]
    fn durations_read_as_people_write_them() {
        let cases = [
            (Duration::from_secs(600), "10m"),
            (Duration::from_secs(30), "30s"),
            (Duration::from_secs(90), "90s"),
            (Duration::from_millis(1500), "1.5s"),
            (Duration::from_millis(400), "400ms"),
            (Duration::from_secs(7200), "2h"),
        ];
        for (d, text) in cases {
            assert_eq!(format_duration(d), text);
        }
    }
}
