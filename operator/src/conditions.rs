//! Conditions per Kubernetes conventions: one entry per `type`, and
//! `lastTransitionTime` moves only when `status` changes, so recomputing the
//! same state yields an identical status and no write.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

pub const READY: &str = "Ready";
pub const SCHEDULED: &str = "Scheduled";
/// Whether a provisioned VM has the CPUs and memory its spec asks for.
pub const RECONFIGURED: &str = "Reconfigured";
/// A deleted object that is kept for a while (a Provider still in use).
pub const DELETING: &str = "Deleting";
/// A VSphereMachine's IP pool claims against its spec (a pool changed or
/// removed after the clone: the VM keeps the address it was cloned with).
pub const IP_ADDRESSES_UP_TO_DATE: &str = "IPAddressesUpToDate";

/// Condition status values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    True,
    False,
    Unknown,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::True => "True",
            Status::False => "False",
            Status::Unknown => "Unknown",
        }
    }
}

/// A condition as computed by a reconcile, before timestamps.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Observed {
    pub type_: &'static str,
    pub status: Status,
    pub reason: String,
    pub message: String,
}

impl Observed {
    pub fn new(
        type_: &'static str,
        status: Status,
        reason: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        Observed {
            type_,
            status,
            reason: reason.into(),
            message: message.into(),
        }
    }
}

/// Put `observed` into `conditions`, keeping the previous `lastTransitionTime`
/// unless the status changed. Returns whether the status changed (a transition
/// worth an event); a first appearance counts as a transition.
pub fn set(
    conditions: &mut Vec<Condition>,
    observed: Observed,
    generation: Option<i64>,
    now: &Time,
) -> bool {
    match conditions.iter_mut().find(|c| c.type_ == observed.type_) {
        Some(existing) => {
            let transitioned = existing.status != observed.status.as_str();
            if transitioned {
                existing.last_transition_time = now.clone();
                existing.status = observed.status.as_str().to_string();
            }
            existing.reason = observed.reason;
            existing.message = observed.message;
            existing.observed_generation = generation;
            transitioned
        }
        None => {
            conditions.push(Condition {
                type_: observed.type_.to_string(),
                status: observed.status.as_str().to_string(),
                reason: observed.reason,
                message: observed.message,
                observed_generation: generation,
                last_transition_time: now.clone(),
            });
            true
        }
    }
}

pub fn find<'a>(conditions: &'a [Condition], type_: &str) -> Option<&'a Condition> {
    conditions.iter().find(|c| c.type_ == type_)
}

pub fn is_true(conditions: &[Condition], type_: &str) -> bool {
    find(conditions, type_).is_some_and(|c| c.status == "True")
}

pub fn now() -> Time {
    Time(k8s_openapi::jiff::Timestamp::now())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(seconds: i64) -> Time {
        Time(k8s_openapi::jiff::Timestamp::from_second(seconds).unwrap())
    }

    #[test]
    fn transition_time_only_moves_on_status_change() {
        let mut conditions = Vec::new();
        assert!(set(
            &mut conditions,
            Observed::new(READY, Status::False, "A", "a"),
            Some(1),
            &at(10)
        ));
        assert_eq!(conditions[0].last_transition_time, at(10));

        // Same status, new reason and message: no transition, time kept.
        assert!(!set(
            &mut conditions,
            Observed::new(READY, Status::False, "B", "b"),
            Some(2),
            &at(20)
        ));
        assert_eq!(conditions[0].last_transition_time, at(10));
        assert_eq!(conditions[0].reason, "B");
        assert_eq!(conditions[0].observed_generation, Some(2));

        assert!(set(
            &mut conditions,
            Observed::new(READY, Status::True, "C", "c"),
            Some(2),
            &at(30)
        ));
        assert_eq!(conditions[0].last_transition_time, at(30));
        assert_eq!(conditions.len(), 1);
    }

    #[test]
    fn recomputing_the_same_condition_changes_nothing() {
        let mut conditions = Vec::new();
        set(
            &mut conditions,
            Observed::new(SCHEDULED, Status::True, "Scheduled", "on x"),
            Some(1),
            &at(10),
        );
        let before = conditions.clone();
        set(
            &mut conditions,
            Observed::new(SCHEDULED, Status::True, "Scheduled", "on x"),
            Some(1),
            &at(99),
        );
        assert_eq!(before, conditions);
    }
}
