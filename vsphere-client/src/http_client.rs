//! The HTTP client under the SOAP and REST transports: hyper's pooled
//! HTTP/1.1 client over the crate's rustls configuration, with a connect
//! timeout, proxies (given, or from `HTTPS_PROXY`/`HTTP_PROXY`/`NO_PROXY`:
//! `CONNECT` tunnels for https, absolute-form requests for http), the user
//! agent, and gzip response bodies decoded as they stream in.
//!
//! A thin layer rather than a general client: the transports above bring
//! their own timeouts, retries, size limits and body watch.

use std::future::Future;
use std::io::{self, Write as _};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::header::{
    HeaderMap, HeaderValue, ACCEPT, ACCEPT_ENCODING, CONTENT_ENCODING, CONTENT_LENGTH,
    PROXY_AUTHORIZATION, USER_AGENT,
};
use http::uri::Scheme;
use http::{Request, StatusCode, Uri};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::proxy::Tunnel;
use hyper_util::client::legacy::connect::{Connected, Connection, HttpConnector};
use hyper_util::client::legacy::ResponseFuture;
use hyper_util::client::proxy::matcher::Matcher;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use tokio::net::TcpStream;
use tower::{Service, ServiceExt};

use crate::error::{find_in_chain, Error, ErrorKind, TimeoutCause};

type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Where requests go: straight, through one proxy, or as the environment says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ProxySetting {
    Direct,
    FromEnv,
    Url(String),
}

/// What the builder sets on the HTTP client.
pub(crate) struct HttpOptions {
    pub tls: rustls::ClientConfig,
    pub connect_timeout: Duration,
    pub user_agent: String,
    pub gzip: bool,
    pub proxy: ProxySetting,
}

/// A cheap handle on one connection pool.
#[derive(Clone)]
pub(crate) struct HttpClient {
    inner: Arc<Inner>,
}

struct Inner {
    client: Box<dyn Pool>,
    user_agent: HeaderValue,
    gzip: bool,
    proxies: Option<Arc<Matcher>>,
}

/// hyper's pooled client, as a trait object: what holds an [`HttpClient`]
/// (every client, its calls' futures, a program's own) then names this
/// handle rather than the connector stack under it, whose types (hyper's,
/// rustls's: hundreds) would be described again in the debug information of
/// each unit of code that does.
trait Pool: Send + Sync {
    fn request(&self, request: Request<Full<Bytes>>) -> ResponseFuture;
}

impl Pool for hyper_util::client::legacy::Client<HttpsConnector<ProxyConnector>, Full<Bytes>> {
    fn request(&self, request: Request<Full<Bytes>>) -> ResponseFuture {
        hyper_util::client::legacy::Client::request(self, request)
    }
}

/// Idle pooled connections are closed after this (vCenter's own idle
/// timeout is longer; closing first avoids reusing one it just closed).
const POOL_IDLE_TIMEOUT: Duration = Duration::from_secs(50);

impl HttpClient {
    pub(crate) fn new(options: HttpOptions) -> Result<Self, Error> {
        let user_agent = HeaderValue::from_str(&options.user_agent)
            .map_err(|e| Error::invalid_config("invalid User-Agent").with_source(e))?;
        let proxies = match &options.proxy {
            ProxySetting::Direct => None,
            ProxySetting::FromEnv => Some(Arc::new(Matcher::from_env())),
            ProxySetting::Url(url) => Some(Arc::new(explicit_proxy(url)?)),
        };
        let mut http = HttpConnector::new();
        http.enforce_http(false);
        http.set_nodelay(true);
        http.set_connect_timeout(Some(options.connect_timeout));
        let connector = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(options.tls)
            .https_or_http()
            .enable_http1()
            .wrap_connector(ProxyConnector {
                http,
                proxies: proxies.clone(),
            });
        let client = hyper_util::client::legacy::Client::builder(TokioExecutor::new())
            .pool_idle_timeout(POOL_IDLE_TIMEOUT)
            .pool_timer(TokioTimer::new())
            .build(connector);
        Ok(HttpClient {
            inner: Arc::new(Inner {
                client: Box::new(client),
                user_agent,
                gzip: options.gzip,
                proxies,
            }),
        })
    }

