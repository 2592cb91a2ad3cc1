//! Data objects and faults: one struct per complex type, with its `Fields`
//! impl (a `match` on the element name to decode, a write per field to
//! encode).
//!
//! A subtype embeds its parent: `VirtualE1000` holds one field
//! `virtual_ethernet_card: VirtualEthernetCard` (which holds
//! `virtual_device: VirtualDevice`) before its own fields, and derefs to it,
//! so `card.key` reads the inherited field. Each inherited field is declared,
//! decoded and encoded once, in the type that declares it, instead of again in
//! every subtype (the schema's ~11,600 inherited field copies). The wire
//! format is the same: decoding tries the type's own fields, then hands the
//! element to the parent's decoder; encoding writes the parent's fields first
//! (schema order), then its own.

use std::fmt::Write as _;

use super::{api_level, group_of, lit, since_doc, Counts, Item};
use crate::error::Result;
use crate::model::{newer, ComplexType, Model, Occurs};
use crate::plan::Plan;

pub(crate) fn emit(model: &Model, plan: &Plan, counts: &mut Counts) -> Result<Vec<Item>> {
    let mut items = Vec::new();
    for ty in model.types.values().filter(|t| !t.is_request) {
        let mut code = struct_code(model, plan, ty);
        if !plan.polymorphic.contains(&ty.name) {
            if let Some(array) = plan.array_of.get(&ty.name) {
                let rust = &plan.type_names[&ty.name];
                writeln!(
                    code,
                    "impl x::ArrayItem for {rust} {{\n    const ARRAY_TYPE_NAME: &'static str = {};\n    const ITEM_TAG: &'static str = {};\n}}",
                    lit(array),
                    lit(&model.arrays[array].item_tag)
                )
                .ok();
            }
        }
        items.push(Item {
            group: group_of(&ty.name),
            code: super::format_gated(&code, &plan.cfg(&ty.name))?,
        });
        counts.structs += 1;
    }
    Ok(items)
}

/// The parent a type embeds: `(parent's XML name, field name)`. Its direct
/// base, unless that base and all its ancestors have no fields
/// (`DynamicData`, `MethodFault`'s field-less chains): then nothing. The
/// field is the parent's name in snake_case (`virtual_device`), with `_base`
/// appended when one of the type's own fields has that name.
pub(crate) fn embedded_parent(
    model: &Model,
    plan: &Plan,
    ty: &ComplexType,
) -> Option<(String, String)> {
    let parent = ty.base.as_ref()?;
    if model.all_fields(parent).is_empty() {
        return None;
    }
    let mut name = crate::naming::field_name(&plan.type_names[parent]);
    let own_names: Vec<&String> = ty
        .fields
        .iter()
        .map(|f| &plan.field_names[&(ty.name.clone(), f.name.clone())])
        .collect();
    while own_names.contains(&&name) {
        name.push_str("_base");
    }
    Some((parent.clone(), name))
}

