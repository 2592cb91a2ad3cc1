//! The CRDs' CEL rules, evaluated the way the API server does (kube-cel), so
//! a typo in a rule or a rule that accepts the wrong thing fails here rather
//! than in a cluster.

use banlieue::crdgen;
use kube_cel::Validator;
use serde_json::{json, Value};

fn schema(kind: &str) -> Value {
    let (_, crd) = crdgen::all()
        .into_iter()
        .find(|(_, c)| c.spec.names.kind == kind)
        .expect("kind");
    let schema = crd.spec.versions[0]
        .schema
        .as_ref()
        .and_then(|s| s.open_api_v3_schema.as_ref())
        .expect("schema");
    serde_json::to_value(schema).expect("json")
}

/// The messages of the rules that reject `object` (given `old` for an update).
fn violations(kind: &str, object: &Value, old: Option<&Value>) -> Vec<String> {
    match Validator::new().validate(&schema(kind), object, old) {
        Ok(()) => Vec::new(),
        Err(errors) => errors
            .into_vec()
            .into_iter()
            .map(|e| format!("{}: {}", e.field_path, e.message))
            .collect(),
    }
}

fn provider(ca_bundle: Value) -> Value {
    json!({
        "apiVersion": "banlieue.io/v1alpha1", "kind": "Provider", "metadata": {"name": "p", "namespace": "banlieue-system"},
        "spec": {
            "providerClassRef": {"name": "vsphere"},
            "connection": {"endpoint": "https://vc/sdk", "credentialsRef": {"name": "c"}, "caBundle": ca_bundle},
        }
    })
}

#[test]
fn ca_bundle_needs_exactly_one_source() {
    let message = "set exactly one of inline, configMapRef or secretRef";
    for one in [
        json!({"inline": "PEM"}),
        json!({"configMapRef": {"name": "ca"}}),
        json!({"secretRef": {"name": "ca"}, "key": "ca.pem"}),
    ] {
        assert_eq!(
            violations("Provider", &provider(one.clone()), None),
            Vec::<String>::new(),
            "{one}"
        );
    }
    for bad in [
        json!({}),
        json!({"inline": "PEM", "secretRef": {"name": "ca"}}),
        json!({"inline": "PEM", "configMapRef": {"name": "a"}, "secretRef": {"name": "b"}}),
    ] {
        let v = violations("Provider", &provider(bad.clone()), None);
        assert_eq!(v.len(), 1, "{bad}: {v:?}");
        assert!(
            v[0].contains("spec.connection.caBundle") && v[0].contains(message),
            "{v:?}"
        );
    }
}

fn vm(class: &str, image: &str) -> Value {
    json!({
        "apiVersion": "banlieue.io/v1alpha1", "kind": "VirtualMachine", "metadata": {"name": "v", "namespace": "ns"},
        "spec": {"classRef": {"name": class}, "imageRef": {"name": image}, "desiredPowerState": "PoweredOn"}
    })
}

#[test]
fn class_and_image_refs_cannot_change() {
    let old = vm("small", "ubuntu");
    assert!(
        violations("VirtualMachine", &old, None).is_empty(),
        "creation is fine"
    );
    let mut powered_off = old.clone();
    powered_off["spec"]["desiredPowerState"] = json!("PoweredOff");
    assert!(
        violations("VirtualMachine", &powered_off, Some(&old)).is_empty(),
        "other fields may change"
    );

    let v = violations("VirtualMachine", &vm("large", "ubuntu"), Some(&old));
    assert_eq!(v.len(), 1, "{v:?}");
    assert!(v[0].contains("classRef is immutable"), "{v:?}");
    let v = violations("VirtualMachine", &vm("small", "kairos"), Some(&old));
    assert!(
        v.len() == 1 && v[0].contains("imageRef is immutable"),
        "{v:?}"
    );
}

