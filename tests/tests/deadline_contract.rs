//! Every call ends by its deadline, retries included, against servers that
//! misbehave in ways a half-dead load balancer or a wedged vCenter does: a
//! body trickling one byte per second, a body that stops after the headers,
//! a connection accepted and never answered. Each through a safe
//! (retried) call, `CurrentTime`, and an unsafe one, `PowerOnVM_Task`, which
//! must never be sent twice. The server is a small raw HTTP/1.1 server
//! (wiremock cannot trickle or stop mid-body), counting requests per
//! operation and connections.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use vsphere_client::types::{ManagedObjectReference, WaitOptions};
use vsphere_client::{Client, ClientBuilder, Error, ErrorKind, RetryConfig, TimeoutCause};

/// What the server does with the next request.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Behaviour {
    /// Answers at once (a `WaitForUpdatesEx` after `long_poll`).
    Answer,
    /// Sends the headers, then the body one byte per `trickle_every`
    /// (one second unless a test sets it).
    Trickle,
    /// Sends the headers (with a Content-Length) and nothing more.
    HeadersOnly,
    /// Reads the request and never answers.
    Silent,
}

struct State {
    behaviour: Behaviour,
    counts: HashMap<String, usize>,
    long_poll: Duration,
    trickle_every: Duration,
}

#[derive(Clone)]
struct RawVc {
    url: String,
    state: Arc<Mutex<State>>,
    connections: Arc<AtomicUsize>,
}

const SERVICE_CONTENT: &str = r#"<RetrieveServiceContentResponse xmlns="urn:vim25"><returnval><rootFolder type="Folder">group-d1</rootFolder><propertyCollector type="PropertyCollector">propertyCollector</propertyCollector><about><name>VMware vCenter Server</name><fullName>VMware vCenter Server 8.0.2 build-22385739</fullName><apiType>VirtualCenter</apiType><apiVersion>8.0.2.0</apiVersion></about><sessionManager type="SessionManager">SessionManager</sessionManager></returnval></RetrieveServiceContentResponse>"#;
const CURRENT_TIME: &str = r#"<CurrentTimeResponse xmlns="urn:vim25"><returnval>2024-05-01T12:00:00.000Z</returnval></CurrentTimeResponse>"#;
const POWER_ON: &str = r#"<PowerOnVM_TaskResponse xmlns="urn:vim25"><returnval type="Task">task-101</returnval></PowerOnVM_TaskResponse>"#;
const WAIT_FOR_UPDATES: &str =
    r#"<WaitForUpdatesExResponse xmlns="urn:vim25"></WaitForUpdatesExResponse>"#;
const NO_SESSION: &str = r#"<RetrievePropertiesExResponse xmlns="urn:vim25"><returnval><objects><obj type="SessionManager">SessionManager</obj></objects></returnval></RetrievePropertiesExResponse>"#;

fn envelope(body: &str) -> String {
    format!(
        r#"<?xml version="1.0" encoding="UTF-8"?><soapenv:Envelope xmlns:soapenv="http://schemas.xmlsoap.org/soap/envelope/" xmlns:xsd="http://www.w3.org/2001/XMLSchema" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"><soapenv:Body>{body}</soapenv:Body></soapenv:Envelope>"#
    )
}

/// The operation of a SOAP request body: the first element in `Body`.
fn operation(body: &str) -> String {
    let Some(at) = body.find("Body>") else {
        return String::new();
    };
    let rest = body[at + 5..].trim_start().trim_start_matches('<');
    rest.split([' ', '>', '/']).next().unwrap_or("").to_string()
}

