//! The built-in pool's allocator: binds Cluster API `IPAddressClaim`s whose
//! `poolRef` is `banlieue.io` `IPPool` (claims of other pool kinds are
//! another IPAM provider's). The decision is [`crate::ipam::bind`]; this
//! part records it so that no address goes to two claims:
//!
//! 1. the allocation is written into the pool's `status.allocations` with a
//!    PUT carrying the pool's resourceVersion: an allocator that raced and
//!    wrote first makes it a 409 Conflict, and the loser re-reads the pool
//!    and picks again;
//! 2. then the `IPAddress` of the claim's name (owned by the claim, so it
//!    goes with it) is created; one already there (a crash after it was
//!    created) is the same address, as the allocation recorded it;
//! 3. then the claim's status names it, `Ready=True`.
//!
//! Allocations of claims that are gone are dropped at the next write
//! ([`release`] writes them away without a new claim).

use std::collections::BTreeSet;
use std::net::IpAddr;

use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::controller::Action;
use kube::{Client, Resource, ResourceExt};
use serde_json::json;

use crate::api::reasons::ippool as reason;
use crate::api::{
    IPAddress, IPAddressClaim, IPAddressSpec, IPPool, IPPoolStatus, LocalObjectReference,
    TypedLocalObjectReference, BUILTIN_POOL_GROUP, BUILTIN_POOL_KIND,
};
use crate::conditions::{self, Observed, Status, READY};
use crate::ipam::{self, Allocations, Pool, PoolError};

/// How often a lost race re-reads the pool before the reconcile is retried.
const ATTEMPTS: usize = 5;

/// What became of a claim.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Not a claim on the built-in pool kind: left alone.
    NotOurs,
    /// Bound to this address (now, or before).
    Bound(IpAddr),
    /// Not bound, and why (the claim's `Ready=False` reason and message):
    /// retried with backoff, or when the pool changes.
    Unbound {
        reason: &'static str,
        message: String,
    },
}

fn is_builtin(pool_ref: &TypedLocalObjectReference) -> bool {
    pool_ref.api_group.as_deref() == Some(BUILTIN_POOL_GROUP) && pool_ref.kind == BUILTIN_POOL_KIND
}

fn allocations_of(pool: &IPPool) -> Allocations {
    pool.status
        .iter()
        .flat_map(|s| &s.allocations)
        .filter_map(|(ip, claim)| Some((ip.parse().ok()?, claim.clone())))
        .collect()
}

/// The pool's status with `allocations` recorded, counts recomputed.
fn status_with(pool: &IPPool, parsed: &Pool, allocations: &Allocations) -> IPPoolStatus {
    let mut status = pool.status.clone().unwrap_or_default();
    status.allocations = allocations
        .iter()
        .map(|(ip, claim)| (ip.to_string(), claim.clone()))
        .collect();
    let used = allocations
        .keys()
        .filter(|ip| parsed.contains(**ip))
        .count() as u128;
    status.used = u64::try_from(used).unwrap_or(u64::MAX);
    status.free = u64::try_from(parsed.size().saturating_sub(used)).unwrap_or(u64::MAX);
    status
}

/// Writes `status` under the resourceVersion `pool` was read with: `false`
/// when another writer got there first (409).
async fn write_pool_status(
    pools: &Api<IPPool>,
    pool: &IPPool,
    status: IPPoolStatus,
) -> crate::Result<bool> {
    let mut updated = pool.clone();
    updated.status = Some(status);
    match pools
        .replace_status(&pool.name_any(), &PostParams::default(), &updated)
        .await
    {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(e)) if e.code == 409 => Ok(false),
        Err(e) => Err(e.into()),
    }
}

