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

/// Might a VM of this machine hold its pool addresses? The driver writes
/// the instance UUID into the status before its first clone request, so
/// from then on a VM may have been cloned with them in its guestinfo (a
/// crash right after the request included); before, none can have been.
pub fn clone_started(machine: &VSphereMachine) -> bool {
    machine
        .status
        .as_ref()
        .is_some_and(|s| s.instance_uuid.is_some() || s.mo_ref.is_some() || s.provisioned)
}

/// The claims in `namespace` made for `machine` (by its labels), whatever
/// NIC or pool its spec names now. Without Cluster API's IPAM kinds in the
/// cluster (a 404) there are none.
async fn claims_of(
    claims: &Api<IPAddressClaim>,
    machine: &VSphereMachine,
) -> crate::Result<Vec<IPAddressClaim>> {
    let machine_namespace = machine.namespace().unwrap_or_default();
    let name = machine.name_any();
    // The namespace is a DNS label, a valid label value; the machine's name
    // is one up to 63 characters (a longer one cannot be a selector's value),
    // and is matched here as well.
    let mut selector = format!(
        "{MACHINE_NAMESPACE_LABEL}={machine_namespace},{}={}",
        MANAGED_BY_LABEL.0, MANAGED_BY_LABEL.1
    );
    if name.len() <= 63 {
        selector.push_str(&format!(",{MACHINE_LABEL}={name}"));
    }
    let params = kube::api::ListParams::default().labels(&selector);
    let listed = match claims.list(&params).await {
        Ok(list) => list.items,
        Err(kube::Error::Api(e)) if e.code == 404 => Vec::new(),
        Err(e) => return Err(e.into()),
    };
    Ok(listed
        .into_iter()
        .filter(|c| {
            let labels = c.labels();
            labels.get(MACHINE_NAMESPACE_LABEL) == Some(&machine_namespace)
                && labels.get(MACHINE_LABEL) == Some(&name)
        })
        .collect())
}

