//! Every manifest of the user guide is accepted unchanged: it parses into our
//! types and validates against the generated CRD schema. Broken ones are
//! rejected with a message naming the field.

use std::path::PathBuf;

use banlieue::api::validate;
use banlieue::api::{Provider, VMClass, VMImage, VMSnapshot, VirtualMachine};
use banlieue::check::schema::{schema_of, validate_object};
use banlieue::check::{parse_documents, World};
use banlieue::crdgen;
use serde_json::{json, Value};

fn examples() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../deploy/examples")
}

fn schema_errors(doc: &Value) -> Vec<String> {
    let kind = doc["kind"].as_str().unwrap_or_default();
    let crds = crdgen::all();
    let (_, crd) = crds
        .iter()
        .find(|(_, c)| c.spec.names.kind == kind)
        .expect("a CRD for the kind");
    validate_object(doc, schema_of(crd).expect("schema"))
        .iter()
        .map(ToString::to_string)
        .collect()
}

fn load(text: &str) -> World {
    let mut world = World::default();
    for doc in parse_documents(text).expect("yaml") {
        world.add("test", doc);
    }
    world
}

fn rejection(text: &str) -> String {
    let world = load(text);
    assert_eq!(world.rejected.len(), 1, "exactly one rejection");
    validate::describe(&world.rejected[0].errors)
}

#[test]
fn every_example_parses_and_matches_the_crd_schema() {
    let files = banlieue::check::files(&[examples()]).expect("examples");
    let names: Vec<String> = files
        .iter()
        .filter_map(|f| f.file_name()?.to_str().map(String::from))
        .collect();
    for expected in [
        "01-provider.yaml",
        "02-vmclass.yaml",
        "03-vmimage.yaml",
        "04-virtualmachine.yaml",
        "06-vmsnapshot.yaml",
        "12-vmclass-tpm-encrypted.yaml",
        "13-vmimage-kairos-deferred-install-tpm.yaml",
    ] {
        assert!(
            names.iter().any(|n| n == expected),
            "missing example {expected}"
        );
    }
    let mut kinds = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).expect("read");
        for doc in parse_documents(&text).expect("yaml") {
            let kind = doc["kind"].as_str().unwrap_or_default().to_string();
            let name = format!("{} {kind}", file.display());
            match kind.as_str() {
                "Provider" => {
                    assert!(
                        schema_errors(&doc).is_empty(),
                        "{name}: {:?}",
                        schema_errors(&doc)
                    );
                    let p: Provider = serde_json::from_value(doc.clone()).expect(&name);
                    assert!(validate::provider(&p.spec).is_empty());
                    roundtrip(&doc, &p);
                }
                "VMClass" => {
                    assert!(
                        schema_errors(&doc).is_empty(),
                        "{name}: {:?}",
                        schema_errors(&doc)
                    );
                    let c: VMClass = serde_json::from_value(doc.clone()).expect(&name);
                    assert!(validate::vm_class(&c.spec).is_empty());
                    roundtrip(&doc, &c);
                }
                "VMImage" => {
                    assert!(
                        schema_errors(&doc).is_empty(),
                        "{name}: {:?}",
                        schema_errors(&doc)
                    );
                    let i: VMImage = serde_json::from_value(doc.clone()).expect(&name);
                    assert!(validate::vm_image(&i.spec).is_empty());
                    roundtrip(&doc, &i);
                }
                "VirtualMachine" => {
                    assert!(
                        schema_errors(&doc).is_empty(),
                        "{name}: {:?}",
                        schema_errors(&doc)
                    );
                    let v: VirtualMachine = serde_json::from_value(doc.clone()).expect(&name);
                    assert!(validate::virtual_machine(&v.spec).is_empty());
                    roundtrip(&doc, &v);
                }
                "VMSnapshot" => {
                    assert!(
                        schema_errors(&doc).is_empty(),
                        "{name}: {:?}",
                        schema_errors(&doc)
                    );
                    let s: VMSnapshot = serde_json::from_value(doc.clone()).expect(&name);
                    roundtrip(&doc, &s);
                }
                "Secret" => {}
                other => panic!("{name}: unexpected kind {other}"),
            }
            kinds.push(kind);
        }
    }
    for kind in [
        "Provider",
        "VMClass",
        "VMImage",
        "VirtualMachine",
        "VMSnapshot",
        "Secret",
    ] {
        assert!(kinds.iter().any(|k| k == kind), "no {kind} example");
    }
}

/// What we serialize back still validates, and keeps every field the user wrote.
fn roundtrip<T: serde::Serialize>(original: &Value, typed: &T) {
    let back = serde_json::to_value(typed).expect("serialize");
    assert!(
        schema_errors(&back).is_empty(),
        "{:?}",
        schema_errors(&back)
    );
    assert_subset(&original["spec"], &back["spec"], "spec");
}

fn assert_subset(written: &Value, kept: &Value, path: &str) {
    match (written, kept) {
        (Value::Object(w), Value::Object(k)) => {
            for (key, v) in w {
                assert!(k.contains_key(key), "{path}.{key} lost in the round trip");
                assert_subset(v, &k[key], &format!("{path}.{key}"));
            }
        }
        (Value::Array(w), Value::Array(k)) => {
            assert_eq!(w.len(), k.len(), "{path}");
            for (i, (a, b)) in w.iter().zip(k).enumerate() {
                assert_subset(a, b, &format!("{path}[{i}]"));
            }
        }
        (w, k) => assert_eq!(w, k, "{path}"),
    }
}

