//! `banlieue controller`: one `Controller` for VirtualMachines, owning their
//! VSphereMachines and triggered by VMClass, VMImage and Provider changes,
//! over one watch per kind shared with the reconcile's caches. Wiring only:
//! the decisions are in [`crate::controllers::virtualmachine`].

use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::apps::v1::Deployment;
use kube::api::Api;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{watcher, Controller, WatchStreamExt};
use kube::{Client, ResourceExt};

use super::{log_loop_result, Background};
use crate::api::{Provider, VMClass, VMImage, VSphereMachine, VirtualMachine};
use crate::bootstrap::workload::{self, Workloads};
use crate::caches::CacheSync;
use crate::controllers::virtualmachine::{error_policy, reconcile, Caches, Context};
use crate::health::Metrics;
use crate::Result;

/// The controller's Lease (leader election), in [`NAMESPACE`] unless `--lease-namespace` says otherwise.
pub const LEASE: &str = "banlieue-controller";
/// The install namespace of the static manifests.
pub const NAMESPACE: &str = "banlieue-system";

/// Runs the controller until a shutdown signal, and in operator-managed mode
/// (`workloads`: the Providers' namespace and the image) one provider
/// workload per Provider there, its Deployment's changes triggering the
/// Provider's reconcile.
pub async fn run(
    client: Client,
    metrics: Arc<Metrics>,
    workloads: Option<(String, String)>,
) -> Result<()> {
    let workloads = workloads.map(|(namespace, image)| {
        let ctx = Arc::new(Workloads {
            client: client.clone(),
            image,
        });
        let config = watcher::Config::default().any_semantic();
        Controller::new(
            Api::<Provider>::namespaced(client.clone(), &namespace),
            config.clone(),
        )
        .owns(
            Api::<Deployment>::namespaced(client.clone(), &namespace),
            config,
        )
        .shutdown_on_signal()
        .run(workload::reconcile, workload::error_policy, ctx)
        .for_each(|result| async move { log_loop_result("ProviderWorkload", result) })
    });
    let workloads = async move {
        if let Some(w) = workloads {
            w.await;
        }
    };
    let (result, ()) = futures::join!(schedule(client, metrics), workloads);
    result
}

async fn schedule(client: Client, metrics: Arc<Metrics>) -> Result<()> {
    let config = watcher::Config::default().any_semantic();
    let (classes, class_writer) = reflector::store::<VMClass>();
    let (images, image_writer) = reflector::store::<VMImage>();
    let (providers, provider_writer) = reflector::store::<Provider>();
    let (machines, machine_writer) = reflector::store::<VSphereMachine>();

    let class_stream = reflector::reflector(
        class_writer,
        watcher(Api::<VMClass>::all(client.clone()), config.clone()),
    )
    .default_backoff()
    .touched_objects();
    let image_stream = reflector::reflector(
        image_writer,
        watcher(Api::<VMImage>::all(client.clone()), config.clone()),
    )
    .default_backoff()
    .touched_objects();
    let provider_stream = reflector::reflector(
        provider_writer,
        watcher(Api::<Provider>::all(client.clone()), config.clone()),
    )
    .default_backoff()
    .touched_objects();
    let machine_stream = reflector::reflector(
        machine_writer,
        watcher(Api::<VSphereMachine>::all(client.clone()), config.clone()),
    )
    .default_backoff()
    .touched_objects();

    let controller = Controller::new(Api::<VirtualMachine>::all(client.clone()), config);
    let vms = controller.store();
    let ctx = Arc::new(Context::new(
        client,
        Caches {
            classes: classes.clone(),
            images: images.clone(),
            providers: providers.clone(),
            machines: machines.clone(),
            vms: vms.clone(),
        },
        metrics.clone(),
    ));

    let (by_class, by_image, unscheduled) = (vms.clone(), vms.clone(), vms.clone());
    let sync = CacheSync::new()
        .with("VMClasses", classes.clone())
        .with("VMImages", images.clone())
        .with("Providers", providers.clone())
        .with("VSphereMachines", machines.clone())
        .with("VirtualMachines", vms.clone());
    let _ready = Background::spawn(async move {
        sync.wait().await;
        metrics.set_ready();
    });

    controller
        .owns_stream(machine_stream)
        .watches_stream(class_stream, move |class: VMClass| {
            referencing(&by_class, |vm| vm.spec.class_ref.name == class.name_any())
        })
        .watches_stream(image_stream, move |image: VMImage| {
            referencing(&by_image, |vm| vm.spec.image_ref.name == image.name_any())
        })
        // A Provider change (readiness, failure domains) can make a waiting VM schedulable.
        .watches_stream(provider_stream, move |_: Provider| {
            referencing(&unscheduled, |vm| vm.scheduled().is_none())
        })
        .shutdown_on_signal()
        .run(reconcile, error_policy, ctx)
        .for_each(|result| async move { log_loop_result("VirtualMachine", result) })
        .await;
    Ok(())
}

fn referencing(
    vms: &Store<VirtualMachine>,
    keep: impl Fn(&VirtualMachine) -> bool,
) -> Vec<ObjectRef<VirtualMachine>> {
    vms.state()
        .iter()
        .filter(|vm| keep(vm))
        .map(|vm| ObjectRef::from(vm.as_ref()))
        .collect()
}
