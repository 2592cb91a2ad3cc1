//! Stage 2: the normalised model. Types with their base and own fields,
//! enumerations, array wrappers, operations with parameters and result, and
//! managed objects. Everything the emitters need, nothing about XML syntax.

use std::collections::BTreeMap;

/// XML Schema primitive types used by vim25.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Primitive {
    String,
    Boolean,
    Byte,
    Short,
    Int,
    Long,
    Float,
    Double,
    DateTime,
    Base64Binary,
    AnyUri,
}

impl Primitive {
    /// The primitive for an `xsd:` local name.
    pub fn from_xsd(name: &str) -> Option<Self> {
        Some(match name {
            "string" => Primitive::String,
            "boolean" => Primitive::Boolean,
            "byte" => Primitive::Byte,
            "short" => Primitive::Short,
            "int" => Primitive::Int,
            "long" => Primitive::Long,
            "float" => Primitive::Float,
            "double" => Primitive::Double,
            "dateTime" => Primitive::DateTime,
            "base64Binary" => Primitive::Base64Binary,
            "anyURI" => Primitive::AnyUri,
            _ => return None,
        })
    }

    /// The `xsd:` local name.
    pub fn xsd_name(self) -> &'static str {
        match self {
            Primitive::String => "string",
            Primitive::Boolean => "boolean",
            Primitive::Byte => "byte",
            Primitive::Short => "short",
            Primitive::Int => "int",
            Primitive::Long => "long",
            Primitive::Float => "float",
            Primitive::Double => "double",
            Primitive::DateTime => "dateTime",
            Primitive::Base64Binary => "base64Binary",
            Primitive::AnyUri => "anyURI",
        }
    }

    /// Copy types are passed by value to methods.
    pub fn is_copy(self) -> bool {
        matches!(
            self,
            Primitive::Boolean
                | Primitive::Byte
                | Primitive::Short
                | Primitive::Int
                | Primitive::Long
                | Primitive::Float
                | Primitive::Double
        )
    }
}

/// A vim25 API version (`8.0.2.0`), ordered numerically.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ApiVersion(pub [u8; 4]);

impl ApiVersion {
    /// Parses a dotted version of one to four numbers (`8.0.2.0`, `7.0`);
    /// missing parts are zero.
    pub fn parse(text: &str) -> Option<ApiVersion> {
        let mut parts = [0u8; 4];
        let mut count = 0;
        for part in text.split('.') {
            if count == 4 || part.is_empty() || !part.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            parts[count] = part.parse().ok()?;
            count += 1;
        }
        (count > 0).then_some(ApiVersion(parts))
    }
}

impl std::fmt::Display for ApiVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let [a, b, c, d] = self.0;
        write!(f, "{a}.{b}.{c}.{d}")
    }
}

/// The API version that introduced an item, `None` for items of the base
/// bundle (7.0.3.0 and older).
pub type Since = Option<ApiVersion>;

/// Whether `item` is newer than `container` (an item of a new type that is
/// as new as the type is not).
pub fn newer(item: Since, container: Since) -> bool {
    match (item, container) {
        (Some(item), Some(container)) => item > container,
        (Some(_), None) => true,
        (None, _) => false,
    }
}

/// What a field, parameter or property holds.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum TypeRef {
    Primitive(Primitive),
    /// `xsd:anyType`.
    AnyType,
    /// `ManagedObjectReference`.
    Mor,
    /// A complex type of the schema (data object, fault).
    Complex(String),
    /// An enumeration of the schema.
    Enum(String),
}

impl TypeRef {
    /// The XML type name, as in schema tables (`string`, `VirtualDevice`).
    pub fn xml_name(&self) -> &str {
        match self {
            TypeRef::Primitive(p) => p.xsd_name(),
            TypeRef::AnyType => "anyType",
            TypeRef::Mor => "ManagedObjectReference",
            TypeRef::Complex(name) | TypeRef::Enum(name) => name,
        }
    }
}

/// Field cardinality.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Occurs {
    Required,
    Optional,
    Repeated,
}

/// One element of a complex type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Field {
    /// XML element name.
    pub name: String,
    pub ty: TypeRef,
    pub occurs: Occurs,
    /// The API version that added it (for a field of a new type: the type's).
    pub since: Since,
}

/// A complex type that is not an array wrapper.
#[derive(Debug, Clone)]
pub struct ComplexType {
    pub name: String,
    pub base: Option<String>,
    /// Own fields, in schema order.
    pub fields: Vec<Field>,
    /// A `*RequestType` (the parameters of an operation).
    pub is_request: bool,
    /// The schema file it comes from (for messages).
    pub file: String,
    /// The API version that added it.
    pub since: Since,
}

