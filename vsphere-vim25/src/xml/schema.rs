//! Schema tables as static data: the `xsi:type` registry, the inheritance
//! table, the fields of every data type and the properties of every managed
//! object. The generator emits the tables; the lookups are written once here.

use std::fmt;
use std::sync::Arc;

use super::mor::ManagedObjectReference;
use super::reader::XmlReader;
use super::value::{DataObject, Value, ValueTypeError};
use super::DecodeError;

/// A chunk's decoder: decodes the current element as the chunk's type at
/// `index`, boxed; `None` (nothing read) when that type has no decoder
/// (request types, arrays of primitives). One generated `match` per chunk, so
/// no type has a decoding function of its own for `anyType` slots.
pub type DecodeObjectFn =
    fn(usize, &mut XmlReader<'_>) -> Option<Result<Box<dyn DataObject>, DecodeError>>;

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

/// All schema types: the registry the generator emits.
///
/// The tables hold no pointers (names are offsets into one string table,
/// fields and values are index ranges), only each chunk's decoder is a
/// function pointer. In a position-independent executable every page of
/// static data that holds a pointer is written at start-up to relocate it,
/// and stays in memory for the process's life: with `&'static str` names
/// the registry was 0.7 MB of such pages in every process using the crate.
/// These tables stay clean, read from the binary only where a lookup goes.
///
/// Types come in chunks (one per generated file, so no file holds the whole
/// table), each sorted by name and together in name order.
#[derive(Debug, Clone, Copy)]
pub struct Registry {
    names: &'static str,
    chunks: &'static [&'static RegistryChunk],
}

/// A name of a registry table: its offset and length in the string table
/// (`offset << 8 | length`). Generated; not for use outside the registry.
#[doc(hidden)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Name(pub u32);

impl Name {
    /// No name (a type without base).
    pub const NONE: Name = Name(0);

    fn resolve(self, names: &'static str) -> &'static str {
        let start = (self.0 >> 8) as usize;
        let len = (self.0 & 0xff) as usize;
        names.get(start..start + len).unwrap_or_default()
    }
}

/// One type of a chunk. Generated.
#[doc(hidden)]
#[derive(Debug, Clone, Copy)]
pub struct TypeEntry {
    name: Name,
    base: Name,
    kind: TypeKind,
    /// Whether the chunk's decoder decodes it (an `anyType` slot can hold it).
    object: bool,
    /// First field (structures, arrays) or value (enumerations) in the chunk's tables.
    first: u32,
    count: u16,
}

impl TypeEntry {
    pub const fn structure(name: Name, base: Name, first: u32, count: u16) -> Self {
        TypeEntry {
            name,
            base,
            kind: TypeKind::Structure,
            object: true,
            first,
            count,
        }
    }

    /// A request type (`CloneVM_TaskRequestType`): never in an `anyType` slot.
    pub const fn request(name: Name, first: u32, count: u16) -> Self {
        TypeEntry {
            name,
            base: Name::NONE,
            kind: TypeKind::Structure,
            object: false,
            first,
            count,
        }
    }

    pub const fn enumeration(name: Name, first: u32, count: u16) -> Self {
        TypeEntry {
            name,
            base: Name::NONE,
            kind: TypeKind::Enumeration,
            object: true,
            first,
            count,
        }
    }

    pub const fn array(name: Name, first: u32) -> Self {
        TypeEntry {
            name,
            base: Name::NONE,
            kind: TypeKind::Array,
            object: true,
            first,
            count: 1,
        }
    }

    /// An array of primitives or references: a variant of `Value` itself.
    pub const fn primitive_array(name: Name, first: u32) -> Self {
        TypeEntry {
            name,
            base: Name::NONE,
            kind: TypeKind::Array,
            object: false,
            first,
            count: 1,
        }
    }
}

/// One field of a chunk's field table. Generated.
#[doc(hidden)]
#[derive(Debug, Clone, Copy)]
pub struct FieldEntry {
    name: Name,
    type_name: Name,
    occurs: Occurs,
}

impl FieldEntry {
    pub const fn required(name: Name, type_name: Name) -> Self {
        FieldEntry {
            name,
            type_name,
            occurs: Occurs::Required,
        }
    }

