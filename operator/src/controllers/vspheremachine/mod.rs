//! The VSphereMachine controller (provider role): the VM lifecycle (clone,
//! reconfigure, power, status mirror, deletion) without ever making a second
//! VM or leaking one. This file is the finalizer, status by server-side apply
//! (only when changed, the task reference before waiting) and an event on
//! each lifecycle step; the work is in the modules below.
//!
//! - [`step`]: the pure core (machine + what vCenter says -> next action + status);
//! - [`driver`]: performs the actions through [`Machines`](crate::vsphere::Machines),
//!   writing the status (a clone's task reference first of all) through
//!   [`driver::Hooks`];
//! - [`request`]: the clone a machine asks for; [`identity`]: its VM's name,
//!   instance UUID and MACs; [`guestinfo`]: its cloud-init data;
//!   [`ipclaims`]: its IP pool NICs as Cluster API claims, bound before the clone;
//! - `check --apply` runs the same driver with in-memory hooks.
//!
//! A VM is known by its instance UUID ([`identity::instance_uuid`]), set at
//! clone time and looked up before any clone; its name is unique in its
//! folder, so even a clone request lost in flight and sent again fails with
//! `DuplicateName` instead of making a twin.

pub mod driver;
pub mod guestinfo;
pub mod identity;
pub mod ipclaims;
pub mod request;
pub mod step;

use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Secret;
use kube::api::Api;
use kube::runtime::controller::Action;
use kube::runtime::events::Recorder;
use kube::runtime::finalizer::{finalizer, Error as FinalizerError, Event as FinalizerEvent};
use kube::runtime::reflector::ObjectRef;
use kube::{Resource, ResourceExt};
use tracing::{info, warn};

use super::context::Context;
use super::provider::readiness::{self, Objects};
use super::{apply_status, key, publish};
use crate::api::VSphereMachine;
use crate::health::Metrics;
use crate::vsphere::{Machines, VSphere};
use crate::{Error, Result};
use driver::{Hooks, Outcome};

/// The finalizer that keeps a VSphereMachine until its VM is confirmed gone.
pub const FINALIZER: &str = "banlieue.io/vm-cleanup";

/// How often a machine waiting on its guest (an IP) is looked at again when
/// no update arrives first.
pub const WAITING_RECHECK: Duration = Duration::from_secs(30);

/// Status writes and events of one reconcile.
pub struct KubeHooks {
    pub api: Api<VSphereMachine>,
    pub field_manager: String,
    pub recorder: Recorder,
    pub metrics: Arc<Metrics>,
}

impl Hooks for KubeHooks {
    async fn persist(&mut self, machine: &VSphereMachine) -> Result<()> {
        apply_status(&self.api, machine, &self.field_manager, &machine.status)
            .await
            .map_err(|e| Error::StatusWrite(e.to_string()))?;
        self.metrics.status_written("VSphereMachine");
        Ok(())
    }

    fn tasks_in_flight(&mut self, delta: i64) {
        self.metrics.tasks_in_flight(delta);
    }

    async fn event(&mut self, machine: &VSphereMachine, reason: &str, message: &str) {
        publish(
            &self.recorder,
            &machine.object_ref(&()),
            [
                step::reason::FAILED,
                readiness::reason::VCENTER_UNRESPONSIVE,
                step::reason::POOL_EXHAUSTED,
                step::reason::POOL_CHANGED,
                step::reason::POOL_REMOVED,
            ]
            .contains(&reason),
            reason,
            message,
            "Lifecycle",
        )
        .await;
    }
}

