//! Secrets audit: the SDK and the operator run at TRACE level (every
//! target, the wire log included) through a login, a re-login after the
//! session expired, a failed login, faults, a TLS refusal and a server that
//! died; no log line, no error (Display or Debug) and no Debug output of the
//! client or its builder may contain the password, a session cookie value or
//! a CA private key.
//!
//! The secrets are distinctive strings, and each check first asserts that
//! what it searches is not empty and shows the calls it should show, so the
//! audit cannot pass by looking at nothing. The session cookies are the
//! simulator's own (read back from its trace log: vcsim's cookie is the
//! session key of the Login response).

use std::process::Command;
use std::time::Duration;

use vsphere_client::types::ManagedObjectReference;
use vsphere_client::{mo, Client, ErrorKind};
use vsphere_tests::{banlieue_binary, CapturedLogs, Simulator, SimulatorOptions, Template, TestCa};

const PASSWORD: &str = "Audit-Pa55w0rd-7f3c9e1b";
const WRONG_PASSWORD: &str = "Wrong-Pa55w0rd-a1b2c3d4";

async fn simulator(options: SimulatorOptions) -> Simulator {
    tokio::task::spawn_blocking(move || Simulator::start(options))
        .await
        .expect("join")
        .unwrap_or_else(|e| panic!("simulator: {e}"))
}

/// The session cookies the simulator handed out: the `<key>` of each Login
/// response in its trace log.
fn session_cookies(sim_log: &str) -> Vec<String> {
    sim_log
        .lines()
        // The trace prints "Response:" then the envelope on its own line.
        .filter(|line| line.contains("<LoginResponse"))
        .filter_map(|line| {
            let start = line.find("<key>")? + "<key>".len();
            let end = start + line[start..].find("</key>")?;
            Some(line[start..end].to_string())
        })
        .filter(|key| key.len() >= 16)
        .collect()
}

/// The base64 lines of a PEM key: any of them in a log is a leak.
fn key_lines(pem: &str) -> Vec<String> {
    pem.lines()
        .filter(|l| !l.starts_with("-----") && l.len() >= 16)
        .map(str::to_string)
        .collect()
}

/// Fails with the first secret found in `text` (named by `what`).
fn assert_clean(what: &str, text: &str, secrets: &[(&str, String)]) {
    // AUDIT_DUMP=1: every leaking line, to find where a leak comes from.
    if std::env::var_os("AUDIT_DUMP").is_some() {
        for line in text.lines() {
            if secrets.iter().any(|(_, s)| line.contains(s.as_str())) {
                eprintln!(
                    "LEAK {what}: {}",
                    line.chars().take(400).collect::<String>()
                );
            }
        }
    }
    for (name, secret) in secrets {
        if let Some(at) = text.find(secret.as_str()) {
            let from = text[..at]
                .char_indices()
                .rev()
                .nth(200)
                .map_or(0, |(i, _)| i);
            panic!(
                "{name} leaked into {what}, near: ...{}",
                &text[from..at].replace('\n', "\\n")
            );
        }
    }
}

fn secrets_of(ca: &TestCa, cookies: &[String]) -> Vec<(&'static str, String)> {
    let mut secrets = vec![
        ("the password", PASSWORD.to_string()),
        ("the wrong password", WRONG_PASSWORD.to_string()),
    ];
    secrets.extend(cookies.iter().map(|c| ("a session cookie", c.clone())));
    secrets.extend(
        key_lines(ca.ca_key_pem())
            .into_iter()
            .map(|l| ("the CA private key", l)),
    );
    secrets
}

fn audited_options(ca: &TestCa) -> SimulatorOptions {
    SimulatorOptions {
        tls: ca.server_tls(),
        password: PASSWORD.to_string(),
        session_idle_timeout: Some(Duration::from_secs(1)),
        trace: true,
        templates: vec![Template::everywhere("golden")],
        ..Default::default()
    }
}

