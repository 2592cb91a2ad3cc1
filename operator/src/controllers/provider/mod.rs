//! The Provider controller: log in (or reuse the session), walk the
//! inventory into failure domains, write the status when it changed, with
//! the pure core of [`readiness`] that `check` runs too.
//!
//! - Secrets and ConfigMaps of the namespace are watched: a rotated password
//!   or CA bundle triggers the Providers that reference it ([`references`]),
//!   and the backend logs in again with it (and only then).
//! - Every Provider is re-verified every `resync` (inventory changes); a
//!   vCenter that cannot be reached is retried sooner, with per-object
//!   exponential backoff, and its Provider keeps its last known failure
//!   domains meanwhile.
//! - Status is written by server-side apply, and only when it changed.

pub mod readiness;

use std::sync::Arc;
use std::time::Instant;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::Api;
use kube::runtime::controller::Action;
use kube::{Resource, ResourceExt};
use tracing::{info, warn};

use super::context::{Context, NOT_READY_DELAY};
use super::{apply_status, key, publish};
use crate::api::Provider;
use crate::caches::{self, CacheSync};
use crate::conditions::{self, Observed, Status, READY};
use crate::vsphere::{ErrorKind, VSphere};
use crate::{Error, Result};
use readiness::{reason, ProviderOutcome};

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
    let failure = match &result {
        Ok((_, transient)) => transient.map(ErrorKind::label),
        Err(e) => Some(e.label()),
    };
    ctx.metrics
        .observe_reconcile("Provider", started.elapsed(), failure);
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
    let outcome =
        readiness::reconcile_provider(provider, ctx, ctx.vsphere.as_ref(), &conditions::now())
            .await;
    write_provider_status(provider, ctx, &outcome).await?;
    let (_, transient) = outcome.ready_reason();
    let key = key(provider);
    if transient.is_some() {
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

#[cfg(test)]
mod tests;
