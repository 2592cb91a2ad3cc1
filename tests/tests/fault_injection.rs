//! Fault injection against the simulator: the vCenter dies (SIGKILL) in the
//! middle of a paged walk, of a clone, of a task wait and of an update stream,
//! then comes back on the same port with a fresh inventory and no sessions.
//! The client must end each interrupted operation with a clear error or
//! recover by itself, never hang or panic, never repeat an operation that is
//! not safe to repeat, and work again on the restarted server without being
//! rebuilt (one re-login).
//!
//! Each test runs under a guard timeout, so a hang fails the test instead of
//! stalling the run. The simulator's trace log (all runs, restarts included)
//! counts what reached the server.

use std::future::Future;
use std::time::Duration;

use vsphere_client::types::ManagedObjectReference;
use vsphere_client::vm::CloneSpec;
use vsphere_client::{mo, property, Client, ErrorKind, RetryConfig};
use vsphere_tests::{ServerTls, Simulator, SimulatorOptions, Template};

/// No test here needs more; a hang shows as this timeout.
const GUARD: Duration = Duration::from_secs(60);

async fn guarded<T>(test: impl Future<Output = T>) -> T {
    tokio::time::timeout(GUARD, test)
        .await
        .unwrap_or_else(|_| panic!("the test hung for {GUARD:?}"))
}

async fn simulator(options: SimulatorOptions) -> Simulator {
    tokio::task::spawn_blocking(move || Simulator::start(options))
        .await
        .expect("join")
        .unwrap_or_else(|e| panic!("simulator: {e}"))
}

