//! Waiting for tasks through the PropertyCollector, not by polling.
//!
//! Every [`Client`] has one task watcher: a dedicated PropertyCollector with
//! ONE filter over a `ListView` of the tasks being waited for, and one
//! background loop calling `WaitForUpdatesEx` while anyone waits. Waiting for
//! a task adds it to the view (one `ModifyListView`); the loop hands each
//! task's `info` to its waiters and takes finished tasks out of the view.
//! However many tasks are waited for at once, there is one filter and one
//! outstanding `WaitForUpdatesEx`.
//!
//! ```no_run
//! # async fn demo(client: vsphere_client::Client, vm: vsphere_client::types::ManagedObjectReference)
//! # -> Result<(), vsphere_client::Error> {
//! use std::time::Duration;
//! let task = client.task(client.vim().power_on_vm_task(&vm, None).await?);
//! let info = task
//!     .wait_with_progress(Some(Duration::from_secs(300)), |info| {
//!         println!("{:?} {}%", info.state, info.progress.unwrap_or(0));
//!     })
//!     .await?; // a failed task is an Err carrying the vSphere fault
//! # Ok(()) }
//! ```

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::watch;

use crate::error::{Error, ErrorKind, Fault};
use crate::mo;
use crate::property::updates::{UpdateKind, UpdateStreamOptions, Watch};
use crate::types::{
    ManagedObjectReference, ObjectSpec, PropertyFilterSpec, PropertySpec, TaskInfo, TaskInfoState,
};
use crate::xml::Value;
use crate::Client;

/// A vSphere task: wait for it, read it, cancel it.
#[derive(Clone)]
pub struct Task {
    client: Client,
    reference: ManagedObjectReference,
}

impl std::fmt::Debug for Task {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Task").field(&self.reference).finish()
    }
}

impl Client {
    /// The task `reference` (what a `*_Task` method returns).
    pub fn task(&self, reference: ManagedObjectReference) -> Task {
        Task {
            client: self.clone(),
            reference,
        }
    }
}

impl Task {
    /// The task's reference.
    pub fn reference(&self) -> &ManagedObjectReference {
        &self.reference
    }

    /// Waits until the task succeeds (its final `info`) or fails (an error
    /// of kind [`ErrorKind::Fault`] carrying the task's fault).
    pub async fn wait(&self) -> Result<TaskInfo, Error> {
        self.wait_with_progress(None, |_| {}).await
    }

    /// As [`wait`](Self::wait), giving up after `timeout` with an error of
    /// kind [`ErrorKind::Timeout`] (the task itself goes on; see
    /// [`cancel`](Self::cancel)).
    pub async fn wait_timeout(&self, timeout: Duration) -> Result<TaskInfo, Error> {
        self.wait_with_progress(Some(timeout), |_| {}).await
    }

    /// As [`wait`](Self::wait), calling `on_progress` with the task's info
    /// each time its state or progress changes, and giving up after
    /// `timeout` if one is given. Dropping the future stops waiting (the task
    /// goes on).
    pub async fn wait_with_progress(
        &self,
        timeout: Option<Duration>,
        mut on_progress: impl FnMut(&TaskInfo) + Send,
    ) -> Result<TaskInfo, Error> {
        let watcher = self.client.task_watcher();
        let mut registration = watcher.register(&self.client, &self.reference).await?;
        let mut last_seen: Option<(TaskInfoState, Option<i32>)> = None;
        let wait = async {
            loop {
                let update = registration.receiver.borrow_and_update().clone();
                match update {
                    TaskUpdate::Waiting => {}
                    TaskUpdate::Failed {
                        kind,
                        message,
                        fault,
                        method,
                    } => return Err(Error::new(kind, message).with_fault(fault, method)),
                    TaskUpdate::Info(info) => {
                        let seen = (info.state.clone(), info.progress);
                        if last_seen.as_ref() != Some(&seen) {
                            on_progress(&info);
                            last_seen = Some(seen);
                        }
                        match info.state {
                            TaskInfoState::Success => return Ok(*info),
                            TaskInfoState::Error => return Err(task_error(&info)),
                            _ => {}
                        }
                    }
                }
                if registration.receiver.changed().await.is_err() {
                    return Err(Error::new(
                        ErrorKind::Transport,
                        format!(
                            "stopped watching {} (the client is shutting down)",
                            self.reference
                        ),
                    ));
                }
            }
        };
        match timeout {
            None => wait.await,
            Some(limit) => match tokio::time::timeout(limit, wait).await {
                Ok(result) => result,
                Err(_) => Err(Error::new(
                    ErrorKind::Timeout,
                    match &last_seen {
                        Some((state, progress)) => format!(
                            "task {} did not finish within {limit:?} (last {}{})",
                            self.reference,
                            state.as_str(),
                            progress.map(|p| format!(", {p}%")).unwrap_or_default()
                        ),
                        None => format!("task {} did not finish within {limit:?}", self.reference),
                    },
                )),
            },
        }
    }

