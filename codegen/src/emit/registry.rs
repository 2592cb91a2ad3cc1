//! The `xsi:type` registry as static data: every schema type by XML name with
//! its base, kind, own fields (or enumeration values), and what an `anyType`
//! slot holds of the chunk's types: an enum `Object` with a boxed variant per
//! type that can appear there, its one decoding `match`, and the one
//! `x::DataObject` impl of the chunk (a few dozen trait objects in all,
//! instead of a vtable and its glue for each of ~4,000 types).
//!
//! The tables hold no pointers (see `xml::Registry` for why): every name is
//! an offset into one string table, `registry/names.txt`, and fields and
//! values are index ranges into their chunk's tables. Each entry carries its
//! names as a comment, so the generated code still reads.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use super::{cfg_attr, format, lit, pack_sized, Counts, MAX_FILE_BYTES};
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
    /// The type's variant of its chunk's `Object`, when it can appear in an
    /// `anyType` slot (not request types, not arrays of primitives).
    object: Option<Variant>,
}

/// How an `anyType` slot holds a value of one type.
enum ObjectKind {
    /// A data object or fault: an `x::StructObject`.
    Structure,
    /// A variant of the chunk's `Object` enum.
    Enumeration,
    /// A variant of the chunk's `Object` enum, with the Rust item type
    /// (`AnyVirtualDevice`).
    Array(String),
}

/// What an `anyType` slot holds of one type: a structure (an
/// `x::StructObject`), or a variant of its chunk's `Object` enum.
struct Variant {
    /// The variant's name (the Rust type name; `ArrayOfVirtualDevice` for an array).
    name: String,
    /// The Rust type it boxes (`VirtualDisk`, `Vec<AnyVirtualDevice>`).
    rust: String,
    kind: ObjectKind,
    /// The type's family feature, if gated.
    feature: Option<&'static str>,
    /// Its `#[cfg(..)] ` (`Plan::cfg`), or nothing.
    cfg: String,
}

