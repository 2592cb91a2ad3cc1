//! The provider role, `banlieue provider vsphere --namespace NS`: reconciles
//! the Providers of its namespace (credentials, TLS, inventory -> failure
//! domains) and every VMImage's readiness on them (the `perProvider`
//! entries of this namespace's Providers), with the reconcile core of
//! [`crate::provider`] that `check` runs too.
//!
//! - Secrets and ConfigMaps of the namespace are watched: a rotated password
//!   or CA bundle triggers the Providers that reference it, and the backend
//!   logs in again with it (and only then).
//! - Every Provider and VMImage is re-verified every `resync` (inventory
//!   changes, templates added or removed); a vCenter that cannot be reached
//!   is retried sooner, with per-object exponential backoff, and its
//!   Provider keeps its last known failure domains meanwhile.
//! - Status is written by server-side apply, and only when it changed.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::utils::Predicate;
use kube::runtime::{predicates, watcher, Controller, WatchStreamExt};
use kube::{Client, Resource, ResourceExt};
use serde_json::json;
use tracing::{info, warn};

use crate::api::{
    ImageProviderStatus, NamespacedReference, Provider, VMImage, VMImageStatus, VSphereMachine,
    API_VERSION,
};
use crate::caches::{self, CacheSync};
use crate::conditions::{self, Observed, Status, READY};
use crate::controller::log_loop_result;
use crate::health::Metrics;
use crate::lifecycle::controller::{machine_error_policy, reconcile_machine};
use crate::provider::{self, reason, Objects, ProviderOutcome};
use crate::vsphere::VSphere;
use crate::{Error, Result};

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
    pub secrets: Store<Secret>,
    pub config_maps: Store<ConfigMap>,
    /// Until the caches are filled, a missing Secret may only be not listed
    /// yet: reconciles wait rather than report it (and say so past
    /// [`caches::SYNC_GRACE`]).
    pub caches: CacheSync,
    /// Consecutive failures per object, for exponential backoff.
    failures: Mutex<HashMap<String, u32>>,
    pub metrics: Arc<Metrics>,
}

