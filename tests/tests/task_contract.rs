//! Task waits against a scripted vCenter (wiremock), for what the simulator
//! cannot show: tasks that run for a while (progress), never finish
//! (timeout), fail with a typed fault, waits that are abandoned, and the
//! `WaitForUpdatesEx` traffic of several waits sharing one filter.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use vsphere_client::types::{AnyMethodFault, ManagedObjectReference, TaskInfoState};
use vsphere_client::{task, Client, ErrorKind};
use wiremock::matchers::{body_string_contains, method, path};
use wiremock::{Mock, MockServer, Request, ResponseTemplate};

fn envelope(body: &str) -> String {
    format!(
        r#"<?xml version="1.0" encoding="UTF-8"?>
<soapenv:Envelope xmlns:soapenv="http://schemas.xmlsoap.org/soap/envelope/" xmlns:xsd="http://www.w3.org/2001/XMLSchema" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance">
<soapenv:Body>{body}</soapenv:Body></soapenv:Envelope>"#
    )
}

fn soap_ok(body: &str) -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_raw(envelope(body), "text/xml; charset=utf-8")
}

const SERVICE_CONTENT: &str = r#"<RetrieveServiceContentResponse xmlns="urn:vim25"><returnval>
<rootFolder type="Folder">group-d1</rootFolder>
<propertyCollector type="PropertyCollector">propertyCollector</propertyCollector>
<viewManager type="ViewManager">ViewManager</viewManager>
<about><name>VMware vCenter Server</name><fullName>VMware vCenter Server 8.0.2</fullName><vendor>VMware, Inc.</vendor><version>8.0.2</version><build>1</build><osType>linux-x64</osType><productLineId>vpx</productLineId><apiType>VirtualCenter</apiType><apiVersion>8.0.2.0</apiVersion></about>
<sessionManager type="SessionManager">SessionManager</sessionManager>
</returnval></RetrieveServiceContentResponse>"#;

const LOGIN: &str = r#"<LoginResponse xmlns="urn:vim25"><returnval><key>k</key><userName>u</userName><fullName>u</fullName><loginTime>2024-01-01T00:00:00Z</loginTime><lastActiveTime>2024-01-01T00:00:00Z</lastActiveTime><locale>en</locale><messageLocale>en</messageLocale><extensionSession>false</extensionSession><ipAddress>127.0.0.1</ipAddress><userAgent>t</userAgent><callCount>1</callCount></returnval></LoginResponse>"#;

/// A task's `info` as the server sends it.
fn task_info(task: &str, state: &str, progress: Option<i32>, extra: &str) -> String {
    let progress = progress
        .map(|p| format!("<progress>{p}</progress>"))
        .unwrap_or_default();
    format!(
        r#"<val xsi:type="TaskInfo"><key>{task}</key><task type="Task">{task}</task><name>CloneVM_Task</name><descriptionId>VirtualMachine.clone</descriptionId><state>{state}</state><cancelled>false</cancelled><cancelable>true</cancelable>{extra}{progress}<reason xsi:type="TaskReasonUser"><userName>u</userName></reason><queueTime>2024-01-01T00:00:00Z</queueTime><eventChainId>1</eventChainId></val>"#
    )
}

/// An update set: each `(kind, task, info)` as one object update.
fn updates(version: u32, objects: &[(&str, &str, String)]) -> ResponseTemplate {
    let objects: String = objects
        .iter()
        .map(|(kind, task, info)| {
            format!(
                r#"<objectSet><kind>{kind}</kind><obj type="Task">{task}</obj><changeSet><name>info</name><op>assign</op>{info}</changeSet></objectSet>"#
            )
        })
        .collect();
    soap_ok(&format!(
        r#"<WaitForUpdatesExResponse xmlns="urn:vim25"><returnval><version>{version}</version><filterSet><filter type="PropertyFilter">session[1]filter</filter>{objects}</filterSet></returnval></WaitForUpdatesExResponse>"#
    ))
}

