//! Shared support for the integration tests: the vCenter simulator launcher
//! ([`Simulator`]), the Kubernetes API emulator ([`KubeEmulator`]) and a
//! certificate authority made at test time ([`TestCa`]).
//!
//! ```no_run
//! use vsphere_tests::{Simulator, SimulatorOptions, TestCa};
//!
//! let ca = TestCa::new()?;
//! let sim = Simulator::start(SimulatorOptions { tls: ca.server_tls(), ..Default::default() })?;
//! println!("{} trusts {}", sim.sdk_url(), ca.ca_file().display());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

/// The repository README's code, compiled by `cargo test --doc`.
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
pub struct RootReadmeDoctests;

mod binaries;
mod ca;
mod kube_emulator;
mod logs;
mod simulator;

pub use binaries::{banlieue_binary, vsphere_cli_binary};
pub use ca::{thumbprint, ServerCertificate, TestCa};
pub use kube_emulator::{kube_emulator_script, KubeEmulator, KubeEmulatorError};
pub use logs::CapturedLogs;
pub use simulator::{
    launcher_binary, ServerTls, Simulator, SimulatorError, SimulatorOptions, Template, TINY_OVF,
};