    /// Sends a request; the response's headers are in, its body is not.
    /// Errors name `request`'s URI.
    pub(crate) async fn send(&self, request: Request<Bytes>) -> Result<Response, Error> {
        let (mut head, body) = request.into_parts();
        let headers = &mut head.headers;
        headers
            .entry(USER_AGENT)
            .or_insert_with(|| self.inner.user_agent.clone());
        headers
            .entry(ACCEPT)
            .or_insert_with(|| HeaderValue::from_static("*/*"));
        if self.inner.gzip {
            headers
                .entry(ACCEPT_ENCODING)
                .or_insert_with(|| HeaderValue::from_static("gzip"));
        }
        if head.uri.scheme() == Some(&Scheme::HTTP) {
            // Through a proxy, a plain-http request goes to the proxy itself,
            // which is the one asking for credentials.
            let auth = self.inner.proxies.as_ref().and_then(|m| {
                m.intercept(&head.uri)
                    .and_then(|proxy| proxy.basic_auth().cloned())
            });
            if let Some(mut auth) = auth {
                auth.set_sensitive(true);
                head.headers.insert(PROXY_AUTHORIZATION, auth);
            }
        }
        let uri = head.uri.clone();
        let response = self
            .inner
            .client
            .request(Request::from_parts(head, Full::new(body)))
            .await
            .map_err(|e| request_error(e, &uri))?;
        let (head, body) = response.into_parts();
        let gzipped = self.inner.gzip
            && head
                .headers
                .get(CONTENT_ENCODING)
                .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"gzip"));
        Ok(Response {
            status: head.status,
            headers: head.headers,
            body,
            gunzip: gzipped.then(Gunzip::new),
            uri,
        })
    }
}

/// `uri` with another path (and no query).
pub(crate) fn with_path(uri: &Uri, path: &str) -> Result<Uri, Error> {
    let mut parts = http::uri::Parts::default();
    parts.scheme = uri.scheme().cloned();
    parts.authority = uri.authority().cloned();
    parts.path_and_query =
        Some(path.parse().map_err(|e| {
            Error::invalid_config(format!("invalid URL path {path:?}")).with_source(e)
        })?);
    Uri::from_parts(parts).map_err(|e| Error::invalid_config("invalid URL").with_source(e))
}

/// The matcher of a proxy given by URL (`http://[user:password@]host:port`).
fn explicit_proxy(url: &str) -> Result<Matcher, Error> {
    let invalid = || {
        Error::invalid_config(
            "invalid proxy URL (expected http://host:port: plain-http proxies only)",
        )
    };
    let uri: Uri = url.parse().map_err(|e| invalid().with_source(e))?;
    if uri.scheme_str() != Some("http") || uri.host().is_none() {
        return Err(invalid());
    }
    Ok(Matcher::builder().all(url.to_owned()).build())
}

/// A response whose body is read chunk by chunk.
pub(crate) struct Response {
    pub status: StatusCode,
    pub headers: HeaderMap,
    body: Incoming,
    gunzip: Option<Gunzip>,
    uri: Uri,
}

impl Response {
    /// The body's length as sent, when known and not compressed.
    pub(crate) fn content_length(&self) -> Option<u64> {
        if self.gunzip.is_some() {
            return None;
        }
        self.headers
            .get(CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse().ok())
    }

    /// The next piece of the body (decompressed), `None` at its end. Stops
    /// decompressing once a piece grows past `cap` bytes, so a small
    /// compressed body cannot expand unbounded in memory: the caller's size
    /// limit sees it.
    pub(crate) async fn chunk(&mut self, cap: u64) -> Result<Option<Bytes>, Error> {
        loop {
            let Some(frame) = self.body.frame().await else {
                return match self.gunzip.as_mut() {
                    Some(gunzip) => gunzip.finish().map_err(|e| self.gzip_error(e)),
                    None => Ok(None),
                };
            };
            let frame = frame.map_err(|e| self.body_error(e))?;
            let Ok(data) = frame.into_data() else {
                continue; // trailers
            };
            let data = match self.gunzip.as_mut() {
                None => data,
                Some(gunzip) => gunzip.push(&data, cap).map_err(|e| self.gzip_error(e))?,
            };
            if !data.is_empty() {
                return Ok(Some(data));
            }
        }
    }

    fn body_error(&self, err: hyper::Error) -> Error {
        let message = if err.is_timeout() {
            format!("reading the response from {} timed out", self.uri)
        } else {
            format!("reading the response from {} failed", self.uri)
        };
        Error::new(ErrorKind::Transport, message).with_source(err)
    }

