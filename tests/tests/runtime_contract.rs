//! Contract tests of vsphere-client's runtime against a scripted server
//! (wiremock): what the simulator cannot do on demand (each fault, 503s,
//! broken bodies, a slow server, an expired session under load) and what
//! must never leak (passwords, session cookies).

use std::io::Write;
use std::time::{Duration, Instant};

use vsphere_client::types::{AnyMethodFault, ManagedObjectReference};
use vsphere_client::{Client, ClientBuilder, ErrorKind, RetryConfig};
use vsphere_tests::CapturedLogs;
use wiremock::matchers::{body_string_contains, header, method, path};
use wiremock::{Mock, MockServer, Request, ResponseTemplate};

const USER: &str = "administrator@vsphere.local";
const PASSWORD: &str = "Pa55-w0rd-that-must-never-leak";
const COOKIE_1: &str = "\"52f1e7c0-session-one-cookie-value\"";
const COOKIE_2: &str = "\"52f1e7c0-session-two-cookie-value\"";

fn envelope(body: &str) -> String {
    format!(
        r#"<?xml version="1.0" encoding="UTF-8"?>
<soapenv:Envelope xmlns:soapenc="http://schemas.xmlsoap.org/soap/encoding/" xmlns:soapenv="http://schemas.xmlsoap.org/soap/envelope/" xmlns:xsd="http://www.w3.org/2001/XMLSchema" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance">
<soapenv:Body>{body}</soapenv:Body></soapenv:Envelope>"#
    )
}

fn soap_ok(body: &str) -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_raw(envelope(body), "text/xml; charset=utf-8")
}

/// A vim25 fault as vCenter sends it: HTTP 500 with a SOAP Fault whose
/// detail names the fault type.
fn soap_fault(fault_type: &str, message: &str, fields: &str) -> ResponseTemplate {
    let body = format!(
        r#"<soapenv:Fault><faultcode>ServerFaultCode</faultcode><faultstring>{message}</faultstring><detail><{fault_type}Fault xmlns="urn:vim25" xsi:type="{fault_type}">{fields}</{fault_type}Fault></detail></soapenv:Fault>"#
    );
    ResponseTemplate::new(500).set_body_raw(envelope(&body), "text/xml; charset=utf-8")
}

fn not_authenticated() -> ResponseTemplate {
    soap_fault(
        "NotAuthenticated",
        "The session is not authenticated.",
        r#"<object type="Folder">group-d1</object><privilegeId>System.View</privilegeId>"#,
    )
}

const SERVICE_CONTENT: &str = r#"<RetrieveServiceContentResponse xmlns="urn:vim25"><returnval>
<rootFolder type="Folder">group-d1</rootFolder>
<propertyCollector type="PropertyCollector">propertyCollector</propertyCollector>
<about><name>VMware vCenter Server</name><fullName>VMware vCenter Server 8.0.2 build-22385739</fullName><vendor>VMware, Inc.</vendor><version>8.0.2</version><build>22385739</build><osType>linux-x64</osType><productLineId>vpx</productLineId><apiType>VirtualCenter</apiType><apiVersion>8.0.2.0</apiVersion><instanceUuid>5e0a3c18-0000-4000-8000-000000000001</instanceUuid></about>
<sessionManager type="SessionManager">SessionManager</sessionManager>
</returnval></RetrieveServiceContentResponse>"#;

fn service_versions(version: &str) -> String {
    format!(
        r#"<?xml version="1.0" encoding="UTF-8" ?><namespaces version="1.0"><namespace><name>urn:vim25</name><version>{version}</version><priorVersions><version>6.0</version></priorVersions></namespace></namespaces>"#
    )
}

fn login_ok(cookie: &str) -> ResponseTemplate {
    soap_ok(&format!(
        r#"<LoginResponse xmlns="urn:vim25"><returnval><key>{}</key><userName>{USER}</userName><fullName>Admin</fullName><loginTime>2024-01-01T00:00:00Z</loginTime><lastActiveTime>2024-01-01T00:00:00Z</lastActiveTime><locale>en</locale><messageLocale>en</messageLocale><extensionSession>false</extensionSession><ipAddress>127.0.0.1</ipAddress><userAgent>test</userAgent><callCount>1</callCount></returnval></LoginResponse>"#,
        cookie.trim_matches('"')
    ))
    .insert_header("Set-Cookie", format!("vmware_soap_session={cookie}; Path=/; HttpOnly; Secure;").as_str())
}

