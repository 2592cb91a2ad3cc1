//! Type families behind cargo features of vsphere-client: the ~440 event types
//! (`all-events`) and the ~650 specific faults a program rarely matches
//! (`all-faults`). Their code is about a third of the bindings, and most
//! programs only ever meet them through the family's root: a `VmPoweredOnEvent`
//! read without `all-events` decodes as the nearest type that is compiled in
//! (`Event`), its own elements skipped, as a type this version does not know
//! would; the wire name of a fault stays on the error either way.
//!
//! A type is gated when nothing compiled in without the feature refers to it:
//! not a field of an ungated type or request, not an operation's result, not a
//! managed object property, not the parent of an ungated type. That set is
//! computed here, so the families grow and shrink with the schema; the types
//! that only the family's members refer to (the events' `*EventArgument`s,
//! enumerations of fault reasons) go with it.

use std::collections::{BTreeMap, BTreeSet};

use crate::model::{Model, TypeRef};

/// A family: the cargo feature that compiles it in, the root whose
/// descendants it holds, and descendants kept compiled in regardless.
pub struct Family {
    pub feature: &'static str,
    pub root: &'static str,
    pub keep: &'static [&'static str],
}

/// The faults a program matches on by type (login and session, permissions,
/// missing or busy objects, names, files and datastores, power state,
/// resources, guest operations): compiled in without `all-faults`, with
/// their ancestors (`VimFault`, `RuntimeFault`, `FileFault`...).
pub const COMMON_FAULTS: &[&str] = &[
    "AlreadyExists",
    "CannotCreateFile",
    "ConcurrentAccess",
    "CustomizationFault",
    "DuplicateName",
    "FileAlreadyExists",
    "FileLocked",
    "FileNotFound",
    "GuestOperationsUnavailable",
    "GuestPermissionDenied",
    "HostCommunication",
    "HostNotConnected",
    "InsufficientResourcesFault",
    "InvalidArgument",
    "InvalidCollectorVersion",
    "InvalidDatastore",
    "InvalidDatastorePath",
    "InvalidGuestLogin",
    "InvalidHostState",
    "InvalidLogin",
    "InvalidName",
    "InvalidPowerState",
    "InvalidProperty",
    "InvalidRequest",
    "InvalidState",
    "InvalidType",
    "InvalidVmConfig",
    "ManagedObjectNotFound",
    "MethodDisabled",
    "NoPermission",
    "NotAuthenticated",
    "NotEnoughLicenses",
    "NotFound",
    "NotImplemented",
    "NotSupported",
    "PasswordExpired",
    "RequestCanceled",
    "ResourceInUse",
    "RestrictedVersion",
    "SecurityError",
    "SnapshotFault",
    "SystemError",
    "TaskInProgress",
    "Timedout",
    "ToolsUnavailable",
    "VmConfigFault",
];

pub const FAMILIES: &[Family] = &[
    Family {
        feature: "all-events",
        root: "Event",
        keep: &[],
    },
    Family {
        feature: "all-faults",
        root: "MethodFault",
        keep: COMMON_FAULTS,
    },
];

