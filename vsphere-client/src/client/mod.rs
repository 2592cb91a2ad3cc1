//! The vSphere client: configuration, calls, session upkeep.

mod builder;
pub(crate) mod response;
mod vim;

use std::sync::{Arc, Mutex, OnceLock, RwLock, Weak};
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures_util::future::BoxFuture;
use tracing::Instrument;

pub use builder::{
    ClientBuilder, DEFAULT_BODY_IDLE_TIMEOUT, DEFAULT_CALL_DEADLINE, DEFAULT_CALL_TIMEOUT,
    DEFAULT_CONNECT_TIMEOUT, DEFAULT_KEEPALIVE, DEFAULT_MAX_RESPONSE_SIZE, DEFAULT_MIN_BODY_RATE,
    DEFAULT_MIN_BODY_RATE_WINDOW,
};
pub use vim::Vim;

use crate::error::{Error, ErrorKind};
use crate::redact::Secret;
use crate::session::{Credentials, LoginTurn, Session, Snapshot};
use crate::transport::{self, Deadline, SoapCall, SoapReply, SoapService};
use crate::types::{ManagedObjectReference, ServiceContent};
use crate::version;
use crate::xml::Request;

/// An async vSphere (vim25 SOAP) client.
///
/// Cheap to clone: clones share one connection pool and one session. The
/// methods here are the everyday API; every raw operation of vim25 is a typed
/// method of [`client.vim()`](Client::vim) (`client.vim().power_on_vm_task(..)`),
/// and [`invoke`](Client::invoke) is what they call.
///
/// The session is kept alive: a keepalive checks it while idle, and a call
/// that fails with `NotAuthenticated` logs in again (once, however many
/// calls hit the expired session together) and is retried transparently.
///
/// Every call ends by its deadline (10 min by default,
/// [`ClientBuilder::call_deadline`], [`Client::with_call_deadline`]), retries
/// included; each attempt by the call timeout (5 min); a response body that
/// stops for 30 s or brings less than 1 KiB/s over 45 s fails its attempt
/// ([`ClientBuilder::body_idle_timeout`], [`ClientBuilder::min_body_rate`]).
/// [`Error::timeout_cause`] says which bound ended a call.
#[derive(Clone)]
pub struct Client {
    inner: Arc<Inner>,
    /// This handle's per-attempt timeout, instead of the builder's
    /// ([`Client::with_call_timeout`]).
    call_timeout: Option<Duration>,
    /// This handle's call deadline, instead of the builder's
    /// ([`Client::with_call_deadline`]).
    call_deadline: Option<Duration>,
}

/// How much longer than its `maxWaitSeconds` one `WaitForUpdatesEx` attempt
/// may take: vCenter answers at the end of the wait, and the update set it
/// then sends must come in too.
pub(crate) const LONG_POLL_MARGIN: Duration = Duration::from_secs(30);

/// How long the keepalive's session check (and the logout on drop) may
/// take: a server that does not answer within it is taken for dead.
pub(crate) const KEEPALIVE_DEADLINE: Duration = Duration::from_secs(30);

/// The `maxWaitSeconds` of a `WaitForUpdatesEx` envelope: the call is a
/// long poll, bounded by its wait rather than by the client's deadline.
/// Read from the envelope this crate encoded (the element is written
/// exactly so; a unit test holds the encoder to it).
fn long_poll_wait(method: &str, envelope: &[u8]) -> Option<Duration> {
    if method != "WaitForUpdatesEx" {
        return None;
    }
    const OPEN: &[u8] = b"<maxWaitSeconds>";
    let start = memchr::memmem::find(envelope, OPEN)? + OPEN.len();
    let digits = envelope[start..]
        .iter()
        .take_while(|b| b.is_ascii_digit())
        .count();
    let text = std::str::from_utf8(&envelope[start..start + digits]).ok()?;
    text.parse::<u64>().ok().map(Duration::from_secs)
}

