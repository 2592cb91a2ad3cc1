//! Typed handles to inventory objects, as the [`Finder`](super::Finder)
//! returns them: each knows its inventory path, name and reference, and is
//! of the managed object type its name says (checked when it is made).
//! The lifecycle calls take them where they take a reference
//! (`CloneSpec::new(&folder).pool(&pool)`), through
//! `From<&Handle> for ManagedObjectReference`.

use std::fmt;

use super::InventoryObject;
use crate::error::{Error, ErrorKind};
use crate::types::ManagedObjectReference;

macro_rules! handle {
    ($(#[$doc:meta])* $name:ident, $what:literal, [$($type_name:literal),+]) => {
        $(#[$doc])*
        #[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub struct $name {
            object: InventoryObject,
        }

        impl $name {
            /// The managed object types this handle stands for.
            pub const TYPE_NAMES: &'static [&'static str] = &[$($type_name),+];

            /// The inventory path (`/DC0/datastore/LocalDS_0`; a `/` inside a
            /// name is `%2f`).
            pub fn path(&self) -> &str {
                &self.object.path
            }

            /// The object's name.
            pub fn name(&self) -> &str {
                &self.object.name
            }

            /// The managed object reference.
            pub fn reference(&self) -> &ManagedObjectReference {
                &self.object.reference
            }

            /// The path, name and reference as an untyped record.
            pub fn into_object(self) -> InventoryObject {
                self.object
            }
        }

        impl TryFrom<InventoryObject> for $name {
            type Error = Error;

            /// The handle, when the object is of the handle's type;
            /// [`ErrorKind::InvalidArgument`] naming the object otherwise.
            fn try_from(object: InventoryObject) -> Result<Self, Error> {
                if Self::TYPE_NAMES.contains(&object.type_name()) {
                    Ok($name { object })
                } else {
                    Err(Error::new(
                        ErrorKind::InvalidArgument,
                        format!(
                            "{} is a {}, not a {}",
                            object.path,
                            object.type_name(),
                            $what
                        ),
                    ))
                }
            }
        }

        impl From<&$name> for ManagedObjectReference {
            fn from(handle: &$name) -> Self {
                handle.object.reference.clone()
            }
        }

        impl From<$name> for ManagedObjectReference {
            fn from(handle: $name) -> Self {
                handle.object.reference
            }
        }

        /// `Datastore("/DC0/datastore/LocalDS_0", datastore-12)`.
        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.debug_tuple(stringify!($name))
                    .field(&self.object.path)
                    .field(&format_args!("{}", self.object.reference.value))
                    .finish()
            }
        }

        /// The inventory path.
        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.object.path)
            }
        }
    };
}

handle!(
    /// A datacenter: [`Finder::datacenter`](super::Finder::datacenter),
    /// [`Finder::default_datacenter`](super::Finder::default_datacenter).
    Datacenter,
    "datacenter",
    ["Datacenter"]
);
handle!(
    /// A folder (of VMs, hosts, datastores, networks or datacenters):
    /// [`Finder::folder`](super::Finder::folder),
    /// [`Finder::default_folder`](super::Finder::default_folder) (the
    /// datacenter's VM folder).
    Folder,
    "folder",
    ["Folder"]
);
handle!(
    /// A resource pool or vApp: [`Finder::resource_pool`](super::Finder::resource_pool),
    /// [`Finder::default_resource_pool`](super::Finder::default_resource_pool).
    ResourcePool,
    "resource pool",
    ["ResourcePool", "VirtualApp"]
);
handle!(
    /// A datastore: [`Finder::datastore`](super::Finder::datastore),
    /// [`Finder::default_datastore`](super::Finder::default_datastore).
    Datastore,
    "datastore",
    ["Datastore"]
);
handle!(
    /// A host: [`Finder::host`](super::Finder::host),
    /// [`Finder::default_host`](super::Finder::default_host).
    HostSystem,
    "host",
    ["HostSystem"]
);

/// A network a NIC can attach to, with what its backing needs:
/// [`Finder::network`](super::Finder::network),
/// [`Finder::default_network`](super::Finder::default_network),
/// [`Finder::networks`](super::Finder::networks); `ConfigSpec::nic` takes it.
#[derive(Clone, PartialEq, Eq)]
pub struct Network {
    object: InventoryObject,
    kind: NetworkKind,
}

