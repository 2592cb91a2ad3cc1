//! `/healthz`, `/readyz` and Prometheus `/metrics` on the role's HTTP port.
//! A deliberately small HTTP/1.1 responder: three GET paths, no bodies read.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tracing::{debug, warn};

#[derive(Default, Clone)]
struct Counters {
    reconciles: u64,
    /// Failed reconciles by the failure's stable label ([`crate::Error::label`]).
    errors: BTreeMap<&'static str, u64>,
    seconds: f64,
    status_writes: u64,
}

/// A vSphere call counter: name, and which of (calls, faults, errors) it shows.
type CallColumn = (&'static str, fn(&(u64, u64, u64)) -> u64);

/// A metric family: name, Prometheus type, value per kind.
type Family = (&'static str, &'static str, fn(&Counters) -> String);

/// SOAP calls of one Provider's session, per method (from the client's call stats).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProviderCalls {
    /// `namespace/name` of the Provider.
    pub provider: String,
    /// Method -> (calls, faults, other errors).
    pub by_method: BTreeMap<String, (u64, u64, u64)>,
}

/// Where the vSphere side of the metrics comes from (the role's sessions).
pub type VSphereSource = Arc<dyn Fn() -> Vec<ProviderCalls> + Send + Sync>;

/// Counters per kind, readiness (caches synced, or following a leader),
/// leadership, vSphere calls per Provider session and method, tasks being
/// waited for.
#[derive(Default)]
pub struct Metrics {
    ready: AtomicBool,
    /// The Lease campaigned for and whether this instance holds it (leader election on).
    leader: Mutex<Option<(String, bool)>>,
    by_kind: Mutex<BTreeMap<&'static str, Counters>>,
    tasks_in_flight: AtomicI64,
    vsphere: Mutex<Option<VSphereSource>>,
}

impl Metrics {
    pub fn set_ready(&self) {
        self.ready.store(true, Ordering::Relaxed);
    }

    /// Ready when the caches are synced, and always while following: a
    /// follower is a healthy standby (it watches nothing until it leads).
    pub fn is_ready(&self) -> bool {
        self.ready.load(Ordering::Relaxed) || self.is_following()
    }

    fn is_following(&self) -> bool {
        self.leader
            .lock()
            .map(|l| matches!(*l, Some((_, false))))
            .unwrap_or(false)
    }

    /// Whether this instance holds `lease` (`banlieue_leader{lease}`).
    pub fn set_leader(&self, lease: &str, leading: bool) {
        if let Ok(mut l) = self.leader.lock() {
            *l = Some((lease.to_string(), leading));
        }
    }

    /// One reconcile of `kind`, and the stable label of its failure if it
    /// failed (an error, or a transient vCenter failure written to status).
    pub fn observe_reconcile(
        &self,
        kind: &'static str,
        took: Duration,
        failure: Option<&'static str>,
    ) {
        if let Ok(mut m) = self.by_kind.lock() {
            let c = m.entry(kind).or_default();
            c.reconciles += 1;
            c.seconds += took.as_secs_f64();
            if let Some(label) = failure {
                *c.errors.entry(label).or_default() += 1;
            }
        }
    }

    /// A vSphere task started (+1) or finished being waited for (-1).
    pub fn tasks_in_flight(&self, delta: i64) {
        self.tasks_in_flight.fetch_add(delta, Ordering::Relaxed);
    }

    /// Reads the sessions' call counts at each scrape.
    pub fn set_vsphere_source(&self, source: VSphereSource) {
        if let Ok(mut s) = self.vsphere.lock() {
            *s = Some(source);
        }
    }

    pub fn status_written(&self, kind: &'static str) {
        if let Ok(mut m) = self.by_kind.lock() {
            m.entry(kind).or_default().status_writes += 1;
        }
    }