pub(crate) struct Inner {
    url: http::Uri,
    http: crate::http_client::HttpClient,
    service: SoapService,
    /// Timeout, body limit and retry policy, also used by the REST side.
    transport_config: transport::TransportConfig,
    soap_action: RwLock<Arc<str>>,
    api_version: RwLock<String>,
    /// `api_version` as an `ApiLevel` number (`ApiLevel::MAX` for a
    /// version that does not parse: nothing is held back then).
    api_level: std::sync::atomic::AtomicU32,
    content: OnceLock<ServiceContent>,
    session: Session,
    credentials: Option<Credentials>,
    /// Values never to log (the password).
    secrets: Arc<[Secret]>,
    logout_on_drop: bool,
    keepalive_task: Mutex<Option<tokio::task::AbortHandle>>,
    /// Calls per method, for [`Client::call_stats`].
    stats: crate::stats::CallStats,
    /// The task watcher shared by every wait on this client (src/task.rs).
    task_watcher: crate::task::TaskWatcher,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("url", &format_args!("{}", self.inner.url))
            .field("api_version", &self.api_version())
            .field(
                "username",
                &self.inner.credentials.as_ref().map(|c| c.username.as_str()),
            )
            .field("logged_in", &self.inner.session.cookie().is_some())
            .field("call_timeout", &self.call_timeout)
            .field("call_deadline", &self.call_deadline)
            .finish_non_exhaustive()
    }
}

/// Operations that establish or end a session: a `NotAuthenticated` from
/// them is not fixed by logging in again.
const SESSION_METHODS: &[&str] = &[
    "Login",
    "LoginByToken",
    "LoginExtensionByCertificate",
    "LoginExtensionBySubjectName",
    "LoginExtensionFromCertificate",
    "Logout",
    "CloneSession",
    "ImpersonateUser",
];

impl Client {
    /// Starts configuring a client for `url`: `host`, `host:port`,
    /// `https://host`, `https://host/sdk`, or `http://...`, optionally with
    /// `user:password@` (as `GOVC_URL` accepts).
    pub fn builder(url: &str) -> ClientBuilder {
        ClientBuilder::new(url)
    }

    /// A handle on the same session (and connection pool, concurrency limit,
    /// retry policy, call statistics) whose calls give each attempt `timeout`
    /// instead of the builder's [`call_timeout`](ClientBuilder::call_timeout):
    /// longer for one known-slow call, shorter to fail fast. The retries of
    /// a safe call each get the full timeout.
    ///
    /// The call's deadline still bounds all attempts together
    /// ([`with_call_deadline`](Self::with_call_deadline)). The long polls of
    /// streams and task waits (`WaitForUpdatesEx`) are bounded by their own
    /// wait instead.
    pub fn with_call_timeout(&self, timeout: Duration) -> Client {
        Client {
            inner: self.inner.clone(),
            call_timeout: Some(timeout),
            call_deadline: self.call_deadline,
        }
    }

    /// A handle on the same session whose calls each end within `deadline`,
    /// every attempt and backoff included, instead of the builder's
    /// [`call_deadline`](ClientBuilder::call_deadline) (10 min by default):
    /// a reconcile loop or a command-line tool bounds its vSphere work with
    /// it. A retry starts only when its backoff and a minimum attempt
    /// ([`MIN_ATTEMPT`](crate::MIN_ATTEMPT)) fit before the deadline; a call
    /// that runs out fails with [`ErrorKind::Timeout`] and
    /// [`TimeoutCause::CallDeadline`](crate::TimeoutCause::CallDeadline).
    /// Re-login on an expired session counts as a call of its own.
    pub fn with_call_deadline(&self, deadline: Duration) -> Client {
        Client {
            inner: self.inner.clone(),
            call_timeout: self.call_timeout,
            call_deadline: Some(deadline),
        }
    }

    /// This handle's call deadline (its own, else the builder's).
    pub fn call_deadline(&self) -> Option<Duration> {
        self.call_deadline
            .or(self.inner.transport_config.call_deadline)
    }

    /// The SDK endpoint (`https://host/sdk`), without credentials.
    pub fn url(&self) -> &http::Uri {
        &self.inner.url
    }

