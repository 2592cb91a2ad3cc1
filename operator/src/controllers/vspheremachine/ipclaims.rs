//! A machine's IP pool NICs as Cluster API claims, pure (not used by the
//! driver yet: a NIC asking for a pool still fails the machine, see
//! [`super::step`]). For each such NIC the driver is to ensure
//! [`claim_for`] before the clone (the name is deterministic, so a re-run
//! or a crash between claim and clone finds the same claim and its
//! address), wait until it is bound, and clone [`bound_machine`]: the NIC
//! with the bound address exactly as a static one, so the guest gets it
//! through the same guestinfo network config. The claims live in the
//! Provider's namespace (with the pools); an owner reference cannot cross
//! namespaces, so the driver deletes them itself once the VM is gone.

use std::collections::BTreeMap;

use crate::api::{
    IPAddressClaim, IPAddressClaimSpec, IPAddressSpec, IPPoolSpec, Ipam, StaticIp,
    TypedLocalObjectReference, VSphereMachine, MANAGED_BY_LABEL,
};
use kube::ResourceExt;

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
}
