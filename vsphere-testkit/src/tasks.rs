//! Task scripts and the server side of the client's task watcher.
//!
//! The client waits for tasks through a PropertyCollector: it makes a
//! `ListView` of the tasks it waits for, a collector with one filter on
//! that view (`info` of each task), and calls `WaitForUpdatesEx` while
//! anyone waits, adding and removing tasks with `ModifyListView`. The mock
//! keeps those objects per session and answers each `WaitForUpdatesEx`
//! with the next state of every task in the collector's view whose time
//! has come, one state per task and answer, so a waiter sees every step.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use vsphere_client::types::{
    AnyMethodFault, AnyTaskReason, CancelTaskRequestType, CreateFilterRequestType,
    CreateListViewRequestType, CreatePropertyCollectorRequestType,
    DestroyPropertyCollectorRequestType, DestroyPropertyFilterRequestType, DestroyViewRequestType,
    DynamicProperty, LocalizedMethodFault, ManagedObjectNotFound, ManagedObjectReference,
    ModifyListViewRequestType, ObjectContent, ObjectUpdate, ObjectUpdateKind, PropertyChange,
    PropertyChangeOp, PropertyFilterUpdate, RequestCanceled, RetrievePropertiesExRequestType,
    RetrieveResult, TaskInfo, TaskInfoState, TaskReasonUser, UpdateSet,
    WaitForUpdatesExRequestType,
};
use vsphere_client::{DateTime, Value};

use crate::server::{built_in, fault_template, mount, Answer, MockVCenter, BUILT_IN};

/// How long an answer without news waits (vCenter waits up to the
/// client's `maxWaitSeconds`; the mock answers sooner so that tasks added
/// meanwhile are seen soon).
const POLL: Duration = Duration::from_millis(50);

/// The states a task goes through, as the client's task watcher sees them:
/// queued, running with progress, then success with a result or an error
/// with a typed fault. Each state is reported [`after`](Self::after) the
/// given time since the previous one was first reported (at once by
/// default; the first state, since the task was made), one state per
/// `WaitForUpdatesEx` answer, so however slow a test's client is to start
/// watching, it sees every state and the waits between them.
///
/// ```
/// use std::time::Duration;
/// use vsphere_client::types::{DuplicateName, ManagedObjectReference};
/// use vsphere_testkit::TaskScript;
///
/// let clone = TaskScript::new()
///     .queued()
///     .running(40)
///     .after(Duration::from_millis(200))
///     .succeeds_with(ManagedObjectReference::new("VirtualMachine", "vm-42"));
/// let refused = TaskScript::error(DuplicateName::default(), "The name 'web-1' already exists.");
/// ```
///
/// A script without a final state leaves the task running (its last
/// state) for good; one without any state leaves it queued.
#[derive(Debug, Clone, Default)]
pub struct TaskScript {
    steps: Vec<Step>,
    /// The wait before the next state added.
    pending_after: Duration,
}

#[derive(Debug, Clone)]
struct Step {
    /// Since the previous state was first reported (or the task was made).
    wait: Duration,
    state: TaskInfoState,
    progress: Option<i32>,
    result: Option<Value>,
    error: Option<LocalizedMethodFault>,
}

/// A task's result (`TaskInfo.result`): a reference (a clone's new VM) or
/// any [`Value`].
pub trait TaskResult {
    /// The result as the `anyType` value the server sends.
    fn into_value(self) -> Value;
}

impl TaskResult for Value {
    fn into_value(self) -> Value {
        self
    }
}

impl TaskResult for ManagedObjectReference {
    fn into_value(self) -> Value {
        Value::ManagedObjectReference(self)
    }
}

impl TaskScript {
    /// A script without states yet.
    pub fn new() -> Self {
        TaskScript::default()
    }

    /// A task that succeeds at once without a result.
    pub fn success() -> Self {
        TaskScript::new().succeeds()
    }

    /// A task that succeeds at once with `result`.
    pub fn success_with(result: impl TaskResult) -> Self {
        TaskScript::new().succeeds_with(result)
    }

    /// A task that fails at once with `fault` and `message`.
    pub fn error(fault: impl Into<AnyMethodFault>, message: &str) -> Self {
        TaskScript::new().fails(fault, message)
    }

    /// The next state comes `wait` after the previous one was first
    /// reported (or after the task was made).
    pub fn after(mut self, wait: Duration) -> Self {
        self.pending_after += wait;
        self
    }

    fn push(
        mut self,
        state: TaskInfoState,
        progress: Option<i32>,
        result: Option<Value>,
        error: Option<LocalizedMethodFault>,
    ) -> Self {
        self.steps.push(Step {
            wait: std::mem::take(&mut self.pending_after),
            state,
            progress,
            result,
            error,
        });
        self
    }

