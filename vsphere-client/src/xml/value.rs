//! `Value`: the content of an `xsd:anyType` slot, and `DataObject`, a boxed
//! schema type behind it.

use std::any::Any;
use std::fmt::Debug;

use super::mor::ManagedObjectReference;
use super::primitives::DateTime;
use super::reader::XmlReader;
use super::{Decode, DecodeError, Encode, SchemaType, XmlWriter};

/// Any schema type, boxed: what an `anyType` slot holds when `xsi:type` names
/// a data object, a fault, an enumeration or an `ArrayOf*` of those.
///
/// ```
/// # use vsphere_client::xml::{DataObject, Value};
/// fn power_state(value: &Value) -> Option<&str> {
///     match value {
///         Value::Object(object) => object.type_name().strip_prefix("VirtualMachine"),
///         _ => None,
///     }
/// }
/// ```
pub trait DataObject: Debug + Send + Sync + 'static {
    /// The XML type name (`VirtualDisk`, `ArrayOfVirtualDevice`).
    fn type_name(&self) -> &'static str;
    /// For downcasting.
    fn as_any(&self) -> &dyn Any;
    /// For downcasting by value.
    fn into_any(self: Box<Self>) -> Box<dyn Any>;
    /// Clones into a new box.
    fn clone_box(&self) -> Box<dyn DataObject>;
    /// Equality with another boxed object (false across types).
    fn eq_dyn(&self, other: &dyn DataObject) -> bool;
    /// Writes the value as `<tag>` with the given `xsi:type`, if any.
    fn encode_dyn(&self, w: &mut XmlWriter, tag: &str, xsi_type: Option<&str>);
}

impl<T: SchemaType> DataObject for T {
    fn type_name(&self) -> &'static str {
        T::TYPE_NAME
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
    fn into_any(self: Box<Self>) -> Box<dyn Any> {
        self
    }
    #[cfg_attr(target_os = "linux", link_section = ".text.unlikely.vsphere_client")]
    fn clone_box(&self) -> Box<dyn DataObject> {
        into_dyn(self.clone())
    }
    #[cfg_attr(target_os = "linux", link_section = ".text.unlikely.vsphere_client")]
    fn eq_dyn(&self, other: &dyn DataObject) -> bool {
        match other.as_any().downcast_ref::<T>() {
            Some(other) => T::eq(self, other),
            None => false,
        }
    }
    #[cfg_attr(target_os = "linux", link_section = ".text.unlikely.vsphere_client")]
    fn encode_dyn(&self, w: &mut XmlWriter, tag: &str, xsi_type: Option<&str>) {
        self.encode_as(w, tag, xsi_type);
    }
}

impl dyn DataObject {
    /// The object as `T`, if it is one.
    pub fn downcast_ref<T: DataObject>(&self) -> Option<&T> {
        self.as_any().downcast_ref()
    }

    /// Writes the object as `<tag xsi:type="TypeName">...</tag>`.
    pub fn encode_typed(&self, w: &mut XmlWriter, tag: &str) {
        self.encode_dyn(w, tag, Some(self.type_name()));
    }

    /// Whether the object is a `T`.
    pub fn is<T: DataObject>(&self) -> bool {
        self.as_any().is::<T>()
    }
}

/// Unboxes the object as `T`; on mismatch, the object's type name.
pub fn downcast_box<T: DataObject>(object: Box<dyn DataObject>) -> Result<Box<T>, &'static str> {
    let found = object.type_name();
    match object.into_any().downcast::<T>() {
        Ok(typed) => Ok(typed),
        Err(_) => Err(found),
    }
}

impl Clone for Box<dyn DataObject> {
    fn clone(&self) -> Self {
        self.clone_box()
    }
}

impl PartialEq for Box<dyn DataObject> {
    fn eq(&self, other: &Self) -> bool {
        self.eq_dyn(other.as_ref())
    }
}

// Every conversion of a schema type to `dyn DataObject` goes through
// `as_dyn` or `into_dyn`, out of line: a trait object's vtable is emitted
// in each codegen unit that makes one, and the registry, the `Any*` enums and
// `clone_box` used to make them in different units (2 to 4 copies of ~10
// pointers for each of ~3,800 types). In a position-independent executable
// every such pointer is a relocation the loader reads and applies at startup:
// 57,000 of them (177k -> 121k), 2.2 MB of resident memory in every program
// using the crate.

