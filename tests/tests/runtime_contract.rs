//! Contract tests of vsphere-client's runtime against a scripted vCenter
//! (the project's test kit, `vsphere-testkit`): what the simulator cannot
//! do on demand (each fault, 503s, broken bodies, a slow server, an
//! expired session under load) and what must never leak (passwords,
//! session cookies). Raw bytes only where they are the point: bodies that
//! are not SOAP, cut short or endless, a fault type the bindings do not
//! know.

use std::io::Write;
use std::time::{Duration, Instant};

use vsphere_client::types::{
    AboutInfo, AnyMethodFault, CurrentTimeRequestType, DuplicateName, InvalidLogin, InvalidState,
    LoginRequestType, LogoutRequestType, ManagedObjectNotFound, ManagedObjectReference,
    ObjectContent, PowerOnVMRequestType, RetrievePropertiesExRequestType, RetrieveResult,
    TaskInProgress,
};
use vsphere_client::xml::soap::encode_response_envelope;
use vsphere_client::{Client, DateTime, ErrorKind, RetryConfig};
use vsphere_testkit::{MockVCenter, MockVCenterBuilder, Reply};
use vsphere_tests::CapturedLogs;
use wiremock::ResponseTemplate;

const USER: &str = "administrator@vsphere.local";
const PASSWORD: &str = "Pa55-w0rd-that-must-never-leak";

/// A vCenter 8.0.2 (older than the bindings) accepting USER / PASSWORD,
/// whose version file says `file` (none: 404).
fn vcenter_with(file: Option<&str>) -> MockVCenterBuilder {
    MockVCenter::builder()
        .credentials(USER, PASSWORD)
        .api_version(file)
        .about(AboutInfo {
            name: "VMware vCenter Server".to_string(),
            full_name: "VMware vCenter Server 8.0.2 build-22385739".to_string(),
            vendor: "VMware, Inc.".to_string(),
            version: "8.0.2".to_string(),
            build: "22385739".to_string(),
            api_type: "VirtualCenter".to_string(),
            api_version: "8.0.2.0".to_string(),
            ..AboutInfo::default()
        })
}

async fn vcenter() -> MockVCenter {
    vcenter_with(Some("8.0.2.0")).start().await
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

fn noon() -> DateTime {
    DateTime::new("2024-05-01T12:00:00.000Z")
}

fn task() -> ManagedObjectReference {
    ManagedObjectReference::new("Task", "task-101")
}

fn header<'r>(request: &'r wiremock::Request, name: &str) -> Option<&'r str> {
    request.headers.get(name).and_then(|v| v.to_str().ok())
}

/// The `Cookie` header a request with session `cookie` carries.
fn session_header(cookie: &str) -> String {
    format!("vmware_soap_session=\"{cookie}\"")
}

// --- connect, version negotiation, cookie ---------------------------------

#[tokio::test]
async fn connect_logs_in_and_announces_the_lower_version() {
    let vc = vcenter().await;
    vc.on::<CurrentTimeRequestType>().returns(noon()).await;
    let client = vc.client().await;
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
    client
        .vim()
        .current_time(&service_instance())
        .await
        .expect("CurrentTime with the session cookie");

    let logins = vc.received_raw::<LoginRequestType>().await;
    assert_eq!(logins.len(), 1);
    assert_eq!(header(&logins[0], "SOAPAction"), Some("urn:vim25/8.0.2.0"));
    let calls = vc.received_raw::<CurrentTimeRequestType>().await;
    assert_eq!(calls.len(), 1, "accepted at once");
    assert_eq!(header(&calls[0], "SOAPAction"), Some("urn:vim25/8.0.2.0"));
    let cookies = vc.session_cookies();
    assert_eq!(
        header(&calls[0], "Cookie"),
        Some(session_header(&cookies[0]).as_str()),
        "the cookie Login set"
    );
}

#[tokio::test]
async fn an_older_server_gets_its_own_version() {
    // The version file says 6.7.3, the service content 8.0.2.0: the file wins.
    let vc = vcenter_with(Some("6.7.3")).start().await;
    let client = vc.client().await;
    assert_eq!(client.api_version(), "6.7.3");
    let logins = vc.received_raw::<LoginRequestType>().await;
    assert_eq!(header(&logins[0], "SOAPAction"), Some("urn:vim25/6.7.3"));
}

