//! The `xsi:type` registry as static data: every schema type by XML name with
//! its base, kind, own fields (or enumeration values) and, for types that can
//! appear in an `anyType` slot, the function that decodes it boxed.
//!
//! The tables hold no pointers (see `xml::Registry` for why): every name is
//! an offset into one string table, `registry/names.txt`, and fields and
//! values are index ranges into their chunk's tables. Each entry carries its
//! names as a comment, so the generated code still reads.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use super::{format, lit, pack_sized, Counts, MAX_FILE_BYTES};
use crate::bail;
use crate::error::Result;
use crate::model::{Field, Model, Occurs, TypeRef};
use crate::plan::Plan;

/// The registry's files: chunk files (module name, code) and the string table.
pub(crate) struct RegistryFiles {
    pub chunks: Vec<(String, String)>,
    /// `names.txt`: `header`, then one name per line.
    pub names: String,
}

enum Entry {
    Structure {
        base: Option<String>,
        fields: Vec<Field>,
    },
    Enumeration {
        values: Vec<String>,
    },
    Array {
        item: Field,
    },
}

struct Registered {
    entry: Entry,
    /// The boxed decoder (`x::decode_boxed::<T>`), when the type has one.
    decode: Option<String>,
}

pub(crate) fn emit(
    model: &Model,
    plan: &Plan,
    header: &str,
    counts: &mut Counts,
) -> Result<RegistryFiles> {
    let mut entries: BTreeMap<&str, Registered> = BTreeMap::new();
    for ty in model.types.values() {
        let rust = &plan.type_names[&ty.name];
        entries.insert(
            &ty.name,
            Registered {
                entry: Entry::Structure {
                    base: ty.base.clone(),
                    fields: ty.fields.clone(),
                },
                decode: (!ty.is_request).then(|| format!("x::decode_boxed::<{rust}>")),
            },
        );
    }
    for e in model.enums.values() {
        let rust = &plan.type_names[&e.name];
        entries.insert(
            &e.name,
            Registered {
                entry: Entry::Enumeration {
                    values: e.values.clone(),
                },
                decode: Some(format!("x::decode_boxed::<{rust}>")),
            },
        );
    }
    for array in model.arrays.values() {
        // Arrays of primitives and references are `Value` variants, decoded by the runtime.
        let decode = match &array.item {
            TypeRef::Complex(_) | TypeRef::Enum(_) => Some(format!(
                "x::decode_boxed::<Vec<{}>>",
                plan.rust_type(&array.item)
            )),
            _ => None,
        };
        let item = Field {
            name: array.item_tag.clone(),
            ty: array.item.clone(),
            occurs: Occurs::Repeated,
            since: None,
        };
        entries.insert(
            &array.name,
            Registered {
                entry: Entry::Array { item },
                decode,
            },
        );
    }
    counts.registry_entries = entries.len();
    counts.array_types = model.arrays.len();

    let names = NameTable::new(header, &entries)?;
    // Chunks by first letter, sized by an estimate of their formatted code.
    let sized = entries
        .iter()
        .map(|(name, registered)| {
            let size = 160 + 110 * entry_rows(&registered.entry);
            (name[..1].to_lowercase(), *name, size)
        })
        .collect();
    let mut chunks = Vec::new();
    for (file, types) in pack_sized(sized, MAX_FILE_BYTES) {
        // Written out as is (a formatter would drop the comments that name
        // each entry); checked to parse.
        let code = chunk_code(&types, &entries, &names);
        format(&code)?;
        chunks.push((file, code));
    }
    Ok(RegistryFiles {
        chunks,
        names: names.text,
    })
}

fn entry_rows(entry: &Entry) -> usize {
    match entry {
        Entry::Structure { fields, .. } => fields.len(),
        Entry::Enumeration { values } => values.len(),
        Entry::Array { .. } => 1,
    }
}

/// A row's indentation in a chunk's tables.
const ROW: &str = "        ";

