//! The kit's own contract: what each built-in answer, matcher, reply, task
//! script and scenario does to a real `vsphere-client`.

use std::time::{Duration, Instant};

use vsphere_client::types::{
    CurrentTimeRequestType, InvalidLogin, InvalidState, LoginRequestType, ManagedObjectNotFound,
    ManagedObjectReference, NotAuthenticated, PowerOnVMRequestType, RequestCanceled, TaskInfoState,
};
use vsphere_client::{Client, DateTime, ErrorKind, RetryConfig};
use vsphere_testkit::{MockVCenter, Reply, TaskScript};

fn si() -> ManagedObjectReference {
    ManagedObjectReference::new("ServiceInstance", "ServiceInstance")
}

fn vm() -> ManagedObjectReference {
    ManagedObjectReference::new("VirtualMachine", "vm-42")
}

fn noon() -> DateTime {
    DateTime::new("2024-05-01T12:00:00Z")
}

#[tokio::test]
async fn a_client_connects_logs_in_and_negotiates_the_version() {
    let vc = MockVCenter::start().await;
    let client = vc.client().await;
    assert_eq!(client.api_version(), "8.0.3.0");
    assert_eq!(client.service_content().about.api_type, "VirtualCenter");
    let logins = vc.received::<LoginRequestType>().await;
    assert_eq!(logins.len(), 1);
    assert_eq!(logins[0].user_name, MockVCenter::USER);
    assert_eq!(
        vc.operations().await,
        ["RetrieveServiceContent", "Login"],
        "nothing else is sent on connect"
    );
    client.close().await.expect("logout");
    assert_eq!(
        vc.operations().await.last().map(String::as_str),
        Some("Logout")
    );
}

#[tokio::test]
async fn a_wrong_password_is_refused_with_invalid_login() {
    let vc = MockVCenter::start().await;
    let err = Client::builder(&vc.url())
        .credentials(MockVCenter::USER, "wrong")
        .keepalive(None)
        .connect()
        .await
        .expect_err("wrong password");
    assert_eq!(err.kind(), ErrorKind::InvalidLogin);
    assert!(err.is_fault::<InvalidLogin>());
}

#[tokio::test]
async fn calls_without_a_session_get_not_authenticated() {
    let vc = MockVCenter::start().await;
    vc.on::<CurrentTimeRequestType>().returns(noon()).await;
    let anonymous = Client::builder(&vc.url())
        .keepalive(None)
        .connect()
        .await
        .expect("the service content needs no session");
    let err = anonymous
        .vim()
        .current_time(&si())
        .await
        .expect_err("no session");
    assert!(
        err.is_not_authenticated() && err.is_fault::<NotAuthenticated>(),
        "{err:?}"
    );
}

#[tokio::test]
async fn matchers_pick_by_operation_and_predicate_and_requests_decode() {
    let vc = MockVCenter::start().await;
    let other = ManagedObjectReference::new("VirtualMachine", "vm-7");
    vc.on::<PowerOnVMRequestType>()
        .when(|r| r.this.value == "vm-7")
        .fails(
            InvalidState::default(),
            "The operation is not allowed in the current state.",
        )
        .await;
    vc.on::<PowerOnVMRequestType>()
        .returns(ManagedObjectReference::new("Task", "task-9"))
        .await;
    let client = vc.client().await;
    let task = client
        .vim()
        .power_on_vm_task(&vm(), None)
        .await
        .expect("vm-42");
    assert_eq!(task.value, "task-9");
    let err = client
        .vim()
        .power_on_vm_task(&other, None)
        .await
        .expect_err("vm-7");
    assert!(err.is_fault::<InvalidState>(), "{err:?}");
    assert_eq!(err.method(), Some("PowerOnVM_Task"));
    let sent: Vec<_> = vc
        .received::<PowerOnVMRequestType>()
        .await
        .into_iter()
        .map(|r| r.this)
        .collect();
    assert_eq!(sent, [vm(), other]);
}

#[tokio::test]
async fn times_limits_a_mock_then_the_next_one_answers() {
    let vc = MockVCenter::start().await;
    vc.on::<CurrentTimeRequestType>()
        .times(1)
        .reply(Reply::status(503))
        .await;
    vc.on::<CurrentTimeRequestType>().returns(noon()).await;
    let client = vc.client().await;
    // CurrentTime is idempotent: retried after the 503.
    assert_eq!(
        client.vim().current_time(&si()).await.expect("retried"),
        noon()
    );
    assert_eq!(vc.count::<CurrentTimeRequestType>().await, 2);
}

