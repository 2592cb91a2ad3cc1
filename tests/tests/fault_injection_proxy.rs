//! The proxy environment: `HTTP_PROXY`/`HTTPS_PROXY` are honoured, and
//! `NO_PROXY` takes the vCenter out of them. Alone in its test binary,
//! since it changes the process environment.

use vsphere_client::types::ManagedObjectReference;
use vsphere_client::{Client, ErrorKind, RetryConfig};
use vsphere_tests::{ServerTls, Simulator, SimulatorOptions};

const PROXY_VARS: [&str; 6] = [
    "HTTP_PROXY",
    "http_proxy",
    "HTTPS_PROXY",
    "https_proxy",
    "ALL_PROXY",
    "all_proxy",
];
const NO_PROXY_VARS: [&str; 2] = ["NO_PROXY", "no_proxy"];

#[tokio::test]
async fn no_proxy_sends_the_simulator_calls_past_the_proxy() {
    let sim = tokio::task::spawn_blocking(|| {
        Simulator::start(SimulatorOptions {
            tls: ServerTls::Plain,
            ..Default::default()
        })
    })
    .await
    .expect("join")
    .unwrap_or_else(|e| panic!("simulator: {e}"));
    // A proxy address nobody listens on: going through it fails.
    let dead_proxy = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        format!(
            "http://127.0.0.1:{}",
            listener.local_addr().expect("addr").port()
        )
    };
    for var in PROXY_VARS {
        std::env::set_var(var, &dead_proxy);
    }
    for var in NO_PROXY_VARS {
        std::env::remove_var(var);
    }
    let connect = || {
        Client::builder(&sim.sdk_url())
            .credentials(sim.username(), sim.password())
            .keepalive(None)
            .retry(RetryConfig::none())
            .connect()
    };
    // The proxy variables are honoured: the call goes to the dead proxy.
    let err = connect().await.expect_err("through the dead proxy");
    assert_eq!(err.kind(), ErrorKind::Transport, "{err:?}");

    // NO_PROXY names the vCenter: straight to it.
    std::env::set_var("NO_PROXY", "127.0.0.1");
    let client = connect()
        .await
        .expect("NO_PROXY=127.0.0.1 bypasses the proxy");
    client
        .vim()
        .current_time(&ManagedObjectReference::new(
            "ServiceInstance",
            "ServiceInstance",
        ))
        .await
        .expect("call");

    // `no_proxy()` on the builder ignores the variables altogether.
    std::env::remove_var("NO_PROXY");
    let client = Client::builder(&sim.sdk_url())
        .credentials(sim.username(), sim.password())
        .keepalive(None)
        .no_proxy()
        .connect()
        .await
        .expect("no_proxy() ignores HTTP_PROXY");
    client
        .vim()
        .current_time(&ManagedObjectReference::new(
            "ServiceInstance",
            "ServiceInstance",
        ))
        .await
        .expect("call");
}
