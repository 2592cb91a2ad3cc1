//! Cloud-init data for VMware's datasource (`DataSourceVMware`): it reads
//! `guestinfo.userdata` and `guestinfo.metadata`, each with a
//! `.encoding` key (`base64`). The metadata carries the instance id, the
//! host name, and, for static addresses, a network config (version 2)
//! matching each NIC by its fixed MAC address.

use base64::Engine as _;
use k8s_openapi::api::core::v1::Secret;
use serde_json::{json, Map, Value};

use crate::api::VSphereMachine;

/// A key of a cloud-config Secret, from `data` or (in manifests) `stringData`.
fn secret_value(secret: &Secret, key: &str) -> Option<String> {
    if let Some(v) = secret.string_data.as_ref().and_then(|d| d.get(key)) {
        return Some(v.clone());
    }
    let bytes = secret.data.as_ref().and_then(|d| d.get(key))?;
    String::from_utf8(bytes.0.clone()).ok()
}

/// The user data of several Secrets: one as is, several as a MIME multipart
/// archive (cloud-init merges the parts in order).
fn user_data(parts: &[String]) -> Option<String> {
    match parts {
        [] => None,
        [one] => Some(one.clone()),
        many => {
            let boundary = "==BANLIEUE-CLOUD-CONFIG==";
            let mut out = format!(
                "Content-Type: multipart/mixed; boundary=\"{boundary}\"\nMIME-Version: 1.0\n\n"
            );
            for part in many {
                let content_type = if part.starts_with("#!") {
                    "text/x-shellscript"
                } else {
                    "text/cloud-config"
                };
                out.push_str(&format!(
                    "--{boundary}\nContent-Type: {content_type}; charset=\"utf-8\"\n\n{part}\n"
                ));
            }
            out.push_str(&format!("--{boundary}--\n"));
            Some(out)
        }
    }
}

/// The network config (version 2) for the machine's NICs with a static
/// address; `None` when every NIC uses DHCP (cloud-init's default).
pub fn network_config(machine: &VSphereMachine, macs: &[String]) -> Option<Value> {
    let nics = &machine.spec.network_interfaces;
    if nics.iter().all(|n| n.ipam.static_.is_none()) {
        return None;
    }
    let mut ethernets = Map::new();
    for (nic, mac) in nics.iter().zip(macs) {
        let mut eth = Map::new();
        eth.insert("match".into(), json!({ "macaddress": mac }));
        eth.insert("set-name".into(), json!(nic.name));
        match &nic.ipam.static_ {
            None => {
                eth.insert("dhcp4".into(), json!(true));
            }
            Some(ip) => {
                eth.insert("dhcp4".into(), json!(false));
                eth.insert("addresses".into(), json!([ip.address]));
                if let Some(gw) = &ip.gateway {
                    eth.insert("routes".into(), json!([{ "to": "default", "via": gw }]));
                }
                if !ip.nameservers.is_empty() || !ip.search_domains.is_empty() {
                    eth.insert(
                        "nameservers".into(),
                        json!({ "addresses": ip.nameservers, "search": ip.search_domains }),
                    );
                }
            }
        }
        ethernets.insert(nic.name.clone(), Value::Object(eth));
    }
    Some(json!({ "version": 2, "ethernets": ethernets }))
}

