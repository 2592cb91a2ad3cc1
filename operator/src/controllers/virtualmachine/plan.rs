//! The VirtualMachine reconcile, pure: from a VirtualMachine and what it
//! depends on, the status to write and the VSphereMachine to create or update.
//! The cluster controller and `check` both execute these plans.

use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::build as machine;
use super::schedule::{self, Load};
use crate::api::validate;
use crate::api::{
    NamespacedReference, PowerState, Provider, ScheduledPlacement, TemplateRef, VMClass, VMImage,
    VSphereMachine, VirtualMachine, VirtualMachineStatus,
};
use crate::conditions::{self, Observed, Status, READY, RECONFIGURED, SCHEDULED};

/// Reasons of the VirtualMachine conditions (what each means:
/// [`crate::api::reasons`]).
pub mod reason {
    pub use crate::api::reasons::virtualmachine::*;
}

/// What the VirtualMachine reconcile reads.
pub trait Cache {
    fn vm_class(&self, name: &str) -> Option<Arc<VMClass>>;
    fn vm_image(&self, name: &str) -> Option<Arc<VMImage>>;
    fn providers(&self) -> Vec<Arc<Provider>>;
    fn vsphere_machine(&self, namespace: &str, name: &str) -> Option<Arc<VSphereMachine>>;
    /// VirtualMachines already scheduled per (Provider, failure domain).
    fn load(&self) -> Load;
}

/// What to do for one VirtualMachine.
#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    /// The status the VirtualMachine should have; written only if it differs.
    pub status: VirtualMachineStatus,
    /// A VSphereMachine to create (before the status is written).
    pub create: Option<VSphereMachine>,
    /// The existing VSphereMachine's desired power state to change.
    pub set_power: Option<PowerState>,
    /// The existing VSphereMachine's shape, update policy or restart to
    /// change (a VMClass edit, an annotation).
    pub update: Option<machine::MachineUpdate>,
    /// Conditions whose status changed: one event each.
    pub transitions: Vec<Observed>,
}

pub fn plan(vm: &VirtualMachine, cache: &impl Cache, now: &Time) -> Plan {
    let namespace = vm.metadata.namespace.clone().unwrap_or_default();
    let name = vm.metadata.name.clone().unwrap_or_default();
    let generation = vm.metadata.generation;
    let mut status = vm.status.clone().unwrap_or_default();
    let mut create = None;
    let mut set_power = None;
    let mut update = None;
    let mut existing = None;

    let scheduled = match cache.vsphere_machine(&namespace, &name) {
        Some(m) if !machine::is_owned_by(&m, vm) => Observed::new(
            SCHEDULED,
            Status::False,
            reason::MACHINE_CONFLICT,
            format!(
                "VSphereMachine {namespace}/{name} exists and is not owned by this VirtualMachine"
            ),
        ),
        Some(m) => {
            let placement = status
                .scheduled
                .get_or_insert_with(|| machine::placement_of(&m))
                .clone();
            if m.spec.desired_power_state != vm.spec.desired_power_state {
                set_power = Some(vm.spec.desired_power_state);
            }
            // A class that breaks a rule keeps the machine's shape as it is.
            let class = cache
                .vm_class(&vm.spec.class_ref.name)
                .filter(|c| validate::vm_class(&c.spec).is_empty());
            update = machine::MachineUpdate::of(vm, class.as_deref(), &m);
            existing = Some(m);
            scheduled_on(&placement)
        }
        None => match resolve(vm, cache, status.scheduled.as_ref()) {
            Ok((placement, machine)) => {
                create = Some(machine);
                let observed = scheduled_on(&placement);
                status.scheduled = Some(placement);
                observed
            }
            Err(observed) => observed,
        },
    };

    // A VSphereMachine's IP pool claims against its spec, when it says anything.
    let mut addresses = None;
    let ready = if let Some(m) = &existing {
        let mirrored = m.status.clone().unwrap_or_default();
        addresses = conditions::find(&mirrored.conditions, conditions::IP_ADDRESSES_UP_TO_DATE)
            .map(|c| {
                Observed::new(
                    conditions::IP_ADDRESSES_UP_TO_DATE,
                    status_of(&c.status),
                    c.reason.clone(),
                    c.message.clone(),
                )
            });
        status.power_state = mirrored.power_state;
        status.ip_addresses = mirrored.ip_addresses;
        status.console_url = mirrored.console_url;
        status.instance_uuid = mirrored.instance_uuid;
        status.restarted_at = mirrored.restarted_at;
        status.host = mirrored.host;
        match m.ready_condition() {
            Some(c) => Observed::new(
                READY,
                status_of(&c.status),
                c.reason.clone(),
                c.message.clone(),
            ),
            None => waiting(&namespace, &name),
        }
    } else if create.is_some() {
        waiting(&namespace, &name)
    } else {
        Observed::new(
            READY,
            Status::False,
            reason::NOT_SCHEDULED,
            format!(
                "not scheduled ({}): {}",
                scheduled.reason, scheduled.message
            ),
        )
    };

    // The pending-change condition, as the VSphereMachine has it.
    let reconfigured = existing.as_ref().and_then(|m| {
        let c = conditions::find(m.status.as_ref()?.conditions.as_slice(), RECONFIGURED)?;
        Some(Observed::new(
            RECONFIGURED,
            status_of(&c.status),
            c.reason.clone(),
            c.message.clone(),
        ))
    });
    let mut transitions = Vec::new();
    for observed in [Some(scheduled), Some(ready), addresses, reconfigured]
        .into_iter()
        .flatten()
    {
        if conditions::set(&mut status.conditions, observed.clone(), generation, now) {
            transitions.push(observed);
        }
    }
    status.observed_generation = generation;
    Plan {
        status,
        create,
        set_power,
        update,
        transitions,
    }
}

