//! `banlieue check`: run the operator's reconcile code over manifests, without
//! a cluster, and print every object with the status the operator would write.
//!
//! Exit status 0 only when every Provider is Ready, every VMImage is ready on
//! the Providers it has a source for, every VirtualMachine is scheduled (and,
//! with `--apply`, Ready), and no manifest was rejected.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::ResourceExt;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::api::validate::{self, FieldError};
use crate::api::{
    ImageProviderStatus, NamespacedReference, Provider, VMClass, VMImage, VMImageStatus,
    VMSnapshot, VSphereMachine, VirtualMachine, API_VERSION,
};
use crate::conditions::{self, READY, SCHEDULED};
use crate::controllers::provider::readiness::{
    self as provider, reason as provider_reason, Objects,
};
use crate::controllers::virtualmachine::plan::{self, Cache};
use crate::controllers::virtualmachine::schedule::{self, Load};
use crate::vsphere::VSphere;
use crate::{Error, Result};

mod apply;
pub mod schema;
mod snapshots;
pub use apply::apply;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Output {
    Yaml,
    #[default]
    Table,
}

/// A manifest that was not accepted, with why.
#[derive(Clone, Debug)]
pub struct Rejected {
    pub source: String,
    pub object: String,
    pub errors: Vec<FieldError>,
}

/// Everything read from the manifests.
#[derive(Default)]
pub struct World {
    pub providers: Vec<Provider>,
    pub classes: Vec<VMClass>,
    pub images: Vec<VMImage>,
    pub vms: Vec<VirtualMachine>,
    pub machines: Vec<VSphereMachine>,
    pub snapshots: Vec<VMSnapshot>,
    pub secrets: Vec<Secret>,
    pub config_maps: Vec<ConfigMap>,
    /// Built-in IP pools, and their allocations (by `namespace/pool`) as
    /// `check --apply` binds the machines' pool NICs.
    pub pools: Vec<crate::api::IPPool>,
    pub allocations: std::collections::BTreeMap<String, crate::ipam::Allocations>,
    pub rejected: Vec<Rejected>,
    /// Documents of kinds the operator does not use.
    pub ignored: Vec<String>,
}

/// YAML files under `paths` (directories recursively, in name order).
pub fn files(paths: &[PathBuf]) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for path in paths {
        collect(path, &mut out)?;
    }
    Ok(out)
}

fn collect(path: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
    let io = |e| Error::Io(path.display().to_string(), e);
    if path.is_dir() {
        let mut entries: Vec<PathBuf> = std::fs::read_dir(path)
            .map_err(io)?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .collect();
        entries.sort();
        for entry in entries {
            if entry.is_dir() || entry.extension().is_some_and(|x| x == "yaml" || x == "yml") {
                collect(&entry, out)?;
            }
        }
    } else {
        out.push(path.to_path_buf());
    }
    Ok(())
}

/// Parses multi-document YAML into JSON values (empty documents dropped).
pub fn parse_documents(text: &str) -> Result<Vec<Value>> {
    let docs: Vec<Value> =
        serde_saphyr::from_multiple(text).map_err(|e| Error::Yaml(e.to_string()))?;
    Ok(docs.into_iter().filter(|d| !d.is_null()).collect())
}

impl World {
    pub fn load(paths: &[PathBuf]) -> Result<World> {
        let mut world = World::default();
        for file in files(paths)? {
            let text = std::fs::read_to_string(&file)
                .map_err(|e| Error::Io(file.display().to_string(), e))?;
            let source = file.display().to_string();
            match parse_documents(&text) {
                Ok(docs) => docs.into_iter().for_each(|doc| world.add(&source, doc)),
                Err(e) => world.rejected.push(Rejected {
                    source: source.clone(),
                    object: "<file>".into(),
                    errors: vec![FieldError {
                        path: "<yaml>".into(),
                        message: e.to_string(),
                    }],
                }),
            }
        }
        Ok(world)
    }

