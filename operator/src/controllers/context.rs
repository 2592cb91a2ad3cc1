//! The provider role's shared state: its watch caches, the vSphere backend,
//! per-object backoff, the field manager. Every provider-role controller
//! (Provider, VMImage, VSphereMachine) reconciles with it.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::runtime::events::{Recorder, Reporter};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::Client;

use super::provider::readiness::Objects;
use super::Backoff;
use crate::api::{Provider, VMImage, VSphereMachine};
use crate::caches::CacheSync;
use crate::health::Metrics;
use crate::vsphere::VSphere;

/// Prefix of the field manager of every write the role makes; the namespace
/// completes it, so the roles of two namespaces each own their own
/// `perProvider` entries of a VMImage.
pub const MANAGER_PREFIX: &str = "banlieue-provider-vsphere";

/// Default interval of the periodic re-verification.
pub const DEFAULT_RESYNC: Duration = Duration::from_secs(5 * 60);

/// Shared state of the role's reconciles.
pub struct Context<V> {
    pub client: Client,
    pub recorder: Recorder,
    /// The install namespace: its Providers are served and its Secrets read.
    pub namespace: String,
    pub field_manager: String,
    pub resync: Duration,
    pub vsphere: Arc<V>,
    pub providers: Store<Provider>,
    /// Every VSphereMachine: a deleting Provider stays while some still use it.
    pub machines: Store<VSphereMachine>,
    pub secrets: Store<Secret>,
    pub config_maps: Store<ConfigMap>,
    /// Until the caches are filled, a missing Secret may only be not listed
    /// yet: reconciles wait rather than report it (and say so past
    /// [`caches::SYNC_GRACE`]).
    pub caches: CacheSync,
    /// Consecutive failures per object.
    failures: Backoff,
    pub metrics: Arc<Metrics>,
}

/// The watch caches the role reads.
pub struct Caches {
    pub providers: Store<Provider>,
    pub machines: Store<VSphereMachine>,
    pub secrets: Store<Secret>,
    pub config_maps: Store<ConfigMap>,
    pub images: Store<VMImage>,
}

impl<V: VSphere> Context<V> {
    pub fn new(
        client: Client,
        namespace: &str,
        resync: Duration,
        vsphere: Arc<V>,
        caches: Caches,
        metrics: Arc<Metrics>,
    ) -> Self {
        let field_manager = format!("{MANAGER_PREFIX}-{namespace}");
        let reporter = Reporter {
            controller: field_manager.clone(),
            instance: std::env::var("POD_NAME").ok(),
        };
        let sync = CacheSync::new()
            .with("Secrets", caches.secrets.clone())
            .with("ConfigMaps", caches.config_maps.clone())
            .with("Providers", caches.providers.clone())
            .with("VSphereMachines", caches.machines.clone())
            .with("VMImages", caches.images);
        Context {
            recorder: Recorder::new(client.clone(), reporter),
            client,
            namespace: namespace.to_string(),
            field_manager,
            resync,
            vsphere,
            providers: caches.providers,
            machines: caches.machines,
            secrets: caches.secrets,
            config_maps: caches.config_maps,
            caches: sync,
            failures: Backoff::default(),
            metrics,
        }
    }

    pub(crate) fn ready(&self) -> bool {
        self.caches.is_synced()
    }

    /// Records one more failure of `key`; returns the delay before the next
    /// try (never longer than the resync).
    pub(crate) fn failed(&self, key: String) -> Duration {
        self.failures.failed(key).min(self.resync)
    }

    pub(crate) fn succeeded(&self, key: &str) {
        self.failures.succeeded(key);
    }
}

impl<V> Objects for Context<V> {
    // Only the install namespace's: the role never reads another namespace's Secrets.
    fn secret(&self, namespace: &str, name: &str) -> Option<Secret> {
        (namespace == self.namespace)
            .then(|| self.secrets.get(&ObjectRef::new(name).within(namespace)))
            .flatten()
            .map(|s| (*s).clone())
    }

    fn config_map(&self, namespace: &str, name: &str) -> Option<ConfigMap> {
        (namespace == self.namespace)
            .then(|| {
                self.config_maps
                    .get(&ObjectRef::new(name).within(namespace))
            })
            .flatten()
            .map(|c| (*c).clone())
    }
}

/// How long to wait for the caches before trying again.
pub(crate) const NOT_READY_DELAY: Duration = Duration::from_secs(1);
