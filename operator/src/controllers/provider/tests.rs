use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use serde_json::json;

use super::*;
use crate::api::{VMImage, VMImageStatus};
use crate::controllers::provider::readiness::{Fetched, Objects};
use crate::controllers::vmimage::*;
use crate::fixtures;
use crate::fixtures::provider::*;
use crate::vsphere::mock::{MockVSphere, Script};
use crate::vsphere::{Cluster, Datacenter, ErrorKind, Inventory};

const PROVIDER_STATUS: &str =
    "/apis/banlieue.io/v1alpha1/namespaces/banlieue-system/providers/prod-vsphere/status";
const IMAGE_STATUS: &str = "/apis/banlieue.io/v1alpha1/vmimages/ubuntu-22.04-cloudinit/status";

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
                    portgroups: vec![],
                },
            ],
        },
        templates: BTreeMap::from([
            (
                ("ubuntu-22.04-cloudinit".into(), "DC1".into()),
                "vm-101".into(),
            ),
            (
                ("ubuntu-22.04-cloudinit".into(), "DC2".into()),
                "vm-201".into(),
            ),
        ]),
        password: Some("REPLACE-ME".into()),
        ..Default::default()
    }
}

fn guide_provider() -> Provider {
    fixtures::provider(
        "prod-vsphere",
        json!({"dc": "dc1"}),
        fixtures::guide_capabilities(),
    )
}

fn world(provider: Provider) -> World {
    World {
        providers: vec![provider],
        secrets: vec![credentials("REPLACE-ME")],
        ..Default::default()
    }
}

/// What the provider role reads for the guide's Provider: its credentials.
fn fetched() -> Fetched {
    Fetched {
        secrets: vec![credentials("REPLACE-ME")],
        ..Default::default()
    }
}

/// The status a reconcile computes for `provider` against `vsphere`.
async fn computed(provider: &Provider, vsphere: &MockVSphere) -> crate::api::ProviderStatus {
    crate::controllers::provider::readiness::reconcile_provider(
        provider,
        &fetched(),
        vsphere,
        &conditions::now(),
    )
    .await
    .status
}

#[tokio::test]
async fn a_ready_provider_gets_its_failure_domains_written_once() {
    let provider = guide_provider();
    let vsphere = MockVSphere::new(script());
    let (ctx, server) = world(provider.clone()).context(vsphere.clone());
    let object = serde_json::to_value(&provider).unwrap();
    let action = with_server(
        ctx.clone(),
        server,
        |mut server| {
            async move {
                let body = server.status_apply(PROVIDER_STATUS, object).await;
                assert_eq!(body["apiVersion"], "banlieue.io/v1alpha1");
                assert_eq!(body["kind"], "Provider");
                let status = &body["status"];
                let names: Vec<&str> = status["failureDomains"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|f| f["name"].as_str().unwrap())
                    .collect();
                assert_eq!(
                    names,
                    [
                        "prod-vsphere-dc1-c1",
                        "prod-vsphere-dc1-c2",
                        "prod-vsphere-dc2-c3"
                    ]
                );
                assert_eq!(
                    status["failureDomains"][2]["networkClasses"],
                    json!(null),
                    "no vmnet-prod in DC2"
                );
                assert_eq!(status["conditions"][0]["reason"], "Connected");
                assert_eq!(status["observedGeneration"], 1);
                let event = server.event("Provider", "Connected").await;
                assert_eq!(event["type"], "Normal");
                server.nothing_more().await;
            }
            .boxed()
        },
        reconcile_provider(Arc::new(provider.clone()), ctx),
    )
    .await;
    assert_eq!(action.unwrap(), Action::requeue(RESYNC), "periodic resync");
    assert!(
        !format!("{:?}", vsphere.connects()).contains("REPLACE-ME"),
        "no password in Debug output"
    );
}

#[tokio::test]
async fn no_write_when_nothing_changed() {
    let vsphere = MockVSphere::new(script());
    let mut provider = guide_provider();
    provider.status = Some(computed(&provider, &vsphere).await);
    tokio::time::sleep(Duration::from_millis(1100)).await; // a later "now" must not leak into the status
    let (ctx, server) = world(provider.clone()).context(vsphere);
    let action = with_server(
        ctx.clone(),
        server,
        |server| server.nothing_more().boxed(),
        reconcile_provider(Arc::new(provider), ctx),
    )
    .await;
    assert_eq!(action.unwrap(), Action::requeue(RESYNC));
}

#[tokio::test]
async fn a_transient_failure_keeps_the_failure_domains_and_backs_off() {
    let vsphere = MockVSphere::new(script());
    let mut provider = guide_provider();
    provider.status = Some(computed(&provider, &vsphere).await);
    let known = provider.status.as_ref().unwrap().failure_domains.clone();
    assert_eq!(known.len(), 3);

    // vCenter goes away.
    let mut down = script();
    down.connect_error = Some(crate::vsphere::Error::new(
        ErrorKind::Connect,
        "connecting to https://vc.example/sdk: unreachable: connection refused",
    ));
    vsphere.set_script(down);
    let (ctx, server) = world(provider.clone()).context(vsphere.clone());
    let object = serde_json::to_value(&provider).unwrap();
    let known_json = serde_json::to_value(&known).unwrap();
    let (tx, rx) = tokio::sync::oneshot::channel();
    let action = with_server(
        ctx.clone(),
        server,
        move |mut server| {
            async move {
                let body = server.status_apply(PROVIDER_STATUS, object).await;
                let status = &body["status"];
                assert_eq!(
                    status["failureDomains"], known_json,
                    "last known failure domains kept"
                );
                assert_eq!(status["conditions"][0]["status"], "False");
                assert_eq!(status["conditions"][0]["reason"], "ConnectFailed");
                assert!(status["conditions"][0]["message"]
                    .as_str()
                    .unwrap()
                    .contains("connection refused"));
                let event = server.event("Provider", "ConnectFailed").await;
                assert_eq!(event["type"], "Warning");
                let _ = tx.send(body["status"].clone());
                server.nothing_more().await;
            }
            .boxed()
        },
        reconcile_provider(Arc::new(provider.clone()), ctx),
    )
    .await;
    assert_eq!(
        action.unwrap(),
        Action::requeue(Duration::from_secs(5)),
        "retried soon, not at the next resync"
    );

    // The next tries, still down, see the status as written: no write, and
    // the wait doubles (the backoff counts per object across reconciles).
    provider.status = Some(serde_json::from_value(rx.await.unwrap()).unwrap());
    let (ctx, server) = world(provider.clone()).context(vsphere.clone());
    let twice = {
        let (ctx, provider) = (ctx.clone(), Arc::new(provider.clone()));
        async move {
            let first = reconcile_provider(provider.clone(), ctx.clone())
                .await
                .unwrap();
            let second = reconcile_provider(provider, ctx).await.unwrap();
            (first, second)
        }
    };
    let (first, second) = with_server(ctx, server, |s| s.nothing_more().boxed(), twice).await;
    assert_eq!(first, Action::requeue(Duration::from_secs(5)));
    assert_eq!(second, Action::requeue(Duration::from_secs(10)));
}

