//! `banlieue check` end to end: the reconcile chain (Provider -> VMImage ->
//! VirtualMachine -> VSphereMachine) over the guide's manifests, against a
//! scripted vCenter (`provider_simulator.rs` runs it against the simulator).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;

use banlieue::api::{PowerState, Provider};
use banlieue::check::{self, image_ready, parse_documents, Output, World};
use banlieue::conditions;
use banlieue::vsphere::mock::{MockVSphere, Script};
use banlieue::vsphere::{Cluster, Datacenter, Error, ErrorKind, Inventory, LibraryItemFacts, Tls};

fn examples() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../deploy/examples")
}

/// A vCenter with the guide's datastore and portgroup in DC1 (two clusters) and DC2.
fn script() -> Script {
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
                    portgroups: vec!["vmnet-prod".into()],
                },
                Datacenter {
                    name: "DC2".into(),
                    clusters: vec![cluster("C3")],
                    portgroups: vec!["vmnet-prod".into()],
                },
            ],
        },
        // The content library image of the examples.
        library_items: vec![LibraryItemFacts {
            id: "5e1f".into(),
            name: "ubuntu-22.04-cloudinit".into(),
            library: "golden-images".into(),
            item_type: "ovf".into(),
            content_version: "2".into(),
        }],
        templates: BTreeMap::from([
            (
                ("ubuntu-22.04-cloudinit".into(), "DC1".into()),
                "vm-101".into(),
            ),
            (
                ("ubuntu-22.04-cloudinit".into(), "DC2".into()),
                "vm-201".into(),
            ),
            (
                ("kairos-deferred-install-tpm".into(), "DC1".into()),
                "vm-102".into(),
            ),
            (
                ("kairos-deferred-install-tpm".into(), "DC2".into()),
                "vm-202".into(),
            ),
        ]),
        password: Some("REPLACE-ME".into()),
        ..Default::default()
    }
}

async fn run(world: &mut World, vsphere: &MockVSphere) {
    check::reconcile(world, vsphere, &conditions::now()).await;
}

fn ready_of(p: &Provider) -> (String, String, String) {
    let c = p.ready_condition().expect("Ready condition");
    (c.status.clone(), c.reason.clone(), c.message.clone())
}

fn scheduled_reason(world: &World, name: &str) -> (String, String) {
    let vm = world
        .vms
        .iter()
        .find(|v| v.metadata.name.as_deref() == Some(name))
        .expect("vm");
    let c = conditions::find(
        &vm.status.as_ref().expect("status").conditions,
        conditions::SCHEDULED,
    )
    .expect("Scheduled");
    (c.reason.clone(), c.message.clone())
}