/// Binds `claim` if its pool is the built-in kind; `live` are the names of
/// the claims that exist in the claim's namespace on its pool (the claim's
/// own included).
pub async fn bind_claim(
    client: &Client,
    claim: &IPAddressClaim,
    live: &BTreeSet<String>,
) -> crate::Result<Outcome> {
    let pool_ref = &claim.spec.pool_ref;
    if !is_builtin(pool_ref) {
        return Ok(Outcome::NotOurs);
    }
    let namespace = claim.namespace().unwrap_or_default();
    let name = claim.name_any();
    let pools: Api<IPPool> = Api::namespaced(client.clone(), &namespace);
    let mut bound = None;
    for _ in 0..ATTEMPTS {
        let Some(pool) = pools.get_opt(&pool_ref.name).await? else {
            let outcome = Outcome::Unbound {
                reason: reason::POOL_NOT_FOUND,
                message: format!("IPPool {namespace}/{} does not exist", pool_ref.name),
            };
            return report(client, claim, outcome).await;
        };
        let parsed = match Pool::parse(&pool.spec.pool_spec()) {
            Ok(parsed) => parsed,
            Err(e) => {
                let outcome = Outcome::Unbound {
                    reason: reason::INVALID_POOL,
                    message: format!("IPPool {namespace}/{}: {e}", pool_ref.name),
                };
                return report(client, claim, outcome).await;
            }
        };
        match ipam::bind(&parsed, &allocations_of(&pool), &name, live) {
            Ok((ip, None)) => {
                bound = Some((pool, parsed, ip));
                break;
            }
            Ok((ip, Some(allocations))) => {
                let status = status_with(&pool, &parsed, &allocations);
                if write_pool_status(&pools, &pool, status).await? {
                    bound = Some((pool, parsed, ip));
                    break;
                }
                // Lost the race: re-read the pool and pick again.
            }
            Err(PoolError::Exhausted { size }) => {
                let outcome = Outcome::Unbound {
                    reason: reason::POOL_EXHAUSTED,
                    message: format!(
                        "IPPool {namespace}/{}: all {size} address(es) are in use",
                        pool_ref.name
                    ),
                };
                return report(client, claim, outcome).await;
            }
            Err(PoolError::Invalid(message)) => {
                let outcome = Outcome::Unbound {
                    reason: reason::INVALID_POOL,
                    message,
                };
                return report(client, claim, outcome).await;
            }
        }
    }
    let Some((pool, parsed, ip)) = bound else {
        return Err(crate::Error::StatusWrite(format!(
            "IPPool {namespace}/{}: {ATTEMPTS} conflicting writes in a row",
            pool_ref.name
        )));
    };
    ensure_address(client, claim, &pool, &parsed, ip).await?;
    report(client, claim, Outcome::Bound(ip)).await
}

/// The claim's `IPAddress`, created unless there.
async fn ensure_address(
    client: &Client,
    claim: &IPAddressClaim,
    pool: &IPPool,
    parsed: &Pool,
    ip: IpAddr,
) -> crate::Result<()> {
    let namespace = claim.namespace().unwrap_or_default();
    let addresses: Api<IPAddress> = Api::namespaced(client.clone(), &namespace);
    let mut address = IPAddress::new(
        &claim.name_any(),
        IPAddressSpec {
            claim_ref: LocalObjectReference {
                name: claim.name_any(),
            },
            pool_ref: TypedLocalObjectReference {
                api_group: Some(BUILTIN_POOL_GROUP.into()),
                kind: BUILTIN_POOL_KIND.into(),
                name: pool.name_any(),
            },
            address: ip.to_string(),
            prefix: i32::from(parsed.prefix),
            gateway: parsed.gateway.map(|g| g.to_string()),
        },
    );
    address.metadata.namespace = Some(namespace);
    address.metadata.owner_references = claim.controller_owner_ref(&()).map(|o| vec![o]);
    match addresses.create(&PostParams::default(), &address).await {
        Ok(_) => Ok(()),
        // Created before a crash, for this claim: the allocation it was made
        // from is the one `bind` returned again, so it holds the same address.
        // One of an earlier claim of this name (its owner gone, the garbage
        // collector not done yet) or with another address is deleted and
        // made again at the next try.
        Err(kube::Error::Api(e)) if e.code == 409 => {
            let name = claim.name_any();
            let existing = addresses.get_opt(&name).await?;
            let ours = existing.as_ref().is_some_and(|a| {
                a.spec.address == address.spec.address
                    && a.owner_references()
                        .iter()
                        .any(|o| Some(&o.uid) == claim.uid().as_ref())
            });
            if ours {
                return Ok(());
            }
            if existing.is_some() {
                addresses
                    .delete(&name, &kube::api::DeleteParams::default())
                    .await?;
            }
            Err(crate::Error::StatusWrite(format!(
                "IPAddress {name} was not this claim's: deleted, made again at the next try"
            )))
        }
        Err(e) => Err(e.into()),
    }
}