/// Kills the simulator (SIGKILL) as soon as it has received more than
/// `seen` requests of `method`: with that request in flight (the tests
/// delay it on the server).
async fn kill_when_received(mut sim: Simulator, method: &str, seen: usize) -> Simulator {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while requests(&sim, method) <= seen {
        assert!(
            std::time::Instant::now() < deadline,
            "no {method} request reached the simulator"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // The launcher blocks while it stops: off the runtime.
    tokio::task::spawn_blocking(move || {
        sim.kill();
        sim
    })
    .await
    .expect("join")
}

/// Restarts the simulator on the same port, with `change` applied to its
/// options first (e.g. to drop the delay that made the window).
async fn restart(
    mut sim: Simulator,
    change: impl FnOnce(&mut SimulatorOptions) + Send + 'static,
) -> Simulator {
    tokio::task::spawn_blocking(move || {
        change(sim.options_mut());
        sim.restart().unwrap_or_else(|e| panic!("restart: {e}"));
        sim
    })
    .await
    .expect("join")
}

fn plain(options: SimulatorOptions) -> SimulatorOptions {
    SimulatorOptions {
        tls: ServerTls::Plain,
        trace: true,
        ..options
    }
}

/// Fast retries, so the retries against a dead server end within a second.
fn fast_retry() -> RetryConfig {
    RetryConfig {
        max_retries: 3,
        initial_backoff: Duration::from_millis(50),
        max_backoff: Duration::from_millis(400),
    }
}

async fn connect(sim: &Simulator) -> Client {
    Client::builder(&sim.sdk_url())
        .credentials(sim.username(), sim.password())
        .keepalive(None)
        .retry(fast_retry())
        .call_timeout(Some(Duration::from_secs(20)))
        .connect()
        .await
        .expect("connect")
}

/// Requests of `method` that reached the simulator (any run).
fn requests(sim: &Simulator, method: &str) -> usize {
    let open = format!("<{method}");
    sim.log()
        .lines()
        .filter(|line| {
            line.starts_with("Request:")
                && line
                    .match_indices(&open)
                    .any(|(i, _)| matches!(line.as_bytes().get(i + open.len()), Some(b' ' | b'>')))
        })
        .count()
}

fn calls(client: &Client, method: &str) -> u64 {
    client.call_stats().get(method).map_or(0, |s| s.calls)
}

/// The error and its causes on one line.
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

fn root(client: &Client) -> ManagedObjectReference {
    client.service_content().root_folder.clone()
}

async fn vm_names(client: &Client) -> Vec<String> {
    let mut names: Vec<String> = client
        .properties::<mo::VirtualMachine>(&["name"])
        .unwrap()
        .in_container(&root(client))
        .collect_all()
        .await
        .expect("list VMs")
        .into_iter()
        .filter_map(|vm| vm.name)
        .collect();
    names.sort();
    names
}

#[tokio::test]
async fn a_paged_walk_cut_by_a_crash_fails_clearly_and_the_next_walk_works() {
    guarded(async {
        // 120 VMs in pages of 40; each continuation takes 2 s: the window.
        let sim = simulator(plain(SimulatorOptions {
            vms: 60,
            autostart: false,
            extra_args: vec!["-page-size=40".into()],
            method_delays: vec![(
                "ContinueRetrievePropertiesEx".into(),
                Duration::from_secs(2),
            )],
            ..Default::default()
        }))
        .await;
        let client = connect(&sim).await;
        let mut pages = client
            .properties::<mo::VirtualMachine>(&["name"])
            .unwrap()
            .in_container(&root(&client));
        let first = pages.next_page().await.expect("first page").expect("some");
        assert_eq!(first.len(), 40);

        // The vCenter dies while the second page is being served.
        let started = std::time::Instant::now();
        let (second, sim) = tokio::join!(
            pages.next_page(),
            kill_when_received(sim, "ContinueRetrievePropertiesEx", 0)
        );
        let err = second.expect_err("the server died mid-page");
        assert_eq!(err.kind(), ErrorKind::Transport, "{}", chain(&err));
        assert_eq!(err.method(), Some("ContinueRetrievePropertiesEx"), "{err}");
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "the retries against a dead server are bounded: {:?}",
            started.elapsed()
        );
        // The walk is over after an error (its token died with the server).
        assert!(pages.next_page().await.expect("no more calls").is_none());
        assert_eq!(
            requests(&sim, "ContinueRetrievePropertiesEx"),
            1,
            "the retries of the cut request found the port closed"
        );

        // Back, without the delay: the same client walks everything again
        // after one re-login.
        let sim = restart(sim, |o| o.method_delays.clear()).await;
        let names = vm_names(&client).await;
        assert_eq!(names.len(), 120, "every VM, once");
        assert_eq!(calls(&client, "Login"), 2, "connect + one re-login");
        drop(sim);
    })
    .await
}

fn with_template(options: SimulatorOptions) -> SimulatorOptions {
    plain(SimulatorOptions {
        templates: vec![Template::everywhere("golden")],
        ..options
    })
}

/// The template, and a clone spec into the datacenter's VM folder and the
/// cluster's root pool.
async fn clone_setup(client: &Client) -> (vsphere_client::vm::VirtualMachine, CloneSpec) {
    let finder = client.finder().in_datacenter("DC0");
    let template = client.vm(finder
        .virtual_machine("golden")
        .await
        .expect("template")
        .reference);
    let folder = finder.find_one("vm").await.expect("vm folder").reference;
    let cluster = finder.clusters().await.expect("clusters").remove(0);
    let pool = cluster.resource_pool.clone().expect("root pool");
    (template, CloneSpec::new(folder).pool(pool))
}

#[tokio::test]
async fn a_clone_cut_by_a_crash_is_not_sent_twice_and_can_be_made_once_after() {
    guarded(async {
        // The simulator sleeps 3 s before running CloneVM_Task: it dies
        // with the request in hand and the clone not made.
        let sim = simulator(with_template(SimulatorOptions {
            method_delays: vec![("CloneVM_Task".into(), Duration::from_secs(3))],
            ..Default::default()
        }))
        .await;
        let client = connect(&sim).await;
        let (template, spec) = clone_setup(&client).await;
        let (started, sim) = tokio::join!(
            template.start_clone("web-1", &spec),
            kill_when_received(sim, "CloneVM_Task", 0)
        );
        let err = started.expect_err("the server died mid-clone");
        assert_eq!(err.kind(), ErrorKind::Transport, "{}", chain(&err));
        assert_eq!(err.method(), Some("CloneVM_Task"), "{err}");
        assert!(
            err.to_string().contains(
                "the request may have reached the server, which may have run it: not repeated"
            ),
            "the caller is told to look before cloning again: {err}"
        );
        assert_eq!(requests(&sim, "CloneVM_Task"), 1);

        let sim = restart(sim, |o| o.method_delays.clear()).await;
        assert_eq!(
            requests(&sim, "CloneVM_Task"),
            1,
            "a clone may have started: it is never sent again by the client"
        );
        // The caller decides: here the clone is not there, so it is made.
        assert!(!vm_names(&client).await.iter().any(|n| n == "web-1"));
        let (template, spec) = clone_setup(&client).await;
        template
            .clone_vm("web-1", &spec)
            .await
            .expect("clone after restart");
        let names = vm_names(&client).await;
        assert_eq!(
            names.iter().filter(|n| *n == "web-1").count(),
            1,
            "{names:?}"
        );
        assert_eq!(calls(&client, "Login"), 2, "connect + one re-login");
    })
    .await
}

#[tokio::test]
async fn a_task_wait_cut_by_a_crash_ends_with_a_clear_error_and_the_next_wait_works() {
    guarded(async {
        // Tasks finish at once in the simulator; the wait's
        // WaitForUpdatesEx is slowed down so that the server dies during it.
        let sim = simulator(with_template(SimulatorOptions {
            method_delays: vec![("WaitForUpdatesEx".into(), Duration::from_secs(3))],
            ..Default::default()
        }))
        .await;
        let client = connect(&sim).await;
        let (template, spec) = clone_setup(&client).await;
        let task = template
            .start_clone("web-1", &spec)
            .await
            .expect("clone started");
        let waits_before = requests(&sim, "WaitForUpdatesEx");
        let waiting = tokio::spawn({
            let task = task.clone();
            async move { task.wait().await }
        });
        let sim = kill_when_received(sim, "WaitForUpdatesEx", waits_before).await;
        let sim = restart(sim, |o| o.method_delays.clear()).await;
        // The task died with the server: the wait ends, it does not hang.
        // Either the restarted server answered (the task's object is gone)
        // or the retries ran out first (the server was down).
        let err = waiting
            .await
            .expect("the wait does not panic")
            .expect_err("the task died with the server");
        let text = chain(&err);
        assert!(
            text.contains(&format!("waiting for task {} failed", task.reference())),
            "{text}"
        );
        match err.kind() {
            // The fault of the call that failed is kept, typed.
            ErrorKind::Fault => assert!(
                err.fault().is_some_and(|f| f.is("ManagedObjectNotFound")),
                "{err:?}"
            ),
            ErrorKind::Transport => {}
            other => panic!("{other:?}: {text}"),
        }
        // The same client's task watcher works on the new server.
        let (template, spec) = clone_setup(&client).await;
        let info = template
            .start_clone("web-2", &spec)
            .await
            .expect("clone after restart")
            .wait()
            .await
            .expect("wait after restart");
        assert!(vsphere_client::task::task_result_reference(&info).is_some());
        assert_eq!(calls(&client, "Login"), 2, "connect + one re-login");
        drop(sim);
    })
    .await
}

#[tokio::test]
async fn an_update_stream_cut_by_a_crash_recovers_on_the_restarted_server() {
    guarded(async {
        let sim = simulator(plain(SimulatorOptions::default())).await;
        let client = connect(&sim).await;
        let vms = client
            .properties::<mo::VirtualMachine>(&["name"])
            .unwrap()
            .in_container(&root(&client))
            .collect_all()
            .await
            .expect("vms");
        let vm = vms
            .iter()
            .find(|v| v.name.as_deref() == Some("DC0_H0_VM0"))
            .expect("DC0_H0_VM0")
            .mo_ref
            .clone();
        let mut stream = client
            .properties::<mo::VirtualMachine>(&["name", "runtime.powerState"])
            .unwrap()
            .watch_select(
                vec![vsphere_client::types::ObjectSpec {
                    obj: vm.clone(),
                    skip: Some(false),
                    select_set: Vec::new(),
                }],
                property::UpdateStreamOptions {
                    max_wait: Some(Duration::from_secs(1)),
                    max_object_updates: None,
                },
            )
            .await
            .expect("watch");
        let first = stream.next().await.expect("enter");
        assert_eq!(first.kind, property::UpdateKind::Enter);

        // The server dies while the stream waits, and comes back.
        let waits_before = requests(&sim, "WaitForUpdatesEx");
        let (result, sim) = tokio::join!(stream.next(), async {
            let sim = kill_when_received(sim, "WaitForUpdatesEx", waits_before).await;
            tokio::time::sleep(Duration::from_millis(500)).await;
            restart(sim, |_| {}).await
        });
        let mut errors = Vec::new();
        let mut result = result;
        while let Err(err) = result {
            eprintln!("stream error: {}", chain(&err));
            errors.push(err);
            assert!(errors.len() < 5, "the stream does not recover");
            result = stream.next().await;
        }
        let change = result.expect("recovered");
        eprintln!("errors before recovery: {}", errors.len());
        for err in &errors {
            assert_eq!(err.kind(), ErrorKind::Transport, "{}", chain(err));
        }
        assert_eq!(
            change.kind,
            property::UpdateKind::Enter,
            "the VM enters anew"
        );
        assert_eq!(
            change.object.mo_ref, vm,
            "same moref in the default inventory"
        );
        assert_eq!(calls(&client, "Login"), 2, "connect + one re-login");
        assert_eq!(
            calls(&client, "CreateFilter"),
            2,
            "the filter was made again"
        );
        drop(sim);
    })
    .await
}

#[tokio::test]
async fn a_slow_server_times_out_with_bounded_retries_and_the_client_stays_usable() {
    guarded(async {
        // Both calls take 1.5 s on the server. The client allows 20 s; a
        // handle of it allows 400 ms per attempt.
        let sim = simulator(plain(SimulatorOptions {
            method_delays: vec![
                ("CurrentTime".into(), Duration::from_millis(1500)),
                ("PowerOnVM_Task".into(), Duration::from_millis(1500)),
            ],
            ..Default::default()
        }))
        .await;
        let client = connect(&sim).await;
        let hasty = client.with_call_timeout(Duration::from_millis(400));
        let service_instance = ManagedObjectReference::new("ServiceInstance", "ServiceInstance");
        let started = std::time::Instant::now();
        let err = hasty
            .vim()
            .current_time(&service_instance)
            .await
            .expect_err("slow");
        let waited = started.elapsed();
        assert_eq!(err.kind(), ErrorKind::Timeout, "{}", chain(&err));
        assert!(
            err.to_string().contains("within the call timeout (400ms)"),
            "{err}"
        );
        // 4 attempts of 400 ms plus short backoffs: bounded, and below
        // what waiting for the server would take (4 x 1.5 s).
        assert!(
            waited >= Duration::from_millis(1600) && waited < Duration::from_secs(4),
            "{waited:?}"
        );
        assert_eq!(
            requests(&sim, "CurrentTime"),
            4,
            "first attempt + 3 retries"
        );
        // The client's own timeout is untouched by its handle.
        client
            .vim()
            .current_time(&service_instance)
            .await
            .expect("within 20 s");
        assert_eq!(requests(&sim, "CurrentTime"), 5);

        // A call that may not be repeated times out once.
        let vm = client
            .properties::<mo::VirtualMachine>(&["name"])
            .unwrap()
            .in_container(&root(&client))
            .collect_all()
            .await
            .expect("vms")
            .remove(0)
            .mo_ref;
        let err = hasty
            .vim()
            .power_on_vm_task(&vm, None)
            .await
            .expect_err("slow");
        assert_eq!(err.kind(), ErrorKind::Timeout, "{}", chain(&err));
        assert!(
            err.to_string().contains("may have run it: not repeated"),
            "{err}"
        );
        assert_eq!(requests(&sim, "PowerOnVM_Task"), 1, "never sent twice");

        // The timed-out calls hold nothing: other calls go through.
        assert_eq!(vm_names(&hasty).await.len(), 4);
    })
    .await
}
