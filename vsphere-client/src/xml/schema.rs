//! Schema tables as static data: the `xsi:type` registry, the inheritance
//! table, the fields of every data type and the properties of every managed
//! object. The generator emits the tables; the lookups are written once here.

use std::fmt;

use super::mor::ManagedObjectReference;
use super::reader::XmlReader;
use super::value::{DataObject, Value, ValueTypeError};
use super::DecodeError;

/// Decodes the current element as one schema type, boxed.
pub type DecodeObjectFn = fn(&mut XmlReader<'_>) -> Result<Box<dyn DataObject>, DecodeError>;

/// What a registered type is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum TypeKind {
    /// A complex type with fields (data object, fault, request type).
    Structure,
    /// An enumeration (`xsd:string` restricted to values).
    Enumeration,
    /// An `ArrayOf*` wrapper: its single field is the item.
    Array,
}

/// How often a field occurs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Occurs {
    /// Exactly once (may still be missing on the wire: decodes to a default).
    Required,
    /// Zero or one time: `Option<T>`.
    Optional,
    /// Any number of times: `Vec<T>`.
    Repeated,
}

/// One field of a data type or one property of a managed object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FieldInfo {
    /// The XML name (`powerState`).
    pub name: &'static str,
    /// The XML type name: a schema type (`VirtualMachineRuntimeInfo`) or an
    /// XML Schema primitive (`string`, `int`, `dateTime`, `anyType`, ...).
    pub type_name: &'static str,
    /// Cardinality.
    pub occurs: Occurs,
}

impl FieldInfo {
    /// A required field.
    pub const fn required(name: &'static str, type_name: &'static str) -> Self {
        FieldInfo {
            name,
            type_name,
            occurs: Occurs::Required,
        }
    }

    /// An optional field.
    pub const fn optional(name: &'static str, type_name: &'static str) -> Self {
        FieldInfo {
            name,
            type_name,
            occurs: Occurs::Optional,
        }
    }

    /// A repeated field.
    pub const fn repeated(name: &'static str, type_name: &'static str) -> Self {
        FieldInfo {
            name,
            type_name,
            occurs: Occurs::Repeated,
        }
    }
}

/// One schema type.
#[derive(Clone, Copy)]
pub struct TypeInfo {
    /// The XML type name.
    pub name: &'static str,
    /// The base type, if the type extends one.
    pub base: Option<&'static str>,
    /// Structure, enumeration or array.
    pub kind: TypeKind,
    /// The type's own fields, in schema order (inherited ones are the base's).
    pub fields: &'static [FieldInfo],
    /// The enumeration's values (empty for other kinds).
    pub values: &'static [&'static str],
    /// Decodes an element of this type into a boxed value, for `xsd:anyType`
    /// slots. `None` for types that never appear there (request types).
    pub decode: Option<DecodeObjectFn>,
}

impl fmt::Debug for TypeInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TypeInfo")
            .field("name", &self.name)
            .field("base", &self.base)
            .field("kind", &self.kind)
            .field("fields", &self.fields)
            .field("values", &self.values)
            .finish_non_exhaustive()
    }
}

/// All schema types, in chunks that are each sorted by name and together in
/// name order (one chunk per generated file, so no file holds the whole table).
#[derive(Debug, Clone, Copy)]
pub struct Registry {
    chunks: &'static [&'static [TypeInfo]],
}

impl Registry {
    /// A registry knowing no type: every `anyType` object decodes as `Value::Unknown`.
    pub const EMPTY: Registry = Registry { chunks: &[] };

    /// A registry over sorted, non-overlapping, non-empty chunks.
    pub const fn new(chunks: &'static [&'static [TypeInfo]]) -> Self {
        Registry { chunks }
    }

    /// The type named `name`.
    pub fn get(&self, name: &str) -> Option<&'static TypeInfo> {
        let after = self
            .chunks
            .partition_point(|chunk| chunk.first().is_some_and(|t| t.name <= name));
        let chunk: &'static [TypeInfo] = self.chunks.get(after.checked_sub(1)?)?;
        chunk
            .binary_search_by(|t| t.name.cmp(name))
            .ok()
            .map(|i| &chunk[i])
    }

    /// Every type, in name order.
    pub fn iter(&self) -> impl Iterator<Item = &'static TypeInfo> {
        self.chunks.iter().flat_map(|chunk| chunk.iter())
    }

    /// How many types are registered.
    pub fn len(&self) -> usize {
        self.chunks.iter().map(|c| c.len()).sum()
    }

    /// Whether no type is registered.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The base type of `name`.
    pub fn base_of(&self, name: &str) -> Option<&'static str> {
        self.get(name)?.base
    }

    /// Whether `name` is `ancestor` or derives from it.
    pub fn is_subtype_of(&self, name: &str, ancestor: &str) -> bool {
        let mut current = Some(name);
        // The chain is bounded by the number of types; guard against a cyclic table anyway.
        for _ in 0..64 {
            match current {
                Some(ty) if ty == ancestor => return true,
                Some(ty) => current = self.base_of(ty),
                None => return false,
            }
        }
        false
    }

    /// The field `field` of type `name`, own or inherited.
    pub fn field(&self, name: &str, field: &str) -> Option<&'static FieldInfo> {
        let mut current = Some(name);
        for _ in 0..64 {
            let info = self.get(current?)?;
            if let Some(found) = info.fields.iter().find(|f| f.name == field) {
                return Some(found);
            }
            current = info.base;
        }
        None
    }

    /// All fields of type `name`, inherited ones first (the wire order).
    pub fn all_fields(&self, name: &str) -> Vec<&'static FieldInfo> {
        let mut chain = Vec::new();
        let mut current = Some(name);
        while let Some(ty) = current {
            let Some(info) = self.get(ty) else { break };
            chain.push(info);
            if chain.len() > 64 {
                break;
            }
            current = info.base;
        }
        chain.iter().rev().flat_map(|t| t.fields.iter()).collect()
    }
}