/// Writes the claim's status for `outcome` and returns it.
async fn report(
    client: &Client,
    claim: &IPAddressClaim,
    outcome: Outcome,
) -> crate::Result<Outcome> {
    let mut status = claim.status.clone().unwrap_or_default();
    let observed = match &outcome {
        Outcome::Bound(ip) => {
            status.address_ref = Some(LocalObjectReference {
                name: claim.name_any(),
            });
            Observed::new(READY, Status::True, reason::BOUND, format!("{ip}"))
        }
        Outcome::Unbound { reason, message } => {
            Observed::new(READY, Status::False, *reason, message.clone())
        }
        Outcome::NotOurs => return Ok(outcome),
    };
    conditions::set(
        &mut status.conditions,
        observed,
        claim.meta().generation,
        &conditions::now(),
    );
    if claim.status.as_ref() != Some(&status) {
        let claims: Api<IPAddressClaim> =
            Api::namespaced(client.clone(), &claim.namespace().unwrap_or_default());
        claims
            .patch_status(
                &claim.name_any(),
                &PatchParams::default(),
                &Patch::Merge(json!({ "status": status })),
            )
            .await?;
    }
    Ok(outcome)
}

/// Drops the allocations of claims not in `live` from the pool's status
/// (under its resourceVersion; a lost race is left to the next pass).
/// Returns whether it wrote.
pub async fn release(
    client: &Client,
    pool: &IPPool,
    live: &BTreeSet<String>,
) -> crate::Result<bool> {
    let allocations = allocations_of(pool);
    let kept: Allocations = allocations
        .iter()
        .filter(|(_, claim)| live.contains(*claim))
        .map(|(ip, claim)| (*ip, claim.clone()))
        .collect();
    if kept == allocations {
        return Ok(false);
    }
    let Ok(parsed) = Pool::parse(&pool.spec.pool_spec()) else {
        return Ok(false);
    };
    let pools: Api<IPPool> = Api::namespaced(client.clone(), &pool.namespace().unwrap_or_default());
    write_pool_status(&pools, pool, status_with(pool, &parsed, &kept)).await
}

/// What the allocator's controller needs: the client, the claims of the
/// namespace (their names are the live set), per-claim backoff.
pub struct Allocator {
    pub client: Client,
    pub claims: kube::runtime::reflector::Store<IPAddressClaim>,
    pub backoff: super::Backoff,
}

/// The live set of a pool: the names of the claims in `namespace` on the
/// built-in pool `pool` that the cache holds. A claim of that name now on
/// another pool (replaced when its NIC's pool changed) does not keep its
/// allocation in this one.
pub fn live_claims(
    claims: &kube::runtime::reflector::Store<IPAddressClaim>,
    namespace: &str,
    pool: &str,
) -> BTreeSet<String> {
    claims
        .state()
        .iter()
        .filter(|c| {
            c.namespace().as_deref() == Some(namespace)
                && is_builtin(&c.spec.pool_ref)
                && c.spec.pool_ref.name == pool
        })
        .map(|c| c.name_any())
        .collect()
}

/// When to look at a claim again: a bound claim, or one of another pool
/// kind, when it changes; an unbound one with backoff (an exhausted pool is
/// retried, not a crash loop).
pub fn action_for(outcome: &Outcome, backoff: &super::Backoff, key: String) -> Action {
    match outcome {
        Outcome::NotOurs | Outcome::Bound(_) => {
            backoff.succeeded(&key);
            Action::await_change()
        }
        Outcome::Unbound { .. } => Action::requeue(backoff.failed(key)),
    }
}

/// The allocator's reconcile of one claim.
pub async fn reconcile_claim(
    claim: std::sync::Arc<IPAddressClaim>,
    ctx: std::sync::Arc<Allocator>,
) -> crate::Result<Action> {
    let namespace = claim.namespace().unwrap_or_default();
    let mut live = live_claims(&ctx.claims, &namespace, &claim.spec.pool_ref.name);
    live.insert(claim.name_any());
    let outcome = bind_claim(&ctx.client, &claim, &live).await?;
    Ok(action_for(
        &outcome,
        &ctx.backoff,
        super::key(claim.as_ref()),
    ))
}

