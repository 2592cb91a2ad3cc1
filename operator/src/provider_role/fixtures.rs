//! The provider role against a mocked API server (tower-test) and a scripted
//! vCenter: each test lists the requests a reconcile must make, in order,
//! with assertions on their bodies.

use std::sync::Arc;
use std::time::Duration;

use http::{Request, Response};
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::client::Body;
use kube::runtime::reflector::{self, Store};
use kube::runtime::watcher;
use kube::{Client, Resource};
use serde_json::{json, Value};

use super::*;
use crate::vsphere::mock::MockVSphere;

type ApiServerHandle = tower_test::mock::Handle<Request<Body>, Response<Body>>;

pub const NAMESPACE: &str = "banlieue-system";
pub const RESYNC: Duration = Duration::from_secs(300);

pub struct ApiServer(ApiServerHandle);

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
    pub async fn status_apply(&mut self, path: &str, object: Value) -> Value {
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
    pub async fn event(&mut self, kind: &str, reason: &str) -> Value {
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
    pub async fn serve_all(mut self, object: Value) -> Vec<(String, String, String, Value)> {
        let mut seen = Vec::new();
        let mut current = object;
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
            let response = if path.contains("/events") {
                body.clone()
            } else {
                if let Some(status) = body.get("status") {
                    current["status"] = status.clone();
                }
                if content_type.contains("json-patch") {
                    // A finalizer added or removed: answer with the list it leaves.
                    for op in body.as_array().into_iter().flatten() {
                        match (op["op"].as_str(), op["path"].as_str()) {
                            (Some("add"), Some("/metadata/finalizers"))
                            | (Some("replace"), Some("/metadata/finalizers")) => {
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
                            (Some("remove"), Some(p)) if p.starts_with("/metadata/finalizers") => {
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
    pub async fn nothing_more(mut self) {
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
    pub providers: Vec<Provider>,
    pub secrets: Vec<Secret>,
    pub config_maps: Vec<ConfigMap>,
}

pub fn credentials(password: &str) -> Secret {
    serde_json::from_value(json!({
        "metadata": {"name": "vsphere-creds", "namespace": NAMESPACE},
        "stringData": {"username": "administrator@vsphere.local", "password": password},
    }))
    .expect("test secret")
}

impl World {
    /// A context over these caches with a scripted vCenter, and the API server's handle.
    pub fn context(self, vsphere: MockVSphere) -> (Arc<Context<MockVSphere>>, ApiServer) {
        let (service, handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
        let client = Client::new(service, "default");
        let caches = Caches {
            providers: store_of(self.providers),
            secrets: store_of(self.secrets),
            config_maps: store_of(self.config_maps),
            images: store_of(Vec::new()),
        };
        let ctx = Context::new(
            client,
            NAMESPACE,
            RESYNC,
            Arc::new(vsphere),
            caches,
            Arc::default(),
        );
        ctx.caches.set_synced(true);
        (Arc::new(ctx), ApiServer(handle))
    }
}

/// Runs `reconcile` while `server` plays its part; the server's part must
/// end within a second of the reconcile.
pub async fn with_server<F, T, S>(
    ctx: Arc<Context<MockVSphere>>,
    server: ApiServer,
    script: S,
    reconcile: F,
) -> T
where
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
