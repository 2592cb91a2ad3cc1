//! The VSphereMachine controller against a mocked API server (tower-test)
//! and the scripted vCenter: the finalizer comes first, status patches
//! (the task reference before the power-on), events, and a delete that keeps
//! the finalizer until the VM is confirmed gone.

use std::sync::Arc;

use kube::runtime::controller::Action;
use serde_json::{json, Value};

use super::driver::{self, Hooks};
use super::reconcile_machine;
use super::FINALIZER;
use crate::api::VSphereMachine;
use crate::fixtures;
use crate::fixtures::machine;
use crate::fixtures::provider::{credentials, serving_all, Seen, World, RESYNC};
use crate::vsphere;
use crate::vsphere::mock::{MockVSphere, Script};

const MACHINE: &str = "/apis/banlieue.io/v1alpha1/namespaces/ns/vspheremachines/web";

fn vsphere() -> MockVSphere {
    MockVSphere::new(Script {
        password: Some("REPLACE-ME".into()),
        ..Default::default()
    })
}

/// A vCenter whose VM store the test looks into.
fn vsphere_with_machines() -> (MockVSphere, crate::vsphere::mock::MockMachines) {
    let machines = crate::vsphere::mock::MockMachines::new();
    let vsphere = MockVSphere::new(Script {
        password: Some("REPLACE-ME".into()),
        machines: machines.clone(),
        ..Default::default()
    });
    (vsphere, machines)
}

fn world() -> World {
    World {
        providers: vec![fixtures::provider(
            "vc",
            json!({}),
            fixtures::guide_capabilities(),
        )],
        secrets: vec![credentials("REPLACE-ME")],
        ..Default::default()
    }
}

fn with_finalizer(mut m: VSphereMachine) -> VSphereMachine {
    m.metadata.finalizers = Some(vec![FINALIZER.to_string()]);
    m.metadata.uid = Some("0b5c1e2a-6f00-4d7e-9c59-7a9f3c3c1d11".into());
    m.spec.guest_agent = Some("none".into());
    m
}

/// Runs one reconcile of `m` while the API server answers everything; returns
/// the reconcile's result and the requests it made.
async fn reconcile(m: VSphereMachine, vsphere: &MockVSphere) -> (crate::Result<Action>, Seen) {
    reconcile_in(world(), m, vsphere).await
}

fn status_patches(seen: &Seen) -> Vec<&Value> {
    seen.iter()
        .filter(|(m, p, _, _)| m == "PATCH" && p == &format!("{MACHINE}/status"))
        .map(|(_, _, _, b)| &b["status"])
        .collect()
}

fn event_reasons(seen: &Seen) -> Vec<String> {
    seen.iter()
        .filter(|(_, p, _, _)| p.ends_with("/events"))
        .map(|(_, _, _, b)| b["reason"].as_str().unwrap_or_default().to_string())
        .collect()
}

fn finalizer_patches(seen: &Seen) -> Vec<&Value> {
    seen.iter()
        .filter(|(m, p, t, _)| m == "PATCH" && p == MACHINE && t.contains("json-patch"))
        .map(|(_, _, _, b)| b)
        .collect()
}

#[tokio::test]
async fn a_new_machine_gets_the_finalizer_before_anything_else() {
    let vsphere = vsphere();
    let mut m = machine("web");
    m.metadata.uid = Some("uid-1".into());
    let (result, seen) = reconcile(m, &vsphere).await;
    assert_eq!(result.expect("reconcile"), Action::await_change());
    let patches = finalizer_patches(&seen);
    assert_eq!(patches.len(), 1, "{seen:?}");
    assert!(patches[0].to_string().contains(FINALIZER), "{}", patches[0]);
    assert_eq!(seen.len(), 1, "nothing but the finalizer: {seen:?}");
    assert!(
        vsphere.connects().is_empty(),
        "vCenter is not touched before the finalizer is on"
    );
}

