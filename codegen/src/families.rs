//! Type families behind cargo features of vsphere-client: the ~440 event types
//! (`all-events`), the ~650 specific faults a program rarely matches
//! (`all-faults`), and the managed objects of host and vCenter administration
//! with their operations, and the configuration trees of hosts, clusters and
//! switches (`admin`, see [`MANAGED_OBJECT_FAMILIES`]). Their
//! code is about a third of the bindings, and most programs only ever meet them through the family's root: a `VmPoweredOnEvent`
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

/// A family of managed objects: the cargo feature that compiles them in,
/// with their operations (the `Vim` methods, request types) and the types
/// only they use.
pub struct ManagedObjectFamily {
    pub feature: &'static str,
    pub managed_objects: &'static [&'static str],
    /// Properties of managed objects outside the family that go with it
    /// (`"HostSystem.config"`): their `mo::` fields and property paths.
    pub properties: &'static [&'static str],
    /// Operations of managed objects outside the family that go with it.
    pub operations: &'static [&'static str],
}

/// The managed objects that configure hosts and administer vCenter:
/// host configuration managers, vSAN, host and cluster profiles, key
/// management, alarms, roles and permissions, licenses, extensions,
/// scheduled tasks, certificates, vCenter HA. A program driving VMs and
/// reading the inventory (hosts, clusters, datastores, networks included)
/// needs none of them. Names the schema does not have are ignored.
pub const ADMIN_MANAGED_OBJECTS: &[&str] = &[
    // hosts
    "HostAccessManager",
    "HostActiveDirectoryAuthentication",
    "HostAssignableHardwareManager",
    "HostAuthenticationManager",
    "HostAuthenticationStore",
    "HostAutoStartManager",
    "HostBootDeviceSystem",
    "HostCacheConfigurationManager",
    "HostCertificateManager",
    "HostCpuSchedulerSystem",
    "HostDateTimeSystem",
    "HostDiagnosticSystem",
    "HostDirectoryStore",
    "HostEsxAgentHostManager",
    "HostFirewallSystem",
    "HostFirmwareSystem",
    "HostGraphicsManager",
    "HostHealthStatusSystem",
    "HostImageConfigManager",
    "HostKernelModuleSystem",
    "HostLocalAccountManager",
    "HostLocalAuthentication",
    "HostMemorySystem",
    "HostNetworkSystem",
    "HostNvdimmSystem",
    "HostPatchManager",
    "HostPciPassthruSystem",
    "HostPowerSystem",
    "HostServiceSystem",
    "HostSnmpSystem",
    "HostStorageSystem",
    "HostVFlashManager",
    "HostVMotionSystem",
    "HostVStorageObjectManager",
    "HostVirtualNicManager",
    "IscsiManager",
    // vSAN
    "HostVsanInternalSystem",
    "HostVsanSystem",
    "VsanUpgradeSystem",
    // profiles
    "ClusterProfile",
    "ClusterProfileManager",
    "HostProfile",
    "HostProfileManager",
    "HostSpecificationManager",
    "Profile",
    "ProfileComplianceManager",
    "ProfileManager",
    // key management
    "CryptoManager",
    "CryptoManagerHost",
    "CryptoManagerHostKMS",
    "CryptoManagerKmip",
    // vCenter administration
    "Alarm",
    "AlarmManager",
    "AuthorizationManager",
    "CertificateManager",
    "ClusterEVCManager",
    "DiagnosticManager",
    "ExtensionManager",
    "FailoverClusterConfigurator",
    "FailoverClusterManager",
    "HealthUpdateManager",
    "IoFilterManager",
    "IpPoolManager",
    "LicenseAssignmentManager",
    "LicenseManager",
    "LocalizationManager",
    "MessageBusProxy",
    "ResourcePlanningManager",
    "ScheduledTask",
    "ScheduledTaskManager",
    "ServiceManager",
    "SimpleCommand",
    "SiteInfoManager",
    "TenantTenantManager",
    "UserDirectory",
];

