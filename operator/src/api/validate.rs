//! Spec checks beyond what the CRD schema says, shared by the controller, the
//! provider role and `check` (where no API server evaluates the CEL rules).
//! An invalid spec is reported in a condition and waits for a change.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use kube::core::Selector;

use crate::api::{
    IpPool, LabelSelector, ProviderSpec, VMClassSpec, VMImageSpec, VirtualMachineSpec,
    CA_BUNDLE_EXACTLY_ONE_MESSAGE, POOL_GROUP_KIND_MESSAGE, STORAGE_TARGET_ONE_MESSAGE,
};

/// One problem, naming the field it is about.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldError {
    pub path: String,
    pub message: String,
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path, self.message)
    }
}

/// Joins errors into one condition message.
pub fn describe(errors: &[FieldError]) -> String {
    errors
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

fn error(path: impl Into<String>, message: impl Into<String>) -> FieldError {
    FieldError {
        path: path.into(),
        message: message.into(),
    }
}

pub fn provider(spec: &ProviderSpec) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let connection = &spec.connection;
    if !(connection.endpoint.starts_with("https://") || connection.endpoint.starts_with("http://"))
    {
        errors.push(error(
            "spec.connection.endpoint",
            format!("{:?} is not an http(s) URL", connection.endpoint),
        ));
    }
    if let Err(message) = connection.call_deadline() {
        errors.push(error("spec.connection.callDeadline", message));
    }
    if let Some(ca) = &connection.ca_bundle {
        let sources = [
            ca.inline.is_some(),
            ca.config_map_ref.is_some(),
            ca.secret_ref.is_some(),
        ];
        if sources.iter().filter(|set| **set).count() != 1 {
            let (path, message) = CA_BUNDLE_EXACTLY_ONE_MESSAGE
                .split_once(": ")
                .unwrap_or(("spec.connection.caBundle", CA_BUNDLE_EXACTLY_ONE_MESSAGE));
            errors.push(error(path, message));
        }
        if connection.insecure_skip_tls_verify {
            errors.push(error(
                "spec.connection.insecureSkipTLSVerify",
                "cannot be combined with caBundle",
            ));
        }
        if ca.key.is_empty() {
            errors.push(error("spec.connection.caBundle.key", "must not be empty"));
        }
    }
    duplicates(
        spec.capabilities
            .storage_classes
            .iter()
            .map(|c| c.name.as_str()),
        "spec.capabilities.storageClasses",
        &mut errors,
    );
    duplicates(
        spec.capabilities
            .network_classes
            .iter()
            .map(|c| c.name.as_str()),
        "spec.capabilities.networkClasses",
        &mut errors,
    );
    if spec.failure_domain_name_overrides.len() > MAX_OVERRIDES {
        errors.push(error(
            "spec.failureDomainNameOverrides",
            format!("at most {MAX_OVERRIDES} entries"),
        ));
    }
    let mut pairs = BTreeSet::new();
    for (i, o) in spec.failure_domain_name_overrides.iter().enumerate() {
        let path = format!("spec.failureDomainNameOverrides[{i}]");
        if !is_dns1123_label(&o.name) {
            errors.push(error(
                format!("{path}.name"),
                format!(
                    "{:?} is not a DNS-1123 label (lower case alphanumerics and '-', at most 63)",
                    o.name
                ),
            ));
        }
        for (field, value) in [("datacenter", &o.datacenter), ("cluster", &o.cluster)] {
            if value.is_empty() || value.chars().count() > 80 {
                errors.push(error(
                    format!("{path}.{field}"),
                    "must be a vSphere name of 1 to 80 characters",
                ));
            }
        }
        if !pairs.insert((o.datacenter.as_str(), o.cluster.as_str())) {
            errors.push(error(
                path.clone(),
                format!(
                    "datacenter {:?} cluster {:?} is listed twice",
                    o.datacenter, o.cluster
                ),
            ));
        }
    }
    for (i, class) in spec.capabilities.storage_classes.iter().enumerate() {
        let target = &class.target;
        if target.datastore.is_empty() == target.datastore_cluster.is_none() {
            let message = STORAGE_TARGET_ONE_MESSAGE.trim_start_matches("target: ");
            errors.push(error(
                format!("spec.capabilities.storageClasses[{i}].target"),
                message,
            ));
        }
    }
    if let Some(placement) = &spec.placement {
        duplicates(
            placement.failure_domains.iter().map(|f| f.name.as_str()),
            "spec.placement.failureDomains",
            &mut errors,
        );
    }
    errors.extend(failure_domain_name_clashes(spec));
    errors
}