/// The watch caches the role reads.
pub struct Caches {
    pub providers: Store<Provider>,
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
            .with("VMImages", caches.images);
        Context {
            recorder: Recorder::new(client.clone(), reporter),
            client,
            namespace: namespace.to_string(),
            field_manager,
            resync,
            vsphere,
            providers: caches.providers,
            secrets: caches.secrets,
            config_maps: caches.config_maps,
            caches: sync,
            failures: Mutex::default(),
            metrics,
        }
    }

    fn ready(&self) -> bool {
        self.caches.is_synced()
    }

    /// Records one more failure of `key`; returns the delay before the next try.
    pub(crate) fn failed(&self, key: String) -> Duration {
        let n = self
            .failures
            .lock()
            .map(|mut f| {
                let n = f.entry(key).or_insert(0);
                *n = n.saturating_add(1);
                *n
            })
            .unwrap_or(1);
        crate::controller::backoff(n).min(self.resync)
    }

    pub(crate) fn succeeded(&self, key: &str) {
        if let Ok(mut f) = self.failures.lock() {
            f.remove(key);
        }
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

fn provider_key(provider: &Provider) -> String {
    format!(
        "Provider/{}/{}",
        provider.namespace().unwrap_or_default(),
        provider.name_any()
    )
}

fn image_key(image: &VMImage) -> String {
    format!("VMImage/{}", image.name_any())
}

/// How long to wait for the caches before trying again.
const NOT_READY_DELAY: Duration = Duration::from_secs(1);

/// One reconcile of a Provider: log in (or reuse the session), walk the
/// inventory, write the status if it changed.
pub async fn reconcile_provider<V: VSphere>(
    provider: Arc<Provider>,
    ctx: Arc<Context<V>>,
) -> Result<Action> {
    if !ctx.ready() {
        if ctx.caches.waiting_for() < caches::SYNC_GRACE {
            return Ok(Action::requeue(NOT_READY_DELAY));
        }
        // Never silent: past the grace period the Provider says why it waits.
        let outcome = caches_not_synced(&provider, &ctx.caches, &conditions::now());
        write_provider_status(&provider, &ctx, &outcome).await?;
        return Ok(Action::requeue(NOT_READY_DELAY));
    }
    let started = Instant::now();
    let result = provider_inner(&provider, &ctx).await;
    let failed = !matches!(result, Ok((_, false)));
    ctx.metrics
        .observe_reconcile("Provider", started.elapsed(), failed);
    result.map(|(action, _)| action)
}

/// The status of a Provider that cannot be reconciled because the role's
/// caches are not synced (its Secret may only be not listed yet).
fn caches_not_synced(provider: &Provider, sync: &CacheSync, now: &Time) -> ProviderOutcome {
    let mut status = provider.status.clone().unwrap_or_default();
    let pending = sync.pending();
    let message = format!(
        "not reconciled: the provider's watch caches are not synced after {}s (waiting for {}); \
         see the provider's log",
        caches::SYNC_GRACE.as_secs(),
        if pending.is_empty() {
            "the first list".to_string()
        } else {
            pending.join(", ")
        }
    );
    let observed = Observed::new(READY, Status::False, reason::CACHES_NOT_SYNCED, message);
    let transitioned = conditions::set(
        &mut status.conditions,
        observed,
        provider.metadata.generation,
        now,
    );
    ProviderOutcome {
        status,
        transitioned,
    }
}

/// Writes a Provider's status by server-side apply if it changed; on a
/// change of `Ready`, logs it (warn unless connected) and publishes an event.
async fn write_provider_status<V: VSphere>(
    provider: &Provider,
    ctx: &Context<V>,
    outcome: &ProviderOutcome,
) -> Result<()> {
    let namespace = provider.namespace().unwrap_or_default();
    let name = provider.name_any();
    if provider.status.as_ref() != Some(&outcome.status) {
        let api: Api<Provider> = Api::namespaced(ctx.client.clone(), &namespace);
        let patch =
            json!({ "apiVersion": API_VERSION, "kind": "Provider", "status": outcome.status });
        api.patch_status(
            &name,
            &PatchParams::apply(&ctx.field_manager).force(),
            &Patch::Apply(&patch),
        )
        .await?;
        ctx.metrics.status_written("Provider");
    }
    let (reason, transient) = outcome.ready_reason();
    if outcome.transitioned {
        let message = conditions::find(&outcome.status.conditions, READY)
            .map(|c| c.message.clone())
            .unwrap_or_default();
        if transient || reason != reason::CONNECTED {
            warn!(%namespace, %name, %reason, %message, "Provider not ready");
        } else {
            info!(%namespace, %name, %message, "Provider ready");
        }
        let event = Event {
            type_: if reason == reason::CONNECTED {
                EventType::Normal
            } else {
                EventType::Warning
            },
            reason: reason.to_string(),
            note: Some(crate::controller::truncate(&message, 1000)),
            action: READY.to_string(),
            secondary: None,
        };
        if let Err(e) = ctx
            .recorder
            .publish(&event, &provider.object_ref(&()))
            .await
        {
            warn!(%namespace, %name, error = %e, "could not publish event");
        }
    }
    Ok(())
}

/// The action, and whether the Provider is in a transient failure.
async fn provider_inner<V: VSphere>(
    provider: &Provider,
    ctx: &Context<V>,
) -> Result<(Action, bool)> {
    let outcome =
        provider::reconcile_provider(provider, ctx, ctx.vsphere.as_ref(), &conditions::now()).await;
    write_provider_status(provider, ctx, &outcome).await?;
    let (_, transient) = outcome.ready_reason();
    let key = provider_key(provider);
    if transient {
        Ok((Action::requeue(ctx.failed(key)), true))
    } else {
        ctx.succeeded(&key);
        Ok((Action::requeue(ctx.resync), false))
    }
}

/// One reconcile of a VMImage: its readiness on each Provider of the
/// namespace, written as this role's `perProvider` entries if they changed.
pub async fn reconcile_image<V: VSphere>(
    image: Arc<VMImage>,
    ctx: Arc<Context<V>>,
) -> Result<Action> {
    if !ctx.ready() {
        return Ok(Action::requeue(NOT_READY_DELAY));
    }
    let started = Instant::now();
    let result = image_inner(&image, &ctx).await;
    let failed = !matches!(result, Ok((_, false)));
    ctx.metrics
        .observe_reconcile("VMImage", started.elapsed(), failed);
    result.map(|(action, _)| action)
}

/// This namespace's entries of an image status, in order.
pub fn entries_of<'a>(
    status: Option<&'a VMImageStatus>,
    namespace: &str,
) -> Vec<&'a ImageProviderStatus> {
    status
        .iter()
        .flat_map(|s| &s.per_provider)
        .filter(|e| e.namespace == namespace)
        .collect()
}

