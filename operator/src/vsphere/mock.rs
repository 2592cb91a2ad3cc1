//! A scripted vCenter for tests (compiled only under `cfg(test)` or the
//! `testing` feature, so it never ships in the binary):
//!
//! - [`MockVSphere`] and its [`Script`]: a fixed inventory, templates per
//!   datacenter, failures to inject, the parameters of every connect;
//! - [`MockMachines`]: VMs by instance UUID, tasks that stay running until
//!   waited for (so a "clone in flight" exists), faults injected per
//!   operation, and counters to assert "exactly one clone"; each VM's
//!   snapshots, with vCenter's one-task-at-a-time rule for them.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::{
    CloneRequest, ConnectParams, DiskChanges, Error, ErrorKind, FoundTemplate, ImageTarget,
    Inventory, LibraryItemFacts, LibraryItemLookup, Located, Machines, Placement, PlacementMissing,
    PlacementTarget, Resize, ServerIdentity, Session, Shape, SnapshotFacts, SnapshotRequest,
    Snapshots, TaskFacts, TaskState, VSphere, VmFacts,
};

#[derive(Debug)]
enum Pending {
    Clone(Box<CloneRequest>),
    Reconfigure(String, Shape),
    Resize(String, Resize),
    Disks(String, DiskChanges),
    PowerOn(String),
    Destroy(String),
    CreateSnapshot(String, SnapshotRequest),
    RevertSnapshot(String),
    RemoveSnapshot(String),
}

#[derive(Debug, Default)]
struct State {
    vms: BTreeMap<String, VmFacts>,
    tasks: HashMap<String, (TaskFacts, Option<Pending>)>,
    next_id: u32,
    faults: HashMap<&'static str, Error>,
    calls: BTreeMap<&'static str, u32>,
    /// Clones keep the template's 1 CPU / 32 MiB, like the simulator.
    clone_ignores_shape: bool,
    /// Waits that time out (the task 30% further each time) before tasks finish.
    slow_waits: u32,
    /// Answers `find_vm(_, false)` with a VM it has like an update stream
    /// would (counted as `cached_find`), and asks "vCenter" (`find`) otherwise.
    stream_cache: bool,
    /// Every clone request accepted, in order.
    clone_requests: Vec<CloneRequest>,
    /// Each VM's snapshots (by VM reference), oldest first.
    snapshots: BTreeMap<String, Vec<SnapshotFacts>>,
    /// Every resize request accepted, in order.
    resize_requests: Vec<Resize>,
}

/// The mock (cheap to clone; clones share the state).
#[derive(Clone, Debug, Default)]
pub struct MockMachines {
    state: Arc<Mutex<State>>,
}

impl MockMachines {
    pub fn new() -> Self {
        Self::default()
    }

    fn with<T>(&self, f: impl FnOnce(&mut State) -> T) -> T {
        let mut state = self
            .state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        f(&mut state)
    }

    /// Makes the next call of `operation` (`clone`, `destroy`, `powerOff`,
    /// `find`...) fail with `error` (once).
    pub fn fail_next(&self, operation: &'static str, error: Error) {
        self.with(|s| s.faults.insert(operation, error));
    }

    /// The next `n` waits time out with the task still running.
    pub fn slow_waits(&self, n: u32) {
        self.with(|s| s.slow_waits = n);
    }

    pub fn clone_ignores_shape(&self, ignore: bool) {
        self.with(|s| s.clone_ignores_shape = ignore);
    }

    /// Behave like a session with a live update stream (see `Machines::cached`).
    pub fn stream_cache(&self, on: bool) {
        self.with(|s| s.stream_cache = on);
    }

    /// Every VM, by reference.
    pub fn vms(&self) -> Vec<VmFacts> {
        self.with(|s| s.vms.values().cloned().collect())
    }

    /// The clone requests accepted, in order.
    pub fn clone_requests(&self) -> Vec<CloneRequest> {
        self.with(|s| s.clone_requests.clone())
    }

    /// The resize requests accepted, in order.
    pub fn resize_requests(&self) -> Vec<Resize> {
        self.with(|s| s.resize_requests.clone())
    }