    /// Adds one document: schema-checked, typed and validated.
    pub fn add(&mut self, source: &str, mut doc: Value) {
        let api_version = doc
            .get("apiVersion")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        let kind = doc
            .get("kind")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        let name = doc
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        let object = format!("{kind}/{name}");
        let mut reject = |errors: Vec<FieldError>| {
            self.rejected.push(Rejected {
                source: source.to_string(),
                object: object.clone(),
                errors,
            });
        };
        if name.is_empty() {
            return reject(vec![FieldError {
                path: "metadata.name".into(),
                message: "required".into(),
            }]);
        }
        let namespaced = matches!(
            kind.as_str(),
            "Provider"
                | "VirtualMachine"
                | "VSphereMachine"
                | "VMSnapshot"
                | "Secret"
                | "ConfigMap"
                | "IPPool"
        );
        if namespaced && doc.pointer("/metadata/namespace").is_none() {
            if let Some(meta) = doc.get_mut("metadata").and_then(Value::as_object_mut) {
                meta.insert("namespace".into(), Value::String("default".into()));
            }
        }
        match (api_version.as_str(), kind.as_str()) {
            (API_VERSION, "Provider") => {
                if let Some(p) =
                    typed::<Provider>(&doc, &mut reject, |p| validate::provider(&p.spec))
                {
                    self.providers.push(p);
                }
            }
            (API_VERSION, "VMClass") => {
                if let Some(c) =
                    typed::<VMClass>(&doc, &mut reject, |c| validate::vm_class(&c.spec))
                {
                    self.classes.push(c);
                }
            }
            (API_VERSION, "VMImage") => {
                if let Some(i) =
                    typed::<VMImage>(&doc, &mut reject, |i| validate::vm_image(&i.spec))
                {
                    self.images.push(i);
                }
            }
            (API_VERSION, "VirtualMachine") => {
                if let Some(v) = typed::<VirtualMachine>(&doc, &mut reject, |v| {
                    validate::virtual_machine(&v.spec)
                }) {
                    self.vms.push(v);
                }
            }
            (API_VERSION, "VSphereMachine") => {
                if let Some(m) = typed::<VSphereMachine>(&doc, &mut reject, |_| Vec::new()) {
                    self.machines.push(m);
                }
            }
            (API_VERSION, "VMSnapshot") => {
                if let Some(s) = typed::<VMSnapshot>(&doc, &mut reject, |_| Vec::new()) {
                    self.snapshots.push(s);
                }
            }
            (API_VERSION, "IPPool") => {
                if let Some(p) = typed::<crate::api::IPPool>(&doc, &mut reject, |p| {
                    match crate::ipam::Pool::parse(&p.spec.pool_spec()) {
                        Ok(_) => Vec::new(),
                        Err(e) => vec![FieldError {
                            path: "spec".into(),
                            message: e.to_string(),
                        }],
                    }
                }) {
                    self.pools.push(p);
                }
            }
            ("v1", "Secret") => match serde_json::from_value::<Secret>(doc) {
                Ok(s) => self.secrets.push(s),
                Err(e) => reject(vec![FieldError {
                    path: "<root>".into(),
                    message: e.to_string(),
                }]),
            },
            ("v1", "ConfigMap") => match serde_json::from_value::<ConfigMap>(doc) {
                Ok(c) => self.config_maps.push(c),
                Err(e) => reject(vec![FieldError {
                    path: "<root>".into(),
                    message: e.to_string(),
                }]),
            },
            _ => self
                .ignored
                .push(format!("{source}: {api_version} {object}")),
        }
    }
}

