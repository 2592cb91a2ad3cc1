//! The REST (Automation API) side ends every call by its deadline, retries
//! included, like the SOAP side (`deadline_contract.rs`): a body trickling,
//! a body that stops after the headers, a server that accepts and never
//! answers; each through a safe call (`list tags`, retried) and an unsafe
//! one (`create category`, never sent twice). A small raw HTTP/1.1 server
//! (wiremock cannot trickle or stop mid-body) answers the SOAP connect and
//! the REST login at once and misbehaves on the tagging paths.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use vsphere_client::rest::{Cardinality, CategorySpec, RestClient};
use vsphere_client::{Client, Error, ErrorKind, RetryConfig, TimeoutCause};

#[derive(Clone, Copy, Debug, PartialEq)]
enum Behaviour {
    Answer,
    /// Headers, then the body one byte per 200 ms.
    Trickle,
    /// Headers with a Content-Length, then nothing.
    HeadersOnly,
    /// Reads the request, never answers.
    Silent,
}

const SERVICE_CONTENT: &str = r#"<?xml version="1.0" encoding="UTF-8"?><soapenv:Envelope xmlns:soapenv="http://schemas.xmlsoap.org/soap/envelope/"><soapenv:Body><RetrieveServiceContentResponse xmlns="urn:vim25"><returnval><rootFolder type="Folder">group-d1</rootFolder><propertyCollector type="PropertyCollector">propertyCollector</propertyCollector><about><name>VMware vCenter Server</name><fullName>VMware vCenter Server 8.0.2 build-22385739</fullName><apiType>VirtualCenter</apiType><apiVersion>8.0.2.0</apiVersion></about><sessionManager type="SessionManager">SessionManager</sessionManager></returnval></RetrieveServiceContentResponse></soapenv:Body></soapenv:Envelope>"#;

#[derive(Clone)]
struct RawRest {
    url: String,
    behaviour: Arc<Mutex<Behaviour>>,
    /// Requests per `METHOD /path`.
    counts: Arc<Mutex<HashMap<String, usize>>>,
}

impl RawRest {
    async fn start() -> RawRest {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let server = RawRest {
            url: format!("http://{addr}/sdk"),
            behaviour: Arc::new(Mutex::new(Behaviour::Answer)),
            counts: Arc::new(Mutex::new(HashMap::new())),
        };
        let serving = server.clone();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                tokio::spawn(serving.clone().serve(stream));
            }
        });
        server
    }

    fn set(&self, behaviour: Behaviour) {
        *self.behaviour.lock().unwrap() = behaviour;
    }

    fn count(&self, request: &str) -> usize {
        self.counts
            .lock()
            .unwrap()
            .get(request)
            .copied()
            .unwrap_or(0)
    }

    async fn serve(self, mut stream: TcpStream) {
        let mut buffer = Vec::new();
        loop {
            let Some((head_len, body_len)) = read_request(&mut stream, &mut buffer).await else {
                return;
            };
            let head = String::from_utf8_lossy(&buffer[..head_len]).to_string();
            buffer.drain(..head_len + body_len);
            let mut words = head.split_whitespace();
            let method = words.next().unwrap_or("").to_string();
            let path = words
                .next()
                .unwrap_or("")
                .split('?')
                .next()
                .unwrap_or("")
                .to_string();
            let key = format!("{method} {path}");
            *self.counts.lock().unwrap().entry(key).or_default() += 1;
            let (content_type, body, wedged) = match (method.as_str(), path.as_str()) {
                ("POST", "/sdk") => ("text/xml", SERVICE_CONTENT.to_string(), false),
                ("POST", "/api/session") => {
                    ("application/json", "\"rest-session-id\"".to_string(), false)
                }
                ("GET", "/api/cis/tagging/tag") => {
                    ("application/json", "[\"urn:tag-1\"]".to_string(), true)
                }
                ("POST", "/api/cis/tagging/category") => {
                    ("application/json", "\"urn:category-1\"".to_string(), true)
                }
                _ => ("application/json", String::new(), false),
            };
            let status = if body.is_empty() {
                "404 Not Found"
            } else {
                "200 OK"
            };
            let headers = format!(
                "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n\r\n",
                body.len()
            );
            let behaviour = if wedged {
                *self.behaviour.lock().unwrap()
            } else {
                Behaviour::Answer
            };
            match behaviour {
                Behaviour::Answer => {
                    if stream
                        .write_all(format!("{headers}{body}").as_bytes())
                        .await
                        .is_err()
                    {
                        return;
                    }
                }
                Behaviour::Trickle => {
                    if stream.write_all(headers.as_bytes()).await.is_err() {
                        return;
                    }
                    // Far more bytes than the body has: the trickle never ends.
                    loop {
                        tokio::time::sleep(Duration::from_millis(200)).await;
                        if stream.write_all(b" ").await.is_err() {
                            return;
                        }
                    }
                }
                Behaviour::HeadersOnly => {
                    let _ = stream.write_all(headers.as_bytes()).await;
                    return hold(stream).await;
                }
                Behaviour::Silent => return hold(stream).await,
            }
        }
    }
}

