//! A machine's IP pool NICs as Cluster API claims. The provider role runs
//! [`ensure_bound`] before the driver: one claim per pool NIC
//! ([`claims_for`], a deterministic name, so a re-run or a crash between
//! claim and clone finds the same claim and its address), nothing cloned
//! until every one is bound, then the driver clones [`bound_machine`]: each
//! NIC with its bound address exactly as a static one, so the guest gets it
//! through the same guestinfo network config. `check` binds the manifests'
//! built-in pools in memory with the same pieces; a NIC it cannot bind fails
//! the machine (see [`super::step`]). The
//! claims live in the Provider's namespace (with the pools); an owner
//! reference cannot cross namespaces, so [`delete_claims`] deletes them once
//! the VM is confirmed gone, before the finalizer is released.

use std::collections::BTreeMap;

use kube::api::{Api, PostParams};
use kube::{Client, ResourceExt};

use crate::api::{
    IPAddress, IPAddressClaim, IPAddressClaimSpec, IPAddressSpec, IPPool, IPPoolSpec, Ipam,
    StaticIp, TypedLocalObjectReference, VSphereMachine, BUILTIN_POOL_GROUP, BUILTIN_POOL_KIND,
    MANAGED_BY_LABEL,
};
use crate::conditions;

/// Labels naming the machine and NIC a claim is for.
pub const MACHINE_NAMESPACE_LABEL: &str = "banlieue.io/machine-namespace";
pub const MACHINE_LABEL: &str = "banlieue.io/machine";
pub const INTERFACE_LABEL: &str = "banlieue.io/interface";

/// `<machine namespace>.<machine>.<nic>`: one name per machine and NIC
/// (the namespace, a DNS label, has no dot), the NIC's name lowercased with
/// what an object name cannot hold as `-`.
pub fn claim_name(machine: &VSphereMachine, nic: &str) -> String {
    let nic: String = nic
        .chars()
        .map(|c| match c.to_ascii_lowercase() {
            c @ ('a'..='z' | '0'..='9' | '-') => c,
            _ => '-',
        })
        .collect();
    format!(
        "{}.{}.{nic}",
        machine.namespace().unwrap_or_default(),
        machine.name_any()
    )
}

/// The claims of the machine's pool NICs, in `namespace` (the Provider's).
pub fn claims_for(machine: &VSphereMachine, namespace: &str) -> Vec<IPAddressClaim> {
    machine
        .spec
        .network_interfaces
        .iter()
        .filter_map(|nic| {
            let pool = nic.ipam.pool.as_ref()?;
            let (group, kind) = pool.group_kind();
            let mut claim = IPAddressClaim::new(
                &claim_name(machine, &nic.name),
                IPAddressClaimSpec {
                    pool_ref: TypedLocalObjectReference {
                        api_group: Some(group.to_string()),
                        kind: kind.to_string(),
                        name: pool.name.clone(),
                    },
                },
            );
            claim.metadata.namespace = Some(namespace.to_string());
            claim.metadata.labels = Some(BTreeMap::from([
                (
                    MANAGED_BY_LABEL.0.to_string(),
                    MANAGED_BY_LABEL.1.to_string(),
                ),
                (
                    MACHINE_NAMESPACE_LABEL.to_string(),
                    machine.namespace().unwrap_or_default(),
                ),
                (MACHINE_LABEL.to_string(), machine.name_any()),
                (INTERFACE_LABEL.to_string(), nic.name.clone()),
            ]));
            Some(claim)
        })
        .collect()
}

/// A bound address as a static one: `address/prefix`, the gateway, and the
/// DNS of the pool when it is banlieue's (`pool`; another provider's
/// `IPAddress` carries none).
pub fn as_static(address: &IPAddressSpec, pool: Option<&IPPoolSpec>) -> StaticIp {
    StaticIp {
        address: format!("{}/{}", address.address, address.prefix),
        gateway: address.gateway.clone(),
        nameservers: pool.map(|p| p.nameservers.clone()).unwrap_or_default(),
        search_domains: pool.map(|p| p.search_domains.clone()).unwrap_or_default(),
    }
}

/// The machine to clone once its pool NICs are bound: each NIC in `bound`
/// (by NIC name) asks for its address as a static one, no pool; `None`
/// while a pool NIC has no address yet.
pub fn bound_machine(
    machine: &VSphereMachine,
    bound: &BTreeMap<String, StaticIp>,
) -> Option<VSphereMachine> {
    let mut out = machine.clone();
    for nic in &mut out.spec.network_interfaces {
        if nic.ipam.pool.is_some() {
            let address = bound.get(&nic.name)?.clone();
            nic.ipam = Ipam {
                static_: Some(address),
                pool: None,
            };
        }
    }
    Some(out)
}

