//! The provider role's reconcile core with the real vCenter backend, against
//! the simulator, through `banlieue check` (its `reconcile` function and the
//! binary): failure domains of a multi-datacenter, multi-cluster inventory,
//! every `Ready` reason from its cause, template verification, one session
//! per Provider, and the number of SOAP calls of a reconcile.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use banlieue::api::validate::is_dns1123_label;
use banlieue::api::{FailureDomain, NamespacedReference, Provider};
use banlieue::check::{self, parse_documents, Output, World};
use banlieue::conditions;
use banlieue::controllers::provider::readiness::failure_domain_name;
use banlieue::vsphere::vcenter::{Options, VCenter};
use vsphere_client::mo;
use vsphere_tests::{Simulator, SimulatorOptions, Template, TestCa};

const PASSWORD: &str = "s3cret-Pw";

async fn simulator(options: SimulatorOptions) -> Simulator {
    let options = SimulatorOptions {
        password: PASSWORD.into(),
        ..options
    };
    tokio::task::spawn_blocking(move || Simulator::start(options))
        .await
        .expect("simulator start task")
        .unwrap_or_else(|e| panic!("simulator: {e}"))
}

/// 2 datacenters x 2 clusters of 2 hosts, 2 portgroups per datacenter, the
/// templates `golden` (everywhere) and `partial` (DC0 only).
fn two_by_two() -> SimulatorOptions {
    SimulatorOptions {
        datacenters: 2,
        clusters: 2,
        hosts_per_cluster: 2,
        vms: 1,
        portgroups: 2,
        templates: vec![
            Template::everywhere("golden"),
            Template::in_datacenters("partial", &["DC0"]),
        ],
        ..Default::default()
    }
}

fn secret(name: &str, username: &str, password: Option<&str>) -> String {
    let password = password
        .map(|p| format!("\n  password: \"{p}\""))
        .unwrap_or_default();
    format!(
        "apiVersion: v1\nkind: Secret\nmetadata: {{ name: {name}, namespace: banlieue-system }}\nstringData:\n  username: \"{username}\"{password}\n---\n"
    )
}

/// A Provider document; `connection` and `extra` are YAML lines indented for `spec`.
fn provider(name: &str, endpoint: &str, connection: &str, extra: &str) -> String {
    format!(
        "apiVersion: banlieue.io/v1alpha1\nkind: Provider\nmetadata: {{ name: {name}, namespace: banlieue-system }}\nspec:\n  \
         providerClassRef: {{ name: vsphere }}\n  connection:\n    endpoint: {endpoint}\n{connection}{extra}---\n"
    )
}

fn image(name: &str, template: &str) -> String {
    format!(
        "apiVersion: banlieue.io/v1alpha1\nkind: VMImage\nmetadata: {{ name: {name} }}\nspec:\n  \
         sources: [{{ providerClass: vsphere, kind: Template, ref: \"{template}\" }}]\n---\n"
    )
}

fn world_of(text: &str) -> World {
    let mut world = World::default();
    for doc in parse_documents(text).expect("test manifests") {
        world.add("test", doc);
    }
    assert!(world.rejected.is_empty(), "{:?}", world.rejected);
    world
}

fn provider_named<'a>(world: &'a World, name: &str) -> &'a Provider {
    world
        .providers
        .iter()
        .find(|p| p.metadata.name.as_deref() == Some(name))
        .expect("provider")
}

fn ready(world: &World, name: &str) -> (String, String, String) {
    let c = provider_named(world, name)
        .ready_condition()
        .expect("Ready condition");
    (c.status.clone(), c.reason.clone(), c.message.clone())
}

fn key(name: &str) -> NamespacedReference {
    NamespacedReference {
        namespace: "banlieue-system".into(),
        name: name.into(),
    }
}

/// Makes a datastore `name` mounted on the hosts of `cluster` only.
async fn datastore_on_cluster(sim: &Simulator, cluster: &str, name: &str, dir: &Path) {
    let client = vsphere_client::Client::builder(&sim.sdk_url())
        .credentials(sim.username(), sim.password())
        .insecure(true)
        .connect()
        .await
        .expect("setup client");
    let root = client.service_content().root_folder.clone();
    let hosts = client
        .properties::<mo::HostSystem>(&["name", "configManager.datastoreSystem"])
        .unwrap()
        .in_container(&root)
        .collect_all()
        .await
        .expect("hosts");
    let prefix = format!("{cluster}_H");
    let mut mounted = 0;
    for host in hosts
        .iter()
        .filter(|h| h.name.as_deref().is_some_and(|n| n.starts_with(&prefix)))
    {
        let dss = host
            .config_manager
            .as_ref()
            .and_then(|c| c.datastore_system.clone())
            .expect("datastore system");
        client
            .vim()
            .create_local_datastore(&dss, name, &dir.display().to_string())
            .await
            .expect("CreateLocalDatastore");
        mounted += 1;
    }
    assert!(mounted > 0, "no host in {cluster}");
    let _ = client.close().await;
}