#[tokio::test]
async fn without_a_versions_file_the_about_version_is_used() {
    let vc = vcenter_with(None).start().await;
    // ServiceContent says 8.0.2.0, older than the bindings: it is announced.
    let client = vc.client().await;
    assert_eq!(client.api_version(), "8.0.2.0");
}

// --- faults ---------------------------------------------------------------

#[tokio::test]
async fn invalid_login_fails_connect_with_the_typed_fault() {
    let vc = vcenter().await;
    vc.on::<LoginRequestType>()
        .fails(
            InvalidLogin::default(),
            "Cannot complete login due to an incorrect user name or password.",
        )
        .await;
    let err = vc
        .client_builder()
        .connect()
        .await
        .expect_err("wrong password");
    // Recognisable as a wrong password, and still carrying the typed fault.
    assert_eq!(err.kind(), ErrorKind::InvalidLogin);
    assert!(err.is_fault::<InvalidLogin>() && !err.is_not_authenticated());
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
        vc.count::<LoginRequestType>().await,
        1,
        "a wrong password is not retried"
    );
}

/// A fault type the bindings do not know: only raw bytes can send one.
const FUTURE_FAULT: &str = r#"<?xml version="1.0" encoding="UTF-8"?><soapenv:Envelope xmlns:soapenv="http://schemas.xmlsoap.org/soap/envelope/" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"><soapenv:Body><soapenv:Fault><faultcode>ServerFaultCode</faultcode><faultstring>Something new went wrong.</faultstring><detail><FutureFaultFromVsphere9Fault xmlns="urn:vim25" xsi:type="FutureFaultFromVsphere9"><newField>x</newField></FutureFaultFromVsphere9Fault></detail></soapenv:Fault></soapenv:Body></soapenv:Envelope>"#;

#[tokio::test]
async fn each_notable_fault_decodes_into_its_type() {
    let vc = vcenter().await;
    let client = vc.client().await;
    let not_found = ManagedObjectNotFound {
        obj: vm(),
        ..Default::default()
    };
    let duplicate = DuplicateName {
        name: "web-01".to_string(),
        object: ManagedObjectReference::new("Folder", "group-v3"),
        ..Default::default()
    };
    let in_progress = TaskInProgress {
        task: ManagedObjectReference::new("Task", "task-7"),
        ..Default::default()
    };
    let not_found_message = "The object 'vim.VirtualMachine:vm-42' has already been deleted or has not been completely created";
    let duplicate_message = "The name 'web-01' already exists.";
    let in_progress_message = "The operation is not allowed in the current state.";
    let cases: [(&str, &str, Reply<PowerOnVMRequestType>); 4] = [
        (
            "ManagedObjectNotFound",
            not_found_message,
            Reply::fault(not_found, not_found_message),
        ),
        (
            "DuplicateName",
            duplicate_message,
            Reply::fault(duplicate, duplicate_message),
        ),
        (
            "TaskInProgress",
            in_progress_message,
            Reply::fault(in_progress, in_progress_message),
        ),
        (
            "FutureFaultFromVsphere9",
            "Something new went wrong.",
            Reply::http(
                ResponseTemplate::new(500).set_body_raw(FUTURE_FAULT, "text/xml; charset=utf-8"),
            ),
        ),
    ];
    for (fault_type, message, reply) in cases {
        vc.on::<PowerOnVMRequestType>().times(1).reply(reply).await;
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
    let vc = vcenter().await;
    // Answered for a session only: the kit refuses calls without one.
    vc.on::<CurrentTimeRequestType>().returns(noon()).await;
    let client = Client::builder(&vc.url())
        .keepalive(None)
        .connect()
        .await
        .expect("anonymous connect");
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
    assert_eq!(vc.count::<LoginRequestType>().await, 0);
}

// --- retries --------------------------------------------------------------

#[tokio::test]
async fn an_idempotent_call_is_retried_after_a_503() {
    let vc = vcenter().await;
    let client = vc.client().await;
    vc.on::<CurrentTimeRequestType>()
        .times(1)
        .reply(Reply::status(503))
        .await;
    vc.on::<CurrentTimeRequestType>().returns(noon()).await;
    client
        .vim()
        .current_time(&service_instance())
        .await
        .expect("retried, then answered");
    assert_eq!(vc.count::<CurrentTimeRequestType>().await, 2);
}

#[tokio::test]
async fn a_non_idempotent_call_is_not_retried_after_a_503() {
    let vc = vcenter().await;
    let client = vc.client().await;
    vc.on::<PowerOnVMRequestType>()
        .times(1)
        .reply(Reply::status(503))
        .await;
    vc.on::<PowerOnVMRequestType>().returns(task()).await;
    let err = client
        .vim()
        .power_on_vm_task(&vm(), None)
        .await
        .expect_err("not retried");
    assert_eq!(err.kind(), ErrorKind::HttpStatus(503));
    assert_eq!(
        vc.count::<PowerOnVMRequestType>().await,
        1,
        "PowerOnVM_Task must be sent once"
    );
}

#[tokio::test]
async fn an_html_error_page_is_a_clear_error_and_retries_are_bounded() {
    let vc = vcenter().await;
    let client = vc.client().await;
    vc.on::<CurrentTimeRequestType>()
        .reply(Reply::status(503))
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
        vc.count::<CurrentTimeRequestType>().await,
        4,
        "first attempt + 3 retries"
    );
}

