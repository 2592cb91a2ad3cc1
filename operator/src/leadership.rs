//! Leader election: one `coordination.k8s.io/v1` Lease per role, held with
//! `kube-lease-manager` (why that crate: ARCHITECTURE.md, "Leader election").
//!
//! The crate acquires, renews and releases the Lease; on an API error it logs
//! and retries with backoff, still saying "leader". So a deadline of our own
//! sits on top: a renewal counts once the Lease read back names this
//! instance, from the moment its PATCH was sent, and the instance leads only
//! until that moment plus [`Election::renew_deadline`] (the lease duration
//! less half its grace). A leader whose renewals fail thus stops reconciling
//! before any other instance can see its Lease expired. [`lead`] runs a
//! role's reconcilers only while leading: dropped when leadership ends,
//! started anew when it comes back.

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use http::{Method, Request, Response};
use k8s_openapi::api::coordination::v1::Lease;
use kube::client::Body;
use kube::Client;
use kube_lease_manager::{LeaseCreateMode, LeaseManager, LeaseParams};
use tokio::sync::{oneshot, watch};
use tokio::task::JoinHandle;
use tracing::{info, warn};

use crate::health::Metrics;

/// Which Lease an instance campaigns for, as whom, and its timings.
#[derive(Clone, Debug)]
pub struct Election {
    pub namespace: String,
    pub lease: String,
    /// Unique per instance: the pod's name in a cluster.
    pub identity: String,
    /// How long a Lease is valid after its last renewal (whole seconds, at least 2).
    pub duration: Duration,
    /// The holder renews this long before its Lease would expire (whole
    /// seconds, at least 1, less than the duration).
    pub grace: Duration,
}

impl Election {
    /// Checks the timings the crate takes (whole seconds, grace shorter than duration).
    pub fn new(
        namespace: impl Into<String>,
        lease: impl Into<String>,
        identity: impl Into<String>,
        duration: Duration,
        grace: Duration,
    ) -> Result<Self, String> {
        let (d, g) = (duration.as_secs(), grace.as_secs());
        if d < 2 || g < 1 || g >= d || duration.subsec_nanos() != 0 || grace.subsec_nanos() != 0 {
            return Err(format!(
                "lease duration {duration:?} and grace {grace:?}: whole seconds, duration at least 2s, grace at least 1s and shorter"
            ));
        }
        Ok(Self {
            namespace: namespace.into(),
            lease: lease.into(),
            identity: identity.into(),
            duration,
            grace,
        })
    }

    /// How long after a renewal was sent the holder keeps reconciling: the
    /// duration less half the grace, so it stops before its Lease expires
    /// (the other half covers clock skew) and after its next renewal is due.
    pub fn renew_deadline(&self) -> Duration {
        self.duration - self.grace / 2
    }

    fn path(&self) -> String {
        format!(
            "/apis/coordination.k8s.io/v1/namespaces/{}/leases/{}",
            self.namespace, self.lease
        )
    }
}

/// This instance's identity: `POD_NAME` in a cluster, else one made from the
/// host's process id and the time (two local processes never share one).
pub fn identity() -> String {
    std::env::var("POD_NAME").unwrap_or_else(|_| {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or_default();
        format!("banlieue-{}-{nanos:08x}", std::process::id())
    })
}

/// Whether this instance leads, as it changes. `always()` without election.
#[derive(Clone)]
pub struct Leadership {
    lease: String,
    /// False when leader election is off.
    elected: bool,
    leading: watch::Receiver<bool>,
    campaign: Arc<Mutex<Option<Campaign>>>,
}

struct Campaign {
    resign: oneshot::Sender<()>,
    task: JoinHandle<()>,
}

impl Leadership {
    /// Leader election off: always leading.
    pub fn always() -> Self {
        let (_, leading) = watch::channel(true);
        Self {
            lease: String::new(),
            elected: false,
            leading,
            campaign: Arc::default(),
        }
    }

    pub fn is_leading(&self) -> bool {
        *self.leading.borrow()
    }

    /// Releases the Lease if held (so another instance takes over at once)
    /// and stops campaigning; bounded by 5 s.
    pub async fn resign(&self) {
        let campaign = self.campaign.lock().ok().and_then(|mut c| c.take());
        if let Some(Campaign { resign, task }) = campaign {
            let _ = resign.send(());
            if tokio::time::timeout(Duration::from_secs(5), task)
                .await
                .is_err()
            {
                warn!(lease = %self.lease, "releasing the Lease took over 5s: left to expire");
            }
        }
    }
}