fn fd<'a>(fds: &'a [FailureDomain], name: &str) -> &'a FailureDomain {
    fds.iter().find(|f| f.name == name).unwrap_or_else(|| {
        panic!(
            "no failure domain {name} in {:?}",
            fds.iter().map(|f| &f.name).collect::<Vec<_>>()
        )
    })
}

#[tokio::test]
async fn failure_domains_names_overrides_hashes_and_classes() {
    let sim = simulator(two_by_two()).await;
    let ds_dir = tempfile::tempdir().unwrap();
    datastore_on_cluster(&sim, "DC0_C1", "ds-fast-01", ds_dir.path()).await;

    let insecure = "    credentialsRef: { name: vsphere-creds }\n    insecureSkipTLSVerify: true\n";
    let capabilities = "  capabilities:\n    storageClasses:\n      - { name: gold, target: { datastore: ds-fast-01 } }\n      \
                        - { name: silver, target: { datastore: LocalDS_0 } }\n      - { name: bronze, target: { datastore: ds-none } }\n    \
                        networkClasses:\n      - { name: prod, target: { portGroup: DC0_DVPG1 } }\n      \
                        - { name: mgmt, target: { portGroup: VM Network } }\n    features: [hotAddCPU]\n";
    let overrides = "  failureDomainNameOverrides:\n    - { datacenter: DC1, cluster: DC1_C0, name: west-zero }\n";
    let long_name = "an-enterprise-vsphere-provider-with-a-rather-long-name-01";
    let text = secret("vsphere-creds", sim.username(), Some(PASSWORD))
        + &provider(
            "prod-vsphere",
            &sim.sdk_url(),
            insecure,
            &format!("{capabilities}{overrides}"),
        )
        + &provider(long_name, &sim.sdk_url(), insecure, "");
    let mut world = world_of(&text);
    let vcenter = VCenter::default();
    check::reconcile(&mut world, &vcenter, &conditions::now()).await;

    assert_eq!(
        ready(&world, "prod-vsphere").0,
        "True",
        "{:?}",
        ready(&world, "prod-vsphere")
    );
    let fds = &provider_named(&world, "prod-vsphere")
        .status
        .as_ref()
        .unwrap()
        .failure_domains;
    let names: Vec<&str> = fds.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "prod-vsphere-dc0-dc0-c0",
            "prod-vsphere-dc0-dc0-c1",
            "prod-vsphere-dc0-dc0-h0",
            "prod-vsphere-dc1-dc1-c1",
            "prod-vsphere-dc1-dc1-h0",
            "west-zero"
        ]
    );
    // A host outside any cluster is a failure domain of its own.
    let standalone: Vec<&str> = fds
        .iter()
        .filter(|f| f.standalone_host)
        .map(|f| f.cluster.as_str())
        .collect();
    assert_eq!(standalone, ["DC0_H0", "DC1_H0"]);

    let c1 = fd(fds, "prod-vsphere-dc0-dc0-c1");
    assert_eq!(
        (c1.datacenter.as_str(), c1.cluster.as_str()),
        ("DC0", "DC0_C1")
    );
    assert_eq!(
        c1.storage_classes,
        ["gold", "silver"],
        "ds-fast-01 is mounted on DC0_C1"
    );
    assert_eq!(c1.network_classes, ["prod", "mgmt"]);
    assert_eq!(c1.features, ["hotAddCPU"]);
    let c0 = fd(fds, "prod-vsphere-dc0-dc0-c0");
    assert_eq!(
        c0.storage_classes,
        ["silver"],
        "ds-fast-01 is not mounted on DC0_C0"
    );
    let west = fd(fds, "west-zero");
    assert_eq!(
        (west.datacenter.as_str(), west.cluster.as_str()),
        ("DC1", "DC1_C0")
    );
    assert_eq!(
        west.labels,
        BTreeMap::from([
            ("name".to_string(), "west-zero".to_string()),
            ("datacenter".to_string(), "DC1".to_string()),
            ("cluster".to_string(), "DC1_C0".to_string()),
        ])
    );
    assert_eq!(west.network_classes, ["mgmt"], "DC0_DVPG1 is in DC0 only");
    assert_eq!(
        fd(fds, "prod-vsphere-dc1-dc1-c1").storage_classes,
        ["silver"]
    );

    // The long Provider name: every name cut to a DNS label with a hash, all distinct.
    assert_eq!(ready(&world, long_name).0, "True");
    let long: Vec<&FailureDomain> = provider_named(&world, long_name)
        .status
        .as_ref()
        .unwrap()
        .failure_domains
        .iter()
        .collect();
    assert_eq!(long.len(), 6, "4 clusters, 2 standalone hosts");
    for f in &long {
        assert!(format!("{long_name}-{}-{}", f.datacenter, f.cluster).len() > 63);
        assert!(
            f.name.len() <= 63 && is_dns1123_label(&f.name),
            "{}",
            f.name
        );
        assert!(
            f.name.starts_with("an-enterprise-vsphere-provider"),
            "{}",
            f.name
        );
        assert_eq!(
            f.name,
            failure_domain_name(long_name, &f.datacenter, &f.cluster)
        );
        assert_eq!(f.labels["name"], f.name);
    }
    let distinct: std::collections::BTreeSet<&str> = long.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(distinct.len(), 6);

    // One session per Provider.
    assert_eq!(vcenter.providers(), [key(long_name), key("prod-vsphere")]);
    vcenter.close_all().await;
    assert!(vcenter.providers().is_empty());
}

