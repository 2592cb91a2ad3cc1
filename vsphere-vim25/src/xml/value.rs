//! `Value`: the content of an `xsd:anyType` slot, and `DataObject`, a boxed
//! schema type behind it.

use std::any::{Any, TypeId};
use std::fmt::Debug;

use super::mor::ManagedObjectReference;
use super::primitives::DateTime;
use super::reader::XmlReader;
use super::{
    debug_fields, new_fields, BoxedFields, Decode, DecodeError, Encode, SchemaType, Structure,
    XmlWriter,
};

/// Any schema type, boxed: what an `anyType` slot holds when `xsi:type` names
/// a data object, a fault, an enumeration or an `ArrayOf*` of those.
///
/// The object behind it is a [`StructObject`] for every structure (the value
/// as `dyn Fields`, with its type's name and id), and for the enumerations and
/// arrays the generated registry's enum of one registry chunk (each variant a
/// `Box` of one type): the crate has a few dozen implementations of this
/// trait, not one per schema type (a vtable and its clone, compare, encode and
/// decode glue for each of ~4,000 types was a fifth of the crate's code), and
/// no `Box` glue or `match` arm per structure. Reach the typed value with `downcast_ref::<T>()`
/// on the `dyn DataObject` or [`Value::downcast_ref`].
///
/// ```
/// # use vsphere_vim25::xml::{DataObject, Value};
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
    /// For downcasting (to the generated enum that implements this trait).
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

/// `==` of the objects an `anyType` holds (a `StructObject`, a registry chunk's `Object`): the
/// same type, encoded to the same XML.
pub fn same_object(a: &dyn DataObject, b: &dyn DataObject) -> bool {
    if a.type_name() != b.type_name() {
        return false;
    }
    super::writer::same_xml(&|w| a.encode_dyn(w, "v", None), &|w| {
        b.encode_dyn(w, "v", None)
    })
}

/// A schema type a [`Value::Object`] can hold: every data object, fault and
/// enumeration, and `Vec<T>` for the typed `ArrayOf*` arrays. Implemented by
/// the generated code; the bound of [`Value::downcast_ref`] and
/// [`Value::object`].
pub trait ObjectType: Sized + Send + Sync + 'static {
    /// What holds this type in a [`Value::Object`]: [`StructObject`] for a
    /// structure, else the generated enum (of one registry chunk) with a
    /// variant for this type.
    #[doc(hidden)]
    type Object: DataObject;
    /// Wraps the value in its variant.
    #[doc(hidden)]
    fn into_object(value: Box<Self>) -> Self::Object;
    /// The value, if `object` holds this type.
    #[doc(hidden)]
    fn object_ref(object: &Self::Object) -> Option<&Self>;
    /// The value, if `object` holds this type; else `object` back.
    #[doc(hidden)]
    fn from_object(object: Self::Object) -> Result<Box<Self>, Self::Object>;
}

/// A structure (data object or fault) an `anyType` slot holds: the value
/// behind `dyn Fields`, which is how its `Debug`, `==` and encoding work
/// anyway, with its type's name and id. One [`DataObject`] for every
/// structure: the registry makes no `Box<T>`, variant or `match` arm per
/// structure type. Reached through [`ObjectType`] (`downcast_ref::<T>()`).
#[doc(hidden)]
pub struct StructObject {
    type_name: &'static str,
    type_id: TypeId,
    fields: BoxedFields,
}

impl StructObject {
    /// The boxed structure as an object.
    pub fn new<T: Structure>(value: Box<T>) -> StructObject {
        StructObject {
            type_name: T::TYPE_NAME,
            type_id: TypeId::of::<T>(),
            fields: value,
        }
    }

    /// The XML type name of the structure held.
    pub fn type_name(&self) -> &'static str {
        self.type_name
    }

    /// The structure, if it is a `T`.
    pub fn downcast_ref<T: Structure>(&self) -> Option<&T> {
        if self.type_id != TypeId::of::<T>() {
            return None;
        }
        let fields: *const (dyn super::Fields + Send + Sync) = &*self.fields;
        #[allow(unsafe_code)]
        // SAFETY: `type_id` is the id of the type the box was made from
        // (`new::<T>`, or `decode_struct_object::<T>` through `new_fields::<T>`),
        // so the data pointer of the `dyn Fields` points to a live `T`,
        // borrowed here for as long as `self` is.
        Some(unsafe { &*(fields as *const T) })
    }

    /// The boxed structure, if it is a `T`; else the object back.
    pub fn downcast<T: Structure>(self) -> Result<Box<T>, StructObject> {
        if self.type_id != TypeId::of::<T>() {
            return Err(self);
        }
        let fields = Box::into_raw(self.fields);
        #[allow(unsafe_code)]
        // SAFETY: as in `downcast_ref`, the box holds a `T` allocated with
        // `T`'s layout (by `Box<T>` or `new_fields::<T>`), which `Box<T>`
        // takes over.
        Ok(unsafe { Box::from_raw(fields as *mut T) })
    }
}