#[tokio::test]
async fn a_machine_is_cloned_powered_on_and_its_status_patched() {
    let vsphere = vsphere();
    let (result, seen) = reconcile(with_finalizer(machine("web")), &vsphere).await;
    assert_eq!(
        result.expect("reconcile"),
        Action::requeue(RESYNC),
        "Ready: periodic resync"
    );
    let patches = status_patches(&seen);
    assert!(patches.len() >= 3, "{seen:?}");
    // First the instance UUID and Cloning, then the task reference, before the VM exists.
    assert_eq!(patches[0]["conditions"][0]["reason"], "Cloning");
    let uuid = patches[0]["instanceUUID"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert_eq!(uuid.len(), 36);
    // Then where it goes, before the clone is sent.
    assert_eq!(
        patches[1]["placement"],
        serde_json::json!({
            "resourcePool": "/DC0/host/DC0_C0/Resources",
            "folder": "/DC0/vm/banlieue-vc-dc0-c0",
            "datastore": "/DC0/datastore/LocalDS_0",
        })
    );
    assert!(patches[1]["task"].is_null(), "placed before the clone");
    assert_eq!(patches[2]["task"]["operation"], "clone");
    assert!(patches[2]["task"]["moRef"]
        .as_str()
        .is_some_and(|t| t.starts_with("task-")));
    assert!(patches.iter().any(|p| p["task"]["operation"] == "powerOn"));
    let last = patches.last().copied().unwrap_or(&Value::Null);
    assert_eq!(last["conditions"][0]["status"], "True");
    assert_eq!(last["powerState"], "PoweredOn");
    assert_eq!(last["provisioned"], true);
    assert!(last["consoleURL"]
        .as_str()
        .is_some_and(|u| u.contains("urn:vmomi:VirtualMachine:")));
    assert!(last.get("task").is_none());
    let reasons = event_reasons(&seen);
    for step in ["Cloning", "PoweringOn", "PoweredOn"] {
        assert!(
            reasons.iter().any(|r| r == step),
            "event {step} in {reasons:?}"
        );
    }
    assert!(finalizer_patches(&seen).is_empty());
    assert_eq!(
        vsphere.connects().len(),
        1,
        "one connect (the Provider's session)"
    );
}

/// Records nothing: to set up a VM in the mock before a controller test.
struct Quiet;

impl Hooks for Quiet {
    async fn persist(&mut self, _machine: &VSphereMachine) -> Result<(), crate::Error> {
        Ok(())
    }
}

#[tokio::test]
async fn a_delete_keeps_the_finalizer_until_the_vm_is_confirmed_gone() {
    let (vsphere, machines) = vsphere_with_machines();
    let mut m = with_finalizer(machine("web"));
    driver::reconcile(
        &mut m,
        false,
        &[],
        &machines,
        &mut Quiet,
        &driver::Options::default(),
    )
    .await
    .expect("create");
    assert_eq!(machines.vms().len(), 1);
    m.metadata.deletion_timestamp = Some(crate::conditions::now());

    // vCenter refuses the destroy: the finalizer stays, the reconcile fails (and is retried).
    machines.fail_next(
        "destroy",
        vsphere::Error::fault("NotAuthenticated", "the session is gone"),
    );
    let (result, seen) = reconcile(m.clone(), &vsphere).await;
    assert!(result.is_err(), "{result:?}");
    assert!(
        finalizer_patches(&seen).is_empty(),
        "the finalizer stays: {seen:?}"
    );
    assert_eq!(machines.vms().len(), 1);

    // The retry destroys the VM, then removes the finalizer.
    let (result, seen) = reconcile(m, &vsphere).await;
    assert!(result.is_ok(), "{result:?}");
    assert!(machines.vms().is_empty());
    let patches = finalizer_patches(&seen);
    assert_eq!(patches.len(), 1, "{seen:?}");
    assert!(patches[0].to_string().contains("remove"), "{}", patches[0]);
}

#[tokio::test]
async fn an_unresponsive_vcenter_is_the_machines_condition_and_its_session_is_dropped() {
    let (vsphere, machines) = vsphere_with_machines();
    machines.fail_next(
        "find",
        vsphere::Error::new(
            vsphere::ErrorKind::Unresponsive,
            "looking up the VM by instance UUID: the call deadline (3s) passed before https://vc.example/sdk answered",
        ),
    );
    let m = with_finalizer(machine("web"));
    let (result, seen) = reconcile(m.clone(), &vsphere).await;
    let error = result.expect_err("the reconcile fails, and the error policy backs off");
    assert_eq!(error.label(), "vsphere_unresponsive");
    let patches = status_patches(&seen);
    let last = patches.last().copied().unwrap_or(&Value::Null);
    assert_eq!(last["conditions"][0]["status"], "False", "{seen:?}");
    assert_eq!(last["conditions"][0]["reason"], "VCenterUnresponsive");
    assert!(last["conditions"][0]["message"]
        .as_str()
        .is_some_and(|m| m.contains("the call deadline (3s) passed")));
    assert_eq!(event_reasons(&seen), ["VCenterUnresponsive"]);
    let event = seen
        .iter()
        .find(|(_, p, _, _)| p.ends_with("/events"))
        .map(|(_, _, _, body)| body["type"].clone());
    assert_eq!(event, Some(json!("Warning")));
    assert_eq!(vsphere.unresponsive_sessions(), 1);
    assert!(machines.vms().is_empty(), "nothing cloned on a silence");

    // vCenter answers again: the next reconcile goes on with the lifecycle.
    let (result, seen) = reconcile(m, &vsphere).await;
    assert_eq!(result.expect("reconcile"), Action::requeue(RESYNC));
    assert_eq!(machines.vms().len(), 1);
    let last = status_patches(&seen)
        .last()
        .copied()
        .cloned()
        .unwrap_or_default();
    assert_eq!(last["conditions"][0]["status"], "True");
}

#[tokio::test]
async fn a_machine_whose_provider_is_gone_says_so_and_how_to_let_go() {
    let vsphere = vsphere();
    let mut m = with_finalizer(machine("web"));
    m.metadata.deletion_timestamp = Some(crate::conditions::now());
    let world = World {
        secrets: vec![credentials("REPLACE-ME")],
        ..Default::default()
    };
    let (result, seen) = reconcile_in(world, m, &vsphere).await;
    let error = result.expect_err("retried with backoff");
    assert_eq!(error.label(), "provider_not_found");
    assert!(finalizer_patches(&seen).is_empty(), "the finalizer stays");
    let last = status_patches(&seen)
        .last()
        .copied()
        .cloned()
        .unwrap_or_default();
    let ready = &last["conditions"][0];
    assert_eq!(ready["status"], "False", "{seen:?}");
    assert_eq!(ready["reason"], "ProviderNotFound");
    let message = ready["message"].as_str().unwrap_or_default();
    assert!(
        message.starts_with("Provider banlieue-system/vc not found")
            && message.contains("Recreate the Provider")
            && message.contains(FINALIZER),
        "{message}"
    );
    assert_eq!(event_reasons(&seen), ["ProviderNotFound"]);
    assert!(vsphere.connects().is_empty());
}

fn with_pool_nic(m: VSphereMachine) -> VSphereMachine {
    on_pool(m, "prod")
}

fn on_pool(m: VSphereMachine, pool: &str) -> VSphereMachine {
    fixtures::with_pool_nic(m, pool)
}

const CLAIM: &str =
    "/apis/ipam.cluster.x-k8s.io/v1beta1/namespaces/banlieue-system/ipaddressclaims";

/// A NIC on an IP pool: its claim is made first, and while it is not bound
/// the machine waits (WaitingForIPAddress, backoff) and nothing is cloned.
#[tokio::test]
async fn a_pool_nic_is_claimed_and_nothing_is_cloned_until_the_claim_is_bound() {
    let (vsphere, machines) = vsphere_with_machines();
    let (result, seen) = reconcile(with_pool_nic(with_finalizer(machine("web"))), &vsphere).await;
    assert_eq!(
        result.expect("reconcile"),
        Action::requeue(std::time::Duration::from_secs(5)),
        "retried with backoff"
    );
    let claims: Vec<&Value> = seen
        .iter()
        .filter(|(m, p, _, _)| m == "POST" && p == CLAIM)
        .map(|(_, _, _, b)| b)
        .collect();
    assert_eq!(claims.len(), 1, "{seen:?}");
    assert_eq!(claims[0]["metadata"]["name"], "ns.web.eth0");
    assert_eq!(
        claims[0]["spec"]["poolRef"],
        json!({"apiGroup": "banlieue.io", "kind": "IPPool", "name": "prod"})
    );
    let patches = status_patches(&seen);
    let ready = &patches.last().expect("a status patch")["conditions"][0];
    assert_eq!(ready["reason"], "WaitingForIPAddress");
    assert!(
        ready["message"].as_str().unwrap_or_default().contains(
            "interface eth0: claim banlieue-system/ns.web.eth0 on IPPool prod: not bound yet"
        ),
        "{ready}"
    );
    assert_eq!(machines.calls("clone"), 0, "nothing cloned");
    assert!(machines.vms().is_empty());
}

/// Deleting a machine whose VM is gone deletes its claims (the addresses go
/// back to the pool) before the finalizer is released.
#[tokio::test]
async fn a_deleted_machine_releases_its_claims_once_the_vm_is_gone() {
    let vsphere = vsphere();
    let mut m = with_pool_nic(with_finalizer(machine("web")));
    m.metadata.deletion_timestamp = Some(crate::conditions::now());
    let (result, seen) = reconcile(m, &vsphere).await;
    assert!(result.is_ok(), "{result:?}");
    let deleted = seen
        .iter()
        .position(|(m, p, _, _)| m == "DELETE" && p == &format!("{CLAIM}/ns.web.eth0"))
        .unwrap_or_else(|| panic!("the claim is deleted: {seen:?}"));
    let released = seen
        .iter()
        .position(|(m, p, t, _)| m == "PATCH" && p == MACHINE && t.contains("json-patch"))
        .expect("the finalizer is removed");
    assert!(deleted < released, "the claim first: {seen:?}");
}

/// The network config of the (one) clone request's guestinfo metadata.
fn cloned_network(machines: &crate::vsphere::mock::MockMachines) -> Value {
    let requests = machines.clone_requests();
    let network = requests[0]
        .shape
        .extra_config
        .iter()
        .find(|(k, _)| k == "guestinfo.metadata")
        .and_then(|(_, v)| super::guestinfo::decode(v))
        .and_then(|meta| serde_json::from_str::<Value>(&meta).ok())
        .map(|meta| meta["network"].clone())
        .expect("metadata with a network config");
    match network {
        Value::String(encoded) => super::guestinfo::decode(&encoded)
            .and_then(|text| serde_json::from_str::<Value>(&text).ok())
            .unwrap_or(Value::Null),
        other => other,
    }
}

/// A bound claim: the clone asks for its address exactly as a static one
/// (guestinfo network config: address/prefix, gateway, the pool's DNS).
#[tokio::test]
async fn a_bound_claims_address_is_cloned_into_guestinfo_as_a_static_one() {
    let (vsphere, machines) = vsphere_with_machines();
    let m = on_pool(with_finalizer(machine("web")), "instant");
    let (result, seen) = reconcile(m, &vsphere).await;
    assert!(result.is_ok(), "{result:?}");
    assert_eq!(machines.clone_requests().len(), 1, "{seen:?}");
    let network = cloned_network(&machines);
    let eth0 = &network["ethernets"]["eth0"];
    assert_eq!(eth0["addresses"], json!(["10.0.0.77/24"]), "{network}");
    assert_eq!(eth0["dhcp4"], false);
    assert_eq!(
        eth0["routes"],
        json!([{"to": "default", "via": "10.0.0.1"}])
    );
    assert_eq!(eth0["nameservers"]["addresses"], json!(["10.0.0.53"]));
}

/// Runs one reconcile of `m` in `world` while the API server answers everything.
async fn reconcile_in(
    world: World,
    m: VSphereMachine,
    vsphere: &MockVSphere,
) -> (crate::Result<Action>, Seen) {
    let (ctx, server) = world.context(vsphere.clone());
    let object = serde_json::to_value(&m).unwrap_or_default();
    serving_all(
        ctx.clone(),
        server,
        object,
        reconcile_machine(Arc::new(m), ctx),
    )
    .await
}

/// The claim of `web`'s NIC `nic` on the built-in pool `pool`, bound.
fn bound_claim(nic: &str, pool: &str) -> crate::api::IPAddressClaim {
    let mut m = on_pool(machine("web"), pool);
    m.spec.network_interfaces[0].name = nic.into();
    let mut claim = super::ipclaims::claims_for(&m, "banlieue-system").remove(0);
    claim.status = Some(crate::api::IPAddressClaimStatus {
        address_ref: Some(crate::api::LocalObjectReference {
            name: format!("ns.web.{nic}"),
        }),
        conditions: vec![],
    });
    claim
}

fn claim_requests<'a>(seen: &'a Seen, method: &str) -> Vec<&'a str> {
    seen.iter()
        .filter(|(m, p, _, _)| m == method && p.starts_with(CLAIM))
        .map(|(_, p, _, _)| p.as_str())
        .collect()
}