    /// The task's current info (one property read).
    pub async fn info(&self) -> Result<TaskInfo, Error> {
        let task = self
            .client
            .properties::<mo::Task>(&["info"])?
            .get(&self.reference)
            .await?;
        task.info.ok_or_else(|| {
            Error::new(
                ErrorKind::NotFound,
                format!("{} has no info", self.reference),
            )
        })
    }

    /// Asks the server to cancel the task (only cancelable tasks can be).
    pub async fn cancel(&self) -> Result<(), Error> {
        self.client.vim().cancel_task(&self.reference).await
    }
}

/// The error of a failed task: a [`ErrorKind::Fault`] with the task's fault
/// and message.
pub fn task_error(info: &TaskInfo) -> Error {
    let subject = info.name.as_deref().unwrap_or(info.description_id.as_str());
    match &info.error {
        Some(fault) => {
            let type_name = fault.fault.type_name();
            let message = fault.localized_message.clone().unwrap_or_default();
            Error::from_fault(Fault::new(
                "ServerFaultCode",
                if message.is_empty() {
                    format!("task {subject} failed")
                } else {
                    message
                },
                Some(type_name.to_string()),
                Some(fault.fault.clone()),
            ))
        }
        None => Error::new(
            ErrorKind::Fault,
            format!("task {subject} ({}) failed without saying why", info.task),
        ),
    }
}

/// The reference a task returned (`CloneVM_Task`'s new VM...), if its result
/// is one.
pub fn task_result_reference(info: &TaskInfo) -> Option<ManagedObjectReference> {
    match &info.result {
        Some(Value::ManagedObjectReference(r)) => Some(r.clone()),
        _ => None,
    }
}

/// What waiters of one task see.
#[derive(Debug, Clone)]
enum TaskUpdate {
    Waiting,
    Info(Box<TaskInfo>),
    /// Waiting failed; the fault and method of the failed call are kept, so
    /// the waiter's error answers `fault()` like the call's own would.
    Failed {
        kind: ErrorKind,
        message: String,
        fault: Option<Fault>,
        method: Option<&'static str>,
    },
}

/// The per-client task watcher (see the module documentation).
#[derive(Default)]
pub(crate) struct TaskWatcher {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for TaskWatcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TaskWatcher").finish_non_exhaustive()
    }
}

#[derive(Default)]
struct Shared {
    state: Mutex<State>,
    /// Serializes creating the collector, view and filter.
    setup_lock: tokio::sync::Mutex<()>,
}

#[derive(Default)]
struct State {
    tasks: HashMap<ManagedObjectReference, Entry>,
    /// The server side, kept between bursts of waits (no `Client` inside,
    /// so parking it does not keep the client alive).
    setup: Option<Setup>,
    loop_running: bool,
}

struct Entry {
    sender: watch::Sender<TaskUpdate>,
    waiters: usize,
}

struct Setup {
    list_view: ManagedObjectReference,
    watch: Watch<mo::Task>,
    /// Bumped each time the server side is made again (after a session loss).
    generation: u64,
}

/// One waiter's registration; unregisters on drop.
struct Registration {
    shared: Arc<Shared>,
    task: ManagedObjectReference,
    receiver: watch::Receiver<TaskUpdate>,
}

impl Drop for Registration {
    fn drop(&mut self) {
        if let Ok(mut state) = self.shared.state.lock() {
            if let Some(entry) = state.tasks.get_mut(&self.task) {
                entry.waiters = entry.waiters.saturating_sub(1);
                if entry.waiters == 0 {
                    state.tasks.remove(&self.task);
                }
            }
        }
    }
}

fn lock_poisoned() -> Error {
    Error::new(
        ErrorKind::Transport,
        "the task watcher's state is poisoned (a panic while waiting)",
    )
}

