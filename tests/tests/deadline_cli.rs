//! The `vsphere` CLI's call deadline, as a govc user sets it: `-timeout D`
//! or `GOVC_TIMEOUT=D` (a Go duration). Against a server that accepts the
//! connection and never answers, the command ends when the deadline says,
//! exit code 1, with one line naming the deadline; a value Go's
//! `time.ParseDuration` refuses (no unit) is a usage error, exit code 2,
//! before anything is sent.

use std::net::{TcpListener, TcpStream};
use std::process::{Command, Output};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Accepts connections and holds them open without ever reading or
/// answering: a wedged vCenter behind a load balancer.
struct SilentServer {
    url: String,
    accepted: Arc<Mutex<Vec<TcpStream>>>,
}

impl SilentServer {
    fn start() -> SilentServer {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let url = format!("http://{}/sdk", listener.local_addr().expect("addr"));
        let accepted = Arc::new(Mutex::new(Vec::new()));
        let held = accepted.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                held.lock().expect("lock").push(stream);
            }
        });
        SilentServer { url, accepted }
    }

    fn connections(&self) -> usize {
        self.accepted.lock().expect("lock").len()
    }
}

/// Runs the CLI against `url` with only the given GOVC_* settings; its
/// output and how long it took.
fn run(url: &str, args: &[&str], env: &[(&str, &str)]) -> (Output, Duration) {
    let mut command = Command::new(vsphere_tests::vsphere_cli_binary());
    command.args(args);
    for var in [
        "GOVC_TIMEOUT",
        "GOVC_TLS_CA_CERTS",
        "GOVC_TLS_KNOWN_HOSTS",
        "GOVC_INSECURE",
        "VSPHERE_LOG",
        "HTTPS_PROXY",
        "https_proxy",
        "HTTP_PROXY",
        "http_proxy",
        "ALL_PROXY",
        "all_proxy",
    ] {
        command.env_remove(var);
    }
    command
        .env("GOVC_URL", url)
        .env("GOVC_USERNAME", "user")
        .env("GOVC_PASSWORD", "pass");
    for (name, value) in env {
        command.env(name, value);
    }
    let started = Instant::now();
    let output = command.output().expect("run the vsphere CLI");
    (output, started.elapsed())
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[test]
fn timeout_flag_ends_about_against_a_silent_server() {
    let server = SilentServer::start();
    let (output, took) = run(&server.url, &["about", "-timeout", "2s"], &[]);
    let err = stderr(&output);
    assert_eq!(output.status.code(), Some(1), "{err}");
    assert!(
        took >= Duration::from_millis(1900) && took < Duration::from_secs(4),
        "about -timeout 2s took {took:?}: {err}"
    );
    assert!(err.contains("the call deadline (2s) passed"), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "one line: {err}");
    assert!(server.connections() >= 1, "the CLI never connected");
}

#[test]
fn govc_timeout_env_sets_the_deadline() {
    let server = SilentServer::start();
    let (output, took) = run(&server.url, &["about"], &[("GOVC_TIMEOUT", "1500ms")]);
    let err = stderr(&output);
    assert_eq!(output.status.code(), Some(1), "{err}");
    assert!(
        took >= Duration::from_millis(1400) && took < Duration::from_millis(3500),
        "GOVC_TIMEOUT=1500ms took {took:?}: {err}"
    );
    assert!(err.contains("the call deadline (1.5s) passed"), "{err}");
}

#[test]
fn the_flag_wins_over_the_environment() {
    let server = SilentServer::start();
    let (output, took) = run(
        &server.url,
        &["about", "-timeout=1s"],
        &[("GOVC_TIMEOUT", "1m")],
    );
    let err = stderr(&output);
    assert_eq!(output.status.code(), Some(1), "{err}");
    assert!(took < Duration::from_secs(3), "took {took:?}: {err}");
    assert!(err.contains("the call deadline (1s) passed"), "{err}");
}

#[test]
fn a_timeout_without_unit_is_a_usage_error() {
    let server = SilentServer::start();
    for (args, env, named) in [
        (&["about", "-timeout", "10"][..], &[][..], "-timeout \"10\""),
        (
            &["about"][..],
            &[("GOVC_TIMEOUT", "10")][..],
            "GOVC_TIMEOUT=\"10\"",
        ),
        (&["about", "-timeout", "0s"][..], &[][..], "-timeout \"0s\""),
    ] {
        let (output, took) = run(&server.url, args, env);
        let err = stderr(&output);
        assert_eq!(output.status.code(), Some(2), "{args:?} {env:?}: {err}");
        assert!(err.contains(&format!("invalid {named}")), "{err}");
        assert!(err.contains("usage: vsphere about"), "{err}");
        assert!(took < Duration::from_secs(2), "a usage error took {took:?}");
    }
    assert_eq!(server.connections(), 0, "a usage error must not connect");
}
