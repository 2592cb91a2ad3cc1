//! `WaitForUpdatesEx` as a stream of typed object changes.
//!
//! Each [`UpdateStream`] has its own PropertyCollector (made with
//! `CreatePropertyCollector`) and one filter on it, so waiting, cancelling
//! and destroying never disturb anyone else's collector. The stream keeps the
//! current state of every object it reports, so each change carries the whole
//! object as of that change, not only the properties that moved.

use std::borrow::Cow;
use std::collections::{HashMap, VecDeque};
use std::marker::PhantomData;
use std::time::Duration;

use tokio::task::JoinHandle;

use crate::error::{Error, ErrorKind};
use crate::types::{
    ManagedObjectReference, MissingProperty, PropertyFilterSpec, WaitForUpdatesExRequestType,
    WaitOptions,
};
use crate::view::ContainerView;
use crate::xml::{
    Decode, DecodeError, Fields, Request, RetrievedPaths, Value, XmlReader, XmlWriter,
};
use crate::Client;

use super::decode::{
    apply_nested, read_late_value, read_value, set_top_level, NestedValue, PathCache,
    PropertyValue, RawValue,
};
use super::{view_object_spec, ManagedObject, PropertyQuery};

/// How an object changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum UpdateKind {
    /// The object entered the filter (first report, or it now matches).
    Enter,
    /// Some of its properties changed.
    Modify,
    /// The object left the filter (destroyed, or no longer in the view).
    Leave,
}

impl UpdateKind {
    /// `enter`, `modify` or `leave`, as vim25's `ObjectUpdateKind` spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            UpdateKind::Enter => "enter",
            UpdateKind::Modify => "modify",
            UpdateKind::Leave => "leave",
        }
    }
}

impl std::fmt::Display for UpdateKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One object's change.
#[derive(Debug, Clone, PartialEq)]
pub struct ObjectChange<T> {
    /// Enter, modify or leave.
    pub kind: UpdateKind,
    /// The object with every property as of this change (for `Leave`, as
    /// last known).
    pub object: T,
    /// The property paths this change set (empty for `Leave`).
    pub changed: Vec<String>,
    /// Properties the server could not read.
    pub missing: Vec<MissingProperty>,
}

/// Options of an [`UpdateStream`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct UpdateStreamOptions {
    /// How long one `WaitForUpdatesEx` call waits for a change before it
    /// returns empty (and the stream asks again). Each such call is bounded
    /// by this wait (plus 30 s per attempt, twice that for the call), not by
    /// the client's call deadline. Default: 30 s, or less when the call
    /// timeout is shorter.
    pub max_wait: Option<Duration>,
    /// At most this many object updates per call (the server may send
    /// fewer and say so with `truncated`; the stream then asks for the rest).
    pub max_object_updates: Option<u32>,
}

impl UpdateStreamOptions {
    pub(crate) fn wait_options(&self, client: &Client) -> WaitOptions {
        let max_wait = self.max_wait.unwrap_or_else(|| default_max_wait(client));
        WaitOptions {
            // 0 would mean "do not wait at all".
            max_wait_seconds: Some(max_wait.as_secs().clamp(1, i32::MAX as u64) as i32),
            max_object_updates: self
                .max_object_updates
                .map(|n| n.clamp(1, i32::MAX as u32) as i32),
        }
    }
}

/// 30 s, or half the call timeout when that is shorter.
pub(crate) fn default_max_wait(client: &Client) -> Duration {
    let standard = Duration::from_secs(30);
    match client.transport_config().call_timeout {
        Some(timeout) if timeout < standard * 2 => (timeout / 2).max(Duration::from_secs(1)),
        _ => standard,
    }
}

impl<T: ManagedObject> PropertyQuery<T> {
    /// Watches these objects: the stream first reports each as `Enter` with
    /// the query's properties, then every change.
    pub async fn watch(&self, objs: &[ManagedObjectReference]) -> Result<UpdateStream<T>, Error> {
        let object_set = objs
            .iter()
            .map(|obj| crate::types::ObjectSpec {
                obj: obj.clone(),
                skip: Some(false),
                select_set: Vec::new(),
            })
            .collect();
        self.watch_select(object_set, UpdateStreamOptions::default())
            .await
    }

