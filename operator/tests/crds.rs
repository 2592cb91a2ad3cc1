//! The committed CRDs are exactly what `banlieue crdgen` generates, and carry
//! the API server rules the guide relies on.

use std::path::PathBuf;

use banlieue::crdgen;
use serde_json::{json, Value};

fn crd_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../deploy/crds")
}

#[test]
fn committed_crds_match_the_generator() {
    let rendered = crdgen::render().expect("render");
    let mut on_disk = Vec::new();
    let mut dirs = vec![crd_dir()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).expect("deploy/crds exists") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                dirs.push(path);
            } else if let Ok(file) = path.strip_prefix(crd_dir()) {
                on_disk.push(file.display().to_string());
            }
        }
    }
    on_disk.sort();
    let mut expected: Vec<String> = rendered.iter().map(|(f, _)| f.to_string()).collect();
    expected.sort();
    assert_eq!(
        on_disk, expected,
        "deploy/crds has exactly the generated files"
    );
    for (file, contents) in rendered {
        let committed = std::fs::read_to_string(crd_dir().join(file)).expect("read CRD");
        assert!(
            committed == contents,
            "deploy/crds/{file} is stale: run `cargo run -p banlieue -- crdgen` and commit the result"
        );
    }
}

#[test]
fn committed_api_reference_matches_the_generator() {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(crdgen::REFERENCE);
    let committed = std::fs::read_to_string(&path).expect("docs/crd-reference.md exists");
    assert!(
        committed == crdgen::reference(),
        "{} is stale: run `cargo run -p banlieue -- crdgen` and commit the result",
        crdgen::REFERENCE
    );
}

#[test]
fn the_api_reference_names_every_field_with_its_rules() {
    let text = crdgen::reference();
    for kind in [
        "Provider",
        "VMClass",
        "VMImage",
        "VirtualMachine",
        "VSphereMachine",
    ] {
        assert!(text.contains(&format!("\n## {kind}\n")), "{kind}");
    }
    let line = |path: &str| {
        text.lines()
            .find(|l| l.starts_with(&format!("| `{path}` |")))
            .unwrap_or_else(|| panic!("no row for {path}"))
            .to_string()
    };
    assert!(line("spec.connection.caBundle.key").contains("Default `ca.crt`."));
    assert!(line("spec.connection.caBundle")
        .contains("set exactly one of inline, configMapRef or secretRef"));
    assert!(line("spec.connection.endpoint").contains("| yes |"));
    assert!(
        line("spec.capabilities.storageClasses[].target.datastore").contains("Minimum length 1.")
    );
}

fn schema(kind: &str) -> Value {
    let (_, crd) = crdgen::all()
        .into_iter()
        .find(|(_, c)| c.spec.names.kind == kind)
        .expect("kind");
    serde_json::to_value(&crd.spec.versions[0]).expect("json")
}

#[test]
fn ca_bundle_carries_the_exactly_one_rule() {
    let v = schema("Provider");
    let ca = &v["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["connection"]
        ["properties"]["caBundle"];
    assert_eq!(
        ca["x-kubernetes-validations"],
        json!([{
            "rule": "(has(self.inline) ? 1 : 0) + (has(self.configMapRef) ? 1 : 0) + (has(self.secretRef) ? 1 : 0) == 1",
            "message": "spec.connection.caBundle: set exactly one of inline, configMapRef or secretRef",
        }])
    );
    assert_eq!(ca["properties"]["key"]["default"], "ca.crt");
}

#[test]
fn class_and_image_refs_are_immutable() {
    let v = schema("VirtualMachine");
    let spec = &v["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"];
    for (field, message) in [
        ("classRef", "classRef is immutable"),
        ("imageRef", "imageRef is immutable"),
    ] {
        assert_eq!(
            spec[field]["x-kubernetes-validations"],
            json!([{"rule": "self == oldSelf", "message": message}])
        );
    }
}

#[test]
fn enums_and_minimums_are_in_the_schema() {
    let class = schema("VMClass");
    let spec = &class["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"];
    assert_eq!(
        spec["firmware"]["enum"],
        json!(["bios", "efi", "efi-secure"])
    );
    assert_eq!(
        spec["hardware"]["properties"]["cpus"]["minimum"],
        json!(1.0)
    );
    let disk = &spec["hardware"]["properties"]["disks"]["items"]["properties"];
    assert_eq!(
        disk["provisioning"]["enum"],
        json!(["thin", "thick", "eagerZeroed"])
    );
    assert_eq!(disk["sizeGiB"]["minimum"], json!(1.0));

    let image = schema("VMImage");
    let spec = &image["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"];
    assert_eq!(
        spec["sources"]["items"]["properties"]["kind"]["enum"],
        json!(["Template", "ContentLibraryItem"])
    );
    assert_eq!(
        spec["template"]["properties"]["installMode"]["enum"],
        json!(["immediate", "deferred"])
    );

    let vm = schema("VirtualMachine");
    let spec = &vm["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"];
    assert_eq!(
        spec["desiredPowerState"]["enum"],
        json!(["PoweredOn", "PoweredOff"])
    );
}

#[test]
fn names_scopes_columns_and_status_subresources() {
    let crds = crdgen::all();
    let by_kind = |k: &str| {
        crds.iter()
            .find(|(_, c)| c.spec.names.kind == k)
            .map(|(_, c)| c.clone())
            .expect("kind")
    };
    let columns = |k: &str| -> Vec<String> {
        by_kind(k).spec.versions[0]
            .additional_printer_columns
            .iter()
            .flatten()
            .map(|c| c.name.clone())
            .collect()
    };
    assert_eq!(columns("Provider"), ["CLASS", "READY"]);
    // The guide's columns in its order, then the primary IP address.
    assert_eq!(
        columns("VirtualMachine"),
        ["CLASS", "IMAGE", "PROVIDER", "POWER", "READY", "IP"]
    );
    assert_eq!(
        by_kind("VirtualMachine").spec.names.short_names,
        Some(vec!["vm".to_string()])
    );
    for (kind, scope) in [
        ("Provider", "Namespaced"),
        ("VMClass", "Cluster"),
        ("VMImage", "Cluster"),
        ("VirtualMachine", "Namespaced"),
        ("VSphereMachine", "Namespaced"),
        ("VMSnapshot", "Namespaced"),
        ("IPPool", "Namespaced"),
    ] {
        assert_eq!(by_kind(kind).spec.scope, scope, "{kind}");
        assert_eq!(by_kind(kind).spec.group, "banlieue.io");
        assert_eq!(by_kind(kind).spec.versions[0].name, "v1alpha1");
    }
    for kind in [
        "Provider",
        "VMImage",
        "VirtualMachine",
        "VSphereMachine",
        "VMSnapshot",
        "IPPool",
        "IPAddressClaim",
    ] {
        assert!(
            by_kind(kind).spec.versions[0]
                .subresources
                .as_ref()
                .and_then(|s| s.status.as_ref())
                .is_some(),
            "{kind} has status"
        );
    }
}

/// The section of `kind` in the API reference.
fn section<'a>(text: &'a str, kind: &str) -> &'a str {
    let start = text
        .find(&format!("\n## {kind}\n"))
        .unwrap_or_else(|| panic!("no section for {kind}"));
    let rest = &text[start + 1..];
    let end = rest.find("\n## ").map_or(rest.len(), |e| e + 1);
    &rest[..end]
}