/// Does any NIC of the machine ask for a pool?
pub fn has_pool_nics(machine: &VSphereMachine) -> bool {
    machine
        .spec
        .network_interfaces
        .iter()
        .any(|n| n.ipam.pool.is_some())
}

/// Deletes the machine's claims (once its VM is gone): the addresses go
/// back to their pools. A claim already gone is fine.
pub async fn delete_claims(
    client: &Client,
    machine: &VSphereMachine,
    namespace: &str,
) -> crate::Result<()> {
    let claims: Api<IPAddressClaim> = Api::namespaced(client.clone(), namespace);
    for claim in claims_for(machine, namespace) {
        match claims
            .delete(&claim.name_any(), &kube::api::DeleteParams::default())
            .await
        {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 404 => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

/// Where a machine's pool NICs stand.
#[derive(Clone, Debug, PartialEq)]
pub enum Binding {
    /// Every pool NIC's address as a static one, by NIC name.
    Bound(BTreeMap<String, StaticIp>),
    /// Not all bound yet: why, per NIC (a claim's own `Ready=False` message,
    /// an exhausted pool for one).
    Waiting(String),
}

/// Creates the machine's claims in `namespace` unless they exist, and reads
/// what they are bound to. A claim already there (a re-run, or a crash
/// between claim and clone) is the same claim, with the same address.
pub async fn ensure_bound(
    client: &Client,
    machine: &VSphereMachine,
    namespace: &str,
) -> crate::Result<Binding> {
    let claims: Api<IPAddressClaim> = Api::namespaced(client.clone(), namespace);
    let addresses: Api<IPAddress> = Api::namespaced(client.clone(), namespace);
    let pools: Api<IPPool> = Api::namespaced(client.clone(), namespace);
    let mut bound = BTreeMap::new();
    let mut waiting = Vec::new();
    for claim in claims_for(machine, namespace) {
        let name = claim.name_any();
        let nic = claim
            .labels()
            .get(INTERFACE_LABEL)
            .cloned()
            .unwrap_or_default();
        let current = match claims.create(&PostParams::default(), &claim).await {
            Ok(created) => created,
            Err(kube::Error::Api(e)) if e.code == 409 => claims.get(&name).await?,
            Err(e) => return Err(e.into()),
        };
        let pool_ref = &current.spec.pool_ref;
        let about = format!(
            "interface {nic}: claim {namespace}/{name} on {} {}",
            pool_ref.kind, pool_ref.name
        );
        let status = current.status.clone().unwrap_or_default();
        let Some(address_ref) = status.address_ref else {
            let why = conditions::find(&status.conditions, conditions::READY)
                .filter(|c| c.status == "False")
                .map_or_else(
                    || "not bound yet".to_string(),
                    |c| format!("{}: {}", c.reason, c.message),
                );
            waiting.push(format!("{about}: {why}"));
            continue;
        };
        let Some(address) = addresses.get_opt(&address_ref.name).await? else {
            waiting.push(format!(
                "{about}: its IPAddress {} does not exist yet",
                address_ref.name
            ));
            continue;
        };
        let builtin = pool_ref.api_group.as_deref() == Some(BUILTIN_POOL_GROUP)
            && pool_ref.kind == BUILTIN_POOL_KIND;
        let pool = if builtin {
            pools.get_opt(&pool_ref.name).await?.map(|p| p.spec)
        } else {
            None
        };
        bound.insert(nic, as_static(&address.spec, pool.as_ref()));
    }
    Ok(if waiting.is_empty() {
        Binding::Bound(bound)
    } else {
        Binding::Waiting(waiting.join("; "))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{IpPool, LocalObjectReference, MachineNetworkInterface};
    use crate::controllers::vspheremachine::guestinfo::network_config;
    use crate::fixtures::machine;

    fn with_nics(nics: &[(&str, Ipam)]) -> VSphereMachine {
        let mut m = machine("web");
        m.spec.network_interfaces = nics
            .iter()
            .map(|(name, ipam)| MachineNetworkInterface {
                name: (*name).into(),
                network_class: "prod".into(),
                port_group: "DC0_DVPG0".into(),
                ipam: ipam.clone(),
            })
            .collect();
        m
    }

    fn pool(name: &str, group_kind: Option<(&str, &str)>) -> Ipam {
        Ipam {
            static_: None,
            pool: Some(IpPool {
                name: name.into(),
                api_group: group_kind.map(|(g, _)| g.into()),
                kind: group_kind.map(|(_, k)| k.into()),
            }),
        }
    }

    #[test]
    fn one_claim_per_pool_nic_with_a_name_a_rerun_finds_again() {
        let m = with_nics(&[
            ("eth0", pool("prod", None)),
            ("eth1", Ipam::default()),
            (
                "Eth_2",
                pool("lab", Some(("ipam.cluster.x-k8s.io", "InClusterIPPool"))),
            ),
        ]);
        let claims = claims_for(&m, "banlieue-system");
        let names: Vec<String> = claims.iter().map(ResourceExt::name_any).collect();
        assert_eq!(
            names,
            ["ns.web.eth0", "ns.web.eth-2"],
            "DHCP NICs claim nothing"
        );
        assert_eq!(
            claims_for(&m, "banlieue-system"),
            claims,
            "the same claims again"
        );
        assert_eq!(claims[0].namespace().as_deref(), Some("banlieue-system"));
        assert_eq!(
            claims[0].spec.pool_ref,
            TypedLocalObjectReference {
                api_group: Some("banlieue.io".into()),
                kind: "IPPool".into(),
                name: "prod".into(),
            },
            "the built-in pool by default"
        );
        assert_eq!(claims[1].spec.pool_ref.kind, "InClusterIPPool");
        assert_eq!(claims[1].labels()[INTERFACE_LABEL], "Eth_2");
        assert_eq!(claims[1].labels()[MACHINE_LABEL], "web");
        assert_eq!(claims[1].labels()[MACHINE_NAMESPACE_LABEL], "ns");
    }

    #[test]
    fn a_bound_address_reaches_the_guest_exactly_as_a_static_one() {
        let address = IPAddressSpec {
            claim_ref: LocalObjectReference {
                name: "ns.web.eth0".into(),
            },
            pool_ref: TypedLocalObjectReference::default(),
            address: "10.0.0.11".into(),
            prefix: 24,
            gateway: Some("10.0.0.1".into()),
        };
        let spec = IPPoolSpec {
            addresses: vec!["10.0.0.0/24".into()],
            prefix: 24,
            gateway: Some("10.0.0.1".into()),
            excluded_addresses: vec![],
            nameservers: vec!["10.0.0.53".into()],
            search_domains: vec!["lab.example".into()],
        };
        let pooled = with_nics(&[("eth0", pool("prod", None)), ("eth1", Ipam::default())]);
        assert_eq!(
            bound_machine(&pooled, &BTreeMap::new()),
            None,
            "not bound yet"
        );
        let bound = bound_machine(
            &pooled,
            &BTreeMap::from([("eth0".to_string(), as_static(&address, Some(&spec)))]),
        )
        .expect("bound");
        let written = with_nics(&[
            (
                "eth0",
                Ipam {
                    static_: Some(StaticIp {
                        address: "10.0.0.11/24".into(),
                        gateway: Some("10.0.0.1".into()),
                        nameservers: vec!["10.0.0.53".into()],
                        search_domains: vec!["lab.example".into()],
                    }),
                    pool: None,
                },
            ),
            ("eth1", Ipam::default()),
        ]);
        let macs = [
            "00:50:56:00:00:01".to_string(),
            "00:50:56:00:00:02".to_string(),
        ];
        assert_eq!(bound, written);
        assert_eq!(
            network_config(&bound, &macs),
            network_config(&written, &macs)
        );
        assert!(network_config(&bound, &macs).is_some());
        // Another provider's address: no DNS from a pool banlieue does not know.
        assert!(as_static(&address, None).nameservers.is_empty());
    }

    mod against_the_api_server {
        use http::{Request, Response};
        use kube::client::Body;
        use serde_json::{json, Value};

        use super::*;
        use crate::fixtures::scripted::{answer, failure, nothing_more, Handle};

        const CLAIMS: &str =
            "/apis/ipam.cluster.x-k8s.io/v1beta1/namespaces/banlieue-system/ipaddressclaims";

        async fn run<F>(machine: &VSphereMachine, script: F) -> Binding
        where
            F: FnOnce(Handle) -> futures::future::BoxFuture<'static, ()>,
        {
            let (service, handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
            let server = tokio::spawn(script(handle));
            let client = Client::new(service, "default");
            let binding = ensure_bound(&client, machine, "banlieue-system")
                .await
                .expect("no API error");
            drop(client);
            server.await.expect("the server's script");
            binding
        }

        fn claim_with(status: Value) -> impl FnOnce(&Value) -> Value {
            move |body| {
                let mut claim = body.clone();
                claim["status"] = status;
                claim
            }
        }

        /// A re-run (or a crash between claim and clone): the claim is there
        /// (409), bound; its address and the pool's DNS make the static address.
        #[tokio::test]
        async fn an_existing_bound_claim_gives_its_address_as_a_static_one() {
            let m = with_nics(&[("eth0", pool("prod", None)), ("eth1", Ipam::default())]);
            let binding = run(&m, |mut h| {
                Box::pin(async move {
                    let sent = answer(&mut h, "POST", CLAIMS, 409, |_| {
                        failure(409, "AlreadyExists")
                    })
                    .await;
                    assert_eq!(sent["metadata"]["name"], "ns.web.eth0");
                    let stored = sent.clone();
                    answer(&mut h, "GET", &format!("{CLAIMS}/ns.web.eth0"), 200, move |_| {
                        claim_with(json!({"addressRef": {"name": "ns.web.eth0"}}))(&stored)
                    })
                    .await;
                    answer(
                        &mut h,
                        "GET",
                        "/apis/ipam.cluster.x-k8s.io/v1beta1/namespaces/banlieue-system/ipaddresses/ns.web.eth0",
                        200,
                        |_| json!({"apiVersion": "ipam.cluster.x-k8s.io/v1beta1", "kind": "IPAddress",
                                   "metadata": {"name": "ns.web.eth0", "namespace": "banlieue-system"},
                                   "spec": {"claimRef": {"name": "ns.web.eth0"},
                                            "poolRef": {"apiGroup": "banlieue.io", "kind": "IPPool", "name": "prod"},
                                            "address": "10.0.0.11", "prefix": 24, "gateway": "10.0.0.1"}}),
                    )
                    .await;
                    answer(
                        &mut h,
                        "GET",
                        "/apis/banlieue.io/v1alpha1/namespaces/banlieue-system/ippools/prod",
                        200,
                        |_| json!({"apiVersion": "banlieue.io/v1alpha1", "kind": "IPPool",
                                   "metadata": {"name": "prod", "namespace": "banlieue-system"},
                                   "spec": {"addresses": ["10.0.0.0/24"], "prefix": 24,
                                            "nameservers": ["10.0.0.53"]}}),
                    )
                    .await;
                    nothing_more(h).await;
                })
            })
            .await;
            assert_eq!(
                binding,
                Binding::Bound(BTreeMap::from([(
                    "eth0".to_string(),
                    StaticIp {
                        address: "10.0.0.11/24".into(),
                        gateway: Some("10.0.0.1".into()),
                        nameservers: vec!["10.0.0.53".into()],
                        search_domains: vec![],
                    }
                )]))
            );
        }

        /// A new claim is not bound yet; an exhausted pool says so: waiting,
        /// with the claim's own reason, nothing cloned.
        #[tokio::test]
        async fn an_unbound_claim_is_waited_for_with_its_reason() {
            let m = with_nics(&[("eth0", pool("prod", None))]);
            let binding = run(&m, |mut h| {
                Box::pin(async move {
                    answer(&mut h, "POST", CLAIMS, 201, Value::clone).await;
                    nothing_more(h).await;
                })
            })
            .await;
            assert_eq!(
                binding,
                Binding::Waiting(
                    "interface eth0: claim banlieue-system/ns.web.eth0 on IPPool prod: not bound yet"
                        .into()
                )
            );
            let binding = run(&m, |mut h| {
                Box::pin(async move {
                    answer(
                        &mut h,
                        "POST",
                        CLAIMS,
                        201,
                        claim_with(json!({"conditions": [{
                        "type": "Ready", "status": "False", "reason": "PoolExhausted",
                        "message": "IPPool banlieue-system/prod: all 3 address(es) are in use",
                        "lastTransitionTime": "2026-01-01T00:00:00Z"}]})),
                    )
                    .await;
                    nothing_more(h).await;
                })
            })
            .await;
            let Binding::Waiting(why) = binding else {
                panic!("not waiting: {binding:?}");
            };
            assert!(
                why.ends_with(
                    "PoolExhausted: IPPool banlieue-system/prod: all 3 address(es) are in use"
                ),
                "{why}"
            );
        }
    }
}