pub(crate) fn emit(
    model: &Model,
    plan: &Plan,
    header: &str,
    counts: &mut Counts,
    thread_safety_checks: &mut BTreeMap<String, String>,
) -> Result<RegistryFiles> {
    if model.types.contains_key(OBJECT) || model.enums.contains_key(OBJECT) {
        bail!("a schema type named {OBJECT} would clash with the registry's enum of that name");
    }
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
                object: (!ty.is_request).then(|| Variant {
                    name: rust.clone(),
                    rust: rust.clone(),
                    kind: ObjectKind::Structure,
                    feature: plan.gated.get(&ty.name).copied(),
                    cfg: plan.cfg(&ty.name),
                }),
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
                object: Some(Variant {
                    name: rust.clone(),
                    rust: rust.clone(),
                    kind: ObjectKind::Enumeration,
                    feature: plan.gated.get(&e.name).copied(),
                    cfg: plan.cfg(&e.name),
                }),
            },
        );
    }
    let mut array_items = BTreeSet::new();
    for array in model.arrays.values() {
        // Arrays of primitives and references are `Value` variants, decoded by the runtime.
        let object = match &array.item {
            TypeRef::Complex(item_name) | TypeRef::Enum(item_name) => {
                let feature = plan.gated.get(item_name).copied();
                let cfg = plan.cfg(item_name);
                let item = plan.rust_type(&array.item);
                if !array_items.insert(item.clone()) {
                    bail!("{}: a second array of {item}", array.name);
                }
                Some(Variant {
                    name: array.name.replace('_', ""),
                    rust: format!("Vec<{item}>"),
                    kind: ObjectKind::Array(item),
                    feature,
                    cfg,
                })
            }
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
                object,
            },
        );
    }
    counts.registry_entries = entries.len();
    thread_safety_checks.extend(
        entries
            .values()
            .filter_map(|r| r.object.as_ref())
            .map(|v| (v.rust.clone(), v.cfg.clone())),
    );
    counts.array_types = model.arrays.len();

    let names = NameTable::new(header, &entries)?;
    // Chunks by first letter, sized by an estimate of their formatted code.
    let sized = entries
        .iter()
        .map(|(name, registered)| {
            // A type's row and its object's lines: a structure's decoder
            // arm, or an enumeration's or array's variant (the enum, each
            // `match`, the `ObjectType` impl).
            let object = match registered.object.as_ref().map(|v| &v.kind) {
                Some(ObjectKind::Structure) => 110,
                Some(_) => 1200,
                None => 0,
            };
            let size = 160 + object + 110 * entry_rows(&registered.entry);
            (name[..1].to_lowercase(), *name, size)
        })
        .collect();
    let mut chunks = Vec::new();
    for (file, types) in pack_sized(sized, MAX_FILE_BYTES) {
        // Written out as is (a formatter would drop the comments that name
        // each entry); checked to parse.
        let code = chunk_code(&types, &entries, &names)?;
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

/// The name of each chunk's enum of the values an `anyType` slot can hold.
const OBJECT: &str = "Object";

/// One chunk: `pub(crate) static CHUNK: x::RegistryChunk`, its objects'
/// decoder and its `Object` enum.
fn chunk_code(
    types: &[&str],
    entries: &BTreeMap<&str, Registered>,
    names: &NameTable,
) -> Result<String> {
    let (mut type_rows, mut fields, mut values) = (String::new(), String::new(), String::new());
    let mut objects: Vec<(usize, &str, &Variant)> = Vec::new();
    let (mut field_count, mut value_count) = (0usize, 0usize);
    for (index, &name) in types.iter().enumerate() {
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
                if registered.object.is_some() {
                    writeln!(
                        type_rows,
                        "{ROW}x::TypeEntry::structure({n}, {base_code}, {field_count}, {}), // {name}{base_note}",
                        own.len()
                    )
                    .ok();
                } else {
                    if base.is_some() {
                        bail!("request type {name} has a base");
                    }
                    writeln!(
                        type_rows,
                        "{ROW}x::TypeEntry::request({n}, {field_count}, {}), // {name}",
                        own.len()
                    )
                    .ok();
                }
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
                let constructor = if registered.object.is_some() {
                    "array"
                } else {
                    "primitive_array"
                };
                writeln!(
                    type_rows,
                    "{ROW}x::TypeEntry::{constructor}({n}, {field_count}), // {name}"
                )
                .ok();
                field_row(&mut fields, item, names);
                field_count += 1;
            }
        }
        if let Some(variant) = &registered.object {
            objects.push((index, name, variant));
        }
    }
    let mut variant_names = BTreeSet::new();
    for (_, name, variant) in &objects {
        if !variant_names.insert(variant.name.as_str()) {
            bail!("{name}: a second registry variant named {}", variant.name);
        }
    }
    // Every object gated: the `Object` enum and its decoder exist only with
    // one of the families' features.
    let gated_chunk = (!objects.is_empty() && objects.iter().all(|(_, _, v)| v.feature.is_some()))
        .then(|| cfg_attr(objects.iter().filter_map(|(_, _, v)| v.feature)));
    let decode = match &gated_chunk {
        _ if objects.is_empty() => "decode: x::RegistryChunk::NO_OBJECTS".to_string(),
        None => "decode".to_string(),
        Some(cfg) => {
            let predicate = cfg
                .trim()
                .trim_start_matches("#[cfg(")
                .trim_end_matches(")]");
            format!(
                "{}\n    decode,\n    #[cfg(not({predicate}))]\n    decode: x::RegistryChunk::NO_OBJECTS",
                cfg.trim()
            )
        }
    };
    let mut code = format!(
        "pub(crate) static CHUNK: x::RegistryChunk = x::RegistryChunk {{\n    \
         types: &[\n{type_rows}    ],\n    \
         {decode},\n    \
         fields: &[\n{fields}    ],\n    \
         values: &[\n{values}    ],\n\
         }};\n"
    );
    if !objects.is_empty() {
        code.push('\n');
        code.push_str(&objects_code(
            &objects,
            gated_chunk.as_deref().unwrap_or_default(),
        ));
    }
    Ok(code)
}

