//! `banlieue bootstrap operator`: the operator-managed install. The CRDs,
//! the controller (its ServiceAccount, RBAC, Lease, Deployment, budget and
//! Service, from `deploy/controller/`) running with `--provider-workloads`,
//! and the provider role's ClusterRole the workloads are bound to; applied
//! with server-side apply (idempotent), or printed with `--dry-run`. The
//! per-Provider workloads the controller then makes are in [`workload`].

pub mod workload;

use kube::api::{ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams};
use kube::{Api, Client};
use serde_json::{json, Value};

use crate::check::parse_documents;
use crate::{Error, Result};

/// The field manager of the install.
pub const MANAGER: &str = "banlieue-bootstrap";

/// The image the install runs: this binary's version.
pub fn default_image() -> String {
    format!("ghcr.io/firestoned/banlieue:v{}", env!("CARGO_PKG_VERSION"))
}

/// The controller's manifests as the static install ships them, in apply order.
const CONTROLLER: [&str; 10] = [
    include_str!("../../../deploy/controller/namespace.yaml"),
    include_str!("../../../deploy/controller/rbac/serviceaccount.yaml"),
    include_str!("../../../deploy/controller/rbac/clusterrole.yaml"),
    include_str!("../../../deploy/controller/rbac/clusterrolebinding.yaml"),
    include_str!("../../../deploy/controller/rbac/role.yaml"),
    include_str!("../../../deploy/controller/rbac/rolebinding.yaml"),
    include_str!("../../../deploy/controller/lease.yaml"),
    include_str!("../../../deploy/controller/deployment.yaml"),
    include_str!("../../../deploy/controller/pdb.yaml"),
    include_str!("../../../deploy/controller/service.yaml"),
];

/// What every provider workload is bound to for its cluster-wide rights (no Secrets in it).
const PROVIDER_CLUSTER_ROLE: &str =
    include_str!("../../../deploy/provider-vsphere/rbac/clusterrole.yaml");

/// The rules the controller adds to its ClusterRole in operator-managed
/// mode: its finalizer and a condition on Providers, and one
/// ClusterRoleBinding per workload to the provider ClusterRole (`bind` on
/// that one only).
fn managed_cluster_rules() -> Vec<Value> {
    vec![
        json!({"apiGroups": ["banlieue.io"], "resources": ["providers"], "verbs": ["patch"]}),
        json!({"apiGroups": ["banlieue.io"], "resources": ["providers/finalizers"], "verbs": ["update"]}),
        json!({"apiGroups": ["banlieue.io"], "resources": ["providers/status"], "verbs": ["get", "patch"]}),
        json!({"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["clusterrolebindings"],
               "verbs": ["get", "create", "patch", "delete"]}),
        json!({"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["clusterroles"],
               "resourceNames": [workload::PROVIDER_CLUSTER_ROLE], "verbs": ["bind"]}),
    ]
}

/// The rules the controller adds to its Role in operator-managed mode, in
/// its namespace: each workload's ServiceAccount, Role, RoleBinding, Lease
/// and Deployment. A workload's Role grants what the controller does not
/// hold (its Provider's Secrets by name, the IP pool kinds), hence
/// `escalate` and `bind` on Roles: power over the namespace's Roles, which
/// is what the static install avoids.
fn managed_namespace_rules() -> Vec<Value> {
    vec![
        json!({"apiGroups": [""], "resources": ["serviceaccounts"], "verbs": ["get", "create", "patch"]}),
        json!({"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["roles"],
               "verbs": ["get", "create", "patch", "escalate", "bind"]}),
        json!({"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["rolebindings"],
               "verbs": ["get", "create", "patch"]}),
        // Each workload's Lease is made here, so not by name (its own Role names it).
        json!({"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
               "verbs": ["get", "create", "patch"]}),
        json!({"apiGroups": ["apps"], "resources": ["deployments"],
               "verbs": ["get", "list", "watch", "create", "patch"]}),
    ]
}