impl Debug for StructObject {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        debug_fields(f, self.type_name, &*self.fields)
    }
}

impl PartialEq for StructObject {
    fn eq(&self, other: &Self) -> bool {
        same_object(self, other)
    }
}

impl DataObject for StructObject {
    fn type_name(&self) -> &'static str {
        self.type_name
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
    fn into_any(self: Box<Self>) -> Box<dyn Any> {
        self
    }
    fn clone_box(&self) -> Box<dyn DataObject> {
        clone_object(self)
    }
    fn eq_dyn(&self, other: &dyn DataObject) -> bool {
        same_object(self, other)
    }
    fn encode_dyn(&self, w: &mut XmlWriter, tag: &str, xsi_type: Option<&str>) {
        w.write_struct(tag, xsi_type, &*self.fields)
    }
}

impl<T: Structure> ObjectType for T {
    type Object = StructObject;
    #[inline]
    fn into_object(value: Box<Self>) -> StructObject {
        StructObject::new(value)
    }
    #[inline]
    fn object_ref(object: &StructObject) -> Option<&Self> {
        object.downcast_ref()
    }
    #[inline]
    fn from_object(object: StructObject) -> Result<Box<Self>, StructObject> {
        object.downcast()
    }
}

/// Decodes the current element as a `T` in an [`StructObject`]: what the
/// registry does for a structure named by an `xsi:type`. The part per type
/// is making the default `T` to decode into.
#[doc(hidden)]
pub fn decode_struct_object<T: Structure>(
    r: &mut XmlReader<'_>,
) -> Result<Box<dyn DataObject>, DecodeError> {
    decode_fields_object(r, new_fields::<T>(), T::TYPE_NAME, TypeId::of::<T>())
}

fn decode_fields_object(
    r: &mut XmlReader<'_>,
    fields: BoxedFields,
    type_name: &'static str,
    type_id: TypeId,
) -> Result<Box<dyn DataObject>, DecodeError> {
    match r.read_boxed_fields(fields, type_name) {
        Ok(fields) => Ok(Box::new(StructObject {
            type_name,
            type_id,
            fields,
        })),
        Err(e) => Err(e),
    }
}

/// The item type of a typed `ArrayOf*` array (`AnyVirtualDevice` for
/// `ArrayOfVirtualDevice`): what makes `Vec<Self>` an [`ObjectType`].
/// Implemented by the generated code.
#[doc(hidden)]
pub trait ObjectArrayItem: Sized + Send + Sync + 'static {
    /// The generated enum with a variant for `Vec<Self>`.
    type Object: DataObject;
    /// Wraps the array in its variant.
    fn into_object(items: Box<Vec<Self>>) -> Self::Object;
    /// The array, if `object` holds one of this item type.
    fn object_ref(object: &Self::Object) -> Option<&Vec<Self>>;
    /// The array, if `object` holds one of this item type; else `object` back.
    fn from_object(object: Self::Object) -> Result<Box<Vec<Self>>, Self::Object>;
}

impl<T: ObjectArrayItem> ObjectType for Vec<T> {
    type Object = T::Object;
    #[inline]
    fn into_object(value: Box<Self>) -> Self::Object {
        T::into_object(value)
    }
    #[inline]
    fn object_ref(object: &Self::Object) -> Option<&Self> {
        T::object_ref(object)
    }
    #[inline]
    fn from_object(object: Self::Object) -> Result<Box<Self>, Self::Object> {
        T::from_object(object)
    }
}

impl dyn DataObject {
    /// The object as `T`, if it is one.
    pub fn downcast_ref<T: ObjectType>(&self) -> Option<&T> {
        T::object_ref(self.as_any().downcast_ref::<T::Object>()?)
    }

    /// Writes the object as `<tag xsi:type="TypeName">...</tag>`.
    pub fn encode_typed(&self, w: &mut XmlWriter, tag: &str) {
        self.encode_dyn(w, tag, Some(self.type_name()));
    }

    /// Whether the object is a `T`.
    pub fn is<T: ObjectType>(&self) -> bool {
        self.downcast_ref::<T>().is_some()
    }
}