/// The `guestinfo.*` extraConfig keys of the clone. `secrets` are the
/// machine's `cloudConfigSecretRefs` (the VMImage's), then its
/// `machineCloudConfigSecretRefs` (the VirtualMachine's), in order: user
/// data parts in that order, later metadata keys winning, and the instance
/// id, host name and network config set here winning over all; a missing
/// one is an error (the caller reports it and does not clone).
pub fn extra_config(
    machine: &VSphereMachine,
    instance_uuid: &str,
    macs: &[String],
    secrets: &[Secret],
) -> Result<Vec<(String, String)>, String> {
    let mut user_parts = Vec::new();
    let mut metadata = Map::new();
    for secret in secrets {
        if let Some(u) =
            secret_value(secret, "userdata").or_else(|| secret_value(secret, "user-data"))
        {
            user_parts.push(u);
        }
        if let Some(m) =
            secret_value(secret, "metadata").or_else(|| secret_value(secret, "meta-data"))
        {
            let name = secret.metadata.name.as_deref().unwrap_or_default();
            let parsed: Value = serde_saphyr::from_str(&m)
                .map_err(|e| format!("Secret {name}: metadata is not YAML or JSON: {e}"))?;
            match parsed {
                Value::Object(map) => metadata.extend(map),
                Value::Null => {}
                _ => return Err(format!("Secret {name}: metadata must be a mapping")),
            }
        }
    }
    // Ours win: the instance id is what tells cloud-init a clone is a new instance.
    metadata.insert("instance-id".into(), json!(instance_uuid));
    let hostname = machine
        .spec
        .hostname
        .as_deref()
        .or(machine.metadata.name.as_deref())
        .unwrap_or_default();
    metadata.insert("local-hostname".into(), json!(hostname));
    if let Some(network) = network_config(machine, macs) {
        metadata.insert("network".into(), network);
    }
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s.as_bytes());
    let mut keys = vec![
        (
            "guestinfo.metadata".to_string(),
            b64(&Value::Object(metadata).to_string()),
        ),
        (
            "guestinfo.metadata.encoding".to_string(),
            "base64".to_string(),
        ),
    ];
    if let Some(user) = user_data(&user_parts) {
        keys.push(("guestinfo.userdata".to_string(), b64(&user)));
        keys.push((
            "guestinfo.userdata.encoding".to_string(),
            "base64".to_string(),
        ));
    }
    Ok(keys)
}