    pub const fn optional(name: Name, type_name: Name) -> Self {
        FieldEntry {
            name,
            type_name,
            occurs: Occurs::Optional,
        }
    }

    pub const fn repeated(name: Name, type_name: Name) -> Self {
        FieldEntry {
            name,
            type_name,
            occurs: Occurs::Repeated,
        }
    }
}

/// The types of one generated file. Generated.
#[doc(hidden)]
#[derive(Debug)]
pub struct RegistryChunk {
    /// Sorted by name.
    pub types: &'static [TypeEntry],
    /// Decodes the type at an index of `types`.
    pub decode: DecodeObjectFn,
    pub fields: &'static [FieldEntry],
    pub values: &'static [Name],
}

impl RegistryChunk {
    /// The decoder of a chunk none of whose types appears in `anyType` slots.
    pub const NO_OBJECTS: DecodeObjectFn = |_, _| None;
}

/// One schema type: a view into the registry's tables.
#[derive(Clone, Copy)]
pub struct TypeInfo {
    names: &'static str,
    chunk: &'static RegistryChunk,
    entry: &'static TypeEntry,
    index: usize,
}

impl TypeInfo {
    /// The XML type name.
    pub fn name(&self) -> &'static str {
        self.entry.name.resolve(self.names)
    }

    /// The base type, if the type extends one.
    pub fn base(&self) -> Option<&'static str> {
        (self.entry.base != Name::NONE).then(|| self.entry.base.resolve(self.names))
    }

    /// Structure, enumeration or array.
    pub fn kind(&self) -> TypeKind {
        self.entry.kind
    }

    /// The type's own fields, in schema order (inherited ones are the
    /// base's); an array's single field is its item. None for enumerations.
    pub fn fields(&self) -> impl ExactSizeIterator<Item = FieldInfo> + 'static {
        let entries = match self.entry.kind {
            TypeKind::Enumeration => &[][..],
            _ => self.range(self.chunk.fields),
        };
        let names = self.names;
        entries.iter().map(move |f| FieldInfo {
            name: f.name.resolve(names),
            type_name: f.type_name.resolve(names),
            occurs: f.occurs,
        })
    }

    /// The enumeration's values (none for other kinds).
    pub fn values(&self) -> impl ExactSizeIterator<Item = &'static str> + 'static {
        let values = match self.entry.kind {
            TypeKind::Enumeration => self.range(self.chunk.values),
            _ => &[][..],
        };
        let names = self.names;
        values.iter().map(move |v| v.resolve(names))
    }

    /// Decodes the current element as this type into a boxed value, for
    /// `xsd:anyType` slots. `None`, with nothing read, for types that never
    /// appear there (request types, arrays of primitives).
    pub fn decode(
        &self,
        r: &mut XmlReader<'_>,
    ) -> Option<Result<Box<dyn DataObject>, DecodeError>> {
        if !self.entry.object {
            return None;
        }
        (self.chunk.decode)(self.index, r)
    }

    /// Whether [`decode`](Self::decode) decodes this type: data objects,
    /// faults, enumerations and arrays of those; not request types, not
    /// arrays of primitives (which `Value` holds itself).
    pub fn decodes_as_object(&self) -> bool {
        self.entry.object
    }

    fn range<T>(&self, table: &'static [T]) -> &'static [T] {
        let start = self.entry.first as usize;
        table
            .get(start..start + usize::from(self.entry.count))
            .unwrap_or_default()
    }

    fn field(&self, name: &str) -> Option<FieldInfo> {
        self.fields().find(|f| f.name == name)
    }
}