const CURRENT_TIME: &str = r#"<CurrentTimeResponse xmlns="urn:vim25"><returnval>2024-05-01T12:00:00.000Z</returnval></CurrentTimeResponse>"#;
const POWER_ON: &str = r#"<PowerOnVM_TaskResponse xmlns="urn:vim25"><returnval type="Task">task-101</returnval></PowerOnVM_TaskResponse>"#;

/// A scripted vCenter: version file, service content and login mounted.
struct MockVc {
    server: MockServer,
}

impl MockVc {
    async fn start() -> MockVc {
        Self::start_with_version(Some("8.0.2.0")).await
    }

    async fn start_with_version(version: Option<&str>) -> MockVc {
        let server = MockServer::start().await;
        let versions = match version {
            Some(v) => ResponseTemplate::new(200).set_body_string(service_versions(v)),
            None => ResponseTemplate::new(404).set_body_string("<html>Not found</html>"),
        };
        Mock::given(method("GET"))
            .and(path("/sdk/vimServiceVersions.xml"))
            .respond_with(versions)
            .mount(&server)
            .await;
        Mock::given(method("POST"))
            .and(body_string_contains("<RetrieveServiceContent"))
            .respond_with(soap_ok(SERVICE_CONTENT))
            .mount(&server)
            .await;
        MockVc { server }
    }

    /// Login answers with `cookie`, after `delay`.
    async fn accept_login(&self, cookie: &str, delay: Duration) {
        Mock::given(method("POST"))
            .and(body_string_contains("<Login "))
            .respond_with(login_ok(cookie).set_delay(delay))
            .mount(&self.server)
            .await;
    }

    fn url(&self) -> String {
        format!("{}/sdk", self.server.uri())
    }

    fn builder(&self) -> ClientBuilder {
        Client::builder(&self.url())
            .credentials(USER, PASSWORD)
            .keepalive(None)
            .retry(fast_retry(3))
    }

    /// Requests whose body contains `needle` (`"<Login "`, `"<CurrentTime"`).
    async fn count(&self, needle: &str) -> usize {
        self.requests(needle).await.len()
    }

    async fn requests(&self, needle: &str) -> Vec<Request> {
        self.server
            .received_requests()
            .await
            .unwrap_or_default()
            .into_iter()
            .filter(|r| String::from_utf8_lossy(&r.body).contains(needle))
            .collect()
    }
}

fn fast_retry(max_retries: u32) -> RetryConfig {
    RetryConfig {
        max_retries,
        initial_backoff: Duration::from_millis(5),
        max_backoff: Duration::from_millis(20),
    }
}

fn service_instance() -> ManagedObjectReference {
    ManagedObjectReference::new("ServiceInstance", "ServiceInstance")
}

fn vm() -> ManagedObjectReference {
    ManagedObjectReference::new("VirtualMachine", "vm-42")
}

async fn connected(vc: &MockVc) -> Client {
    vc.accept_login(COOKIE_1, Duration::ZERO).await;
    vc.builder().connect().await.expect("connect")
}

// --- connect, version negotiation, cookie ---------------------------------

#[tokio::test]
async fn connect_logs_in_and_announces_the_lower_version() {
    let vc = MockVc::start().await;
    let client = connected(&vc).await;
    assert_eq!(
        client.api_version(),
        "8.0.2.0",
        "server 8.0.2.0, bindings {}",
        vsphere_client::GENERATED_API_VERSION
    );
    assert_eq!(
        client.service_content().about.full_name,
        "VMware vCenter Server 8.0.2 build-22385739"
    );

    Mock::given(body_string_contains("<CurrentTime"))
        .and(header("SOAPAction", "urn:vim25/8.0.2.0"))
        .and(header(
            "Cookie",
            format!("vmware_soap_session={COOKIE_1}").as_str(),
        ))
        .respond_with(soap_ok(CURRENT_TIME))
        .mount(&vc.server)
        .await;
    client
        .vim()
        .current_time(&service_instance())
        .await
        .expect("CurrentTime with the session cookie");

    let logins = vc.requests("<Login ").await;
    assert_eq!(logins.len(), 1);
    assert_eq!(
        logins[0]
            .headers
            .get("SOAPAction")
            .and_then(|v| v.to_str().ok()),
        Some("urn:vim25/8.0.2.0")
    );
}