    /// Prometheus text exposition format.
    pub fn render(&self) -> String {
        let snapshot = self.by_kind.lock().map(|m| m.clone()).unwrap_or_default();
        let mut out = String::new();
        let families: [Family; 3] = [
            ("banlieue_reconciles_total", "counter", |c| {
                c.reconciles.to_string()
            }),
            ("banlieue_reconcile_duration_seconds_sum", "counter", |c| {
                c.seconds.to_string()
            }),
            ("banlieue_status_writes_total", "counter", |c| {
                c.status_writes.to_string()
            }),
        ];
        for (name, kind, value) in families {
            let _ = writeln!(out, "# TYPE {name} {kind}");
            for (k, c) in &snapshot {
                let _ = writeln!(out, "{name}{{kind=\"{k}\"}} {}", value(c));
            }
        }
        let _ = writeln!(out, "# TYPE banlieue_reconcile_errors_total counter");
        for (k, c) in &snapshot {
            for (error, n) in &c.errors {
                let _ = writeln!(
                    out,
                    "banlieue_reconcile_errors_total{{kind=\"{k}\",error=\"{error}\"}} {n}"
                );
            }
        }
        let _ = writeln!(
            out,
            "# TYPE banlieue_ready gauge\nbanlieue_ready {}",
            u8::from(self.is_ready())
        );
        if let Some((lease, leading)) = self.leader.lock().ok().and_then(|l| l.clone()) {
            let _ = writeln!(
                out,
                "# TYPE banlieue_leader gauge\nbanlieue_leader{{lease=\"{lease}\"}} {}",
                u8::from(leading)
            );
        }
        let _ = writeln!(
            out,
            "# TYPE banlieue_vsphere_tasks_in_flight gauge\nbanlieue_vsphere_tasks_in_flight {}",
            self.tasks_in_flight.load(Ordering::Relaxed)
        );
        let source = self.vsphere.lock().ok().and_then(|s| s.clone());
        let sessions = source.map(|f| f()).unwrap_or_default();
        let _ = writeln!(out, "# TYPE banlieue_vcenter_sessions gauge");
        for p in &sessions {
            let _ = writeln!(
                out,
                "banlieue_vcenter_sessions{{provider=\"{}\"}} 1",
                p.provider
            );
        }
        let columns: [CallColumn; 3] = [
            ("banlieue_vsphere_calls_total", |c| c.0),
            ("banlieue_vsphere_faults_total", |c| c.1),
            ("banlieue_vsphere_errors_total", |c| c.2),
        ];
        for (name, value) in columns {
            let _ = writeln!(out, "# TYPE {name} counter");
            for p in &sessions {
                for (method, counts) in &p.by_method {
                    let _ = writeln!(
                        out,
                        "{name}{{provider=\"{}\",method=\"{method}\"}} {}",
                        p.provider,
                        value(counts)
                    );
                }
            }
        }
        out
    }
}

fn respond(metrics: &Metrics, request_line: &str) -> (u16, &'static str, String) {
    let mut parts = request_line.split_whitespace();
    let (method, path) = (
        parts.next().unwrap_or_default(),
        parts.next().unwrap_or_default(),
    );
    if method != "GET" {
        return (405, "text/plain", "method not allowed\n".into());
    }
    match path {
        "/healthz" => (200, "text/plain", "ok\n".into()),
        "/readyz" if metrics.is_ready() => (200, "text/plain", "ok\n".into()),
        "/readyz" => (503, "text/plain", "caches not synced\n".into()),
        "/metrics" => (200, "text/plain; version=0.0.4", metrics.render()),
        _ => (404, "text/plain", "not found\n".into()),
    }
}