    /// Queued.
    pub fn queued(self) -> Self {
        self.push(TaskInfoState::Queued, None, None, None)
    }

    /// Running, `progress` percent done.
    pub fn running(self, progress: i32) -> Self {
        self.push(TaskInfoState::Running, Some(progress), None, None)
    }

    /// Succeeded without a result.
    pub fn succeeds(self) -> Self {
        self.push(TaskInfoState::Success, None, None, None)
    }

    /// Succeeded with `result`.
    pub fn succeeds_with(self, result: impl TaskResult) -> Self {
        self.push(
            TaskInfoState::Success,
            None,
            Some(result.into_value()),
            None,
        )
    }

    /// Failed with `fault`; `message` is the fault's localized message.
    pub fn fails(self, fault: impl Into<AnyMethodFault>, message: &str) -> Self {
        let error = LocalizedMethodFault {
            fault: fault.into(),
            localized_message: Some(message.to_string()),
        };
        self.push(TaskInfoState::Error, None, None, Some(error))
    }
}

/// The tasks the mock made and the watcher objects of its sessions.
#[derive(Default)]
pub(crate) struct Tasks {
    next: u64,
    tasks: HashMap<ManagedObjectReference, Record>,
    views: HashMap<ManagedObjectReference, Vec<ManagedObjectReference>>,
    collectors: HashMap<ManagedObjectReference, Collector>,
}

struct Record {
    base: TaskInfo,
    steps: Vec<Step>,
    /// States reported to any collector so far.
    shown: usize,
    /// When the last of them was first reported (or the task was made).
    last_shown: Instant,
}

#[derive(Default)]
struct Collector {
    /// The filter and the view it selects.
    filter: Option<(ManagedObjectReference, ManagedObjectReference)>,
    version: u64,
    /// States of each task delivered to this collector.
    delivered: HashMap<ManagedObjectReference, usize>,
}

impl Record {
    fn info(&self, step: usize) -> TaskInfo {
        let mut info = self.base.clone();
        if let Some(step) = self.steps.get(step) {
            info.state = step.state.clone();
            info.progress = step.progress;
            info.result = step.result.clone();
            info.error = step.error.clone();
            if step.state != TaskInfoState::Queued {
                info.start_time = Some(info.queue_time.clone());
            }
            if matches!(step.state, TaskInfoState::Success | TaskInfoState::Error) {
                info.complete_time = Some(info.queue_time.clone());
            }
        }
        info
    }

    /// When state `step` may be reported: at once if another collector
    /// saw it already, else its wait after the last state reported.
    fn due(&self, step: usize) -> Option<Instant> {
        let wait = self.steps.get(step)?.wait;
        Some(if step < self.shown {
            self.last_shown.min(Instant::now())
        } else {
            self.last_shown + wait
        })
    }

    /// Notes that state `step` was reported at `now`.
    fn reported(&mut self, step: usize, now: Instant) {
        if step >= self.shown {
            self.shown = step + 1;
            self.last_shown = now;
        }
    }

    fn finished(&self) -> bool {
        self.steps[..self.shown.min(self.steps.len())]
            .iter()
            .any(|s| matches!(s.state, TaskInfoState::Success | TaskInfoState::Error))
    }
}

impl Tasks {
    fn next_id(&mut self) -> u64 {
        self.next += 1;
        self.next
    }

    /// Makes a task of `operation` on `entity` following `script`.
    pub(crate) fn start(
        &mut self,
        operation: &str,
        entity: Option<ManagedObjectReference>,
        user: &str,
        mut script: TaskScript,
    ) -> ManagedObjectReference {
        if script.steps.is_empty() {
            script = script.queued();
        }
        let id = self.next_id();
        let task = ManagedObjectReference::new("Task", format!("task-{id}"));
        let base = TaskInfo {
            key: task.value.clone(),
            task: task.clone(),
            name: Some(operation.to_string()),
            description_id: operation.to_string(),
            entity,
            state: TaskInfoState::Queued,
            cancelable: true,
            reason: AnyTaskReason::TaskReasonUser(Box::new(TaskReasonUser {
                user_name: user.to_string(),
            })),
            queue_time: DateTime::new("2024-01-01T00:00:00Z"),
            event_chain_id: id as i32,
            ..TaskInfo::default()
        };
        self.tasks.insert(
            task.clone(),
            Record {
                base,
                steps: script.steps,
                shown: 0,
                last_shown: Instant::now(),
            },
        );
        task
    }

