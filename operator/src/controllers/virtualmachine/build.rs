//! The VSphereMachine a scheduled VirtualMachine asks for, built purely from
//! the VirtualMachine, its VMClass and VMImage and the scheduling decision.

use std::collections::BTreeMap;

use kube::api::ObjectMeta;
use kube::Resource;

use super::schedule::needs_tpm;
use crate::api::{
    MachineDisk, MachineNetworkInterface, NamespacedReference, ResolvedNetwork, ResolvedStorage,
    ScheduledPlacement, TemplateRef, VMClass, VMImage, VSphereMachine, VSphereMachineSpec,
    VirtualMachine, MANAGED_BY_LABEL,
};

pub const HOT_ADD_CPU: &str = "hotAddCPU";
pub const HOT_ADD_MEMORY: &str = "hotAddMemory";

/// The VSphereMachine for `vm`: same name and namespace, owned by `vm`
/// (controller reference when `vm` has a UID, i.e. comes from a cluster).
pub fn build(
    vm: &VirtualMachine,
    class: &VMClass,
    image: &VMImage,
    placement: &ScheduledPlacement,
    template: TemplateRef,
) -> VSphereMachine {
    let datastore = |sc: &str| {
        placement
            .storage
            .iter()
            .find(|s| s.storage_class == sc)
            .map(|s| s.datastore.clone())
            .unwrap_or_default()
    };
    let port_group = |nc: &str| {
        placement
            .network
            .iter()
            .find(|n| n.network_class == nc)
            .map(|n| n.port_group.clone())
            .unwrap_or_default()
    };
    let spec = &class.spec;
    let has_feature = |f: &str| spec.features.iter().any(|x| x == f);
    let machine_spec = VSphereMachineSpec {
        provider_ref: NamespacedReference {
            namespace: placement.provider_namespace.clone(),
            name: placement.provider.clone(),
        },
        failure_domain: placement.failure_domain.clone(),
        datacenter: placement.datacenter.clone(),
        cluster: placement.cluster.clone(),
        template,
        cpus: spec.hardware.cpus,
        memory_mib: spec.hardware.memory_mib,
        disks: spec
            .hardware
            .disks
            .iter()
            .map(|d| MachineDisk {
                name: d.name.clone(),
                size_gib: d.size_gib,
                storage_class: d.storage_class.clone(),
                datastore: datastore(&d.storage_class),
                provisioning: d.provisioning,
            })
            .collect(),
        network_interfaces: spec
            .network
            .interfaces
            .iter()
            .map(|n| MachineNetworkInterface {
                name: n.name.clone(),
                network_class: n.network_class.clone(),
                port_group: port_group(&n.network_class),
                ipam: n.ipam.clone(),
            })
            .collect(),
        firmware: spec.firmware,
        vtpm: needs_tpm(class),
        hot_add_cpu: has_feature(HOT_ADD_CPU),
        hot_add_memory: has_feature(HOT_ADD_MEMORY),
        desired_power_state: vm.spec.desired_power_state,
        install_mode: image
            .spec
            .template
            .as_ref()
            .map(|t| t.install_mode)
            .unwrap_or_default(),
        guest_agent: image.spec.guest_agent.clone(),
        cloud_config_secret_refs: image
            .spec
            .cloud_configs
            .iter()
            .map(|c| c.secret_ref.clone())
            .collect(),
    };
    let owner = vm.controller_owner_ref(&());
    VSphereMachine {
        metadata: ObjectMeta {
            name: vm.metadata.name.clone(),
            namespace: vm.metadata.namespace.clone(),
            labels: Some(BTreeMap::from([(
                MANAGED_BY_LABEL.0.to_string(),
                MANAGED_BY_LABEL.1.to_string(),
            )])),
            owner_references: owner.map(|o| vec![o]),
            ..Default::default()
        },
        spec: machine_spec,
        status: None,
    }
}

/// Is `machine` the one `vm` owns? By controller reference UID in a cluster; in
/// `check`, where objects have no UID, by the owner's kind and name.
pub fn is_owned_by(machine: &VSphereMachine, vm: &VirtualMachine) -> bool {
    let owners = machine
        .metadata
        .owner_references
        .as_deref()
        .unwrap_or_default();
    match vm.metadata.uid.as_deref() {
        Some(uid) => owners
            .iter()
            .any(|o| o.controller == Some(true) && o.uid == uid),
        None => {
            owners.is_empty()
                || owners.iter().any(|o| {
                    o.kind == "VirtualMachine" && Some(&o.name) == vm.metadata.name.as_ref()
                })
        }
    }
}

/// The placement recorded in an existing VSphereMachine: adopted when the
/// VirtualMachine's status lost it (a crash between creating the machine and
/// writing the status), so a VM is never placed twice.
pub fn placement_of(machine: &VSphereMachine) -> ScheduledPlacement {
    let spec = &machine.spec;
    let mut storage: Vec<ResolvedStorage> = Vec::new();
    for d in &spec.disks {
        if !storage.iter().any(|s| s.storage_class == d.storage_class) {
            storage.push(ResolvedStorage {
                storage_class: d.storage_class.clone(),
                datastore: d.datastore.clone(),
            });
        }
    }
    let mut network: Vec<ResolvedNetwork> = Vec::new();
    for n in &spec.network_interfaces {
        if !network.iter().any(|x| x.network_class == n.network_class) {
            network.push(ResolvedNetwork {
                network_class: n.network_class.clone(),
                port_group: n.port_group.clone(),
            });
        }
    }
    ScheduledPlacement {
        provider: spec.provider_ref.name.clone(),
        provider_namespace: spec.provider_ref.namespace.clone(),
        failure_domain: spec.failure_domain.clone(),
        datacenter: spec.datacenter.clone(),
        cluster: spec.cluster.clone(),
        storage,
        network,
    }
}