/// `value` as a trait object (see above: one vtable per type).
#[doc(hidden)]
#[inline(never)]
pub fn as_dyn<T: SchemaType>(value: &T) -> &dyn DataObject {
    value
}

/// `value` boxed as a trait object (see above: one vtable per type).
#[doc(hidden)]
pub fn into_dyn<T: SchemaType>(value: T) -> Box<dyn DataObject> {
    box_into_dyn(Box::new(value))
}

/// A box as a trait object: where the vtable of `T` is made (see above).
#[inline(never)]
fn box_into_dyn<T: SchemaType>(value: Box<T>) -> Box<dyn DataObject> {
    value
}

/// Decodes the current element as `T`, boxed: the registry's entry for `T`.
pub fn decode_boxed<T: SchemaType>(
    r: &mut XmlReader<'_>,
) -> Result<Box<dyn DataObject>, DecodeError> {
    match T::decode_boxed(r) {
        Ok(value) => Ok(box_into_dyn(value)),
        Err(e) => Err(e),
    }
}

/// The content of an `xsd:anyType` slot (`DynamicProperty.val`,
/// `OptionValue.value`, ...), typed by its `xsi:type`.
#[derive(Debug, Clone, PartialEq, Default)]
#[non_exhaustive]
pub enum Value {
    /// No value: an absent or `xsi:nil` element.
    #[default]
    Nil,
    /// `xsd:boolean`.
    Boolean(bool),
    /// `xsd:byte`.
    Byte(i8),
    /// `xsd:short`.
    Short(i16),
    /// `xsd:int`.
    Int(i32),
    /// `xsd:long`.
    Long(i64),
    /// `xsd:float`.
    Float(f32),
    /// `xsd:double`.
    Double(f64),
    /// `xsd:string`, and text without an `xsi:type`.
    String(String),
    /// `xsd:anyURI`.
    AnyUri(String),
    /// `xsd:dateTime`.
    DateTime(DateTime),
    /// `xsd:base64Binary`.
    Base64Binary(Vec<u8>),
    /// `ManagedObjectReference`.
    ManagedObjectReference(ManagedObjectReference),
    /// `ArrayOfBoolean`.
    ArrayOfBoolean(Vec<bool>),
    /// `ArrayOfByte`.
    ArrayOfByte(Vec<i8>),
    /// `ArrayOfShort`.
    ArrayOfShort(Vec<i16>),
    /// `ArrayOfInt`.
    ArrayOfInt(Vec<i32>),
    /// `ArrayOfLong`.
    ArrayOfLong(Vec<i64>),
    /// `ArrayOfFloat`.
    ArrayOfFloat(Vec<f32>),
    /// `ArrayOfDouble`.
    ArrayOfDouble(Vec<f64>),
    /// `ArrayOfString`.
    ArrayOfString(Vec<String>),
    /// `ArrayOfAnyURI`.
    ArrayOfAnyUri(Vec<String>),
    /// `ArrayOfUri` (items named `uri`).
    ArrayOfUri(Vec<String>),
    /// `ArrayOfDateTime`.
    ArrayOfDateTime(Vec<DateTime>),
    /// `ArrayOfBase64Binary`.
    ArrayOfBase64Binary(Vec<Vec<u8>>),
    /// `ArrayOfManagedObjectReference`.
    ArrayOfManagedObjectReference(Vec<ManagedObjectReference>),
    /// `ArrayOfAnyType`: each item typed by its own `xsi:type`.
    ArrayOfAnyType(Vec<Value>),
    /// A data object, fault or enumeration value, or a typed `ArrayOf*` of
    /// those (`Vec<AnyVirtualDevice>` for `ArrayOfVirtualDevice`).
    Object(Box<dyn DataObject>),
    /// An `xsi:type` this version of the bindings does not know, kept raw so
    /// nothing is lost (a newer server).
    Unknown {
        /// The `xsi:type` (local part); empty when the element had none.
        type_name: String,
        /// The element's content as it appeared in the document.
        raw_xml: String,
    },
}