impl Network {
    /// The managed object types a network is.
    pub const TYPE_NAMES: &'static [&'static str] =
        &["Network", "DistributedVirtualPortgroup", "OpaqueNetwork"];

    /// A network handle from its record and kind. [`ErrorKind::InvalidArgument`]
    /// when the object is not a network or the kind not its type's (a
    /// distributed kind for a `DistributedVirtualPortgroup`, opaque for an
    /// `OpaqueNetwork`, standard for a `Network`).
    pub fn new(object: InventoryObject, kind: NetworkKind) -> Result<Network, Error> {
        let expected = match object.type_name() {
            "Network" => matches!(kind, NetworkKind::Standard),
            "DistributedVirtualPortgroup" => matches!(kind, NetworkKind::Distributed { .. }),
            "OpaqueNetwork" => matches!(kind, NetworkKind::Opaque),
            other => {
                return Err(Error::new(
                    ErrorKind::InvalidArgument,
                    format!("{} is a {other}, not a network", object.path),
                ))
            }
        };
        if !expected {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                format!(
                    "{} is a {}: {kind:?} is not its kind",
                    object.path,
                    object.type_name()
                ),
            ));
        }
        Ok(Network { object, kind })
    }

    /// The inventory path (`/DC0/network/VM Network`).
    pub fn path(&self) -> &str {
        &self.object.path
    }

    /// The port group's name.
    pub fn name(&self) -> &str {
        &self.object.name
    }

    /// The `Network`, `DistributedVirtualPortgroup` or `OpaqueNetwork`.
    pub fn reference(&self) -> &ManagedObjectReference {
        &self.object.reference
    }

    /// Standard, distributed (with port group key and switch UUID) or opaque.
    pub fn kind(&self) -> &NetworkKind {
        &self.kind
    }

    /// The path, name and reference as an untyped record.
    pub fn into_object(self) -> InventoryObject {
        self.object
    }
}

impl From<&Network> for ManagedObjectReference {
    fn from(handle: &Network) -> Self {
        handle.object.reference.clone()
    }
}

impl From<Network> for ManagedObjectReference {
    fn from(handle: Network) -> Self {
        handle.object.reference
    }
}

/// `Network("/DC0/network/DC0_DVPG0", dvportgroup-11, Distributed { .. })`.
impl fmt::Debug for Network {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Network")
            .field(&self.object.path)
            .field(&format_args!("{}", self.object.reference.value))
            .field(&self.kind)
            .finish()
    }
}

/// The inventory path.
impl fmt::Display for Network {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.object.path)
    }
}

/// What kind of network, with what a NIC backing needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NetworkKind {
    /// A standard switch port group (`Network`): backed by name.
    Standard,
    /// A distributed port group: backed by switch UUID and port group key.
    Distributed {
        /// The port group's key (`dvportgroup-12`).
        portgroup_key: String,
        /// The distributed switch.
        switch: Option<ManagedObjectReference>,
        /// The switch's UUID.
        switch_uuid: String,
    },
    /// An NSX opaque network.
    Opaque,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn object(path: &str, type_: &str, value: &str) -> InventoryObject {
        InventoryObject {
            path: path.to_string(),
            name: path.rsplit('/').next().unwrap_or_default().to_string(),
            reference: ManagedObjectReference {
                type_: type_.to_string(),
                value: value.to_string(),
            },
        }
    }

    #[test]
    fn a_handle_is_of_its_type() {
        let ds = Datastore::try_from(object("/DC0/datastore/LocalDS_0", "Datastore", "ds-1"))
            .expect("a datastore");
        assert_eq!(ds.name(), "LocalDS_0");
        assert_eq!(ds.to_string(), "/DC0/datastore/LocalDS_0");
        assert_eq!(
            format!("{ds:?}"),
            r#"Datastore("/DC0/datastore/LocalDS_0", ds-1)"#
        );
        assert_eq!(ManagedObjectReference::from(&ds).value, "ds-1");

        let err =
            Folder::try_from(object("/DC0/datastore/LocalDS_0", "Datastore", "ds-1")).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidArgument);
        assert_eq!(
            err.to_string(),
            "/DC0/datastore/LocalDS_0 is a Datastore, not a folder"
        );
        // A vApp is a resource pool.
        assert!(ResourcePool::try_from(object(
            "/DC0/host/C0/Resources/app",
            "VirtualApp",
            "vapp-1"
        ))
        .is_ok());
    }

    #[test]
    fn a_network_kind_matches_its_type() {
        let pg = object(
            "/DC0/network/DVPG0",
            "DistributedVirtualPortgroup",
            "dvportgroup-9",
        );
        assert!(Network::new(pg.clone(), NetworkKind::Standard).is_err());
        let net = Network::new(
            pg,
            NetworkKind::Distributed {
                portgroup_key: "dvportgroup-9".into(),
                switch: None,
                switch_uuid: "50 2a".into(),
            },
        )
        .expect("a distributed port group");
        assert!(matches!(net.kind(), NetworkKind::Distributed { .. }));
        assert!(Network::new(
            object("/DC0/vm/x", "VirtualMachine", "vm-1"),
            NetworkKind::Standard
        )
        .is_err());
    }
}