    /// The vim25 version announced in `SOAPAction`.
    pub fn api_version(&self) -> String {
        self.inner
            .api_version
            .read()
            .map(|v| v.clone())
            .unwrap_or_default()
    }

    /// [`api_version`](Client::api_version) as a number, for the version
    /// check of requests.
    fn api_level(&self) -> crate::xml::ApiLevel {
        crate::xml::ApiLevel(
            self.inner
                .api_level
                .load(std::sync::atomic::Ordering::Relaxed),
        )
    }

    fn newer_than_server(&self, newer: crate::xml::NewerItem) -> Error {
        Error::new(
            ErrorKind::NewerThanServer,
            format!(
                "{} is vSphere API {}, newer than the API {} negotiated with the server; the request was not sent",
                newer.item,
                newer.since,
                self.api_version()
            ),
        )
    }

    /// The service content fetched on connect (`about`, the managers'
    /// references, the root folder...).
    pub fn service_content(&self) -> &ServiceContent {
        static EMPTY: OnceLock<ServiceContent> = OnceLock::new();
        // Set by `connect` before the client is handed out.
        self.inner
            .content
            .get()
            .unwrap_or_else(|| EMPTY.get_or_init(ServiceContent::default))
    }

    /// Whether the client currently holds a session cookie.
    pub fn has_session(&self) -> bool {
        self.inner.session.cookie().is_some()
    }

    /// The underlying HTTP client (same TLS, proxy and timeouts), for the
    /// REST side.
    pub(crate) fn http(&self) -> &crate::http_client::HttpClient {
        &self.inner.http
    }

    /// The session cookie value, for the REST side's session exchange.
    pub(crate) fn session_cookie(&self) -> Option<Secret> {
        self.inner.session.cookie()
    }

    /// Per-call timeout, body limit and retry policy, for the REST side.
    pub(crate) fn transport_config(&self) -> &transport::TransportConfig {
        &self.inner.transport_config
    }

    /// The credentials the client logs in with, for the REST side.
    pub(crate) fn credentials(&self) -> Option<&Credentials> {
        self.inner.credentials.as_ref()
    }

    /// Sends one operation and decodes its response.
    ///
    /// A `NotAuthenticated` fault triggers one re-login (shared with every
    /// concurrent call) and one retry. Transport errors and 502/503/504 are
    /// retried with backoff only when `R::IDEMPOTENT`, or when the request
    /// cannot have reached the server.
    ///
    /// A request carrying a field, enumeration value, type or operation newer
    /// than the negotiated API version (see [`api_version`](Client::api_version))
    /// fails with [`ErrorKind::NewerThanServer`] before anything is sent.
    pub async fn invoke<R: Request>(&self, request: &R) -> Result<R::Response, Error> {
        let body = match crate::xml::soap::encode_request_envelope_for(request, self.api_level()) {
            Ok(body) => Bytes::from(body),
            Err(newer) => return Err(self.newer_than_server(newer).in_method(R::NAME)),
        };
        let mut response = None;
        let mut decode = |reply: &SoapReply, url: &dyn std::fmt::Display| {
            response = Some(response::decode::<R>(reply, url)?);
            Ok(())
        };
        let operation = Operation {
            method: R::NAME,
            idempotent: R::IDEMPOTENT,
            this: request.this(),
        };
        self.send_operation(operation, body, &mut decode).await?;
        // `send_operation` is Ok only after `decode` was: never `None` here.
        response.ok_or_else(|| {
            Error::new(ErrorKind::Decode, "no response was decoded").in_method(R::NAME)
        })
    }

