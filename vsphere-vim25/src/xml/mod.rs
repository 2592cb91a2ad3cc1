//! The streaming XML runtime the generated bindings are written against:
//! public for the generated code, the test kit, benchmarks and fuzz targets,
//! not API (it changes without notice). What users need of it is re-exported
//! at the crate root ([`Request`], [`Value`], [`DataObject`], [`DateTime`],
//! [`SchemaType`]) and in vsphere-client's `codec` module.
//!
//! Decoding works on the response body as a byte slice with the crate's own
//! lexer (no DOM: memory is O(depth)); encoding writes into a `Vec<u8>`.
//! Generated code only calls the small, non-generic-heavy API here:
//!
//! - structures implement [`Fields`] (one `match` on the child element's local
//!   name, one write per field) and get [`Decode`]/[`Encode`] from blanket impls;
//! - enumerations and polymorphic `Any*` enums implement [`Decode`]/[`Encode`]
//!   directly;
//! - [`Value`] holds `xsd:anyType` content, decoded through the generated
//!   [`Registry`] of `xsi:type` names;
//! - operations implement [`Request`]; [`soap`] wraps them in an envelope and
//!   decodes the response or the SOAP fault.

mod escape;
mod lexer;
mod mor;
#[doc(hidden)]
pub mod primitives;
mod reader;
mod schema;
pub mod skipped;
pub mod soap;
mod value;
mod writer;

pub use crate::version::ApiLevel;
pub use mor::ManagedObjectReference;
pub use primitives::DateTime;
pub use reader::{DecodeError, DecodeErrorKind, XmlReader, MAX_DEPTH};
pub use schema::{
    DecodeObjectFn, FieldInfo, ManagedObjectInfo, ManagedObjectType, ManagedObjects, Occurs,
    PropertyPathError, Registry, RetrievedPaths, TypeInfo, TypeKind,
};
#[doc(hidden)]
pub use schema::{FieldEntry, Name, RegistryChunk, TypeEntry};
pub use value::{
    any_from_value, box_object, clone_object, decode_struct_object, from_property, same_object,
    take_chunk, take_object, DataObject, FromValue, ObjectArrayItem, ObjectType, StructObject,
    Value, ValueTypeError,
};
pub use writer::{debug_fields, same_encoding, same_fields, NewerItem, XmlWriter};

// Cold code. Most programs decode far more than they encode, compare or
// clone: a walk encodes a few requests and decodes thousands of objects.
// The encoding side of every type (`Fields::encode_fields`, generated) and
// the `DataObject` methods that clone, compare or encode a boxed enumeration
// or array (generated, one set per registry chunk) go into one ELF section, `.text.unlikely.vsphere_client`
// (Linux only), which the linker places as one block: those ~9 MB of
// machine code no longer sit between the decoders a program runs, so fewer
// pages of the executable are loaded (the kernel maps 64 KB around each
// page fault). All of them are reachable through the registry's vtables
// anyway, so nothing is kept that the linker could otherwise have dropped.

use std::alloc::Layout;
use std::fmt::Debug;

/// Decodes one element (whose start tag the reader has just entered) into a value.
///
/// `Default` is required because vCenter omits "required" elements in the wild:
/// a missing or `xsi:nil` required field decodes to its default.
pub trait Decode: Sized + Default {
    /// Reads the current element's content up to and including its end tag.
    fn decode(r: &mut XmlReader<'_>) -> Result<Self, DecodeError>;

    /// [`decode`](Self::decode) into a new box (a polymorphic variant, an
    /// `anyType` value). Structures override it to decode in place, and
    /// give an `xsi:nil` element their default.
    fn decode_boxed(r: &mut XmlReader<'_>) -> Result<Box<Self>, DecodeError> {
        match Self::decode(r) {
            Ok(value) => Ok(Box::new(value)),
            Err(e) => Err(e),
        }
    }
}

/// Writes a value as one element.
pub trait Encode {
    /// Writes `<tag>...</tag>`, adding `xsi:type="{xsi_type}"` when given.
    fn encode_as(&self, w: &mut XmlWriter, tag: &str, xsi_type: Option<&str>);