/// Schema check against the generated CRD, then typed deserialization, then `validate`.
fn typed<K>(
    doc: &Value,
    reject: &mut impl FnMut(Vec<FieldError>),
    validate: impl Fn(&K) -> Vec<FieldError>,
) -> Option<K>
where
    K: DeserializeOwned + kube::Resource<DynamicType = ()>,
{
    let kind = K::kind(&());
    let crds = crate::crdgen::all();
    let schema = crds
        .iter()
        .find(|(_, crd)| crd.spec.names.kind == kind)
        .and_then(|(_, crd)| crate::check::schema::schema_of(crd));
    if let Some(schema) = schema {
        let errors = crate::check::schema::validate_object(doc, schema);
        if !errors.is_empty() {
            reject(errors);
            return None;
        }
    }
    match serde_json::from_value::<K>(doc.clone()) {
        Ok(object) => {
            let errors = validate(&object);
            if errors.is_empty() {
                Some(object)
            } else {
                reject(errors);
                None
            }
        }
        Err(e) => {
            reject(vec![FieldError {
                path: "<root>".into(),
                message: e.to_string(),
            }]);
            None
        }
    }
}

impl Objects for World {
    fn secret(&self, namespace: &str, name: &str) -> Option<Secret> {
        self.secrets
            .iter()
            .find(|s| s.namespace().as_deref() == Some(namespace) && s.name_any() == name)
            .cloned()
    }

    fn config_map(&self, namespace: &str, name: &str) -> Option<ConfigMap> {
        self.config_maps
            .iter()
            .find(|c| c.namespace().as_deref() == Some(namespace) && c.name_any() == name)
            .cloned()
    }

    fn templates_in_use(
        &self,
        provider: &crate::api::NamespacedReference,
    ) -> Option<std::collections::BTreeSet<String>> {
        Some(provider::templates_in_use(&self.machines, provider))
    }
}

struct Snapshot<'a>(&'a World);

impl Cache for Snapshot<'_> {
    fn vm_class(&self, name: &str) -> Option<Arc<VMClass>> {
        self.0
            .classes
            .iter()
            .find(|c| c.name_any() == name)
            .cloned()
            .map(Arc::new)
    }

    fn vm_image(&self, name: &str) -> Option<Arc<VMImage>> {
        self.0
            .images
            .iter()
            .find(|i| i.name_any() == name)
            .cloned()
            .map(Arc::new)
    }

    fn providers(&self) -> Vec<Arc<Provider>> {
        self.0.providers.iter().cloned().map(Arc::new).collect()
    }

    fn vsphere_machine(&self, namespace: &str, name: &str) -> Option<Arc<VSphereMachine>> {
        self.0
            .machines
            .iter()
            .find(|m| m.namespace().as_deref() == Some(namespace) && m.name_any() == name)
            .cloned()
            .map(Arc::new)
    }

    fn load(&self) -> Load {
        let key = |m: &kube::api::ObjectMeta| NamespacedReference {
            namespace: m.namespace.clone().unwrap_or_default(),
            name: m.name.clone().unwrap_or_default(),
        };
        let from_machines: Vec<_> = self
            .0
            .machines
            .iter()
            .map(|m| {
                (
                    key(&m.metadata),
                    crate::controllers::virtualmachine::build::placement_of(m),
                )
            })
            .collect();
        schedule::load_of(
            self.0
                .vms
                .iter()
                .filter_map(|vm| vm.scheduled().map(|p| (key(&vm.metadata), p)))
                .chain(from_machines.iter().map(|(k, p)| (k.clone(), p))),
        )
    }
}

/// Runs the reconcilers over `world` in dependency order: Providers, then
/// VMImages on them, then VirtualMachines (twice: schedule, then mirror).
pub async fn reconcile<V: VSphere>(world: &mut World, vsphere: &V, now: &Time) {
    world.providers.sort_by_key(schedule::provider_key);
    world.vms.sort_by_key(|v| (v.namespace(), v.name_any()));
    world.images.sort_by_key(kube::ResourceExt::name_any);
    world.classes.sort_by_key(kube::ResourceExt::name_any);

    for i in 0..world.providers.len() {
        let outcome =
            provider::reconcile_provider(&world.providers[i], &*world, vsphere, now).await;
        world.providers[i].status = Some(outcome.status);
    }

    for i in 0..world.images.len() {
        let mut per_provider: Vec<ImageProviderStatus> = Vec::new();
        for p in &world.providers {
            per_provider
                .push(provider::image_on_provider(&world.images[i], p, &*world, vsphere).await);
        }
        let generation = world.images[i].metadata.generation;
        world.images[i].status = Some(VMImageStatus {
            per_provider,
            observed_generation: generation,
        });
    }

    // The first pass schedules and creates VSphereMachines, the second mirrors them.
    for _ in 0..2 {
        mirror(world, now);
    }
}

