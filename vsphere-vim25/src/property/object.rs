//! [`ManagedObject`]: what the property API needs of a generated managed
//! object struct beyond [`ManagedObjectType`]: to be made for a reference.

use crate::types::ManagedObjectReference;
use crate::xml::{ManagedObjectType, RetrievedPaths};

/// A generated managed object struct (`mo::VirtualMachine`, `mo::HostSystem`,
/// ...) that typed retrievals can fill: implemented for every managed object
/// type of the bindings.
pub trait ManagedObject: ManagedObjectType {
    /// Sets the reference the properties belong to.
    fn set_mo_ref(&mut self, mo_ref: ManagedObjectReference);

    /// The property paths the server sent values for.
    fn retrieved(&self) -> &RetrievedPaths;

    /// What [`retrieved`](Self::retrieved) says, changed.
    fn retrieved_mut(&mut self) -> &mut RetrievedPaths;

    /// An object with no property retrieved yet.
    fn for_reference(mo_ref: ManagedObjectReference) -> Self {
        let mut object = Self::default();
        object.set_mo_ref(mo_ref);
        object
    }
}
