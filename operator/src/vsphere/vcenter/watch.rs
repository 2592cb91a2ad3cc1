//! One update stream per Provider session: a PropertyCollector filter over
//! every VM (a container view of the root folder), kept by `WaitForUpdatesEx`.
//! It keeps a cache of the VMs' lifecycle facts (power, IPs, shape) and
//! announces each change, so the provider role reconciles a VSphereMachine
//! when its VM changes (an IP reported, a power change) instead of polling,
//! and a resync reads no VM from vCenter.
//!
//! The cache only ever answers "here is the VM": a miss, or an absent VM, is
//! asked of vCenter itself (see `Machines::cached`), so a stream that lags or
//! broke can cost a call, never a duplicate clone.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::broadcast;
use tracing::{debug, warn};
use vsphere_client::mo;
use vsphere_client::property::UpdateKind;

use super::facts::{facts_of, VM_PROPERTIES};
use crate::vsphere::VmFacts;

#[derive(Default)]
struct Cache {
    by_ref: HashMap<String, VmFacts>,
    /// Instance UUID (lower case) -> reference.
    by_uuid: HashMap<String, String>,
    /// False while the stream is broken: nothing is answered from the cache.
    live: bool,
}

/// A Provider's VM watch; dropping it stops the stream.
pub struct VmWatch {
    cache: Arc<Mutex<Cache>>,
    task: tokio::task::JoinHandle<()>,
}

impl std::fmt::Debug for VmWatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("VmWatch")
    }
}

impl Drop for VmWatch {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl VmWatch {
    /// Starts watching every VM of `client`'s vCenter; each change sends the
    /// VM's instance UUID on `changes`.
    pub fn start(client: vsphere_client::Client, changes: broadcast::Sender<String>) -> VmWatch {
        let cache = Arc::new(Mutex::new(Cache::default()));
        let task = tokio::spawn(run(client, cache.clone(), changes));
        VmWatch { cache, task }
    }

    /// The cached VM with this instance UUID, if the stream has reported it.
    pub fn by_uuid(&self, uuid: &str) -> Option<VmFacts> {
        let cache = self.cache.lock().ok()?;
        if !cache.live {
            return None;
        }
        let mo_ref = cache.by_uuid.get(&uuid.to_ascii_lowercase())?;
        cache.by_ref.get(mo_ref).cloned()
    }

    /// The cached VM `mo_ref`, if the stream has reported it.
    pub fn by_ref(&self, mo_ref: &str) -> Option<VmFacts> {
        let cache = self.cache.lock().ok()?;
        cache
            .live
            .then(|| cache.by_ref.get(mo_ref).cloned())
            .flatten()
    }

    pub fn is_live(&self) -> bool {
        self.cache.lock().map(|c| c.live).unwrap_or(false)
    }
}

fn apply(cache: &Mutex<Cache>, kind: UpdateKind, vm: &mo::VirtualMachine) -> Option<String> {
    let facts = facts_of(vm);
    let mut cache = cache.lock().ok()?;
    let uuid = facts.instance_uuid.to_ascii_lowercase();
    if let Some(old) = cache
        .by_ref
        .get(&facts.mo_ref)
        .map(|f| f.instance_uuid.to_ascii_lowercase())
    {
        if old != uuid {
            cache.by_uuid.remove(&old);
        }
    }
    match kind {
        UpdateKind::Leave => {
            cache.by_ref.remove(&facts.mo_ref);
            if cache.by_uuid.get(&uuid) == Some(&facts.mo_ref) {
                cache.by_uuid.remove(&uuid);
            }
        }
        UpdateKind::Enter | UpdateKind::Modify => {
            if !uuid.is_empty() {
                cache.by_uuid.insert(uuid.clone(), facts.mo_ref.clone());
            }
            cache.by_ref.insert(facts.mo_ref.clone(), facts);
        }
    }
    (!uuid.is_empty()).then_some(uuid)
}

async fn run(
    client: vsphere_client::Client,
    cache: Arc<Mutex<Cache>>,
    changes: broadcast::Sender<String>,
) {
    let root = client.service_content().root_folder.clone();
    let mut backoff = Duration::from_secs(1);
    loop {
        let stream = match client.properties::<mo::VirtualMachine>(VM_PROPERTIES) {
            Ok(query) => query.watch_container(&root).await,
            Err(e) => Err(e),
        };
        let mut stream = match stream {
            Ok(s) => s,
            Err(e) => {
                warn!(error = %e, ?backoff, "cannot watch the VMs; retrying");
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(60));
                continue;
            }
        };
        if let Ok(mut c) = cache.lock() {
            c.live = true;
        }
        loop {
            match stream.next().await {
                Ok(change) => {
                    backoff = Duration::from_secs(1);
                    if let Some(uuid) = apply(&cache, change.kind, &change.object) {
                        debug!(vm = %change.object.mo_ref.value, kind = ?change.kind, "VM changed");
                        // Nobody listening (yet) is fine.
                        let _ = changes.send(uuid);
                    }
                }
                Err(e) => {
                    // The stream retries on the next call; meanwhile nothing
                    // is answered from a cache that may miss changes.
                    // After a session loss every VM enters anew; what left
                    // meanwhile must not linger: start from empty.
                    warn!(error = %e, ?backoff, "VM update stream failed; retrying");
                    if let Ok(mut c) = cache.lock() {
                        *c = Cache::default();
                    }
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(Duration::from_secs(60));
                    if let Ok(mut c) = cache.lock() {
                        c.live = true;
                    }
                }
            }
        }
    }
}