#[tokio::test]
async fn every_ready_reason_from_its_cause() {
    let ca = TestCa::new().unwrap();
    let sim = simulator(SimulatorOptions {
        tls: ca.server_tls(),
        ..two_by_two()
    })
    .await;
    let closed_port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let inline = |pem: &str| {
        let indented: String = pem.lines().map(|l| format!("          {l}\n")).collect();
        format!("    credentialsRef: {{ name: vsphere-creds }}\n    caBundle:\n      inline: |\n{indented}")
    };
    let creds = |secret: &str| {
        format!("    credentialsRef: {{ name: {secret} }}\n    insecureSkipTLSVerify: true\n")
    };
    let url = sim.sdk_url();
    // An override that takes the generated name of another cluster: only
    // the inventory shows the clash (two overrides giving one name are
    // refused from the spec alone, see api::validate).
    let overrides = "  failureDomainNameOverrides:\n    \
                     - { datacenter: DC0, cluster: DC0_C0, name: duplicate-names-dc1-dc1-c1 }\n";
    let text = secret("vsphere-creds", sim.username(), Some(PASSWORD))
        + &secret("no-password", sim.username(), None)
        + &secret("wrong-password", sim.username(), Some("not-the-Pw"))
        + &provider("right-ca", &url, &inline(ca.ca_pem()), "")
        + &provider("wrong-ca", &url, &inline(ca.unrelated_ca_pem()), "")
        + &provider(
            "system-roots",
            &url,
            "    credentialsRef: { name: vsphere-creds }\n",
            "",
        )
        + &provider("missing-secret", &url, &creds("nope"), "")
        + &provider("secret-without-password", &url, &creds("no-password"), "")
        + &provider("wrong-password", &url, &creds("wrong-password"), "")
        + &provider(
            "unreachable",
            &format!("https://127.0.0.1:{closed_port}/sdk"),
            &creds("vsphere-creds"),
            "",
        )
        + &provider("duplicate-names", &url, &creds("vsphere-creds"), overrides);
    let mut world = world_of(&text);
    let vcenter = VCenter::default();
    check::reconcile(&mut world, &vcenter, &conditions::now()).await;

    let (status, reason, _) = ready(&world, "right-ca");
    assert_eq!((status.as_str(), reason.as_str()), ("True", "Connected"));

    let (status, reason, message) = ready(&world, "wrong-ca");
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("False", "ConnectFailed")
    );
    assert!(
        message.contains(&format!("connecting to {url}: TLS")),
        "{message}"
    );
    assert!(message.contains("not signed by a trusted CA"), "{message}");

    let (_, reason, message) = ready(&world, "system-roots");
    assert_eq!(reason, "ConnectFailed");
    assert!(
        message.contains("TLS") && message.contains("trusted CA"),
        "{message}"
    );

    let (_, reason, message) = ready(&world, "missing-secret");
    assert_eq!(reason, "SecretMissing");
    assert_eq!(
        message,
        "Secret banlieue-system/nope (spec.connection.credentialsRef) not found"
    );

    let (_, reason, message) = ready(&world, "secret-without-password");
    assert_eq!(reason, "SecretInvalid");
    assert_eq!(
        message,
        "Secret banlieue-system/no-password has no non-empty \"password\" key"
    );

    let (_, reason, message) = ready(&world, "wrong-password");
    assert_eq!(reason, "ConnectFailed");
    assert!(
        message.contains("login as \"user\" failed: incorrect user name or password"),
        "{message}"
    );

    let (_, reason, message) = ready(&world, "unreachable");
    assert_eq!(reason, "ConnectFailed");
    assert!(
        message.contains(&format!(
            "connecting to https://127.0.0.1:{closed_port}/sdk: unreachable"
        )),
        "{message}"
    );
    assert!(
        message.to_lowercase().contains("refused"),
        "names the cause: {message}"
    );

    let (status, reason, message) = ready(&world, "duplicate-names");
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("False", "DuplicateFailureDomainName")
    );
    assert_eq!(
        message,
        "failure domain name \"duplicate-names-dc1-dc1-c1\" is used by both datacenter \"DC0\" cluster \"DC0_C0\" and datacenter \"DC1\" cluster \"DC1_C1\""
    );

    // No password in any message or in what check prints.
    let printed = check::report(&world, Output::Yaml, false).output;
    for secret in [PASSWORD, "not-the-Pw"] {
        assert!(!printed.contains(secret), "{secret} printed");
    }
    // Only the Providers that logged in hold a session.
    assert_eq!(
        vcenter.providers(),
        [key("duplicate-names"), key("right-ca")]
    );
    vcenter.close_all().await;
}