#[tokio::test]
async fn a_missing_secret_is_read_by_name_and_looked_at_again_with_backoff() {
    let provider = guide_provider();
    let world = World {
        providers: vec![provider.clone()],
        ..Default::default()
    };
    let reads = world.reads.clone();
    let (ctx, server) = world.context(MockVSphere::new(script()));
    let object = serde_json::to_value(&provider).unwrap();
    let action = with_server(
        ctx.clone(),
        server,
        |mut server| {
            async move {
                let body = server.status_apply(PROVIDER_STATUS, object).await;
                assert_eq!(body["status"]["conditions"][0]["reason"], "SecretMissing");
                assert!(body["status"].get("failureDomains").is_none());
                server.event("Provider", "SecretMissing").await;
                server.nothing_more().await;
            }
            .boxed()
        },
        reconcile_provider(Arc::new(provider), ctx),
    )
    .await;
    assert_eq!(
        *reads.lock().unwrap(),
        ["/api/v1/namespaces/banlieue-system/secrets/vsphere-creds"],
        "one GET by name (404)"
    );
    assert_eq!(
        action.unwrap(),
        Action::requeue(Duration::from_secs(5)),
        "nothing watches the Secret: looked at again with backoff"
    );
}

/// A resource pool of `spec.placement` that vCenter does not have is the
/// Provider's reason, naming it and the failure domain, looked at again with
/// backoff (an administrator may create it); a folder likewise.
#[tokio::test]
async fn a_missing_pool_or_folder_is_the_reason_and_looked_at_again_with_backoff() {
    let mut provider = guide_provider();
    provider.spec.placement = serde_json::from_value(json!({
        "folder": "apps/web",
        "failureDomains": [{"name": "prod-vsphere-dc2-c3", "resourcePool": "team-z"}],
    }))
    .unwrap();
    let missing = |pool: bool| {
        let mut script = script();
        script.missing_placement = vec![if pool {
            (
                "team-z".to_string(),
                crate::vsphere::PlacementMissing::ResourcePool(
                    "resource pool /DC2/host/C3/Resources/team-z not found".into(),
                ),
            )
        } else {
            (
                "apps/web".to_string(),
                crate::vsphere::PlacementMissing::Folder(
                    "folder /DC1/vm/apps does not exist".into(),
                ),
            )
        }];
        MockVSphere::new(script)
    };
    for (pool, reason, names) in [
        (
            true,
            "ResourcePoolNotFound",
            "failure domain prod-vsphere-dc2-c3: resource pool /DC2/host/C3/Resources/team-z",
        ),
        (
            false,
            "FolderNotFound",
            "failure domain prod-vsphere-dc1-c1: folder /DC1/vm/apps does not exist",
        ),
    ] {
        let (ctx, server) = world(provider.clone()).context(missing(pool));
        let object = serde_json::to_value(&provider).unwrap();
        let action = with_server(
            ctx.clone(),
            server,
            |mut server| {
                async move {
                    let body = server.status_apply(PROVIDER_STATUS, object).await;
                    let condition = &body["status"]["conditions"][0];
                    assert_eq!(condition["status"], "False");
                    assert_eq!(condition["reason"], reason);
                    let message = condition["message"].as_str().unwrap_or_default();
                    assert!(message.starts_with(names), "{message}");
                    server.event("Provider", reason).await;
                    server.nothing_more().await;
                }
                .boxed()
            },
            reconcile_provider(Arc::new(provider.clone()), ctx),
        )
        .await;
        assert_eq!(
            action.unwrap(),
            Action::requeue(Duration::from_secs(5)),
            "{reason}: nothing watches vCenter's pools and folders: looked at again with backoff"
        );
    }
    // Once it is there: Ready, each failure domain with its pool and folder.
    let status = computed(&provider, &MockVSphere::new(script())).await;
    let placed: Vec<(&str, Option<&str>, Option<&str>)> = status
        .failure_domains
        .iter()
        .map(|f| {
            (
                f.name.as_str(),
                f.resource_pool.as_deref(),
                f.folder.as_deref(),
            )
        })
        .collect();
    assert_eq!(
        placed,
        [
            ("prod-vsphere-dc1-c1", None, Some("apps/web")),
            ("prod-vsphere-dc1-c2", None, Some("apps/web")),
            ("prod-vsphere-dc2-c3", Some("team-z"), Some("apps/web")),
        ]
    );
}