#[tokio::test]
async fn the_guide_schedules_end_to_end() {
    let mut world = World::load(&[examples()]).expect("examples");
    assert!(world.rejected.is_empty(), "{:?}", world.rejected);
    let vsphere = MockVSphere::new(script());
    run(&mut world, &vsphere).await;

    let provider = &world.providers[0];
    assert_eq!(ready_of(provider).0, "True", "{:?}", ready_of(provider));
    let fds: Vec<&str> = provider
        .status
        .as_ref()
        .unwrap()
        .failure_domains
        .iter()
        .map(|f| f.name.as_str())
        .collect();
    assert_eq!(
        fds,
        [
            "prod-vsphere-dc1-c1",
            "prod-vsphere-dc1-c2",
            "prod-vsphere-dc2-c3"
        ]
    );

    // The connection used the Secret's credentials and the system roots.
    let connect = &vsphere.connects()[0];
    assert_eq!(connect.username, "administrator@vsphere.local");
    assert_eq!(connect.tls, Tls::SystemRoots);
    assert!(
        !format!("{connect:?}").contains("REPLACE-ME"),
        "password never in Debug output"
    );

    for image in &world.images {
        assert!(image_ready(image), "{:?}", image.status);
    }
    let vm = &world.vms[0];
    let status = vm.status.as_ref().unwrap();
    assert_eq!(
        status.scheduled.as_ref().unwrap().failure_domain,
        "prod-vsphere-dc1-c1"
    );
    // The Provider's folder for its failure domains; the VirtualMachine's own wins.
    assert!(provider
        .status
        .as_ref()
        .unwrap()
        .failure_domains
        .iter()
        .all(|f| f.folder.as_deref() == Some("banlieue-vms")));
    let machine = &world.machines[0];
    assert_eq!(
        (
            machine.spec.resource_pool.as_deref(),
            machine.spec.folder.as_deref()
        ),
        (None, Some("db-prod"))
    );
    assert_eq!(machine.spec.template.mo_ref.as_deref(), Some("vm-101"));
    assert_eq!(machine.spec.desired_power_state, PowerState::PoweredOn);
    assert_eq!(
        machine.metadata.labels.as_ref().unwrap()["app.kubernetes.io/name"],
        "banlieue"
    );

    let report = check::report(&world, Output::Table, false);
    assert!(report.passed, "{}\n{}", report.summary, report.output);
    let with_apply = check::report(&world, Output::Yaml, true);
    assert!(
        !with_apply.passed,
        "--apply needs Ready VMs, which nothing provisions yet"
    );
    assert!(
        !with_apply.output.contains("REPLACE-ME"),
        "Secrets are never printed"
    );

    // A second pass over the result is a fixed point: nothing moves.
    let before: Vec<_> = world.vms.iter().map(|v| v.status.clone()).collect();
    run(&mut world, &vsphere).await;
    assert_eq!(
        before,
        world
            .vms
            .iter()
            .map(|v| v.status.clone())
            .collect::<Vec<_>>()
    );
    assert_eq!(world.machines.len(), 2);

    // The example with its own identity: its static address in place of the
    // class's DHCP, and its host name, on its VSphereMachine.
    let own = world
        .machines
        .iter()
        .find(|m| m.metadata.name.as_deref() == Some("db-prod-static"))
        .expect("db-prod-static's machine");
    assert_eq!(
        own.spec.network_interfaces[0]
            .ipam
            .static_
            .as_ref()
            .map(|s| s.address.as_str()),
        Some("10.0.10.23/24")
    );
    assert_eq!(
        own.spec.hostname.as_deref(),
        Some("db-prod-static.example.com")
    );
    assert!(
        world.machines[0].spec.network_interfaces[0]
            .ipam
            .static_
            .is_none(),
        "the guide's VM keeps the class's DHCP"
    );
}

#[tokio::test]
async fn vms_spread_over_failure_domains() {
    let mut text = String::new();
    for f in check::files(&[examples()]).unwrap() {
        text.push_str(&std::fs::read_to_string(f).unwrap());
        text.push_str("\n---\n");
    }
    for i in 2..=4 {
        text.push_str(&format!(
            "apiVersion: banlieue.io/v1alpha1\nkind: VirtualMachine\nmetadata: {{ name: db-prod-0{i}, namespace: banlieue-system }}\n\
             spec: {{ classRef: {{ name: db-prod-large }}, imageRef: {{ name: ubuntu-22.04-cloudinit }} }}\n---\n"
        ));
    }
    let mut world = World::default();
    for doc in parse_documents(&text).unwrap() {
        world.add("test", doc);
    }
    run(&mut world, &MockVSphere::new(script())).await;
    let placed: Vec<String> = world
        .vms
        .iter()
        .map(|v| v.scheduled().unwrap().failure_domain.clone())
        .collect();
    assert_eq!(
        placed,
        [
            "prod-vsphere-dc1-c1",
            "prod-vsphere-dc1-c2",
            "prod-vsphere-dc2-c3",
            "prod-vsphere-dc1-c1",
            // The example with its own identity, last by name.
            "prod-vsphere-dc1-c2"
        ]
    );
}

