//! Test support, in one place (compiled for unit tests only): object
//! builders shaped like the guide's manifests, and a mocked API server
//! (tower-test) per role whose handlers assert, in order, the requests a
//! reconcile makes and answer them.
//!
//! - top level: builders ([`provider()`], [`guide_class`], [`vm`], [`machine`]...);
//! - [`virtualmachine`]: the controller role's `Scenario`s and `World`;
//! - [`mod@provider`]: the provider role's `ApiServer`, `World` and
//!   [`with_server`](provider::with_server).

use http::Request;
use kube::client::Body;
use kube::runtime::reflector::{self, Store};
use kube::runtime::watcher;
use kube::Resource;
use serde_json::{json, Value};

use crate::api::{
    MachineDisk, NamespacedReference, Provider, TemplateRef, VMClass, VMImage, VSphereMachine,
    VSphereMachineSpec, VirtualMachine,
};

/// A Provider as the provider role leaves it: with its finalizer.
pub(crate) fn provider(name: &str, labels: Value, capabilities: Value) -> Provider {
    serde_json::from_value(json!({
        "apiVersion": "banlieue.io/v1alpha1", "kind": "Provider",
        "metadata": {"name": name, "namespace": "banlieue-system", "labels": labels, "generation": 1,
                     "finalizers": [crate::controllers::provider::FINALIZER]},
        "spec": {
            "providerClassRef": {"name": "vsphere"},
            "connection": {"endpoint": "https://vc.example/sdk", "credentialsRef": {"name": "vsphere-creds"}},
            "capabilities": capabilities,
        }
    }))
    .expect("test provider")
}

/// The guide's capabilities: gold on ds-fast-01, prod on vmnet-prod, three features.
pub(crate) fn guide_capabilities() -> Value {
    json!({
        "storageClasses": [{"name": "gold", "target": {"datastore": "ds-fast-01"}}],
        "networkClasses": [{"name": "prod", "target": {"portGroup": "vmnet-prod"}}],
        "features": ["hotAddCPU", "hotAddMemory", "efiSecureBoot"],
    })
}

/// A failure domain offering gold and prod.
pub(crate) fn failure_domain(name: &str, datacenter: &str, cluster: &str) -> Value {
    json!({
        "name": name, "datacenter": datacenter, "cluster": cluster,
        "labels": {"name": name, "datacenter": datacenter, "cluster": cluster},
        "storageClasses": ["gold"], "networkClasses": ["prod"],
    })
}