/// Unboxes the object as `T`; on mismatch, the object back. What a
/// generated type's conversion from a [`Value`] is built on (a polymorphic
/// `Any*` enum's takes the [`StructObject`] itself and matches its type's
/// name, see [`take_chunk`]).
#[doc(hidden)]
pub fn take_object<T: ObjectType>(
    object: Box<dyn DataObject>,
) -> Result<Box<T>, Box<dyn DataObject>> {
    // The downcast is generic over what holds the type only (one copy for
    // the structures and one per chunk); what is left per type is the check
    // of its variant or `TypeId`.
    match take_chunk::<T::Object>(object) {
        Ok(held) => match T::from_object(held) {
            Ok(typed) => Ok(typed),
            Err(held) => Err(box_object(held)),
        },
        Err(object) => Err(object),
    }
}

/// Unboxes the object as `O` (a [`StructObject`], a chunk enum); on
/// mismatch, the object back. A polymorphic `Any*` enum's conversion from an
/// object takes the `StructObject` and matches its type's name itself.
#[doc(hidden)]
pub fn take_chunk<O: DataObject>(object: Box<dyn DataObject>) -> Result<O, Box<dyn DataObject>> {
    if !object.as_any().is::<O>() {
        return Err(object);
    }
    match object.into_any().downcast::<O>() {
        Ok(held) => Ok(*held),
        // Checked above; a `Box<dyn Any>` cannot be turned back into a
        // `DataObject`, so a nil object stands in.
        Err(_) => Err(Box::new(NoObject)),
    }
}

/// A copy of an `anyType` object: its XML, decoded again. `Clone` of a
/// [`Value::Object`] goes through here, so that the registry reaches no
/// type's `Clone` (every `Clone` of the ~3,300 types compiled into the crate,
/// a tenth of its code); a program compiles the `Clone`s it calls. What the
/// copy holds is what `==` compares: the same encoding.
#[doc(hidden)]
pub fn clone_object(object: &dyn DataObject) -> Box<dyn DataObject> {
    let mut w = XmlWriter::new();
    object.encode_typed(&mut w, "v");
    let xml = w.into_bytes();
    let mut r = XmlReader::new(&xml, &crate::generated::REGISTRY);
    let copy = match r.root() {
        Ok(_) => r.registry().decode_object(object.type_name(), &mut r),
        Err(e) => Some(Err(e)),
    };
    match copy {
        Some(Ok(copy)) => copy,
        // The decoders read everything the encoders write (every registered
        // type's round trip is tested); should one not, the copy is an
        // object of no type, not a panic.
        _ => Box::new(NoObject),
    }
}

/// A `StructObject` or chunk enum boxed as an object again (the conversion
/// that did not match).
#[doc(hidden)]
pub fn box_object<O: DataObject>(object: O) -> Box<dyn DataObject> {
    Box::new(object)
}

/// What [`take_object`] returns if a checked downcast fails after all.
#[derive(Debug)]
struct NoObject;

impl DataObject for NoObject {
    fn type_name(&self) -> &'static str {
        ""
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
    fn into_any(self: Box<Self>) -> Box<dyn Any> {
        self
    }
    fn clone_box(&self) -> Box<dyn DataObject> {
        Box::new(NoObject)
    }
    fn eq_dyn(&self, other: &dyn DataObject) -> bool {
        other.as_any().is::<NoObject>()
    }
    fn encode_dyn(&self, w: &mut XmlWriter, tag: &str, _xsi_type: Option<&str>) {
        w.nil(tag);
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
    pub fn downcast_ref<T: ObjectType>(&self) -> Option<&T> {
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
    pub fn object<T: ObjectType>(value: T) -> Self {
        Value::Object(Box::new(T::into_object(Box::new(value))))
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
    for item in items {
        item.encode_as(w, item_tag, None);
    }
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
            _ => match r.registry().decode_object(&type_name, r) {
                Some(object) => Value::Object(object?),
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
    match super::escape::unescape(&raw) {
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

impl<T: ObjectType + SchemaType> FromValue for T {
    fn from_value(value: Value) -> Result<Self, ValueTypeError> {
        match value {
            Value::Object(object) => match take_object::<T>(object) {
                Ok(typed) => Ok(*typed),
                Err(object) => Err(ValueTypeError {
                    expected: T::TYPE_NAME,
                    found: object.type_name().to_string(),
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

/// Wraps an object in an `Any*` enum, or gives it back when its type is not
/// one of the enum's.
type AnyConvert<T> = fn(Box<dyn DataObject>) -> Result<T, Box<dyn DataObject>>;

/// `FromValue` for a polymorphic `Any*` enum: the value must be an object of
/// the declared type `expected` or a subtype, which `convert` wraps.
pub fn any_from_value<T>(
    value: Value,
    expected: &'static str,
    convert: AnyConvert<T>,
) -> Result<T, ValueTypeError> {
    match value {
        Value::Object(object) => convert(object).map_err(|object| ValueTypeError {
            expected,
            found: object.type_name().to_string(),
        }),
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
