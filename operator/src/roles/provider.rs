//! `banlieue provider vsphere --namespace NS`: one `Controller` per kind the
//! provider role reconciles (Provider, VMImage, VSphereMachine, VMSnapshot,
//! and the built-in IP pool's allocator on IPAddressClaims), the
//! triggers between them (a Provider change, a VM changed in vCenter), and the sweeper that logs out of deleted Providers'
//! sessions. Wiring only: the decisions are in [`crate::controllers`].

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use kube::api::Api;
use kube::runtime::reflector::{self, ObjectRef};
use kube::runtime::utils::Predicate;
use kube::runtime::{predicates, watcher, Controller, WatchStreamExt};
use kube::{Client, ResourceExt};
use tracing::info;

use super::{log_loop_result, Background};
use crate::api::{
    IPAddressClaim, IPPool, NamespacedReference, Provider, VMImage, VMSnapshot, VSphereMachine,
    BUILTIN_POOL_KIND,
};
use crate::caches;
use crate::controllers::context::{Caches, Context};
use crate::controllers::ippool::{
    claim_error_policy, live_claims, reconcile_claim, release, Allocator,
};
use crate::controllers::provider::{provider_error_policy, reconcile_provider};
use crate::controllers::vmimage::{image_error_policy, reconcile_image};
use crate::controllers::vmsnapshot::{reconcile_snapshot, snapshot_error_policy};
use crate::controllers::vspheremachine::{machine_error_policy, reconcile_machine};
use crate::health::Metrics;
use crate::vsphere::VSphere;
use crate::Result;

/// The provider role's Lease (leader election), in its namespace.
pub const LEASE: &str = "banlieue-provider-vsphere";

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
    run_scoped(client, namespace, None, resync, vsphere, metrics).await
}

/// [`run`], serving only the Provider `scope` names when it is set (a
/// provider workload, `--provider`): its Provider watch is that one object.
pub async fn run_scoped<V>(
    client: Client,
    namespace: &str,
    scope: Option<&str>,
    resync: Duration,
    vsphere: Arc<V>,
    metrics: Arc<Metrics>,
) -> Result<()>
where
    V: VSphere,
{
    let _logout = LogoutOnDrop(vsphere.clone());
    let config = watcher::Config::default().any_semantic();
    let provider_config = match scope {
        Some(name) => config.clone().fields(&format!("metadata.name={name}")),
        None => config.clone(),
    };
    let (providers, provider_writer) = reflector::store::<Provider>();
    let (images, image_writer) = reflector::store::<VMImage>();
    let (machines, machine_writer) = reflector::store::<VSphereMachine>();

    // Our own status writes do not change the generation: they do not
    // trigger a reconcile (and a walk of the inventory) again.
    let provider_stream = reflector::reflector(
        provider_writer,
        watcher(
            Api::<Provider>::namespaced(client.clone(), namespace),
            provider_config.clone(),
        ),
    )
    .default_backoff()
    .touched_objects()
    .predicate_filter(predicates::generation, Default::default())
    // The field selector already keeps one Provider; an API server that
    // ignored it would still not get the others reconciled.
    .filter({
        let scope = scope.map(String::from);
        move |p| {
            let keep = scope
                .as_ref()
                .is_none_or(|name| p.as_ref().is_ok_and(|p| p.name_any() == *name));
            std::future::ready(keep)
        }
    });
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
        provider_config,
    )
    .default_backoff()
    .touched_objects();

    let client_for_allocator = client.clone();
    let ctx = Context::new(
        client,
        namespace,
        resync,
        vsphere.clone(),
        Caches {
            providers: providers.clone(),
            machines: machines.clone(),
            images: images.clone(),
        },
        metrics.clone(),
    );
    let ctx = Arc::new(match scope {
        Some(name) => ctx.scoped_to(name),
        None => ctx,
    });

    let _ready = {
        let ctx = ctx.clone();
        Background::spawn(async move {
            ctx.caches.wait().await;
            ctx.metrics.set_ready();
        })
    };
    // Sessions of deleted Providers are logged out at each resync.
    let sweeper = {
        let (vsphere, providers) = (vsphere.clone(), providers.clone());
        Background::spawn(async move {
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

    // No watch of Secrets or ConfigMaps: each reconcile reads the ones its
    // Provider names, by name.
    let provider_controller = Controller::for_stream(provider_stream, providers)
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
    // VMSnapshots of every namespace (those of this namespace's Providers'
    // machines are served): spec changes (a revert request), deletion and
    // the finalizer trigger a reconcile; our own status writes do not.
    let (snapshots, snapshot_writer) = reflector::store::<VMSnapshot>();
    let snapshot_stream = reflector::reflector(
        snapshot_writer,
        watcher(
            Api::<VMSnapshot>::all(client_for_allocator.clone()),
            watcher::Config::default().any_semantic(),
        ),
    )
    .default_backoff()
    .touched_objects()
    .predicate_filter(
        predicates::generation.combine(predicates::finalizers),
        Default::default(),
    );
    let snapshot_controller = Controller::for_stream(snapshot_stream, snapshots)
        .shutdown_on_signal()
        .run(reconcile_snapshot, snapshot_error_policy, ctx.clone())
        .for_each(|result| async move { log_loop_result("VMSnapshot", result) });
    let allocator = allocator(client_for_allocator, namespace, resync);
    futures::join!(
        provider_controller,
        image_controller,
        machine_controller,
        snapshot_controller,
        allocator
    );
    drop(sweeper);
    info!("stopping: logging out of vCenter");
    vsphere.retain_sessions(&BTreeSet::new()).await;
    Ok(())
}

/// Logs out of every vCenter session when the role's future is dropped
/// (leadership lost): a standby holds no session against vCenter's limit.
struct LogoutOnDrop<V: VSphere>(Arc<V>);

impl<V: VSphere> Drop for LogoutOnDrop<V> {
    fn drop(&mut self) {
        let vsphere = self.0.clone();
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move { vsphere.retain_sessions(&BTreeSet::new()).await });
        }
    }
}