/// Starts campaigning for `election`'s Lease in the background (retrying
/// with backoff while the API server cannot be reached) and reports
/// leadership in `metrics` (`banlieue_leader`, and `/readyz` ready while following).
pub fn campaign(client: Client, election: Election, metrics: Arc<Metrics>) -> Leadership {
    let (tx, leading) = watch::channel(false);
    let (resign, resigned) = oneshot::channel();
    let lease = election.lease.clone();
    metrics.set_leader(&lease, false);
    let task = tokio::spawn(run(client, election, tx, metrics, resigned));
    Leadership {
        lease,
        elected: true,
        leading,
        campaign: Arc::new(Mutex::new(Some(Campaign { resign, task }))),
    }
}

async fn run(
    client: Client,
    election: Election,
    tx: watch::Sender<bool>,
    metrics: Arc<Metrics>,
    mut resigned: oneshot::Receiver<()>,
) {
    let (confirmed_tx, mut confirmed) = watch::channel(None);
    let observed = Client::new(
        Renewals {
            client,
            path: election.path(),
            identity: election.identity.clone(),
            pending: Arc::default(),
            confirmed: Arc::new(confirmed_tx),
        },
        election.namespace.clone(),
    );
    let params = LeaseParams::new(
        election.identity.clone(),
        election.duration.as_secs(),
        election.grace.as_secs(),
    );
    let mut failures = 0u32;
    let manager = loop {
        let made = LeaseManager::new(
            observed.clone(),
            &election.lease,
            &election.namespace,
            params.clone(),
            LeaseCreateMode::AutoCreate,
        );
        tokio::select! {
            made = made => match made {
                Ok(m) => break m,
                Err(error) => {
                    failures += 1;
                    warn!(lease = %election.lease, %error, "cannot read or create the Lease; retrying");
                    let wait = Duration::from_millis(500 * (1 << failures.min(6)));
                    tokio::select! {
                        () = tokio::time::sleep(wait) => {}
                        _ = &mut resigned => return,
                    }
                }
            },
            _ = &mut resigned => return,
        }
    };
    let (mut holder, manager_task) = manager.watch().await;
    let deadline = election.renew_deadline();
    loop {
        let renewed: Option<Instant> = *confirmed.borrow_and_update();
        let until = renewed.map(|sent| sent + deadline);
        let leading =
            *holder.borrow_and_update() && until.is_some_and(|until| Instant::now() < until);
        if tx.send_if_modified(|was| std::mem::replace(was, leading) != leading) {
            metrics.set_leader(&election.lease, leading);
            if leading {
                info!(lease = %election.lease, identity = %election.identity, "leading");
            } else {
                warn!(lease = %election.lease, identity = %election.identity, "not leading");
            }
        }
        let expiry = async move {
            match until {
                Some(until) if leading => tokio::time::sleep_until(until.into()).await,
                _ => std::future::pending().await,
            }
        };
        tokio::select! {
            changed = holder.changed() => if changed.is_err() {
                // The crate's task ended (it does only on a closed channel or a send error).
                warn!(lease = %election.lease, "the Lease manager stopped");
                break;
            },
            _ = confirmed.changed() => {}
            () = expiry => {}
            _ = &mut resigned => {
                // Closing the channel makes the crate release the Lease and end.
                drop(holder);
                let _ = manager_task.await;
                info!(lease = %election.lease, "Lease released");
                break;
            }
        }
    }
    tx.send_replace(false);
    metrics.set_leader(&election.lease, false);
}

/// The Lease manager's client: every call goes to the real one; a 2xx PATCH
/// of the Lease records when it was sent, and a 2xx read naming this
/// instance as holder confirms the earliest such PATCH since the last read.
#[derive(Clone)]
struct Renewals {
    client: Client,
    path: String,
    identity: String,
    pending: Arc<Mutex<Option<Instant>>>,
    confirmed: Arc<watch::Sender<Option<Instant>>>,
}

impl tower_service::Service<Request<Body>> for Renewals {
    type Response = Response<Body>;
    type Error = kube::Error;
    type Future = BoxFuture<'static, Result<Response<Body>, kube::Error>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<Body>) -> Self::Future {
        let this = self.clone();
        Box::pin(async move {
            let ours = request.uri().path() == this.path;
            let method = request.method().clone();
            let sent = Instant::now();
            let response = this.client.send(request).await?;
            if !ours || !response.status().is_success() {
                return Ok(response);
            }
            if method == Method::PATCH {
                if let Ok(mut pending) = this.pending.lock() {
                    pending.get_or_insert(sent);
                }
                return Ok(response);
            }
            if method != Method::GET {
                return Ok(response);
            }
            let (parts, body) = response.into_parts();
            let bytes = body.collect_bytes().await?;
            let holder = serde_json::from_slice::<Lease>(&bytes)
                .ok()
                .and_then(|l| l.spec)
                .and_then(|s| s.holder_identity);
            let pending = this.pending.lock().ok().and_then(|mut p| p.take());
            if let (Some(sent), true) = (pending, holder.as_deref() == Some(&this.identity)) {
                this.confirmed.send_replace(Some(sent));
            }
            Ok(Response::from_parts(parts, Body::from(bytes.to_vec())))
        })
    }
}

