//! The launcher and its options work, proved with raw HTTP (no vsphere-client).

use std::sync::Arc;
use std::time::{Duration, Instant};

use reqwest::StatusCode;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::CertificateDer;
use vsphere_tests::{ServerTls, Simulator, SimulatorOptions, Template, TestCa};

/// A client trusting only the CA certificates in `ca_pem`, keeping cookies.
fn client_trusting(ca_pem: &str) -> reqwest::Client {
    let mut roots = rustls::RootCertStore::empty();
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(ca_pem.as_bytes())
        .collect::<Result<_, _>>()
        .expect("PEM");
    let (added, _) = roots.add_parsable_certificates(certs);
    assert!(added > 0, "no CA certificate in the PEM");
    client_with_roots(roots)
}

/// For plain http: reqwest still wants a TLS configuration.
fn plain_client() -> reqwest::Client {
    client_with_roots(rustls::RootCertStore::empty())
}

fn client_with_roots(roots: rustls::RootCertStore) -> reqwest::Client {
    client_builder(roots).build().expect("client")
}

fn client_builder(roots: rustls::RootCertStore) -> reqwest::ClientBuilder {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let tls = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("TLS versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
    reqwest::Client::builder()
        .use_preconfigured_tls(tls)
        .cookie_store(true)
        .timeout(Duration::from_secs(30))
}

fn envelope(body: &str) -> String {
    format!(
        r#"<?xml version="1.0" encoding="UTF-8"?><soapenv:Envelope xmlns:soapenv="http://schemas.xmlsoap.org/soap/envelope/" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"><soapenv:Body>{body}</soapenv:Body></soapenv:Envelope>"#
    )
}

async fn soap(
    client: &reqwest::Client,
    sim: &Simulator,
    body: &str,
) -> Result<(StatusCode, String), reqwest::Error> {
    let response = client
        .post(sim.sdk_url())
        .header("Content-Type", "text/xml; charset=utf-8")
        .header("SOAPAction", "urn:vim25/6.5")
        .body(envelope(body))
        .send()
        .await?;
    let status = response.status();
    Ok((status, response.text().await?))
}

const RETRIEVE_SERVICE_CONTENT: &str = r#"<RetrieveServiceContent xmlns="urn:vim25"><_this type="ServiceInstance">ServiceInstance</_this></RetrieveServiceContent>"#;
const CURRENT_TIME: &str = r#"<CurrentTime xmlns="urn:vim25"><_this type="ServiceInstance">ServiceInstance</_this></CurrentTime>"#;

fn login(user: &str, password: &str) -> String {
    format!(
        r#"<Login xmlns="urn:vim25"><_this type="SessionManager">SessionManager</_this><userName>{user}</userName><password>{password}</password></Login>"#
    )
}

async fn logged_in(client: &reqwest::Client, sim: &Simulator) {
    let (status, body) = soap(client, sim, &login(sim.username(), sim.password()))
        .await
        .expect("Login");
    assert_eq!(status, StatusCode::OK, "{body}");
    assert!(body.contains("<LoginResponse"), "{body}");
}

fn start(options: SimulatorOptions) -> Simulator {
    Simulator::start(options).unwrap_or_else(|e| panic!("simulator: {e}"))
}

#[tokio::test]
async fn retrieve_service_content_over_tls_with_the_test_ca() {
    let ca = TestCa::new().expect("test CA");
    let sim = start(SimulatorOptions {
        tls: ca.server_tls(),
        ..Default::default()
    });
    assert!(
        sim.sdk_url().starts_with("https://127.0.0.1:"),
        "{}",
        sim.sdk_url()
    );

    let (status, body) = soap(
        &client_trusting(ca.ca_pem()),
        &sim,
        RETRIEVE_SERVICE_CONTENT,
    )
    .await
    .expect("call");
    assert_eq!(status, StatusCode::OK, "{body}");
    assert!(body.contains("<about>"), "{body}");
    assert!(body.contains("<apiVersion>6.5</apiVersion>"), "{body}");

    // A bundle whose first certificate is unrelated still trusts the server.
    let (status, _) = soap(
        &client_trusting(&ca.bundle_pem()),
        &sim,
        RETRIEVE_SERVICE_CONTENT,
    )
    .await
    .expect("call");
    assert_eq!(status, StatusCode::OK);
}

#[tokio::test]
async fn a_wrong_ca_is_refused() {
    let ca = TestCa::new().expect("test CA");
    let sim = start(SimulatorOptions {
        tls: ca.server_tls(),
        ..Default::default()
    });
    let err = soap(
        &client_trusting(ca.unrelated_ca_pem()),
        &sim,
        RETRIEVE_SERVICE_CONTENT,
    )
    .await
    .expect_err("an unrelated CA must not verify the server");
    let mut chain = String::new();
    let mut source: Option<&dyn std::error::Error> = Some(&err);
    while let Some(e) = source {
        chain.push_str(&format!("{e}; "));
        source = e.source();
    }
    assert!(chain.to_lowercase().contains("certificate"), "{chain}");
}

#[tokio::test]
async fn plain_http_and_reported_api_version() {
    let sim = start(SimulatorOptions {
        tls: ServerTls::Plain,
        api_version: Some("7.0.3.0".to_string()),
        ..Default::default()
    });
    assert!(
        sim.sdk_url().starts_with("http://127.0.0.1:"),
        "{}",
        sim.sdk_url()
    );
    let client = plain_client();
    let (status, body) = soap(&client, &sim, RETRIEVE_SERVICE_CONTENT)
        .await
        .expect("call");
    assert_eq!(status, StatusCode::OK);
    assert!(body.contains("<apiVersion>7.0.3.0</apiVersion>"), "{body}");
    let versions = client
        .get(format!("{}/vimServiceVersions.xml", sim.sdk_url()))
        .send()
        .await
        .expect("versions")
        .text()
        .await
        .expect("body");
    assert!(
        versions.contains("<version>7.0.3.0</version>"),
        "{versions}"
    );
}

#[tokio::test]
async fn login_checks_the_configured_credentials() {
    let sim = start(SimulatorOptions {
        tls: ServerTls::Plain,
        username: "alice".to_string(),
        password: "wonderland".to_string(),
        ..Default::default()
    });
    let client = plain_client();
    let (status, body) = soap(&client, &sim, &login("alice", "wrong"))
        .await
        .expect("call");
    assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR);
    assert!(body.contains("InvalidLogin"), "{body}");
    logged_in(&client, &sim).await;
    assert!(sim
        .url_with_credentials()
        .contains("alice:wonderland@127.0.0.1:"));
}