/// A chunk's decoder of the objects an `anyType` slot holds of its types
/// (behind `chunk_cfg` when every one is gated): a structure as an
/// `x::StructObject`, an enumeration or array as a variant of the chunk's
/// `Object` enum, with that enum's `x::DataObject` impl and each type's
/// `x::ObjectType` (`x::ObjectArrayItem`) impl.
fn objects_code(objects: &[(usize, &str, &Variant)], chunk_cfg: &str) -> String {
    let variants: Vec<_> = objects
        .iter()
        .filter(|(_, _, v)| !matches!(v.kind, ObjectKind::Structure))
        .collect();
    // The enum exists when a variant does, and is gated when every one is.
    let enum_cfg = match variants.iter().all(|(_, _, v)| v.feature.is_some()) {
        true => cfg_attr(variants.iter().filter_map(|(_, _, v)| v.feature)),
        false => String::new(),
    };
    let mut code = String::new();
    write!(
        code,
        "/// Decodes the current element as the type at `index` of `CHUNK.types`.\n\
         {chunk_cfg}fn decode(\n    index: usize,\n    r: &mut x::XmlReader<'_>,\n\
         ) -> Option<Result<Box<dyn x::DataObject>, x::DecodeError>> {{\n    \
         match index {{\n",
    )
    .ok();
    // One `match`, each arm the result: a structure's arm is one generic
    // call, a variant's boxes the chunk's enum (gated with it).
    for (index, _, v) in objects {
        let decoded = match v.kind {
            ObjectKind::Structure => format!("x::decode_struct_object::<{}>(r)", v.rust),
            _ => format!(
                "match x::Decode::decode_boxed(r) {{ Ok(v) => Ok(x::box_object(Object::{}(v))), Err(e) => Err(e) }}",
                v.name
            ),
        };
        writeln!(code, "{ROW}{}{index} => Some({decoded}),", v.cfg).ok();
    }
    code.push_str("        _ => None,\n    }\n}\n\n");
    if variants.is_empty() {
        return code;
    }
    let arms = |arm: &dyn Fn(&str, &str, &Variant) -> String| -> String {
        variants
            .iter()
            .map(|(_, name, v)| format!("{ROW}    {}{}\n", v.cfg, arm(name, &v.name, v)))
            .collect()
    };
    // With a variant gated, a wildcard arm may match nothing.
    let unreachable = if variants.iter().any(|(_, _, v)| !v.cfg.is_empty()) {
        "#[allow(unreachable_patterns)] "
    } else {
        ""
    };
    write!(
        code,
        "/// A value of one of this chunk's enumerations or arrays, as an `anyType`\n\
         /// slot holds it (`x::Value::Object`). Reached through `x::ObjectType`.\n\
         #[doc(hidden)]\n{enum_cfg}pub enum Object {{\n",
    )
    .ok();
    for (_, _, v) in &variants {
        writeln!(code, "    {}{}(Box<{}>),", v.cfg, v.name, v.rust).ok();
    }
    code.push_str("}\n\n");
    // SAFETY comment for the declared auto traits (see `any.rs` for why).
    write!(
        code,
        "// SAFETY: every variant is a Box of a generated type whose fields are all\n\
         // Send + Sync (asserted for each variant type by the generated thread_safety test).\n\
         {enum_cfg}unsafe impl Send for Object {{}}\n// SAFETY: as above.\n{enum_cfg}unsafe impl Sync for Object {{}}\n\n",
    )
    .ok();
    let type_names = arms(&|name, variant, _| format!("Object::{variant}(_) => {},", lit(name)));
    let debug =
        arms(&|_, variant, _| format!("Object::{variant}(v) => std::fmt::Debug::fmt(&**v, f),"));
    let encode = arms(&|_, variant, _| {
        format!("Object::{variant}(v) => x::Encode::encode_as(&**v, w, tag, xsi_type),")
    });
    writeln!(
        code,
        "{enum_cfg}impl std::fmt::Debug for Object {{\n    \
         fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {{\n        \
         match self {{\n{debug}        }}\n    }}\n}}\n\n\
         {enum_cfg}impl PartialEq for Object {{\n    \
         fn eq(&self, other: &Self) -> bool {{\n        \
         x::same_object(self, other)\n    }}\n}}\n\n\
         {enum_cfg}impl x::DataObject for Object {{\n    \
         fn type_name(&self) -> &'static str {{\n        \
         match self {{\n{type_names}        }}\n    }}\n    \
         fn as_any(&self) -> &dyn std::any::Any {{\n        self\n    }}\n    \
         fn into_any(self: Box<Self>) -> Box<dyn std::any::Any> {{\n        self\n    }}\n    \
         #[cfg_attr(target_os = \"linux\", link_section = \".text.unlikely.vsphere_client\")]\n    \
         fn clone_box(&self) -> Box<dyn x::DataObject> {{\n        x::clone_object(self)\n    }}\n    \
         #[cfg_attr(target_os = \"linux\", link_section = \".text.unlikely.vsphere_client\")]\n    \
         fn eq_dyn(&self, other: &dyn x::DataObject) -> bool {{\n        \
         other.as_any().downcast_ref::<Self>().is_some_and(|other| self == other)\n    }}\n    \
         #[cfg_attr(target_os = \"linux\", link_section = \".text.unlikely.vsphere_client\")]\n    \
         fn encode_dyn(&self, w: &mut x::XmlWriter, tag: &str, xsi_type: Option<&str>) {{\n        \
         match self {{\n{encode}        }}\n    }}\n}}\n"
    )
    .ok();
    let other_ref = if variants.len() > 1 {
        format!(" {unreachable}_ => None,")
    } else {
        String::new()
    };
    let other_owned = if variants.len() > 1 {
        format!(" {unreachable}other => Err(other),")
    } else {
        String::new()
    };
    for (_, _, v) in &variants {
        let (header, ty) = match &v.kind {
            ObjectKind::Array(item) => (
                format!("impl x::ObjectArrayItem for {item}"),
                v.rust.as_str(),
            ),
            _ => (format!("impl x::ObjectType for {}", v.rust), "Self"),
        };
        let name = &v.name;
        writeln!(
            code,
            "\n{}{header} {{\n    type Object = Object;\n    \
             #[inline]\n    fn into_object(value: Box<{ty}>) -> Object {{\n        Object::{name}(value)\n    }}\n    \
             #[inline]\n    fn object_ref(object: &Object) -> Option<&{ty}> {{\n        \
             match object {{ Object::{name}(v) => Some(v),{other_ref} }}\n    }}\n    \
             #[inline]\n    fn from_object(object: Object) -> Result<Box<{ty}>, Object> {{\n        \
             match object {{ Object::{name}(v) => Ok(v),{other_owned} }}\n    }}\n}}",
            v.cfg
        )
        .ok();
    }
    code
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
