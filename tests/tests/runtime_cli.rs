//! The `vsphere` example CLI configured like govc, against the simulator.

use std::path::PathBuf;
use std::process::{Command, Output};

use vsphere_tests::{vsphere_cli_binary, ServerTls, Simulator, SimulatorOptions, TestCa};

fn cli() -> PathBuf {
    vsphere_cli_binary()
}

const GOVC_VARS: &[&str] = &[
    "GOVC_URL",
    "GOVC_USERNAME",
    "GOVC_PASSWORD",
    "GOVC_INSECURE",
    "GOVC_TLS_CA_CERTS",
    "GOVC_TLS_KNOWN_HOSTS",
];

/// Runs the CLI with exactly these GOVC_* variables.
fn run(args: &[&str], env: &[(&str, String)]) -> Output {
    let mut command = Command::new(cli());
    command.args(args);
    for var in GOVC_VARS {
        command.env_remove(var);
    }
    for var in [
        "VSPHERE_LOG",
        "HTTP_PROXY",
        "http_proxy",
        "HTTPS_PROXY",
        "https_proxy",
        "ALL_PROXY",
        "all_proxy",
        "NO_PROXY",
        "no_proxy",
    ] {
        command.env_remove(var);
    }
    for (name, value) in env {
        command.env(name, value);
    }
    command.output().expect("run the vsphere CLI")
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// The value printed for `label` (`API version:  6.5` -> `6.5`).
fn field(out: &str, label: &str) -> Option<String> {
    out.lines().find_map(|line| {
        line.strip_prefix(&format!("{label}:"))
            .map(|v| v.trim().to_string())
    })
}

fn start(options: SimulatorOptions) -> Simulator {
    Simulator::start(options).unwrap_or_else(|e| panic!("simulator: {e}"))
}

#[test]
fn about_with_credentials_in_govc_url_and_govc_insecure() {
    let sim = start(SimulatorOptions {
        trace: true,
        ..Default::default()
    });
    let output = run(
        &["about"],
        &[
            ("GOVC_URL", sim.url_with_credentials()),
            ("GOVC_INSECURE", "1".into()),
        ],
    );
    let out = stdout(&output);
    assert!(
        output.status.success(),
        "stdout: {out}\nstderr: {}",
        stderr(&output)
    );
    assert_eq!(
        field(&out, "Name").as_deref(),
        Some("VMware vCenter Server"),
        "{out}"
    );
    assert_eq!(field(&out, "Vendor").as_deref(), Some("VMware, Inc."));
    assert_eq!(field(&out, "API type").as_deref(), Some("VirtualCenter"));
    assert_eq!(field(&out, "API version").as_deref(), Some("6.5"));
    assert_eq!(field(&out, "Product ID").as_deref(), Some("vpx"));
    assert!(
        field(&out, "FullName").is_some_and(|v| v.starts_with("VMware vCenter Server")),
        "{out}"
    );
    assert!(field(&out, "UUID").is_some_and(|v| !v.is_empty()), "{out}");
    let log = sim.log();
    assert!(
        log.contains("<Login ") && log.contains("<Logout "),
        "logged in, then out: no leaked session"
    );
}

#[test]
fn about_with_flags_and_govc_username_password() {
    let sim = start(SimulatorOptions::default());
    // Host and port only: https and /sdk are implied, as with govc.
    let output = run(
        &["about", "-u", &sim.host_port(), "-k"],
        &[
            ("GOVC_USERNAME", sim.username().into()),
            ("GOVC_PASSWORD", sim.password().into()),
        ],
    );
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(
        field(&stdout(&output), "API version").as_deref(),
        Some("6.5")
    );
}

#[test]
fn about_trusting_a_ca_file_or_a_known_hosts_thumbprint() {
    let ca = TestCa::new().expect("CA");
    let sim = start(SimulatorOptions {
        tls: ca.server_tls(),
        ..Default::default()
    });
    let output = run(
        &["about"],
        &[
            ("GOVC_URL", sim.url_with_credentials()),
            ("GOVC_TLS_CA_CERTS", ca.ca_file().display().to_string()),
        ],
    );
    assert!(output.status.success(), "CA file: {}", stderr(&output));

    let known_hosts = ca.dir().join("known_hosts");
    std::fs::write(
        &known_hosts,
        format!(
            "other.example.com:443 AA:BB\n{} {}\n",
            sim.host_port(),
            ca.server_sha256_thumbprint()
        ),
    )
    .expect("write known_hosts");
    let output = run(
        &["about"],
        &[
            ("GOVC_URL", sim.url_with_credentials()),
            ("GOVC_TLS_KNOWN_HOSTS", known_hosts.display().to_string()),
        ],
    );
    assert!(output.status.success(), "known hosts: {}", stderr(&output));
}

#[test]
fn failures_exit_non_zero_with_one_line() {
    let ca = TestCa::new().expect("CA");
    let sim = start(SimulatorOptions {
        tls: ca.server_tls(),
        ..Default::default()
    });

    // The wrong CA: a certificate error.
    let output = run(
        &["about"],
        &[
            ("GOVC_URL", sim.url_with_credentials()),
            (
                "GOVC_TLS_CA_CERTS",
                ca.unrelated_ca_file().display().to_string(),
            ),
        ],
    );
    let err = stderr(&output);
    assert_eq!(output.status.code(), Some(1), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "one line: {err}");
    assert!(err.contains("certificate"), "{err}");

    // The wrong password: InvalidLogin, and the password is not echoed.
    let output = run(
        &["about", "-k"],
        &[
            ("GOVC_URL", sim.sdk_url()),
            ("GOVC_USERNAME", sim.username().into()),
            ("GOVC_PASSWORD", "wrong-secret-123".into()),
        ],
    );
    let err = stderr(&output);
    assert_eq!(output.status.code(), Some(1), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "one line: {err}");
    assert!(err.contains("InvalidLogin"), "{err}");
    assert!(!err.contains("wrong-secret-123"));

    // No URL at all: a usage error.
    let output = run(&["about"], &[]);
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    assert!(stderr(&output).contains("GOVC_URL"));
}

#[test]
fn plain_http_urls_work() {
    let sim = start(SimulatorOptions {
        tls: ServerTls::Plain,
        ..Default::default()
    });
    let output = run(&["about"], &[("GOVC_URL", sim.url_with_credentials())]);
    assert!(output.status.success(), "{}", stderr(&output));
}

#[test]
fn the_proxy_environment_variables_are_honoured() {
    let sim = start(SimulatorOptions {
        tls: ServerTls::Plain,
        ..Default::default()
    });
    // The vCenter URL points at a loopback port nobody listens on; the
    // simulator, named as the proxy, answers the proxied requests.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!(
        "http://{}:{}@127.0.0.1:{port}/sdk",
        sim.username(),
        sim.password()
    );
    let output = run(
        &["about"],
        &[("GOVC_URL", url.clone()), ("HTTP_PROXY", sim.base_url())],
    );
    assert!(
        output.status.success(),
        "through HTTP_PROXY: {}",
        stderr(&output)
    );
    let output = run(&["about"], &[("GOVC_URL", url)]);
    assert_eq!(
        output.status.code(),
        Some(1),
        "without the proxy nobody answers"
    );
}
