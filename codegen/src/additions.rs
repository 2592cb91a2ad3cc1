//! `wsdl/additions.json`: what vim25 gained after the base bundle (7.0.3.0),
//! extracted from pyvmomi's type info by `wsdl/extract-pyvmomi`: new data
//! objects, faults, enumerations and operations, and new fields, values,
//! parameters, managed objects, properties and methods of existing ones,
//! each with the API version that added it.
//!
//! [`crate::normalize`] merges it into the model: a new field goes where
//! pyvmomi lists it (after the field named by `after`), which is the
//! schema's sequence order (the extractor checks that pyvmomi's order is the
//! bundle's for every type the bundle has).

use std::path::Path;

use serde::Deserialize;

use crate::error::{Error, Result};

/// The file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AdditionsFile {
    /// Where it was extracted from.
    pub source: String,
    /// The API version of the bundle the additions extend.
    pub base_api_version: String,
    /// The newest API version the additions reach.
    pub api_version: String,
    /// New complex types, and new fields of existing ones.
    pub types: Vec<TypeEntry>,
    /// `ArrayOf*` types of new item types.
    pub arrays: Vec<String>,
    /// New enumerations, and new values of existing ones.
    pub enums: Vec<EnumEntry>,
    /// New operations, and new parameters of existing ones.
    pub operations: Vec<OperationEntry>,
    /// New managed objects, and new properties and methods of existing ones.
    pub managed_objects: Vec<ManagedObjectEntry>,
}

/// A complex type: new (`since` set, every field, `base` set) or extended
/// (`since` null, only the new fields, each with `after`).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TypeEntry {
    pub name: String,
    #[serde(default)]
    pub base: Option<String>,
    pub since: Option<String>,
    pub fields: Vec<FieldEntry>,
}

/// A field or an operation parameter.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FieldEntry {
    pub name: String,
    /// A WSDL type name or an xsd primitive name.
    #[serde(rename = "type")]
    pub type_name: String,
    pub array: bool,
    pub optional: bool,
    pub since: Option<String>,
    /// In an existing type or operation: the field it follows (`None`: first).
    #[serde(default)]
    pub after: Option<String>,
}

/// An enumeration: new (`since` set) or extended (`since` null, new values
/// with `after`).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EnumEntry {
    pub name: String,
    pub since: Option<String>,
    pub values: Vec<ValueEntry>,
}

/// An enumeration value.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ValueEntry {
    pub name: String,
    pub since: Option<String>,
    #[serde(default)]
    pub after: Option<String>,
}

/// An operation: new (`since` set, every parameter, `returns`, `faults`) or
/// extended (`since` null, new parameters with `after`).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OperationEntry {
    pub name: String,
    pub since: Option<String>,
    pub params: Vec<FieldEntry>,
    #[serde(default)]
    pub returns: Option<ReturnsEntry>,
    #[serde(default)]
    pub faults: Vec<String>,
}

/// What a new operation returns.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReturnsEntry {
    #[serde(rename = "type")]
    pub type_name: String,
    pub array: bool,
    pub optional: bool,
}

/// A managed object: new (`since` set, `base`) or extended.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ManagedObjectEntry {
    pub name: String,
    #[serde(default)]
    pub base: Option<String>,
    pub since: Option<String>,
    pub properties: Vec<PropertyEntry>,
    pub methods: Vec<String>,
}

/// A managed object property.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PropertyEntry {
    pub name: String,
    #[serde(rename = "type")]
    pub type_name: String,
    #[serde(default)]
    pub mo_type: Option<String>,
    pub array: bool,
    pub optional: bool,
    pub since: Option<String>,
}

/// Reads and parses the file.
pub fn read(path: &Path) -> Result<AdditionsFile> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| Error::new(format!("cannot read {}: {e}", path.display())))?;
    serde_json::from_str(&text).map_err(|e| Error::new(format!("{}: {e}", path.display())))
}
