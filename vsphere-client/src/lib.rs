//! An async, typed client for VMware vSphere: the whole vim25 SOAP API
//! (every operation, data object, fault and enumeration, generated from the
//! WSDL), a hand-written everyday API over it (inventory, properties, views,
//! tasks, the VM lifecycle), and the Automation REST API (tags, content
//! libraries). Runs on Tokio.
//!
//! # Quick start
//!
//! Connect, list VMs with a few properties, clone a template, power the clone
//! on, watch it change, and tell errors apart (`examples/quickstart.rs` is
//! this as a program; `make demo` runs it against a vCenter simulator):
//!
//! ```no_run
//! use vsphere_client::property::UpdateKind;
//! use vsphere_client::types::InvalidPowerState;
//! use vsphere_client::vm::{CloneSpec, ConfigSpec};
//! use vsphere_client::{mo, paths, Client};
//!
//! # async fn quickstart() -> Result<(), vsphere_client::Error> {
//! // Connect, verifying vCenter's certificate against its CA bundle
//! // (`.insecure(true)` instead accepts any certificate: a lab only).
//! let client = Client::builder("vcenter.example.com")
//!     .credentials("administrator@vsphere.local", "secret")
//!     .ca_bundle_file("/etc/ssl/vcenter-ca.pem")?
//!     .connect()
//!     .await?;
//!
//! // Every VM with a few properties: one round trip per page of objects.
//! // Typed paths (`paths`) are checked by the compiler; strings
//! // ("runtime.powerState") work too, checked before anything is sent.
//! let root = client.service_content().root_folder.clone();
//! let p = paths::VirtualMachine;
//! let vms = client
//!     .properties::<mo::VirtualMachine>(&[p.name(), p.runtime().power_state(), p.summary().config().num_cpu()])?
//!     .in_container(&root)
//!     .collect_all()
//!     .await?;
//! for vm in &vms {
//!     let power = vm.runtime.as_ref().map(|r| r.power_state.as_str());
//!     println!("{:?} {power:?}", vm.name);
//! }
//!
//! // Clone a template with its own shape, wait for the task, power on.
//! let finder = client.finder().in_datacenter("DC0");
//! let template = client.vm(finder.virtual_machine("golden").await?.reference);
//! let folder = finder.default_folder().await?; // /DC0/vm
//! let pool = finder.resource_pool("DC0_C0/Resources").await?;
//! let spec = CloneSpec::new(&folder)
//!     .pool(&pool)
//!     .config(ConfigSpec::new().cpus(2).memory_mb(2048));
//! let vm = template.clone_vm("web-1", &spec).await?;
//! vm.power_on().await?;
//!
//! // Watch: the VM as it is (Enter), then each change as it happens.
//! let mut changes = client
//!     .properties::<mo::VirtualMachine>(&["name", "runtime.powerState"])?
//!     .watch(std::slice::from_ref(vm.reference()))
//!     .await?;
//! let change = changes.next().await?;
//! assert_eq!(change.kind, UpdateKind::Enter);
//!
//! // Errors: typed faults (subtypes included), a stable kind, the whole chain.
//! vm.power_off().await?;
//! match vm.power_off().await {
//!     Err(err) if err.is_fault::<InvalidPowerState>() => println!("web-1 is off already"),
//!     Err(err) => eprintln!("{} ({:?})", err.report(), err.kind()),
//!     Ok(()) => {}
//! }
//! # Ok(()) }
//! ```
//!
//! # Where to start
//!
//! | to | start at |
//! |---|---|
//! | connect: URL, credentials, timeouts, proxy | [`Client::builder`], [`ClientBuilder`] |
//! | trust vCenter's certificate: CA bundle, thumbprint, insecure | [`ClientBuilder::ca_bundle_file`], [`ClientBuilder::thumbprint`], [`tls`] |
//! | find objects by inventory path, name or UUID | [`Client::finder`], [`inventory`] |
//! | read properties of many objects, page by page | [`Client::properties`], [`property`]; typed paths: [`paths`] |
//! | watch objects change (`WaitForUpdatesEx`) | [`property::PropertyQuery::watch`], [`property::UpdateStream`] |
//! | server-side lists of objects | [`view`] |
//! | wait for a task, with progress | [`Client::task`], [`task`] |
//! | clone, reconfigure, power, destroy a VM | [`Client::vm`], [`vm`] |
//! | snapshots | [`vm::snapshot`] |
//! | tags and content libraries (REST) | [`Client::rest`], [`rest`] |
//! | any vim25 operation, typed | [`Client::vim`] ([`Vim`]), the types in [`types`], managed objects in [`mo`] |
//! | sessions: keepalive, re-login, logout | [`ClientBuilder::keepalive`], [`Client::check_session`], [`Client::close`] |
//! | retries, deadlines and timeouts, concurrency | [`ClientBuilder::retry`] ([`RetryConfig`]), [`ClientBuilder::call_deadline`], [`Client::with_call_deadline`], [`ClientBuilder::call_timeout`], [`Client::with_call_timeout`], [`Error::timeout_cause`], [`ClientBuilder::concurrency_limit`] |
//! | tracing: calls as spans, the wire log | [`WIRE_LOG_TARGET`], [`Client::call_stats`] |
//! | errors: kinds, typed faults, the chain | [`Error`], [`ErrorKind`], [`Error::is_fault`], [`report`] |
//! | encode a request or decode a captured response, no server | [`codec`] |
//!
//! Every call is a span (`soap_call`, with the method and the object it is
//! called on) on the [`tracing`](https://docs.rs/tracing) crate; request and
//! response bodies go to [`WIRE_LOG_TARGET`] at trace level, with passwords
//! and the session cookie redacted. Nothing this crate logs or puts in an
//! error or `Debug` output holds a password or a session cookie.

