//! What a VSphereMachine asks of vCenter, resolved: the clone request (VM
//! name, instance UUID, resource pool, folder, datastore or datastore
//! cluster, template, shape, cloud-init guestinfo).

use k8s_openapi::api::core::v1::Secret;

use super::{guestinfo, identity};
use crate::api::VSphereMachine;
use crate::vsphere::{CloneRequest, ExtraDisk, Nic, Shape};

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
    let linked = spec.clone_mode.is_linked();
    // A linked clone's root disk is a child of the template's: its size and
    // provisioning are the template's.
    let root_shape = root.filter(|_| !linked);
    let shape = Shape {
        cpus: spec.cpus.min(i32::MAX as u32) as i32,
        memory_mib: spec.memory_mib.min(i64::MAX as u64) as i64,
        root_disk_gib: root_shape.map(|d| d.size_gib),
        root_disk_provisioning: root_shape.map(|d| d.provisioning),
        extra_disks: spec
            .disks
            .iter()
            .skip(1)
            .map(|d| ExtraDisk {
                size_gib: d.size_gib,
                provisioning: d.provisioning,
                datastore: d.datastore.clone(),
                datastore_cluster: d.datastore_cluster.clone(),
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
        folder: spec
            .folder
            .clone()
            .unwrap_or_else(|| identity::folder_name(&spec.failure_domain)),
        folder_is_path: spec.folder.is_some(),
        resource_pool: spec.resource_pool.clone(),
        template_name: spec.template.name.clone(),
        template_mo_ref: spec.template.mo_ref.clone(),
        datastore: root.map(|d| d.datastore.clone()).filter(|d| !d.is_empty()),
        datastore_cluster: root.and_then(|d| d.datastore_cluster.clone()),
        placement: None,
        linked,
        shape,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{MachineDisk, Provisioning};

    #[test]
    fn the_root_disk_is_cloned_with_its_provisioning_the_others_made_with_theirs() {
        let mut m = crate::fixtures::machine("web");
        m.spec.disks[0].provisioning = Provisioning::EagerZeroed;
        m.spec.disks.push(MachineDisk {
            name: "data".into(),
            size_gib: 3,
            storage_class: "fast".into(),
            datastore: "LocalDS_0".into(),
            datastore_cluster: None,
            provisioning: Provisioning::Thick,
        });
        let request = clone_request(&m, &[]).expect("request");
        assert_eq!(
            (
                request.shape.root_disk_gib,
                request.shape.root_disk_provisioning
            ),
            (Some(20), Some(Provisioning::EagerZeroed))
        );
        assert_eq!(request.shape.extra_disks.len(), 1);
        assert_eq!(
            request.shape.extra_disks[0].provisioning,
            Provisioning::Thick
        );

        m.spec.disks.clear();
        let request = clone_request(&m, &[]).expect("request");
        assert_eq!(request.shape.root_disk_provisioning, None, "no disk asked");
    }

    #[test]
    fn a_linked_clone_keeps_the_template_s_root_disk_and_adds_the_others() {
        let mut m = crate::fixtures::machine("web");
        m.spec.clone_mode = crate::api::CloneMode::Linked;
        m.spec.disks.push(MachineDisk {
            name: "data".into(),
            size_gib: 3,
            storage_class: "fast".into(),
            datastore: "LocalDS_0".into(),
            datastore_cluster: None,
            provisioning: Provisioning::Thick,
        });
        let request = clone_request(&m, &[]).expect("request");
        assert!(request.linked);
        assert_eq!(
            (
                request.shape.root_disk_gib,
                request.shape.root_disk_provisioning
            ),
            (None, None),
            "the root disk is a child of the template's"
        );
        assert_eq!(request.shape.extra_disks.len(), 1);
        assert_eq!(request.datastore.as_deref(), Some("LocalDS_0"));
    }
}
