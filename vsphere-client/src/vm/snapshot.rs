//! VM snapshots: create (name, description, memory, quiesce), the snapshot
//! tree as typed values, lookup by name, tree path or id with govc's
//! `snapshot.tree` semantics, revert, remove (one, or a subtree), remove all.
//!
//! Every operation returns the [`Task`] to wait for (like
//! [`VirtualMachine::start_clone`]), so a caller can record it before
//! waiting.
//!
//! ```no_run
//! # async fn demo(client: vsphere_client::Client) -> Result<(), vsphere_client::Error> {
//! use vsphere_client::vm::snapshot::{RemoveOptions, SnapshotSpec};
//! let finder = client.finder().in_datacenter("DC0");
//! let vm = client.vm(finder.virtual_machine("web-1").await?.reference);
//! let spec = SnapshotSpec::new("before-upgrade").description("kernel 6.8").quiesce(true);
//! vm.start_create_snapshot(&spec).await?.wait().await?;
//! let tree = vm.snapshot_tree().await?;
//! for (path, snapshot) in tree.iter() {
//!     println!("{path} {} {}", snapshot.reference.value, snapshot.created);
//! }
//! // By name, by path ("base/before-upgrade") or by id ("snapshot-42");
//! // a name two snapshots share is an error naming both.
//! vm.start_revert_to_snapshot("before-upgrade", false).await?.wait().await?;
//! vm.start_remove_snapshot("before-upgrade", RemoveOptions::one()).await?.wait().await?;
//! # Ok(()) }
//! ```

use std::time::{Duration, SystemTime};

use super::VirtualMachine;
use crate::error::{Error, ErrorKind};
use crate::mo;
use crate::task::Task;
use crate::types::{
    ManagedObjectReference, VirtualMachineFileLayoutEx, VirtualMachineFileLayoutExDiskLayout,
    VirtualMachinePowerState, VirtualMachineSnapshotInfo, VirtualMachineSnapshotTree,
};
use crate::Client;
use crate::DateTime;

/// What to snapshot and how.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnapshotSpec {
    /// The snapshot's name (need not be unique on the VM; a shared name
    /// makes lookups by that name ambiguous).
    pub name: String,
    /// Its description.
    pub description: String,
    /// Include the VM's memory (a powered-on VM can then be reverted to its
    /// running state). Off by default.
    pub memory: bool,
    /// Quiesce the guest's file systems first (needs VMware tools). Off by
    /// default.
    pub quiesce: bool,
}

impl SnapshotSpec {
    /// A snapshot named `name`, without memory or quiescing.
    pub fn new(name: impl Into<String>) -> Self {
        SnapshotSpec {
            name: name.into(),
            description: String::new(),
            memory: false,
            quiesce: false,
        }
    }
    /// Sets the description.
    pub fn description(mut self, description: impl Into<String>) -> Self {
        self.description = description.into();
        self
    }
    /// Includes the memory or not.
    pub fn memory(mut self, memory: bool) -> Self {
        self.memory = memory;
        self
    }
    /// Quiesces the guest or not.
    pub fn quiesce(mut self, quiesce: bool) -> Self {
        self.quiesce = quiesce;
        self
    }
}

/// How much a removal takes away.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RemoveOptions {
    /// Remove the snapshot's children (its whole subtree) too; otherwise
    /// they move up to its parent.
    pub children: bool,
    /// Consolidate the disks: merge the removed snapshots' delta disks into
    /// their parents (vCenter's default, and what frees the space).
    pub consolidate: bool,
}

impl RemoveOptions {
    /// The snapshot alone, consolidating.
    pub fn one() -> Self {
        RemoveOptions {
            children: false,
            consolidate: true,
        }
    }
    /// The snapshot and every snapshot under it, consolidating.
    pub fn subtree() -> Self {
        RemoveOptions {
            children: true,
            consolidate: true,
        }
    }
    /// Sets whether disks are consolidated.
    pub fn consolidate(mut self, consolidate: bool) -> Self {
        self.consolidate = consolidate;
        self
    }
}

