//! banlieue: a Kubernetes operator for `banlieue.io/v1alpha1` virtual machines on vSphere.
//!
//! One binary, roles by subcommand. Imports point one way, from the top of
//! this map down: `main -> cli, roles, bootstrap, check -> leadership,
//! controllers -> vsphere -> api, conditions, health, caches`.
//!
//! ```text
//! main.rs            parse the CLI, start telemetry, one call per subcommand
//! cli.rs             clap types and value parsers
//! telemetry.rs       the tracing subscriber
//! leadership.rs      leader election on a Lease: only the holder's reconcilers run
//! roles/             one file per long-running subcommand: watches and Controller wiring
//!   mod.rs           shared start-up (health listener, Kubernetes client), loop logging
//!   controller.rs    `banlieue controller`
//!   provider.rs      `banlieue provider vsphere`: one Controller per kind, session sweeper
//! controllers/       one module per reconciled kind, pure cores beside the reconciler;
//!                    tests.rs beside a reconciler: its tests on the mocked API server
//!   mod.rs           the kit: per-object backoff, events, server-side-apply status
//!   context.rs       the provider role's shared state
//!   virtualmachine/  mod.rs (reconcile), plan.rs, schedule.rs, build.rs (pure)
//!   provider/        mod.rs (reconcile), readiness.rs (pure core shared with check)
//!   vmimage.rs       a VMImage's readiness per Provider
//!   ippool.rs        the built-in IP pool's allocator: binds IPAddressClaims
//!   vspheremachine/  mod.rs (finalizer, reconcile), step.rs (pure), driver.rs,
//!                    request.rs, identity.rs, guestinfo.rs, ipclaims.rs (a pool NIC's
//!                    IPAddressClaim, bound before the clone)
//!   vmsnapshot/      mod.rs (finalizer, owner, reconcile), step.rs (pure), driver.rs,
//!                    retention.rs (pure: which VMSnapshots a VM's retention drops)
//! vsphere/           the vSphere boundary: no Kubernetes type in it
//!   mod.rs           the traits (VSphere, Session, Machines), plain data, one Error
//!   snapshots.rs     the Snapshots trait and its plain data
//!   mock.rs          a scripted backend (tests and the `testing` feature only)
//!   vcenter/         the real backend: mod.rs (a session per Provider), inventory.rs,
//!                    machines.rs, placement.rs (resource pool, folder, datastore cluster,
//!                    standalone host), snapshots.rs, facts.rs (vim25 -> facts, SDK errors), watch.rs,
//!                    library.rs (content library items found and deployed, the REST side),
//!                    linked.rs (a template's linked-clone snapshot: converted and back, crash-safe)
//! check/             `banlieue check`: mod.rs, apply.rs, schema.rs (the CRDs' OpenAPI checks),
//!                    snapshots.rs (`--apply` on VMSnapshots, retention included)
//! api/               the CRDs, one file per kind (provider.rs, vmclass.rs, vmimage.rs,
//!                    virtualmachine.rs, vspheremachine.rs, vmsnapshot.rs, ippool.rs; ipaddress.rs:
//!                    Cluster API's IPAddressClaim and IPAddress), validate.rs (rules beyond
//!                    the schema), reasons.rs (every condition reason and what it means)
//! conditions.rs      conditions with a stable lastTransitionTime
//! caches.rs          waiting for watch caches
//! ipam.rs            the built-in IP pool's addresses and allocation (pure)
//! health.rs          /healthz, /readyz, /metrics
//! crdgen.rs          `banlieue crdgen`
//! bootstrap/         `banlieue bootstrap operator`: mod.rs (the operator-managed install,
//!                    server-side applied or printed), workload.rs (a Provider's own
//!                    provider workload, made by `controller --provider-workloads`)
//! fixtures.rs        (tests only) mocked API server, scenarios, object builders
//! ```
//!
//! The reconcile logic is pure where it can be (`plan`, `schedule`, `build`,
//! `readiness`, `step`) and reaches vCenter only through [`vsphere::VSphere`],
//! so the same code runs in a cluster, in tests and in `check`.

pub mod api;
pub mod bootstrap;
pub mod caches;
pub mod check;
pub mod cli;
pub mod conditions;
pub mod controllers;
pub mod crdgen;
#[cfg(test)]
mod fixtures;
pub mod health;
pub mod ipam;
pub mod leadership;
pub mod roles;
pub mod telemetry;
pub mod vsphere;

use api::NamespacedReference;

/// Errors of the operator's roles, one variant per stage that can fail;
/// [`label`](Error::label) names each for metrics and logs.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A Kubernetes API call.
    #[error("Kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    /// vCenter: connecting, reading the inventory, changing a VM.
    #[error(transparent)]
    VSphere(#[from] vsphere::Error),
    /// Reading or writing a file.
    #[error("{0}: {1}")]
    Io(String, #[source] std::io::Error),
    /// Rendering or parsing YAML.
    #[error("YAML: {0}")]
    Yaml(String),
    /// The Provider a VSphereMachine names is not (yet) in the caches.
    #[error("Provider {0} not found")]
    ProviderNotFound(NamespacedReference),
    /// The Provider cannot be connected to as it stands (its Secret missing
    /// or invalid, a bad CA bundle, an invalid spec): a condition reason and why.
    #[error("{reason}: {message}")]
    ProviderUnusable {
        reason: &'static str,
        message: String,
    },
    /// A cloud-config Secret is missing, or its data cannot be used.
    #[error("{0}")]
    CloudConfig(String),
    /// Writing a status failed: nothing is done that the status does not record.
    #[error("writing the status: {0}")]
    StatusWrite(String),
    /// A driver hook stopped the reconcile at a checkpoint (a crash, in tests).
    #[error("stopped: {0}")]
    Stopped(String),
    /// Deleting, and the VM is not confirmed gone: the finalizer stays.
    #[error("the VM is not confirmed gone yet: {0}")]
    NotGone(String),
    /// Adding or removing the finalizer.
    #[error("finalizer: {0}")]
    Finalizer(String),
    /// Deleting a VMSnapshot, and its vCenter snapshot is not confirmed gone: the finalizer stays.
    #[error("the snapshot is not confirmed gone yet: {0}")]
    SnapshotNotGone(String),
}

impl Error {
    /// A stable name of the failure for metrics and logs (vCenter errors by
    /// their kind: `vsphere_connect`, `vsphere_operation`...).
    pub fn label(&self) -> &'static str {
        match self {
            Error::Kube(_) => "kube",
            Error::VSphere(e) => e.kind.label(),
            Error::Io(..) => "io",
            Error::Yaml(_) => "yaml",
            Error::ProviderNotFound(_) => "provider_not_found",
            Error::ProviderUnusable { .. } => "provider_unusable",
            Error::CloudConfig(_) => "cloud_config",
            Error::StatusWrite(_) => "status_write",
            Error::Stopped(_) => "stopped",
            Error::NotGone(_) => "vm_not_gone",
            Error::Finalizer(_) => "finalizer",
            Error::SnapshotNotGone(_) => "snapshot_not_gone",
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