#[tokio::test]
async fn an_older_server_gets_its_own_version() {
    let vc = MockVc::start_with_version(Some("6.7.3")).await;
    let client = connected(&vc).await;
    assert_eq!(client.api_version(), "6.7.3");
    let logins = vc.requests("<Login ").await;
    assert_eq!(
        logins[0]
            .headers
            .get("SOAPAction")
            .and_then(|v| v.to_str().ok()),
        Some("urn:vim25/6.7.3")
    );
}

#[tokio::test]
async fn without_a_versions_file_the_about_version_is_used() {
    let vc = MockVc::start_with_version(None).await;
    // ServiceContent says 8.0.2.0, older than the bindings: it is announced.
    let client = connected(&vc).await;
    assert_eq!(client.api_version(), "8.0.2.0");
}

// --- faults ---------------------------------------------------------------

#[tokio::test]
async fn invalid_login_fails_connect_with_the_typed_fault() {
    let vc = MockVc::start().await;
    Mock::given(body_string_contains("<Login "))
        .respond_with(soap_fault(
            "InvalidLogin",
            "Cannot complete login due to an incorrect user name or password.",
            "",
        ))
        .mount(&vc.server)
        .await;
    let err = vc.builder().connect().await.expect_err("wrong password");
    // Recognisable as a wrong password, and still carrying the typed fault.
    assert_eq!(err.kind(), ErrorKind::InvalidLogin);
    assert!(err.is_fault::<vsphere_client::types::InvalidLogin>() && !err.is_not_authenticated());
    let fault = err.fault().expect("fault");
    assert_eq!(fault.type_name(), Some("InvalidLogin"));
    assert!(
        matches!(fault.detail(), Some(AnyMethodFault::InvalidLogin(_))),
        "{fault:?}"
    );
    assert_eq!(
        fault.message(),
        "Cannot complete login due to an incorrect user name or password."
    );
    let text = err.to_string();
    assert!(
        text.contains("Login")
            && text.contains("InvalidLogin")
            && text.contains("incorrect user name"),
        "{text}"
    );
    assert!(!text.contains(PASSWORD) && !format!("{err:?}").contains(PASSWORD));
    assert_eq!(
        vc.count("<Login ").await,
        1,
        "a wrong password is not retried"
    );
}

