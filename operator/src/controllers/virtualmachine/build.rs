//! The VSphereMachine a scheduled VirtualMachine asks for, built purely from
//! the VirtualMachine, its VMClass and VMImage and the scheduling decision.

use std::collections::BTreeMap;

use kube::api::ObjectMeta;
use kube::Resource;

use super::schedule::needs_tpm;
use crate::api::{
    CloneMode, Disk, Ipam, MachineDisk, MachineNetworkInterface, NamespacedReference,
    ResolvedNetwork, ResolvedStorage, ScheduledPlacement, TemplateRef, UpdatePolicy, VMClass,
    VMImage, VSphereMachine, VSphereMachineSpec, VirtualMachine, MANAGED_BY_LABEL,
    RESTART_ANNOTATION,
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
            .map(|s| (s.datastore.clone(), s.datastore_cluster.clone()))
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
        clone_mode: CloneMode::resolve(spec.clone_mode, image.spec.clone_mode),
        cpus: spec.hardware.cpus,
        memory_mib: spec.hardware.memory_mib,
        disks: spec
            .hardware
            .disks
            .iter()
            .map(|d| machine_disk(d, datastore(&d.storage_class)))
            .collect(),
        network_interfaces: spec
            .network
            .interfaces
            .iter()
            .map(|n| MachineNetworkInterface {
                name: n.name.clone(),
                network_class: n.network_class.clone(),
                port_group: port_group(&n.network_class),
                // This VM's own address, in place of the class's.
                ipam: match vm.spec.network_overrides.iter().find(|o| o.name == n.name) {
                    Some(o) => Ipam {
                        static_: Some(o.static_.clone()),
                        pool: None,
                    },
                    None => n.ipam.clone(),
                },
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
        update_policy: vm.spec.update_policy,
        restart_requested_at: restart_requested_at(vm),
        hostname: vm.spec.hostname.clone(),
        machine_cloud_config_secret_refs: vm
            .spec
            .cloud_configs
            .iter()
            .map(|c| c.secret_ref.clone())
            .collect(),
        resource_pool: placement.resource_pool.clone(),
        folder: placement.folder.clone(),
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

/// A class's disk as the machine has it, on `datastore` (a datastore, or
/// the datastore cluster to choose one from).
fn machine_disk(
    disk: &Disk,
    (datastore, datastore_cluster): (String, Option<String>),
) -> MachineDisk {
    MachineDisk {
        name: disk.name.clone(),
        size_gib: disk.size_gib,
        storage_class: disk.storage_class.clone(),
        datastore,
        datastore_cluster,
        provisioning: disk.provisioning,
    }
}

/// The restart the VirtualMachine asks for: its annotation's value.
fn restart_requested_at(vm: &VirtualMachine) -> Option<String> {
    vm.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(RESTART_ANNOTATION))
        .filter(|v| !v.is_empty())
        .cloned()
}

/// What an existing VSphereMachine's spec takes after its creation from its
/// VirtualMachine and VMClass: the class's CPUs, memory and disks (a class edit),
/// the update policy and the restart asked for. All of them, when any differs.
#[derive(Clone, Debug, PartialEq)]
pub struct MachineUpdate {
    pub cpus: u32,
    pub memory_mib: u64,
    /// The class's disks, on the datastores the machine already uses for
    /// their storage classes.
    pub disks: Vec<MachineDisk>,
    pub update_policy: Option<UpdatePolicy>,
    pub restart_requested_at: Option<String>,
}

impl MachineUpdate {
    /// The update `machine` needs, if any; the class's shape when the class
    /// is known (the machine keeps its own otherwise).
    pub fn of(
        vm: &VirtualMachine,
        class: Option<&VMClass>,
        machine: &VSphereMachine,
    ) -> Option<MachineUpdate> {
        let spec = &machine.spec;
        let datastore = |name: &str, storage_class: &str| {
            spec.disks
                .iter()
                .find(|d| d.name == name)
                .or_else(|| spec.disks.iter().find(|d| d.storage_class == storage_class))
                .map(|d| (d.datastore.clone(), d.datastore_cluster.clone()))
                .unwrap_or_default()
        };
        let wanted = MachineUpdate {
            cpus: class.map_or(spec.cpus, |c| c.spec.hardware.cpus),
            memory_mib: class.map_or(spec.memory_mib, |c| c.spec.hardware.memory_mib),
            disks: match class {
                Some(c) => c
                    .spec
                    .hardware
                    .disks
                    .iter()
                    .map(|d| machine_disk(d, datastore(&d.name, &d.storage_class)))
                    .collect(),
                None => spec.disks.clone(),
            },
            update_policy: vm.spec.update_policy,
            restart_requested_at: restart_requested_at(vm),
        };
        let current = MachineUpdate {
            cpus: spec.cpus,
            memory_mib: spec.memory_mib,
            disks: spec.disks.clone(),
            update_policy: spec.update_policy,
            restart_requested_at: spec.restart_requested_at.clone(),
        };
        (wanted != current).then_some(wanted)
    }

    pub fn apply(&self, spec: &mut VSphereMachineSpec) {
        spec.cpus = self.cpus;
        spec.memory_mib = self.memory_mib;
        spec.disks = self.disks.clone();
        spec.update_policy = self.update_policy;
        spec.restart_requested_at = self.restart_requested_at.clone();
    }

    /// The JSON merge patch of the machine's spec (`null` removes a field).
    pub fn patch(&self) -> serde_json::Value {
        serde_json::json!({ "spec": {
            "cpus": self.cpus,
            "memoryMiB": self.memory_mib,
            "disks": self.disks,
            "updatePolicy": self.update_policy,
            "restartRequestedAt": self.restart_requested_at,
        }})
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
                datastore_cluster: d.datastore_cluster.clone(),
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
        resource_pool: spec.resource_pool.clone(),
        folder: spec.folder.clone(),
        storage,
        network,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures;

    #[test]
    fn the_class_clone_mode_wins_over_the_image_s_and_full_is_the_default() {
        let vm = fixtures::vm("web", serde_json::json!({}));
        let mut class = fixtures::guide_class();
        let mut image = fixtures::image(&[]);
        let mode = |class: &VMClass, image: &VMImage| {
            build(
                &vm,
                class,
                image,
                &ScheduledPlacement::default(),
                TemplateRef::default(),
            )
            .spec
            .clone_mode
        };
        assert_eq!(mode(&class, &image), CloneMode::Full, "neither sets it");
        image.spec.clone_mode = Some(CloneMode::Linked);
        assert_eq!(mode(&class, &image), CloneMode::Linked, "the image's");
        class.spec.clone_mode = Some(CloneMode::Full);
        assert_eq!(mode(&class, &image), CloneMode::Full, "the class's wins");
        image.spec.clone_mode = None;
        class.spec.clone_mode = Some(CloneMode::Linked);
        assert_eq!(mode(&class, &image), CloneMode::Linked, "the class's alone");
    }
}