#[tokio::test]
async fn the_sdk_at_trace_level_never_shows_a_secret() {
    let captured = CapturedLogs::default();
    let subscriber = captured.subscriber(tracing::Level::TRACE);
    // A current-thread runtime: the client's spawned tasks log here too.
    let _guard = tracing::subscriber::set_default(subscriber);

    let ca = TestCa::new().expect("CA");
    let mut sim = simulator(audited_options(&ca)).await;
    // A CA bundle that carries the CA's private key by mistake.
    let bundle = format!("{}{}", ca.bundle_pem(), ca.ca_key_pem());
    let builder = Client::builder(&sim.sdk_url())
        .credentials(sim.username(), PASSWORD)
        .keepalive(None)
        .ca_bundle_pem(bundle.as_bytes())
        .expect("bundle");
    let mut outputs = vec![format!("{builder:?}")];
    let client = builder.connect().await.expect("connect");
    outputs.push(format!("{client:?}"));

    // Work, then the session expires and a call logs in again.
    let vms = client
        .properties::<mo::VirtualMachine>(&["name", "runtime.powerState"])
        .unwrap()
        .in_container(&client.service_content().root_folder)
        .collect_all()
        .await
        .expect("walk");
    assert!(!vms.is_empty());
    tokio::time::sleep(Duration::from_millis(2500)).await;
    client
        .vim()
        .current_time(&ManagedObjectReference::new(
            "ServiceInstance",
            "ServiceInstance",
        ))
        .await
        .expect("call after re-login");
    assert_eq!(
        client.call_stats().get("Login").map(|s| s.calls),
        Some(2),
        "a re-login happened"
    );

    // A keepalive at work: it reads SessionManager.currentSession, whose
    // answer holds the session key (the cookie value, on the simulator).
    let kept_alive = Client::builder(&sim.sdk_url())
        .credentials(sim.username(), PASSWORD)
        .keepalive(Some(Duration::from_millis(200)))
        .ca_bundle_pem(bundle.as_bytes())
        .expect("bundle")
        .connect()
        .await
        .expect("connect");
    tokio::time::sleep(Duration::from_millis(900)).await;
    outputs.push(format!("{kept_alive:?}"));
    drop(kept_alive);

    // A fault from the server.
    let gone = ManagedObjectReference::new("VirtualMachine", "vm-does-not-exist");
    let fault = client
        .vim()
        .power_on_vm_task(&gone, None)
        .await
        .expect_err("no such VM");
    assert_eq!(fault.kind(), ErrorKind::Fault, "{fault:?}");

    // A failed login, the password also in the URL (as GOVC_URL allows).
    let url_with_password = sim.sdk_url().replace(
        "https://",
        &format!("https://{}:{WRONG_PASSWORD}@", sim.username()),
    );
    let failed_builder = Client::builder(&url_with_password)
        .keepalive(None)
        .ca_bundle_pem(bundle.as_bytes())
        .expect("bundle");
    outputs.push(format!("{failed_builder:?}"));
    let failed_login = failed_builder.connect().await.expect_err("wrong password");
    assert_eq!(
        failed_login.fault().and_then(|f| f.type_name()),
        Some("InvalidLogin")
    );

    // A TLS refusal.
    let refused = Client::builder(&sim.sdk_url())
        .credentials(sim.username(), PASSWORD)
        .ca_bundle_pem(ca.unrelated_ca_pem().as_bytes())
        .expect("bundle")
        .connect()
        .await
        .expect_err("untrusted");
    assert_eq!(refused.kind(), ErrorKind::Tls);

    // The server dies; the client's next call fails (its retries too).
    let cookies = session_cookies(&sim.log());
    sim = tokio::task::spawn_blocking(move || {
        sim.kill();
        sim
    })
    .await
    .expect("join");
    let dead = client
        .vim()
        .current_time(&ManagedObjectReference::new(
            "ServiceInstance",
            "ServiceInstance",
        ))
        .await
        .expect_err("server gone");
    assert_eq!(dead.kind(), ErrorKind::Transport, "{dead:?}");
    outputs.push(format!("{client:?}"));
    for err in [&fault, &failed_login, &refused, &dead] {
        outputs.push(format!("{err} / {err:?}"));
        let mut source = std::error::Error::source(err);
        while let Some(cause) = source {
            outputs.push(format!("{cause} / {cause:?}"));
            source = cause.source();
        }
    }
    drop(client);
    drop(sim);

    // Not vacuous: the log has the wire bodies of every step, the cookies
    // were seen, and the secrets are what the server really got.
    let log = captured.text();
    for needle in [
        "vsphere_client::wire",
        "<Login",
        "RetrievePropertiesEx",
        "CurrentTime",
        "PowerOnVM_Task",
        "InvalidLogin",
        "logging in again",
        "currentSession",
        "<redacted>",
    ] {
        assert!(log.contains(needle), "the trace log lacks {needle:?}");
    }
    assert!(
        cookies.len() >= 3,
        "connect, re-login and the keepalive's client: {cookies:?}"
    );
    assert!(!key_lines(ca.ca_key_pem()).is_empty());

    let secrets = secrets_of(&ca, &cookies);
    assert_clean("the trace log", &log, &secrets);
    assert_clean("Debug/Display output", &outputs.join("\n"), &secrets);
}