/// A CA bundle whose ConfigMap is missing is the guide's `ConnectFailed`
/// (the detail in the message), looked at again with backoff like a missing
/// Secret, and not counted as a vCenter failure: vCenter was not asked.
#[tokio::test]
async fn a_missing_ca_bundle_is_connect_failed_and_looked_at_again_with_backoff() {
    let mut provider = guide_provider();
    provider.spec.connection.ca_bundle =
        serde_json::from_value(json!({"configMapRef": {"name": "corp-ca-bundle"}})).unwrap();
    let world = world(provider.clone());
    let reads = world.reads.clone();
    let vsphere = MockVSphere::new(script());
    let (ctx, server) = world.context(vsphere.clone());
    let metrics = ctx.metrics.clone();
    let object = serde_json::to_value(&provider).unwrap();
    let action = with_server(
        ctx.clone(),
        server,
        |mut server| {
            async move {
                let body = server.status_apply(PROVIDER_STATUS, object).await;
                let ready = &body["status"]["conditions"][0];
                assert_eq!(ready["status"], "False");
                assert_eq!(ready["reason"], "ConnectFailed");
                assert_eq!(
                    ready["message"],
                    "CA bundle: ConfigMap banlieue-system/corp-ca-bundle \
                     (spec.connection.caBundle.configMapRef) not found"
                );
                let event = server.event("Provider", "ConnectFailed").await;
                assert_eq!(event["type"], "Warning");
                server.nothing_more().await;
            }
            .boxed()
        },
        reconcile_provider(Arc::new(provider), ctx),
    )
    .await;
    assert_eq!(
        action.unwrap(),
        Action::requeue(Duration::from_secs(5)),
        "nothing watches the ConfigMap: looked at again with backoff"
    );
    assert!(
        reads
            .lock()
            .unwrap()
            .iter()
            .any(|p| p == "/api/v1/namespaces/banlieue-system/configmaps/corp-ca-bundle"),
        "read by name"
    );
    assert!(vsphere.connects().is_empty(), "vCenter not asked");
    let metrics = metrics.render();
    assert!(
        metrics.contains("banlieue_reconciles_total{kind=\"Provider\"} 1"),
        "{metrics}"
    );
    assert!(
        !metrics.contains("error=\"vsphere_connect\""),
        "not a vCenter failure: {metrics}"
    );
}

#[tokio::test]
async fn secrets_of_other_namespaces_are_never_read() {
    let mut secret = credentials("REPLACE-ME");
    secret.metadata.namespace = Some("other".into());
    let world = World {
        secrets: vec![secret],
        ..Default::default()
    };
    let reads = world.reads.clone();
    let (ctx, _server) = world.context(MockVSphere::new(script()));
    let names = ["vsphere-creds".to_string()];
    let other = ctx.fetch("other", &names, &[]).await.expect("no request");
    assert!(other.secret("other", "vsphere-creds").is_none());
    assert!(
        reads.lock().unwrap().is_empty(),
        "no GET in another namespace"
    );
    let own = ctx.fetch(NAMESPACE, &names, &names).await.expect("read");
    assert!(own.secret(NAMESPACE, "vsphere-creds").is_none());
    assert_eq!(
        *reads.lock().unwrap(),
        [
            "/api/v1/namespaces/banlieue-system/secrets/vsphere-creds",
            "/api/v1/namespaces/banlieue-system/configmaps/vsphere-creds"
        ]
    );
}

/// The Secret is read at every reconcile (no cache): a rotated password is
/// used by the next one, which logs in again with it.
#[tokio::test]
async fn a_rotated_password_is_used_on_the_next_reconcile() {
    let provider = guide_provider();
    let vsphere = MockVSphere::new(script());
    let pass = |password: &'static str| {
        let world = World {
            secrets: vec![credentials(password)],
            ..world(provider.clone())
        };
        let reads = world.reads.clone();
        let (ctx, server) = world.context(vsphere.clone());
        let object = serde_json::to_value(&provider).unwrap();
        let provider = provider.clone();
        async move {
            let (action, seen) = serving_all(
                ctx.clone(),
                server,
                object,
                reconcile_provider(Arc::new(provider), ctx),
            )
            .await;
            assert_eq!(action.expect("reconcile"), Action::requeue(RESYNC));
            assert_eq!(
                reads.lock().unwrap().len(),
                1,
                "the credentials read by name"
            );
            last_status(&seen, "/providers/prod-vsphere/status")
        }
    };
    let first = pass("REPLACE-ME").await;
    assert_eq!(first["conditions"][0]["reason"], "Connected", "{first}");

    let mut rotated = script();
    rotated.password = Some("rotated-pw".into());
    vsphere.set_script(rotated);
    let _ = pass("rotated-pw").await;
    let passwords: Vec<String> = vsphere
        .connects()
        .iter()
        .map(|c| c.password.expose().to_string())
        .collect();
    assert_eq!(passwords, ["REPLACE-ME", "rotated-pw"]);
}

#[test]
fn a_provider_reads_its_credentials_and_ca_bundle_by_name() {
    use crate::controllers::provider::readiness::referenced;
    let mut p = guide_provider();
    assert_eq!(referenced(&p), (vec!["vsphere-creds".to_string()], vec![]));
    p.spec.connection.ca_bundle =
        serde_json::from_value(json!({"configMapRef": {"name": "corp-ca"}})).unwrap();
    assert_eq!(
        referenced(&p),
        (
            vec!["vsphere-creds".to_string()],
            vec!["corp-ca".to_string()]
        )
    );
    p.spec.connection.ca_bundle =
        serde_json::from_value(json!({"secretRef": {"name": "vcenter-ca"}})).unwrap();
    assert_eq!(
        referenced(&p),
        (
            vec!["vsphere-creds".to_string(), "vcenter-ca".to_string()],
            vec![]
        )
    );
}

fn ready_provider(vsphere_status: crate::api::ProviderStatus) -> Provider {
    let mut p = guide_provider();
    p.status = Some(vsphere_status);
    p
}

fn image_with_entries(entries: serde_json::Value) -> VMImage {
    let mut image = fixtures::image(&[]);
    image.metadata.generation = Some(2);
    image.status = Some(
        serde_json::from_value(json!({"perProvider": entries, "observedGeneration": 2})).unwrap(),
    );
    image
}

