//! Base access on the polymorphic enums: for every `AnyX` whose declared type
//! `X` has fields, `base()` / `base_mut()` return the `X` inside whichever
//! variant is held (through the chain of embedded parents: a
//! `VirtualE1000`'s `virtual_ethernet_card.virtual_device`), and on every
//! `AnyX`, `is::<T>()` tells whether the value held is a `T` or one of its
//! subtypes. Emitted in an `impl` block of their own, beside the enums of
//! `any.rs`.

use std::fmt::Write as _;

use super::structs::embedded_parent;
use super::Item;
use crate::error::{Error, Result};
use crate::model::Model;
use crate::naming;
use crate::plan::Plan;

pub(crate) fn emit(model: &Model, plan: &Plan) -> Result<Vec<Item>> {
    let mut items = Vec::new();
    for base in &plan.polymorphic {
        let any = naming::any_type_name(base);
        let base_rust = &plan.type_names[base];
        let mut code = format!("impl {any} {{\n");
        writeln!(
            code,
            "    /// Whether the value held is a `T` or one of its subtypes\n    \
             /// (`is::<{base_rust}>()` is true for every variant).\n    \
             pub fn is<T: x::SchemaType>(&self) -> bool {{ REGISTRY.is_subtype_of(self.type_name(), T::TYPE_NAME) }}"
        )
        .ok();
        // A declared type without fields (`DynamicData`) is embedded in no
        // subtype: there is nothing to hand out.
        if !model.all_fields(base).is_empty() {
            let mut variants = vec![base.clone()];
            variants.extend(model.descendants(base));
            let mut arms = String::new();
            let mut arms_mut = String::new();
            for variant in &variants {
                let path = embed_path(model, plan, variant, base)?;
                let variant_rust = &plan.type_names[variant];
                let c = plan.cfg(variant);
                if path.is_empty() {
                    writeln!(arms, "            {c}Self::{variant_rust}(value) => value,").ok();
                    writeln!(
                        arms_mut,
                        "            {c}Self::{variant_rust}(value) => value,"
                    )
                    .ok();
                } else {
                    writeln!(
                        arms,
                        "            {c}Self::{variant_rust}(value) => &value.{path},"
                    )
                    .ok();
                    writeln!(
                        arms_mut,
                        "            {c}Self::{variant_rust}(value) => &mut value.{path},"
                    )
                    .ok();
                }
            }
            writeln!(
                code,
                "    /// The `{base}` part of the value held, whichever subtype it is.\n    \
                 #[inline]\n    pub fn base(&self) -> &{base_rust} {{\n        match self {{\n{arms}        }}\n    }}\n    \
                 /// The `{base}` part of the value held, to change.\n    \
                 #[inline]\n    pub fn base_mut(&mut self) -> &mut {base_rust} {{\n        match self {{\n{arms_mut}        }}\n    }}"
            )
            .ok();
        }
        code.push_str("}\n");
        items.push(Item {
            group: naming::snake_case(base),
            code: super::format_gated(&code, &plan.cfg(base))?,
        });
    }
    Ok(items)
}

/// The field path from a value of `ty` to the `ancestor` it embeds
/// (`virtual_ethernet_card.virtual_device`), empty for `ancestor` itself.
fn embed_path(model: &Model, plan: &Plan, ty: &str, ancestor: &str) -> Result<String> {
    let mut path: Vec<String> = Vec::new();
    let mut current = ty.to_string();
    while current != ancestor {
        let complex = model.types.get(&current).ok_or_else(|| {
            Error::new(format!("{ty}: no type {current} on its way to {ancestor}"))
        })?;
        let (parent, field) = embedded_parent(model, plan, complex).ok_or_else(|| {
            Error::new(format!(
                "{ty}: {current} embeds no parent on its way to {ancestor}"
            ))
        })?;
        path.push(field);
        current = parent;
    }
    Ok(path.join("."))
}