#[tokio::test]
async fn idle_sessions_expire() {
    let sim = start(SimulatorOptions {
        tls: ServerTls::Plain,
        session_idle_timeout: Some(Duration::from_secs(1)),
        ..Default::default()
    });
    let client = plain_client();
    logged_in(&client, &sim).await;
    let (status, body) = soap(&client, &sim, CURRENT_TIME).await.expect("call");
    assert_eq!(status, StatusCode::OK, "{body}");

    // The simulator checks idle sessions every timeout period: after two
    // periods without a call the session is gone.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let (status, body) = soap(&client, &sim, CURRENT_TIME).await.expect("call");
    assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR, "{body}");
    assert!(body.contains("NotAuthenticated"), "{body}");
}

#[tokio::test]
async fn delay_slows_every_call() {
    let delay = Duration::from_millis(400);
    let sim = start(SimulatorOptions {
        tls: ServerTls::Plain,
        delay: Some(delay),
        ..Default::default()
    });
    let client = plain_client();
    logged_in(&client, &sim).await;
    let started = Instant::now();
    let (status, _) = soap(&client, &sim, CURRENT_TIME).await.expect("call");
    assert_eq!(status, StatusCode::OK);
    assert!(started.elapsed() >= delay, "took {:?}", started.elapsed());
}

