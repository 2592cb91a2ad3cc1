//! The provider role's VSphereMachine controller: the finalizer, the
//! lifecycle [`driver`](super::driver) on the Provider's session, status by
//! server-side apply (only when changed, the task reference before waiting),
//! an event on each lifecycle step.

use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::runtime::events::{Event, EventType, Recorder};
use kube::runtime::finalizer::{finalizer, Error as FinalizerError, Event as FinalizerEvent};
use kube::runtime::reflector::ObjectRef;
use kube::{Resource, ResourceExt};
use serde_json::json;
use tracing::{info, warn};

use super::driver::{self, Hooks, Outcome};
use super::FINALIZER;
use crate::api::{VSphereMachine, API_VERSION};
use crate::provider::{self, Objects};
use crate::provider_role::Context;
use crate::vsphere::VSphere;
use crate::vsphere::{self, Machines};
use crate::{Error, Result};

/// How often a machine waiting on its guest (an IP) is looked at again when
/// no update arrives first.
pub const WAITING_RECHECK: Duration = Duration::from_secs(30);

/// Status writes and events of one reconcile.
pub struct KubeHooks {
    pub api: Api<VSphereMachine>,
    pub field_manager: String,
    pub recorder: Recorder,
    pub metrics: Arc<crate::health::Metrics>,
}

impl Hooks for KubeHooks {
    async fn persist(&mut self, machine: &VSphereMachine) -> Result<(), vsphere::Error> {
        let patch = json!({ "apiVersion": API_VERSION, "kind": "VSphereMachine", "status": machine.status });
        self.api
            .patch_status(
                &machine.name_any(),
                &PatchParams::apply(&self.field_manager).force(),
                &Patch::Apply(&patch),
            )
            .await
            .map_err(|e| vsphere::Error::operation(format!("writing the status: {e}")))?;
        self.metrics.status_written("VSphereMachine");
        Ok(())
    }

    fn tasks_in_flight(&mut self, delta: i64) {
        self.metrics.tasks_in_flight(delta);
    }

    async fn event(&mut self, machine: &VSphereMachine, reason: &str, message: &str) {
        let warning = reason == super::step::reason::FAILED;
        let event = Event {
            type_: if warning {
                EventType::Warning
            } else {
                EventType::Normal
            },
            reason: reason.to_string(),
            note: Some(crate::controller::truncate(message, 1000)),
            action: "Lifecycle".to_string(),
            secondary: None,
        };
        if let Err(e) = self
            .recorder
            .publish(&event, &machine.object_ref(&()))
            .await
        {
            warn!(name = %machine.name_any(), error = %e, "could not publish event");
        }
    }
}

fn machine_key(machine: &VSphereMachine) -> String {
    format!(
        "VSphereMachine/{}/{}",
        machine.namespace().unwrap_or_default(),
        machine.name_any()
    )
}

/// The cloud-config Secrets of a machine, from the Provider's namespace.
pub fn cloud_config_secrets(
    machine: &VSphereMachine,
    objects: &impl Objects,
) -> Result<Vec<Secret>, String> {
    let namespace = &machine.spec.provider_ref.namespace;
    machine
        .spec
        .cloud_config_secret_refs
        .iter()
        .map(|r| {
            objects
                .secret(namespace, &r.name)
                .ok_or_else(|| format!("cloud-config Secret {namespace}/{} not found", r.name))
        })
        .collect()
}

/// One reconcile of a VSphereMachine served by this role (its Provider is
/// in the role's namespace).
pub async fn reconcile_machine<V>(
    machine: Arc<VSphereMachine>,
    ctx: Arc<Context<V>>,
) -> Result<Action>
where
    V: VSphere,
{
    if machine.spec.provider_ref.namespace != ctx.namespace {
        return Ok(Action::await_change());
    }
    if !ctx.caches.is_synced() {
        return Ok(Action::requeue(Duration::from_secs(1)));
    }
    let started = Instant::now();
    let namespace = machine.namespace().unwrap_or_default();
    let api: Api<VSphereMachine> = Api::namespaced(ctx.client.clone(), &namespace);
    let result = finalizer(&api, FINALIZER, machine.clone(), |event| async {
        match event {
            FinalizerEvent::Apply(m) => lifecycle(&m, false, &ctx, &api).await,
            FinalizerEvent::Cleanup(m) => lifecycle(&m, true, &ctx, &api).await,
        }
    })
    .await;
    // The finalizer removed by a reconcile that ran just before this one (the
    // object is gone): nothing is left to do.
    let result = match result {
        Err(FinalizerError::RemoveFinalizer(kube::Error::Api(e))) if e.code == 404 => {
            Ok(Action::await_change())
        }
        other => other,
    };
    let failed = result.is_err();
    ctx.metrics
        .observe_reconcile("VSphereMachine", started.elapsed(), failed);
    result.map_err(|e| {
        Error::Invalid(format!(
            "VSphereMachine {namespace}/{}: {e}",
            machine.name_any()
        ))
    })
}

async fn lifecycle<V>(
    machine: &VSphereMachine,
    deleting: bool,
    ctx: &Context<V>,
    api: &Api<VSphereMachine>,
) -> Result<Action, vsphere::Error>
where
    V: VSphere,
{
    let key = machine_key(machine);
    let provider_ref = &machine.spec.provider_ref;
    let provider = ctx
        .providers
        .get(&ObjectRef::new(&provider_ref.name).within(&provider_ref.namespace))
        .ok_or_else(|| vsphere::Error::operation(format!("Provider {provider_ref} not found")))?;
    let params = provider::connect_params(&provider, ctx)
        .map_err(|(reason, message)| vsphere::Error::operation(format!("{reason}: {message}")))?;
    let session = ctx.vsphere.connect(&params).await?;
    let secrets = if deleting {
        Vec::new()
    } else {
        cloud_config_secrets(machine, ctx).map_err(vsphere::Error::operation)?
    };
    let mut hooks = KubeHooks {
        api: api.clone(),
        field_manager: ctx.field_manager.clone(),
        recorder: ctx.recorder.clone(),
        metrics: ctx.metrics.clone(),
    };
    let mut machine = machine.clone();
    let outcome = driver::reconcile(
        &mut machine,
        deleting,
        &secrets,
        &session,
        &mut hooks,
        &driver::Options::default(),
    )
    .await?;
    info!(name = %key, ?outcome, "VSphereMachine reconciled");
    if deleting {
        // Anything but a confirmed absence keeps the finalizer (an error here does).
        return match outcome {
            Outcome::Released => Ok(Action::await_change()),
            other => Err(vsphere::Error::operation(format!(
                "the VM is not confirmed gone yet: {other:?}"
            ))),
        };
    }
    Ok(match outcome {
        Outcome::Ready => {
            ctx.succeeded(&key);
            Action::requeue(ctx.resync)
        }
        // With the update stream, the VM's change (an IP) triggers the next
        // reconcile; without it, look again soon.
        Outcome::Waiting(_) if session.cached() => Action::requeue(ctx.resync),
        Outcome::Waiting(_) => Action::requeue(WAITING_RECHECK),
        Outcome::Failed(_) | Outcome::Released => Action::requeue(ctx.failed(key)),
    })
}

pub fn machine_error_policy<V: VSphere>(
    machine: Arc<VSphereMachine>,
    error: &Error,
    ctx: Arc<Context<V>>,
) -> Action {
    let delay = ctx.failed(machine_key(&machine));
    warn!(namespace = machine.namespace().unwrap_or_default(), name = machine.name_any(), %error, ?delay, "VSphereMachine reconcile failed");
    Action::requeue(delay)
}