#[tokio::test]
async fn image_entries_of_this_namespace_are_written_and_others_left_alone() {
    let vsphere = MockVSphere::new(script());
    let provider = ready_provider(computed(&guide_provider(), &vsphere).await);
    let other = json!({"provider": "east", "namespace": "other-ns", "ready": true, "reason": "TemplateFound"});
    let image = image_with_entries(json!([other]));
    let (ctx, server) = world(provider).context(vsphere);
    let object = serde_json::to_value(&image).unwrap();
    let action = with_server(
        ctx.clone(),
        server,
        |mut server| {
            async move {
                let body = server.status_apply(IMAGE_STATUS, object).await;
                assert_eq!(body["kind"], "VMImage");
                let entries = body["status"]["perProvider"].as_array().unwrap();
                assert_eq!(
                    entries.len(),
                    1,
                    "only this namespace's entries: {entries:?}"
                );
                let e = &entries[0];
                assert_eq!(
                    (
                        e["provider"].as_str(),
                        e["namespace"].as_str(),
                        e["ready"].as_bool()
                    ),
                    (Some("prod-vsphere"), Some(NAMESPACE), Some(true))
                );
                assert_eq!(e["reason"], "TemplateFound");
                assert_eq!(
                    e["templates"],
                    json!([
                        {"datacenter": "DC1", "name": "ubuntu-22.04-cloudinit", "moRef": "vm-101"},
                        {"datacenter": "DC2", "name": "ubuntu-22.04-cloudinit", "moRef": "vm-201"},
                    ])
                );
                assert_eq!(body["status"]["observedGeneration"], 2);
                server.nothing_more().await;
            }
            .boxed()
        },
        reconcile_image(Arc::new(image), ctx),
    )
    .await;
    assert_eq!(action.unwrap(), Action::requeue(RESYNC));
}

#[tokio::test]
async fn image_not_rewritten_when_unchanged_and_template_not_found_named() {
    let vsphere = MockVSphere::new(script());
    let provider = ready_provider(computed(&guide_provider(), &vsphere).await);
    let mut image = fixtures::image(&[]);
    let entry = crate::controllers::provider::readiness::image_on_provider(
        &image,
        &provider,
        &fetched(),
        &vsphere,
    )
    .await;
    assert!(entry.ready);
    let other = json!({"provider": "east", "namespace": "other-ns", "ready": false, "reason": "TemplateNotFound"});
    image.status = Some(VMImageStatus {
        per_provider: vec![serde_json::from_value(other).unwrap(), entry],
        observed_generation: image.metadata.generation,
    });
    let (ctx, server) = world(provider.clone()).context(vsphere.clone());
    let action = with_server(
        ctx.clone(),
        server,
        |s| s.nothing_more().boxed(),
        reconcile_image(Arc::new(image.clone()), ctx),
    )
    .await;
    assert_eq!(action.unwrap(), Action::requeue(RESYNC));

    // The template disappears from DC2.
    let mut s = script();
    s.templates
        .remove(&("ubuntu-22.04-cloudinit".to_string(), "DC2".to_string()));
    vsphere.set_script(s);
    let entry = crate::controllers::provider::readiness::image_on_provider(
        &image,
        &provider,
        &fetched(),
        &vsphere,
    )
    .await;
    assert!(!entry.ready);
    assert_eq!(entry.reason.as_deref(), Some("TemplateNotFound"));
    assert_eq!(
        entry.message.as_deref(),
        Some("template \"ubuntu-22.04-cloudinit\" not found in datacenter(s) DC2")
    );
}

/// One VMImage reconcile of `image` with `provider` in the caches, against
/// `vsphere`: the `perProvider` entry written, the action, and the metrics
/// text after it.
async fn image_reconciled(
    image: VMImage,
    provider: Provider,
    vsphere: MockVSphere,
) -> (serde_json::Value, Action, String) {
    let (ctx, server) = world(provider).context(vsphere);
    let metrics = ctx.metrics.clone();
    let object = serde_json::to_value(&image).unwrap();
    let (tx, rx) = tokio::sync::oneshot::channel();
    let action = with_server(
        ctx.clone(),
        server,
        |mut server| {
            async move {
                let body = server.status_apply(IMAGE_STATUS, object).await;
                let _ = tx.send(body["status"]["perProvider"][0].clone());
                server.nothing_more().await;
            }
            .boxed()
        },
        reconcile_image(Arc::new(image), ctx),
    )
    .await;
    (rx.await.unwrap(), action.unwrap(), metrics.render())
}

/// A VMImage reconcile whose template lookup fails with `error`: the
/// per-Provider reason written, the action, and the metrics text after it.
async fn image_lookup_failing_with(error: crate::vsphere::Error) -> (String, Action, String) {
    let vsphere = MockVSphere::new(script());
    let provider = ready_provider(computed(&guide_provider(), &vsphere).await);
    let mut s = script();
    s.lookup_error = Some(error);
    vsphere.set_script(s);
    let (entry, action, metrics) = image_reconciled(fixtures::image(&[]), provider, vsphere).await;
    let reason = entry["reason"].as_str().unwrap_or_default().to_string();
    (reason, action, metrics)
}

/// A vCenter, the guide's Provider Ready on it, and an image whose only
/// source is for another provider class.
async fn sourceless() -> (MockVSphere, Provider, VMImage) {
    let vsphere = MockVSphere::new(script());
    let provider = ready_provider(computed(&guide_provider(), &vsphere).await);
    let mut image = fixtures::image(&[]);
    image.spec.sources[0].provider_class = "openstack".into();
    (vsphere, provider, image)
}

/// An image with no Template source for this Provider's class is not ready
/// on it, says so by name, and vCenter is not asked anything.
#[tokio::test]
async fn an_image_without_a_vsphere_source_is_not_ready_and_asks_vcenter_nothing() {
    let (vsphere, provider, image) = sourceless().await;
    let connects = vsphere.connects().len();
    let entry = crate::controllers::provider::readiness::image_on_provider(
        &image,
        &provider,
        &fetched(),
        &vsphere,
    )
    .await;
    assert!(!entry.ready);
    assert_eq!(entry.reason.as_deref(), Some("NoVSphereSource"));
    assert_eq!(
        entry.message.as_deref(),
        Some("VMImage has no Template or ContentLibraryItem source for provider class \"vsphere\"")
    );
    assert!(entry.templates.is_empty(), "{entry:?}");
    assert_eq!(vsphere.connects().len(), connects, "no vCenter call");
}