/// The configuration trees of hosts, clusters and distributed switches,
/// read and written by administration: `HostSystem.config` alone holds ~250
/// types of network, storage, firewall and service settings. Their
/// summaries (`summary`, `runtime`) stay, and so does what placing and
/// wiring VMs reads (`DistributedVirtualPortgroup.config`, `Datastore.info`).
pub const ADMIN_PROPERTIES: &[&str] = &[
    "HostSystem.answerFileValidationResult",
    "HostSystem.answerFileValidationState",
    "HostSystem.capability",
    "HostSystem.complianceCheckResult",
    "HostSystem.complianceCheckState",
    "HostSystem.config",
    "HostSystem.hardware",
    "HostSystem.licensableResource",
    "HostSystem.precheckRemediationResult",
    "HostSystem.remediationResult",
    "HostSystem.remediationState",
    "HostSystem.systemResources",
    "ComputeResource.configurationEx",
    "ClusterComputeResource.actionHistory",
    "ClusterComputeResource.configuration",
    "ClusterComputeResource.drsFault",
    "ClusterComputeResource.drsRecommendation",
    "ClusterComputeResource.hciConfig",
    "ClusterComputeResource.migrationHistory",
    "ClusterComputeResource.recommendation",
    "ClusterComputeResource.summaryEx",
    "DistributedVirtualSwitch.capability",
    "DistributedVirtualSwitch.config",
    "DistributedVirtualSwitch.runtime",
];

/// The operations that change those trees or a host's settings (a cluster's
/// or switch's reconfiguration, HCI, crypto, lockdown, IPMI...). Connecting,
/// maintenance mode and power stay.
pub const ADMIN_OPERATIONS: &[&str] = &[
    // HostSystem
    "AcquireCimServicesTicket",
    "ConfigureCryptoKey",
    "EnableCrypto",
    "EnterLockdownMode",
    "ExitLockdownMode",
    "PrepareCrypto",
    "QueryProductLockerLocation",
    "QueryTpmAttestationReport",
    "ReconfigureHostForDAS_Task",
    "RetrieveFreeEpcMemory",
    "UpdateFlags",
    "UpdateIpmi",
    "UpdateProductLockerLocation_Task",
    "UpdateSystemResources",
    "UpdateSystemSwapConfiguration",
    // ComputeResource, ClusterComputeResource
    "AbandonHciWorkflow",
    "ConfigureHCI_Task",
    "EvcManager",
    "ExtendHCI_Task",
    "ReconfigureCluster_Task",
    "ReconfigureComputeResource_Task",
    "RetrieveDasAdvancedRuntimeInfo",
    "SetCryptoMode",
    "StampAllRulesWithUuid_Task",
    "ValidateHCIConfiguration",
    // DistributedVirtualSwitch, VmwareDistributedVirtualSwitch
    "AddNetworkResourcePool",
    "DVSRollback_Task",
    "DvsReconfigureVmVnicNetworkResourcePool_Task",
    "EnableNetworkResourceManagement",
    "MergeDvs_Task",
    "PerformDvsProductSpecOperation_Task",
    "ReconfigureDvs_Task",
    "RectifyDvsHost_Task",
    "RemoveNetworkResourcePool",
    "UpdateDVSHealthCheckConfig_Task",
    "UpdateDVSLacpGroupConfig_Task",
    "UpdateDvsCapability",
    "UpdateNetworkResourcePool",
];

pub const MANAGED_OBJECT_FAMILIES: &[ManagedObjectFamily] = &[ManagedObjectFamily {
    feature: "admin",
    managed_objects: ADMIN_MANAGED_OBJECTS,
    properties: ADMIN_PROPERTIES,
    operations: ADMIN_OPERATIONS,
}];

/// What the cargo features gate, by XML name: the feature of each gated
/// complex type (request types included) and enumeration, managed object
/// and operation.
#[derive(Debug, Default)]
pub struct Gates {
    pub types: BTreeMap<String, &'static str>,
    pub managed_objects: BTreeMap<String, &'static str>,
    pub operations: BTreeMap<String, &'static str>,
    /// Properties of managed objects outside every family, as
    /// `"ManagedObject.property"` (the object declaring it).
    pub properties: BTreeMap<String, &'static str>,
}

