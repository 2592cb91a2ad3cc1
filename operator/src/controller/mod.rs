//! The controller role: schedules VirtualMachines onto Providers, creates their
//! VSphereMachines and mirrors power and readiness back.
//!
//! Everything it reads comes from watch caches (one watch per kind, shared with
//! the triggers); the decision itself is the pure [`plan::plan`].

pub mod plan;

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::controller::Action;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{watcher, Controller, WatchStreamExt};
use kube::{Client, Resource, ResourceExt};
use serde_json::json;
use tracing::{info, warn};

use crate::api::{
    NamespacedReference, Provider, ScheduledPlacement, VMClass, VMImage, VSphereMachine,
    VirtualMachine,
};
use crate::conditions::Status;
use crate::health::Metrics;
use crate::schedule::{self, Load};
use crate::{Error, Result};
use plan::Cache;

/// Field manager of every write the controller makes.
pub const MANAGER: &str = "banlieue-controller";

/// The watch caches the controller reads.
pub struct Caches {
    pub classes: Store<VMClass>,
    pub images: Store<VMImage>,
    pub providers: Store<Provider>,
    pub machines: Store<VSphereMachine>,
    pub vms: Store<VirtualMachine>,
}

/// Shared state of the controller's reconciles.
pub struct Context {
    pub client: Client,
    pub recorder: Recorder,
    pub classes: Store<VMClass>,
    pub images: Store<VMImage>,
    pub providers: Store<Provider>,
    pub machines: Store<VSphereMachine>,
    pub vms: Store<VirtualMachine>,
    /// Placements this process made that the caches may not show yet, so two
    /// VMs scheduled back to back still spread.
    pub recent: Mutex<BTreeMap<NamespacedReference, ScheduledPlacement>>,
    /// Held from a scheduling decision until its VSphereMachine exists: the
    /// controller reconciles VMs concurrently, and two decisions made on the
    /// same load would not spread.
    pub scheduling: tokio::sync::Mutex<()>,
    /// Consecutive failures per object, for exponential backoff.
    pub failures: Mutex<HashMap<ObjectRef<VirtualMachine>, u32>>,
    pub metrics: Arc<Metrics>,
}

impl Context {
    pub fn new(client: Client, caches: Caches, metrics: Arc<Metrics>) -> Self {
        let reporter = Reporter {
            controller: MANAGER.to_string(),
            instance: std::env::var("POD_NAME").ok(),
        };
        let Caches {
            classes,
            images,
            providers,
            machines,
            vms,
        } = caches;
        Context {
            recorder: Recorder::new(client.clone(), reporter),
            client,
            classes,
            images,
            providers,
            machines,
            vms,
            recent: Mutex::default(),
            scheduling: tokio::sync::Mutex::new(()),
            failures: Mutex::default(),
            metrics,
        }
    }
}

impl Cache for Context {
    fn vm_class(&self, name: &str) -> Option<Arc<VMClass>> {
        self.classes.get(&ObjectRef::new(name))
    }

    fn vm_image(&self, name: &str) -> Option<Arc<VMImage>> {
        self.images.get(&ObjectRef::new(name))
    }

    fn providers(&self) -> Vec<Arc<Provider>> {
        self.providers.state()
    }

    fn vsphere_machine(&self, namespace: &str, name: &str) -> Option<Arc<VSphereMachine>> {
        self.machines.get(&ObjectRef::new(name).within(namespace))
    }

    fn load(&self) -> Load {
        let vms = self.vms.state();
        let machines = self.machines.state();
        let recent = self.recent.lock().map(|r| r.clone()).unwrap_or_default();
        let key = |m: &kube::api::ObjectMeta| NamespacedReference {
            namespace: m.namespace.clone().unwrap_or_default(),
            name: m.name.clone().unwrap_or_default(),
        };
        let from_machines: Vec<_> = machines
            .iter()
            .map(|m| (key(&m.metadata), crate::machine::placement_of(m)))
            .collect();
        let placements = vms
            .iter()
            .filter_map(|vm| vm.scheduled().map(|p| (key(&vm.metadata), p)))
            .chain(from_machines.iter().map(|(k, p)| (k.clone(), p)))
            .chain(recent.iter().map(|(k, p)| (k.clone(), p)));
        schedule::load_of(placements)
    }
}