    /// Whether a task is still running (not carried out yet).
    pub fn running(&self, task: &str) -> bool {
        self.with(|s| s.tasks.get(task).is_some_and(|(_, p)| p.is_some()))
    }

    /// Enables CPU and memory hot add on a VM (a template that had it).
    pub fn set_hot_add(&self, vm: &str, cpu: bool, memory: bool) {
        self.with(|s| {
            if let Some(v) = s.vms.get_mut(vm) {
                v.cpu_hot_add = cpu;
                v.memory_hot_add = memory;
            }
        });
    }

    /// Calls made, per operation.
    pub fn calls(&self, operation: &str) -> u32 {
        self.with(|s| s.calls.get(operation).copied().unwrap_or(0))
    }

    /// The guest reports an address.
    pub fn set_ip(&self, vm: &str, ip: &str) {
        self.with(|s| {
            if let Some(v) = s.vms.get_mut(vm) {
                v.ip_addresses = vec![ip.to_string()];
            }
        });
    }

    /// Someone powered the VM off (or on) behind our back.
    pub fn set_power(&self, vm: &str, power: &str) {
        self.with(|s| {
            if let Some(v) = s.vms.get_mut(vm) {
                v.power_state = power.to_string();
            }
        });
    }

    fn enter(&self, operation: &'static str) -> Result<(), Error> {
        self.with(|s| {
            *s.calls.entry(operation).or_default() += 1;
            match s.faults.remove(operation) {
                Some(e) => Err(e),
                None => Ok(()),
            }
        })
    }

    fn start(&self, pending: Pending) -> String {
        self.with(|s| {
            s.next_id += 1;
            let id = format!("task-{}", s.next_id);
            let facts = TaskFacts {
                mo_ref: id.clone(),
                state: TaskState::Running,
                progress: Some(0),
                error: None,
                result: None,
            };
            s.tasks.insert(id.clone(), (facts, Some(pending)));
            id
        })
    }

    /// Carries out every running task, oldest first (vCenter working on
    /// requests whose sender is gone).
    pub fn finish_all(&self) {
        let mut running: Vec<(u32, String)> = self.with(|s| {
            s.tasks
                .iter()
                .filter(|(_, (_, pending))| pending.is_some())
                .map(|(id, _)| {
                    (
                        id.trim_start_matches("task-").parse().unwrap_or(0),
                        id.clone(),
                    )
                })
                .collect()
        });
        running.sort();
        for (_, task) in running {
            self.finish(&task);
        }
    }

