//! The VMSnapshot controller (provider role): a vCenter snapshot of a
//! VirtualMachine's VM, taken once, reverted to once per request, removed
//! when the object is deleted, and the VM's retention applied. This file is
//! the finalizer, the owner reference to the VirtualMachine, the session to
//! the VM's Provider, status by server-side apply and events; the work is
//! in the modules below.
//!
//! - [`step`]: the pure core (object + the VM's snapshots -> next action + status);
//! - [`driver`]: performs the actions through [`Snapshots`](crate::vsphere::Snapshots),
//!   the task reference (and a revert's request) in the status before waiting;
//! - [`retention`]: which VMSnapshots a VirtualMachine's retention drops (pure);
//! - `check --apply` runs the same driver with in-memory hooks.
//!
//! The VM is the one of the VSphereMachine named like `spec.vmRef` (the
//! VirtualMachine's), found by its recorded reference or instance UUID; the
//! role serves the snapshots of its own Providers' machines. The snapshot is
//! known by a line of its description naming this object and its UID
//! ([`step::marker`]), looked for before any request, and vCenter runs one
//! snapshot task at a time per VM, so a request lost in a crash and sent
//! again is refused rather than doubled.

pub mod driver;
pub mod retention;
pub mod step;

use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::runtime::events::Recorder;
use kube::runtime::finalizer::{finalizer, Error as FinalizerError, Event as FinalizerEvent};
use kube::runtime::reflector::ObjectRef;
use kube::{Resource, ResourceExt};
use serde_json::json;
use tracing::{info, warn};

use super::context::Context;
use super::provider::readiness;
use super::{apply_status, key, publish};
use crate::api::{VMSnapshot, VSphereMachine, VirtualMachine, API_VERSION};
use crate::health::Metrics;
use crate::vsphere::{Machines, VSphere};
use crate::{Error, Result};
use driver::{Hooks, Outcome};

/// The finalizer that keeps a VMSnapshot until its vCenter snapshot is confirmed gone.
pub const FINALIZER: &str = "banlieue.io/snapshot-cleanup";

/// How often a snapshot waiting for its VM is looked at again.
pub const WAITING_RECHECK: Duration = Duration::from_secs(30);

/// Status writes and events of one reconcile.
pub struct KubeHooks {
    pub api: Api<VMSnapshot>,
    pub field_manager: String,
    pub recorder: Recorder,
    pub metrics: Arc<Metrics>,
}

impl Hooks for KubeHooks {
    async fn persist(&mut self, snapshot: &VMSnapshot) -> Result<()> {
        apply_status(&self.api, snapshot, &self.field_manager, &snapshot.status)
            .await
            .map_err(|e| Error::StatusWrite(e.to_string()))?;
        self.metrics.status_written("VMSnapshot");
        Ok(())
    }

    async fn event(&mut self, snapshot: &VMSnapshot, reason: &str, message: &str) {
        let warning = [
            step::reason::FAILED,
            step::reason::SNAPSHOT_LOST,
            step::reason::VCENTER_UNRESPONSIVE,
            step::reason::PROVIDER_NOT_FOUND,
            "RevertFailed",
        ]
        .contains(&reason);
        publish(
            &self.recorder,
            &snapshot.object_ref(&()),
            warning,
            reason,
            message,
            "Snapshot",
        )
        .await;
    }
}

/// One reconcile of a VMSnapshot whose VM's Provider this role serves (or
/// whose VirtualMachine has no VSphereMachine yet).
pub async fn reconcile_snapshot<V>(
    snapshot: Arc<VMSnapshot>,
    ctx: Arc<Context<V>>,
) -> Result<Action>
where
    V: VSphere,
{
    if !ctx.caches.is_synced() {
        return Ok(Action::requeue(Duration::from_secs(1)));
    }
    let namespace = snapshot.namespace().unwrap_or_default();
    let machine = ctx
        .machines
        .get(&ObjectRef::new(&snapshot.spec.vm_ref.name).within(&namespace));
    if machine
        .as_ref()
        .is_some_and(|m| !ctx.serves(&m.spec.provider_ref))
    {
        return Ok(Action::await_change());
    }
    let started = Instant::now();
    let api: Api<VMSnapshot> = Api::namespaced(ctx.client.clone(), &namespace);
    let result = finalizer(&api, FINALIZER, snapshot.clone(), |event| async {
        match event {
            FinalizerEvent::Apply(s) => lifecycle(&s, false, machine.as_deref(), &ctx, &api).await,
            FinalizerEvent::Cleanup(s) => lifecycle(&s, true, machine.as_deref(), &ctx, &api).await,
        }
    })
    .await;
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
        "VMSnapshot",
        started.elapsed(),
        result.as_ref().err().map(Error::label),
    );
    result
}