#[tokio::test]
async fn provider_reasons_come_from_their_causes() {
    // Wrong password.
    let mut world = World::load(&[examples()]).unwrap();
    let mut s = script();
    s.password = Some("other".into());
    run(&mut world, &MockVSphere::new(s)).await;
    let (status, reason, message) = ready_of(&world.providers[0]);
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("False", "ConnectFailed")
    );
    assert!(
        message.contains("incorrect user name or password"),
        "{message}"
    );
    // The guide's reason: the image cannot be ready on a Provider that is not.
    let (reason, message) = scheduled_reason(&world, "db-prod-01");
    assert_eq!(reason, "ImageNotReady");
    assert!(
        message.contains("is not Ready (ConnectFailed: ")
            && message.contains("incorrect user name or password"),
        "{message}"
    );
    assert_eq!(
        world.images[0].status.as_ref().unwrap().per_provider[0]
            .reason
            .as_deref(),
        Some("ConnectFailed")
    );

    // Missing Secret.
    let mut world = World::load(&[examples()]).unwrap();
    world.secrets.clear();
    run(&mut world, &MockVSphere::new(script())).await;
    let (_, reason, message) = ready_of(&world.providers[0]);
    assert_eq!(reason, "SecretMissing");
    assert_eq!(
        message,
        "Secret banlieue-system/vsphere-creds (spec.connection.credentialsRef) not found"
    );

    // Secret without a password.
    let mut world = World::load(&[examples()]).unwrap();
    for s in &mut world.secrets {
        if let Some(d) = s.string_data.as_mut() {
            d.remove("password");
        }
    }
    run(&mut world, &MockVSphere::new(script())).await;
    let (_, reason, message) = ready_of(&world.providers[0]);
    assert_eq!(reason, "SecretInvalid");
    assert!(message.contains("\"password\""), "{message}");

    // Inventory walk fails.
    let mut world = World::load(&[examples()]).unwrap();
    let mut s = script();
    s.inventory_error = Some(Error::new(
        ErrorKind::Inventory,
        "RetrievePropertiesEx: InvalidProperty",
    ));
    run(&mut world, &MockVSphere::new(s)).await;
    assert_eq!(ready_of(&world.providers[0]).1, "InventoryFailed");
}

#[tokio::test]
async fn failure_domains_survive_a_connect_failure() {
    let mut world = World::load(&[examples()]).unwrap();
    let vsphere = MockVSphere::new(script());
    run(&mut world, &vsphere).await;
    let known = world.providers[0]
        .status
        .as_ref()
        .unwrap()
        .failure_domains
        .clone();
    assert_eq!(known.len(), 3);

    let mut s = script();
    s.connect_error = Some(Error::new(
        ErrorKind::Connect,
        "tls: certificate signed by unknown authority",
    ));
    vsphere.set_script(s);
    run(&mut world, &vsphere).await;
    let status = world.providers[0].status.as_ref().unwrap();
    assert_eq!(ready_of(&world.providers[0]).1, "ConnectFailed");
    assert_eq!(
        status.failure_domains, known,
        "last known failure domains kept"
    );
    // The VM scheduled before stays where it was.
    assert_eq!(
        world.vms[0].scheduled().unwrap().failure_domain,
        "prod-vsphere-dc1-c1"
    );
}

#[tokio::test]
async fn template_missing_in_one_datacenter() {
    let mut world = World::load(&[examples()]).unwrap();
    let mut s = script();
    s.templates
        .remove(&("ubuntu-22.04-cloudinit".to_string(), "DC2".to_string()));
    run(&mut world, &MockVSphere::new(s)).await;
    let image = world
        .images
        .iter()
        .find(|i| i.metadata.name.as_deref() == Some("ubuntu-22.04-cloudinit"))
        .unwrap();
    let entry = &image.status.as_ref().unwrap().per_provider[0];
    assert!(!entry.ready);
    assert_eq!(entry.reason.as_deref(), Some("TemplateNotFound"));
    assert_eq!(
        entry.message.as_deref(),
        Some("template \"ubuntu-22.04-cloudinit\" not found in datacenter(s) DC2")
    );
    let (reason, message) = scheduled_reason(&world, "db-prod-01");
    assert_eq!(reason, "ImageNotReady");
    assert!(message.contains("TemplateNotFound"), "{message}");
    assert!(!check::report(&world, Output::Table, false).passed);
}

