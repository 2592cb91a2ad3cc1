//! The provider role as it runs (`roles::provider::run`): its watches,
//! triggers and status writes, against a fake API server that serves lists
//! and open watch streams, and a scripted vCenter. The credentials Secret
//! is read by name (never listed or watched): a rotated password takes
//! effect at the next reconcile, without a restart.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use banlieue::health::Metrics;
use banlieue::roles;
use banlieue::vsphere::mock::{MockVSphere, Script};
use banlieue::vsphere::{Cluster, Datacenter, Inventory};
use bytes::Bytes;
use futures::channel::mpsc;
use http::{Request, Response};
use http_body::Frame;
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full, StreamBody};
use kube::client::Body;
use serde_json::{json, Value};
use tokio::sync::mpsc as tokio_mpsc;

type ResponseBody = UnsyncBoxBody<Bytes, Infallible>;
type WatchSender = mpsc::UnboundedSender<Result<Frame<Bytes>, Infallible>>;

const NS: &str = "banlieue-system";
const SECRET_PATH: &str = "/api/v1/namespaces/banlieue-system/secrets/vsphere-creds";

fn full(value: &Value) -> ResponseBody {
    Full::new(Bytes::from(serde_json::to_vec(value).unwrap_or_default())).boxed_unsync()
}

/// Lists answer with the objects held; watches stay open and carry the
/// events of status writes and those the test sends; status patches are
/// applied to the objects held and reported to the test.
struct FakeApiServer {
    objects: HashMap<&'static str, (&'static str, &'static str, Vec<Value>)>,
    /// The credentials Secret, answered to a GET by name; the test rotates it.
    secret: Arc<Mutex<Value>>,
    /// Every request, as `METHOD path?query`.
    requests: Arc<Mutex<Vec<String>>>,
    watches: Watches,
    patches: tokio_mpsc::UnboundedSender<(String, Value)>,
}

#[derive(Clone, Default)]
struct Watches(Arc<Mutex<HashMap<&'static str, Vec<WatchSender>>>>);

impl Watches {
    fn add(&self, resource: &'static str, tx: WatchSender) {
        self.0.lock().unwrap().entry(resource).or_default().push(tx);
    }

    /// Sends a watch event to every open watch of `resource`.
    fn send(&self, resource: &str, event: Value) {
        let mut line = serde_json::to_vec(&event).unwrap();
        line.push(b'\n');
        for tx in self.0.lock().unwrap().get(resource).into_iter().flatten() {
            let _ = tx.unbounded_send(Ok(Frame::data(Bytes::from(line.clone()))));
        }
    }
}

/// The resource a collection path is about.
fn resource_of(path: &str) -> Option<&'static str> {
    [
        (
            "/apis/banlieue.io/v1alpha1/namespaces/banlieue-system/providers",
            "providers",
        ),
        ("/apis/banlieue.io/v1alpha1/vmimages", "vmimages"),
        (
            "/apis/banlieue.io/v1alpha1/vspheremachines",
            "vspheremachines",
        ),
    ]
    .into_iter()
    .find(|(prefix, _)| path == *prefix)
    .map(|(_, r)| r)
}

impl FakeApiServer {
    async fn serve(
        mut self,
        mut handle: tower_test::mock::Handle<Request<Body>, Response<ResponseBody>>,
    ) {
        let mut version = 100;
        while let Some((request, send)) = handle.next_request().await {
            let path = request.uri().path().to_string();
            let query = request.uri().query().unwrap_or_default().to_string();
            let method = request.method().clone();
            self.requests
                .lock()
                .unwrap()
                .push(format!("{method} {path}?{query}"));
            let response = if method == http::Method::GET && path == SECRET_PATH {
                Response::new(full(&self.secret.lock().unwrap()))
            } else if method == http::Method::GET {
                match resource_of(&path) {
                    Some(resource) if query.contains("watch=true") => {
                        let (tx, rx) = mpsc::unbounded();
                        self.watches.add(resource, tx);
                        Response::new(StreamBody::new(rx).boxed_unsync())
                    }
                    Some(resource) => {
                        let (api_version, kind, items) = &self.objects[resource];
                        let list = json!({"apiVersion": api_version, "kind": kind, "metadata": {"resourceVersion": "1"}, "items": items});
                        Response::new(full(&list))
                    }
                    None => Response::builder()
                        .status(404)
                        .body(full(&json!({"kind": "Status", "code": 404})))
                        .unwrap(),
                }
            } else {
                let body = request
                    .into_body()
                    .collect_bytes()
                    .await
                    .unwrap_or_default();
                let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
                let mut answer = body.clone();
                if method == http::Method::PATCH {
                    let _ = self.patches.send((format!("{path}?{query}"), body.clone()));
                    // A status write: applied, and seen by the watches like the API server does.
                    let collection = path
                        .trim_end_matches("/status")
                        .rsplit_once('/')
                        .map(|(c, n)| (c.to_string(), n.to_string()));
                    if let Some((resource, name)) =
                        collection.and_then(|(c, n)| resource_of(&c).map(|r| (r, n)))
                    {
                        if let Some(object) =
                            self.objects.get_mut(resource).and_then(|(_, _, items)| {
                                items
                                    .iter_mut()
                                    .find(|o| o["metadata"]["name"] == name.as_str())
                            })
                        {
                            version += 1;
                            if path.ends_with("/status") {
                                object["status"] = body["status"].clone();
                            } else {
                                // A finalizer added (the role's only other PATCH).
                                for op in body.as_array().into_iter().flatten() {
                                    if op["op"] == "add" && op["path"] == "/metadata/finalizers" {
                                        object["metadata"]["finalizers"] = op["value"].clone();
                                    }
                                }
                            }
                            object["metadata"]["resourceVersion"] = json!(version.to_string());
                            answer = object.clone();
                            self.watches
                                .send(resource, json!({"type": "MODIFIED", "object": object}));
                        }
                    }
                }
                Response::builder()
                    .status(if method == http::Method::POST {
                        201
                    } else {
                        200
                    })
                    .body(full(&answer))
                    .unwrap()
            };
            send.send_response(response);
        }
    }
}