/// The managed objects and operations of the managed object families: a
/// managed object stays when one outside its family derives from it, an
/// operation is gated when every managed object declaring it is (with the
/// same feature) or its family names it.
fn managed_object_gates(
    model: &Model,
) -> (BTreeMap<&str, &'static str>, BTreeMap<&str, &'static str>) {
    let mut objects: BTreeMap<&str, &'static str> = BTreeMap::new();
    for family in MANAGED_OBJECT_FAMILIES {
        for name in family.managed_objects {
            if let Some((name, _)) = model.managed_objects.get_key_value(*name) {
                objects.insert(name, family.feature);
            }
        }
    }
    loop {
        let kept: Vec<&str> = model
            .managed_objects
            .values()
            .filter_map(|mo| {
                let base = mo.base.as_deref()?;
                let base_feature = objects.get(base)?;
                (objects.get(mo.name.as_str()) != Some(base_feature)).then_some(base)
            })
            .collect();
        if kept.is_empty() {
            break;
        }
        for base in kept {
            objects.remove(base);
        }
    }
    let mut declared_by: BTreeMap<&str, BTreeSet<Option<&'static str>>> = BTreeMap::new();
    for mo in model.managed_objects.values() {
        for method in &mo.methods {
            declared_by
                .entry(method)
                .or_default()
                .insert(objects.get(mo.name.as_str()).copied());
        }
    }
    let mut operations: BTreeMap<&str, &'static str> = declared_by
        .into_iter()
        .filter_map(
            |(op, features)| match features.into_iter().collect::<Vec<_>>()[..] {
                [Some(feature)] => Some((op, feature)),
                _ => None,
            },
        )
        .collect();
    for family in MANAGED_OBJECT_FAMILIES {
        for name in family.operations {
            if let Some((name, _)) = model.operations.get_key_value(*name) {
                operations.insert(name, family.feature);
            }
        }
    }
    (objects, operations)
}

/// The properties the managed object families name (`"HostSystem.config"`)
/// that the schema declares on an object outside every family (`objects`,
/// the gated ones).
fn property_gates(
    model: &Model,
    objects: &BTreeMap<&str, &'static str>,
) -> BTreeMap<String, &'static str> {
    let mut properties = BTreeMap::new();
    for family in MANAGED_OBJECT_FAMILIES {
        for name in family.properties {
            let Some((mo, property)) = name.split_once('.') else {
                continue;
            };
            let declared = model
                .managed_objects
                .get(mo)
                .is_some_and(|m| m.properties.iter().any(|p| p.name == property));
            if declared && !objects.contains_key(mo) {
                properties.insert(name.to_string(), family.feature);
            }
        }
    }
    properties
}