#[tokio::test]
async fn a_200_html_page_is_not_soap() {
    let vc = vcenter().await;
    let client = vc.client().await;
    vc.on::<CurrentTimeRequestType>()
        .reply(Reply::http(ResponseTemplate::new(200).set_body_raw(
            "<html><body>Captive portal: please log in</body></html>",
            "text/html",
        )))
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
    let vc = vcenter().await;
    let client = vc.client().await;
    let full = encode_response_envelope::<CurrentTimeRequestType>(&noon());
    let truncated = full[..full.len() / 2].to_vec();
    vc.on::<CurrentTimeRequestType>()
        .reply(Reply::http(
            ResponseTemplate::new(200).set_body_raw(truncated, "text/xml"),
        ))
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
    let vc = vcenter().await;
    let client = vc
        .client_builder()
        .max_response_size(64 * 1024)
        .connect()
        .await
        .expect("connect");
    // A well-formed answer, then 1 MiB of trailing whitespace.
    let mut body = encode_response_envelope::<CurrentTimeRequestType>(&noon());
    body.resize(body.len() + 1024 * 1024, b' ');
    vc.on::<CurrentTimeRequestType>()
        .reply(Reply::http(
            ResponseTemplate::new(200).set_body_raw(body, "text/xml; charset=utf-8"),
        ))
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
    let vc = vcenter().await;
    let client = vc
        .client_builder()
        .call_timeout(Some(Duration::from_millis(300)))
        .retry(fast_retry(1))
        .connect()
        .await
        .expect("connect");
    vc.on::<CurrentTimeRequestType>()
        .reply(Reply::ok(noon()).delay(Duration::from_secs(5)))
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
    assert_eq!(vc.count::<CurrentTimeRequestType>().await, 2);
}

#[tokio::test]
async fn a_slow_non_idempotent_call_times_out_without_retry() {
    let vc = vcenter().await;
    let client = vc
        .client_builder()
        .call_timeout(Some(Duration::from_millis(300)))
        .connect()
        .await
        .expect("connect");
    vc.on::<PowerOnVMRequestType>()
        .reply(Reply::ok(task()).delay(Duration::from_secs(5)))
        .await;
    let err = client
        .vim()
        .power_on_vm_task(&vm(), None)
        .await
        .expect_err("slow");
    assert_eq!(err.kind(), ErrorKind::Timeout);
    assert_eq!(
        vc.count::<PowerOnVMRequestType>().await,
        1,
        "may have run: never sent twice"
    );
}

// --- sessions --------------------------------------------------------------

/// The session expires (calls with its cookie get NotAuthenticated); the
/// next Login is slow, so that concurrent callers pile up behind it.
fn expire_session(vc: &MockVCenter) {
    vc.expire_sessions();
    vc.set_latency_of::<LoginRequestType>(Duration::from_millis(200));
}

