//! Per-method call counters of a [`Client`](crate::Client): how many SOAP
//! operations it invoked and how many failed, for tests that bound round trips
//! and for metrics exporters.

use std::collections::{BTreeMap, HashSet};
use std::sync::Mutex;

use crate::error::Error;
use crate::xml::skipped::{Skipped, SkippedElement, SkippedKind};

/// Counts of one SOAP method (`RetrievePropertiesEx`, `Login`...).
///
/// One count per [`Client::invoke`](crate::Client::invoke): a call repeated
/// transparently after a re-login, or retried by the transport, counts once
/// (the re-login itself counts as a `Login`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct MethodStats {
    /// Calls made.
    pub calls: u64,
    /// Calls that ended with a SOAP fault.
    pub faults: u64,
    /// Calls that failed otherwise (transport, TLS, timeout, decoding...).
    pub errors: u64,
    /// Elements of this method's responses that the bindings do not know
    /// (from a server newer than [`GENERATED_API_VERSION`](crate::GENERATED_API_VERSION)),
    /// skipped while decoding: each occurrence counts. The first time a
    /// client skips an element of a type, it says so in a `debug` event
    /// naming the type and the element.
    pub unknown_elements: u64,
    /// Data objects of an `xsi:type` the bindings do not know, decoded as
    /// the type the field declares (`VirtualDevice` for a device newer than
    /// the bindings); reported like unknown elements, once per (declared
    /// type, `xsi:type`).
    pub unknown_types: u64,
    /// Faults of a type the bindings do not know (a failed task's
    /// `info.error`, a SOAP fault's detail), decoded as the declared fault
    /// (`MethodFault`); reported once per (declared type, fault type).
    pub unknown_faults: u64,
}

/// How many different (type, element) pairs a client remembers having
/// reported; past it, unknown elements are still counted but no longer
/// reported (a hostile server cannot make the set grow).
const MAX_REPORTED: usize = 1024;

#[derive(Debug, Default)]
pub(crate) struct CallStats {
    by_method: Mutex<BTreeMap<&'static str, MethodStats>>,
    /// The (type, element) pairs already reported.
    reported: Mutex<HashSet<(SkippedKind, &'static str, String)>>,
}

impl CallStats {
    /// Counts what decoding a response of `method` skipped and returns the
    /// elements this client has not reported before.
    pub(crate) fn record_skipped<'s>(
        &self,
        method: &'static str,
        skipped: &'s Skipped,
    ) -> Vec<&'s SkippedElement> {
        if skipped.is_empty() {
            return Vec::new();
        }
        if let Ok(mut by_method) = self.by_method.lock() {
            let stats = by_method.entry(method).or_default();
            stats.unknown_elements += skipped.elements_skipped();
            stats.unknown_types += skipped.types;
            stats.unknown_faults += skipped.faults;
        }
        let Ok(mut reported) = self.reported.lock() else {
            return Vec::new();
        };
        let mut new = Vec::new();
        for element in &skipped.elements {
            if reported.len() >= MAX_REPORTED {
                break;
            }
            if reported.insert((element.kind, element.type_name, element.element.clone())) {
                new.push(element);
            }
        }
        new
    }

    pub(crate) fn record<T>(&self, method: &'static str, result: &Result<T, Error>) {
        if let Ok(mut by_method) = self.by_method.lock() {
            let stats = by_method.entry(method).or_default();
            stats.calls += 1;
            match result {
                Ok(_) => {}
                Err(e) if e.fault().is_some() => stats.faults += 1,
                Err(_) => stats.errors += 1,
            }
        }
    }

    pub(crate) fn snapshot(&self) -> BTreeMap<&'static str, MethodStats> {
        self.by_method.lock().map(|m| m.clone()).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorKind;

    #[test]
    fn counts_calls_faults_and_errors_per_method() {
        let stats = CallStats::default();
        stats.record::<()>("Login", &Ok(()));
        stats.record::<()>(
            "Login",
            &Err(Error::from_fault(crate::Fault::new(
                "ServerFaultCode",
                "no",
                Some("InvalidLogin".into()),
                None,
            ))),
        );
        stats.record::<()>(
            "RetrievePropertiesEx",
            &Err(Error::new(ErrorKind::Timeout, "slow")),
        );
        let snapshot = stats.snapshot();
        assert_eq!(
            snapshot["Login"],
            MethodStats {
                calls: 2,
                faults: 1,
                errors: 0,
                unknown_elements: 0,
                unknown_types: 0,
                unknown_faults: 0,
            }
        );
        assert_eq!(
            snapshot["RetrievePropertiesEx"],
            MethodStats {
                calls: 1,
                faults: 0,
                errors: 1,
                unknown_elements: 0,
                unknown_types: 0,
                unknown_faults: 0,
            }
        );
    }
}
