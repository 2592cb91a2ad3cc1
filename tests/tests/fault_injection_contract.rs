//! Fault injection against a scripted vCenter (a small HTTP server written
//! here, because wiremock cannot tell how many requests it is serving at
//! once): a vCenter that answers 503 "Too many outstanding operations" for a
//! while, under 20 concurrent callers and a concurrency limit.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use vsphere_client::types::ManagedObjectReference;
use vsphere_client::{Client, ErrorKind, RetryConfig};

const GUARD: Duration = Duration::from_secs(60);

fn envelope(body: &str) -> String {
    format!(
        r#"<?xml version="1.0" encoding="UTF-8"?><soapenv:Envelope xmlns:soapenv="http://schemas.xmlsoap.org/soap/envelope/" xmlns:xsd="http://www.w3.org/2001/XMLSchema" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"><soapenv:Body>{body}</soapenv:Body></soapenv:Envelope>"#
    )
}

const SERVICE_CONTENT: &str = r#"<RetrieveServiceContentResponse xmlns="urn:vim25"><returnval><rootFolder type="Folder">group-d1</rootFolder><propertyCollector type="PropertyCollector">propertyCollector</propertyCollector><about><name>VMware vCenter Server</name><fullName>VMware vCenter Server 8.0.2 build-22385739</fullName><vendor>VMware, Inc.</vendor><version>8.0.2</version><build>22385739</build><osType>linux-x64</osType><productLineId>vpx</productLineId><apiType>VirtualCenter</apiType><apiVersion>8.0.2.0</apiVersion><instanceUuid>5e0a3c18-0000-4000-8000-000000000001</instanceUuid></about><sessionManager type="SessionManager">SessionManager</sessionManager></returnval></RetrieveServiceContentResponse>"#;
const LOGIN: &str = r#"<LoginResponse xmlns="urn:vim25"><returnval><key>k</key><userName>u</userName><fullName>U</fullName><loginTime>2024-01-01T00:00:00Z</loginTime><lastActiveTime>2024-01-01T00:00:00Z</lastActiveTime></returnval></LoginResponse>"#;
const CURRENT_TIME: &str = r#"<CurrentTimeResponse xmlns="urn:vim25"><returnval>2024-05-01T12:00:00.000Z</returnval></CurrentTimeResponse>"#;
const POWER_ON: &str = r#"<PowerOnVM_TaskResponse xmlns="urn:vim25"><returnval type="Task">task-101</returnval></PowerOnVM_TaskResponse>"#;
const BUSY: &str = "<html><body><h1>503 Service Unavailable</h1><p>Too many outstanding operations</p></body></html>";

/// What the scripted vCenter saw.
#[derive(Default)]
struct Stats {
    in_flight: AtomicUsize,
    max_in_flight: AtomicUsize,
    /// 503s still to give to the busy methods before answering normally.
    busy_left: AtomicUsize,
    /// (when, method, status) of every SOAP request.
    log: Mutex<Vec<(Instant, &'static str, u16)>>,
}

impl Stats {
    fn count(&self, method: &str, status: Option<u16>) -> usize {
        self.log
            .lock()
            .unwrap()
            .iter()
            .filter(|(_, m, s)| *m == method && status.is_none_or(|want| want == *s))
            .count()
    }
}

/// A vCenter that serves each busy-method request (`CurrentTime`,
/// `PowerOnVM_Task`) for `hold`, answering 503 while `busy_left` lasts.
async fn scripted_vcenter(hold: Duration, busy: usize) -> (String, Arc<Stats>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = format!("http://{}/sdk", listener.local_addr().expect("addr"));
    let stats = Arc::new(Stats::default());
    stats.busy_left.store(busy, Ordering::SeqCst);
    let shared = stats.clone();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            tokio::spawn(serve_connection(stream, shared.clone(), hold));
        }
    });
    (url, stats)
}

/// HTTP/1.1 with keep-alive: requests one after the other on a connection.
async fn serve_connection(stream: TcpStream, stats: Arc<Stats>, hold: Duration) {
    let mut stream = BufReader::new(stream);
    loop {
        let mut request_line = String::new();
        if stream.read_line(&mut request_line).await.unwrap_or(0) == 0 {
            return;
        }
        let mut length = 0usize;
        loop {
            let mut line = String::new();
            if stream.read_line(&mut line).await.unwrap_or(0) == 0 {
                return;
            }
            if line == "\r\n" {
                break;
            }
            if let Some((name, value)) = line.split_once(':') {
                if name.eq_ignore_ascii_case("content-length") {
                    length = value.trim().parse().unwrap_or(0);
                }
            }
        }
        let mut body = vec![0u8; length];
        if stream.read_exact(&mut body).await.is_err() {
            return;
        }
        let (status, content_type, text) =
            answer(&request_line, &String::from_utf8_lossy(&body), &stats, hold).await;
        let response = format!(
            "HTTP/1.1 {status} {}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nSet-Cookie: vmware_soap_session=\"scripted-cookie\"; Path=/\r\n\r\n{text}",
            if status == 200 { "OK" } else { "Service Unavailable" },
            text.len()
        );
        if stream
            .get_mut()
            .write_all(response.as_bytes())
            .await
            .is_err()
        {
            return;
        }
    }
}