/// Through the controller and the API server: the entry is written
/// (`NoVSphereSource`, not ready, the Provider named), and since only a
/// change of the image fixes it, it waits for the resync: no backoff, no
/// failure counted, no vCenter call.
#[tokio::test]
async fn an_image_without_a_vsphere_source_is_written_and_waits_for_a_change() {
    let (vsphere, provider, image) = sourceless().await;
    let connects = vsphere.connects().len();
    let (entry, action, metrics) = image_reconciled(image, provider, vsphere.clone()).await;
    assert_eq!(
        entry,
        json!({"provider": "prod-vsphere", "namespace": "banlieue-system", "ready": false,
               "reason": "NoVSphereSource",
               "message": "VMImage has no Template or ContentLibraryItem source for provider class \"vsphere\""})
    );
    assert_eq!(action, Action::requeue(RESYNC), "no backoff");
    assert!(
        metrics.contains("banlieue_reconciles_total{kind=\"VMImage\"} 1"),
        "{metrics}"
    );
    assert!(
        !metrics.contains("banlieue_reconcile_errors_total{kind=\"VMImage\""),
        "not a failure: {metrics}"
    );
    assert_eq!(vsphere.connects().len(), connects, "no vCenter call");
}

#[tokio::test]
async fn a_lookup_failure_backs_off() {
    let (reason, action, metrics) = image_lookup_failing_with(crate::vsphere::Error::new(
        ErrorKind::Lookup,
        "looking up template: RetrievePropertiesEx: SystemError",
    ))
    .await;
    assert_eq!(reason, "LookupFailed");
    assert_eq!(action, Action::requeue(Duration::from_secs(5)));
    assert!(
        metrics.contains(
            "banlieue_reconcile_errors_total{kind=\"VMImage\",error=\"vsphere_lookup\"} 1"
        ),
        "{metrics}"
    );
}

#[tokio::test]
async fn an_image_lookup_vcenter_does_not_answer_backs_off_too() {
    let (reason, action, metrics) = image_lookup_failing_with(crate::vsphere::Error::new(
        ErrorKind::Unresponsive,
        "looking up template: the call deadline (3s) passed before https://vc.example/sdk answered",
    ))
    .await;
    assert_eq!(reason, "VCenterUnresponsive");
    assert_eq!(
        action,
        Action::requeue(Duration::from_secs(5)),
        "retried with backoff, not at the next resync"
    );
    assert!(
        metrics.contains(
            "banlieue_reconcile_errors_total{kind=\"VMImage\",error=\"vsphere_unresponsive\"} 1"
        ),
        "{metrics}"
    );
}

#[tokio::test]
async fn nothing_happens_before_the_caches_are_filled() {
    let (ctx, server) = world(guide_provider()).context(MockVSphere::new(script()));
    ctx.caches.set_synced(false);
    let action = with_server(
        ctx.clone(),
        server,
        |s| s.nothing_more().boxed(),
        reconcile_provider(Arc::new(guide_provider()), ctx),
    )
    .await;
    assert_eq!(action.unwrap(), Action::requeue(Duration::from_secs(1)));
}

#[tokio::test]
async fn a_provider_waiting_for_the_caches_says_so_in_its_status() {
    let (ctx, server) = world(guide_provider()).context(MockVSphere::new(script()));
    ctx.caches.set_synced(false);
    let long_ago = std::time::Instant::now()
        .checked_sub(crate::caches::SYNC_GRACE + Duration::from_secs(1))
        .expect("an instant 11 s ago");
    ctx.caches.set_started(long_ago);
    ctx.caches.check();
    let object = serde_json::to_value(guide_provider()).unwrap();
    let action = with_server(
        ctx.clone(),
        server,
        |mut server| {
            async move {
                let body = server.status_apply(PROVIDER_STATUS, object).await;
                let ready = &body["status"]["conditions"][0];
                assert_eq!(ready["type"], "Ready");
                assert_eq!(ready["status"], "False");
                assert_eq!(ready["reason"], "CachesNotSynced");
                let message = ready["message"].as_str().unwrap_or_default();
                assert!(
                    message.contains("waiting for Providers, VSphereMachines, VMImages"),
                    "{message}"
                );
                server.event("Provider", "CachesNotSynced").await;
                server.nothing_more().await;
            }
            .boxed()
        },
        reconcile_provider(Arc::new(guide_provider()), ctx),
    )
    .await;
    assert_eq!(action.unwrap(), Action::requeue(Duration::from_secs(1)));
}

#[tokio::test]
async fn an_unresponsive_vcenter_makes_the_provider_not_ready_and_drops_its_session() {
    let vsphere = MockVSphere::new(script());
    let mut provider = guide_provider();
    provider.status = Some(computed(&provider, &vsphere).await);

    // The walk's call gets no answer within the call deadline.
    let mut wedged = script();
    wedged.inventory_error = Some(crate::vsphere::Error::new(
        ErrorKind::Unresponsive,
        "walking the inventory: the call deadline (3s) passed before https://vc.example/sdk answered",
    ));
    vsphere.set_script(wedged);
    let (ctx, server) = world(provider.clone()).context(vsphere.clone());
    let metrics = ctx.metrics.clone();
    let object = serde_json::to_value(&provider).unwrap();
    let action = with_server(
        ctx.clone(),
        server,
        move |mut server| {
            async move {
                let body = server.status_apply(PROVIDER_STATUS, object).await;
                let ready = &body["status"]["conditions"][0];
                assert_eq!(ready["status"], "False");
                assert_eq!(ready["reason"], "VCenterUnresponsive");
                assert!(ready["message"]
                    .as_str()
                    .unwrap()
                    .contains("the call deadline (3s) passed"));
                assert_eq!(
                    body["status"]["failureDomains"].as_array().map(Vec::len),
                    Some(3),
                    "last known failure domains kept"
                );
                let event = server.event("Provider", "VCenterUnresponsive").await;
                assert_eq!(event["type"], "Warning");
                server.nothing_more().await;
            }
            .boxed()
        },
        reconcile_provider(Arc::new(provider.clone()), ctx),
    )
    .await;
    assert_eq!(
        action.unwrap(),
        Action::requeue(Duration::from_secs(5)),
        "retried with backoff, not at the next resync"
    );
    assert_eq!(
        vsphere.unresponsive_sessions(),
        1,
        "the session that met the silence is given back"
    );
    let metrics = metrics.render();
    assert!(
        metrics.contains(
            "banlieue_reconcile_errors_total{kind=\"Provider\",error=\"vsphere_unresponsive\"} 1"
        ),
        "{metrics}"
    );
}