    fn gzip_error(&self, err: io::Error) -> Error {
        Error::new(
            ErrorKind::Transport,
            format!("the gzip response body from {} is corrupt", self.uri),
        )
        .with_source(err)
    }
}

/// Streaming gzip decoding: compressed pieces in, decompressed pieces out.
struct Gunzip {
    decoder: flate2::write::GzDecoder<Vec<u8>>,
    finished: bool,
}

impl Gunzip {
    /// Input fed at a time: deflate expands at most ~1,000-fold, so a slice
    /// adds at most a few MB before the cap is checked again.
    const STEP: usize = 4096;

    fn new() -> Self {
        Gunzip {
            decoder: flate2::write::GzDecoder::new(Vec::new()),
            finished: false,
        }
    }

    fn push(&mut self, mut input: &[u8], cap: u64) -> io::Result<Bytes> {
        while !input.is_empty() && (self.decoder.get_ref().len() as u64) <= cap {
            let step = input.len().min(Self::STEP);
            self.decoder.write_all(&input[..step])?;
            input = &input[step..];
        }
        Ok(Bytes::from(std::mem::take(self.decoder.get_mut())))
    }

    /// The rest of the output once the body ended; checks the gzip trailer.
    fn finish(&mut self) -> io::Result<Option<Bytes>> {
        if self.finished {
            return Ok(None);
        }
        self.finished = true;
        self.decoder.try_finish()?;
        let rest = std::mem::take(self.decoder.get_mut());
        Ok((!rest.is_empty()).then(|| Bytes::from(rest)))
    }
}

/// Classifies a failed request: TLS, a connect timeout, a connection that
/// could not be made, or one that broke.
fn request_error(err: hyper_util::client::legacy::Error, uri: &Uri) -> Error {
    if let Some(tls) = find_in_chain::<rustls::Error>(&err) {
        let message = match tls {
            rustls::Error::InvalidCertificate(reason) => format!(
                "TLS certificate verification failed for {uri}: {}",
                crate::error::describe_certificate_error(reason)
            ),
            other => format!("TLS handshake with {uri} failed: {other}"),
        };
        return Error::new(ErrorKind::Tls, message).with_source(err);
    }
    if err.is_connect() {
        let timed_out =
            find_in_chain::<io::Error>(&err).is_some_and(|io| io.kind() == io::ErrorKind::TimedOut);
        if timed_out {
            return Error::timeout(
                TimeoutCause::Connect,
                format!("cannot connect to {uri}: the connect timeout passed"),
            )
            .with_source(err);
        }
        return Error::new(ErrorKind::Transport, format!("cannot connect to {uri}"))
            .with_source(err);
    }
    Error::new(
        ErrorKind::Transport,
        format!("HTTP request to {uri} failed"),
    )
    .with_source(err)
}

/// Whether an error's cause is a connection that was never made, so the
/// request cannot have reached the server.
pub(crate) fn is_connect_error(source: &(dyn std::error::Error + 'static)) -> bool {
    source
        .downcast_ref::<hyper_util::client::legacy::Error>()
        .is_some_and(hyper_util::client::legacy::Error::is_connect)
}

/// Connects straight, through a `CONNECT` tunnel (https through a proxy),
/// or to the proxy itself (http through a proxy, marked so that the pool
/// sends absolute-form requests).
#[derive(Clone)]
struct ProxyConnector {
    http: HttpConnector,
    proxies: Option<Arc<Matcher>>,
}

impl Service<Uri> for ProxyConnector {
    type Response = ProxiedStream;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<ProxiedStream, BoxError>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, dst: Uri) -> Self::Future {
        let proxy = self.proxies.as_ref().and_then(|m| m.intercept(&dst));
        let http = self.http.clone();
        Box::pin(async move {
            if let Some(scheme) = proxy
                .as_ref()
                .and_then(|p| p.uri().scheme_str())
                .filter(|s| *s != "http")
            {
                // An https:// or socks proxy from the environment: this
                // client speaks plain HTTP to proxies.
                return Err(format!(
                    "{scheme}:// proxies are not supported (set an http:// proxy, or NO_PROXY)"
                )
                .into());
            }
            let Some(proxy) = proxy else {
                let io = http.oneshot(dst).await?;
                return Ok(ProxiedStream { io, forward: false });
            };
            if dst.scheme() == Some(&Scheme::HTTPS) {
                let mut tunnel = Tunnel::new(proxy.uri().clone(), http);
                if let Some(auth) = proxy.basic_auth() {
                    tunnel = tunnel.with_auth(auth.clone());
                }
                let io = tunnel.oneshot(dst).await?;
                Ok(ProxiedStream { io, forward: false })
            } else {
                let io = http.oneshot(proxy.uri().clone()).await?;
                Ok(ProxiedStream { io, forward: true })
            }
        })
    }
}

