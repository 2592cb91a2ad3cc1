use std::sync::Arc;
use std::time::Duration;

use serde_json::json;

use super::*;
use crate::controllers::backoff;
use crate::fixtures;
use crate::fixtures::virtualmachine::*;

#[tokio::test]
async fn schedules_and_creates_an_owned_labelled_machine() {
    let vm = guide_vm();
    let result = reconcile_with(
        World::guide(),
        vm,
        Scenario::Schedules {
            events: vec!["Scheduled", "WaitingForProvider"],
        },
    )
    .await;
    assert_eq!(result.unwrap(), Action::await_change());
}

#[tokio::test]
async fn image_not_ready() {
    let mut world = World::guide();
    world.images = vec![fixtures::image(&[])];
    let scenario = Scenario::Unschedulable {
        reason: "ImageNotReady",
        message_contains: "banlieue-system/prod-vsphere: VMImage",
    };
    reconcile_with(world, guide_vm(), scenario).await.unwrap();
}

#[tokio::test]
async fn no_provider_matched() {
    let vm = fixtures::vm(
        "db-prod-01",
        json!({"providerSelector": {"matchLabels": {"dc": "dc9"}}}),
    );
    let scenario = Scenario::Unschedulable {
        reason: "NoProviderMatched",
        message_contains: "labels do not match providerSelector (dc=dc9)",
    };
    reconcile_with(World::guide(), vm, scenario).await.unwrap();
}

#[tokio::test]
async fn tpm_unsupported() {
    let mut vm = guide_vm();
    vm.spec.class_ref.name = "tpm-encrypted".into();
    let scenario = Scenario::Unschedulable {
        reason: "TpmUnsupported",
        message_contains: "does not advertise the \"vtpm\" feature",
    };
    reconcile_with(World::guide(), vm, scenario).await.unwrap();
}

#[tokio::test]
async fn an_image_built_for_another_boot_firmware_is_not_scheduled() {
    let mut world = World::guide();
    world.images[0].spec.template =
        Some(serde_json::from_value(json!({"firmware": "bios"})).unwrap());
    let scenario = Scenario::Unschedulable {
        reason: "FirmwareMismatch",
        message_contains: "VMClass \"db-prod-large\" asks for efi-secure firmware but VMImage \
                           \"ubuntu-22.04-cloudinit\" was built for bios (spec.template.firmware)",
    };
    reconcile_with(world, guide_vm(), scenario).await.unwrap();
}

#[test]
fn firmware_agrees_by_boot_firmware_and_secure_boot_follows_the_class() {
    let built_for = |firmware: Option<&str>| {
        let mut image = fixtures::image(&[]);
        image.spec.template =
            firmware.map(|f| serde_json::from_value(json!({"firmware": f})).unwrap());
        image
    };
    let class = |firmware: &str| {
        let mut class = fixtures::guide_class();
        class.spec.firmware = serde_json::from_value(json!(firmware)).unwrap();
        class
    };
    for (asked, image, mismatch) in [
        ("efi-secure", Some("efi"), false),
        ("efi", Some("efi-secure"), false),
        ("bios", Some("bios"), false),
        ("bios", None, false),
        ("efi", Some("bios"), true),
        ("efi-secure", Some("bios"), true),
        ("bios", Some("efi"), true),
    ] {
        assert_eq!(
            plan::firmware_mismatch(&class(asked), &built_for(image)).is_some(),
            mismatch,
            "class {asked}, image {image:?}"
        );
    }
}

#[tokio::test]
async fn missing_class_is_reported_not_retried() {
    let mut vm = guide_vm();
    vm.spec.class_ref.name = "nope".into();
    let scenario = Scenario::Unschedulable {
        reason: "VMClassNotFound",
        message_contains: "VMClass \"nope\" not found",
    };
    assert_eq!(
        reconcile_with(World::guide(), vm, scenario).await.unwrap(),
        Action::await_change()
    );
}