#[tokio::test]
async fn images_ready_only_with_a_template_in_every_datacenter() {
    let sim = simulator(two_by_two()).await;
    let insecure = "    credentialsRef: { name: vsphere-creds }\n    insecureSkipTLSVerify: true\n";
    let text = secret("vsphere-creds", sim.username(), Some(PASSWORD))
        + &provider("prod-vsphere", &sim.sdk_url(), insecure, "")
        + &image("golden-image", "golden")
        + &image("partial-image", "partial")
        // A plain VM of that name exists in DC0, but no template.
        + &image("plain-vm-image", "DC0_C0_RP0_VM0");
    let mut world = world_of(&text);
    let vcenter = VCenter::default();
    check::reconcile(&mut world, &vcenter, &conditions::now()).await;
    let entry = |name: &str| {
        let image = world
            .images
            .iter()
            .find(|i| i.metadata.name.as_deref() == Some(name))
            .expect("image");
        image.status.as_ref().expect("status").per_provider[0].clone()
    };

    let golden = entry("golden-image");
    assert!(golden.ready, "{golden:?}");
    assert_eq!(golden.reason.as_deref(), Some("TemplateFound"));
    let per_dc: Vec<(&str, &str)> = golden
        .templates
        .iter()
        .map(|t| (t.datacenter.as_str(), t.name.as_str()))
        .collect();
    assert_eq!(per_dc, [("DC0", "golden"), ("DC1", "golden")]);
    let refs: Vec<&str> = golden
        .templates
        .iter()
        .filter_map(|t| t.mo_ref.as_deref())
        .collect();
    assert_eq!(refs.len(), 2);
    assert_ne!(refs[0], refs[1], "one template per datacenter");
    assert!(check::image_ready(
        world
            .images
            .iter()
            .find(|i| i.metadata.name.as_deref() == Some("golden-image"))
            .unwrap()
    ));

    let partial = entry("partial-image");
    assert!(!partial.ready);
    assert_eq!(partial.reason.as_deref(), Some("TemplateNotFound"));
    assert_eq!(
        partial.message.as_deref(),
        Some("template \"partial\" not found in datacenter(s) DC1")
    );

    let plain = entry("plain-vm-image");
    assert_eq!(plain.reason.as_deref(), Some("TemplateNotFound"));
    assert_eq!(
        plain.message.as_deref(),
        Some("template \"DC0_C0_RP0_VM0\" not found in datacenter(s) DC0, DC1")
    );
    vcenter.close_all().await;
}

/// The SOAP calls of one Provider's client: per method.
async fn calls(vcenter: &VCenter, name: &str) -> BTreeMap<&'static str, u64> {
    let client = vcenter.client(&key(name)).await.expect("session");
    client
        .call_stats()
        .into_iter()
        .map(|(m, s)| (m, s.calls))
        .collect()
}

