//! Typed property retrieval through the PropertyCollector.
//!
//! Ask for a managed object type and property paths; get the generated
//! managed object structs back with those properties filled in:
//!
//! ```no_run
//! # async fn demo(client: vsphere_client::Client) -> Result<(), vsphere_client::Error> {
//! use vsphere_client::mo;
//!
//! let query = client.properties::<mo::VirtualMachine>(&["name", "runtime.powerState"])?;
//! // Every VM under the root folder, page by page (a container view is
//! // created for the walk and destroyed after it).
//! let root = client.service_content().root_folder.clone();
//! let mut pages = query.max_objects(500).in_container(&root);
//! while let Some(page) = pages.next_page().await? {
//!     for vm in page {
//!         let state = vm.runtime.as_ref().map(|r| r.power_state.as_str());
//!         println!("{} {:?}", vm.name.unwrap_or_default(), state);
//!     }
//! }
//! # Ok(()) }
//! ```
//!
//! # Partial objects and nested paths
//!
//! Every property of a `mo::*` struct is an `Option`, `None` unless
//! retrieved. A nested path is set inside its top-level property:
//! `runtime.powerState` gives `runtime: Some(VirtualMachineRuntimeInfo { power_state, .. })`
//! where the fields that were not asked for hold their defaults (`None`,
//! empty, zero), so read only what you asked for: each object's `retrieved`
//! ([`RetrievedPaths`](crate::xml::RetrievedPaths)) says which paths the
//! server sent values for, so a default never passes for a real value
//! (`vm.retrieved.contains("config.hardware.memoryMB")` is false after
//! retrieving only `config.hardware.numCPU`). Paths retrieved together
//! share their parent (`runtime.powerState` and `runtime.host` both land in
//! `vm.runtime`). When the server has no value for a nested path (an unset
//! `guest.ipAddress`), the parent stays `None` unless a sibling set it.
//!
//! Paths are checked against the generated property tables before anything
//! is sent: an unknown path is an [`ErrorKind::InvalidArgument`](crate::ErrorKind)
//! error naming it and, when the types on the way have properties of close
//! names (letter case aside, an edit or two), the path that was probably
//! meant: `config.hardware.numCpu` says
//! `(did you mean "config.hardware.numCPU"?)`. A path below another
//! requested path is dropped (the ancestor carries it).
//!
//! # Typed paths
//!
//! [`paths`](crate::paths) spells every path the bindings know as methods,
//! so a misspelt or misplaced path does not compile: `paths::VirtualMachine`
//! has one method per property of `mo::VirtualMachine` (inherited ones
//! included), a method of a data type leads into its fields, and
//! [`into_path`](crate::paths::VirtualMachineConfigInfo::into_path) is the
//! path to a whole data object. [`Client::properties`] takes typed paths or
//! strings; [`RetrievedPaths::contains`](crate::xml::RetrievedPaths::contains)
//! takes either too.
//!
//! ```no_run
//! # async fn demo(client: vsphere_client::Client) -> Result<(), vsphere_client::Error> {
//! use vsphere_client::{mo, paths};
//!
//! let vm = paths::VirtualMachine;
//! let root = client.service_content().root_folder.clone();
//! let vms = client
//!     .properties::<mo::VirtualMachine>(&[
//!         vm.name(),
//!         vm.runtime().power_state(),
//!         vm.config().hardware().num_cpu(),
//!     ])?
//!     .in_container(&root)
//!     .collect_all()
//!     .await?;
//! for found in &vms {
//!     if found.retrieved.contains(vm.config().hardware().num_cpu()) {
//!         println!("{:?}: {:?} CPUs", found.name, found.config.as_ref().map(|c| c.hardware.num_cpu));
//!     }
//! }
//! # Ok(()) }
//! ```
//!
//! A misspelt path, or one of another managed object type, is a compile
//! error:
//!
//! ```compile_fail
//! # fn demo(client: vsphere_client::Client) {
//! use vsphere_client::{mo, paths};
//! let _ = client.properties::<mo::VirtualMachine>(&[paths::VirtualMachine.runtime().power_stat()]);
//! # }
//! ```
//!
//! ```compile_fail
//! # fn demo(client: vsphere_client::Client) {
//! use vsphere_client::{mo, paths};
//! let _ = client.properties::<mo::VirtualMachine>(&[paths::HostSystem.name()]);
//! # }
//! ```
//!
//! # Paging
//!
//! [`Pages`] reads `RetrievePropertiesEx` then `ContinueRetrievePropertiesEx`
//! until the server has no more, one page in memory at a time. A page that
//! fails ends the walk with the error: a walk never silently returns part of
//! the inventory. Dropping [`Pages`] before the end cancels the server-side
//! result set (`CancelRetrievePropertiesEx`, best effort).

mod decode;
pub(crate) mod traversal;
pub(crate) mod updates;

pub use traversal::{inventory_traversal, traversal_spec};
pub use updates::{ObjectChange, UpdateKind, UpdateStream, UpdateStreamOptions};
pub use vsphere_vim25::property::{AsPropertyPath, ManagedObject, PropertyPath};

pub(crate) use decode::{ObjectBuilder, PathCache, RawValue};

use std::collections::VecDeque;
use std::fmt;
use std::marker::PhantomData;
use std::sync::Arc;

use crate::error::{Error, ErrorKind};
use crate::mo::MANAGED_OBJECTS;
use crate::types::{
    AnySelectionSpec, CancelRetrievePropertiesExRequestType,
    ContinueRetrievePropertiesExRequestType, ManagedObjectReference, MissingProperty, ObjectSpec,
    PropertyFilterSpec, PropertySpec, RetrieveOptions, RetrievePropertiesExRequestType,
};
use crate::view::ContainerView;
use crate::xml::{Decode, DecodeError, FieldInfo, Fields, Occurs, Request, XmlReader, XmlWriter};
use crate::Client;
use vsphere_vim25::REGISTRY;