    /// The `info` of `task` as a direct read sees it: the latest state
    /// whose time has come (each state's wait counted from when the
    /// previous one was first reported, as for the watcher); queued
    /// before the first. `None` for a task the mock did not make.
    fn current_info(&mut self, task: &ManagedObjectReference) -> Option<TaskInfo> {
        let record = self.tasks.get_mut(task)?;
        let now = Instant::now();
        while let Some(due) = record.due(record.shown).filter(|due| *due <= now) {
            record.reported(record.shown, due);
        }
        Some(match record.shown {
            0 => record.base.clone(),
            shown => record.info(shown - 1),
        })
    }

    /// Collectors and views belong to a session: a new session starts
    /// without them.
    pub(crate) fn forget_session_objects(&mut self) {
        self.views.clear();
        self.collectors.clear();
    }

    fn cancel(&mut self, task: &ManagedObjectReference) {
        let Some(record) = self.tasks.get_mut(task) else {
            return;
        };
        if record.finished() {
            return;
        }
        record.steps.truncate(record.shown);
        record.base.cancelled = true;
        record.last_shown = record.last_shown.min(Instant::now());
        record.steps.push(Step {
            wait: Duration::ZERO,
            state: TaskInfoState::Error,
            progress: None,
            result: None,
            error: Some(LocalizedMethodFault {
                fault: RequestCanceled::default().into(),
                localized_message: Some("The task was canceled by a user.".to_string()),
            }),
        });
    }

    /// The next update set for `collector`, and how long to hold it.
    fn wait_for_updates(
        &mut self,
        collector: &ManagedObjectReference,
    ) -> Result<(Option<UpdateSet>, Duration), ()> {
        let Tasks {
            tasks,
            views,
            collectors,
            ..
        } = self;
        let Some(state) = collectors.get_mut(collector) else {
            return Err(());
        };
        let Some((filter, view)) = state.filter.clone() else {
            return Ok((None, POLL));
        };
        let watched: Vec<ManagedObjectReference> = views.get(&view).cloned().unwrap_or_default();
        let now = Instant::now();
        let earliest = watched
            .iter()
            .filter_map(|t| {
                let record = tasks.get(t)?;
                record.due(state.delivered.get(t).copied().unwrap_or(0))
            })
            .min();
        let wait = match earliest {
            Some(due) => due.saturating_duration_since(now).min(POLL),
            None => POLL,
        };
        let horizon = now + wait;
        let mut object_set = Vec::new();
        for task in &watched {
            let Some(record) = tasks.get_mut(task) else {
                continue;
            };
            let delivered = state.delivered.get(task).copied().unwrap_or(0);
            let Some(due) = record.due(delivered).filter(|due| *due <= horizon) else {
                continue;
            };
            record.reported(delivered, due.max(now));
            let info = record.info(delivered);
            state.delivered.insert(task.clone(), delivered + 1);
            object_set.push(ObjectUpdate {
                kind: if delivered == 0 {
                    ObjectUpdateKind::Enter
                } else {
                    ObjectUpdateKind::Modify
                },
                obj: task.clone(),
                change_set: vec![PropertyChange {
                    name: "info".to_string(),
                    op: PropertyChangeOp::Assign,
                    val: Some(Value::object(info)),
                }],
                missing_set: Vec::new(),
            });
        }
        if object_set.is_empty() {
            return Ok((None, wait));
        }
        state.version += 1;
        let set = UpdateSet {
            version: state.version.to_string(),
            filter_set: vec![PropertyFilterUpdate {
                filter,
                object_set,
                missing_set: Vec::new(),
            }],
            truncated: None,
        };
        Ok((Some(set), wait))
    }
}

fn gone(obj: &ManagedObjectReference) -> Answer {
    let fault = ManagedObjectNotFound {
        obj: obj.clone(),
        ..Default::default()
    };
    fault_template(
        fault.into(),
        &format!(
            "The object '{}:{}' has already been deleted or has not been completely created",
            obj.type_, obj.value
        ),
    )
}

