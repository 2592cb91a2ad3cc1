//! vsphere-client's REST module against the simulator's vAPI endpoints
//! (govmomi 0.24's vcsim serves the `/rest` paths only): sessions, the tag
//! lifecycle on a real VM, a content library with an uploaded OVF item
//! deployed to a VM that the SOAP side then sees, a VM-template item made
//! from a VM and deployed, and the tags CLI.

use std::path::PathBuf;
use std::process::{Command, Output};
use std::time::Duration;

use vsphere_client::rest::{
    ApiFlavor, Cardinality, CategorySpec, CategoryUpdate, ItemSpec, LibraryItemType,
    LocalLibrarySpec, OvfDeploySpec, RestClient, RestErrorType, TagSpec, VmTemplateDeploySpec,
    VmTemplateSpec,
};
use vsphere_client::types::ManagedObjectReference;
use vsphere_client::{Client, ErrorKind};
use vsphere_tests::{ServerTls, Simulator, SimulatorOptions, TestCa, TINY_OVF as OVF};

/// Starts a simulator off the async runtime (the launcher blocks while it
/// starts).
async fn simulator(options: SimulatorOptions) -> Simulator {
    tokio::task::spawn_blocking(move || Simulator::start(options))
        .await
        .expect("join")
        .unwrap_or_else(|e| panic!("simulator: {e}"))
}

async fn plain_simulator() -> Simulator {
    simulator(SimulatorOptions {
        tls: ServerTls::Plain,
        ..Default::default()
    })
    .await
}

async fn soap(sim: &Simulator) -> Client {
    Client::builder(&sim.sdk_url())
        .credentials(sim.username(), sim.password())
        .keepalive(None)
        .connect()
        .await
        .expect("SOAP connect")
}

async fn find(client: &Client, path: &str) -> ManagedObjectReference {
    let search_index = client
        .service_content()
        .search_index
        .clone()
        .expect("search index");
    client
        .vim()
        .find_by_inventory_path(&search_index, path)
        .await
        .expect("FindByInventoryPath")
        .unwrap_or_else(|| panic!("{path} not found"))
}

#[tokio::test]
async fn session_create_use_logout_then_unauthenticated() {
    let sim = plain_simulator().await;
    let client = soap(&sim).await;
    let rest = RestClient::builder(&client)
        .credentials("rest-user", "rest-password")
        .keepalive(None)
        .connect()
        .await
        .expect("REST login");
    // vcsim 0.24 has no /api paths: the client fell back to /rest.
    assert_eq!(rest.flavor(), ApiFlavor::Rest);
    assert!(rest.has_session());
    assert!(!rest.shares_soap_session());
    assert_eq!(
        rest.session_info().await.expect("session info").user,
        "rest-user"
    );
    assert!(rest
        .tagging()
        .list_categories()
        .await
        .expect("use the session")
        .is_empty());
    let debug = format!("{rest:?}");
    assert!(!debug.contains("rest-password"), "{debug}");

    let other_handle = rest.clone();
    rest.logout().await.expect("logout");
    assert!(!rest.has_session());
    rest.logout().await.expect("logout is idempotent");
    for client in [&rest, &other_handle] {
        let err = client
            .tagging()
            .list_categories()
            .await
            .expect_err("no session after logout");
        assert_eq!(err.kind(), ErrorKind::Rest, "{err:?}");
        assert_eq!(
            *err.rest_error().unwrap().error_type(),
            RestErrorType::Unauthenticated,
            "{err}"
        );
        assert_eq!(err.rest_error().unwrap().http_status(), 401);
    }
    client.close().await.expect("SOAP logout");
}