/// The most `spec.failureDomainNameOverrides` entries (the CRD's `maxItems`).
pub const MAX_OVERRIDES: usize = 64;

/// Overrides giving one failure-domain name to two clusters: known from the
/// spec alone (an override taking another cluster's generated name shows
/// only once the inventory is walked).
pub fn failure_domain_name_clashes(spec: &ProviderSpec) -> Vec<FieldError> {
    let mut names = BTreeMap::new();
    let mut errors = Vec::new();
    for (i, o) in spec.failure_domain_name_overrides.iter().enumerate() {
        if let Some(first) = names.insert(o.name.as_str(), o) {
            errors.push(error(
                format!("spec.failureDomainNameOverrides[{i}].name"),
                format!(
                    "{:?} is also the name of datacenter {:?} cluster {:?}: one failure-domain name for two clusters",
                    o.name, first.datacenter, first.cluster
                ),
            ));
        }
    }
    errors
}

pub fn vm_class(spec: &VMClassSpec) -> Vec<FieldError> {
    let mut errors = Vec::new();
    duplicates(
        spec.hardware.disks.iter().map(|d| d.name.as_str()),
        "spec.hardware.disks",
        &mut errors,
    );
    duplicates(
        spec.network.interfaces.iter().map(|n| n.name.as_str()),
        "spec.network.interfaces",
        &mut errors,
    );
    for (i, nic) in spec.network.interfaces.iter().enumerate() {
        if nic.ipam.static_.is_some() && nic.ipam.pool.is_some() {
            errors.push(error(
                format!("spec.network.interfaces[{i}].ipam"),
                "set at most one of static or pool (neither for DHCP)",
            ));
        }
        if let Some(pool) = &nic.ipam.pool {
            pool_ref(
                pool,
                &format!("spec.network.interfaces[{i}].ipam.pool"),
                &mut errors,
            );
        }
    }
    if spec.tpm_enabled && spec.firmware == crate::api::Firmware::Bios {
        errors.push(error(
            "spec.tpmEnabled",
            "a virtual TPM needs firmware efi or efi-secure",
        ));
    }
    errors
}

pub fn vm_image(spec: &VMImageSpec) -> Vec<FieldError> {
    let mut errors = Vec::new();
    if spec.sources.is_empty() {
        errors.push(error("spec.sources", "at least one source is required"));
    }
    duplicates(
        spec.sources.iter().map(|s| s.provider_class.as_str()),
        "spec.sources (providerClass)",
        &mut errors,
    );
    errors
}