#[test]
fn the_api_reference_lists_every_condition_reason_of_each_kind() {
    let text = crdgen::reference();
    // The guide's troubleshooting table: these keep their names and cases.
    let guide = [
        (
            "Provider",
            &[
                "SecretMissing",
                "SecretInvalid",
                "ConnectFailed",
                "InventoryFailed",
            ][..],
        ),
        (
            "VMImage",
            &[
                "TemplateNotFound",
                "ConnectFailed",
                "LookupFailed",
                "NoVSphereSource",
            ][..],
        ),
        (
            "VirtualMachine",
            &["ImageNotReady", "NoProviderMatched", "TpmUnsupported"][..],
        ),
    ];
    for (kind, reasons) in guide {
        let section = section(&text, kind);
        for reason in reasons {
            assert!(
                section.contains(&format!("\n| `{reason}` | `")),
                "{kind}: the guide's {reason} is listed"
            );
        }
    }
    // Every reason the code sets, the others included, under its kind, with a meaning.
    for kind in [
        "Provider",
        "VMImage",
        "VirtualMachine",
        "VSphereMachine",
        "VMSnapshot",
        "IPPool",
    ] {
        let section = section(&text, kind);
        assert!(section.contains("\n### Condition reasons\n"), "{kind}");
        let (_, table) = banlieue::api::reasons::of_kind(kind).expect("reasons");
        for (reason, condition, _) in table {
            let row = section
                .lines()
                .find(|l| l.starts_with(&format!("| `{reason}` | `{condition}` | ")))
                .unwrap_or_else(|| panic!("{kind}: no row for {reason}"));
            assert!(row.len() > reason.len() + condition.len() + 20, "{row}");
        }
    }
    for reason in [
        "DuplicateFailureDomainName",
        "VCenterUnresponsive",
        "InvalidSpec",
        "CachesNotSynced",
        "WaitingForVSphereMachines",
    ] {
        assert!(
            section(&text, "Provider").contains(&format!("\n| `{reason}` |")),
            "{reason}"
        );
    }
    assert!(
        !text.contains("CABundleInvalid"),
        "a CA bundle problem is the guide's ConnectFailed"
    );
}

/// The IPAM kinds are Cluster API's, by name, group, version and scope, so
/// the shipped CRDs and Cluster API's own are the same resources; the API
/// reference documents banlieue's kinds and only names these.
#[test]
fn the_ipam_contract_kinds_are_cluster_apis() {
    let crds = crdgen::all();
    for (file, kind, plural) in [
        (
            "ipam/ipaddressclaims.yaml",
            "IPAddressClaim",
            "ipaddressclaims",
        ),
        ("ipam/ipaddresses.yaml", "IPAddress", "ipaddresses"),
    ] {
        let (_, crd) = crds.iter().find(|(f, _)| *f == file).expect(file);
        assert_eq!(crd.spec.names.kind, kind);
        assert_eq!(crd.spec.names.plural, plural);
        assert_eq!(crd.spec.group, "ipam.cluster.x-k8s.io");
        assert_eq!(crd.spec.versions[0].name, "v1beta1");
        assert_eq!(crd.spec.scope, "Namespaced");
        let text = crdgen::reference();
        assert!(!text.contains(&format!("\n## {kind}\n")), "{kind}");
        assert!(
            text.contains(&format!("`{kind}` (`deploy/crds/{file}`)")),
            "{kind}"
        );
    }
    let schema = |kind: &str| schema(kind)["schema"]["openAPIV3Schema"].clone();
    assert_eq!(
        schema("IPAddressClaim")["properties"]["spec"]["required"],
        json!(["poolRef"])
    );
    assert_eq!(
        schema("IPAddress")["properties"]["spec"]["required"],
        json!(["address", "claimRef", "poolRef", "prefix"])
    );
    assert_eq!(
        schema("IPPool")["properties"]["spec"]["properties"]["addresses"]["minItems"],
        json!(1)
    );
}
