//! The VirtualMachine controller (the controller role's one kind): schedules
//! VirtualMachines onto Providers, creates their VSphereMachines and mirrors
//! power and readiness back.
//!
//! Everything it reads comes from watch caches (one watch per kind, shared with
//! the triggers); the decision itself is the pure [`plan::plan`], which
//! [`schedule`] (placement) and [`build`] (the VSphereMachine) serve.

pub mod build;
pub mod plan;
pub mod schedule;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::controller::Action;
use kube::runtime::events::{Recorder, Reporter};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Client, Resource, ResourceExt};
use serde_json::json;
use tracing::{info, warn};

use super::{apply_status, key, publish, Backoff};
use crate::api::{
    NamespacedReference, Provider, ScheduledPlacement, VMClass, VMImage, VSphereMachine,
    VirtualMachine,
};
use crate::conditions::Status;
use crate::health::Metrics;
use crate::{Error, Result};
use plan::Cache;
use schedule::Load;

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
    /// Consecutive failures per VirtualMachine.
    pub failures: Backoff,
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
            failures: Backoff::default(),
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
            .map(|m| (key(&m.metadata), build::placement_of(m)))
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
    ctx.metrics.observe_reconcile(
        "VirtualMachine",
        started.elapsed(),
        result.as_ref().err().map(Error::label),
    );
    if result.is_ok() {
        ctx.failures.succeeded(&key(vm.as_ref()));
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
    if let Some(update) = &plan.update {
        machines
            .patch(
                &name,
                &PatchParams::apply(MANAGER),
                &Patch::Merge(&update.patch()),
            )
            .await?;
        info!(%namespace, %name, cpus = update.cpus, memory_mib = update.memory_mib, "updated VSphereMachine");
    }
    if vm.status.as_ref() != Some(&plan.status) {
        let api: Api<VirtualMachine> = Api::namespaced(ctx.client.clone(), &namespace);
        apply_status(&api, vm, MANAGER, &plan.status).await?;
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
        publish(
            &ctx.recorder,
            &vm.object_ref(&()),
            t.status == Status::False,
            &t.reason,
            &t.message,
            t.type_,
        )
        .await;
    }
    // Everything that can change the plan is watched: wait for it.
    Ok(Action::await_change())
}

/// Per-object exponential backoff: 5s, 10s, 20s ... up to 5 minutes.
pub fn error_policy(vm: Arc<VirtualMachine>, error: &Error, ctx: Arc<Context>) -> Action {
    let delay = ctx.failures.failed(key(vm.as_ref()));
    warn!(namespace = vm.namespace().unwrap_or_default(), name = vm.name_any(), %error, error_kind = error.label(), ?delay, "reconcile failed");
    Action::requeue(delay)
}

#[cfg(test)]
mod tests;