async fn image_inner<V: VSphere>(image: &VMImage, ctx: &Context<V>) -> Result<(Action, bool)> {
    let mut providers = ctx.providers.state();
    providers.retain(|p| p.namespace().as_deref() == Some(ctx.namespace.as_str()));
    providers.sort_by_key(|p| p.name_any());
    let mut mine = Vec::with_capacity(providers.len());
    for p in &providers {
        mine.push(provider::image_on_provider(image, p, ctx, ctx.vsphere.as_ref()).await);
    }
    let current = entries_of(image.status.as_ref(), &ctx.namespace);
    let generation = image.metadata.generation;
    let unchanged = current.iter().copied().eq(mine.iter())
        && (mine.is_empty()
            || image.status.as_ref().and_then(|s| s.observed_generation) == generation);
    if !unchanged {
        let api: Api<VMImage> = Api::all(ctx.client.clone());
        let status = VMImageStatus {
            per_provider: mine.clone(),
            observed_generation: generation,
        };
        let patch = json!({ "apiVersion": API_VERSION, "kind": "VMImage", "status": status });
        api.patch_status(
            &image.name_any(),
            &PatchParams::apply(&ctx.field_manager).force(),
            &Patch::Apply(&patch),
        )
        .await?;
        ctx.metrics.status_written("VMImage");
    }
    // A lookup that failed or a vCenter that was not reachable: try again
    // sooner than the resync.
    let transient = mine.iter().any(|e| {
        !e.ready
            && matches!(
                e.reason.as_deref(),
                Some(reason::LOOKUP_FAILED) | Some(reason::CONNECT_FAILED)
            )
    });
    let key = image_key(image);
    if transient {
        Ok((Action::requeue(ctx.failed(key)), true))
    } else {
        ctx.succeeded(&key);
        Ok((Action::requeue(ctx.resync), false))
    }
}

pub fn provider_error_policy<V: VSphere>(
    provider: Arc<Provider>,
    error: &Error,
    ctx: Arc<Context<V>>,
) -> Action {
    let delay = ctx.failed(provider_key(&provider));
    warn!(namespace = provider.namespace().unwrap_or_default(), name = provider.name_any(), %error, ?delay, "Provider reconcile failed");
    Action::requeue(delay)
}

pub fn image_error_policy<V: VSphere>(
    image: Arc<VMImage>,
    error: &Error,
    ctx: Arc<Context<V>>,
) -> Action {
    let delay = ctx.failed(image_key(&image));
    warn!(name = image.name_any(), %error, ?delay, "VMImage reconcile failed");
    Action::requeue(delay)
}

/// What a Provider reads from a Secret or ConfigMap.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Referenced {
    Secret,
    ConfigMap,
}

/// Does `provider` read the Secret or ConfigMap `name` (credentials or CA bundle)?
pub fn references(provider: &Provider, kind: Referenced, name: &str) -> bool {
    let connection = &provider.spec.connection;
    let ca = connection.ca_bundle.as_ref();
    match kind {
        Referenced::Secret => {
            connection.credentials_ref.name == name
                || ca
                    .and_then(|c| c.secret_ref.as_ref())
                    .is_some_and(|r| r.name == name)
        }
        Referenced::ConfigMap => ca
            .and_then(|c| c.config_map_ref.as_ref())
            .is_some_and(|r| r.name == name),
    }
}

