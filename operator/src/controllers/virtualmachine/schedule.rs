//! Scheduling, pure: which Provider and failure domain a VirtualMachine goes to,
//! or why none can take it.
//!
//! A Provider is a candidate when, in this order: its class has a source in the
//! image; its labels match `providerSelector`; it advertises every storage
//! class, network class and feature the VMClass needs; it is not being
//! deleted; it has a failure domain that matches `failureDomainSelector` and
//! offers those classes (its last known ones when it is not Ready); it
//! advertises `vtpm` when the class wants a TPM; it is Ready and the image is
//! ready on it (either failing is `ImageNotReady`, as the guide has it: a
//! Provider that is not Ready cannot verify the image). When none is, the
//! reason is that of the check the furthest Provider failed, and the message
//! says what failed on each Provider.

use std::collections::{BTreeMap, BTreeSet};

use kube::core::SelectorExt;

use crate::api::reasons::virtualmachine as reasons;
use crate::api::validate;
use crate::api::{
    FailureDomain, NamespacedReference, Provider, ResolvedNetwork, ResolvedStorage,
    ScheduledPlacement, TemplateRef, VMClass, VMImage, VirtualMachine,
};
use crate::conditions::{self, READY};

/// The feature a Provider advertises when vTPM (with a KMS) works on it.
pub const VTPM_FEATURE: &str = "vtpm";

/// Why a VirtualMachine could not be scheduled, ordered by how far a Provider got.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Reason {
    NoProviderMatched,
    TpmUnsupported,
    ImageNotReady,
}

impl Reason {
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::NoProviderMatched => reasons::NO_PROVIDER_MATCHED,
            Reason::TpmUnsupported => reasons::TPM_UNSUPPORTED,
            Reason::ImageNotReady => reasons::IMAGE_NOT_READY,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unschedulable {
    pub reason: Reason,
    pub message: String,
}

/// Where a VirtualMachine goes, and the template to clone there.
#[derive(Clone, Debug, PartialEq)]
pub struct Decision {
    pub placement: ScheduledPlacement,
    pub template: TemplateRef,
}

/// How many VirtualMachines are already scheduled per (Provider, failure domain).
pub type Load = BTreeMap<(NamespacedReference, String), usize>;

pub fn provider_key(provider: &Provider) -> NamespacedReference {
    NamespacedReference {
        namespace: provider.metadata.namespace.clone().unwrap_or_default(),
        name: provider.metadata.name.clone().unwrap_or_default(),
    }
}

/// Does the class want a vTPM (`tpmEnabled`, or `vtpm` among its features)?
pub fn needs_tpm(class: &VMClass) -> bool {
    class.spec.tpm_enabled || class.spec.features.iter().any(|f| f == VTPM_FEATURE)
}

struct Requirements<'a> {
    storage_classes: Vec<&'a str>,
    network_classes: Vec<&'a str>,
    features: Vec<&'a str>,
    tpm: bool,
}

fn requirements(class: &VMClass) -> Requirements<'_> {
    let mut storage = Vec::new();
    for d in &class.spec.hardware.disks {
        if !storage.contains(&d.storage_class.as_str()) {
            storage.push(d.storage_class.as_str());
        }
    }
    let mut network = Vec::new();
    for n in &class.spec.network.interfaces {
        if !network.contains(&n.network_class.as_str()) {
            network.push(n.network_class.as_str());
        }
    }
    Requirements {
        storage_classes: storage,
        network_classes: network,
        features: class
            .spec
            .features
            .iter()
            .map(String::as_str)
            .filter(|f| *f != VTPM_FEATURE)
            .collect(),
        tpm: needs_tpm(class),
    }
}

