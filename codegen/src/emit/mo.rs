//! Managed objects: one struct per managed object type with every property
//! (inherited first) as an `Option` (a retrieval is partial) plus `mo_ref`,
//! and the static property table that validates property paths.

use std::collections::BTreeSet;
use std::fmt::Write as _;

use super::{format, lit, pack, registry, Counts, Item};
use crate::bail;
use crate::error::Result;
use crate::model::{Field, ManagedObject, Model, Occurs, Property};
use crate::naming;
use crate::plan::Plan;

/// Returns `(file name, contents without header)` pairs for `mo/`.
pub(crate) fn emit(
    model: &Model,
    plan: &Plan,
    counts: &mut Counts,
) -> Result<Vec<(String, String)>> {
    let mut items = Vec::new();
    for mo in model.managed_objects.values() {
        let rust = naming::type_name(&mo.name);
        if plan.type_names.values().any(|t| *t == rust) {
            bail!(
                "managed object {} has the Rust name of a data type",
                mo.name
            );
        }
        items.push(Item {
            group: super::group_of(&mo.name),
            code: super::format_gated(
                &struct_code(model, plan, mo, &rust)?,
                &plan.managed_object_cfg(&mo.name),
            )?,
        });
        counts.managed_objects += 1;
    }

    let mut files = Vec::new();
    let mut root = String::from(
        "//! Managed objects: their properties as typed structs, and the property\n\
         //! table that validates a property path (`runtime.powerState`).\n\n",
    );
    // One module, its files included, like `types` (codegen's emit/mod.rs).
    root.push_str("#[allow(unused_imports)]\nuse super::types::*;\nuse crate::xml as x;\n\n");
    for (name, codes) in pack(items) {
        writeln!(root, "include!(\"{name}.rs\");").ok();
        files.push((format!("{name}.rs"), format!("\n{}", codes.concat())));
    }
    let mut table = String::from(
        "/// Every managed object type with its own properties and operations.\n\
         pub static MANAGED_OBJECTS: x::ManagedObjects = x::ManagedObjects::new(&[\n",
    );
    for mo in model.managed_objects.values() {
        let base = match &mo.base {
            Some(b) => format!("Some({})", lit(b)),
            None => "None".into(),
        };
        let properties: Vec<Field> = mo
            .properties
            .iter()
            .map(|p| Field {
                name: p.name.clone(),
                ty: p.ty.clone(),
                occurs: p.occurs,
                since: p.since,
            })
            .collect();
        let methods: Vec<String> = mo.methods.iter().map(|m| lit(m)).collect();
        writeln!(
            table,
            "x::ManagedObjectInfo {{ name: {}, base: {base}, properties: {}, methods: &[{}] }},",
            lit(&mo.name),
            registry::fields(&properties),
            methods.join(", ")
        )
        .ok();
    }
    table.push_str("]);\n");
    table.push_str(
        "/// Resolves a property path on a managed object type to the field it names:\n\
         /// `property_type(\"VirtualMachine\", \"runtime.powerState\")` is the\n\
         /// `VirtualMachinePowerState` field `powerState`.\n\
         pub fn property_type(mo_type: &str, path: &str) -> Result<x::FieldInfo, x::PropertyPathError> {\n    \
         MANAGED_OBJECTS.resolve_path(&super::REGISTRY, mo_type, path)\n}\n",
    );
    root.push('\n');
    root.push_str(&format(&table)?);
    files.push(("mod.rs".to_string(), root));
    Ok(files)
}

fn lineage<'a>(model: &'a Model, mo: &'a ManagedObject) -> Vec<&'a ManagedObject> {
    let mut chain = vec![mo];
    let mut current = mo.base.as_ref().and_then(|b| model.managed_objects.get(b));
    while let Some(m) = current {
        chain.push(m);
        current = m.base.as_ref().and_then(|b| model.managed_objects.get(b));
    }
    chain.reverse();
    chain
}