/// Runs `role` while `leadership` leads: waits to lead (or for a shutdown
/// signal), runs it, drops it the moment leadership ends and waits to lead
/// again. When the role ends by itself (its shutdown signal), the Lease is
/// released so another instance takes over at once.
pub async fn lead<F, Fut>(leadership: &Leadership, mut role: F) -> crate::Result<()>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = crate::Result<()>>,
{
    if !leadership.elected {
        return role().await;
    }
    let mut leading = leadership.leading.clone();
    loop {
        tokio::select! {
            became = async { leading.wait_for(|l| *l).await.is_ok() } => if !became {
                // The campaign ended without leading: nothing left but to stop.
                shutdown_signal().await;
                return Ok(());
            },
            () = shutdown_signal() => {
                leadership.resign().await;
                return Ok(());
            }
        }
        tokio::select! {
            result = role() => {
                leadership.resign().await;
                return result;
            }
            _ = async { leading.wait_for(|l| !*l).await.is_ok() } => {
                warn!(lease = %leadership.lease, "no longer leading: reconcilers stopped");
            }
        }
    }
}

/// SIGTERM or Ctrl-C.
async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        if let Ok(mut term) = signal(SignalKind::terminate()) {
            tokio::select! {
                _ = term.recv() => {}
                _ = tokio::signal::ctrl_c() => {}
            }
            return;
        }
    }
    let _ = tokio::signal::ctrl_c().await;
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;
    use crate::fixtures::lease::LeaseServer;

    /// 3 s Leases renewed 2 s before expiry (every second); a leader stops 2 s after its last renewal.
    const DURATION: Duration = Duration::from_secs(3);
    const GRACE: Duration = Duration::from_secs(2);

    fn election(who: &str) -> Election {
        Election::new(
            "banlieue-system",
            "banlieue-controller",
            who,
            DURATION,
            GRACE,
        )
        .unwrap()
    }

    /// What the tests watch of one instance's role: reconciles counted, and
    /// how many instances reconcile at once (across all of them).
    #[derive(Clone, Default)]
    struct Reconciles {
        mine: Arc<AtomicUsize>,
        running: Arc<AtomicUsize>,
        most_at_once: Arc<AtomicUsize>,
    }

    struct Running(Arc<AtomicUsize>);
    impl Drop for Running {
        fn drop(&mut self) {
            self.0.fetch_sub(1, Ordering::SeqCst);
        }
    }

    impl Reconciles {
        fn sharing(&self) -> Self {
            Self {
                mine: Arc::default(),
                running: self.running.clone(),
                most_at_once: self.most_at_once.clone(),
            }
        }

        /// A role that "reconciles" every 10 ms until dropped.
        async fn role(self) -> crate::Result<()> {
            let now = self.running.fetch_add(1, Ordering::SeqCst) + 1;
            let _running = Running(self.running.clone());
            self.most_at_once.fetch_max(now, Ordering::SeqCst);
            loop {
                self.mine.fetch_add(1, Ordering::SeqCst);
                self.most_at_once
                    .fetch_max(self.running.load(Ordering::SeqCst), Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }

        fn count(&self) -> usize {
            self.mine.load(Ordering::SeqCst)
        }
    }

    /// Starts instance `who`: its campaign and its role under [`lead`].
    fn start(server: &LeaseServer, who: &str, reconciles: &Reconciles) -> Leadership {
        let leadership = campaign(
            server.client(who),
            election(who),
            Arc::new(Metrics::default()),
        );
        let (l, r) = (leadership.clone(), reconciles.clone());
        tokio::spawn(async move { lead(&l, || r.clone().role()).await });
        leadership
    }

    async fn until(what: &str, within: Duration, mut done: impl FnMut() -> bool) -> Instant {
        let start = Instant::now();
        while !done() {
            assert!(start.elapsed() < within, "{what}: not within {within:?}");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        Instant::now()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn two_instances_on_one_lease_exactly_one_reconciles() {
        let server = LeaseServer::default();
        let a = Reconciles::default();
        let b = a.sharing();
        let (la, lb) = (start(&server, "a", &a), start(&server, "b", &b));
        until("a leader", DURATION, || la.is_leading() || lb.is_leading()).await;
        // Three lease durations: the leader renews (about 6 times), the follower waits.
        tokio::time::sleep(DURATION * 3).await;
        let (leader, follower, lf) = if la.is_leading() {
            (&a, &b, &lb)
        } else {
            (&b, &a, &la)
        };
        assert!(
            leader.count() > 100,
            "the leader reconciles: {}",
            leader.count()
        );
        assert_eq!(follower.count(), 0, "the follower never reconciled");
        assert!(!lf.is_leading());
        assert_eq!(a.most_at_once.load(Ordering::SeqCst), 1);
        let holder = server.holder().unwrap();
        assert_eq!(la.is_leading(), holder == "a", "the Lease names the leader");
        let renewals = server
            .log()
            .iter()
            .filter(|(who, method, _, status)| {
                *who == holder && method == "PATCH" && *status == 200
            })
            .count();
        assert!(renewals >= 6, "{renewals} renewals in 9 s");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_leader_cut_off_stops_before_expiry_and_the_follower_takes_over_within_the_lease() {
        let server = LeaseServer::default();
        let a = Reconciles::default();
        let b = a.sharing();
        let la = start(&server, "a", &a);
        until("a leads", DURATION, || la.is_leading()).await;
        let lb = start(&server, "b", &b);
        tokio::time::sleep(DURATION).await;
        assert!(la.is_leading() && !lb.is_leading());

        // a's pod dies, or loses the API server: none of its requests go through.
        server.cut("a");
        let last_renewal = server.renewed("a").unwrap();
        let expiry = last_renewal + DURATION;
        let stopped = until("a stops", DURATION * 2, || !la.is_leading()).await;
        let count_at_stop = a.count();
        let took_over = until("b takes over", DURATION * 3, || lb.is_leading()).await;
        tokio::time::sleep(Duration::from_millis(100)).await;

        assert!(
            stopped < expiry,
            "a stopped {:?} after its Lease expired",
            stopped - expiry
        );
        // The crate takes an expired Lease after a random 0.1-1 s pause.
        assert!(
            took_over <= expiry + Duration::from_millis(1500),
            "b took over {:?} after the expiry",
            took_over - expiry
        );
        assert!(stopped < took_over);
        assert!(a.count() <= count_at_stop + 1, "a reconciles no more");
        assert!(b.count() > 0, "b reconciles");
        assert_eq!(a.most_at_once.load(Ordering::SeqCst), 1, "never both");
        assert_eq!(server.holder().as_deref(), Some("b"));
        eprintln!(
            "last renewal of a -> a stopped {:?}, Lease expiry {:?}, b leading {:?}",
            stopped - last_renewal,
            DURATION,
            took_over - last_renewal
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_leader_whose_renewals_fail_stops_before_its_lease_expires() {
        let server = LeaseServer::default();
        let a = Reconciles::default();
        let la = start(&server, "a", &a);
        until("a leads", DURATION, || la.is_leading()).await;
        tokio::time::sleep(DURATION).await;

        // Reads still work; every renewal is refused.
        server.refuse_patches("a", true);
        let last_renewal = server.renewed("a").unwrap();
        let stopped = until("a stops", DURATION * 2, || !la.is_leading()).await;
        let count_at_stop = a.count();
        assert!(
            stopped < last_renewal + DURATION,
            "stopped {:?} after its last renewal: the Lease had expired",
            stopped - last_renewal
        );
        assert!(
            stopped >= last_renewal + election("a").renew_deadline() - Duration::from_millis(50),
            "not before its renew deadline: {:?}",
            stopped - last_renewal
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert!(a.count() <= count_at_stop + 1, "no reconcile once stopped");
        assert_eq!(
            server.holder().as_deref(),
            Some("a"),
            "still named in the Lease"
        );

        // Renewals go through again: a, still the holder, leads and reconciles again.
        server.refuse_patches("a", false);
        until("a leads again", DURATION * 12, || la.is_leading()).await;
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(a.count() > count_at_stop + 1, "reconciling again");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_leader_that_shuts_down_releases_the_lease_at_once() {
        let server = LeaseServer::default();
        let la = campaign(server.client("a"), election("a"), Arc::default());
        until("a leads", DURATION, || la.is_leading()).await;
        la.resign().await;
        assert_eq!(server.holder(), None, "released");
        assert!(!la.is_leading());
        let lb = campaign(server.client("b"), election("b"), Arc::default());
        until("b leads", DURATION, || lb.is_leading()).await;
    }

    #[test]
    fn timings_are_whole_seconds_grace_shorter_than_duration() {
        let e = |d, g| {
            Election::new(
                "ns",
                "l",
                "me",
                Duration::from_secs(d),
                Duration::from_secs(g),
            )
        };
        assert!(e(15, 5).is_ok());
        assert_eq!(
            e(15, 5).unwrap().renew_deadline(),
            Duration::from_millis(12_500)
        );
        assert!(e(1, 1).is_err());
        assert!(e(5, 5).is_err());
        assert!(e(5, 0).is_err());
        assert!(Election::new(
            "ns",
            "l",
            "me",
            Duration::from_millis(2500),
            Duration::from_secs(1)
        )
        .is_err());
    }
}
