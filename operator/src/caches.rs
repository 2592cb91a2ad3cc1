//! When a role's watch caches are synced (every store filled by its first list).
//!
//! `Store::wait_until_ready` is not used to wait for that: kube-runtime's store
//! readiness is a `futures` oneshot receiver behind a mutex, which keeps ONE waker,
//! the last poller's. A `Controller` polls its own store's readiness again each time
//! its task wakes (any trigger, any stream), so a second task awaiting the same store
//! has its waker replaced and is never woken: against a fast API server the
//! provider role's "caches synced" never came and every Provider waited for it in
//! silence. Readiness is polled here instead (a look that registers nothing), and a
//! role that waits too long says which caches it waits for.

use std::hash::Hash;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use futures::FutureExt;
use kube::runtime::reflector::{Lookup, Store};
use tracing::{info, warn};

/// How often the caches are looked at until they are synced.
const POLL: Duration = Duration::from_millis(50);

/// How long a role waits for its caches before it says so at warn level (and the
/// provider role in the status of the Providers it cannot reconcile yet).
pub const SYNC_GRACE: Duration = Duration::from_secs(10);

/// Has this store been filled by its reflector's first list?
pub fn is_synced<K>(store: &Store<K>) -> bool
where
    K: Lookup + Clone + 'static,
    K::DynamicType: Eq + Hash + Clone,
{
    // Polled once with a no-op waker: nothing is registered, nothing is replaced.
    matches!(store.wait_until_ready().now_or_never(), Some(Ok(())))
}

type Check = Box<dyn Fn() -> bool + Send + Sync>;

/// The named caches of a role and whether they are all synced.
pub struct CacheSync {
    caches: Vec<(&'static str, Check)>,
    synced: AtomicBool,
    started: Mutex<Instant>,
    pending: Mutex<Vec<&'static str>>,
}

impl std::fmt::Debug for CacheSync {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CacheSync")
            .field("synced", &self.is_synced())
            .field("pending", &self.pending())
            .finish()
    }
}

impl Default for CacheSync {
    fn default() -> Self {
        CacheSync::new()
    }
}

impl CacheSync {
    /// No caches yet, waiting since now.
    pub fn new() -> Self {
        CacheSync {
            caches: Vec::new(),
            synced: AtomicBool::new(false),
            started: Mutex::new(Instant::now()),
            pending: Mutex::default(),
        }
    }

    /// Waits for `store` too, named `name` in messages ("Secrets of banlieue-system").
    #[must_use]
    pub fn with<K>(mut self, name: &'static str, store: Store<K>) -> Self
    where
        K: Lookup + Clone + Send + Sync + 'static,
        K::DynamicType: Eq + Hash + Clone + Send + Sync,
    {
        self.caches
            .push((name, Box::new(move || is_synced(&store))));
        self
    }

    /// Marks the caches synced (tests whose stores are filled by hand).
    pub fn set_synced(&self, synced: bool) {
        self.synced.store(synced, Ordering::Relaxed);
    }

    /// Marks the wait as begun at `started` (tests of a long wait).
    pub fn set_started(&self, started: Instant) {
        if let Ok(mut s) = self.started.lock() {
            *s = started;
        }
    }

    pub fn is_synced(&self) -> bool {
        self.synced.load(Ordering::Relaxed)
    }

    /// The caches not synced at the last look.
    pub fn pending(&self) -> Vec<&'static str> {
        self.pending.lock().map(|p| p.clone()).unwrap_or_default()
    }

    /// How long the role has waited, while not synced.
    pub fn waiting_for(&self) -> Duration {
        self.started.lock().map(|s| s.elapsed()).unwrap_or_default()
    }

    /// Looks at every cache once; true (and remembered) when all are synced.
    pub fn check(&self) -> bool {
        if self.is_synced() {
            return true;
        }
        let pending: Vec<&'static str> = self
            .caches
            .iter()
            .filter(|(_, synced)| !synced())
            .map(|(name, _)| *name)
            .collect();
        let done = pending.is_empty();
        if let Ok(mut p) = self.pending.lock() {
            *p = pending;
        }
        if done {
            self.synced.store(true, Ordering::Relaxed);
        }
        done
    }

    /// Returns once every cache is synced, logging "caches synced"; past
    /// [`SYNC_GRACE`], and every `SYNC_GRACE` after that, warns naming the caches
    /// still pending.
    pub async fn wait(&self) {
        let mut next_warning = SYNC_GRACE;
        while !self.check() {
            let waited = self.waiting_for();
            if waited >= next_warning {
                warn!(
                    waited = ?Duration::from_secs(waited.as_secs()),
                    pending = %self.pending().join(", "),
                    "watch caches not synced yet: nothing is reconciled until they are"
                );
                next_warning += SYNC_GRACE;
            }
            tokio::time::sleep(POLL).await;
        }
        info!(took = ?self.waiting_for(), "caches synced");
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::runtime::reflector;
    use kube::runtime::watcher;

    use super::*;

    /// The case that hung the provider role: another task (a `Controller`) polls
    /// the store's readiness again and again while the role waits for the same store.
    #[tokio::test]
    async fn synced_while_another_task_keeps_polling_the_same_store() {
        let (store, mut writer) = reflector::store::<ConfigMap>();
        let sync = Arc::new(CacheSync::new().with("ConfigMaps", store.clone()));
        let waiter = tokio::spawn({
            let sync = sync.clone();
            async move { sync.wait().await }
        });
        let poller = tokio::spawn({
            let store = store.clone();
            async move {
                loop {
                    tokio::select! {
                        _ = store.wait_until_ready() => break,
                        () = tokio::time::sleep(Duration::from_millis(1)) => {}
                    }
                }
            }
        });
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(!sync.is_synced(), "nothing listed yet");
        assert_eq!(sync.pending(), vec!["ConfigMaps"]);
        writer.apply_watcher_event(&watcher::Event::Init);
        writer.apply_watcher_event(&watcher::Event::InitDone);
        tokio::time::timeout(Duration::from_secs(2), waiter)
            .await
            .expect("the role sees its caches synced within 2 s of the list")
            .expect("waiter task");
        assert!(sync.is_synced());
        assert!(sync.pending().is_empty());
        tokio::time::timeout(Duration::from_secs(2), poller)
            .await
            .expect("the controller's own wait ends too")
            .expect("poller task");
    }

    #[test]
    fn every_cache_must_be_synced() {
        let (listed, mut writer) = reflector::store::<ConfigMap>();
        writer.apply_watcher_event(&watcher::Event::InitDone);
        let (unlisted, _unlisted_writer) = reflector::store::<ConfigMap>();
        let sync = CacheSync::new()
            .with("listed", listed)
            .with("unlisted", unlisted);
        assert!(!sync.check());
        assert_eq!(sync.pending(), vec!["unlisted"]);
    }
}