    /// Carries out a running task (what vCenter does in the background).
    pub fn finish(&self, task: &str) {
        self.with(|s| {
            let Some((facts, pending)) = s.tasks.get_mut(task) else {
                return;
            };
            let Some(pending) = pending.take() else {
                return;
            };
            let reverting = matches!(pending, Pending::RevertSnapshot(_));
            facts.state = TaskState::Success;
            facts.progress = Some(100);
            match pending {
                Pending::Clone(request) => {
                    if s.vms.values().any(|v| v.name == request.name) {
                        facts.state = TaskState::Error;
                        facts.error = Some(Error::fault(
                            "DuplicateName",
                            format!("{} exists", request.name),
                        ));
                        return;
                    }
                    s.next_id += 1;
                    let mo_ref = format!("vm-{}", s.next_id);
                    // The template's one disk (grown) and the added ones.
                    let disks = std::iter::once(request.shape.root_disk_gib.unwrap_or(1))
                        .chain(request.shape.extra_disks.iter().map(|d| d.size_gib))
                        .enumerate()
                        .map(|(i, gib)| (2000 + i as i32, gib as i64 * 1024 * 1024))
                        .collect();
                    let shape = if s.clone_ignores_shape {
                        Shape {
                            cpus: 1,
                            memory_mib: 32,
                            ..Default::default()
                        }
                    } else {
                        request.shape.clone()
                    };
                    s.vms.insert(
                        mo_ref.clone(),
                        VmFacts {
                            mo_ref: mo_ref.clone(),
                            name: request.name,
                            instance_uuid: request.instance_uuid,
                            power_state: "poweredOff".into(),
                            ip_addresses: vec![],
                            host: "esx-01.test".into(),
                            disks,
                            ..Default::default()
                        }
                        .reshaped(&shape),
                    );
                    facts.result = Some(mo_ref);
                }
                Pending::Reconfigure(vm, shape) => match s.vms.get_mut(&vm) {
                    Some(v) => *v = v.clone().reshaped(&shape),
                    None => not_found(facts, &vm),
                },
                // Applied only to the configuration it was decided on, as vCenter does.
                Pending::Resize(vm, resize) => match s.vms.get_mut(&vm) {
                    Some(v) if stale(resize.change_version.as_deref(), v) => concurrent(facts, &vm),
                    Some(v) => {
                        v.cpus = resize.cpus;
                        v.memory_mib = resize.memory_mib;
                        v.change_version = next_version(&v.change_version);
                    }
                    None => not_found(facts, &vm),
                },
                Pending::Disks(vm, changes) => match s.vms.get_mut(&vm) {
                    Some(v) if stale(changes.change_version.as_deref(), v) => {
                        concurrent(facts, &vm)
                    }
                    Some(v) => {
                        for (key, kib) in &changes.grow {
                            if let Some(d) = v.disks.iter_mut().find(|d| d.0 == *key) {
                                d.1 = d.1.max(*kib);
                            }
                        }
                        // New keys, as vCenter assigns them.
                        for d in &changes.add {
                            let key = v.disks.iter().map(|d| d.0).max().unwrap_or(2000) + 1;
                            v.disks.push((key, d.size_gib as i64 * 1024 * 1024));
                        }
                        v.change_version = next_version(&v.change_version);
                    }
                    None => not_found(facts, &vm),
                },
                Pending::PowerOn(vm) => match s.vms.get_mut(&vm) {
                    Some(v) => v.power_state = "poweredOn".into(),
                    None => not_found(facts, &vm),
                },
                Pending::Destroy(vm) => {
                    if s.vms.remove(&vm).is_none() {
                        not_found(facts, &vm);
                    }
                    s.snapshots.remove(&vm);
                }
                Pending::CreateSnapshot(vm, request) => {
                    if !s.vms.contains_key(&vm) {
                        return not_found(facts, &vm);
                    }
                    s.next_id += 1;
                    let mo_ref = format!("snapshot-{}", s.next_id);
                    let list = s.snapshots.entry(vm).or_default();
                    list.iter_mut().for_each(|x| x.current = false);
                    list.push(SnapshotFacts {
                        mo_ref: mo_ref.clone(),
                        name: request.name,
                        description: request.description,
                        created: mock_time(s.next_id),
                        size_bytes: Some(4096),
                        current: true,
                    });
                    facts.result = Some(mo_ref);
                }
                Pending::RevertSnapshot(snapshot) | Pending::RemoveSnapshot(snapshot) => {
                    let Some(list) = s
                        .snapshots
                        .values_mut()
                        .find(|l| l.iter().any(|x| x.mo_ref == snapshot))
                    else {
                        return not_found(facts, &snapshot);
                    };
                    if reverting {
                        list.iter_mut()
                            .for_each(|x| x.current = x.mo_ref == snapshot);
                    } else {
                        list.retain(|x| x.mo_ref != snapshot);
                    }
                }
            }
        })
    }

    /// A snapshot taken in vCenter by hand (not through the operator).
    pub fn add_snapshot(&self, vm: &str, name: &str, description: &str) -> String {
        self.with(|s| {
            s.next_id += 1;
            let mo_ref = format!("snapshot-{}", s.next_id);
            s.snapshots
                .entry(vm.to_string())
                .or_default()
                .push(SnapshotFacts {
                    mo_ref: mo_ref.clone(),
                    name: name.into(),
                    description: description.into(),
                    created: mock_time(s.next_id),
                    size_bytes: Some(4096),
                    current: false,
                });
            mo_ref
        })
    }

    /// The VM's snapshots, oldest first.
    pub fn snapshots_of(&self, vm: &str) -> Vec<SnapshotFacts> {
        self.with(|s| s.snapshots.get(vm).cloned().unwrap_or_default())
    }