/// One snapshot of the tree.
#[derive(Debug, Clone, PartialEq)]
pub struct Snapshot {
    /// The snapshot's managed object (`VirtualMachineSnapshot:snapshot-42`):
    /// its id for [`SnapshotTree::find`] is the reference's value.
    pub reference: ManagedObjectReference,
    /// vCenter's numeric id of the snapshot, unique within the VM (not sent
    /// by old servers).
    pub id: Option<i32>,
    /// The name.
    pub name: String,
    /// The description.
    pub description: String,
    /// When it was taken, as the server wrote it (`xsd:dateTime`).
    pub created: DateTime,
    /// The VM's power state when it was taken (powered on with memory: a
    /// revert resumes the VM).
    pub power_state: VirtualMachinePowerState,
    /// Whether the guest was quiesced.
    pub quiesced: bool,
    /// The snapshots taken from this one.
    pub children: Vec<Snapshot>,
}

impl Snapshot {
    fn from_vim(tree: &VirtualMachineSnapshotTree) -> Snapshot {
        Snapshot {
            reference: tree.snapshot.clone(),
            id: tree.id,
            name: tree.name.clone(),
            description: tree.description.clone(),
            created: tree.create_time.clone(),
            power_state: tree.state.clone(),
            quiesced: tree.quiesced,
            children: tree
                .child_snapshot_list
                .iter()
                .map(Snapshot::from_vim)
                .collect(),
        }
    }

    /// When it was taken, if the server's time parses (`None` otherwise).
    pub fn created_at(&self) -> Option<SystemTime> {
        parse_datetime(self.created.as_str()).map(|t| t.system_time())
    }
}

/// A VM's snapshots as a tree, with the current one and, when read, the
/// file layout that gives each snapshot's size.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SnapshotTree {
    /// The snapshots without a parent, in the server's order.
    pub roots: Vec<Snapshot>,
    /// The snapshot the VM runs from (its next snapshot's parent); `None`
    /// when the VM has no snapshot or runs from none (after its current one
    /// was removed with children, say).
    pub current: Option<ManagedObjectReference>,
    layout: Option<VirtualMachineFileLayoutEx>,
}

impl SnapshotTree {
    /// The tree from a VM's `snapshot` property and, for sizes, its
    /// `layoutEx` property.
    pub fn from_vim(
        info: Option<&VirtualMachineSnapshotInfo>,
        layout: Option<VirtualMachineFileLayoutEx>,
    ) -> SnapshotTree {
        match info {
            Some(info) => SnapshotTree {
                roots: info
                    .root_snapshot_list
                    .iter()
                    .map(Snapshot::from_vim)
                    .collect(),
                current: info.current_snapshot.clone(),
                layout,
            },
            None => SnapshotTree {
                layout,
                ..Default::default()
            },
        }
    }

    /// Whether the VM has no snapshot.
    pub fn is_empty(&self) -> bool {
        self.roots.is_empty()
    }

    /// How many snapshots the VM has.
    pub fn len(&self) -> usize {
        self.walk().len()
    }

