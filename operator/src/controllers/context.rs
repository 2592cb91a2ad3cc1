//! The provider role's shared state: its watch caches, the vSphere backend,
//! per-object backoff, the field manager. Every provider-role controller
//! (Provider, VMImage, VSphereMachine) reconciles with it.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::Api;
use kube::runtime::events::{Recorder, Reporter};
use kube::runtime::reflector::Store;
use kube::Client;

use super::provider::readiness::{self, Fetched};
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
    /// The install namespace: its Providers are served and its Secrets read
    /// (by name, at each reconcile: see [`Context::fetch`]).
    pub namespace: String,
    /// A provider workload's one Provider (`--provider`): only it, its
    /// machines and their snapshots are served, and its own VMImage entries written.
    pub scope: Option<String>,
    pub field_manager: String,
    pub resync: Duration,
    pub vsphere: Arc<V>,
    pub providers: Store<Provider>,
    /// Every VSphereMachine: a deleting Provider stays while some still use it.
    pub machines: Store<VSphereMachine>,
    /// Until the caches are filled, a machine or image may only be not
    /// listed yet: reconciles wait (and say so past [`caches::SYNC_GRACE`]).
    pub caches: CacheSync,
    /// Consecutive failures per object.
    failures: Backoff,
    pub metrics: Arc<Metrics>,
}

/// The watch caches the role reads.
pub struct Caches {
    pub providers: Store<Provider>,
    pub machines: Store<VSphereMachine>,
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
            .with("Providers", caches.providers.clone())
            .with("VSphereMachines", caches.machines.clone())
            .with("VMImages", caches.images);
        Context {
            recorder: Recorder::new(client.clone(), reporter),
            client,
            namespace: namespace.to_string(),
            scope: None,
            field_manager,
            resync,
            vsphere,
            providers: caches.providers,
            machines: caches.machines,
            caches: sync,
            failures: Backoff::default(),
            metrics,
        }
    }

    /// Serves only `provider` of the namespace (a provider workload); its
    /// writes get a field manager of their own.
    pub fn scoped_to(mut self, provider: &str) -> Self {
        self.field_manager = format!("{}-{provider}", self.field_manager);
        self.scope = Some(provider.to_string());
        self
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

impl<V> Context<V> {
    /// Whether this role serves the Provider `provider` names.
    pub fn serves(&self, provider: &crate::api::NamespacedReference) -> bool {
        provider.namespace == self.namespace
            && self.scope.as_ref().is_none_or(|p| *p == provider.name)
    }

    /// Reads the Secrets and ConfigMaps named, by name (a GET each: the role
    /// lists and watches none), in `namespace` if it is the install
    /// namespace: the role never reads another namespace's. A missing one is
    /// left out; an API error fails the reconcile (retried with backoff).
    pub async fn fetch(
        &self,
        namespace: &str,
        secrets: &[String],
        config_maps: &[String],
    ) -> kube::Result<Fetched> {
        let mut fetched = Fetched::default();
        if namespace != self.namespace {
            return Ok(fetched);
        }
        let secret_api: Api<Secret> = Api::namespaced(self.client.clone(), namespace);
        for name in secrets {
            fetched
                .secrets
                .extend(absent_if_not_found(secret_api.get(name).await)?);
        }
        let config_map_api: Api<ConfigMap> = Api::namespaced(self.client.clone(), namespace);
        for name in config_maps {
            fetched
                .config_maps
                .extend(absent_if_not_found(config_map_api.get(name).await)?);
        }
        Ok(fetched)
    }

    /// A VirtualMachine's own cloud-config Secrets, by name, in its
    /// namespace (not the install namespace): readable only where the
    /// namespace's owner grants the provider's ServiceAccount `get` on
    /// Secrets with a Role (the role has no cluster-wide Secret access). A
    /// missing one is left out; a refusal says what grant is missing.
    pub async fn fetch_machine_secrets(
        &self,
        namespace: &str,
        names: &[String],
    ) -> crate::Result<Vec<Secret>> {
        let api: Api<Secret> = Api::namespaced(self.client.clone(), namespace);
        let mut found = Vec::new();
        for name in names {
            match api.get(name).await {
                Ok(secret) => found.push(secret),
                Err(kube::Error::Api(e)) if e.code == 404 => {}
                Err(kube::Error::Api(e)) if e.code == 403 => {
                    return Err(crate::Error::CloudConfig(format!(
                        "cloud-config Secret {namespace}/{name} cannot be read: grant the provider's \
                         ServiceAccount get on Secrets in namespace {namespace} with a Role and \
                         RoleBinding there (docs/operator.md, per-VM identity)"
                    )))
                }
                Err(e) => return Err(e.into()),
            }
        }
        Ok(found)
    }

    /// What `provider` reads ([`readiness::referenced`]), fetched by name.
    pub async fn fetch_for(&self, provider: &Provider) -> kube::Result<Fetched> {
        let (secrets, config_maps) = readiness::referenced(provider);
        let namespace = provider.metadata.namespace.as_deref().unwrap_or_default();
        self.fetch(namespace, &secrets, &config_maps).await
    }
}

/// A 404 as `None`, by its code: `get_opt` also wants the reason
/// `NotFound`, which not every API server front sends.
fn absent_if_not_found<K>(result: kube::Result<K>) -> kube::Result<Option<K>> {
    match result {
        Ok(object) => Ok(Some(object)),
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(None),
        Err(e) => Err(e),
    }
}

/// How long to wait for the caches before trying again.
pub(crate) const NOT_READY_DELAY: Duration = Duration::from_secs(1);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::NamespacedReference;
    use crate::fixtures::store_of;
    use crate::vsphere::mock::MockVSphere;

    #[tokio::test]
    async fn a_provider_workload_serves_its_own_provider_only_with_a_field_manager_of_its_own() {
        let caches = || Caches {
            providers: store_of(vec![]),
            machines: store_of(vec![]),
            images: store_of(vec![]),
        };
        let client = kube::Client::new(
            tower_test::mock::pair::<
                http::Request<kube::client::Body>,
                http::Response<kube::client::Body>,
            >()
            .0,
            "banlieue-system",
        );
        let new = || {
            Context::new(
                client.clone(),
                "banlieue-system",
                DEFAULT_RESYNC,
                Arc::new(MockVSphere::default()),
                caches(),
                Arc::default(),
            )
        };
        let at = |namespace: &str, name: &str| NamespacedReference {
            namespace: namespace.into(),
            name: name.into(),
        };
        let whole = new();
        assert!(
            whole.serves(&at("banlieue-system", "a")) && whole.serves(&at("banlieue-system", "b"))
        );
        assert!(!whole.serves(&at("other", "a")));
        let scoped = new().scoped_to("a");
        assert!(scoped.serves(&at("banlieue-system", "a")));
        assert!(!scoped.serves(&at("banlieue-system", "b")));
        assert!(!scoped.serves(&at("other", "a")));
        assert_eq!(
            scoped.field_manager,
            "banlieue-provider-vsphere-banlieue-system-a"
        );
        assert_ne!(scoped.field_manager, whole.field_manager);
    }
}