/// The credentials Secret; without a password when `password` is `None`.
fn secret(password: Option<&str>, resource_version: &str) -> Value {
    use base64::Engine as _;
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    let mut data = json!({"username": b64("administrator@vsphere.local")});
    if let Some(p) = password {
        data["password"] = json!(b64(p));
    }
    json!({"apiVersion": "v1", "kind": "Secret",
           "metadata": {"name": "vsphere-creds", "namespace": NS, "resourceVersion": resource_version},
           "data": data})
}

fn provider(generation: i64) -> Value {
    json!({"apiVersion": "banlieue.io/v1alpha1", "kind": "Provider",
           "metadata": {"name": "prod-vsphere", "namespace": NS, "generation": generation, "uid": "uid-p", "resourceVersion": format!("{generation}")},
           "spec": {"providerClassRef": {"name": "vsphere"},
                    "connection": {"endpoint": "https://vc.example/sdk", "credentialsRef": {"name": "vsphere-creds"}},
                    "capabilities": {"storageClasses": [{"name": "gold", "target": {"datastore": "ds-fast-01"}}]}}})
}

fn script(password: &str) -> Script {
    let cluster = |name: &str| Cluster {
        name: name.into(),
        datastores: vec!["ds-fast-01".into()],
        ..Default::default()
    };
    Script {
        inventory: Inventory {
            datacenters: vec![
                Datacenter {
                    name: "DC1".into(),
                    clusters: vec![cluster("C1"), cluster("C2")],
                    portgroups: vec![],
                },
                Datacenter {
                    name: "DC2".into(),
                    clusters: vec![cluster("C3")],
                    portgroups: vec![],
                },
            ],
        },
        templates: [
            (
                ("golden".to_string(), "DC1".to_string()),
                "vm-1".to_string(),
            ),
            (
                ("golden".to_string(), "DC2".to_string()),
                "vm-2".to_string(),
            ),
        ]
        .into_iter()
        .collect(),
        password: Some(password.into()),
        ..Default::default()
    }
}

/// The next status write of `path_part` for which `wanted` holds.
async fn next_patch(
    patches: &mut tokio_mpsc::UnboundedReceiver<(String, Value)>,
    path_part: &str,
    wanted: impl Fn(&Value) -> bool,
) -> Value {
    loop {
        let (path, body) = tokio::time::timeout(Duration::from_secs(10), patches.recv())
            .await
            .unwrap_or_else(|_| panic!("no PATCH of {path_part} within 10s"))
            .expect("patch channel open");
        if path.contains("/status?") {
            assert!(
                path.contains("fieldManager=banlieue-provider-vsphere-banlieue-system"),
                "{path}"
            );
        }
        if path.contains(path_part) && wanted(&body) {
            return body;
        }
    }
}