/// The struct, `SchemaType`, `Structure` and `Fields` impls of a complex type.
pub(crate) fn struct_code(model: &Model, plan: &Plan, ty: &ComplexType) -> String {
    let rust = &plan.type_names[&ty.name];
    let fields: Vec<(&str, &crate::model::Field)> =
        ty.fields.iter().map(|f| (ty.name.as_str(), f)).collect();
    let embed = embedded_parent(model, plan, ty);
    let mut code = String::new();

    match &ty.base {
        Some(base) => writeln!(code, "/// `{}` (extends `{base}`).", ty.name),
        None => writeln!(code, "/// `{}`.", ty.name),
    }
    .ok();
    code.push_str(&since_doc(ty.since));
    if plan.polymorphic.contains(&ty.name) {
        writeln!(
            code,
            "///\n/// Fields of this type hold [`{}`], which also carries its subtypes.",
            crate::naming::any_type_name(&ty.name)
        )
        .ok();
    }
    if let Some((parent, field)) = &embed {
        writeln!(
            code,
            "///\n/// The fields of `{parent}` are in `{field}`, also reachable through `Deref`."
        )
        .ok();
    }
    // A structure with a repeated field writes its `Clone` out (below), so
    // that its vectors are cloned by `x::clone_vec`. `Debug` and `PartialEq`
    // are one call each into the runtime, which reads the fields through
    // `encode_fields` (see `x::debug_fields`, `x::same_fields`): derived, they
    // were a fifth of the crate's code.
    let repeated = fields.iter().any(|(_, f)| f.occurs == Occurs::Repeated);
    let derives = if repeated {
        "Default"
    } else {
        "Clone, Default"
    };
    writeln!(code, "#[derive({derives})]\npub struct {rust} {{").ok();
    if let Some((parent, field)) = &embed {
        writeln!(
            code,
            "    /// The fields `{}` inherits from `{parent}`.\n    pub {field}: {},",
            ty.name, plan.type_names[parent]
        )
        .ok();
    }
    for (owner, f) in &fields {
        let name = &plan.field_names[&(owner.to_string(), f.name.clone())];
        let field_type = plan.field_type(&f.ty, f.occurs, plan.is_boxed(owner, &f.name));
        writeln!(code, "    /// `{}`.", f.name).ok();
        code.push_str(&since_doc(f.since));
        writeln!(code, "    pub {name}: {field_type},").ok();
    }
    code.push_str("}\n");

    writeln!(
        code,
        "impl x::SchemaType for {rust} {{ const TYPE_NAME: &'static str = {}; }}",
        lit(&ty.name)
    )
    .ok();
    writeln!(code, "impl x::Structure for {rust} {{}}").ok();
    // A request type's code is compiled into a program only when it calls
    // the operation (its `Vim` method is `#[inline]`, so are these): the
    // crate itself compiles none of it.
    let inline = if ty.is_request { "#[inline]\n    " } else { "" };
    writeln!(
        code,
        "impl std::fmt::Debug for {rust} {{\n    {inline}fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {{ x::debug_fields(f, {}, x::fields_ref(self)) }}\n}}\n\
         impl PartialEq for {rust} {{\n    {inline}fn eq(&self, other: &Self) -> bool {{ x::same_fields(x::fields_ref(self), x::fields_ref(other)) }}\n}}",
        lit(&ty.name)
    )
    .ok();
    if repeated {
        code.push_str(&clone_code(plan, rust, &fields, &embed));
    }
    if let Some((parent, field)) = &embed {
        let parent_rust = &plan.type_names[parent];
        writeln!(
            code,
            "impl std::ops::Deref for {rust} {{\n    type Target = {parent_rust};\n    #[inline]\n    fn deref(&self) -> &{parent_rust} {{ &self.{field} }}\n}}\n\
             impl std::ops::DerefMut for {rust} {{\n    #[inline]\n    fn deref_mut(&mut self) -> &mut {parent_rust} {{ &mut self.{field} }}\n}}"
        )
        .ok();
    }

    // Fields: decode by element name (own fields, then the parent's), encode
    // in schema order (the parent's fields, then its own).
    writeln!(code, "impl x::Fields for {rust} {{").ok();
    let type_check = type_since_check(model, ty);
    let not_own = match &embed {
        Some((_, field)) => format!("x::Fields::decode_field(&mut self.{field}, r, name)"),
        None => "Ok(false)".to_string(),
    };
    if fields.is_empty() {
        match &embed {
            Some(_) => writeln!(
                code,
                "    {inline}fn decode_field(&mut self, r: &mut x::XmlReader<'_>, name: &str) -> Result<bool, x::DecodeError> {{ {not_own} }}"
            ),
            None => writeln!(
                code,
                "    {inline}fn decode_field(&mut self, _r: &mut x::XmlReader<'_>, _name: &str) -> Result<bool, x::DecodeError> {{ Ok(false) }}"
            ),
        }
        .ok();
    } else {
        writeln!(
            code,
            "    {inline}fn decode_field(&mut self, r: &mut x::XmlReader<'_>, name: &str) -> Result<bool, x::DecodeError> {{\n        let result = match name {{",
        )
        .ok();
        for (owner, f) in &fields {
            let name = &plan.field_names[&(owner.to_string(), f.name.clone())];
            let boxed = plan.is_boxed(owner, &f.name);
            let reader = match (f.occurs, boxed) {
                (Occurs::Required, false) => "read",
                (Occurs::Required, true) => "read_box",
                (Occurs::Optional, false) => "read_opt",
                (Occurs::Optional, true) => "read_opt_box",
                (Occurs::Repeated, _) => "read_push",
            };
            writeln!(
                code,
                "            {} => r.{reader}(&mut self.{name}),",
                lit(&f.name)
            )
            .ok();
        }
        writeln!(
            code,
            "            _ => return {not_own},\n        }};\n        x::field_decoded(result)\n    }}"
        )
        .ok();
    }
    if fields.is_empty() && embed.is_none() {
        match &type_check {
            Some(check) => writeln!(
                code,
                "    {inline}fn encode_fields(&self, w: &mut x::XmlWriter) {{ {check} }}\n}}"
            )
            .ok(),
            None => writeln!(
                code,
                "    {inline}fn encode_fields(&self, _w: &mut x::XmlWriter) {{}}\n}}"
            )
            .ok(),
        };
        return code;
    }
    // Encoding is the cold side of most programs (a walk encodes a few
    // requests and decodes thousands of objects): kept out of the way of
    // the decoders: see "Cold code" in vsphere-vim25/src/xml/mod.rs.
    code.push_str("    #[cfg_attr(target_os = \"linux\", link_section = \".text.unlikely.vsphere_client\")]\n");
    writeln!(
        code,
        "    {inline}fn encode_fields(&self, w: &mut x::XmlWriter) {{"
    )
    .ok();
    if let Some(check) = &type_check {
        writeln!(code, "        {check}").ok();
    }
    if let Some((_, field)) = &embed {
        writeln!(code, "        x::Fields::encode_fields(&self.{field}, w);").ok();
    }
    for (owner, f) in &fields {
        let name = &plan.field_names[&(owner.to_string(), f.name.clone())];
        let boxed = plan.is_boxed(owner, &f.name);
        // A secret is sent like any field and never shown by `Debug`.
        let secret = if crate::secrets::is_secret(owner, f) {
            "_secret"
        } else {
            ""
        };
        let call = match (f.occurs, boxed) {
            (Occurs::Required, false) => format!("w.write{secret}({}, &self.{name})", lit(&f.name)),
            (Occurs::Required, true) => format!("w.write{secret}({}, &*self.{name})", lit(&f.name)),
            (Occurs::Optional, false) => {
                format!("w.write_opt{secret}({}, &self.{name})", lit(&f.name))
            }
            (Occurs::Optional, true) => format!("w.write_opt_box({}, &self.{name})", lit(&f.name)),
            (Occurs::Repeated, _) => format!("w.write_vec{secret}({}, &self.{name})", lit(&f.name)),
        };
        match f.since.filter(|_| newer(f.since, ty.since)) {
            // Newer than the type: written only to a server that knows it
            // (see `XmlWriter::since`).
            Some(since) => {
                let present = match (f.occurs, boxed) {
                    (Occurs::Required, false) => format!("!x::is_default(&self.{name})"),
                    (Occurs::Required, true) => format!("!x::is_default(&*self.{name})"),
                    (Occurs::Optional, _) => format!("self.{name}.is_some()"),
                    (Occurs::Repeated, _) => format!("!self.{name}.is_empty()"),
                };
                writeln!(
                    code,
                    "        if w.since({}, {}, {present}) {{ {call}; }}",
                    api_level(since),
                    lit(&format!("{}.{}", item_owner(model, owner), f.name))
                )
                .ok();
            }
            None => {
                writeln!(code, "        {call};").ok();
            }
        }
    }
    code.push_str("    }\n}\n");
    code
}