/// The cloud-config Secrets of a machine, in merge order: the VMImage's
/// from the Provider's namespace, then the VirtualMachine's own from the
/// machine's namespace.
pub fn cloud_config_secrets(
    machine: &VSphereMachine,
    objects: &impl Objects,
) -> Result<Vec<Secret>, String> {
    let provider_namespace = machine.spec.provider_ref.namespace.as_str();
    let own_namespace = machine.metadata.namespace.as_deref().unwrap_or_default();
    let image = machine
        .spec
        .cloud_config_secret_refs
        .iter()
        .map(|r| (provider_namespace, r));
    let own = machine
        .spec
        .machine_cloud_config_secret_refs
        .iter()
        .map(|r| (own_namespace, r));
    image
        .chain(own)
        .map(|(namespace, r)| {
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
    if !ctx.serves(&machine.spec.provider_ref) {
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
    let result = result.map_err(|e| match e {
        FinalizerError::ApplyFailed(e) | FinalizerError::CleanupFailed(e) => e,
        other => Error::Finalizer(other.to_string()),
    });
    ctx.metrics.observe_reconcile(
        "VSphereMachine",
        started.elapsed(),
        result.as_ref().err().map(Error::label),
    );
    result
}

async fn lifecycle<V>(
    machine: &VSphereMachine,
    deleting: bool,
    ctx: &Context<V>,
    api: &Api<VSphereMachine>,
) -> Result<Action>
where
    V: VSphere,
{
    let key = key(machine);
    let provider_ref = &machine.spec.provider_ref;
    let mut hooks = KubeHooks {
        api: api.clone(),
        field_manager: ctx.field_manager.clone(),
        recorder: ctx.recorder.clone(),
        metrics: ctx.metrics.clone(),
    };
    let mut machine = machine.clone();
    // A Provider keeps its finalizer while machines use it; one gone all the
    // same (its finalizer removed by hand) leaves the machine unable to reach
    // vCenter: said in its status, with the way out.
    let Some(provider) = ctx
        .providers
        .get(&ObjectRef::new(&provider_ref.name).within(&provider_ref.namespace))
    else {
        let error = Error::ProviderNotFound(provider_ref.clone());
        driver::report_error(&mut machine, &mut hooks, &error).await;
        return Err(error);
    };
    // IP pool NICs: their claims first, bound before anything is cloned; the
    // clone then asks for the bound addresses as static ones. A claim the
    // spec no longer asks for is released, or kept and said so once a VM
    // may have its address (see ipclaims::ensure_bound).
    if !deleting {
        let claims = ipclaims::ensure_bound(&ctx.client, &machine, &provider_ref.namespace).await?;
        let (changed, transitioned) = ipclaims::set_drift(&mut machine, claims.drift.as_ref());
        if changed {
            hooks.persist(&machine).await?;
        }
        if let (true, Some((reason, message))) = (transitioned, &claims.drift) {
            hooks.event(&machine, reason, message).await;
        }
        match claims.binding {
            ipclaims::Binding::Waiting { reason, message } => {
                driver::report_waiting(&mut machine, &mut hooks, reason, message).await?;
                return Ok(Action::requeue(ctx.failed(key)));
            }
            ipclaims::Binding::Bound(bound) => {
                if ipclaims::has_pool_nics(&machine) {
                    if let Some(bound) = ipclaims::bound_machine(&machine, &bound) {
                        machine = bound;
                    }
                }
            }
        }
    }
    // The Provider's Secrets and the machine's cloud-config Secrets, read by
    // name now: a rotated one is used by this reconcile.
    let (mut secrets, config_maps) = readiness::referenced(&provider);
    if !deleting {
        secrets.extend(
            machine
                .spec
                .cloud_config_secret_refs
                .iter()
                .map(|r| r.name.clone()),
        );
    }
    let mut fetched = ctx
        .fetch(&provider_ref.namespace, &secrets, &config_maps)
        .await?;
    if !deleting && !machine.spec.machine_cloud_config_secret_refs.is_empty() {
        let names: Vec<String> = machine
            .spec
            .machine_cloud_config_secret_refs
            .iter()
            .map(|r| r.name.clone())
            .collect();
        let namespace = machine.metadata.namespace.clone().unwrap_or_default();
        match ctx.fetch_machine_secrets(&namespace, &names).await {
            Ok(found) => fetched.secrets.extend(found),
            Err(error) => {
                driver::report_error(&mut machine, &mut hooks, &error).await;
                return Err(error);
            }
        }
    }
    let params =
        readiness::connect_params(&provider, &fetched).map_err(|f| Error::ProviderUnusable {
            reason: f.reason,
            message: f.message,
        })?;
    // vCenter not answering within the call deadline is said in the
    // machine's status (the error policy then backs off); the session that
    // met it is dropped, so the next reconcile logs in anew.
    let session = match ctx.vsphere.connect(&params).await {
        Ok(session) => session,
        Err(e) => {
            let error = Error::from(e);
            if is_unresponsive(&error) {
                driver::report_error(&mut machine, &mut hooks, &error).await;
            }
            return Err(error);
        }
    };
    let secrets = if deleting {
        Vec::new()
    } else {
        cloud_config_secrets(&machine, &fetched).map_err(Error::CloudConfig)?
    };
    let outcome = match driver::reconcile(
        &mut machine,
        deleting,
        &secrets,
        &session,
        &mut hooks,
        &driver::Options::default(),
    )
    .await
    {
        Ok(outcome) => outcome,
        Err(error) => {
            if is_unresponsive(&error) {
                ctx.vsphere.session_unresponsive(&session);
                driver::report_error(&mut machine, &mut hooks, &error).await;
            }
            return Err(error);
        }
    };
    info!(name = %key, ?outcome, "VSphereMachine reconciled");
    if deleting {
        // Anything but a confirmed absence keeps the finalizer (an error here does).
        return match outcome {
            // The VM is gone: its addresses go back to their pools.
            Outcome::Released => {
                ipclaims::delete_claims(&ctx.client, &machine, &provider_ref.namespace).await?;
                Ok(Action::await_change())
            }
            other => Err(Error::NotGone(format!("{other:?}"))),
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

fn is_unresponsive(error: &Error) -> bool {
    matches!(error, Error::VSphere(e) if e.unresponsive())
}

pub fn machine_error_policy<V: VSphere>(
    machine: Arc<VSphereMachine>,
    error: &Error,
    ctx: Arc<Context<V>>,
) -> Action {
    let delay = ctx.failed(key(machine.as_ref()));
    warn!(namespace = machine.namespace().unwrap_or_default(), name = machine.name_any(), %error, error_kind = error.label(), ?delay, "VSphereMachine reconcile failed");
    Action::requeue(delay)
}

#[cfg(test)]
mod tests;