async fn answer(
    request_line: &str,
    body: &str,
    stats: &Stats,
    hold: Duration,
) -> (u16, &'static str, String) {
    const XML: &str = "text/xml; charset=utf-8";
    if request_line.starts_with("GET") {
        // No vimServiceVersions.xml: the client goes by the service content.
        return (404, "text/html", "<html>Not found</html>".into());
    }
    let (method, ok_body) = if body.contains("<RetrieveServiceContent") {
        ("RetrieveServiceContent", SERVICE_CONTENT)
    } else if body.contains("<Login") {
        ("Login", LOGIN)
    } else if body.contains("<CurrentTime") {
        ("CurrentTime", CURRENT_TIME)
    } else if body.contains("<PowerOnVM_Task") {
        ("PowerOnVM_Task", POWER_ON)
    } else {
        ("other", "")
    };
    let busy_method = matches!(method, "CurrentTime" | "PowerOnVM_Task");
    let status = if busy_method {
        let now = stats.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        stats.max_in_flight.fetch_max(now, Ordering::SeqCst);
        tokio::time::sleep(hold).await;
        let busy = stats
            .busy_left
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok();
        // Out of flight before the answer leaves: the client cannot send
        // its next request before it has this one.
        stats.in_flight.fetch_sub(1, Ordering::SeqCst);
        if busy {
            503
        } else {
            200
        }
    } else {
        200
    };
    stats
        .log
        .lock()
        .unwrap()
        .push((Instant::now(), method, status));
    if status == 503 {
        (503, "text/html", BUSY.into())
    } else {
        (200, XML, envelope(ok_body))
    }
}

fn service_instance() -> ManagedObjectReference {
    ManagedObjectReference::new("ServiceInstance", "ServiceInstance")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_busy_vcenter_is_waited_out_with_backoff_within_the_concurrency_limit() {
    const LIMIT: usize = 4;
    const CALLERS: usize = 20;
    const BUSY_ANSWERS: usize = 12;
    tokio::time::timeout(GUARD, async {
        let (url, stats) = scripted_vcenter(Duration::from_millis(40), BUSY_ANSWERS).await;
        let client = Client::builder(&url)
            .credentials("user", "password")
            .keepalive(None)
            .concurrency_limit(LIMIT)
            .retry(RetryConfig {
                max_retries: 5,
                initial_backoff: Duration::from_millis(100),
                max_backoff: Duration::from_secs(1),
            })
            .connect()
            .await
            .expect("connect");
        let started = Instant::now();
        let calls: Vec<_> = (0..CALLERS)
            .map(|_| {
                let client = client.clone();
                tokio::spawn(async move { client.vim().current_time(&service_instance()).await })
            })
            .collect();
        for call in calls {
            call.await
                .expect("no panic")
                .expect("every call succeeds once the storm is over");
        }
        let elapsed = started.elapsed();

        let max = stats.max_in_flight.load(Ordering::SeqCst);
        assert!(
            max <= LIMIT,
            "{max} requests in flight at once, limit {LIMIT}"
        );
        assert!(max >= 2, "the callers did run concurrently ({max} at most)");
        assert_eq!(stats.count("CurrentTime", Some(503)), BUSY_ANSWERS);
        assert_eq!(
            stats.count("CurrentTime", Some(200)),
            CALLERS,
            "one success per caller"
        );
        // A retry holds its permit while it backs off, so the first LIMIT
        // callers take the storm in rounds (12 / 4 = 3 each): each waited at
        // least 100 + 200 + 400 ms. Retrying at once would take ~3 x 40 ms.
        assert!(
            elapsed >= Duration::from_millis(700),
            "backoff between retries: {elapsed:?}"
        );
        let first_503 = stats
            .log
            .lock()
            .unwrap()
            .iter()
            .find(|(_, _, s)| *s == 503)
            .map(|(t, _, _)| *t)
            .expect("503s");
        let last_503 = stats
            .log
            .lock()
            .unwrap()
            .iter()
            .rev()
            .find(|(_, _, s)| *s == 503)
            .map(|(t, _, _)| *t)
            .expect("503s");
        assert!(
            last_503 - first_503 >= Duration::from_millis(300),
            "the busy answers were spread by backoff: {:?}",
            last_503 - first_503
        );
    })
    .await
    .expect("the test hung");
}

#[tokio::test]
async fn a_vcenter_busy_for_longer_than_the_retries_gives_a_clear_error_and_stops() {
    tokio::time::timeout(GUARD, async {
        let (url, stats) = scripted_vcenter(Duration::ZERO, usize::MAX).await;
        let client = Client::builder(&url)
            .credentials("user", "password")
            .keepalive(None)
            .retry(RetryConfig {
                max_retries: 3,
                initial_backoff: Duration::from_millis(20),
                max_backoff: Duration::from_millis(100),
            })
            .connect()
            .await
            .expect("connect");
        let err = client
            .vim()
            .current_time(&service_instance())
            .await
            .expect_err("always busy");
        assert_eq!(err.kind(), ErrorKind::HttpStatus(503), "{err:?}");
        assert!(
            err.to_string().contains("Too many outstanding operations"),
            "{err}"
        );
        assert_eq!(
            stats.count("CurrentTime", None),
            4,
            "first attempt + 3 retries, no more"
        );
        // A call that may not be repeated is sent once, busy or not.
        let vm = ManagedObjectReference::new("VirtualMachine", "vm-42");
        let err = client
            .vim()
            .power_on_vm_task(&vm, None)
            .await
            .expect_err("busy");
        assert_eq!(err.kind(), ErrorKind::HttpStatus(503));
        assert_eq!(stats.count("PowerOnVM_Task", None), 1);
    })
    .await
    .expect("the test hung");
}