    /// Writes `<tag>...</tag>` without an `xsi:type`.
    fn encode(&self, w: &mut XmlWriter, tag: &str) {
        self.encode_as(w, tag, None)
    }
}

/// A named schema type: data objects, faults, enumerations, request types and
/// typed `ArrayOf*` vectors. Everything that can appear behind an `xsi:type`.
pub trait SchemaType: Decode + Encode + Debug + Clone + PartialEq + Send + Sync + 'static {
    /// The XML type name, as used in `xsi:type`.
    const TYPE_NAME: &'static str;
}

/// The fields of a structure (complex type), inherited fields included.
///
/// Object safe on purpose: the element loop in [`XmlReader::read_fields`] and
/// [`XmlWriter::write_struct`] is compiled once, not once per type.
pub trait Fields {
    /// Decodes the child element `name` into its field. Returns `Ok(false)`
    /// when `name` is not a field of this type (the caller skips it).
    fn decode_field(&mut self, r: &mut XmlReader<'_>, name: &str) -> Result<bool, DecodeError>;

    /// Writes every field in schema order, inherited fields first.
    fn encode_fields(&self, w: &mut XmlWriter);
}

/// The end of a generated `decode_field`: the field's result as "known field".
/// One shared function instead of a `?` per match arm keeps the generated
/// functions small.
pub fn field_decoded(result: Result<(), DecodeError>) -> Result<bool, DecodeError> {
    match result {
        Ok(()) => Ok(true),
        Err(e) => Err(e),
    }
}

/// A copy of a vector, for the `Clone` of generated structures with a
/// repeated field and of typed arrays: one loop per item type, where
/// `Vec::clone` (the standard library's `to_vec`) brings a drop guard and
/// iterator adapters of its own for each (~200 lines of LLVM IR per item type
/// in a debug build, for ~600 item types). Should an item's `clone` panic,
/// the items copied so far are dropped with the copy.
pub fn clone_vec<T: Clone>(items: &[T]) -> Vec<T> {
    let mut copy = Vec::with_capacity(items.len());
    for item in items {
        copy.push(item.clone());
    }
    copy
}

/// Whether a required field holds its default: the version check of a
/// required field newer than its type (see [`XmlWriter::since`]) sends it
/// only when it does not.
pub fn is_default<T: Default + PartialEq>(value: &T) -> bool {
    *value == T::default()
}

/// A generated structure: the marker that gives it [`Decode`] and [`Encode`].
/// Its [`SchemaType::TYPE_NAME`] names it when an element inside it is
/// skipped ([`skipped`]).
pub trait Structure: Fields + Default + SchemaType {}

// The `dyn Fields` of a structure are made out of line: a trait object's
// vtable is emitted in each codegen unit that makes one, and in a
// position-independent executable every pointer in it is a relocation the
// loader applies at startup. Made here, there is one vtable per type instead
// of one per codegen unit that decodes or encodes it.
#[inline(never)]
fn fields_mut<T: Fields>(value: &mut T) -> &mut dyn Fields {
    value
}

/// A boxed structure whose type is known from elsewhere (a decoder, a
/// registry entry): every generated structure is `Send` and `Sync`.
pub(crate) type BoxedFields = Box<dyn Fields + Send + Sync>;

/// A structure as `&dyn Fields`, the vtable made here once (see above): what
/// the generated `Debug` and `PartialEq` hand to [`debug_fields`] and
/// [`same_fields`].
#[doc(hidden)]
#[inline(never)]
pub fn fields_ref<T: Fields>(value: &T) -> &dyn Fields {
    value
}

/// A new structure holding its default, as the `dyn Fields` the reader
/// decodes into: what [`Decode::decode_boxed`] starts from. Built in place
/// like `Box::<T>::default()`, without its per-type copies of
/// `Box<MaybeUninit<T>>` and that box's drop glue; the allocation is one
/// non-generic function, and the box is handed on (and dropped, on an error)
/// as `Box<dyn Fields>`, whose drop is one function for every type. What stays
/// per type is writing the default and the `dyn Fields` vtable, made here
/// once (see the note on `fields_mut`).
#[inline(never)]
fn new_fields<T: Structure>() -> BoxedFields {
    let ptr = allocate(const { Layout::new::<T>() }).cast::<T>();
    // The default is written straight into the allocation (no copy of `T`
    // through the stack in an optimised build). Should `T::default()` panic,
    // the allocation leaks; the generated types' defaults do not panic.
    #[allow(unsafe_code)]
    // SAFETY: `allocate` returns memory from the global allocator with the
    // layout of `T` (or a dangling, aligned pointer when `T` is zero-sized,
    // which is what `Box` itself uses), valid for one write of `T`; once
    // written it holds an initialised `T` that nothing else owns, so `Box`
    // may take it over as `dyn Fields` and free it with the layout its vtable
    // gives, `T`'s.
    unsafe {
        std::ptr::write(ptr, T::default());
        Box::from_raw(ptr as *mut (dyn Fields + Send + Sync))
    }
}

/// Memory for one value of `layout` from the global allocator; aborts like
/// `Box::new` when the allocation fails.
#[inline(never)]
fn allocate(layout: Layout) -> *mut u8 {
    if layout.size() == 0 {
        return std::ptr::without_provenance_mut(layout.align());
    }
    #[allow(unsafe_code)]
    // SAFETY: `layout` has a non-zero size.
    let ptr = unsafe { std::alloc::alloc(layout) };
    if ptr.is_null() {
        std::alloc::handle_alloc_error(layout)
    }
    ptr
}

impl<T: Structure> Decode for T {
    fn decode(r: &mut XmlReader<'_>) -> Result<Self, DecodeError> {
        let mut value = T::default();
        // `match`, not `?`: see the note in `XmlReader::read`.
        match r.read_fields(fields_mut(&mut value), T::TYPE_NAME) {
            Ok(()) => Ok(value),
            Err(e) => Err(e),
        }
    }