/// Marks `provider` Ready with these failure domains.
pub(crate) fn ready(mut provider: Provider, failure_domains: Vec<Value>) -> Provider {
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

pub(crate) fn guide_class() -> VMClass {
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

pub(crate) fn tpm_class() -> VMClass {
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
pub(crate) fn image(ready_on: &[&str]) -> VMImage {
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

pub(crate) fn vm(name: &str, placement: Value) -> VirtualMachine {
    serde_json::from_value(json!({
        "apiVersion": "banlieue.io/v1alpha1", "kind": "VirtualMachine",
        "metadata": {"name": name, "namespace": "banlieue-system", "uid": format!("uid-{name}"), "generation": 1},
        "spec": {"classRef": {"name": "db-prod-large"}, "imageRef": {"name": "ubuntu-22.04-cloudinit"},
                 "placement": placement, "desiredPowerState": "PoweredOn"},
    }))
    .expect("test vm")
}

/// A machine `name` in namespace `ns`: 2 CPUs, 2048 MiB, a 20 GiB root disk.
pub(crate) fn machine(name: &str) -> VSphereMachine {
    let mut m = VSphereMachine::new(
        name,
        VSphereMachineSpec {
            provider_ref: NamespacedReference {
                namespace: "banlieue-system".into(),
                name: "vc".into(),
            },
            failure_domain: "vc-dc0-c0".into(),
            datacenter: "DC0".into(),
            cluster: "DC0_C0".into(),
            template: TemplateRef {
                name: "golden".into(),
                mo_ref: Some("vm-1".into()),
            },
            clone_mode: Default::default(),
            cpus: 2,
            memory_mib: 2048,
            disks: vec![MachineDisk {
                name: "root".into(),
                size_gib: 20,
                storage_class: "fast".into(),
                datastore: "LocalDS_0".into(),
                datastore_cluster: None,
                provisioning: Default::default(),
            }],
            network_interfaces: vec![],
            firmware: Default::default(),
            vtpm: false,
            hot_add_cpu: false,
            hot_add_memory: false,
            desired_power_state: Default::default(),
            install_mode: Default::default(),
            guest_agent: None,
            cloud_config_secret_refs: vec![],
            update_policy: None,
            restart_requested_at: None,
            hostname: None,
            machine_cloud_config_secret_refs: vec![],
            resource_pool: None,
            folder: None,
        },
    );
    m.metadata.namespace = Some("ns".into());
    m
}

/// `m` with a NIC `eth0` asking for the built-in pool `pool`.
pub(crate) fn with_pool_nic(mut m: VSphereMachine, pool: &str) -> VSphereMachine {
    m.spec
        .network_interfaces
        .push(crate::api::MachineNetworkInterface {
            name: "eth0".into(),
            network_class: "prod".into(),
            port_group: "DC0_DVPG0".into(),
            ipam: crate::api::Ipam {
                static_: None,
                pool: Some(crate::api::IpPool {
                    name: pool.into(),
                    ..Default::default()
                }),
            },
        });
    m
}

pub(crate) async fn body_json(request: Request<Body>) -> Value {
    let bytes = request
        .into_body()
        .collect_bytes()
        .await
        .expect("request body");
    serde_json::from_slice(&bytes).expect("request body is JSON")
}

pub(crate) fn store_of<K>(objects: Vec<K>) -> Store<K>
where
    K: Resource + Clone + 'static,
    K::DynamicType: Default + Eq + std::hash::Hash + Clone,
{
    let (store, mut writer) = reflector::store();
    for o in objects {
        writer.apply_watcher_event(&watcher::Event::Apply(o));
    }
    store
}

/// The controller role's reconcile against a mocked API server.
pub(crate) mod virtualmachine {
    use std::sync::Arc;
    use std::time::Duration;

    use http::{Request, Response};
    use kube::client::Body;
    use kube::Client;
    use serde_json::{json, Value};

    use kube::runtime::controller::Action;

    use super::{body_json, store_of};
    use crate::api::{
        Provider, ScheduledPlacement, VMClass, VMImage, VSphereMachine, VirtualMachine,
    };
    use crate::controllers::virtualmachine::{reconcile, Caches, Context};
    use crate::Result;

    type ApiServerHandle = tower_test::mock::Handle<Request<Body>, Response<Body>>;

    /// The request sequences of the test cases.
    pub(crate) enum Scenario {
        /// VSphereMachine POST, status PATCH, then one event per transition.
        Schedules { events: Vec<&'static str> },
        /// No machine; status PATCH with `Scheduled=False` and this reason, then events.
        Unschedulable {
            reason: &'static str,
            message_contains: &'static str,
        },
        /// Nothing at all: the status is already what the reconcile computes.
        NoRequests,
        /// The POST answers 409: no status write.
        CreateConflict,
        /// The POST answers 500.
        CreateFails,
        /// Status PATCH adopting the existing machine's placement and mirroring it.
        Adopts,
        /// Merge PATCH of the machine's spec with this body (desired power
        /// state; shape, update policy, restart), then the status PATCH.
        MachineUpdate(Value),
    }

    pub(crate) struct ApiServerVerifier(ApiServerHandle);

    fn vm_path() -> &'static str {
        "/apis/banlieue.io/v1alpha1/namespaces/banlieue-system/virtualmachines/db-prod-01/status"
    }

    impl ApiServerVerifier {
        pub(crate) fn run(
            mut self,
            scenario: Scenario,
            vm: VirtualMachine,
        ) -> tokio::task::JoinHandle<()> {
            tokio::spawn(async move {
                match scenario {
                    Scenario::Schedules { events } => {
                        let this = self.handle_machine_create(201).await;
                        let (this, status) = this.handle_status_patch(&vm).await;
                        assert_eq!(
                            status.pointer("/status/conditions/0/status"),
                            Some(&json!("True"))
                        );
                        this.handle_events(&events).await;
                    }
                    Scenario::Unschedulable {
                        reason,
                        message_contains,
                    } => {
                        let (this, status) = self.handle_status_patch(&vm).await;
                        let scheduled = &status["status"]["conditions"][0];
                        assert_eq!(scheduled["type"], "Scheduled");
                        assert_eq!(scheduled["status"], "False");
                        assert_eq!(scheduled["reason"], reason);
                        let message = scheduled["message"].as_str().unwrap_or_default();
                        assert!(message.contains(message_contains), "{message}");
                        assert!(
                            status["status"].get("scheduled").is_none(),
                            "not scheduled: {status}"
                        );
                        this.handle_events(&[reason, "NotScheduled"]).await;
                    }
                    Scenario::NoRequests => self.expect_nothing().await,
                    Scenario::CreateConflict => {
                        self.handle_machine_create(409).await.expect_nothing().await
                    }
                    Scenario::CreateFails => {
                        self.handle_machine_create(500).await.expect_nothing().await
                    }
                    Scenario::Adopts => {
                        let (this, status) = self.handle_status_patch(&vm).await;
                        let s = &status["status"];
                        assert_eq!(
                            s["scheduled"]["failureDomain"], "fd-recorded",
                            "placement comes from the machine: {s}"
                        );
                        assert_eq!(s["powerState"], "PoweredOn");
                        // What users look for, on the object they wrote.
                        assert_eq!(s["ipAddresses"], json!(["10.0.0.7", "fe80::1"]));
                        assert_eq!(s["consoleURL"], "https://vc.example/ui/vm-42");
                        assert_eq!(s["instanceUUID"], "5012f3a4-0000-4000-8000-000000000042");
                        assert_eq!(s["conditions"][1]["type"], "Ready");
                        assert_eq!(s["conditions"][1]["status"], "True");
                        assert_eq!(s["conditions"][1]["reason"], "Provisioned");
                        this.handle_events(&["Scheduled", "Provisioned"]).await;
                    }
                    Scenario::MachineUpdate(expected) => {
                        let (request, send) = self.next().await;
                        assert_eq!(request.method(), http::Method::PATCH);
                        assert!(
                            request
                                .uri()
                                .path()
                                .ends_with("/vspheremachines/db-prod-01"),
                            "{}",
                            request.uri()
                        );
                        assert_eq!(body_json(request).await, expected);
                        let machine =
                            serde_json::to_vec(&machine_owned_by(&vm)).unwrap_or_default();
                        send.send_response(Response::builder().body(Body::from(machine)).unwrap());
                        let (this, status) = self.handle_status_patch(&vm).await;
                        assert_eq!(
                            status["status"]["scheduled"]["failureDomain"],
                            "fd-recorded"
                        );
                        this.handle_events(&["Scheduled", "WaitingForProvider"])
                            .await;
                    }
                }
            })
        }

        async fn next(
            &mut self,
        ) -> (
            Request<Body>,
            tower_test::mock::SendResponse<Response<Body>>,
        ) {
            self.0
                .next_request()
                .await
                .expect("the reconcile made no further request")
        }

        async fn handle_machine_create(mut self, code: u16) -> Self {
            let (request, send) = self.next().await;
            assert_eq!(request.method(), http::Method::POST);
            assert_eq!(
                request.uri().path(),
                "/apis/banlieue.io/v1alpha1/namespaces/banlieue-system/vspheremachines"
            );
            let body = body_json(request).await;
            assert_machine_body(&body);
            let response = if code == 201 {
                Response::builder()
                    .status(201)
                    .body(Body::from(serde_json::to_vec(&body).unwrap_or_default()))
            } else {
                let status = json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": "nope",
                                    "reason": if code == 409 { "AlreadyExists" } else { "InternalError" }, "code": code});
                Response::builder()
                    .status(code)
                    .body(Body::from(serde_json::to_vec(&status).unwrap_or_default()))
            };
            send.send_response(response.unwrap());
            self
        }

        async fn handle_status_patch(mut self, vm: &VirtualMachine) -> (Self, Value) {
            let (request, send) = self.next().await;
            assert_eq!(request.method(), http::Method::PATCH);
            assert_eq!(request.uri().path(), vm_path());
            let query = request.uri().query().unwrap_or_default().to_string();
            assert!(
                query.contains("fieldManager=banlieue-controller") && query.contains("force=true"),
                "server-side apply: {query}"
            );
            assert_eq!(
                request
                    .headers()
                    .get("content-type")
                    .and_then(|v| v.to_str().ok()),
                Some("application/apply-patch+yaml")
            );
            let body = body_json(request).await;
            assert_eq!(body["apiVersion"], "banlieue.io/v1alpha1");
            assert_eq!(body["kind"], "VirtualMachine");
            let mut updated = serde_json::to_value(vm).unwrap_or_default();
            updated["status"] = body["status"].clone();
            send.send_response(
                Response::builder()
                    .body(Body::from(serde_json::to_vec(&updated).unwrap_or_default()))
                    .unwrap(),
            );
            (self, body)
        }

        async fn handle_events(mut self, reasons: &[&str]) {
            for reason in reasons {
                let (request, send) = self.next().await;
                assert_eq!(request.method(), http::Method::POST);
                assert_eq!(
                    request.uri().path(),
                    "/apis/events.k8s.io/v1/namespaces/banlieue-system/events"
                );
                let body = body_json(request).await;
                assert_eq!(body["reason"], *reason, "{body}");
                assert_eq!(body["regarding"]["kind"], "VirtualMachine");
                send.send_response(
                    Response::builder()
                        .body(Body::from(serde_json::to_vec(&body).unwrap_or_default()))
                        .unwrap(),
                );
            }
            self.expect_nothing().await;
        }

        /// Passes when the client is dropped without another request.
        async fn expect_nothing(mut self) {
            if let Some((request, _)) = self.0.next_request().await {
                panic!("unexpected request {} {}", request.method(), request.uri());
            }
        }
    }

    /// The machine of the guide's VM on the guide's Provider.
    fn assert_machine_body(body: &Value) {
        let owner = &body["metadata"]["ownerReferences"][0];
        assert_eq!(owner["kind"], "VirtualMachine");
        assert_eq!(owner["name"], "db-prod-01");
        assert_eq!(owner["uid"], "uid-db-prod-01");
        assert_eq!(owner["controller"], true);
        assert_eq!(
            body["metadata"]["labels"]["app.kubernetes.io/name"],
            "banlieue"
        );
        assert_eq!(body["metadata"]["name"], "db-prod-01");
        assert_eq!(body["metadata"]["namespace"], "banlieue-system");
        let spec = &body["spec"];
        assert_eq!(
            spec["providerRef"],
            json!({"namespace": "banlieue-system", "name": "prod-vsphere"})
        );
        assert_eq!(spec["failureDomain"], "prod-vsphere-dc1-c1");
        assert_eq!(spec["datacenter"], "DC1");
        assert_eq!(spec["cluster"], "C1");
        assert_eq!(
            spec["template"],
            json!({"name": "ubuntu-22.04-cloudinit", "moRef": "vm-42"})
        );
        assert_eq!(spec["cpus"], 8);
        assert_eq!(spec["memoryMiB"], 32768);
        assert_eq!(spec["firmware"], "efi-secure");
        assert_eq!(spec["vtpm"], false);
        assert_eq!(spec["hotAddCPU"], true);
        assert_eq!(spec["hotAddMemory"], true);
        assert_eq!(spec["desiredPowerState"], "PoweredOn");
        assert_eq!(
            spec["disks"],
            json!([
                {"name": "root", "sizeGiB": 80, "storageClass": "gold", "datastore": "ds-fast-01", "provisioning": "thin"},
                {"name": "data", "sizeGiB": 500, "storageClass": "gold", "datastore": "ds-fast-01", "provisioning": "eagerZeroed"},
            ])
        );
        assert_eq!(
            spec["networkInterfaces"],
            json!([{"name": "eth0", "networkClass": "prod", "portGroup": "vmnet-prod", "ipam": {}}])
        );
    }

    /// What the caches hold in a test.
    #[derive(Default)]
    pub(crate) struct World {
        pub classes: Vec<VMClass>,
        pub images: Vec<VMImage>,
        pub providers: Vec<Provider>,
        pub machines: Vec<VSphereMachine>,
        pub vms: Vec<VirtualMachine>,
    }

    impl World {
        /// The guide's objects, with the Provider Ready and the image ready on it.
        pub(crate) fn guide() -> Self {
            World {
                classes: vec![super::guide_class(), super::tpm_class()],
                images: vec![super::image(&["prod-vsphere"])],
                providers: vec![super::ready(
                    super::provider(
                        "prod-vsphere",
                        json!({"dc": "dc1", "env": "prod"}),
                        super::guide_capabilities(),
                    ),
                    vec![super::failure_domain("prod-vsphere-dc1-c1", "DC1", "C1")],
                )],
                ..Default::default()
            }
        }

        pub(crate) fn context(self) -> (Arc<Context>, ApiServerVerifier) {
            let (service, handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
            let client = Client::new(service, "default");
            let caches = Caches {
                classes: store_of(self.classes),
                images: store_of(self.images),
                providers: store_of(self.providers),
                machines: store_of(self.machines),
                vms: store_of(self.vms),
            };
            (
                Arc::new(Context::new(client, caches, Arc::default())),
                ApiServerVerifier(handle),
            )
        }
    }

    pub(crate) fn guide_vm() -> VirtualMachine {
        super::vm(
            "db-prod-01",
            json!({"providerSelector": {"matchLabels": {"dc": "dc1", "env": "prod"}}}),
        )
    }

    pub(crate) fn machine_owned_by(vm: &VirtualMachine) -> VSphereMachine {
        let class = super::guide_class();
        let image = super::image(&["prod-vsphere"]);
        let placement = ScheduledPlacement {
            provider: "prod-vsphere".into(),
            provider_namespace: "banlieue-system".into(),
            failure_domain: "fd-recorded".into(),
            datacenter: "DC1".into(),
            cluster: "C1".into(),
            ..Default::default()
        };
        crate::controllers::virtualmachine::build::build(
            vm,
            &class,
            &image,
            &placement,
            Default::default(),
        )
    }

    /// Runs one reconcile against the scenario; the scenario must finish within a second.
    pub(crate) async fn reconcile_with(
        world: World,
        vm: VirtualMachine,
        scenario: Scenario,
    ) -> Result<Action> {
        let (ctx, server) = world.context();
        let mocked = server.run(scenario, vm.clone());
        let result = reconcile(Arc::new(vm), ctx.clone()).await;
        // Dropping the client ends the scenario's wait for further requests.
        drop(ctx);
        tokio::time::timeout(Duration::from_secs(1), mocked)
            .await
            .expect("mock API server finished in time")
            .expect("scenario passed");
        result
    }
}

/// The provider role's reconciles against a mocked API server and a scripted vCenter.
pub(crate) mod provider {
    use std::sync::{Arc, Mutex};
    use std::task::{Context as TaskContext, Poll};
    use std::time::Duration;

    use http::{Request, Response};
    use k8s_openapi::api::core::v1::{ConfigMap, Secret};
    use kube::client::Body;
    use kube::Client;
    use serde_json::{json, Value};

    use super::{body_json, store_of};
    use crate::api::{Provider, VSphereMachine};
    use crate::controllers::context::{Caches, Context};
    use crate::vsphere::VSphere;

    type ApiServerHandle = tower_test::mock::Handle<Request<Body>, Response<Body>>;

    pub(crate) const NAMESPACE: &str = "banlieue-system";
    pub(crate) const RESYNC: Duration = Duration::from_secs(300);

    /// The test's end of the API server, and the IPAddressClaims it holds
    /// for [`serve_all_with`](Self::serve_all_with).
    pub(crate) struct ApiServer(ApiServerHandle, Vec<Value>);

    impl ApiServer {
        async fn next(
            &mut self,
        ) -> (
            Request<Body>,
            tower_test::mock::SendResponse<Response<Body>>,
        ) {
            self.0
                .next_request()
                .await
                .expect("the reconcile made no further request")
        }

        /// A server-side apply of a status at `path`: checks the patch is one,
        /// by this role's field manager, and answers with `object` carrying the
        /// applied status. Returns the patch body.
        pub(crate) async fn status_apply(&mut self, path: &str, object: Value) -> Value {
            let (request, send) = self.next().await;
            assert_eq!(request.method(), http::Method::PATCH);
            assert_eq!(request.uri().path(), path);
            let query = request.uri().query().unwrap_or_default().to_string();
            assert!(
                query.contains("fieldManager=banlieue-provider-vsphere-banlieue-system")
                    && query.contains("force=true"),
                "server-side apply by the role's manager: {query}"
            );
            assert_eq!(
                request
                    .headers()
                    .get("content-type")
                    .and_then(|v| v.to_str().ok()),
                Some("application/apply-patch+yaml")
            );
            let body = body_json(request).await;
            let mut updated = object;
            updated["status"] = body["status"].clone();
            send.send_response(
                Response::builder()
                    .body(Body::from(serde_json::to_vec(&updated).unwrap_or_default()))
                    .unwrap(),
            );
            body
        }

        /// An event about `kind` with `reason`.
        pub(crate) async fn event(&mut self, kind: &str, reason: &str) -> Value {
            let (request, send) = self.next().await;
            assert_eq!(request.method(), http::Method::POST);
            assert_eq!(
                request.uri().path(),
                "/apis/events.k8s.io/v1/namespaces/banlieue-system/events"
            );
            let body = body_json(request).await;
            assert_eq!(body["reason"], reason, "{body}");
            assert_eq!(body["regarding"]["kind"], kind);
            send.send_response(
                Response::builder()
                    .body(Body::from(serde_json::to_vec(&body).unwrap_or_default()))
                    .unwrap(),
            );
            body
        }

        /// Answers every request until the client is dropped: a PATCH or POST
        /// with `object` merged with what was sent (status, metadata), anything
        /// else with `object`. Returns (method, path, content type, body) of each.
        /// A request `answer` gives a body for (by method and path) is
        /// answered with it.
        pub(crate) async fn serve_all_with(
            mut self,
            object: Value,
            answer: impl Fn(&str, &str) -> Option<Value>,
        ) -> Seen {
            let mut seen = Vec::new();
            let mut current = object;
            let mut claims: std::collections::BTreeMap<String, Value> = self
                .1
                .iter()
                .map(|c| {
                    (
                        c["metadata"]["name"]
                            .as_str()
                            .unwrap_or_default()
                            .to_string(),
                        c.clone(),
                    )
                })
                .collect();
            while let Some((request, send)) = self.0.next_request().await {
                let method = request.method().to_string();
                let path = request.uri().path().to_string();
                let content_type = request
                    .headers()
                    .get("content-type")
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or_default()
                    .to_string();
                let body = if method == "GET" {
                    Value::Null
                } else {
                    body_json(request).await
                };
                let mut code = 200;
                let response = if let Some(answer) = answer(&method, &path) {
                    answer
                } else if path.contains("/events") {
                    body.clone()
                } else if path.contains("/ipaddressclaims") {
                    // The IP pool claims it holds (the World's, and those
                    // created): listed, read, created, deleted; a claim on
                    // the pool `instant` is bound at once (its IPAddress
                    // below), one on `full` says PoolExhausted.
                    let name = path
                        .rsplit_once("/ipaddressclaims/")
                        .map(|(_, n)| n.to_string());
                    match (method.as_str(), name) {
                        ("GET", None) => json!({"apiVersion": "ipam.cluster.x-k8s.io/v1beta1",
                                                "kind": "IPAddressClaimList", "metadata": {},
                                                "items": claims.values().cloned().collect::<Vec<_>>()}),
                        ("GET", Some(name)) => claims.get(&name).cloned().unwrap_or_else(|| {
                            code = 404;
                            json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                                   "reason": "NotFound", "code": 404, "message": "not found"})
                        }),
                        ("DELETE", Some(name)) => {
                            claims.remove(&name);
                            json!({"kind": "Status", "apiVersion": "v1", "status": "Success"})
                        }
                        _ => {
                            let name = body["metadata"]["name"]
                                .as_str()
                                .unwrap_or_default()
                                .to_string();
                            match claims.entry(name.clone()) {
                                std::collections::btree_map::Entry::Occupied(_) => {
                                    code = 409;
                                    json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                                           "reason": "AlreadyExists", "code": 409, "message": "exists"})
                                }
                                std::collections::btree_map::Entry::Vacant(slot) => {
                                    let mut claim = body.clone();
                                    match claim["spec"]["poolRef"]["name"].as_str() {
                                        Some("instant") => {
                                            claim["status"] = json!({"addressRef": {"name": name}})
                                        }
                                        Some("full") => {
                                            claim["status"] = json!({"conditions": [{
                                                "type": "Ready", "status": "False", "reason": "PoolExhausted",
                                                "message": "IPPool banlieue-system/full: all 3 address(es) are in use",
                                                "lastTransitionTime": "2026-01-01T00:00:00Z"}]})
                                        }
                                        _ => {}
                                    }
                                    slot.insert(claim.clone());
                                    claim
                                }
                            }
                        }
                    }
                } else if path.contains("/ipaddresses/") {
                    json!({"apiVersion": "ipam.cluster.x-k8s.io/v1beta1", "kind": "IPAddress",
                           "metadata": {"name": path.rsplit('/').next().unwrap_or_default()},
                           "spec": {"claimRef": {"name": "c"},
                                    "poolRef": {"apiGroup": "banlieue.io", "kind": "IPPool", "name": "instant"},
                                    "address": "10.0.0.77", "prefix": 24, "gateway": "10.0.0.1"}})
                } else if path.contains("/ippools/") {
                    json!({"apiVersion": "banlieue.io/v1alpha1", "kind": "IPPool",
                           "metadata": {"name": "instant"},
                           "spec": {"addresses": ["10.0.0.0/24"], "prefix": 24, "nameservers": ["10.0.0.53"]}})
                } else {
                    if let Some(status) = body.get("status") {
                        current["status"] = status.clone();
                    }
                    if content_type.contains("json-patch") {
                        // A finalizer added or removed: answer with the list it leaves.
                        for op in body.as_array().into_iter().flatten() {
                            match (op["op"].as_str(), op["path"].as_str()) {
                                (Some("add" | "replace"), Some("/metadata/finalizers")) => {
                                    current["metadata"]["finalizers"] = op["value"].clone()
                                }
                                (Some("add"), Some("/metadata/finalizers/-")) => {
                                    let mut list = current["metadata"]["finalizers"]
                                        .as_array()
                                        .cloned()
                                        .unwrap_or_default();
                                    list.push(op["value"].clone());
                                    current["metadata"]["finalizers"] = Value::Array(list);
                                }
                                (Some("remove"), Some(p))
                                    if p.starts_with("/metadata/finalizers") =>
                                {
                                    current["metadata"]["finalizers"] = json!([]);
                                }
                                _ => {}
                            }
                        }
                    }
                    current.clone()
                };
                send.send_response(
                    Response::builder()
                        .status(code)
                        .body(Body::from(
                            serde_json::to_vec(&response).unwrap_or_default(),
                        ))
                        .unwrap(),
                );
                seen.push((method, path, content_type, body));
            }
            seen
        }

        /// Passes when the client is dropped without another request.
        pub(crate) async fn nothing_more(mut self) {
            if let Some((request, _)) = self.0.next_request().await {
                panic!("unexpected request {} {}", request.method(), request.uri());
            }
        }
    }

    /// What the caches hold in a test, and the Secrets and ConfigMaps the
    /// API server holds (read by name).
    #[derive(Default)]
    pub(crate) struct World {
        pub providers: Vec<Provider>,
        pub machines: Vec<VSphereMachine>,
        pub secrets: Vec<Secret>,
        pub config_maps: Vec<ConfigMap>,
        /// The paths of the Secret and ConfigMap GETs made, in order.
        pub reads: Reads,
        /// The IPAddressClaims the API server holds at first.
        pub claims: Vec<crate::api::IPAddressClaim>,
        /// Namespaces whose Secrets a Role lets the provider read (besides
        /// its own).
        pub granted: Vec<String>,
    }

    /// The Secret and ConfigMap paths read, shared with the test.
    pub(crate) type Reads = Arc<Mutex<Vec<String>>>;

    /// The mocked API server's front: a GET of one Secret or ConfigMap by
    /// name is answered from the world (a 404 Status when it has none) and
    /// recorded; every other request goes to the test's handle, in order.
    struct ObjectsByName {
        handle: tower_test::mock::Mock<Request<Body>, Response<Body>>,
        objects: Vec<(String, Value)>,
        reads: Reads,
        /// Namespaces besides the install namespace whose Secrets a Role
        /// lets the provider read; a Secret GET elsewhere is forbidden.
        granted: Vec<String>,
    }

    impl tower_service::Service<Request<Body>> for ObjectsByName {
        type Response = Response<Body>;
        type Error = Box<dyn std::error::Error + Send + Sync>;
        type Future = futures::future::BoxFuture<'static, Result<Response<Body>, Self::Error>>;

        fn poll_ready(&mut self, cx: &mut TaskContext<'_>) -> Poll<Result<(), Self::Error>> {
            self.handle.poll_ready(cx)
        }

        fn call(&mut self, request: Request<Body>) -> Self::Future {
            let path = request.uri().path().to_string();
            let by_name = request.method() == http::Method::GET
                && ["/secrets/", "/configmaps/"]
                    .iter()
                    .any(|r| path.starts_with("/api/v1/namespaces/") && path.contains(r));
            if !by_name {
                return Box::pin(self.handle.call(request));
            }
            if let Ok(mut reads) = self.reads.lock() {
                reads.push(path.clone());
            }
            let forbidden = path.contains("/secrets/")
                && !path.starts_with(&format!("/api/v1/namespaces/{NAMESPACE}/"))
                && !self
                    .granted
                    .iter()
                    .any(|ns| path.starts_with(&format!("/api/v1/namespaces/{ns}/")));
            let response = match self.objects.iter().find(|(p, _)| *p == path) {
                _ if forbidden => Response::builder().status(403).body(Body::from(
                    serde_json::to_vec(
                        &json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                        "reason": "Forbidden", "code": 403, "message": format!("{path} is forbidden")}),
                    )
                    .unwrap_or_default(),
                )),
                Some((_, object)) => Response::builder()
                    .body(Body::from(serde_json::to_vec(object).unwrap_or_default())),
                None => Response::builder().status(404).body(Body::from(
                    serde_json::to_vec(
                        &json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                        "reason": "NotFound", "code": 404, "message": format!("{path} not found")}),
                    )
                    .unwrap_or_default(),
                )),
            };
            Box::pin(futures::future::ready(Ok(response.expect("response"))))
        }
    }

    pub(crate) fn credentials(password: &str) -> Secret {
        serde_json::from_value(json!({
            "metadata": {"name": "vsphere-creds", "namespace": NAMESPACE},
            "stringData": {"username": "administrator@vsphere.local", "password": password},
        }))
        .expect("test secret")
    }

    impl World {
        /// A context over these caches with a vCenter backend (mostly the
        /// scripted one), and the API server's handle.
        pub(crate) fn context<V: VSphere>(self, vsphere: V) -> (Arc<Context<V>>, ApiServer) {
            self.context_on(Arc::new(vsphere))
        }

        /// As [`context`](Self::context), on a backend the test keeps (its
        /// sessions outlive one context).
        pub(crate) fn context_on<V: VSphere>(
            self,
            vsphere: Arc<V>,
        ) -> (Arc<Context<V>>, ApiServer) {
            let (service, handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
            let path = |kind: &str, meta: &kube::api::ObjectMeta| {
                format!(
                    "/api/v1/namespaces/{}/{kind}/{}",
                    meta.namespace.as_deref().unwrap_or_default(),
                    meta.name.as_deref().unwrap_or_default()
                )
            };
            let objects = self
                .secrets
                .iter()
                .map(|s| (path("secrets", &s.metadata), json!(s)))
                .chain(
                    self.config_maps
                        .iter()
                        .map(|c| (path("configmaps", &c.metadata), json!(c))),
                )
                .collect();
            let service = ObjectsByName {
                handle: service,
                objects,
                reads: self.reads,
                granted: self.granted,
            };
            let client = Client::new(service, "default");
            let caches = Caches {
                providers: store_of(self.providers),
                machines: store_of(self.machines),
                images: store_of(Vec::new()),
            };
            let ctx = Context::new(client, NAMESPACE, RESYNC, vsphere, caches, Arc::default());
            ctx.caches.set_synced(true);
            let claims = self.claims.iter().map(|c| json!(c)).collect();
            (Arc::new(ctx), ApiServer(handle, claims))
        }
    }

    /// What the API server was asked: (method, path, content type, body) of each request.
    pub(crate) type Seen = Vec<(String, String, String, Value)>;

    /// Runs `reconcile` while the API server answers every request
    /// ([`ApiServer::serve_all_with`] with `object`); returns the reconcile's
    /// result and the requests it made.
    pub(crate) async fn serving_all<V, F, T>(
        ctx: Arc<Context<V>>,
        server: ApiServer,
        object: Value,
        reconcile: F,
    ) -> (T, Seen)
    where
        V: VSphere,
        F: std::future::Future<Output = T>,
    {
        serving_all_with(ctx, server, object, |_, _| None, reconcile).await
    }

    /// As [`serving_all`], with `answer` (see [`ApiServer::serve_all_with`]).
    pub(crate) async fn serving_all_with<V, F, T>(
        ctx: Arc<Context<V>>,
        server: ApiServer,
        object: Value,
        answer: impl Fn(&str, &str) -> Option<Value> + Send + 'static,
        reconcile: F,
    ) -> (T, Seen)
    where
        V: VSphere,
        F: std::future::Future<Output = T>,
    {
        use futures::FutureExt;
        let (tx, rx) = tokio::sync::oneshot::channel();
        let result = with_server(
            ctx,
            server,
            move |server| {
                async move {
                    let _ = tx.send(server.serve_all_with(object, answer).await);
                }
                .boxed()
            },
            reconcile,
        )
        .await;
        (result, rx.await.unwrap_or_default())
    }

    /// Runs `reconcile` while `server` plays its part; the server's part must
    /// end within a second of the reconcile.
    pub(crate) async fn with_server<V, F, T, S>(
        ctx: Arc<Context<V>>,
        server: ApiServer,
        script: S,
        reconcile: F,
    ) -> T
    where
        V: VSphere,
        F: std::future::Future<Output = T>,
        S: FnOnce(ApiServer) -> futures::future::BoxFuture<'static, ()>,
    {
        let mocked = tokio::spawn(script(server));
        let result = reconcile.await;
        // Dropping the client ends the server's wait for further requests.
        drop(ctx);
        tokio::time::timeout(Duration::from_secs(1), mocked)
            .await
            .expect("mock API server finished in time")
            .expect("the API server saw what it expected");
        result
    }
}