/// Property paths validated for managed object type `T`.
pub(crate) fn validate_paths<T: ManagedObject>(
    paths: &[impl AsPropertyPath<T>],
) -> Result<Vec<String>, Error> {
    let paths: Vec<&str> = paths.iter().map(AsPropertyPath::as_property_path).collect();
    for path in &paths {
        let property = path.trim().split('.').next().unwrap_or_default();
        if let Some((_, feature)) = T::LEFT_OUT.iter().find(|(name, _)| *name == property) {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                format!(
                    "property path {path:?} of {}: `{property}` is compiled in with \
                     vsphere-client's `{feature}` feature",
                    T::TYPE_NAME
                ),
            ));
        }
    }
    validate_paths_for(T::TYPE_NAME, &paths)
}

/// The properties of managed object type `mo_type` (inherited ones
/// included) but `left_out`: what a retrieval of every property of a struct
/// that leaves some out asks for.
fn held_properties(mo_type: &str, left_out: &[(&str, &str)]) -> Vec<String> {
    managed_object_properties(mo_type)
        .into_iter()
        .filter(|p| !left_out.iter().any(|(out, _)| *out == p.name))
        .map(|p| p.name.to_string())
        .collect()
}

/// Property paths validated for managed object type `mo_type`: each resolves
/// through the generated tables; duplicates and paths below another
/// requested path are dropped.
pub(crate) fn validate_paths_for<S: AsRef<str>>(
    mo_type: &str,
    paths: &[S],
) -> Result<Vec<String>, Error> {
    let mut valid: Vec<String> = Vec::with_capacity(paths.len());
    for path in paths {
        let path = path.as_ref().trim();
        if path.is_empty() {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                format!("empty property path for {mo_type}"),
            ));
        }
        if let Err(e) = MANAGED_OBJECTS.resolve_path(&REGISTRY, mo_type, path) {
            let suggestion = match suggest_path(mo_type, path) {
                Some(suggested) => format!(" (did you mean {suggested:?}?)"),
                None => String::new(),
            };
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                format!("invalid property path {path:?} for {mo_type}: {e}{suggestion}"),
            )
            .with_source(e));
        }
        valid.push(path.to_string());
    }
    valid.sort();
    valid.dedup();
    let covered = |path: &str, by: &str| {
        path.len() > by.len() && path.starts_with(by) && path.as_bytes()[by.len()] == b'.'
    };
    let all = valid.clone();
    valid.retain(|p| !all.iter().any(|other| covered(p, other)));
    Ok(valid)
}

/// The path `path` was probably meant to be, when it does not resolve on
/// `mo_type`: each segment that names no property replaced by the closest
/// name the type reached so far has ([`closest_name`]). `None` when some
/// segment has no close name, or a segment follows an array or a primitive.
fn suggest_path(mo_type: &str, path: &str) -> Option<String> {
    let mut suggested: Vec<&'static str> = Vec::new();
    let mut reached: Option<FieldInfo> = None;
    for segment in path.split('.') {
        let candidates = match reached {
            None => managed_object_properties(mo_type),
            Some(field) if field.occurs != Occurs::Repeated => REGISTRY.all_fields(field.type_name),
            Some(_) => return None,
        };
        let field = match candidates.iter().find(|f| f.name == segment) {
            Some(field) => *field,
            None => closest_name(segment, &candidates)?,
        };
        suggested.push(field.name);
        reached = Some(field);
    }
    let suggested = suggested.join(".");
    (suggested != path).then_some(suggested)
}

/// Every property of managed object type `mo_type`, inherited ones included.
fn managed_object_properties(mo_type: &str) -> Vec<FieldInfo> {
    let mut properties = Vec::new();
    let mut current = Some(mo_type);
    for _ in 0..64 {
        let Some(info) = current.and_then(|name| MANAGED_OBJECTS.get(name)) else {
            break;
        };
        properties.extend_from_slice(info.properties);
        current = info.base;
    }
    properties
}

/// The candidate whose name is nearest to `segment` when letter case is
/// ignored (`numCpu` for `numCPU`), within an edit distance of a third of
/// the segment's length (at least 1); the first of equally near ones.
fn closest_name(segment: &str, candidates: &[FieldInfo]) -> Option<FieldInfo> {
    let wanted: Vec<char> = segment.to_lowercase().chars().collect();
    let limit = (wanted.len() / 3).max(1);
    candidates
        .iter()
        .map(|field| {
            let name: Vec<char> = field.name.to_lowercase().chars().collect();
            (edit_distance(&wanted, &name), field)
        })
        .filter(|(distance, _)| *distance <= limit)
        .min_by_key(|(distance, _)| *distance)
        .map(|(_, field)| *field)
}

/// Edit distance counting an insertion, a deletion, a substitution or a
/// swap of two neighbours (`nmae` for `name`) as one edit each (optimal
/// string alignment).
fn edit_distance(a: &[char], b: &[char]) -> usize {
    let width = b.len() + 1;
    let mut table = vec![0usize; (a.len() + 1) * width];
    for (i, row) in table.chunks_mut(width).enumerate() {
        row[0] = i;
    }
    for (j, cell) in table[..width].iter_mut().enumerate() {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut best = (table[(i - 1) * width + j] + 1)
                .min(table[i * width + j - 1] + 1)
                .min(table[(i - 1) * width + j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                best = best.min(table[(i - 2) * width + j - 2] + 1);
            }
            table[i * width + j] = best;
        }
    }
    table[a.len() * width + b.len()]
}

/// One page of a retrieval: the objects, and the properties the server could
/// not read for some of them.
#[derive(Debug, Clone, PartialEq)]
pub struct Page<T> {
    /// The objects of this page, each with the retrieved properties set.
    pub objects: Vec<T>,
    /// Properties the server reported missing (no permission, an error while
    /// reading them), by object.
    pub missing: Vec<MissingProperties>,
}

