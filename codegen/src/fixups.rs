//! Stage 3: named fixups, one function per schema quirk.
//!
//! Each fixup checks that the pattern it handles is still there and fails
//! otherwise, so a fixup that a new bundle made unnecessary does not linger.

use crate::bail;
use crate::error::Result;
use crate::model::{Model, TypeRef};
use crate::parse::{RawBundle, RawContent};

/// Fixups on the documents, before normalisation.
pub fn apply_raw(bundle: &mut RawBundle) -> Result<()> {
    managed_object_reference_is_builtin(bundle)?;
    Ok(())
}

/// Fixups and structural checks on the model.
pub fn apply_model(model: &mut Model, bundle: &RawBundle) -> Result<()> {
    fault_elements_are_named_type_plus_fault(bundle)?;
    primitive_arrays_are_value_variants(model)?;
    Ok(())
}

/// `ManagedObjectReference` is the schema's only simple-content type (an
/// `xsd:string` with a `type` attribute). The runtime implements it by hand
/// (`xml::ManagedObjectReference`); the generator drops the definition and
/// resolves every reference to it as a built-in.
fn managed_object_reference_is_builtin(bundle: &mut RawBundle) -> Result<()> {
    let position = bundle
        .complex_types
        .iter()
        .position(|t| t.name == "ManagedObjectReference");
    let Some(position) = position else {
        bail!("fixup managed_object_reference_is_builtin: ManagedObjectReference is gone");
    };
    match &bundle.complex_types[position].content {
        RawContent::SimpleContent { base, attributes }
            if base.is_xsd()
                && base.local == "string"
                && attributes.len() == 1
                && attributes[0].0 == "type"
                && attributes[0].1.is_xsd()
                && attributes[0].1.local == "string" => {}
        other => bail!(
            "fixup managed_object_reference_is_builtin: ManagedObjectReference changed shape: {other:?}"
        ),
    }
    bundle.complex_types.remove(position);
    Ok(())
}

/// The SOAP runtime types a fault's `<detail>` child that lacks `xsi:type` by
/// its element name minus `Fault` (`InvalidLoginFault` -> `InvalidLogin`).
/// That holds when every fault element of the WSDL is named that way.
fn fault_elements_are_named_type_plus_fault(bundle: &RawBundle) -> Result<()> {
    let mut checked = 0;
    for el in &bundle.elements {
        let Some(ty) = &el.type_name else { continue };
        if el.name.ends_with("Fault") && !el.name.ends_with("Response") && el.name != ty.local {
            if el.name != format!("{}Fault", ty.local) {
                bail!(
                    "fixup fault_elements_are_named_type_plus_fault: element {} has type {}",
                    el.name,
                    ty.local
                );
            }
            checked += 1;
        }
    }
    if checked == 0 {
        bail!("fixup fault_elements_are_named_type_plus_fault: no fault elements found");
    }
    Ok(())
}

/// Arrays of primitives (`ArrayOfString`, `ArrayOfInt`, ...) and of
/// `ManagedObjectReference` are variants of the hand-written `xml::Value`;
/// the set it handles must cover the schema's.
fn primitive_arrays_are_value_variants(model: &Model) -> Result<()> {
    // Keep in sync with `PRIMITIVE_ARRAY_ITEMS` in vsphere-vim25/src/xml/value.rs.
    const VALUE_ARRAYS: &[&str] = &[
        "ArrayOfAnyType",
        "ArrayOfAnyURI",
        "ArrayOfBase64Binary",
        "ArrayOfBoolean",
        "ArrayOfByte",
        "ArrayOfDateTime",
        "ArrayOfDouble",
        "ArrayOfFloat",
        "ArrayOfInt",
        "ArrayOfLong",
        "ArrayOfManagedObjectReference",
        "ArrayOfShort",
        "ArrayOfString",
        "ArrayOfUri",
    ];
    let mut found = 0;
    for array in model.arrays.values() {
        let builtin = matches!(
            array.item,
            TypeRef::Primitive(_) | TypeRef::AnyType | TypeRef::Mor
        );
        if builtin {
            if !VALUE_ARRAYS.contains(&array.name.as_str()) {
                bail!(
                    "fixup primitive_arrays_are_value_variants: {} (of {}) has no Value variant",
                    array.name,
                    array.item.xml_name()
                );
            }
            found += 1;
        }
    }
    if found == 0 {
        bail!("fixup primitive_arrays_are_value_variants: no primitive arrays in the schema");
    }
    Ok(())
}
