//! The VMImage controller: an image's readiness on each Provider of the
//! role's namespace (its template found in each failure domain's
//! datacenter), written as this role's `perProvider` entries when they
//! changed, re-verified every resync and sooner after a failed lookup.

use std::sync::Arc;
use std::time::Instant;

use kube::api::Api;
use kube::runtime::controller::Action;
use kube::ResourceExt;
use tracing::warn;

use super::context::{Context, NOT_READY_DELAY};
use super::provider::readiness;
use super::virtualmachine::schedule::provider_key;
use super::{apply_status, key};
use crate::api::{ImageProviderStatus, VMImage, VMImageStatus};
use crate::vsphere::{ErrorKind, VSphere};
use crate::{Error, Result};

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
    let failure = match &result {
        Ok((_, transient)) => transient.map(ErrorKind::label),
        Err(e) => Some(e.label()),
    };
    ctx.metrics
        .observe_reconcile("VMImage", started.elapsed(), failure);
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

async fn image_inner<V: VSphere>(
    image: &VMImage,
    ctx: &Context<V>,
) -> Result<(Action, Option<ErrorKind>)> {
    let mut providers = ctx.providers.state();
    providers.retain(|p| ctx.serves(&provider_key(p)));
    providers.sort_by_key(|p| p.name_any());
    let machines = ctx.machines.state();
    let mut mine = Vec::with_capacity(providers.len());
    for p in &providers {
        let mut fetched = ctx.fetch_for(p).await?;
        fetched.templates_in_use = Some(readiness::templates_in_use(
            machines.iter().map(AsRef::as_ref),
            &provider_key(p),
        ));
        mine.push(readiness::image_on_provider(image, p, &fetched, ctx.vsphere.as_ref()).await);
    }
    let mut current = entries_of(image.status.as_ref(), &ctx.namespace);
    current.retain(|e| ctx.scope.as_ref().is_none_or(|p| *p == e.provider));
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
        apply_status(&api, image, &ctx.field_manager, &status).await?;
        ctx.metrics.status_written("VMImage");
    }
    // A lookup that failed, a vCenter not reachable or not answering: try
    // again sooner than the resync.
    let transient = mine
        .iter()
        .filter(|e| !e.ready)
        .find_map(|e| readiness::transient_failure(e.reason.as_deref().unwrap_or_default()));
    let key = key(image);
    if transient.is_some() {
        Ok((Action::requeue(ctx.failed(key)), transient))
    } else {
        ctx.succeeded(&key);
        Ok((Action::requeue(ctx.resync), None))
    }
}

pub fn image_error_policy<V: VSphere>(
    image: Arc<VMImage>,
    error: &Error,
    ctx: Arc<Context<V>>,
) -> Action {
    let delay = ctx.failed(key(image.as_ref()));
    warn!(name = image.name_any(), %error, error_kind = error.label(), ?delay, "VMImage reconcile failed");
    Action::requeue(delay)
}