    /// Every snapshot with its tree path, depth first (a parent before its
    /// children), in the server's order.
    pub fn iter(&self) -> impl Iterator<Item = (String, &Snapshot)> + '_ {
        self.walk().into_iter().map(|(path, s, _)| (path, s))
    }

    fn walk(&self) -> Vec<(String, &Snapshot, Option<&Snapshot>)> {
        let mut out = Vec::new();
        let mut pending: Vec<(String, &Snapshot, Option<&Snapshot>)> = self
            .roots
            .iter()
            .rev()
            .map(|s| (s.name.clone(), s, None))
            .collect();
        while let Some((path, snapshot, parent)) = pending.pop() {
            for child in snapshot.children.iter().rev() {
                pending.push((format!("{path}/{}", child.name), child, Some(snapshot)));
            }
            out.push((path, snapshot, parent));
        }
        out
    }

    /// The current snapshot (see [`current`](Self::current)), if it is in
    /// the tree.
    pub fn current_snapshot(&self) -> Option<&Snapshot> {
        let current = self.current.as_ref()?;
        self.get(current)
    }

    /// The snapshot `reference`, if it is in the tree.
    pub fn get(&self, reference: &ManagedObjectReference) -> Option<&Snapshot> {
        self.walk()
            .into_iter()
            .find(|(_, s, _)| s.reference == *reference)
            .map(|(_, s, _)| s)
    }

    /// The parent of the snapshot `reference` (`None` for a root or a
    /// snapshot not in the tree).
    pub fn parent_of(&self, reference: &ManagedObjectReference) -> Option<&Snapshot> {
        self.walk()
            .into_iter()
            .find(|(_, s, _)| s.reference == *reference)
            .and_then(|(_, _, parent)| parent)
    }

    /// Every snapshot `name` designates, as govc's `snapshot.*` commands
    /// read it: a snapshot's name, its id (the reference's value,
    /// `snapshot-42`), or its tree path (`base/child`, names from its root
    /// down). Each snapshot once, in tree order.
    pub fn find_all(&self, name: &str) -> Vec<(String, &Snapshot)> {
        self.walk()
            .into_iter()
            .filter(|(path, s, _)| s.name == name || s.reference.value == name || path == name)
            .map(|(path, s, _)| (path, s))
            .collect()
    }

    /// The one snapshot `name` designates (see [`find_all`](Self::find_all)).
    /// No match is an error of kind [`ErrorKind::NotFound`]; a name that
    /// several snapshots share is an error of kind
    /// [`ErrorKind::InvalidArgument`] naming each of them, by path and id.
    pub fn find(&self, name: &str) -> Result<&Snapshot, Error> {
        if self.is_empty() {
            return Err(Error::new(
                ErrorKind::NotFound,
                format!("snapshot {name:?} not found: the VM has no snapshots"),
            ));
        }
        let mut found = self.find_all(name);
        match found.len() {
            0 => Err(Error::new(
                ErrorKind::NotFound,
                format!("snapshot {name:?} not found"),
            )),
            1 => Ok(found.remove(0).1),
            n => {
                let matches: Vec<String> = found
                    .iter()
                    .map(|(path, s)| format!("{path} ({})", s.reference.value))
                    .collect();
                Err(Error::new(
                    ErrorKind::InvalidArgument,
                    format!(
                        "snapshot {name:?} is ambiguous: {n} snapshots match: {}; give a tree path or an id",
                        matches.join(", ")
                    ),
                ))
            }
        }
    }

    /// The snapshot's size in bytes, as vCenter's file layout tells it: its
    /// state file, its memory file, and the delta disks written while it
    /// was the newest (its disk chain less its parent's; a root's chain is
    /// the base disks, not counted). The current snapshot also counts the
    /// delta disks the VM writes now. `None` when the layout was not read
    /// or does not list the snapshot (servers may omit it). Unlike govc's
    /// `-s`, the memory file (`.vmem`) is counted.
    pub fn size(&self, reference: &ManagedObjectReference) -> Option<i64> {
        let layout = self.layout.as_ref()?;
        let own = layout.snapshot.iter().find(|s| s.key == *reference)?;
        let parent_chain: Vec<i32> = match self.parent_of(reference) {
            Some(parent) => layout
                .snapshot
                .iter()
                .find(|s| s.key == parent.reference)
                .map(|s| disk_files(&s.disk))
                .unwrap_or_default(),
            None => disk_files(&own.disk),
        };
        let mut keys: Vec<i32> = vec![own.data_key];
        keys.extend(own.memory_key.filter(|k| *k >= 0));
        keys.extend(
            disk_files(&own.disk)
                .into_iter()
                .filter(|k| !parent_chain.contains(k)),
        );
        if self.current.as_ref() == Some(reference) {
            let in_snapshots: Vec<i32> = layout
                .snapshot
                .iter()
                .flat_map(|s| disk_files(&s.disk))
                .collect();
            keys.extend(
                disk_files(&layout.disk)
                    .into_iter()
                    .filter(|k| !in_snapshots.contains(k)),
            );
        }
        keys.sort_unstable();
        keys.dedup();
        Some(
            layout
                .file
                .iter()
                .filter(|f| keys.contains(&f.key))
                .map(|f| f.size.max(0))
                .sum(),
        )
    }
}

/// The file keys of every disk chain link (descriptor and extent files).
fn disk_files(disks: &[VirtualMachineFileLayoutExDiskLayout]) -> Vec<i32> {
    disks
        .iter()
        .flat_map(|d| d.chain.iter())
        .flat_map(|unit| unit.file_key.iter().copied())
        .collect()
}

