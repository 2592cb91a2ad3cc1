//! banlieue: a Kubernetes operator for `banlieue.io/v1alpha1` virtual machines on vSphere.
//!
//! One binary, roles by subcommand (see `main.rs`). The reconcile logic is pure where it
//! can be (`validate`, `schedule`, `machine`), and reaches vSphere only through
//! [`vsphere::VSphere`], so the same code runs in a cluster, in tests and in `check`.

pub mod api;
pub mod caches;
pub mod check;
pub mod conditions;
pub mod controller;
pub mod crdgen;
pub mod health;
pub mod lifecycle;
pub mod machine;
pub mod provider;
pub mod provider_role;
pub mod schedule;
pub mod schema;
#[cfg(test)]
mod testutil;
pub mod validate;
pub mod vsphere;

/// Errors of the operator's roles.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("Kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    #[error("{0}: {1}")]
    Io(String, #[source] std::io::Error),
    #[error("YAML: {0}")]
    Yaml(String),
    #[error("{0}")]
    Invalid(String),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