    /// Watches every `T` under `container` (recursively), including those
    /// created later, through a container view that lives as long as the
    /// stream.
    pub async fn watch_container(
        &self,
        container: &ManagedObjectReference,
    ) -> Result<UpdateStream<T>, Error> {
        let view = ContainerView::create(&self.client, container, &[T::TYPE_NAME], true).await?;
        let spec_objects = vec![view_object_spec(view.reference())];
        let mut stream = self
            .watch_select(spec_objects, UpdateStreamOptions::default())
            .await?;
        stream.view = Some(view);
        stream.view_source = Some((container.clone(), vec![T::TYPE_NAME.to_string()]));
        Ok(stream)
    }

    /// Watches the objects these object specs select, with options.
    pub async fn watch_select(
        &self,
        object_set: Vec<crate::types::ObjectSpec>,
        options: UpdateStreamOptions,
    ) -> Result<UpdateStream<T>, Error> {
        let spec = PropertyFilterSpec {
            prop_set: vec![self.property_spec()],
            object_set,
            report_missing_objects_in_results: None,
        };
        UpdateStream::create(&self.client, spec, options).await
    }
}

/// The collector side of a watch: a dedicated collector with one filter,
/// the version reached and the objects' state. Holds no [`Client`], so it can
/// be parked between uses without keeping the client alive.
pub(crate) struct Watch<T> {
    pub collector: ManagedObjectReference,
    pub filter: ManagedObjectReference,
    pub version: String,
    objects: HashMap<ManagedObjectReference, ObjectState<T>>,
    /// The last object's retrieved paths, which the next ones most often share.
    last_retrieved: RetrievedPaths,
}

struct ObjectState<T> {
    object: T,
    nested: Vec<(String, NestedValue<'static>)>,
}

impl<T: ManagedObject> Watch<T> {
    /// Creates a collector and its filter.
    pub(crate) async fn create(
        client: &Client,
        spec: &PropertyFilterSpec,
    ) -> Result<Watch<T>, Error> {
        let root = client.service_content().property_collector.clone();
        let collector = client.vim().create_property_collector(&root).await?;
        let filter = match client.vim().create_filter(&collector, spec, false).await {
            Ok(filter) => filter,
            Err(err) => {
                let _ = client.vim().destroy_property_collector(&collector).await;
                return Err(err);
            }
        };
        Ok(Watch {
            collector,
            filter,
            version: String::new(),
            objects: HashMap::new(),
            last_retrieved: RetrievedPaths::default(),
        })
    }

    /// The request for the next updates.
    pub(crate) fn request(&self, options: WaitOptions) -> WaitUpdates<T> {
        WaitUpdates {
            inner: WaitForUpdatesExRequestType {
                this: self.collector.clone(),
                version: (!self.version.is_empty()).then(|| self.version.clone()),
                options: Some(options),
            },
            _type: PhantomData,
        }
    }

    /// Applies an update set to the objects' state; returns the changes.
    pub(crate) fn apply(&mut self, set: RawUpdateSet) -> Result<Vec<ObjectChange<T>>, Error> {
        self.version = set.version;
        let mut changes = Vec::with_capacity(set.objects.len());
        for update in set.objects {
            changes.push(self.apply_object(update).map_err(|e| {
                Error::new(ErrorKind::Decode, "cannot decode a property update").with_source(e)
            })?);
        }
        Ok(changes)
    }