/// A class with one interface whose `ipam` is `ipam`.
fn class(ipam: Value) -> Value {
    json!({
        "apiVersion": "banlieue.io/v1alpha1", "kind": "VMClass", "metadata": {"name": "c"},
        "spec": {"hardware": {"cpus": 1, "memoryMiB": 512},
                 "network": {"interfaces": [{"name": "eth0", "networkClass": "prod", "ipam": ipam}]}}
    })
}

#[test]
fn ipam_is_static_or_pool_or_dhcp() {
    assert!(violations("VMClass", &class(json!({})), None).is_empty());
    assert!(violations(
        "VMClass",
        &class(json!({"static": {"address": "10.0.0.2/24"}})),
        None
    )
    .is_empty());
    let v = violations(
        "VMClass",
        &class(json!({"static": {"address": "10.0.0.2/24"}, "pool": {"name": "p"}})),
        None,
    );
    assert!(
        v.len() == 1 && v[0].contains("set at most one of static or pool"),
        "{v:?}"
    );
}

#[test]
fn a_pool_reference_gives_group_and_kind_together() {
    let class = |pool: Value| class(json!({ "pool": pool }));
    for fine in [
        json!({"name": "p"}),
        json!({"name": "p", "apiGroup": "ipam.cluster.x-k8s.io", "kind": "InClusterIPPool"}),
    ] {
        assert_eq!(
            violations("VMClass", &class(fine.clone()), None),
            Vec::<String>::new(),
            "{fine}"
        );
    }
    for half in [
        json!({"name": "p", "kind": "InClusterIPPool"}),
        json!({"name": "p", "apiGroup": "ipam.cluster.x-k8s.io"}),
    ] {
        let v = violations("VMClass", &class(half.clone()), None);
        assert!(
            v.len() == 1 && v[0].contains("set both apiGroup and kind, or neither"),
            "{half}: {v:?}"
        );
    }
}

#[test]
fn every_example_passes_the_cel_rules() {
    let dir = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../deploy/examples");
    for file in banlieue::check::files(&[dir]).expect("examples") {
        let text = std::fs::read_to_string(&file).expect("read");
        for doc in banlieue::check::parse_documents(&text).expect("yaml") {
            let kind = doc["kind"].as_str().unwrap_or_default().to_string();
            if doc["apiVersion"] == "banlieue.io/v1alpha1" {
                assert_eq!(
                    violations(&kind, &doc, None),
                    Vec::<String>::new(),
                    "{}",
                    file.display()
                );
            }
        }
    }
}

fn provider_with_overrides(overrides: Value) -> Value {
    let mut p = provider(json!({"inline": "PEM"}));
    p["spec"]["failureDomainNameOverrides"] = overrides;
    p
}

#[test]
fn failure_domain_overrides_unique_by_pair_and_by_name() {
    let fine = json!([
        {"datacenter": "DC1", "cluster": "C1", "name": "zone-a"},
        {"datacenter": "DC1", "cluster": "C2", "name": "zone-b"},
    ]);
    assert_eq!(
        violations("Provider", &provider_with_overrides(fine), None),
        Vec::<String>::new()
    );
    let one_name = json!([
        {"datacenter": "DC1", "cluster": "C1", "name": "zone-a"},
        {"datacenter": "DC2", "cluster": "C9", "name": "zone-a"},
    ]);
    let v = violations("Provider", &provider_with_overrides(one_name), None);
    assert_eq!(v.len(), 1, "{v:?}");
    assert!(
        v[0].contains("spec.failureDomainNameOverrides")
            && v[0].contains("two overrides give one failure-domain name"),
        "{v:?}"
    );
    let one_pair = json!([
        {"datacenter": "DC1", "cluster": "C1", "name": "zone-a"},
        {"datacenter": "DC1", "cluster": "C1", "name": "zone-b"},
    ]);
    let v = violations("Provider", &provider_with_overrides(one_pair), None);
    assert_eq!(v.len(), 1, "{v:?}");
    assert!(
        v[0].contains("a (datacenter, cluster) pair is listed twice"),
        "{v:?}"
    );
}
