//! `wsdl/managed-objects.json`: managed objects and their properties, which
//! the WSDL does not describe (extracted from pyvmomi's type info).

use std::path::Path;

use serde::Deserialize;

use crate::error::{Error, Result};

/// The file.
#[derive(Debug, Deserialize)]
pub struct ManagedObjectsFile {
    /// Where it was extracted from.
    pub source: String,
    /// The API version it was filtered to.
    pub api_version: String,
    pub managed_objects: Vec<ManagedObjectEntry>,
}

/// One managed object type.
#[derive(Debug, Deserialize)]
pub struct ManagedObjectEntry {
    pub name: String,
    pub base: Option<String>,
    pub properties: Vec<PropertyEntry>,
    #[serde(default)]
    pub methods: Vec<String>,
}

/// One property.
#[derive(Debug, Deserialize)]
pub struct PropertyEntry {
    pub name: String,
    /// A WSDL type name or an xsd primitive name.
    #[serde(rename = "type")]
    pub type_name: String,
    pub array: bool,
    pub optional: bool,
    /// For a `ManagedObjectReference`: the type referred to.
    #[serde(default)]
    pub mo_type: Option<String>,
}

/// Reads and parses the file.
pub fn read(path: &Path) -> Result<ManagedObjectsFile> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| Error::new(format!("cannot read {}: {e}", path.display())))?;
    serde_json::from_str(&text).map_err(|e| Error::new(format!("{}: {e}", path.display())))
}