    /// What [`invoke`](Client::invoke) does once the request is encoded, the
    /// same for every operation: the typed parts are the encoding before it
    /// and `decode`, called on each reply. Boxed and untyped, so that a
    /// program's `invoke::<R>` instances (one per operation it calls) hold a
    /// pointer rather than this future and its transport's, and compile to a
    /// few lines each.
    fn send_operation<'a>(
        &'a self,
        operation: Operation<'a>,
        body: Bytes,
        decode: &'a mut DecodeReply<'_>,
    ) -> BoxFuture<'a, Result<(), Error>> {
        Box::pin(async move {
            let method = operation.method;
            let span = tracing::debug_span!(
                "soap_call",
                method,
                this = %SpanTarget {
                    this: operation.this,
                    session: &self.inner.session,
                },
                status = tracing::field::Empty,
                duration_ms = tracing::field::Empty,
            );
            let started = Instant::now();
            let bounds = match long_poll_wait(method, &body) {
                Some(wait) => {
                    let attempt = wait + LONG_POLL_MARGIN;
                    Bounds {
                        timeout: Some(attempt),
                        deadline: Some(Deadline::after(attempt * 2)),
                    }
                }
                None => Bounds {
                    timeout: self.call_timeout,
                    deadline: self.call_deadline().map(Deadline::after),
                },
            };
            let result = self
                .call(operation, body, bounds, decode)
                .instrument(span.clone())
                .await;
            span.record("duration_ms", started.elapsed().as_millis() as u64);
            span.in_scope(|| match &result {
                Ok(()) => tracing::debug!("SOAP call done"),
                Err(err) => tracing::debug!(error = %err, kind = ?err.kind(), "SOAP call failed"),
            });
            self.inner.stats.record(method, &result);
            result.map_err(|e| e.in_method(method))
        })
    }

    /// Calls made so far per SOAP method (shared by every clone of this
    /// client, keepalive and re-login included).
    pub fn call_stats(&self) -> std::collections::BTreeMap<&'static str, crate::MethodStats> {
        self.inner.stats.snapshot()
    }

    /// The task watcher of this client (one collector filter for every wait).
    pub(crate) fn task_watcher(&self) -> &crate::task::TaskWatcher {
        &self.inner.task_watcher
    }

    /// Calls made so far, all methods together.
    pub fn total_calls(&self) -> u64 {
        self.call_stats().values().map(|s| s.calls).sum()
    }

    async fn call(
        &self,
        operation: Operation<'_>,
        body: Bytes,
        bounds: Bounds,
        decode: &mut DecodeReply<'_>,
    ) -> Result<(), Error> {
        let seen = self.inner.session.snapshot();
        match self
            .send_once(
                &operation,
                body.clone(),
                seen.cookie.clone(),
                bounds,
                decode,
            )
            .await
        {
            Err(err) if err.is_not_authenticated() && self.may_relogin(operation.method) => {
                tracing::info!("session expired or invalid: logging in again");
                self.relogin(&seen).await?;
                let cookie = self.inner.session.cookie();
                self.send_once(&operation, body, cookie, bounds, decode)
                    .await
            }
            other => other,
        }
    }

    fn may_relogin(&self, method: &str) -> bool {
        self.inner.credentials.is_some() && !SESSION_METHODS.contains(&method)
    }

    async fn send_once(
        &self,
        operation: &Operation<'_>,
        body: Bytes,
        cookie: Option<Secret>,
        bounds: Bounds,
        decode: &mut DecodeReply<'_>,
    ) -> Result<(), Error> {
        let soap_action = self
            .inner
            .soap_action
            .read()
            .map(|a| a.clone())
            .unwrap_or_else(|_| builder::soap_action(version::GENERATED_API_VERSION));
        let call = SoapCall {
            method: operation.method,
            soap_action,
            body,
            cookie,
            idempotent: operation.idempotent,
            secrets: self.inner.secrets.clone(),
            timeout: bounds.timeout,
            deadline: bounds.deadline,
        };
        let reply = transport::send(&self.inner.service, call).await?;
        if let Some(cookie) = reply.new_cookie.clone() {
            self.inner.session.adopt_cookie(cookie);
        }
        let (result, skipped) = crate::xml::skipped::collect(|| decode(&reply, &self.inner.url));
        for element in self.inner.stats.record_skipped(operation.method, &skipped) {
            use crate::xml::skipped::SkippedKind;
            match element.kind {
                SkippedKind::Element => tracing::debug!(
                    type_name = element.type_name,
                    element = %element.element,
                    bindings = version::GENERATED_API_VERSION,
                    "skipped an element the bindings do not know (from a newer server)"
                ),
                SkippedKind::Type => tracing::debug!(
                    declared = element.type_name,
                    xsi_type = %element.element,
                    bindings = version::GENERATED_API_VERSION,
                    "decoded a type the bindings do not know as its declared type (from a newer server)"
                ),
                SkippedKind::Fault => tracing::debug!(
                    declared = element.type_name,
                    fault = %element.element,
                    bindings = version::GENERATED_API_VERSION,
                    "decoded a fault type the bindings do not know as its declared fault (from a newer server)"
                ),
            }
        }
        self.inner
            .transport_config
            .body_buffers
            .give_back(reply.body);
        if result.is_ok() {
            self.inner.session.touch();
        }
        result
    }

    /// Logs in again unless another task already did since `seen`.
    async fn relogin(&self, seen: &Snapshot) -> Result<(), Error> {
        let Some(credentials) = &self.inner.credentials else {
            return Err(Error::new(
                ErrorKind::NotAuthenticated,
                "the session expired and the client has no credentials to log in again",
            ));
        };
        let (_guard, turn) = self.inner.session.login_turn(seen).await?;
        let LoginTurn::LogIn { generation_before } = turn else {
            return Ok(());
        };
        let result = self.login_with(credentials).await;
        self.inner
            .session
            .login_finished(generation_before, result.as_ref().map(|_| ()));
        result
    }

    fn login_with<'a>(&'a self, credentials: &'a Credentials) -> BoxFuture<'a, Result<(), Error>> {
        // Boxed: Login goes through `invoke`, which may call `relogin`,
        // which calls this (an async cycle needs one boxed link).
        Box::pin(async move {
            let session_manager = self.session_manager()?;
            self.vim()
                .login(
                    &session_manager,
                    &credentials.username,
                    credentials.password.expose(),
                    None,
                )
                .await?;
            Ok(())
        })
    }

    fn session_manager(&self) -> Result<ManagedObjectReference, Error> {
        self.service_content()
            .session_manager
            .clone()
            .ok_or_else(|| {
                Error::new(
                    ErrorKind::NotAuthenticated,
                    "the server has no SessionManager (its service content names none)",
                )
            })
    }

    /// The connect sequence after the client is built.
    async fn start(
        &self,
        version_negotiated: bool,
        keepalive: Option<Duration>,
    ) -> Result<(), Error> {
        let service_instance = ManagedObjectReference {
            type_: "ServiceInstance".into(),
            value: "ServiceInstance".into(),
        };
        let content = self
            .vim()
            .retrieve_service_content(&service_instance)
            .await?;
        if !version_negotiated {
            // No vimServiceVersions.xml: go by what the server says it is.
            let server = content.about.api_version.clone();
            if !server.is_empty() {
                self.inner.announce(&version::negotiate(&server));
            }
        }
        let _ = self.inner.content.set(content);
        if let Some(credentials) = &self.inner.credentials {
            let seen = self.inner.session.snapshot();
            let (_guard, turn) = self.inner.session.login_turn(&seen).await?;
            if let LoginTurn::LogIn { generation_before } = turn {
                let result = self.login_with(credentials).await;
                self.inner
                    .session
                    .login_finished(generation_before, result.as_ref().map(|_| ()));
                result?;
            }
            if let Some(interval) = keepalive {
                self.spawn_keepalive(interval);
            }
        }
        Ok(())
    }

    fn spawn_keepalive(&self, interval: Duration) {
        let weak = Arc::downgrade(&self.inner);
        let task = tokio::spawn(keepalive_loop(weak, interval));
        if let Ok(mut slot) = self.inner.keepalive_task.lock() {
            *slot = Some(task.abort_handle());
        }
    }

    /// Checks the session with a cheap authenticated read (the session
    /// manager's `currentSession`) and logs in again when it is gone.
    /// The keepalive calls this; callers may too. The read ends within 30 s
    /// (or this handle's shorter deadline): a server that does not answer
    /// by then is reported as a [`ErrorKind::Timeout`], and the connection
    /// it held is dropped, so the next call opens a new one.
    pub async fn check_session(&self) -> Result<(), Error> {
        let seen = self.inner.session.snapshot();
        let bound = self
            .call_deadline()
            .map_or(KEEPALIVE_DEADLINE, |d| d.min(KEEPALIVE_DEADLINE));
        if self.with_call_deadline(bound).session_is_alive().await? {
            return Ok(());
        }
        tracing::info!("keepalive: the session is gone, logging in again");
        self.relogin(&seen).await
    }

    async fn session_is_alive(&self) -> Result<bool, Error> {
        use crate::types::{ObjectSpec, PropertyFilterSpec, PropertySpec, RetrieveOptions};
        let content = self.service_content();
        let session_manager = self.session_manager()?;
        let spec = PropertyFilterSpec {
            prop_set: vec![PropertySpec {
                type_: "SessionManager".into(),
                path_set: vec!["currentSession".into()],
                ..Default::default()
            }],
            object_set: vec![ObjectSpec {
                obj: session_manager,
                ..Default::default()
            }],
            ..Default::default()
        };
        let result = self
            .vim()
            .retrieve_properties_ex(
                &content.property_collector,
                &[spec],
                &RetrieveOptions::default(),
            )
            .await;
        match result {
            // Without a session the property is unset (vCenter and vcsim alike).
            Ok(result) => Ok(result.is_some_and(|r| {
                r.objects
                    .iter()
                    .any(|o| o.prop_set.iter().any(|p| p.name == "currentSession"))
            })),
            Err(err) if err.is_not_authenticated() => Ok(false),
            Err(err) => Err(err),
        }
    }

    /// Logs out and stops the keepalive; later calls fail with
    /// `NotAuthenticated` instead of logging in again. Idempotent.
    pub async fn close(&self) -> Result<(), Error> {
        self.inner.session.close();
        if let Ok(mut slot) = self.inner.keepalive_task.lock() {
            if let Some(task) = slot.take() {
                task.abort();
            }
        }
        if self.inner.session.cookie().is_none() {
            return Ok(());
        }
        let session_manager = self.session_manager()?;
        let result = self.vim().logout(&session_manager).await;
        self.inner.session.clear_cookie();
        match result {
            Ok(()) => Ok(()),
            // Already gone on the server: that is what we wanted.
            Err(err) if err.is_not_authenticated() => Ok(()),
            Err(err) => Err(err),
        }
    }
}