async fn hold(mut stream: TcpStream) {
    let mut sink = [0u8; 1024];
    while matches!(stream.read(&mut sink).await, Ok(n) if n > 0) {}
}

async fn read_request(stream: &mut TcpStream, buffer: &mut Vec<u8>) -> Option<(usize, usize)> {
    let mut chunk = [0u8; 8192];
    loop {
        if let Some(end) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
            let head_len = end + 4;
            let head = String::from_utf8_lossy(&buffer[..head_len]).to_ascii_lowercase();
            let body_len = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse::<usize>().ok())
                .unwrap_or(0);
            while buffer.len() < head_len + body_len {
                let n = stream.read(&mut chunk).await.ok().filter(|n| *n > 0)?;
                buffer.extend_from_slice(&chunk[..n]);
            }
            return Some((head_len, body_len));
        }
        let n = stream.read(&mut chunk).await.ok().filter(|n| *n > 0)?;
        buffer.extend_from_slice(&chunk[..n]);
    }
}

const TAGS: &str = "GET /api/cis/tagging/tag";
const CREATE: &str = "POST /api/cis/tagging/category";
const SLACK: Duration = Duration::from_millis(700);

/// The SOAP client's short bounds (1 s body pause, 1 KiB/s over 2 s, 3 s
/// per attempt, 5 s per call, quick retries), which the REST client takes.
async fn rest_client(server: &RawRest) -> RestClient {
    let soap = Client::builder(&server.url)
        .api_version("8.0.2.0")
        .anonymous()
        .no_proxy()
        .body_idle_timeout(Some(Duration::from_secs(1)))
        .min_body_rate(1024, Duration::from_secs(2))
        .call_timeout(Some(Duration::from_secs(3)))
        .call_deadline(Some(Duration::from_secs(5)))
        .retry(RetryConfig {
            max_retries: 3,
            initial_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_millis(200),
        })
        .connect()
        .await
        .expect("connect");
    RestClient::builder(&soap)
        .credentials("administrator@vsphere.local", "secret")
        .keepalive(None)
        .connect()
        .await
        .expect("REST login")
}

async fn safe_call(rest: &RestClient) -> (Result<(), Error>, Duration) {
    let started = Instant::now();
    let result = rest.tagging().list_tags().await.map(|_| ());
    (result, started.elapsed())
}

async fn unsafe_call(rest: &RestClient) -> (Result<(), Error>, Duration) {
    let started = Instant::now();
    let spec = CategorySpec::new("zone", Cardinality::Single);
    let result = rest.tagging().create_category(&spec).await.map(|_| ());
    (result, started.elapsed())
}

fn timed_out(result: Result<(), Error>, cause: TimeoutCause) -> String {
    let err = result.expect_err("the call must fail");
    let text = err.report().to_string();
    assert_eq!(err.kind(), ErrorKind::Timeout, "{text}");
    assert_eq!(err.timeout_cause(), Some(cause), "{text}");
    text
}

#[tokio::test]
async fn answers_pass_with_these_bounds() {
    let server = RawRest::start().await;
    let rest = rest_client(&server).await;
    let (result, _) = safe_call(&rest).await;
    result.expect("list tags");
    let (result, _) = unsafe_call(&rest).await;
    result.expect("create category");
}

#[tokio::test]
async fn a_trickling_body_is_cut_and_a_safe_call_retried_only_within_the_deadline() {
    let server = RawRest::start().await;
    let rest = rest_client(&server).await;
    server.set(Behaviour::Trickle);
    let (result, took) = safe_call(&rest).await;
    let text = timed_out(result, TimeoutCause::BodyTooSlow);
    assert!(took <= Duration::from_secs(5) + SLACK, "{took:?}");
    // Attempts end at ~2 s and ~4.2 s; a third has no room before 5 s.
    assert_eq!(server.count(TAGS), 2, "{text}");
    assert!(text.contains("not tried again"), "{text}");
}

#[tokio::test]
async fn a_trickling_body_fails_an_unsafe_call_once() {
    let server = RawRest::start().await;
    let rest = rest_client(&server).await;
    server.set(Behaviour::Trickle);
    let (result, took) = unsafe_call(&rest).await;
    let text = timed_out(result, TimeoutCause::BodyTooSlow);
    assert!(took <= Duration::from_secs(2) + SLACK, "{took:?}");
    assert_eq!(server.count(CREATE), 1, "never sent twice");
    assert!(text.contains("may have reached the server"), "{text}");
}