impl fmt::Debug for TypeInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TypeInfo")
            .field("name", &self.name())
            .field("base", &self.base())
            .field("kind", &self.kind())
            .field("fields", &self.fields().collect::<Vec<_>>())
            .field("values", &self.values().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

impl Registry {
    /// A registry knowing no type: every `anyType` object decodes as `Value::Unknown`.
    pub const EMPTY: Registry = Registry {
        names: "",
        chunks: &[],
    };

    /// A registry over the string table `names` and sorted, non-overlapping,
    /// non-empty chunks.
    #[doc(hidden)]
    pub const fn new(names: &'static str, chunks: &'static [&'static RegistryChunk]) -> Self {
        Registry { names, chunks }
    }

    fn info(&self, chunk: &'static RegistryChunk, index: usize) -> Option<TypeInfo> {
        Some(TypeInfo {
            names: self.names,
            chunk,
            entry: chunk.types.get(index)?,
            index,
        })
    }

    /// The type named `name`.
    pub fn get(&self, name: &str) -> Option<TypeInfo> {
        let names = self.names;
        let after = self.chunks.partition_point(|chunk| {
            chunk
                .types
                .first()
                .is_some_and(|t| t.name.resolve(names) <= name)
        });
        let chunk: &'static RegistryChunk = self.chunks.get(after.checked_sub(1)?)?;
        let index = chunk
            .types
            .binary_search_by(|t| t.name.resolve(names).cmp(name))
            .ok()?;
        self.info(chunk, index)
    }

    /// Every type, in name order.
    pub fn iter(&self) -> impl Iterator<Item = TypeInfo> + '_ {
        self.chunks.iter().flat_map(move |chunk| {
            (0..chunk.types.len()).filter_map(move |index| self.info(chunk, index))
        })
    }

    /// How many types are registered.
    pub fn len(&self) -> usize {
        self.chunks.iter().map(|c| c.types.len()).sum()
    }

    /// Whether no type is registered.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Decodes the current element as the type `name` into a boxed value,
    /// for `xsd:anyType` slots; a data object of a family the crate was built
    /// without (`all-events`, `all-faults`, `admin`) as its nearest ancestor that is
    /// compiled in, its own elements skipped. `None`, with nothing read, for
    /// a name the registry does not know and types that never appear there.
    pub fn decode_object(
        &self,
        name: &str,
        r: &mut XmlReader<'_>,
    ) -> Option<Result<Box<dyn DataObject>, DecodeError>> {
        let mut info = self.get(name)?;
        // The chain is bounded by the number of types; guard against a cyclic table anyway.
        for _ in 0..64 {
            if !info.decodes_as_object() {
                return None;
            }
            if let Some(decoded) = info.decode(r) {
                return Some(decoded);
            }
            info = self.get(info.base()?)?;
        }
        None
    }

    /// The base type of `name`.
    pub fn base_of(&self, name: &str) -> Option<&'static str> {
        self.get(name)?.base()
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
    pub fn field(&self, name: &str, field: &str) -> Option<FieldInfo> {
        let mut info = self.get(name)?;
        for _ in 0..64 {
            if let Some(found) = info.field(field) {
                return Some(found);
            }
            info = self.get(info.base()?)?;
        }
        None
    }

    /// All fields of type `name`, inherited ones first (the wire order).
    pub fn all_fields(&self, name: &str) -> Vec<FieldInfo> {
        let mut chain = Vec::new();
        let mut current = Some(name);
        while let Some(ty) = current {
            let Some(info) = self.get(ty) else { break };
            chain.push(info);
            if chain.len() > 64 {
                break;
            }
            current = info.base();
        }
        chain.iter().rev().flat_map(TypeInfo::fields).collect()
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

/// The property paths a server sent values for, on one partial managed
/// object (`vm.retrieved`): what of it holds real values.
///
/// A nested path fills its top-level property with defaults around the value
/// asked for: after retrieving only `config.hardware.numCPU`,
/// `vm.config.hardware.memory_mb` reads 0, which the server never said.
/// [`contains`](Self::contains) tells the two apart:
///
/// ```
/// # use vsphere_vim25::mo;
/// # fn demo(vm: &mo::VirtualMachine) {
/// let memory_mb = vm
///     .retrieved
///     .contains("config.hardware.memoryMB")
///     .then(|| vm.config.as_ref().map(|c| c.hardware.memory_mb))
///     .flatten();
/// # }
/// ```
///
/// Paths the server had no value for (reported missing, or unset and so not
/// sent) and paths the bindings do not know are not in the set. Objects of
/// one retrieval with the same paths share one list.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct RetrievedPaths(Option<Arc<[Box<str>]>>);

impl RetrievedPaths {
    /// Whether `path` (a vim25 property path, `config.hardware.memoryMB`) is
    /// one the server sent a value for, or lies inside one (`config` sent
    /// whole holds `config.hardware.memoryMB`).
    /// Takes a string or a typed path (`paths::VirtualMachine.config().hardware().memory_mb()`).
    pub fn contains(&self, path: impl AsRef<str>) -> bool {
        let path = path.as_ref();
        self.iter().any(|sent| {
            path.strip_prefix(sent)
                .is_some_and(|rest| rest.is_empty() || rest.starts_with('.'))
        })
    }

    /// The paths, sorted.
    pub fn iter(&self) -> impl Iterator<Item = &str> + Clone {
        self.0.iter().flat_map(|paths| paths.iter().map(|p| &**p))
    }

    /// Whether the server sent no value at all.
    pub fn is_empty(&self) -> bool {
        self.0.as_ref().is_none_or(|paths| paths.is_empty())
    }

    /// The set of `paths` (in any order, repeats allowed), sharing `like`'s
    /// list when they are the same: the objects of a page mostly are, and
    /// then nothing is allocated.
    #[doc(hidden)]
    pub fn of<'p>(paths: impl Iterator<Item = &'p str> + Clone, like: &RetrievedPaths) -> Self {
        let same = paths.clone().all(|p| like.iter().any(|l| l == p))
            && like.iter().all(|l| paths.clone().any(|p| p == l));
        if same {
            return like.clone();
        }
        let mut paths: Vec<&str> = paths.collect();
        paths.sort_unstable();
        paths.dedup();
        RetrievedPaths::from_sorted(&paths)
    }

    /// This set after an update assigned `assigned` and unset `removed`,
    /// sharing `like`'s list when it is the same (the objects of a watch
    /// mostly are): nothing is allocated unless the set is new.
    #[doc(hidden)]
    pub fn updated<'a>(
        &'a self,
        assigned: impl Iterator<Item = &'a str> + Clone,
        removed: impl Iterator<Item = &'a str> + Clone,
        like: &RetrievedPaths,
    ) -> Self {
        let unchanged = assigned.clone().all(|a| self.iter().any(|p| p == a))
            && removed.clone().all(|r| self.iter().all(|p| p != r));
        if unchanged {
            return self.clone();
        }
        let is_removed = |p: &str| removed.clone().any(|r| r == p);
        let kept = self.iter().filter(|p| !is_removed(p));
        let added = assigned.filter(|p| !is_removed(p));
        RetrievedPaths::of(kept.chain(added), like)
    }

    fn from_sorted(paths: &[&str]) -> Self {
        if paths.is_empty() {
            return RetrievedPaths(None);
        }
        RetrievedPaths(Some(paths.iter().map(|p| Box::from(*p)).collect()))
    }
}

impl fmt::Debug for RetrievedPaths {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set().entries(self.iter()).finish()
    }
}