    /// Whether a snapshot task of `vm` is running (vCenter runs one at a time per VM).
    fn snapshot_busy(&self, vm: &str) -> bool {
        self.with(|s| {
            s.tasks.values().any(|(_, pending)| match pending {
                Some(Pending::CreateSnapshot(v, _)) => v == vm,
                Some(Pending::RevertSnapshot(x) | Pending::RemoveSnapshot(x)) => s
                    .snapshots
                    .get(vm)
                    .is_some_and(|l| l.iter().any(|f| &f.mo_ref == x)),
                _ => false,
            })
        })
    }
}

/// A creation time that grows with the mock's ids (one second each).
fn mock_time(n: u32) -> String {
    format!(
        "2026-12-01T{:02}:{:02}:{:02}Z",
        (n / 3600) % 24,
        (n / 60) % 60,
        n % 60
    )
}

impl Snapshots for MockMachines {
    async fn snapshots(&self, vm: &str) -> Result<Option<Vec<SnapshotFacts>>, Error> {
        self.enter("snapshots")?;
        Ok(self.with(|s| {
            s.vms
                .contains_key(vm)
                .then(|| s.snapshots.get(vm).cloned().unwrap_or_default())
        }))
    }

    async fn start_create_snapshot(
        &self,
        vm: &str,
        request: &SnapshotRequest,
    ) -> Result<String, Error> {
        self.enter("createSnapshot")?;
        if self.snapshot_busy(vm) {
            return Err(Error::fault(
                "TaskInProgress",
                format!("{vm} has a task in progress"),
            ));
        }
        Ok(self.start(Pending::CreateSnapshot(vm.into(), request.clone())))
    }

    async fn start_revert_snapshot(&self, snapshot: &str) -> Result<String, Error> {
        self.enter("revertSnapshot")?;
        Ok(self.start(Pending::RevertSnapshot(snapshot.into())))
    }

    async fn start_remove_snapshot(&self, snapshot: &str) -> Result<String, Error> {
        self.enter("removeSnapshot")?;
        if !self.with(|s| s.snapshots.values().flatten().any(|x| x.mo_ref == snapshot)) {
            return Err(Error::fault(
                "ManagedObjectNotFound",
                format!("{snapshot} is gone"),
            ));
        }
        Ok(self.start(Pending::RemoveSnapshot(snapshot.into())))
    }
}

/// Was a change decided on a configuration the VM no longer has?
fn stale(decided: Option<&str>, vm: &VmFacts) -> bool {
    decided.is_some_and(|c| c != vm.change_version)
}

/// vCenter refuses a change decided on another configuration.
fn concurrent(facts: &mut TaskFacts, vm: &str) {
    facts.state = TaskState::Error;
    facts.error = Some(Error::fault(
        "ConcurrentAccess",
        format!("{vm}'s configuration changed since"),
    ));
}

/// The change version after one more change.
fn next_version(version: &str) -> String {
    (version.parse::<u64>().unwrap_or(0) + 1).to_string()
}

fn not_found(facts: &mut TaskFacts, vm: &str) {
    facts.state = TaskState::Error;
    facts.error = Some(Error::fault(
        "ManagedObjectNotFound",
        format!("{vm} is gone"),
    ));
}

impl Machines for MockMachines {
    async fn find_vm(&self, instance_uuid: &str, fresh: bool) -> Result<Option<VmFacts>, Error> {
        let lookup = |s: &mut State| {
            s.vms
                .values()
                .find(|v| v.instance_uuid == instance_uuid)
                .cloned()
        };
        if !fresh && self.with(|s| s.stream_cache) {
            if let Some(found) = self.with(lookup) {
                self.enter("cached_find")?;
                return Ok(Some(found));
            }
        }
        self.enter("find")?;
        Ok(self.with(lookup))
    }

    async fn vm(&self, mo_ref: &str, _fresh: bool) -> Result<Option<VmFacts>, Error> {
        self.enter("vm")?;
        Ok(self.with(|s| s.vms.get(mo_ref).cloned()))
    }

    fn cached(&self) -> bool {
        self.with(|s| s.stream_cache)
    }