/// The controller's pass over the VirtualMachines: schedule, create the
/// VSphereMachine, mirror its power and readiness.
pub(crate) fn mirror(world: &mut World, now: &Time) {
    {
        {
            for i in 0..world.vms.len() {
                let plan = plan::plan(&world.vms[i], &Snapshot(world), now);
                if let Some(machine) = plan.create {
                    world.machines.push(machine);
                }
                if let Some(power) = plan.set_power {
                    let (ns, name) = (world.vms[i].namespace(), world.vms[i].name_any());
                    if let Some(m) = world
                        .machines
                        .iter_mut()
                        .find(|m| m.namespace() == ns && m.name_any() == name)
                    {
                        m.spec.desired_power_state = power;
                    }
                }
                if let Some(update) = &plan.update {
                    let (ns, name) = (world.vms[i].namespace(), world.vms[i].name_any());
                    if let Some(m) = world
                        .machines
                        .iter_mut()
                        .find(|m| m.namespace() == ns && m.name_any() == name)
                    {
                        update.apply(&mut m.spec);
                    }
                }
                world.vms[i].status = Some(plan.status);
            }
        }
    }
}

/// Is a VMImage ready: ready on every Provider it has a source for, and on at least one.
pub fn image_ready(image: &VMImage) -> bool {
    let entries: Vec<_> = image
        .status
        .iter()
        .flat_map(|s| &s.per_provider)
        .filter(|e| e.reason.as_deref() != Some(provider_reason::NO_VSPHERE_SOURCE))
        .collect();
    !entries.is_empty() && entries.iter().all(|e| e.ready)
}

fn condition_of<'a>(
    conditions: &'a [k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition],
    t: &str,
) -> (&'a str, &'a str, &'a str) {
    conditions::find(conditions, t)
        .map(|c| (c.status.as_str(), c.reason.as_str(), c.message.as_str()))
        .unwrap_or(("Unknown", "", ""))
}

/// The outcome of a check: whether it passed and what to print.
pub struct Report {
    pub passed: bool,
    pub output: String,
    pub summary: String,
}

pub fn report(world: &World, output: Output, apply: bool) -> Report {
    let providers_ready = world
        .providers
        .iter()
        .filter(|p| {
            conditions::is_true(
                p.status
                    .as_ref()
                    .map(|s| s.conditions.as_slice())
                    .unwrap_or_default(),
                READY,
            )
        })
        .count();
    let images_ready = world.images.iter().filter(|i| image_ready(i)).count();
    let vm_conditions = |v: &VirtualMachine| {
        v.status
            .as_ref()
            .map(|s| s.conditions.clone())
            .unwrap_or_default()
    };
    let scheduled = world
        .vms
        .iter()
        .filter(|v| conditions::is_true(&vm_conditions(v), SCHEDULED))
        .count();
    let ready = world
        .vms
        .iter()
        .filter(|v| conditions::is_true(&vm_conditions(v), READY))
        .count();
    let snapshots_ready = snapshots::ready(world);
    let passed = world.rejected.is_empty()
        && providers_ready == world.providers.len()
        && images_ready == world.images.len()
        && scheduled == world.vms.len()
        && (!apply || ready == world.vms.len())
        && (!apply || snapshots_ready == world.snapshots.len());
    let mut summary = format!(
        "{} Provider(s), {providers_ready} Ready; {} VMImage(s), {images_ready} ready; {} VirtualMachine(s), {scheduled} scheduled, {ready} Ready; {} manifest(s) rejected",
        world.providers.len(),
        world.images.len(),
        world.vms.len(),
        world.rejected.len()
    );
    if !world.snapshots.is_empty() {
        summary.push_str(&format!(
            "; {} VMSnapshot(s), {snapshots_ready} Ready",
            world.snapshots.len()
        ));
    }
    summary.push_str(if passed { " -> PASS" } else { " -> FAIL" });
    let output = match output {
        Output::Yaml => yaml(world),
        Output::Table => table(world),
    };
    Report {
        passed,
        output,
        summary,
    }
}

