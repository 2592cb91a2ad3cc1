//! Contract tests of vsphere-client's REST module against the scripted
//! vCenter of the project's test kit (`vsphere-testkit`, which serves the
//! SOAP side and the `/api` session): the `/api` paths and bodies the
//! simulator does not serve, the fallback to `/rest`, SOAP session sharing
//! (vCenter 8.0 U3), 401 then re-login (counted, alone and under
//! concurrency), each vAPI error kind in both shapes, bodies that are not
//! JSON, and secrets that must never leak.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use vsphere_client::rest::{
    ApiFlavor, Cardinality, CategorySpec, NetworkMapping, OvfDeploySpec, RestClient, RestErrorType,
    TagSpec, VmTemplateDeploySpec, VmTemplateSpec,
};
use vsphere_client::types::ManagedObjectReference;
use vsphere_client::{Client, ErrorKind, RetryConfig};
use vsphere_testkit::{MockVCenter, SESSION_HEADER};
use vsphere_tests::CapturedLogs;
use wiremock::matchers::{
    body_json, body_string_contains, header, header_exists, method, path, query_param,
};
use wiremock::{Mock, Request, ResponseTemplate};

const USER: &str = "administrator@vsphere.local";
const PASSWORD: &str = "Rest-Pa55-that-must-never-leak";
/// The session id of the `/rest` login (the kit serves `/api` only).
const REST_SESSION: &str = "b00c5a7e-rest-session-one-secret";

/// A scripted vCenter accepting USER / PASSWORD, `/api/session` built in:
/// `/api` calls without a live session get 401.
async fn vcenter() -> MockVCenter {
    MockVCenter::builder()
        .credentials(USER, PASSWORD)
        .start()
        .await
}

fn fast_retry() -> RetryConfig {
    RetryConfig {
        max_retries: 2,
        initial_backoff: Duration::from_millis(5),
        max_backoff: Duration::from_millis(20),
    }
}

/// A SOAP client without a session: the REST side logs in by itself.
async fn soap(vc: &MockVCenter) -> Client {
    Client::builder(&vc.url())
        .anonymous()
        .api_version("8.0.3.0")
        .keepalive(None)
        .retry(fast_retry())
        .connect()
        .await
        .expect("SOAP connect")
}

/// JSON with a status, as the server sends it.
fn json_reply(status: u16, body: serde_json::Value) -> ResponseTemplate {
    ResponseTemplate::new(status).set_body_raw(body.to_string(), "application/json")
}

/// The session id each `verb /api/session` request carried.
fn session_ids_sent(requests: &[Request], verb: &str) -> Vec<Option<String>> {
    requests
        .iter()
        .filter(|r| r.method.as_str() == verb && r.url.path() == "/api/session")
        .map(|r| {
            let id = r.headers.get(SESSION_HEADER)?.to_str().ok()?;
            Some(id.to_string())
        })
        .collect()
}

/// How many `POST /api/session` logins were made; each with basic
/// authentication (the kit accepts USER / PASSWORD only) and asking for
/// the session id in a header.
async fn api_logins(vc: &MockVCenter) -> usize {
    let logins: Vec<Request> = vc
        .raw_requests()
        .await
        .into_iter()
        .filter(|r| r.method.as_str() == "POST" && r.url.path() == "/api/session")
        .collect();
    for login in &logins {
        assert_eq!(
            login
                .headers
                .get("vmware-use-header-authn")
                .and_then(|v| v.to_str().ok()),
            Some("true"),
            "{:?}",
            login.headers
        );
    }
    logins.len()
}

fn basic(user: &str, password: &str) -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let input = format!("{user}:{password}");
    let bytes = input.as_bytes();
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    format!("Basic {out}")
}

async fn api_client(vc: &MockVCenter) -> RestClient {
    RestClient::builder(&soap(vc).await)
        .credentials(USER, PASSWORD)
        .keepalive(None)
        .connect()
        .await
        .expect("REST login")
}

/// A mock for calls that carry a session id (the kit lets only live ones
/// through).
fn with_session(method: wiremock::matchers::MethodExactMatcher) -> wiremock::MockBuilder {
    Mock::given(method).and(header_exists(SESSION_HEADER))
}

fn vm() -> ManagedObjectReference {
    ManagedObjectReference::new("VirtualMachine", "vm-42")
}

const CATEGORY_ID: &str = "urn:vmomi:InventoryServiceCategory:3a1b:GLOBAL";
const TAG_ID: &str = "urn:vmomi:InventoryServiceTag:77c0:GLOBAL";

// ---- sessions ----------------------------------------------------------------

#[tokio::test]
async fn api_session_is_created_used_and_deleted() {
    let vc = vcenter().await;
    let rest = api_client(&vc).await;
    let id = vc.api_session_ids()[0].clone();
    Mock::given(method("GET"))
        .and(path("/api/cis/tagging/category"))
        .and(header(SESSION_HEADER, id.as_str()))
        .respond_with(json_reply(200, json!([CATEGORY_ID])))
        .expect(1)
        .mount(vc.server())
        .await;
    assert_eq!(rest.flavor(), ApiFlavor::Api);
    assert_eq!(
        rest.tagging().list_categories().await.unwrap(),
        [CATEGORY_ID]
    );
    assert_eq!(rest.session_info().await.unwrap().user, USER);
    rest.logout().await.expect("logout");
    assert_eq!(api_logins(&vc).await, 1);
    assert_eq!(
        session_ids_sent(&vc.raw_requests().await, "DELETE"),
        [Some(id)],
        "the session created is the one deleted, once"
    );
}