    async fn task(&self, mo_ref: &str) -> Result<Option<TaskFacts>, Error> {
        self.enter("task")?;
        Ok(self.with(|s| s.tasks.get(mo_ref).map(|(f, _)| f.clone())))
    }

    async fn wait_task(
        &self,
        mo_ref: &str,
        _timeout: Duration,
        mut on_progress: impl FnMut(&TaskFacts) + Send,
    ) -> Result<TaskFacts, Error> {
        self.enter("wait")?;
        let still_running = self.with(|s| {
            if s.slow_waits == 0 {
                return None;
            }
            s.slow_waits -= 1;
            let (facts, _) = s.tasks.get_mut(mo_ref)?;
            facts.progress = Some(facts.progress.unwrap_or(0) + 30);
            Some(facts.clone())
        });
        if let Some(facts) = still_running {
            on_progress(&facts);
            return Err(Error::timeout(format!("task {mo_ref} still running")));
        }
        self.finish(mo_ref);
        let facts = self
            .with(|s| s.tasks.get(mo_ref).map(|(f, _)| f.clone()))
            .ok_or_else(|| {
                Error::fault("ManagedObjectNotFound", format!("task {mo_ref} is gone"))
            })?;
        on_progress(&facts);
        Ok(facts)
    }

    /// The scripted placement: the request's pool and folder as paths, its
    /// datastore, or the first datastore (`<cluster>-ds0`) of its datastore
    /// cluster as Storage DRS's recommendation.
    async fn place(&self, request: &CloneRequest) -> Result<Placement, Error> {
        self.enter("place")?;
        let located = |path: String, type_: &str| Located {
            mo_ref: format!("{type_}:{path}"),
            type_: type_.into(),
            path,
        };
        let dc = &request.datacenter;
        let pool = match &request.resource_pool {
            Some(p) => format!("/{dc}/host/{}/Resources/{p}", request.cluster),
            None => format!("/{dc}/host/{}/Resources", request.cluster),
        };
        let (datastore, note) = match (&request.datastore_cluster, &request.datastore) {
            (Some(pod), _) => (
                Some(located(
                    format!("/{dc}/datastore/{pod}/{pod}-ds0"),
                    "Datastore",
                )),
                Some("recommended by Storage DRS".to_string()),
            ),
            (None, Some(ds)) => (
                Some(located(format!("/{dc}/datastore/{ds}"), "Datastore")),
                None,
            ),
            (None, None) => (None, None),
        };
        Ok(Placement {
            resource_pool: located(pool, "ResourcePool"),
            folder: located(format!("/{dc}/vm/{}", request.folder), "Folder"),
            datastore,
            datastore_cluster: request.datastore_cluster.clone(),
            host: None,
            note,
            linked_clone_base: request
                .linked
                .then(|| format!("{}@snapshot-1", request.template_name)),
        })
    }

    async fn start_clone(&self, request: &CloneRequest) -> Result<String, Error> {
        self.enter("clone")?;
        let taken = |s: &State| {
            s.vms.values().any(|v| v.name == request.name)
                || s.tasks
                    .values()
                    .any(|(_, p)| matches!(p, Some(Pending::Clone(r)) if r.name == request.name))
        };
        if self.with(|s| taken(s)) {
            return Err(Error::fault(
                "DuplicateName",
                format!("{} exists", request.name),
            ));
        }
        self.with(|s| s.clone_requests.push(request.clone()));
        Ok(self.start(Pending::Clone(Box::new(request.clone()))))
    }

    async fn start_reconfigure(&self, vm: &str, shape: &Shape) -> Result<String, Error> {
        self.enter("reconfigure")?;
        Ok(self.start(Pending::Reconfigure(vm.into(), shape.clone())))
    }

    async fn start_resize(&self, vm: &str, resize: &Resize) -> Result<String, Error> {
        self.enter("resize")?;
        self.with(|s| s.resize_requests.push(resize.clone()));
        Ok(self.start(Pending::Resize(vm.into(), resize.clone())))
    }

    async fn start_disks(&self, vm: &str, changes: &DiskChanges) -> Result<String, Error> {
        self.enter("disks")?;
        Ok(self.start(Pending::Disks(vm.into(), changes.clone())))
    }

