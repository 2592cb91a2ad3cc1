//! `ManagedObjectReference`, the one simple-content type of the schema.

use std::fmt;

use super::reader::XmlReader;
use super::{Decode, DecodeError, Encode, XmlWriter};

/// A reference to a server-side managed object: `<obj type="VirtualMachine">vm-42</obj>`.
///
/// Shown as `VirtualMachine:vm-42` by both `Display` and `Debug`.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct ManagedObjectReference {
    /// The managed object type (`VirtualMachine`), the XML `type` attribute.
    pub type_: String,
    /// The server's identifier (`vm-42`), the element text.
    pub value: String,
}

impl ManagedObjectReference {
    /// A reference to the object `value` of type `type_`.
    pub fn new(type_: impl Into<String>, value: impl Into<String>) -> Self {
        ManagedObjectReference {
            type_: type_.into(),
            value: value.into(),
        }
    }
}

impl fmt::Display for ManagedObjectReference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.type_, self.value)
    }
}

impl fmt::Debug for ManagedObjectReference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl Decode for ManagedObjectReference {
    fn decode(r: &mut XmlReader<'_>) -> Result<Self, DecodeError> {
        let type_ = r.type_attribute().unwrap_or_default().to_string();
        let value = r.read_text()?.trim().to_string();
        Ok(ManagedObjectReference { type_, value })
    }
}

impl Encode for ManagedObjectReference {
    fn encode_as(&self, w: &mut XmlWriter, tag: &str, xsi_type: Option<&str>) {
        w.start_with_attribute(tag, xsi_type, Some(("type", &self.type_)));
        w.text(&self.value);
        w.end(tag);
    }
}