/// The primitive `xsi:type` names and array names `Value` handles itself.
const PRIMITIVE_ARRAY_ITEMS: &[(&str, &str)] = &[
    ("ArrayOfAnyType", "anyType"),
    ("ArrayOfAnyURI", "anyURI"),
    ("ArrayOfBase64Binary", "base64Binary"),
    ("ArrayOfBoolean", "boolean"),
    ("ArrayOfByte", "byte"),
    ("ArrayOfDateTime", "dateTime"),
    ("ArrayOfDouble", "double"),
    ("ArrayOfFloat", "float"),
    ("ArrayOfInt", "int"),
    ("ArrayOfLong", "long"),
    ("ArrayOfManagedObjectReference", "ManagedObjectReference"),
    ("ArrayOfShort", "short"),
    ("ArrayOfString", "string"),
    ("ArrayOfUri", "uri"),
];

impl Value {
    /// Whether `Value` decodes `xsi:type="{type_name}"` itself, without the
    /// registry (XML Schema primitives, `ManagedObjectReference` and arrays of those).
    pub fn is_builtin_type(type_name: &str) -> bool {
        matches!(
            type_name,
            "boolean"
                | "byte"
                | "short"
                | "int"
                | "long"
                | "float"
                | "double"
                | "string"
                | "anyURI"
                | "dateTime"
                | "base64Binary"
                | "ManagedObjectReference"
        ) || PRIMITIVE_ARRAY_ITEMS.iter().any(|(a, _)| *a == type_name)
    }

    /// The `xsi:type` this value is written with.
    pub fn type_name(&self) -> &str {
        match self {
            Value::Nil => "",
            Value::Boolean(_) => "boolean",
            Value::Byte(_) => "byte",
            Value::Short(_) => "short",
            Value::Int(_) => "int",
            Value::Long(_) => "long",
            Value::Float(_) => "float",
            Value::Double(_) => "double",
            Value::String(_) => "string",
            Value::AnyUri(_) => "anyURI",
            Value::DateTime(_) => "dateTime",
            Value::Base64Binary(_) => "base64Binary",
            Value::ManagedObjectReference(_) => "ManagedObjectReference",
            Value::ArrayOfBoolean(_) => "ArrayOfBoolean",
            Value::ArrayOfByte(_) => "ArrayOfByte",
            Value::ArrayOfShort(_) => "ArrayOfShort",
            Value::ArrayOfInt(_) => "ArrayOfInt",
            Value::ArrayOfLong(_) => "ArrayOfLong",
            Value::ArrayOfFloat(_) => "ArrayOfFloat",
            Value::ArrayOfDouble(_) => "ArrayOfDouble",
            Value::ArrayOfString(_) => "ArrayOfString",
            Value::ArrayOfAnyUri(_) => "ArrayOfAnyURI",
            Value::ArrayOfUri(_) => "ArrayOfUri",
            Value::ArrayOfDateTime(_) => "ArrayOfDateTime",
            Value::ArrayOfBase64Binary(_) => "ArrayOfBase64Binary",
            Value::ArrayOfManagedObjectReference(_) => "ArrayOfManagedObjectReference",
            Value::ArrayOfAnyType(_) => "ArrayOfAnyType",
            Value::Object(object) => object.type_name(),
            Value::Unknown { type_name, .. } => type_name,
        }
    }

    /// The boxed object, if the value is one.
    pub fn as_object(&self) -> Option<&dyn DataObject> {
        match self {
            Value::Object(object) => Some(object.as_ref()),
            _ => None,
        }
    }

    /// The object as `T` (a data object, an enumeration, or `Vec<T>` for a
    /// typed array), if the value is one.
    pub fn downcast_ref<T: DataObject>(&self) -> Option<&T> {
        self.as_object()?.downcast_ref()
    }

    /// The string content of `String` and `AnyUri` values.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::String(s) | Value::AnyUri(s) => Some(s),
            _ => None,
        }
    }

    /// Converts into a typed value.
    pub fn into_typed<T: FromValue>(self) -> Result<T, ValueTypeError> {
        T::from_value(self)
    }

    /// Wraps a schema value.
    pub fn object<T: SchemaType>(value: T) -> Self {
        Value::Object(into_dyn(value))
    }
}