/// A server without `/api` paths: one login on `/rest`, answered with
/// [`REST_SESSION`].
async fn mount_rest_only_login(server: &wiremock::MockServer) {
    Mock::given(method("POST"))
        .and(path("/api/session"))
        .respond_with(ResponseTemplate::new(404).set_body_string("404 page not found"))
        .expect(1)
        .mount(server)
        .await;
    Mock::given(method("POST"))
        .and(path("/rest/com/vmware/cis/session"))
        .and(header("authorization", basic(USER, PASSWORD).as_str()))
        .respond_with(json_reply(200, json!({"value": REST_SESSION})))
        .expect(1)
        .mount(server)
        .await;
}

#[tokio::test]
async fn servers_without_api_paths_get_the_rest_paths() {
    let vc = vcenter().await;
    let server = vc.server();
    mount_rest_only_login(server).await;
    Mock::given(method("POST"))
        .and(path(format!(
            "/rest/com/vmware/cis/tagging/tag/id:{CATEGORY_ID}"
        )))
        .and(query_param("~action", "list-tags-for-category"))
        .and(header(SESSION_HEADER, REST_SESSION))
        .respond_with(json_reply(200, json!({"value": [TAG_ID]})))
        .expect(1)
        .mount(server)
        .await;
    Mock::given(method("POST"))
        .and(path("/rest/com/vmware/cis/tagging/category"))
        .and(body_json(json!({"create_spec": {"name": "zone", "description": "", "cardinality": "MULTIPLE", "associable_types": []}})))
        .respond_with(json_reply(200, json!({"value": CATEGORY_ID})))
        .expect(1)
        .mount(server)
        .await;
    let rest = api_client(&vc).await;
    assert_eq!(rest.flavor(), ApiFlavor::Rest);
    assert_eq!(
        rest.tagging()
            .list_tags_for_category(CATEGORY_ID)
            .await
            .unwrap(),
        [TAG_ID]
    );
    let spec = CategorySpec::new("zone", Cardinality::Multiple);
    assert_eq!(
        rest.tagging().create_category(&spec).await.unwrap(),
        CATEGORY_ID
    );
}

#[tokio::test]
async fn the_soap_session_is_shared_where_the_server_accepts_it() {
    // vCenter 8.0 U3: the vmware_soap_session value works as vmware-api-session-id.
    let vc = MockVCenter::builder()
        .credentials(USER, PASSWORD)
        .share_soap_session()
        .start()
        .await;
    let soap = Client::builder(&vc.url())
        .credentials(USER, PASSWORD)
        .api_version("8.0.3.0")
        .keepalive(None)
        .connect()
        .await
        .expect("SOAP login");
    let soap_id = vc.session_cookies()[0].clone();
    Mock::given(method("GET"))
        .and(path("/api/cis/tagging/tag"))
        .and(header(SESSION_HEADER, soap_id.as_str()))
        .respond_with(json_reply(200, json!([TAG_ID])))
        .expect(1)
        .mount(vc.server())
        .await;
    let rest = soap.rest().await.expect("REST from the SOAP session");
    assert!(rest.shares_soap_session());
    assert_eq!(rest.tagging().list_tags().await.unwrap(), [TAG_ID]);
    rest.logout()
        .await
        .expect("logout leaves the SOAP session alone");
    let requests = vc.raw_requests().await;
    assert_eq!(
        session_ids_sent(&requests, "GET"),
        [Some(soap_id)],
        "the shared session checked once"
    );
    // Nothing may create a second session, nor end the shared one.
    assert_eq!(session_ids_sent(&requests, "POST"), []);
    assert_eq!(session_ids_sent(&requests, "DELETE"), []);
}