/// What each feature gates (see [`Gates`]).
pub fn gates(model: &Model) -> Gates {
    let (objects, operations) = managed_object_gates(model);
    let properties = property_gates(model, &objects);
    // Who refers to whom: holder -> the complex types and enumerations its
    // fields name. The results of operations and the properties of managed
    // objects outside every family are held by no type: always kept; a gated
    // operation's result is held by its request type, a gated managed
    // object's properties by the object, a gated property by itself
    // (`"HostSystem.config"`, a member of its family).
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
            match operations.contains_key(op.name.as_str()) {
                true => referrers.entry(name).or_default().insert(&op.request_type),
                false => pinned.insert(name),
            };
        }
    }
    for mo in model.managed_objects.values() {
        for p in &mo.properties {
            if let TypeRef::Complex(name) | TypeRef::Enum(name) = &p.ty {
                let gated = properties.get_key_value(&format!("{}.{}", mo.name, p.name));
                match (objects.contains_key(mo.name.as_str()), gated) {
                    (true, _) => referrers.entry(name).or_default().insert(&mo.name),
                    (false, Some((property, _))) => {
                        referrers.entry(name).or_default().insert(property)
                    }
                    (false, None) => pinned.insert(name),
                };
            }
        }
    }
    let base_of = |name: &str| model.types.get(name).and_then(|t| t.base.as_deref());

    // The managed objects and request types of gated operations seed their
    // family; the type families are seeded by their roots' descendants.
    let mut family_of: BTreeMap<&str, &'static str> = objects.clone();
    for (property, &feature) in &properties {
        family_of.insert(property, feature);
    }
    for op in model.operations.values() {
        if let Some(&feature) = operations.get(op.name.as_str()) {
            family_of.insert(&op.request_type, feature);
        }
    }
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
    let types = family_of
        .into_iter()
        .filter(|(name, _)| model.types.contains_key(*name) || model.enums.contains_key(*name))
        .map(|(name, feature)| (name.to_string(), feature))
        .collect();
    let owned = |map: BTreeMap<&str, &'static str>| {
        map.into_iter()
            .map(|(name, feature)| (name.to_string(), feature))
            .collect()
    };
    Gates {
        types,
        managed_objects: owned(objects),
        operations: owned(operations),
        properties,
    }
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

        let gated = gates(&m).types;
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

    fn managed_object(
        model: &mut Model,
        name: &str,
        base: Option<&str>,
        properties: &[&str],
        methods: &[&str],
    ) {
        use crate::model::{ManagedObject, Property};
        let properties = properties
            .iter()
            .map(|p| Property {
                name: p.to_lowercase(),
                ty: TypeRef::Complex(p.to_string()),
                occurs: Occurs::Optional,
                mo_type: None,
                since: None,
            })
            .collect();
        model.managed_objects.insert(
            name.into(),
            ManagedObject {
                name: name.into(),
                base: base.map(Into::into),
                properties,
                methods: methods.iter().map(ToString::to_string).collect(),
                since: None,
            },
        );
    }

    fn operation(model: &mut Model, name: &str, parameter: &str, result: Option<&str>) {
        let request = format!("{name}RequestType");
        ty(model, &request, None, &[parameter]);
        model.types.get_mut(&request).unwrap().is_request = true;
        model.operations.insert(
            name.into(),
            Operation {
                name: name.into(),
                request_type: request,
                returnval: result.map(|r| Returnval {
                    ty: TypeRef::Complex(r.into()),
                    occurs: Occurs::Required,
                }),
                faults: Vec::new(),
                since: None,
            },
        );
    }

    /// The roots every family hangs from.
    fn model_with_family_roots() -> Model {
        let mut m = Model::default();
        ty(&mut m, "DynamicData", None, &[]);
        ty(&mut m, "MethodFault", Some("DynamicData"), &[]);
        ty(&mut m, "Event", Some("DynamicData"), &[]);
        m
    }

    /// The names `admin` gates in one map of [`Gates`].
    fn admin(map: &BTreeMap<String, &'static str>) -> Vec<String> {
        map.iter()
            .filter(|(_, f)| **f == "admin")
            .map(|(n, _)| n.clone())
            .collect()
    }

    #[test]
    fn an_admin_managed_object_takes_its_operations_and_the_types_only_it_uses() {
        let mut m = model_with_family_roots();
        // HostNetworkSystem (admin): its property, parameter and result
        // types go with it, with what only they hold.
        ty(
            &mut m,
            "HostNetworkInfo",
            Some("DynamicData"),
            &["HostPortGroup"],
        );
        ty(&mut m, "HostPortGroup", Some("DynamicData"), &[]);
        ty(
            &mut m,
            "HostPortGroupSpec",
            Some("DynamicData"),
            &["HostNicTeamingPolicy"],
        );
        ty(&mut m, "HostNicTeamingPolicy", Some("DynamicData"), &[]);
        ty(&mut m, "HostNetworkConfigResult", Some("DynamicData"), &[]);
        // Also a property of HostSystem (not gated): stays.
        ty(&mut m, "HostIpRouteConfig", Some("DynamicData"), &[]);
        operation(&mut m, "AddPortGroup", "HostPortGroupSpec", None);
        operation(
            &mut m,
            "UpdateNetworkConfig",
            "HostIpRouteConfig",
            Some("HostNetworkConfigResult"),
        );
        // Declared by an admin object and by one that is not: stays.
        operation(&mut m, "RefreshNetworkSystem", "HostIpRouteConfig", None);
        managed_object(&mut m, "ExtensibleManagedObject", None, &[], &[]);
        managed_object(
            &mut m,
            "HostNetworkSystem",
            Some("ExtensibleManagedObject"),
            &["HostNetworkInfo", "HostIpRouteConfig"],
            &[
                "AddPortGroup",
                "UpdateNetworkConfig",
                "RefreshNetworkSystem",
            ],
        );
        managed_object(
            &mut m,
            "HostSystem",
            Some("ExtensibleManagedObject"),
            &["HostIpRouteConfig"],
            &["RefreshNetworkSystem"],
        );
        // Profile is admin, but a managed object outside the family derives
        // from it: it stays, HostProfile goes.
        managed_object(&mut m, "Profile", None, &[], &[]);
        managed_object(&mut m, "HostProfile", Some("Profile"), &[], &[]);
        managed_object(&mut m, "CustomProfile", Some("Profile"), &[], &[]);

        let gates = gates(&m);
        assert_eq!(
            admin(&gates.managed_objects),
            ["HostNetworkSystem", "HostProfile"]
        );
        assert_eq!(
            admin(&gates.operations),
            ["AddPortGroup", "UpdateNetworkConfig"]
        );
        assert_eq!(
            admin(&gates.types),
            [
                "AddPortGroupRequestType",
                "HostNetworkConfigResult",
                "HostNetworkInfo",
                "HostNicTeamingPolicy",
                "HostPortGroup",
                "HostPortGroupSpec",
                "UpdateNetworkConfigRequestType",
            ]
        );
    }

    /// Adds the property `name` of type `ty` to managed object `mo`.
    fn property(model: &mut Model, mo: &str, name: &str, ty: &str) {
        model
            .managed_objects
            .get_mut(mo)
            .unwrap()
            .properties
            .push(crate::model::Property {
                name: name.into(),
                ty: TypeRef::Complex(ty.into()),
                occurs: Occurs::Optional,
                mo_type: None,
                since: None,
            });
    }

    #[test]
    fn an_admin_property_and_operation_of_an_ungated_object_take_the_types_only_they_use() {
        let mut m = model_with_family_roots();
        // HostSystem.config (admin): its tree goes, including what it shares
        // with an admin managed object (HostNetworkInfo); what an ungated
        // property also holds (HostListSummary's HostHardwareSummary) stays.
        ty(
            &mut m,
            "HostConfigInfo",
            Some("DynamicData"),
            &["HostNetworkInfo", "HostHardwareSummary"],
        );
        ty(&mut m, "HostNetworkInfo", Some("DynamicData"), &[]);
        ty(
            &mut m,
            "HostListSummary",
            Some("DynamicData"),
            &["HostHardwareSummary"],
        );
        ty(&mut m, "HostHardwareSummary", Some("DynamicData"), &[]);
        // ReconfigureCluster_Task (admin), declared by an ungated object.
        ty(&mut m, "ClusterConfigSpec", Some("DynamicData"), &[]);
        operation(&mut m, "ReconfigureCluster_Task", "ClusterConfigSpec", None);
        managed_object(&mut m, "ExtensibleManagedObject", None, &[], &[]);
        managed_object(
            &mut m,
            "HostNetworkSystem",
            Some("ExtensibleManagedObject"),
            &["HostNetworkInfo"],
            &[],
        );
        managed_object(
            &mut m,
            "HostSystem",
            Some("ExtensibleManagedObject"),
            &[],
            &[],
        );
        property(&mut m, "HostSystem", "config", "HostConfigInfo");
        property(&mut m, "HostSystem", "summary", "HostListSummary");
        managed_object(
            &mut m,
            "ClusterComputeResource",
            Some("ExtensibleManagedObject"),
            &[],
            &["ReconfigureCluster_Task"],
        );

        let gates = gates(&m);
        assert_eq!(admin(&gates.managed_objects), ["HostNetworkSystem"]);
        assert_eq!(admin(&gates.properties), ["HostSystem.config"]);
        assert_eq!(admin(&gates.operations), ["ReconfigureCluster_Task"]);
        assert_eq!(
            admin(&gates.types),
            [
                "ClusterConfigSpec",
                "HostConfigInfo",
                "HostNetworkInfo",
                "ReconfigureCluster_TaskRequestType",
            ]
        );
    }
}
