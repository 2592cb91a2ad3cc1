//! `check --apply`: the VSphereMachine lifecycle of the provider role run
//! over the manifests' machines, until each is Ready or failed.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::ResourceExt;

use super::{mirror, World};
use crate::api::VSphereMachine;
use crate::conditions;
use crate::controllers::provider::readiness as provider;
use crate::controllers::vspheremachine::cloud_config_secrets;
use crate::controllers::vspheremachine::driver::{self, Hooks, Outcome};
use crate::vsphere::VSphere;
use crate::Error;

/// Where a check's lifecycle writes go: nowhere but the machine itself
/// (printed at the end), with each step on stderr.
struct CheckHooks;

impl Hooks for CheckHooks {
    async fn persist(&mut self, _machine: &VSphereMachine) -> std::result::Result<(), Error> {
        Ok(())
    }

    async fn event(&mut self, machine: &VSphereMachine, reason: &str, message: &str) {
        eprintln!(
            "{}/{}: {reason}: {message}",
            machine.namespace().unwrap_or_default(),
            machine.name_any()
        );
    }
}

/// `check --apply`: runs the VSphereMachine lifecycle (the provider role's
/// driver) for every machine until each is Ready or failed, or `deadline`
/// passes, then mirrors the result into the VirtualMachines. Re-running it on
/// the same manifests finds the same VMs (instance UUIDs from provider,
/// namespace and name) and makes none twice.
pub async fn apply<V>(world: &mut World, vsphere: &V, deadline: std::time::Instant, now: &Time)
where
    V: VSphere,
{
    let mut pending: Vec<usize> = (0..world.machines.len()).collect();
    while !pending.is_empty() {
        let mut still = Vec::new();
        for &i in &pending {
            let outcome = apply_one(world, i, vsphere).await;
            let done = match &outcome {
                Ok(Outcome::Waiting(_)) => false,
                Ok(_) => true,
                Err(e) => {
                    lifecycle_error(&mut world.machines[i], e, now);
                    true
                }
            };
            if !done {
                still.push(i);
            }
        }
        pending = still;
        if pending.is_empty() || std::time::Instant::now() >= deadline {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    }
    mirror(world, now);
}

fn lifecycle_error(machine: &mut VSphereMachine, error: &Error, now: &Time) {
    let status = machine.status.get_or_insert_with(Default::default);
    let observed = driver::error_condition(error);
    conditions::set(
        &mut status.conditions,
        observed,
        machine.metadata.generation,
        now,
    );
}

async fn apply_one<V>(
    world: &mut World,
    i: usize,
    vsphere: &V,
) -> std::result::Result<Outcome, Error>
where
    V: VSphere,
{
    let machine = world.machines[i].clone();
    let provider_ref = &machine.spec.provider_ref;
    let provider = world
        .providers
        .iter()
        .find(|p| {
            p.namespace().as_deref() == Some(provider_ref.namespace.as_str())
                && p.name_any() == provider_ref.name
        })
        .ok_or_else(|| Error::ProviderNotFound(provider_ref.clone()))?;
    let params =
        provider::connect_params(provider, &*world).map_err(|f| Error::ProviderUnusable {
            reason: f.reason,
            message: f.message,
        })?;
    let session = vsphere.connect(&params).await?;
    let secrets = cloud_config_secrets(&machine, &*world).map_err(Error::CloudConfig)?;
    let mut machine = machine;
    let result = driver::reconcile(
        &mut machine,
        false,
        &secrets,
        &session,
        &mut CheckHooks,
        &driver::Options::default(),
    )
    .await;
    if matches!(&result, Err(Error::VSphere(e)) if e.unresponsive()) {
        vsphere.session_unresponsive(&session);
    }
    world.machines[i] = machine;
    result
}