#[tokio::test]
async fn a_body_that_stops_is_cut_as_idle_and_a_safe_call_retried_within_the_deadline() {
    let server = RawRest::start().await;
    let rest = rest_client(&server).await;
    server.set(Behaviour::HeadersOnly);
    let (result, took) = safe_call(&rest).await;
    let err = result.expect_err("the call must fail");
    let text = err.report().to_string();
    assert_eq!(err.kind(), ErrorKind::Timeout, "{text}");
    // 1 s idle per attempt, retried while a retry fits before 5 s; the last
    // one may be cut by the deadline itself.
    assert!(
        matches!(
            err.timeout_cause(),
            Some(TimeoutCause::BodyIdle | TimeoutCause::CallDeadline)
        ),
        "{text}"
    );
    assert!(took <= Duration::from_secs(5) + SLACK, "{took:?}");
    assert_eq!(server.count(TAGS), 4, "1 + 3 retries of 1 s each: {text}");
}

#[tokio::test]
async fn a_body_that_stops_fails_an_unsafe_call_once() {
    let server = RawRest::start().await;
    let rest = rest_client(&server).await;
    server.set(Behaviour::HeadersOnly);
    let (result, took) = unsafe_call(&rest).await;
    let text = timed_out(result, TimeoutCause::BodyIdle);
    assert!(took <= Duration::from_secs(1) + SLACK, "{took:?}");
    assert_eq!(server.count(CREATE), 1, "never sent twice");
    assert!(text.contains("may have reached the server"), "{text}");
}

#[tokio::test]
async fn a_silent_server_ends_a_safe_call_at_its_deadline() {
    let server = RawRest::start().await;
    let rest = rest_client(&server).await;
    server.set(Behaviour::Silent);
    let (result, took) = safe_call(&rest).await;
    let text = timed_out(result, TimeoutCause::CallDeadline);
    // The first attempt is cut at 3 s, the retry by the deadline at 5 s.
    assert!(
        took >= Duration::from_secs(5) && took <= Duration::from_secs(5) + SLACK,
        "{took:?}"
    );
    assert_eq!(server.count(TAGS), 2, "{text}");
    assert!(text.contains("the call deadline (5s) passed"), "{text}");
}

#[tokio::test]
async fn a_silent_server_ends_an_unsafe_call_at_its_attempt_timeout_once() {
    let server = RawRest::start().await;
    let rest = rest_client(&server).await;
    server.set(Behaviour::Silent);
    let (result, took) = unsafe_call(&rest).await;
    let text = timed_out(result, TimeoutCause::AttemptTimeout);
    assert!(took <= Duration::from_secs(3) + SLACK, "{took:?}");
    assert_eq!(server.count(CREATE), 1, "never sent twice");
    assert!(text.contains("within the call timeout (3s)"), "{text}");
    assert!(text.contains("may have reached the server"), "{text}");
}

#[tokio::test]
async fn the_soap_handle_deadline_or_the_builders_bounds_rest_calls() {
    let server = RawRest::start().await;
    let soap = Client::builder(&server.url)
        .api_version("8.0.2.0")
        .anonymous()
        .no_proxy()
        .connect()
        .await
        .expect("connect");
    server.set(Behaviour::Silent);
    // The SOAP handle's deadline (defaults otherwise: 5 min per attempt).
    let rest = RestClient::builder(&soap.with_call_deadline(Duration::from_millis(1500)))
        .credentials("administrator@vsphere.local", "secret")
        .keepalive(None)
        .connect()
        .await
        .expect("REST login");
    let (result, took) = safe_call(&rest).await;
    let text = timed_out(result, TimeoutCause::CallDeadline);
    assert!(took <= Duration::from_millis(1500) + SLACK, "{took:?}");
    assert!(text.contains("the call deadline (1.5s) passed"), "{text}");
    // The REST builder's own.
    let rest = RestClient::builder(&soap)
        .credentials("administrator@vsphere.local", "secret")
        .keepalive(None)
        .call_deadline(Some(Duration::from_secs(1)))
        .connect()
        .await
        .expect("REST login");
    let (result, took) = unsafe_call(&rest).await;
    let text = timed_out(result, TimeoutCause::CallDeadline);
    assert!(took <= Duration::from_secs(1) + SLACK, "{took:?}");
    assert!(text.contains("the call deadline (1s) passed"), "{text}");
    assert_eq!(server.count(CREATE), 1, "never sent twice");
}
