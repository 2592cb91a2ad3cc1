//! Fault injection against the scripted vCenter (the project's test kit,
//! which counts the requests it is answering at once): a vCenter that
//! answers 503 "Too many outstanding operations" for a while, under 20
//! concurrent callers and a concurrency limit.

use std::time::Duration;

use vsphere_client::types::{CurrentTimeRequestType, ManagedObjectReference, PowerOnVMRequestType};
use vsphere_client::{DateTime, ErrorKind, RetryConfig};
use vsphere_testkit::{Exchange, MockVCenter};

const GUARD: Duration = Duration::from_secs(60);

fn service_instance() -> ManagedObjectReference {
    ManagedObjectReference::new("ServiceInstance", "ServiceInstance")
}

/// The kit's answers to `CurrentTime` so far.
fn current_time_answers(vc: &MockVCenter) -> Vec<Exchange> {
    vc.exchanges()
        .into_iter()
        .filter(|e| e.operation.as_deref() == Some("CurrentTime"))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_busy_vcenter_is_waited_out_with_backoff_within_the_concurrency_limit() {
    const LIMIT: usize = 4;
    const CALLERS: usize = 20;
    const BUSY_ANSWERS: usize = 12;
    tokio::time::timeout(GUARD, async {
        let vc = MockVCenter::start().await;
        vc.on::<CurrentTimeRequestType>()
            .returns(DateTime::new("2024-05-01T12:00:00Z"))
            .await;
        let client = vc
            .client_builder()
            .concurrency_limit(LIMIT)
            .retry(RetryConfig {
                max_retries: 5,
                initial_backoff: Duration::from_millis(100),
                max_backoff: Duration::from_secs(1),
            })
            .connect()
            .await
            .expect("connect");
        // Each answer takes 40 ms; the next 12 are 503s.
        vc.set_latency(Duration::from_millis(40));
        vc.storm_503(BUSY_ANSWERS as u64).await;
        let started = std::time::Instant::now();
        let calls: Vec<_> = (0..CALLERS)
            .map(|_| {
                let client = client.clone();
                tokio::spawn(async move { client.vim().current_time(&service_instance()).await })
            })
            .collect();
        for call in calls {
            call.await
                .expect("no panic")
                .expect("every call succeeds once the storm is over");
        }
        let elapsed = started.elapsed();

        let max = vc.max_in_flight();
        assert!(
            max <= LIMIT,
            "{max} requests in flight at once, limit {LIMIT}"
        );
        assert!(max >= 2, "the callers did run concurrently ({max} at most)");
        let answers = current_time_answers(&vc);
        let busy: Vec<&Exchange> = answers.iter().filter(|e| e.status == Some(503)).collect();
        assert_eq!(busy.len(), BUSY_ANSWERS);
        assert_eq!(
            answers.iter().filter(|e| e.status == Some(200)).count(),
            CALLERS,
            "one success per caller"
        );
        // A retry holds its permit while it backs off, so the first LIMIT
        // callers take the storm in rounds (12 / 4 = 3 each): each waited at
        // least 100 + 200 + 400 ms. Retrying at once would take ~3 x 40 ms.
        assert!(
            elapsed >= Duration::from_millis(700),
            "backoff between retries: {elapsed:?}"
        );
        let spread = busy[busy.len() - 1].answered - busy[0].answered;
        assert!(
            spread >= Duration::from_millis(300),
            "the busy answers were spread by backoff: {spread:?}"
        );
    })
    .await
    .expect("the test hung");
}

#[tokio::test]
async fn a_vcenter_busy_for_longer_than_the_retries_gives_a_clear_error_and_stops() {
    tokio::time::timeout(GUARD, async {
        let vc = MockVCenter::start().await;
        let client = vc
            .client_builder()
            .retry(RetryConfig {
                max_retries: 3,
                initial_backoff: Duration::from_millis(20),
                max_backoff: Duration::from_millis(100),
            })
            .connect()
            .await
            .expect("connect");
        vc.storm_503(u64::MAX).await;
        let err = client
            .vim()
            .current_time(&service_instance())
            .await
            .expect_err("always busy");
        assert_eq!(err.kind(), ErrorKind::HttpStatus(503), "{err:?}");
        assert!(
            err.to_string().contains("Too many outstanding operations"),
            "{err}"
        );
        assert_eq!(
            vc.count::<CurrentTimeRequestType>().await,
            4,
            "first attempt + 3 retries, no more"
        );
        // A call that may not be repeated is sent once, busy or not.
        let vm = ManagedObjectReference::new("VirtualMachine", "vm-42");
        let err = client
            .vim()
            .power_on_vm_task(&vm, None)
            .await
            .expect_err("busy");
        assert_eq!(err.kind(), ErrorKind::HttpStatus(503));
        assert_eq!(vc.count::<PowerOnVMRequestType>().await, 1);
    })
    .await
    .expect("the test hung");
}