#[tokio::test]
async fn ca_bundle_from_a_config_map() {
    let mut world = World::load(&[examples()]).unwrap();
    let text = "apiVersion: v1\nkind: ConfigMap\nmetadata: { name: corp-ca-bundle, namespace: banlieue-system }\n\
                data:\n  ca.crt: |\n    -----BEGIN CERTIFICATE-----\n    MIIB\n    -----END CERTIFICATE-----\n";
    for doc in parse_documents(text).unwrap() {
        world.add("test", doc);
    }
    world.providers[0].spec.connection.ca_bundle = serde_json::from_value(
        serde_json::json!({"configMapRef": {"name": "corp-ca-bundle"}, "key": "ca.crt"}),
    )
    .unwrap();
    let vsphere = MockVSphere::new(script());
    run(&mut world, &vsphere).await;
    assert!(matches!(&vsphere.connects()[0].tls, Tls::CaBundle(pem) if pem.contains("MIIB")));

    world.config_maps.clear();
    run(&mut world, &vsphere).await;
    let (_, reason, message) = ready_of(&world.providers[0]);
    assert_eq!(
        reason, "ConnectFailed",
        "the guide's reason for TLS problems"
    );
    assert_eq!(
        message,
        "CA bundle: ConfigMap banlieue-system/corp-ca-bundle (spec.connection.caBundle.configMapRef) not found"
    );

    // A ConfigMap without a certificate under the key.
    let text = "apiVersion: v1\nkind: ConfigMap\nmetadata: { name: corp-ca-bundle, namespace: banlieue-system }\n\
                data:\n  ca.crt: not a certificate\n";
    for doc in parse_documents(text).unwrap() {
        world.add("test", doc);
    }
    run(&mut world, &vsphere).await;
    let (_, reason, message) = ready_of(&world.providers[0]);
    assert_eq!(reason, "ConnectFailed");
    assert_eq!(
        message,
        "CA bundle: no PEM certificate under key \"ca.crt\" (spec.connection.caBundle)"
    );
}

/// Two overrides giving one name fail the Provider from the spec alone,
/// before vCenter is asked: whether vCenter has both (datacenter, cluster)
/// pairs or neither (issue 25's case, which only the inventory used to show).
#[tokio::test]
async fn duplicate_failure_domain_names_fail_the_provider() {
    for (first, second) in [
        (("DC1", "C1"), ("DC2", "C3")),
        (("DC8", "C8"), ("DC9", "C9")),
    ] {
        let mut world = World::load(&[examples()]).unwrap();
        world.providers[0].spec.failure_domain_name_overrides =
            serde_json::from_value(serde_json::json!([
                {"datacenter": first.0, "cluster": first.1, "name": "zone"},
                {"datacenter": second.0, "cluster": second.1, "name": "zone"},
            ]))
            .unwrap();
        let vsphere = MockVSphere::new(script());
        run(&mut world, &vsphere).await;
        let (status, reason, message) = ready_of(&world.providers[0]);
        assert_eq!(
            (status.as_str(), reason.as_str()),
            ("False", "DuplicateFailureDomainName")
        );
        assert_eq!(
            message,
            format!(
                "spec.failureDomainNameOverrides[1].name: \"zone\" is also the name of datacenter \"{}\" \
                 cluster \"{}\": one failure-domain name for two clusters",
                first.0, first.1
            )
        );
        assert!(vsphere.connects().is_empty(), "vCenter not asked");
    }
}

#[test]
fn the_binary_rejects_a_bad_manifest_with_the_field() {
    let dir = std::env::temp_dir().join(format!("banlieue-check-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("bad.yaml");
    std::fs::write(&file, "apiVersion: banlieue.io/v1alpha1\nkind: VMClass\nmetadata: { name: c }\nspec:\n  hardware: { cpus: 2, memoryMiB: 2048 }\n  firmware: uefi\n").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_banlieue"))
        .args(["check", "-o", "yaml", "-f"])
        .arg(&file)
        .output()
        .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(out.status.code(), Some(1));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("REJECTED VMClass/c"), "{stdout}");
    assert!(
        stdout.contains("spec.firmware: unsupported value \"uefi\""),
        "{stdout}"
    );
}

#[test]
fn crdgen_writes_what_is_committed() {
    let dir = std::env::temp_dir().join(format!("banlieue-crdgen-{}", std::process::id()));
    let status = Command::new(env!("CARGO_BIN_EXE_banlieue"))
        .args(["crdgen", "--out"])
        .arg(&dir)
        .arg("--reference")
        .arg(dir.join("crd-reference.md"))
        .status()
        .unwrap();
    assert!(status.success());
    for (file, contents) in banlieue::crdgen::render().unwrap() {
        assert_eq!(std::fs::read_to_string(dir.join(file)).unwrap(), contents);
    }
    assert_eq!(
        std::fs::read_to_string(dir.join("crd-reference.md")).unwrap(),
        banlieue::crdgen::reference()
    );
    let _ = std::fs::remove_dir_all(&dir);
}
