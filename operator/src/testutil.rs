//! Builders for tests: objects from JSON the way users write them.

use serde_json::{json, Value};

use crate::api::{Provider, VMClass, VMImage, VirtualMachine};

pub fn provider(name: &str, labels: Value, capabilities: Value) -> Provider {
    serde_json::from_value(json!({
        "apiVersion": "banlieue.io/v1alpha1", "kind": "Provider",
        "metadata": {"name": name, "namespace": "banlieue-system", "labels": labels, "generation": 1},
        "spec": {
            "providerClassRef": {"name": "vsphere"},
            "connection": {"endpoint": "https://vc.example/sdk", "credentialsRef": {"name": "vsphere-creds"}},
            "capabilities": capabilities,
        }
    }))
    .expect("test provider")
}

/// The guide's capabilities: gold on ds-fast-01, prod on vmnet-prod, three features.
pub fn guide_capabilities() -> Value {
    json!({
        "storageClasses": [{"name": "gold", "target": {"datastore": "ds-fast-01"}}],
        "networkClasses": [{"name": "prod", "target": {"portGroup": "vmnet-prod"}}],
        "features": ["hotAddCPU", "hotAddMemory", "efiSecureBoot"],
    })
}

/// A failure domain offering gold and prod.
pub fn failure_domain(name: &str, datacenter: &str, cluster: &str) -> Value {
    json!({
        "name": name, "datacenter": datacenter, "cluster": cluster,
        "labels": {"name": name, "datacenter": datacenter, "cluster": cluster},
        "storageClasses": ["gold"], "networkClasses": ["prod"],
    })
}

/// Marks `provider` Ready with these failure domains.
pub fn ready(mut provider: Provider, failure_domains: Vec<Value>) -> Provider {
    provider.status = Some(
        serde_json::from_value(json!({
            "failureDomains": failure_domains,
            "conditions": [{"type": "Ready", "status": "True", "reason": "Connected", "message": "ok",
                            "lastTransitionTime": "2025-01-01T00:00:00Z"}],
        }))
        .expect("test provider status"),
    );
    provider
}

pub fn guide_class() -> VMClass {
    serde_json::from_value(json!({
        "apiVersion": "banlieue.io/v1alpha1", "kind": "VMClass", "metadata": {"name": "db-prod-large"},
        "spec": {
            "hardware": {"cpus": 8, "memoryMiB": 32768, "disks": [
                {"name": "root", "sizeGiB": 80, "storageClass": "gold", "provisioning": "thin"},
                {"name": "data", "sizeGiB": 500, "storageClass": "gold", "provisioning": "eagerZeroed"}]},
            "network": {"interfaces": [{"name": "eth0", "networkClass": "prod", "ipam": {}}]},
            "firmware": "efi-secure",
            "features": ["hotAddCPU", "hotAddMemory", "efiSecureBoot"],
        }
    }))
    .expect("test class")
}

pub fn tpm_class() -> VMClass {
    serde_json::from_value(json!({
        "apiVersion": "banlieue.io/v1alpha1", "kind": "VMClass", "metadata": {"name": "tpm-encrypted"},
        "spec": {
            "hardware": {"cpus": 4, "memoryMiB": 8192, "disks": [{"name": "root", "sizeGiB": 60, "storageClass": "gold"}]},
            "network": {"interfaces": [{"name": "eth0", "networkClass": "prod", "ipam": {}}]},
            "firmware": "efi", "features": ["vtpm"], "tpmEnabled": true,
        }
    }))
    .expect("test class")
}

/// The guide's image, ready on the given providers (namespace banlieue-system).
pub fn image(ready_on: &[&str]) -> VMImage {
    let per_provider: Vec<Value> = ready_on
        .iter()
        .map(|p| json!({"provider": p, "namespace": "banlieue-system", "ready": true, "reason": "TemplateFound",
                        "templates": [{"datacenter": "DC1", "name": "ubuntu-22.04-cloudinit", "moRef": "vm-42"}]}))
        .collect();
    serde_json::from_value(json!({
        "apiVersion": "banlieue.io/v1alpha1", "kind": "VMImage", "metadata": {"name": "ubuntu-22.04-cloudinit"},
        "spec": {"osFamily": "linux", "sources": [{"providerClass": "vsphere", "kind": "Template", "ref": "ubuntu-22.04-cloudinit"}]},
        "status": {"perProvider": per_provider},
    }))
    .expect("test image")
}

pub fn vm(name: &str, placement: Value) -> VirtualMachine {
    serde_json::from_value(json!({
        "apiVersion": "banlieue.io/v1alpha1", "kind": "VirtualMachine",
        "metadata": {"name": name, "namespace": "banlieue-system", "uid": format!("uid-{name}"), "generation": 1},
        "spec": {"classRef": {"name": "db-prod-large"}, "imageRef": {"name": "ubuntu-22.04-cloudinit"},
                 "placement": placement, "desiredPowerState": "PoweredOn"},
    }))
    .expect("test vm")
}
