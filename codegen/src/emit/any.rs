//! Polymorphic slots: for every type with subtypes that a field, result,
//! array or property refers to, an enum `AnyX` with one boxed variant per
//! known concrete type (`X` itself first). Decoding picks the variant by
//! `xsi:type`; an unknown `xsi:type` decodes as `X` (its unknown elements
//! skipped), never an error.

use std::fmt::Write as _;

use super::{format, lit, Counts, Item};
use crate::error::Result;
use crate::model::Model;
use crate::naming;
use crate::plan::Plan;

/// Why the polymorphic enums declare `Send` and `Sync` instead of letting
/// the compiler derive them: the compiler proves an auto trait by walking
/// every type reachable from the type, again for every impl that needs it.
/// The `Any*` enums tie most of the schema into one cycle (a `MethodFault`
/// holds a `LocalizedMethodFault` holds an `AnyMethodFault`...), so each proof
/// walked thousands of types and checking the generated crate took half a
/// minute longer. Declaring them at the enums stops each walk there.
///
/// Sound because every variant holds a `Box` of a generated type, made only
/// of `String`, numbers, `Vec`/`Option`/`Box` of generated types, `Value`
/// (whose objects are `Send + Sync` by `DataObject`'s bounds) and other `Any*`
/// enums; the generated `thread_safety` test asserts `Send + Sync` for every
/// variant's type, so a field that breaks this fails the build of the tests.
const THREAD_SAFETY: &str =
    "// SAFETY: every variant is a Box of a generated type whose fields are all\n\
// Send + Sync (asserted for each variant type by the generated thread_safety test).\n";