/// A TCP connection, to the server or to a proxy that forwards requests.
struct ProxiedStream {
    io: TokioIo<TcpStream>,
    forward: bool,
}

impl Connection for ProxiedStream {
    fn connected(&self) -> Connected {
        self.io.connected().proxy(self.forward)
    }
}

impl hyper::rt::Read for ProxiedStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: hyper::rt::ReadBufCursor<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_read(cx, buf)
    }
}

impl hyper::rt::Write for ProxiedStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().io).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_shutdown(cx)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().io).poll_write_vectored(cx, bufs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gzip(data: &[u8]) -> Vec<u8> {
        let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        encoder.write_all(data).unwrap();
        encoder.finish().unwrap()
    }

    #[test]
    fn gzip_pieces_decode_to_the_body() {
        let body: Vec<u8> = (0..200_000u32)
            .flat_map(|i| (i % 251).to_le_bytes())
            .collect();
        let compressed = gzip(&body);
        let mut gunzip = Gunzip::new();
        let mut out = Vec::new();
        for piece in compressed.chunks(777) {
            out.extend_from_slice(&gunzip.push(piece, u64::MAX).unwrap());
        }
        if let Some(rest) = gunzip.finish().unwrap() {
            out.extend_from_slice(&rest);
        }
        assert_eq!(out, body);
        assert!(
            gunzip.finish().unwrap().is_none(),
            "the end is reported once"
        );
    }

    #[test]
    fn a_gzip_bomb_stops_at_the_cap() {
        let compressed = gzip(&vec![0u8; 64 << 20]);
        assert!(compressed.len() < 100_000, "{}", compressed.len());
        let mut gunzip = Gunzip::new();
        let out = gunzip.push(&compressed, 1 << 20).unwrap();
        assert!(
            out.len() > 1 << 20,
            "past the cap: the caller's limit fails it"
        );
        assert!(
            out.len() < 8 << 20,
            "stopped soon after the cap: {}",
            out.len()
        );
    }

    #[test]
    fn a_corrupt_or_truncated_gzip_body_is_an_error() {
        let compressed = gzip(b"<soapenv:Envelope/>");
        let mut truncated = Gunzip::new();
        truncated
            .push(&compressed[..compressed.len() - 6], u64::MAX)
            .unwrap();
        assert!(truncated.finish().is_err(), "a missing trailer is caught");
        let mut garbage = Gunzip::new();
        assert!(garbage.push(b"not gzip at all", u64::MAX).is_err());
    }

    #[tokio::test]
    async fn a_proxy_from_the_environment_that_is_not_http_is_refused_clearly() {
        let connector = ProxyConnector {
            http: HttpConnector::new(),
            proxies: Some(Arc::new(
                Matcher::builder().all("socks5://127.0.0.1:1080").build(),
            )),
        };
        let Err(err) = connector
            .oneshot("https://vc.example.com/sdk".parse().unwrap())
            .await
        else {
            panic!("connected through a socks proxy");
        };
        assert!(
            err.to_string()
                .contains("socks5:// proxies are not supported"),
            "{err}"
        );
    }

    #[test]
    fn proxy_urls_are_checked() {
        for bad in [
            "",
            "not a url",
            "ftp://proxy:21",
            "http://",
            "https://proxy:3128",
            "socks5://proxy:1080",
        ] {
            let err = explicit_proxy(bad).unwrap_err();
            assert_eq!(err.kind(), ErrorKind::InvalidConfig, "{bad}");
        }
        let proxy = explicit_proxy("http://user:pw@proxy.example.com:3128").unwrap();
        let intercept = proxy
            .intercept(&"https://vc.example.com/sdk".parse().unwrap())
            .expect("every request goes through it");
        assert_eq!(intercept.uri().host(), Some("proxy.example.com"));
        assert!(
            intercept.basic_auth().is_some(),
            "credentials kept for the proxy"
        );
    }
}