async fn delete_claim(claims: &Api<IPAddressClaim>, name: &str) -> crate::Result<()> {
    match claims
        .delete(name, &kube::api::DeleteParams::default())
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// Deletes the machine's claims (once its VM is gone): those of its spec's
/// pool NICs and any it kept for a NIC removed since. The addresses go back
/// to their pools. A claim already gone is fine.
pub async fn delete_claims(
    client: &Client,
    machine: &VSphereMachine,
    namespace: &str,
) -> crate::Result<()> {
    let claims: Api<IPAddressClaim> = Api::namespaced(client.clone(), namespace);
    let mut names: std::collections::BTreeSet<String> = claims_for(machine, namespace)
        .iter()
        .map(ResourceExt::name_any)
        .collect();
    names.extend(
        claims_of(&claims, machine)
            .await?
            .iter()
            .map(ResourceExt::name_any),
    );
    for name in names {
        delete_claim(&claims, &name).await?;
    }
    Ok(())
}

/// Where a machine's pool NICs stand.
#[derive(Clone, Debug, PartialEq)]
pub enum Binding {
    /// Every pool NIC's address as a static one, by NIC name.
    Bound(BTreeMap<String, StaticIp>),
    /// Not all bound yet: the machine's `Ready` reason (`PoolExhausted` when
    /// a claim says so, `WaitingForIPAddress` otherwise) and why, per NIC.
    Waiting {
        reason: &'static str,
        message: String,
    },
}

/// A machine's claims against its spec.
#[derive(Clone, Debug, PartialEq)]
pub struct Claims {
    pub binding: Binding,
    /// After the clone, what the VM keeps that the spec no longer asks: the
    /// `IPAddressesUpToDate=False` reason and message (`None`: nothing).
    pub drift: Option<(&'static str, String)>,
}

/// Creates the machine's claims in `namespace` unless they exist, and reads
/// what they are bound to. A claim already there (a re-run, or a crash
/// between claim and clone) is the same claim, with the same address.
///
/// A claim the spec no longer asks for (its NIC removed, or no longer on a
/// pool), or on another pool than its NIC now names, is released (deleted)
/// while no clone has been started ([`clone_started`]); a NIC on a new pool
/// then gets a new claim there. Once a clone may have been sent, the guest
/// may be configured with the claim's address: the claim is kept (the
/// address stays the VM's until the machine is deleted) and [`Claims::drift`]
/// says what the spec asks that the VM does not have.
pub async fn ensure_bound(
    client: &Client,
    machine: &VSphereMachine,
    namespace: &str,
) -> crate::Result<Claims> {
    use crate::api::reasons::{ippool, vspheremachine as reason};
    let claims: Api<IPAddressClaim> = Api::namespaced(client.clone(), namespace);
    let addresses: Api<IPAddress> = Api::namespaced(client.clone(), namespace);
    let pools: Api<IPPool> = Api::namespaced(client.clone(), namespace);
    let cloned = clone_started(machine);
    let wanted = claims_for(machine, namespace);
    let mut existing: BTreeMap<String, IPAddressClaim> = claims_of(&claims, machine)
        .await?
        .into_iter()
        .map(|c| (c.name_any(), c))
        .collect();
    let mut bound = BTreeMap::new();
    let mut waiting = Vec::new();
    let mut exhausted = false;
    let mut changed = Vec::new();
    let mut removed = Vec::new();
    let nic_of = |claim: &IPAddressClaim| {
        claim
            .labels()
            .get(INTERFACE_LABEL)
            .cloned()
            .unwrap_or_default()
    };
    for claim in wanted {
        let name = claim.name_any();
        let nic = nic_of(&claim);
        let current = match existing.remove(&name) {
            Some(found) => found,
            None => match claims.create(&PostParams::default(), &claim).await {
                Ok(created) => created,
                Err(kube::Error::Api(e)) if e.code == 409 => claims.get(&name).await?,
                Err(e) => return Err(e.into()),
            },
        };
        let pool_ref = &current.spec.pool_ref;
        let about = format!(
            "interface {nic}: claim {namespace}/{name} on {} {}",
            pool_ref.kind, pool_ref.name
        );
        if *pool_ref != claim.spec.pool_ref {
            let asked = &claim.spec.pool_ref;
            if cloned {
                // The guest has this claim's address: kept, said so.
                changed.push(format!(
                    "interface {nic}: the spec asks for {} {} but the VM was cloned with an address \
                     of {} {} (claim {namespace}/{name}, kept while the VM exists); re-create the \
                     VirtualMachine to take one from {}",
                    asked.kind, asked.name, pool_ref.kind, pool_ref.name, asked.name
                ));
            } else {
                // Nothing cloned with it: released; the next pass claims
                // from the new pool under the same name.
                if current.metadata.deletion_timestamp.is_none() {
                    delete_claim(&claims, &name).await?;
                }
                waiting.push(format!(
                    "{about}: the spec now asks for {} {}: releasing it, then claiming from {}",
                    asked.kind, asked.name, asked.name
                ));
                continue;
            }
        } else if current.metadata.deletion_timestamp.is_some() && !cloned {
            waiting.push(format!("{about}: being deleted; claimed again once gone"));
            continue;
        }
        let status = current.status.clone().unwrap_or_default();
        let Some(address_ref) = status.address_ref else {
            let ready = conditions::find(&status.conditions, conditions::READY)
                .filter(|c| c.status == "False");
            exhausted |= ready.is_some_and(|c| c.reason == ippool::POOL_EXHAUSTED);
            let why = ready.map_or_else(
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
    // Claims of NICs the spec no longer has on a pool.
    for (name, stale) in existing {
        if cloned {
            removed.push(format!(
                "interface {} no longer asks for an IP pool but the VM was cloned with the address \
                 of claim {namespace}/{name} ({} {}): kept while the VM exists, released when the \
                 machine is deleted; re-create the VirtualMachine to apply the change",
                nic_of(&stale),
                stale.spec.pool_ref.kind,
                stale.spec.pool_ref.name
            ));
        } else if stale.metadata.deletion_timestamp.is_none() {
            delete_claim(&claims, &name).await?;
        }
    }
    let drift = if !changed.is_empty() {
        changed.extend(removed);
        Some((reason::POOL_CHANGED, changed.join("; ")))
    } else if !removed.is_empty() {
        Some((reason::POOL_REMOVED, removed.join("; ")))
    } else {
        None
    };
    let binding = if waiting.is_empty() {
        Binding::Bound(bound)
    } else {
        Binding::Waiting {
            reason: if exhausted {
                reason::POOL_EXHAUSTED
            } else {
                reason::WAITING_FOR_IP_ADDRESS
            },
            message: waiting.join("; "),
        }
    };
    Ok(Claims { binding, drift })
}

/// Sets the machine's `IPAddressesUpToDate` condition from `drift`: `False`
/// with its reason while the VM keeps what the spec no longer asks, `True`
/// once it does not (only when the condition is there: a machine that never
/// drifted has none). Returns whether the status changed, and whether the
/// condition's status did (an event).
pub fn set_drift(
    machine: &mut VSphereMachine,
    drift: Option<&(&'static str, String)>,
) -> (bool, bool) {
    use crate::api::reasons::vspheremachine as reason;
    use conditions::{Observed, Status, IP_ADDRESSES_UP_TO_DATE};
    let had = machine
        .status
        .as_ref()
        .is_some_and(|s| conditions::find(&s.conditions, IP_ADDRESSES_UP_TO_DATE).is_some());
    let observed = match drift {
        Some((why, message)) => Observed::new(
            IP_ADDRESSES_UP_TO_DATE,
            Status::False,
            *why,
            message.clone(),
        ),
        None if had => Observed::new(
            IP_ADDRESSES_UP_TO_DATE,
            Status::True,
            reason::UP_TO_DATE,
            "every IP pool claim is one the spec asks for",
        ),
        None => return (false, false),
    };
    let before = machine.status.clone();
    let generation = machine.metadata.generation;
    let status = machine.status.get_or_insert_with(Default::default);
    let transitioned = conditions::set(
        &mut status.conditions,
        observed,
        generation,
        &conditions::now(),
    );
    (machine.status != before, transitioned)
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
        use crate::fixtures::scripted::{answer, deleted, failure, nothing_more, Handle};

        const CLAIMS: &str =
            "/apis/ipam.cluster.x-k8s.io/v1beta1/namespaces/banlieue-system/ipaddressclaims";

        async fn run<F>(machine: &VSphereMachine, script: F) -> Claims
        where
            F: FnOnce(Handle) -> futures::future::BoxFuture<'static, ()>,
        {
            let (service, handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
            let server = tokio::spawn(script(handle));
            let client = Client::new(service, "default");
            let claims = ensure_bound(&client, machine, "banlieue-system")
                .await
                .expect("no API error");
            drop(client);
            server.await.expect("the server's script");
            claims
        }

        fn claim_with(status: Value) -> impl FnOnce(&Value) -> Value {
            move |body| {
                let mut claim = body.clone();
                claim["status"] = status;
                claim
            }
        }

        /// Answers the list of the machine's claims with `claims`.
        async fn lists(h: &mut Handle, claims: Vec<Value>) {
            answer(h, "GET", CLAIMS, 200, move |_| {
                json!({"apiVersion": "ipam.cluster.x-k8s.io/v1beta1", "kind": "IPAddressClaimList",
                       "metadata": {}, "items": claims})
            })
            .await;
        }

        /// `ns.web.<nic>` on the built-in pool `pool`, bound to its IPAddress.
        fn bound_claim(nic: &str, pool: &str) -> Value {
            let m = with_nics(&[(nic, super::pool(pool, None))]);
            let mut claim = json!(claims_for(&m, "banlieue-system")[0]);
            claim["status"] = json!({"addressRef": {"name": format!("ns.web.{nic}")}});
            claim
        }

        /// Runs `ensure_bound` while the API server lists `claim` as the
        /// machine's one claim, then sees it deleted, and nothing more.
        async fn run_deleting(machine: &VSphereMachine, claim: Value) -> Claims {
            run(machine, |mut h| {
                Box::pin(async move {
                    let path = format!(
                        "{CLAIMS}/{}",
                        claim["metadata"]["name"].as_str().unwrap_or_default()
                    );
                    lists(&mut h, vec![claim]).await;
                    deleted(&mut h, &path).await;
                    nothing_more(h).await;
                })
            })
            .await
        }

        async fn address_and_pool(h: &mut Handle, name: &str, address: &str, pool: &str) {
            let address = address.to_string();
            let pool_name = pool.to_string();
            answer(
                h,
                "GET",
                &format!("/apis/ipam.cluster.x-k8s.io/v1beta1/namespaces/banlieue-system/ipaddresses/{name}"),
                200,
                move |_| json!({"apiVersion": "ipam.cluster.x-k8s.io/v1beta1", "kind": "IPAddress",
                           "metadata": {"name": name, "namespace": "banlieue-system"},
                           "spec": {"claimRef": {"name": name},
                                    "poolRef": {"apiGroup": "banlieue.io", "kind": "IPPool", "name": pool_name},
                                    "address": address, "prefix": 24, "gateway": "10.0.0.1"}}),
            )
            .await;
            answer(
                h,
                "GET",
                &format!("/apis/banlieue.io/v1alpha1/namespaces/banlieue-system/ippools/{pool}"),
                200,
                |_| {
                    json!({"apiVersion": "banlieue.io/v1alpha1", "kind": "IPPool",
                           "metadata": {"name": "prod", "namespace": "banlieue-system"},
                           "spec": {"addresses": ["10.0.0.0/24"], "prefix": 24,
                                    "nameservers": ["10.0.0.53"]}})
                },
            )
            .await;
        }

        fn static_ip(address: &str) -> StaticIp {
            StaticIp {
                address: address.into(),
                gateway: Some("10.0.0.1".into()),
                nameservers: vec!["10.0.0.53".into()],
                search_domains: vec![],
            }
        }

        /// A machine whose clone may have been sent (the instance UUID is in its status).
        fn cloned(mut m: VSphereMachine) -> VSphereMachine {
            m.status = Some(crate::api::VSphereMachineStatus {
                instance_uuid: Some("5012f3a4-0000-4000-8000-000000000042".into()),
                ..Default::default()
            });
            m
        }

        /// The drift is `reason`, its message saying each of `parts`.
        fn drift_says(claims: &Claims, reason: &str, parts: &[&str]) {
            let (said, message) = claims.drift.clone().expect("said so");
            assert_eq!(said, reason);
            for part in parts {
                assert!(message.contains(part), "{part:?} in {message}");
            }
        }

        /// A re-run (or a crash between claim and clone): the claim is there
        /// (the list behind: a 409, then read), bound; its address and the
        /// pool's DNS make the static address.
        #[tokio::test]
        async fn an_existing_bound_claim_gives_its_address_as_a_static_one() {
            let m = with_nics(&[("eth0", pool("prod", None)), ("eth1", Ipam::default())]);
            let claims = run(&m, |mut h| {
                Box::pin(async move {
                    lists(&mut h, vec![]).await;
                    let sent = answer(&mut h, "POST", CLAIMS, 409, |_| {
                        failure(409, "AlreadyExists")
                    })
                    .await;
                    assert_eq!(sent["metadata"]["name"], "ns.web.eth0");
                    let stored = sent.clone();
                    answer(
                        &mut h,
                        "GET",
                        &format!("{CLAIMS}/ns.web.eth0"),
                        200,
                        move |_| {
                            claim_with(json!({"addressRef": {"name": "ns.web.eth0"}}))(&stored)
                        },
                    )
                    .await;
                    address_and_pool(&mut h, "ns.web.eth0", "10.0.0.11", "prod").await;
                    nothing_more(h).await;
                })
            })
            .await;
            assert_eq!(
                claims,
                Claims {
                    binding: Binding::Bound(BTreeMap::from([(
                        "eth0".to_string(),
                        static_ip("10.0.0.11/24")
                    )])),
                    drift: None,
                }
            );
        }

        /// A new claim is not bound yet; an exhausted pool says so: waiting,
        /// with the claim's own reason, nothing cloned. A full pool is the
        /// machine's own reason, `PoolExhausted`.
        #[tokio::test]
        async fn an_unbound_claim_is_waited_for_with_its_reason() {
            let m = with_nics(&[("eth0", pool("prod", None))]);
            let claims = run(&m, |mut h| {
                Box::pin(async move {
                    lists(&mut h, vec![]).await;
                    answer(&mut h, "POST", CLAIMS, 201, Value::clone).await;
                    nothing_more(h).await;
                })
            })
            .await;
            assert_eq!(
                claims.binding,
                Binding::Waiting {
                    reason: "WaitingForIPAddress",
                    message: "interface eth0: claim banlieue-system/ns.web.eth0 on IPPool prod: not bound yet"
                        .into()
                }
            );
            let claims = run(&m, |mut h| {
                Box::pin(async move {
                    lists(&mut h, vec![]).await;
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
            let Binding::Waiting { reason, message } = claims.binding else {
                panic!("not waiting: {claims:?}");
            };
            assert_eq!(reason, "PoolExhausted");
            assert!(
                message.ends_with(
                    "PoolExhausted: IPPool banlieue-system/prod: all 3 address(es) are in use"
                ),
                "{message}"
            );
        }

        /// The class's NIC now names another pool, nothing cloned yet: the
        /// claim on the old pool is released (deleted), and the next pass
        /// claims from the new one under the same name.
        #[tokio::test]
        async fn before_the_clone_a_claim_on_a_pool_the_spec_no_longer_names_is_replaced() {
            let m = with_nics(&[("eth0", pool("lab", None))]);
            let claims = run_deleting(&m, bound_claim("eth0", "prod")).await;
            assert_eq!(
                claims.binding,
                Binding::Waiting {
                    reason: "WaitingForIPAddress",
                    message: "interface eth0: claim banlieue-system/ns.web.eth0 on IPPool prod: the spec \
                              now asks for IPPool lab: releasing it, then claiming from lab"
                        .into()
                }
            );
            assert_eq!(claims.drift, None);
            // Gone: the new claim is on the new pool.
            let claims = run(&m, |mut h| {
                Box::pin(async move {
                    lists(&mut h, vec![]).await;
                    let sent = answer(&mut h, "POST", CLAIMS, 201, Value::clone).await;
                    assert_eq!(sent["metadata"]["name"], "ns.web.eth0");
                    assert_eq!(sent["spec"]["poolRef"]["name"], "lab");
                    nothing_more(h).await;
                })
            })
            .await;
            assert!(matches!(claims.binding, Binding::Waiting { .. }));
        }

        /// The same change once a clone may have been sent: the guest has the
        /// old pool's address, so the claim is kept (no delete, no new
        /// claim), the VM keeps that address, and the drift says what to do.
        #[tokio::test]
        async fn after_the_clone_a_changed_pool_keeps_the_address_and_says_a_recreate_is_needed() {
            let m = cloned(with_nics(&[("eth0", pool("lab", None))]));
            let claims = run(&m, |mut h| {
                Box::pin(async move {
                    lists(&mut h, vec![bound_claim("eth0", "prod")]).await;
                    address_and_pool(&mut h, "ns.web.eth0", "10.0.0.11", "prod").await;
                    nothing_more(h).await;
                })
            })
            .await;
            assert_eq!(
                claims.binding,
                Binding::Bound(BTreeMap::from([(
                    "eth0".to_string(),
                    static_ip("10.0.0.11/24")
                )]))
            );
            drift_says(
                &claims,
                "PoolChanged",
                &[
                    "the spec asks for IPPool lab",
                    "cloned with an address of IPPool prod",
                    "re-create the VirtualMachine",
                ],
            );
        }

        /// A NIC on a pool removed from the spec (or now DHCP): before the
        /// clone its claim is released; after, it is kept (the guest has the
        /// address) until the machine is deleted, and the drift says so.
        #[tokio::test]
        async fn a_removed_nics_claim_is_released_before_the_clone_and_kept_after() {
            let m = with_nics(&[("eth0", Ipam::default())]);
            let claims = run_deleting(&m, bound_claim("eth1", "prod")).await;
            assert_eq!(
                claims,
                Claims {
                    binding: Binding::Bound(BTreeMap::new()),
                    drift: None
                }
            );
            let claims = run(&cloned(m), |mut h| {
                Box::pin(async move {
                    lists(&mut h, vec![bound_claim("eth1", "prod")]).await;
                    nothing_more(h).await;
                })
            })
            .await;
            assert_eq!(claims.binding, Binding::Bound(BTreeMap::new()));
            drift_says(
                &claims,
                "PoolRemoved",
                &[
                    "interface eth1 no longer asks for an IP pool",
                    "claim banlieue-system/ns.web.eth1",
                    "released when the machine is deleted",
                ],
            );
        }

        /// Another machine's claims (same namespace, a name that starts the
        /// same) are not this machine's, even if the server lists them.
        #[tokio::test]
        async fn only_the_machines_own_claims_are_looked_at() {
            let m = with_nics(&[("eth0", Ipam::default())]);
            let mut other = bound_claim("eth1", "prod");
            other["metadata"]["name"] = json!("ns.web.x.eth1");
            other["metadata"]["labels"][MACHINE_LABEL] = json!("web.x");
            let claims = run(&m, |mut h| {
                Box::pin(async move {
                    lists(&mut h, vec![other]).await;
                    nothing_more(h).await;
                })
            })
            .await;
            assert_eq!(claims.binding, Binding::Bound(BTreeMap::new()));
        }
    }
}