#[tokio::test]
async fn rest_session_endpoint_answers() {
    let ca = TestCa::new().expect("test CA");
    let sim = start(SimulatorOptions {
        tls: ca.server_tls(),
        ..Default::default()
    });
    let client = client_trusting(ca.ca_pem());
    let url = format!("{}/rest/com/vmware/cis/session", sim.base_url());

    let unauthenticated = client.post(&url).send().await.expect("call");
    assert_eq!(unauthenticated.status(), StatusCode::UNAUTHORIZED);

    let response = client
        .post(&url)
        .basic_auth(sim.username(), Some(sim.password()))
        .send()
        .await
        .expect("call");
    assert_eq!(response.status(), StatusCode::OK);
    let body = response.text().await.expect("body").trim().to_string();
    assert!(body.starts_with(r#"{"value":""#), "{body}");
    let token = body
        .trim_start_matches(r#"{"value":""#)
        .trim_end_matches(r#""}"#)
        .to_string();

    let categories = client
        .get(format!(
            "{}/rest/com/vmware/cis/tagging/category",
            sim.base_url()
        ))
        .header("vmware-api-session-id", token)
        .send()
        .await
        .expect("call");
    assert_eq!(categories.status(), StatusCode::OK);
}

#[tokio::test]
async fn restart_keeps_the_port_and_drops_sessions() {
    let mut sim = start(SimulatorOptions {
        tls: ServerTls::Plain,
        ..Default::default()
    });
    // A pooled connection to the old process would fail the first call after
    // the restart (hyper: IncompleteMessage); this test is about the server.
    let client = client_builder(rustls::RootCertStore::empty())
        .pool_max_idle_per_host(0)
        .build()
        .expect("client");
    logged_in(&client, &sim).await;
    let port = sim.port();

    sim.restart().unwrap_or_else(|e| panic!("restart: {e}"));
    assert_eq!(sim.port(), port);
    assert!(sim.is_running());
    let (status, body) = soap(&client, &sim, CURRENT_TIME)
        .await
        .expect("call after restart");
    assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR);
    assert!(body.contains("NotAuthenticated"), "{body}");
    logged_in(&client, &sim).await;
}

#[tokio::test]
async fn drop_stops_the_simulator() {
    let sim = start(SimulatorOptions {
        tls: ServerTls::Plain,
        ..Default::default()
    });
    let url = sim.sdk_url();
    drop(sim);
    let err = plain_client()
        .post(url)
        .body(envelope(RETRIEVE_SERVICE_CONTENT))
        .send()
        .await;
    assert!(err.is_err(), "the simulator still answers after drop");
}

fn find_by_inventory_path(path: &str) -> String {
    format!(
        r#"<FindByInventoryPath xmlns="urn:vim25"><_this type="SearchIndex">SearchIndex</_this><inventoryPath>{path}</inventoryPath></FindByInventoryPath>"#
    )
}

fn template_flag(vm: &str) -> String {
    format!(
        r#"<RetrievePropertiesEx xmlns="urn:vim25"><_this type="PropertyCollector">propertyCollector</_this><specSet><propSet><type>VirtualMachine</type><pathSet>config.template</pathSet></propSet><objectSet><obj type="VirtualMachine">{vm}</obj></objectSet></specSet><options/></RetrievePropertiesEx>"#
    )
}

#[tokio::test]
async fn templates_where_asked() {
    let sim = start(SimulatorOptions {
        tls: ServerTls::Plain,
        datacenters: 2,
        templates: vec![
            Template::everywhere("golden"),
            Template::in_datacenters("win", &["DC1"]),
        ],
        ..Default::default()
    });
    let client = plain_client();
    logged_in(&client, &sim).await;
    for (path, present) in [
        ("DC0/vm/golden", true),
        ("DC1/vm/golden", true),
        ("DC1/vm/win", true),
        ("DC0/vm/win", false),
    ] {
        let (status, body) = soap(&client, &sim, &find_by_inventory_path(path))
            .await
            .expect("call");
        assert_eq!(status, StatusCode::OK, "{body}");
        let vm = body
            .split(r#"<returnval type="VirtualMachine">"#)
            .nth(1)
            .and_then(|rest| rest.split('<').next())
            .map(str::to_string);
        assert_eq!(vm.is_some(), present, "{path}: {body}");
        if let Some(vm) = vm {
            let (status, body) = soap(&client, &sim, &template_flag(&vm))
                .await
                .expect("call");
            assert_eq!(status, StatusCode::OK, "{body}");
            // vcsim binds the xsi namespace to the prefix "XMLSchema-instance",
            // not "xsi": match the attribute's tail only.
            assert!(
                body.contains(r#":type="xsd:boolean">true</val>"#),
                "{path}: {body}"
            );
        }
    }
}