#[test]
fn guide_snippets_are_accepted_in_context() {
    let provider_text = std::fs::read_to_string(examples().join("01-provider.yaml")).expect("read");
    let mut provider = parse_documents(&provider_text).expect("yaml").remove(0);

    // Step 3: failure domain name overrides (ADR-0023).
    let overrides = parse_documents(
        "spec:\n  failureDomainNameOverrides:\n    - datacenter: DC-East\n      cluster: Compute-Cluster-A\n      name: cluster-01\n",
    )
    .expect("yaml")
    .remove(0);
    provider["spec"]["failureDomainNameOverrides"] =
        overrides["spec"]["failureDomainNameOverrides"].clone();
    // Step 8: the vtpm feature.
    provider["spec"]["capabilities"]["features"] =
        json!(["hotAddCPU", "hotAddMemory", "efiSecureBoot", "vtpm"]);
    // The commented-out caBundle, with one source.
    provider["spec"]["connection"]["caBundle"] =
        json!({"configMapRef": {"name": "corp-ca-bundle"}});
    assert!(
        schema_errors(&provider).is_empty(),
        "{:?}",
        schema_errors(&provider)
    );
    let p: Provider = serde_json::from_value(provider).expect("provider");
    assert!(validate::provider(&p.spec).is_empty());
    assert_eq!(
        p.spec.connection.ca_bundle.map(|c| c.key).as_deref(),
        Some("ca.crt"),
        "key defaults to ca.crt"
    );

    // Step 3: placement by the friendly failure-domain name.
    let vm_text = std::fs::read_to_string(examples().join("04-virtualmachine.yaml")).expect("read");
    let mut vm = parse_documents(&vm_text).expect("yaml").remove(0);
    vm["spec"]["placement"]["failureDomainSelector"] =
        json!({"matchLabels": {"name": "cluster-01"}});
    assert!(schema_errors(&vm).is_empty(), "{:?}", schema_errors(&vm));
    let _: VirtualMachine = serde_json::from_value(vm).expect("vm");
}

const PROVIDER_HEAD: &str = "apiVersion: banlieue.io/v1alpha1
kind: Provider
metadata: { name: p, namespace: banlieue-system }
spec:
  providerClassRef: { name: vsphere }
  connection:
    endpoint: https://vcenter.example.com/sdk
    credentialsRef: { name: vsphere-creds }
";

#[test]
fn two_ca_bundle_sources_are_rejected_naming_the_field() {
    let text = format!("{PROVIDER_HEAD}    caBundle:\n      configMapRef: {{ name: corp-ca-bundle }}\n      secretRef: {{ name: vcenter-ca }}\n");
    assert_eq!(
        rejection(&text),
        "spec.connection.caBundle: set exactly one of inline, configMapRef or secretRef"
    );
    let text = format!("{PROVIDER_HEAD}    caBundle: {{ key: ca.pem }}\n");
    assert!(rejection(&text).starts_with("spec.connection.caBundle: set exactly one"));
}

#[test]
fn unknown_enum_values_are_rejected_naming_the_field() {
    let class = "apiVersion: banlieue.io/v1alpha1
kind: VMClass
metadata: { name: c }
spec:
  hardware:
    cpus: 2
    memoryMiB: 2048
    disks:
      - { name: root, sizeGiB: 10, storageClass: gold, provisioning: sparse }
  firmware: efi
";
    let message = rejection(class);
    assert!(
        message.starts_with("spec.hardware.disks[0].provisioning: unsupported value \"sparse\""),
        "{message}"
    );

    let vm = "apiVersion: banlieue.io/v1alpha1
kind: VirtualMachine
metadata: { name: v }
spec:
  classRef: { name: c }
  imageRef: { name: i }
  desiredPowerState: Hibernating
";
    assert!(rejection(vm).starts_with("spec.desiredPowerState: unsupported value \"Hibernating\""));

    let image = "apiVersion: banlieue.io/v1alpha1
kind: VMImage
metadata: { name: i }
spec:
  sources: [{ providerClass: vsphere, kind: OVA, ref: x }]
  template: { installMode: later }
";
    let message = rejection(image);
    assert!(
        message.contains("spec.sources[0].kind: unsupported value \"OVA\""),
        "{message}"
    );
    assert!(
        message.contains("spec.template.installMode: unsupported value \"later\""),
        "{message}"
    );
}

#[test]
fn unknown_fields_minimums_and_missing_fields_are_rejected() {
    let class = "apiVersion: banlieue.io/v1alpha1
kind: VMClass
metadata: { name: c }
spec:
  hardware: { cpus: 0, memoryMiB: 2048, gpus: 1 }
";
    let message = rejection(class);
    assert!(
        message.contains("spec.hardware.cpus: must be greater than or equal to 1"),
        "{message}"
    );
    assert!(
        message.contains("spec.hardware.gpus: unknown field"),
        "{message}"
    );

    let vm = "apiVersion: banlieue.io/v1alpha1
kind: VirtualMachine
metadata: { name: v }
spec:
  imageRef: { name: i }
";
    assert_eq!(rejection(vm), "spec.classRef: required field is missing");
}