fn read_items<T: Decode>(r: &mut XmlReader<'_>) -> Result<Vec<T>, DecodeError> {
    let mut items = Vec::new();
    while r.next_child()?.is_some() {
        r.read_push(&mut items)?;
    }
    Ok(items)
}

fn write_items<T: Encode>(
    w: &mut XmlWriter,
    tag: &str,
    array_type: &str,
    item_tag: &str,
    items: &[T],
) {
    w.start(tag, Some(array_type));
    w.write_vec(item_tag, items);
    w.end(tag);
}

impl Decode for Value {
    fn decode(r: &mut XmlReader<'_>) -> Result<Self, DecodeError> {
        if r.is_nil() {
            r.skip()?;
            return Ok(Value::Nil);
        }
        let Some(type_name) = r.xsi_type_text() else {
            return decode_untyped(r);
        };
        Ok(match &*type_name {
            "boolean" => Value::Boolean(bool::decode(r)?),
            "byte" => Value::Byte(i8::decode(r)?),
            "short" => Value::Short(i16::decode(r)?),
            "int" => Value::Int(i32::decode(r)?),
            "long" => Value::Long(i64::decode(r)?),
            "float" => Value::Float(f32::decode(r)?),
            "double" => Value::Double(f64::decode(r)?),
            "string" => Value::String(String::decode(r)?),
            "anyURI" => Value::AnyUri(String::decode(r)?),
            "dateTime" => Value::DateTime(DateTime::decode(r)?),
            "base64Binary" => Value::Base64Binary(Vec::<u8>::decode(r)?),
            "ManagedObjectReference" => {
                Value::ManagedObjectReference(ManagedObjectReference::decode(r)?)
            }
            "ArrayOfBoolean" => Value::ArrayOfBoolean(read_items(r)?),
            "ArrayOfByte" => Value::ArrayOfByte(read_items(r)?),
            "ArrayOfShort" => Value::ArrayOfShort(read_items(r)?),
            "ArrayOfInt" => Value::ArrayOfInt(read_items(r)?),
            "ArrayOfLong" => Value::ArrayOfLong(read_items(r)?),
            "ArrayOfFloat" => Value::ArrayOfFloat(read_items(r)?),
            "ArrayOfDouble" => Value::ArrayOfDouble(read_items(r)?),
            "ArrayOfString" => Value::ArrayOfString(read_items(r)?),
            "ArrayOfAnyURI" => Value::ArrayOfAnyUri(read_items(r)?),
            "ArrayOfUri" => Value::ArrayOfUri(read_items(r)?),
            "ArrayOfDateTime" => Value::ArrayOfDateTime(read_items(r)?),
            "ArrayOfBase64Binary" => Value::ArrayOfBase64Binary(read_items(r)?),
            "ArrayOfManagedObjectReference" => Value::ArrayOfManagedObjectReference(read_items(r)?),
            "ArrayOfAnyType" => Value::ArrayOfAnyType(read_items(r)?),
            _ => match r.registry().get(&type_name).and_then(|t| t.decode()) {
                Some(decode) => Value::Object(decode(r)?),
                None => Value::Unknown {
                    raw_xml: raw_content(r)?,
                    type_name: type_name.into_owned(),
                },
            },
        })
    }
}

/// An `anyType` element without `xsi:type`: text becomes a string, anything
/// with child elements is kept raw.
fn decode_untyped(r: &mut XmlReader<'_>) -> Result<Value, DecodeError> {
    let raw = raw_content(r)?;
    if raw.contains('<') {
        return Ok(Value::Unknown {
            type_name: String::new(),
            raw_xml: raw,
        });
    }
    match quick_xml::escape::unescape(&raw) {
        Ok(text) => Ok(Value::String(text.replace("\r\n", "\n"))),
        Err(e) => Err(r.error(super::DecodeErrorKind::Syntax, e.to_string())),
    }
}