#[tokio::test]
async fn from_soap_falls_back_to_the_soap_credentials_and_shares_tls_settings() {
    // The REST client inherits the SOAP client's CA bundle: no other TLS
    // configuration exists for it.
    let ca = TestCa::new().expect("test CA");
    let sim = simulator(SimulatorOptions {
        tls: ca.server_tls(),
        ..Default::default()
    })
    .await;
    let client = Client::builder(&sim.sdk_url())
        .credentials(sim.username(), sim.password())
        .ca_bundle_file(ca.ca_file())
        .expect("CA bundle")
        .keepalive(None)
        .connect()
        .await
        .expect("SOAP connect");
    // vcsim refuses the SOAP session id on the vAPI side (as vCenter before
    // 8.0 U3 does): the REST session is created with the SOAP credentials.
    let rest = client.rest().await.expect("REST from SOAP");
    assert!(!rest.shares_soap_session());
    assert_eq!(rest.base_url().to_string(), format!("{}/", sim.base_url()));
    assert_eq!(
        rest.session_info().await.expect("session").user,
        sim.username()
    );
    rest.logout().await.expect("logout");

    // Without credentials there is nothing to fall back to.
    let anonymous = Client::builder(&sim.sdk_url())
        .anonymous()
        .ca_bundle_file(ca.ca_file())
        .expect("CA bundle")
        .keepalive(None)
        .connect()
        .await
        .expect("anonymous connect");
    let err = anonymous
        .rest()
        .await
        .expect_err("no session to share, no credentials");
    assert_eq!(err.kind(), ErrorKind::NotAuthenticated, "{err}");

    client.close().await.expect("SOAP logout");
}

#[tokio::test]
async fn tag_lifecycle_on_a_simulator_vm() {
    let sim = plain_simulator().await;
    let client = soap(&sim).await;
    let rest = RestClient::login(&client, sim.username(), sim.password())
        .await
        .expect("REST login");
    let tagging = rest.tagging();

    // Categories.
    let spec = CategorySpec::new("zone", Cardinality::Single)
        .description("failure domains")
        .associable_types(["VirtualMachine"]);
    let category_id = tagging
        .create_category(&spec)
        .await
        .expect("create category");
    assert!(tagging
        .list_categories()
        .await
        .unwrap()
        .contains(&category_id));
    let category = tagging
        .get_category(&category_id)
        .await
        .expect("get category");
    assert_eq!(category.name, "zone");
    assert_eq!(category.description, "failure domains");
    assert_eq!(category.cardinality, Cardinality::Single);
    assert_eq!(category.associable_types, ["VirtualMachine"]);
    assert_eq!(
        tagging.find_category("zone").await.unwrap().unwrap().id,
        category_id
    );
    let duplicate = tagging
        .create_category(&spec)
        .await
        .expect_err("same name twice");
    assert!(
        duplicate.is_rest_error(&RestErrorType::AlreadyExists),
        "{duplicate:?}"
    );

    // Cardinality and associable types can grow.
    let update = CategoryUpdate {
        cardinality: Some(Cardinality::Multiple),
        associable_types: Some(vec!["VirtualMachine".into(), "Datacenter".into()]),
        ..Default::default()
    };
    tagging
        .update_category(&category_id, &update)
        .await
        .expect("update category");
    let category = tagging.get_category(&category_id).await.unwrap();
    assert_eq!(category.cardinality, Cardinality::Multiple);
    assert_eq!(category.associable_types, ["VirtualMachine", "Datacenter"]);
    let shrink = CategoryUpdate {
        associable_types: Some(vec!["Datacenter".into()]),
        ..Default::default()
    };
    let err = tagging
        .update_category(&category_id, &shrink)
        .await
        .expect_err("types only grow");
    assert!(
        err.is_rest_error(&RestErrorType::InvalidArgument),
        "{err:?}"
    );

    // Tags.
    let tag_id = tagging
        .create_tag(&TagSpec::new("zone-a", &category_id).description("rack A"))
        .await
        .expect("create tag");
    let other_id = tagging
        .create_tag(&TagSpec::new("zone-b", &category_id))
        .await
        .expect("create tag");
    let tag = tagging.get_tag(&tag_id).await.expect("get tag");
    assert_eq!(
        (tag.name.as_str(), tag.category_id.as_str()),
        ("zone-a", category_id.as_str())
    );
    let mut in_category = tagging
        .list_tags_for_category(&category_id)
        .await
        .expect("tags in category");
    in_category.sort();
    let mut expected = vec![tag_id.clone(), other_id.clone()];
    expected.sort();
    assert_eq!(in_category, expected);
    assert!(tagging.list_tags().await.unwrap().contains(&tag_id));
    assert_eq!(
        tagging
            .find_tag("zone-b", Some("zone"))
            .await
            .unwrap()
            .unwrap()
            .id,
        other_id
    );

    // Associations with a real VM of the inventory.
    let vm = find(&client, "DC0/vm/DC0_H0_VM0").await;
    assert_eq!(vm.type_, "VirtualMachine");
    tagging.attach(&tag_id, &vm).await.expect("attach");
    assert_eq!(
        tagging.list_attached_tags(&vm).await.unwrap(),
        [tag_id.as_str()]
    );
    assert_eq!(
        tagging.list_attached_objects(&tag_id).await.unwrap(),
        std::slice::from_ref(&vm)
    );
    let batch = tagging
        .attach_tags(std::slice::from_ref(&other_id), &vm)
        .await
        .expect("batch attach");
    assert!(batch.success, "{batch:?}");
    let mut attached = tagging.list_attached_tags(&vm).await.unwrap();
    attached.sort();
    assert_eq!(attached, expected);
    let on_objects = tagging
        .list_attached_tags_on_objects(std::slice::from_ref(&vm))
        .await
        .unwrap();
    assert_eq!(on_objects.len(), 1);
    assert_eq!(on_objects[0].object_id, vm);
    let on_tags = tagging
        .list_attached_objects_on_tags(std::slice::from_ref(&tag_id))
        .await
        .unwrap();
    assert_eq!(on_tags[0].object_ids, std::slice::from_ref(&vm));
    let vm1 = find(&client, "DC0/vm/DC0_H0_VM1").await;
    tagging
        .attach_to_objects(&other_id, std::slice::from_ref(&vm1))
        .await
        .expect("tag to objects");
    assert_eq!(
        tagging
            .list_attached_objects(&other_id)
            .await
            .unwrap()
            .len(),
        2
    );
    tagging.detach(&tag_id, &vm).await.expect("detach");
    assert_eq!(
        tagging.list_attached_tags(&vm).await.unwrap(),
        [other_id.as_str()]
    );

    // Deletion.
    tagging.delete_tag(&tag_id).await.expect("delete tag");
    let err = tagging.get_tag(&tag_id).await.expect_err("deleted tag");
    assert!(err.is_rest_error(&RestErrorType::NotFound), "{err:?}");
    tagging
        .delete_category(&category_id)
        .await
        .expect("delete category");
    let err = tagging
        .get_category(&category_id)
        .await
        .expect_err("deleted category");
    assert!(err.is_rest_error(&RestErrorType::NotFound), "{err:?}");
    // The category's tags went with it.
    assert!(tagging.list_tags().await.unwrap().is_empty());

    rest.logout().await.expect("logout");
    client.close().await.expect("SOAP logout");
}

