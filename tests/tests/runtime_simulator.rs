//! vsphere-client's runtime against the real simulator (govmomi's vcsim
//! through the project's launcher): login, service content, TLS modes,
//! expiring sessions, and a server restart.

use std::time::Duration;

use vsphere_client::types::ManagedObjectReference;
use vsphere_client::{Client, ClientBuilder, ErrorKind};
use vsphere_tests::{ServerTls, Simulator, SimulatorOptions, TestCa};

/// Starts a simulator off the async runtime (the launcher blocks while it
/// starts).
async fn simulator(options: SimulatorOptions) -> Simulator {
    tokio::task::spawn_blocking(move || Simulator::start(options))
        .await
        .expect("join")
        .unwrap_or_else(|e| panic!("simulator: {e}"))
}

fn builder(sim: &Simulator) -> ClientBuilder {
    Client::builder(&sim.sdk_url())
        .credentials(sim.username(), sim.password())
        .keepalive(None)
}

fn service_instance() -> ManagedObjectReference {
    ManagedObjectReference::new("ServiceInstance", "ServiceInstance")
}

/// The error and all its causes on one line.
fn chain(err: &vsphere_client::Error) -> String {
    let mut text = err.to_string();
    let mut source = std::error::Error::source(err);
    while let Some(cause) = source {
        text.push_str(" | ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// A call that needs a session on vcsim (anonymous callers get
/// NotAuthenticated), so success proves we are logged in.
async fn authenticated_call(client: &Client) -> Result<(), vsphere_client::Error> {
    client
        .vim()
        .current_time(&service_instance())
        .await
        .map(|_| ())
}

#[tokio::test]
async fn login_service_content_and_about_over_plain_http() {
    let sim = simulator(SimulatorOptions {
        tls: ServerTls::Plain,
        ..Default::default()
    })
    .await;
    let client = builder(&sim).connect().await.expect("connect");
    let about = &client.service_content().about;
    assert_eq!(about.name, "VMware vCenter Server");
    assert_eq!(about.api_type, "VirtualCenter");
    assert!(
        about.full_name.starts_with("VMware vCenter Server"),
        "{}",
        about.full_name
    );
    // vcsim reports 6.5, lower than the bindings' version: we speak 6.5.
    assert_eq!(about.api_version, "6.5");
    assert_eq!(client.api_version(), "6.5");
    assert!(client.service_content().session_manager.is_some());
    authenticated_call(&client).await.expect("logged in");
    client.close().await.expect("logout");
}

#[tokio::test]
async fn a_wrong_password_is_invalid_login() {
    let sim = simulator(SimulatorOptions {
        tls: ServerTls::Plain,
        ..Default::default()
    })
    .await;
    let err = Client::builder(&sim.sdk_url())
        .credentials(sim.username(), "not-the-password")
        .connect()
        .await
        .expect_err("wrong password");
    assert_eq!(err.kind(), ErrorKind::InvalidLogin);
    assert_eq!(
        err.fault().and_then(|f| f.type_name()),
        Some("InvalidLogin"),
        "{err:?}"
    );
}

#[tokio::test]
async fn credentials_in_the_url_like_govc() {
    let sim = simulator(SimulatorOptions {
        tls: ServerTls::Plain,
        ..Default::default()
    })
    .await;
    // No /sdk and user:password@, as GOVC_URL allows.
    let url = sim
        .url_with_credentials()
        .trim_end_matches("/sdk")
        .to_string();
    let client = Client::builder(&url)
        .keepalive(None)
        .connect()
        .await
        .expect("connect");
    authenticated_call(&client)
        .await
        .expect("logged in with the URL's credentials");
}

#[tokio::test]
async fn a_ca_bundle_with_the_right_ca_is_accepted() {
    let ca = TestCa::new().expect("CA");
    let sim = simulator(SimulatorOptions {
        tls: ca.server_tls(),
        ..Default::default()
    })
    .await;
    // The bundle holds an unrelated CA first, then the right one.
    let client = builder(&sim)
        .ca_bundle_pem(ca.bundle_pem().as_bytes())
        .expect("bundle")
        .connect()
        .await
        .expect("verified connection");
    authenticated_call(&client).await.expect("call");
}

#[tokio::test]
async fn a_wrong_ca_is_refused_as_a_certificate_problem() {
    let ca = TestCa::new().expect("CA");
    let sim = simulator(SimulatorOptions {
        tls: ca.server_tls(),
        ..Default::default()
    })
    .await;
    let err = builder(&sim)
        .ca_bundle_file(ca.unrelated_ca_file())
        .expect("bundle")
        .connect()
        .await
        .expect_err("untrusted certificate");
    assert_eq!(err.kind(), ErrorKind::Tls, "{}", chain(&err));
    assert!(err.to_string().contains("certificate"), "{err}");
    assert!(
        err.to_string().contains("unknown issuer"),
        "names the cause: {err}"
    );
}

#[tokio::test]
async fn system_roots_refuse_the_simulators_certificate() {
    let sim = simulator(SimulatorOptions::default()).await;
    let err = builder(&sim).connect().await.expect_err("self-signed");
    assert_eq!(err.kind(), ErrorKind::Tls, "{}", chain(&err));
}

#[tokio::test]
async fn insecure_mode_accepts_any_certificate() {
    let ca = TestCa::new().expect("CA");
    let sim = simulator(SimulatorOptions {
        tls: ca.server_tls(),
        ..Default::default()
    })
    .await;
    let client = builder(&sim)
        .insecure(true)
        .connect()
        .await
        .expect("insecure");
    authenticated_call(&client).await.expect("call");
}

#[tokio::test]
async fn insecure_mode_accepts_the_simulators_own_certificate() {
    // Self-signed, with a 1024-bit RSA key (too weak for verification: only
    // insecure mode can talk to it, as in labs).
    let sim = simulator(SimulatorOptions::default()).await;
    let client = builder(&sim)
        .insecure(true)
        .connect()
        .await
        .expect("insecure");
    authenticated_call(&client).await.expect("call");
}

#[tokio::test]
async fn a_pinned_thumbprint_is_accepted_in_every_spelling() {
    let ca = TestCa::new().expect("CA");
    let sim = simulator(SimulatorOptions {
        tls: ca.server_tls(),
        ..Default::default()
    })
    .await;
    let sha256 = ca.server_sha256_thumbprint();
    let sha1 = ca.server_sha1_thumbprint();
    for pin in [
        sha256.clone(),
        sha256.replace(':', "").to_lowercase(),
        sha1.clone(),
        sha1.replace(':', ""),
    ] {
        let client = builder(&sim)
            .thumbprint(&pin)
            .expect("thumbprint")
            .connect()
            .await
            .unwrap_or_else(|e| panic!("pin {pin}: {}", chain(&e)));
        authenticated_call(&client).await.expect("call");
    }
}

#[tokio::test]
async fn a_wrong_thumbprint_is_refused() {
    let ca = TestCa::new().expect("CA");
    let sim = simulator(SimulatorOptions {
        tls: ca.server_tls(),
        ..Default::default()
    })
    .await;
    let wrong = "00".repeat(31) + "01";
    let err = builder(&sim)
        .thumbprint(&wrong)
        .expect("thumbprint")
        .connect()
        .await
        .expect_err("pin mismatch");
    assert_eq!(err.kind(), ErrorKind::Tls, "{}", chain(&err));
    let text = chain(&err);
    assert!(text.contains("thumbprint does not match"), "{text}");
    // It tells the user the server's real thumbprint, to compare.
    assert!(text.contains(&ca.server_sha256_thumbprint()), "{text}");
}

#[tokio::test]
async fn calls_survive_a_session_idle_timeout() {
    let sim = simulator(SimulatorOptions {
        tls: ServerTls::Plain,
        session_idle_timeout: Some(Duration::from_secs(1)),
        trace: true,
        ..Default::default()
    })
    .await;
    // Keepalive off: the re-login on NotAuthenticated alone must do it.
    let client = builder(&sim).connect().await.expect("connect");
    for round in 0..3 {
        tokio::time::sleep(Duration::from_secs(2)).await;
        authenticated_call(&client)
            .await
            .unwrap_or_else(|e| panic!("call {round} after 2 s idle: {}", chain(&e)));
    }
    // The session really expired (vcsim checks idleness once a second, so
    // a call can just beat the check), and no call needed more than one login.
    let logins = logins(&sim.log());
    assert!(
        (2..=4).contains(&logins),
        "connect + at most one re-login per call: {logins}"
    );
}

#[tokio::test]
async fn the_keepalive_keeps_an_idle_session_alive() {
    let sim = simulator(SimulatorOptions {
        tls: ServerTls::Plain,
        session_idle_timeout: Some(Duration::from_secs(3)),
        trace: true,
        ..Default::default()
    })
    .await;
    let client = builder(&sim)
        .keepalive(Some(Duration::from_millis(400)))
        .connect()
        .await
        .expect("connect");
    tokio::time::sleep(Duration::from_secs(7)).await;
    authenticated_call(&client).await.expect("call after 7 s");
    let log = sim.log();
    assert!(log.contains("<RetrievePropertiesEx"), "the keepalive ran");
    assert_eq!(
        logins(&log),
        1,
        "the session never expired: no second login"
    );
}

/// Login requests in the simulator's trace log.
fn logins(log: &str) -> usize {
    log.lines()
        .filter(|line| {
            line.starts_with("Request:") && (line.contains("<Login ") || line.contains("<Login>"))
        })
        .count()
}

#[tokio::test]
async fn the_client_recovers_when_the_simulator_restarts() {
    let mut sim = simulator(SimulatorOptions {
        tls: ServerTls::Plain,
        ..Default::default()
    })
    .await;
    let client = builder(&sim).connect().await.expect("connect");
    authenticated_call(&client).await.expect("before restart");
    let mut sim = tokio::task::spawn_blocking(move || {
        sim.restart().expect("restart");
        sim
    })
    .await
    .expect("join");
    // The new process knows nothing of our session: the call logs in again.
    authenticated_call(&client)
        .await
        .unwrap_or_else(|e| panic!("after restart: {}", chain(&e)));
    assert!(sim.is_running());
    authenticated_call(&client)
        .await
        .expect("and stays logged in");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_callers_on_an_expired_session_cause_one_login() {
    let sim = simulator(SimulatorOptions {
        tls: ServerTls::Plain,
        session_idle_timeout: Some(Duration::from_secs(1)),
        trace: true,
        ..Default::default()
    })
    .await;
    let client = builder(&sim).connect().await.expect("connect");
    // Past vcsim's second idleness check: the session is surely gone.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let calls: Vec<_> = (0..50)
        .map(|_| {
            let client = client.clone();
            tokio::spawn(async move { authenticated_call(&client).await })
        })
        .collect();
    for call in calls {
        call.await
            .expect("join")
            .unwrap_or_else(|e| panic!("{}", chain(&e)));
    }
    assert_eq!(
        logins(&sim.log()),
        2,
        "connect + exactly one re-login for 50 callers"
    );
}

/// A minimal `CONNECT` proxy: answers each tunnel request with 200 and
/// relays bytes both ways. Hands out the request heads it received.
async fn connect_proxy() -> (String, tokio::sync::mpsc::UnboundedReceiver<String>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    let (heads, received) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Ok((mut client, _)) = listener.accept().await {
            let heads = heads.clone();
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut byte = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") {
                    if client.read(&mut byte).await.unwrap_or(0) == 0 {
                        return;
                    }
                    head.push(byte[0]);
                }
                let head = String::from_utf8_lossy(&head).into_owned();
                let target = head
                    .strip_prefix("CONNECT ")
                    .and_then(|rest| rest.split(' ').next())
                    .map(str::to_owned);
                let _ = heads.send(head);
                let Some(target) = target else {
                    let _ = client
                        .write_all(b"HTTP/1.1 405 Method Not Allowed\r\ncontent-length: 0\r\n\r\n")
                        .await;
                    return;
                };
                let Ok(mut upstream) = tokio::net::TcpStream::connect(&target).await else {
                    let _ = client.write_all(b"HTTP/1.1 502 Bad Gateway\r\n\r\n").await;
                    return;
                };
                if client
                    .write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
                    .await
                    .is_ok()
                {
                    let _ = tokio::io::copy_bidirectional(&mut client, &mut upstream).await;
                }
            });
        }
    });
    (url, received)
}