/// The feature gating each gated complex type or enumeration, by XML name.
pub fn gated(model: &Model) -> BTreeMap<String, &'static str> {
    // Who refers to whom: holder -> the complex types and enumerations its
    // fields name. Results and properties are held by no type: always kept.
    let mut referrers: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    let mut pinned: BTreeSet<&str> = BTreeSet::new();
    for ty in model.types.values() {
        for f in &ty.fields {
            if let TypeRef::Complex(name) | TypeRef::Enum(name) = &f.ty {
                referrers.entry(name).or_default().insert(&ty.name);
            }
        }
    }
    for op in model.operations.values() {
        if let Some(TypeRef::Complex(name) | TypeRef::Enum(name)) =
            op.returnval.as_ref().map(|r| &r.ty)
        {
            pinned.insert(name);
        }
    }
    for mo in model.managed_objects.values() {
        for p in &mo.properties {
            if let TypeRef::Complex(name) | TypeRef::Enum(name) = &p.ty {
                pinned.insert(name);
            }
        }
    }
    let base_of = |name: &str| model.types.get(name).and_then(|t| t.base.as_deref());

    let mut family_of: BTreeMap<&str, &'static str> = BTreeMap::new();
    for family in FAMILIES {
        let kept: BTreeSet<&str> = family
            .keep
            .iter()
            .flat_map(|k| model.lineage(k).into_iter().map(|t| t.name.as_str()))
            .collect();
        for name in model.descendants(family.root) {
            if let Some((name, _)) = model.types.get_key_value(&name) {
                if !kept.contains(name.as_str()) {
                    family_of.insert(name, family.feature);
                }
            }
        }
    }
    // Grow: a type only family members refer to (or, unreferenced, whose
    // parent is a member) joins the family.
    let candidates: Vec<&str> = model
        .types
        .values()
        .filter(|t| !t.is_request)
        .map(|t| t.name.as_str())
        .chain(model.enums.keys().map(String::as_str))
        .collect();
    loop {
        let mut grew = false;
        for &name in &candidates {
            if family_of.contains_key(name)
                || pinned.contains(name)
                || FAMILIES.iter().any(|f| f.root == name)
            {
                continue;
            }
            let families: BTreeSet<Option<&&str>> = match referrers.get(name) {
                Some(holders) => holders.iter().map(|r| family_of.get(r)).collect(),
                None => base_of(name)
                    .map(|b| family_of.get(b))
                    .into_iter()
                    .collect(),
            };
            let [Some(&feature)] = families.into_iter().collect::<Vec<_>>()[..] else {
                continue;
            };
            // A slot of an ancestor holds the type too (`AnyVirtualDevice`
            // holds a `VirtualCdrom`): one outside the family keeps it.
            let held_as_ancestor = model.lineage(name).iter().rev().skip(1).any(|a| {
                pinned.contains(a.name.as_str())
                    || referrers
                        .get(a.name.as_str())
                        .into_iter()
                        .flatten()
                        .any(|r| family_of.get(r) != Some(&feature))
            });
            if !held_as_ancestor {
                family_of.insert(name, feature);
                grew = true;
            }
        }
        if !grew {
            break;
        }
    }
    // Shrink: what an ungated type (or another family) refers to or embeds
    // stays, with its ancestors.
    loop {
        let mut kept = Vec::new();
        for (&name, &feature) in &family_of {
            let referred_outside = referrers
                .get(name)
                .into_iter()
                .flatten()
                .any(|r| family_of.get(r) != Some(&feature));
            if referred_outside || pinned.contains(name) {
                kept.push(name);
            }
        }
        for ty in model.types.values() {
            if let Some(base) = &ty.base {
                if family_of.contains_key(base.as_str())
                    && family_of.get(ty.name.as_str()) != family_of.get(base.as_str())
                {
                    kept.push(base);
                }
            }
        }
        if kept.is_empty() {
            break;
        }
        for name in kept {
            for t in model.lineage(name) {
                family_of.remove(t.name.as_str());
            }
            family_of.remove(name);
        }
    }
    family_of
        .into_iter()
        .map(|(name, feature)| (name.to_string(), feature))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{ComplexType, Field, Occurs, Operation, Returnval};

    fn ty(model: &mut Model, name: &str, base: Option<&str>, fields: &[&str]) {
        let fields = fields
            .iter()
            .map(|f| Field {
                name: f.to_lowercase(),
                ty: TypeRef::Complex(f.to_string()),
                occurs: Occurs::Optional,
                since: None,
            })
            .collect();
        model.types.insert(
            name.into(),
            ComplexType {
                name: name.into(),
                base: base.map(Into::into),
                fields,
                is_request: false,
                file: String::new(),
                since: None,
            },
        );
    }

    #[test]
    fn a_family_member_stays_when_anything_outside_the_family_needs_it() {
        let mut m = Model::default();
        ty(&mut m, "DynamicData", None, &[]);
        ty(&mut m, "MethodFault", Some("DynamicData"), &[]);
        ty(&mut m, "Event", Some("DynamicData"), &["VmEventArgument"]);
        ty(&mut m, "VmEventArgument", Some("DynamicData"), &[]);
        // Only events refer to it: it goes with them.
        ty(&mut m, "VmEvent", Some("Event"), &[]);
        ty(&mut m, "EventDetail", Some("DynamicData"), &[]);
        ty(
            &mut m,
            "VmPoweredOnEvent",
            Some("VmEvent"),
            &["EventDetail"],
        );
        // An ungated type refers to it: kept, with its ancestors.
        ty(&mut m, "TaskEvent", Some("VmEvent"), &[]);
        ty(&mut m, "TaskInfo", Some("DynamicData"), &["TaskEvent"]);
        // A common fault keeps its parent; a rare one goes.
        ty(&mut m, "VimFault", Some("MethodFault"), &[]);
        ty(&mut m, "InvalidLogin", Some("VimFault"), &[]);
        ty(&mut m, "FileFault", Some("VimFault"), &[]);
        ty(&mut m, "FileTooLarge", Some("FileFault"), &[]);
        // Only a rare fault names it, but a slot of its ancestor holds it too.
        ty(&mut m, "VirtualDevice", Some("DynamicData"), &[]);
        ty(&mut m, "VirtualCdrom", Some("VirtualDevice"), &[]);
        ty(
            &mut m,
            "VmConfigSpec",
            Some("DynamicData"),
            &["VirtualDevice"],
        );
        ty(
            &mut m,
            "ConnectedIso",
            Some("FileTooLarge"),
            &["VirtualCdrom"],
        );
        // An operation's result is kept.
        ty(&mut m, "CannotDecryptPasswords", Some("VimFault"), &[]);
        m.operations.insert(
            "Probe".into(),
            Operation {
                name: "Probe".into(),
                request_type: "ProbeRequestType".into(),
                returnval: Some(Returnval {
                    ty: TypeRef::Complex("CannotDecryptPasswords".into()),
                    occurs: Occurs::Required,
                }),
                faults: Vec::new(),
                since: None,
            },
        );

        let gated = gated(&m);
        let names = |feature: &str| -> Vec<&str> {
            gated
                .iter()
                .filter(|(_, f)| **f == feature)
                .map(|(n, _)| n.as_str())
                .collect()
        };
        assert_eq!(names("all-events"), ["EventDetail", "VmPoweredOnEvent"]);
        assert_eq!(
            names("all-faults"),
            ["ConnectedIso", "FileFault", "FileTooLarge"]
        );
        for kept in [
            "Event",
            "VmEvent",
            "TaskEvent",
            "VmEventArgument",
            "VimFault",
            "InvalidLogin",
            "VirtualCdrom",
        ] {
            assert!(!gated.contains_key(kept), "{kept} must stay compiled in");
        }
    }
}