fn is_object_gone(err: &Error) -> bool {
    err.is_fault::<crate::types::ManagedObjectNotFound>()
}

impl TaskWatcher {
    /// Registers a waiter for `task`, makes sure the task is in the view and
    /// the loop runs.
    async fn register(
        &self,
        client: &Client,
        task: &ManagedObjectReference,
    ) -> Result<Registration, Error> {
        let shared = self.shared.clone();
        let (receiver, first) = {
            let mut state = shared.state.lock().map_err(|_| lock_poisoned())?;
            let entry = state.tasks.entry(task.clone()).or_insert_with(|| Entry {
                sender: watch::channel(TaskUpdate::Waiting).0,
                waiters: 0,
            });
            entry.waiters += 1;
            (entry.sender.subscribe(), entry.waiters == 1)
        };
        let registration = Registration {
            shared: shared.clone(),
            task: task.clone(),
            receiver,
        };
        if first {
            self.add_to_view(client, task).await?;
        }
        let start = {
            let mut state = shared.state.lock().map_err(|_| lock_poisoned())?;
            !std::mem::replace(&mut state.loop_running, true)
        };
        if start {
            tokio::spawn(watch_loop(client.clone(), shared));
        }
        Ok(registration)
    }

    /// Adds the task to the view, making the server side first if needed
    /// (and again if the session that held it is gone).
    async fn add_to_view(
        &self,
        client: &Client,
        task: &ManagedObjectReference,
    ) -> Result<(), Error> {
        for _ in 0..2 {
            let (view, generation) = ensure_setup(client, &self.shared).await?;
            match client
                .vim()
                .modify_list_view(&view, std::slice::from_ref(task), &[])
                .await
            {
                Ok(not_added) if not_added.contains(task) => {
                    return Err(Error::new(
                        ErrorKind::NotFound,
                        format!("task {task} does not exist (any more)"),
                    ))
                }
                Ok(_) => return Ok(()),
                Err(err) if is_object_gone(&err) => forget_setup(&self.shared, generation),
                Err(err) => return Err(err),
            }
        }
        Err(Error::new(
            ErrorKind::Transport,
            "the task watcher's view keeps disappearing",
        ))
    }
}

/// The view of the current setup, creating collector, view and filter when
/// there are none: the new view lists every task being waited for.
async fn ensure_setup(
    client: &Client,
    shared: &Arc<Shared>,
) -> Result<(ManagedObjectReference, u64), Error> {
    let _guard = shared.setup_lock.lock().await;
    let tasks: Vec<ManagedObjectReference> = {
        let state = shared.state.lock().map_err(|_| lock_poisoned())?;
        if let Some(setup) = &state.setup {
            return Ok((setup.list_view.clone(), setup.generation));
        }
        state.tasks.keys().cloned().collect()
    };
    let view = client.list_view_reference(&tasks).await?;
    let spec = PropertyFilterSpec {
        prop_set: vec![PropertySpec {
            type_: "Task".to_string(),
            all: None,
            path_set: vec!["info".to_string()],
        }],
        object_set: vec![ObjectSpec {
            obj: view.clone(),
            skip: Some(true),
            select_set: vec![crate::property::traversal_spec(
                "taskView",
                "ListView",
                "view",
                &[],
            )],
        }],
        report_missing_objects_in_results: None,
    };
    let watch = match Watch::<mo::Task>::create(client, &spec).await {
        Ok(watch) => watch,
        Err(err) => {
            let _ = client.vim().destroy_view(&view).await;
            return Err(err);
        }
    };
    let mut state = shared.state.lock().map_err(|_| lock_poisoned())?;
    let generation = GENERATION.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
    state.setup = Some(Setup {
        list_view: view.clone(),
        watch,
        generation,
    });
    Ok((view, generation))
}

static GENERATION: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Drops the setup of `generation` (its session is gone); the next use makes
/// a new one.
fn forget_setup(shared: &Shared, generation: u64) {
    if let Ok(mut state) = shared.state.lock() {
        if state
            .setup
            .as_ref()
            .is_some_and(|s| s.generation == generation)
        {
            state.setup = None;
        }
    }
}