fn quoted(items: &[&str]) -> String {
    items
        .iter()
        .map(|s| format!("{s:?}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The failure domains of `provider` the VM can use, or why there is none.
fn evaluate<'p>(
    vm: &VirtualMachine,
    class: &VMClass,
    image: &VMImage,
    provider: &'p Provider,
    req: &Requirements<'_>,
) -> Result<Vec<&'p FailureDomain>, (Reason, String)> {
    let no_match = |message: String| Err((Reason::NoProviderMatched, message));
    let image_name = image.metadata.name.as_deref().unwrap_or_default();
    let class_name = class.metadata.name.as_deref().unwrap_or_default();
    let provider_class = &provider.spec.provider_class_ref.name;
    if image.source_for_class(provider_class).is_none() {
        return no_match(format!(
            "provider class {provider_class:?} has no source in VMImage {image_name:?}"
        ));
    }

    let placement = vm.spec.placement.as_ref();
    if let Some(selector) = placement.and_then(|p| p.provider_selector.as_ref()) {
        // An unparsable selector is caught by validation before scheduling.
        let selector = validate::selector(selector).map_err(|e| (Reason::NoProviderMatched, e))?;
        let labels = provider.metadata.labels.clone().unwrap_or_default();
        if !selector.matches(&labels) {
            return no_match(format!("labels do not match providerSelector ({selector})"));
        }
    }

    let caps = &provider.spec.capabilities;
    let mut missing = Vec::new();
    for sc in &req.storage_classes {
        if !caps.storage_classes.iter().any(|c| c.name == *sc) {
            missing.push(format!("storage class {sc:?}"));
        }
    }
    for nc in &req.network_classes {
        if !caps.network_classes.iter().any(|c| c.name == *nc) {
            missing.push(format!("network class {nc:?}"));
        }
    }
    for f in &req.features {
        if !caps.features.iter().any(|c| c == f) {
            missing.push(format!("feature {f:?}"));
        }
    }
    if !missing.is_empty() {
        return no_match(format!(
            "does not advertise {} (needed by VMClass {class_name:?})",
            missing.join(", ")
        ));
    }

    if provider.metadata.deletion_timestamp.is_some() {
        return no_match("is being deleted".to_string());
    }
    // A Provider that is not Ready cannot have the image ready on it: the
    // guide's `ImageNotReady`, its own reason in the message. Its last known
    // failure domains still say whether it could take the VM at all.
    let status = provider.status.clone().unwrap_or_default();
    let not_ready = match conditions::find(&status.conditions, READY) {
        Some(c) if c.status == "True" => None,
        Some(c) => Some(format!("{}: {}", c.reason, c.message)),
        None => Some("no status reported yet".to_string()),
    }
    .map(|why| {
        (
            Reason::ImageNotReady,
            format!("is not Ready ({why}), so VMImage {image_name:?} cannot be ready on it"),
        )
    });
    if let Some(not_ready) = not_ready
        .clone()
        .filter(|_| status.failure_domains.is_empty())
    {
        return Err(not_ready);
    }
    let fd_selector = match placement.and_then(|p| p.failure_domain_selector.as_ref()) {
        Some(s) => Some(validate::selector(s).map_err(|e| (Reason::NoProviderMatched, e))?),
        None => None,
    };
    let mut usable = Vec::new();
    let mut rejected = Vec::new();
    for fd in provider
        .status
        .as_ref()
        .map(|s| s.failure_domains.as_slice())
        .unwrap_or_default()
    {
        if let Some(selector) = &fd_selector {
            if !selector.matches(&fd.labels) {
                rejected.push(format!(
                    "{} does not match failureDomainSelector ({selector})",
                    fd.name
                ));
                continue;
            }
        }
        let lacking: Vec<&str> = req
            .storage_classes
            .iter()
            .filter(|sc| !fd.storage_classes.iter().any(|c| c == *sc))
            .chain(
                req.network_classes
                    .iter()
                    .filter(|nc| !fd.network_classes.iter().any(|c| c == *nc)),
            )
            .copied()
            .collect();
        if !lacking.is_empty() {
            rejected.push(format!("{} cannot offer {}", fd.name, quoted(&lacking)));
            continue;
        }
        usable.push(fd);
    }
    if usable.is_empty() {
        if rejected.is_empty() {
            return no_match("has no failure domains".to_string());
        }
        return no_match(format!("no usable failure domain: {}", rejected.join(", ")));
    }

    if req.tpm && !caps.features.iter().any(|f| f == VTPM_FEATURE) {
        return Err((
            Reason::TpmUnsupported,
            format!("does not advertise the {VTPM_FEATURE:?} feature VMClass {class_name:?} needs for tpmEnabled"),
        ));
    }

    if let Some(not_ready) = not_ready {
        return Err(not_ready);
    }
    let key = provider_key(provider);
    match image.on_provider(&key.namespace, &key.name) {
        Some(entry) if entry.ready => Ok(usable),
        Some(entry) => Err((
            Reason::ImageNotReady,
            format!(
                "VMImage {image_name:?} is not ready here ({}: {})",
                entry.reason.as_deref().unwrap_or("NotReady"),
                entry.message.as_deref().unwrap_or("")
            ),
        )),
        None => Err((
            Reason::ImageNotReady,
            format!("VMImage {image_name:?} has no readiness reported for this provider yet"),
        )),
    }
}

/// Schedule `vm` among `providers`, spreading over failure domains by `load`.
pub fn schedule(
    vm: &VirtualMachine,
    class: &VMClass,
    image: &VMImage,
    providers: &[&Provider],
    load: &Load,
) -> Result<Decision, Unschedulable> {
    let req = requirements(class);
    let mut sorted: Vec<&Provider> = providers.to_vec();
    sorted.sort_by_key(|p| provider_key(p));

    let mut candidates = Vec::new();
    let mut failures: Vec<(Reason, String)> = Vec::new();
    for provider in sorted {
        match evaluate(vm, class, image, provider, &req) {
            Ok(domains) => candidates.extend(domains.into_iter().map(|fd| (provider, fd))),
            Err((reason, why)) => {
                failures.push((reason, format!("{}: {why}", provider_key(provider))))
            }
        }
    }

    let best = candidates.into_iter().min_by(|(pa, fa), (pb, fb)| {
        let count = |p: &Provider, fd: &FailureDomain| {
            load.get(&(provider_key(p), fd.name.clone()))
                .copied()
                .unwrap_or(0)
        };
        count(pa, fa)
            .cmp(&count(pb, fb))
            .then_with(|| fa.name.cmp(&fb.name))
            .then_with(|| provider_key(pa).cmp(&provider_key(pb)))
    });
    let Some((provider, fd)) = best else {
        return Err(unschedulable(class, image, failures));
    };

    let key = provider_key(provider);
    let caps = &provider.spec.capabilities;
    // The VirtualMachine's own pool and folder win over the failure domain's.
    let own = vm
        .spec
        .placement
        .as_ref()
        .map(|p| p.target.clone())
        .unwrap_or_default();
    let storage = req
        .storage_classes
        .iter()
        .filter_map(|sc| caps.storage_classes.iter().find(|c| c.name == *sc))
        .map(|c| ResolvedStorage {
            storage_class: c.name.clone(),
            datastore: c.target.datastore.clone(),
            datastore_cluster: c.target.datastore_cluster.clone(),
        })
        .collect();
    let network = req
        .network_classes
        .iter()
        .filter_map(|nc| caps.network_classes.iter().find(|c| c.name == *nc))
        .map(|c| ResolvedNetwork {
            network_class: c.name.clone(),
            port_group: c.target.port_group.clone(),
        })
        .collect();
    let source_ref = image
        .source_for_class(&provider.spec.provider_class_ref.name)
        .map(|s| s.reference.clone())
        .unwrap_or_default();
    // The template the image's readiness found (a content library item's
    // is the one it was deployed as).
    let found = image
        .on_provider(&key.namespace, &key.name)
        .and_then(|e| e.templates.iter().find(|t| t.datacenter == fd.datacenter));
    let mo_ref = found.and_then(|t| t.mo_ref.clone());
    let source_ref = found.map_or(source_ref, |t| t.name.clone());
    Ok(Decision {
        placement: ScheduledPlacement {
            provider: key.name,
            provider_namespace: key.namespace,
            failure_domain: fd.name.clone(),
            datacenter: fd.datacenter.clone(),
            cluster: fd.cluster.clone(),
            resource_pool: own.resource_pool.or_else(|| fd.resource_pool.clone()),
            folder: own.folder.or_else(|| fd.folder.clone()),
            storage,
            network,
        },
        template: TemplateRef {
            name: source_ref,
            mo_ref,
        },
    })
}

/// Longest message we put in a condition; the rest is summarised.
const MAX_MESSAGE: usize = 4000;

fn unschedulable(
    class: &VMClass,
    image: &VMImage,
    failures: Vec<(Reason, String)>,
) -> Unschedulable {
    let class_name = class.metadata.name.as_deref().unwrap_or_default();
    let image_name = image.metadata.name.as_deref().unwrap_or_default();
    let Some(reason) = failures.iter().map(|(r, _)| *r).max() else {
        return Unschedulable {
            reason: Reason::NoProviderMatched,
            message: "no Provider exists".to_string(),
        };
    };
    let head = match reason {
        Reason::NoProviderMatched => format!("no Provider matches VMClass {class_name:?} and VMImage {image_name:?}"),
        Reason::TpmUnsupported => format!(
            "VMClass {class_name:?} needs a vTPM but no candidate Provider advertises the {VTPM_FEATURE:?} feature"
        ),
        Reason::ImageNotReady => format!("VMImage {image_name:?} is not ready on any candidate Provider"),
    };
    // The Providers that got furthest first: they are what the user will fix.
    let mut ordered = failures;
    ordered.sort_by_key(|(reason, _)| std::cmp::Reverse(*reason));
    let mut message = format!("{head}: ");
    let total = ordered.len();
    for (i, (_, why)) in ordered.iter().enumerate() {
        if message.len() + why.len() > MAX_MESSAGE {
            message.push_str(&format!("... and {} more Provider(s)", total - i));
            break;
        }
        if i > 0 {
            message.push_str("; ");
        }
        message.push_str(why);
    }
    Unschedulable { reason, message }
}

/// Load from the placements already made: each VM counted once.
pub fn load_of<'a>(
    placements: impl IntoIterator<Item = (NamespacedReference, &'a ScheduledPlacement)>,
) -> Load {
    let mut seen = BTreeSet::new();
    let mut load = Load::new();
    for (vm, placement) in placements {
        if seen.insert(vm) {
            let key = NamespacedReference {
                namespace: placement.provider_namespace.clone(),
                name: placement.provider.clone(),
            };
            *load
                .entry((key, placement.failure_domain.clone()))
                .or_default() += 1;
        }
    }
    load
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::fixtures::*;

    fn guide_provider() -> Provider {
        ready(
            provider(
                "prod-vsphere",
                json!({"dc": "dc1", "env": "prod"}),
                guide_capabilities(),
            ),
            vec![failure_domain("prod-vsphere-dc1-c1", "DC1", "C1")],
        )
    }

    fn selector_vm() -> VirtualMachine {
        vm(
            "db-prod-01",
            json!({"providerSelector": {"matchLabels": {"dc": "dc1", "env": "prod"}}}),
        )
    }

    fn run(
        vm: &VirtualMachine,
        class: &VMClass,
        image: &VMImage,
        providers: &[Provider],
        load: &Load,
    ) -> Result<Decision, Unschedulable> {
        let refs: Vec<&Provider> = providers.iter().collect();
        schedule(vm, class, image, &refs, load)
    }

    fn key(name: &str) -> NamespacedReference {
        NamespacedReference {
            namespace: "banlieue-system".into(),
            name: name.into(),
        }
    }

    #[test]
    fn schedules_the_guide_vm_with_resolved_classes() {
        let d = run(
            &selector_vm(),
            &guide_class(),
            &image(&["prod-vsphere"]),
            &[guide_provider()],
            &Load::new(),
        )
        .unwrap();
        assert_eq!(
            d.placement,
            ScheduledPlacement {
                provider: "prod-vsphere".into(),
                provider_namespace: "banlieue-system".into(),
                failure_domain: "prod-vsphere-dc1-c1".into(),
                datacenter: "DC1".into(),
                cluster: "C1".into(),
                resource_pool: None,
                folder: None,
                storage: vec![ResolvedStorage {
                    storage_class: "gold".into(),
                    datastore: "ds-fast-01".into(),
                    datastore_cluster: None,
                }],
                network: vec![ResolvedNetwork {
                    network_class: "prod".into(),
                    port_group: "vmnet-prod".into()
                }],
            }
        );
        assert_eq!(
            d.template,
            TemplateRef {
                name: "ubuntu-22.04-cloudinit".into(),
                mo_ref: Some("vm-42".into())
            }
        );
    }

    /// The failure domain's pool and folder go to the placement and the
    /// VSphereMachine; a VirtualMachine's own win over them, each alone.
    #[test]
    fn a_vm_takes_its_failure_domains_pool_and_folder_unless_it_names_its_own() {
        let mut fd = failure_domain("prod-vsphere-dc1-c1", "DC1", "C1");
        fd["resourcePool"] = json!("team-a");
        fd["folder"] = json!("apps/web");
        let p = ready(
            provider("prod-vsphere", json!({}), guide_capabilities()),
            vec![fd],
        );
        let (class, image) = (guide_class(), image(&["prod-vsphere"]));
        let placed = |placement: serde_json::Value| {
            let vm = vm("x", placement);
            let d = run(&vm, &class, &image, std::slice::from_ref(&p), &Load::new()).unwrap();
            let machine = crate::controllers::virtualmachine::build::build(
                &vm,
                &class,
                &image,
                &d.placement,
                d.template.clone(),
            );
            assert_eq!(
                (&machine.spec.resource_pool, &machine.spec.folder),
                (&d.placement.resource_pool, &d.placement.folder),
                "the VSphereMachine has what was decided"
            );
            (d.placement.resource_pool, d.placement.folder)
        };
        let s = |v: &str| Some(v.to_string());
        assert_eq!(placed(json!({})), (s("team-a"), s("apps/web")));
        assert_eq!(
            placed(json!({"folder": "apps/db"})),
            (s("team-a"), s("apps/db"))
        );
        assert_eq!(
            placed(json!({"resourcePool": "team-b/db", "folder": "db"})),
            (s("team-b/db"), s("db"))
        );
    }

    #[test]
    fn spreads_to_the_least_loaded_failure_domain_ties_by_name() {
        let p = ready(
            provider("prod-vsphere", json!({}), guide_capabilities()),
            vec![
                failure_domain("fd-b", "DC1", "B"),
                failure_domain("fd-a", "DC1", "A"),
                failure_domain("fd-c", "DC1", "C"),
            ],
        );
        let (class, image) = (guide_class(), image(&["prod-vsphere"]));
        let vm = vm("x", json!({}));
        let pick = |load: &Load| {
            run(&vm, &class, &image, std::slice::from_ref(&p), load)
                .unwrap()
                .placement
                .failure_domain
        };

        assert_eq!(pick(&Load::new()), "fd-a", "empty: first by name");
        let mut load = Load::from([((key("prod-vsphere"), "fd-a".to_string()), 1)]);
        assert_eq!(pick(&load), "fd-b");
        load.insert((key("prod-vsphere"), "fd-b".to_string()), 1);
        assert_eq!(pick(&load), "fd-c");
        load.insert((key("prod-vsphere"), "fd-c".to_string()), 1);
        assert_eq!(pick(&load), "fd-a", "all equal again: first by name");
    }

    #[test]
    fn spreads_across_providers() {
        let a = ready(
            provider("a", json!({}), guide_capabilities()),
            vec![failure_domain("a-fd", "DC1", "C1")],
        );
        let b = ready(
            provider("b", json!({}), guide_capabilities()),
            vec![failure_domain("b-fd", "DC1", "C1")],
        );
        let load = Load::from([
            ((key("a"), "a-fd".to_string()), 2),
            ((key("b"), "b-fd".to_string()), 1),
        ]);
        let d = run(
            &vm("x", json!({})),
            &guide_class(),
            &image(&["a", "b"]),
            &[a, b],
            &load,
        )
        .unwrap();
        assert_eq!(
            (
                d.placement.provider.as_str(),
                d.placement.failure_domain.as_str()
            ),
            ("b", "b-fd")
        );
    }

    #[test]
    fn load_counts_each_vm_once() {
        let p = ScheduledPlacement {
            provider: "p".into(),
            provider_namespace: "ns".into(),
            failure_domain: "fd".into(),
            ..Default::default()
        };
        let vm = NamespacedReference {
            namespace: "ns".into(),
            name: "vm".into(),
        };
        let other = NamespacedReference {
            namespace: "ns".into(),
            name: "other".into(),
        };
        let load = load_of([(vm.clone(), &p), (vm, &p), (other, &p)]);
        assert_eq!(
            load.get(&(
                NamespacedReference {
                    namespace: "ns".into(),
                    name: "p".into()
                },
                "fd".into()
            )),
            Some(&2)
        );
    }

    fn unschedulable(
        vm: &VirtualMachine,
        class: &VMClass,
        image: &VMImage,
        providers: &[Provider],
    ) -> Unschedulable {
        match run(vm, class, image, providers, &Load::new()) {
            Err(u) => u,
            Ok(d) => panic!("expected no placement, got {d:?}"),
        }
    }

    #[test]
    fn no_provider_at_all() {
        let u = unschedulable(&selector_vm(), &guide_class(), &image(&[]), &[]);
        assert_eq!(
            u,
            Unschedulable {
                reason: Reason::NoProviderMatched,
                message: "no Provider exists".into()
            }
        );
    }

    #[test]
    fn provider_selector_mismatch_names_the_provider_and_selector() {
        let p = ready(
            provider(
                "prod-vsphere",
                json!({"dc": "dc2", "env": "prod"}),
                guide_capabilities(),
            ),
            vec![failure_domain("fd", "DC1", "C1")],
        );
        let u = unschedulable(
            &selector_vm(),
            &guide_class(),
            &image(&["prod-vsphere"]),
            &[p],
        );
        assert_eq!(u.reason, Reason::NoProviderMatched);
        assert_eq!(
            u.message,
            "no Provider matches VMClass \"db-prod-large\" and VMImage \"ubuntu-22.04-cloudinit\": \
             banlieue-system/prod-vsphere: labels do not match providerSelector (dc=dc1,env=prod)"
        );
    }

    #[test]
    fn match_expressions_are_honoured() {
        let vm = vm(
            "x",
            json!({"providerSelector": {"matchExpressions": [{"key": "env", "operator": "NotIn", "values": ["prod"]}]}}),
        );
        let u = unschedulable(
            &vm,
            &guide_class(),
            &image(&["prod-vsphere"]),
            &[guide_provider()],
        );
        assert!(
            u.message
                .contains("labels do not match providerSelector (env notin (prod))"),
            "{}",
            u.message
        );

        let vm2 = super::tests::vm(
            "y",
            json!({"providerSelector": {"matchExpressions": [{"key": "env", "operator": "In", "values": ["prod", "dev"]}]}}),
        );
        assert!(run(
            &vm2,
            &guide_class(),
            &image(&["prod-vsphere"]),
            &[guide_provider()],
            &Load::new()
        )
        .is_ok());
    }

    #[test]
    fn missing_capabilities_are_each_named() {
        let caps = json!({"storageClasses": [{"name": "silver", "target": {"datastore": "ds"}}], "features": ["hotAddCPU"]});
        let p = ready(
            provider("prod-vsphere", json!({"dc": "dc1", "env": "prod"}), caps),
            vec![failure_domain("fd", "DC1", "C1")],
        );
        let u = unschedulable(
            &selector_vm(),
            &guide_class(),
            &image(&["prod-vsphere"]),
            &[p],
        );
        assert_eq!(u.reason, Reason::NoProviderMatched);
        assert!(
            u.message.ends_with(
                "banlieue-system/prod-vsphere: does not advertise storage class \"gold\", network class \"prod\", \
                 feature \"hotAddMemory\", feature \"efiSecureBoot\" (needed by VMClass \"db-prod-large\")"
            ),
            "{}",
            u.message
        );
    }

    #[test]
    fn provider_class_without_image_source() {
        let mut p = guide_provider();
        p.spec.provider_class_ref.name = "libvirt".into();
        let u = unschedulable(
            &selector_vm(),
            &guide_class(),
            &image(&["prod-vsphere"]),
            &[p],
        );
        assert!(u.message.ends_with("banlieue-system/prod-vsphere: provider class \"libvirt\" has no source in VMImage \"ubuntu-22.04-cloudinit\""), "{}", u.message);
    }

    #[test]
    fn a_deleted_provider_takes_no_new_vm() {
        let mut p = guide_provider();
        p.metadata.deletion_timestamp = Some(crate::conditions::now());
        let u = unschedulable(
            &selector_vm(),
            &guide_class(),
            &image(&["prod-vsphere"]),
            &[p],
        );
        assert_eq!(u.reason, Reason::NoProviderMatched);
        assert!(
            u.message
                .ends_with("banlieue-system/prod-vsphere: is being deleted"),
            "{}",
            u.message
        );
    }

    /// The guide's Provider, with its last known failure domains, not Ready.
    fn not_ready(reason: &str, message: &str) -> Provider {
        let mut p = guide_provider();
        if let Some(s) = p.status.as_mut() {
            s.conditions[0].status = "False".into();
            s.conditions[0].reason = reason.into();
            s.conditions[0].message = message.into();
        }
        p
    }

    #[test]
    fn provider_not_ready() {
        let p = not_ready("ConnectFailed", "x509: unknown authority");
        let u = unschedulable(
            &selector_vm(),
            &guide_class(),
            &image(&["prod-vsphere"]),
            &[p],
        );
        assert_eq!(u.reason, Reason::ImageNotReady, "the guide's reason");
        assert_eq!(u.reason.as_str(), "ImageNotReady");
        assert_eq!(
            u.message,
            "VMImage \"ubuntu-22.04-cloudinit\" is not ready on any candidate Provider: \
             banlieue-system/prod-vsphere: is not Ready (ConnectFailed: x509: unknown authority), \
             so VMImage \"ubuntu-22.04-cloudinit\" cannot be ready on it"
        );

        let fresh = provider(
            "prod-vsphere",
            json!({"dc": "dc1", "env": "prod"}),
            guide_capabilities(),
        );
        let u = unschedulable(
            &selector_vm(),
            &guide_class(),
            &image(&["prod-vsphere"]),
            &[fresh],
        );
        assert_eq!(u.reason, Reason::ImageNotReady);
        assert!(
            u.message.contains("is not Ready (no status reported yet)"),
            "{}",
            u.message
        );
    }

    #[test]
    fn a_provider_not_ready_is_still_judged_by_its_last_known_failure_domains() {
        let p = not_ready("ConnectFailed", "connection refused");
        let vm = vm(
            "x",
            json!({"failureDomainSelector": {"matchLabels": {"name": "elsewhere"}}}),
        );
        let u = unschedulable(&vm, &guide_class(), &image(&["prod-vsphere"]), &[p]);
        assert_eq!(
            u.reason,
            Reason::NoProviderMatched,
            "no failure domain of it could take the VM, Ready or not: {}",
            u.message
        );
    }

    #[test]
    fn failure_domain_selector_and_offerings() {
        let mut lacking = failure_domain("fd-b", "DC1", "B");
        lacking["storageClasses"] = json!([]);
        let p = ready(
            provider("p", json!({}), guide_capabilities()),
            vec![failure_domain("fd-a", "DC1", "A"), lacking],
        );
        let vm = vm(
            "x",
            json!({"failureDomainSelector": {"matchLabels": {"name": "cluster-01"}}}),
        );
        let u = unschedulable(
            &vm,
            &guide_class(),
            &image(&["p"]),
            std::slice::from_ref(&p),
        );
        assert_eq!(u.reason, Reason::NoProviderMatched);
        assert!(
            u.message.ends_with(
                "banlieue-system/p: no usable failure domain: fd-a does not match failureDomainSelector (name=cluster-01), \
                 fd-b does not match failureDomainSelector (name=cluster-01)"
            ),
            "{}",
            u.message
        );

        // Selecting fd-b, which cannot offer gold: named as such.
        let vm = super::tests::vm(
            "x",
            json!({"failureDomainSelector": {"matchLabels": {"cluster": "B"}}}),
        );
        let u = unschedulable(
            &vm,
            &guide_class(),
            &image(&["p"]),
            std::slice::from_ref(&p),
        );
        assert!(
            u.message.contains("fd-b cannot offer \"gold\""),
            "{}",
            u.message
        );

        // Selecting fd-a by its friendly name works.
        let vm = super::tests::vm(
            "x",
            json!({"failureDomainSelector": {"matchLabels": {"name": "fd-a"}}}),
        );
        assert_eq!(
            run(&vm, &guide_class(), &image(&["p"]), &[p], &Load::new())
                .unwrap()
                .placement
                .failure_domain,
            "fd-a"
        );
    }

    #[test]
    fn no_failure_domains() {
        let p = ready(provider("p", json!({}), guide_capabilities()), vec![]);
        let u = unschedulable(&vm("x", json!({})), &guide_class(), &image(&["p"]), &[p]);
        assert!(
            u.message
                .ends_with("banlieue-system/p: has no failure domains"),
            "{}",
            u.message
        );
    }

    #[test]
    fn tpm_needs_the_vtpm_feature() {
        let p = ready(
            provider("p", json!({}), guide_capabilities()),
            vec![failure_domain("fd", "DC1", "C1")],
        );
        let u = unschedulable(&vm("x", json!({})), &tpm_class(), &image(&["p"]), &[p]);
        assert_eq!(u.reason, Reason::TpmUnsupported);
        assert_eq!(
            u.message,
            "VMClass \"tpm-encrypted\" needs a vTPM but no candidate Provider advertises the \"vtpm\" feature: \
             banlieue-system/p: does not advertise the \"vtpm\" feature VMClass \"tpm-encrypted\" needs for tpmEnabled"
        );

        let mut caps = guide_capabilities();
        caps["features"] = json!(["hotAddCPU", "hotAddMemory", "efiSecureBoot", "vtpm"]);
        let p = ready(
            provider("p", json!({}), caps),
            vec![failure_domain("fd", "DC1", "C1")],
        );
        assert!(run(
            &vm("x", json!({})),
            &tpm_class(),
            &image(&["p"]),
            &[p],
            &Load::new()
        )
        .is_ok());
    }

    #[test]
    fn image_not_ready_with_the_providers_reason() {
        let mut img = image(&[]);
        img.status = serde_json::from_value(json!({"perProvider": [{"provider": "prod-vsphere", "namespace": "banlieue-system",
            "ready": false, "reason": "TemplateNotFound", "message": "template \"ubuntu-22.04-cloudinit\" not found in datacenter(s) DC2"}]})).unwrap();
        let u = unschedulable(&selector_vm(), &guide_class(), &img, &[guide_provider()]);
        assert_eq!(u.reason, Reason::ImageNotReady);
        assert_eq!(
            u.message,
            "VMImage \"ubuntu-22.04-cloudinit\" is not ready on any candidate Provider: banlieue-system/prod-vsphere: \
             VMImage \"ubuntu-22.04-cloudinit\" is not ready here (TemplateNotFound: template \"ubuntu-22.04-cloudinit\" not found in datacenter(s) DC2)"
        );

        let u = unschedulable(
            &selector_vm(),
            &guide_class(),
            &image(&[]),
            &[guide_provider()],
        );
        assert!(
            u.message
                .ends_with("has no readiness reported for this provider yet"),
            "{}",
            u.message
        );
    }

    #[test]
    fn reason_is_the_furthest_providers_and_it_is_listed_first() {
        let near = ready(
            provider("a-near", json!({"dc": "dc2"}), guide_capabilities()),
            vec![failure_domain("fd", "DC1", "C1")],
        );
        let far = guide_provider();
        let u = unschedulable(&selector_vm(), &guide_class(), &image(&[]), &[near, far]);
        assert_eq!(u.reason, Reason::ImageNotReady);
        let far_at = u.message.find("banlieue-system/prod-vsphere").unwrap();
        let near_at = u.message.find("banlieue-system/a-near").unwrap();
        assert!(far_at < near_at, "{}", u.message);
    }

    #[test]
    fn long_messages_are_summarised() {
        let providers: Vec<Provider> = (0..200)
            .map(|i| provider(&format!("provider-{i:03}"), json!({}), json!({})))
            .collect();
        let u = unschedulable(&vm("x", json!({})), &guide_class(), &image(&[]), &providers);
        assert!(u.message.len() < MAX_MESSAGE + 200, "{}", u.message.len());
        assert!(u.message.contains("more Provider(s)"));
    }
}
