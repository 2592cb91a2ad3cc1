//! The `xsi:type` registry as static data: every schema type by XML name with
//! its base, kind, own fields (or enumeration values) and, for types that can
//! appear in an `anyType` slot, the function that decodes it boxed.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use super::{format, lit, pack_with, Counts, Item, MAX_FILE_BYTES};
use crate::error::Result;
use crate::model::{Field, Model, Occurs, TypeRef};
use crate::plan::Plan;

pub(crate) fn emit(
    model: &Model,
    plan: &Plan,
    counts: &mut Counts,
) -> Result<Vec<(String, String)>> {
    let mut entries: BTreeMap<&str, String> = BTreeMap::new();
    for ty in model.types.values() {
        let rust = &plan.type_names[&ty.name];
        let base = match &ty.base {
            Some(b) => format!("Some({})", lit(b)),
            None => "None".into(),
        };
        let decode = if ty.is_request {
            "None".to_string()
        } else {
            format!("Some(x::decode_boxed::<{rust}>)")
        };
        entries.insert(
            &ty.name,
            format!(
                "x::TypeInfo {{ name: {}, base: {base}, kind: x::TypeKind::Structure, fields: {}, values: &[], decode: {decode} }},\n",
                lit(&ty.name),
                fields(&ty.fields)
            ),
        );
    }
    for e in model.enums.values() {
        let rust = &plan.type_names[&e.name];
        let values: Vec<String> = e.values.iter().map(|v| lit(v)).collect();
        entries.insert(
            &e.name,
            format!(
                "x::TypeInfo {{ name: {}, base: None, kind: x::TypeKind::Enumeration, fields: &[], values: &[{}], decode: Some(x::decode_boxed::<{rust}>) }},\n",
                lit(&e.name),
                values.join(", ")
            ),
        );
    }
    for array in model.arrays.values() {
        // Arrays of primitives and references are `Value` variants, decoded by the runtime.
        let decode = match &array.item {
            TypeRef::Complex(_) | TypeRef::Enum(_) => {
                format!(
                    "Some(x::decode_boxed::<Vec<{}>>)",
                    plan.rust_type(&array.item)
                )
            }
            _ => "None".to_string(),
        };
        let item = Field {
            name: array.item_tag.clone(),
            ty: array.item.clone(),
            occurs: Occurs::Repeated,
        };
        entries.insert(
            &array.name,
            format!(
                "x::TypeInfo {{ name: {}, base: None, kind: x::TypeKind::Array, fields: {}, values: &[], decode: {decode} }},\n",
                lit(&array.name),
                fields(std::slice::from_ref(&item))
            ),
        );
    }
    counts.registry_entries = entries.len();
    counts.array_types = model.arrays.len();

    let items = entries
        .into_iter()
        .map(|(name, code)| Item {
            group: name[..1].to_lowercase(),
            code,
        })
        .collect();
    let mut files = Vec::new();
    // Entries grow by about half when formatted.
    for (name, codes) in pack_with(items, MAX_FILE_BYTES * 2 / 3) {
        let mut code = String::from("pub(crate) static TYPES: &[x::TypeInfo] = &[\n");
        code.push_str(&codes.concat());
        code.push_str("];\n");
        files.push((name, format(&code)?));
    }
    Ok(files)
}

/// A `&[FieldInfo]` literal.
pub(crate) fn fields(fields: &[Field]) -> String {
    let mut code = String::from("&[");
    for (i, f) in fields.iter().enumerate() {
        if i > 0 {
            code.push_str(", ");
        }
        let constructor = match f.occurs {
            Occurs::Required => "required",
            Occurs::Optional => "optional",
            Occurs::Repeated => "repeated",
        };
        write!(
            code,
            "x::FieldInfo::{constructor}({}, {})",
            lit(&f.name),
            lit(f.ty.xml_name())
        )
        .ok();
    }
    code.push(']');
    code
}
