//! The real [`VSphere`]: vCenter through `vsphere-client`.
//!
//! One client (one vCenter session) per Provider, cached with the connection
//! parameters it was made from. The client's keepalive keeps the session
//! alive and its single-flight re-login replaces one that expired, so a
//! reconcile never logs in: only a Provider seen for the first time, or one
//! whose endpoint, credentials, CA or call deadline changed, does; and so
//! does one whose session met a call vCenter did not answer within the
//! Provider's call deadline ([`VSphere::session_unresponsive`]): a wedged
//! vCenter, or a half-dead connection through a proxy, is left behind rather
//! than reused. A replaced session is logged out, and so is every session
//! when the role stops.
//!
//! - [`inventory`]: [`Session`] (the failure-domain walk, template lookup);
//! - [`library`]: content library items found and deployed as templates
//!   (the REST side);
//! - [`machines`]: [`Machines`](super::Machines) (clone, reconfigure, power,
//!   destroy, tasks), with placement resolved once per session;
//! - [`linked`]: a template's linked-clone snapshot (the template turned
//!   into a VM, snapshotted, marked a template again; crash-safe);
//! - [`placement`]: where a clone goes (resource pool, folder, datastore from
//!   a datastore cluster, a standalone host) and the Provider's check of it;
//! - [`snapshots`]: [`Snapshots`](super::Snapshots) (take, revert, remove);
//! - [`facts`]: vim25 objects as the boundary's plain facts, SDK errors as
//!   the boundary's [`Error`];
//! - [`watch`]: the per-session VM update stream.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tracing::{debug, info, warn};

use super::{ConnectParams, Error, Tls, VSphere};
use crate::api::NamespacedReference;
use facts::connect_error;
use machines::SharedPlacement;
use watch::VmWatch;

pub mod facts;
pub mod inventory;
pub mod library;
pub mod linked;
pub mod machines;
pub mod placement;
pub mod snapshots;
pub mod watch;

/// How the clients are configured.
#[derive(Clone, Debug)]
pub struct Options {
    /// Time to establish a TCP and TLS connection.
    pub connect_timeout: Duration,
    /// Time for one attempt of a SOAP call (the Provider's call deadline
    /// bounds all attempts of a call together).
    pub call_timeout: Duration,
    /// How often an idle session is checked (and renewed when it expired).
    pub keepalive: Duration,
    /// Objects per `RetrievePropertiesEx` page.
    pub page_size: u32,
    /// Watch every Provider's VMs through one update stream per session
    /// (the provider role; `check` runs are too short to need it).
    pub watch_vms: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            connect_timeout: Duration::from_secs(15),
            call_timeout: Duration::from_secs(120),
            keepalive: Duration::from_secs(5 * 60),
            page_size: 1000,
            watch_vms: false,
        }
    }
}

struct Cached {
    /// Which login this is (a session handed out names it).
    login: u64,
    params: ConnectParams,
    client: vsphere_client::Client,
    placement: SharedPlacement,
    /// The session's VM update stream (stopped when this is dropped).
    watch: Option<Arc<VmWatch>>,
}

/// A Provider's slot: the lock serializes its connects, so two reconciles
/// needing the same Provider at once share one login.
type Slot = Arc<tokio::sync::Mutex<Option<Cached>>>;

/// vCenter sessions by Provider.
pub struct VCenter {
    options: Options,
    slots: Mutex<BTreeMap<NamespacedReference, Slot>>,
    /// Instance UUIDs of VMs that changed, from every session's update stream.
    changes: tokio::sync::broadcast::Sender<String>,
    /// Numbers the logins.
    logins: AtomicU64,
}

impl Default for VCenter {
    fn default() -> Self {
        VCenter::new(Options::default())
    }
}

impl VCenter {
    pub fn new(options: Options) -> Self {
        VCenter {
            options,
            slots: Mutex::default(),
            changes: tokio::sync::broadcast::channel(1024).0,
            logins: AtomicU64::new(0),
        }
    }

    fn slot(&self, provider: &NamespacedReference) -> Slot {
        let mut slots = self
            .slots
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        slots.entry(provider.clone()).or_default().clone()
    }

    /// The Providers that currently hold a session.
    pub fn providers(&self) -> Vec<NamespacedReference> {
        let slots = self
            .slots
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut keys: Vec<_> = slots
            .iter()
            .filter(|(_, slot)| slot.try_lock().map(|s| s.is_some()).unwrap_or(true))
            .map(|(k, _)| k.clone())
            .collect();
        keys.sort();
        keys
    }

    /// The client of a Provider, if it has a session (for call counts in tests and metrics).
    pub async fn client(&self, provider: &NamespacedReference) -> Option<vsphere_client::Client> {
        let slot = self.slots.lock().ok()?.get(provider).cloned()?;
        let cached = slot.lock().await;
        cached.as_ref().map(|c| c.client.clone())
    }

    /// Each session's SOAP calls per method, for the metrics (a session
    /// being set up at this instant is skipped).
    pub fn call_stats(&self) -> Vec<crate::health::ProviderCalls> {
        let slots: Vec<(NamespacedReference, Slot)> = match self.slots.lock() {
            Ok(s) => s.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
            Err(_) => return Vec::new(),
        };
        slots
            .into_iter()
            .filter_map(|(provider, slot)| {
                let cached = slot.try_lock().ok()?;
                let client = cached.as_ref()?.client.clone();
                Some(crate::health::ProviderCalls {
                    provider: provider.to_string(),
                    by_method: client
                        .call_stats()
                        .into_iter()
                        .map(|(m, s)| (m.to_string(), (s.calls, s.faults, s.errors)))
                        .collect(),
                })
            })
            .collect()
    }