pub fn virtual_machine(spec: &VirtualMachineSpec) -> Vec<FieldError> {
    let mut errors = Vec::new();
    if let Some(placement) = &spec.placement {
        if let Some(s) = &placement.provider_selector {
            if let Err(e) = selector(s) {
                errors.push(error("spec.placement.providerSelector", e));
            }
        }
        if let Some(s) = &placement.failure_domain_selector {
            if let Err(e) = selector(s) {
                errors.push(error("spec.placement.failureDomainSelector", e));
            }
        }
    }
    if let Some(hostname) = &spec.hostname {
        if hostname.len() > 253 || !hostname.split('.').all(is_dns1123_label) {
            errors.push(error(
                "spec.hostname",
                format!(
                    "{hostname:?} is not a host name (lower-case DNS labels separated by dots)"
                ),
            ));
        }
    }
    duplicates(
        spec.network_overrides.iter().map(|o| o.name.as_str()),
        "spec.networkOverrides",
        &mut errors,
    );
    for (i, o) in spec.network_overrides.iter().enumerate() {
        let path = format!("spec.networkOverrides[{i}].static");
        let ip = &o.static_;
        let address = ip.address.split_once('/').and_then(|(a, p)| {
            let a: std::net::IpAddr = a.parse().ok()?;
            let p: u8 = p.parse().ok()?;
            (p <= if a.is_ipv4() { 32 } else { 128 }).then_some(())
        });
        if address.is_none() {
            errors.push(error(
                format!("{path}.address"),
                format!(
                    "{:?} is not an address with a prefix length (10.0.0.10/24)",
                    ip.address
                ),
            ));
        }
        for (field, value) in ip
            .gateway
            .iter()
            .map(|g| ("gateway", g))
            .chain(ip.nameservers.iter().map(|n| ("nameservers", n)))
        {
            if value.parse::<std::net::IpAddr>().is_err() {
                errors.push(error(
                    format!("{path}.{field}"),
                    format!("{value:?} is not an IP address"),
                ));
            }
        }
    }
    errors
}

/// A VirtualMachine's overrides against its class: each names one of the
/// class's interfaces.
pub fn network_overrides(spec: &VirtualMachineSpec, class: &VMClassSpec) -> Vec<FieldError> {
    spec.network_overrides
        .iter()
        .enumerate()
        .filter(|(_, o)| !class.network.interfaces.iter().any(|n| n.name == o.name))
        .map(|(i, o)| {
            let names: Vec<&str> = class
                .network
                .interfaces
                .iter()
                .map(|n| n.name.as_str())
                .collect();
            error(
                format!("spec.networkOverrides[{i}].name"),
                format!(
                    "the VMClass has no interface {:?} (it has {})",
                    o.name,
                    names.join(", ")
                ),
            )
        })
        .collect()
}

/// A label selector turned into something that can match; an absent selector matches everything.
pub fn selector(selector: &LabelSelector) -> Result<Selector, String> {
    Selector::try_from(selector.clone()).map_err(|e| e.to_string())
}

fn duplicates<'a>(names: impl Iterator<Item = &'a str>, path: &str, errors: &mut Vec<FieldError>) {
    let mut seen = BTreeSet::new();
    for name in names {
        if !seen.insert(name) {
            errors.push(error(path, format!("{name:?} is listed twice")));
        }
    }
}

/// A pool reference's group and kind: both or neither, a DNS subdomain and
/// an `UpperCamelCase` name (what the schema's patterns and rule say).
fn pool_ref(pool: &IpPool, path: &str, errors: &mut Vec<FieldError>) {
    if pool.api_group.is_some() != pool.kind.is_some() {
        errors.push(error(path, POOL_GROUP_KIND_MESSAGE));
    }
    if let Some(group) = &pool.api_group {
        if group.len() > 253 || !group.split('.').all(is_dns1123_label) {
            errors.push(error(
                format!("{path}.apiGroup"),
                format!("{group:?} is not an API group (a DNS subdomain)"),
            ));
        }
    }
    if let Some(kind) = &pool.kind {
        let mut bytes = kind.bytes();
        let camel = bytes.next().is_some_and(|b| b.is_ascii_uppercase())
            && bytes.all(|b| b.is_ascii_alphanumeric());
        if !camel || kind.len() > 63 {
            errors.push(error(
                format!("{path}.kind"),
                format!("{kind:?} is not a kind (UpperCamelCase)"),
            ));
        }
    }
}