fn waiting(namespace: &str, name: &str) -> Observed {
    Observed::new(
        READY,
        Status::False,
        reason::WAITING_FOR_PROVIDER,
        format!("VSphereMachine {namespace}/{name} has not reported readiness yet"),
    )
}

fn status_of(s: &str) -> Status {
    match s {
        "True" => Status::True,
        "False" => Status::False,
        _ => Status::Unknown,
    }
}

fn scheduled_on(p: &ScheduledPlacement) -> Observed {
    Observed::new(
        SCHEDULED,
        Status::True,
        reason::SCHEDULED,
        format!(
            "provider {}/{}, failure domain {} (datacenter {}, cluster {})",
            p.provider_namespace, p.provider, p.failure_domain, p.datacenter, p.cluster
        ),
    )
}

/// The VSphereMachine to create: at the recorded placement if the VM was
/// scheduled before (it is never moved), else where the scheduler puts it.
fn resolve(
    vm: &VirtualMachine,
    cache: &impl Cache,
    scheduled: Option<&ScheduledPlacement>,
) -> Result<(ScheduledPlacement, VSphereMachine), Observed> {
    let fail = |reason: &str, message: String| {
        Observed::new(SCHEDULED, Status::False, reason.to_string(), message)
    };
    let errors = validate::virtual_machine(&vm.spec);
    if !errors.is_empty() && scheduled.is_none() {
        return Err(fail(reason::INVALID_SPEC, validate::describe(&errors)));
    }
    let class_name = &vm.spec.class_ref.name;
    let image_name = &vm.spec.image_ref.name;
    let class = cache.vm_class(class_name).ok_or_else(|| {
        fail(
            reason::VMCLASS_NOT_FOUND,
            format!("VMClass {class_name:?} not found"),
        )
    })?;
    let image = cache.vm_image(image_name).ok_or_else(|| {
        fail(
            reason::VMIMAGE_NOT_FOUND,
            format!("VMImage {image_name:?} not found"),
        )
    })?;
    let errors = validate::vm_class(&class.spec);
    if !errors.is_empty() {
        return Err(fail(
            reason::INVALID_VMCLASS,
            format!("VMClass {class_name:?}: {}", validate::describe(&errors)),
        ));
    }
    let errors = validate::vm_image(&image.spec);
    if !errors.is_empty() {
        return Err(fail(
            reason::INVALID_VMIMAGE,
            format!("VMImage {image_name:?}: {}", validate::describe(&errors)),
        ));
    }
    let errors = validate::network_overrides(&vm.spec, &class.spec);
    if !errors.is_empty() && scheduled.is_none() {
        return Err(fail(reason::INVALID_SPEC, validate::describe(&errors)));
    }
    if let Some(message) = firmware_mismatch(&class, &image) {
        return Err(fail(reason::FIRMWARE_MISMATCH, message));
    }

    if let Some(placement) = scheduled {
        let template = template_at(&image, placement, &cache.providers());
        return Ok((
            placement.clone(),
            machine::build(vm, &class, &image, placement, template),
        ));
    }
    let providers = cache.providers();
    let providers: Vec<&Provider> = providers.iter().map(AsRef::as_ref).collect();
    match schedule::schedule(vm, &class, &image, &providers, &cache.load()) {
        Ok(decision) => {
            let machine =
                machine::build(vm, &class, &image, &decision.placement, decision.template);
            Ok((decision.placement, machine))
        }
        Err(u) => Err(fail(u.reason.as_str(), u.message)),
    }
}

/// Why the image's template cannot boot with the class's firmware: it was
/// built for the other boot firmware (BIOS against EFI). Secure boot follows
/// the class.
pub fn firmware_mismatch(class: &VMClass, image: &VMImage) -> Option<String> {
    let built_for = image.spec.template.as_ref()?.firmware?;
    let asked = class.spec.firmware;
    (built_for.is_efi() != asked.is_efi()).then(|| {
        format!(
            "VMClass {:?} asks for {} firmware but VMImage {:?} was built for {} \
             (spec.template.firmware): its clones would not boot; make them agree",
            class.metadata.name.as_deref().unwrap_or_default(),
            asked.as_str(),
            image.metadata.name.as_deref().unwrap_or_default(),
            built_for.as_str()
        )
    })
}

/// The template for a placement made earlier (re-creating a deleted VSphereMachine).
fn template_at(
    image: &VMImage,
    placement: &ScheduledPlacement,
    providers: &[Arc<Provider>],
) -> TemplateRef {
    let key = NamespacedReference {
        namespace: placement.provider_namespace.clone(),
        name: placement.provider.clone(),
    };
    let provider_class = providers
        .iter()
        .find(|p| schedule::provider_key(p) == key)
        .map(|p| p.spec.provider_class_ref.name.clone());
    let source = match provider_class {
        Some(class) => image.source_for_class(&class),
        None => image.spec.sources.first(),
    };
    let found = image.on_provider(&key.namespace, &key.name).and_then(|e| {
        e.templates
            .iter()
            .find(|t| t.datacenter == placement.datacenter)
    });
    TemplateRef {
        name: found.map_or_else(
            || source.map(|s| s.reference.clone()).unwrap_or_default(),
            |t| t.name.clone(),
        ),
        mo_ref: found.and_then(|t| t.mo_ref.clone()),
    }
}