/// DC0's datastore, its cluster's root pool and its VM folder.
async fn placement(client: &Client) -> [ManagedObjectReference; 3] {
    [
        find(client, "DC0/datastore/LocalDS_0").await,
        find(client, "DC0/host/DC0_C0/Resources").await,
        find(client, "DC0/vm").await,
    ]
}

#[tokio::test]
async fn library_item_upload_and_ovf_deploy_to_a_vm() {
    let sim = plain_simulator().await;
    let client = soap(&sim).await;
    let rest = client.rest().await.expect("REST from SOAP");
    let content = rest.library();

    let [datastore, pool, folder] = placement(&client).await;
    assert_eq!(pool.type_, "ResourcePool");

    let library_id = content
        .create_local(&LocalLibrarySpec::on_datastore("images", &datastore))
        .await
        .expect("create library");
    assert_eq!(content.list().await.unwrap(), [library_id.as_str()]);
    let library = content
        .by_name("IMAGES")
        .await
        .unwrap()
        .expect("find by name, any case");
    assert_eq!(library.id, library_id);
    assert_eq!(
        library.storage_backings[0].datastore_id.as_deref(),
        Some(datastore.value.as_str())
    );
    assert!(content.by_name("nope").await.unwrap().is_none());

    let item_id = content
        .create_item(&ItemSpec::new(
            &library_id,
            "tiny",
            Some(LibraryItemType::Ovf),
        ))
        .await
        .expect("create item");
    content
        .upload_files(&item_id, [("tiny.ovf", OVF.as_bytes().to_vec())])
        .await
        .expect("upload the descriptor");
    let items = content.items(&library_id).await.expect("items");
    assert_eq!(items.len(), 1);
    assert_eq!(items[0].name, "tiny");
    assert_eq!(items[0].type_, Some(LibraryItemType::Ovf));
    assert_eq!(
        content
            .item_by_name(&library_id, "tiny")
            .await
            .unwrap()
            .unwrap()
            .id,
        item_id
    );
    assert_eq!(
        content.get_item(&item_id).await.unwrap().library_id,
        library_id
    );

    let mut spec = OvfDeploySpec::new("from-library", pool);
    spec.folder = Some(folder);
    spec.datastore = Some(datastore);
    spec.accept_all_eula = true;
    let vm = content.deploy_ovf(&item_id, &spec).await.expect("deploy");
    assert_eq!(vm.type_, "VirtualMachine");
    // The SOAP side sees the new machine where it was asked to go.
    assert_eq!(find(&client, "DC0/vm/from-library").await, vm);

    // A failed deployment is a typed error: an item without a descriptor.
    let empty_id = content
        .create_item(&ItemSpec::new(
            &library_id,
            "empty",
            Some(LibraryItemType::Ovf),
        ))
        .await
        .unwrap();
    let err = content
        .deploy_ovf(&empty_id, &spec)
        .await
        .expect_err("nothing to deploy");
    assert_eq!(err.kind(), ErrorKind::Rest, "{err:?}");

    content.delete_item(&item_id).await.expect("delete item");
    let err = content.get_item(&item_id).await.expect_err("deleted item");
    assert!(err.is_rest_error(&RestErrorType::NotFound), "{err:?}");
    content
        .delete_local(&library_id)
        .await
        .expect("delete library");
    assert!(content.list().await.unwrap().is_empty());
    rest.logout().await.expect("logout");
    client.close().await.expect("SOAP logout");
}