#[tokio::test]
async fn invalid_spec_is_reported_and_waits_for_a_change() {
    let vm = fixtures::vm(
        "db-prod-01",
        json!({"providerSelector": {"matchExpressions": [{"key": "dc", "operator": "Near", "values": ["x"]}]}}),
    );
    let scenario = Scenario::Unschedulable {
        reason: "InvalidSpec",
        message_contains: "spec.placement.providerSelector",
    };
    assert_eq!(
        reconcile_with(World::guide(), vm, scenario).await.unwrap(),
        Action::await_change()
    );
}

#[tokio::test]
async fn no_write_when_nothing_changed() {
    // The status a previous reconcile wrote, unschedulable: recomputing it changes nothing.
    let mut world = World::guide();
    world.images = vec![fixtures::image(&[])];
    let mut vm = guide_vm();
    let (ctx, _server) = World {
        images: world.images.clone(),
        ..World::guide()
    }
    .context();
    vm.status = Some(plan::plan(&vm, ctx.as_ref(), &crate::conditions::now()).status);
    drop(ctx);
    tokio::time::sleep(Duration::from_millis(1100)).await; // a later "now" must not leak into the status
    reconcile_with(world, vm, Scenario::NoRequests)
        .await
        .unwrap();
}

#[tokio::test]
async fn no_write_when_scheduled_and_mirrored() {
    let vm = guide_vm();
    let mut machine = machine_owned_by(&vm);
    machine.status = Some(
        serde_json::from_value(json!({"powerState": "PoweredOn", "provisioned": true,
        "conditions": [{"type": "Ready", "status": "True", "reason": "Provisioned", "message": "up",
                        "lastTransitionTime": "2025-01-01T00:00:00Z"}]}))
        .unwrap(),
    );
    let mut world = World::guide();
    world.machines = vec![machine.clone()];
    let mut vm = vm;
    let (ctx, _server) = World {
        machines: vec![machine],
        ..World::guide()
    }
    .context();
    vm.status = Some(plan::plan(&vm, ctx.as_ref(), &crate::conditions::now()).status);
    drop(ctx);
    reconcile_with(world, vm, Scenario::NoRequests)
        .await
        .unwrap();
}

#[tokio::test]
async fn existing_machine_is_adopted_not_recreated() {
    let vm = guide_vm();
    let mut machine = machine_owned_by(&vm);
    machine.status = Some(
        serde_json::from_value(json!({"powerState": "PoweredOn", "provisioned": true,
        "ipAddresses": ["10.0.0.7", "fe80::1"], "consoleURL": "https://vc.example/ui/vm-42",
        "instanceUUID": "5012f3a4-0000-4000-8000-000000000042",
        "conditions": [{"type": "Ready", "status": "True", "reason": "Provisioned", "message": "up",
                        "lastTransitionTime": "2025-01-01T00:00:00Z"}]}))
        .unwrap(),
    );
    let mut world = World::guide();
    world.machines = vec![machine];
    reconcile_with(world, vm, Scenario::Adopts).await.unwrap();
}

#[tokio::test]
async fn machine_owned_by_someone_else_is_a_conflict() {
    let vm = guide_vm();
    let mut stranger = fixtures::vm("db-prod-01", json!({}));
    stranger.metadata.uid = Some("another-uid".into());
    let mut world = World::guide();
    world.machines = vec![machine_owned_by(&stranger)];
    let scenario = Scenario::Unschedulable {
        reason: "VSphereMachineConflict",
        message_contains: "not owned by this VirtualMachine",
    };
    reconcile_with(world, vm, scenario).await.unwrap();
}

#[tokio::test]
async fn create_conflict_waits_for_the_cache() {
    let result = reconcile_with(World::guide(), guide_vm(), Scenario::CreateConflict).await;
    assert_eq!(result.unwrap(), Action::requeue(Duration::from_secs(5)));
}

