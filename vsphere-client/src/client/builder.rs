//! `ClientBuilder`: configuration in, connected [`Client`] out.

use std::fmt;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use crate::client::{Client, Inner};
use crate::error::{Error, ErrorKind};
use crate::http_client::{with_path, HttpClient, HttpOptions, ProxySetting};
use crate::redact::Secret;
use crate::session::{Credentials, Session};
use crate::tls::{self, Thumbprint, TlsMode};
use crate::transport::{self, BodyProgress, RetryConfig, TransportConfig};
use crate::version;

/// Default limit on the size of one response body.
pub const DEFAULT_MAX_RESPONSE_SIZE: u64 = 256 * 1024 * 1024;
/// Default interval of the session keepalive.
pub const DEFAULT_KEEPALIVE: Duration = Duration::from_secs(5 * 60);
/// Default timeout of one call attempt.
pub const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(5 * 60);
/// Default deadline of a whole call: every attempt and backoff together.
pub const DEFAULT_CALL_DEADLINE: Duration = Duration::from_secs(10 * 60);
/// Default longest pause in a response body once its headers are in.
pub const DEFAULT_BODY_IDLE_TIMEOUT: Duration = Duration::from_secs(30);
/// Default minimum transfer rate of a response body, in bytes per second,
/// averaged over [`DEFAULT_MIN_BODY_RATE_WINDOW`].
pub const DEFAULT_MIN_BODY_RATE: u64 = 1024;
/// Default window over which the minimum body rate is measured.
pub const DEFAULT_MIN_BODY_RATE_WINDOW: Duration = Duration::from_secs(45);
/// Default timeout to establish a connection.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(30);

/// Configures and connects a [`Client`].
///
/// ```no_run
/// # async fn demo() -> Result<(), vsphere_client::Error> {
/// let client = vsphere_client::Client::builder("vcenter.example.com")
///     .credentials("administrator@vsphere.local", "secret")
///     .ca_bundle_file("/etc/ssl/vcenter-ca.pem")?
///     .connect()
///     .await?;
/// println!("{}", client.service_content().about.full_name);
/// # Ok(()) }
/// ```
pub struct ClientBuilder {
    url: Result<http::Uri, Error>,
    credentials: Option<Credentials>,
    tls: TlsMode,
    connect_timeout: Duration,
    call_timeout: Option<Duration>,
    call_deadline: Option<Duration>,
    body_progress: BodyProgress,
    retry: RetryConfig,
    concurrency_limit: Option<usize>,
    keepalive: Option<Duration>,
    logout_on_drop: bool,
    max_response_size: u64,
    gzip: bool,
    use_env_proxy: bool,
    proxy: Option<String>,
    user_agent: String,
    version: Option<String>,
}

impl fmt::Debug for ClientBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientBuilder")
            .field("url", &self.url.as_ref().map(ToString::to_string))
            .field("credentials", &self.credentials)
            .field("tls", &self.tls)
            .field("connect_timeout", &self.connect_timeout)
            .field("call_timeout", &self.call_timeout)
            .field("call_deadline", &self.call_deadline)
            .field("body_progress", &self.body_progress)
            .field("retry", &self.retry)
            .field("concurrency_limit", &self.concurrency_limit)
            .field("keepalive", &self.keepalive)
            .field("logout_on_drop", &self.logout_on_drop)
            .field("max_response_size", &self.max_response_size)
            .finish_non_exhaustive()
    }
}

impl ClientBuilder {
    pub(crate) fn new(url: &str) -> Self {
        let (url, credentials) = match parse_sdk_url(url) {
            Ok((url, creds)) => (Ok(url), creds),
            Err(e) => (Err(e), None),
        };
        ClientBuilder {
            url,
            credentials,
            tls: TlsMode::SystemRoots,
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            call_timeout: Some(DEFAULT_CALL_TIMEOUT),
            call_deadline: Some(DEFAULT_CALL_DEADLINE),
            body_progress: BodyProgress {
                idle: Some(DEFAULT_BODY_IDLE_TIMEOUT),
                min_bytes_per_second: DEFAULT_MIN_BODY_RATE,
                window: DEFAULT_MIN_BODY_RATE_WINDOW,
            },
            retry: RetryConfig::default(),
            concurrency_limit: None,
            keepalive: Some(DEFAULT_KEEPALIVE),
            logout_on_drop: false,
            max_response_size: DEFAULT_MAX_RESPONSE_SIZE,
            gzip: true,
            use_env_proxy: true,
            proxy: None,
            user_agent: format!("vsphere-rs/{}", env!("CARGO_PKG_VERSION")),
            version: None,
        }
    }