fn secret_manifest(name: &str, data: &[(&str, &str)]) -> String {
    let mut text = format!(
        "apiVersion: v1\nkind: Secret\nmetadata: {{ name: {name}, namespace: banlieue-system }}\nstringData:\n"
    );
    for (key, value) in data {
        if value.contains('\n') {
            // A YAML block scalar keeps PEM line breaks.
            text.push_str(&format!("  {key}: |\n"));
            for line in value.lines() {
                text.push_str(&format!("    {line}\n"));
            }
        } else {
            text.push_str(&format!("  {key}: \"{value}\"\n"));
        }
    }
    text + "---\n"
}

fn provider_manifest(name: &str, endpoint: &str, credentials: &str, ca_secret: &str) -> String {
    format!(
        "apiVersion: banlieue.io/v1alpha1\nkind: Provider\nmetadata: {{ name: {name}, namespace: banlieue-system }}\nspec:\n  \
         providerClassRef: {{ name: vsphere }}\n  connection:\n    endpoint: {endpoint}\n    \
         credentialsRef: {{ name: {credentials} }}\n    caBundle: {{ secretRef: {{ name: {ca_secret} }} }}\n---\n"
    )
}

#[tokio::test]
async fn banlieue_check_at_trace_level_never_shows_a_secret() {
    let binary = tokio::task::spawn_blocking(banlieue_binary)
        .await
        .expect("join");
    let ca = TestCa::new().expect("CA");
    let sim = simulator(audited_options(&ca)).await;
    let dir = tempfile::tempdir().expect("tempdir");
    // A CA Secret that holds the CA's private key next to its certificate
    // (a common mistake), good and wrong credentials, a CA that does not
    // match, and an image so that the template lookup runs.
    let with_key = format!("{}{}", ca.ca_pem(), ca.ca_key_pem());
    let manifests = secret_manifest("vsphere-creds", &[("username", sim.username()), ("password", PASSWORD)])
        + &secret_manifest("wrong-creds", &[("username", sim.username()), ("password", WRONG_PASSWORD)])
        + &secret_manifest("vsphere-ca", &[("ca.crt", &with_key)])
        + &secret_manifest("other-ca", &[("ca.crt", ca.unrelated_ca_pem())])
        + &provider_manifest("good", &sim.sdk_url(), "vsphere-creds", "vsphere-ca")
        + &provider_manifest("wrong-password", &sim.sdk_url(), "wrong-creds", "vsphere-ca")
        + &provider_manifest("wrong-ca", &sim.sdk_url(), "vsphere-creds", "other-ca")
        + "apiVersion: banlieue.io/v1alpha1\nkind: VMImage\nmetadata: { name: golden-image }\nspec:\n  \
           sources: [{ providerClass: vsphere, kind: Template, ref: \"golden\" }]\n---\n";
    std::fs::write(dir.path().join("manifests.yaml"), manifests).expect("write manifests");
    let out = tokio::task::spawn_blocking({
        let dir = dir.path().to_path_buf();
        move || {
            Command::new(binary)
                .args(["check", "-f"])
                .arg(dir)
                .env("RUST_LOG", "trace")
                .env_remove("HTTPS_PROXY")
                .env_remove("https_proxy")
                .output()
                .expect("run banlieue check")
        }
    })
    .await
    .expect("join");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let everything = format!("{stdout}\n{stderr}");

    // The check did the work: one Provider connected, the other two failed
    // for the reasons given, and the trace log shows the wire.
    assert_eq!(
        out.status.code(),
        Some(1),
        "not every Provider is Ready:\n{everything}"
    );
    for needle in [
        "Connected",
        "InvalidLogin",
        "vsphere_client::wire",
        "<Login",
        "RetrievePropertiesEx",
        "certificate",
    ] {
        assert!(
            everything.contains(needle),
            "the output lacks {needle:?}:\n{stderr}"
        );
    }
    let cookies = session_cookies(&sim.log());
    assert!(!cookies.is_empty(), "the simulator handed out sessions");
    assert_clean(
        "banlieue check's output",
        &everything,
        &secrets_of(&ca, &cookies),
    );
}
