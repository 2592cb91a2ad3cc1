//! Property paths: typed ones from [`paths`](crate::paths), checked by the
//! compiler, and strings, checked when a query is built.

use std::fmt;
use std::marker::PhantomData;

/// A property path of managed object type `M` (`runtime.powerState` of a
/// `mo::VirtualMachine`), made by the generated [`paths`](crate::paths):
/// `paths::VirtualMachine.runtime().power_state()`. Only paths the bindings
/// know can be made, so a typed path never fails validation; it is a
/// string underneath ([`as_str`](Self::as_str)).
pub struct PropertyPath<M> {
    path: String,
    _object: PhantomData<fn() -> M>,
}

impl<M> PropertyPath<M> {
    /// A top-level property (generated code only).
    #[doc(hidden)]
    #[inline]
    pub fn new(property: &'static str) -> Self {
        PropertyPath {
            path: property.to_string(),
            _object: PhantomData,
        }
    }

    /// This path followed by `segment` (generated code only).
    #[doc(hidden)]
    #[inline]
    pub fn join(mut self, segment: &'static str) -> Self {
        self.path.push('.');
        self.path.push_str(segment);
        self
    }

    /// The path as vim25 spells it: `runtime.powerState`.
    pub fn as_str(&self) -> &str {
        &self.path
    }
}

// By hand: derives would ask `M: Clone`, `M: PartialEq`... of the managed object.
impl<M> Clone for PropertyPath<M> {
    fn clone(&self) -> Self {
        PropertyPath {
            path: self.path.clone(),
            _object: PhantomData,
        }
    }
}

impl<M> PartialEq for PropertyPath<M> {
    fn eq(&self, other: &Self) -> bool {
        self.path == other.path
    }
}

impl<M> Eq for PropertyPath<M> {}

impl<M> fmt::Debug for PropertyPath<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.path, f)
    }
}

impl<M> fmt::Display for PropertyPath<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.path)
    }
}

impl<M> AsRef<str> for PropertyPath<M> {
    fn as_ref(&self) -> &str {
        &self.path
    }
}

/// What `Client::properties` (vsphere-client) takes as a path of
/// managed object type `M`: a typed [`PropertyPath<M>`] (a path of another
/// managed object type does not compile), or a string (`&str`, `String`),
/// checked against the bindings when the query is built.
pub trait AsPropertyPath<M> {
    /// The path as vim25 spells it.
    fn as_property_path(&self) -> &str;
}

impl<M> AsPropertyPath<M> for PropertyPath<M> {
    fn as_property_path(&self) -> &str {
        &self.path
    }
}

impl<M> AsPropertyPath<M> for &PropertyPath<M> {
    fn as_property_path(&self) -> &str {
        &self.path
    }
}

impl<M> AsPropertyPath<M> for &str {
    fn as_property_path(&self) -> &str {
        self
    }
}

impl<M> AsPropertyPath<M> for String {
    fn as_property_path(&self) -> &str {
        self
    }
}

impl<M> AsPropertyPath<M> for &String {
    fn as_property_path(&self) -> &str {
        self
    }
}