async fn lifecycle<V>(
    snapshot: &VMSnapshot,
    deleting: bool,
    machine: Option<&VSphereMachine>,
    ctx: &Context<V>,
    api: &Api<VMSnapshot>,
) -> Result<Action>
where
    V: VSphere,
{
    let key = key(snapshot);
    let mut hooks = KubeHooks {
        api: api.clone(),
        field_manager: ctx.field_manager.clone(),
        recorder: ctx.recorder.clone(),
        metrics: ctx.metrics.clone(),
    };
    let mut snapshot = snapshot.clone();
    if let (Some(machine), false) = (machine, deleting) {
        adopt(api, &snapshot, machine).await?;
    }
    // No VSphereMachine, or one never cloned: no VM, so no snapshot of it
    // (a deleted machine's finalizer saw its VM, snapshots included, gone).
    let Some(machine) =
        machine.filter(|m| m.status.as_ref().is_some_and(|s| s.instance_uuid.is_some()))
    else {
        if deleting {
            return Ok(Action::await_change());
        }
        let message = format!(
            "VirtualMachine {} has no VM in vCenter yet",
            snapshot.spec.vm_ref.name
        );
        driver::set_ready(
            &mut snapshot,
            &mut hooks,
            step::reason::WAITING_FOR_VM,
            &message,
        )
        .await?;
        return Ok(Action::requeue(WAITING_RECHECK));
    };
    let provider_ref = &machine.spec.provider_ref;
    let Some(provider) = ctx
        .providers
        .get(&ObjectRef::new(&provider_ref.name).within(&provider_ref.namespace))
    else {
        let error = Error::ProviderNotFound(provider_ref.clone());
        report_error(&mut snapshot, &mut hooks, &error).await;
        return Err(error);
    };
    let (secrets, config_maps) = readiness::referenced(&provider);
    let fetched = ctx
        .fetch(&provider_ref.namespace, &secrets, &config_maps)
        .await?;
    let params =
        readiness::connect_params(&provider, &fetched).map_err(|f| Error::ProviderUnusable {
            reason: f.reason,
            message: f.message,
        })?;
    let session = match ctx.vsphere.connect(&params).await {
        Ok(session) => session,
        Err(e) => {
            let error = Error::from(e);
            if is_unresponsive(&error) {
                report_error(&mut snapshot, &mut hooks, &error).await;
            }
            return Err(error);
        }
    };
    let run = async {
        let vm = vm_of(&session, machine).await?;
        driver::reconcile(
            &mut snapshot,
            deleting,
            vm.as_deref(),
            &session,
            &mut hooks,
            &driver::Options::default(),
        )
        .await
    };
    let outcome = match run.await {
        Ok(outcome) => outcome,
        Err(error) => {
            if is_unresponsive(&error) {
                ctx.vsphere.session_unresponsive(&session);
                report_error(&mut snapshot, &mut hooks, &error).await;
            }
            return Err(error);
        }
    };
    info!(name = %key, ?outcome, "VMSnapshot reconciled");
    if deleting {
        // Anything but a confirmed absence keeps the finalizer.
        return match outcome {
            Outcome::Released => Ok(Action::await_change()),
            other => Err(Error::SnapshotNotGone(format!("{other:?}"))),
        };
    }
    Ok(match outcome {
        Outcome::Ready => {
            ctx.succeeded(&key);
            apply_retention(ctx, &snapshot).await?;
            Action::requeue(ctx.resync)
        }
        Outcome::Waiting(_) => Action::requeue(WAITING_RECHECK),
        Outcome::Busy(_) | Outcome::Failed(_) | Outcome::Released => {
            Action::requeue(ctx.failed(key))
        }
    })
}

/// The reference of `machine`'s VM: by its recorded reference, else by
/// instance UUID; vCenter's own answer (`None`: no VM, or none cloned yet).
pub async fn vm_of<M: Machines>(session: &M, machine: &VSphereMachine) -> Result<Option<String>> {
    let Some(uuid) = machine
        .status
        .as_ref()
        .and_then(|s| s.instance_uuid.as_deref())
    else {
        return Ok(None);
    };
    let recorded = machine.status.as_ref().and_then(|s| s.mo_ref.as_deref());
    if let Some(mo_ref) = recorded {
        if let Some(vm) = session
            .vm(mo_ref, true)
            .await?
            .filter(|vm| vm.instance_uuid.eq_ignore_ascii_case(uuid))
        {
            return Ok(Some(vm.mo_ref));
        }
    }
    Ok(session.find_vm(uuid, true).await?.map(|vm| vm.mo_ref))
}

fn is_unresponsive(error: &Error) -> bool {
    matches!(error, Error::VSphere(e) if e.unresponsive())
}