#[tokio::test]
async fn vm_template_item_made_from_a_vm_and_deployed() {
    let sim = plain_simulator().await;
    let client = soap(&sim).await;
    let rest = client.rest().await.expect("REST from SOAP");
    let content = rest.library();
    let [datastore, pool, folder] = placement(&client).await;
    let source = find(&client, "DC0/vm/DC0_C0_RP0_VM0").await;
    let library_id = content
        .create_local(&LocalLibrarySpec::on_datastore("templates", &datastore))
        .await
        .expect("create library");
    let item_id = content
        .create_vm_template(&VmTemplateSpec {
            name: "golden".into(),
            source_vm: source,
            library_id: library_id.clone(),
            folder: Some(folder.clone()),
            resource_pool: Some(pool.clone()),
            ..Default::default()
        })
        .await
        .expect("create the VM-template item");
    let item = content.get_item(&item_id).await.expect("the item");
    assert_eq!(
        (item.name.as_str(), item.type_),
        ("golden", Some(LibraryItemType::VmTemplate))
    );
    let mut spec = VmTemplateDeploySpec::new("from-vmtx", pool);
    spec.folder = Some(folder);
    let vm = content
        .deploy_vm_template(&item_id, &spec)
        .await
        .expect("deploy");
    assert_eq!(vm.type_, "VirtualMachine");
    assert_eq!(find(&client, "DC0/vm/from-vmtx").await, vm);
    let err = content
        .deploy_vm_template("no-such-item", &spec)
        .await
        .expect_err("no such item");
    assert!(err.is_rest_error(&RestErrorType::NotFound), "{err:?}");
}

#[tokio::test]
async fn an_expired_session_logs_in_again_once_for_concurrent_calls() {
    let sim = simulator(SimulatorOptions {
        tls: ServerTls::Plain,
        session_idle_timeout: Some(Duration::from_secs(1)),
        ..Default::default()
    })
    .await;
    let client = soap(&sim).await;
    let rest = RestClient::builder(&client)
        .credentials(sim.username(), sim.password())
        .keepalive(None)
        .connect()
        .await
        .expect("REST login");
    rest.tagging().list_categories().await.expect("first call");
    for _ in 0..2 {
        tokio::time::sleep(Duration::from_secs(2)).await;
        let calls: Vec<_> = (0..6)
            .map(|_| {
                let rest = rest.clone();
                tokio::spawn(async move { rest.tagging().list_tags().await })
            })
            .collect();
        for call in calls {
            call.await
                .expect("join")
                .expect("call after the session expired");
        }
    }
    rest.logout().await.expect("logout");
}