/// A failed reconcile (the API server): retried with backoff.
pub fn claim_error_policy(
    claim: std::sync::Arc<IPAddressClaim>,
    error: &crate::Error,
    ctx: std::sync::Arc<Allocator>,
) -> Action {
    tracing::warn!(claim = %super::key(claim.as_ref()), %error, "binding the claim failed");
    Action::requeue(ctx.backoff.failed(super::key(claim.as_ref())))
}

#[cfg(test)]
mod tests {
    use http::{Request, Response};
    use kube::client::Body;
    use serde_json::{json, Value};

    use super::*;
    use crate::api::{IPAddressClaimSpec, IPPoolSpec};
    use crate::fixtures::scripted::{answer, deleted, failure, nothing_more, Handle};

    const NS: &str = "banlieue-system";

    fn pool_path() -> String {
        format!("/apis/banlieue.io/v1alpha1/namespaces/{NS}/ippools/prod")
    }

    fn claim(name: &str, group: &str, kind: &str) -> IPAddressClaim {
        let mut claim = IPAddressClaim::new(
            name,
            IPAddressClaimSpec {
                pool_ref: TypedLocalObjectReference {
                    api_group: Some(group.into()),
                    kind: kind.into(),
                    name: "prod".into(),
                },
            },
        );
        claim.metadata.namespace = Some(NS.into());
        claim.metadata.uid = Some(format!("uid-{name}"));
        claim
    }

    fn ours(name: &str) -> IPAddressClaim {
        claim(name, BUILTIN_POOL_GROUP, BUILTIN_POOL_KIND)
    }

    /// The pool `10.0.0.10-10.0.0.12`, gateway 10.0.0.1, at `version`.
    fn pool(version: &str, allocations: &[(&str, &str)]) -> Value {
        let mut pool = IPPool::new(
            "prod",
            IPPoolSpec {
                addresses: vec!["10.0.0.10-10.0.0.12".into()],
                prefix: 24,
                gateway: Some("10.0.0.1".into()),
                excluded_addresses: vec![],
                nameservers: vec![],
                search_domains: vec![],
            },
        );
        pool.metadata.namespace = Some(NS.into());
        pool.metadata.resource_version = Some(version.into());
        pool.status = Some(IPPoolStatus {
            allocations: allocations
                .iter()
                .map(|(ip, claim)| ((*ip).to_string(), (*claim).to_string()))
                .collect(),
            ..Default::default()
        });
        serde_json::to_value(pool).unwrap()
    }

    fn live(names: &[&str]) -> BTreeSet<String> {
        names.iter().map(|n| (*n).to_string()).collect()
    }