    /// Logs in with this user name and password on connect (and again
    /// whenever the session expires). Overrides credentials in the URL.
    pub fn credentials(mut self, username: impl Into<String>, password: impl Into<String>) -> Self {
        self.credentials = Some(Credentials {
            username: username.into(),
            password: Secret::new(password.into()),
        });
        self
    }

    /// Connects without logging in (only a few calls, such as
    /// `RetrieveServiceContent`, work without a session).
    pub fn anonymous(mut self) -> Self {
        self.credentials = None;
        self
    }

    /// Sets the TLS mode directly.
    pub fn tls(mut self, mode: TlsMode) -> Self {
        self.tls = mode;
        self
    }

    /// Trusts the CA certificates of this PEM bundle (one or many
    /// certificates), and only them.
    pub fn ca_bundle_pem(mut self, pem: &[u8]) -> Result<Self, Error> {
        self.tls = TlsMode::CaBundle(tls::parse_pem_bundle(pem)?);
        Ok(self)
    }

    /// Like [`ca_bundle_pem`](Self::ca_bundle_pem), reading the file.
    pub fn ca_bundle_file(self, path: impl AsRef<Path>) -> Result<Self, Error> {
        let path = path.as_ref();
        let pem = std::fs::read(path).map_err(|e| {
            Error::invalid_config(format!("cannot read the CA bundle {}", path.display()))
                .with_source(e)
        })?;
        self.ca_bundle_pem(&pem)
    }

    /// Accepts only the server certificate with this SHA-256 or SHA-1
    /// thumbprint (hex, with or without colons). The host name is not checked.
    pub fn thumbprint(mut self, thumbprint: &str) -> Result<Self, Error> {
        self.tls = TlsMode::Pinned(Thumbprint::parse(thumbprint)?);
        Ok(self)
    }

    /// Accepts any server certificate when `insecure` is true. For labs only.
    pub fn insecure(mut self, insecure: bool) -> Self {
        if insecure {
            self.tls = TlsMode::Insecure;
        } else if matches!(self.tls, TlsMode::Insecure) {
            self.tls = TlsMode::SystemRoots;
        }
        self
    }

    /// Timeout to establish a TCP + TLS connection (default 30 s).
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// Timeout of one call attempt, from sending the request to the end of
    /// the response body (default 5 min). `None`: no limit. The call's
    /// [deadline](Self::call_deadline) bounds all attempts together.
    pub fn call_timeout(mut self, timeout: Option<Duration>) -> Self {
        self.call_timeout = timeout;
        self
    }

    /// Deadline of a whole call: every attempt, the backoff between them and
    /// the wait for a [concurrency](Self::concurrency_limit) permit (default
    /// 10 min). A retry starts only when its backoff and a minimum attempt
    /// ([`MIN_ATTEMPT`](crate::MIN_ATTEMPT), 1 s) fit before it; a call
    /// that runs out fails with [`ErrorKind::Timeout`] and
    /// [`TimeoutCause::CallDeadline`](crate::TimeoutCause::CallDeadline).
    /// `None`: only the per-attempt timeout and the retry count bound a call.
    /// [`Client::with_call_deadline`] sets another for one handle.
    ///
    /// `WaitForUpdatesEx` with a `maxWaitSeconds` (update streams, task
    /// waits) is bounded by its wait instead: each attempt by the wait plus
    /// 30 s, the call by twice that.
    pub fn call_deadline(mut self, deadline: Option<Duration>) -> Self {
        self.call_deadline = deadline;
        self
    }

    /// Longest pause in a response body once its headers are in (default
    /// 30 s): a body that stops for longer fails the attempt with
    /// [`TimeoutCause::BodyIdle`](crate::TimeoutCause::BodyIdle). `None`:
    /// no limit.
    pub fn body_idle_timeout(mut self, idle: Option<Duration>) -> Self {
        self.body_progress.idle = idle.filter(|d| !d.is_zero());
        self
    }