#[tokio::test]
async fn an_expired_session_is_renewed_transparently() {
    let vc = vcenter().await;
    vc.on::<CurrentTimeRequestType>().returns(noon()).await;
    let client = vc.client().await;
    expire_session(&vc);
    client
        .vim()
        .current_time(&service_instance())
        .await
        .expect("re-login and retry");
    assert_eq!(
        vc.count::<LoginRequestType>().await,
        2,
        "connect + one re-login"
    );
    assert_eq!(
        vc.count::<CurrentTimeRequestType>().await,
        2,
        "the failed call and its retry"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_concurrent_calls_on_an_expired_session_log_in_once() {
    let vc = vcenter().await;
    vc.on::<CurrentTimeRequestType>().returns(noon()).await;
    let client = vc.client().await;
    expire_session(&vc);
    let calls = (0..50).map(|_| {
        let client = client.clone();
        tokio::spawn(async move { client.vim().current_time(&service_instance()).await })
    });
    let results = futures_join_all(calls).await;
    for result in &results {
        assert!(result.is_ok(), "{result:?}");
    }
    assert_eq!(
        vc.count::<LoginRequestType>().await,
        2,
        "connect + exactly one re-login for 50 callers"
    );
    assert_eq!(
        vc.count::<CurrentTimeRequestType>().await,
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
    let vc = vcenter().await;
    vc.on::<CurrentTimeRequestType>().returns(noon()).await;
    let client = vc.client().await;
    // The session expired and the password was changed.
    expire_session(&vc);
    vc.on::<LoginRequestType>()
        .fails(InvalidLogin::default(), "Login failure")
        .await;
    let calls = (0..20).map(|_| {
        let client = client.clone();
        tokio::spawn(async move { client.vim().current_time(&service_instance()).await })
    });
    let results = futures_join_all(calls).await;
    assert!(results.iter().all(std::result::Result::is_err));
    assert_eq!(
        vc.count::<LoginRequestType>().await,
        2,
        "connect + one failed login, not 20"
    );
}

#[tokio::test]
async fn the_keepalive_logs_in_again_when_the_session_died() {
    let vc = vcenter().await;
    // The server forgot the session: currentSession comes back unset.
    let manager = vc.service_content().session_manager.clone();
    vc.on::<RetrievePropertiesExRequestType>()
        .returns(Some(RetrieveResult {
            token: None,
            objects: vec![ObjectContent {
                obj: manager.expect("a session manager"),
                prop_set: Vec::new(),
                missing_set: Vec::new(),
            }],
        }))
        .await;
    let client = vc
        .client_builder()
        .keepalive(Some(Duration::from_millis(200)))
        .connect()
        .await
        .expect("connect");
    let deadline = Instant::now() + Duration::from_secs(5);
    while vc.count::<LoginRequestType>().await < 2 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        vc.count::<RetrievePropertiesExRequestType>().await >= 1,
        "the keepalive checked the session"
    );
    assert_eq!(
        vc.count::<LoginRequestType>().await,
        2,
        "connect + one keepalive re-login"
    );
    drop(client);
}

#[tokio::test]
async fn close_logs_out_and_stops_relogging_in() {
    let vc = vcenter().await;
    vc.on::<CurrentTimeRequestType>().returns(noon()).await;
    let client = vc.client().await;
    client.close().await.expect("logout");
    let logouts = vc.received_raw::<LogoutRequestType>().await;
    assert_eq!(logouts.len(), 1);
    assert_eq!(
        header(&logouts[0], "Cookie"),
        Some(session_header(&vc.session_cookies()[0]).as_str())
    );
    let err = client
        .vim()
        .current_time(&service_instance())
        .await
        .expect_err("closed");
    assert_eq!(err.kind(), ErrorKind::NotAuthenticated, "{err:?}");
    assert_eq!(
        vc.count::<LoginRequestType>().await,
        1,
        "no login after close"
    );
}

#[tokio::test]
async fn logout_on_drop_logs_out_when_the_last_handle_goes() {
    let vc = vcenter().await;
    let client = vc
        .client_builder()
        .logout_on_drop(true)
        .connect()
        .await
        .expect("connect");
    let clone = client.clone();
    drop(client);
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(
        vc.count::<LogoutRequestType>().await,
        0,
        "a clone is still alive"
    );
    drop(clone);
    let deadline = Instant::now() + Duration::from_secs(5);
    while vc.count::<LogoutRequestType>().await == 0 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(vc.count::<LogoutRequestType>().await, 1);
}

// --- secrets ---------------------------------------------------------------

#[tokio::test]
async fn secrets_never_appear_in_trace_output_errors_or_debug() {
    let captured = CapturedLogs::default();
    let subscriber = captured.subscriber(tracing::Level::TRACE);
    let _guard = tracing::subscriber::set_default(subscriber);

    let vc = vcenter().await;
    vc.on::<CurrentTimeRequestType>().returns(noon()).await;
    vc.on::<PowerOnVMRequestType>()
        .fails(
            InvalidState::default(),
            "The operation is not allowed in the current state.",
        )
        .await;
    // Login, a call, an expired session and a re-login, a failing call.
    let client = vc.client().await;
    expire_session(&vc);
    client
        .vim()
        .current_time(&service_instance())
        .await
        .expect("re-login");
    let err = client
        .vim()
        .power_on_vm_task(&vm(), None)
        .await
        .expect_err("fault");
    // A failed login (the kit knows no "root") with the password in the URL.
    let url_with_password = vc
        .url()
        .replace("http://", &format!("http://{}:{}@", "root", PASSWORD));
    let login_err = Client::builder(&url_with_password)
        .keepalive(None)
        .connect()
        .await
        .expect_err("bad login");
    assert_eq!(login_err.kind(), ErrorKind::InvalidLogin, "{login_err:?}");

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
    let cookies = vc.session_cookies();
    assert_eq!(cookies.len(), 2, "connect and the re-login");
    for secret in [PASSWORD, cookies[0].as_str(), cookies[1].as_str()] {
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
    let vc = vcenter().await;
    let client = vc.client().await;
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    encoder
        .write_all(&encode_response_envelope::<CurrentTimeRequestType>(&noon()))
        .unwrap();
    let compressed = encoder.finish().unwrap();
    vc.on::<CurrentTimeRequestType>()
        .reply(Reply::http(
            ResponseTemplate::new(200)
                .insert_header("Content-Encoding", "gzip")
                .set_body_raw(compressed, "text/xml; charset=utf-8"),
        ))
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
    let calls = vc.received_raw::<CurrentTimeRequestType>().await;
    assert!(
        header(&calls[0], "Accept-Encoding").is_some_and(|v| v.contains("gzip")),
        "{:?}",
        calls[0].headers
    );
}

#[tokio::test]
async fn the_concurrency_limit_queues_calls() {
    let vc = vcenter().await;
    let client = vc
        .client_builder()
        .concurrency_limit(2)
        .connect()
        .await
        .expect("connect");
    vc.on::<CurrentTimeRequestType>()
        .reply(Reply::ok(noon()).delay(Duration::from_millis(300)))
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
    assert_eq!(vc.max_in_flight(), 2, "two calls at a time");
    // 6 calls, 2 at a time, 300 ms each: three rounds.
    assert!(waited >= Duration::from_millis(900), "{waited:?}");
    assert!(waited < Duration::from_secs(10), "{waited:?}");
}

#[tokio::test]
async fn an_explicit_proxy_carries_the_calls() {
    // The vCenter address is a loopback port nobody listens on: only the
    // proxy (the mock) can answer.
    let vc = vcenter().await;
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let client = Client::builder(&format!("http://127.0.0.1:{port}/sdk"))
        .credentials(USER, PASSWORD)
        .keepalive(None)
        .proxy(vc.server().uri())
        .connect()
        .await
        .expect("through the proxy");
    assert_eq!(client.service_content().about.api_type, "VirtualCenter");
    let logins = vc.received_raw::<LoginRequestType>().await;
    assert_eq!(logins.len(), 1);
    assert_eq!(
        logins[0].url.port(),
        Some(port),
        "the proxy was asked for the vCenter URL"
    );
}