    fn apply_object(&mut self, update: RawObjectUpdate) -> Result<ObjectChange<T>, DecodeError> {
        if update.kind == UpdateKind::Leave {
            let object = match self.objects.remove(&update.obj) {
                Some(state) => state.object,
                None => T::for_reference(update.obj),
            };
            return Ok(ObjectChange {
                kind: UpdateKind::Leave,
                object,
                changed: Vec::new(),
                missing: update.missing,
            });
        }
        let state = self
            .objects
            .entry(update.obj.clone())
            .or_insert_with(|| ObjectState {
                object: T::for_reference(update.obj.clone()),
                nested: Vec::new(),
            });
        let mut dirty: Vec<String> = Vec::new();
        // What the object holds after the update: assigned paths in, unset
        // ones out (a path the bindings do not know is neither).
        let assigned = update
            .changes
            .iter()
            .filter(|c| {
                matches!(
                    c.value,
                    Some(PropertyValue::TopLevel(_) | PropertyValue::Nested(_))
                )
            })
            .map(|c| c.path.as_str());
        let removed = update
            .changes
            .iter()
            .filter(|c| c.value.is_none())
            .map(|c| c.path.as_str());
        let retrieved = state
            .object
            .retrieved()
            .updated(assigned, removed, &self.last_retrieved);
        self.last_retrieved = retrieved.clone();
        *state.object.retrieved_mut() = retrieved;
        let mut changed = Vec::with_capacity(update.changes.len());
        for change in update.changes {
            let top = change
                .path
                .split('.')
                .next()
                .unwrap_or_default()
                .to_string();
            match change.value {
                Some(PropertyValue::TopLevel(value)) => {
                    set_top_level(&mut state.object, &change.path, value)?;
                }
                Some(PropertyValue::Nested(value)) => {
                    state.nested.retain(|(p, _)| p != &change.path);
                    state.nested.push((change.path.clone(), value));
                    dirty.push(top);
                }
                Some(PropertyValue::Unknown) => {}
                None if change.path.contains('.') => {
                    // Removed (or assigned nothing): the path is unset now.
                    state.nested.retain(|(p, _)| p != &change.path);
                    dirty.push(top);
                }
                None => {
                    set_top_level(&mut state.object, &change.path, Value::Nil)?;
                }
            }
            changed.push(change.path);
        }
        dirty.sort();
        dirty.dedup();
        for top in &dirty {
            set_top_level(&mut state.object, top, Value::Nil)?;
            let prefix_len = top.len();
            let mut group: Vec<(Cow<'_, str>, &NestedValue<'_>)> = state
                .nested
                .iter()
                .filter(|(p, _)| {
                    p.starts_with(top.as_str()) && p.as_bytes().get(prefix_len) == Some(&b'.')
                })
                .map(|(p, v)| (Cow::Borrowed(p.as_str()), v))
                .collect();
            apply_nested(&mut state.object, &mut group, &[])?;
        }
        Ok(ObjectChange {
            kind: update.kind,
            object: state.object.clone(),
            changed,
            missing: update.missing,
        })
    }

    /// Destroys the collector (and with it the filter).
    pub(crate) async fn destroy(&self, client: &Client) -> Result<(), Error> {
        client
            .vim()
            .destroy_property_collector(&self.collector)
            .await
    }
}

/// A stream of changes of the objects a filter selects, from
/// `WaitForUpdatesEx`.
///
/// [`next`](Self::next) is cancel-safe: if its future is dropped (a
/// `select!`, a timeout), the call in flight keeps running in the background
/// and its result is returned by the next `next`. Dropping the stream
/// destroys its collector, filter and view (best effort, in the
/// background); [`close`](Self::close) does it and waits.
pub struct UpdateStream<T: ManagedObject> {
    client: Client,
    watch: Watch<T>,
    options: WaitOptions,
    queue: VecDeque<ObjectChange<T>>,
    pending: Option<JoinHandle<Result<Option<RawUpdateSet>, Error>>>,
    view: Option<ContainerView>,
    /// What the filter was made from, to make it again after a session loss.
    spec: PropertyFilterSpec,
    /// The container and types of the stream's own view, if it has one.
    view_source: Option<(ManagedObjectReference, Vec<String>)>,
    closed: bool,
}

impl<T: ManagedObject> std::fmt::Debug for UpdateStream<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UpdateStream")
            .field("type", &T::TYPE_NAME)
            .field("collector", &self.watch.collector)
            .field("filter", &self.watch.filter)
            .field("version", &self.watch.version)
            .finish_non_exhaustive()
    }
}

impl<T: ManagedObject> UpdateStream<T> {
    /// Creates a collector and a filter for `spec` and starts watching.
    pub async fn create(
        client: &Client,
        spec: PropertyFilterSpec,
        options: UpdateStreamOptions,
    ) -> Result<UpdateStream<T>, Error> {
        let watch = Watch::create(client, &spec).await?;
        Ok(UpdateStream {
            client: client.clone(),
            watch,
            options: options.wait_options(client),
            queue: VecDeque::new(),
            pending: None,
            view: None,
            spec,
            view_source: None,
            closed: false,
        })
    }

    /// The collector this stream waits on.
    pub fn collector(&self) -> &ManagedObjectReference {
        &self.watch.collector
    }