fn providers_referencing(
    providers: &Store<Provider>,
    kind: Referenced,
    name: &str,
) -> Vec<ObjectRef<Provider>> {
    providers
        .state()
        .iter()
        .filter(|p| references(p, kind, name))
        .map(|p| ObjectRef::from(p.as_ref()))
        .collect()
}

/// Parses an interval: a number with a unit (`90s`, `5m`, `1h`; several
/// parts add up, `1m30s`), or plain seconds.
pub fn parse_interval(text: &str) -> std::result::Result<Duration, String> {
    let text = text.trim();
    if let Ok(seconds) = text.parse::<u64>() {
        return Ok(Duration::from_secs(seconds));
    }
    let mut total = Duration::ZERO;
    let mut number = String::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c.is_ascii_digit() {
            number.push(c);
            continue;
        }
        let mut unit = c.to_string();
        if c == 'm' && chars.peek() == Some(&'s') {
            unit.push('s');
            chars.next();
        }
        let n: u64 = number
            .parse()
            .map_err(|_| format!("invalid interval {text:?}: expected e.g. 30s, 5m, 1h"))?;
        number.clear();
        total += match unit.as_str() {
            "ms" => Duration::from_millis(n),
            "s" => Duration::from_secs(n),
            "m" => Duration::from_secs(n * 60),
            "h" => Duration::from_secs(n * 3600),
            _ => {
                return Err(format!(
                    "invalid interval {text:?}: unknown unit {unit:?} (use ms, s, m or h)"
                ))
            }
        };
    }
    if !number.is_empty() || total.is_zero() {
        return Err(format!(
            "invalid interval {text:?}: expected e.g. 30s, 5m, 1h"
        ));
    }
    Ok(total)
}