/// Decodes a base64 guestinfo value (for tests and diagnostics).
pub fn decode(value: &str) -> Option<String> {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(value)
        .ok()?;
    String::from_utf8(bytes).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{Ipam, MachineNetworkInterface, StaticIp};
    use crate::fixtures::machine;
    use std::collections::BTreeMap;

    fn secret(name: &str, data: &[(&str, &str)]) -> Secret {
        let mut s = Secret::default();
        s.metadata.name = Some(name.into());
        s.string_data = Some(
            data.iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect::<BTreeMap<_, _>>(),
        );
        s
    }

    fn get<'a>(keys: &'a [(String, String)], k: &str) -> Option<&'a str> {
        keys.iter()
            .find(|(key, _)| key == k)
            .map(|(_, v)| v.as_str())
    }

    /// The merge order: the image's Secrets, then the VM's own; later
    /// metadata keys win, the host name asked for wins over all.
    #[test]
    fn the_vm_s_own_cloud_config_comes_after_the_image_s_and_its_hostname_wins() {
        let mut m = machine("web");
        m.spec.hostname = Some("web-1.example.com".into());
        let image = secret(
            "image",
            &[("metadata", "{region: eu, role: base, local-hostname: x}")],
        );
        let own = secret("own", &[("metadata", "{role: db}")]);
        let keys = extract(&m, &[image, own]);
        assert_eq!(keys["region"], "eu");
        assert_eq!(keys["role"], "db", "the VM's own wins");
        assert_eq!(keys["local-hostname"], "web-1.example.com");
        m.spec.hostname = None;
        assert_eq!(
            extract(&m, &[])["local-hostname"],
            "web",
            "the name by default"
        );
    }

    fn extract(m: &VSphereMachine, secrets: &[Secret]) -> Value {
        let keys = extra_config(m, "u-1", &[], secrets).expect("keys");
        serde_json::from_str(
            &decode(get(&keys, "guestinfo.metadata").unwrap_or_default()).unwrap_or_default(),
        )
        .expect("json")
    }

    #[test]
    fn userdata_and_metadata_are_base64_with_encoding_keys() {
        let m = machine("web");
        let keys = extra_config(
            &m,
            "u-1",
            &[],
            &[secret(
                "cc",
                &[("userdata", "#cloud-config\nhostname: x\n")],
            )],
        )
        .expect("keys");
        assert_eq!(get(&keys, "guestinfo.userdata.encoding"), Some("base64"));
        assert_eq!(get(&keys, "guestinfo.metadata.encoding"), Some("base64"));
        assert_eq!(
            decode(get(&keys, "guestinfo.userdata").unwrap_or_default()).as_deref(),
            Some("#cloud-config\nhostname: x\n")
        );
        let meta: Value = serde_json::from_str(
            &decode(get(&keys, "guestinfo.metadata").unwrap_or_default()).unwrap_or_default(),
        )
        .expect("json");
        assert_eq!(meta["instance-id"], "u-1");
        assert_eq!(meta["local-hostname"], "web");
        assert!(
            meta.get("network").is_none(),
            "DHCP only: no network config"
        );
    }

    #[test]
    fn no_secret_means_no_userdata_key() {
        let keys = extra_config(&machine("web"), "u-1", &[], &[]).expect("keys");
        assert!(get(&keys, "guestinfo.userdata").is_none());
        assert!(get(&keys, "guestinfo.metadata").is_some());
    }

    #[test]
    fn several_secrets_make_a_multipart_archive_and_metadata_merges() {
        let keys = extra_config(
            &machine("web"),
            "u-1",
            &[],
            &[
                secret(
                    "a",
                    &[
                        ("userdata", "#cloud-config\na: 1\n"),
                        ("metadata", "tier: web\ninstance-id: nope\n"),
                    ],
                ),
                secret("b", &[("userdata", "#!/bin/sh\necho hi\n")]),
            ],
        )
        .expect("keys");
        let user = decode(get(&keys, "guestinfo.userdata").unwrap_or_default()).unwrap_or_default();
        assert!(user.starts_with("Content-Type: multipart/mixed"), "{user}");
        assert!(user.contains("text/cloud-config") && user.contains("text/x-shellscript"));
        let meta: Value = serde_json::from_str(
            &decode(get(&keys, "guestinfo.metadata").unwrap_or_default()).unwrap_or_default(),
        )
        .expect("json");
        assert_eq!(meta["tier"], "web");
        assert_eq!(
            meta["instance-id"], "u-1",
            "the instance id is never overridden"
        );
    }

    #[test]
    fn bad_metadata_is_an_error_naming_the_secret() {
        let err = extra_config(
            &machine("web"),
            "u",
            &[],
            &[secret("broken", &[("metadata", "- a\n- b\n")])],
        )
        .unwrap_err();
        assert!(err.contains("broken"), "{err}");
    }

    #[test]
    fn static_addresses_become_network_config_v2_matched_by_mac() {
        let mut m = machine("web");
        m.spec.network_interfaces = vec![
            MachineNetworkInterface {
                name: "eth0".into(),
                network_class: "prod".into(),
                port_group: "VM Network".into(),
                ipam: Ipam {
                    static_: Some(StaticIp {
                        address: "10.0.0.10/24".into(),
                        gateway: Some("10.0.0.1".into()),
                        nameservers: vec!["10.0.0.2".into()],
                        search_domains: vec!["example.com".into()],
                    }),
                    pool: None,
                },
            },
            MachineNetworkInterface {
                name: "eth1".into(),
                network_class: "b".into(),
                port_group: "pg".into(),
                ipam: Ipam::default(),
            },
        ];
        let macs = vec![
            "00:50:56:00:00:01".to_string(),
            "00:50:56:00:00:02".to_string(),
        ];
        let keys = extra_config(&m, "u", &macs, &[]).expect("keys");
        let meta: Value = serde_json::from_str(
            &decode(get(&keys, "guestinfo.metadata").unwrap_or_default()).unwrap_or_default(),
        )
        .expect("json");
        let net = &meta["network"];
        assert_eq!(net["version"], 2);
        assert_eq!(
            net["ethernets"]["eth0"]["match"]["macaddress"],
            "00:50:56:00:00:01"
        );
        assert_eq!(net["ethernets"]["eth0"]["addresses"][0], "10.0.0.10/24");
        assert_eq!(net["ethernets"]["eth0"]["routes"][0]["via"], "10.0.0.1");
        assert_eq!(
            net["ethernets"]["eth0"]["nameservers"]["search"][0],
            "example.com"
        );
        assert_eq!(net["ethernets"]["eth1"]["dhcp4"], true);
    }
}