    // Decoded where it is kept: decoding on the stack and then moving into
    // the box copied every boxed structure once more (devices, backings,
    // summaries: hundreds of bytes each, a `memcpy` of another size each).
    // The box goes through the reader as `Box<dyn Fields>` (one drop for
    // every type on an error): each type's copy of this function is a call
    // and a pointer cast, not a `Box<T>` to drop on each path.
    fn decode_boxed(r: &mut XmlReader<'_>) -> Result<Box<Self>, DecodeError> {
        match r.read_boxed_fields(new_fields::<T>(), T::TYPE_NAME) {
            #[allow(unsafe_code)]
            // SAFETY: `read_boxed_fields` gives back the box it was handed,
            // which `new_fields::<T>` made holding a `T` allocated with `T`'s
            // layout: the data pointer of the `dyn Fields` is that `T`'s.
            Ok(value) => Ok(unsafe { Box::from_raw(Box::into_raw(value) as *mut T) }),
            Err(e) => Err(e),
        }
    }
}

impl<T: Structure> Encode for T {
    fn encode_as(&self, w: &mut XmlWriter, tag: &str, xsi_type: Option<&str>) {
        w.write_struct(tag, xsi_type, fields_ref(self))
    }
}

/// An item type of an `ArrayOf*` schema type: `Vec<Self>` is then the typed
/// value of `xsi:type="ArrayOf..."` in an `anyType` slot.
pub trait ArrayItem: Decode + Encode + Debug + Clone + PartialEq + Send + Sync + 'static {
    /// `ArrayOfVirtualDevice`.
    const ARRAY_TYPE_NAME: &'static str;
    /// The element name of each item: `VirtualDevice`.
    const ITEM_TAG: &'static str;
}

impl<T: ArrayItem> Decode for Vec<T> {
    fn decode(r: &mut XmlReader<'_>) -> Result<Self, DecodeError> {
        let mut items = Vec::new();
        // Items are read whatever their element name: the array type fixes
        // their type. `match`, not `?`: see the note in `XmlReader::read`.
        loop {
            match r.next_child() {
                Ok(Some(_)) => {}
                Ok(None) => return Ok(items),
                Err(e) => return Err(e),
            }
            match r.read_push(&mut items) {
                Ok(()) => {}
                Err(e) => return Err(e),
            }
        }
    }
}