fn raw_content(r: &mut XmlReader<'_>) -> Result<String, DecodeError> {
    let raw = r.skip_raw()?;
    match std::str::from_utf8(raw) {
        Ok(text) => Ok(text.to_string()),
        Err(_) => Err(r.error(super::DecodeErrorKind::Syntax, "content is not UTF-8")),
    }
}

impl Encode for Value {
    fn encode_as(&self, w: &mut XmlWriter, tag: &str, _xsi_type: Option<&str>) {
        // An anyType slot always says what it holds.
        match self {
            Value::Nil => w.nil(tag),
            Value::Boolean(v) => v.encode_as(w, tag, Some("xsd:boolean")),
            Value::Byte(v) => v.encode_as(w, tag, Some("xsd:byte")),
            Value::Short(v) => v.encode_as(w, tag, Some("xsd:short")),
            Value::Int(v) => v.encode_as(w, tag, Some("xsd:int")),
            Value::Long(v) => v.encode_as(w, tag, Some("xsd:long")),
            Value::Float(v) => v.encode_as(w, tag, Some("xsd:float")),
            Value::Double(v) => v.encode_as(w, tag, Some("xsd:double")),
            Value::String(v) => v.encode_as(w, tag, Some("xsd:string")),
            Value::AnyUri(v) => v.encode_as(w, tag, Some("xsd:anyURI")),
            Value::DateTime(v) => v.encode_as(w, tag, Some("xsd:dateTime")),
            Value::Base64Binary(v) => v.encode_as(w, tag, Some("xsd:base64Binary")),
            Value::ManagedObjectReference(v) => v.encode_as(w, tag, Some("ManagedObjectReference")),
            Value::ArrayOfBoolean(v) => write_items(w, tag, "ArrayOfBoolean", "boolean", v),
            Value::ArrayOfByte(v) => write_items(w, tag, "ArrayOfByte", "byte", v),
            Value::ArrayOfShort(v) => write_items(w, tag, "ArrayOfShort", "short", v),
            Value::ArrayOfInt(v) => write_items(w, tag, "ArrayOfInt", "int", v),
            Value::ArrayOfLong(v) => write_items(w, tag, "ArrayOfLong", "long", v),
            Value::ArrayOfFloat(v) => write_items(w, tag, "ArrayOfFloat", "float", v),
            Value::ArrayOfDouble(v) => write_items(w, tag, "ArrayOfDouble", "double", v),
            Value::ArrayOfString(v) => write_items(w, tag, "ArrayOfString", "string", v),
            Value::ArrayOfAnyUri(v) => write_items(w, tag, "ArrayOfAnyURI", "anyURI", v),
            Value::ArrayOfUri(v) => write_items(w, tag, "ArrayOfUri", "uri", v),
            Value::ArrayOfDateTime(v) => write_items(w, tag, "ArrayOfDateTime", "dateTime", v),
            Value::ArrayOfBase64Binary(v) => {
                write_items(w, tag, "ArrayOfBase64Binary", "base64Binary", v)
            }
            Value::ArrayOfManagedObjectReference(v) => write_items(
                w,
                tag,
                "ArrayOfManagedObjectReference",
                "ManagedObjectReference",
                v,
            ),
            Value::ArrayOfAnyType(v) => write_items(w, tag, "ArrayOfAnyType", "anyType", v),
            Value::Object(object) => object.encode_typed(w, tag),
            Value::Unknown { type_name, raw_xml } => {
                let xsi_type = (!type_name.is_empty()).then_some(type_name.as_str());
                w.start(tag, xsi_type);
                w.raw(raw_xml);
                w.end(tag);
            }
        }
    }
}

/// A `Value` did not hold the type asked for.
#[derive(Debug, Clone, PartialEq)]
pub struct ValueTypeError {
    /// The type asked for.
    pub expected: &'static str,
    /// What the value held (its `xsi:type`).
    pub found: String,
}

impl std::fmt::Display for ValueTypeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "expected a {} value, found {:?}",
            self.expected, self.found
        )
    }
}

impl std::error::Error for ValueTypeError {}