#[tokio::test]
async fn each_notable_fault_decodes_into_its_type() {
    let vc = MockVc::start().await;
    let client = connected(&vc).await;
    let cases = [
        (
            "ManagedObjectNotFound",
            "The object 'vim.VirtualMachine:vm-42' has already been deleted or has not been completely created",
            r#"<obj type="VirtualMachine">vm-42</obj>"#,
        ),
        ("DuplicateName", "The name 'web-01' already exists.", r#"<name>web-01</name><object type="Folder">group-v3</object>"#),
        ("TaskInProgress", "The operation is not allowed in the current state.", r#"<task type="Task">task-7</task>"#),
        ("FutureFaultFromVsphere9", "Something new went wrong.", r#"<newField>x</newField>"#),
    ];
    for (fault_type, message, fields) in cases {
        vc.server.reset().await;
        Mock::given(body_string_contains("<PowerOnVM_Task"))
            .respond_with(soap_fault(fault_type, message, fields))
            .mount(&vc.server)
            .await;
        let err = client
            .vim()
            .power_on_vm_task(&vm(), None)
            .await
            .expect_err(fault_type);
        assert_eq!(err.kind(), ErrorKind::Fault, "{fault_type}: {err:?}");
        assert_eq!(err.method(), Some("PowerOnVM_Task"));
        let fault = err.fault().expect("fault");
        assert_eq!(fault.type_name(), Some(fault_type));
        assert_eq!(fault.message(), message);
        assert!(err.to_string().contains(message), "{err}");
        match (fault_type, fault.detail()) {
            ("ManagedObjectNotFound", Some(AnyMethodFault::ManagedObjectNotFound(f))) => {
                assert_eq!(f.obj, vm());
            }
            ("DuplicateName", Some(AnyMethodFault::DuplicateName(f))) => {
                assert_eq!(f.name, "web-01");
            }
            ("TaskInProgress", Some(AnyMethodFault::TaskInProgress(f))) => {
                assert_eq!(f.task.value, "task-7");
            }
            // Unknown to the bindings: the base type, the real name kept.
            ("FutureFaultFromVsphere9", Some(AnyMethodFault::MethodFault(_))) => {}
            (_, other) => panic!("{fault_type} decoded as {other:?}"),
        }
    }
}

#[tokio::test]
async fn not_authenticated_without_credentials_is_reported_as_is() {
    let vc = MockVc::start().await;
    let client = Client::builder(&vc.url())
        .keepalive(None)
        .connect()
        .await
        .expect("anonymous connect");
    Mock::given(body_string_contains("<CurrentTime"))
        .respond_with(not_authenticated())
        .mount(&vc.server)
        .await;
    let err = client
        .vim()
        .current_time(&service_instance())
        .await
        .expect_err("no session");
    assert!(err.is_not_authenticated(), "{err:?}");
    assert!(matches!(
        err.fault().and_then(|f| f.detail()),
        Some(AnyMethodFault::NotAuthenticated(_))
    ));
    assert_eq!(vc.count("<Login ").await, 0);
}

// --- retries --------------------------------------------------------------

fn html_503() -> ResponseTemplate {
    ResponseTemplate::new(503).set_body_raw(
        "<!DOCTYPE html><html><head><title>503 Service Unavailable</title></head><body><h1>Too many outstanding operations</h1></body></html>",
        "text/html",
    )
}

#[tokio::test]
async fn an_idempotent_call_is_retried_after_a_503() {
    let vc = MockVc::start().await;
    let client = connected(&vc).await;
    Mock::given(body_string_contains("<CurrentTime"))
        .respond_with(html_503())
        .up_to_n_times(1)
        .with_priority(1)
        .mount(&vc.server)
        .await;
    Mock::given(body_string_contains("<CurrentTime"))
        .respond_with(soap_ok(CURRENT_TIME))
        .with_priority(2)
        .mount(&vc.server)
        .await;
    client
        .vim()
        .current_time(&service_instance())
        .await
        .expect("retried, then answered");
    assert_eq!(vc.count("<CurrentTime").await, 2);
}

#[tokio::test]
async fn a_non_idempotent_call_is_not_retried_after_a_503() {
    let vc = MockVc::start().await;
    let client = connected(&vc).await;
    Mock::given(body_string_contains("<PowerOnVM_Task"))
        .respond_with(html_503())
        .up_to_n_times(1)
        .with_priority(1)
        .mount(&vc.server)
        .await;
    Mock::given(body_string_contains("<PowerOnVM_Task"))
        .respond_with(soap_ok(POWER_ON))
        .with_priority(2)
        .mount(&vc.server)
        .await;
    let err = client
        .vim()
        .power_on_vm_task(&vm(), None)
        .await
        .expect_err("not retried");
    assert_eq!(err.kind(), ErrorKind::HttpStatus(503));
    assert_eq!(
        vc.count("<PowerOnVM_Task").await,
        1,
        "PowerOnVM_Task must be sent once"
    );
}

#[tokio::test]
async fn an_html_error_page_is_a_clear_error_and_retries_are_bounded() {
    let vc = MockVc::start().await;
    let client = connected(&vc).await;
    Mock::given(body_string_contains("<CurrentTime"))
        .respond_with(html_503())
        .mount(&vc.server)
        .await;
    let err = client
        .vim()
        .current_time(&service_instance())
        .await
        .expect_err("503 page");
    assert_eq!(err.kind(), ErrorKind::HttpStatus(503));
    let text = err.to_string();
    assert!(
        text.contains("503") && text.contains("not a SOAP response (text/html)"),
        "{text}"
    );
    assert!(
        text.contains("Too many outstanding operations"),
        "says what the server said: {text}"
    );
    assert_eq!(
        vc.count("<CurrentTime").await,
        4,
        "first attempt + 3 retries"
    );
}

#[tokio::test]
async fn a_200_html_page_is_not_soap() {
    let vc = MockVc::start().await;
    let client = connected(&vc).await;
    Mock::given(body_string_contains("<CurrentTime"))
        .respond_with(ResponseTemplate::new(200).set_body_raw(
            "<html><body>Captive portal: please log in</body></html>",
            "text/html",
        ))
        .mount(&vc.server)
        .await;
    let err = client
        .vim()
        .current_time(&service_instance())
        .await
        .expect_err("not SOAP");
    assert_eq!(err.kind(), ErrorKind::NotSoap);
    assert!(
        err.to_string().contains("not a SOAP response (text/html)"),
        "{err}"
    );
}

#[tokio::test]
async fn a_connection_refused_is_a_transport_error() {
    // A port nobody listens on: bind, note the port, close.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let started = Instant::now();
    let err = Client::builder(&format!("http://127.0.0.1:{port}/sdk"))
        .retry(fast_retry(2))
        .connect()
        .await
        .expect_err("nobody listens");
    assert_eq!(err.kind(), ErrorKind::Transport, "{err:?}");
    assert!(err.to_string().contains("cannot connect"), "{err}");
    assert!(started.elapsed() < Duration::from_secs(10));
}

// --- broken bodies ---------------------------------------------------------

#[tokio::test]
async fn a_truncated_body_is_a_decode_error() {
    let vc = MockVc::start().await;
    let client = connected(&vc).await;
    let full = envelope(SERVICE_CONTENT);
    let truncated = &full[..full.len() / 2];
    Mock::given(body_string_contains("<CurrentTime"))
        .respond_with(ResponseTemplate::new(200).set_body_raw(truncated, "text/xml"))
        .mount(&vc.server)
        .await;
    let err = client
        .vim()
        .current_time(&service_instance())
        .await
        .expect_err("truncated");
    assert_eq!(err.kind(), ErrorKind::Decode, "{err:?}");
    assert!(
        std::error::Error::source(&err).is_some(),
        "the decoder's error is kept as the source"
    );
}

#[tokio::test]
async fn a_body_over_the_limit_is_refused() {
    let vc = MockVc::start().await;
    vc.accept_login(COOKIE_1, Duration::ZERO).await;
    let client = vc
        .builder()
        .max_response_size(64 * 1024)
        .connect()
        .await
        .expect("connect");
    let padding = "x".repeat(1024 * 1024);
    let body = format!(
        r#"<CurrentTimeResponse xmlns="urn:vim25"><returnval>2024-05-01T12:00:00Z</returnval><pad>{padding}</pad></CurrentTimeResponse>"#
    );
    Mock::given(body_string_contains("<CurrentTime"))
        .respond_with(soap_ok(&body))
        .mount(&vc.server)
        .await;
    let err = client
        .vim()
        .current_time(&service_instance())
        .await
        .expect_err("too large");
    assert_eq!(err.kind(), ErrorKind::BodyTooLarge);
    assert!(err.to_string().contains("65536-byte limit"), "{err}");
}

/// A raw HTTP server for what wiremock cannot send: a chunked body that
/// never ends, or a body shorter than its Content-Length.
async fn raw_server(respond: fn(&mut std::net::TcpStream)) -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/sdk", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for stream in listener.incoming().take(8) {
            let Ok(mut stream) = stream else { return };
            let _ = stream.set_read_timeout(Some(Duration::from_millis(200)));
            let mut buf = [0u8; 65536];
            let _ = std::io::Read::read(&mut stream, &mut buf);
            respond(&mut stream);
        }
    });
    url
}