    /// Minimum transfer rate of a response body, in bytes per second
    /// averaged over `window` (default 1 KiB/s over 45 s): a body that
    /// brings less in a window fails the attempt with
    /// [`TimeoutCause::BodyTooSlow`](crate::TimeoutCause::BodyTooSlow). A
    /// body complete within one window is never measured; a 100-object page
    /// (about 700 KB) fails only if it takes more than 45 s and brings less
    /// than 45 KiB in one of them. `0` bytes per second: no minimum.
    pub fn min_body_rate(mut self, bytes_per_second: u64, window: Duration) -> Self {
        self.body_progress.min_bytes_per_second = bytes_per_second;
        self.body_progress.window = window;
        self
    }

    /// Retry policy for calls that are safe to repeat (default: 3 retries,
    /// backoff from 250 ms doubling up to 10 s, with jitter).
    pub fn retry(mut self, retry: RetryConfig) -> Self {
        self.retry = retry;
        self
    }

    /// At most this many calls in flight at once (default: unlimited).
    pub fn concurrency_limit(mut self, limit: usize) -> Self {
        self.concurrency_limit = Some(limit.max(1));
        self
    }

    /// How often to check the session while the client is idle, logging in
    /// again when it died (default 5 min). `None` disables the keepalive.
    pub fn keepalive(mut self, interval: Option<Duration>) -> Self {
        self.keepalive = interval.filter(|d| !d.is_zero());
        self
    }

    /// Log out when the last handle of the client is dropped (default off).
    /// Needs a running Tokio runtime at that moment; [`Client::close`] is
    /// the deterministic way.
    pub fn logout_on_drop(mut self, enabled: bool) -> Self {
        self.logout_on_drop = enabled;
        self
    }

    /// Largest response body accepted, in bytes (default 256 MiB). A larger
    /// body fails with [`ErrorKind::BodyTooLarge`] without being buffered.
    pub fn max_response_size(mut self, bytes: u64) -> Self {
        self.max_response_size = bytes;
        self
    }

    /// Ask for gzip-compressed responses (default on).
    pub fn gzip(mut self, enabled: bool) -> Self {
        self.gzip = enabled;
        self
    }

    /// Ignore the `HTTPS_PROXY`/`HTTP_PROXY`/`NO_PROXY` environment variables
    /// (honoured by default).
    pub fn no_proxy(mut self) -> Self {
        self.use_env_proxy = false;
        self.proxy = None;
        self
    }

    /// Send every request through this proxy: `http://[user:password@]host:port`
    /// (https requests go through a `CONNECT` tunnel, so TLS stays end to
    /// end).
    pub fn proxy(mut self, url: impl Into<String>) -> Self {
        self.proxy = Some(url.into());
        self
    }

    /// The `User-Agent` header (default `vsphere-rs/<version>`).
    pub fn user_agent(mut self, agent: impl Into<String>) -> Self {
        self.user_agent = agent.into();
        self
    }

    /// Announce this vim25 version instead of negotiating one.
    pub fn api_version(mut self, version: impl Into<String>) -> Self {
        self.version = Some(version.into());
        self
    }

    fn http_client(&self) -> Result<HttpClient, Error> {
        if matches!(self.tls, TlsMode::Insecure) {
            tracing::warn!("TLS certificate verification is disabled (insecure mode): the connection can be intercepted");
        }
        let proxy = match (&self.proxy, self.use_env_proxy) {
            (Some(url), _) => ProxySetting::Url(url.clone()),
            (None, true) => ProxySetting::FromEnv,
            (None, false) => ProxySetting::Direct,
        };
        HttpClient::new(HttpOptions {
            tls: tls::client_config(&self.tls)?,
            connect_timeout: self.connect_timeout,
            user_agent: self.user_agent.clone(),
            gzip: self.gzip,
            proxy,
        })
    }