/// No update within maxWait: an empty response.
fn no_updates(delay: Duration) -> ResponseTemplate {
    soap_ok(r#"<WaitForUpdatesExResponse xmlns="urn:vim25"></WaitForUpdatesExResponse>"#)
        .set_delay(delay)
}

/// A scripted vCenter whose `WaitForUpdatesEx` answers come from `script`,
/// one per call (the last one repeats).
async fn vcenter(script: Vec<ResponseTemplate>) -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/sdk/vimServiceVersions.xml"))
        .respond_with(ResponseTemplate::new(404))
        .mount(&server)
        .await;
    for (needle, body) in [
        ("<RetrieveServiceContent", SERVICE_CONTENT.to_string()),
        ("<Login ", LOGIN.to_string()),
        (
            "<CreatePropertyCollector",
            r#"<CreatePropertyCollectorResponse xmlns="urn:vim25"><returnval type="PropertyCollector">session[1]collector</returnval></CreatePropertyCollectorResponse>"#.to_string(),
        ),
        (
            "<CreateListView",
            r#"<CreateListViewResponse xmlns="urn:vim25"><returnval type="ListView">session[1]view</returnval></CreateListViewResponse>"#.to_string(),
        ),
        (
            "<CreateFilter",
            r#"<CreateFilterResponse xmlns="urn:vim25"><returnval type="PropertyFilter">session[1]filter</returnval></CreateFilterResponse>"#.to_string(),
        ),
        ("<ModifyListView", r#"<ModifyListViewResponse xmlns="urn:vim25"></ModifyListViewResponse>"#.to_string()),
        ("<CancelTask", r#"<CancelTaskResponse xmlns="urn:vim25"></CancelTaskResponse>"#.to_string()),
    ] {
        Mock::given(method("POST"))
            .and(body_string_contains(needle))
            .respond_with(soap_ok(&body))
            .mount(&server)
            .await;
    }
    let calls = Arc::new(AtomicUsize::new(0));
    Mock::given(method("POST"))
        .and(body_string_contains("<WaitForUpdatesEx"))
        .respond_with(move |_: &Request| {
            let n = calls.fetch_add(1, Ordering::SeqCst);
            script[n.min(script.len() - 1)].clone()
        })
        .mount(&server)
        .await;
    server
}

async fn connect(server: &MockServer) -> Client {
    Client::builder(&format!("{}/sdk", server.uri()))
        .credentials("u", "p")
        .keepalive(None)
        .connect()
        .await
        .expect("connect")
}

async fn count(server: &MockServer, needle: &str) -> usize {
    server
        .received_requests()
        .await
        .unwrap_or_default()
        .iter()
        .filter(|r| String::from_utf8_lossy(&r.body).contains(needle))
        .count()
}

fn task_ref(value: &str) -> ManagedObjectReference {
    ManagedObjectReference::new("Task", value)
}

#[tokio::test]
async fn progress_is_reported_until_the_task_succeeds() {
    let server = vcenter(vec![
        updates(1, &[("enter", "task-1", task_info("task-1", "running", Some(10), ""))]),
        updates(2, &[("modify", "task-1", task_info("task-1", "running", Some(60), ""))]),
        updates(
            3,
            &[(
                "modify",
                "task-1",
                task_info(
                    "task-1",
                    "success",
                    None,
                    r#"<result xsi:type="ManagedObjectReference" type="VirtualMachine">vm-99</result>"#,
                ),
            )],
        ),
    ])
    .await;
    let client = connect(&server).await;
    let mut seen = Vec::new();
    let info = client
        .task(task_ref("task-1"))
        .wait_with_progress(Some(Duration::from_secs(10)), |info| {
            seen.push((info.state.clone(), info.progress))
        })
        .await
        .expect("success");
    assert_eq!(
        seen,
        [
            (TaskInfoState::Running, Some(10)),
            (TaskInfoState::Running, Some(60)),
            (TaskInfoState::Success, None)
        ]
    );
    assert_eq!(
        task::task_result_reference(&info),
        Some(ManagedObjectReference::new("VirtualMachine", "vm-99"))
    );
    // Versions are passed on: the second and third waits continue from the
    // version received.
    let bodies: Vec<String> = server
        .received_requests()
        .await
        .unwrap_or_default()
        .iter()
        .map(|r| String::from_utf8_lossy(&r.body).into_owned())
        .filter(|b| b.contains("<WaitForUpdatesEx"))
        .collect();
    assert!(!bodies[0].contains("<version>"), "{}", bodies[0]);
    assert!(bodies[1].contains("<version>1</version>"), "{}", bodies[1]);
    assert!(bodies[2].contains("<version>2</version>"), "{}", bodies[2]);
}

#[tokio::test]
async fn a_task_that_never_finishes_times_out_with_its_last_state() {
    let server = vcenter(vec![
        updates(
            1,
            &[(
                "enter",
                "task-2",
                task_info("task-2", "running", Some(42), ""),
            )],
        ),
        no_updates(Duration::from_millis(200)),
    ])
    .await;
    let client = connect(&server).await;
    let started = std::time::Instant::now();
    let err = client
        .task(task_ref("task-2"))
        .wait_timeout(Duration::from_secs(1))
        .await
        .expect_err("never finishes");
    assert_eq!(err.kind(), ErrorKind::Timeout);
    assert!(err.to_string().contains("running, 42%"), "{err}");
    assert!(started.elapsed() < Duration::from_secs(3));
    // The task goes on; it can be cancelled.
    client
        .task(task_ref("task-2"))
        .cancel()
        .await
        .expect("cancel");
    assert_eq!(count(&server, "<CancelTask").await, 1);
}

#[tokio::test]
async fn a_failed_task_carries_its_typed_fault() {
    let error = r#"<error><fault xsi:type="DuplicateName"><name>web-1</name><object type="VirtualMachine">vm-1</object></fault><localizedMessage>The name 'web-1' already exists.</localizedMessage></error>"#;
    let server = vcenter(vec![updates(
        1,
        &[("enter", "task-3", task_info("task-3", "error", None, error))],
    )])
    .await;
    let client = connect(&server).await;
    let err = client
        .task(task_ref("task-3"))
        .wait()
        .await
        .expect_err("failed");
    assert_eq!(err.kind(), ErrorKind::Fault);
    let fault = err.fault().expect("fault");
    assert_eq!(fault.type_name(), Some("DuplicateName"));
    assert_eq!(fault.message(), "The name 'web-1' already exists.");
    match fault.detail() {
        Some(AnyMethodFault::DuplicateName(dup)) => assert_eq!(dup.name, "web-1"),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn concurrent_and_abandoned_waits_share_one_filter() {
    let server = vcenter(vec![
        updates(
            1,
            &[
                (
                    "enter",
                    "task-4",
                    task_info("task-4", "running", Some(5), ""),
                ),
                (
                    "enter",
                    "task-5",
                    task_info("task-5", "running", Some(5), ""),
                ),
            ],
        ),
        no_updates(Duration::from_millis(300)),
        updates(
            2,
            &[
                ("modify", "task-4", task_info("task-4", "success", None, "")),
                ("modify", "task-5", task_info("task-5", "success", None, "")),
            ],
        ),
    ])
    .await;
    let client = connect(&server).await;
    // An abandoned wait (dropped by its timeout) does not disturb the others.
    let abandoned = client
        .task(task_ref("task-4"))
        .wait_timeout(Duration::from_millis(100))
        .await;
    assert_eq!(abandoned.expect_err("abandoned").kind(), ErrorKind::Timeout);
    let (task_4, task_5) = (
        client.task(task_ref("task-4")),
        client.task(task_ref("task-5")),
    );
    let (a, b) = tokio::join!(
        task_4.wait_timeout(Duration::from_secs(10)),
        task_5.wait_timeout(Duration::from_secs(10)),
    );
    assert_eq!(a.expect("task-4").state, TaskInfoState::Success);
    assert_eq!(b.expect("task-5").state, TaskInfoState::Success);
    assert_eq!(count(&server, "<CreatePropertyCollector").await, 1);
    assert_eq!(count(&server, "<CreateFilter").await, 1);
    assert_eq!(count(&server, "<CreateListView").await, 1);
}