#[tokio::test]
async fn an_endless_chunked_body_stops_at_the_limit() {
    let url = raw_server(|stream| {
        let _ = stream.write_all(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/xml\r\nTransfer-Encoding: chunked\r\n\r\n",
        );
        let chunk = vec![b'<'; 16 * 1024];
        // Up to 1 GiB: the client must hang up long before.
        for _ in 0..65536 {
            if stream
                .write_all(format!("{:x}\r\n", chunk.len()).as_bytes())
                .is_err()
                || stream.write_all(&chunk).is_err()
                || stream.write_all(b"\r\n").is_err()
            {
                return;
            }
        }
    })
    .await;
    let started = Instant::now();
    let err = Client::builder(&url)
        .max_response_size(1024 * 1024)
        .retry(RetryConfig::none())
        .connect()
        .await
        .expect_err("endless body");
    // The version file is read with a 1 MiB cap too; either way: too large
    // or no version file, and then RetrieveServiceContent is too large.
    assert_eq!(err.kind(), ErrorKind::BodyTooLarge, "{err:?}");
    assert!(started.elapsed() < Duration::from_secs(20));
}

#[tokio::test]
async fn a_body_shorter_than_its_length_is_a_transport_error() {
    let url = raw_server(|stream| {
        let _ = stream.write_all(b"HTTP/1.1 200 OK\r\nContent-Type: text/xml\r\nContent-Length: 5000\r\nConnection: close\r\n\r\n<?xml version=\"1.0\"?><soapenv:Envelope");
        let _ = stream.flush();
    })
    .await;
    let err = Client::builder(&url)
        .api_version("7.0.3.0")
        .retry(RetryConfig::none())
        .connect()
        .await
        .expect_err("cut short");
    assert_eq!(err.kind(), ErrorKind::Transport, "{err:?}");
}

// --- timeouts ---------------------------------------------------------------