fn yaml(world: &World) -> String {
    let mut docs: Vec<Value> = Vec::new();
    let push = |docs: &mut Vec<Value>, v: serde_json::Result<Value>| {
        if let Ok(v) = v {
            docs.push(v);
        }
    };
    // Secrets and ConfigMaps are inputs, never printed: they may hold credentials.
    world
        .providers
        .iter()
        .for_each(|o| push(&mut docs, serde_json::to_value(o)));
    world
        .classes
        .iter()
        .for_each(|o| push(&mut docs, serde_json::to_value(o)));
    world
        .images
        .iter()
        .for_each(|o| push(&mut docs, serde_json::to_value(o)));
    world
        .vms
        .iter()
        .for_each(|o| push(&mut docs, serde_json::to_value(o)));
    world
        .machines
        .iter()
        .for_each(|o| push(&mut docs, serde_json::to_value(o)));
    world
        .snapshots
        .iter()
        .for_each(|o| push(&mut docs, serde_json::to_value(o)));
    let mut out = String::new();
    for doc in docs {
        out.push_str("---\n");
        out.push_str(
            &serde_saphyr::to_string(&doc).unwrap_or_else(|e| format!("# cannot render: {e}\n")),
        );
    }
    out.push_str(&rejected_text(world, "# "));
    out
}

fn rejected_text(world: &World, prefix: &str) -> String {
    let mut out = String::new();
    for r in &world.rejected {
        let _ = writeln!(
            out,
            "{prefix}REJECTED {} ({}): {}",
            r.object,
            r.source,
            validate::describe(&r.errors)
        );
    }
    for i in &world.ignored {
        let _ = writeln!(out, "{prefix}ignored {i}");
    }
    out
}

fn render_table(headers: &[&str], rows: Vec<Vec<String>>) -> String {
    let mut widths: Vec<usize> = headers.iter().map(|h| h.len()).collect();
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    let line = |cells: Vec<&str>, out: &mut String| {
        let last = cells.len().saturating_sub(1);
        for (i, (cell, w)) in cells.iter().zip(&widths).enumerate() {
            if i == last {
                out.push_str(cell);
            } else {
                let _ = write!(out, "{cell:<w$}   ");
            }
        }
        out.push('\n');
    };
    line(headers.to_vec(), &mut out);
    for row in &rows {
        line(row.iter().map(String::as_str).collect(), &mut out);
    }
    out
}