/// Every object of the operator-managed install, in apply order.
pub fn objects(image: &str) -> Result<Vec<Value>> {
    let mut out = Vec::new();
    for (file, crd) in crate::crdgen::all() {
        // Cluster API's IPAM kinds are left to `deploy/crds/ipam/` (or Cluster API itself).
        if file.starts_with("ipam/") {
            continue;
        }
        out.push(serde_json::to_value(crd).map_err(|e| Error::Yaml(e.to_string()))?);
    }
    for text in CONTROLLER.iter().chain([&PROVIDER_CLUSTER_ROLE]) {
        for mut doc in parse_documents(text)? {
            let (kind, name) = (
                doc["kind"].as_str().unwrap_or_default().to_string(),
                doc["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
            );
            match (kind.as_str(), name.as_str()) {
                ("ClusterRole", "banlieue-controller") => {
                    extend(&mut doc["rules"], managed_cluster_rules())
                }
                ("Role", "banlieue-controller") => {
                    extend(&mut doc["rules"], managed_namespace_rules())
                }
                ("Deployment", _) => {
                    let container = &mut doc["spec"]["template"]["spec"]["containers"][0];
                    container["image"] = json!(image);
                    extend(&mut container["args"], vec![json!("--provider-workloads")]);
                    // The workloads run the controller's own image, so they follow its version.
                    extend(
                        &mut container["env"],
                        vec![json!({"name": "BANLIEUE_IMAGE", "value": image})],
                    );
                }
                _ => {}
            }
            out.push(doc);
        }
    }
    Ok(out)
}

fn extend(list: &mut Value, more: Vec<Value>) {
    if let Some(items) = list.as_array_mut() {
        items.extend(more);
    } else {
        *list = Value::Array(more);
    }
}

/// The install as one multi-document YAML (what `--dry-run` prints).
pub fn render(image: &str) -> Result<String> {
    let mut out = String::from(
        "# @generated by `banlieue bootstrap operator --dry-run`: the operator-managed install.\n",
    );
    for object in objects(image)? {
        out.push_str("---\n");
        out.push_str(&serde_saphyr::to_string(&object).map_err(|e| Error::Yaml(e.to_string()))?);
    }
    Ok(out)
}

/// Applies every object with server-side apply (forced: the install owns
/// what it sets), in order; a second run changes nothing.
pub async fn apply(client: &Client, image: &str) -> Result<usize> {
    let objects = objects(image)?;
    for object in &objects {
        apply_one(client, object).await?;
    }
    Ok(objects.len())
}

/// Server-side apply of one object given as JSON, as the install.
pub(crate) async fn apply_one(client: &Client, object: &Value) -> Result<()> {
    apply_one_as(client, object, MANAGER).await
}

/// Server-side apply (forced) of one object given as JSON, as `manager`.
pub(crate) async fn apply_one_as(client: &Client, object: &Value, manager: &str) -> Result<()> {
    let api_version = object["apiVersion"].as_str().unwrap_or_default();
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    let kind = object["kind"].as_str().unwrap_or_default();
    let gvk = GroupVersionKind::gvk(group, version, kind);
    let resource = ApiResource::from_gvk_with_plural(&gvk, &plural(kind));
    let name = object["metadata"]["name"].as_str().unwrap_or_default();
    let api: Api<DynamicObject> = match object["metadata"]["namespace"].as_str() {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &resource),
        None => Api::all_with(client.clone(), &resource),
    };
    api.patch(
        name,
        &PatchParams::apply(manager).force(),
        &Patch::Apply(object),
    )
    .await?;
    Ok(())
}

/// The resource name of the kinds the install and the workloads apply.
fn plural(kind: &str) -> String {
    match kind {
        "CustomResourceDefinition" => "customresourcedefinitions".into(),
        "PodDisruptionBudget" => "poddisruptionbudgets".into(),
        k => format!("{}s", k.to_ascii_lowercase()),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use http::{Request, Response};
    use kube::client::Body;

    use super::*;

    /// Applies the install against a mocked API server that takes every
    /// apply; returns each request's method, path and query.
    async fn applied() -> Vec<(String, String, String)> {
        let (service, mut handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
        let log = Arc::new(Mutex::new(Vec::new()));
        let seen = log.clone();
        tokio::spawn(async move {
            while let Some((request, send)) = handle.next_request().await {
                let uri = request.uri().clone();
                seen.lock().unwrap().push((
                    request.method().to_string(),
                    uri.path().to_string(),
                    uri.query().unwrap_or_default().to_string(),
                ));
                let body = request.into_body().collect_bytes().await.unwrap();
                send.send_response(Response::builder().body(Body::from(body.to_vec())).unwrap());
            }
        });
        let client = Client::new(service, "default");
        let n = apply(&client, &default_image()).await.expect("apply");
        let log = log.lock().unwrap().clone();
        assert_eq!(n, log.len());
        log
    }

    #[tokio::test]
    async fn the_install_is_one_forced_server_side_apply_per_object_the_same_each_run() {
        let first = applied().await;
        assert!(first.iter().all(|(method, _, query)| method == "PATCH"
            && query.contains("fieldManager=banlieue-bootstrap")
            && query.contains("force=true")));
        let paths: Vec<&str> = first.iter().map(|(_, p, _)| p.as_str()).collect();
        for expected in [
            "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/providers.banlieue.io",
            "/api/v1/namespaces/banlieue-system",
            "/api/v1/namespaces/banlieue-system/serviceaccounts/banlieue-controller",
            "/apis/rbac.authorization.k8s.io/v1/clusterroles/banlieue-controller",
            "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/banlieue-controller",
            "/apis/rbac.authorization.k8s.io/v1/namespaces/banlieue-system/roles/banlieue-controller",
            "/apis/rbac.authorization.k8s.io/v1/namespaces/banlieue-system/rolebindings/banlieue-controller",
            "/apis/coordination.k8s.io/v1/namespaces/banlieue-system/leases/banlieue-controller",
            "/apis/apps/v1/namespaces/banlieue-system/deployments/banlieue-controller",
            "/apis/policy/v1/namespaces/banlieue-system/poddisruptionbudgets/banlieue-controller",
            "/api/v1/namespaces/banlieue-system/services/banlieue-controller",
            "/apis/rbac.authorization.k8s.io/v1/clusterroles/banlieue-provider-vsphere",
        ] {
            assert!(paths.contains(&expected), "{expected} not applied: {paths:#?}");
        }
        // CRDs first, the namespace before what lives in it.
        assert!(paths[0].contains("customresourcedefinitions"));
        let namespace = paths
            .iter()
            .position(|p| *p == "/api/v1/namespaces/banlieue-system");
        let first_namespaced = paths
            .iter()
            .position(|p| p.contains("/namespaces/banlieue-system/"));
        assert!(namespace < first_namespaced);
        // Idempotent: a second run sends the same applies.
        assert_eq!(applied().await, first);
    }
}
