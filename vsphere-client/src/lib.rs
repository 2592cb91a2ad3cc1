//! Async, typed VMware vSphere client.

// Generated bindings (src/generated, by vsphere-codegen) and the XML runtime they use.
#[rustfmt::skip]
mod generated;
/// The XML runtime of the generated bindings: public for the generated code,
/// the test kit, benchmarks and fuzz targets, not API (it changes without
/// notice). What users need of it is re-exported at the crate root
/// ([`Request`], [`Value`], [`DataObject`], [`DateTime`], [`SchemaType`]) and
/// in [`codec`].
#[doc(hidden)]
pub mod xml;

/// The generated `xsi:type` registry, for the fuzz targets in `fuzz/` only.
#[cfg(fuzzing)]
#[doc(hidden)]
pub fn fuzzing_registry() -> &'static xml::Registry {
    &generated::REGISTRY
}
pub use generated::{mo, types};
pub use xml::{DataObject, DateTime, FromValue, Request, SchemaType, Value, ValueTypeError};

pub mod codec;

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
    Client, ClientBuilder, Vim, DEFAULT_CALL_TIMEOUT, DEFAULT_CONNECT_TIMEOUT, DEFAULT_KEEPALIVE,
    DEFAULT_MAX_RESPONSE_SIZE,
};
pub use error::{report, Error, ErrorKind, Fault, Report};

// The everyday API: typed property retrieval, views, tasks, inventory, VMs.
pub mod inventory;
pub mod property;
pub mod task;
pub mod view;
pub mod vm;
pub use stats::MethodStats;
pub use transport::{RetryConfig, WIRE_LOG_TARGET};
pub use version::GENERATED_API_VERSION;