/// The built-in IP pool's allocator: binds the namespace's claims on
/// `banlieue.io` `IPPool` (a pool change looks at its claims again), and at
/// each resync releases the allocations of claims that are gone. Without
/// the Cluster API IPAM CRDs (`deploy/crds/ipam/`) its watch fails and is
/// retried with backoff (logged); the other controllers are not affected.
async fn allocator(client: Client, namespace: &str, resync: Duration) {
    let config = watcher::Config::default().any_semantic();
    let claims_api = Api::<IPAddressClaim>::namespaced(client.clone(), namespace);
    let pools_api = Api::<IPPool>::namespaced(client.clone(), namespace);
    let controller = Controller::new(claims_api, config.clone());
    let claims = controller.store();
    let (pools, pool_writer) = reflector::store::<IPPool>();
    let pool_stream = reflector::reflector(pool_writer, watcher(pools_api, config))
        .default_backoff()
        .touched_objects();
    let by_pool = claims.clone();
    let ctx = Arc::new(Allocator {
        client: client.clone(),
        claims: claims.clone(),
        backoff: Default::default(),
    });
    let sweeper = {
        let (pools, claims, namespace) = (pools.clone(), claims.clone(), namespace.to_string());
        Background::spawn(async move {
            let mut ticker = tokio::time::interval(resync);
            loop {
                ticker.tick().await;
                if !(caches::is_synced(&pools) && caches::is_synced(&claims)) {
                    continue;
                }
                for pool in pools.state() {
                    let live = live_claims(&claims, &namespace, &pool.name_any());
                    if let Err(error) = release(&client, &pool, &live).await {
                        tracing::warn!(pool = %pool.name_any(), %error, "releasing allocations failed");
                    }
                }
            }
        })
    };
    controller
        .watches_stream(pool_stream, move |pool: IPPool| {
            by_pool
                .state()
                .iter()
                .filter(|c| {
                    c.spec.pool_ref.name == pool.name_any()
                        && c.spec.pool_ref.kind == BUILTIN_POOL_KIND
                })
                .map(|c| ObjectRef::from(c.as_ref()))
                .collect::<Vec<_>>()
        })
        .shutdown_on_signal()
        .run(reconcile_claim, claim_error_policy, ctx)
        .for_each(|result| async move { log_loop_result("IPAddressClaim", result) })
        .await;
    drop(sweeper);
}