/// Serves until the process exits.
pub async fn serve(listener: TcpListener, metrics: std::sync::Arc<Metrics>) {
    loop {
        let (mut stream, peer) = match listener.accept().await {
            Ok(conn) => conn,
            Err(e) => {
                warn!(error = %e, "health listener accept");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let metrics = metrics.clone();
        tokio::spawn(async move {
            let mut buf = vec![0u8; 4096];
            let read = tokio::time::timeout(Duration::from_secs(5), stream.read(&mut buf)).await;
            let Ok(Ok(n)) = read else { return };
            let head = String::from_utf8_lossy(&buf[..n]);
            let line = head.lines().next().unwrap_or_default();
            let (code, content_type, body) = respond(&metrics, line);
            let reason = match code {
                200 => "OK",
                404 => "Not Found",
                405 => "Method Not Allowed",
                _ => "Service Unavailable",
            };
            let response = format!(
                "HTTP/1.1 {code} {reason}\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
            if let Err(e) = stream.write_all(response.as_bytes()).await {
                debug!(%peer, error = %e, "health response");
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readiness_follows_cache_sync() {
        let m = Metrics::default();
        assert_eq!(respond(&m, "GET /healthz HTTP/1.1").0, 200);
        assert_eq!(respond(&m, "GET /readyz HTTP/1.1").0, 503);
        m.set_ready();
        assert_eq!(respond(&m, "GET /readyz HTTP/1.1").0, 200);
        assert_eq!(respond(&m, "GET /nope HTTP/1.1").0, 404);
    }

    #[test]
    fn followers_are_ready_and_leadership_is_a_gauge() {
        let m = Metrics::default();
        assert!(
            !m.render().contains("banlieue_leader"),
            "no election, no gauge"
        );
        m.set_leader("banlieue-controller", false);
        assert_eq!(
            respond(&m, "GET /readyz HTTP/1.1").0,
            200,
            "a follower is ready"
        );
        assert!(m
            .render()
            .contains("banlieue_leader{lease=\"banlieue-controller\"} 0"));
        m.set_leader("banlieue-controller", true);
        assert_eq!(
            respond(&m, "GET /readyz HTTP/1.1").0,
            503,
            "a leader waits for its caches"
        );
        m.set_ready();
        assert_eq!(respond(&m, "GET /readyz HTTP/1.1").0, 200);
        assert!(m
            .render()
            .contains("banlieue_leader{lease=\"banlieue-controller\"} 1"));
    }

    #[test]
    fn metrics_count_per_kind() {
        let m = Metrics::default();
        m.observe_reconcile("VirtualMachine", Duration::from_millis(10), None);
        m.observe_reconcile("VirtualMachine", Duration::from_millis(10), Some("kube"));
        m.observe_reconcile("VirtualMachine", Duration::from_millis(10), Some("kube"));
        m.observe_reconcile(
            "Provider",
            Duration::from_millis(10),
            Some("vsphere_unresponsive"),
        );
        let text = m.render();
        assert!(
            text.contains("banlieue_reconciles_total{kind=\"VirtualMachine\"} 3"),
            "{text}"
        );
        assert!(
            text.contains(
                "banlieue_reconcile_errors_total{kind=\"VirtualMachine\",error=\"kube\"} 2"
            ),
            "{text}"
        );
        assert!(
            text.contains("banlieue_reconcile_errors_total{kind=\"Provider\",error=\"vsphere_unresponsive\"} 1"),
            "{text}"
        );
        // A kind that never failed has no error series (no zero per label).
        assert!(
            !text.contains("errors_total{kind=\"VirtualMachine\",error=\"vsphere"),
            "{text}"
        );
    }

    #[test]
    fn metrics_show_vsphere_calls_sessions_and_tasks() {
        let m = Metrics::default();
        m.tasks_in_flight(2);
        m.tasks_in_flight(-1);
        m.set_vsphere_source(Arc::new(|| {
            vec![ProviderCalls {
                provider: "banlieue-system/vc".into(),
                by_method: BTreeMap::from([("CloneVM_Task".to_string(), (3, 1, 0))]),
            }]
        }));
        let text = m.render();
        assert!(
            text.contains("banlieue_vsphere_tasks_in_flight 1"),
            "{text}"
        );
        assert!(
            text.contains("banlieue_vcenter_sessions{provider=\"banlieue-system/vc\"} 1"),
            "{text}"
        );
        assert!(text.contains("banlieue_vsphere_calls_total{provider=\"banlieue-system/vc\",method=\"CloneVM_Task\"} 3"), "{text}");
        assert!(text.contains("banlieue_vsphere_faults_total{provider=\"banlieue-system/vc\",method=\"CloneVM_Task\"} 1"), "{text}");
    }
}