    async fn start_power_on(&self, vm: &str) -> Result<String, Error> {
        self.enter("powerOn")?;
        Ok(self.start(Pending::PowerOn(vm.into())))
    }

    async fn power_off(&self, vm: &str, _graceful: Option<Duration>) -> Result<(), Error> {
        self.enter("powerOff")?;
        self.with(|s| match s.vms.get_mut(vm) {
            Some(v) => {
                v.power_state = "poweredOff".into();
                Ok(())
            }
            None => Err(Error::fault(
                "ManagedObjectNotFound",
                format!("{vm} is gone"),
            )),
        })
    }

    async fn start_destroy(&self, vm: &str) -> Result<String, Error> {
        self.enter("destroy")?;
        Ok(self.start(Pending::Destroy(vm.into())))
    }

    fn server(&self) -> ServerIdentity {
        ServerIdentity {
            host: "vcenter.test".into(),
            server_guid: "mock-guid".into(),
        }
    }
}

impl VmFacts {
    /// The VM with `shape`'s configuration, as vCenter would apply it.
    fn reshaped(mut self, shape: &Shape) -> VmFacts {
        use crate::api::Firmware;
        self.cpus = shape.cpus;
        self.memory_mib = shape.memory_mib;
        self.firmware = if shape.firmware == Firmware::Bios {
            "bios"
        } else {
            "efi"
        }
        .into();
        self.secure_boot = shape.firmware == Firmware::EfiSecure;
        self.cpu_hot_add = shape.hot_add_cpu;
        self.memory_hot_add = shape.hot_add_memory;
        self.change_version = next_version(&self.change_version);
        self
    }
}

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
    /// What `verify_placement` says is missing, by pool or folder value.
    pub missing_placement: Vec<(String, PlacementMissing)>,
    /// Content library items (their `library` and `name` are the lookup's).
    pub library_items: Vec<LibraryItemFacts>,
    /// The items deployed as templates: (template name, datacenter) ->
    /// managed object reference, shared by every session and found by
    /// `find_template` like `templates`.
    pub deployed: Arc<Mutex<BTreeMap<(String, String), String>>>,
    /// The VMs and tasks of the lifecycle (shared by every session).
    pub machines: MockMachines,
}

/// Scripted backend; the script can be changed between reconciles, and the
/// parameters of every connect are recorded.
#[derive(Clone, Debug, Default)]
pub struct MockVSphere {
    script: Arc<Mutex<Script>>,
    connects: Arc<Mutex<Vec<ConnectParams>>>,
    unresponsive_sessions: Arc<std::sync::atomic::AtomicUsize>,
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

    /// How many sessions were given back as unresponsive.
    pub fn unresponsive_sessions(&self) -> usize {
        self.unresponsive_sessions
            .load(std::sync::atomic::Ordering::Relaxed)
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

    fn session_unresponsive(&self, _session: &MockSession) {
        self.unresponsive_sessions
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
}

impl Session for MockSession {
    async fn inventory(&self) -> Result<Inventory, Error> {
        match &self.script.inventory_error {
            Some(e) => Err(e.clone()),
            None => Ok(self.script.inventory.clone()),
        }
    }

    async fn verify_placement(
        &self,
        target: &PlacementTarget,
    ) -> Result<Option<PlacementMissing>, Error> {
        let asked = [&target.resource_pool, &target.folder];
        Ok(self
            .script
            .missing_placement
            .iter()
            .find(|(value, _)| asked.iter().any(|a| a.as_deref() == Some(value.as_str())))
            .map(|(_, missing)| missing.clone()))
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
                let key = (name.to_string(), dc.clone());
                let deployed = self
                    .script
                    .deployed
                    .lock()
                    .ok()
                    .and_then(|d| d.get(&key).cloned());
                let found = self
                    .script
                    .templates
                    .get(&key)
                    .cloned()
                    .or(deployed)
                    .map(|mo_ref| FoundTemplate { mo_ref });
                (dc.clone(), found)
            })
            .collect())
    }

    async fn find_library_item(
        &self,
        library: &str,
        item: &str,
    ) -> Result<LibraryItemLookup, Error> {
        if let Some(e) = &self.script.lookup_error {
            return Err(e.clone());
        }
        let mut of_library = self
            .script
            .library_items
            .iter()
            .filter(|i| i.library == library)
            .peekable();
        if of_library.peek().is_none() {
            return Ok(LibraryItemLookup::NoLibrary);
        }
        Ok(of_library
            .find(|i| i.name == item)
            .cloned()
            .map_or(LibraryItemLookup::NoItem, LibraryItemLookup::Found))
    }

    async fn deploy_library_item(
        &self,
        item: &LibraryItemFacts,
        target: &ImageTarget,
    ) -> Result<FoundTemplate, Error> {
        let mut deployed = self
            .script
            .deployed
            .lock()
            .map_err(|_| Error::operation("poisoned"))?;
        let n = deployed.len() + 1;
        let mo_ref = deployed
            .entry((target.name.clone(), target.datacenter.clone()))
            .or_insert_with(|| format!("vm-{}-{n}", item.id))
            .clone();
        Ok(FoundTemplate { mo_ref })
    }
}