#[tokio::test]
async fn the_keepalive_keeps_an_idle_session() {
    let sim = simulator(SimulatorOptions {
        tls: ServerTls::Plain,
        session_idle_timeout: Some(Duration::from_secs(2)),
        ..Default::default()
    })
    .await;
    let client = soap(&sim).await;
    let rest = RestClient::builder(&client)
        .credentials(sim.username(), sim.password())
        .keepalive(Some(Duration::from_millis(500)))
        .connect()
        .await
        .expect("REST login");
    let before = rest.session_info().await.expect("session").created_time;
    tokio::time::sleep(Duration::from_secs(4)).await;
    // Same session: the keepalive touched it while idle, no re-login happened.
    assert_eq!(
        rest.session_info().await.expect("session").created_time,
        before
    );
    rest.logout().await.expect("logout");
}

// ---- the CLI ---------------------------------------------------------------

fn cli() -> PathBuf {
    vsphere_tests::vsphere_cli_binary()
}

fn run(sim: &Simulator, args: &[&str]) -> Output {
    let mut command = Command::new(cli());
    command.args(args);
    for var in [
        "GOVC_INSECURE",
        "GOVC_TLS_CA_CERTS",
        "GOVC_TLS_KNOWN_HOSTS",
        "VSPHERE_LOG",
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "ALL_PROXY",
    ] {
        command.env_remove(var);
    }
    command
        .env("GOVC_URL", sim.sdk_url())
        .env("GOVC_USERNAME", sim.username())
        .env("GOVC_PASSWORD", sim.password());
    command.output().expect("run the vsphere CLI")
}

fn ok(output: Output) -> String {
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "exit {:?}\nstdout: {stdout}\nstderr: {}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
}

#[tokio::test]
async fn tags_and_library_cli_like_govc() {
    let sim = plain_simulator().await;
    let run = |args: &[&str]| run(&sim, args);
    let id = ok(run(&[
        "tags.category.create",
        "-t",
        "VirtualMachine",
        "-t",
        "HostSystem",
        "-m",
        "zone",
    ]));
    assert!(
        id.trim().starts_with("urn:vmomi:InventoryServiceCategory:"),
        "{id}"
    );
    assert_eq!(ok(run(&["tags.category.ls"])), "zone\n");
    let tag = ok(run(&[
        "tags.create",
        "-c",
        "zone",
        "-d",
        "first rack",
        "rack-a",
    ]));
    assert!(
        tag.trim().starts_with("urn:vmomi:InventoryServiceTag:"),
        "{tag}"
    );
    ok(run(&["tags.create", "-c", "zone", "rack-b"]));
    let mut tags: Vec<String> = ok(run(&["tags.ls"])).lines().map(str::to_owned).collect();
    tags.sort();
    assert_eq!(tags, ["rack-a", "rack-b"]);
    assert_eq!(ok(run(&["tags.ls", "-c", "zone"])).lines().count(), 2);
    ok(run(&["tags.attach", "rack-a", "/DC0/vm/DC0_H0_VM0"]));
    assert_eq!(
        ok(run(&["tags.attached.ls", "/DC0/vm/DC0_H0_VM0"])),
        "rack-a\n"
    );
    let objects = ok(run(&["tags.attached.ls", "rack-a"]));
    assert!(objects.starts_with("VirtualMachine:"), "{objects}");
    ok(run(&["tags.detach", "rack-a", "/DC0/vm/DC0_H0_VM0"]));
    assert_eq!(
        ok(run(&["tags.attached.ls", "-r", "/DC0/vm/DC0_H0_VM0"])),
        ""
    );

    // Errors: one line, non-zero exit.
    let missing = run(&["tags.attach", "rack-a", "/DC0/vm/no-such-vm"]);
    assert!(!missing.status.success());
    let stderr = String::from_utf8_lossy(&missing.stderr);
    assert!(stderr.contains("/DC0/vm/no-such-vm: not found"), "{stderr}");
    let duplicate = run(&["tags.category.create", "zone"]);
    assert!(!duplicate.status.success());
    assert!(String::from_utf8_lossy(&duplicate.stderr).contains("ALREADY_EXISTS"));
    let usage = run(&["tags.create", "rack-c"]);
    assert_eq!(usage.status.code(), Some(2), "missing -c is a usage error");

    ok(run(&["tags.category.rm", "zone"]));
    assert_eq!(ok(run(&["tags.category.ls"])), "");
    assert_eq!(ok(run(&["library.ls"])), "");
    let missing = run(&["library.ls", "/nope"]);
    assert!(String::from_utf8_lossy(&missing.stderr).contains("library \"nope\" not found"));
}