fn table(world: &World) -> String {
    let mut out = String::new();
    if !world.providers.is_empty() {
        let rows = world
            .providers
            .iter()
            .map(|p| {
                let status = p.status.clone().unwrap_or_default();
                let (ready, reason, message) = condition_of(&status.conditions, READY);
                vec![
                    format!("{}/{}", p.namespace().unwrap_or_default(), p.name_any()),
                    p.spec.provider_class_ref.name.clone(),
                    ready.to_string(),
                    status.failure_domains.len().to_string(),
                    reason.to_string(),
                    message.to_string(),
                ]
            })
            .collect();
        out.push_str(&render_table(
            &[
                "PROVIDER",
                "CLASS",
                "READY",
                "FAILURE-DOMAINS",
                "REASON",
                "MESSAGE",
            ],
            rows,
        ));
        out.push('\n');
    }
    if !world.images.is_empty() {
        let mut rows = Vec::new();
        for i in &world.images {
            let entries = i
                .status
                .as_ref()
                .map(|s| s.per_provider.clone())
                .unwrap_or_default();
            if entries.is_empty() {
                rows.push(vec![
                    i.name_any(),
                    "-".into(),
                    "false".into(),
                    String::new(),
                    "no Provider".into(),
                ]);
            }
            for e in entries {
                rows.push(vec![
                    i.name_any(),
                    format!("{}/{}", e.namespace, e.provider),
                    e.ready.to_string(),
                    e.reason.unwrap_or_default(),
                    e.message.unwrap_or_default(),
                ]);
            }
        }
        out.push_str(&render_table(
            &["VMIMAGE", "PROVIDER", "READY", "REASON", "MESSAGE"],
            rows,
        ));
        out.push('\n');
    }
    if !world.classes.is_empty() {
        let rows = world
            .classes
            .iter()
            .map(|c| {
                vec![
                    c.name_any(),
                    c.spec.hardware.cpus.to_string(),
                    c.spec.hardware.memory_mib.to_string(),
                    c.spec.firmware.as_str().to_string(),
                    c.spec.tpm_enabled.to_string(),
                ]
            })
            .collect();
        out.push_str(&render_table(
            &["VMCLASS", "CPUS", "MEMORY-MIB", "FIRMWARE", "TPM"],
            rows,
        ));
        out.push('\n');
    }
    if !world.vms.is_empty() {
        let rows = world
            .vms
            .iter()
            .map(|v| {
                let status = v.status.clone().unwrap_or_default();
                let (scheduled, s_reason, s_message) = condition_of(&status.conditions, SCHEDULED);
                let (ready, _, _) = condition_of(&status.conditions, READY);
                let placement = status
                    .scheduled
                    .as_ref()
                    .map(|p| format!("{}/{}", p.provider_namespace, p.provider))
                    .unwrap_or_default();
                let fd = status
                    .scheduled
                    .as_ref()
                    .map(|p| p.failure_domain.clone())
                    .unwrap_or_default();
                vec![
                    format!("{}/{}", v.namespace().unwrap_or_default(), v.name_any()),
                    v.spec.class_ref.name.clone(),
                    v.spec.image_ref.name.clone(),
                    placement,
                    fd,
                    status.power_state.clone().unwrap_or_default(),
                    status.ip_addresses.first().cloned().unwrap_or_default(),
                    scheduled.to_string(),
                    ready.to_string(),
                    s_reason.to_string(),
                    s_message.to_string(),
                ]
            })
            .collect();
        out.push_str(&render_table(
            &[
                "VIRTUALMACHINE",
                "CLASS",
                "IMAGE",
                "PROVIDER",
                "FAILURE-DOMAIN",
                "POWER",
                "IP",
                "SCHEDULED",
                "READY",
                "REASON",
                "MESSAGE",
            ],
            rows,
        ));
        out.push('\n');
    }
    if !world.machines.is_empty() {
        let rows = world
            .machines
            .iter()
            .map(|m| {
                let status = m.status.clone().unwrap_or_default();
                let (ready, reason, message) = condition_of(&status.conditions, READY);
                vec![
                    format!("{}/{}", m.namespace().unwrap_or_default(), m.name_any()),
                    m.spec.provider_ref.to_string(),
                    m.spec.failure_domain.clone(),
                    m.spec.template.name.clone(),
                    m.spec.desired_power_state.as_str().to_string(),
                    status.mo_ref.clone().unwrap_or_default(),
                    status.power_state.clone().unwrap_or_default(),
                    status.ip_addresses.join(","),
                    ready.to_string(),
                    reason.to_string(),
                    message.to_string(),
                ]
            })
            .collect();
        out.push_str(&render_table(
            &[
                "VSPHEREMACHINE",
                "PROVIDER",
                "FAILURE-DOMAIN",
                "TEMPLATE",
                "DESIRED-POWER",
                "VM",
                "POWER",
                "IP",
                "READY",
                "REASON",
                "MESSAGE",
            ],
            rows,
        ));
        out.push('\n');
    }
    if !world.snapshots.is_empty() {
        out.push_str(&render_table(snapshots::HEADERS, snapshots::rows(world)));
        out.push('\n');
    }
    out.push_str(&rejected_text(world, ""));
    out
}