    /// Connects: negotiates the API version, fetches the service content,
    /// logs in when credentials were given, and starts the keepalive.
    pub async fn connect(mut self) -> Result<Client, Error> {
        let url = std::mem::replace(&mut self.url, Err(Error::invalid_config("no URL")))?;
        let http = self.http_client()?;
        let transport_config = TransportConfig {
            url: url.clone(),
            call_timeout: self.call_timeout,
            call_deadline: self.call_deadline,
            body_progress: self.body_progress,
            max_response_size: self.max_response_size,
            retry: self.retry.clone(),
            concurrency_limit: self.concurrency_limit,
            body_buffers: Default::default(),
        };
        let service = transport::build_stack(http.clone(), &transport_config)?;

        let (announced, negotiated) = match &self.version {
            Some(v) => (v.clone(), true),
            None => match fetch_server_version(&http, &url, &transport_config).await? {
                Some(server) => (version::negotiate(&server), true),
                None => (version::GENERATED_API_VERSION.to_owned(), false),
            },
        };

        let secrets: Arc<[Secret]> = self
            .credentials
            .iter()
            .map(|c| c.password.clone())
            .collect::<Vec<_>>()
            .into();
        let inner = Arc::new(Inner {
            url,
            http,
            service,
            transport_config,
            soap_action: std::sync::RwLock::new(soap_action(&announced)),
            api_level: Inner::new_api_level(&announced),
            api_version: std::sync::RwLock::new(announced),
            content: std::sync::OnceLock::new(),
            session: Session::new(),
            credentials: self.credentials.clone(),
            secrets,
            logout_on_drop: self.logout_on_drop,
            keepalive_task: std::sync::Mutex::new(None),
            stats: Default::default(),
            task_watcher: Default::default(),
        });
        let client = Client {
            inner,
            call_timeout: None,
            call_deadline: None,
        };
        client.start(negotiated, self.keepalive).await?;
        Ok(client)
    }
}

pub(crate) fn soap_action(version: &str) -> Arc<str> {
    format!("urn:vim25/{version}").into()
}

/// Reads `vimServiceVersions.xml` next to the SDK endpoint. `Ok(None)`
/// when the server has none (or an unreadable one); connection and TLS
/// errors are returned, since every later call would fail the same way.
async fn fetch_server_version(
    http: &HttpClient,
    sdk_url: &http::Uri,
    config: &TransportConfig,
) -> Result<Option<String>, Error> {
    let versions_url = with_path(
        sdk_url,
        &format!(
            "{}/vimServiceVersions.xml",
            sdk_url.path().trim_end_matches('/')
        ),
    )?;
    let versions_text = versions_url.to_string();
    let fetch = async {
        let request = http::Request::get(versions_url.clone())
            .body(bytes::Bytes::new())
            .map_err(|e| {
                Error::new(ErrorKind::InvalidConfig, "cannot build the HTTP request").with_source(e)
            })?;
        let send = http.send(request);
        let response = match config.call_timeout {
            None => send.await?,
            Some(timeout) => tokio::time::timeout(timeout, send).await.map_err(|_| {
                Error::timeout(
                    crate::TimeoutCause::AttemptTimeout,
                    format!(
                        "no answer from {versions_url} within the call timeout ({})",
                        transport::format_duration(timeout)
                    ),
                )
            })??,
        };
        if !response.status.is_success() {
            tracing::debug!(
                status = response.status.as_u16(),
                "no vimServiceVersions.xml; using the service content's version"
            );
            return Ok(None);
        }
        // The document is a few hundred bytes; refuse to read a huge one.
        match transport::read_limited(
            response,
            Default::default(),
            1 << 20,
            &versions_text,
            &config.body_progress,
        )
        .await
        {
            Ok(body) => Ok(Some(body)),
            Err(e) if e.kind() == ErrorKind::BodyTooLarge => Ok(None),
            Err(e) => Err(e),
        }
    };
    // One attempt, within the call deadline like any call.
    let body = match config.call_deadline.map(transport::Deadline::after) {
        None => fetch.await?,
        Some(deadline) => tokio::time::timeout_at(deadline.at, fetch)
            .await
            .unwrap_or_else(|_| Err(deadline.error(Some(&versions_text))))?,
    };
    let Some(body) = body else {
        return Ok(None);
    };
    let version = version::parse_service_versions(&String::from_utf8_lossy(&body));
    tracing::debug!(server_version = ?version, "read vimServiceVersions.xml");
    Ok(version)
}