/// Runs the role until a shutdown signal, then logs out of every vCenter.
pub async fn run<V>(
    client: Client,
    namespace: &str,
    resync: Duration,
    vsphere: Arc<V>,
    metrics: Arc<Metrics>,
) -> Result<()>
where
    V: VSphere,
{
    let config = watcher::Config::default().any_semantic();
    let (secrets, secret_writer) = reflector::store::<Secret>();
    let (config_maps, config_map_writer) = reflector::store::<ConfigMap>();
    let (providers, provider_writer) = reflector::store::<Provider>();
    let (images, image_writer) = reflector::store::<VMImage>();
    let (machines, machine_writer) = reflector::store::<VSphereMachine>();

    let secret_stream = reflector::reflector(
        secret_writer,
        watcher(
            Api::<Secret>::namespaced(client.clone(), namespace),
            config.clone(),
        ),
    )
    .default_backoff()
    .touched_objects();
    let config_map_stream = reflector::reflector(
        config_map_writer,
        watcher(
            Api::<ConfigMap>::namespaced(client.clone(), namespace),
            config.clone(),
        ),
    )
    .default_backoff()
    .touched_objects();
    // Our own status writes do not change the generation: they do not
    // trigger a reconcile (and a walk of the inventory) again.
    let provider_stream = reflector::reflector(
        provider_writer,
        watcher(
            Api::<Provider>::namespaced(client.clone(), namespace),
            config.clone(),
        ),
    )
    .default_backoff()
    .touched_objects()
    .predicate_filter(predicates::generation, Default::default());
    let image_stream = reflector::reflector(
        image_writer,
        watcher(Api::<VMImage>::all(client.clone()), config.clone()),
    )
    .default_backoff()
    .touched_objects()
    .predicate_filter(predicates::generation, Default::default());
    // VSphereMachines of every namespace (those of this namespace's Providers
    // are served): spec changes, deletion (it bumps the generation) and the
    // finalizer trigger a reconcile; our own status writes do not.
    let machine_stream = reflector::reflector(
        machine_writer,
        watcher(Api::<VSphereMachine>::all(client.clone()), config.clone()),
    )
    .default_backoff()
    .touched_objects()
    .predicate_filter(
        predicates::generation.combine(predicates::finalizers),
        Default::default(),
    );
    // Any Provider change (its status included: readiness, failure domains)
    // re-verifies the images.
    let provider_changes = watcher(
        Api::<Provider>::namespaced(client.clone(), namespace),
        config,
    )
    .default_backoff()
    .touched_objects();

    let ctx = Arc::new(Context::new(
        client,
        namespace,
        resync,
        vsphere.clone(),
        Caches {
            providers: providers.clone(),
            secrets: secrets.clone(),
            config_maps: config_maps.clone(),
            images: images.clone(),
        },
        metrics.clone(),
    ));

    {
        let ctx = ctx.clone();
        tokio::spawn(async move {
            ctx.caches.wait().await;
            ctx.metrics.set_ready();
        });
    }
    // Sessions of deleted Providers are logged out at each resync.
    let sweeper = {
        let (vsphere, providers) = (vsphere.clone(), providers.clone());
        tokio::spawn(async move {
            let mut ticker = tokio::time::interval(resync);
            loop {
                ticker.tick().await;
                if !caches::is_synced(&providers) {
                    continue;
                }
                let keep: BTreeSet<NamespacedReference> = providers
                    .state()
                    .iter()
                    .map(|p| NamespacedReference {
                        namespace: p.namespace().unwrap_or_default(),
                        name: p.name_any(),
                    })
                    .collect();
                vsphere.retain_sessions(&keep).await;
            }
        })
    };

    let (by_secret, by_config_map) = (providers.clone(), providers.clone());
    let provider_controller = Controller::for_stream(provider_stream, providers)
        .watches_stream(secret_stream, move |s: Secret| {
            providers_referencing(&by_secret, Referenced::Secret, &s.name_any())
        })
        .watches_stream(config_map_stream, move |c: ConfigMap| {
            providers_referencing(&by_config_map, Referenced::ConfigMap, &c.name_any())
        })
        .shutdown_on_signal()
        .run(reconcile_provider, provider_error_policy, ctx.clone())
        .for_each(|result| async move { log_loop_result("Provider", result) });
    let all_images = images.clone();
    let image_controller = Controller::for_stream(image_stream, images)
        .watches_stream(provider_changes, move |_: Provider| {
            all_images
                .state()
                .iter()
                .map(|i| ObjectRef::from(i.as_ref()))
                .collect::<Vec<_>>()
        })
        .shutdown_on_signal()
        .run(reconcile_image, image_error_policy, ctx.clone())
        .for_each(|result| async move { log_loop_result("VMImage", result) });
    // A VM that changed in vCenter (from the Providers' update streams: an IP
    // reported, a power change, a clone done) reconciles its VSphereMachine.
    let vm_changes = {
        let machines = machines.clone();
        let changes = vsphere.machine_changes();
        futures::stream::unfold(changes, |changes| async move {
            let mut receiver = changes?;
            loop {
                match receiver.recv().await {
                    Ok(uuid) => return Some((uuid, Some(receiver))),
                    Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => continue,
                    Err(tokio::sync::broadcast::error::RecvError::Closed) => return None,
                }
            }
        })
        .flat_map(move |uuid: String| {
            let owners: Vec<ObjectRef<VSphereMachine>> = machines
                .state()
                .iter()
                .filter(|m| {
                    m.status
                        .as_ref()
                        .and_then(|s| s.instance_uuid.as_deref())
                        .is_some_and(|u| u.eq_ignore_ascii_case(&uuid))
                })
                .map(|m| ObjectRef::from(m.as_ref()))
                .collect();
            futures::stream::iter(owners)
        })
    };
    let machine_controller = Controller::for_stream(machine_stream, machines)
        .reconcile_on(vm_changes)
        .shutdown_on_signal()
        .run(reconcile_machine, machine_error_policy, ctx.clone())
        .for_each(|result| async move { log_loop_result("VSphereMachine", result) });
    futures::join!(provider_controller, image_controller, machine_controller);
    sweeper.abort();
    info!("stopping: logging out of vCenter");
    vsphere.retain_sessions(&BTreeSet::new()).await;
    Ok(())
}

#[cfg(test)]
pub(crate) mod fixtures;
#[cfg(test)]
mod tests;
