//! Scheduling, pure: which Provider and failure domain a VirtualMachine goes to,
//! or why none can take it.
//!
//! A Provider is a candidate when, in this order: its class has a source in the
//! image; its labels match `providerSelector`; it advertises every storage
//! class, network class and feature the VMClass needs; it is Ready and has a
//! failure domain that matches `failureDomainSelector` and offers those
//! classes; it advertises `vtpm` when the class wants a TPM; the image is ready
//! on it. When none is, the reason is that of the check the furthest Provider
//! failed, and the message says what failed on each Provider.

use std::collections::{BTreeMap, BTreeSet};

use kube::core::SelectorExt;

use crate::api::{
    FailureDomain, NamespacedReference, Provider, ResolvedNetwork, ResolvedStorage, ScheduledPlacement,
    TemplateRef, VMClass, VMImage, VirtualMachine,
};
use crate::conditions::{self, READY};
use crate::validate;

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
            Reason::NoProviderMatched => "NoProviderMatched",
            Reason::TpmUnsupported => "TpmUnsupported",
            Reason::ImageNotReady => "ImageNotReady",
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
        features: class.spec.features.iter().map(String::as_str).filter(|f| *f != VTPM_FEATURE).collect(),
        tpm: needs_tpm(class),
    }
}

fn quoted(items: &[&str]) -> String {
    items.iter().map(|s| format!("{s:?}")).collect::<Vec<_>>().join(", ")
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
        return no_match(format!("provider class {provider_class:?} has no source in VMImage {image_name:?}"));
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
        return no_match(format!("does not advertise {} (needed by VMClass {class_name:?})", missing.join(", ")));
    }

    let status = provider.status.clone().unwrap_or_default();
    match conditions::find(&status.conditions, READY) {
        Some(c) if c.status == "True" => {}
        Some(c) => return no_match(format!("is not Ready ({}: {})", c.reason, c.message)),
        None => return no_match("is not Ready (no status reported yet)".to_string()),
    }
    let fd_selector = match placement.and_then(|p| p.failure_domain_selector.as_ref()) {
        Some(s) => Some(validate::selector(s).map_err(|e| (Reason::NoProviderMatched, e))?),
        None => None,
    };
    let mut usable = Vec::new();
    let mut rejected = Vec::new();
    for fd in provider.status.as_ref().map(|s| s.failure_domains.as_slice()).unwrap_or_default() {
        if let Some(selector) = &fd_selector {
            if !selector.matches(&fd.labels) {
                rejected.push(format!("{} does not match failureDomainSelector ({selector})", fd.name));
                continue;
            }
        }
        let lacking: Vec<&str> = req
            .storage_classes
            .iter()
            .filter(|sc| !fd.storage_classes.iter().any(|c| c == *sc))
            .chain(req.network_classes.iter().filter(|nc| !fd.network_classes.iter().any(|c| c == *nc)))
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
        None => Err((Reason::ImageNotReady, format!("VMImage {image_name:?} has no readiness reported for this provider yet"))),
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
            Err((reason, why)) => failures.push((reason, format!("{}: {why}", provider_key(provider)))),
        }
    }

    let best = candidates.into_iter().min_by(|(pa, fa), (pb, fb)| {
        let count = |p: &Provider, fd: &FailureDomain| load.get(&(provider_key(p), fd.name.clone())).copied().unwrap_or(0);
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
    let storage = req
        .storage_classes
        .iter()
        .filter_map(|sc| caps.storage_classes.iter().find(|c| c.name == *sc))
        .map(|c| ResolvedStorage { storage_class: c.name.clone(), datastore: c.target.datastore.clone() })
        .collect();
    let network = req
        .network_classes
        .iter()
        .filter_map(|nc| caps.network_classes.iter().find(|c| c.name == *nc))
        .map(|c| ResolvedNetwork { network_class: c.name.clone(), port_group: c.target.port_group.clone() })
        .collect();
    let source_ref = image
        .source_for_class(&provider.spec.provider_class_ref.name)
        .map(|s| s.reference.clone())
        .unwrap_or_default();
    let mo_ref = image
        .on_provider(&key.namespace, &key.name)
        .and_then(|e| e.templates.iter().find(|t| t.datacenter == fd.datacenter))
        .and_then(|t| t.mo_ref.clone());
    Ok(Decision {
        placement: ScheduledPlacement {
            provider: key.name,
            provider_namespace: key.namespace,
            failure_domain: fd.name.clone(),
            datacenter: fd.datacenter.clone(),
            cluster: fd.cluster.clone(),
            storage,
            network,
        },
        template: TemplateRef { name: source_ref, mo_ref },
    })
}

/// Longest message we put in a condition; the rest is summarised.
const MAX_MESSAGE: usize = 4000;

fn unschedulable(class: &VMClass, image: &VMImage, failures: Vec<(Reason, String)>) -> Unschedulable {
    let class_name = class.metadata.name.as_deref().unwrap_or_default();
    let image_name = image.metadata.name.as_deref().unwrap_or_default();
    let Some(reason) = failures.iter().map(|(r, _)| *r).max() else {
        return Unschedulable { reason: Reason::NoProviderMatched, message: "no Provider exists".to_string() };
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
    ordered.sort_by(|a, b| b.0.cmp(&a.0));
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
pub fn load_of<'a>(placements: impl IntoIterator<Item = (NamespacedReference, &'a ScheduledPlacement)>) -> Load {
    let mut seen = BTreeSet::new();
    let mut load = Load::new();
    for (vm, placement) in placements {
        if seen.insert(vm) {
            let key = NamespacedReference { namespace: placement.provider_namespace.clone(), name: placement.provider.clone() };
            *load.entry((key, placement.failure_domain.clone())).or_default() += 1;
        }
    }
    load
}
