//! VM snapshots at the boundary: the facts of a VM's snapshots and the
//! operations on them ([`Snapshots`], a supertrait of every session). Like
//! the VM operations, each started one returns its task's reference at once,
//! so it is recorded before it is waited for.

use std::future::Future;

use super::{Error, Machines};

/// One snapshot of a VM, as vCenter reports it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SnapshotFacts {
    /// Managed object reference value (`snapshot-42`).
    pub mo_ref: String,
    pub name: String,
    pub description: String,
    /// When it was taken (`xsd:dateTime`, as vCenter wrote it).
    pub created: String,
    /// Its files in bytes (state, memory, own delta disks), when vCenter
    /// reports the VM's file layout.
    pub size_bytes: Option<i64>,
    /// The VM runs from it (its next snapshot's parent).
    pub current: bool,
}

/// A snapshot to take.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SnapshotRequest {
    pub name: String,
    pub description: String,
    pub memory: bool,
    pub quiesce: bool,
}

/// Snapshot operations of one Provider's session.
pub trait Snapshots: Machines {
    /// Every snapshot of the VM `vm`, parents before children; `None` when
    /// the VM is gone. Always vCenter's own answer (never a cache).
    fn snapshots(
        &self,
        vm: &str,
    ) -> impl Future<Output = Result<Option<Vec<SnapshotFacts>>, Error>> + Send;

    /// Starts taking a snapshot of `vm`; the task's result is the snapshot.
    fn start_create_snapshot(
        &self,
        vm: &str,
        request: &SnapshotRequest,
    ) -> impl Future<Output = Result<String, Error>> + Send;

    /// Starts reverting the snapshot's VM to it (the VM powered as it was
    /// when the snapshot was taken).
    fn start_revert_snapshot(
        &self,
        snapshot: &str,
    ) -> impl Future<Output = Result<String, Error>> + Send;

    /// Starts removing the snapshot alone (its children move up to its
    /// parent), consolidating its disks.
    fn start_remove_snapshot(
        &self,
        snapshot: &str,
    ) -> impl Future<Output = Result<String, Error>> + Send;
}