/// The real backend through a proxy that wedges in front of the simulator:
/// with a 3 s call deadline, the Provider and a machine it serves say
/// `VCenterUnresponsive` within the deadline (not after minutes), the
/// wedged session is dropped, and once vCenter answers again the next
/// reconcile logs in anew and the Provider is `Connected`.
#[tokio::test]
async fn a_stalled_vcenter_shows_within_the_call_deadline_and_the_provider_recovers() {
    use std::time::Instant;

    use crate::api::NamespacedReference;
    use crate::controllers::vspheremachine::{reconcile_machine, FINALIZER};
    use crate::fixtures::stalling::StallingProxy;
    use crate::vsphere::vcenter::{Options, VCenter};
    use vsphere_tests::{ServerTls, Simulator, SimulatorOptions};

    const DEADLINE: Duration = Duration::from_secs(3);
    // The deadline, and room for a loaded test machine; far below the
    // minutes a per-attempt timeout with retries would take.
    const BOUND: Duration = Duration::from_secs(6);

    let sim = tokio::task::spawn_blocking(|| {
        Simulator::start(SimulatorOptions {
            tls: ServerTls::Plain,
            password: "s3cret-Pw".into(),
            ..Default::default()
        })
    })
    .await
    .expect("simulator start task")
    .unwrap_or_else(|e| panic!("simulator: {e}"));
    let upstream = sim
        .base_url()
        .trim_start_matches("http://")
        .parse()
        .expect("simulator address");
    let proxy = StallingProxy::start(upstream).await;

    let mut provider = fixtures::provider("vc", json!({}), json!({}));
    provider.spec.connection.endpoint = proxy.sdk_url.clone();
    provider.spec.connection.call_deadline = Some("3s".into());
    let secret: k8s_openapi::api::core::v1::Secret = serde_json::from_value(json!({
        "metadata": {"name": "vsphere-creds", "namespace": NAMESPACE},
        "stringData": {"username": sim.username(), "password": sim.password()},
    }))
    .unwrap();
    let mut machine = fixtures::machine("web");
    machine.metadata.finalizers = Some(vec![FINALIZER.to_string()]);
    machine.metadata.uid = Some("0b5c1e2a-6f00-4d7e-9c59-7a9f3c3c1d11".into());
    let key = NamespacedReference {
        namespace: NAMESPACE.into(),
        name: "vc".into(),
    };
    let vcenter = Arc::new(VCenter::new(Options::default()));

    // One reconcile of the Provider: its action, how long it took and the
    // status it wrote.
    let world = |provider: &Provider| World {
        providers: vec![provider.clone()],
        secrets: vec![secret.clone()],
        ..Default::default()
    };
    let provider_pass = |provider: Provider| {
        let (ctx, server) = world(&provider).context_on(vcenter.clone());
        async move {
            let object = serde_json::to_value(&provider).unwrap();
            let started = Instant::now();
            let (action, seen) = serving_all(
                ctx.clone(),
                server,
                object,
                reconcile_provider(Arc::new(provider), ctx),
            )
            .await;
            (
                action.expect("provider reconcile"),
                started.elapsed(),
                last_status(&seen, "/providers/vc/status"),
            )
        }
    };

    // vCenter answers: logged in, Ready.
    let (action, _, status) = provider_pass(provider.clone()).await;
    assert_eq!(status["conditions"][0]["reason"], "Connected", "{status}");
    assert_eq!(action, Action::requeue(RESYNC));
    provider.status = Some(serde_json::from_value(status).unwrap());
    assert!(vcenter.client(&key).await.is_some(), "a session is cached");

    // vCenter wedges: every call, on the cached connection or a new one, hangs.
    proxy.stall();
    let (action, elapsed, status) = provider_pass(provider.clone()).await;
    let ready = &status["conditions"][0];
    assert_eq!(ready["status"], "False", "{status}");
    assert_eq!(ready["reason"], "VCenterUnresponsive");
    assert!(
        ready["message"]
            .as_str()
            .is_some_and(|m| m.contains("call deadline (3s)")),
        "{ready}"
    );
    assert!(
        elapsed >= DEADLINE && elapsed < BOUND,
        "ended by the 3 s deadline: {elapsed:?}"
    );
    assert_eq!(action, Action::requeue(Duration::from_secs(5)), "backoff");
    assert!(
        vcenter.client(&key).await.is_none(),
        "the wedged session is dropped"
    );
    provider.status = Some(serde_json::from_value(status).unwrap());

    // A machine of the Provider, reconciled meanwhile: its login hangs too.
    let (ctx, server) = world(&provider).context_on(vcenter.clone());
    let object = serde_json::to_value(&machine).unwrap();
    let started = Instant::now();
    let (result, seen) = serving_all(
        ctx.clone(),
        server,
        object,
        reconcile_machine(Arc::new(machine), ctx),
    )
    .await;
    let elapsed = started.elapsed();
    let error = result.expect_err("the machine's reconcile fails (and backs off)");
    assert_eq!(error.label(), "vsphere_unresponsive", "{error}");
    assert!(elapsed < BOUND, "ended by the 3 s deadline: {elapsed:?}");
    let machine_status = last_status(&seen, "/vspheremachines/web/status");
    assert_eq!(
        machine_status["conditions"][0]["reason"], "VCenterUnresponsive",
        "{seen:?}"
    );
    assert_eq!(machine_status["conditions"][0]["status"], "False");

    // vCenter answers again: the next reconcile logs in anew and is Ready.
    proxy.answer();
    let (action, elapsed, status) = provider_pass(provider.clone()).await;
    assert_eq!(status["conditions"][0]["status"], "True", "{status}");
    assert_eq!(status["conditions"][0]["reason"], "Connected");
    assert!(elapsed < BOUND, "{elapsed:?}");
    assert_eq!(action, Action::requeue(RESYNC));
    assert!(vcenter.client(&key).await.is_some(), "a new session");
}