#[tokio::test]
async fn create_failure_is_an_error() {
    let result = reconcile_with(World::guide(), guide_vm(), Scenario::CreateFails).await;
    assert!(matches!(result, Err(Error::Kube(_))), "{result:?}");
}

#[tokio::test]
async fn desired_power_state_is_propagated_to_the_machine() {
    let mut vm = guide_vm();
    let machine = machine_owned_by(&vm);
    vm.spec.desired_power_state = crate::api::PowerState::PoweredOff;
    let mut world = World::guide();
    world.machines = vec![machine];
    let patch = json!({"spec": {"desiredPowerState": "PoweredOff"}});
    reconcile_with(world, vm, Scenario::MachineUpdate(patch))
        .await
        .unwrap();
}

/// A VMClass edit, the update policy and a restart annotation reach the
/// existing VSphereMachine (what the provider then brings the VM to).
#[tokio::test]
async fn a_class_edit_update_policy_and_restart_reach_the_machine() {
    let mut vm = guide_vm();
    let machine = machine_owned_by(&vm);
    let mut world = World::guide();
    world.machines = vec![machine.clone()];
    // Nothing changed: no update.
    let (ctx, _server) = World {
        machines: vec![machine.clone()],
        ..World::guide()
    }
    .context();
    assert_eq!(
        plan::plan(&vm, ctx.as_ref(), &crate::conditions::now()).update,
        None
    );
    drop(ctx);
    world.classes[0].spec.hardware.cpus = 12;
    world.classes[0].spec.hardware.memory_mib = 65536;
    vm.spec.update_policy = Some(crate::api::UpdatePolicy::AllowRestart);
    vm.metadata.annotations = Some(
        [(
            crate::api::RESTART_ANNOTATION.to_string(),
            "2026-12-06T10:00:00Z".to_string(),
        )]
        .into(),
    );
    world.classes[0].spec.hardware.disks[1].size_gib = 600;
    let mut disks = serde_json::to_value(&machine.spec.disks).unwrap();
    disks[1]["sizeGiB"] = json!(600);
    let expected = json!({"spec": {"cpus": 12, "memoryMiB": 65536, "disks": disks,
        "updatePolicy": "AllowRestart", "restartRequestedAt": "2026-12-06T10:00:00Z"}});
    reconcile_with(world, vm, Scenario::MachineUpdate(expected))
        .await
        .unwrap();
}

/// The VirtualMachine shows the machine's pending change and the restart
/// it handled.
#[tokio::test]
async fn the_pending_change_condition_the_host_and_the_restart_handled_are_mirrored() {
    let vm = guide_vm();
    let mut machine = machine_owned_by(&vm);
    machine.status = Some(
        serde_json::from_value(json!({"powerState": "PoweredOn", "provisioned": true,
        "restartedAt": "2026-12-06T10:00:00Z", "host": "esx-01.example.com",
        "conditions": [{"type": "Ready", "status": "True", "reason": "PoweredOn", "message": "up",
                        "lastTransitionTime": "2025-01-01T00:00:00Z"},
                       {"type": "Reconfigured", "status": "False", "reason": "PowerCycleRequired",
                        "message": "vm-9 is to get 4 CPUs", "lastTransitionTime": "2025-01-01T00:00:00Z"}]}))
        .unwrap(),
    );
    let (ctx, _server) = World {
        machines: vec![machine],
        ..World::guide()
    }
    .context();
    let plan = plan::plan(&vm, ctx.as_ref(), &crate::conditions::now());
    let c = crate::conditions::find(&plan.status.conditions, crate::conditions::RECONFIGURED)
        .expect("Reconfigured mirrored");
    assert_eq!(
        (c.status.as_str(), c.reason.as_str()),
        ("False", "PowerCycleRequired")
    );
    assert_eq!(
        plan.status.restarted_at.as_deref(),
        Some("2026-12-06T10:00:00Z")
    );
    assert_eq!(plan.status.host.as_deref(), Some("esx-01.example.com"));
}

