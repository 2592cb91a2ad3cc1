//! Controller tests against a mocked API server (tower-test): each `Scenario`
//! lists the requests the reconcile must make, in order, with assertions on
//! their bodies, and the answers to give.

use std::sync::Arc;
use std::time::Duration;

use http::{Request, Response};
use kube::client::Body;
use kube::runtime::reflector::{self, Store};
use kube::runtime::watcher;
use kube::{Client, Resource};
use serde_json::{json, Value};

use super::*;
use crate::testutil;

type ApiServerHandle = tower_test::mock::Handle<Request<Body>, Response<Body>>;

/// The request sequences of the test cases.
pub enum Scenario {
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
    /// Merge PATCH of the machine's desired power state, then the status PATCH.
    PowerChange,
}

pub struct ApiServerVerifier(ApiServerHandle);

fn vm_path() -> &'static str {
    "/apis/banlieue.io/v1alpha1/namespaces/banlieue-system/virtualmachines/db-prod-01/status"
}

impl ApiServerVerifier {
    pub fn run(mut self, scenario: Scenario, vm: VirtualMachine) -> tokio::task::JoinHandle<()> {
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
                    assert_eq!(s["conditions"][1]["type"], "Ready");
                    assert_eq!(s["conditions"][1]["status"], "True");
                    assert_eq!(s["conditions"][1]["reason"], "Provisioned");
                    this.handle_events(&["Scheduled", "Provisioned"]).await;
                }
                Scenario::PowerChange => {
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
                    let body = body_json(request).await;
                    assert_eq!(body, json!({"spec": {"desiredPowerState": "PoweredOff"}}));
                    let machine = serde_json::to_vec(&machine_owned_by(&vm)).unwrap_or_default();
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

async fn body_json(request: Request<Body>) -> Value {
    let bytes = request
        .into_body()
        .collect_bytes()
        .await
        .expect("request body");
    serde_json::from_slice(&bytes).expect("request body is JSON")
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

fn store_of<K>(objects: Vec<K>) -> Store<K>
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

/// What the caches hold in a test.
#[derive(Default)]
pub struct World {
    pub classes: Vec<VMClass>,
    pub images: Vec<VMImage>,
    pub providers: Vec<Provider>,
    pub machines: Vec<VSphereMachine>,
    pub vms: Vec<VirtualMachine>,
}

impl World {
    /// The guide's objects, with the Provider Ready and the image ready on it.
    pub fn guide() -> Self {
        World {
            classes: vec![testutil::guide_class(), testutil::tpm_class()],
            images: vec![testutil::image(&["prod-vsphere"])],
            providers: vec![testutil::ready(
                testutil::provider(
                    "prod-vsphere",
                    json!({"dc": "dc1", "env": "prod"}),
                    testutil::guide_capabilities(),
                ),
                vec![testutil::failure_domain("prod-vsphere-dc1-c1", "DC1", "C1")],
            )],
            ..Default::default()
        }
    }

    pub fn context(self) -> (Arc<Context>, ApiServerVerifier) {
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

pub fn guide_vm() -> VirtualMachine {
    testutil::vm(
        "db-prod-01",
        json!({"providerSelector": {"matchLabels": {"dc": "dc1", "env": "prod"}}}),
    )
}

pub fn machine_owned_by(vm: &VirtualMachine) -> VSphereMachine {
    let class = testutil::guide_class();
    let image = testutil::image(&["prod-vsphere"]);
    let placement = ScheduledPlacement {
        provider: "prod-vsphere".into(),
        provider_namespace: "banlieue-system".into(),
        failure_domain: "fd-recorded".into(),
        datacenter: "DC1".into(),
        cluster: "C1".into(),
        ..Default::default()
    };
    crate::machine::build(vm, &class, &image, &placement, Default::default())
}

/// Runs one reconcile against the scenario; the scenario must finish within a second.
pub async fn reconcile_with(
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
