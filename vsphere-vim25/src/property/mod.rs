//! What typed property retrieval needs of the generated managed objects and
//! property paths; the retrieval itself is vsphere-client's `property` module.

mod object;
mod path;

pub use object::ManagedObject;
pub use path::{AsPropertyPath, PropertyPath};