fn struct_code(model: &Model, plan: &Plan, mo: &ManagedObject, rust: &str) -> Result<String> {
    let properties: Vec<(&str, &Property)> = lineage(model, mo)
        .into_iter()
        .flat_map(|m| m.properties.iter().map(move |p| (m.name.as_str(), p)))
        .collect();
    let mut names = BTreeSet::from(["mo_ref".to_string(), "retrieved".to_string()]);
    let mut code = String::new();
    match &mo.base {
        Some(base) => writeln!(code, "/// Managed object `{}` (extends `{base}`).", mo.name),
        None => writeln!(code, "/// Managed object `{}`.", mo.name),
    }
    .ok();
    code.push_str(&super::since_doc(mo.since));
    writeln!(
        code,
        "///\n/// Every property is `None` until retrieved.\n#[derive(Debug, Clone, PartialEq, Default)]\npub struct {rust} {{\n    \
         /// The managed object the properties were retrieved from.\n    pub mo_ref: x::ManagedObjectReference,\n    \
         /// The property paths the server sent values for (`RetrievedPaths::contains`).\n    \
         pub retrieved: x::RetrievedPaths,"
    )
    .ok();
    let mut arms = String::new();
    let mut left_out = String::new();
    for (owner, p) in &properties {
        let name = naming::field_name(&p.name);
        if !names.insert(name.clone()) {
            bail!("managed object {}: two properties map to {name}", mo.name);
        }
        let inner = match p.occurs {
            Occurs::Repeated => plan.field_type(&p.ty, Occurs::Repeated, false),
            _ => plan.rust_type(&p.ty),
        };
        let mut doc = format!("`{}`", p.name);
        if *owner != mo.name {
            write!(doc, ", from `{owner}`").ok();
        }
        if let Some(target) = &p.mo_type {
            write!(doc, ": a `{target}`").ok();
        }
        let cfg = plan.property_cfg(owner, &p.name);
        if let Some(feature) = plan.gated_property_feature(owner, &p.name) {
            let feature = lit(feature);
            write!(
                left_out,
                "#[cfg(not(feature = {feature}))] ({}, {feature}), ",
                lit(&p.name)
            )
            .ok();
        }
        writeln!(
            code,
            "    /// {doc}.\n{}    {cfg}pub {name}: Option<{inner}>,",
            super::since_doc(p.since)
        )
        .ok();
        writeln!(
            arms,
            "            {cfg}{} => self.{name} = x::from_property(value)?,",
            lit(&p.name)
        )
        .ok();
    }
    code.push_str("}\n");
    writeln!(
        code,
        "impl x::ManagedObjectType for {rust} {{\n    const TYPE_NAME: &'static str = {};",
        lit(&mo.name)
    )
    .ok();
    if !left_out.is_empty() {
        writeln!(
            code,
            "    const LEFT_OUT: &'static [(&'static str, &'static str)] = &[{left_out}];"
        )
        .ok();
    }
    code.push_str(
        "    fn mo_ref(&self) -> &x::ManagedObjectReference { &self.mo_ref }\n    \
         fn set_property(&mut self, name: &str, value: x::Value) -> Result<bool, x::ValueTypeError> {\n",
    );
    if properties.is_empty() {
        code.push_str("        let _ = (name, value);\n        Ok(false)\n    }\n}\n");
    } else {
        writeln!(
            code,
            "        match name {{\n{arms}            _ => return Ok(false),\n        }}\n        Ok(true)\n    }}\n}}"
        )
        .ok();
    }
    writeln!(
        code,
        "impl crate::property::ManagedObject for {rust} {{\n    \
         fn set_mo_ref(&mut self, mo_ref: x::ManagedObjectReference) {{ self.mo_ref = mo_ref; }}\n    \
         fn retrieved(&self) -> &x::RetrievedPaths {{ &self.retrieved }}\n    \
         fn retrieved_mut(&mut self) -> &mut x::RetrievedPaths {{ &mut self.retrieved }}\n}}"
    )
    .ok();
    Ok(code)
}
