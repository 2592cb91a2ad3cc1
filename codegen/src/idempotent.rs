//! Which operations are safe to send again after a failure that may have
//! reached the server. The transport retries only these.
//!
//! The rule: read-only families by name prefix, plus a short list of named
//! read-only operations, minus operations that consume server-side state
//! (a retrieval token, an event cursor) and minus every `*_Task` operation
//! (each call starts a new task). Everything else is not safe.

use std::collections::BTreeSet;

use crate::bail;
use crate::error::Result;
use crate::model::Model;

/// Name prefixes of read-only operation families.
const READ_ONLY_PREFIXES: &[&str] = &[
    "Are", "Browse", "Check", "Estimate", "Fetch", "Find", "Get", "Has", "List", "Query",
    "Retrieve", "Validate",
];

/// Read-only operations outside those families.
const READ_ONLY: &[&str] = &[
    "CurrentTime",
    "SessionIsActive",
    // Waiting again with the same version returns the same or newer changes.
    "WaitForUpdates",
    "WaitForUpdatesEx",
];

/// Operations in a read-only family that are not safe to repeat.
const NOT_SAFE: &[&str] = &[
    // The token is consumed: a repeat skips a page or fails.
    "ContinueRetrievePropertiesEx",
];

/// The set of operations safe to repeat.
pub fn safe_operations(model: &Model) -> Result<BTreeSet<String>> {
    for name in READ_ONLY.iter().chain(NOT_SAFE) {
        if !model.operations.contains_key(*name) {
            bail!("idempotency table: operation {name} is not in the schema");
        }
    }
    Ok(model
        .operations
        .keys()
        .filter(|name| is_safe(name))
        .cloned()
        .collect())
}

fn is_safe(name: &str) -> bool {
    if NOT_SAFE.contains(&name) || name.ends_with("_Task") {
        return false;
    }
    READ_ONLY.contains(&name)
        || READ_ONLY_PREFIXES.iter().any(|prefix| {
            name.strip_prefix(prefix)
                .is_some_and(|rest| rest.starts_with(|c: char| c.is_ascii_uppercase()))
        })
}

#[cfg(test)]
mod tests {
    use super::is_safe;

    #[test]
    fn read_only_families_are_safe() {
        for name in [
            "RetrievePropertiesEx",
            "RetrieveServiceContent",
            "FindByUuid",
            "QueryPerf",
            "CurrentTime",
            "WaitForUpdatesEx",
            "BrowseDiagnosticLog",
            "HasPrivilegeOnEntity",
        ] {
            assert!(is_safe(name), "{name}");
        }
    }

    #[test]
    fn changes_and_tasks_are_not() {
        for name in [
            "ContinueRetrievePropertiesEx",
            "CloneVM_Task",
            "PowerOnVM_Task",
            "SearchDatastore_Task",
            "Login",
            "Logout",
            "CreateFilter",
            "ReadNextEvents",
            "Retrieved", // not a family member: the prefix must end a word
            "QueryVMotionCompatibilityEx_Task",
        ] {
            assert!(!is_safe(name), "{name}");
        }
    }
}