impl<T> IntoIterator for Page<T> {
    type Item = T;
    type IntoIter = std::vec::IntoIter<T>;
    fn into_iter(self) -> Self::IntoIter {
        self.objects.into_iter()
    }
}

impl<T> Page<T> {
    /// How many objects the page holds.
    pub fn len(&self) -> usize {
        self.objects.len()
    }

    /// Whether the page holds no object.
    pub fn is_empty(&self) -> bool {
        self.objects.is_empty()
    }
}

/// The properties of one object the server could not read.
#[derive(Debug, Clone, PartialEq)]
pub struct MissingProperties {
    /// The object.
    pub obj: ManagedObjectReference,
    /// Each property path with the fault that kept it from being read.
    pub properties: Vec<MissingProperty>,
}

/// A typed property retrieval: a managed object type, property paths, and a
/// page size. Build it with [`Client::properties`]; then read one object
/// ([`get`](Self::get)), a list ([`get_many`](Self::get_many),
/// [`objects`](Self::objects)), a view ([`in_view`](Self::in_view)),
/// everything under a container ([`in_container`](Self::in_container)), or
/// what a traversal reaches ([`traverse`](Self::traverse)).
pub struct PropertyQuery<T> {
    client: Client,
    paths: Arc<[String]>,
    all: bool,
    max_objects: Option<u32>,
    _type: PhantomData<fn() -> T>,
}

impl<T> Clone for PropertyQuery<T> {
    fn clone(&self) -> Self {
        PropertyQuery {
            client: self.client.clone(),
            paths: self.paths.clone(),
            all: self.all,
            max_objects: self.max_objects,
            _type: PhantomData,
        }
    }
}

impl<T: ManagedObject> fmt::Debug for PropertyQuery<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PropertyQuery")
            .field("type", &T::TYPE_NAME)
            .field("paths", &self.paths)
            .field("all", &self.all)
            .field("max_objects", &self.max_objects)
            .finish()
    }
}

impl Client {
    /// A retrieval of `paths` of managed objects of type `T`: typed paths
    /// from [`paths`](crate::paths) (`paths::VirtualMachine.runtime().power_state()`,
    /// checked by the compiler) or strings (`name`, `runtime.powerState`,
    /// `config.hardware.device`, ...).
    ///
    /// Fails with [`ErrorKind::InvalidArgument`] naming the first string path
    /// that `T` does not have (and the path probably meant, when one is
    /// close), before anything is sent.
    pub fn properties<T: ManagedObject>(
        &self,
        paths: &[impl AsPropertyPath<T>],
    ) -> Result<PropertyQuery<T>, Error> {
        Ok(PropertyQuery {
            client: self.clone(),
            paths: validate_paths::<T>(paths)?.into(),
            all: false,
            max_objects: None,
            _type: PhantomData,
        })
    }

    /// A retrieval of every property of managed objects of type `T`
    /// (expensive on a real vCenter: prefer [`properties`](Self::properties)):
    /// every property `T` holds, so the properties a cargo feature leaves out
    /// (`HostSystem.config` without `admin`) are not asked for.
    pub fn all_properties<T: ManagedObject>(&self) -> PropertyQuery<T> {
        let (paths, all) = match T::LEFT_OUT {
            [] => (Vec::new(), true),
            left_out => (held_properties(T::TYPE_NAME, left_out), false),
        };
        PropertyQuery {
            client: self.clone(),
            paths: Arc::from(paths),
            all,
            max_objects: None,
            _type: PhantomData,
        }
    }
}

impl<T: ManagedObject> PropertyQuery<T> {
    /// The validated property paths.
    pub fn paths(&self) -> &[String] {
        &self.paths
    }

    /// Asks the server for at most `max` objects per page (`RetrieveOptions.maxObjects`).
    /// The server may return fewer (vCenter caps pages itself). Default: the
    /// server's choice. `0` means the server's choice too.
    pub fn max_objects(mut self, max: u32) -> Self {
        self.max_objects = (max > 0).then_some(max);
        self
    }

    fn property_spec(&self) -> PropertySpec {
        PropertySpec {
            type_: T::TYPE_NAME.to_string(),
            all: self.all.then_some(true),
            path_set: self.paths.to_vec(),
        }
    }

    /// The properties of one object. The object must exist
    /// (`ManagedObjectNotFound` otherwise) and be a `T`.
    pub async fn get(&self, obj: &ManagedObjectReference) -> Result<T, Error> {
        let mut objects = self.get_many(std::slice::from_ref(obj)).await?;
        match objects.pop() {
            Some(object) => Ok(object),
            None => Err(Error::new(
                ErrorKind::NotFound,
                format!(
                    "{obj} has no {} properties (not a {})",
                    T::TYPE_NAME,
                    T::TYPE_NAME
                ),
            )),
        }
    }

    /// The properties of each object of `objs`, in one round trip per page.
    pub async fn get_many(&self, objs: &[ManagedObjectReference]) -> Result<Vec<T>, Error> {
        if objs.is_empty() {
            return Ok(Vec::new());
        }
        self.objects(objs).collect_all().await
    }

    /// The properties of each object of `objs`, page by page.
    pub fn objects(&self, objs: &[ManagedObjectReference]) -> Pages<T> {
        let object_set = objs
            .iter()
            .map(|obj| ObjectSpec {
                obj: obj.clone(),
                skip: Some(false),
                select_set: Vec::new(),
            })
            .collect();
        self.pages(object_set, None)
    }

    /// The properties of every `T` in an existing view (a [`ContainerView`],
    /// a [`ListView`](crate::view::ListView), or any `View` reference).
    pub fn in_view(&self, view: &ManagedObjectReference) -> Pages<T> {
        self.pages(vec![view_object_spec(view)], None)
    }

    /// The properties of every `T` under `container` (a folder, datacenter,
    /// cluster, ...), recursively, through a container view created for the
    /// walk and destroyed when it ends (or when [`Pages`] is dropped).
    pub fn in_container(&self, container: &ManagedObjectReference) -> Pages<T> {
        self.in_container_with(container, true)
    }