/// A snapshot to act on by reference (what [`Snapshot::reference`] or a
/// create task's result holds), without reading the tree first.
#[derive(Clone)]
pub struct VirtualMachineSnapshot {
    client: Client,
    reference: ManagedObjectReference,
}

impl std::fmt::Debug for VirtualMachineSnapshot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("VirtualMachineSnapshot")
            .field(&self.reference)
            .finish()
    }
}

impl Client {
    /// The snapshot `reference` (a `VirtualMachineSnapshot`).
    pub fn snapshot(&self, reference: ManagedObjectReference) -> VirtualMachineSnapshot {
        VirtualMachineSnapshot {
            client: self.clone(),
            reference,
        }
    }
}

impl VirtualMachineSnapshot {
    /// The snapshot's reference.
    pub fn reference(&self) -> &ManagedObjectReference {
        &self.reference
    }

    /// Starts reverting the VM to this snapshot (it becomes the current
    /// one); `suppress_power_on` leaves the VM off even if the snapshot was
    /// taken running.
    pub async fn start_revert(&self, suppress_power_on: bool) -> Result<Task, Error> {
        let task = self
            .client
            .vim()
            .revert_to_snapshot_task(&self.reference, None, Some(suppress_power_on))
            .await?;
        Ok(self.client.task(task))
    }

    /// Starts removing this snapshot (and its subtree, if asked).
    pub async fn start_remove(&self, options: RemoveOptions) -> Result<Task, Error> {
        let task = self
            .client
            .vim()
            .remove_snapshot_task(&self.reference, options.children, Some(options.consolidate))
            .await?;
        Ok(self.client.task(task))
    }
}

impl VirtualMachine {
    /// The VM's snapshot tree with the file layout for sizes (one call).
    pub async fn snapshot_tree(&self) -> Result<SnapshotTree, Error> {
        let vm = self
            .client
            .properties::<mo::VirtualMachine>(&["snapshot", "layoutEx"])?
            .get(&self.reference)
            .await?;
        Ok(SnapshotTree::from_vim(vm.snapshot.as_ref(), vm.layout_ex))
    }

    async fn snapshot_tree_only(&self) -> Result<SnapshotTree, Error> {
        let vm = self
            .client
            .properties::<mo::VirtualMachine>(&["snapshot"])?
            .get(&self.reference)
            .await?;
        Ok(SnapshotTree::from_vim(vm.snapshot.as_ref(), None))
    }

    /// Starts taking a snapshot; the task's result is the new snapshot's
    /// reference ([`crate::task::task_result_reference`]), and it becomes
    /// the VM's current snapshot.
    pub async fn start_create_snapshot(&self, spec: &SnapshotSpec) -> Result<Task, Error> {
        if spec.name.trim().is_empty() {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                "a snapshot needs a name",
            ));
        }
        let task = self
            .client
            .vim()
            .create_snapshot_task(
                &self.reference,
                &spec.name,
                Some(&spec.description),
                spec.memory,
                spec.quiesce,
            )
            .await?;
        Ok(self.client.task(task))
    }

    /// The one snapshot `name` designates (a name, a tree path or an id:
    /// [`SnapshotTree::find`]), as a handle (one call).
    pub async fn find_snapshot(&self, name: &str) -> Result<VirtualMachineSnapshot, Error> {
        let tree = self.snapshot_tree_only().await?;
        let found = tree
            .find(name)
            .map_err(|err| Error::new(err.kind(), format!("{}: {err}", self.reference)))?;
        Ok(self.client.snapshot(found.reference.clone()))
    }

    /// Starts reverting to the snapshot `name` designates (two calls: the
    /// tree, then the revert).
    pub async fn start_revert_to_snapshot(
        &self,
        name: &str,
        suppress_power_on: bool,
    ) -> Result<Task, Error> {
        self.find_snapshot(name)
            .await?
            .start_revert(suppress_power_on)
            .await
    }

    /// Starts reverting to the current snapshot (a VM without one gets a
    /// `NotFound` fault from the server).
    pub async fn start_revert_to_current_snapshot(
        &self,
        suppress_power_on: bool,
    ) -> Result<Task, Error> {
        let task = self
            .client
            .vim()
            .revert_to_current_snapshot_task(&self.reference, None, Some(suppress_power_on))
            .await?;
        Ok(self.client.task(task))
    }

    /// Starts removing the snapshot `name` designates (and its subtree, if
    /// asked); two calls.
    pub async fn start_remove_snapshot(
        &self,
        name: &str,
        options: RemoveOptions,
    ) -> Result<Task, Error> {
        self.find_snapshot(name).await?.start_remove(options).await
    }

    /// Starts removing every snapshot of the VM.
    pub async fn start_remove_all_snapshots(&self, consolidate: bool) -> Result<Task, Error> {
        let task = self
            .client
            .vim()
            .remove_all_snapshots_task(&self.reference, Some(consolidate), None)
            .await?;
        Ok(self.client.task(task))
    }
}