/// A TCP proxy in front of a vCenter (the simulator) that can wedge: while
/// stalled it accepts connections and forwards nothing either way, as a
/// hung vCenter or a half-dead load balancer does; opened again, new
/// connections (and what was held) go through.
pub(crate) mod stalling {
    use std::net::SocketAddr;

    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::{TcpListener, TcpStream};
    use tokio::sync::watch;

    pub(crate) struct StallingProxy {
        /// `http://127.0.0.1:PORT/sdk`.
        pub sdk_url: String,
        open: watch::Sender<bool>,
    }

    impl StallingProxy {
        /// Forwards to `upstream` (answering) until [`stall`](Self::stall).
        pub(crate) async fn start(upstream: SocketAddr) -> StallingProxy {
            let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
            let addr = listener.local_addr().expect("address");
            let (open, _) = watch::channel(true);
            let gate = open.clone();
            tokio::spawn(async move {
                while let Ok((client, _)) = listener.accept().await {
                    tokio::spawn(forward(client, upstream, gate.subscribe()));
                }
            });
            StallingProxy {
                sdk_url: format!("http://{addr}/sdk"),
                open,
            }
        }

        pub(crate) fn stall(&self) {
            self.open.send_replace(false);
        }

        pub(crate) fn answer(&self) {
            self.open.send_replace(true);
        }
    }

