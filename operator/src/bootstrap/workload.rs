//! The provider workload of one Provider (operator-managed mode, `banlieue
//! controller --provider-workloads`): a Deployment running `banlieue provider
//! vsphere --provider NAME`, its ServiceAccount, a Role that reads only that
//! Provider's credentials and CA Secret or ConfigMap by name (with the IP
//! pool kinds and its own Lease), their RoleBinding and Lease, all owned by
//! the Provider; and a ClusterRoleBinding to the provider ClusterRole
//! (cluster-scoped, so not owned: removed by the controller's finalizer).
//!
//! A deleted Provider keeps its workload while VSphereMachines still use it
//! (the provider role's finalizer `banlieue.io/provider-in-use` is still
//! there), so they can destroy their VMs; once that finalizer is gone the
//! ClusterRoleBinding is deleted, this finalizer released, and the owned
//! objects go with the Provider.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::rbac::v1::ClusterRoleBinding;
use kube::api::{Api, DeleteParams};
use kube::runtime::controller::Action;
use kube::runtime::finalizer::{finalizer, Event as FinalizerEvent};
use kube::{Client, ResourceExt};
use serde_json::{json, Value};
use tracing::warn;

use crate::api::{reasons::provider as reason, Provider, API_VERSION};
use crate::check::parse_documents;
use crate::conditions::{self, Observed, Status};
use crate::controllers::provider::readiness::failure_domain_name;
use crate::controllers::{apply_status, provider::FINALIZER as IN_USE};
use crate::{Error, Result};

/// The ClusterRole every workload is bound to (`deploy/provider-vsphere/rbac/clusterrole.yaml`).
pub const PROVIDER_CLUSTER_ROLE: &str = "banlieue-provider-vsphere";
/// The controller's finalizer on a Provider with a workload.
pub const FINALIZER: &str = "banlieue.io/provider-workload";
/// The Provider condition that mirrors the workload's readiness.
pub const CONDITION: &str = "WorkloadReady";
/// The field manager of the workloads' objects and of the condition.
pub const MANAGER: &str = "banlieue-controller";

const STATIC_ROLE: &str = include_str!("../../../deploy/provider-vsphere/rbac/role.yaml");
const STATIC_DEPLOYMENT: &str = include_str!("../../../deploy/provider-vsphere/deployment.yaml");

/// `banlieue-provider-<provider>`: the name of the workload's ServiceAccount,
/// Role, RoleBinding, Lease and Deployment (a DNS label, hashed when long).
pub fn name(provider: &str) -> String {
    failure_domain_name("banlieue", "provider", provider)
}

/// The ClusterRoleBinding's name: the namespace is part of it (cluster-scoped).
pub fn cluster_binding_name(namespace: &str, provider: &str) -> String {
    failure_domain_name("banlieue-provider", namespace, provider)
}

