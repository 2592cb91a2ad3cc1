//! `check --apply`: the VSphereMachine lifecycle of the provider role run
//! over the manifests' machines, until each is Ready or failed; then their
//! VMSnapshots (`snapshots.rs`).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::ResourceExt;

use std::collections::{BTreeMap, BTreeSet};

use super::{mirror, World};
use crate::api::{
    IPAddressSpec, LocalObjectReference, NamespacedReference, TypedLocalObjectReference,
    VSphereMachine,
};
use crate::conditions;
use crate::controllers::provider::readiness as provider;
use crate::controllers::vspheremachine::cloud_config_secrets;
use crate::controllers::vspheremachine::driver::{self, Hooks, Outcome};
use crate::controllers::vspheremachine::ipclaims;
use crate::vsphere::{ConnectParams, VSphere};
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
    super::snapshots::apply(world, vsphere, now).await;
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
    let session = vsphere
        .connect(&connect_params(world, &machine.spec.provider_ref)?)
        .await?;
    let secrets = cloud_config_secrets(&machine, &*world).map_err(Error::CloudConfig)?;
    let mut machine = bind_pool_nics(world, &machine).unwrap_or(machine);
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
    // The spec as asked (its pool NICs, not their bound addresses): the next
    // binding's live claims are read from it.
    machine.spec = world.machines[i].spec.clone();
    world.machines[i] = machine;
    result
}

/// How to reach the manifests' Provider `provider_ref`.
pub(super) fn connect_params(
    world: &World,
    provider_ref: &NamespacedReference,
) -> std::result::Result<ConnectParams, Error> {
    let provider = world
        .providers
        .iter()
        .find(|p| {
            p.namespace().as_deref() == Some(provider_ref.namespace.as_str())
                && p.name_any() == provider_ref.name
        })
        .ok_or_else(|| Error::ProviderNotFound(provider_ref.clone()))?;
    provider::connect_params(provider, world).map_err(|f| Error::ProviderUnusable {
        reason: f.reason,
        message: f.message,
    })
}

/// The machine with its pool NICs bound from the manifests' built-in
/// `IPPool`s, as the provider role's allocator would bind their claims (the
/// same `ipam::bind`, allocations kept in the world, so two machines of one
/// pool get two addresses and a re-run the same ones). `None` when a pool NIC
/// cannot be bound here (another provider's pool kind, a pool not in the
/// manifests, an exhausted one): the machine then fails, saying so.
fn bind_pool_nics(world: &mut World, machine: &VSphereMachine) -> Option<VSphereMachine> {
    if !ipclaims::has_pool_nics(machine) {
        return None;
    }
    let namespace = machine.spec.provider_ref.namespace.clone();
    let live: BTreeSet<String> = world
        .machines
        .iter()
        .flat_map(|m| ipclaims::claims_for(m, &namespace))
        .map(|c| c.name_any())
        .collect();
    let mut bound = BTreeMap::new();
    for claim in ipclaims::claims_for(machine, &namespace) {
        let pool_ref = &claim.spec.pool_ref;
        if pool_ref.api_group.as_deref() != Some(crate::api::BUILTIN_POOL_GROUP)
            || pool_ref.kind != crate::api::BUILTIN_POOL_KIND
        {
            return None;
        }
        let pool = world.pools.iter().find(|p| {
            p.namespace().as_deref() == Some(namespace.as_str()) && p.name_any() == pool_ref.name
        })?;
        let parsed = crate::ipam::Pool::parse(&pool.spec.pool_spec()).ok()?;
        let key = format!("{namespace}/{}", pool_ref.name);
        let allocations = world.allocations.get(&key).cloned().unwrap_or_default();
        let (ip, written) =
            crate::ipam::bind(&parsed, &allocations, &claim.name_any(), &live).ok()?;
        let spec = pool.spec.clone();
        if let Some(written) = written {
            world.allocations.insert(key, written);
        }
        let address = IPAddressSpec {
            claim_ref: LocalObjectReference {
                name: claim.name_any(),
            },
            pool_ref: TypedLocalObjectReference::default(),
            address: ip.to_string(),
            prefix: i32::from(parsed.prefix),
            gateway: parsed.gateway.map(|g| g.to_string()),
        };
        let nic = claim
            .labels()
            .get(ipclaims::INTERFACE_LABEL)
            .cloned()
            .unwrap_or_default();
        bound.insert(nic, ipclaims::as_static(&address, Some(&spec)));
    }
    ipclaims::bound_machine(machine, &bound)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{IPPool, IPPoolSpec, IpPool};
    use crate::fixtures::{machine, with_pool_nic};

    fn on_pool(name: &str) -> VSphereMachine {
        let mut m = with_pool_nic(machine(name), "prod");
        m.spec.provider_ref.namespace = "banlieue-system".into();
        m
    }

    fn address_of(m: &VSphereMachine) -> String {
        m.spec.network_interfaces[0]
            .ipam
            .static_
            .as_ref()
            .map(|s| s.address.clone())
            .unwrap_or_default()
    }

    #[test]
    fn two_machines_of_one_pool_get_two_addresses_and_a_rerun_the_same() {
        let mut pool = IPPool::new(
            "prod",
            IPPoolSpec {
                addresses: vec!["10.0.0.10-10.0.0.11".into()],
                prefix: 24,
                gateway: Some("10.0.0.1".into()),
                excluded_addresses: vec![],
                nameservers: vec![],
                search_domains: vec![],
            },
        );
        pool.metadata.namespace = Some("banlieue-system".into());
        let (a, b, c) = (on_pool("a"), on_pool("b"), on_pool("c"));
        let mut world = World {
            pools: vec![pool],
            machines: vec![a.clone(), b.clone(), c.clone()],
            ..Default::default()
        };
        let bound_a = bind_pool_nics(&mut world, &a).expect("a bound");
        let bound_b = bind_pool_nics(&mut world, &b).expect("b bound");
        assert_eq!(address_of(&bound_a), "10.0.0.10/24");
        assert_eq!(address_of(&bound_b), "10.0.0.11/24");
        assert!(bound_a.spec.network_interfaces[0].ipam.pool.is_none());
        assert_eq!(
            address_of(&bind_pool_nics(&mut world, &a).expect("again")),
            "10.0.0.10/24",
            "a re-run binds the same"
        );
        assert_eq!(
            bind_pool_nics(&mut world, &c),
            None,
            "the pool is exhausted"
        );
        let mut elsewhere = on_pool("d");
        elsewhere.spec.network_interfaces[0].ipam.pool = Some(IpPool {
            name: "lab".into(),
            api_group: Some("ipam.cluster.x-k8s.io".into()),
            kind: Some("InClusterIPPool".into()),
        });
        assert_eq!(
            bind_pool_nics(&mut world, &elsewhere),
            None,
            "not check's to bind"
        );
    }
}
