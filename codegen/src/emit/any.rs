//! Polymorphic slots: for every type with subtypes that a field, result,
//! array or property refers to, an enum `AnyX` with one boxed variant per
//! known concrete type (`X` itself first). Decoding picks the variant by
//! `xsi:type`; an unknown `xsi:type` decodes as `X` (its unknown elements
//! skipped), never an error.

use std::fmt::Write as _;

use super::{format, format_gated, lit, Counts, Item};
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
    thread_safety_checks: &mut std::collections::BTreeMap<String, String>,
) -> Result<Vec<Item>> {
    let mut items = Vec::new();
    for base in &plan.polymorphic {
        let any = naming::any_type_name(base);
        let group = naming::snake_case(base);
        let mut variants = vec![base.clone()];
        variants.extend(model.descendants(base));
        let rust = |t: &String| plan.type_names[t].clone();
        let base_rust = rust(base);
        // A gated base gates the whole enum; a gated variant is compiled in
        // with its family, and without it its values decode as their nearest
        // ancestor among the variants compiled in.
        let enum_cfg = plan.cfg(base);
        let gated_variants = variants.iter().any(|t| !plan.cfg(t).is_empty());
        let unreachable = if gated_variants {
            "#[allow(unreachable_patterns)] "
        } else {
            ""
        };

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
            writeln!(code, "    {}{}(Box<{}>),", plan.cfg(t), rust(t), rust(t)).ok();
        }
        code.push_str("}\n");
        writeln!(
            code,
            "impl Default for {any} {{ fn default() -> Self {{ Self::{base_rust}(Box::default()) }} }}"
        )
        .ok();
        // Debug, Clone, Encode and `type_name` are one `match` each, calling
        // the variant type's own impls: no trait object and no per-type glue.
        // (Debug prints the value held, as if unwrapped.) `PartialEq`
        // compares the encodings, which name the variant's type.
        let (mut debug, mut clone, mut names, mut encode, mut variant_of) = (
            String::new(),
            String::new(),
            String::new(),
            String::new(),
            String::new(),
        );
        for t in &variants {
            let r = rust(t);
            let c = plan.cfg(t);
            writeln!(debug, "{c}Self::{r}(v) => std::fmt::Debug::fmt(&**v, f),").ok();
            writeln!(
                clone,
                "{c}Self::{r}(v) => Self::{r}(Box::new((**v).clone())),"
            )
            .ok();
            writeln!(names, "{c}Self::{r}(_) => {},", lit(t)).ok();
            let xsi_type = if t == base {
                // The declared type needs no `xsi:type`; a subtype does.
                "None".to_string()
            } else {
                format!("Some({})", lit(t))
            };
            writeln!(
                encode,
                "{c}Self::{r}(v) => x::Encode::encode_as(&**v, w, tag, {xsi_type}),"
            )
            .ok();
            writeln!(
                variant_of,
                "{c}{} => match object.downcast() {{ Ok(v) => Ok(Self::{r}(v)), Err(object) => Err(x::box_object(object)) }},",
                lit(t)
            )
            .ok();
        }
        // One item each: the `match`es of the big families (MethodFault,
        // Event) would not fit one file together.
        let traits = [
            format!(
                "impl std::fmt::Debug for {any} {{\n    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {{ match self {{ {debug} }} }}\n}}\n"
            ),
            format!(
                "impl PartialEq for {any} {{\n    fn eq(&self, other: &Self) -> bool {{ x::same_encoding(self, other) }}\n}}\n"
            ),
            format!(
                "impl Clone for {any} {{\n    #[inline]\n    fn clone(&self) -> Self {{ match self {{ {clone} }} }}\n}}\n"
            ),
            format!(
                "impl x::Encode for {any} {{\n    fn encode_as(&self, w: &mut x::XmlWriter, tag: &str, _xsi_type: Option<&str>) {{\n        \
                 match self {{ {encode} }}\n    }}\n}}\n"
            ),
        ];

        writeln!(code, "impl {any} {{").ok();
        writeln!(
            code,
            "    /// The XML type name of the value held.\n    pub fn type_name(&self) -> &'static str {{ match self {{ {names} }} }}"
        )
        .ok();
        code.push_str(
            "    /// The value held as `T`, if it is exactly a `T`.\n    pub fn downcast_ref<T: x::VariantOf<Self>>(&self) -> Option<&T> { T::variant_ref(self) }\n",
        );
        let mut core = std::mem::take(&mut code);
        core.push_str("}\n");
        writeln!(
            code,
            "impl {any} {{\n    /// The value of an `anyType` slot as this enum, if it holds this\n    \
             /// type or one of its subtypes; else the object back.\n    \
             pub fn from_object(object: Box<dyn x::DataObject>) -> Result<Self, Box<dyn x::DataObject>> {{\n        \
             // Every variant is a structure: an `x::StructObject`, matched by its type's name.\n        \
             let object = x::take_chunk::<x::StructObject>(object)?;\n        \
             match object.type_name() {{\n{variant_of}_ => Err(x::box_object(object)),\n}}\n    }}\n}}"
        )
        .ok();
        let conversions = std::mem::take(&mut code);

        let arms: String = variants
            .iter()
            .skip(1)
            .map(|t| {
                format!(
                    "            {}Some({}) => match x::Decode::decode_boxed(r) {{ Ok(v) => Self::{}(v), Err(e) => return Err(e) }},\n",
                    plan.cfg(t),
                    lit(t),
                    rust(t)
                )
            })
            .collect();
        let as_base = format!(
            "match x::Decode::decode_boxed(r) {{ Ok(v) => Self::{base_rust}(v), Err(e) => return Err(e) }}"
        );
        if gated_variants {
            // A type not compiled in is looked for again by its parent's
            // name, up to the declared type (bounded: the registry is data).
            writeln!(
                code,
                "impl x::Decode for {any} {{\n    fn decode(r: &mut x::XmlReader<'_>) -> Result<Self, x::DecodeError> {{\n        \
                 let mut ancestor: Option<&'static str> = None;\n        for _ in 0..64 {{\n            \
                 let type_name = match ancestor {{ Some(name) => Some(name), None => r.xsi_type() }};\n            \
                 return Ok(match type_name {{\n{arms}            \
                 Some(name) => match r.registry().base_of(name) {{\n                \
                 Some(base) => {{ ancestor = Some(base); continue; }}\n                \
                 None => {as_base},\n            }},\n            \
                 None => {as_base},\n        }});\n        }}\n        Ok({as_base})\n    }}\n}}"
            )
            .ok();
        } else {
            writeln!(
                code,
                "impl x::Decode for {any} {{\n    fn decode(r: &mut x::XmlReader<'_>) -> Result<Self, x::DecodeError> {{\n        Ok(match r.xsi_type() {{\n{arms}            \
                 _ => {as_base},\n        }})\n    }}\n}}"
            )
            .ok();
        }
        let decode = std::mem::take(&mut code);

        writeln!(
            code,
            "impl x::FromValue for {any} {{\n    fn from_value(value: x::Value) -> Result<Self, x::ValueTypeError> {{\n        \
             x::any_from_value(value, {}, Self::from_object)\n    }}\n}}",
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
            "{THREAD_SAFETY}{enum_cfg}unsafe impl Send for {any} {{}}\n// SAFETY: as above.\n{enum_cfg}unsafe impl Sync for {any} {{}}\n"
        );
        items.push(Item {
            group: group.clone(),
            code: format_gated(&core, &enum_cfg)? + &thread_safety,
        });
        for part in traits.into_iter().chain([conversions, decode]) {
            items.push(Item {
                group: group.clone(),
                code: format_gated(&part, &enum_cfg)?,
            });
        }
        let mut from = format!(
            "impl<T: x::VariantOf<{any}>> From<T> for {any} {{ fn from(value: T) -> Self {{ value.into_variant() }} }}\n"
        );
        let other_ref = if variants.len() > 1 {
            format!("{unreachable}_ => None,")
        } else {
            String::new()
        };
        for t in &variants {
            writeln!(
                from,
                "{2}impl x::VariantOf<{any}> for {0} {{\n    #[inline]\n    fn into_variant(self) -> {any} {{ {any}::{0}(Box::new(self)) }}\n    \
                 #[inline]\n    fn variant_ref(any: &{any}) -> Option<&Self> {{ match any {{ {any}::{0}(v) => Some(v), {1} }} }}\n}}",
                rust(t),
                other_ref,
                plan.cfg(t)
            )
            .ok();
            if from.len() > 40_000 {
                items.push(Item {
                    group: group.clone(),
                    code: format_gated(&std::mem::take(&mut from), &enum_cfg)?,
                });
            }
        }
        if !from.is_empty() {
            items.push(Item {
                group: group.clone(),
                code: format_gated(&from, &enum_cfg)?,
            });
        }
        thread_safety_checks.extend(variants.iter().map(|t| (rust(t), plan.cfg(t))));
        counts.polymorphic_enums += 1;
        counts.polymorphic_variants += variants.len();
    }
    Ok(items)
}

/// The test that makes the declared `Send`/`Sync` of the `Any*` enums sound:
/// every type a variant holds must be `Send + Sync` by itself.
pub(crate) fn thread_safety_test(
    types: &std::collections::BTreeMap<String, String>,
) -> Result<String> {
    let mut code = String::from(
        "//! Every type an `Any*` enum holds is `Send + Sync`: what the enums'\n\
         //! declared `unsafe impl Send/Sync` rely on.\n\n\
         use super::types::*;\n\nfn assert_send_sync<T: Send + Sync>() {}\n\n#[test]\nfn any_enum_variants_are_send_and_sync() {\n",
    );
    for (t, cfg) in types {
        writeln!(code, "    {cfg}assert_send_sync::<{t}>();").ok();
    }
    code.push_str("}\n");
    format(&code)
}