    /// As [`in_container`](Self::in_container), only the direct children
    /// when `recursive` is false.
    pub fn in_container_with(
        &self,
        container: &ManagedObjectReference,
        recursive: bool,
    ) -> Pages<T> {
        let mut pages = self.pages(Vec::new(), None);
        pages.state = State::CreateView {
            container: container.clone(),
            types: vec![T::TYPE_NAME.to_string()],
            recursive,
        };
        pages
    }

    /// The properties of the objects of `types` (subtypes of `T`, or `T`
    /// itself) under `container`, recursively: for a query over a base type
    /// (`ManagedEntity`) restricted to some concrete types.
    pub fn in_container_of_types(
        &self,
        container: &ManagedObjectReference,
        types: &[&str],
    ) -> Pages<T> {
        let mut pages = self.pages(Vec::new(), None);
        pages.state = State::CreateView {
            container: container.clone(),
            types: types.iter().map(std::string::ToString::to_string).collect(),
            recursive: true,
        };
        pages
    }

    /// The properties of every `T` reached from `root` through `select_set`
    /// (see [`inventory_traversal`] for the whole inventory), `root`
    /// included when it is a `T`.
    pub fn traverse(
        &self,
        root: &ManagedObjectReference,
        select_set: Vec<AnySelectionSpec>,
    ) -> Pages<T> {
        self.pages(
            vec![ObjectSpec {
                obj: root.clone(),
                skip: Some(false),
                select_set,
            }],
            None,
        )
    }

    /// The properties of every `T` selected by these object specs (the
    /// general form of the other selections).
    pub fn select(&self, object_set: Vec<ObjectSpec>) -> Pages<T> {
        self.pages(object_set, None)
    }

    fn pages(&self, object_set: Vec<ObjectSpec>, view: Option<ContainerView>) -> Pages<T> {
        let spec = PropertyFilterSpec {
            prop_set: vec![self.property_spec()],
            object_set,
            report_missing_objects_in_results: None,
        };
        Pages {
            client: self.client.clone(),
            collector: self.client.service_content().property_collector.clone(),
            spec,
            max_objects: self.max_objects,
            state: State::Start,
            view,
            pages_read: 0,
            objects_read: 0,
            _type: PhantomData,
        }
    }
}

/// The object spec that selects a view's objects: the view itself skipped,
/// its `view` property followed.
pub(crate) fn view_object_spec(view: &ManagedObjectReference) -> ObjectSpec {
    ObjectSpec {
        obj: view.clone(),
        skip: Some(true),
        select_set: vec![crate::property::traversal_spec(
            "traverseView",
            "View",
            "view",
            &[],
        )],
    }
}

enum State {
    CreateView {
        container: ManagedObjectReference,
        types: Vec<String>,
        recursive: bool,
    },
    Start,
    Continue(String),
    Done,
}

/// The pages of a retrieval, read one at a time: memory holds one page
/// whatever the number of objects.
///
/// Read with [`next_page`](Self::next_page), [`collect_all`](Self::collect_all)
/// or as a [`Stream`](futures_core::Stream) with [`into_stream`](Self::into_stream).
pub struct Pages<T> {
    client: Client,
    collector: ManagedObjectReference,
    spec: PropertyFilterSpec,
    max_objects: Option<u32>,
    state: State,
    view: Option<ContainerView>,
    pages_read: usize,
    objects_read: usize,
    _type: PhantomData<fn() -> T>,
}

impl<T: ManagedObject> fmt::Debug for Pages<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Pages")
            .field("type", &T::TYPE_NAME)
            .field("pages_read", &self.pages_read)
            .field("objects_read", &self.objects_read)
            .field("done", &matches!(self.state, State::Done))
            .finish_non_exhaustive()
    }
}

impl<T: ManagedObject> Pages<T> {
    /// The next page, or `None` when every object has been read. After an
    /// error the walk is over (`None` from then on).
    pub async fn next_page(&mut self) -> Result<Option<Page<T>>, Error> {
        loop {
            let result = self.step().await;
            match result {
                Ok(Some(page)) if page.objects.is_empty() && page.missing.is_empty() => {
                    // An empty page with more to come: keep reading.
                    continue;
                }
                Ok(Some(page)) => return Ok(Some(page)),
                Ok(None) => {
                    self.finish().await;
                    return Ok(None);
                }
                Err(err) => {
                    self.state = State::Done;
                    self.finish().await;
                    return Err(err);
                }
            }
        }
    }

    /// One call: `Ok(None)` when there is nothing left to ask for.
    async fn step(&mut self) -> Result<Option<Page<T>>, Error> {
        let raw = match std::mem::replace(&mut self.state, State::Done) {
            State::Done => return Ok(None),
            State::CreateView {
                container,
                types,
                recursive,
            } => {
                let types: Vec<&str> = types.iter().map(String::as_str).collect();
                let view =
                    ContainerView::create(&self.client, &container, &types, recursive).await?;
                self.spec.object_set = vec![view_object_spec(view.reference())];
                self.view = Some(view);
                self.state = State::Start;
                return Ok(Some(Page {
                    objects: Vec::new(),
                    missing: Vec::new(),
                }));
            }
            State::Start => {
                let request = RetrievePage::<T> {
                    inner: RetrievePropertiesExRequestType {
                        this: self.collector.clone(),
                        spec_set: vec![self.spec.clone()],
                        options: RetrieveOptions {
                            max_objects: self.max_objects.map(|m| m.min(i32::MAX as u32) as i32),
                        },
                    },
                    _type: PhantomData,
                };
                self.client.invoke(&request).await?
            }
            State::Continue(token) => {
                let request = ContinuePage::<T> {
                    inner: ContinueRetrievePropertiesExRequestType {
                        this: self.collector.clone(),
                        token,
                    },
                    _type: PhantomData,
                };
                self.client.invoke(&request).await?
            }
        };
        self.pages_read += 1;
        self.objects_read += raw.objects.len();
        if let Some(token) = raw.token.filter(|t| !t.is_empty()) {
            self.state = State::Continue(token);
        }
        Ok(Some(Page {
            objects: raw.objects,
            missing: raw.missing,
        }))
    }