impl Client {
    /// `CreateListView` on the view manager.
    async fn list_view_reference(
        &self,
        objects: &[ManagedObjectReference],
    ) -> Result<ManagedObjectReference, Error> {
        let manager = self.service_content().view_manager.clone().ok_or_else(|| {
            Error::new(ErrorKind::InvalidArgument, "the server has no ViewManager")
        })?;
        self.vim().create_list_view(&manager, objects).await
    }
}

/// Calls `WaitForUpdatesEx` while anyone waits; hands each task's info to
/// its waiters; takes finished tasks out of the view.
async fn watch_loop(client: Client, shared: Arc<Shared>) {
    let options = UpdateStreamOptions {
        max_wait: Some(
            crate::property::updates::default_max_wait(&client).min(Duration::from_secs(10)),
        ),
        max_object_updates: None,
    }
    .wait_options(&client);
    let mut failures = 0u32;
    loop {
        let next = {
            let Ok(mut state) = shared.state.lock() else {
                return;
            };
            if state.tasks.is_empty() {
                state.loop_running = false;
                return;
            }
            state.setup.as_ref().map(|s| {
                (
                    s.watch.request(options.clone()),
                    s.generation,
                    s.list_view.clone(),
                )
            })
        };
        let Some((request, generation, view)) = next else {
            // Lost (or never made): make it again with every waited-for task.
            if let Err(err) = ensure_setup(&client, &shared).await {
                fail_all(&shared, &err);
                return;
            }
            continue;
        };
        match client.invoke(&request).await {
            Ok(set) => {
                failures = 0;
                let finished = match deliver(&shared, generation, set) {
                    Ok(finished) => finished,
                    Err(err) => {
                        fail_all(&shared, &err);
                        return;
                    }
                };
                if !finished.is_empty() {
                    // Finished tasks change no more; a failure here only
                    // leaves them in the view.
                    if let Err(err) = client.vim().modify_list_view(&view, &[], &finished).await {
                        tracing::debug!(error = %err, "removing finished tasks from the watcher's view failed");
                    }
                }
            }
            Err(err) if is_object_gone(&err) => {
                // The session that held the collector is gone (re-login):
                // the next turn makes it again.
                tracing::debug!(error = %err, "task watcher: collector gone, making a new one");
                forget_setup(&shared, generation);
            }
            Err(err) => {
                failures += 1;
                if failures >= 3 {
                    fail_all(&shared, &err);
                    return;
                }
                tokio::time::sleep(Duration::from_millis(200 * u64::from(failures))).await;
            }
        }
    }
}

/// Applies an update set to the setup of `generation` and hands each task's
/// info to its waiters; returns the tasks that finished.
fn deliver(
    shared: &Shared,
    generation: u64,
    set: Option<crate::property::updates::RawUpdateSet>,
) -> Result<Vec<ManagedObjectReference>, Error> {
    let Some(set) = set else {
        return Ok(Vec::new());
    };
    let mut state = shared.state.lock().map_err(|_| lock_poisoned())?;
    let State { tasks, setup, .. } = &mut *state;
    let Some(setup) = setup.as_mut().filter(|s| s.generation == generation) else {
        // Made again meanwhile: these updates belong to the old collector.
        return Ok(Vec::new());
    };
    let mut finished = Vec::new();
    for change in setup.watch.apply(set)? {
        let task = &change.object.mo_ref;
        if change.kind == UpdateKind::Leave {
            if let Some(entry) = tasks.get(task) {
                entry.sender.send_replace(TaskUpdate::Failed {
                    kind: ErrorKind::NotFound,
                    message: format!("task {task} disappeared"),
                    fault: None,
                    method: None,
                });
            }
            continue;
        }
        let Some(info) = change.object.info else {
            continue;
        };
        if matches!(info.state, TaskInfoState::Success | TaskInfoState::Error) {
            finished.push(change.object.mo_ref.clone());
        }
        if let Some(entry) = tasks.get(&change.object.mo_ref) {
            entry.sender.send_replace(TaskUpdate::Info(Box::new(info)));
        }
    }
    Ok(finished)
}

/// Tells every waiter the watcher failed, and stops.
fn fail_all(shared: &Shared, err: &Error) {
    if let Ok(mut state) = shared.state.lock() {
        for (task, entry) in &state.tasks {
            entry.sender.send_replace(TaskUpdate::Failed {
                kind: err.kind(),
                message: format!("waiting for task {task} failed"),
                fault: err.fault().cloned(),
                method: err.method(),
            });
        }
        state.loop_running = false;
    }
}