impl<T: ArrayItem> Encode for Vec<T> {
    fn encode_as(&self, w: &mut XmlWriter, tag: &str, xsi_type: Option<&str>) {
        w.start(tag, xsi_type);
        for item in self {
            item.encode(w, T::ITEM_TAG);
        }
        w.end(tag);
    }
}

impl<T: ArrayItem> SchemaType for Vec<T> {
    const TYPE_NAME: &'static str = T::ARRAY_TYPE_NAME;
}

/// A type that is a variant of the polymorphic enum `E` (`VirtualDisk` of
/// `AnyVirtualDevice`): what `From<T> for E` and `E::downcast_ref::<T>()` are
/// built on, one generic impl per enum instead of one impl per variant (much
/// cheaper to type-check).
pub trait VariantOf<E> {
    /// Wraps the value in its variant.
    fn into_variant(self) -> E;
    /// The value, if `any` holds this type (exactly: not a subtype of it).
    fn variant_ref(any: &E) -> Option<&Self>;
}

/// A vim25 operation: the generated `*RequestType` structure with the
/// operation's name, whether it is safe to repeat, and its response type.
pub trait Request: Fields {
    /// The operation name, the body element of the request (`CloneVM_Task`).
    const NAME: &'static str;
    /// Safe to send again after a failure that may have reached the server
    /// (read-only operations). Retries are only allowed for these.
    const IDEMPOTENT: bool;
    /// What the operation returns (`()` for none). `Send`, as every
    /// generated type is: a client's call may move it between threads.
    type Response: Send;

    /// The managed object the operation is invoked on (`_this`).
    fn this(&self) -> &ManagedObjectReference;

    /// Reads the `returnval` elements of the `<NAMEResponse>` element, whose
    /// start tag the reader has just entered.
    fn decode_response(r: &mut XmlReader<'_>) -> Result<Self::Response, DecodeError>;
}

/// The body element of a request, without the SOAP envelope:
/// `<NAME xmlns="urn:vim25"><_this type="...">...</_this>...</NAME>`.
pub fn encode_request<R: Request>(request: &R) -> Vec<u8> {
    let mut w = XmlWriter::new();
    w.write_request_body(R::NAME, request);
    w.into_bytes()
}

/// Decodes a `<NAMEResponse>` element (the content of a SOAP body) with the
/// generated registry. For a whole SOAP envelope use [`soap::decode_response`].
pub fn decode_response<R: Request>(body: &[u8]) -> Result<R::Response, DecodeError> {
    let mut r = XmlReader::new(body, &crate::generated::REGISTRY);
    r.expect_root_named(&response_element_name(R::NAME))?;
    let response = R::decode_response(&mut r)?;
    r.finish()?;
    Ok(response)
}

pub(crate) fn response_element_name(operation: &str) -> String {
    let mut name = String::with_capacity(operation.len() + 8);
    name.push_str(operation);
    name.push_str("Response");
    name
}

#[cfg(test)]
mod tests {
    use super::{
        Decode, DecodeError, DecodeErrorKind, Fields, SchemaType, Structure, XmlReader, XmlWriter,
    };

    /// A structure whose default allocates and whose alignment is 16.
    #[derive(Debug, Clone, PartialEq)]
    struct Aligned {
        text: String,
        items: Vec<i32>,
        wide: u128,
    }

    impl Default for Aligned {
        fn default() -> Self {
            Aligned {
                text: "default".to_owned(),
                items: vec![1, 2, 3],
                wide: u128::MAX,
            }
        }
    }

    impl Fields for Aligned {
        fn decode_field(&mut self, r: &mut XmlReader<'_>, name: &str) -> Result<bool, DecodeError> {
            match name {
                "text" => r.read(&mut self.text)?,
                "item" => r.read_push(&mut self.items)?,
                _ => return Ok(false),
            }
            Ok(true)
        }
        fn encode_fields(&self, _w: &mut XmlWriter) {}
    }

    impl SchemaType for Aligned {
        const TYPE_NAME: &'static str = "Aligned";
    }