/// One managed object type and its properties (from pyvmomi's type info).
#[derive(Debug, Clone, Copy)]
pub struct ManagedObjectInfo {
    /// `VirtualMachine`.
    pub name: &'static str,
    /// `ManagedEntity`.
    pub base: Option<&'static str>,
    /// Own properties (inherited ones are the base's), sorted by name.
    pub properties: &'static [FieldInfo],
    /// The operations invoked on this managed object type.
    pub methods: &'static [&'static str],
}

/// A generated managed object struct (`mo::VirtualMachine`): its reference and
/// its properties, each `None` until retrieved.
pub trait ManagedObjectType:
    Default + fmt::Debug + Clone + PartialEq + Send + Sync + 'static
{
    /// The managed object type name (`VirtualMachine`).
    const TYPE_NAME: &'static str;

    /// The reference the properties were retrieved from.
    fn mo_ref(&self) -> &ManagedObjectReference;

    /// Stores a retrieved top-level property (`DynamicProperty` name and
    /// value). `Ok(false)` when the type has no such property (a nested path
    /// such as `config.hardware.device` is not a top-level property).
    fn set_property(&mut self, name: &str, value: Value) -> Result<bool, ValueTypeError>;
}

/// Why a property path does not resolve.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PropertyPathError {
    /// No managed object type of that name.
    UnknownManagedObject(String),
    /// A path segment names no property/field of the type reached so far.
    UnknownProperty {
        /// The type searched.
        type_name: String,
        /// The segment.
        segment: String,
    },
    /// A segment follows an array or a primitive value, which have no fields.
    NotTraversable {
        /// The path up to the offending segment.
        prefix: String,
        /// The type that cannot be traversed.
        type_name: String,
    },
}

impl fmt::Display for PropertyPathError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PropertyPathError::UnknownManagedObject(name) => {
                write!(f, "unknown managed object type {name}")
            }
            PropertyPathError::UnknownProperty { type_name, segment } => {
                write!(f, "{type_name} has no property {segment}")
            }
            PropertyPathError::NotTraversable { prefix, type_name } => {
                write!(
                    f,
                    "{prefix} is of type {type_name}, which has no properties"
                )
            }
        }
    }
}

impl std::error::Error for PropertyPathError {}

/// The managed object table, sorted by name.
#[derive(Debug, Clone, Copy)]
pub struct ManagedObjects {
    objects: &'static [ManagedObjectInfo],
}

impl ManagedObjects {
    /// A table over `objects`, which must be sorted by name.
    pub const fn new(objects: &'static [ManagedObjectInfo]) -> Self {
        ManagedObjects { objects }
    }

    /// The managed object type `name`.
    pub fn get(&self, name: &str) -> Option<&'static ManagedObjectInfo> {
        let objects: &'static [ManagedObjectInfo] = self.objects;
        objects
            .binary_search_by(|m| m.name.cmp(name))
            .ok()
            .map(|i| &objects[i])
    }

    /// Every managed object type, in name order.
    pub fn iter(&self) -> impl Iterator<Item = &'static ManagedObjectInfo> {
        self.objects.iter()
    }

    /// The property `property` of `name`, own or inherited.
    pub fn property(&self, name: &str, property: &str) -> Option<&'static FieldInfo> {
        let mut current = Some(name);
        for _ in 0..64 {
            let info = self.get(current?)?;
            if let Some(found) = info.properties.iter().find(|p| p.name == property) {
                return Some(found);
            }
            current = info.base;
        }
        None
    }

    /// Resolves a property path (`runtime.powerState`, `config.hardware.device`)
    /// on managed object type `mo_type` to the field it names, following data
    /// object fields through `registry`.
    pub fn resolve_path(
        &self,
        registry: &Registry,
        mo_type: &str,
        path: &str,
    ) -> Result<&'static FieldInfo, PropertyPathError> {
        if self.get(mo_type).is_none() {
            return Err(PropertyPathError::UnknownManagedObject(mo_type.to_string()));
        }
        let mut segments = path.split('.');
        let first = segments.next().unwrap_or_default();
        let mut field =
            self.property(mo_type, first)
                .ok_or_else(|| PropertyPathError::UnknownProperty {
                    type_name: mo_type.to_string(),
                    segment: first.to_string(),
                })?;
        let mut consumed = first.len();
        for segment in segments {
            let traversable = field.occurs != Occurs::Repeated
                && registry
                    .get(field.type_name)
                    .is_some_and(|t| t.kind == TypeKind::Structure);
            if !traversable {
                let type_name = if field.occurs == Occurs::Repeated {
                    format!("{}[]", field.type_name)
                } else {
                    field.type_name.to_string()
                };
                return Err(PropertyPathError::NotTraversable {
                    prefix: path[..consumed].to_string(),
                    type_name,
                });
            }
            field = registry.field(field.type_name, segment).ok_or_else(|| {
                PropertyPathError::UnknownProperty {
                    type_name: field.type_name.to_string(),
                    segment: segment.to_string(),
                }
            })?;
            consumed += 1 + segment.len();
        }
        Ok(field)
    }
}