/// Normalises what users type for a vCenter into the SDK endpoint URL, like
/// govc: `host`, `host:port`, `https://host`, `https://host/sdk`,
/// `http://...`, each optionally with `user:password@`. Returns the URL
/// without credentials, and the credentials when the URL had them.
pub(crate) fn parse_sdk_url(input: &str) -> Result<(http::Uri, Option<Credentials>), Error> {
    let trimmed = input.trim();
    if trimmed.is_empty() {
        return Err(Error::invalid_config("the vCenter URL is empty"));
    }
    let with_scheme = if trimmed.contains("://") {
        trimmed.to_owned()
    } else {
        format!("https://{trimmed}")
    };
    // Never echo the input: it may hold a password.
    let invalid = || {
        Error::invalid_config("invalid vCenter URL (expected host, host:port or https://host/sdk)")
    };
    let without_fragment = with_scheme.split('#').next().unwrap_or_default();
    let uri: http::Uri = without_fragment
        .parse()
        .map_err(|e| invalid().with_source(e))?;
    let scheme = uri.scheme().cloned().ok_or_else(invalid)?;
    if !matches!(scheme.as_str(), "https" | "http") {
        return Err(Error::invalid_config(format!(
            "unsupported URL scheme {:?} (expected https or http)",
            scheme.as_str()
        )));
    }
    let authority = uri.authority().map_or("", |a| a.as_str());
    let (userinfo, host_port) = match authority.rsplit_once('@') {
        Some((userinfo, host_port)) => (Some(userinfo), host_port),
        None => (None, authority),
    };
    if uri.host().is_none_or(str::is_empty) || host_port.is_empty() {
        return Err(Error::invalid_config("the vCenter URL has no host"));
    }
    let credentials = userinfo
        .map(|userinfo| userinfo.split_once(':').unwrap_or((userinfo, "")))
        .filter(|(username, _)| !username.is_empty())
        .map(|(username, password)| Credentials {
            username: percent_decode(username),
            password: Secret::new(percent_decode(password)),
        });
    let path = uri.path().trim_end_matches('/');
    let url = http::Uri::builder()
        .scheme(scheme)
        .authority(host_port)
        .path_and_query(if path.is_empty() { "/sdk" } else { path })
        .build()
        .map_err(|e| invalid().with_source(e))?;
    Ok((url, credentials))
}

fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).ok();
            if let Some(value) = hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                out.push(value);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_normalised_like_govc() {
        let cases = [
            ("vc.example.com", "https://vc.example.com/sdk"),
            ("vc.example.com:8443", "https://vc.example.com:8443/sdk"),
            ("https://vc.example.com", "https://vc.example.com/sdk"),
            ("https://vc.example.com/", "https://vc.example.com/sdk"),
            ("https://vc.example.com/sdk", "https://vc.example.com/sdk"),
            ("https://vc.example.com/sdk/", "https://vc.example.com/sdk"),
            ("http://127.0.0.1:8989/sdk", "http://127.0.0.1:8989/sdk"),
            ("127.0.0.1", "https://127.0.0.1/sdk"),
        ];
        for (input, expected) in cases {
            let (url, creds) = parse_sdk_url(input).unwrap();
            assert_eq!(url.to_string(), expected, "{input}");
            assert!(creds.is_none());
        }
    }

    #[test]
    fn credentials_in_the_url_are_taken_out() {
        let (url, creds) = parse_sdk_url("https://user%40vsphere.local:p%3Ass@vc/sdk").unwrap();
        assert_eq!(url.to_string(), "https://vc/sdk");
        let creds = creds.unwrap();
        assert_eq!(creds.username, "user@vsphere.local");
        assert_eq!(creds.password.expose(), "p:ss");
        let (_, creds) = parse_sdk_url("root:vmware@127.0.0.1:443").unwrap();
        assert_eq!(creds.unwrap().username, "root");
    }

    #[test]
    fn bad_urls_do_not_echo_passwords() {
        for bad in [
            "",
            "ftp://vc/sdk",
            "https://",
            "https://user:topsecret@[::1",
        ] {
            let err = parse_sdk_url(bad).unwrap_err();
            assert_eq!(err.kind(), ErrorKind::InvalidConfig, "{bad}");
            assert!(!err.to_string().contains("topsecret"));
            assert!(!format!("{err:?}").contains("topsecret"));
        }
    }

    #[test]
    fn builder_debug_hides_the_password() {
        let builder = Client::builder("https://u:hunter22@vc/sdk").credentials("admin", "hunter33");
        let out = format!("{builder:?}");
        assert!(
            !out.contains("hunter22") && !out.contains("hunter33"),
            "{out}"
        );
    }
}