    async fn forward(client: TcpStream, upstream: SocketAddr, gate: watch::Receiver<bool>) {
        if gate.clone().wait_for(|open| *open).await.is_err() {
            return;
        }
        let Ok(server) = TcpStream::connect(upstream).await else {
            return;
        };
        let (client_read, client_write) = client.into_split();
        let (server_read, server_write) = server.into_split();
        tokio::join!(
            pipe(client_read, server_write, gate.clone()),
            pipe(server_read, client_write, gate),
        );
    }

    /// Copies `from` to `to`, holding every chunk while the gate is shut.
    async fn pipe(
        mut from: impl AsyncReadExt + Unpin,
        mut to: impl AsyncWriteExt + Unpin,
        mut gate: watch::Receiver<bool>,
    ) {
        let mut buf = vec![0u8; 16 * 1024];
        loop {
            let n = match from.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            if gate.wait_for(|open| *open).await.is_err() || to.write_all(&buf[..n]).await.is_err()
            {
                break;
            }
        }
        let _ = to.shutdown().await;
    }
}

/// A mocked API server answering a test's requests one by one, in order.
pub(crate) mod scripted {
    use http::{Request, Response};
    use kube::client::Body;
    use serde_json::{json, Value};

    use super::body_json;

    pub(crate) type Handle = tower_test::mock::Handle<Request<Body>, Response<Body>>;