/// The objects of `provider`'s workload running `image`, in apply order.
pub fn objects(provider: &Provider, image: &str) -> Result<Vec<Value>> {
    let namespace = provider.namespace().unwrap_or_default();
    let provider_name = provider.name_any();
    let name = name(&provider_name);
    let labels = json!({
        "app.kubernetes.io/name": "banlieue",
        "app.kubernetes.io/component": "provider-vsphere",
        "app.kubernetes.io/instance": name,
        "app.kubernetes.io/managed-by": MANAGER,
    });
    let owner = json!([{
        "apiVersion": API_VERSION, "kind": "Provider", "name": provider_name,
        "uid": provider.uid().unwrap_or_default(), "controller": true, "blockOwnerDeletion": false,
    }]);
    let metadata = |name: &str| json!({"name": name, "namespace": namespace, "labels": labels, "ownerReferences": owner});
    let typed = |api_version: &str, kind: &str, name: &str| json!({"apiVersion": api_version, "kind": kind, "metadata": metadata(name)});

    let connection = &provider.spec.connection;
    let ca = connection.ca_bundle.as_ref();
    let mut secrets = vec![connection.credentials_ref.name.clone()];
    secrets.extend(
        ca.and_then(|c| c.secret_ref.as_ref())
            .map(|r| r.name.clone()),
    );
    let config_maps: Vec<String> = ca
        .and_then(|c| c.config_map_ref.as_ref())
        .map(|r| r.name.clone())
        .into_iter()
        .collect();
    let mut rules = vec![json!({"apiGroups": [""], "resources": ["secrets"],
                                "resourceNames": secrets, "verbs": ["get"]})];
    if !config_maps.is_empty() {
        rules.push(json!({"apiGroups": [""], "resources": ["configmaps"],
                          "resourceNames": config_maps, "verbs": ["get"]}));
    }
    // The static Role's IP pool rules, as they are; not its Secrets, ConfigMaps or Lease.
    for doc in parse_documents(STATIC_ROLE)? {
        for rule in doc["rules"].as_array().into_iter().flatten() {
            let group = rule["apiGroups"][0].as_str().unwrap_or_default();
            if !group.is_empty() && group != "coordination.k8s.io" {
                rules.push(rule.clone());
            }
        }
    }
    rules.push(
        json!({"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
                      "resourceNames": [name], "verbs": ["get", "patch"]}),
    );

    let mut role = typed("rbac.authorization.k8s.io/v1", "Role", &name);
    role["rules"] = Value::Array(rules);
    let subject = json!([{"kind": "ServiceAccount", "name": name, "namespace": namespace}]);
    let mut binding = typed("rbac.authorization.k8s.io/v1", "RoleBinding", &name);
    binding["roleRef"] =
        json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name});
    binding["subjects"] = subject.clone();
    let cluster_binding = json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": cluster_binding_name(&namespace, &provider_name), "labels": labels},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": PROVIDER_CLUSTER_ROLE},
        "subjects": subject,
    });

    // The static Deployment (probes, security context, resources), for this Provider.
    let mut deployment = parse_documents(STATIC_DEPLOYMENT)?
        .pop()
        .ok_or_else(|| Error::Yaml("the provider Deployment".into()))?;
    deployment["metadata"] = metadata(&name);
    let selector =
        json!({"app.kubernetes.io/name": "banlieue", "app.kubernetes.io/instance": name});
    deployment["spec"]["selector"] = json!({"matchLabels": selector});
    deployment["spec"]["template"]["metadata"] = json!({"labels": labels});
    let pod = &mut deployment["spec"]["template"]["spec"];
    pod["serviceAccountName"] = json!(name);
    let container = &mut pod["containers"][0];
    container["image"] = json!(image);
    container["args"] = json!([
        "provider",
        "vsphere",
        "--namespace",
        namespace,
        "--provider",
        provider_name
    ]);
    if let Some(c) = container.as_object_mut() {
        // The static install's ConfigMap is not there: the defaults, and the log filter here.
        c.remove("envFrom");
    }
    container["env"] = json!([
        {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        {"name": "BANLIEUE_LEASE_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
        {"name": "RUST_LOG", "value": "info,kube=warn"},
    ]);

    Ok(vec![
        typed("v1", "ServiceAccount", &name),
        role,
        binding,
        typed("coordination.k8s.io/v1", "Lease", &name),
        cluster_binding,
        deployment,
    ])
}

/// What the workloads' reconcile needs.
pub struct Workloads {
    pub client: Client,
    pub image: String,
}

/// Makes (or brings up to date: a new operator image is a new Deployment
/// image) `provider`'s workload and mirrors its readiness; on deletion,
/// keeps it while the Provider is in use, then removes the ClusterRoleBinding.
pub async fn reconcile(provider: Arc<Provider>, ctx: Arc<Workloads>) -> Result<Action> {
    if provider.metadata.deletion_timestamp.is_some()
        && provider.finalizers().iter().any(|f| f == IN_USE)
    {
        // The provider role keeps the Provider for its machines (docs/operator.md,
        // "Deleting a Provider"): its workload stays to serve them.
        return Ok(Action::requeue(Duration::from_secs(10)));
    }
    let namespace = provider.namespace().unwrap_or_default();
    let api: Api<Provider> = Api::namespaced(ctx.client.clone(), &namespace);
    finalizer(&api, FINALIZER, provider, |event| async {
        match event {
            FinalizerEvent::Apply(p) => apply(&p, &ctx).await,
            FinalizerEvent::Cleanup(p) => cleanup(&p, &ctx).await,
        }
    })
    .await
    .map_err(|e| Error::Finalizer(e.to_string()))
}

async fn apply(provider: &Provider, ctx: &Workloads) -> Result<Action> {
    for object in objects(provider, &ctx.image)? {
        super::apply_one_as(&ctx.client, &object, MANAGER).await?;
    }
    let namespace = provider.namespace().unwrap_or_default();
    let deployments: Api<Deployment> = Api::namespaced(ctx.client.clone(), &namespace);
    let deployment = deployments.get_opt(&name(&provider.name_any())).await?;
    let status = deployment.as_ref().and_then(|d| d.status.as_ref());
    let available = status.and_then(|s| s.available_replicas).unwrap_or(0);
    let updated = status.and_then(|s| s.updated_replicas).unwrap_or(0);
    let wanted = deployment
        .as_ref()
        .and_then(|d| d.spec.as_ref())
        .and_then(|s| s.replicas)
        .unwrap_or(1);
    let observed = if available > 0 {
        Observed::new(
            CONDITION,
            Status::True,
            reason::WORKLOAD_AVAILABLE,
            format!(
                "{available} of {wanted} replicas available ({updated} on {})",
                ctx.image
            ),
        )
    } else {
        Observed::new(
            CONDITION,
            Status::False,
            reason::WORKLOAD_UNAVAILABLE,
            format!("no replica of the provider workload is available yet ({updated} of {wanted} on {})", ctx.image),
        )
    };
    let mut current: Vec<_> = provider
        .status
        .as_ref()
        .map(|s| s.conditions.clone())
        .unwrap_or_default();
    let before = conditions::find(&current, CONDITION).cloned();
    conditions::set(
        &mut current,
        observed,
        provider.metadata.generation,
        &conditions::now(),
    );
    let after = conditions::find(&current, CONDITION).cloned();
    if before != after {
        let api: Api<Provider> = Api::namespaced(ctx.client.clone(), &namespace);
        apply_status(
            &api,
            provider,
            MANAGER,
            &json!({"conditions": after.into_iter().collect::<Vec<_>>()}),
        )
        .await?;
    }
    Ok(Action::requeue(Duration::from_secs(300)))
}

/// Runs once the provider role has released the Provider (its finalizer gone).
async fn cleanup(provider: &Provider, ctx: &Workloads) -> Result<Action> {
    let namespace = provider.namespace().unwrap_or_default();
    let bindings: Api<ClusterRoleBinding> = Api::all(ctx.client.clone());
    match bindings
        .delete(
            &cluster_binding_name(&namespace, &provider.name_any()),
            &DeleteParams::default(),
        )
        .await
    {
        Ok(_) => {}
        Err(kube::Error::Api(e)) if e.code == 404 => {}
        Err(e) => return Err(e.into()),
    }
    Ok(Action::await_change())
}

/// Retries a failed workload reconcile after 10 s.
pub fn error_policy(provider: Arc<Provider>, error: &Error, _: Arc<Workloads>) -> Action {
    warn!(provider = %provider.name_any(), %error, "provider workload");
    Action::requeue(Duration::from_secs(10))
}

#[cfg(test)]
mod tests {
    use http::{Request, Response};
    use kube::client::Body;
    use serde_json::json;

    use super::*;
    use crate::fixtures::{body_json, provider};

    /// Every request the reconcile made: (method, path, body).
    type Log = Arc<std::sync::Mutex<Vec<(String, String, Value)>>>;

    /// A mocked API server that takes every write (echoing it, or the
    /// Provider for its own paths) and shows the Deployment with `available` replicas.
    fn server(provider: Provider, available: i32) -> (Client, Log) {
        let (service, mut handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
        let log: Log = Arc::default();
        let seen = log.clone();
        tokio::spawn(async move {
            while let Some((request, send)) = handle.next_request().await {
                let method = request.method().to_string();
                let path = request.uri().path().to_string();
                let body = if method == "GET" || method == "DELETE" {
                    Value::Null
                } else {
                    body_json(request).await
                };
                seen.lock()
                    .unwrap()
                    .push((method.clone(), path.clone(), body.clone()));
                let reply = if path.contains("/providers/") {
                    serde_json::to_value(&provider).unwrap()
                } else if method == "GET" {
                    json!({"apiVersion": "apps/v1", "kind": "Deployment",
                           "metadata": {"name": "d", "namespace": "banlieue-system"},
                           "spec": {"replicas": 2, "selector": {}, "template": {}},
                           "status": {"availableReplicas": available, "updatedReplicas": 2}})
                } else if method == "DELETE" {
                    json!({"kind": "Status", "apiVersion": "v1", "status": "Success"})
                } else {
                    body
                };
                send.send_response(
                    Response::builder()
                        .body(Body::from(serde_json::to_vec(&reply).unwrap()))
                        .unwrap(),
                );
            }
        });
        (Client::new(service, "banlieue-system"), log)
    }

    /// The guide's Provider with a CA bundle Secret, as the API server has it (uid, both finalizers).
    fn managed(finalizers: &[&str]) -> Provider {
        let mut p = provider("prod-vsphere", json!({}), json!({}));
        p.metadata.uid = Some("uid-prod".into());
        p.metadata.finalizers = Some(finalizers.iter().map(ToString::to_string).collect());
        p.spec.connection.ca_bundle =
            Some(serde_json::from_value(json!({"secretRef": {"name": "vcenter-ca"}})).unwrap());
        p
    }

    async fn run(provider: Provider, image: &str, available: i32) -> Vec<(String, String, Value)> {
        let (client, log) = server(provider.clone(), available);
        let ctx = Arc::new(Workloads {
            client,
            image: image.into(),
        });
        reconcile(Arc::new(provider), ctx).await.expect("reconcile");
        let log = log.lock().unwrap().clone();
        log
    }

    /// A Provider in use (both finalizers) reconciled with `image`, its Deployment showing `available`.
    async fn in_use(image: &str, available: i32) -> Vec<(String, String, Value)> {
        run(managed(&[FINALIZER, IN_USE]), image, available).await
    }

    /// (method, path) of each request.
    fn requests(log: &[(String, String, Value)]) -> Vec<(&str, &str)> {
        log.iter()
            .map(|(m, p, _)| (m.as_str(), p.as_str()))
            .collect()
    }

    const NS: &str = "/api/v1/namespaces/banlieue-system";
    const RBAC: &str = "/apis/rbac.authorization.k8s.io/v1";

    #[tokio::test]
    async fn a_provider_gets_its_workload_with_its_secrets_by_name_only_and_its_readiness() {
        let log = in_use("ghcr.io/firestoned/banlieue:v0.1.0", 1).await;
        assert_eq!(
            requests(&log),
            [
                ("PATCH", &*format!("{NS}/serviceaccounts/banlieue-provider-prod-vsphere")),
                ("PATCH", &*format!("{RBAC}/namespaces/banlieue-system/roles/banlieue-provider-prod-vsphere")),
                ("PATCH", &*format!("{RBAC}/namespaces/banlieue-system/rolebindings/banlieue-provider-prod-vsphere")),
                ("PATCH", "/apis/coordination.k8s.io/v1/namespaces/banlieue-system/leases/banlieue-provider-prod-vsphere"),
                ("PATCH", &*format!("{RBAC}/clusterrolebindings/banlieue-provider-banlieue-system-prod-vsphere")),
                ("PATCH", "/apis/apps/v1/namespaces/banlieue-system/deployments/banlieue-provider-prod-vsphere"),
                ("GET", "/apis/apps/v1/namespaces/banlieue-system/deployments/banlieue-provider-prod-vsphere"),
                ("PATCH", "/apis/banlieue.io/v1alpha1/namespaces/banlieue-system/providers/prod-vsphere/status"),
            ]
        );
        let body = |i: usize| &log[i].2;
        // Secrets: the credentials and the CA bundle's, by name, get only; no ConfigMap named, none granted.
        let rules = body(1)["rules"].as_array().unwrap();
        assert_eq!(
            rules[0],
            json!({"apiGroups": [""], "resources": ["secrets"],
                   "resourceNames": ["vsphere-creds", "vcenter-ca"], "verbs": ["get"]})
        );
        let core: Vec<&Value> = rules.iter().filter(|r| r["apiGroups"][0] == "").collect();
        assert_eq!(core.len(), 1, "no other core rule: {rules:?}");
        assert_eq!(
            rules.last().unwrap(),
            &json!({"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
                    "resourceNames": ["banlieue-provider-prod-vsphere"], "verbs": ["get", "patch"]})
        );
        assert!(rules
            .iter()
            .all(|r| !r["verbs"].as_array().unwrap().contains(&json!("*"))));
        // Owned by the Provider (not blocking its deletion), except the cluster-scoped binding.
        for i in [0, 1, 2, 3, 5] {
            let owner = &body(i)["metadata"]["ownerReferences"][0];
            assert_eq!(owner["kind"], "Provider");
            assert_eq!(owner["uid"], "uid-prod");
            assert_eq!(owner["controller"], true);
            assert_eq!(owner["blockOwnerDeletion"], false);
        }
        assert!(body(4)["metadata"].get("ownerReferences").is_none());
        assert_eq!(body(4)["roleRef"]["name"], PROVIDER_CLUSTER_ROLE);
        assert_eq!(
            body(4)["subjects"][0]["name"],
            "banlieue-provider-prod-vsphere"
        );
        assert_eq!(body(2)["roleRef"]["name"], "banlieue-provider-prod-vsphere");
        let pod = &body(5)["spec"]["template"]["spec"];
        assert_eq!(pod["serviceAccountName"], "banlieue-provider-prod-vsphere");
        assert_eq!(
            pod["containers"][0]["image"],
            "ghcr.io/firestoned/banlieue:v0.1.0"
        );
        assert_eq!(
            pod["containers"][0]["args"],
            json!([
                "provider",
                "vsphere",
                "--namespace",
                "banlieue-system",
                "--provider",
                "prod-vsphere"
            ])
        );
        assert_eq!(body(5)["spec"]["replicas"], 2);
        let condition = &body(7)["status"]["conditions"][0];
        assert_eq!(condition["type"], CONDITION);
        assert_eq!(condition["status"], "True");
        assert_eq!(condition["reason"], reason::WORKLOAD_AVAILABLE);
        assert_eq!(
            body(7)["status"].as_object().unwrap().len(),
            1,
            "only the condition"
        );
    }

    #[tokio::test]
    async fn a_new_operator_image_reaches_the_workload_and_an_unavailable_one_shows() {
        let log = in_use("ghcr.io/firestoned/banlieue:v0.2.0", 0).await;
        let deployment = log
            .iter()
            .find(|(m, p, _)| m == "PATCH" && p.contains("/deployments/"))
            .unwrap();
        assert_eq!(
            deployment.2["spec"]["template"]["spec"]["containers"][0]["image"],
            "ghcr.io/firestoned/banlieue:v0.2.0"
        );
        let status = &log.last().unwrap().2["status"]["conditions"][0];
        assert_eq!(status["status"], "False");
        assert_eq!(status["reason"], reason::WORKLOAD_UNAVAILABLE);
    }

    #[tokio::test]
    async fn a_deleted_provider_keeps_its_workload_while_in_use_then_it_goes() {
        let deleting = |finalizers: &[&str]| {
            let mut p = managed(finalizers);
            p.metadata.deletion_timestamp = Some(conditions::now());
            p
        };
        // Machines still use it: nothing is removed, nothing written.
        let log = run(deleting(&[FINALIZER, IN_USE]), "img", 1).await;
        assert!(log.is_empty(), "{log:?}");
        // The provider role released it: the binding is deleted, then the finalizer.
        let log = run(deleting(&[FINALIZER]), "img", 1).await;
        assert_eq!(
            requests(&log),
            [
                (
                    "DELETE",
                    &*format!(
                        "{RBAC}/clusterrolebindings/banlieue-provider-banlieue-system-prod-vsphere"
                    )
                ),
                (
                    "PATCH",
                    "/apis/banlieue.io/v1alpha1/namespaces/banlieue-system/providers/prod-vsphere"
                ),
            ]
        );
        assert!(log[1].2.to_string().contains("remove"), "{}", log[1].2);
    }
}