/// The last status patched at a path ending in `path_end`.
fn last_status(seen: &fixtures::provider::Seen, path_end: &str) -> serde_json::Value {
    seen.iter()
        .rev()
        .find(|(method, path, _, _)| method == "PATCH" && path.ends_with(path_end))
        .map(|(_, _, _, body)| body["status"].clone())
        .unwrap_or_default()
}

const PROVIDER: &str =
    "/apis/banlieue.io/v1alpha1/namespaces/banlieue-system/providers/prod-vsphere";

/// A VSphereMachine `name` of namespace `ns` on the guide's Provider.
fn machine_on_guide_provider(name: &str) -> crate::api::VSphereMachine {
    let mut m = fixtures::machine(name);
    m.spec.provider_ref.name = "prod-vsphere".into();
    m
}

fn deleted(mut provider: Provider) -> Provider {
    provider.metadata.deletion_timestamp = Some(conditions::now());
    provider.metadata.generation = Some(2);
    provider
}

/// The JSON patches of the Provider object itself (its finalizers).
fn provider_patches(seen: &fixtures::provider::Seen) -> Vec<&serde_json::Value> {
    seen.iter()
        .filter(|(m, p, t, _)| m == "PATCH" && p == PROVIDER && t.contains("json-patch"))
        .map(|(_, _, _, b)| b)
        .collect()
}

#[tokio::test]
async fn a_provider_gets_its_finalizer_before_it_is_reconciled() {
    let mut provider = guide_provider();
    provider.metadata.finalizers = None;
    let vsphere = MockVSphere::new(script());
    let (ctx, server) = world(provider.clone()).context(vsphere.clone());
    let object = serde_json::to_value(&provider).unwrap();
    let (action, seen) = serving_all(
        ctx.clone(),
        server,
        object,
        reconcile_provider(Arc::new(provider), ctx),
    )
    .await;
    assert_eq!(action.expect("reconcile"), Action::requeue(RESYNC));
    let patches = provider_patches(&seen);
    assert_eq!(patches.len(), 1, "{seen:?}");
    assert_eq!(
        patches[0][1],
        json!({"op": "add", "path": "/metadata/finalizers", "value": [FINALIZER]})
    );
    assert_eq!(seen[0].1, PROVIDER, "the finalizer first: {seen:?}");
    assert_eq!(
        last_status(&seen, "/providers/prod-vsphere/status")["conditions"][0]["reason"],
        "Connected",
        "then the usual reconcile, in the same pass"
    );
}