    /// Destroys the container view made for this walk, if any.
    async fn finish(&mut self) {
        if let Some(view) = self.view.take() {
            if let Err(err) = view.destroy().await {
                tracing::debug!(error = %err, "destroying the walk's container view failed");
            }
        }
    }

    /// Every remaining object, all pages read.
    pub async fn collect_all(mut self) -> Result<Vec<T>, Error> {
        let mut all = Vec::new();
        while let Some(page) = self.next_page().await? {
            all.extend(page.objects);
        }
        Ok(all)
    }

    /// The pages as a stream; the stream ends after the last page or after
    /// the first error.
    pub fn into_stream(
        self,
    ) -> impl futures_core::Stream<Item = Result<Page<T>, Error>> + Send + 'static
    where
        T: Send,
    {
        futures_util::stream::unfold(self, |mut pages| async move {
            match pages.next_page().await {
                Ok(Some(page)) => Some((Ok(page), pages)),
                Ok(None) => None,
                Err(err) => Some((Err(err), pages)),
            }
        })
    }

    /// How many pages (server responses) were read so far.
    pub fn pages_read(&self) -> usize {
        self.pages_read
    }

    /// How many objects were read so far.
    pub fn objects_read(&self) -> usize {
        self.objects_read
    }
}

impl<T> Drop for Pages<T> {
    fn drop(&mut self) {
        // An abandoned walk leaves a result set on the server until the
        // session ends: cancel it (the view, if any, destroys itself).
        if let State::Continue(token) = std::mem::replace(&mut self.state, State::Done) {
            let client = self.client.clone();
            let collector = self.collector.clone();
            crate::view::spawn_cleanup(async move {
                let request = CancelRetrievePropertiesExRequestType {
                    this: collector,
                    token,
                };
                client.invoke(&request).await
            });
        }
    }
}

/// What a `RetrievePropertiesEx` or `ContinueRetrievePropertiesEx` returns,
/// decoded into `T`s.
#[derive(Debug)]
pub(crate) struct RawPage<T> {
    token: Option<String>,
    objects: Vec<T>,
    missing: Vec<MissingProperties>,
}

/// `RetrievePropertiesEx` whose response decodes straight into `T`s.
struct RetrievePage<T> {
    inner: RetrievePropertiesExRequestType,
    _type: PhantomData<fn() -> T>,
}

/// `ContinueRetrievePropertiesEx` whose response decodes straight into `T`s.
/// Not idempotent: repeating it would skip a page.
struct ContinuePage<T> {
    inner: ContinueRetrievePropertiesExRequestType,
    _type: PhantomData<fn() -> T>,
}

impl<T> Fields for RetrievePage<T> {
    fn decode_field(&mut self, _: &mut XmlReader<'_>, _: &str) -> Result<bool, DecodeError> {
        Ok(false)
    }
    fn encode_fields(&self, w: &mut XmlWriter) {
        self.inner.encode_fields(w)
    }
}

impl<T> Fields for ContinuePage<T> {
    fn decode_field(&mut self, _: &mut XmlReader<'_>, _: &str) -> Result<bool, DecodeError> {
        Ok(false)
    }
    fn encode_fields(&self, w: &mut XmlWriter) {
        self.inner.encode_fields(w)
    }
}

impl<T: ManagedObject> Request for RetrievePage<T> {
    const NAME: &'static str = RetrievePropertiesExRequestType::NAME;
    const IDEMPOTENT: bool = RetrievePropertiesExRequestType::IDEMPOTENT;
    type Response = RawPage<T>;
    fn this(&self) -> &ManagedObjectReference {
        &self.inner.this
    }
    fn decode_response(r: &mut XmlReader<'_>) -> Result<RawPage<T>, DecodeError> {
        decode_retrieve_result(r)
    }
}

impl<T: ManagedObject> Request for ContinuePage<T> {
    const NAME: &'static str = ContinueRetrievePropertiesExRequestType::NAME;
    const IDEMPOTENT: bool = false;
    type Response = RawPage<T>;
    fn this(&self) -> &ManagedObjectReference {
        &self.inner.this
    }
    fn decode_response(r: &mut XmlReader<'_>) -> Result<RawPage<T>, DecodeError> {
        decode_retrieve_result(r)
    }
}

/// Reads the `returnval` (a `RetrieveResult`) of the response element.
fn decode_retrieve_result<T: ManagedObject>(
    r: &mut XmlReader<'_>,
) -> Result<RawPage<T>, DecodeError> {
    let mut page = RawPage {
        token: None,
        objects: Vec::new(),
        missing: Vec::new(),
    };
    let mut cache = PathCache::default();
    while let Some(name) = r.next_child()? {
        if name != "returnval" {
            r.skip()?;
            continue;
        }
        loop {
            // Where this child starts (for the size of the first object).
            let start = r.remaining();
            let Some(child) = r.next_child()? else { break };
            match child {
                "token" => {
                    let token = r.read_text()?.trim().to_string();
                    page.token = (!token.is_empty()).then_some(token);
                }
                "objects" => {
                    let (object, missing) = decode_object_content::<T>(r, &mut cache)?;
                    if page.objects.is_empty() {
                        let first = start.saturating_sub(r.remaining());
                        reserve_like_first(&mut page.objects, first, r.remaining());
                    }
                    if !missing.properties.is_empty() {
                        page.missing.push(missing);
                    }
                    if page.objects.len() == page.objects.capacity() {
                        // Past the estimate: a quarter more, not twice as much.
                        page.objects.reserve_exact(page.objects.len() / 4 + 1);
                    }
                    page.objects.push(object);
                }
                _ => r.skip()?,
            }
        }
    }
    Ok(page)
}