#[tokio::test]
async fn the_role_reads_the_secret_by_name_and_uses_a_rotated_password_at_the_next_reconcile() {
    let image = json!({"apiVersion": "banlieue.io/v1alpha1", "kind": "VMImage",
                       "metadata": {"name": "golden", "generation": 1, "uid": "uid-i", "resourceVersion": "1"},
                       "spec": {"sources": [{"providerClass": "vsphere", "kind": "Template", "ref": "golden"}]}});
    let watches = Watches::default();
    let (patch_tx, mut patches) = tokio_mpsc::unbounded_channel();
    let held_secret = Arc::new(Mutex::new(secret(None, "1")));
    let requests = Arc::new(Mutex::new(Vec::new()));
    let server = FakeApiServer {
        secret: held_secret.clone(),
        requests: requests.clone(),
        objects: HashMap::from([
            (
                "providers",
                ("banlieue.io/v1alpha1", "ProviderList", vec![provider(1)]),
            ),
            (
                "vmimages",
                ("banlieue.io/v1alpha1", "VMImageList", vec![image]),
            ),
            (
                "vspheremachines",
                ("banlieue.io/v1alpha1", "VSphereMachineList", vec![]),
            ),
        ]),
        watches: watches.clone(),
        patches: patch_tx,
    };
    let (service, handle) = tower_test::mock::pair::<Request<Body>, Response<ResponseBody>>();
    tokio::spawn(server.serve(handle));
    let client = kube::Client::new(service, "default");
    let vsphere = MockVSphere::new(script("old-pw"));
    let metrics = Arc::new(Metrics::default());
    let role = tokio::spawn(roles::provider::run(
        client,
        NS,
        Duration::from_secs(3600),
        Arc::new(vsphere.clone()),
        metrics.clone(),
    ));

    // The Secret has no password yet: looked at again with backoff (the
    // resync is an hour away).
    let status = next_patch(&mut patches, "/providers/prod-vsphere/status", |_| true).await;
    assert_eq!(
        status["status"]["conditions"][0]["reason"], "SecretInvalid",
        "{status}"
    );

    // The password is added: the next try (5 s later) reads it, logs in,
    // walks and writes its status; then (the Provider's status change seen
    // by the image controller) the image is verified on it.
    *held_secret.lock().unwrap() = secret(Some("old-pw"), "2");
    let status = next_patch(&mut patches, "/providers/prod-vsphere/status", |_| true).await;
    assert_eq!(
        status["status"]["conditions"][0]["reason"], "Connected",
        "{status}"
    );
    assert_eq!(
        status["status"]["failureDomains"].as_array().map(Vec::len),
        Some(3)
    );
    let ready = |b: &Value| b["status"]["perProvider"][0]["ready"] == true;
    let image_status = next_patch(&mut patches, "/vmimages/golden/status", ready).await;
    assert_eq!(
        image_status["status"]["perProvider"][0]["templates"][1]["moRef"], "vm-2",
        "{image_status}"
    );
    assert!(metrics.is_ready());

    // vCenter's password changes; the Provider's spec is edited (a new
    // generation triggers a reconcile): the old password fails, the failure
    // domains stay.
    vsphere.set_script(script("new-pw"));
    let mut edited = provider(2);
    edited["status"] = status["status"].clone();
    watches.send("providers", json!({"type": "MODIFIED", "object": edited}));
    let status = next_patch(&mut patches, "/providers/prod-vsphere/status", |_| true).await;
    assert_eq!(
        status["status"]["conditions"][0]["reason"], "ConnectFailed",
        "{status}"
    );
    assert_eq!(
        status["status"]["failureDomains"].as_array().map(Vec::len),
        Some(3),
        "kept on a connect failure"
    );

    // The Secret is rotated: the next try (the backoff's 5 s) reads it and
    // logs in again with the new password, without a restart.
    let rotated = std::time::Instant::now();
    *held_secret.lock().unwrap() = secret(Some("new-pw"), "3");
    let status = next_patch(&mut patches, "/providers/prod-vsphere/status", |_| true).await;
    assert_eq!(
        status["status"]["conditions"][0]["reason"], "Connected",
        "{status}"
    );
    assert!(
        rotated.elapsed() < Duration::from_secs(8),
        "took {:?}: the next retry",
        rotated.elapsed()
    );
    let passwords: Vec<String> = vsphere
        .connects()
        .iter()
        .map(|c| c.password.expose().to_string())
        .collect();
    assert_eq!(passwords.first().map(String::as_str), Some("old-pw"));
    assert_eq!(
        passwords.last().map(String::as_str),
        Some("new-pw"),
        "{passwords:?}"
    );
    role.abort();

    // Secrets and ConfigMaps: only GETs by name, never a list or a watch.
    let requests = requests.lock().unwrap().clone();
    let reads: Vec<&String> = requests
        .iter()
        .filter(|r| r.contains("/secrets") || r.contains("/configmaps"))
        .collect();
    assert!(reads.len() >= 4, "read at each reconcile: {reads:?}");
    assert!(
        reads
            .iter()
            .all(|r| r.starts_with(&format!("GET {SECRET_PATH}?"))),
        "{reads:?}"
    );
}