/// Records `error` in `Ready` (`VCenterUnresponsive`, `ProviderNotFound` with
/// the way out, `Failed` otherwise); a status that cannot be written is
/// logged, as the reconcile fails with `error` anyway.
async fn report_error(snapshot: &mut VMSnapshot, hooks: &mut KubeHooks, error: &Error) {
    let (reason, message) = match error {
        Error::VSphere(e) if e.unresponsive() => (step::reason::VCENTER_UNRESPONSIVE, error.to_string()),
        Error::ProviderNotFound(provider) => (
            step::reason::PROVIDER_NOT_FOUND,
            format!(
                "Provider {provider} not found: the VM's snapshots cannot be reached in vCenter. Recreate \
                 the Provider and the snapshot goes on; or, to leave the snapshot in vCenter, remove the \
                 finalizer {FINALIZER}"
            ),
        ),
        _ => (step::reason::FAILED, error.to_string()),
    };
    if let Err(e) = driver::set_ready(snapshot, hooks, reason, &message).await {
        warn!(snapshot = %key(snapshot), error = %e, "could not record the reconcile's error in the status");
    }
}

/// Makes the VirtualMachine (the owner of the VM's VSphereMachine) an owner
/// of the snapshot, so deleting it garbage-collects its VMSnapshots.
async fn adopt(
    api: &Api<VMSnapshot>,
    snapshot: &VMSnapshot,
    machine: &VSphereMachine,
) -> Result<()> {
    let Some(owner) = owner_to_add(snapshot, machine) else {
        return Ok(());
    };
    let mut owners = snapshot.owner_references().to_vec();
    owners.push(owner);
    api.patch(
        &snapshot.name_any(),
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"ownerReferences": owners}})),
    )
    .await?;
    Ok(())
}

/// The VirtualMachine as an owner of `snapshot`, when it is not one yet.
pub fn owner_to_add(snapshot: &VMSnapshot, machine: &VSphereMachine) -> Option<OwnerReference> {
    let vm = machine.owner_references().iter().find(|o| {
        o.api_version == API_VERSION
            && o.kind == "VirtualMachine"
            && o.name == snapshot.spec.vm_ref.name
    })?;
    if snapshot.owner_references().iter().any(|o| o.uid == vm.uid) {
        return None;
    }
    Some(OwnerReference {
        api_version: API_VERSION.into(),
        kind: "VirtualMachine".into(),
        name: vm.name.clone(),
        uid: vm.uid.clone(),
        controller: None,
        block_owner_deletion: None,
    })
}

/// Deletes the VMSnapshots the VirtualMachine's `spec.snapshotRetention`
/// drops (their finalizers remove their vCenter snapshots).
async fn apply_retention<V>(ctx: &Context<V>, snapshot: &VMSnapshot) -> Result<()> {
    let namespace = snapshot.namespace().unwrap_or_default();
    let vm_name = &snapshot.spec.vm_ref.name;
    let vms: Api<VirtualMachine> = Api::namespaced(ctx.client.clone(), &namespace);
    let vm = match vms.get(vm_name).await {
        Ok(vm) => vm,
        Err(kube::Error::Api(e)) if e.code == 404 => return Ok(()),
        Err(e) => return Err(e.into()),
    };
    let Some(policy) = vm.spec.snapshot_retention.as_ref() else {
        return Ok(());
    };
    let api: Api<VMSnapshot> = Api::namespaced(ctx.client.clone(), &namespace);
    let all = api.list(&ListParams::default()).await?.items;
    let expired = match retention::expired(
        policy,
        &namespace,
        vm_name,
        &all,
        &crate::conditions::now(),
    ) {
        Ok(expired) => expired,
        Err(message) => {
            warn!(virtualmachine = %format!("{namespace}/{vm_name}"), %message, "snapshot retention not applied");
            publish(
                &ctx.recorder,
                &vm.object_ref(&()),
                true,
                "InvalidSnapshotRetention",
                &message,
                "Retention",
            )
            .await;
            return Ok(());
        }
    };
    for name in expired {
        info!(virtualmachine = %format!("{namespace}/{vm_name}"), snapshot = %name, "deleting a VMSnapshot past the VM's retention");
        match api.delete(&name, &DeleteParams::default()).await {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 404 => {}
            Err(e) => return Err(e.into()),
        }
        publish(
            &ctx.recorder,
            &vm.object_ref(&()),
            false,
            "SnapshotExpired",
            &format!("VMSnapshot {name} is past spec.snapshotRetention: deleted"),
            "Retention",
        )
        .await;
    }
    Ok(())
}

pub fn snapshot_error_policy<V: VSphere>(
    snapshot: Arc<VMSnapshot>,
    error: &Error,
    ctx: Arc<Context<V>>,
) -> Action {
    let delay = ctx.failed(key(snapshot.as_ref()));
    warn!(namespace = snapshot.namespace().unwrap_or_default(), name = snapshot.name_any(), %error, error_kind = error.label(), ?delay, "VMSnapshot reconcile failed");
    Action::requeue(delay)
}

#[cfg(test)]
mod tests;