/// Sizes a page's list after its first object, which took `first_bytes` of
/// the body with `rest_bytes` to go: the objects of a page are much alike,
/// and a list grown by doubling copies itself each time (`mo::VirtualMachine`
/// is 6.6 KB: a 100-VM page grew to room for 128, 850 KB, copying 420 KB on
/// the way). A sixteenth more for objects a little larger than the first.
/// Capped, so a hostile body cannot make it reserve much.
fn reserve_like_first<T>(objects: &mut Vec<T>, first_bytes: usize, rest_bytes: usize) {
    const MAX_RESERVED_BYTES: usize = 8 << 20;
    let rest = rest_bytes / first_bytes.max(1);
    let estimate = 1 + rest + rest / 16;
    let cap = MAX_RESERVED_BYTES / std::mem::size_of::<T>().max(1);
    objects.reserve(estimate.min(cap));
}

/// Reads one `ObjectContent` (just entered) into a `T`.
fn decode_object_content<'a, T: ManagedObject>(
    r: &mut XmlReader<'a>,
    cache: &mut PathCache,
) -> Result<(T, MissingProperties), DecodeError> {
    let mut builder = ObjectBuilder::<T>::new(T::default());
    let mut missing = Vec::new();
    while let Some(child) = r.next_child()? {
        match child {
            "obj" => builder
                .object
                .set_mo_ref(ManagedObjectReference::decode(r)?),
            "propSet" => {
                let mut name: Option<String> = None;
                let mut early: VecDeque<RawValue<'a>> = VecDeque::new();
                while let Some(field) = r.next_child()? {
                    match field {
                        "name" => name = Some(r.read_text()?.trim().to_string()),
                        "val" => match &name {
                            Some(path) => builder.read_property(r, path, cache)?,
                            None => early.push_back(RawValue::capture(r)?),
                        },
                        _ => r.skip()?,
                    }
                }
                if let (Some(path), Some(raw)) = (&name, early.pop_front()) {
                    builder.late_property(raw, path, cache)?;
                }
            }
            "missingSet" => r.read_push(&mut missing)?,
            _ => r.skip()?,
        }
    }
    let object = builder.finish(cache)?;
    let missing = MissingProperties {
        obj: object.mo_ref().clone(),
        properties: missing,
    };
    Ok((object, missing))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mo;
    use crate::types::{AnyVirtualDevice, AnyVirtualDeviceBackingInfo, VirtualMachinePowerState};

    fn envelope(body: &str) -> Vec<u8> {
        format!(
            r#"<?xml version="1.0" encoding="UTF-8"?><soapenv:Envelope xmlns:soapenv="http://schemas.xmlsoap.org/soap/envelope/" xmlns:xsd="http://www.w3.org/2001/XMLSchema" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"><soapenv:Body>{body}</soapenv:Body></soapenv:Envelope>"#
        )
        .into_bytes()
    }

    fn decode(body: &str) -> RawPage<mo::VirtualMachine> {
        match crate::xml::soap::decode_response::<RetrievePage<mo::VirtualMachine>>(&envelope(body))
        {
            Ok(page) => page,
            Err(e) => panic!("{e:?}"),
        }
    }

    #[test]
    fn a_subtypes_own_properties_are_not_noted_as_unknown() {
        // Every property of the `Network`s: a portgroup carries its own
        // (`key`, `config.name`), which the bindings know and `mo::Network`
        // has no place for; a property no type has is noted.
        let body = r#"<RetrievePropertiesExResponse><returnval>
<objects><obj type="DistributedVirtualPortgroup">dvportgroup-1</obj>
<propSet><name>name</name><val xsi:type="xsd:string">pg</val></propSet>
<propSet><name>key</name><val xsi:type="xsd:string">dvportgroup-1</val></propSet>
<propSet><name>config.name</name><val xsi:type="xsd:string">pg</val></propSet></objects>
<objects><obj type="Network">network-7</obj>
<propSet><name>name</name><val xsi:type="xsd:string">VM Network</val></propSet>
<propSet><name>quantumLink</name><val xsi:type="xsd:string">on</val></propSet>
<propSet><name>summary.quantum</name><val xsi:type="xsd:string">on</val></propSet></objects>
</returnval></RetrievePropertiesExResponse>"#;
        let (page, skipped) = crate::xml::skipped::collect(|| {
            crate::xml::soap::decode_response::<RetrievePage<mo::Network>>(&envelope(body))
        });
        let page = page.unwrap_or_else(|e| panic!("{e:?}"));
        assert_eq!(page.objects.len(), 2);
        assert_eq!(page.objects[0].name.as_deref(), Some("pg"));
        let noted: Vec<_> = skipped
            .elements
            .iter()
            .map(|e| (e.type_name, e.element.as_str()))
            .collect();
        assert_eq!(
            noted,
            [("Network", "quantumLink"), ("Network", "summary.quantum")]
        );
        assert_eq!(skipped.total, 2);
    }

    #[test]
    fn a_page_list_is_sized_from_its_first_object_not_grown_by_doubling() {
        let objects: String = (0..100)
            .map(|i| {
                format!(
                    r#"<objects><obj type="VirtualMachine">vm-{i:03}</obj><propSet><name>name</name><val xsi:type="xsd:string">vm {i:03}</val></propSet></objects>"#
                )
            })
            .collect();
        let page = decode(&format!(
            "<RetrievePropertiesExResponse><returnval><token>t</token>{objects}</returnval></RetrievePropertiesExResponse>"
        ));
        assert_eq!(page.objects.len(), 100);
        assert_eq!(page.objects[99].name.as_deref(), Some("vm 099"));
        // Doubling would have left room for 128.
        assert!(
            (100..=110).contains(&page.objects.capacity()),
            "capacity {}",
            page.objects.capacity()
        );

        // A first object larger than the rest: the list grows by quarters.
        let objects: String = (0..100)
            .map(|i| {
                let name = if i == 0 { "a".repeat(200) } else { "b".to_string() };
                format!(
                    r#"<objects><obj type="VirtualMachine">vm-{i:03}</obj><propSet><name>name</name><val xsi:type="xsd:string">{name}</val></propSet></objects>"#
                )
            })
            .collect();
        let page = decode(&format!(
            "<RetrievePropertiesExResponse><returnval>{objects}</returnval></RetrievePropertiesExResponse>"
        ));
        assert_eq!(page.objects.len(), 100);
        assert!(
            (100..=125).contains(&page.objects.capacity()),
            "capacity {}",
            page.objects.capacity()
        );
    }

    #[test]
    fn a_tiny_first_object_cannot_make_a_page_reserve_much() {
        let mut objects: Vec<mo::VirtualMachine> = Vec::new();
        reserve_like_first(&mut objects, 1, 1 << 30);
        let reserved = objects.capacity() * std::mem::size_of::<mo::VirtualMachine>();
        assert!(reserved <= 8 << 20, "{reserved} bytes reserved");
    }

    #[test]
    fn nested_values_keep_types_declared_with_any_prefix() {
        // Go's encoder (the simulator) writes `XMLSchema-instance:type` with
        // the prefix declared on an ancestor of the value.
        let page = decode(
            r#"<RetrievePropertiesExResponse xmlns="urn:vim25"><returnval><token>7</token><objects><obj type="VirtualMachine">vm-1</obj>
<propSet><name>config.hardware.device</name><val xmlns:XMLSchema-instance="http://www.w3.org/2001/XMLSchema-instance" XMLSchema-instance:type="ArrayOfVirtualDevice"><VirtualDevice XMLSchema-instance:type="VirtualDisk"><key>2000</key><backing XMLSchema-instance:type="VirtualDiskFlatVer2BackingInfo"><fileName>[ds] a.vmdk</fileName><diskMode>persistent</diskMode></backing><capacityInKB>1024</capacityInKB></VirtualDevice><VirtualDevice XMLSchema-instance:type="VirtualVmxnet3"><key>4000</key></VirtualDevice></val></propSet>
<propSet><name>runtime.powerState</name><val xsi:type="VirtualMachinePowerState">poweredOff</val></propSet>
<propSet><name>runtime.host</name><val xsi:type="ManagedObjectReference" type="HostSystem">host-9</val></propSet>
<propSet><name>name</name><val xsi:type="xsd:string">a &amp; b</val></propSet>
<missingSet><path>guest.ipAddress</path><fault><fault xsi:type="NoPermission"><privilegeId>System.Read</privilegeId></fault><localizedMessage>no</localizedMessage></fault></missingSet>
</objects></returnval></RetrievePropertiesExResponse>"#,
        );
        assert_eq!(page.token.as_deref(), Some("7"));
        assert_eq!(page.missing.len(), 1);
        assert_eq!(page.missing[0].properties[0].path, "guest.ipAddress");
        let vm = &page.objects[0];
        assert_eq!(
            vm.mo_ref,
            ManagedObjectReference::new("VirtualMachine", "vm-1")
        );
        assert_eq!(vm.name.as_deref(), Some("a & b"));
        let runtime = vm.runtime.as_ref().unwrap();
        assert_eq!(runtime.power_state, VirtualMachinePowerState::PoweredOff);
        assert_eq!(
            runtime.host,
            Some(ManagedObjectReference::new("HostSystem", "host-9"))
        );
        let devices = &vm.config.as_ref().unwrap().hardware.device;
        assert_eq!(devices.len(), 2);
        let AnyVirtualDevice::VirtualDisk(disk) = &devices[0] else {
            panic!("{:?}", devices[0])
        };
        assert_eq!(disk.capacity_in_kb, 1024);
        assert!(matches!(
            disk.backing,
            Some(AnyVirtualDeviceBackingInfo::VirtualDiskFlatVer2BackingInfo(
                _
            ))
        ));
        assert!(matches!(devices[1], AnyVirtualDevice::VirtualVmxnet3(_)));
    }

    #[test]
    fn an_object_says_which_paths_hold_real_values() {
        // Two VMs with only `config.hardware.numCPU` and `name`; the second
        // has no name and a missing path (no permission).
        let page = decode(
            r#"<RetrievePropertiesExResponse xmlns="urn:vim25"><returnval>
<objects><obj type="VirtualMachine">vm-1</obj>
<propSet><name>config.hardware.numCPU</name><val xsi:type="xsd:int">4</val></propSet>
<propSet><name>name</name><val xsi:type="xsd:string">web</val></propSet></objects>
<objects><obj type="VirtualMachine">vm-2</obj>
<propSet><name>config.hardware.numCPU</name><val xsi:type="xsd:int">2</val></propSet>
<missingSet><path>name</path><fault><fault xsi:type="NoPermission"><privilegeId>System.Read</privilegeId></fault></fault></missingSet></objects>
<objects><obj type="VirtualMachine">vm-3</obj>
<propSet><name>config</name><val xsi:type="VirtualMachineConfigInfo"><name>db</name><hardware><numCPU>8</numCPU><memoryMB>4096</memoryMB></hardware></val></propSet>
<propSet><name>runtime.futureField</name><val xsi:type="xsd:string">x</val></propSet></objects>
</returnval></RetrievePropertiesExResponse>"#,
        );
        let [web, unnamed, db] = &page.objects[..] else {
            panic!("{:?}", page.objects)
        };
        // What the user meets: memory_mb reads 0 on a partial object, and the
        // object says it was never sent.
        let hardware = &web.config.as_ref().expect("config").hardware;
        assert_eq!((hardware.num_cpu, hardware.memory_mb), (4, 0));
        assert!(web.retrieved.contains("config.hardware.numCPU"));
        assert!(!web.retrieved.contains("config.hardware.memoryMB"));
        assert!(
            !web.retrieved.contains("config.hardware"),
            "only part of it"
        );
        assert!(!web.retrieved.contains("config"));
        assert!(web.retrieved.contains("name"));
        assert!(
            !web.retrieved.contains("nam"),
            "a prefix of a name is not a path"
        );
        let sent: Vec<&str> = web.retrieved.iter().collect();
        assert_eq!(sent, ["config.hardware.numCPU", "name"]);

        assert!(unnamed.retrieved.contains("config.hardware.numCPU"));
        assert!(!unnamed.retrieved.contains("name"), "reported missing");
        assert_eq!(unnamed.name, None);

        // A whole property holds every path below it; a path the bindings
        // do not know is not claimed.
        assert!(db.retrieved.contains("config"));
        assert!(db.retrieved.contains("config.hardware.memoryMB"));
        assert!(!db.retrieved.contains("runtime.futureField"));
        assert!(!db.retrieved.contains("runtime"));
        assert_eq!(format!("{:?}", db.retrieved), r#"{"config"}"#);
        assert!(mo::VirtualMachine::default().retrieved.is_empty());
    }

    #[test]
    fn a_value_before_its_name_and_a_wrongly_typed_value() {
        let page = decode(
            r#"<RetrievePropertiesExResponse xmlns="urn:vim25"><returnval><objects><obj type="VirtualMachine">vm-1</obj>
<propSet><val xsi:type="VirtualMachinePowerState">poweredOn</val><name>runtime.powerState</name></propSet>
</objects></returnval></RetrievePropertiesExResponse>"#,
        );
        assert_eq!(
            page.objects[0].runtime.as_ref().unwrap().power_state,
            VirtualMachinePowerState::PoweredOn
        );
        let body = envelope(
            r#"<RetrievePropertiesExResponse xmlns="urn:vim25"><returnval><objects><obj type="VirtualMachine">vm-1</obj>
<propSet><name>name</name><val xsi:type="xsd:int">5</val></propSet></objects></returnval></RetrievePropertiesExResponse>"#,
        );
        let err = crate::xml::soap::decode_response::<RetrievePage<mo::VirtualMachine>>(&body)
            .expect_err("an int is not a name");
        assert!(
            format!("{err:?}").contains("VirtualMachine.name"),
            "{err:?}"
        );
    }

    #[test]
    fn an_empty_result_has_no_objects_and_no_token() {
        let page = decode(
            r#"<RetrievePropertiesExResponse xmlns="urn:vim25"></RetrievePropertiesExResponse>"#,
        );
        assert!(page.objects.is_empty() && page.token.is_none());
    }

    #[test]
    fn paths_are_validated_and_deduplicated() {
        let paths = validate_paths_for(
            "VirtualMachine",
            &[
                "config.hardware.device",
                "config",
                "name",
                "name",
                "runtime.powerState",
            ],
        )
        .unwrap();
        assert_eq!(paths, ["config", "name", "runtime.powerState"]);
        let err = validate_paths_for("VirtualMachine", &["runtime.nope"]).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidArgument);
        assert!(err.to_string().contains("runtime.nope"));
        assert!(validate_paths_for("VirtualMachine", &[""]).is_err());
        assert!(validate_paths_for("NoSuchType", &["name"]).is_err());
    }

    #[test]
    fn typed_paths_spell_vim25_paths_and_pass_validation() {
        use crate::{mo, paths};
        let vm = paths::VirtualMachine;
        // Nested, inherited (ManagedEntity's name), a whole structure, and
        // vim25's spelling where Rust's differs.
        assert_eq!(vm.runtime().power_state().as_str(), "runtime.powerState");
        assert_eq!(vm.name().as_str(), "name");
        assert_eq!(
            vm.config().hardware().into_path().as_str(),
            "config.hardware"
        );
        assert_eq!(
            vm.config().hardware().num_cpu().as_str(),
            "config.hardware.numCPU"
        );
        assert_eq!(
            paths::HostSystem
                .summary()
                .quick_stats()
                .overall_memory_usage()
                .as_str(),
            "summary.quickStats.overallMemoryUsage"
        );
        let validated = validate_paths::<mo::VirtualMachine>(&[
            vm.runtime().power_state(),
            vm.config().hardware().into_path(),
            vm.config().hardware().num_cpu(),
        ])
        .unwrap();
        assert_eq!(validated, ["config.hardware", "runtime.powerState"]);
        // Strings are still taken, and checked.
        assert!(validate_paths::<mo::VirtualMachine>(&["name"]).is_ok());
        assert!(validate_paths::<mo::VirtualMachine>(&[String::from("nmae")]).is_err());
    }

    #[test]
    fn a_misspelt_path_says_what_was_meant() {
        let message = |path: &str| {
            validate_paths_for("VirtualMachine", &[path])
                .unwrap_err()
                .to_string()
        };
        // Letter case, a typo, an inherited property (ManagedEntity's
        // name), and several wrong segments at once.
        assert_eq!(
            message("config.hardware.numCpu"),
            "invalid property path \"config.hardware.numCpu\" for VirtualMachine: \
             VirtualHardware has no property numCpu (did you mean \"config.hardware.numCPU\"?)"
        );
        assert!(
            message("runtime.powerstate").contains("(did you mean \"runtime.powerState\"?)"),
            "{}",
            message("runtime.powerstate")
        );
        assert!(message("nmae").contains("(did you mean \"name\"?)"));
        assert!(message("confg.hardwre.memoryMb")
            .contains("(did you mean \"config.hardware.memoryMB\"?)"));
        // Nothing close: no guess.
        let far = message("runtime.somethingElse");
        assert!(!far.contains("did you mean"), "{far}");
        // Below a primitive there is nothing to suggest.
        assert!(!message("name.length").contains("did you mean"));
    }
}
