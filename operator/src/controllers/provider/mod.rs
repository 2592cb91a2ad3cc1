//! The Provider controller: log in (or reuse the session), walk the
//! inventory into failure domains, write the status when it changed, with
//! the pure core of [`readiness`] that `check` runs too.
//!
//! - The Secrets and ConfigMaps a Provider names are read by name at each
//!   reconcile (the role lists and watches none): a rotated password or CA
//!   bundle is used at the next reconcile, and the backend logs in again
//!   with it (and only then). A Provider waiting for one of them to be
//!   created or fixed looks again with backoff (5 s doubling to the resync).
//! - Every Provider is re-verified every `resync` (inventory changes); a
//!   vCenter that cannot be reached is retried sooner, with per-object
//!   exponential backoff, and its Provider keeps its last known failure
//!   domains meanwhile.
//! - Status is written by server-side apply, and only when it changed.
//! - A Provider carries the finalizer [`FINALIZER`]: deleted, it stays (and its
//!   credentials with it) while VSphereMachines use it, so they can still
//!   destroy their VMs; its `Deleting` condition names them.

pub mod readiness;

use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::{Resource, ResourceExt};
use tracing::{info, warn};

use super::context::{Context, NOT_READY_DELAY};
use super::{apply_status, key, publish};
use crate::api::{Provider, VSphereMachine};
use crate::caches::{self, CacheSync};
use crate::conditions::{self, Observed, Status, DELETING, READY};
use crate::vsphere::{ErrorKind, VSphere};
use crate::{Error, Result};
use readiness::{reason, ProviderOutcome};

/// The finalizer that keeps a deleted Provider while VSphereMachines use it.
pub const FINALIZER: &str = "banlieue.io/provider-in-use";

/// How often a deleted Provider that is still in use looks at its machines again.
pub const DELETION_RECHECK: Duration = Duration::from_secs(10);

/// At most this many machines are named in the `Deleting` condition.
const NAMED_MACHINES: usize = 10;

/// One reconcile of a Provider: its finalizer first, then log in (or reuse
/// the session), walk the inventory, write the status if it changed; once
/// deleted, wait for its VSphereMachines to be gone, then release it.
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
    let result = if provider.metadata.deletion_timestamp.is_some() {
        provider_deleting(&provider, &ctx)
            .await
            .map(|action| (action, None))
    } else {
        match add_finalizer(&provider, &ctx).await {
            Ok(()) => provider_inner(&provider, &ctx).await,
            Err(e) => Err(e),
        }
    };
    let failure = match &result {
        Ok((_, transient)) => transient.map(ErrorKind::label),
        Err(e) => Some(e.label()),
    };
    ctx.metrics
        .observe_reconcile("Provider", started.elapsed(), failure);
    result.map(|(action, _)| action)
}

fn has_finalizer(provider: &Provider) -> bool {
    provider.finalizers().iter().any(|f| f == FINALIZER)
}

/// Adds [`FINALIZER`] to `provider` unless it has it (a JSON patch that
/// fails if the list changed meanwhile, as kube-runtime's finalizer helper does).
async fn add_finalizer<V: VSphere>(provider: &Provider, ctx: &Context<V>) -> Result<()> {
    if has_finalizer(provider) {
        return Ok(());
    }
    let patch = match provider.metadata.finalizers.as_deref() {
        None => serde_json::json!([
            {"op": "test", "path": "/metadata/finalizers", "value": null},
            {"op": "add", "path": "/metadata/finalizers", "value": [FINALIZER]},
        ]),
        Some(list) => serde_json::json!([
            {"op": "test", "path": "/metadata/finalizers", "value": list},
            {"op": "add", "path": "/metadata/finalizers/-", "value": FINALIZER},
        ]),
    };
    patch_finalizers(provider, ctx, patch).await
}

async fn patch_finalizers<V: VSphere>(
    provider: &Provider,
    ctx: &Context<V>,
    patch: serde_json::Value,
) -> Result<()> {
    let patch: json_patch::Patch =
        serde_json::from_value(patch).map_err(|e| Error::Finalizer(e.to_string()))?;
    let api: Api<Provider> = Api::namespaced(
        ctx.client.clone(),
        &provider.namespace().unwrap_or_default(),
    );
    api.patch(
        &provider.name_any(),
        &PatchParams::default(),
        &Patch::Json::<()>(patch),
    )
    .await
    .map_err(|e| Error::Finalizer(format!("Provider {}: {e}", key(provider))))?;
    Ok(())
}

/// The VSphereMachines (as `namespace/name`, sorted) whose `spec.providerRef` is `provider`.
pub fn machines_using(provider: &Provider, machines: &[Arc<VSphereMachine>]) -> Vec<String> {
    let (namespace, name) = (
        provider.namespace().unwrap_or_default(),
        provider.name_any(),
    );
    let mut using: Vec<String> = machines
        .iter()
        .filter(|m| m.spec.provider_ref.namespace == namespace && m.spec.provider_ref.name == name)
        .map(|m| format!("{}/{}", m.namespace().unwrap_or_default(), m.name_any()))
        .collect();
    using.sort();
    using
}