#![warn(missing_debug_implementations)]
// docs.rs (a nightly rustdoc, `--cfg docsrs`) marks what a feature compiles in.
#![cfg_attr(docsrs, feature(doc_cfg))]

/// The README's code, compiled by `cargo test --doc`.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;

// The generated bindings and their XML runtime: the vsphere-vim25 crate.
pub use vsphere_vim25::{mo, paths, types};
pub use vsphere_vim25::{
    DataObject, DateTime, FromValue, ObjectType, Request, SchemaType, Value, ValueTypeError,
};
// The XML runtime of the generated bindings (its module docs say what of it is API).
#[doc(hidden)]
pub use vsphere_vim25::xml;

/// The generated `xsi:type` registry, for the fuzz targets in `fuzz/` only.
#[cfg(fuzzing)]
#[doc(hidden)]
pub use vsphere_vim25::fuzzing_registry;
// A typed method on `Vim` for every operation (generated with the bindings).
#[rustfmt::skip]
mod methods;

pub mod codec;

// Hand-written runtime: transport, TLS, sessions, errors.
mod client;
mod error;
mod http_client;
mod redact;
pub mod rest;
mod session;
mod stats;
pub mod tls;
mod transport;
mod version;

pub use client::{
    Client, ClientBuilder, Vim, DEFAULT_BODY_IDLE_TIMEOUT, DEFAULT_CALL_DEADLINE,
    DEFAULT_CALL_TIMEOUT, DEFAULT_CONNECT_TIMEOUT, DEFAULT_KEEPALIVE, DEFAULT_MAX_RESPONSE_SIZE,
    DEFAULT_MIN_BODY_RATE, DEFAULT_MIN_BODY_RATE_WINDOW,
};
pub use error::{report, Error, ErrorKind, Fault, Report, TimeoutCause};

// The everyday API: typed property retrieval, views, tasks, inventory, VMs.
pub mod inventory;
pub mod property;
pub mod task;
pub mod view;
pub mod vm;
pub use stats::MethodStats;
pub use transport::{RetryConfig, MIN_ATTEMPT, WIRE_LOG_TARGET};
pub use version::GENERATED_API_VERSION;
