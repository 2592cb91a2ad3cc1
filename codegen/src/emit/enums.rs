//! Enumerations: open enums with a variant per value and `Unrecognized(String)`
//! for values this version does not know (a newer server), which survive a
//! decode/encode round trip unchanged.

use std::fmt::Write as _;

use super::{api_level, group_of, lit, since_doc, Counts, Item};
use crate::error::Result;
use crate::model::{newer, Model};
use crate::naming::UNRECOGNIZED_VARIANT;
use crate::plan::Plan;

pub(crate) fn emit(model: &Model, plan: &Plan, counts: &mut Counts) -> Result<Vec<Item>> {
    let mut items = Vec::new();
    for e in model.enums.values() {
        let rust = &plan.type_names[&e.name];
        let variants = &plan.variants[&e.name];
        let mut code = String::new();
        writeln!(
            code,
            "/// `{}`: an open enumeration; values this version does not know are kept in `{UNRECOGNIZED_VARIANT}`.\n{}\
             #[derive(Debug, Clone, PartialEq, Eq, Hash)]\n#[non_exhaustive]\npub enum {rust} {{",
            e.name,
            since_doc(e.since)
        )
        .ok();
        for (value, variant) in e.values.iter().zip(variants) {
            writeln!(
                code,
                "    /// `{value}`.\n{}    {variant},",
                since_doc(e.since_of(value))
            )
            .ok();
        }
        writeln!(
            code,
            "    /// A value this version of the bindings does not know.\n    {UNRECOGNIZED_VARIANT}(String),\n}}"
        )
        .ok();

        writeln!(code, "impl {rust} {{\n    /// The XML value.\n    pub fn as_str(&self) -> &str {{\n        match self {{").ok();
        for (value, variant) in e.values.iter().zip(variants) {
            writeln!(code, "            Self::{variant} => {},", lit(value)).ok();
        }
        writeln!(
            code,
            "            Self::{UNRECOGNIZED_VARIANT}(value) => value,\n        }}\n    }}\n}}"
        )
        .ok();
        writeln!(
            code,
            "impl Default for {rust} {{ fn default() -> Self {{ Self::{UNRECOGNIZED_VARIANT}(String::new()) }} }}"
        )
        .ok();
        writeln!(code, "impl From<&str> for {rust} {{\n    fn from(value: &str) -> Self {{\n        match value {{").ok();
        for (value, variant) in e.values.iter().zip(variants) {
            writeln!(code, "            {} => Self::{variant},", lit(value)).ok();
        }
        writeln!(
            code,
            "            _ => Self::{UNRECOGNIZED_VARIANT}(value.to_string()),\n        }}\n    }}\n}}"
        )
        .ok();
        writeln!(
            code,
            "impl std::str::FromStr for {rust} {{\n    type Err = std::convert::Infallible;\n    fn from_str(value: &str) -> Result<Self, Self::Err> {{ Ok(Self::from(value)) }}\n}}"
        )
        .ok();
        writeln!(
            code,
            "impl std::fmt::Display for {rust} {{\n    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {{ f.write_str(self.as_str()) }}\n}}"
        )
        .ok();
        writeln!(
            code,
            // `match`, not `?`: a `?` here is one more function per enumeration.
            "impl x::Decode for {rust} {{\n    fn decode(r: &mut x::XmlReader<'_>) -> Result<Self, x::DecodeError> {{\n        match r.read_text() {{ Ok(text) => Ok(Self::from(text.trim())), Err(e) => Err(e) }}\n    }}\n}}"
        )
        .ok();
        // Values newer than the enumeration are checked against the
        // server's version (see `XmlWriter::since`); the rest go as they are.
        let mut arms = Vec::new();
        for (value, variant) in e.values.iter().zip(variants) {
            let since = e.since_of(value);
            if let Some(version) = since.filter(|_| newer(since, e.since)) {
                let check = format!(
                    "w.since({}, {}, true);",
                    api_level(version),
                    lit(&format!("{} value {value}", e.name))
                );
                arms.push((variant, check));
            }
        }
        let checks = match arms.as_slice() {
            [] => String::new(),
            [(variant, check)] => {
                format!("        if let Self::{variant} = self {{ {check} }}\n")
            }
            _ => {
                let arms: String = arms
                    .iter()
                    .map(|(variant, check)| {
                        format!("            Self::{variant} => {{ {check} }}\n")
                    })
                    .collect();
                format!("        match self {{\n{arms}            _ => {{}}\n        }}\n")
            }
        };
        writeln!(
            code,
            "impl x::Encode for {rust} {{\n    fn encode_as(&self, w: &mut x::XmlWriter, tag: &str, xsi_type: Option<&str>) {{\n{checks}        w.text_element(tag, xsi_type, self.as_str())\n    }}\n}}"
        )
        .ok();
        writeln!(
            code,
            "impl x::SchemaType for {rust} {{ const TYPE_NAME: &'static str = {}; }}",
            lit(&e.name)
        )
        .ok();
        if let Some(array) = plan.array_of.get(&e.name) {
            writeln!(
                code,
                "impl x::ArrayItem for {rust} {{\n    const ARRAY_TYPE_NAME: &'static str = {};\n    const ITEM_TAG: &'static str = {};\n}}",
                lit(array),
                lit(&model.arrays[array].item_tag)
            )
            .ok();
        }
        items.push(Item {
            group: group_of(&e.name),
            code: super::format_gated(&code, &plan.cfg(&e.name))?,
        });
        counts.enums += 1;
        counts.enum_values += e.values.len();
    }
    Ok(items)
}