/// `Clone` of a structure with a repeated field, what `derive(Clone)` would
/// write except that each vector is cloned by `x::clone_vec`: one loop per
/// item type instead of the standard library's `to_vec` (its drop guard,
/// `Enumerate` and `Take` adapters), ~200 lines of LLVM IR per item type in
/// a debug build.
fn clone_code(
    plan: &Plan,
    rust: &str,
    fields: &[(&str, &crate::model::Field)],
    embed: &Option<(String, String)>,
) -> String {
    let mut code =
        format!("impl Clone for {rust} {{\n    #[inline]\n    fn clone(&self) -> Self {{\n        Self {{\n");
    if let Some((_, field)) = embed {
        writeln!(code, "            {field}: self.{field}.clone(),").ok();
    }
    for (owner, f) in fields {
        let name = &plan.field_names[&(owner.to_string(), f.name.clone())];
        // Numbers and booleans (and their options) are `Copy`: copied as
        // the derive would.
        let copy = matches!(
            plan.rust_type(&f.ty).as_str(),
            "bool" | "i8" | "i16" | "i32" | "i64" | "f32" | "f64"
        ) && !plan.is_boxed(owner, &f.name);
        match f.occurs {
            Occurs::Repeated => writeln!(code, "            {name}: x::clone_vec(&self.{name}),"),
            _ if copy => writeln!(code, "            {name}: self.{name},"),
            _ => writeln!(code, "            {name}: self.{name}.clone(),"),
        }
        .ok();
    }
    code.push_str("        }\n    }\n}\n");
    code
}

/// The version check at the top of `encode_fields` of a type added after the
/// base bundle: a request holding one fails before it is sent to an older
/// server (a request type: the operation is newer than the server).
fn type_since_check(model: &Model, ty: &ComplexType) -> Option<String> {
    let since = ty.since?;
    let item = match operation_of(model, ty) {
        Some(operation) => format!("operation {operation}"),
        None => format!("type {}", ty.name),
    };
    Some(format!(
        "w.since({}, {}, true);",
        api_level(since),
        lit(&item)
    ))
}

/// The operation whose parameters a request type holds.
fn operation_of<'a>(model: &'a Model, ty: &ComplexType) -> Option<&'a str> {
    if !ty.is_request {
        return None;
    }
    model
        .operations
        .values()
        .find(|op| op.request_type == ty.name)
        .map(|op| op.name.as_str())
}

/// How a version check names the owner of a field: its type, or for a
/// parameter, its operation (`SessionIsActive.userName`).
fn item_owner<'a>(model: &'a Model, owner: &'a str) -> &'a str {
    model
        .types
        .get(owner)
        .and_then(|ty| operation_of(model, ty))
        .unwrap_or(owner)
}