#[tokio::test]
async fn a_task_script_is_seen_state_by_state() {
    let vc = MockVCenter::start().await;
    vc.on::<PowerOnVMRequestType>()
        .returns_task(
            TaskScript::new()
                .queued()
                .running(10)
                .after(Duration::from_millis(100))
                .running(60)
                .succeeds_with(vm()),
        )
        .await;
    let client = vc.client().await;
    let task = client.task(client.vim().power_on_vm_task(&vm(), None).await.unwrap());
    let mut seen = Vec::new();
    let started = Instant::now();
    let info = task
        .wait_with_progress(Some(Duration::from_secs(10)), |i| {
            seen.push((i.state.clone(), i.progress))
        })
        .await
        .expect("succeeds");
    assert!(
        started.elapsed() >= Duration::from_millis(100),
        "the script's wait is kept"
    );
    assert_eq!(
        seen,
        [
            (TaskInfoState::Queued, None),
            (TaskInfoState::Running, Some(10)),
            (TaskInfoState::Running, Some(60)),
            (TaskInfoState::Success, None),
        ]
    );
    assert_eq!(
        vsphere_client::task::task_result_reference(&info),
        Some(vm())
    );
    assert_eq!(
        info.entity,
        Some(vm()),
        "the task is about the VM it was started on"
    );
    assert_eq!(info.name.as_deref(), Some("PowerOnVM_Task"));
}

#[tokio::test]
async fn a_running_task_times_out_and_can_be_cancelled() {
    let vc = MockVCenter::start().await;
    let task = vc.task(TaskScript::new().running(42));
    let client = vc.client().await;
    let err = client
        .task(task.clone())
        .wait_timeout(Duration::from_millis(500))
        .await
        .expect_err("runs on");
    assert_eq!(err.kind(), ErrorKind::Timeout);
    assert!(err.to_string().contains("running, 42%"), "{err}");
    client.task(task.clone()).cancel().await.expect("cancel");
    let err = client
        .task(task)
        .wait_timeout(Duration::from_secs(5))
        .await
        .expect_err("cancelled");
    assert!(err.is_fault::<RequestCanceled>(), "{err:?}");
}

#[tokio::test]
async fn an_expired_session_is_renewed_once_mid_run() {
    let vc = MockVCenter::start().await;
    vc.on::<CurrentTimeRequestType>().returns(noon()).await;
    let client = vc.client().await;
    client.vim().current_time(&si()).await.expect("first");
    vc.expire_sessions();
    client
        .vim()
        .current_time(&si())
        .await
        .expect("after a re-login");
    assert_eq!(
        vc.count::<LoginRequestType>().await,
        2,
        "connect + one re-login"
    );
    assert_eq!(
        vc.count::<CurrentTimeRequestType>().await,
        3,
        "the rejected call was sent again"
    );
}

#[tokio::test]
async fn task_waits_survive_an_expired_session() {
    let vc = MockVCenter::start().await;
    let first = vc.task(TaskScript::success());
    let client = vc.client().await;
    client
        .task(first)
        .wait_timeout(Duration::from_secs(5))
        .await
        .expect("first wait");
    vc.expire_sessions();
    let second = vc.task(TaskScript::success());
    client
        .task(second)
        .wait_timeout(Duration::from_secs(5))
        .await
        .expect("after the re-login");
    assert_eq!(vc.count::<LoginRequestType>().await, 2);
}

#[tokio::test]
async fn a_503_storm_is_ridden_out_by_idempotent_calls_only() {
    let vc = MockVCenter::start().await;
    vc.on::<CurrentTimeRequestType>().returns(noon()).await;
    vc.on::<PowerOnVMRequestType>()
        .returns_task(TaskScript::success())
        .await;
    let client = vc.client().await;
    vc.storm_503(2).await;
    client
        .vim()
        .current_time(&si())
        .await
        .expect("retried through the storm");
    assert_eq!(vc.count::<CurrentTimeRequestType>().await, 3);
    vc.storm_503(1).await;
    let err = client
        .vim()
        .power_on_vm_task(&vm(), None)
        .await
        .expect_err("not retried");
    assert_eq!(err.kind(), ErrorKind::HttpStatus(503));
    assert_eq!(vc.count::<PowerOnVMRequestType>().await, 1);
}

#[tokio::test]
async fn a_slow_server_hits_the_call_timeout() {
    let vc = MockVCenter::start().await;
    vc.on::<CurrentTimeRequestType>().returns(noon()).await;
    let client = vc
        .client_builder()
        .call_timeout(Some(Duration::from_millis(200)))
        .retry(RetryConfig::none())
        .connect()
        .await
        .expect("connect");
    vc.set_latency(Duration::from_secs(2));
    let err = client
        .vim()
        .current_time(&si())
        .await
        .expect_err("too slow");
    assert_eq!(err.kind(), ErrorKind::Timeout, "{err:?}");
    vc.set_latency(Duration::ZERO);
    client.vim().current_time(&si()).await.expect("fast again");
}