#[tokio::test]
async fn errors_back_off_exponentially_per_object() {
    let (ctx, _server) = World::default().context();
    let vm = Arc::new(guide_vm());
    let other = Arc::new(fixtures::vm("other", json!({})));
    let error = Error::Stopped("boom".into());
    let delays: Vec<Action> = (0..4)
        .map(|_| error_policy(vm.clone(), &error, ctx.clone()))
        .collect();
    assert_eq!(
        delays,
        [5, 10, 20, 40]
            .map(|s| Action::requeue(Duration::from_secs(s)))
            .to_vec()
    );
    assert_eq!(
        error_policy(other, &error, ctx.clone()),
        Action::requeue(Duration::from_secs(5)),
        "per object"
    );
    assert_eq!(backoff(30), Duration::from_secs(300), "capped");
}

#[tokio::test]
async fn spread_counts_machines_vms_and_recent_placements_once() {
    let vm = guide_vm();
    let machine = machine_owned_by(&vm);
    let mut scheduled_vm = guide_vm();
    scheduled_vm.status = Some(crate::api::VirtualMachineStatus {
        scheduled: Some(crate::controllers::virtualmachine::build::placement_of(
            &machine,
        )),
        ..Default::default()
    });
    let world = World {
        machines: vec![machine],
        vms: vec![scheduled_vm],
        ..World::guide()
    };
    let (ctx, _server) = world.context();
    if let Ok(mut recent) = ctx.recent.lock() {
        let p = ScheduledPlacement {
            provider: "prod-vsphere".into(),
            provider_namespace: "banlieue-system".into(),
            failure_domain: "fd-recorded".into(),
            ..Default::default()
        };
        recent.insert(
            NamespacedReference {
                namespace: "banlieue-system".into(),
                name: "db-prod-02".into(),
            },
            p,
        );
    }
    let load = ctx.load();
    let key = (
        NamespacedReference {
            namespace: "banlieue-system".into(),
            name: "prod-vsphere".into(),
        },
        "fd-recorded".to_string(),
    );
    assert_eq!(load.get(&key), Some(&2), "{load:?}");
}

/// A VirtualMachine whose machine was cloned with a pool address shows that
/// address (as the guest reports it) and the machine's IP pool condition:
/// a NIC's pool changed after the clone is said on the VirtualMachine too.
#[tokio::test]
async fn the_machines_pool_address_and_ip_pool_condition_are_mirrored() {
    let vm = guide_vm();
    let mut machine = machine_owned_by(&vm);
    machine.status = Some(
        serde_json::from_value(json!({"powerState": "PoweredOn", "provisioned": true,
        "ipAddresses": ["10.0.0.11"],
        "conditions": [
            {"type": "IPAddressesUpToDate", "status": "False", "reason": "PoolChanged",
             "message": "interface eth0: the spec asks for IPPool lab but ...",
             "lastTransitionTime": "2025-01-01T00:00:00Z"},
            {"type": "Ready", "status": "True", "reason": "PoweredOn", "message": "up",
             "lastTransitionTime": "2025-01-01T00:00:00Z"}]}))
        .unwrap(),
    );
    let (ctx, _server) = World {
        machines: vec![machine],
        ..World::guide()
    }
    .context();
    let plan = plan::plan(&vm, ctx.as_ref(), &crate::conditions::now());
    assert_eq!(plan.status.ip_addresses, ["10.0.0.11"]);
    let condition =
        crate::conditions::find(&plan.status.conditions, "IPAddressesUpToDate").expect("mirrored");
    assert_eq!(
        (condition.status.as_str(), condition.reason.as_str()),
        ("False", "PoolChanged")
    );
    assert!(condition.message.starts_with("interface eth0"));
    assert!(crate::conditions::is_true(&plan.status.conditions, "Ready"));
    assert!(
        plan.transitions
            .iter()
            .any(|t| t.type_ == "IPAddressesUpToDate"),
        "an event on the VirtualMachine"
    );
}
