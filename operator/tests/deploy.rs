//! deploy/: least privilege and the wiring the guide documents.

use std::path::PathBuf;

use banlieue::check::{files, parse_documents};
use serde_json::Value;

fn deploy() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../deploy")
}

fn documents() -> Vec<(String, Value)> {
    let mut docs = Vec::new();
    for file in files(&[deploy()]).expect("deploy/") {
        let text = std::fs::read_to_string(&file).expect("read");
        for doc in parse_documents(&text).unwrap_or_else(|e| panic!("{}: {e}", file.display())) {
            docs.push((file.display().to_string(), doc));
        }
    }
    docs
}

fn of_kind<'a>(docs: &'a [(String, Value)], kind: &str) -> Vec<&'a (String, Value)> {
    docs.iter().filter(|(_, d)| d["kind"] == kind).collect()
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .into_iter()
        .flatten()
        .filter_map(|s| s.as_str().map(String::from))
        .collect()
}

/// Does a rule reach core Secrets (directly or by wildcard)?
fn grants_secrets(rule: &Value) -> bool {
    let groups = strings(&rule["apiGroups"]);
    let resources = strings(&rule["resources"]);
    (groups.iter().any(|g| g.is_empty() || g == "*"))
        && resources.iter().any(|r| r == "secrets" || r == "*")
}

#[test]
fn no_cluster_role_grants_secrets() {
    let docs = documents();
    let roles = of_kind(&docs, "ClusterRole");
    assert!(roles.len() >= 2, "controller and provider ClusterRoles");
    for (file, role) in roles {
        for rule in role["rules"].as_array().into_iter().flatten() {
            assert!(
                !grants_secrets(rule),
                "{file}: ClusterRole grants Secrets: {rule}"
            );
        }
    }
    // And no ClusterRole is bound per namespace to smuggle Secrets in: Secret access only via a Role.
    for (file, role) in of_kind(&docs, "Role") {
        if role["rules"]
            .as_array()
            .into_iter()
            .flatten()
            .any(grants_secrets)
        {
            assert_eq!(role["metadata"]["namespace"], "banlieue-system", "{file}");
        }
    }
}

#[test]
fn provider_reads_secrets_only_in_its_namespace_and_patches_providers_for_the_finalizer_only() {
    let docs = documents();
    let role = of_kind(&docs, "Role")
        .into_iter()
        .find(|(f, _)| f.contains("provider-vsphere"))
        .expect("provider Role")
        .1
        .clone();
    assert_eq!(role["metadata"]["namespace"], "banlieue-system");
    let rules = role["rules"].as_array().cloned().unwrap_or_default();
    let core: Vec<&Value> = rules
        .iter()
        .filter(|r| strings(&r["apiGroups"]).iter().any(String::is_empty))
        .collect();
    assert_eq!(core.len(), 1, "{rules:?}");
    assert_eq!(strings(&core[0]["resources"]), ["secrets", "configmaps"]);
    // Read by name only: a list or watch would cache every Secret of the
    // namespace in the provider pod.
    assert_eq!(strings(&core[0]["verbs"]), ["get"]);
    // IP pools, in the namespace only: the allocator writes the pools'
    // status (never their spec), binds claims, creates their addresses.
    let verbs = |group: &str, resource: &str| -> Vec<String> {
        rules
            .iter()
            .filter(|r| {
                strings(&r["apiGroups"]) == [group]
                    && strings(&r["resources"]).iter().any(|x| x == resource)
            })
            .flat_map(|r| strings(&r["verbs"]))
            .collect()
    };
    assert_eq!(verbs("banlieue.io", "ippools"), ["get", "list", "watch"]);
    assert_eq!(verbs("banlieue.io", "ippools/status"), ["get", "update"]);
    for resource in ["ipaddressclaims", "ipaddresses"] {
        assert_eq!(
            verbs("ipam.cluster.x-k8s.io", resource),
            ["get", "list", "watch", "create", "delete"],
            "{resource}"
        );
    }
    assert!(
        verbs("ipam.cluster.x-k8s.io", "ipaddressclaims/status").contains(&"update".to_string())
    );

    let cluster = of_kind(&docs, "ClusterRole")
        .into_iter()
        .find(|(f, _)| f.contains("provider-vsphere"))
        .expect("provider ClusterRole")
        .1
        .clone();
    let verbs_on = |resource: &str| -> Vec<String> {
        cluster["rules"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|r| strings(&r["resources"]).iter().any(|x| x == resource))
            .flat_map(|r| strings(&r["verbs"]))
            .collect()
    };
    // Providers are patched for their finalizer only (the role never edits
    // a spec: no update), so a deleted Provider stays while machines use it.
    assert_eq!(
        verbs_on("providers"),
        ["get", "list", "watch", "patch"],
        "providers: read, and patch for the finalizer"
    );
    assert!(verbs_on("providers/finalizers").contains(&"update".to_string()));
    assert!(verbs_on("providers/status").contains(&"patch".to_string()));
    assert!(verbs_on("vmimages/status").contains(&"patch".to_string()));
    assert!(verbs_on("vspheremachines").contains(&"watch".to_string()));
    assert!(verbs_on("vspheremachines/status").contains(&"patch".to_string()));
    assert!(verbs_on("vspheremachines/finalizers").contains(&"update".to_string()));
    // VMSnapshots: their finalizer and owner (patch), status, and deletion
    // by the VirtualMachine's retention; the VirtualMachine only read.
    assert_eq!(
        verbs_on("vmsnapshots"),
        ["get", "list", "watch", "patch", "update", "delete"]
    );
    assert_eq!(verbs_on("vmsnapshots/status"), ["get", "patch"]);
    assert!(verbs_on("vmsnapshots/finalizers").contains(&"update".to_string()));
    assert_eq!(verbs_on("virtualmachines"), ["get"]);
    assert!(verbs_on("vmimages")
        .iter()
        .all(|v| ["get", "list", "watch"].contains(&v.as_str())));
}