/// An `xsd:dateTime` read into its parts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ParsedDateTime {
    /// Seconds since the Unix epoch (UTC).
    pub unix_seconds: i64,
    /// Nanoseconds within the second.
    pub nanos: u32,
    /// The offset from UTC the value was written in, in seconds (`None`:
    /// no zone given, read as UTC).
    pub offset_seconds: Option<i32>,
}

impl ParsedDateTime {
    fn system_time(&self) -> SystemTime {
        let within = Duration::from_nanos(u64::from(self.nanos));
        if self.unix_seconds >= 0 {
            SystemTime::UNIX_EPOCH + Duration::from_secs(self.unix_seconds as u64) + within
        } else {
            SystemTime::UNIX_EPOCH - Duration::from_secs(self.unix_seconds.unsigned_abs()) + within
        }
    }
}

/// Reads `YYYY-MM-DDThh:mm:ss[.fraction][Z|(+|-)hh:mm]`; `None` for
/// anything else.
pub(crate) fn parse_datetime(text: &str) -> Option<ParsedDateTime> {
    let text = text.trim();
    let b = text.as_bytes();
    let digits = |range: std::ops::Range<usize>| -> Option<i64> {
        let part = b.get(range)?;
        if part.is_empty() || !part.iter().all(u8::is_ascii_digit) {
            return None;
        }
        Some(part.iter().fold(0i64, |n, d| n * 10 + i64::from(d - b'0')))
    };
    if b.len() < 19
        || b[4] != b'-'
        || b[7] != b'-'
        || b[10] != b'T'
        || b[13] != b':'
        || b[16] != b':'
    {
        return None;
    }
    let (year, month, day) = (digits(0..4)?, digits(5..7)?, digits(8..10)?);
    let (hour, minute, second) = (digits(11..13)?, digits(14..16)?, digits(17..19)?);
    if !(1..=12).contains(&month)
        || day < 1
        || day > days_in_month(year, month)
        || hour > 23
        || minute > 59
        || second > 60
    {
        return None;
    }
    let mut rest = &text[19..];
    let mut nanos = 0u32;
    if let Some(fraction) = rest.strip_prefix('.') {
        let end = fraction
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(fraction.len());
        if end == 0 {
            return None;
        }
        let kept = &fraction[..end.min(9)];
        let value: u32 = kept.parse().ok()?;
        nanos = value * 10u32.pow(9 - kept.len() as u32);
        rest = &fraction[end..];
    }
    let offset_seconds = match rest {
        "" => None,
        "Z" => Some(0),
        zone => {
            let zb = zone.as_bytes();
            if zb.len() != 6 || zb[3] != b':' || !(zb[0] == b'+' || zb[0] == b'-') {
                return None;
            }
            if ![1, 2, 4, 5].iter().all(|i| zb[*i].is_ascii_digit()) {
                return None;
            }
            let hours = i32::from(zb[1] - b'0') * 10 + i32::from(zb[2] - b'0');
            let minutes = i32::from(zb[4] - b'0') * 10 + i32::from(zb[5] - b'0');
            if hours > 23 || minutes > 59 {
                return None;
            }
            let magnitude = hours * 3600 + minutes * 60;
            Some(if zb[0] == b'-' { -magnitude } else { magnitude })
        }
    };
    let days = days_from_civil(year, month, day);
    let local = days * 86_400 + hour * 3600 + minute * 60 + second;
    Some(ParsedDateTime {
        unix_seconds: local - i64::from(offset_seconds.unwrap_or(0)),
        nanos,
        offset_seconds,
    })
}

