//! The controllers: one module per reconciled kind, each with its reconcile
//! and error policy and, beside them, the pure cores they (and `check`) run.
//!
//! - [`virtualmachine`]: the controller role's kind (schedule, create the
//!   VSphereMachine, mirror status back);
//! - [`provider`], [`vmimage`], [`vspheremachine`]: the provider role's kinds,
//!   sharing [`context::Context`];
//! - [`ippool`]: the built-in IP pool's allocator, binding Cluster API
//!   `IPAddressClaim`s;
//! - [`vmsnapshot`]: VMSnapshots (provider role), with [`context::Context`] too.
//!
//! And the kit every controller uses, one copy each: per-object [`Backoff`],
//! [`publish`] of events (notes cut to [`NOTE_LIMIT`]), and [`apply_status`]
//! (server-side apply of a status).

pub mod context;
pub mod ippool;
pub mod provider;
pub mod virtualmachine;
pub mod vmimage;
pub mod vmsnapshot;
pub mod vspheremachine;

use std::collections::HashMap;
use std::fmt::Debug;
use std::sync::Mutex;
use std::time::Duration;

use k8s_openapi::api::core::v1::ObjectReference;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::events::{Event, EventType, Recorder};
use kube::{Resource, ResourceExt};
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::json;
use tracing::warn;

use crate::api::API_VERSION;

/// Longest event note: the API server refuses notes over 1 kB.
pub const NOTE_LIMIT: usize = 1000;

/// At most `max` bytes of `s`, cut on a character boundary.
pub fn truncate(s: &str, max: usize) -> String {
    let mut end = s.len().min(max);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s[..end].to_string()
}

/// The delay after `failures` consecutive failures: 5s, 10s, 20s ... up to 5 minutes.
pub fn backoff(failures: u32) -> Duration {
    let exponent = failures.saturating_sub(1).min(6);
    Duration::from_secs(5 * (1u64 << exponent)).min(Duration::from_secs(300))
}

/// Consecutive failures per object (by [`key`]), for exponential backoff.
#[derive(Debug, Default)]
pub struct Backoff {
    failures: Mutex<HashMap<String, u32>>,
}

impl Backoff {
    /// Records one more failure of `key`; returns the delay before the next try.
    pub fn failed(&self, key: String) -> Duration {
        let n = self
            .failures
            .lock()
            .map(|mut f| {
                let n = f.entry(key).or_insert(0);
                *n = n.saturating_add(1);
                *n
            })
            .unwrap_or(1);
        backoff(n)
    }

    /// `key` succeeded: its next failure starts the backoff anew.
    pub fn succeeded(&self, key: &str) {
        if let Ok(mut f) = self.failures.lock() {
            f.remove(key);
        }
    }
}

/// An object's key for [`Backoff`] and logs: `Kind/namespace/name`, or
/// `Kind/name` for a cluster-scoped one.
pub fn key<K: Resource<DynamicType = ()>>(object: &K) -> String {
    match object.namespace() {
        Some(ns) => format!("{}/{ns}/{}", K::kind(&()), object.name_any()),
        None => format!("{}/{}", K::kind(&()), object.name_any()),
    }
}

/// Publishes an event about `object` (its note cut to [`NOTE_LIMIT`]). An
/// event that cannot be published is logged and otherwise ignored: events
/// are for people, the status is the record.
pub async fn publish(
    recorder: &Recorder,
    object: &ObjectReference,
    warning: bool,
    reason: &str,
    note: &str,
    action: &str,
) {
    let event = Event {
        type_: if warning {
            EventType::Warning
        } else {
            EventType::Normal
        },
        reason: reason.to_string(),
        note: Some(truncate(note, NOTE_LIMIT)),
        action: action.to_string(),
        secondary: None,
    };
    if let Err(e) = recorder.publish(&event, object).await {
        warn!(
            namespace = object.namespace.as_deref().unwrap_or_default(),
            name = object.name.as_deref().unwrap_or_default(),
            error = %e,
            "could not publish event"
        );
    }
}

/// Writes `status` as `object`'s status by server-side apply as
/// `field_manager` (forcing: the manager owns the fields it writes).
pub async fn apply_status<K>(
    api: &Api<K>,
    object: &K,
    field_manager: &str,
    status: &impl Serialize,
) -> kube::Result<()>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug,
{
    let patch = json!({ "apiVersion": API_VERSION, "kind": K::kind(&()), "status": status });
    api.patch_status(
        &object.name_any(),
        &PatchParams::apply(field_manager).force(),
        &Patch::Apply(&patch),
    )
    .await
    .map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_notes_are_cut_on_character_boundaries() {
        assert_eq!(truncate("héllo", 2), "h");
        assert_eq!(truncate("héllo", 3), "hé");
        assert_eq!(truncate("abc", 10), "abc");
    }
}
