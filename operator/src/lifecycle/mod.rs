//! The VSphereMachine lifecycle: clone, reconfigure, power, status mirror,
//! deletion, without ever making a second VM or leaking one.
//!
//! - [`step`]: the pure core (machine + what vCenter says -> next action + status);
//! - [`driver`]: performs the actions through [`Machines`](crate::vsphere::Machines),
//!   writing the status (a clone's task reference first of all) through
//!   [`driver::Hooks`];
//! - [`controller`]: the provider role's VSphereMachine controller (finalizer,
//!   status patches, events); `check --apply` runs the same driver.
//!
//! A VM is known by its instance UUID ([`identity::instance_uuid`]), set at
//! clone time and looked up before any clone; its name is unique in its
//! folder, so even a clone request lost in flight and sent again fails with
//! `DuplicateName` instead of making a twin.

pub mod controller;
pub mod driver;
pub mod guestinfo;
pub mod identity;
pub mod step;

use k8s_openapi::api::core::v1::Secret;

use crate::api::VSphereMachine;
use crate::vsphere::{CloneRequest, ExtraDisk, Nic, Shape};

/// The finalizer that keeps a VSphereMachine until its VM is confirmed gone.
pub const FINALIZER: &str = "banlieue.io/vm-cleanup";

/// The clone of `machine`, with the cloud-config of `secrets` (its
/// `cloudConfigSecretRefs`, in order). An error says what is wrong with the
/// machine's inputs (bad metadata in a Secret).
pub fn clone_request(machine: &VSphereMachine, secrets: &[Secret]) -> Result<CloneRequest, String> {
    let spec = &machine.spec;
    let uuid = identity::instance_uuid(machine);
    let macs: Vec<String> = (0..spec.network_interfaces.len())
        .map(|i| identity::mac_address(&uuid, i))
        .collect();
    let extra_config = guestinfo::extra_config(machine, &uuid, &macs, secrets)?;
    let root = spec.disks.first();
    let shape = Shape {
        cpus: spec.cpus.min(i32::MAX as u32) as i32,
        memory_mib: spec.memory_mib.min(i64::MAX as u64) as i64,
        root_disk_gib: root.map(|d| d.size_gib),
        extra_disks: spec
            .disks
            .iter()
            .skip(1)
            .map(|d| ExtraDisk {
                size_gib: d.size_gib,
                provisioning: d.provisioning,
                datastore: d.datastore.clone(),
            })
            .collect(),
        nics: spec
            .network_interfaces
            .iter()
            .zip(&macs)
            .map(|(n, mac)| Nic {
                port_group: n.port_group.clone(),
                mac_address: mac.clone(),
            })
            .collect(),
        firmware: spec.firmware,
        vtpm: spec.vtpm,
        hot_add_cpu: spec.hot_add_cpu,
        hot_add_memory: spec.hot_add_memory,
        extra_config,
    };
    Ok(CloneRequest {
        name: identity::vm_name(machine),
        instance_uuid: uuid,
        datacenter: spec.datacenter.clone(),
        cluster: spec.cluster.clone(),
        folder: identity::folder_name(&spec.failure_domain),
        template_name: spec.template.name.clone(),
        template_mo_ref: spec.template.mo_ref.clone(),
        datastore: root.map(|d| d.datastore.clone()).filter(|d| !d.is_empty()),
        shape,
    })
}

#[cfg(test)]
pub(crate) mod testing {
    use crate::api::{
        MachineDisk, NamespacedReference, TemplateRef, VSphereMachine, VSphereMachineSpec,
    };

    /// A machine `name` in namespace `ns`: 2 CPUs, 2048 MiB, a 20 GiB root disk.
    pub fn machine(name: &str) -> VSphereMachine {
        let mut m = VSphereMachine::new(
            name,
            VSphereMachineSpec {
                provider_ref: NamespacedReference {
                    namespace: "banlieue-system".into(),
                    name: "vc".into(),
                },
                failure_domain: "vc-dc0-c0".into(),
                datacenter: "DC0".into(),
                cluster: "DC0_C0".into(),
                template: TemplateRef {
                    name: "golden".into(),
                    mo_ref: Some("vm-1".into()),
                },
                cpus: 2,
                memory_mib: 2048,
                disks: vec![MachineDisk {
                    name: "root".into(),
                    size_gib: 20,
                    storage_class: "fast".into(),
                    datastore: "LocalDS_0".into(),
                    provisioning: Default::default(),
                }],
                network_interfaces: vec![],
                firmware: Default::default(),
                vtpm: false,
                hot_add_cpu: false,
                hot_add_memory: false,
                desired_power_state: Default::default(),
                install_mode: Default::default(),
                guest_agent: None,
                cloud_config_secret_refs: vec![],
            },
        );
        m.metadata.namespace = Some("ns".into());
        m
    }
}

#[cfg(test)]
mod controller_tests;
#[cfg(test)]
mod driver_tests;