impl RawVc {
    async fn start() -> RawVc {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let vc = RawVc {
            url: format!("http://{addr}/sdk"),
            state: Arc::new(Mutex::new(State {
                behaviour: Behaviour::Answer,
                counts: HashMap::new(),
                long_poll: Duration::ZERO,
                trickle_every: Duration::from_secs(1),
            })),
            connections: Arc::new(AtomicUsize::new(0)),
        };
        let server = vc.clone();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                server.connections.fetch_add(1, Ordering::SeqCst);
                tokio::spawn(server.clone().serve(stream));
            }
        });
        vc
    }

    fn set(&self, behaviour: Behaviour) {
        self.state.lock().unwrap().behaviour = behaviour;
    }

    /// A trickle of 5 bytes/s, for the short bounds (its bytes come more
    /// often than their 1 s idle timeout; far below their 1 KiB/s).
    fn trickle_fast(&self) {
        self.state.lock().unwrap().trickle_every = Duration::from_millis(200);
    }

    fn count(&self, op: &str) -> usize {
        self.state
            .lock()
            .unwrap()
            .counts
            .get(op)
            .copied()
            .unwrap_or(0)
    }

    fn builder(&self) -> ClientBuilder {
        Client::builder(&self.url)
            .api_version("8.0.2.0")
            .anonymous()
            .no_proxy()
    }

    /// Serves one connection until it closes; a wedged answer holds it forever.
    async fn serve(self, mut stream: TcpStream) {
        let mut buffer = Vec::new();
        loop {
            let Some((head_len, body_len)) = read_request(&mut stream, &mut buffer).await else {
                return;
            };
            let request = String::from_utf8_lossy(&buffer[head_len..head_len + body_len]);
            let head = String::from_utf8_lossy(&buffer[..head_len]).to_string();
            let op = operation(&request);
            buffer.drain(..head_len + body_len);
            let (behaviour, long_poll, trickle_every) = {
                let mut state = self.state.lock().unwrap();
                *state.counts.entry(op.clone()).or_default() += 1;
                (state.behaviour, state.long_poll, state.trickle_every)
            };
            let body = envelope(match op.as_str() {
                "RetrieveServiceContent" => SERVICE_CONTENT,
                "CurrentTime" => CURRENT_TIME,
                "PowerOnVM_Task" => POWER_ON,
                "WaitForUpdatesEx" => WAIT_FOR_UPDATES,
                "RetrievePropertiesEx" => NO_SESSION,
                _ => "",
            });
            let (status, body) = if head.starts_with("GET ") {
                ("404 Not Found", String::new())
            } else {
                ("200 OK", body)
            };
            let headers = format!(
                "HTTP/1.1 {status}\r\nContent-Type: text/xml; charset=utf-8\r\nContent-Length: {}\r\n\r\n",
                body.len()
            );
            match behaviour {
                Behaviour::Answer => {
                    if op == "WaitForUpdatesEx" {
                        tokio::time::sleep(long_poll).await;
                    }
                    let reply = format!("{headers}{body}");
                    if stream.write_all(reply.as_bytes()).await.is_err() {
                        return;
                    }
                }
                Behaviour::Trickle => {
                    if stream.write_all(headers.as_bytes()).await.is_err() {
                        return;
                    }
                    for byte in body.as_bytes() {
                        tokio::time::sleep(trickle_every).await;
                        if stream.write_all(&[*byte]).await.is_err() {
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

/// Keeps a wedged connection open (as a half-dead proxy does) until the
/// client closes it.
async fn hold(mut stream: TcpStream) {
    let mut sink = [0u8; 1024];
    while matches!(stream.read(&mut sink).await, Ok(n) if n > 0) {}
}

/// Reads one request into `buffer`: the length of its head and of its body.
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

fn service_instance() -> ManagedObjectReference {
    ManagedObjectReference {
        type_: "ServiceInstance".into(),
        value: "ServiceInstance".into(),
    }
}

fn vm() -> ManagedObjectReference {
    ManagedObjectReference {
        type_: "VirtualMachine".into(),
        value: "vm-42".into(),
    }
}

/// Short bounds, the defaults' shape scaled down: a 1 s body pause, 1 KiB/s
/// over 2 s, 3 s per attempt, 5 s per call; quick retries.
async fn short_bounds(vc: &RawVc) -> Client {
    vc.builder()
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
        .expect("connect")
}

async fn safe_call(client: &Client) -> (Result<(), Error>, Duration) {
    let started = Instant::now();
    let result = client.vim().current_time(&service_instance()).await;
    (result.map(|_| ()), started.elapsed())
}

async fn unsafe_call(client: &Client) -> (Result<(), Error>, Duration) {
    let started = Instant::now();
    let result = client.vim().power_on_vm_task(&vm(), None).await;
    (result.map(|_| ()), started.elapsed())
}

fn timed_out(result: Result<(), Error>) -> Error {
    let err = result.expect_err("the call must fail");
    assert_eq!(err.kind(), ErrorKind::Timeout, "{}", err.report());
    err
}

const SLACK: Duration = Duration::from_millis(700);

// --- a body trickling one byte per second ---------------------------------

#[tokio::test]
async fn a_trickling_body_fails_as_too_slow_and_a_safe_call_retries_only_within_the_deadline() {
    let vc = RawVc::start().await;
    let client = short_bounds(&vc).await;
    vc.trickle_fast();
    vc.set(Behaviour::Trickle);
    let (result, took) = safe_call(&client).await;
    let err = timed_out(result);
    assert_eq!(
        err.timeout_cause(),
        Some(TimeoutCause::BodyTooSlow),
        "{}",
        err.report()
    );
    assert!(took <= Duration::from_secs(5) + SLACK, "{took:?}");
    // Attempts end at ~2 s and ~4.2 s; a third would need its backoff and
    // a 1 s attempt before 5 s.
    assert_eq!(vc.count("CurrentTime"), 2, "{}", err.report());
    let text = err.report().to_string();
    assert!(text.contains("too slowly"), "{text}");
    assert!(text.contains("not tried again"), "{text}");
}

#[tokio::test]
async fn a_trickling_body_fails_an_unsafe_call_once() {
    let vc = RawVc::start().await;
    let client = short_bounds(&vc).await;
    vc.trickle_fast();
    vc.set(Behaviour::Trickle);
    let (result, took) = unsafe_call(&client).await;
    let err = timed_out(result);
    assert_eq!(err.timeout_cause(), Some(TimeoutCause::BodyTooSlow));
    assert!(took <= Duration::from_secs(2) + SLACK, "{took:?}");
    assert_eq!(vc.count("PowerOnVM_Task"), 1, "never sent twice");
    let text = err.report().to_string();
    assert!(text.contains("may have reached the server"), "{text}");
}

/// The default bounds: a trickle is cut within a minute (45 s window).
#[tokio::test]
async fn with_the_defaults_a_trickle_is_cut_within_a_minute() {
    let vc = RawVc::start().await;
    let client = vc.builder().connect().await.expect("connect");
    vc.set(Behaviour::Trickle);
    let (result, took) = unsafe_call(&client).await;
    let err = timed_out(result);
    assert_eq!(err.timeout_cause(), Some(TimeoutCause::BodyTooSlow));
    assert!(
        took >= Duration::from_secs(44) && took <= Duration::from_secs(47),
        "{took:?}"
    );
    assert_eq!(vc.count("PowerOnVM_Task"), 1);
}

// --- a body that stops after the headers -------------------------------------

#[tokio::test]
async fn a_body_that_stops_fails_as_idle_and_a_safe_call_is_retried_within_the_deadline() {
    let vc = RawVc::start().await;
    let client = short_bounds(&vc).await;
    vc.set(Behaviour::HeadersOnly);
    let (result, took) = safe_call(&client).await;
    let err = timed_out(result);
    assert!(took <= Duration::from_secs(5) + SLACK, "{took:?}");
    let cause = err.timeout_cause();
    assert!(
        matches!(
            cause,
            Some(TimeoutCause::BodyIdle | TimeoutCause::CallDeadline)
        ),
        "{cause:?}: {}",
        err.report()
    );
    // 1 s per attempt and ~0.1-0.2 s of backoff: 1 + 3 attempts fit in 5 s.
    assert_eq!(vc.count("CurrentTime"), 4, "{}", err.report());
    assert!(
        err.report().to_string().contains("stopped"),
        "{}",
        err.report()
    );
}

#[tokio::test]
async fn a_body_that_stops_fails_an_unsafe_call_once() {
    let vc = RawVc::start().await;
    let client = short_bounds(&vc).await;
    vc.set(Behaviour::HeadersOnly);
    let (result, took) = unsafe_call(&client).await;
    let err = timed_out(result);
    assert_eq!(err.timeout_cause(), Some(TimeoutCause::BodyIdle));
    assert!(took <= Duration::from_secs(1) + SLACK, "{took:?}");
    assert_eq!(vc.count("PowerOnVM_Task"), 1, "never sent twice");
}

/// The default bounds: a body that stops is cut after 30 s.
#[tokio::test]
async fn with_the_defaults_a_stopped_body_is_cut_after_30_seconds() {
    let vc = RawVc::start().await;
    let client = vc.builder().connect().await.expect("connect");
    vc.set(Behaviour::HeadersOnly);
    let (result, took) = unsafe_call(&client).await;
    let err = timed_out(result);
    assert_eq!(err.timeout_cause(), Some(TimeoutCause::BodyIdle));
    assert!(
        took >= Duration::from_secs(29) && took <= Duration::from_secs(32),
        "{took:?}"
    );
    assert_eq!(vc.count("PowerOnVM_Task"), 1);
}

// --- a connection accepted and never answered --------------------------------

#[tokio::test]
async fn a_silent_server_ends_a_safe_call_at_its_deadline() {
    let vc = RawVc::start().await;
    let client = short_bounds(&vc).await;
    vc.set(Behaviour::Silent);
    let (result, took) = safe_call(&client).await;
    let err = timed_out(result);
    // The first attempt is cut at 3 s, the retry by the deadline at 5 s.
    assert_eq!(
        err.timeout_cause(),
        Some(TimeoutCause::CallDeadline),
        "{}",
        err.report()
    );
    assert!(
        took >= Duration::from_secs(5) && took <= Duration::from_secs(5) + SLACK,
        "{took:?}"
    );
    assert_eq!(vc.count("CurrentTime"), 2);
    assert!(
        err.report()
            .to_string()
            .contains("the call deadline (5s) passed"),
        "{}",
        err.report()
    );
}

#[tokio::test]
async fn a_silent_server_ends_an_unsafe_call_at_its_attempt_timeout_once() {
    let vc = RawVc::start().await;
    let client = short_bounds(&vc).await;
    vc.set(Behaviour::Silent);
    let (result, took) = unsafe_call(&client).await;
    let err = timed_out(result);
    assert_eq!(err.timeout_cause(), Some(TimeoutCause::AttemptTimeout));
    assert!(took <= Duration::from_secs(3) + SLACK, "{took:?}");
    assert_eq!(vc.count("PowerOnVM_Task"), 1, "never sent twice");
    assert!(err
        .report()
        .to_string()
        .contains("may have reached the server"));
}

#[tokio::test]
async fn a_retry_that_cannot_finish_before_the_deadline_is_not_started() {
    let vc = RawVc::start().await;
    let client = short_bounds(&vc).await;
    vc.set(Behaviour::Silent);
    // 3 s attempt, then 0.1-0.2 s backoff + 1 s minimum attempt > 3.5 s.
    let hasty = client.with_call_deadline(Duration::from_millis(3500));
    let (result, took) = safe_call(&hasty).await;
    let err = timed_out(result);
    assert_eq!(err.timeout_cause(), Some(TimeoutCause::AttemptTimeout));
    assert!(took <= Duration::from_secs(3) + SLACK, "{took:?}");
    assert_eq!(vc.count("CurrentTime"), 1);
    assert!(
        err.report().to_string().contains("not tried again"),
        "{}",
        err.report()
    );
}

#[tokio::test]
async fn a_per_handle_deadline_bounds_every_call_of_that_handle() {
    let vc = RawVc::start().await;
    let client = vc.builder().connect().await.expect("connect");
    assert_eq!(
        client.call_deadline(),
        Some(vsphere_client::DEFAULT_CALL_DEADLINE)
    );
    vc.set(Behaviour::Silent);
    let bounded = client.with_call_deadline(Duration::from_millis(1500));
    let (result, took) = safe_call(&bounded).await;
    let err = timed_out(result);
    assert_eq!(err.timeout_cause(), Some(TimeoutCause::CallDeadline));
    assert!(
        took >= Duration::from_millis(1500) && took <= Duration::from_millis(1500) + SLACK,
        "{took:?}"
    );
    // The 5-minute attempt would have been retried; the deadline left no room.
    assert_eq!(vc.count("CurrentTime"), 1);
}

// --- what must not be cut ---------------------------------------------------

/// A long poll is bounded by its own wait, not by the client's deadline.
#[tokio::test]
async fn a_long_poll_outlasts_the_call_deadline_by_its_max_wait() {
    let vc = RawVc::start().await;
    let client = short_bounds(&vc).await;
    let hasty = client.with_call_deadline(Duration::from_secs(1));
    vc.state.lock().unwrap().long_poll = Duration::from_secs(3);
    let collector = ManagedObjectReference {
        type_: "PropertyCollector".into(),
        value: "session[x]pc".into(),
    };
    let options = WaitOptions {
        max_wait_seconds: Some(3),
        ..Default::default()
    };
    let started = Instant::now();
    let set = hasty
        .vim()
        .wait_for_updates_ex(&collector, Some("1"), Some(&options))
        .await
        .expect("answered after its 3 s wait");
    assert!(set.is_none());
    assert!(started.elapsed() >= Duration::from_secs(3));
    assert_eq!(vc.count("WaitForUpdatesEx"), 1);
}

// --- keepalive and reconnecting ------------------------------------------------

/// The session check notices a wedged server within its bound, and once the
/// server answers again the next call succeeds on a new connection (the
/// wedged one is never answered: the client gave it up).
#[tokio::test]
async fn the_session_check_notices_a_dead_server_and_the_next_call_reconnects() {
    let vc = RawVc::start().await;
    let client = short_bounds(&vc).await;
    safe_call(&client).await.0.expect("answered");
    let before = vc.connections.load(Ordering::SeqCst);
    vc.set(Behaviour::Silent);
    let started = Instant::now();
    let err = client
        .with_call_deadline(Duration::from_secs(2))
        .check_session()
        .await
        .expect_err("a silent server");
    assert_eq!(err.kind(), ErrorKind::Timeout, "{}", err.report());
    assert!(started.elapsed() <= Duration::from_secs(2) + SLACK);

    vc.set(Behaviour::Answer);
    let (result, took) = safe_call(&client).await;
    result.expect("the server answers again");
    assert!(took < Duration::from_secs(1), "{took:?}");
    assert!(
        vc.connections.load(Ordering::SeqCst) > before,
        "a new connection: the wedged one stays unanswered"
    );
}
