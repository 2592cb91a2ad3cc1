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

pub(crate) fn emit(model: &Model, plan: &Plan, counts: &mut Counts) -> Result<Vec<Item>> {
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
             #[derive(Debug, Clone, PartialEq)]\n#[non_exhaustive]\npub enum {any} {{",
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

        writeln!(code, "impl {any} {{").ok();
        code.push_str("    /// The value held, as a schema object (to downcast or inspect).\n");
        code.push_str("    pub fn as_data_object(&self) -> &dyn x::DataObject {\n        match self {\n");
        for t in &variants {
            writeln!(code, "            Self::{}(value) => value.as_ref(),", rust(t)).ok();
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
                "            {} => x::downcast_box(object).ok().map(Self::{}),",
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
                "            Some({}) => Self::{}(r.read_boxed()?),",
                lit(t),
                rust(t)
            )
            .ok();
        }
        writeln!(
            code,
            "            _ => Self::{base_rust}(r.read_boxed()?),\n        }})\n    }}\n}}"
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
        for part in [core, conversions, decode] {
            items.push(Item {
                group: group.clone(),
                code: format(&part)?,
            });
        }
        for chunk in variants.chunks(200) {
            let mut from = String::new();
            for t in chunk {
                writeln!(
                    from,
                    "impl From<{0}> for {any} {{ fn from(value: {0}) -> Self {{ Self::{0}(Box::new(value)) }} }}",
                    rust(t)
                )
                .ok();
            }
            items.push(Item {
                group: group.clone(),
                code: format(&from)?,
            });
        }
        counts.polymorphic_enums += 1;
        counts.polymorphic_variants += variants.len();
    }
    Ok(items)
}