    /// Logs out the sessions of Providers not in `keep` (deleted ones).
    pub async fn retain(&self, keep: &BTreeSet<NamespacedReference>) {
        let gone: Vec<(NamespacedReference, Slot)> = {
            let mut slots = self
                .slots
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            let keys: Vec<_> = slots
                .keys()
                .filter(|k| !keep.contains(*k))
                .cloned()
                .collect();
            keys.into_iter()
                .filter_map(|k| slots.remove(&k).map(|s| (k, s)))
                .collect()
        };
        for (provider, slot) in gone {
            if let Some(cached) = slot.lock().await.take() {
                info!(%provider, "logging out of vCenter");
                logout(cached.client).await;
            }
        }
    }

    /// Logs out every session (when the role stops, or `check` is done).
    pub async fn close_all(&self) {
        self.retain(&BTreeSet::new()).await;
    }

    async fn login(&self, params: &ConnectParams) -> Result<vsphere_client::Client, Error> {
        let builder = vsphere_client::Client::builder(&params.endpoint)
            .credentials(params.username.clone(), params.password.expose())
            .connect_timeout(self.options.connect_timeout)
            .call_timeout(Some(self.options.call_timeout))
            .call_deadline(Some(params.call_deadline))
            .keepalive(Some(self.options.keepalive))
            .user_agent(concat!("banlieue/", env!("CARGO_PKG_VERSION")));
        let builder = match &params.tls {
            Tls::SystemRoots => Ok(builder),
            Tls::Insecure => Ok(builder.insecure(true)),
            Tls::CaBundle(pem) => builder.ca_bundle_pem(pem.as_bytes()),
        }
        .map_err(|e| connect_error(params, &e))?;
        builder
            .connect()
            .await
            .map_err(|e| connect_error(params, &e))
    }
}

async fn logout(client: vsphere_client::Client) {
    if let Err(e) = client.close().await {
        debug!(error = %e, "logout failed; the session will expire on its own");
    }
}

impl VSphere for VCenter {
    type Session = VCenterSession;

    async fn retain_sessions(&self, keep: &BTreeSet<NamespacedReference>) {
        self.retain(keep).await
    }

    fn machine_changes(&self) -> Option<tokio::sync::broadcast::Receiver<String>> {
        self.options.watch_vms.then(|| self.changes.subscribe())
    }

    fn session_unresponsive(&self, session: &VCenterSession) {
        let Some(slot) = self
            .slots
            .lock()
            .ok()
            .and_then(|slots| slots.get(&session.provider).cloned())
        else {
            return;
        };
        // Locked: a connect is checking or replacing the session right now,
        // and a replaced one is already gone.
        let Ok(mut cached) = slot.try_lock() else {
            return;
        };
        // Only the session that met the silence: a newer login stays.
        if cached.as_ref().is_some_and(|c| c.login == session.login) {
            if let Some(old) = cached.take() {
                warn!(provider = %session.provider, "vCenter did not answer within the call deadline: dropping the session; the next reconcile logs in again");
                tokio::spawn(logout(old.client));
            }
        }
    }

    async fn connect(&self, params: &ConnectParams) -> Result<VCenterSession, Error> {
        let slot = self.slot(&params.provider);
        let mut cached = slot.lock().await;
        if let Some(c) = cached.as_ref().filter(|c| c.params == *params) {
            return Ok(VCenterSession {
                provider: params.provider.clone(),
                login: c.login,
                client: c.client.clone(),
                page_size: self.options.page_size,
                placement: c.placement.clone(),
                watch: c.watch.clone(),
            });
        }
        // New Provider, or its endpoint, credentials, CA or call deadline
        // changed: the old session (if any) belongs to settings no longer wanted.
        if let Some(old) = cached.take() {
            info!(provider = %params.provider, "connection settings changed: logging in again");
            tokio::spawn(logout(old.client));
        }
        let client = self.login(params).await?;
        let login = self.logins.fetch_add(1, Ordering::Relaxed) + 1;
        info!(provider = %params.provider, endpoint = %params.endpoint, user = %params.username, "logged in to vCenter");
        let placement = SharedPlacement::default();
        let watch = self
            .options
            .watch_vms
            .then(|| Arc::new(VmWatch::start(client.clone(), self.changes.clone())));
        *cached = Some(Cached {
            login,
            params: params.clone(),
            client: client.clone(),
            placement: placement.clone(),
            watch: watch.clone(),
        });
        Ok(VCenterSession {
            provider: params.provider.clone(),
            login,
            client,
            page_size: self.options.page_size,
            placement,
            watch,
        })
    }
}

/// A Provider's vCenter session.
#[derive(Clone, Debug)]
pub struct VCenterSession {
    provider: NamespacedReference,
    /// The login this session came from (see [`VSphere::session_unresponsive`]).
    login: u64,
    client: vsphere_client::Client,
    page_size: u32,
    /// VM placement resolved once per session (see [`machines`]).
    placement: SharedPlacement,
    watch: Option<Arc<VmWatch>>,
}

impl VCenterSession {
    pub fn client(&self) -> &vsphere_client::Client {
        &self.client
    }

    pub(crate) fn placement(&self) -> &machines::PlacementCache {
        &self.placement
    }

    /// The session's VM update stream, when the role watches VMs.
    pub fn watch(&self) -> Option<&VmWatch> {
        self.watch.as_deref()
    }
}