    /// The filter of this stream.
    pub fn filter(&self) -> &ManagedObjectReference {
        &self.watch.filter
    }

    /// The last version received (empty before the first update).
    pub fn version(&self) -> &str {
        &self.watch.version
    }

    /// The next change. Waits as long as it takes; wrap it in a timeout to
    /// bound it. An error leaves the stream usable: calling again retries.
    ///
    /// When the session that held the collector is gone (the client logged
    /// in again), the collector, filter and view are made again in the new
    /// session and every object is reported as entering anew.
    pub async fn next(&mut self) -> Result<ObjectChange<T>, Error> {
        let mut remade = false;
        loop {
            if let Some(change) = self.queue.pop_front() {
                return Ok(change);
            }
            let pending = self.pending.get_or_insert_with(|| {
                let client = self.client.clone();
                let request = self.watch.request(self.options.clone());
                tokio::spawn(async move { client.invoke(&request).await })
            });
            let result = pending.await;
            self.pending = None;
            let set = match result {
                Ok(Err(err))
                    if !remade && err.is_fault::<crate::types::ManagedObjectNotFound>() =>
                {
                    tracing::debug!(error = %err, "update stream: collector gone, making it again");
                    self.remake().await?;
                    remade = true;
                    continue;
                }
                Ok(result) => result?,
                Err(join) => {
                    return Err(Error::new(
                        ErrorKind::Transport,
                        "the WaitForUpdatesEx call was aborted",
                    )
                    .with_source(join))
                }
            };
            if let Some(set) = set {
                self.queue.extend(self.watch.apply(set)?);
            }
        }
    }

    /// Makes the view (if the stream has its own), collector and filter again.
    async fn remake(&mut self) -> Result<(), Error> {
        if let Some((container, types)) = &self.view_source {
            let types: Vec<&str> = types.iter().map(String::as_str).collect();
            let view = ContainerView::create(&self.client, container, &types, true).await?;
            self.spec.object_set = vec![view_object_spec(view.reference())];
            // The old view went with its session: nothing to destroy.
            if let Some(mut old) = self.view.replace(view) {
                old.forget();
            }
        }
        self.watch = Watch::create(&self.client, &self.spec).await?;
        Ok(())
    }

    /// The changes as a [`Stream`](futures_core::Stream) (ending at the first error).
    pub fn into_stream(
        self,
    ) -> impl futures_core::Stream<Item = Result<ObjectChange<T>, Error>> + Send {
        futures_util::stream::unfold(Some(self), |stream| async move {
            let mut stream = stream?;
            match stream.next().await {
                Ok(change) => Some((Ok(change), Some(stream))),
                Err(err) => Some((Err(err), None)),
            }
        })
    }

    /// Destroys the collector, its filter and the view, and waits for it.
    pub async fn close(mut self) -> Result<(), Error> {
        self.closed = true;
        if let Some(pending) = self.pending.take() {
            pending.abort();
        }
        let result = self.watch.destroy(&self.client).await;
        if let Some(view) = self.view.take() {
            view.destroy().await?;
        }
        result
    }
}

impl<T: ManagedObject> Drop for UpdateStream<T> {
    fn drop(&mut self) {
        if let Some(pending) = self.pending.take() {
            pending.abort();
        }
        if !self.closed {
            let client = self.client.clone();
            let collector = self.watch.collector.clone();
            // Destroying the collector ends a wait in flight and its filter.
            crate::view::spawn_cleanup(async move {
                client.vim().destroy_property_collector(&collector).await
            });
        }
    }
}

/// An update set, decoded with the watched type's property paths.
#[derive(Debug, Default)]
pub(crate) struct RawUpdateSet {
    pub version: String,
    pub truncated: bool,
    pub objects: Vec<RawObjectUpdate>,
}

#[derive(Debug)]
pub(crate) struct RawObjectUpdate {
    pub kind: UpdateKind,
    pub obj: ManagedObjectReference,
    pub changes: Vec<RawChange>,
    pub missing: Vec<MissingProperty>,
}

pub(crate) struct RawChange {
    pub path: String,
    /// `None`: the property is unset (op `remove`, or no value).
    pub value: Option<PropertyValue<'static>>,
}

impl std::fmt::Debug for RawChange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RawChange")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