/// One reconcile of a VirtualMachine: plan, then create the VSphereMachine,
/// then write the status, only what changed.
pub async fn reconcile(vm: Arc<VirtualMachine>, ctx: Arc<Context>) -> Result<Action> {
    let started = std::time::Instant::now();
    let result = reconcile_inner(&vm, &ctx).await;
    ctx.metrics
        .observe_reconcile("VirtualMachine", started.elapsed(), result.is_err());
    if result.is_ok() {
        if let Ok(mut failures) = ctx.failures.lock() {
            failures.remove(&ObjectRef::from(vm.as_ref()));
        }
    }
    result
}

async fn reconcile_inner(vm: &VirtualMachine, ctx: &Context) -> Result<Action> {
    let namespace = vm.namespace().unwrap_or_default();
    let name = vm.name_any();
    let scheduling = ctx.scheduling.lock().await;
    let plan = plan::plan(vm, ctx, &crate::conditions::now());
    let machines: Api<VSphereMachine> = Api::namespaced(ctx.client.clone(), &namespace);

    if let Some(machine) = &plan.create {
        let params = PostParams {
            field_manager: Some(MANAGER.to_string()),
            ..Default::default()
        };
        match machines.create(&params, machine).await {
            Ok(_) => info!(%namespace, %name, "created VSphereMachine"),
            // The cache is behind: the machine's own watch event brings it and
            // triggers the next reconcile, which adopts it.
            Err(kube::Error::Api(e)) if e.code == 409 => {
                info!(%namespace, %name, "VSphereMachine already exists; waiting for the cache");
                return Ok(Action::requeue(Duration::from_secs(5)));
            }
            Err(e) => return Err(e.into()),
        }
        if let (Some(placement), Ok(mut recent)) = (&plan.status.scheduled, ctx.recent.lock()) {
            recent.insert(
                NamespacedReference {
                    namespace: namespace.clone(),
                    name: name.clone(),
                },
                placement.clone(),
            );
        }
    }
    drop(scheduling);
    if let Some(power) = plan.set_power {
        let patch = json!({ "spec": { "desiredPowerState": power } });
        machines
            .patch(&name, &PatchParams::apply(MANAGER), &Patch::Merge(&patch))
            .await?;
    }
    if vm.status.as_ref() != Some(&plan.status) {
        let api: Api<VirtualMachine> = Api::namespaced(ctx.client.clone(), &namespace);
        let patch = json!({
            "apiVersion": crate::api::API_VERSION,
            "kind": "VirtualMachine",
            "status": plan.status,
        });
        api.patch_status(
            &name,
            &PatchParams::apply(MANAGER).force(),
            &Patch::Apply(&patch),
        )
        .await?;
        ctx.metrics.status_written("VirtualMachine");
    }
    // Once the status names the placement, the cache of recent ones is not needed.
    if ctx
        .vms
        .get(&ObjectRef::from(vm))
        .is_some_and(|v| v.scheduled().is_some())
    {
        if let Ok(mut recent) = ctx.recent.lock() {
            recent.remove(&NamespacedReference {
                namespace: namespace.clone(),
                name: name.clone(),
            });
        }
    }
    for t in &plan.transitions {
        let event = Event {
            type_: if t.status == Status::False {
                EventType::Warning
            } else {
                EventType::Normal
            },
            reason: t.reason.clone(),
            note: Some(truncate(&t.message, 1000)),
            action: t.type_.to_string(),
            secondary: None,
        };
        if let Err(e) = ctx.recorder.publish(&event, &vm.object_ref(&())).await {
            warn!(%namespace, %name, error = %e, "could not publish event");
        }
    }
    // Everything that can change the plan is watched: wait for it.
    Ok(Action::await_change())
}

/// At most `max` bytes of `s`, cut on a character boundary (event notes are limited to 1 kB).
pub(crate) fn truncate(s: &str, max: usize) -> String {
    let mut end = s.len().min(max);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s[..end].to_string()
}

/// Logs what a `Controller` loop yields besides successes: a queue or runner error
/// at warn level; a failed reconcile at debug (its error policy warned already);
/// a trigger for an object already deleted at debug (expected after a deletion).
pub(crate) fn log_loop_result<T, E, Q>(
    kind: &str,
    result: std::result::Result<T, kube::runtime::controller::Error<E, Q>>,
) where
    E: std::error::Error,
    Q: std::error::Error,
{
    use kube::runtime::controller::Error as LoopError;
    match result {
        Ok(_) => {}
        Err(e @ (LoopError::ObjectNotFound(_) | LoopError::ReconcilerFailed(..))) => {
            tracing::debug!(kind, error = %e, "reconcile loop");
        }
        Err(e) => warn!(kind, error = %e, "reconcile loop"),
    }
}

