//! `banlieue bootstrap operator`: its `--dry-run` output is the committed
//! `deploy/operator-managed/install.yaml` (drift check), every object in it
//! matches its API schema, and the controller it installs runs a command the
//! binary takes, in operator-managed mode.

use std::path::PathBuf;
use std::process::Command;

use banlieue::bootstrap;
use banlieue::check::parse_documents;
use clap::Parser;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Namespace, Service, ServiceAccount};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;

fn install() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../deploy/operator-managed/install.yaml")
}

#[test]
fn dry_run_prints_the_committed_install() {
    let output = Command::new(env!("CARGO_BIN_EXE_banlieue"))
        .args(["bootstrap", "operator", "--dry-run"])
        .output()
        .expect("run banlieue");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let printed = String::from_utf8(output.stdout).expect("UTF-8");
    assert_eq!(
        printed,
        bootstrap::render(&bootstrap::default_image()).unwrap()
    );
    let committed = std::fs::read_to_string(install()).expect("read install.yaml");
    assert!(
        committed == printed,
        "deploy/operator-managed/install.yaml is stale: run \
         `cargo run -q -p banlieue -- bootstrap operator --dry-run > deploy/operator-managed/install.yaml`"
    );
    // Stable: a second rendering is the same text.
    assert_eq!(
        printed,
        bootstrap::render(&bootstrap::default_image()).unwrap()
    );
}

/// `doc` read as `T` and written back is `doc`: no field `T`'s schema lacks, none mistyped.
fn matches<T: DeserializeOwned + Serialize>(doc: &Value) {
    let typed: T = serde_json::from_value(doc.clone())
        .unwrap_or_else(|e| panic!("{}: {e}", doc["metadata"]["name"]));
    assert_eq!(
        &serde_json::to_value(typed).unwrap(),
        doc,
        "{}",
        doc["kind"]
    );
}

#[test]
fn every_object_of_the_install_matches_its_schema() {
    let docs = parse_documents(&std::fs::read_to_string(install()).unwrap()).unwrap();
    let mut kinds = Vec::new();
    for doc in &docs {
        let kind = doc["kind"].as_str().unwrap_or_default();
        match kind {
            "CustomResourceDefinition" => matches::<CustomResourceDefinition>(doc),
            "Namespace" => matches::<Namespace>(doc),
            "ServiceAccount" => matches::<ServiceAccount>(doc),
            "ClusterRole" => matches::<ClusterRole>(doc),
            "ClusterRoleBinding" => matches::<ClusterRoleBinding>(doc),
            "Role" => matches::<Role>(doc),
            "RoleBinding" => matches::<RoleBinding>(doc),
            "Lease" => matches::<Lease>(doc),
            "Deployment" => matches::<Deployment>(doc),
            "PodDisruptionBudget" => matches::<PodDisruptionBudget>(doc),
            "Service" => matches::<Service>(doc),
            other => panic!("an object of kind {other} the test does not know"),
        }
        kinds.push(kind.to_string());
    }
    assert_eq!(
        kinds
            .iter()
            .filter(|k| *k == "CustomResourceDefinition")
            .count(),
        7
    );
    for kind in [
        "Namespace",
        "Deployment",
        "PodDisruptionBudget",
        "Lease",
        "Role",
    ] {
        assert!(kinds.iter().any(|k| k == kind), "{kind}");
    }
    // The CRDs are the generator's (the same as deploy/crds/).
    for (file, crd) in banlieue::crdgen::all() {
        if !file.starts_with("ipam/") {
            assert!(docs.contains(&serde_json::to_value(crd).unwrap()), "{file}");
        }
    }
}

#[test]
fn the_installed_controller_makes_provider_workloads_with_the_rights_to() {
    let docs = parse_documents(&std::fs::read_to_string(install()).unwrap()).unwrap();
    let deployment = docs.iter().find(|d| d["kind"] == "Deployment").unwrap();
    let container = &deployment["spec"]["template"]["spec"]["containers"][0];
    let args: Vec<String> = serde_json::from_value(container["args"].clone()).unwrap();
    assert_eq!(args, ["controller", "--provider-workloads"]);
    assert_eq!(container["image"], bootstrap::default_image());
    // The binary takes that command line.
    let cli =
        banlieue::cli::Cli::try_parse_from(std::iter::once("banlieue".to_string()).chain(args));
    assert!(cli.is_ok(), "{:?}", cli.err());
    assert_eq!(deployment["spec"]["replicas"], 2);

    let rules_of = |kind: &str| {
        docs.iter()
            .find(|d| d["kind"] == kind && d["metadata"]["name"] == "banlieue-controller")
            .unwrap()["rules"]
            .as_array()
            .unwrap()
            .clone()
    };
    let grants = |rules: &[Value], group: &str, resource: &str, verb: &str| {
        rules.iter().any(|r| {
            r["apiGroups"]
                .as_array()
                .unwrap()
                .iter()
                .any(|g| g == group)
                && r["resources"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|x| x == resource)
                && r["verbs"].as_array().unwrap().iter().any(|v| v == verb)
        })
    };
    let cluster = rules_of("ClusterRole");
    let namespaced = rules_of("Role");
    // Still no Secret anywhere for the controller itself.
    for rules in [&cluster, &namespaced] {
        assert!(!grants(rules, "", "secrets", "get"), "{rules:?}");
    }
    // Binds only the provider ClusterRole, by name.
    let bind = cluster
        .iter()
        .find(|r| r["verbs"] == serde_json::json!(["bind"]))
        .unwrap();
    assert_eq!(
        bind["resourceNames"],
        serde_json::json!(["banlieue-provider-vsphere"])
    );
    assert!(grants(
        &cluster,
        "rbac.authorization.k8s.io",
        "clusterrolebindings",
        "delete"
    ));
    for (group, resource) in [
        ("", "serviceaccounts"),
        ("rbac.authorization.k8s.io", "roles"),
        ("rbac.authorization.k8s.io", "rolebindings"),
        ("coordination.k8s.io", "leases"),
        ("apps", "deployments"),
    ] {
        assert!(grants(&namespaced, group, resource, "patch"), "{resource}");
    }
    assert!(grants(
        &namespaced,
        "rbac.authorization.k8s.io",
        "roles",
        "escalate"
    ));
    // The provider ClusterRole the workloads are bound to is installed, without Secrets.
    let provider_role = docs
        .iter()
        .find(|d| {
            d["kind"] == "ClusterRole" && d["metadata"]["name"] == "banlieue-provider-vsphere"
        })
        .expect("provider ClusterRole");
    assert!(!grants(
        provider_role["rules"].as_array().unwrap(),
        "",
        "secrets",
        "get"
    ));
}