/// `WaitForUpdatesEx` whose update set decodes with `T`'s property tables.
pub(crate) struct WaitUpdates<T> {
    inner: WaitForUpdatesExRequestType,
    _type: PhantomData<fn() -> T>,
}

impl<T> Fields for WaitUpdates<T> {
    fn decode_field(&mut self, _: &mut XmlReader<'_>, _: &str) -> Result<bool, DecodeError> {
        Ok(false)
    }
    fn encode_fields(&self, w: &mut XmlWriter) {
        self.inner.encode_fields(w)
    }
}

impl<T: ManagedObject> Request for WaitUpdates<T> {
    const NAME: &'static str = WaitForUpdatesExRequestType::NAME;
    const IDEMPOTENT: bool = WaitForUpdatesExRequestType::IDEMPOTENT;
    type Response = Option<RawUpdateSet>;
    fn this(&self) -> &ManagedObjectReference {
        &self.inner.this
    }
    fn decode_response(r: &mut XmlReader<'_>) -> Result<Option<RawUpdateSet>, DecodeError> {
        let mut set = None;
        let mut cache = PathCache::default();
        while let Some(name) = r.next_child()? {
            if name != "returnval" {
                r.skip()?;
                continue;
            }
            let set = set.get_or_insert_with(RawUpdateSet::default);
            while let Some(child) = r.next_child()? {
                match child {
                    "version" => set.version = r.read_text()?.trim().to_string(),
                    "truncated" => set.truncated = r.read_text()?.trim() == "true",
                    "filterSet" => {
                        while let Some(field) = r.next_child()? {
                            match field {
                                "objectSet" => {
                                    set.objects.push(decode_object_update::<T>(r, &mut cache)?)
                                }
                                _ => r.skip()?,
                            }
                        }
                    }
                    _ => r.skip()?,
                }
            }
        }
        Ok(set)
    }
}

fn decode_object_update<T: ManagedObject>(
    r: &mut XmlReader<'_>,
    cache: &mut PathCache,
) -> Result<RawObjectUpdate, DecodeError> {
    let mut update = RawObjectUpdate {
        kind: UpdateKind::Modify,
        obj: ManagedObjectReference::default(),
        changes: Vec::new(),
        missing: Vec::new(),
    };
    while let Some(child) = r.next_child()? {
        match child {
            "kind" => {
                update.kind = match r.read_text()?.trim() {
                    "enter" => UpdateKind::Enter,
                    "leave" => UpdateKind::Leave,
                    _ => UpdateKind::Modify,
                }
            }
            "obj" => update.obj = ManagedObjectReference::decode(r)?,
            "changeSet" => {
                let mut path: Option<String> = None;
                let mut op = String::new();
                let mut value: Option<PropertyValue<'static>> = None;
                let mut early: Option<RawValue<'static>> = None;
                while let Some(field) = r.next_child()? {
                    match field {
                        "name" => path = Some(r.read_text()?.trim().to_string()),
                        "op" => op = r.read_text()?.trim().to_string(),
                        "val" => match &path {
                            Some(path) => {
                                value = Some(
                                    match read_value::<T>(r, path, cache, &update.obj.type_)? {
                                        PropertyValue::Nested(v) => {
                                            PropertyValue::Nested(v.into_owned())
                                        }
                                        PropertyValue::TopLevel(v) => PropertyValue::TopLevel(v),
                                        PropertyValue::Unknown => PropertyValue::Unknown,
                                    },
                                )
                            }
                            None => early = Some(RawValue::capture(r)?.into_owned()),
                        },
                        _ => r.skip()?,
                    }
                }
                let Some(path) = path else { continue };
                if let Some(raw) = early {
                    value = Some(read_late_value::<T>(raw, &path, cache, &update.obj.type_)?);
                }
                if op == "remove" || op == "indirectRemove" {
                    value = None;
                }
                let unset = match &value {
                    Some(PropertyValue::TopLevel(Value::Nil)) => true,
                    Some(PropertyValue::Nested(NestedValue::One(v))) => v.nil,
                    _ => false,
                };
                if unset {
                    value = None;
                }
                update.changes.push(RawChange { path, value });
            }
            "missingSet" => r.read_push(&mut update.missing)?,
            _ => r.skip()?,
        }
    }
    Ok(update)
}
