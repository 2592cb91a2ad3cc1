//! Retention (pure): which of a VirtualMachine's VMSnapshots its
//! `spec.snapshotRetention` lets go. Only VMSnapshot objects are counted and
//! chosen, so a snapshot made in vCenter by hand is never touched; deleting
//! a chosen object lets its finalizer remove its vCenter snapshot.
//!
//! Counted: the VM's VMSnapshots that are Ready (a snapshot still being
//! taken, or lost, is neither counted nor chosen) and not being deleted,
//! newest first by the time vCenter took them.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::ResourceExt;

use crate::api::{parse_interval, SnapshotRetention, VMSnapshot};
use crate::conditions::{self, READY};

/// The names of the VMSnapshots of VirtualMachine `vm` (in `namespace`)
/// that `policy` drops at `now`, oldest first; or why the policy is unusable.
pub fn expired(
    policy: &SnapshotRetention,
    namespace: &str,
    vm: &str,
    snapshots: &[VMSnapshot],
    now: &Time,
) -> Result<Vec<String>, String> {
    let max_age = match policy.max_age.as_deref() {
        Some(text) => {
            Some(parse_interval(text).map_err(|e| format!("spec.snapshotRetention.maxAge: {e}"))?)
        }
        None => None,
    };
    let mut counted: Vec<(&Time, String)> = snapshots
        .iter()
        .filter(|s| {
            s.namespace().as_deref() == Some(namespace)
                && s.spec.vm_ref.name == vm
                && s.metadata.deletion_timestamp.is_none()
                && conditions::is_true(
                    s.status
                        .as_ref()
                        .map(|x| x.conditions.as_slice())
                        .unwrap_or_default(),
                    READY,
                )
        })
        .filter_map(|s| {
            let taken = s.status.as_ref()?.creation_time.as_ref()?;
            Some((taken, s.name_any()))
        })
        .collect();
    // Newest first; the name breaks ties, so every run chooses the same.
    counted.sort_by(|a, b| b.cmp(a));
    let keep = policy.keep_last.map_or(usize::MAX, |n| n as usize);
    let mut dropped: Vec<(&Time, String)> = counted
        .into_iter()
        .enumerate()
        .filter(|(i, (taken, _))| {
            *i >= keep
                || max_age.is_some_and(|age| {
                    let seconds = now.0.as_second() - taken.0.as_second();
                    seconds > 0 && seconds as u64 > age.as_secs()
                })
        })
        .map(|(_, x)| x)
        .collect();
    dropped.reverse();
    Ok(dropped.into_iter().map(|(_, name)| name).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::VMSnapshotStatus;
    use crate::conditions::{Observed, Status};
    use crate::controllers::vmsnapshot::step::{parse_time, tests::snapshot};

    fn ready(name: &str, vm: &str, taken: &str) -> VMSnapshot {
        let mut s = snapshot(name);
        s.spec.vm_ref.name = vm.into();
        let mut status = VMSnapshotStatus {
            creation_time: parse_time(taken),
            ..Default::default()
        };
        conditions::set(
            &mut status.conditions,
            Observed::new(READY, Status::True, "Created", "ok"),
            None,
            &conditions::now(),
        );
        s.status = Some(status);
        s
    }

    fn now() -> Time {
        parse_time("2026-12-10T00:00:00Z").expect("time")
    }

    #[test]
    fn keep_last_drops_the_oldest_of_this_vm_only() {
        let snapshots = vec![
            ready("mon", "web", "2026-12-07T00:00:00Z"),
            ready("wed", "web", "2026-12-09T00:00:00Z"),
            ready("tue", "web", "2026-12-08T00:00:00Z"),
            ready("other-vm", "db", "2026-12-01T00:00:00Z"),
        ];
        let policy = SnapshotRetention {
            keep_last: Some(2),
            max_age: None,
        };
        assert_eq!(
            expired(&policy, "ns", "web", &snapshots, &now()),
            Ok(vec!["mon".to_string()])
        );
        let policy = SnapshotRetention {
            keep_last: Some(1),
            max_age: None,
        };
        assert_eq!(
            expired(&policy, "ns", "web", &snapshots, &now()),
            Ok(vec!["mon".to_string(), "tue".to_string()])
        );
    }

    #[test]
    fn max_age_drops_the_old_ones_and_not_ready_or_deleting_ones_are_left_alone() {
        let mut taking = snapshot("taking");
        taking.status = None;
        let mut deleting = ready("deleting", "web", "2026-12-01T00:00:00Z");
        deleting.metadata.deletion_timestamp = Some(conditions::now());
        let snapshots = vec![
            ready("old", "web", "2026-12-08T00:00:00Z"),
            ready("new", "web", "2026-12-09T12:00:00Z"),
            taking,
            deleting,
        ];
        let policy = SnapshotRetention {
            keep_last: None,
            max_age: Some("36h".into()),
        };
        assert_eq!(
            expired(&policy, "ns", "web", &snapshots, &now()),
            Ok(vec!["old".to_string()])
        );
        let bad = SnapshotRetention {
            keep_last: None,
            max_age: Some("a week".into()),
        };
        assert!(expired(&bad, "ns", "web", &snapshots, &now())
            .unwrap_err()
            .contains("maxAge"));
    }
}
