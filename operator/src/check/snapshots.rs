//! `check --apply` on VMSnapshots: the provider role's snapshot driver run
//! over the manifests' VMSnapshots (after their VMs are made), then each
//! VirtualMachine's `spec.snapshotRetention`: a VMSnapshot it drops is
//! deleted as in a cluster (its vCenter snapshot removed, then it leaves the
//! output). Manifest objects have no UID, so a snapshot is known by its
//! namespace and name ([`step::marker`]): a re-run finds it and takes none.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::ResourceExt;

use super::World;
use crate::api::VMSnapshot;
use crate::conditions::{self, READY};
use crate::controllers::vmsnapshot::driver::{self, Hooks, Outcome};
use crate::controllers::vmsnapshot::{retention, step, vm_of};
use crate::vsphere::VSphere;
use crate::Error;

/// Where a check's snapshot writes go: nowhere but the object (printed at
/// the end), with each step on stderr.
struct CheckHooks;

impl Hooks for CheckHooks {
    async fn persist(&mut self, _snapshot: &VMSnapshot) -> Result<(), Error> {
        Ok(())
    }

    async fn event(&mut self, snapshot: &VMSnapshot, reason: &str, message: &str) {
        eprintln!(
            "VMSnapshot {}/{}: {reason}: {message}",
            snapshot.namespace().unwrap_or_default(),
            snapshot.name_any()
        );
    }
}

/// Takes every VMSnapshot (or says why not), then applies retention.
pub(super) async fn apply<V: VSphere>(world: &mut World, vsphere: &V, now: &Time) {
    for i in 0..world.snapshots.len() {
        if let Err(e) = apply_one(world, i, false, vsphere).await {
            record_error(&mut world.snapshots[i], &e, now);
        }
    }
    let mut dropped = Vec::new();
    for vm in &world.vms {
        let Some(policy) = vm.spec.snapshot_retention.as_ref() else {
            continue;
        };
        let namespace = vm.namespace().unwrap_or_default();
        match retention::expired(policy, &namespace, &vm.name_any(), &world.snapshots, now) {
            Ok(names) => dropped.extend(names.into_iter().map(|n| (namespace.clone(), n))),
            Err(message) => eprintln!(
                "VirtualMachine {namespace}/{}: snapshot retention not applied: {message}",
                vm.name_any()
            ),
        }
    }
    for (namespace, name) in dropped {
        let Some(i) = world.snapshots.iter().position(|s| {
            s.namespace().as_deref() == Some(namespace.as_str()) && s.name_any() == name
        }) else {
            continue;
        };
        eprintln!(
            "VMSnapshot {namespace}/{name}: past its VirtualMachine's snapshot retention: deleting"
        );
        world.snapshots[i].metadata.deletion_timestamp = Some(now.clone());
        match apply_one(world, i, true, vsphere).await {
            Ok(Outcome::Released) => {
                world.snapshots.remove(i);
            }
            Ok(_) => {}
            Err(e) => record_error(&mut world.snapshots[i], &e, now),
        }
    }
}

fn record_error(snapshot: &mut VMSnapshot, error: &Error, now: &Time) {
    let generation = snapshot.metadata.generation;
    let status = snapshot.status.get_or_insert_with(Default::default);
    let reason = match error {
        Error::VSphere(e) if e.unresponsive() => step::reason::VCENTER_UNRESPONSIVE,
        Error::ProviderNotFound(_) => step::reason::PROVIDER_NOT_FOUND,
        _ => step::reason::FAILED,
    };
    conditions::set(
        &mut status.conditions,
        conditions::Observed::new(READY, conditions::Status::False, reason, error.to_string()),
        generation,
        now,
    );
}

async fn apply_one<V: VSphere>(
    world: &mut World,
    i: usize,
    deleting: bool,
    vsphere: &V,
) -> Result<Outcome, Error> {
    let mut snapshot = world.snapshots[i].clone();
    let namespace = snapshot.namespace().unwrap_or_default();
    let machine = world
        .machines
        .iter()
        .find(|m| {
            m.namespace().as_deref() == Some(namespace.as_str())
                && m.name_any() == snapshot.spec.vm_ref.name
        })
        .filter(|m| m.status.as_ref().is_some_and(|s| s.instance_uuid.is_some()))
        .cloned();
    let result = match machine {
        // No VM: nothing to snapshot yet (and a delete has nothing to remove).
        None if deleting => Ok(Outcome::Released),
        None => {
            let message = format!(
                "VirtualMachine {} has no VM in vCenter yet",
                snapshot.spec.vm_ref.name
            );
            driver::set_ready(
                &mut snapshot,
                &mut CheckHooks,
                step::reason::WAITING_FOR_VM,
                &message,
            )
            .await
            .map(|()| Outcome::Waiting(message))
        }
        Some(machine) => {
            let params = super::apply::connect_params(world, &machine.spec.provider_ref)?;
            let session = vsphere.connect(&params).await?;
            let vm = vm_of(&session, &machine).await?;
            let result = driver::reconcile(
                &mut snapshot,
                deleting,
                vm.as_deref(),
                &session,
                &mut CheckHooks,
                &driver::Options::default(),
            )
            .await;
            if matches!(&result, Err(Error::VSphere(e)) if e.unresponsive()) {
                vsphere.session_unresponsive(&session);
            }
            result
        }
    };
    world.snapshots[i] = snapshot;
    result
}

/// Rows of the VMSNAPSHOT table.
pub(super) fn rows(world: &World) -> Vec<Vec<String>> {
    world
        .snapshots
        .iter()
        .map(|s| {
            let status = s.status.clone().unwrap_or_default();
            let ready = conditions::find(&status.conditions, READY);
            vec![
                format!("{}/{}", s.namespace().unwrap_or_default(), s.name_any()),
                s.spec.vm_ref.name.clone(),
                status.snapshot_id.unwrap_or_default(),
                ready
                    .map(|c| c.status.clone())
                    .unwrap_or_else(|| "Unknown".into()),
                ready.map(|c| c.reason.clone()).unwrap_or_default(),
                ready.map(|c| c.message.clone()).unwrap_or_default(),
            ]
        })
        .collect()
}

pub(super) const HEADERS: &[&str] = &["VMSNAPSHOT", "VM", "SNAPSHOT", "READY", "REASON", "MESSAGE"];

/// How many VMSnapshots are Ready.
pub(super) fn ready(world: &World) -> usize {
    world
        .snapshots
        .iter()
        .filter(|s| {
            conditions::is_true(
                s.status
                    .as_ref()
                    .map(|x| x.conditions.as_slice())
                    .unwrap_or_default(),
                READY,
            )
        })
        .count()
}