#[tokio::test]
async fn a_slow_server_times_out_with_bounded_retries() {
    let vc = MockVc::start().await;
    vc.accept_login(COOKIE_1, Duration::ZERO).await;
    let client = vc
        .builder()
        .call_timeout(Some(Duration::from_millis(300)))
        .retry(fast_retry(1))
        .connect()
        .await
        .expect("connect");
    Mock::given(body_string_contains("<CurrentTime"))
        .respond_with(soap_ok(CURRENT_TIME).set_delay(Duration::from_secs(5)))
        .mount(&vc.server)
        .await;
    let started = Instant::now();
    let err = client
        .vim()
        .current_time(&service_instance())
        .await
        .expect_err("slow");
    let waited = started.elapsed();
    assert_eq!(err.kind(), ErrorKind::Timeout, "{err:?}");
    assert!(
        waited >= Duration::from_millis(600),
        "two attempts of 300 ms: {waited:?}"
    );
    assert!(waited < Duration::from_secs(3), "{waited:?}");
    assert_eq!(vc.count("<CurrentTime").await, 2);
}

#[tokio::test]
async fn a_slow_non_idempotent_call_times_out_without_retry() {
    let vc = MockVc::start().await;
    vc.accept_login(COOKIE_1, Duration::ZERO).await;
    let client = vc
        .builder()
        .call_timeout(Some(Duration::from_millis(300)))
        .connect()
        .await
        .expect("connect");
    Mock::given(body_string_contains("<PowerOnVM_Task"))
        .respond_with(soap_ok(POWER_ON).set_delay(Duration::from_secs(5)))
        .mount(&vc.server)
        .await;
    let err = client
        .vim()
        .power_on_vm_task(&vm(), None)
        .await
        .expect_err("slow");
    assert_eq!(err.kind(), ErrorKind::Timeout);
    assert_eq!(
        vc.count("<PowerOnVM_Task").await,
        1,
        "may have run: never sent twice"
    );
}

// --- sessions --------------------------------------------------------------

/// Mounts the "session 1 expired" world: calls with cookie 1 get
/// NotAuthenticated, Login hands out cookie 2 (slowly, so concurrent
/// callers pile up behind it), calls with cookie 2 succeed.
async fn expire_session(vc: &MockVc) {
    vc.server.reset().await;
    Mock::given(body_string_contains("<CurrentTime"))
        .and(header(
            "Cookie",
            format!("vmware_soap_session={COOKIE_1}").as_str(),
        ))
        .respond_with(not_authenticated())
        .mount(&vc.server)
        .await;
    Mock::given(body_string_contains("<CurrentTime"))
        .and(header(
            "Cookie",
            format!("vmware_soap_session={COOKIE_2}").as_str(),
        ))
        .respond_with(soap_ok(CURRENT_TIME))
        .mount(&vc.server)
        .await;
    vc.accept_login(COOKIE_2, Duration::from_millis(200)).await;
}