/// One chunk: `pub(crate) static CHUNK: x::RegistryChunk`.
fn chunk_code(types: &[&str], entries: &BTreeMap<&str, Registered>, names: &NameTable) -> String {
    let (mut type_rows, mut decoders, mut fields, mut values) =
        (String::new(), String::new(), String::new(), String::new());
    let (mut field_count, mut value_count) = (0usize, 0usize);
    for &name in types {
        let registered = &entries[name];
        let n = names.code(name);
        match &registered.entry {
            Entry::Structure { base, fields: own } => {
                let base_code = base
                    .as_deref()
                    .map_or_else(|| "x::Name::NONE".to_string(), |b| names.code(b));
                let base_note = base
                    .as_deref()
                    .map(|b| format!(": {b}"))
                    .unwrap_or_default();
                writeln!(
                    type_rows,
                    "{ROW}x::TypeEntry::structure({n}, {base_code}, {field_count}, {}), // {name}{base_note}",
                    own.len()
                )
                .ok();
                for f in own {
                    field_row(&mut fields, f, names);
                }
                field_count += own.len();
            }
            Entry::Enumeration { values: own } => {
                writeln!(
                    type_rows,
                    "{ROW}x::TypeEntry::enumeration({n}, {value_count}, {}), // {name}",
                    own.len()
                )
                .ok();
                for v in own {
                    writeln!(values, "{ROW}{}, // {v}", names.code(v)).ok();
                }
                value_count += own.len();
            }
            Entry::Array { item } => {
                writeln!(
                    type_rows,
                    "{ROW}x::TypeEntry::array({n}, {field_count}), // {name}"
                )
                .ok();
                field_row(&mut fields, item, names);
                field_count += 1;
            }
        }
        match &registered.decode {
            Some(decode) => writeln!(decoders, "{ROW}Some({decode}),").ok(),
            None => writeln!(decoders, "{ROW}None, // {name}").ok(),
        };
    }
    format!(
        "pub(crate) static CHUNK: x::RegistryChunk = x::RegistryChunk {{\n    \
         types: &[\n{type_rows}    ],\n    \
         decoders: &[\n{decoders}    ],\n    \
         fields: &[\n{fields}    ],\n    \
         values: &[\n{values}    ],\n\
         }};\n"
    )
}

fn field_row(out: &mut String, f: &Field, names: &NameTable) {
    let constructor = match f.occurs {
        Occurs::Required => "required",
        Occurs::Optional => "optional",
        Occurs::Repeated => "repeated",
    };
    let type_name = f.ty.xml_name();
    writeln!(
        out,
        "{ROW}x::FieldEntry::{constructor}({}, {}), // {}: {type_name}",
        names.code(&f.name),
        names.code(type_name),
        f.name
    )
    .ok();
}

/// Every name of the registry, once, in one string: a name is
/// `offset << 8 | length` (`xml::Name`).
struct NameTable {
    text: String,
    offsets: BTreeMap<String, u32>,
}

impl NameTable {
    fn new(header: &str, entries: &BTreeMap<&str, Registered>) -> Result<NameTable> {
        let mut all: BTreeSet<&str> = BTreeSet::new();
        for (name, registered) in entries {
            all.insert(name);
            match &registered.entry {
                Entry::Structure { base, fields } => {
                    all.extend(base.as_deref());
                    for f in fields {
                        all.insert(&f.name);
                        all.insert(f.ty.xml_name());
                    }
                }
                Entry::Enumeration { values } => all.extend(values.iter().map(String::as_str)),
                Entry::Array { item } => {
                    all.insert(&item.name);
                    all.insert(item.ty.xml_name());
                }
            }
        }
        let mut text = header.to_string();
        let mut offsets = BTreeMap::new();
        for name in all {
            if name.is_empty() || name.len() > 0xff || name.contains('\n') {
                bail!("registry name {name:?} cannot go in the string table (1 to 255 bytes, one line)");
            }
            let offset = u32::try_from(text.len()).ok().filter(|o| *o < 1 << 24);
            let Some(offset) = offset else {
                bail!("the registry's string table passed 16 MB");
            };
            offsets.insert(name.to_string(), offset << 8 | name.len() as u32);
            text.push_str(name);
            text.push('\n');
        }
        Ok(NameTable { text, offsets })
    }

    /// `x::Name(0x...)` for `name` (in the table by construction).
    fn code(&self, name: &str) -> String {
        format!(
            "x::Name({:#x})",
            self.offsets.get(name).copied().unwrap_or(0)
        )
    }
}

/// A `&[FieldInfo]` literal (the managed object table's properties).
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