/// Mounts the server side of the task watcher.
pub(crate) async fn mount_watcher(vc: &MockVCenter) {
    built_in::<CreateListViewRequestType, _>(vc, |r, _, shared| {
        let mut state = shared.state();
        let id = state.tasks.next_id();
        let view = ManagedObjectReference::new("ListView", format!("session[testkit]view-{id}"));
        let known: Vec<ManagedObjectReference> = r
            .obj
            .iter()
            .filter(|t| state.tasks.tasks.contains_key(t))
            .cloned()
            .collect();
        state.tasks.views.insert(view.clone(), known);
        drop(state);
        shared.soap_ok::<CreateListViewRequestType>(&view)
    })
    .await;
    built_in::<ModifyListViewRequestType, _>(vc, |r, _, shared| {
        let mut state = shared.state();
        let Tasks { tasks, views, .. } = &mut state.tasks;
        let Some(view) = views.get_mut(&r.this) else {
            return gone(&r.this);
        };
        let mut not_added = Vec::new();
        for task in &r.add {
            if !tasks.contains_key(task) {
                not_added.push(task.clone());
            } else if !view.contains(task) {
                view.push(task.clone());
            }
        }
        view.retain(|t| !r.remove.contains(t));
        drop(state);
        shared.soap_ok::<ModifyListViewRequestType>(&not_added)
    })
    .await;
    built_in::<CreatePropertyCollectorRequestType, _>(vc, |_, _, shared| {
        let mut state = shared.state();
        let id = state.tasks.next_id();
        let collector = ManagedObjectReference::new(
            "PropertyCollector",
            format!("session[testkit]collector-{id}"),
        );
        state
            .tasks
            .collectors
            .insert(collector.clone(), Collector::default());
        drop(state);
        shared.soap_ok::<CreatePropertyCollectorRequestType>(&collector)
    })
    .await;
    built_in::<CreateFilterRequestType, _>(vc, |r, _, shared| {
        let mut state = shared.state();
        let id = state.tasks.next_id();
        let Some(collector) = state.tasks.collectors.get_mut(&r.this) else {
            return gone(&r.this);
        };
        let filter =
            ManagedObjectReference::new("PropertyFilter", format!("session[testkit]filter-{id}"));
        let view = r
            .spec
            .object_set
            .first()
            .map(|o| o.obj.clone())
            .unwrap_or_default();
        collector.filter = Some((filter.clone(), view));
        drop(state);
        shared.soap_ok::<CreateFilterRequestType>(&filter)
    })
    .await;
    built_in::<WaitForUpdatesExRequestType, _>(vc, |r, _, shared| {
        let next = shared.state().tasks.wait_for_updates(&r.this);
        match next {
            Ok((set, wait)) => shared
                .soap_ok::<WaitForUpdatesExRequestType>(&set)
                .after(wait),
            Err(()) => gone(&r.this),
        }
    })
    .await;
    built_in::<DestroyPropertyCollectorRequestType, _>(vc, |r, _, shared| {
        shared.state().tasks.collectors.remove(&r.this);
        shared.soap_ok::<DestroyPropertyCollectorRequestType>(&())
    })
    .await;
    built_in::<DestroyPropertyFilterRequestType, _>(vc, |r, _, shared| {
        for collector in shared.state().tasks.collectors.values_mut() {
            if collector.filter.as_ref().is_some_and(|(f, _)| f == &r.this) {
                collector.filter = None;
            }
        }
        shared.soap_ok::<DestroyPropertyFilterRequestType>(&())
    })
    .await;
    built_in::<DestroyViewRequestType, _>(vc, |r, _, shared| {
        shared.state().tasks.views.remove(&r.this);
        shared.soap_ok::<DestroyViewRequestType>(&())
    })
    .await;
    built_in::<CancelTaskRequestType, _>(vc, |r, _, shared| {
        shared.state().tasks.cancel(&r.this);
        shared.soap_ok::<CancelTaskRequestType>(&())
    })
    .await;
    // A direct read of tasks' `info` (`Task::info`): the current state.
    mount::<RetrievePropertiesExRequestType>(
        vc,
        BUILT_IN,
        Some(Arc::new(reads_task_info)),
        None,
        None,
        Arc::new(|r, _, shared| {
            let mut objects = Vec::new();
            for spec in &r.spec_set {
                for object in &spec.object_set {
                    let Some(info) = shared.state().tasks.current_info(&object.obj) else {
                        return gone(&object.obj);
                    };
                    objects.push(ObjectContent {
                        obj: object.obj.clone(),
                        prop_set: vec![DynamicProperty {
                            name: "info".to_string(),
                            val: Value::object(info),
                        }],
                        missing_set: Vec::new(),
                    });
                }
            }
            shared.soap_ok::<RetrievePropertiesExRequestType>(&Some(RetrieveResult {
                token: None,
                objects,
            }))
        }),
    )
    .await;
}

/// A property read of tasks' `info` and nothing else.
fn reads_task_info(r: &RetrievePropertiesExRequestType) -> bool {
    !r.spec_set.is_empty()
        && r.spec_set.iter().all(|spec| {
            !spec.object_set.is_empty()
                && spec
                    .object_set
                    .iter()
                    .all(|o| o.obj.type_ == "Task" && o.select_set.is_empty())
                && !spec.prop_set.is_empty()
                && spec
                    .prop_set
                    .iter()
                    .all(|p| p.type_ == "Task" && p.path_set == ["info"])
        })
}