    pub(crate) fn failure(code: u16, reason: &str) -> Value {
        json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": reason,
               "reason": reason, "code": code})
    }

    /// Answers the next request, which must be `method path`, with `code` and
    /// what `reply` makes of its body (null for a GET); returns the body.
    pub(crate) async fn answer(
        handle: &mut Handle,
        method: &str,
        path: &str,
        code: u16,
        reply: impl FnOnce(&Value) -> Value,
    ) -> Value {
        let (request, send) = handle.next_request().await.expect("a request");
        assert_eq!(request.method().as_str(), method, "{}", request.uri());
        assert_eq!(request.uri().path(), path);
        let body = if method == "GET" {
            Value::Null
        } else {
            body_json(request).await
        };
        let response = serde_json::to_vec(&reply(&body)).unwrap();
        send.send_response(
            Response::builder()
                .status(code)
                .body(Body::from(response))
                .unwrap(),
        );
        body
    }

    /// Answers the next request, which must be `DELETE path`, with success.
    pub(crate) async fn deleted(handle: &mut Handle, path: &str) {
        answer(
            handle,
            "DELETE",
            path,
            200,
            |_| json!({"kind": "Status", "apiVersion": "v1", "status": "Success"}),
        )
        .await;
    }

    pub(crate) async fn nothing_more(mut handle: Handle) {
        if let Some((request, _)) = handle.next_request().await {
            panic!("unexpected request {} {}", request.method(), request.uri());
        }
    }
}