fn is_leap(year: i64) -> bool {
    (year % 4 == 0 && year % 100 != 0) || year % 400 == 0
}

fn days_in_month(year: i64, month: i64) -> i64 {
    match month {
        2 if is_leap(year) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days from 1970-01-01 to the given date of the proleptic Gregorian
/// calendar (negative before).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    // Count from March, so the leap day ends a year.
    let (y, m) = if month <= 2 {
        (year - 1, month + 9)
    } else {
        (year, month - 3)
    };
    let era = y.div_euclid(400);
    let year_of_era = y - era * 400;
    let day_of_year = (153 * m + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{
        VirtualMachineFileLayoutExDiskUnit, VirtualMachineFileLayoutExFileInfo,
        VirtualMachineFileLayoutExSnapshotLayout,
    };

    fn node(
        id: i32,
        name: &str,
        children: Vec<VirtualMachineSnapshotTree>,
    ) -> VirtualMachineSnapshotTree {
        VirtualMachineSnapshotTree {
            snapshot: ManagedObjectReference::new(
                "VirtualMachineSnapshot",
                format!("snapshot-{id}"),
            ),
            vm: ManagedObjectReference::new("VirtualMachine", "vm-1"),
            name: name.to_string(),
            id: Some(id),
            create_time: DateTime::new("2026-12-02T06:55:39.5Z"),
            child_snapshot_list: children,
            ..Default::default()
        }
    }

    fn reference(id: i32) -> ManagedObjectReference {
        ManagedObjectReference::new("VirtualMachineSnapshot", format!("snapshot-{id}"))
    }

    /// base(1) -> [app(2) -> [app(3)], db(4)]; other(5) -> [app(6)]
    fn tree() -> SnapshotTree {
        let info = VirtualMachineSnapshotInfo {
            current_snapshot: Some(reference(4)),
            root_snapshot_list: vec![
                node(
                    1,
                    "base",
                    vec![
                        node(2, "app", vec![node(3, "app", vec![])]),
                        node(4, "db", vec![]),
                    ],
                ),
                node(5, "other", vec![node(6, "app", vec![])]),
            ],
        };
        SnapshotTree::from_vim(Some(&info), None)
    }

    #[test]
    fn paths_depth_first_in_server_order() {
        let tree = tree();
        let paths: Vec<String> = tree.iter().map(|(p, _)| p).collect();
        assert_eq!(
            paths,
            [
                "base",
                "base/app",
                "base/app/app",
                "base/db",
                "other",
                "other/app"
            ]
        );
        assert_eq!(tree.len(), 6);
        assert_eq!(tree.current_snapshot().map(|s| s.name.as_str()), Some("db"));
        assert_eq!(tree.parent_of(&reference(3)).map(|s| s.id), Some(Some(2)));
        assert!(tree.parent_of(&reference(5)).is_none());
    }

    #[test]
    fn find_by_name_path_or_id_and_ambiguity_names_the_matches() {
        let tree = tree();
        assert_eq!(tree.find("db").unwrap().id, Some(4));
        assert_eq!(tree.find("base/app/app").unwrap().id, Some(3));
        assert_eq!(tree.find("other/app").unwrap().id, Some(6));
        assert_eq!(tree.find("snapshot-2").unwrap().name, "app");
        let err = tree.find("app").unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidArgument);
        assert_eq!(
            err.to_string(),
            "snapshot \"app\" is ambiguous: 3 snapshots match: base/app (snapshot-2), \
             base/app/app (snapshot-3), other/app (snapshot-6); give a tree path or an id"
        );
        // "base/app" is the path of snapshot-2 only.
        assert_eq!(tree.find("base/app").unwrap().id, Some(2));
        let err = tree.find("nope").unwrap_err();
        assert_eq!(err.kind(), ErrorKind::NotFound);
        let empty = SnapshotTree::default();
        assert!(empty
            .find("db")
            .unwrap_err()
            .to_string()
            .contains("no snapshots"));
    }

    fn file(key: i32, type_: &str, size: i64) -> VirtualMachineFileLayoutExFileInfo {
        VirtualMachineFileLayoutExFileInfo {
            key,
            name: format!("[ds] vm/file-{key}"),
            type_: type_.to_string(),
            size,
            ..Default::default()
        }
    }

    fn chain(keys: &[&[i32]]) -> Vec<VirtualMachineFileLayoutExDiskLayout> {
        vec![VirtualMachineFileLayoutExDiskLayout {
            key: 2000,
            chain: keys
                .iter()
                .map(|k| VirtualMachineFileLayoutExDiskUnit {
                    file_key: k.to_vec(),
                })
                .collect(),
            ..Default::default()
        }]
    }

    #[test]
    fn sizes_count_state_memory_and_own_deltas() {
        // base disk (1, 2), snapshot s1 (data 10, memory 11) on it; delta
        // (3, 4) written after s1, s2 (data 12) on it; the VM now writes
        // delta (5, 6).
        let layout = VirtualMachineFileLayoutEx {
            file: vec![
                file(1, "diskDescriptor", 1_000),
                file(2, "diskExtent", 10_000_000),
                file(3, "diskDescriptor", 1_000),
                file(4, "diskExtent", 300_000),
                file(5, "diskDescriptor", 1_000),
                file(6, "diskExtent", 40_000),
                file(10, "snapshotData", 20_000),
                file(11, "snapshotMemory", 1_000_000),
                file(12, "snapshotData", 30_000),
            ],
            disk: chain(&[&[1, 2], &[3, 4], &[5, 6]]),
            snapshot: vec![
                VirtualMachineFileLayoutExSnapshotLayout {
                    key: reference(1),
                    data_key: 10,
                    memory_key: Some(11),
                    disk: chain(&[&[1, 2]]),
                },
                VirtualMachineFileLayoutExSnapshotLayout {
                    key: reference(2),
                    data_key: 12,
                    memory_key: Some(-1),
                    disk: chain(&[&[1, 2], &[3, 4]]),
                },
            ],
            ..Default::default()
        };
        let info = VirtualMachineSnapshotInfo {
            current_snapshot: Some(reference(2)),
            root_snapshot_list: vec![node(1, "s1", vec![node(2, "s2", vec![])])],
        };
        let tree = SnapshotTree::from_vim(Some(&info), Some(layout));
        assert_eq!(tree.size(&reference(1)), Some(20_000 + 1_000_000));
        assert_eq!(tree.size(&reference(2)), Some(30_000 + 301_000 + 41_000));
        assert_eq!(tree.size(&reference(9)), None);
        assert_eq!(SnapshotTree::default().size(&reference(1)), None);
    }

    #[test]
    fn datetimes() {
        let t = parse_datetime("2026-12-02T06:55:39.123456789Z").unwrap();
        assert_eq!(t.unix_seconds, 1_796_194_539);
        assert_eq!((t.nanos, t.offset_seconds), (123_456_789, Some(0)));
        let t = parse_datetime("2026-12-02T08:55:39+02:00").unwrap();
        assert_eq!(
            (t.unix_seconds, t.offset_seconds),
            (1_796_194_539, Some(7200))
        );
        assert_eq!(
            parse_datetime("1970-01-01T00:00:00").unwrap().unix_seconds,
            0
        );
        assert_eq!(
            parse_datetime("2000-02-29T00:00:00Z").unwrap().unix_seconds,
            951_782_400
        );
        assert_eq!(
            parse_datetime("1969-12-31T23:59:59Z").unwrap().unix_seconds,
            -1
        );
        for bad in [
            "",
            "2026-12-02",
            "2026-13-02T00:00:00Z",
            "2026-02-30T00:00:00Z",
            "2026-12-02T24:00:00Z",
            "2026-12-02T06:55:39.Z",
            "2026-12-02T06:55:39+2:00",
            "2026-12-02T06:55:39+01:+5",
            "2026-12-02T06:55:39 junk",
            "2026-12-02T06:55:3\u{e9}",
        ] {
            assert_eq!(parse_datetime(bad), None, "{bad:?}");
        }
        let created = Snapshot::from_vim(&node(1, "a", vec![]));
        assert_eq!(
            created.created_at(),
            Some(SystemTime::UNIX_EPOCH + Duration::from_millis(1_796_194_539_500))
        );
    }
}