/// Two reconciles of a Provider and a template lookup: the calls each made.
async fn count_calls(sim: &Simulator, expected_domains: usize) -> Vec<BTreeMap<&'static str, u64>> {
    let insecure = "    credentialsRef: { name: vsphere-creds }\n    insecureSkipTLSVerify: true\n";
    let text = secret("vsphere-creds", sim.username(), Some(PASSWORD))
        + &provider("prod-vsphere", &sim.sdk_url(), insecure, "")
        + &image("golden-image", "golden");
    let mut world = world_of(&text);
    let vcenter = VCenter::default();
    let objects = world_of(&secret("vsphere-creds", sim.username(), Some(PASSWORD)));
    let mut provider = world.providers.remove(0);
    let mut seen = Vec::new();
    let mut before = BTreeMap::new();
    for _ in 0..2 {
        let outcome = banlieue::controllers::provider::readiness::reconcile_provider(
            &provider,
            &objects,
            &vcenter,
            &conditions::now(),
        )
        .await;
        assert_eq!(outcome.status.failure_domains.len(), expected_domains);
        provider.status = Some(outcome.status);
        let now = calls(&vcenter, "prod-vsphere").await;
        seen.push(difference(&now, &before));
        before = now;
    }
    let entry = banlieue::controllers::provider::readiness::image_on_provider(
        &world.images[0],
        &provider,
        &objects,
        &vcenter,
    )
    .await;
    assert!(entry.ready, "{entry:?}");
    let now = calls(&vcenter, "prod-vsphere").await;
    seen.push(difference(&now, &before));
    vcenter.close_all().await;
    seen
}

fn difference(
    now: &BTreeMap<&'static str, u64>,
    before: &BTreeMap<&'static str, u64>,
) -> BTreeMap<&'static str, u64> {
    now.iter()
        .map(|(m, n)| (*m, n - before.get(m).copied().unwrap_or(0)))
        .filter(|(_, n)| *n > 0)
        .collect()
}

#[tokio::test]
async fn soap_calls_per_reconcile_do_not_grow_with_the_inventory() {
    let small = simulator(SimulatorOptions {
        datacenters: 2,
        clusters: 4,
        hosts_per_cluster: 2,
        vms: 1,
        templates: vec![Template::everywhere("golden")],
        ..Default::default()
    })
    .await;
    // 2 x 4 clusters and a standalone host per datacenter.
    let small_calls = count_calls(&small, 10).await;
    drop(small);
    let first_login = BTreeMap::from([
        ("Login", 1),
        ("RetrievePropertiesEx", 2),
        ("RetrieveServiceContent", 1),
    ]);
    let reuse = BTreeMap::from([("RetrievePropertiesEx", 2)]);
    assert_eq!(
        small_calls,
        [first_login.clone(), reuse.clone(), reuse.clone()],
        "login once, then 2 calls per walk and per lookup"
    );

    let large = simulator(SimulatorOptions {
        datacenters: 3,
        clusters: 6,
        hosts_per_cluster: 3,
        vms: 3,
        datastores: 2,
        portgroups: 3,
        templates: vec![Template::everywhere("golden")],
        ..Default::default()
    })
    .await;
    let large_calls = count_calls(&large, 21).await;
    assert_eq!(
        large_calls, small_calls,
        "same calls for 3x6 clusters and 3x the VMs"
    );
}

#[tokio::test]
async fn paged_walks_see_the_whole_inventory() {
    let sim = simulator(SimulatorOptions {
        extra_args: vec!["-page-size=4".into()],
        ..two_by_two()
    })
    .await;
    let insecure = "    credentialsRef: { name: vsphere-creds }\n    insecureSkipTLSVerify: true\n";
    let text = secret("vsphere-creds", sim.username(), Some(PASSWORD))
        + &provider("prod-vsphere", &sim.sdk_url(), insecure, "")
        + &image("golden-image", "golden");
    let mut world = world_of(&text);
    let vcenter = VCenter::new(Options {
        page_size: 3,
        ..Options::default()
    });
    check::reconcile(&mut world, &vcenter, &conditions::now()).await;
    let fds: Vec<String> = world.providers[0]
        .status
        .as_ref()
        .unwrap()
        .failure_domains
        .iter()
        .map(|f| f.name.clone())
        .collect();
    assert_eq!(
        fds,
        [
            "prod-vsphere-dc0-dc0-c0",
            "prod-vsphere-dc0-dc0-c1",
            "prod-vsphere-dc0-dc0-h0",
            "prod-vsphere-dc1-dc1-c0",
            "prod-vsphere-dc1-dc1-c1",
            "prod-vsphere-dc1-dc1-h0"
        ]
    );
    assert!(
        check::image_ready(&world.images[0]),
        "{:?}",
        world.images[0].status
    );
    let calls = calls(&vcenter, "prod-vsphere").await;
    assert!(
        calls
            .get("ContinueRetrievePropertiesEx")
            .copied()
            .unwrap_or(0)
            > 2,
        "walked in pages: {calls:?}"
    );
    vcenter.close_all().await;
}