#[tokio::test]
async fn https_goes_through_a_proxy_tunnel_with_its_credentials() {
    let ca = TestCa::new().expect("CA");
    let sim = simulator(SimulatorOptions {
        tls: ca.server_tls(),
        ..Default::default()
    })
    .await;
    let (proxy_url, mut heads) = connect_proxy().await;
    let with_credentials = proxy_url.replace("http://", "http://squid:s3cret@");
    let client = builder(&sim)
        .ca_bundle_pem(ca.bundle_pem().as_bytes())
        .expect("bundle")
        .proxy(with_credentials)
        .connect()
        .await
        .expect("connected through the tunnel");
    authenticated_call(&client)
        .await
        .expect("a call through the tunnel");
    let head = heads.try_recv().expect("the proxy was asked for a tunnel");
    let authority = client.url().authority().expect("host and port").to_string();
    assert!(
        head.starts_with(&format!("CONNECT {authority} HTTP/1.1\r\n")),
        "{head}"
    );
    // base64("squid:s3cret")
    let proxy_authorization = head.lines().find_map(|line| {
        let (name, value) = line.split_once(':')?;
        name.eq_ignore_ascii_case("proxy-authorization")
            .then(|| value.trim())
    });
    assert_eq!(
        proxy_authorization,
        Some("Basic c3F1aWQ6czNjcmV0"),
        "{head}"
    );
    // The certificate is still checked through the tunnel: against the
    // wrong CA, the TLS error surfaces as such.
    let err = builder(&sim)
        .ca_bundle_file(ca.unrelated_ca_file())
        .expect("bundle")
        .proxy(proxy_url)
        .connect()
        .await
        .expect_err("untrusted through the tunnel");
    assert_eq!(err.kind(), ErrorKind::Tls, "{}", chain(&err));
}