pub fn is_dns1123_label(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 63
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !name.starts_with('-')
        && !name.ends_with('-')
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{CaBundle, LocalObjectReference, Provider};

    fn provider_spec() -> ProviderSpec {
        serde_json::from_value::<Provider>(serde_json::json!({
            "apiVersion": "banlieue.io/v1alpha1", "kind": "Provider",
            "metadata": {"name": "p", "namespace": "ns"},
            "spec": {"providerClassRef": {"name": "vsphere"},
                     "connection": {"endpoint": "https://vc/sdk", "credentialsRef": {"name": "creds"}}}
        }))
        .unwrap()
        .spec
    }

    #[test]
    fn ca_bundle_needs_exactly_one_source() {
        let mut spec = provider_spec();
        assert!(provider(&spec).is_empty());

        spec.connection.ca_bundle = Some(CaBundle {
            inline: Some("PEM".into()),
            config_map_ref: Some(LocalObjectReference { name: "ca".into() }),
            key: "ca.crt".into(),
            ..Default::default()
        });
        let errors = provider(&spec);
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert_eq!(errors[0].path, "spec.connection.caBundle");
        assert!(errors[0]
            .message
            .contains("exactly one of inline, configMapRef or secretRef"));

        spec.connection.ca_bundle = Some(CaBundle {
            key: "ca.crt".into(),
            ..Default::default()
        });
        assert_eq!(provider(&spec)[0].path, "spec.connection.caBundle");

        spec.connection.ca_bundle = Some(CaBundle {
            secret_ref: Some(LocalObjectReference { name: "ca".into() }),
            key: "ca.crt".into(),
            ..Default::default()
        });
        assert!(provider(&spec).is_empty());
    }

    #[test]
    fn a_storage_target_is_a_datastore_or_a_datastore_cluster_and_placements_are_unique() {
        let mut spec = provider_spec();
        spec.capabilities.storage_classes = serde_json::from_value(serde_json::json!([
            {"name": "a", "target": {"datastore": "ds"}},
            {"name": "b", "target": {"datastoreCluster": "pod"}},
            {"name": "c", "target": {"datastore": "ds", "datastoreCluster": "pod"}},
            {"name": "d", "target": {}},
        ]))
        .unwrap();
        spec.placement = serde_json::from_value(serde_json::json!({
            "failureDomains": [{"name": "z", "folder": "f"}, {"name": "z", "resourcePool": "p"}],
        }))
        .unwrap();
        let paths: Vec<String> = provider(&spec).into_iter().map(|e| e.to_string()).collect();
        assert_eq!(
            paths,
            [
                "spec.capabilities.storageClasses[2].target: set exactly one of datastore or datastoreCluster",
                "spec.capabilities.storageClasses[3].target: set exactly one of datastore or datastoreCluster",
                "spec.placement.failureDomains: \"z\" is listed twice",
            ]
        );
    }

    #[test]
    fn call_deadline_defaults_to_a_minute_and_must_be_a_sane_interval() {
        let mut spec = provider_spec();
        assert_eq!(
            spec.connection.call_deadline(),
            Ok(std::time::Duration::from_secs(60))
        );
        spec.connection.call_deadline = Some("1m30s".into());
        assert_eq!(
            spec.connection.call_deadline(),
            Ok(std::time::Duration::from_secs(90))
        );
        assert!(provider(&spec).is_empty());
        for bad in ["soon", "500ms", "2h", "0s"] {
            spec.connection.call_deadline = Some(bad.into());
            let errors = provider(&spec);
            assert_eq!(errors.len(), 1, "{bad}: {errors:?}");
            assert_eq!(errors[0].path, "spec.connection.callDeadline", "{bad}");
        }
        spec.connection.call_deadline = Some("2h".into());
        assert_eq!(
            describe(&provider(&spec)),
            "spec.connection.callDeadline: \"2h\" is out of range: from 1s to 30m"
        );
    }

    #[test]
    fn insecure_and_ca_bundle_conflict() {
        let mut spec = provider_spec();
        spec.connection.insecure_skip_tls_verify = true;
        spec.connection.ca_bundle = Some(CaBundle {
            inline: Some("PEM".into()),
            key: "ca.crt".into(),
            ..Default::default()
        });
        assert_eq!(
            provider(&spec)[0].path,
            "spec.connection.insecureSkipTLSVerify"
        );
    }

    #[test]
    fn override_names_must_be_labels_and_pairs_unique() {
        let mut spec = provider_spec();
        spec.failure_domain_name_overrides = serde_json::from_value(serde_json::json!([
            {"datacenter": "DC", "cluster": "C", "name": "Cluster_01"},
            {"datacenter": "DC", "cluster": "C", "name": "cluster-02"},
        ]))
        .unwrap();
        let errors = describe(&provider(&spec));
        assert!(
            errors.contains(
                "spec.failureDomainNameOverrides[0].name: \"Cluster_01\" is not a DNS-1123 label"
            ),
            "{errors}"
        );
        assert!(errors.contains("spec.failureDomainNameOverrides[1]: datacenter \"DC\" cluster \"C\" is listed twice"), "{errors}");
    }

    /// Caught from the spec alone: neither cluster needs to exist in vCenter.
    #[test]
    fn two_overrides_cannot_give_one_name() {
        let mut spec = provider_spec();
        spec.failure_domain_name_overrides = serde_json::from_value(serde_json::json!([
            {"datacenter": "DC1", "cluster": "C1", "name": "zone-a"},
            {"datacenter": "DC2", "cluster": "C2", "name": "zone-b"},
            {"datacenter": "DC3", "cluster": "C3", "name": "zone-a"},
        ]))
        .unwrap();
        let errors = provider(&spec);
        assert_eq!(errors.len(), 1, "{}", describe(&errors));
        assert_eq!(
            describe(&errors),
            "spec.failureDomainNameOverrides[2].name: \"zone-a\" is also the name of datacenter \"DC1\" cluster \"C1\": one failure-domain name for two clusters"
        );
    }

    #[test]
    fn endpoint_must_be_a_url() {
        let mut spec = provider_spec();
        spec.connection.endpoint = "vcenter.example.com".into();
        assert_eq!(provider(&spec)[0].path, "spec.connection.endpoint");
    }

    #[test]
    fn class_checks() {
        let spec: VMClassSpec = serde_json::from_value(serde_json::json!({
            "hardware": {"cpus": 2, "memoryMiB": 2048, "disks": [
                {"name": "root", "sizeGiB": 10, "storageClass": "gold"},
                {"name": "root", "sizeGiB": 10, "storageClass": "gold"}]},
            "network": {"interfaces": [{"name": "eth0", "networkClass": "prod",
                "ipam": {"static": {"address": "10.0.0.2/24"}, "pool": {"name": "p"}}}]},
            "tpmEnabled": true
        }))
        .unwrap();
        let errors = describe(&vm_class(&spec));
        assert!(
            errors.contains("spec.hardware.disks: \"root\" is listed twice"),
            "{errors}"
        );
        assert!(
            errors.contains("spec.network.interfaces[0].ipam: set at most one"),
            "{errors}"
        );
        assert!(
            errors.contains("spec.tpmEnabled: a virtual TPM needs firmware efi"),
            "{errors}"
        );
    }

    #[test]
    fn a_pool_reference_names_both_group_and_kind_or_neither() {
        let class = |pool: serde_json::Value| -> String {
            let spec: VMClassSpec = serde_json::from_value(serde_json::json!({
                "hardware": {"cpus": 2, "memoryMiB": 2048},
                "network": {"interfaces": [{"name": "eth0", "networkClass": "prod",
                    "ipam": {"pool": pool}}]},
            }))
            .unwrap();
            describe(&vm_class(&spec))
        };
        assert_eq!(class(serde_json::json!({"name": "p"})), "");
        assert_eq!(
            class(
                serde_json::json!({"name": "p", "apiGroup": "ipam.cluster.x-k8s.io", "kind": "InClusterIPPool"})
            ),
            ""
        );
        assert_eq!(
            class(serde_json::json!({"name": "p", "kind": "InClusterIPPool"})),
            format!("spec.network.interfaces[0].ipam.pool: {POOL_GROUP_KIND_MESSAGE}")
        );
        assert_eq!(
            class(serde_json::json!({"name": "p", "apiGroup": "ipam.cluster.x-k8s.io"})),
            format!("spec.network.interfaces[0].ipam.pool: {POOL_GROUP_KIND_MESSAGE}")
        );
        assert_eq!(
            class(serde_json::json!({"name": "p", "apiGroup": "IPAM..io", "kind": "ipPool"})),
            "spec.network.interfaces[0].ipam.pool.apiGroup: \"IPAM..io\" is not an API group (a DNS subdomain); \
             spec.network.interfaces[0].ipam.pool.kind: \"ipPool\" is not a kind (UpperCamelCase)"
        );
    }

    #[test]
    fn a_pool_reference_defaults_to_the_builtin_kind() {
        let pool: IpPool = serde_json::from_value(serde_json::json!({"name": "p"})).unwrap();
        assert_eq!(pool.group_kind(), ("banlieue.io", "IPPool"));
        assert!(pool.is_builtin());
        let other: IpPool = serde_json::from_value(serde_json::json!(
            {"name": "p", "apiGroup": "ipam.cluster.x-k8s.io", "kind": "InClusterIPPool"}
        ))
        .unwrap();
        assert_eq!(
            other.group_kind(),
            ("ipam.cluster.x-k8s.io", "InClusterIPPool")
        );
        assert!(!other.is_builtin());
    }

    #[test]
    fn selector_operator_must_be_known() {
        let spec: VirtualMachineSpec = serde_json::from_value(serde_json::json!({
            "classRef": {"name": "c"}, "imageRef": {"name": "i"},
            "placement": {"providerSelector": {"matchExpressions": [{"key": "dc", "operator": "Near", "values": ["a"]}]}}
        }))
        .unwrap();
        let errors = virtual_machine(&spec);
        assert_eq!(errors[0].path, "spec.placement.providerSelector");
    }

    #[test]
    fn a_virtual_machine_s_hostname_and_overrides_are_checked() {
        let vm: VirtualMachineSpec = serde_json::from_value(serde_json::json!({
            "classRef": {"name": "c"}, "imageRef": {"name": "i"},
            "hostname": "Web_1",
            "networkOverrides": [
                {"name": "eth0", "static": {"address": "10.0.0.11/24", "gateway": "10.0.0.1"}},
                {"name": "eth0", "static": {"address": "10.0.0.12", "nameservers": ["dns"]}},
                {"name": "eth9", "static": {"address": "10.0.0.13/33"}}
            ]
        }))
        .expect("spec");
        let text = describe(&virtual_machine(&vm));
        for part in [
            "spec.hostname",
            "\"eth0\" is listed twice",
            "spec.networkOverrides[1].static.address",
            "spec.networkOverrides[1].static.nameservers",
            "spec.networkOverrides[2].static.address",
        ] {
            assert!(text.contains(part), "{part} in {text}");
        }
        assert!(!text.contains("networkOverrides[0]"), "{text}");
        let class: VMClassSpec = crate::fixtures::guide_class().spec;
        let text = describe(&network_overrides(&vm, &class));
        assert!(
            text.contains("spec.networkOverrides[2].name") && text.contains("it has eth0"),
            "{text}"
        );
        let mut ok = vm.clone();
        ok.hostname = Some("web-1.example.com".into());
        ok.network_overrides.truncate(1);
        assert!(virtual_machine(&ok).is_empty());
        assert!(network_overrides(&ok, &class).is_empty());
    }

    #[test]
    fn dns_labels() {
        assert!(is_dns1123_label("cluster-01"));
        assert!(!is_dns1123_label("-a"));
        assert!(!is_dns1123_label(&"a".repeat(64)));
        assert!(!is_dns1123_label(""));
    }
}
