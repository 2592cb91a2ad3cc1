//! The vSphere boundary. The controller and provider roles reach vCenter only
//! through [`VSphere`] and [`Session`], so the same reconcile code runs against
//! the real client (`vsphere-client`), a scripted mock in tests, and `check`.
//!
//! Contract for implementations:
//! - `connect` is called on every Provider reconcile. It returns the Provider's
//!   live session, logging in only when there is none yet or when the
//!   connection parameters changed (rotated credentials or CA): one session per
//!   Provider, never a login per reconcile.
//! - Errors carry a [`ErrorKind`] the roles map onto condition reasons, and a
//!   message that names the cause (TLS, login, fault) and never a secret.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::future::Future;

use crate::api::NamespacedReference;

/// A password or other secret: never printed, not even by `Debug`.
#[derive(Clone, PartialEq, Eq)]
pub struct SecretString(String);

impl SecretString {
    pub fn new(value: impl Into<String>) -> Self {
        SecretString(value.into())
    }
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for SecretString {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

/// How to verify vCenter's certificate.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Tls {
    /// The system roots.
    SystemRoots,
    /// A private CA (PEM, one or more certificates).
    CaBundle(String),
    /// No verification (`insecureSkipTLSVerify`).
    Insecure,
}

/// Everything needed to open a session for one Provider.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConnectParams {
    pub provider: NamespacedReference,
    /// The SDK URL, e.g. `https://vcenter.example.com/sdk`.
    pub endpoint: String,
    pub username: String,
    pub password: SecretString,
    pub tls: Tls,
}