pub(crate) fn emit(
    model: &Model,
    plan: &Plan,
    counts: &mut Counts,
    thread_safety_checks: &mut std::collections::BTreeSet<String>,
) -> Result<Vec<Item>> {
    let mut items = Vec::new();
    for base in &plan.polymorphic {
        let any = naming::any_type_name(base);
        let group = naming::snake_case(base);
        let mut variants = vec![base.clone()];
        variants.extend(model.descendants(base));
        let rust = |t: &String| plan.type_names[t].clone();
        let base_rust = rust(base);

        let mut code = String::new();
        writeln!(
            code,
            "/// `{base}` or one of its {} subtypes, chosen by `xsi:type` when decoding.\n\
             ///\n/// An `xsi:type` this version does not know decodes as [`{any}::{base_rust}`].\n\
             #[non_exhaustive]\npub enum {any} {{",
            variants.len() - 1
        )
        .ok();
        for t in &variants {
            writeln!(code, "    {}(Box<{}>),", rust(t), rust(t)).ok();
        }
        code.push_str("}\n");
        writeln!(
            code,
            "impl Default for {any} {{ fn default() -> Self {{ Self::{base_rust}(Box::default()) }} }}"
        )
        .ok();
        // Debug, Clone and PartialEq go through the boxed value's `DataObject`
        // impl, which exists anyway: derived impls would compile a match arm
        // and `Box` glue per variant, for every enum.
        writeln!(
            code,
            "impl std::fmt::Debug for {any} {{\n    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {{ self.as_data_object().fmt(f) }}\n}}\n\
             impl PartialEq for {any} {{\n    fn eq(&self, other: &Self) -> bool {{ self.as_data_object().eq_dyn(other.as_data_object()) }}\n}}\n\
             impl Clone for {any} {{\n    fn clone(&self) -> Self {{\n        \
             // `clone_box` returns the same type, which `from_data_object` accepts.\n        \
             Self::from_data_object(self.as_data_object().clone_box()).unwrap_or_default()\n    }}\n}}"
        )
        .ok();

        writeln!(code, "impl {any} {{").ok();
        code.push_str("    /// The value held, as a schema object (to downcast or inspect).\n");
        code.push_str(
            "    pub fn as_data_object(&self) -> &dyn x::DataObject {\n        match self {\n",
        );
        for t in &variants {
            writeln!(
                code,
                // Out of line, so each type's vtable is emitted once (see
                // `as_dyn` in the runtime).
                "            Self::{}(value) => x::as_dyn(&**value),",
                rust(t)
            )
            .ok();
        }
        code.push_str("        }\n    }\n");
        code.push_str(
            "    /// The XML type name of the value held.\n    pub fn type_name(&self) -> &'static str { self.as_data_object().type_name() }\n",
        );
        code.push_str(
            "    /// The value held as `T`, if it is one.\n    pub fn downcast_ref<T: x::DataObject>(&self) -> Option<&T> { self.as_data_object().downcast_ref() }\n",
        );
        let mut core = std::mem::take(&mut code);
        core.push_str("}\n");
        code.push_str(&format!("impl {any} {{\n"));
        code.push_str(
            "    /// Wraps a boxed schema object of this type or one of its subtypes.\n    pub fn from_data_object(object: Box<dyn x::DataObject>) -> Option<Self> {\n        match object.type_name() {\n",
        );
        for t in &variants {
            writeln!(
                code,
                "            {} => match x::downcast_box(object) {{ Ok(v) => Some(Self::{}(v)), Err(_) => None }},",
                lit(t),
                rust(t)
            )
            .ok();
        }
        code.push_str("            _ => None,\n        }\n    }\n}\n");
        let conversions = std::mem::take(&mut code);

        writeln!(
            code,
            "impl x::Decode for {any} {{\n    fn decode(r: &mut x::XmlReader<'_>) -> Result<Self, x::DecodeError> {{\n        Ok(match r.xsi_type() {{"
        )
        .ok();
        for t in variants.iter().skip(1) {
            writeln!(
                code,
                "            Some({}) => match r.read_boxed() {{ Ok(v) => Self::{}(v), Err(e) => return Err(e) }},",
                lit(t),
                rust(t)
            )
            .ok();
        }
        writeln!(
            code,
            "            _ => match r.read_boxed() {{ Ok(v) => Self::{base_rust}(v), Err(e) => return Err(e) }},\n        }})\n    }}\n}}"
        )
        .ok();
        let decode = std::mem::take(&mut code);

        writeln!(
            code,
            "impl x::Encode for {any} {{\n    fn encode_as(&self, w: &mut x::XmlWriter, tag: &str, _xsi_type: Option<&str>) {{\n        \
             let object = self.as_data_object();\n        \
             // The declared type needs no `xsi:type`; a subtype does.\n        \
             let xsi_type = match self {{ Self::{base_rust}(_) => None, _ => Some(object.type_name()) }};\n        \
             object.encode_dyn(w, tag, xsi_type);\n    }}\n}}"
        )
        .ok();
        writeln!(
            code,
            "impl x::FromValue for {any} {{\n    fn from_value(value: x::Value) -> Result<Self, x::ValueTypeError> {{\n        \
             x::any_from_value(value, {}, Self::from_data_object)\n    }}\n}}",
            lit(base)
        )
        .ok();
        if let Some(array) = plan.array_of.get(base) {
            writeln!(
                code,
                "impl x::ArrayItem for {any} {{\n    const ARRAY_TYPE_NAME: &'static str = {};\n    const ITEM_TAG: &'static str = {};\n}}",
                lit(array),
                lit(&model.arrays[array].item_tag)
            )
            .ok();
        }
        core.push_str(&code);
        // Separate items keep the files of the big families (MethodFault,
        // Event) small.
        // Appended after formatting: the formatter drops `//` comments.
        let thread_safety = format!(
            "{THREAD_SAFETY}unsafe impl Send for {any} {{}}\n// SAFETY: as above.\nunsafe impl Sync for {any} {{}}\n"
        );
        items.push(Item {
            group: group.clone(),
            code: format(&core)? + &thread_safety,
        });
        for part in [conversions, decode] {
            items.push(Item {
                group: group.clone(),
                code: format(&part)?,
            });
        }
        let mut from = format!(
            "impl<T: x::VariantOf<{any}>> From<T> for {any} {{ fn from(value: T) -> Self {{ value.into_variant() }} }}\n"
        );
        for t in &variants {
            writeln!(
                from,
                "impl x::VariantOf<{any}> for {0} {{ fn into_variant(self) -> {any} {{ {any}::{0}(Box::new(self)) }} }}",
                rust(t)
            )
            .ok();
            if from.len() > 40_000 {
                items.push(Item {
                    group: group.clone(),
                    code: format(&std::mem::take(&mut from))?,
                });
            }
        }
        if !from.is_empty() {
            items.push(Item {
                group: group.clone(),
                code: format(&from)?,
            });
        }
        thread_safety_checks.extend(variants.iter().map(rust));
        counts.polymorphic_enums += 1;
        counts.polymorphic_variants += variants.len();
    }
    Ok(items)
}

/// The test that makes the declared `Send`/`Sync` of the `Any*` enums sound:
/// every type a variant holds must be `Send + Sync` by itself.
pub(crate) fn thread_safety_test(types: &std::collections::BTreeSet<String>) -> Result<String> {
    let mut code = String::from(
        "//! Every type an `Any*` enum holds is `Send + Sync`: what the enums'\n\
         //! declared `unsafe impl Send/Sync` rely on.\n\n\
         use super::types::*;\n\nfn assert_send_sync<T: Send + Sync>() {}\n\n#[test]\nfn any_enum_variants_are_send_and_sync() {\n",
    );
    for t in types {
        writeln!(code, "    assert_send_sync::<{t}>();").ok();
    }
    code.push_str("}\n");
    format(&code)
}