#[tokio::test]
async fn a_dropped_connection_is_a_transport_error_and_not_resent() {
    let vc = MockVCenter::start().await;
    vc.on::<PowerOnVMRequestType>()
        .returns_task(TaskScript::success())
        .await;
    let client = vc.client().await;
    vc.drop_connections(1).await;
    let err = client
        .vim()
        .power_on_vm_task(&vm(), None)
        .await
        .expect_err("dropped");
    assert_eq!(err.kind(), ErrorKind::Transport, "{err:?}");
    assert_eq!(
        vc.count::<PowerOnVMRequestType>().await,
        1,
        "may have run: sent once"
    );
    client
        .vim()
        .power_on_vm_task(&vm(), None)
        .await
        .expect("the next one is answered");
}

#[tokio::test]
async fn the_rest_side_logs_in_with_the_same_credentials() {
    let vc = MockVCenter::start().await;
    let client = vc.client().await;
    let rest = client.rest().await.expect("REST login");
    assert!(rest.has_session());
    assert_eq!(
        rest.session_info().await.expect("session").user,
        MockVCenter::USER
    );
    vc.expire_sessions();
    assert_eq!(
        rest.session_info().await.expect("after a re-login").user,
        MockVCenter::USER
    );
    let logins: Vec<_> = vc
        .raw_requests()
        .await
        .into_iter()
        .filter(|r| r.method.as_str() == "POST" && r.url.path() == "/api/session")
        .collect();
    assert_eq!(logins.len(), 2);
    let ids = vc.api_session_ids();
    assert_eq!(ids.len(), 2, "one id per login: {ids:?}");
    assert_ne!(ids[0], ids[1]);
    let sent: Vec<_> = vc
        .raw_requests()
        .await
        .into_iter()
        .filter(|r| r.method.as_str() == "GET" && r.url.path() == "/api/session")
        .filter_map(|r| {
            r.headers
                .get(vsphere_testkit::SESSION_HEADER)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string)
        })
        // (the first check tries the SOAP cookie, which this mock refuses)
        .filter(|id| ids.contains(id))
        .collect();
    assert_eq!(
        sent.first(),
        Some(&ids[0]),
        "the session info read carries the id handed out"
    );
    assert_eq!(
        sent.last(),
        Some(&ids[1]),
        "and after the re-login, the new one"
    );
}

#[tokio::test]
async fn a_delayed_reply_comes_late() {
    let vc = MockVCenter::start().await;
    vc.on::<CurrentTimeRequestType>()
        .reply(Reply::ok(noon()).delay(Duration::from_millis(300)))
        .await;
    let client = vc.client().await;
    let started = Instant::now();
    client.vim().current_time(&si()).await.expect("late");
    assert!(started.elapsed() >= Duration::from_millis(300));
}