    /// Runs `bind_claim` against a server playing `script`.
    async fn bind<F>(claim: &IPAddressClaim, live: &BTreeSet<String>, script: F) -> Outcome
    where
        F: FnOnce(Handle) -> futures::future::BoxFuture<'static, ()>,
    {
        let (service, handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
        let server = tokio::spawn(script(handle));
        let client = Client::new(service, "default");
        let outcome = bind_claim(&client, claim, live).await.expect("bound");
        drop(client);
        server.await.expect("the server's script");
        outcome
    }

    /// The claim as the server answers a status patch of it.
    fn patched(name: &str) -> impl FnOnce(&Value) -> Value {
        let mut claim = serde_json::to_value(ours(name)).unwrap();
        move |body| {
            claim["status"] = body["status"].clone();
            claim
        }
    }

    /// Answers the claim's status patch; returns the patch.
    async fn claim_status(handle: &mut Handle, name: &str) -> Value {
        let path = format!(
            "/apis/ipam.cluster.x-k8s.io/v1beta1/namespaces/{NS}/ipaddressclaims/{name}/status"
        );
        answer(handle, "PATCH", &path, 200, patched(name)).await
    }

    fn addresses_path() -> String {
        format!("/apis/ipam.cluster.x-k8s.io/v1beta1/namespaces/{NS}/ipaddresses")
    }

    #[tokio::test]
    async fn a_claim_gets_the_lowest_free_address_written_under_the_pools_resource_version() {
        let claim = ours("web-eth0");
        let outcome = bind(&claim, &live(&["web-eth0"]), |mut h| {
            Box::pin(async move {
                answer(&mut h, "GET", &pool_path(), 200, |_| pool("7", &[])).await;
                let put = answer(
                    &mut h,
                    "PUT",
                    &format!("{}/status", pool_path()),
                    200,
                    Value::clone,
                )
                .await;
                assert_eq!(put["metadata"]["resourceVersion"], "7", "the precondition");
                assert_eq!(
                    put["status"]["allocations"],
                    json!({"10.0.0.10": "web-eth0"})
                );
                assert_eq!(put["status"]["used"], 1);
                assert_eq!(put["status"]["free"], 2);
                let address = answer(&mut h, "POST", &addresses_path(), 201, Value::clone).await;
                assert_eq!(address["metadata"]["name"], "web-eth0");
                assert_eq!(
                    address["spec"],
                    json!({"claimRef": {"name": "web-eth0"},
                           "poolRef": {"apiGroup": "banlieue.io", "kind": "IPPool", "name": "prod"},
                           "address": "10.0.0.10", "prefix": 24, "gateway": "10.0.0.1"})
                );
                let owner = &address["metadata"]["ownerReferences"][0];
                assert_eq!(owner["kind"], "IPAddressClaim");
                assert_eq!(owner["uid"], "uid-web-eth0");
                let status = claim_status(&mut h, "web-eth0").await;
                assert_eq!(status["status"]["addressRef"], json!({"name": "web-eth0"}));
                let ready = &status["status"]["conditions"][0];
                assert_eq!(
                    (&ready["type"], &ready["status"], &ready["reason"]),
                    (&json!("Ready"), &json!("True"), &json!("Bound"))
                );
                nothing_more(h).await;
            })
        })
        .await;
        assert_eq!(outcome, Outcome::Bound("10.0.0.10".parse().unwrap()));
    }

    /// Two allocators read the same pool; the other one wrote first. The 409
    /// makes this one re-read and pick the next address: never the same.
    #[tokio::test]
    async fn a_lost_race_re_reads_the_pool_and_picks_another_address() {
        let claim = ours("b-eth0");
        let outcome = bind(&claim, &live(&["a-eth0", "b-eth0"]), |mut h| {
            Box::pin(async move {
                let status_path = format!("{}/status", pool_path());
                answer(&mut h, "GET", &pool_path(), 200, |_| pool("7", &[])).await;
                let lost = answer(&mut h, "PUT", &status_path, 409, |_| {
                    failure(409, "Conflict")
                })
                .await;
                assert_eq!(
                    lost["status"]["allocations"],
                    json!({"10.0.0.10": "b-eth0"})
                );
                answer(&mut h, "GET", &pool_path(), 200, |_| {
                    pool("8", &[("10.0.0.10", "a-eth0")])
                })
                .await;
                let won = answer(&mut h, "PUT", &status_path, 200, Value::clone).await;
                assert_eq!(won["metadata"]["resourceVersion"], "8");
                assert_eq!(
                    won["status"]["allocations"],
                    json!({"10.0.0.10": "a-eth0", "10.0.0.11": "b-eth0"})
                );
                let address = answer(&mut h, "POST", &addresses_path(), 201, Value::clone).await;
                assert_eq!(address["spec"]["address"], "10.0.0.11");
                claim_status(&mut h, "b-eth0").await;
                nothing_more(h).await;
            })
        })
        .await;
        assert_eq!(outcome, Outcome::Bound("10.0.0.11".parse().unwrap()));
    }

    /// A crash after the allocation and the IPAddress were written: the
    /// re-run writes no allocation, finds the IPAddress there (409) and binds
    /// the claim to the same address.
    #[tokio::test]
    async fn a_rerun_after_a_crash_binds_the_same_address_without_a_new_allocation() {
        let claim = ours("web-eth0");
        let outcome = bind(&claim, &live(&["web-eth0"]), |mut h| {
            Box::pin(async move {
                answer(&mut h, "GET", &pool_path(), 200, |_| {
                    pool("9", &[("10.0.0.11", "web-eth0")])
                })
                .await;
                let address = answer(&mut h, "POST", &addresses_path(), 409, |_| {
                    failure(409, "AlreadyExists")
                })
                .await;
                assert_eq!(address["spec"]["address"], "10.0.0.11");
                let stored = address.clone();
                answer(
                    &mut h,
                    "GET",
                    &format!("{}/web-eth0", addresses_path()),
                    200,
                    move |_| stored,
                )
                .await;
                claim_status(&mut h, "web-eth0").await;
                nothing_more(h).await;
            })
        })
        .await;
        assert_eq!(outcome, Outcome::Bound("10.0.0.11".parse().unwrap()));
    }

    /// A claim deleted and made again under the same name: the IPAddress of
    /// the old one (its owner gone, not yet collected) is not taken for the
    /// new claim's: it is deleted, and the reconcile fails to be retried.
    #[tokio::test]
    async fn an_address_left_by_an_earlier_claim_of_the_name_is_replaced() {
        let claim = ours("web-eth0");
        let (service, mut h) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
        let server = tokio::spawn(async move {
            answer(&mut h, "GET", &pool_path(), 200, |_| {
                pool("9", &[("10.0.0.11", "web-eth0")])
            })
            .await;
            let sent = answer(&mut h, "POST", &addresses_path(), 409, |_| {
                failure(409, "AlreadyExists")
            })
            .await;
            let mut old = sent.clone();
            old["metadata"]["ownerReferences"][0]["uid"] = json!("uid-of-the-earlier-claim");
            let path = format!("{}/web-eth0", addresses_path());
            answer(&mut h, "GET", &path, 200, move |_| old.clone()).await;
            deleted(&mut h, &path).await;
            nothing_more(h).await;
        });
        let client = Client::new(service, "default");
        let result = bind_claim(&client, &claim, &live(&["web-eth0"])).await;
        drop(client);
        server.await.expect("the server's script");
        assert!(result.is_err(), "retried, not bound: {result:?}");
    }

    #[tokio::test]
    async fn an_exhausted_pool_is_the_claims_condition_and_nothing_is_allocated() {
        let claim = ours("d-eth0");
        let full = [
            ("10.0.0.10", "a-eth0"),
            ("10.0.0.11", "b-eth0"),
            ("10.0.0.12", "c-eth0"),
        ];
        let outcome = bind(
            &claim,
            &live(&["a-eth0", "b-eth0", "c-eth0", "d-eth0"]),
            move |mut h| {
                Box::pin(async move {
                    answer(&mut h, "GET", &pool_path(), 200, |_| pool("3", &full)).await;
                    let status = claim_status(&mut h, "d-eth0").await;
                    let ready = &status["status"]["conditions"][0];
                    assert_eq!(ready["status"], "False");
                    assert_eq!(ready["reason"], "PoolExhausted");
                    assert_eq!(
                        ready["message"],
                        "IPPool banlieue-system/prod: all 3 address(es) are in use"
                    );
                    assert!(status["status"].get("addressRef").is_none());
                    nothing_more(h).await;
                })
            },
        )
        .await;
        assert!(
            matches!(
                outcome,
                Outcome::Unbound {
                    reason: "PoolExhausted",
                    ..
                }
            ),
            "{outcome:?}"
        );
    }

    #[tokio::test]
    async fn a_missing_pool_is_the_claims_condition() {
        let claim = ours("web-eth0");
        let outcome = bind(&claim, &live(&["web-eth0"]), |mut h| {
            Box::pin(async move {
                answer(&mut h, "GET", &pool_path(), 404, |_| {
                    failure(404, "NotFound")
                })
                .await;
                let status = claim_status(&mut h, "web-eth0").await;
                assert_eq!(status["status"]["conditions"][0]["reason"], "PoolNotFound");
                nothing_more(h).await;
            })
        })
        .await;
        assert!(
            matches!(
                outcome,
                Outcome::Unbound {
                    reason: "PoolNotFound",
                    ..
                }
            ),
            "{outcome:?}"
        );
    }

    #[test]
    fn an_unbound_claim_is_retried_with_backoff_a_bound_one_waits_for_a_change() {
        let backoff = crate::controllers::Backoff::default();
        let unbound = Outcome::Unbound {
            reason: reason::POOL_EXHAUSTED,
            message: String::new(),
        };
        let key = || "IPAddressClaim/ns/a".to_string();
        assert_eq!(
            action_for(&unbound, &backoff, key()),
            Action::requeue(std::time::Duration::from_secs(5))
        );
        assert_eq!(
            action_for(&unbound, &backoff, key()),
            Action::requeue(std::time::Duration::from_secs(10)),
            "backing off, not a crash loop"
        );
        let bound = Outcome::Bound("10.0.0.10".parse().unwrap());
        assert_eq!(action_for(&bound, &backoff, key()), Action::await_change());
        assert_eq!(
            action_for(&unbound, &backoff, key()),
            Action::requeue(std::time::Duration::from_secs(5)),
            "a success starts the backoff anew"
        );
    }

    #[tokio::test]
    async fn a_claim_on_another_providers_pool_kind_is_left_alone() {
        let claim = claim("web-eth0", "ipam.cluster.x-k8s.io", "InClusterIPPool");
        let outcome = bind(&claim, &live(&["web-eth0"]), |h| Box::pin(nothing_more(h))).await;
        assert_eq!(outcome, Outcome::NotOurs);
    }

    /// An API server for racing allocators: one pool whose status writes
    /// carry its resourceVersion (a stale one is a 409 Conflict, as a real
    /// API server answers), IPAddresses by name (a second create is a 409).
    /// The first `hold` reads of the pool are answered together, once all
    /// arrived: every allocator reads the same version before any writes.
    /// Returns the pool's final JSON, the addresses made and the conflicts.
    async fn racing_server(mut h: Handle, hold: usize) -> (Value, Vec<Value>, usize) {
        let mut stored = pool("1", &[]);
        let mut version = 1u64;
        let mut addresses: std::collections::BTreeMap<String, Value> = Default::default();
        let mut conflicts = 0;
        let mut held = Vec::new();
        let mut reads = 0;
        let respond =
            |send: tower_test::mock::SendResponse<Response<Body>>, code: u16, body: &Value| {
                send.send_response(
                    Response::builder()
                        .status(code)
                        .body(Body::from(serde_json::to_vec(body).unwrap()))
                        .unwrap(),
                )
            };
        while let Some((request, send)) = h.next_request().await {
            let method = request.method().as_str().to_string();
            let path = request.uri().path().to_string();
            let body = if method == "GET" {
                Value::Null
            } else {
                crate::fixtures::body_json(request).await
            };
            match (method.as_str(), path.as_str()) {
                ("GET", p) if p == pool_path() => {
                    reads += 1;
                    if reads < hold {
                        held.push(send);
                        continue;
                    }
                    for waiting in held.drain(..) {
                        respond(waiting, 200, &stored);
                    }
                    respond(send, 200, &stored);
                }
                ("PUT", p) if p == format!("{}/status", pool_path()) => {
                    if body["metadata"]["resourceVersion"] != json!(version.to_string()) {
                        conflicts += 1;
                        respond(send, 409, &failure(409, "Conflict"));
                        continue;
                    }
                    version += 1;
                    stored["status"] = body["status"].clone();
                    stored["metadata"]["resourceVersion"] = json!(version.to_string());
                    respond(send, 200, &stored);
                }
                ("POST", p) if p == addresses_path() => {
                    let name = body["metadata"]["name"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string();
                    match addresses.entry(name) {
                        std::collections::btree_map::Entry::Occupied(_) => {
                            respond(send, 409, &failure(409, "AlreadyExists"));
                        }
                        std::collections::btree_map::Entry::Vacant(slot) => {
                            slot.insert(body.clone());
                            respond(send, 201, &body);
                        }
                    }
                }
                ("PATCH", p) if p.ends_with("/status") && p.contains("/ipaddressclaims/") => {
                    let name = p.split('/').rev().nth(1).unwrap_or_default().to_string();
                    let mut claim = serde_json::to_value(ours(&name)).unwrap();
                    claim["status"] = body["status"].clone();
                    respond(send, 200, &claim);
                }
                other => panic!("unexpected request {other:?}"),
            }
        }
        (stored, addresses.into_values().collect(), conflicts)
    }

    /// Two claims of one pool reconciled at once by the allocator's
    /// controller (`reconcile_claim`, as the provider role runs it): both
    /// read the pool at the same version and pick its lowest free address;
    /// the API server takes the first write and refuses the second (409), so
    /// the loser reads the pool again and takes the next address. Never one
    /// address for two claims.
    #[tokio::test]
    async fn two_reconciles_racing_for_one_pool_never_get_one_address() {
        let (a, b) = (ours("a-eth0"), ours("b-eth0"));
        let (service, handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
        let server = tokio::spawn(racing_server(handle, 2));
        let ctx = std::sync::Arc::new(Allocator {
            client: Client::new(service, "default"),
            claims: crate::fixtures::store_of(vec![a.clone(), b.clone()]),
            backoff: Default::default(),
        });
        let (ra, rb) = tokio::join!(
            reconcile_claim(std::sync::Arc::new(a), ctx.clone()),
            reconcile_claim(std::sync::Arc::new(b), ctx.clone()),
        );
        assert_eq!(ra.expect("a bound"), Action::await_change());
        assert_eq!(rb.expect("b bound"), Action::await_change());
        drop(ctx);
        let (pool, addresses, conflicts) = server.await.expect("the server");
        assert_eq!(conflicts, 1, "the race happened: one write was refused");
        let mut given: Vec<&str> = addresses
            .iter()
            .map(|a| a["spec"]["address"].as_str().unwrap_or_default())
            .collect();
        given.sort_unstable();
        assert_eq!(given, ["10.0.0.10", "10.0.0.11"], "two addresses");
        let holders: BTreeSet<&str> = pool["status"]["allocations"]
            .as_object()
            .into_iter()
            .flatten()
            .map(|(_, claim)| claim.as_str().unwrap_or_default())
            .collect();
        assert_eq!(holders, BTreeSet::from(["a-eth0", "b-eth0"]));
        for address in &addresses {
            let claim = address["spec"]["claimRef"]["name"]
                .as_str()
                .unwrap_or_default();
            let ip = address["spec"]["address"].as_str().unwrap_or_default();
            assert_eq!(pool["status"]["allocations"][ip], claim, "recorded as made");
        }
    }

    /// Runs `release` of `stored` with `live`; returns its pool status
    /// write (`None`: it wrote nothing).
    async fn released(stored: Value, live: &BTreeSet<String>) -> Option<Value> {
        let stored: IPPool = serde_json::from_value(stored).unwrap();
        let (service, mut h) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
        let server = tokio::spawn(async move {
            let path = format!("{}/status", pool_path());
            let put = match h.next_request().await {
                Some((request, send)) => {
                    assert_eq!(
                        (request.method().as_str(), request.uri().path()),
                        ("PUT", path.as_str())
                    );
                    let body = crate::fixtures::body_json(request).await;
                    send.send_response(
                        Response::builder()
                            .body(Body::from(serde_json::to_vec(&body).unwrap()))
                            .unwrap(),
                    );
                    Some(body)
                }
                None => None,
            };
            nothing_more(h).await;
            put
        });
        let client = Client::new(service, "default");
        let wrote = release(&client, &stored, live).await.unwrap();
        drop(client);
        let put = server.await.unwrap();
        assert_eq!(wrote, put.is_some());
        put
    }

    /// A claim replaced on another pool (its NIC's pool changed before the
    /// clone) keeps its name: its allocation in the old pool is not kept
    /// alive by the new claim, and is released.
    #[tokio::test]
    async fn a_claim_moved_to_another_pool_releases_its_old_allocation() {
        let mut moved = ours("web-eth0");
        moved.spec.pool_ref.name = "lab".into();
        let claims = crate::fixtures::store_of(vec![moved, ours("db-eth0")]);
        let live = live_claims(&claims, NS, "prod");
        assert_eq!(live, BTreeSet::from(["db-eth0".to_string()]));
        let put = released(
            pool("5", &[("10.0.0.10", "web-eth0"), ("10.0.0.11", "db-eth0")]),
            &live,
        )
        .await
        .expect("a write");
        assert_eq!(
            put["status"]["allocations"],
            json!({"10.0.0.11": "db-eth0"})
        );
    }

    #[tokio::test]
    async fn release_drops_the_allocations_of_claims_that_are_gone() {
        let stored = pool(
            "5",
            &[("10.0.0.10", "gone-eth0"), ("10.0.0.11", "kept-eth0")],
        );
        let put = released(stored.clone(), &live(&["kept-eth0"]))
            .await
            .expect("a write");
        assert_eq!(put["metadata"]["resourceVersion"], "5");
        assert_eq!(
            put["status"]["allocations"],
            json!({"10.0.0.11": "kept-eth0"})
        );
        assert_eq!(
            (&put["status"]["used"], &put["status"]["free"]),
            (&json!(1), &json!(2))
        );
        // Nothing to drop: no write.
        assert_eq!(
            released(stored, &live(&["gone-eth0", "kept-eth0"])).await,
            None
        );
    }
}