    impl Structure for Aligned {}

    /// A zero-sized structure.
    #[derive(Debug, Clone, Default, PartialEq)]
    struct Empty;

    impl Fields for Empty {
        fn decode_field(&mut self, _: &mut XmlReader<'_>, _: &str) -> Result<bool, DecodeError> {
            Ok(false)
        }
        fn encode_fields(&self, _w: &mut XmlWriter) {}
    }

    impl SchemaType for Empty {
        const TYPE_NAME: &'static str = "Empty";
    }

    impl Structure for Empty {}

    fn decode_boxed<T: Decode>(xml: &str) -> Result<Box<T>, DecodeError> {
        let mut r = XmlReader::new(xml.as_bytes(), &crate::generated::REGISTRY);
        r.root().unwrap();
        T::decode_boxed(&mut r)
    }

    #[test]
    fn a_boxed_structure_decodes_over_its_default_and_frees_like_a_box() {
        let mut boxed =
            decode_boxed::<Aligned>("<a><item>4</item><text>read</text><other/></a>").unwrap();
        assert_eq!(
            *boxed,
            Aligned {
                text: "read".to_owned(),
                items: vec![1, 2, 3, 4],
                wide: u128::MAX,
            }
        );
        assert_eq!(
            std::ptr::from_ref(&*boxed).addr() % std::mem::align_of::<Aligned>(),
            0
        );
        boxed.text.push_str(" and more");
        boxed.items.extend(0..1000);
        drop(boxed);
        // An error half-way drops the half-decoded box (its text already read).
        let error = decode_boxed::<Aligned>("<a><text>read</text><item>x</item></a>").unwrap_err();
        assert_eq!(error.kind(), DecodeErrorKind::InvalidValue, "{error}");
        assert_eq!(*decode_boxed::<Empty>("<e><x/></e>").unwrap(), Empty);
        assert_eq!(*decode_boxed::<i32>("<n>7</n>").unwrap(), 7);
    }

    #[test]
    fn structures_with_repeated_fields_and_typed_arrays_clone_to_equal_values() {
        use crate::types::{
            AnyVirtualMachineDeviceRuntimeInfoDeviceRuntimeState, VirtualMachineDeviceRuntimeInfo,
            VirtualMachineDeviceRuntimeInfoVirtualEthernetCardRuntimeState,
            VirtualMachineRuntimeInfo,
        };
        use crate::Value;
        let card = VirtualMachineDeviceRuntimeInfoVirtualEthernetCardRuntimeState {
            vm_direct_path_gen2_inactive_reason_other: vec!["a".to_owned(), "b".to_owned()],
            ..Default::default()
        };
        let devices: Vec<VirtualMachineDeviceRuntimeInfo> = (0..3)
            .map(|key| VirtualMachineDeviceRuntimeInfo {
                runtime_state: card.clone().into(),
                key,
            })
            .collect();
        let info = VirtualMachineRuntimeInfo {
            device: devices.clone(),
            ..Default::default()
        };
        let copy = info.clone();
        assert_eq!(copy, info);
        assert_eq!(copy.device.capacity(), 3);
        assert!(matches!(
            &copy.device[2].runtime_state,
            AnyVirtualMachineDeviceRuntimeInfoDeviceRuntimeState::VirtualMachineDeviceRuntimeInfoVirtualEthernetCardRuntimeState(state)
                if state.vm_direct_path_gen2_inactive_reason_other == ["a", "b"]
        ));
        let array = Value::object(devices);
        assert_eq!(array.clone(), array);
        assert_eq!(
            array
                .clone()
                .downcast_ref::<Vec<VirtualMachineDeviceRuntimeInfo>>()
                .map(Vec::len),
            Some(3)
        );
        // A structure held as an object copies to the same structure.
        let object = Value::object(info.clone());
        let copy = object.clone();
        assert_eq!(copy, object);
        assert_eq!(
            copy.downcast_ref::<VirtualMachineRuntimeInfo>(),
            Some(&info)
        );
        assert_ne!(Value::object(VirtualMachineRuntimeInfo::default()), object);
    }
}