/// What a vCenter holds that failure domains are made of: datacenters, their
/// clusters with the datastores mounted on each, and their portgroups.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Inventory {
    pub datacenters: Vec<Datacenter>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Datacenter {
    pub name: String,
    pub clusters: Vec<Cluster>,
    /// Names of the standard and distributed portgroups of the datacenter.
    pub portgroups: Vec<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Cluster {
    pub name: String,
    /// Names of the datastores mounted on (every host of) the cluster.
    pub datastores: Vec<String>,
}

/// A template found in one datacenter.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FoundTemplate {
    /// Managed object reference value (`vm-42`).
    pub mo_ref: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    /// TLS, network or login failure.
    Connect,
    /// Logged in, but walking the inventory failed.
    Inventory,
    /// A lookup (templates, VMs) failed.
    Lookup,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error {
    pub kind: ErrorKind,
    pub message: String,
}

impl Error {
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Error {
            kind,
            message: message.into(),
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Error {}

/// Opens (or reuses) the session of a Provider.
pub trait VSphere: Send + Sync + 'static {
    type Session: Session;

    fn connect(
        &self,
        params: &ConnectParams,
    ) -> impl Future<Output = Result<Self::Session, Error>> + Send;

    /// The instance UUIDs of VMs that changed (from the Providers' update
    /// streams), when the implementation watches them.
    fn machine_changes(&self) -> Option<tokio::sync::broadcast::Receiver<String>> {
        None
    }

    /// Ends the sessions of Providers not in `keep` (deleted ones; all of
    /// them when `keep` is empty, as the role stops).
    fn retain_sessions(
        &self,
        keep: &BTreeSet<NamespacedReference>,
    ) -> impl Future<Output = ()> + Send {
        let _ = keep;
        async {}
    }
}

/// A logged-in vCenter session. Cheap to clone.
pub trait Session: Clone + Send + Sync + 'static {
    /// Datacenters, clusters, mounted datastores and portgroups, in as few
    /// round trips as the PropertyCollector allows.
    fn inventory(&self) -> impl Future<Output = Result<Inventory, Error>> + Send;

    /// For each datacenter in `datacenters`, the template named `name` there
    /// (a template, not a plain VM), or `None` when it has none.
    fn find_template(
        &self,
        name: &str,
        datacenters: &[String],
    ) -> impl Future<Output = Result<BTreeMap<String, Option<FoundTemplate>>, Error>> + Send;
}

/// A scripted vCenter for tests: a fixed inventory, templates per datacenter,
/// and failures to inject.
pub mod mock {
    use std::collections::BTreeMap;
    use std::sync::{Arc, Mutex};

    use super::*;

    #[derive(Clone, Debug, Default)]
    pub struct Script {
        pub inventory: Inventory,
        /// (template name, datacenter) -> managed object reference.
        pub templates: BTreeMap<(String, String), String>,
        /// The password `connect` accepts; `None` accepts any.
        pub password: Option<String>,
        pub connect_error: Option<Error>,
        pub inventory_error: Option<Error>,
        pub lookup_error: Option<Error>,
        /// The VMs and tasks of the lifecycle (shared by every session).
        pub machines: crate::lifecycle::mock::MockMachines,
    }

    /// Scripted backend; the script can be changed between reconciles, and the
    /// parameters of every connect are recorded.
    #[derive(Clone, Debug, Default)]
    pub struct MockVSphere {
        script: Arc<Mutex<Script>>,
        connects: Arc<Mutex<Vec<ConnectParams>>>,
    }

    impl MockVSphere {
        pub fn new(script: Script) -> Self {
            MockVSphere {
                script: Arc::new(Mutex::new(script)),
                ..Default::default()
            }
        }

        pub fn set_script(&self, script: Script) {
            if let Ok(mut s) = self.script.lock() {
                *s = script;
            }
        }

        /// The parameters of every `connect` so far.
        pub fn connects(&self) -> Vec<ConnectParams> {
            self.connects.lock().map(|c| c.clone()).unwrap_or_default()
        }

        fn script(&self) -> Script {
            self.script.lock().map(|s| s.clone()).unwrap_or_default()
        }
    }

    #[derive(Clone, Debug)]
    pub struct MockSession {
        script: Script,
    }

    impl VSphere for MockVSphere {
        type Session = MockSession;

        async fn connect(&self, params: &ConnectParams) -> Result<MockSession, Error> {
            if let Ok(mut c) = self.connects.lock() {
                c.push(params.clone());
            }
            let script = self.script();
            if let Some(e) = script.connect_error.clone() {
                return Err(e);
            }
            if let Some(expected) = &script.password {
                if params.password.expose() != expected {
                    return Err(Error::new(
                        ErrorKind::Connect,
                        "login failed: incorrect user name or password",
                    ));
                }
            }
            Ok(MockSession { script })
        }
    }

    impl Session for MockSession {
        async fn inventory(&self) -> Result<Inventory, Error> {
            match &self.script.inventory_error {
                Some(e) => Err(e.clone()),
                None => Ok(self.script.inventory.clone()),
            }
        }

        async fn find_template(
            &self,
            name: &str,
            datacenters: &[String],
        ) -> Result<BTreeMap<String, Option<FoundTemplate>>, Error> {
            if let Some(e) = &self.script.lookup_error {
                return Err(e.clone());
            }
            Ok(datacenters
                .iter()
                .map(|dc| {
                    let found = self
                        .script
                        .templates
                        .get(&(name.to_string(), dc.clone()))
                        .map(|mo_ref| FoundTemplate {
                            mo_ref: mo_ref.clone(),
                        });
                    (dc.clone(), found)
                })
                .collect())
        }
    }

    use crate::lifecycle::backend::{
        CloneRequest, MachineError, Machines, ServerIdentity, Shape, TaskFacts, VmFacts,
    };
    use std::time::Duration;

    /// The lifecycle on the script's [`MockMachines`](crate::lifecycle::mock::MockMachines).
    impl Machines for MockSession {
        async fn find_vm(
            &self,
            instance_uuid: &str,
            fresh: bool,
        ) -> Result<Option<VmFacts>, MachineError> {
            self.script.machines.find_vm(instance_uuid, fresh).await
        }
        async fn vm(&self, mo_ref: &str, fresh: bool) -> Result<Option<VmFacts>, MachineError> {
            self.script.machines.vm(mo_ref, fresh).await
        }
        async fn task(&self, mo_ref: &str) -> Result<Option<TaskFacts>, MachineError> {
            self.script.machines.task(mo_ref).await
        }
        async fn wait_task(
            &self,
            mo_ref: &str,
            timeout: Duration,
            on_progress: impl FnMut(&TaskFacts) + Send,
        ) -> Result<TaskFacts, MachineError> {
            self.script
                .machines
                .wait_task(mo_ref, timeout, on_progress)
                .await
        }
        async fn start_clone(&self, request: &CloneRequest) -> Result<String, MachineError> {
            self.script.machines.start_clone(request).await
        }
        async fn start_reconfigure(&self, vm: &str, shape: &Shape) -> Result<String, MachineError> {
            self.script.machines.start_reconfigure(vm, shape).await
        }
        async fn start_power_on(&self, vm: &str) -> Result<String, MachineError> {
            self.script.machines.start_power_on(vm).await
        }
        async fn power_off(
            &self,
            vm: &str,
            graceful: Option<Duration>,
        ) -> Result<(), MachineError> {
            self.script.machines.power_off(vm, graceful).await
        }
        async fn start_destroy(&self, vm: &str) -> Result<String, MachineError> {
            self.script.machines.start_destroy(vm).await
        }
        fn server(&self) -> ServerIdentity {
            self.script.machines.server()
        }
    }
}