#[tokio::test]
async fn a_session_is_reused_until_the_settings_change() {
    let ca = TestCa::new().unwrap();
    let sim = simulator(SimulatorOptions {
        tls: ca.server_tls(),
        ..two_by_two()
    })
    .await;
    let objects = world_of(&secret("vsphere-creds", sim.username(), Some(PASSWORD)));
    let insecure = "    credentialsRef: { name: vsphere-creds }\n    insecureSkipTLSVerify: true\n";
    let mut provider = world_of(&provider("prod-vsphere", &sim.sdk_url(), insecure, ""))
        .providers
        .remove(0);
    let vcenter = VCenter::default();
    let reconcile = |p: Provider| {
        let (objects, vcenter) = (&objects, &vcenter);
        async move {
            banlieue::controllers::provider::readiness::reconcile_provider(
                &p,
                objects,
                vcenter,
                &conditions::now(),
            )
            .await
        }
    };
    for _ in 0..3 {
        assert!(conditions::is_true(
            &reconcile(provider.clone()).await.status.conditions,
            conditions::READY
        ));
    }
    let first = vcenter.client(&key("prod-vsphere")).await.unwrap();
    assert_eq!(
        first.call_stats()["Login"].calls,
        1,
        "three reconciles, one login"
    );

    // The CA is configured instead of skipping verification: a new session
    // with the new settings, the old one logged out.
    provider.spec.connection.insecure_skip_tls_verify = false;
    provider.spec.connection.ca_bundle =
        Some(serde_json::from_value(serde_json::json!({"inline": ca.ca_pem()})).unwrap());
    assert!(conditions::is_true(
        &reconcile(provider.clone()).await.status.conditions,
        conditions::READY
    ));
    let second = vcenter.client(&key("prod-vsphere")).await.unwrap();
    assert_eq!(second.call_stats()["Login"].calls, 1);
    assert_eq!(first.call_stats()["Login"].calls, 1);
    for _ in 0..50 {
        if !first.has_session() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert!(!first.has_session(), "the replaced session is logged out");
    assert_eq!(first.call_stats().get("Logout").map(|s| s.calls), Some(1));
    assert!(conditions::is_true(
        &reconcile(provider.clone()).await.status.conditions,
        conditions::READY
    ));
    assert_eq!(
        vcenter
            .client(&key("prod-vsphere"))
            .await
            .unwrap()
            .call_stats()["Login"]
            .calls,
        1,
        "reused again"
    );
    vcenter.close_all().await;
}

#[test]
fn the_binary_checks_manifests_against_the_simulator() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let sim = runtime.block_on(simulator(two_by_two()));
    let dir = tempfile::tempdir().unwrap();
    let insecure = "    credentialsRef: { name: vsphere-creds }\n    insecureSkipTLSVerify: true\n";
    let text = secret("vsphere-creds", sim.username(), Some(PASSWORD))
        + &provider("prod-vsphere", &sim.sdk_url(), insecure, "")
        + &image("golden-image", "golden");
    std::fs::write(dir.path().join("manifests.yaml"), text).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_banlieue"))
        .args(["check", "-f"])
        .arg(dir.path())
        .output()
        .expect("run banlieue");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    assert!(
        stdout.contains("Connected") && stdout.contains("TemplateFound"),
        "{stdout}"
    );
    assert!(
        stderr.contains("1 Provider(s), 1 Ready; 1 VMImage(s), 1 ready")
            && stderr.contains("-> PASS"),
        "{stderr}"
    );
    assert!(!stdout.contains(PASSWORD) && !stderr.contains(PASSWORD));

    // The simulator stopped: the same manifests fail with the cause.
    drop(sim);
    let out = Command::new(env!("CARGO_BIN_EXE_banlieue"))
        .args(["check", "-f"])
        .arg(dir.path())
        .output()
        .expect("run banlieue");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stdout.contains("ConnectFailed") && stdout.contains("unreachable"),
        "{stdout}"
    );
}