#[test]
fn deployments_run_the_documented_roles() {
    let docs = documents();
    let deployment = |name: &str| {
        of_kind(&docs, "Deployment")
            .into_iter()
            .find(|(_, d)| d["metadata"]["name"] == name)
            .unwrap_or_else(|| panic!("{name}"))
            .1
            .clone()
    };
    let provider = deployment("banlieue-provider-vsphere");
    let container = &provider["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(container["name"], "provider");
    assert_eq!(container["image"], "ghcr.io/firestoned/banlieue:v0.1.0");
    assert_eq!(
        strings(&container["args"]),
        ["provider", "vsphere", "--namespace", "banlieue-system"]
    );
    assert_eq!(
        container["envFrom"][0]["configMapRef"]["name"],
        "banlieue-provider-vsphere-config"
    );
    assert_eq!(
        provider["spec"]["template"]["spec"]["serviceAccountName"],
        "banlieue-provider-vsphere"
    );

    let controller = deployment("banlieue-controller");
    assert_eq!(
        strings(&controller["spec"]["template"]["spec"]["containers"][0]["args"]),
        ["controller"]
    );

    let config = of_kind(&docs, "ConfigMap")
        .into_iter()
        .find(|(_, d)| d["metadata"]["name"] == "banlieue-provider-vsphere-config");
    assert!(
        config.is_some(),
        "the ConfigMap the provider Deployment reads"
    );
    let services: Vec<_> = of_kind(&docs, "Service")
        .into_iter()
        .map(|(_, s)| s["metadata"]["name"].clone())
        .collect();
    assert!(services.contains(&Value::from("banlieue-provider-vsphere")));
}

#[test]
fn bindings_point_at_existing_roles_and_accounts() {
    let docs = documents();
    let named = |kind: &str, name: &Value| {
        of_kind(&docs, kind)
            .iter()
            .any(|(_, d)| &d["metadata"]["name"] == name)
    };
    for kind in ["ClusterRoleBinding", "RoleBinding"] {
        for (file, binding) in of_kind(&docs, kind) {
            assert!(
                named(
                    binding["roleRef"]["kind"].as_str().unwrap_or_default(),
                    &binding["roleRef"]["name"]
                ),
                "{file}"
            );
            for subject in binding["subjects"].as_array().into_iter().flatten() {
                assert!(
                    named("ServiceAccount", &subject["name"]),
                    "{file}: {subject}"
                );
            }
        }
    }
}

/// The verbs a role's rules grant on Leases, and the names they are limited to.
fn lease_grants(rules: &Value) -> Vec<(Vec<String>, Vec<String>)> {
    rules
        .as_array()
        .into_iter()
        .flatten()
        .filter(|r| {
            strings(&r["apiGroups"])
                .iter()
                .any(|g| g == "coordination.k8s.io" || g == "*")
                && strings(&r["resources"])
                    .iter()
                    .any(|x| x == "leases" || x == "*")
        })
        .map(|r| (strings(&r["verbs"]), strings(&r["resourceNames"])))
        .collect()
}

#[test]
fn each_role_may_only_read_and_renew_its_own_lease() {
    let docs = documents();
    for (file, role) in of_kind(&docs, "ClusterRole") {
        assert!(
            lease_grants(&role["rules"]).is_empty(),
            "{file}: a ClusterRole grants Leases"
        );
    }
    for (component, lease) in [
        ("controller", banlieue::roles::controller::LEASE),
        ("provider-vsphere", banlieue::roles::provider::LEASE),
    ] {
        let (file, role) = of_kind(&docs, "Role")
            .into_iter()
            .find(|(f, _)| f.contains(&format!("deploy/{component}/")))
            .unwrap_or_else(|| panic!("{component} Role"));
        assert_eq!(role["metadata"]["namespace"], "banlieue-system", "{file}");
        // get and patch (what the Lease manager sends), on the role's Lease by name;
        // no create (the Lease is in the manifests), list, watch or delete.
        assert_eq!(
            lease_grants(&role["rules"]),
            [(
                vec!["get".to_string(), "patch".to_string()],
                vec![lease.to_string()]
            )],
            "{file}"
        );
        let shipped = of_kind(&docs, "Lease").into_iter().any(|(_, l)| {
            l["metadata"]["name"] == lease && l["metadata"]["namespace"] == "banlieue-system"
        });
        assert!(shipped, "the Lease {lease} is in deploy/{component}/");
        let bound = of_kind(&docs, "RoleBinding").into_iter().any(|(_, b)| {
            b["roleRef"]["kind"] == "Role"
                && b["roleRef"]["name"] == role["metadata"]["name"]
                && b["subjects"][0]["name"] == format!("banlieue-{component}")
        });
        assert!(bound, "{file}: bound to the {component} ServiceAccount");
    }
}

#[test]
fn deployments_run_two_replicas_rolling_with_a_disruption_budget() {
    let docs = documents();
    for name in ["banlieue-controller", "banlieue-provider-vsphere"] {
        let (file, deployment) = of_kind(&docs, "Deployment")
            .into_iter()
            .find(|(_, d)| d["metadata"]["name"] == name)
            .unwrap_or_else(|| panic!("{name}"));
        let spec = &deployment["spec"];
        assert_eq!(spec["replicas"], 2, "{file}");
        assert_eq!(spec["strategy"]["type"], "RollingUpdate", "{file}");
        assert_eq!(
            spec["strategy"]["rollingUpdate"]["maxUnavailable"], 0,
            "{file}"
        );
        let env = &spec["template"]["spec"]["containers"][0]["env"];
        let pod_name = env
            .as_array()
            .into_iter()
            .flatten()
            .find(|e| e["name"] == "POD_NAME");
        assert_eq!(
            pod_name.map(|e| &e["valueFrom"]["fieldRef"]["fieldPath"]),
            Some(&Value::from("metadata.name")),
            "{file}: the pod's name is its identity in the Lease"
        );
        let labels = &spec["selector"]["matchLabels"];
        let budget = of_kind(&docs, "PodDisruptionBudget")
            .into_iter()
            .find(|(_, p)| &p["spec"]["selector"]["matchLabels"] == labels)
            .unwrap_or_else(|| panic!("{name}: a PodDisruptionBudget selecting its pods"));
        assert_eq!(budget.1["spec"]["minAvailable"], 1, "{}", budget.0);
        assert_eq!(budget.1["metadata"]["namespace"], "banlieue-system");
    }
}
