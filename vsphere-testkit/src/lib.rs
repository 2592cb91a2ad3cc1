//! A scripted vCenter for contract tests of code that uses `vsphere-client`.
//!
//! [`MockVCenter`] is a [wiremock] server that already answers
//! what every program needs (service content, login, sessions, the task
//! watcher, the Automation API session), so a test scripts only the calls
//! its code makes, with the crate's own types:
//!
//! - matchers by operation (`vc.on::<CloneVMRequestType>()`), optionally
//!   with a predicate on the decoded request ([`On::when`]);
//! - answers from typed values: a response ([`On::returns`]), a typed
//!   fault ([`On::fails`]), an HTTP status, a delay ([`Reply`]), a task
//!   whose states the client's task watcher sees ([`On::returns_task`],
//!   [`TaskScript`]), a dropped connection ([`On::drops_connection`]);
//! - the requests received, decoded into their typed request structs
//!   ([`MockVCenter::received`]);
//! - each answer's time and status, and the requests in flight at once
//!   ([`MockVCenter::exchanges`], [`MockVCenter::max_in_flight`]);
//! - scenarios: sessions that expire mid-run
//!   ([`MockVCenter::expire_sessions`]), a 503 storm
//!   ([`MockVCenter::storm_503`]), a slow server
//!   ([`MockVCenter::set_latency`]), dropped connections
//!   ([`MockVCenter::drop_connections`]).
//!
//! A complete test of a function that clones a VM, resizes it and powers
//! it on is `tests/clone_resize_power_on.rs` in this crate; the guide is
//! `docs/testing-your-code.md` in the repository.
//!
//! ```
//! use vsphere_client::types::{CurrentTimeRequestType, ManagedObjectReference};
//! use vsphere_client::DateTime;
//! use vsphere_testkit::MockVCenter;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! let vc = MockVCenter::start().await;
//! vc.on::<CurrentTimeRequestType>()
//!     .returns(DateTime::new("2024-05-01T12:00:00Z"))
//!     .await;
//! let client = vc.client().await;
//! let si = ManagedObjectReference::new("ServiceInstance", "ServiceInstance");
//! let now = client.vim().current_time(&si).await.unwrap();
//! assert_eq!(now.as_str(), "2024-05-01T12:00:00Z");
//! assert_eq!(vc.count::<CurrentTimeRequestType>().await, 1);
//! # }
//! ```

#![warn(missing_debug_implementations)]

mod reply;
mod rest;
mod server;
mod tasks;

pub use reply::Reply;
pub use rest::SESSION_HEADER;
pub use server::{Exchange, MockVCenter, MockVCenterBuilder, On};
pub use tasks::{TaskResult, TaskScript};
/// The wiremock version the kit is built on, for raw mocks on
/// [`MockVCenter::server`].
pub use wiremock;