/// The operation a call sends, as the untyped part of a call needs it.
struct Operation<'a> {
    method: &'static str,
    idempotent: bool,
    this: &'a ManagedObjectReference,
}

/// Decodes a reply into the typed response a call waits for (kept by the
/// closure), or into the fault or error it carries.
type DecodeReply<'r> =
    dyn FnMut(&SoapReply, &dyn std::fmt::Display) -> Result<(), Error> + Send + 'r;

/// The bounds of one call: per attempt, and for the whole call.
#[derive(Clone, Copy)]
struct Bounds {
    timeout: Option<Duration>,
    deadline: Option<Deadline>,
}

/// The target object of a call, for its span. Some servers name
/// session-scoped objects (views, collectors) after the session, and vcsim's
/// session key is the cookie value (`session[<cookie>]<id>`): the cookie is
/// blanked out, as in the wire log. Formatted only when the span is logged.
struct SpanTarget<'a> {
    this: &'a ManagedObjectReference,
    session: &'a Session,
}

impl std::fmt::Display for SpanTarget<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let text = self.this.to_string();
        match self.session.cookie() {
            Some(cookie) => f.write_str(&crate::redact::redact_body(text.as_bytes(), &[&cookie])),
            None => f.write_str(&text),
        }
    }
}

async fn keepalive_loop(client: Weak<Inner>, interval: Duration) {
    let mut ticker = tokio::time::interval_at(tokio::time::Instant::now() + interval, interval);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticker.tick().await;
        let Some(inner) = client.upgrade() else {
            return;
        };
        let client = Client {
            inner,
            call_timeout: None,
            call_deadline: None,
        };
        if client.inner.session.is_closed() {
            return;
        }
        // Calls keep the session alive by themselves; check only when idle.
        if client.inner.session.idle_for() < interval / 2 {
            continue;
        }
        match client.check_session().await {
            Ok(()) => tracing::trace!("keepalive: session alive"),
            Err(err) if err.kind() == ErrorKind::Timeout => tracing::warn!(
                error = %err,
                "keepalive: vCenter did not answer; the next call opens a new connection"
            ),
            Err(err) => tracing::warn!(error = %err, "keepalive failed; will try again"),
        }
    }
}