/// A deleted Provider: kept (finalizer and status `Deleting`) while
/// VSphereMachines use it, since they need its credentials to destroy their
/// VMs; released once none does.
async fn provider_deleting<V: VSphere>(provider: &Provider, ctx: &Context<V>) -> Result<Action> {
    let Some(position) = provider.finalizers().iter().position(|f| f == FINALIZER) else {
        return Ok(Action::await_change());
    };
    let using = machines_using(provider, &ctx.machines.state());
    if using.is_empty() {
        info!(
            namespace = provider.namespace().unwrap_or_default(),
            name = provider.name_any(),
            "Provider deleted: no VSphereMachine uses it any more, releasing it"
        );
        let patch = serde_json::json!([
            {"op": "test", "path": format!("/metadata/finalizers/{position}"), "value": FINALIZER},
            {"op": "remove", "path": format!("/metadata/finalizers/{position}")},
        ]);
        return match patch_finalizers(provider, ctx, patch).await {
            // Released by a reconcile that ran just before this one.
            Err(Error::Finalizer(m)) if m.contains("404") => Ok(Action::await_change()),
            other => other.map(|()| Action::await_change()),
        };
    }
    let mut named = using
        .iter()
        .take(NAMED_MACHINES)
        .cloned()
        .collect::<Vec<_>>()
        .join(", ");
    if using.len() > NAMED_MACHINES {
        named.push_str(&format!(" and {} more", using.len() - NAMED_MACHINES));
    }
    let message = format!(
        "deleted, kept until the {} VSphereMachine(s) using it are deleted (their VirtualMachines deleted and their VMs destroyed): {named}",
        using.len()
    );
    let mut status = provider.status.clone().unwrap_or_default();
    let observed = Observed::new(
        DELETING,
        Status::True,
        reason::WAITING_FOR_MACHINES,
        message.clone(),
    );
    let transitioned = conditions::set(
        &mut status.conditions,
        observed,
        provider.metadata.generation,
        &conditions::now(),
    );
    if provider.status.as_ref() != Some(&status) {
        let api: Api<Provider> = Api::namespaced(
            ctx.client.clone(),
            &provider.namespace().unwrap_or_default(),
        );
        apply_status(&api, provider, &ctx.field_manager, &status).await?;
        ctx.metrics.status_written("Provider");
    }
    if transitioned {
        info!(namespace = provider.namespace().unwrap_or_default(), name = provider.name_any(), %message, "Provider deleted, still in use");
        publish(
            &ctx.recorder,
            &provider.object_ref(&()),
            false,
            reason::WAITING_FOR_MACHINES,
            &message,
            DELETING,
        )
        .await;
    }
    Ok(Action::requeue(DELETION_RECHECK))
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
        cause: None,
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
        apply_status(&api, provider, &ctx.field_manager, &outcome.status).await?;
        ctx.metrics.status_written("Provider");
    }
    let (reason, transient) = outcome.ready_reason();
    if outcome.transitioned {
        let message = conditions::find(&outcome.status.conditions, READY)
            .map(|c| c.message.clone())
            .unwrap_or_default();
        if transient.is_some() || reason != reason::CONNECTED {
            warn!(%namespace, %name, %reason, %message, "Provider not ready");
        } else {
            info!(%namespace, %name, %message, "Provider ready");
        }
        publish(
            &ctx.recorder,
            &provider.object_ref(&()),
            reason != reason::CONNECTED,
            reason,
            &message,
            READY,
        )
        .await;
    }
    Ok(())
}

/// The action, and the transient vCenter failure the Provider is in, if any.
async fn provider_inner<V: VSphere>(
    provider: &Provider,
    ctx: &Context<V>,
) -> Result<(Action, Option<ErrorKind>)> {
    let fetched = ctx.fetch_for(provider).await?;
    let outcome =
        readiness::reconcile_provider(provider, &fetched, ctx.vsphere.as_ref(), &conditions::now())
            .await;
    write_provider_status(provider, ctx, &outcome).await?;
    let (_, transient) = outcome.ready_reason();
    let key = key(provider);
    // Nothing watches the Secrets and ConfigMaps: one missing or wrong is
    // looked at again soon too.
    if transient.is_some() || outcome.waits_for_a_referenced_object() {
        Ok((Action::requeue(ctx.failed(key)), transient))
    } else {
        ctx.succeeded(&key);
        Ok((Action::requeue(ctx.resync), None))
    }
}

pub fn provider_error_policy<V: VSphere>(
    provider: Arc<Provider>,
    error: &Error,
    ctx: Arc<Context<V>>,
) -> Action {
    let delay = ctx.failed(key(provider.as_ref()));
    warn!(namespace = provider.namespace().unwrap_or_default(), name = provider.name_any(), %error, error_kind = error.label(), ?delay, "Provider reconcile failed");
    Action::requeue(delay)
}

#[cfg(test)]
mod tests;