/// A full pool is the machine's own reason, `PoolExhausted` (a Warning
/// event), not only words in a message; nothing is cloned.
#[tokio::test]
async fn an_exhausted_pool_is_the_machines_reason() {
    let (vsphere, machines) = vsphere_with_machines();
    let (result, seen) = reconcile(on_pool(with_finalizer(machine("web")), "full"), &vsphere).await;
    assert_eq!(
        result.expect("reconcile"),
        Action::requeue(std::time::Duration::from_secs(5)),
        "retried with backoff"
    );
    let patches = status_patches(&seen);
    let ready = &patches.last().expect("a status patch")["conditions"][0];
    assert_eq!(
        (&ready["status"], &ready["reason"]),
        (&json!("False"), &json!("PoolExhausted")),
        "{ready}"
    );
    assert!(
        ready["message"]
            .as_str()
            .unwrap_or_default()
            .contains("claim banlieue-system/ns.web.eth0 on IPPool full: PoolExhausted"),
        "{ready}"
    );
    let event = seen
        .iter()
        .find(|(_, p, _, _)| p.ends_with("/events"))
        .map(|(_, _, _, body)| (body["reason"].clone(), body["type"].clone()));
    assert_eq!(event, Some((json!("PoolExhausted"), json!("Warning"))));
    assert_eq!(machines.calls("clone"), 0, "nothing cloned");
}