/// The lifecycle on the script's [`MockMachines`].
impl Machines for MockSession {
    async fn find_vm(&self, instance_uuid: &str, fresh: bool) -> Result<Option<VmFacts>, Error> {
        self.script.machines.find_vm(instance_uuid, fresh).await
    }
    async fn vm(&self, mo_ref: &str, fresh: bool) -> Result<Option<VmFacts>, Error> {
        self.script.machines.vm(mo_ref, fresh).await
    }
    async fn task(&self, mo_ref: &str) -> Result<Option<TaskFacts>, Error> {
        self.script.machines.task(mo_ref).await
    }
    async fn wait_task(
        &self,
        mo_ref: &str,
        timeout: Duration,
        on_progress: impl FnMut(&TaskFacts) + Send,
    ) -> Result<TaskFacts, Error> {
        self.script
            .machines
            .wait_task(mo_ref, timeout, on_progress)
            .await
    }
    async fn place(&self, request: &CloneRequest) -> Result<Placement, Error> {
        self.script.machines.place(request).await
    }
    async fn start_clone(&self, request: &CloneRequest) -> Result<String, Error> {
        self.script.machines.start_clone(request).await
    }
    async fn start_reconfigure(&self, vm: &str, shape: &Shape) -> Result<String, Error> {
        self.script.machines.start_reconfigure(vm, shape).await
    }
    async fn start_resize(&self, vm: &str, resize: &Resize) -> Result<String, Error> {
        self.script.machines.start_resize(vm, resize).await
    }
    async fn start_disks(&self, vm: &str, changes: &DiskChanges) -> Result<String, Error> {
        self.script.machines.start_disks(vm, changes).await
    }
    async fn start_power_on(&self, vm: &str) -> Result<String, Error> {
        self.script.machines.start_power_on(vm).await
    }
    async fn power_off(&self, vm: &str, graceful: Option<Duration>) -> Result<(), Error> {
        self.script.machines.power_off(vm, graceful).await
    }
    async fn start_destroy(&self, vm: &str) -> Result<String, Error> {
        self.script.machines.start_destroy(vm).await
    }
    fn server(&self) -> ServerIdentity {
        self.script.machines.server()
    }
}

/// The snapshots on the script's [`MockMachines`].
impl Snapshots for MockSession {
    async fn snapshots(&self, vm: &str) -> Result<Option<Vec<SnapshotFacts>>, Error> {
        self.script.machines.snapshots(vm).await
    }
    async fn start_create_snapshot(
        &self,
        vm: &str,
        request: &SnapshotRequest,
    ) -> Result<String, Error> {
        self.script
            .machines
            .start_create_snapshot(vm, request)
            .await
    }
    async fn start_revert_snapshot(&self, snapshot: &str) -> Result<String, Error> {
        self.script.machines.start_revert_snapshot(snapshot).await
    }
    async fn start_remove_snapshot(&self, snapshot: &str) -> Result<String, Error> {
        self.script.machines.start_remove_snapshot(snapshot).await
    }
}