#[tokio::test]
async fn logout_on_drop_deletes_the_session() {
    let vc = vcenter().await;
    let rest = RestClient::builder(&soap(&vc).await)
        .credentials(USER, PASSWORD)
        .logout_on_drop(true)
        .connect()
        .await
        .expect("REST login");
    let id = vc.api_session_ids()[0].clone();
    let clone = rest.clone();
    drop(rest);
    drop(clone);
    for _ in 0..100 {
        let deleted = session_ids_sent(&vc.raw_requests().await, "DELETE");
        if !deleted.is_empty() {
            assert_eq!(deleted, [Some(id)], "the session deleted once");
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("the session was not deleted on drop");
}

#[tokio::test]
async fn a_given_session_id_is_checked() {
    // The kit answers 401 UNAUTHENTICATED for an id it did not hand out.
    let vc = vcenter().await;
    let err = RestClient::builder(&soap(&vc).await)
        .session_id("stale-session-id")
        .keepalive(None)
        .connect()
        .await
        .expect_err("refused session");
    assert!(
        err.is_rest_error(&RestErrorType::Unauthenticated),
        "{err:?}"
    );
}

// ---- tagging on /api ------------------------------------------------------------

#[tokio::test]
async fn tagging_api_paths_and_bodies() {
    let vc = vcenter().await;
    let server = vc.server();
    let mounts = [
        with_session(method("POST"))
            .and(path("/api/cis/tagging/category"))
            .and(body_json(json!({"name": "zone", "description": "failure domains", "cardinality": "SINGLE", "associable_types": ["Datacenter", "ClusterComputeResource"]})))
            .respond_with(json_reply(201, json!(CATEGORY_ID))),
        with_session(method("GET"))
            .and(path(format!("/api/cis/tagging/category/{CATEGORY_ID}")))
            .respond_with(json_reply(200, json!({"id": CATEGORY_ID, "name": "zone", "description": "failure domains", "cardinality": "SINGLE", "associable_types": ["Datacenter"], "used_by": []}))),
        with_session(method("PATCH"))
            .and(path(format!("/api/cis/tagging/category/{CATEGORY_ID}")))
            .and(body_json(json!({"cardinality": "MULTIPLE"})))
            .respond_with(ResponseTemplate::new(204)),
        with_session(method("DELETE"))
            .and(path(format!("/api/cis/tagging/category/{CATEGORY_ID}")))
            .respond_with(ResponseTemplate::new(204)),
        with_session(method("POST"))
            .and(path("/api/cis/tagging/tag"))
            .and(body_json(json!({"name": "zone-a", "description": "", "category_id": CATEGORY_ID})))
            .respond_with(json_reply(201, json!(TAG_ID))),
        with_session(method("GET"))
            .and(path("/api/cis/tagging/tag"))
            .respond_with(json_reply(200, json!([TAG_ID]))),
        with_session(method("GET"))
            .and(path(format!("/api/cis/tagging/tag/{TAG_ID}")))
            .respond_with(json_reply(200, json!({"id": TAG_ID, "name": "zone-a", "description": "", "category_id": CATEGORY_ID, "used_by": []}))),
        with_session(method("POST"))
            .and(path("/api/cis/tagging/tag"))
            .and(query_param("action", "list-tags-for-category"))
            .and(body_json(json!({"category_id": CATEGORY_ID})))
            .respond_with(json_reply(200, json!([TAG_ID]))),
        with_session(method("POST"))
            .and(path(format!("/api/cis/tagging/tag-association/{TAG_ID}")))
            .and(query_param("action", "attach"))
            .and(body_json(json!({"object_id": {"type": "VirtualMachine", "id": "vm-42"}})))
            .respond_with(ResponseTemplate::new(204)),
        with_session(method("POST"))
            .and(path(format!("/api/cis/tagging/tag-association/{TAG_ID}")))
            .and(query_param("action", "detach"))
            .and(body_json(json!({"object_id": {"type": "VirtualMachine", "id": "vm-42"}})))
            .respond_with(ResponseTemplate::new(204)),
        with_session(method("POST"))
            .and(path("/api/cis/tagging/tag-association"))
            .and(query_param("action", "list-attached-tags"))
            .and(body_json(json!({"object_id": {"type": "VirtualMachine", "id": "vm-42"}})))
            .respond_with(json_reply(200, json!([TAG_ID]))),
        with_session(method("POST"))
            .and(path(format!("/api/cis/tagging/tag-association/{TAG_ID}")))
            .and(query_param("action", "list-attached-objects"))
            .respond_with(json_reply(200, json!([{"type": "VirtualMachine", "id": "vm-42"}, {"type": "HostSystem", "id": "host-9"}]))),
        with_session(method("POST"))
            .and(path("/api/cis/tagging/tag-association"))
            .and(query_param("action", "attach-multiple-tags-to-object"))
            .and(body_json(json!({"object_id": {"type": "VirtualMachine", "id": "vm-42"}, "tag_ids": [TAG_ID, "urn:missing"]})))
            .respond_with(json_reply(200, json!({"success": false, "error_messages": [{"id": "cis.tagging.objectNotFound.error", "default_message": "Tagging object urn:missing not found", "args": ["urn:missing"]}]}))),
        with_session(method("POST"))
            .and(path(format!("/api/cis/tagging/tag-association/{TAG_ID}")))
            .and(query_param("action", "attach-tag-to-multiple-objects"))
            .and(body_json(json!({"object_ids": [{"type": "VirtualMachine", "id": "vm-42"}, {"type": "HostSystem", "id": "host-9"}]})))
            .respond_with(json_reply(200, json!({"success": true, "error_messages": []}))),
    ];
    for mock in mounts {
        mock.expect(1..).mount(server).await;
    }
    let rest = api_client(&vc).await;
    let tagging = rest.tagging();
    let spec = CategorySpec::new("zone", Cardinality::Single)
        .description("failure domains")
        .associable_types(["Datacenter", "ClusterComputeResource"]);
    assert_eq!(tagging.create_category(&spec).await.unwrap(), CATEGORY_ID);
    assert_eq!(
        tagging
            .get_category(CATEGORY_ID)
            .await
            .unwrap()
            .associable_types,
        ["Datacenter"]
    );
    let update = vsphere_client::rest::CategoryUpdate {
        cardinality: Some(Cardinality::Multiple),
        ..Default::default()
    };
    tagging.update_category(CATEGORY_ID, &update).await.unwrap();
    assert_eq!(
        tagging
            .create_tag(&TagSpec::new("zone-a", CATEGORY_ID))
            .await
            .unwrap(),
        TAG_ID
    );
    assert_eq!(tagging.tags().await.unwrap()[0].name, "zone-a");
    assert_eq!(
        tagging.list_tags_for_category(CATEGORY_ID).await.unwrap(),
        [TAG_ID]
    );
    tagging.attach(TAG_ID, &vm()).await.unwrap();
    assert_eq!(tagging.list_attached_tags(&vm()).await.unwrap(), [TAG_ID]);
    let host = ManagedObjectReference::new("HostSystem", "host-9");
    assert_eq!(
        tagging.list_attached_objects(TAG_ID).await.unwrap(),
        [vm(), host.clone()]
    );
    let batch = tagging
        .attach_tags(&[TAG_ID.to_string(), "urn:missing".to_string()], &vm())
        .await
        .unwrap();
    assert!(!batch.success);
    assert_eq!(batch.error_messages[0].args, ["urn:missing"]);
    assert!(
        tagging
            .attach_to_objects(TAG_ID, &[vm(), host])
            .await
            .unwrap()
            .success
    );
    tagging.detach(TAG_ID, &vm()).await.unwrap();
    tagging.delete_category(CATEGORY_ID).await.unwrap();
    assert_eq!(api_logins(&vc).await, 1, "every call on the first session");
}

// ---- content library on /api ----------------------------------------------------

#[tokio::test]
async fn library_api_paths_and_ovf_deploy() {
    let vc = vcenter().await;
    let server = vc.server();
    let library = json!({"id": "lib-1", "name": "images", "type": "LOCAL", "storage_backings": [{"type": "DATASTORE", "datastore_id": "datastore-11"}], "creation_time": "2024-01-01T00:00:00.000Z"});
    let item = json!({"id": "item-1", "library_id": "lib-1", "name": "photon", "type": "ovf", "size": 1234, "cached": true, "content_version": "2"});
    let mounts = [
        with_session(method("GET"))
            .and(path("/api/content/library"))
            .respond_with(json_reply(200, json!(["lib-1"]))),
        with_session(method("GET"))
            .and(path("/api/content/library/lib-1"))
            .respond_with(json_reply(200, library)),
        with_session(method("POST"))
            .and(path("/api/content/library"))
            .and(query_param("action", "find"))
            .and(body_json(json!({"name": "images"})))
            .respond_with(json_reply(200, json!(["lib-1"]))),
        with_session(method("GET"))
            .and(path("/api/content/library/item"))
            .and(query_param("library_id", "lib-1"))
            .respond_with(json_reply(200, json!(["item-1"]))),
        with_session(method("GET"))
            .and(path("/api/content/library/item/item-1"))
            .respond_with(json_reply(200, item)),
        with_session(method("POST"))
            .and(path("/api/content/library/item"))
            .and(query_param("action", "find"))
            .and(body_json(json!({"name": "photon", "library_id": "lib-1"})))
            .respond_with(json_reply(200, json!(["item-1"]))),
        with_session(method("POST"))
            .and(path("/api/vcenter/ovf/library-item/item-1"))
            .and(query_param("action", "deploy"))
            .and(body_json(json!({
                "target": {"resource_pool_id": "resgroup-8", "folder_id": "group-v3"},
                "deployment_spec": {"name": "web-1", "accept_all_EULA": true, "default_datastore_id": "datastore-11",
                                    "network_mappings": {"VM Network": "dvportgroup-13"}, "storage_provisioning": "thin"}
            })))
            .respond_with(json_reply(200, json!({"succeeded": true, "resource_id": {"type": "VirtualMachine", "id": "vm-99"}, "error": {"errors": [], "warnings": [], "information": []}}))),
    ];
    for mock in mounts {
        mock.expect(1..).mount(server).await;
    }
    Mock::given(method("POST"))
        .and(path("/api/vcenter/ovf/library-item/item-2"))
        .and(query_param("action", "deploy"))
        .respond_with(json_reply(200, json!({"succeeded": false, "error": {"errors": [{"category": "SERVER", "error": {"@class": "com.vmware.vapi.std.errors.unable_to_allocate_resource", "messages": [{"id": "x", "default_message": "Not enough memory in the pool", "args": []}]}}]}})))
        .mount(server)
        .await;
    let rest = api_client(&vc).await;
    let content = rest.library();
    let libraries = content.libraries().await.unwrap();
    assert_eq!(
        libraries[0].storage_backings[0].datastore_id.as_deref(),
        Some("datastore-11")
    );
    assert_eq!(
        content.by_name("images").await.unwrap().unwrap().id,
        "lib-1"
    );
    let items = content.items("lib-1").await.unwrap();
    assert_eq!(
        (items[0].name.as_str(), items[0].size),
        ("photon", Some(1234))
    );
    let item = content
        .item_by_name("lib-1", "photon")
        .await
        .unwrap()
        .unwrap();
    let mut spec = OvfDeploySpec::new(
        "web-1",
        ManagedObjectReference::new("ResourcePool", "resgroup-8"),
    );
    spec.folder = Some(ManagedObjectReference::new("Folder", "group-v3"));
    spec.datastore = Some(ManagedObjectReference::new("Datastore", "datastore-11"));
    spec.accept_all_eula = true;
    spec.storage_provisioning = Some(vsphere_client::rest::StorageProvisioning::Thin);
    spec.network_mappings = vec![NetworkMapping {
        ovf_network: "VM Network".into(),
        network: ManagedObjectReference::new("DistributedVirtualPortgroup", "dvportgroup-13"),
    }];
    let vm = content.deploy_ovf(&item.id, &spec).await.expect("deploy");
    assert_eq!(vm, ManagedObjectReference::new("VirtualMachine", "vm-99"));
    let err = content
        .deploy_ovf("item-2", &spec)
        .await
        .expect_err("failed deployment");
    assert!(
        err.is_rest_error(&RestErrorType::UnableToAllocateResource),
        "{err:?}"
    );
    assert!(
        err.to_string().contains("Not enough memory in the pool"),
        "{err}"
    );
    assert_eq!(api_logins(&vc).await, 1, "every call on the first session");
}

// ---- VM-template library items on /api and /rest ------------------------------

/// The deploy spec of both flavors' tests: a machine `web-1` in a pool and
/// folder, on a datastore.
fn template_deploy_spec() -> VmTemplateDeploySpec {
    let mut spec = VmTemplateDeploySpec::new(
        "web-1",
        ManagedObjectReference::new("ResourcePool", "resgroup-8"),
    );
    spec.folder = Some(ManagedObjectReference::new("Folder", "group-v3"));
    spec.datastore = Some(ManagedObjectReference::new("Datastore", "datastore-11"));
    spec
}

/// The body of [`template_deploy_spec`], as the Automation API reference
/// writes `vcenter.vm_template.LibraryItems.DeploySpec`.
fn template_deploy_body() -> serde_json::Value {
    json!({
        "name": "web-1",
        "placement": {"folder": "group-v3", "resource_pool": "resgroup-8"},
        "vm_home_storage": {"datastore": "datastore-11"},
        "disk_storage": {"datastore": "datastore-11"},
        "powered_on": false
    })
}

#[tokio::test]
async fn vm_template_items_are_made_and_deployed_on_api_paths() {
    let vc = vcenter().await;
    let server = vc.server();
    with_session(method("POST"))
        .and(path("/api/vcenter/vm-template/library-items"))
        .and(body_json(json!({
            "source_vm": "vm-42", "name": "golden", "library": "lib-1",
            "placement": {"folder": "group-v3", "cluster": "domain-c7"}
        })))
        .respond_with(json_reply(201, json!("item-7")))
        .expect(1)
        .mount(server)
        .await;
    with_session(method("POST"))
        .and(path("/api/vcenter/vm-template/library-items/item-7"))
        .and(query_param("action", "deploy"))
        .and(body_json(template_deploy_body()))
        .respond_with(json_reply(200, json!("vm-101")))
        .expect(1)
        .mount(server)
        .await;
    with_session(method("POST"))
        .and(path("/api/vcenter/vm-template/library-items/item-gone"))
        .and(query_param("action", "deploy"))
        .respond_with(json_reply(404, json!({"error_type": "NOT_FOUND", "messages": [{"id": "com.vmware.vdcs.vmtx-main.library_item_not_found", "default_message": "Library item item-gone not found.", "args": ["item-gone"]}]})))
        .expect(1)
        .mount(server)
        .await;
    let rest = api_client(&vc).await;
    let content = rest.library();
    let item = content
        .create_vm_template(&VmTemplateSpec {
            name: "golden".into(),
            source_vm: vm(),
            library_id: "lib-1".into(),
            folder: Some(ManagedObjectReference::new("Folder", "group-v3")),
            cluster: Some(ManagedObjectReference::new(
                "ClusterComputeResource",
                "domain-c7",
            )),
            ..Default::default()
        })
        .await
        .expect("create");
    assert_eq!(item, "item-7");
    let spec = template_deploy_spec();
    assert_eq!(
        content
            .deploy_vm_template(&item, &spec)
            .await
            .expect("deploy"),
        ManagedObjectReference::new("VirtualMachine", "vm-101")
    );
    let err = content
        .deploy_vm_template("item-gone", &spec)
        .await
        .expect_err("no such item");
    assert!(err.is_rest_error(&RestErrorType::NotFound), "{err:?}");
    assert!(err.to_string().contains("item-gone not found"), "{err}");
    // No placement to run in: refused before anything is sent.
    let mut nowhere = spec.clone();
    nowhere.resource_pool = None;
    let err = content
        .deploy_vm_template(&item, &nowhere)
        .await
        .expect_err("no placement");
    assert_eq!(err.kind(), ErrorKind::InvalidConfig, "{err:?}");
}

/// What the operator sends for a standalone host's failure domain: the
/// host with the pool, folder and datastore, in both deploys' bodies.
#[tokio::test]
async fn deploys_onto_a_standalone_host_name_the_host_with_the_placement() {
    let vc = vcenter().await;
    let server = vc.server();
    with_session(method("POST"))
        .and(path("/api/vcenter/ovf/library-item/item-1"))
        .and(query_param("action", "deploy"))
        .and(body_json(json!({
            "target": {"resource_pool_id": "resgroup-8", "folder_id": "group-v3", "host_id": "host-5"},
            "deployment_spec": {"name": "web-1", "accept_all_EULA": true, "default_datastore_id": "datastore-11"}
        })))
        .respond_with(json_reply(200, json!({"succeeded": true, "resource_id": {"type": "VirtualMachine", "id": "vm-99"}})))
        .expect(1)
        .mount(server)
        .await;
    let mut vmtx_body = template_deploy_body();
    vmtx_body["placement"]["host"] = json!("host-5");
    with_session(method("POST"))
        .and(path("/api/vcenter/vm-template/library-items/item-7"))
        .and(query_param("action", "deploy"))
        .and(body_json(vmtx_body))
        .respond_with(json_reply(200, json!("vm-101")))
        .expect(1)
        .mount(server)
        .await;
    let rest = api_client(&vc).await;
    let content = rest.library();
    let host = Some(ManagedObjectReference::new("HostSystem", "host-5"));
    let mut ovf = OvfDeploySpec::new(
        "web-1",
        ManagedObjectReference::new("ResourcePool", "resgroup-8"),
    );
    ovf.folder = Some(ManagedObjectReference::new("Folder", "group-v3"));
    ovf.datastore = Some(ManagedObjectReference::new("Datastore", "datastore-11"));
    ovf.host = host.clone();
    ovf.accept_all_eula = true;
    assert_eq!(
        content.deploy_ovf("item-1", &ovf).await.expect("deploy"),
        ManagedObjectReference::new("VirtualMachine", "vm-99")
    );
    let mut vmtx = template_deploy_spec();
    vmtx.host = host;
    assert_eq!(
        content
            .deploy_vm_template("item-7", &vmtx)
            .await
            .expect("deploy"),
        ManagedObjectReference::new("VirtualMachine", "vm-101")
    );
}

#[tokio::test]
async fn vm_template_items_are_deployed_on_rest_paths_with_plain_ids() {
    // `/rest` serves `vcenter/vm-template` outside `com/vmware`, with plain
    // ids and `?action=`, the spec wrapped as `{"spec": ...}`.
    let vc = vcenter().await;
    let server = vc.server();
    mount_rest_only_login(server).await;
    Mock::given(method("POST"))
        .and(path("/rest/vcenter/vm-template/library-items/item-7"))
        .and(query_param("action", "deploy"))
        .and(header(SESSION_HEADER, REST_SESSION))
        .and(body_json(json!({"spec": template_deploy_body()})))
        .respond_with(json_reply(200, json!({"value": "vm-102"})))
        .expect(1)
        .mount(server)
        .await;
    let rest = api_client(&vc).await;
    assert_eq!(rest.flavor(), ApiFlavor::Rest);
    assert_eq!(
        rest.library()
            .deploy_vm_template("item-7", &template_deploy_spec())
            .await
            .expect("deploy"),
        ManagedObjectReference::new("VirtualMachine", "vm-102")
    );
}

// ---- 401 and re-login ------------------------------------------------------------

/// The list of tags, answered a little late, for a live session only:
/// after [`MockVCenter::expire_sessions`] the first call gets 401.
async fn tags(vc: &MockVCenter) {
    with_session(method("GET"))
        .and(path("/api/cis/tagging/tag"))
        .respond_with(json_reply(200, json!([TAG_ID])).set_delay(Duration::from_millis(20)))
        .mount(vc.server())
        .await;
}

#[tokio::test]
async fn a_401_logs_in_again_and_retries_once() {
    let vc = vcenter().await;
    tags(&vc).await;
    let rest = api_client(&vc).await;
    vc.expire_sessions();
    assert_eq!(
        rest.tagging().list_tags().await.expect("re-login"),
        [TAG_ID]
    );
    assert_eq!(
        api_logins(&vc).await,
        2,
        "the initial login and one re-login"
    );
    assert_eq!(
        rest.tagging().list_tags().await.expect("new session"),
        [TAG_ID]
    );
    assert_eq!(api_logins(&vc).await, 2);
}

#[tokio::test]
async fn concurrent_401s_cause_one_login() {
    let vc = vcenter().await;
    tags(&vc).await;
    let rest = api_client(&vc).await;
    vc.expire_sessions();
    let calls: Vec<_> = (0..16)
        .map(|_| {
            let rest = rest.clone();
            tokio::spawn(async move { rest.tagging().list_tags().await })
        })
        .collect();
    for call in calls {
        assert_eq!(call.await.expect("join").expect("call"), [TAG_ID]);
    }
    assert_eq!(api_logins(&vc).await, 2, "one re-login for 16 calls");
}

#[tokio::test]
async fn a_failing_re_login_is_reported_once_to_every_waiting_call() {
    let vc = vcenter().await;
    tags(&vc).await;
    let rest = api_client(&vc).await;
    // From now on the session is gone and the password is refused.
    vc.expire_sessions();
    let refused = Arc::new(AtomicUsize::new(0));
    let counter = refused.clone();
    Mock::given(method("POST"))
        .and(path("/api/session"))
        .respond_with(move |_: &Request| {
            counter.fetch_add(1, Ordering::SeqCst);
            json_reply(
                401,
                json!({"error_type": "UNAUTHENTICATED", "messages": []}),
            )
        })
        .mount(vc.server())
        .await;
    let calls: Vec<_> = (0..4)
        .map(|_| {
            let rest = rest.clone();
            tokio::spawn(async move { rest.tagging().list_tags().await })
        })
        .collect();
    for call in calls {
        let err = call.await.expect("join").expect_err("cannot log in again");
        // The call that tried gets the server's answer; the ones queued
        // behind it get NotAuthenticated naming it.
        let refused_login = err.is_rest_error(&RestErrorType::Unauthenticated)
            || (err.kind() == ErrorKind::NotAuthenticated
                && err.to_string().contains("UNAUTHENTICATED"));
        assert!(refused_login, "{err:?}");
    }
    assert_eq!(vc.api_session_ids().len(), 1, "no login succeeded since");
    // One attempt for the four calls that found the session expired.
    assert_eq!(refused.load(Ordering::SeqCst), 1);
    assert_eq!(api_logins(&vc).await, 2);
}

// ---- errors ------------------------------------------------------------------------

#[tokio::test]
async fn each_vapi_error_kind_decodes_in_both_shapes() {
    let cases: &[(u16, &str, RestErrorType)] = &[
        (400, "already_exists", RestErrorType::AlreadyExists),
        (400, "invalid_argument", RestErrorType::InvalidArgument),
        (
            400,
            "invalid_element_type",
            RestErrorType::InvalidElementType,
        ),
        (
            400,
            "not_allowed_in_current_state",
            RestErrorType::NotAllowedInCurrentState,
        ),
        (400, "resource_in_use", RestErrorType::ResourceInUse),
        (400, "unsupported", RestErrorType::Unsupported),
        (401, "unauthenticated", RestErrorType::Unauthenticated),
        (403, "unauthorized", RestErrorType::Unauthorized),
        (404, "not_found", RestErrorType::NotFound),
        (
            500,
            "internal_server_error",
            RestErrorType::InternalServerError,
        ),
        (500, "error", RestErrorType::Error),
        (
            503,
            "service_unavailable",
            RestErrorType::ServiceUnavailable,
        ),
        (504, "timed_out", RestErrorType::TimedOut),
        (400, "concurrent_change", RestErrorType::ConcurrentChange),
        (
            400,
            "brand_new_error",
            RestErrorType::Unknown("BRAND_NEW_ERROR".into()),
        ),
    ];
    // /api shape.
    let vc = vcenter().await;
    for (status, name, _) in cases {
        Mock::given(method("POST"))
            .and(path("/api/cis/tagging/tag"))
            .and(body_string_contains(format!("\"{name}\"").as_str()))
            .respond_with(json_reply(
                *status,
                json!({"error_type": name.to_uppercase(), "messages": [{"id": format!("test.{name}"), "default_message": format!("message of {name}"), "args": []}]}),
            ))
            .mount(vc.server())
            .await;
    }
    // (The UNAUTHENTICATED case logs in again once, then reports the error.)
    let rest = api_client(&vc).await;
    for (status, name, expected) in cases {
        let err = rest
            .tagging()
            .create_tag(&TagSpec::new(*name, CATEGORY_ID))
            .await
            .expect_err("error reply");
        assert_eq!(err.kind(), ErrorKind::Rest, "{name}: {err:?}");
        let rest_error = err.rest_error().expect("vAPI error");
        assert_eq!(rest_error.error_type(), expected, "{name}");
        assert_eq!(rest_error.http_status(), *status);
        assert_eq!(rest_error.messages()[0].id, format!("test.{name}"));
        assert!(
            err.to_string().contains(&format!("message of {name}")),
            "{err}"
        );
        // The error names the object: `create tag "already_exists": ALREADY_EXISTS: ...`.
        assert!(
            err.to_string()
                .starts_with(&format!("create tag {name:?}: {}: ", name.to_uppercase())),
            "{err}"
        );
    }

    // /rest shape.
    let vc = vcenter().await;
    Mock::given(method("POST"))
        .and(path("/api/session"))
        .respond_with(ResponseTemplate::new(404))
        .mount(vc.server())
        .await;
    Mock::given(method("POST"))
        .and(path("/rest/com/vmware/cis/session"))
        .respond_with(json_reply(200, json!({"value": REST_SESSION})))
        .mount(vc.server())
        .await;
    for (status, name, _) in cases {
        if *status == 401 {
            continue; // would log in again; covered above and in the re-login tests
        }
        Mock::given(method("POST"))
            .and(path("/rest/com/vmware/cis/tagging/tag"))
            .and(body_string_contains(format!("\"{name}\"").as_str()))
            .respond_with(json_reply(
                *status,
                json!({"type": format!("com.vmware.vapi.std.errors.{name}"), "value": {"messages": [{"id": format!("test.{name}"), "default_message": format!("message of {name}"), "args": []}]}}),
            ))
            .mount(vc.server())
            .await;
    }
    let rest = api_client(&vc).await;
    assert_eq!(rest.flavor(), ApiFlavor::Rest);
    for (status, name, expected) in cases {
        if *status == 401 {
            continue;
        }
        let err = rest
            .tagging()
            .create_tag(&TagSpec::new(*name, CATEGORY_ID))
            .await
            .expect_err("error reply");
        let rest_error = err
            .rest_error()
            .unwrap_or_else(|| panic!("{name}: {err:?}"));
        let expected = match expected {
            RestErrorType::Unknown(_) => {
                RestErrorType::Unknown(format!("com.vmware.vapi.std.errors.{name}"))
            }
            other => other.clone(),
        };
        assert_eq!(*rest_error.error_type(), expected, "{name}");
        assert!(
            err.to_string().contains(&format!("message of {name}")),
            "{err}"
        );
    }
}

#[tokio::test]
async fn bodies_that_are_not_json_are_clear_errors() {
    let vc = vcenter().await;
    let server = vc.server();
    Mock::given(method("GET"))
        .and(path("/api/cis/tagging/category"))
        .respond_with(ResponseTemplate::new(200).set_body_raw(
            "<html><head><title>Maintenance</title></head><body><h1>vCenter is being upgraded</h1></body></html>",
            "text/html",
        ))
        .mount(server)
        .await;
    Mock::given(method("GET"))
        .and(path("/api/cis/tagging/tag"))
        .respond_with(
            ResponseTemplate::new(200).set_body_raw(r#"["urn:a", "urn:"#, "application/json"),
        )
        .mount(server)
        .await;
    Mock::given(method("GET"))
        .and(path("/api/content/library"))
        .respond_with(ResponseTemplate::new(502).set_body_raw(
            "<html><body>Bad gateway from the proxy</body></html>",
            "text/html",
        ))
        .mount(server)
        .await;
    Mock::given(method("GET"))
        .and(path("/api/content/library/item/item-1"))
        .respond_with(json_reply(200, json!({"id": 7})))
        .mount(server)
        .await;
    let rest = api_client(&vc).await;
    let err = rest.tagging().list_categories().await.expect_err("HTML");
    assert_eq!(err.kind(), ErrorKind::NotJson, "{err:?}");
    assert!(err.to_string().contains("not JSON (text/html)"), "{err}");
    assert!(
        err.to_string().contains("vCenter is being upgraded"),
        "{err}"
    );
    let err = rest.tagging().list_tags().await.expect_err("truncated");
    assert_eq!(err.kind(), ErrorKind::Decode, "{err:?}");
    assert!(err.to_string().contains("malformed JSON"), "{err}");
    let err = rest.library().list().await.expect_err("502 page");
    assert_eq!(err.kind(), ErrorKind::HttpStatus(502), "{err:?}");
    assert!(
        err.to_string().contains("Bad gateway from the proxy"),
        "{err}"
    );
    // 502 is retried for a read (twice with this retry policy), then reported.
    let tries = server
        .received_requests()
        .await
        .unwrap_or_default()
        .iter()
        .filter(|r| r.url.path() == "/api/content/library")
        .count();
    assert_eq!(tries, 3);
    let err = rest
        .library()
        .get_item("item-1")
        .await
        .expect_err("wrong shape");
    assert_eq!(err.kind(), ErrorKind::Decode, "{err:?}");
}

#[tokio::test]
async fn creates_are_not_retried_after_a_503() {
    let vc = vcenter().await;
    let server = vc.server();
    Mock::given(method("POST"))
        .and(path("/api/cis/tagging/category"))
        .respond_with(ResponseTemplate::new(503).set_body_string("Service Unavailable"))
        .expect(1)
        .mount(server)
        .await;
    let rest = api_client(&vc).await;
    let err = rest
        .tagging()
        .create_category(&CategorySpec::new("zone", Cardinality::Single))
        .await
        .expect_err("503");
    assert_eq!(err.kind(), ErrorKind::HttpStatus(503), "{err:?}");
}

// ---- secrets -------------------------------------------------------------------------

#[tokio::test]
async fn session_ids_and_passwords_never_appear_in_logs_errors_or_debug() {
    let captured = CapturedLogs::default();
    let subscriber = captured.subscriber(tracing::Level::TRACE);
    // Global, not scoped: a scoped subscriber misses callsites that tests on
    // other threads registered first. The other tests' output lands here
    // too, and must be as free of secrets.
    tracing::subscriber::set_global_default(subscriber)
        .expect("the only global subscriber of this binary");

    let vc = vcenter().await;
    tags(&vc).await;
    Mock::given(method("GET"))
        .and(path("/api/cis/tagging/category"))
        .and(header_exists(SESSION_HEADER))
        .respond_with(json_reply(
            403,
            json!({"error_type": "UNAUTHORIZED", "messages": [{"id": "x", "default_message": "lacks a privilege", "args": []}]}),
        ))
        .mount(vc.server())
        .await;
    let rest = api_client(&vc).await;
    vc.expire_sessions();
    rest.tagging().list_tags().await.expect("re-login");
    let err = rest.tagging().list_categories().await.expect_err("403");
    assert!(err.is_rest_error(&RestErrorType::Unauthorized));
    let texts = [
        captured.text(),
        format!("{rest:?}"),
        format!(
            "{:?}",
            RestClient::builder(&soap(&vc).await).credentials(USER, PASSWORD)
        ),
    ];
    assert!(
        texts[0].contains("rest_call"),
        "the REST spans are logged:\n{}",
        texts[0]
    );
    assert!(texts[0].contains("request:"), "the wire log is on");
    let error_texts = [err.to_string(), format!("{err:?}")];
    let ids = vc.api_session_ids();
    assert_eq!(ids.len(), 2, "the login and the re-login");
    for text in texts.iter().chain(&error_texts) {
        for secret in [PASSWORD, ids[0].as_str(), ids[1].as_str()] {
            assert!(
                !text.contains(secret),
                "secret {secret:?} leaked in:\n{text}"
            );
        }
    }
}