#[tokio::test]
async fn requests_in_flight_are_counted_against_a_slow_server() {
    let vc = MockVCenter::start().await;
    vc.on::<CurrentTimeRequestType>().returns(noon()).await;
    let client = vc
        .client_builder()
        .concurrency_limit(3)
        .connect()
        .await
        .expect("connect");
    assert_eq!(vc.max_in_flight(), 1, "connect is one call after the other");
    vc.set_latency(Duration::from_millis(400));
    let calls: Vec<_> = (0..6)
        .map(|_| {
            let client = client.clone();
            tokio::spawn(async move { client.vim().current_time(&si()).await })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(150)).await;
    assert_eq!(vc.in_flight(), 3, "the first three are being answered");
    for call in calls {
        call.await.expect("no panic").expect("answered");
    }
    assert_eq!(vc.max_in_flight(), 3, "the client's limit, reached");
    assert_eq!(vc.in_flight(), 0);
    let times: Vec<_> = vc
        .exchanges()
        .into_iter()
        .filter(|e| e.operation.as_deref() == Some("CurrentTime"))
        .collect();
    assert_eq!(times.len(), 6);
    for e in &times {
        assert_eq!(e.answered - e.received, Duration::from_millis(400));
        assert_eq!((e.method.as_str(), e.path.as_str()), ("POST", "/sdk"));
    }
}

#[tokio::test]
async fn exchanges_record_each_answers_status() {
    let vc = MockVCenter::start().await;
    vc.on::<CurrentTimeRequestType>().returns(noon()).await;
    let client = vc.client().await;
    vc.storm_503(1).await;
    client.vim().current_time(&si()).await.expect("retried");
    let statuses: Vec<_> = vc
        .exchanges()
        .into_iter()
        .filter_map(|e| Some((e.operation?, e.status)))
        .collect();
    let op = |name: &str| name.to_string();
    assert_eq!(
        statuses,
        [
            (op("RetrieveServiceContent"), Some(200)),
            (op("Login"), Some(200)),
            (op("CurrentTime"), Some(503)),
            (op("CurrentTime"), Some(200)),
        ],
        "connect, the 503 and the retry"
    );
}

#[tokio::test]
async fn the_session_cookie_login_hands_out_is_the_one_calls_carry() {
    let vc = MockVCenter::start().await;
    vc.on::<CurrentTimeRequestType>().returns(noon()).await;
    let client = vc.client().await;
    client.vim().current_time(&si()).await.expect("call");
    vc.expire_sessions();
    client.vim().current_time(&si()).await.expect("re-login");
    let cookies = vc.session_cookies();
    assert_eq!(cookies.len(), 2, "connect and the re-login: {cookies:?}");
    assert_ne!(cookies[0], cookies[1]);
    let sent: Vec<_> = vc
        .received_raw::<CurrentTimeRequestType>()
        .await
        .iter()
        .map(|r| {
            r.headers
                .get("cookie")
                .and_then(|v| v.to_str().ok())
                .map(str::to_string)
        })
        .collect();
    let with = |cookie: &str| Some(format!("vmware_soap_session=\"{cookie}\""));
    assert_eq!(
        sent,
        [with(&cookies[0]), with(&cookies[0]), with(&cookies[1])],
        "the call, the one refused after the expiry, its retry"
    );
}

#[tokio::test]
async fn a_task_info_read_sees_the_current_state() {
    let vc = MockVCenter::start().await;
    let task = vc.task(
        TaskScript::new()
            .running(30)
            .after(Duration::from_millis(300))
            .succeeds_with(vm()),
    );
    let client = vc.client().await;
    let info = client.task(task.clone()).info().await.expect("info");
    assert_eq!(
        (info.state, info.progress),
        (TaskInfoState::Running, Some(30))
    );
    tokio::time::sleep(Duration::from_millis(350)).await;
    let info = client.task(task.clone()).info().await.expect("info");
    assert_eq!(info.state, TaskInfoState::Success);
    assert_eq!(
        vsphere_client::task::task_result_reference(&info),
        Some(vm())
    );
    // A watcher started now still sees every state, then the same end.
    let mut seen = Vec::new();
    client
        .task(task)
        .wait_with_progress(Some(Duration::from_secs(5)), |i| seen.push(i.state.clone()))
        .await
        .expect("succeeded");
    assert_eq!(seen, [TaskInfoState::Running, TaskInfoState::Success]);
    let err = client
        .task(ManagedObjectReference::new("Task", "task-unknown"))
        .info()
        .await
        .expect_err("not a task of the mock");
    assert!(err.is_fault::<ManagedObjectNotFound>(), "{err:?}");
}

#[tokio::test]
async fn a_task_not_yet_started_reads_as_queued() {
    let vc = MockVCenter::start().await;
    let task = vc.task(TaskScript::new().after(Duration::from_secs(60)).running(10));
    let client = vc.client().await;
    let info = client.task(task).info().await.expect("info");
    assert_eq!((info.state, info.progress), (TaskInfoState::Queued, None));
}

#[tokio::test]
async fn one_operation_can_be_slowed_down_built_in_or_scripted() {
    let vc = MockVCenter::start().await;
    vc.on::<CurrentTimeRequestType>().returns(noon()).await;
    vc.set_latency_of::<LoginRequestType>(Duration::from_millis(300));
    let started = Instant::now();
    let client = vc.client().await;
    assert!(
        started.elapsed() >= Duration::from_millis(300),
        "the built-in Login"
    );
    let started = Instant::now();
    client.vim().current_time(&si()).await.expect("call");
    assert!(
        started.elapsed() < Duration::from_millis(300),
        "other calls are not"
    );
    vc.set_latency_of::<CurrentTimeRequestType>(Duration::from_millis(300));
    client.vim().current_time(&si()).await.expect("call");
    let slow: Vec<_> = vc
        .exchanges()
        .into_iter()
        .filter(|e| e.answered - e.received >= Duration::from_millis(300))
        .filter_map(|e| e.operation)
        .collect();
    assert_eq!(slow, ["Login", "CurrentTime"], "and a scripted answer");
}
