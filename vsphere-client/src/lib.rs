//! Async, typed VMware vSphere client.

// Generated bindings (src/generated, by vsphere-codegen) and the XML runtime they use.
#[rustfmt::skip]
mod generated;
pub mod xml;

/// The generated `xsi:type` registry, for the fuzz targets in `fuzz/` only.
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub fn fuzzing_registry() -> &'static xml::Registry {
    &generated::REGISTRY
}
pub use generated::{mo, types};

// Hand-written runtime: transport, TLS, sessions, errors.
mod client;
mod error;
mod redact;
/// The vSphere Automation (REST) API: sessions, tags, content libraries.
pub mod rest;
mod session;
mod stats;
pub mod tls;
mod transport;
mod version;

pub use client::{
    Client, ClientBuilder, DEFAULT_CALL_TIMEOUT, DEFAULT_CONNECT_TIMEOUT, DEFAULT_KEEPALIVE,
    DEFAULT_MAX_RESPONSE_SIZE,
};
pub use error::{Error, ErrorKind, Fault};

// The everyday API: typed property retrieval, views, tasks, inventory, VMs.
pub mod inventory;
pub mod property;
pub mod task;
pub mod view;
pub mod vm;
pub use stats::MethodStats;
pub use transport::{RetryConfig, WIRE_LOG_TARGET};
pub use version::GENERATED_API_VERSION;