/// Per-object exponential backoff: 5s, 10s, 20s ... up to 5 minutes.
pub fn error_policy(vm: Arc<VirtualMachine>, error: &Error, ctx: Arc<Context>) -> Action {
    let failures = ctx
        .failures
        .lock()
        .map(|mut f| {
            let n = f.entry(ObjectRef::from(vm.as_ref())).or_insert(0);
            *n = n.saturating_add(1);
            *n
        })
        .unwrap_or(1);
    let delay = backoff(failures);
    warn!(namespace = vm.namespace().unwrap_or_default(), name = vm.name_any(), %error, ?delay, "reconcile failed");
    Action::requeue(delay)
}

pub fn backoff(failures: u32) -> Duration {
    let exponent = failures.saturating_sub(1).min(6);
    Duration::from_secs(5 * (1u64 << exponent)).min(Duration::from_secs(300))
}

/// Runs the controller until a shutdown signal.
pub async fn run(client: Client, metrics: Arc<Metrics>) -> Result<()> {
    let config = watcher::Config::default().any_semantic();
    let (classes, class_writer) = reflector::store::<VMClass>();
    let (images, image_writer) = reflector::store::<VMImage>();
    let (providers, provider_writer) = reflector::store::<Provider>();
    let (machines, machine_writer) = reflector::store::<VSphereMachine>();

    let class_stream = reflector::reflector(
        class_writer,
        watcher(Api::<VMClass>::all(client.clone()), config.clone()),
    )
    .default_backoff()
    .touched_objects();
    let image_stream = reflector::reflector(
        image_writer,
        watcher(Api::<VMImage>::all(client.clone()), config.clone()),
    )
    .default_backoff()
    .touched_objects();
    let provider_stream = reflector::reflector(
        provider_writer,
        watcher(Api::<Provider>::all(client.clone()), config.clone()),
    )
    .default_backoff()
    .touched_objects();
    let machine_stream = reflector::reflector(
        machine_writer,
        watcher(Api::<VSphereMachine>::all(client.clone()), config.clone()),
    )
    .default_backoff()
    .touched_objects();

    let controller = Controller::new(Api::<VirtualMachine>::all(client.clone()), config);
    let vms = controller.store();
    let ctx = Arc::new(Context::new(
        client,
        Caches {
            classes: classes.clone(),
            images: images.clone(),
            providers: providers.clone(),
            machines: machines.clone(),
            vms: vms.clone(),
        },
        metrics.clone(),
    ));

    let (by_class, by_image, unscheduled) = (vms.clone(), vms.clone(), vms.clone());
    let sync = crate::caches::CacheSync::new()
        .with("VMClasses", classes.clone())
        .with("VMImages", images.clone())
        .with("Providers", providers.clone())
        .with("VSphereMachines", machines.clone())
        .with("VirtualMachines", vms.clone());
    tokio::spawn(async move {
        sync.wait().await;
        metrics.set_ready();
    });

    controller
        .owns_stream(machine_stream)
        .watches_stream(class_stream, move |class: VMClass| {
            referencing(&by_class, |vm| vm.spec.class_ref.name == class.name_any())
        })
        .watches_stream(image_stream, move |image: VMImage| {
            referencing(&by_image, |vm| vm.spec.image_ref.name == image.name_any())
        })
        // A Provider change (readiness, failure domains) can make a waiting VM schedulable.
        .watches_stream(provider_stream, move |_: Provider| {
            referencing(&unscheduled, |vm| vm.scheduled().is_none())
        })
        .shutdown_on_signal()
        .run(reconcile, error_policy, ctx)
        .for_each(|result| async move { log_loop_result("VirtualMachine", result) })
        .await;
    Ok(())
}

fn referencing(
    vms: &Store<VirtualMachine>,
    keep: impl Fn(&VirtualMachine) -> bool,
) -> Vec<ObjectRef<VirtualMachine>> {
    vms.state()
        .iter()
        .filter(|vm| keep(vm))
        .map(|vm| ObjectRef::from(vm.as_ref()))
        .collect()
}

#[cfg(test)]
mod fixtures;
#[cfg(test)]
mod tests;