/// A pool NIC removed from the spec before anything was cloned: its claim
/// is released (deleted) at once, and the machine is cloned without it.
#[tokio::test]
async fn a_removed_nics_claim_is_released_when_nothing_was_cloned() {
    let (vsphere, machines) = vsphere_with_machines();
    let world = World {
        claims: vec![bound_claim("eth1", "instant")],
        ..world()
    };
    let (result, seen) = reconcile_in(world, with_finalizer(machine("web")), &vsphere).await;
    assert!(result.is_ok(), "{result:?}");
    assert_eq!(
        claim_requests(&seen, "DELETE"),
        [format!("{CLAIM}/ns.web.eth1")]
    );
    assert_eq!(machines.vms().len(), 1, "cloned");
}

/// Once the VM was cloned with a pool address, a NIC removed from the spec
/// (or a NIC whose pool changed) keeps its claim: the guest is configured
/// with that address, which must not go to another VM. The machine says so
/// (IPAddressesUpToDate=False, a Warning), stays Ready, and its delete
/// releases the kept claim once the VM is gone.
#[tokio::test]
async fn after_the_clone_a_removed_or_moved_nics_claim_is_kept_said_and_released_on_delete() {
    let (vsphere, machines) = vsphere_with_machines();
    // eth0 was cloned on the pool `instant`; the spec now has it on `lab`, and
    // eth1's pool NIC is gone.
    let mut m = on_pool(with_finalizer(machine("web")), "instant");
    let world_with_claims = || World {
        claims: vec![
            bound_claim("eth0", "instant"),
            bound_claim("eth1", "instant"),
        ],
        ..world()
    };
    let (result, _) = reconcile_in(
        World {
            claims: vec![bound_claim("eth0", "instant")],
            ..world()
        },
        m.clone(),
        &vsphere,
    )
    .await;
    assert!(result.is_ok(), "{result:?}");
    let uuid = machines.vms()[0].instance_uuid.clone();
    m.status = Some(crate::api::VSphereMachineStatus {
        instance_uuid: Some(uuid),
        ..Default::default()
    });
    m.spec.network_interfaces[0].ipam.pool = Some(crate::api::IpPool {
        name: "lab".into(),
        ..Default::default()
    });

    let (result, seen) = reconcile_in(world_with_claims(), m.clone(), &vsphere).await;
    assert_eq!(result.expect("reconcile"), Action::requeue(RESYNC), "Ready");
    assert!(claim_requests(&seen, "DELETE").is_empty(), "{seen:?}");
    assert!(claim_requests(&seen, "POST").is_empty(), "{seen:?}");
    assert_eq!(machines.calls("clone"), 1, "not cloned again");
    let last = status_patches(&seen)
        .last()
        .copied()
        .cloned()
        .unwrap_or_default();
    let drift = last["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["type"] == "IPAddressesUpToDate")
        .cloned()
        .unwrap_or_else(|| panic!("the condition: {last}"));
    assert_eq!(
        (&drift["status"], &drift["reason"]),
        (&json!("False"), &json!("PoolChanged"))
    );
    let message = drift["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("interface eth0: the spec asks for IPPool lab")
            && message.contains("interface eth1 no longer asks for an IP pool"),
        "{message}"
    );
    let ready = last["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["type"] == "Ready")
        .cloned()
        .unwrap_or_default();
    assert_eq!(ready["status"], "True", "still Ready: {last}");
    let event = seen
        .iter()
        .find(|(_, p, _, b)| p.ends_with("/events") && b["reason"] == "PoolChanged")
        .map(|(_, _, _, body)| body["type"].clone());
    assert_eq!(event, Some(json!("Warning")));

    // Deleted: the VM goes, then both claims, then the finalizer.
    m.metadata.deletion_timestamp = Some(crate::conditions::now());
    let (result, seen) = reconcile_in(world_with_claims(), m, &vsphere).await;
    assert!(result.is_ok(), "{result:?}");
    assert!(machines.vms().is_empty());
    let deleted = claim_requests(&seen, "DELETE");
    assert_eq!(
        deleted,
        [
            format!("{CLAIM}/ns.web.eth0"),
            format!("{CLAIM}/ns.web.eth1")
        ],
        "the kept claim too"
    );
    let last_delete = seen
        .iter()
        .rposition(|(m, p, _, _)| m == "DELETE" && p.starts_with(CLAIM))
        .unwrap_or_default();
    let released = seen
        .iter()
        .position(|(m, p, t, _)| m == "PATCH" && p == MACHINE && t.contains("json-patch"))
        .expect("the finalizer is removed");
    assert!(last_delete < released, "the claims first: {seen:?}");
}

/// A crash between claim and clone: the claim made (and bound) by the run
/// that crashed is found again by the next one, which makes no second claim
/// and clones with that claim's address.
#[tokio::test]
async fn after_a_crash_between_claim_and_clone_the_same_claim_is_cloned_with() {
    let (vsphere, machines) = vsphere_with_machines();
    let world = World {
        claims: vec![bound_claim("eth0", "prod")],
        ..world()
    };
    let m = on_pool(with_finalizer(machine("web")), "prod");
    let (result, seen) = reconcile_in(world, m, &vsphere).await;
    assert!(result.is_ok(), "{result:?}");
    assert!(claim_requests(&seen, "POST").is_empty(), "{seen:?}");
    assert!(claim_requests(&seen, "DELETE").is_empty(), "{seen:?}");
    assert_eq!(machines.clone_requests().len(), 1);
    // The mocked API server's IPAddress of the claim.
    assert_eq!(
        cloned_network(&machines)["ethernets"]["eth0"]["addresses"],
        json!(["10.0.0.77/24"])
    );
}

/// A VM's own cloud-config Secret, in its namespace: read only where a Role
/// grants it (the status says which grant is missing, nothing is cloned),
/// then merged after the image's.
#[tokio::test]
async fn a_vm_s_own_cloud_config_is_read_only_where_a_role_grants_it() {
    let own: k8s_openapi::api::core::v1::Secret = serde_json::from_value(json!({
        "metadata": {"name": "own-cc", "namespace": "ns"},
        "stringData": {"userdata": "#cloud-config\nruncmd: [echo own]\n"},
    }))
    .expect("secret");
    let mut m = with_finalizer(machine("web"));
    m.spec.machine_cloud_config_secret_refs = vec![crate::api::LocalObjectReference {
        name: "own-cc".into(),
    }];
    let run = |granted: Vec<String>| {
        let (vsphere, machines) = vsphere_with_machines();
        let mut w = world();
        w.secrets.push(own.clone());
        w.granted = granted;
        let m = m.clone();
        async move {
            let (result, seen) = reconcile_in(w, m, &vsphere).await;
            (result, seen, machines)
        }
    };
    let (result, seen, machines) = run(vec![]).await;
    assert!(result.is_err(), "{result:?}");
    let message = status_patches(&seen)
        .last()
        .map(|s| s["conditions"][0]["message"].to_string())
        .unwrap_or_default();
    assert!(
        message.contains("ns/own-cc") && message.contains("Role"),
        "{message}"
    );
    assert_eq!(machines.calls("clone"), 0, "nothing cloned");

    let (result, _, machines) = run(vec!["ns".into()]).await;
    assert!(result.is_ok(), "{result:?}");
    let request = machines.clone_requests().remove(0);
    let user = request
        .shape
        .extra_config
        .iter()
        .find(|(k, _)| k == "guestinfo.userdata")
        .and_then(|(_, v)| super::guestinfo::decode(v))
        .unwrap_or_default();
    assert!(user.contains("echo own"), "{user}");
}
