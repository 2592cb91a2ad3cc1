//! Names derived from a VSphereMachine that must not change across runs: the
//! instance UUID (how the VM is found again after a crash), the VM name, the
//! NICs' MAC addresses, and the console URL.

use sha2::{Digest, Sha256};

use crate::api::VSphereMachine;

/// A name-based UUID (RFC 9562 version 8, SHA-256 of a namespace and the
/// name): the same input always gives the same UUID.
fn name_uuid(name: &str) -> String {
    let mut hasher = Sha256::new();
    hasher.update(b"banlieue.io/vspheremachine\0");
    hasher.update(name.as_bytes());
    let digest = hasher.finalize();
    let mut b = [0u8; 16];
    b.copy_from_slice(&digest[..16]);
    b[6] = (b[6] & 0x0f) | 0x80; // version 8
    b[8] = (b[8] & 0x3f) | 0x80; // RFC variant
    let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    )
}

/// The VM's instance UUID: from the object's UID in a cluster (a re-created
/// object is a new VM), and from provider, namespace and name in `check`,
/// where objects have no UID (so re-runs find the same VM).
pub fn instance_uuid(machine: &VSphereMachine) -> String {
    match machine.metadata.uid.as_deref().filter(|u| !u.is_empty()) {
        Some(uid) => name_uuid(&format!("uid:{uid}")),
        None => name_uuid(&format!(
            "check:{}/{}:{}/{}",
            machine.spec.provider_ref.namespace,
            machine.spec.provider_ref.name,
            machine.metadata.namespace.as_deref().unwrap_or_default(),
            machine.metadata.name.as_deref().unwrap_or_default()
        )),
    }
}

/// The VM's name in vCenter: `<namespace>-<name>`, at most 80 characters
/// (vSphere's limit), shortened with a hash suffix so two long names differ.
pub fn vm_name(machine: &VSphereMachine) -> String {
    let full = format!(
        "{}-{}",
        machine.metadata.namespace.as_deref().unwrap_or("default"),
        machine.metadata.name.as_deref().unwrap_or_default()
    );
    if full.len() <= 80 {
        return full;
    }
    let hash = &name_uuid(&full)[..8];
    let mut cut = 80 - 9;
    while !full.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}-{hash}", &full[..cut])
}

/// The MAC of the `index`-th NIC: in VMware's manual range
/// 00:50:56:00:00:00-00:50:56:3f:ff:ff, from the instance UUID.
pub fn mac_address(instance_uuid: &str, index: usize) -> String {
    let digest = Sha256::digest(format!("{instance_uuid}/nic{index}").as_bytes());
    format!(
        "00:50:56:{:02x}:{:02x}:{:02x}",
        digest[0] & 0x3f,
        digest[1],
        digest[2]
    )
}

/// The vSphere Client's page of a VM.
pub fn console_url(vcenter_host: &str, mo_ref: &str, server_guid: &str) -> String {
    format!(
        "https://{vcenter_host}/ui/app/vm;nav=h/urn:vmomi:VirtualMachine:{mo_ref}:{server_guid}"
    )
}

/// The VM folder of a failure domain.
pub fn folder_name(failure_domain: &str) -> String {
    format!("banlieue-{failure_domain}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{NamespacedReference, VSphereMachineSpec};

    fn machine(ns: &str, name: &str, uid: Option<&str>) -> VSphereMachine {
        let mut m = VSphereMachine::new(
            name,
            VSphereMachineSpec {
                provider_ref: NamespacedReference {
                    namespace: "banlieue-system".into(),
                    name: "vc".into(),
                },
                failure_domain: "fd".into(),
                datacenter: "DC0".into(),
                cluster: "C0".into(),
                template: Default::default(),
                clone_mode: Default::default(),
                cpus: 1,
                memory_mib: 512,
                disks: vec![],
                network_interfaces: vec![],
                firmware: Default::default(),
                vtpm: false,
                hot_add_cpu: false,
                hot_add_memory: false,
                desired_power_state: Default::default(),
                install_mode: Default::default(),
                guest_agent: None,
                cloud_config_secret_refs: vec![],
                update_policy: None,
                restart_requested_at: None,
                hostname: None,
                machine_cloud_config_secret_refs: vec![],
                resource_pool: None,
                folder: None,
            },
        );
        m.metadata.namespace = Some(ns.into());
        m.metadata.uid = uid.map(String::from);
        m
    }

    #[test]
    fn instance_uuid_is_stable_and_distinct() {
        let a = instance_uuid(&machine("ns", "a", None));
        assert_eq!(a, instance_uuid(&machine("ns", "a", None)));
        assert_ne!(a, instance_uuid(&machine("ns", "b", None)));
        assert_ne!(a, instance_uuid(&machine("other", "a", None)));
        let with_uid = instance_uuid(&machine("ns", "a", Some("1234")));
        assert_ne!(a, with_uid);
        assert_eq!(
            with_uid,
            instance_uuid(&machine("x", "y", Some("1234"))),
            "the UID alone decides in a cluster"
        );
        assert_eq!(a.len(), 36);
        assert_eq!(&a[14..15], "8", "version 8: {a}");
    }

    #[test]
    fn vm_names_fit_vsphere_and_stay_distinct() {
        assert_eq!(vm_name(&machine("ns", "web", None)), "ns-web");
        let long_a = vm_name(&machine(
            &"n".repeat(63),
            &format!("{}a", "x".repeat(62)),
            None,
        ));
        let long_b = vm_name(&machine(
            &"n".repeat(63),
            &format!("{}b", "x".repeat(62)),
            None,
        ));
        assert!(long_a.len() <= 80 && long_b.len() <= 80);
        assert_ne!(long_a, long_b);
    }

    #[test]
    fn macs_are_in_the_manual_range_and_per_nic() {
        let uuid = "5a0d3c18-8e4f-8c1b-9d2a-3f7e6b5c4d3e";
        let m0 = mac_address(uuid, 0);
        assert!(m0.starts_with("00:50:56:"));
        let fourth = u8::from_str_radix(&m0[9..11], 16).unwrap_or(0xff);
        assert!(fourth <= 0x3f, "{m0}");
        assert_ne!(m0, mac_address(uuid, 1));
        assert_eq!(m0, mac_address(uuid, 0));
    }

    #[test]
    fn console_url_names_vm_and_server() {
        assert_eq!(
            console_url("vc.example.com", "vm-42", "guid-1"),
            "https://vc.example.com/ui/app/vm;nav=h/urn:vmomi:VirtualMachine:vm-42:guid-1"
        );
    }
}