impl Inner {
    /// The `api_level` of a client announcing `version`.
    pub(crate) fn new_api_level(version: &str) -> std::sync::atomic::AtomicU32 {
        std::sync::atomic::AtomicU32::new(api_level_of(version))
    }

    /// The vim25 version to announce from now on: `SOAPAction` and the
    /// version requests are checked against.
    fn announce(&self, version: &str) {
        if let Ok(mut action) = self.soap_action.write() {
            *action = builder::soap_action(version);
        }
        if let Ok(mut announced) = self.api_version.write() {
            *announced = version.to_owned();
        }
        self.api_level
            .store(api_level_of(version), std::sync::atomic::Ordering::Relaxed);
    }
}

fn api_level_of(version: &str) -> u32 {
    crate::xml::ApiLevel::parse(version)
        .unwrap_or(crate::xml::ApiLevel::MAX)
        .0
}

impl Drop for Inner {
    fn drop(&mut self) {
        if let Ok(mut slot) = self.keepalive_task.lock() {
            if let Some(task) = slot.take() {
                task.abort();
            }
        }
        if !self.logout_on_drop || self.session.is_closed() {
            return;
        }
        let Some(cookie) = self.session.cookie() else {
            return;
        };
        let Some(session_manager) = self.content.get().and_then(|c| c.session_manager.clone())
        else {
            return;
        };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            tracing::debug!("logout_on_drop: no Tokio runtime, the session is left to expire");
            return;
        };
        let soap_action = self
            .soap_action
            .read()
            .map(|a| a.clone())
            .unwrap_or_else(|_| builder::soap_action(version::GENERATED_API_VERSION));
        let request = crate::types::LogoutRequestType {
            this: session_manager,
        };
        let call = SoapCall {
            method: "Logout",
            soap_action,
            body: Bytes::from(crate::xml::soap::encode_request_envelope(&request)),
            cookie: Some(cookie),
            idempotent: true,
            secrets: self.secrets.clone(),
            timeout: None,
            deadline: Some(Deadline::after(KEEPALIVE_DEADLINE)),
        };
        let service = self.service.clone();
        runtime.spawn(async move {
            match transport::send(&service, call).await {
                Ok(reply) if reply.status.is_success() => tracing::debug!("logged out on drop"),
                Ok(reply) => tracing::debug!(
                    status = reply.status.as_u16(),
                    "logout on drop answered with an error"
                ),
                Err(err) => tracing::debug!(error = %err, "logout on drop failed"),
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_poll_is_recognised_by_the_wait_it_encodes() {
        let request = crate::types::WaitForUpdatesExRequestType {
            this: ManagedObjectReference {
                type_: "PropertyCollector".into(),
                value: "pc".into(),
            },
            version: Some("7".into()),
            options: Some(crate::types::WaitOptions {
                max_wait_seconds: Some(45),
                ..Default::default()
            }),
        };
        let envelope = crate::xml::soap::encode_request_envelope(&request);
        assert_eq!(
            long_poll_wait("WaitForUpdatesEx", &envelope),
            Some(Duration::from_secs(45))
        );
        // No maxWaitSeconds: the server may wait for good; the client's
        // bounds apply.
        let request = crate::types::WaitForUpdatesExRequestType {
            options: None,
            ..request
        };
        let envelope = crate::xml::soap::encode_request_envelope(&request);
        assert_eq!(long_poll_wait("WaitForUpdatesEx", &envelope), None);
        assert_eq!(
            long_poll_wait("CurrentTime", b"<maxWaitSeconds>5</maxWaitSeconds>"),
            None
        );
    }
}