/// An `ArrayOf*` wrapper type.
#[derive(Debug, Clone)]
pub struct ArrayType {
    pub name: String,
    /// The item element name.
    pub item_tag: String,
    pub item: TypeRef,
}

/// An enumeration.
#[derive(Debug, Clone)]
pub struct EnumType {
    pub name: String,
    pub values: Vec<String>,
    /// The API version that added it.
    pub since: Since,
    /// The API version that added each value newer than the base bundle
    /// (for a new enumeration: every value).
    pub value_since: BTreeMap<String, ApiVersion>,
}

impl EnumType {
    /// The API version that added `value`.
    pub fn since_of(&self, value: &str) -> Since {
        self.value_since.get(value).copied()
    }
}

/// The result of an operation.
#[derive(Debug, Clone)]
pub struct Returnval {
    pub ty: TypeRef,
    pub occurs: Occurs,
}

/// One operation of the port type.
#[derive(Debug, Clone)]
pub struct Operation {
    pub name: String,
    /// The `*RequestType` complex type holding `_this` and the parameters.
    pub request_type: String,
    pub returnval: Option<Returnval>,
    /// Declared fault type names.
    pub faults: Vec<String>,
    /// The API version that added it.
    pub since: Since,
}

/// A property of a managed object.
#[derive(Debug, Clone)]
pub struct Property {
    pub name: String,
    pub ty: TypeRef,
    pub occurs: Occurs,
    /// For references: the managed object type referred to.
    pub mo_type: Option<String>,
    /// The API version that added it (for a property of a new managed
    /// object: the object's).
    pub since: Since,
}

/// A managed object type.
#[derive(Debug, Clone)]
pub struct ManagedObject {
    pub name: String,
    pub base: Option<String>,
    pub properties: Vec<Property>,
    pub methods: Vec<String>,
    /// The API version that added it.
    pub since: Since,
}

/// The whole normalised schema. Maps are sorted by name: iteration order is
/// the output order, which makes the output deterministic.
#[derive(Debug, Default)]
pub struct Model {
    pub types: BTreeMap<String, ComplexType>,
    pub arrays: BTreeMap<String, ArrayType>,
    pub enums: BTreeMap<String, EnumType>,
    pub operations: BTreeMap<String, Operation>,
    pub managed_objects: BTreeMap<String, ManagedObject>,
    /// Counts as read from the documents, for the final count check.
    pub schema_counts: SchemaCounts,
    /// The newest API version the model describes: the base bundle's, or
    /// the additions' when there are any.
    pub api_version: Option<ApiVersion>,
}

/// What the schema documents contain, counted before any interpretation.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct SchemaCounts {
    pub complex_types: usize,
    pub array_types: usize,
    pub enums: usize,
    pub enum_values: usize,
    pub operations: usize,
}

impl SchemaCounts {
    /// Both counts together.
    pub fn plus(self, other: SchemaCounts) -> SchemaCounts {
        SchemaCounts {
            complex_types: self.complex_types + other.complex_types,
            array_types: self.array_types + other.array_types,
            enums: self.enums + other.enums,
            enum_values: self.enum_values + other.enum_values,
            operations: self.operations + other.operations,
        }
    }
}

impl Model {
    /// The base chain of `name`, from the root down to `name` itself.
    pub fn lineage(&self, name: &str) -> Vec<&ComplexType> {
        let mut chain = Vec::new();
        let mut current = self.types.get(name);
        while let Some(ty) = current {
            chain.push(ty);
            current = ty.base.as_ref().and_then(|b| self.types.get(b));
        }
        chain.reverse();
        chain
    }

    /// Every field of `name`, inherited fields first, each with the type that declares it.
    pub fn all_fields(&self, name: &str) -> Vec<(&str, &Field)> {
        self.lineage(name)
            .into_iter()
            .flat_map(|t| t.fields.iter().map(move |f| (t.name.as_str(), f)))
            .collect()
    }

    /// Direct subtypes of every type.
    pub fn subtypes(&self) -> BTreeMap<&str, Vec<&str>> {
        let mut children: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for ty in self.types.values() {
            if let Some(base) = &ty.base {
                children.entry(base.as_str()).or_default().push(&ty.name);
            }
        }
        children
    }

    /// All descendants of `name` (not `name` itself), sorted.
    pub fn descendants(&self, name: &str) -> Vec<String> {
        let children = self.subtypes();
        let mut out = Vec::new();
        let mut stack = vec![name];
        while let Some(current) = stack.pop() {
            for child in children.get(current).into_iter().flatten() {
                out.push(child.to_string());
                stack.push(child);
            }
        }
        out.sort();
        out
    }
}