#[tokio::test]
async fn an_expired_session_is_renewed_transparently() {
    let vc = MockVc::start().await;
    let client = connected(&vc).await;
    expire_session(&vc).await;
    client
        .vim()
        .current_time(&service_instance())
        .await
        .expect("re-login and retry");
    assert_eq!(vc.count("<Login ").await, 1, "one re-login");
    assert_eq!(
        vc.count("<CurrentTime").await,
        2,
        "the failed call and its retry"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_concurrent_calls_on_an_expired_session_log_in_once() {
    let vc = MockVc::start().await;
    let client = connected(&vc).await;
    expire_session(&vc).await;
    let calls = (0..50).map(|_| {
        let client = client.clone();
        tokio::spawn(async move { client.vim().current_time(&service_instance()).await })
    });
    let results = futures_join_all(calls).await;
    for result in &results {
        assert!(result.is_ok(), "{result:?}");
    }
    assert_eq!(
        vc.count("<Login ").await,
        1,
        "exactly one login for 50 callers"
    );
    assert_eq!(
        vc.count("<CurrentTime").await,
        100,
        "each call: one rejected, one retried"
    );
}

async fn futures_join_all<T: Send + 'static>(
    handles: impl Iterator<Item = tokio::task::JoinHandle<Result<T, vsphere_client::Error>>>,
) -> Vec<Result<T, String>> {
    let mut out = Vec::new();
    for handle in handles.collect::<Vec<_>>() {
        out.push(match handle.await {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(e)) => Err(e.to_string()),
            Err(e) => Err(format!("task panicked: {e}")),
        });
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_callers_behind_a_failed_relogin_do_not_storm() {
    let vc = MockVc::start().await;
    let client = connected(&vc).await;
    vc.server.reset().await;
    Mock::given(body_string_contains("<CurrentTime"))
        .respond_with(not_authenticated())
        .mount(&vc.server)
        .await;
    Mock::given(body_string_contains("<Login "))
        .respond_with(
            soap_fault("InvalidLogin", "Login failure", "").set_delay(Duration::from_millis(200)),
        )
        .mount(&vc.server)
        .await;
    let calls = (0..20).map(|_| {
        let client = client.clone();
        tokio::spawn(async move { client.vim().current_time(&service_instance()).await })
    });
    let results = futures_join_all(calls).await;
    assert!(results.iter().all(|r| r.is_err()));
    assert_eq!(
        vc.count("<Login ").await,
        1,
        "the password was changed: one failed login, not 20"
    );
}

#[tokio::test]
async fn the_keepalive_logs_in_again_when_the_session_died() {
    let vc = MockVc::start().await;
    vc.accept_login(COOKIE_1, Duration::ZERO).await;
    let client = vc
        .builder()
        .keepalive(Some(Duration::from_millis(200)))
        .connect()
        .await
        .expect("connect");
    // The server forgot the session: currentSession comes back unset.
    Mock::given(body_string_contains("<RetrievePropertiesEx"))
        .respond_with(soap_ok(r#"<RetrievePropertiesExResponse xmlns="urn:vim25"><returnval><objects><obj type="SessionManager">SessionManager</obj></objects></returnval></RetrievePropertiesExResponse>"#))
        .mount(&vc.server)
        .await;
    let deadline = Instant::now() + Duration::from_secs(5);
    while vc.count("<Login ").await < 2 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        vc.count("<RetrievePropertiesEx").await >= 1,
        "the keepalive checked the session"
    );
    assert_eq!(
        vc.count("<Login ").await,
        2,
        "connect + one keepalive re-login"
    );
    drop(client);
}

#[tokio::test]
async fn close_logs_out_and_stops_relogging_in() {
    let vc = MockVc::start().await;
    let client = connected(&vc).await;
    Mock::given(body_string_contains("<Logout"))
        .respond_with(soap_ok(
            r#"<LogoutResponse xmlns="urn:vim25"></LogoutResponse>"#,
        ))
        .mount(&vc.server)
        .await;
    Mock::given(body_string_contains("<CurrentTime"))
        .respond_with(not_authenticated())
        .mount(&vc.server)
        .await;
    client.close().await.expect("logout");
    let logouts = vc.requests("<Logout").await;
    assert_eq!(logouts.len(), 1);
    assert_eq!(
        logouts[0]
            .headers
            .get("Cookie")
            .and_then(|v| v.to_str().ok()),
        Some(format!("vmware_soap_session={COOKIE_1}").as_str())
    );
    let err = client
        .vim()
        .current_time(&service_instance())
        .await
        .expect_err("closed");
    assert_eq!(err.kind(), ErrorKind::NotAuthenticated, "{err:?}");
    assert_eq!(vc.count("<Login ").await, 1, "no login after close");
}

#[tokio::test]
async fn logout_on_drop_logs_out_when_the_last_handle_goes() {
    let vc = MockVc::start().await;
    vc.accept_login(COOKIE_1, Duration::ZERO).await;
    Mock::given(body_string_contains("<Logout"))
        .respond_with(soap_ok(
            r#"<LogoutResponse xmlns="urn:vim25"></LogoutResponse>"#,
        ))
        .mount(&vc.server)
        .await;
    let client = vc
        .builder()
        .logout_on_drop(true)
        .connect()
        .await
        .expect("connect");
    let clone = client.clone();
    drop(client);
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(vc.count("<Logout").await, 0, "a clone is still alive");
    drop(clone);
    let deadline = Instant::now() + Duration::from_secs(5);
    while vc.count("<Logout").await == 0 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(vc.count("<Logout").await, 1);
}

// --- secrets ---------------------------------------------------------------

#[tokio::test]
async fn secrets_never_appear_in_trace_output_errors_or_debug() {
    let captured = CapturedLogs::default();
    let subscriber = captured.subscriber(tracing::Level::TRACE);
    let _guard = tracing::subscriber::set_default(subscriber);

    let vc = MockVc::start().await;
    // Login, a call, an expired session and a re-login, a failing call.
    let client = connected(&vc).await;
    expire_session(&vc).await;
    client
        .vim()
        .current_time(&service_instance())
        .await
        .expect("re-login");
    Mock::given(body_string_contains("<PowerOnVM_Task"))
        .respond_with(soap_fault(
            "InvalidState",
            "The operation is not allowed in the current state.",
            "",
        ))
        .mount(&vc.server)
        .await;
    let err = client
        .vim()
        .power_on_vm_task(&vm(), None)
        .await
        .expect_err("fault");
    // A failed login with the password in the URL.
    let url_with_password = vc
        .url()
        .replace("http://", &format!("http://{}:{}@", "root", PASSWORD));
    Mock::given(body_string_contains("<Login "))
        .and(body_string_contains("<userName>root</userName>"))
        .respond_with(soap_fault("InvalidLogin", "Login failure", ""))
        .with_priority(1)
        .mount(&vc.server)
        .await;
    let login_err = Client::builder(&url_with_password)
        .keepalive(None)
        .connect()
        .await
        .expect_err("bad login");

    let log = captured.text();
    assert!(
        log.contains("vsphere_client::wire"),
        "the wire log was on: {log}"
    );
    assert!(
        log.contains("<Login") && log.contains("RetrieveServiceContent"),
        "bodies were logged"
    );
    assert!(
        log.contains("<redacted>"),
        "the password element was blanked"
    );
    let debug_output = format!("{client:?} {err:?} {login_err:?} {} {}", err, login_err);
    for secret in [
        PASSWORD,
        COOKIE_1.trim_matches('"'),
        COOKIE_2.trim_matches('"'),
    ] {
        assert!(
            !log.contains(secret),
            "{secret} leaked into the trace output"
        );
        assert!(
            !debug_output.contains(secret),
            "{secret} leaked into Debug/Display: {debug_output}"
        );
    }
}

// --- transport options ------------------------------------------------------

#[tokio::test]
async fn gzip_responses_are_asked_for_and_decoded() {
    let vc = MockVc::start().await;
    let client = connected(&vc).await;
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    encoder
        .write_all(envelope(CURRENT_TIME).as_bytes())
        .unwrap();
    let compressed = encoder.finish().unwrap();
    Mock::given(body_string_contains("<CurrentTime"))
        .and(header("Accept-Encoding", "gzip"))
        .respond_with(
            ResponseTemplate::new(200)
                .insert_header("Content-Encoding", "gzip")
                .set_body_raw(compressed, "text/xml; charset=utf-8"),
        )
        .mount(&vc.server)
        .await;
    let time = client
        .vim()
        .current_time(&service_instance())
        .await
        .expect("gzip body decoded");
    assert!(
        time.to_string().starts_with("2024-05-01T12:00:00"),
        "{time}"
    );
}

#[tokio::test]
async fn the_concurrency_limit_queues_calls() {
    let vc = MockVc::start().await;
    vc.accept_login(COOKIE_1, Duration::ZERO).await;
    let client = vc
        .builder()
        .concurrency_limit(2)
        .connect()
        .await
        .expect("connect");
    Mock::given(body_string_contains("<CurrentTime"))
        .respond_with(soap_ok(CURRENT_TIME).set_delay(Duration::from_millis(300)))
        .mount(&vc.server)
        .await;
    let started = Instant::now();
    let calls: Vec<_> = (0..6)
        .map(|_| {
            let client = client.clone();
            tokio::spawn(async move { client.vim().current_time(&service_instance()).await })
        })
        .collect();
    for result in futures_join_all(calls.into_iter()).await {
        result.expect("call");
    }
    let waited = started.elapsed();
    // 6 calls, 2 at a time, 300 ms each: three rounds.
    assert!(waited >= Duration::from_millis(900), "{waited:?}");
    assert!(waited < Duration::from_secs(10), "{waited:?}");
}

#[tokio::test]
async fn an_explicit_proxy_carries_the_calls() {
    // The vCenter address is a loopback port nobody listens on: only the
    // proxy (the mock) can answer.
    let vc = MockVc::start().await;
    vc.accept_login(COOKIE_1, Duration::ZERO).await;
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let client = Client::builder(&format!("http://127.0.0.1:{port}/sdk"))
        .credentials(USER, PASSWORD)
        .keepalive(None)
        .proxy(vc.server.uri())
        .connect()
        .await
        .expect("through the proxy");
    assert_eq!(client.service_content().about.api_type, "VirtualCenter");
    let logins = vc.requests("<Login ").await;
    assert_eq!(logins.len(), 1);
    assert_eq!(
        logins[0].url.port(),
        Some(port),
        "the proxy was asked for the vCenter URL"
    );
}