/// Conversion of an `anyType` value into the type a property is declared with:
/// primitives from their variants, schema types by downcast, `Any*` enums
/// from any of their variants' types.
pub trait FromValue: Sized {
    /// Converts, or says what was found instead.
    fn from_value(value: Value) -> Result<Self, ValueTypeError>;
}

fn mismatch<T>(expected: &'static str, value: &Value) -> Result<T, ValueTypeError> {
    Err(ValueTypeError {
        expected,
        found: value.type_name().to_string(),
    })
}

impl FromValue for Value {
    fn from_value(value: Value) -> Result<Self, ValueTypeError> {
        Ok(value)
    }
}

impl<T: SchemaType> FromValue for T {
    fn from_value(value: Value) -> Result<Self, ValueTypeError> {
        match value {
            Value::Object(object) => match downcast_box::<T>(object) {
                Ok(typed) => Ok(*typed),
                Err(found) => Err(ValueTypeError {
                    expected: T::TYPE_NAME,
                    found: found.to_string(),
                }),
            },
            other => mismatch(T::TYPE_NAME, &other),
        }
    }
}

macro_rules! from_value {
    ($($ty:ty => $variant:ident / $name:literal),* $(,)?) => {$(
        impl FromValue for $ty {
            fn from_value(value: Value) -> Result<Self, ValueTypeError> {
                match value {
                    Value::$variant(v) => Ok(v),
                    other => mismatch($name, &other),
                }
            }
        }
    )*};
}

from_value!(
    bool => Boolean / "boolean",
    i8 => Byte / "byte",
    i16 => Short / "short",
    i32 => Int / "int",
    i64 => Long / "long",
    f32 => Float / "float",
    f64 => Double / "double",
    DateTime => DateTime / "dateTime",
    Vec<u8> => Base64Binary / "base64Binary",
    ManagedObjectReference => ManagedObjectReference / "ManagedObjectReference",
    Vec<bool> => ArrayOfBoolean / "ArrayOfBoolean",
    Vec<i8> => ArrayOfByte / "ArrayOfByte",
    Vec<i16> => ArrayOfShort / "ArrayOfShort",
    Vec<i32> => ArrayOfInt / "ArrayOfInt",
    Vec<i64> => ArrayOfLong / "ArrayOfLong",
    Vec<f32> => ArrayOfFloat / "ArrayOfFloat",
    Vec<f64> => ArrayOfDouble / "ArrayOfDouble",
    Vec<DateTime> => ArrayOfDateTime / "ArrayOfDateTime",
    Vec<Vec<u8>> => ArrayOfBase64Binary / "ArrayOfBase64Binary",
    Vec<ManagedObjectReference> => ArrayOfManagedObjectReference / "ArrayOfManagedObjectReference",
    Vec<Value> => ArrayOfAnyType / "ArrayOfAnyType",
);

/// `FromValue` for a polymorphic `Any*` enum: the value must be an object of
/// the declared type `expected` or a subtype, which `convert` wraps.
pub fn any_from_value<T>(
    value: Value,
    expected: &'static str,
    convert: fn(Box<dyn DataObject>) -> Option<T>,
) -> Result<T, ValueTypeError> {
    match value {
        Value::Object(object) => {
            let found = object.type_name();
            convert(object).ok_or_else(|| ValueTypeError {
                expected,
                found: found.to_string(),
            })
        }
        other => mismatch(expected, &other),
    }
}

/// A retrieved property value for an `Option` field: `Nil` is `None`.
pub fn from_property<T: FromValue>(value: Value) -> Result<Option<T>, ValueTypeError> {
    match value {
        Value::Nil => Ok(None),
        value => T::from_value(value).map(Some),
    }
}

impl FromValue for String {
    fn from_value(value: Value) -> Result<Self, ValueTypeError> {
        match value {
            Value::String(v) | Value::AnyUri(v) => Ok(v),
            other => mismatch("string", &other),
        }
    }
}

impl FromValue for Vec<String> {
    fn from_value(value: Value) -> Result<Self, ValueTypeError> {
        match value {
            Value::ArrayOfString(v) | Value::ArrayOfAnyUri(v) | Value::ArrayOfUri(v) => Ok(v),
            other => mismatch("ArrayOfString", &other),
        }
    }
}