#[tokio::test]
async fn a_deleted_provider_stays_while_machines_use_it_and_names_them() {
    let provider = deleted(fixtures::ready(guide_provider(), vec![]));
    let vsphere = MockVSphere::new(script());
    let mut other = fixtures::machine("elsewhere");
    other.spec.provider_ref.name = "another-vcenter".into();
    let world = World {
        machines: vec![
            machine_on_guide_provider("web"),
            machine_on_guide_provider("db"),
            other,
        ],
        ..world(provider.clone())
    };
    let (ctx, server) = world.context(vsphere.clone());
    let object = serde_json::to_value(&provider).unwrap();
    let (action, seen) = serving_all(
        ctx.clone(),
        server,
        object,
        reconcile_provider(Arc::new(provider.clone()), ctx),
    )
    .await;
    assert_eq!(
        action.expect("reconcile"),
        Action::requeue(DELETION_RECHECK)
    );
    assert!(
        provider_patches(&seen).is_empty(),
        "the finalizer stays: {seen:?}"
    );
    let status = last_status(&seen, "/providers/prod-vsphere/status");
    let deleting = status["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["type"] == "Deleting")
        .cloned()
        .unwrap_or_default();
    assert_eq!(deleting["status"], "True", "{status}");
    assert_eq!(deleting["reason"], "WaitingForVSphereMachines");
    assert_eq!(
        deleting["message"],
        "deleted, kept until the 2 VSphereMachine(s) using it are deleted (their \
         VirtualMachines deleted and their VMs destroyed): ns/db, ns/web"
    );
    assert_eq!(
        status["conditions"][0]["reason"], "Connected",
        "Ready is left as it was: the machines still log in with its credentials"
    );
    assert!(
        seen.iter().any(
            |(_, p, _, b)| p.ends_with("/events") && b["reason"] == "WaitingForVSphereMachines"
        ),
        "{seen:?}"
    );
    assert!(vsphere.connects().is_empty(), "vCenter is not walked again");
}

#[tokio::test]
async fn a_deleted_provider_is_released_once_no_machine_uses_it() {
    let mut provider = deleted(guide_provider());
    provider.metadata.finalizers = Some(vec!["example.com/other".into(), FINALIZER.into()]);
    let vsphere = MockVSphere::new(script());
    let (ctx, server) = world(provider.clone()).context(vsphere.clone());
    let object = serde_json::to_value(&provider).unwrap();
    let (action, seen) = serving_all(
        ctx.clone(),
        server,
        object,
        reconcile_provider(Arc::new(provider), ctx),
    )
    .await;
    assert_eq!(action.expect("reconcile"), Action::await_change());
    let patches = provider_patches(&seen);
    assert_eq!(patches.len(), 1, "{seen:?}");
    assert_eq!(
        *patches[0],
        json!([
            {"op": "test", "path": "/metadata/finalizers/1", "value": FINALIZER},
            {"op": "remove", "path": "/metadata/finalizers/1"},
        ])
    );
    assert_eq!(seen.len(), 1, "nothing but the release: {seen:?}");
}

/// Deleting a Provider and its machine's VirtualMachine at once (as
/// `kubectl delete -f` does): the machine destroys its VM with the deleted
/// Provider's credentials, then the Provider is released.
#[tokio::test]
async fn machines_of_a_deleted_provider_destroy_their_vms_then_it_is_released() {
    use crate::controllers::vspheremachine::{driver, reconcile_machine};
    let provider = deleted(guide_provider());
    let machines = crate::vsphere::mock::MockMachines::new();
    let vsphere = MockVSphere::new(Script {
        machines: machines.clone(),
        ..script()
    });
    let mut machine = machine_on_guide_provider("web");
    machine.metadata.finalizers = Some(vec![crate::controllers::vspheremachine::FINALIZER.into()]);
    machine.metadata.uid = Some("0b5c1e2a-6f00-4d7e-9c59-7a9f3c3c1d11".into());
    machine.spec.guest_agent = Some("none".into());
    struct Quiet;
    impl driver::Hooks for Quiet {
        async fn persist(&mut self, _: &crate::api::VSphereMachine) -> Result<()> {
            Ok(())
        }
    }
    driver::reconcile(
        &mut machine,
        false,
        &[],
        &machines,
        &mut Quiet,
        &driver::Options::default(),
    )
    .await
    .expect("the VM exists");
    assert_eq!(machines.vms().len(), 1);
    machine.metadata.deletion_timestamp = Some(conditions::now());

    let world_with = |machines: Vec<crate::api::VSphereMachine>| World {
        machines,
        ..world(provider.clone())
    };
    let (ctx, server) = world_with(vec![machine.clone()]).context(vsphere.clone());
    let object = serde_json::to_value(&machine).unwrap();
    let (result, _) = serving_all(
        ctx.clone(),
        server,
        object,
        reconcile_machine(Arc::new(machine.clone()), ctx),
    )
    .await;
    assert_eq!(
        result.expect("the machine's delete"),
        Action::await_change()
    );
    assert!(machines.vms().is_empty(), "the VM is destroyed");

    // The machine is gone from the caches: the Provider's finalizer goes.
    let (ctx, server) = world_with(Vec::new()).context(vsphere.clone());
    let object = serde_json::to_value(&provider).unwrap();
    let (action, seen) = serving_all(
        ctx.clone(),
        server,
        object,
        reconcile_provider(Arc::new(provider.clone()), ctx),
    )
    .await;
    assert_eq!(action.expect("reconcile"), Action::await_change());
    assert_eq!(provider_patches(&seen).len(), 1, "released: {seen:?}");
}

#[tokio::test]
async fn a_content_library_item_is_deployed_once_per_datacenter_and_missing_ones_named() {
    use crate::api::SourceKind;
    use crate::controllers::provider::readiness::image_on_provider;
    use crate::vsphere::LibraryItemFacts;
    let mut s = script();
    s.library_items = vec![
        LibraryItemFacts {
            id: "5e1f".into(),
            name: "ubuntu".into(),
            library: "golden".into(),
            item_type: "ovf".into(),
            content_version: "3".into(),
        },
        LibraryItemFacts {
            id: "77aa".into(),
            name: "installer".into(),
            library: "golden".into(),
            item_type: "iso".into(),
            content_version: "1".into(),
        },
    ];
    let vsphere = MockVSphere::new(s.clone());
    let provider = ready_provider(computed(&guide_provider(), &vsphere).await);
    let image_of = |library: &str, item: &str| {
        let mut image = fixtures::image(&[]);
        image.spec.sources[0].kind = SourceKind::ContentLibraryItem;
        image.spec.sources[0].library = Some(library.into());
        image.spec.sources[0].reference = item.into();
        image
    };
    let entry = image_on_provider(
        &image_of("golden", "ubuntu"),
        &provider,
        &fetched(),
        &vsphere,
    )
    .await;
    assert!(entry.ready, "{entry:?}");
    assert_eq!(entry.reason.as_deref(), Some("LibraryItemDeployed"));
    let names: Vec<(&str, &str)> = entry
        .templates
        .iter()
        .map(|t| (t.datacenter.as_str(), t.name.as_str()))
        .collect();
    assert_eq!(
        names,
        [("DC1", "banlieue-5e1f-v3"), ("DC2", "banlieue-5e1f-v3")]
    );
    assert_eq!(
        s.deployed.lock().unwrap().len(),
        2,
        "one deploy per datacenter"
    );
    // Found as templates the next time: nothing deployed again.
    let again = image_on_provider(
        &image_of("golden", "ubuntu"),
        &provider,
        &fetched(),
        &vsphere,
    )
    .await;
    assert_eq!(again, entry);
    assert_eq!(s.deployed.lock().unwrap().len(), 2);

    for (library, item, reason, message) in [
        (
            "golden",
            "nope",
            "LibraryItemNotFound",
            "item \"nope\" not found in content library \"golden\"",
        ),
        (
            "silver",
            "ubuntu",
            "LibraryItemNotFound",
            "content library \"silver\" not found",
        ),
        (
            "golden",
            "installer",
            "LibraryItemUnsupported",
            "of type \"iso\"",
        ),
    ] {
        let entry =
            image_on_provider(&image_of(library, item), &provider, &fetched(), &vsphere).await;
        assert!(!entry.ready);
        assert_eq!(entry.reason.as_deref(), Some(reason));
        assert!(
            entry
                .message
                .as_deref()
                .unwrap_or_default()
                .contains(message),
            "{entry:?}"
        );
    }
}