/// A generated managed object struct (`mo::VirtualMachine`): its reference and
/// its properties, each `None` until retrieved.
pub trait ManagedObjectType:
    Default + fmt::Debug + Clone + PartialEq + Send + Sync + 'static
{
    /// The managed object type name (`VirtualMachine`).
    const TYPE_NAME: &'static str;

    /// The type's properties the struct does not hold, each with the cargo
    /// feature of vsphere-client that compiles it in (`("config", "admin")`
    /// for `HostSystem` without `admin`).
    const LEFT_OUT: &'static [(&'static str, &'static str)] = &[];

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
    ) -> Result<FieldInfo, PropertyPathError> {
        if self.get(mo_type).is_none() {
            return Err(PropertyPathError::UnknownManagedObject(mo_type.to_string()));
        }
        let mut segments = path.split('.');
        let first = segments.next().unwrap_or_default();
        let mut field =
            *self
                .property(mo_type, first)
                .ok_or_else(|| PropertyPathError::UnknownProperty {
                    type_name: mo_type.to_string(),
                    segment: first.to_string(),
                })?;
        let mut consumed = first.len();
        for segment in segments {
            let traversable = field.occurs != Occurs::Repeated
                && registry
                    .get(field.type_name)
                    .is_some_and(|t| t.kind() == TypeKind::Structure);
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

#[cfg(test)]
mod tests {
    use super::*;

    fn shares(a: &RetrievedPaths, b: &RetrievedPaths) -> bool {
        match (&a.0, &b.0) {
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            _ => false,
        }
    }

    #[test]
    fn retrieved_paths_follow_updates_and_share_one_list() {
        let none = RetrievedPaths::default();
        let first = RetrievedPaths::of(["name", "runtime.powerState", "name"].into_iter(), &none);
        assert_eq!(
            first.iter().collect::<Vec<_>>(),
            ["name", "runtime.powerState"]
        );
        // The next object with the same paths, in another order: the same list.
        let second = RetrievedPaths::of(["runtime.powerState", "name"].into_iter(), &first);
        assert!(shares(&first, &second));

        // An update that assigns a path already held changes nothing.
        let same = first.updated(["name"].into_iter(), [].into_iter(), &none);
        assert!(shares(&first, &same));
        // Assigning a new path and unsetting one.
        let moved = first.updated(["guest.ipAddress"].into_iter(), ["name"].into_iter(), &none);
        assert_eq!(
            moved.iter().collect::<Vec<_>>(),
            ["guest.ipAddress", "runtime.powerState"]
        );
        // An object entering with what the last one has shares its list.
        let entered = none.updated(
            ["runtime.powerState", "guest.ipAddress"].into_iter(),
            [].into_iter(),
            &moved,
        );
        assert!(shares(&moved, &entered));
        // Unsetting everything leaves nothing.
        let gone = moved.updated(
            [].into_iter(),
            ["guest.ipAddress", "runtime.powerState"].into_iter(),
            &none,
        );
        assert!(gone.is_empty());
    }

    /// `name` in `NAMES` as the generator encodes it.
    fn n(name: &str) -> Name {
        let at = NAMES.find(&format!("\n{name}\n")).expect("in the table") + 1;
        Name((at as u32) << 8 | name.len() as u32)
    }

    const NAMES: &str = "// header\nBase\nColor\nDerived\nid\nint\nred\nsize\nstring\n";

    fn registry() -> Registry {
        let chunk: &'static RegistryChunk = Box::leak(Box::new(RegistryChunk {
            types: Box::leak(Box::new([
                TypeEntry::structure(n("Base"), Name::NONE, 0, 1),
                TypeEntry::enumeration(n("Color"), 0, 1),
            ])),
            decode: RegistryChunk::NO_OBJECTS,
            fields: Box::leak(Box::new([FieldEntry::required(n("id"), n("string"))])),
            values: Box::leak(Box::new([n("red")])),
        }));
        let second: &'static RegistryChunk = Box::leak(Box::new(RegistryChunk {
            types: Box::leak(Box::new([TypeEntry::structure(
                n("Derived"),
                n("Base"),
                0,
                1,
            )])),
            decode: RegistryChunk::NO_OBJECTS,
            fields: Box::leak(Box::new([FieldEntry::repeated(n("size"), n("int"))])),
            values: &[],
        }));
        Registry::new(NAMES, Box::leak(Box::new([chunk, second])))
    }

    #[test]
    fn names_fields_values_and_bases_read_back_from_the_tables() {
        let registry = registry();
        assert_eq!(registry.len(), 3);
        let names: Vec<&str> = registry.iter().map(|t| t.name()).collect();
        assert_eq!(names, ["Base", "Color", "Derived"]);

        let derived = registry.get("Derived").expect("Derived");
        assert_eq!(
            (derived.base(), derived.kind()),
            (Some("Base"), TypeKind::Structure)
        );
        assert_eq!(
            registry.all_fields("Derived"),
            [
                FieldInfo::required("id", "string"),
                FieldInfo::repeated("size", "int")
            ]
        );
        assert_eq!(
            registry.field("Derived", "id"),
            Some(FieldInfo::required("id", "string"))
        );
        assert!(registry.is_subtype_of("Derived", "Base"));
        assert!(!registry.is_subtype_of("Base", "Derived"));

        let color = registry.get("Color").expect("Color");
        assert_eq!(color.values().collect::<Vec<_>>(), ["red"]);
        assert_eq!(color.fields().len(), 0, "an enumeration has no fields");
        assert_eq!(registry.get("Base").map(|b| b.base()), Some(None));
        assert!(registry.get("Missing").is_none() && registry.get("").is_none());
        assert!(Registry::EMPTY.get("Base").is_none());
    }
}