/// A mocked API server holding one Lease, shared by several instances (each
/// its own tower-test client): GET, POST, and PATCH as the API server takes
/// them from the Lease manager (an apply that would change another holder
/// is a 409 Conflict, as server-side apply's field ownership makes it;
/// strategic and merge patches merge, `null` removing a field). An instance
/// can be cut off (every request fails: a dead pod, or one that lost the API
/// server) or have only its PATCHes refused (500).
pub(crate) mod lease {
    use std::collections::{BTreeMap, BTreeSet};
    use std::sync::{Arc, Mutex};
    use std::time::Instant;

    use http::{Method, Request, Response, StatusCode};
    use kube::client::Body;
    use kube::Client;
    use serde_json::{json, Value};

    #[derive(Default)]
    struct State {
        lease: Option<Value>,
        cut: BTreeSet<String>,
        refuse_patches: BTreeSet<String>,
        /// When the server last took a PATCH of each instance that set `renewTime`.
        renewed: BTreeMap<String, Instant>,
        /// Every request: (instance, method, path, status).
        log: Vec<(String, String, String, u16)>,
    }

    #[derive(Clone, Default)]
    pub(crate) struct LeaseServer(Arc<Mutex<State>>);

    impl LeaseServer {
        /// A client for instance `who`, served until the test ends.
        pub(crate) fn client(&self, who: &str) -> Client {
            let (service, mut handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
            let (server, who) = (self.clone(), who.to_string());
            tokio::spawn(async move {
                while let Some((request, send)) = handle.next_request().await {
                    match server.answer(&who, request).await {
                        Some(response) => send.send_response(response),
                        // Cut off: the request fails as a dropped connection does.
                        None => send.send_error(std::io::Error::other("connection refused")),
                    }
                }
            });
            Client::new(service, "banlieue-system")
        }

        pub(crate) fn cut(&self, who: &str) {
            self.0.lock().unwrap().cut.insert(who.into());
        }

        pub(crate) fn refuse_patches(&self, who: &str, refuse: bool) {
            let mut state = self.0.lock().unwrap();
            if refuse {
                state.refuse_patches.insert(who.into());
            } else {
                state.refuse_patches.remove(who);
            }
        }

        pub(crate) fn holder(&self) -> Option<String> {
            let state = self.0.lock().unwrap();
            state.lease.as_ref()?["spec"]["holderIdentity"]
                .as_str()
                .map(String::from)
        }

        /// When the server last took a renewal (or acquisition) from `who`.
        pub(crate) fn renewed(&self, who: &str) -> Option<Instant> {
            self.0.lock().unwrap().renewed.get(who).copied()
        }

        /// The requests so far: (instance, method, path, status).
        pub(crate) fn log(&self) -> Vec<(String, String, String, u16)> {
            self.0.lock().unwrap().log.clone()
        }

        async fn answer(&self, who: &str, request: Request<Body>) -> Option<Response<Body>> {
            let method = request.method().clone();
            let path = request.uri().path().to_string();
            let content_type = request
                .headers()
                .get(http::header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default()
                .to_string();
            let body = request.into_body().collect_bytes().await.ok()?;
            let mut state = self.0.lock().unwrap();
            if state.cut.contains(who) {
                state.log.push((who.into(), method.to_string(), path, 0));
                return None;
            }
            let (status, reply) = match method {
                Method::GET => match &state.lease {
                    Some(lease) => (StatusCode::OK, lease.clone()),
                    None => (StatusCode::NOT_FOUND, status(404, "NotFound")),
                },
                Method::POST if state.lease.is_some() => {
                    (StatusCode::CONFLICT, status(409, "AlreadyExists"))
                }
                Method::POST => {
                    let mut lease: Value = serde_json::from_slice(&body).unwrap_or_default();
                    lease["apiVersion"] = json!("coordination.k8s.io/v1");
                    lease["kind"] = json!("Lease");
                    lease["metadata"]["namespace"] = json!("banlieue-system");
                    lease["metadata"]["resourceVersion"] = json!("1");
                    state.lease = Some(lease.clone());
                    (StatusCode::CREATED, lease)
                }
                Method::PATCH if state.refuse_patches.contains(who) => (
                    StatusCode::INTERNAL_SERVER_ERROR,
                    status(500, "InternalError"),
                ),
                Method::PATCH => {
                    let patch: Value = serde_json::from_slice(&body).unwrap_or_default();
                    let holder = state
                        .lease
                        .as_ref()
                        .and_then(|l| l["spec"]["holderIdentity"].as_str().map(String::from));
                    let wanted = patch["spec"]["holderIdentity"].as_str();
                    match &mut state.lease {
                        None => (StatusCode::NOT_FOUND, status(404, "NotFound")),
                        Some(_)
                            if content_type.contains("apply-patch")
                                && wanted.is_some()
                                && holder.is_some()
                                && holder.as_deref() != wanted =>
                        {
                            (StatusCode::CONFLICT, status(409, "Conflict"))
                        }
                        Some(lease) => {
                            merge(lease, &patch);
                            let version = lease["metadata"]["resourceVersion"]
                                .as_str()
                                .and_then(|v| v.parse::<u64>().ok())
                                .unwrap_or_default();
                            lease["metadata"]["resourceVersion"] = json!((version + 1).to_string());
                            let reply = lease.clone();
                            if patch["spec"]["renewTime"].is_string() {
                                state.renewed.insert(who.into(), Instant::now());
                            }
                            (StatusCode::OK, reply)
                        }
                    }
                }
                _ => (
                    StatusCode::METHOD_NOT_ALLOWED,
                    status(405, "MethodNotAllowed"),
                ),
            };
            state
                .log
                .push((who.into(), method.to_string(), path, status.as_u16()));
            Some(
                Response::builder()
                    .status(status)
                    .body(Body::from(serde_json::to_vec(&reply).unwrap()))
                    .unwrap(),
            )
        }
    }

    fn status(code: u16, reason: &str) -> Value {
        json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": code,
               "reason": reason, "message": reason})
    }

    /// RFC 7386 merge (`null` removes).
    fn merge(target: &mut Value, patch: &Value) {
        let Some(fields) = patch.as_object() else {
            *target = patch.clone();
            return;
        };
        if !target.is_object() {
            *target = json!({});
        }
        for (key, value) in fields {
            if value.is_null() {
                if let Some(t) = target.as_object_mut() {
                    t.remove(key);
                }
            } else {
                merge(&mut target[key], value);
            }
        }
    }
}
