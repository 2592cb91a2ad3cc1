//! The VM lifecycle: clone (from a template or a VM, full or linked, with a
//! config spec, an instance UUID, and disks copied thin or thick), reconfigure, power, guest shutdown,
//! destroy, wait for an IP address, mark as template; snapshots in
//! [`snapshot`].
//!
//! ```no_run
//! # async fn demo(client: vsphere_client::Client) -> Result<(), vsphere_client::Error> {
//! use vsphere_client::vm::{CloneSpec, ConfigSpec, DiskProvisioning, Firmware};
//! let finder = client.finder().in_datacenter("DC0");
//! let template = client.vm(finder.virtual_machine("ubuntu-22.04").await?.reference);
//! let folder = finder.default_folder().await?; // /DC0/vm
//! let pool = finder.default_resource_pool().await?; // the only cluster's or host's
//! let network = finder.network("VM Network").await?;
//! let config = ConfigSpec::new()
//!     .cpus(4)
//!     .memory_mb(8192)
//!     .grow_disk(0, 40 * 1024 * 1024)
//!     .add_disk(100 * 1024 * 1024, DiskProvisioning::Thin, None)
//!     .nic(network)
//!     .firmware(Firmware::Efi { secure_boot: true })
//!     .vtpm()
//!     .guestinfo("userdata", "I2Nsb3VkLWNvbmZpZwo=")
//!     .guestinfo("userdata.encoding", "base64");
//! let spec = CloneSpec::new(&folder)
//!     .pool(&pool)
//!     .config(config)
//!     .instance_uuid("5a0d3c18-8e4f-4c1b-9d2a-3f7e6b5c4d3e")
//!     .disk_provisioning(0, DiskProvisioning::EagerZeroedThick)
//!     .power_on();
//! let vm = template.clone_vm("web-1", &spec).await?;
//! let ip = vm.wait_for_ip(std::time::Duration::from_secs(600)).await?;
//! # Ok(()) }
//! ```

use std::time::Duration;

pub mod snapshot;

use crate::error::{Error, ErrorKind};
use crate::inventory::{Network, NetworkKind};
use crate::mo;
use crate::task::{task_result_reference, Task};
use crate::types::{
    AnyOptionValue, AnyVirtualDevice, AnyVirtualDeviceBackingInfo, AnyVirtualDeviceConfigSpec,
    DistributedVirtualSwitchPortConnection, ManagedObjectReference, OptionValue, VirtualDevice,
    VirtualDeviceConfigSpec, VirtualDeviceConfigSpecFileOperation,
    VirtualDeviceConfigSpecOperation, VirtualDeviceConnectInfo, VirtualDeviceDeviceBackingInfo,
    VirtualDeviceFileBackingInfo, VirtualDisk, VirtualDiskFlatVer2BackingInfo, VirtualE1000e,
    VirtualEthernetCard, VirtualEthernetCardDistributedVirtualPortBackingInfo,
    VirtualEthernetCardNetworkBackingInfo, VirtualMachineBootOptions, VirtualMachineCloneSpec,
    VirtualMachineConfigSpec, VirtualMachinePowerState, VirtualMachineRelocateSpec,
    VirtualMachineRelocateSpecDiskLocator, VirtualSCSIController, VirtualTPM, VirtualVmxnet,
    VirtualVmxnet3,
};
use crate::xml::Value;
use crate::Client;

/// A virtual machine (or template) to act on.
#[derive(Clone)]
pub struct VirtualMachine {
    client: Client,
    reference: ManagedObjectReference,
}

impl std::fmt::Debug for VirtualMachine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("VirtualMachine")
            .field(&self.reference)
            .finish()
    }
}

impl Client {
    /// The VM `reference`.
    pub fn vm(&self, reference: ManagedObjectReference) -> VirtualMachine {
        VirtualMachine {
            client: self.clone(),
            reference,
        }
    }
}

/// Firmware of a VM.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Firmware {
    /// Legacy BIOS.
    Bios,
    /// UEFI, with or without secure boot.
    Efi {
        /// Secure boot enabled.
        secure_boot: bool,
    },
}

/// How a new disk's blocks are allocated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DiskProvisioning {
    /// Allocated as written.
    #[default]
    Thin,
    /// Allocated at creation, zeroed on first write (lazy zeroed).
    Thick,
    /// Allocated and zeroed at creation (needed by fault tolerance, clustering).
    EagerZeroedThick,
}

/// Where a new disk goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiskPlacement {
    /// The datastore's name (the disk file goes to `[name]`).
    pub datastore_name: String,
    /// The datastore.
    pub datastore: ManagedObjectReference,
}

/// A change to the VM's disks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DiskChange {
    /// Grow the `index`-th disk (in device order) to `capacity_kb`. Disks
    /// never shrink: a smaller size is an error, the same size no change.
    Grow {
        /// Which disk (0: the first).
        index: usize,
        /// The new size in KiB.
        capacity_kb: i64,
    },
    /// Add a disk on the first disk's controller (or the first SCSI controller).
    Add {
        /// The size in KiB.
        capacity_kb: i64,
        /// Thin, thick or eager-zeroed.
        provisioning: DiskProvisioning,
        /// Another datastore than the VM's.
        placement: Option<DiskPlacement>,
    },
}

/// The NIC model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum NicAdapter {
    /// VMXNET3 (paravirtual; what templates with VMware tools want).
    #[default]
    Vmxnet3,
    /// E1000e (emulated; works without drivers).
    E1000e,
}

/// A NIC to add.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NicSpec {
    /// The port group (standard, distributed or opaque).
    pub network: Network,
    /// The adapter model.
    pub adapter: NicAdapter,
    /// A fixed MAC address (`00:50:56:..`); generated when `None`.
    pub mac_address: Option<String>,
}

/// What to change in a VM's configuration, as a clone's or a reconfigure's
/// config spec. Everything left `None`/empty stays as it is.
///
/// Device changes are computed against the VM's current devices (read in
/// the same call that starts the operation): which disk to grow, which
/// controller and unit a new disk gets, which NICs to replace.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConfigSpec {
    /// Virtual CPUs.
    pub cpus: Option<i32>,
    /// Cores per socket.
    pub cores_per_socket: Option<i32>,
    /// Memory in MiB.
    pub memory_mb: Option<i64>,
    /// CPU hot add.
    pub cpu_hot_add: Option<bool>,
    /// Memory hot add.
    pub memory_hot_add: Option<bool>,
    /// Firmware and secure boot.
    pub firmware: Option<Firmware>,
    /// Add a virtual TPM (needs EFI firmware) unless the VM has one.
    pub vtpm: bool,
    /// Disks grown or added.
    pub disks: Vec<DiskChange>,
    /// Remove the VM's existing NICs first (a template's NIC on the wrong network).
    pub replace_nics: bool,
    /// NICs to add.
    pub nics: Vec<NicSpec>,
    /// `extraConfig` keys (`guestinfo.*` among them).
    pub extra_config: Vec<(String, String)>,
    /// The annotation (notes).
    pub annotation: Option<String>,
    /// The instance UUID (vCenter's unique id of the VM).
    pub instance_uuid: Option<String>,
}

impl ConfigSpec {
    /// An empty change.
    pub fn new() -> Self {
        Self::default()
    }
    /// Sets the number of virtual CPUs.
    pub fn cpus(mut self, cpus: i32) -> Self {
        self.cpus = Some(cpus);
        self
    }
    /// Sets cores per socket.
    pub fn cores_per_socket(mut self, cores: i32) -> Self {
        self.cores_per_socket = Some(cores);
        self
    }
    /// Sets the memory in MiB.
    pub fn memory_mb(mut self, memory_mb: i64) -> Self {
        self.memory_mb = Some(memory_mb);
        self
    }
    /// Enables or disables CPU hot add.
    pub fn cpu_hot_add(mut self, enabled: bool) -> Self {
        self.cpu_hot_add = Some(enabled);
        self
    }
    /// Enables or disables memory hot add.
    pub fn memory_hot_add(mut self, enabled: bool) -> Self {
        self.memory_hot_add = Some(enabled);
        self
    }
    /// Sets the firmware.
    pub fn firmware(mut self, firmware: Firmware) -> Self {
        self.firmware = Some(firmware);
        self
    }
    /// Adds a virtual TPM.
    pub fn vtpm(mut self) -> Self {
        self.vtpm = true;
        self
    }
    /// Grows the `index`-th disk to `capacity_kb` KiB.
    pub fn grow_disk(mut self, index: usize, capacity_kb: i64) -> Self {
        self.disks.push(DiskChange::Grow { index, capacity_kb });
        self
    }
    /// Adds a disk of `capacity_kb` KiB.
    pub fn add_disk(
        mut self,
        capacity_kb: i64,
        provisioning: DiskProvisioning,
        placement: Option<DiskPlacement>,
    ) -> Self {
        self.disks.push(DiskChange::Add {
            capacity_kb,
            provisioning,
            placement,
        });
        self
    }
    /// Removes the existing NICs before adding the new ones.
    pub fn replace_nics(mut self) -> Self {
        self.replace_nics = true;
        self
    }
    /// Adds a VMXNET3 NIC on `network`.
    pub fn nic(mut self, network: Network) -> Self {
        self.nics.push(NicSpec {
            network,
            adapter: NicAdapter::Vmxnet3,
            mac_address: None,
        });
        self
    }
    /// Adds a NIC as described.
    pub fn nic_spec(mut self, nic: NicSpec) -> Self {
        self.nics.push(nic);
        self
    }
    /// Sets an `extraConfig` key.
    pub fn extra_config(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.extra_config.push((key.into(), value.into()));
        self
    }
    /// Sets `guestinfo.<key>` (what cloud-init's VMware datasource reads).
    pub fn guestinfo(self, key: &str, value: impl Into<String>) -> Self {
        let key = key.strip_prefix("guestinfo.").unwrap_or(key);
        self.extra_config(format!("guestinfo.{key}"), value)
    }
    /// Sets the annotation.
    pub fn annotation(mut self, text: impl Into<String>) -> Self {
        self.annotation = Some(text.into());
        self
    }
    /// Sets the instance UUID.
    pub fn instance_uuid(mut self, uuid: impl Into<String>) -> Self {
        self.instance_uuid = Some(uuid.into());
        self
    }

    /// The vSphere config spec for a VM whose devices are `devices`.
    pub fn to_vim(&self, devices: &[AnyVirtualDevice]) -> Result<VirtualMachineConfigSpec, Error> {
        let mut spec = VirtualMachineConfigSpec {
            num_cpus: self.cpus,
            num_cores_per_socket: self.cores_per_socket,
            memory_mb: self.memory_mb,
            cpu_hot_add_enabled: self.cpu_hot_add,
            memory_hot_add_enabled: self.memory_hot_add,
            annotation: self.annotation.clone(),
            instance_uuid: self.instance_uuid.clone(),
            ..Default::default()
        };
        if let Some(cpus) = self.cpus {
            if cpus < 1 {
                return Err(invalid(format!("{cpus} CPUs")));
            }
        }
        if let Some(memory) = self.memory_mb {
            if memory < 4 {
                return Err(invalid(format!("{memory} MiB of memory")));
            }
        }
        match self.firmware {
            Some(Firmware::Bios) => spec.firmware = Some("bios".to_string()),
            Some(Firmware::Efi { secure_boot }) => {
                spec.firmware = Some("efi".to_string());
                spec.boot_options = Some(VirtualMachineBootOptions {
                    efi_secure_boot_enabled: Some(secure_boot),
                    ..Default::default()
                });
            }
            None => {}
        }
        let mut keys = NewKeys::default();
        let mut changes: Vec<AnyVirtualDeviceConfigSpec> = Vec::new();

        if self.vtpm {
            if self.firmware == Some(Firmware::Bios) {
                return Err(invalid("a vTPM needs EFI firmware".to_string()));
            }
            if !devices
                .iter()
                .any(|d| matches!(d, AnyVirtualDevice::VirtualTPM(_)))
            {
                let tpm = VirtualTPM {
                    virtual_device: VirtualDevice {
                        key: keys.next(),
                        ..Default::default()
                    },
                    ..Default::default()
                };
                changes.push(device_change(
                    VirtualDeviceConfigSpecOperation::Add,
                    None,
                    AnyVirtualDevice::VirtualTPM(Box::new(tpm)),
                ));
            }
        }

        let disks = virtual_disks(devices);
        let mut taken_units: Vec<(i32, i32)> = devices
            .iter()
            .filter_map(|d| {
                let device = d.base();
                Some((device.controller_key?, device.unit_number?))
            })
            .collect();
        for change in &self.disks {
            match change {
                DiskChange::Grow { index, capacity_kb } => {
                    let Some(disk) = disks.get(*index) else {
                        return Err(invalid(format!(
                            "the VM has {} disk(s), there is no disk {index} to grow",
                            disks.len()
                        )));
                    };
                    let current = disk_capacity_kb(disk);
                    if *capacity_kb < current {
                        return Err(invalid(format!(
                            "disk {index} is {current} KiB; disks cannot shrink to {capacity_kb} KiB"
                        )));
                    }
                    if *capacity_kb == current {
                        continue;
                    }
                    let mut grown = (*disk).clone();
                    grown.capacity_in_kb = *capacity_kb;
                    grown.capacity_in_bytes = Some(capacity_kb.saturating_mul(1024));
                    changes.push(device_change(
                        VirtualDeviceConfigSpecOperation::Edit,
                        None,
                        AnyVirtualDevice::VirtualDisk(Box::new(grown)),
                    ));
                }
                DiskChange::Add {
                    capacity_kb,
                    provisioning,
                    placement,
                } => {
                    if *capacity_kb <= 0 {
                        return Err(invalid(format!("a disk of {capacity_kb} KiB")));
                    }
                    let controller = disk_controller(devices, &disks).ok_or_else(|| {
                        invalid("the VM has no disk controller to add a disk to".to_string())
                    })?;
                    let unit = (0..=15)
                        .filter(|u| *u != 7) // the SCSI controller's own unit
                        .find(|u| !taken_units.contains(&(controller, *u)))
                        .ok_or_else(|| {
                            invalid(format!(
                                "controller {controller} has no free unit for another disk"
                            ))
                        })?;
                    taken_units.push((controller, unit));
                    let backing = VirtualDiskFlatVer2BackingInfo {
                        virtual_device_file_backing_info: VirtualDeviceFileBackingInfo {
                            file_name: placement
                                .as_ref()
                                .map(|p| format!("[{}]", p.datastore_name))
                                .unwrap_or_default(),
                            datastore: placement.as_ref().map(|p| p.datastore.clone()),
                            ..Default::default()
                        },
                        disk_mode: "persistent".to_string(),
                        thin_provisioned: Some(*provisioning == DiskProvisioning::Thin),
                        eagerly_scrub: Some(*provisioning == DiskProvisioning::EagerZeroedThick),
                        ..Default::default()
                    };
                    let disk = VirtualDisk {
                        virtual_device: VirtualDevice {
                            key: keys.next(),
                            controller_key: Some(controller),
                            unit_number: Some(unit),
                            backing: Some(
                                AnyVirtualDeviceBackingInfo::VirtualDiskFlatVer2BackingInfo(
                                    Box::new(backing),
                                ),
                            ),
                            ..Default::default()
                        },
                        capacity_in_kb: *capacity_kb,
                        capacity_in_bytes: Some(capacity_kb.saturating_mul(1024)),
                        ..Default::default()
                    };
                    changes.push(device_change(
                        VirtualDeviceConfigSpecOperation::Add,
                        Some(VirtualDeviceConfigSpecFileOperation::Create),
                        AnyVirtualDevice::VirtualDisk(Box::new(disk)),
                    ));
                }
            }
        }

        if self.replace_nics {
            for device in devices.iter().filter(|d| is_nic(d)) {
                changes.push(device_change(
                    VirtualDeviceConfigSpecOperation::Remove,
                    None,
                    device.clone(),
                ));
            }
        }
        for nic in &self.nics {
            changes.push(device_change(
                VirtualDeviceConfigSpecOperation::Add,
                None,
                new_nic(nic, keys.next())?,
            ));
        }
        spec.device_change = changes;
        spec.extra_config = self
            .extra_config
            .iter()
            .map(|(key, value)| {
                AnyOptionValue::OptionValue(Box::new(OptionValue {
                    key: key.clone(),
                    value: Some(Value::String(value.clone())),
                }))
            })
            .collect();
        Ok(spec)
    }
}

/// The virtual disks among `devices`, in device order.
fn virtual_disks(devices: &[AnyVirtualDevice]) -> Vec<&VirtualDisk> {
    devices
        .iter()
        .filter_map(|d| match d {
            AnyVirtualDevice::VirtualDisk(disk) => Some(disk.as_ref()),
            _ => None,
        })
        .collect()
}

fn invalid(message: String) -> Error {
    Error::new(ErrorKind::InvalidArgument, message)
}

/// Temporary keys of new devices: negative, unique within a spec.
#[derive(Default)]
struct NewKeys(i32);

impl NewKeys {
    fn next(&mut self) -> i32 {
        self.0 -= 1;
        self.0
    }
}

fn device_change(
    operation: VirtualDeviceConfigSpecOperation,
    file_operation: Option<VirtualDeviceConfigSpecFileOperation>,
    device: AnyVirtualDevice,
) -> AnyVirtualDeviceConfigSpec {
    AnyVirtualDeviceConfigSpec::VirtualDeviceConfigSpec(Box::new(VirtualDeviceConfigSpec {
        operation: Some(operation),
        file_operation,
        device,
        ..Default::default()
    }))
}

fn disk_capacity_kb(disk: &VirtualDisk) -> i64 {
    match disk.capacity_in_bytes {
        Some(bytes) if bytes > 0 => bytes / 1024,
        _ => disk.capacity_in_kb,
    }
}

/// The controller of the first disk, else the first SCSI controller.
fn disk_controller(devices: &[AnyVirtualDevice], disks: &[&VirtualDisk]) -> Option<i32> {
    if let Some(key) = disks.first().and_then(|d| d.controller_key) {
        return Some(key);
    }
    devices
        .iter()
        .find(|d| d.is::<VirtualSCSIController>())
        .map(|d| d.base().key)
}

fn is_nic(device: &AnyVirtualDevice) -> bool {
    device.is::<VirtualEthernetCard>()
}

fn new_nic(nic: &NicSpec, key: i32) -> Result<AnyVirtualDevice, Error> {
    let backing = match &nic.network.kind() {
        NetworkKind::Standard => {
            AnyVirtualDeviceBackingInfo::VirtualEthernetCardNetworkBackingInfo(Box::new(
                VirtualEthernetCardNetworkBackingInfo {
                    virtual_device_device_backing_info: VirtualDeviceDeviceBackingInfo {
                        device_name: nic.network.name().to_string(),
                        ..Default::default()
                    },
                    network: Some(nic.network.reference().clone()),
                    ..Default::default()
                },
            ))
        }
        NetworkKind::Distributed {
            portgroup_key,
            switch_uuid,
            ..
        } => {
            if portgroup_key.is_empty() || switch_uuid.is_empty() {
                return Err(invalid(format!(
                    "distributed port group {} lacks its key or switch UUID",
                    nic.network.name()
                )));
            }
            AnyVirtualDeviceBackingInfo::VirtualEthernetCardDistributedVirtualPortBackingInfo(
                Box::new(VirtualEthernetCardDistributedVirtualPortBackingInfo {
                    port: DistributedVirtualSwitchPortConnection {
                        switch_uuid: switch_uuid.clone(),
                        portgroup_key: Some(portgroup_key.clone()),
                        ..Default::default()
                    },
                }),
            )
        }
        NetworkKind::Opaque => {
            return Err(invalid(format!(
                "{}: NICs on NSX opaque networks need the network's id and type, not supported yet",
                nic.network.name()
            )))
        }
    };
    let connectable = Some(VirtualDeviceConnectInfo {
        start_connected: true,
        allow_guest_control: true,
        connected: true,
        ..Default::default()
    });
    let (address_type, mac_address) = match &nic.mac_address {
        Some(mac) => (Some("manual".to_string()), Some(mac.clone())),
        None => (Some("generated".to_string()), None),
    };
    let card = VirtualEthernetCard {
        virtual_device: VirtualDevice {
            key,
            backing: Some(backing),
            connectable,
            ..Default::default()
        },
        address_type,
        mac_address,
        ..Default::default()
    };
    Ok(match nic.adapter {
        NicAdapter::Vmxnet3 => AnyVirtualDevice::VirtualVmxnet3(Box::new(VirtualVmxnet3 {
            virtual_vmxnet: VirtualVmxnet {
                virtual_ethernet_card: card,
            },
            ..Default::default()
        })),
        NicAdapter::E1000e => AnyVirtualDevice::VirtualE1000e(Box::new(VirtualE1000e {
            virtual_ethernet_card: card,
        })),
    })
}

/// Where and how to clone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CloneSpec {
    /// The folder the clone goes into.
    pub folder: ManagedObjectReference,
    /// The resource pool (required when cloning a template; a VM's own pool
    /// otherwise).
    pub pool: Option<ManagedObjectReference>,
    /// The datastore (the source's otherwise).
    pub datastore: Option<ManagedObjectReference>,
    /// The host (vCenter/DRS chooses otherwise).
    pub host: Option<ManagedObjectReference>,
    /// A linked clone: child disks of the source's current snapshot
    /// (the source must have one).
    pub linked: bool,
    /// Power the clone on once made.
    pub power_on: bool,
    /// Make the clone a template.
    pub template: bool,
    /// Configuration changes.
    pub config: Option<ConfigSpec>,
    /// Source disks (index in device order) copied with another provisioning.
    pub disk_provisioning: Vec<(usize, DiskProvisioning)>,
}

impl CloneSpec {
    /// A full clone into `folder`: a [`Folder`](crate::inventory::Folder)
    /// handle (`&finder.default_folder().await?`) or a reference. The
    /// placement setters take handles or references alike; each reference
    /// must be of its kind (checked before anything is sent).
    pub fn new(folder: impl Into<ManagedObjectReference>) -> Self {
        CloneSpec {
            folder: folder.into(),
            pool: None,
            datastore: None,
            host: None,
            linked: false,
            power_on: false,
            template: false,
            config: None,
            disk_provisioning: Vec::new(),
        }
    }
    /// Into this resource pool or vApp ([`ResourcePool`](crate::inventory::ResourcePool)).
    pub fn pool(mut self, pool: impl Into<ManagedObjectReference>) -> Self {
        self.pool = Some(pool.into());
        self
    }
    /// Onto this datastore ([`Datastore`](crate::inventory::Datastore)).
    pub fn datastore(mut self, datastore: impl Into<ManagedObjectReference>) -> Self {
        self.datastore = Some(datastore.into());
        self
    }
    /// On this host ([`HostSystem`](crate::inventory::HostSystem)).
    pub fn host(mut self, host: impl Into<ManagedObjectReference>) -> Self {
        self.host = Some(host.into());
        self
    }
    /// A linked clone.
    pub fn linked(mut self) -> Self {
        self.linked = true;
        self
    }
    /// Powered on once made.
    pub fn power_on(mut self) -> Self {
        self.power_on = true;
        self
    }
    /// Made a template.
    pub fn template(mut self) -> Self {
        self.template = true;
        self
    }
    /// With these configuration changes.
    pub fn config(mut self, config: ConfigSpec) -> Self {
        self.config = Some(config);
        self
    }
    /// The source's `index`-th disk (in device order; 0 is the root disk)
    /// copied as `provisioning` (thin, lazy- or eager-zeroed thick): a disk
    /// locator with that backing, which vCenter converts while it copies.
    /// Full clones only: a linked clone shares the source's disks.
    pub fn disk_provisioning(mut self, index: usize, provisioning: DiskProvisioning) -> Self {
        self.disk_provisioning.retain(|(i, _)| *i != index);
        self.disk_provisioning.push((index, provisioning));
        self
    }
    /// With this instance UUID (so the VM can be found again by it, even
    /// after a crash lost the clone task's result).
    pub fn instance_uuid(mut self, uuid: impl Into<String>) -> Self {
        let config = self.config.take().unwrap_or_default();
        self.config = Some(config.instance_uuid(uuid));
        self
    }

    /// The `CloneVM_Task` spec for cloning `source`, whose devices are
    /// `devices` (the configuration's device changes are computed from
    /// them) and whose current snapshot is `snapshot` (needed by a linked
    /// clone only). No call: [`VirtualMachine::clone_spec_vim`] reads both.
    pub fn to_vim(
        &self,
        source: &ManagedObjectReference,
        devices: &[AnyVirtualDevice],
        snapshot: Option<&ManagedObjectReference>,
    ) -> Result<VirtualMachineCloneSpec, Error> {
        self.check_placement()?;
        let mut location = VirtualMachineRelocateSpec {
            folder: Some(self.folder.clone()),
            pool: self.pool.clone(),
            datastore: self.datastore.clone(),
            host: self.host.clone(),
            ..Default::default()
        };
        let mut linked_snapshot = None;
        if self.linked {
            let Some(snapshot) = snapshot else {
                return Err(invalid(format!(
                    "a linked clone of {source} needs a snapshot of it, and it has none"
                )));
            };
            linked_snapshot = Some(snapshot.clone());
            location.disk_move_type = Some("createNewChildDiskBacking".to_string());
        }
        location.disk = self.disk_locators(source, devices)?;
        let config = self
            .config
            .as_ref()
            .map(|c| c.to_vim(devices))
            .transpose()?;
        Ok(VirtualMachineCloneSpec {
            location,
            template: self.template,
            config,
            power_on: self.power_on,
            snapshot: linked_snapshot,
            ..Default::default()
        })
    }
}

impl CloneSpec {
    /// One disk locator per [`disk_provisioning`](Self::disk_provisioning):
    /// the source disk's key, the clone's datastore (the disk's own when the
    /// clone names none), a flat backing with the provisioning's flags.
    fn disk_locators(
        &self,
        source: &ManagedObjectReference,
        devices: &[AnyVirtualDevice],
    ) -> Result<Vec<VirtualMachineRelocateSpecDiskLocator>, Error> {
        if self.disk_provisioning.is_empty() {
            return Ok(Vec::new());
        }
        if self.linked {
            return Err(invalid(format!(
                "a linked clone shares the disks of {source}: their provisioning cannot change"
            )));
        }
        let disks = virtual_disks(devices);
        let mut locators = Vec::with_capacity(self.disk_provisioning.len());
        for (index, provisioning) in &self.disk_provisioning {
            let Some(disk) = disks.get(*index) else {
                return Err(invalid(format!(
                    "{source} has {} disk(s), there is no disk {index} to provision",
                    disks.len()
                )));
            };
            let current = match &disk.virtual_device.backing {
                Some(AnyVirtualDeviceBackingInfo::VirtualDiskFlatVer2BackingInfo(b)) => Some(b),
                _ => None,
            };
            let datastore = self
                .datastore
                .clone()
                .or_else(|| current.and_then(|b| b.virtual_device_file_backing_info.datastore.clone()))
                .ok_or_else(|| {
                    invalid(format!(
                        "disk {index} of {source}: no datastore to copy it to (set the clone's datastore)"
                    ))
                })?;
            let backing = VirtualDiskFlatVer2BackingInfo {
                virtual_device_file_backing_info: VirtualDeviceFileBackingInfo {
                    datastore: Some(datastore.clone()),
                    ..Default::default()
                },
                disk_mode: current
                    .map(|b| b.disk_mode.clone())
                    .filter(|m| !m.is_empty())
                    .unwrap_or_else(|| "persistent".to_string()),
                thin_provisioned: Some(*provisioning == DiskProvisioning::Thin),
                eagerly_scrub: Some(*provisioning == DiskProvisioning::EagerZeroedThick),
                ..Default::default()
            };
            locators.push(VirtualMachineRelocateSpecDiskLocator {
                disk_id: disk.virtual_device.key,
                datastore,
                disk_backing_info: Some(
                    AnyVirtualDeviceBackingInfo::VirtualDiskFlatVer2BackingInfo(Box::new(backing)),
                ),
                ..Default::default()
            });
        }
        Ok(locators)
    }

    /// Each placement reference is of its kind: a datastore given as the
    /// folder fails here, naming both, not on the server.
    fn check_placement(&self) -> Result<(), Error> {
        use crate::inventory::{Datastore, Folder, HostSystem, ResourcePool};
        let places: [(&str, Option<&ManagedObjectReference>, &[&str]); 4] = [
            ("folder", Some(&self.folder), Folder::TYPE_NAMES),
            ("pool", self.pool.as_ref(), ResourcePool::TYPE_NAMES),
            ("datastore", self.datastore.as_ref(), Datastore::TYPE_NAMES),
            ("host", self.host.as_ref(), HostSystem::TYPE_NAMES),
        ];
        for (what, reference, types) in places {
            if let Some(reference) = reference {
                if !types.contains(&reference.type_.as_str()) {
                    return Err(invalid(format!(
                        "the clone's {what} is {reference}, a {}, not a {}",
                        reference.type_,
                        types.join(" or ")
                    )));
                }
            }
        }
        Ok(())
    }
}

/// What a clone request must satisfy before anything is sent: placement
/// references of their kinds, a VM name of 1 to 80 characters, an instance
/// UUID (when set) that is one.
fn check_clone(name: &str, spec: &CloneSpec) -> Result<(), Error> {
    spec.check_placement()?;
    if name.is_empty() || name.len() > 80 {
        return Err(invalid(format!(
            "{name:?}: a VM name has 1 to 80 characters"
        )));
    }
    if let Some(uuid) = spec
        .config
        .as_ref()
        .and_then(|c| c.instance_uuid.as_deref())
    {
        check_uuid(uuid)?;
    }
    Ok(())
}

/// A VM's power state and guest state, as [`VirtualMachine::state`] reads them.
#[derive(Debug, Clone, PartialEq)]
pub struct VmState {
    /// On, off or suspended.
    pub power_state: VirtualMachinePowerState,
    /// The guest's primary IP address, when VMware tools report one.
    pub ip_address: Option<String>,
    /// Whether the VM is a template.
    pub template: bool,
}

impl VirtualMachine {
    /// The VM's reference.
    pub fn reference(&self) -> &ManagedObjectReference {
        &self.reference
    }

    async fn devices_and_snapshot(&self) -> Result<mo::VirtualMachine, Error> {
        self.client
            .properties::<mo::VirtualMachine>(&[
                "config.hardware.device",
                "snapshot.currentSnapshot",
            ])?
            .get(&self.reference)
            .await
    }

    /// The `CloneVM_Task` arguments for cloning this VM as `name` (reads the
    /// source's devices and snapshot: one call).
    pub async fn clone_spec_vim(&self, spec: &CloneSpec) -> Result<VirtualMachineCloneSpec, Error> {
        let source = self.devices_and_snapshot().await?;
        let devices = source
            .config
            .as_ref()
            .map(|c| c.hardware.device.as_slice())
            .unwrap_or_default();
        let snapshot = source
            .snapshot
            .as_ref()
            .and_then(|s| s.current_snapshot.as_ref());
        spec.to_vim(&self.reference, devices, snapshot)
    }

    /// Starts cloning this VM or template as `name`; returns the task (for
    /// callers that record it before waiting).
    pub async fn start_clone(&self, name: &str, spec: &CloneSpec) -> Result<Task, Error> {
        check_clone(name, spec)?;
        let vim = self.clone_spec_vim(spec).await?;
        self.send_clone(name, spec, &vim).await
    }

    /// [`start_clone`](Self::start_clone) with the source's devices already
    /// known (read once with `config.hardware.device` and kept: a template's
    /// devices do not change under its clones), so the clone is one call.
    /// Not for linked clones, which need the source's current snapshot.
    pub async fn start_clone_with_devices(
        &self,
        name: &str,
        spec: &CloneSpec,
        devices: &[AnyVirtualDevice],
    ) -> Result<Task, Error> {
        check_clone(name, spec)?;
        if spec.linked {
            return Err(invalid(format!(
                "a linked clone of {} needs its current snapshot: use start_clone",
                self.reference
            )));
        }
        let vim = spec.to_vim(&self.reference, devices, None)?;
        self.send_clone(name, spec, &vim).await
    }

    async fn send_clone(
        &self,
        name: &str,
        spec: &CloneSpec,
        vim: &VirtualMachineCloneSpec,
    ) -> Result<Task, Error> {
        let task = self
            .client
            .vim()
            .clone_vm_task(&self.reference, &spec.folder, name, vim)
            .await?;
        Ok(self.client.task(task))
    }

    /// Clones this VM or template as `name` and waits for the clone (and
    /// its power-on, if asked: a server that made the clone but left it off
    /// despite `powerOn`, as simulators do, gets a power-on call).
    pub async fn clone_vm(&self, name: &str, spec: &CloneSpec) -> Result<VirtualMachine, Error> {
        let info = self.start_clone(name, spec).await?.wait().await?;
        let reference = task_result_reference(&info).ok_or_else(|| {
            Error::new(
                ErrorKind::Decode,
                format!("the clone task {} returned no VM reference", info.task),
            )
        })?;
        let vm = self.client.vm(reference);
        if spec.power_on && !spec.template {
            let state = vm.state().await?;
            if state.power_state == VirtualMachinePowerState::PoweredOff {
                vm.power_on().await?;
            }
        }
        Ok(vm)
    }

    /// Applies configuration changes and waits for them.
    pub async fn reconfigure(&self, config: &ConfigSpec) -> Result<(), Error> {
        let source = self.devices_and_snapshot().await?;
        let devices = source
            .config
            .as_ref()
            .map(|c| c.hardware.device.as_slice())
            .unwrap_or_default();
        let spec = config.to_vim(devices)?;
        let task = self
            .client
            .vim()
            .reconfig_vm_task(&self.reference, &spec)
            .await?;
        self.client.task(task).wait().await.map(|_| ())
    }

    /// Powers on and waits.
    pub async fn power_on(&self) -> Result<(), Error> {
        let task = self
            .client
            .vim()
            .power_on_vm_task(&self.reference, None)
            .await?;
        self.client.task(task).wait().await.map(|_| ())
    }

    /// Powers off (hard) and waits.
    pub async fn power_off(&self) -> Result<(), Error> {
        let task = self.client.vim().power_off_vm_task(&self.reference).await?;
        self.client.task(task).wait().await.map(|_| ())
    }

    /// Resets (hard) and waits.
    pub async fn reset(&self) -> Result<(), Error> {
        let task = self.client.vim().reset_vm_task(&self.reference).await?;
        self.client.task(task).wait().await.map(|_| ())
    }

    /// Suspends and waits.
    pub async fn suspend(&self) -> Result<(), Error> {
        let task = self.client.vim().suspend_vm_task(&self.reference).await?;
        self.client.task(task).wait().await.map(|_| ())
    }

    /// Asks the guest to shut down (VMware tools needed); returns at once.
    pub async fn shutdown_guest(&self) -> Result<(), Error> {
        self.client.vim().shutdown_guest(&self.reference).await
    }

    /// Shuts the guest down and waits until the VM is off; after `timeout`
    /// (or when the guest cannot be asked: no tools), powers it off hard.
    /// Returns whether the guest shut down by itself.
    pub async fn shutdown(&self, timeout: Duration) -> Result<bool, Error> {
        let mut stream = self
            .client
            .properties::<mo::VirtualMachine>(&["runtime.powerState"])?
            .watch(std::slice::from_ref(&self.reference))
            .await?;
        let first = stream.next().await?;
        if power_state(&first.object) == Some(VirtualMachinePowerState::PoweredOff) {
            let _ = stream.close().await;
            return Ok(true);
        }
        let graceful = match self.shutdown_guest().await {
            Ok(()) => {
                let wait_off = async {
                    loop {
                        let change = stream.next().await?;
                        if power_state(&change.object) == Some(VirtualMachinePowerState::PoweredOff)
                        {
                            return Ok::<(), Error>(());
                        }
                    }
                };
                match tokio::time::timeout(timeout, wait_off).await {
                    Ok(result) => result.map(|_| true)?,
                    Err(_) => false,
                }
            }
            Err(err) => {
                tracing::debug!(error = %err, vm = %self.reference, "guest shutdown refused; powering off");
                false
            }
        };
        let _ = stream.close().await;
        if !graceful {
            self.power_off().await?;
        }
        Ok(graceful)
    }

    /// Destroys the VM (it must be off) and waits.
    pub async fn destroy(&self) -> Result<(), Error> {
        let task = self.client.vim().destroy_task(&self.reference).await?;
        self.client.task(task).wait().await.map(|_| ())
    }

    /// Marks the VM (powered off) as a template.
    pub async fn mark_as_template(&self) -> Result<(), Error> {
        self.client.vim().mark_as_template(&self.reference).await
    }

    /// Power state, guest IP and template flag (one call).
    pub async fn state(&self) -> Result<VmState, Error> {
        let vm = self
            .client
            .properties::<mo::VirtualMachine>(&[
                "runtime.powerState",
                "guest.ipAddress",
                "config.template",
            ])?
            .get(&self.reference)
            .await?;
        Ok(VmState {
            power_state: power_state(&vm).unwrap_or_default(),
            ip_address: vm
                .guest
                .and_then(|g| g.ip_address)
                .filter(|ip| !ip.is_empty()),
            template: vm.config.is_some_and(|c| c.template),
        })
    }

    /// Waits until the guest reports an IP address (through
    /// `WaitForUpdatesEx` on `guest.ipAddress`, not polling), up to `timeout`.
    pub async fn wait_for_ip(&self, timeout: Duration) -> Result<String, Error> {
        let mut stream = self
            .client
            .properties::<mo::VirtualMachine>(&["guest.ipAddress"])?
            .watch(std::slice::from_ref(&self.reference))
            .await?;
        let wait = async {
            loop {
                let change = stream.next().await?;
                if change.kind == crate::property::UpdateKind::Leave {
                    return Err(Error::new(
                        ErrorKind::NotFound,
                        format!(
                            "{} was destroyed while waiting for its IP address",
                            self.reference
                        ),
                    ));
                }
                if let Some(ip) = change
                    .object
                    .guest
                    .and_then(|g| g.ip_address)
                    .filter(|ip| !ip.is_empty())
                {
                    return Ok(ip);
                }
            }
        };
        let result = tokio::time::timeout(timeout, wait).await;
        let _ = stream.close().await;
        match result {
            Ok(result) => result,
            Err(_) => Err(Error::new(
                ErrorKind::Timeout,
                format!(
                    "{} reported no IP address within {timeout:?}",
                    self.reference
                ),
            )),
        }
    }
}

fn power_state(vm: &mo::VirtualMachine) -> Option<VirtualMachinePowerState> {
    vm.runtime.as_ref().map(|r| r.power_state.clone())
}

fn check_uuid(uuid: &str) -> Result<(), Error> {
    let digits: Vec<char> = uuid.chars().filter(|c| *c != '-').collect();
    if digits.len() == 32 && digits.iter().all(char::is_ascii_hexdigit) {
        Ok(())
    } else {
        Err(invalid(format!("{uuid:?} is not a UUID")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{ParaVirtualSCSIController, VirtualController};

    fn template_devices() -> Vec<AnyVirtualDevice> {
        vec![
            AnyVirtualDevice::ParaVirtualSCSIController(Box::new(ParaVirtualSCSIController {
                virtual_scsi_controller: VirtualSCSIController {
                    virtual_controller: VirtualController {
                        virtual_device: VirtualDevice {
                            key: 1000,
                            ..Default::default()
                        },
                        bus_number: 0,
                        ..Default::default()
                    },
                    ..Default::default()
                },
            })),
            AnyVirtualDevice::VirtualDisk(Box::new(VirtualDisk {
                virtual_device: VirtualDevice {
                    key: 2000,
                    controller_key: Some(1000),
                    unit_number: Some(0),
                    ..Default::default()
                },
                capacity_in_kb: 10 * 1024 * 1024,
                ..Default::default()
            })),
            AnyVirtualDevice::VirtualDisk(Box::new(VirtualDisk {
                virtual_device: VirtualDevice {
                    key: 2001,
                    controller_key: Some(1000),
                    unit_number: Some(1),
                    ..Default::default()
                },
                capacity_in_kb: 1024,
                ..Default::default()
            })),
            AnyVirtualDevice::VirtualE1000(Box::default()),
        ]
    }

    fn network(name: &str, type_: &str, value: &str, kind: NetworkKind) -> Network {
        let object = crate::inventory::InventoryObject {
            path: format!("/DC0/network/{name}"),
            name: name.to_string(),
            reference: ManagedObjectReference::new(type_, value),
        };
        Network::new(object, kind).unwrap()
    }

    fn standard(name: &str) -> Network {
        network(name, "Network", "network-7", NetworkKind::Standard)
    }

    #[test]
    fn a_clone_spec_from_cached_devices() {
        let folder = ManagedObjectReference::new("Folder", "group-v3");
        let pool = ManagedObjectReference::new("ResourcePool", "resgroup-9");
        let datastore = ManagedObjectReference::new("Datastore", "datastore-1");
        let template = ManagedObjectReference::new("VirtualMachine", "vm-1");
        let spec = CloneSpec::new(folder.clone())
            .pool(pool.clone())
            .datastore(datastore.clone())
            .config(ConfigSpec::new().cpus(2).grow_disk(0, 20 * 1024 * 1024))
            .instance_uuid("0b5c1e2a-6f00-4d7e-9c59-7a9f3c3c1d11");
        let vim = spec.to_vim(&template, &template_devices(), None).unwrap();
        assert_eq!(vim.location.folder.as_ref(), Some(&folder));
        assert_eq!(vim.location.pool.as_ref(), Some(&pool));
        assert_eq!(vim.location.datastore.as_ref(), Some(&datastore));
        assert!(!vim.power_on && !vim.template && vim.snapshot.is_none());
        assert_eq!(vim.location.disk_move_type, None);
        let config = vim.config.expect("configuration");
        assert_eq!(config.num_cpus, Some(2));
        assert_eq!(
            config.instance_uuid.as_deref(),
            Some("0b5c1e2a-6f00-4d7e-9c59-7a9f3c3c1d11")
        );
        // The root disk grown is the template's first disk (key 2000), edited in place.
        let edited: Vec<(i32, i64)> = config
            .device_change
            .iter()
            .filter_map(|c| match c {
                AnyVirtualDeviceConfigSpec::VirtualDeviceConfigSpec(c) => match &c.device {
                    AnyVirtualDevice::VirtualDisk(d) => Some((d.key, d.capacity_in_kb)),
                    _ => None,
                },
                _ => None,
            })
            .collect();
        assert_eq!(edited, [(2000, 20 * 1024 * 1024)]);
    }

    /// The backing of each disk locator: (disk key, datastore, thin, eager).
    fn locators(vim: &VirtualMachineCloneSpec) -> Vec<(i32, String, Option<bool>, Option<bool>)> {
        vim.location
            .disk
            .iter()
            .map(|l| match &l.disk_backing_info {
                Some(AnyVirtualDeviceBackingInfo::VirtualDiskFlatVer2BackingInfo(b)) => {
                    assert_eq!(b.disk_mode, "persistent");
                    assert_eq!(
                        b.virtual_device_file_backing_info.datastore.as_ref(),
                        Some(&l.datastore)
                    );
                    (
                        l.disk_id,
                        l.datastore.value.clone(),
                        b.thin_provisioned,
                        b.eagerly_scrub,
                    )
                }
                other => panic!("not a flat backing: {other:?}"),
            })
            .collect()
    }

    #[test]
    fn a_disk_is_copied_with_the_provisioning_asked() {
        let folder = ManagedObjectReference::new("Folder", "group-v3");
        let datastore = ManagedObjectReference::new("Datastore", "datastore-1");
        let template = ManagedObjectReference::new("VirtualMachine", "vm-1");
        let spec = CloneSpec::new(folder.clone()).datastore(datastore.clone());
        let none = spec.to_vim(&template, &template_devices(), None).unwrap();
        assert!(none.location.disk.is_empty(), "no locator unless asked");

        let each = |p: DiskProvisioning| {
            let vim = spec
                .clone()
                .disk_provisioning(0, p)
                .to_vim(&template, &template_devices(), None)
                .unwrap();
            locators(&vim)
        };
        let d = "datastore-1".to_string();
        assert_eq!(
            each(DiskProvisioning::EagerZeroedThick),
            [(2000, d.clone(), Some(false), Some(true))],
            "the root disk is the template's first disk (key 2000)"
        );
        assert_eq!(
            each(DiskProvisioning::Thick),
            [(2000, d.clone(), Some(false), Some(false))]
        );
        assert_eq!(
            each(DiskProvisioning::Thin),
            [(2000, d.clone(), Some(true), Some(false))]
        );
        let vim = spec
            .clone()
            .disk_provisioning(1, DiskProvisioning::Thin)
            .disk_provisioning(1, DiskProvisioning::Thick)
            .to_vim(&template, &template_devices(), None)
            .unwrap();
        assert_eq!(
            locators(&vim),
            [(2001, d, Some(false), Some(false))],
            "the last word per disk"
        );

        // Without a datastore for the clone, the disk's own.
        let mut devices = template_devices();
        if let AnyVirtualDevice::VirtualDisk(disk) = &mut devices[1] {
            disk.virtual_device.backing =
                Some(AnyVirtualDeviceBackingInfo::VirtualDiskFlatVer2BackingInfo(
                    Box::new(VirtualDiskFlatVer2BackingInfo {
                        virtual_device_file_backing_info: VirtualDeviceFileBackingInfo {
                            file_name: "[ds2] t/t.vmdk".into(),
                            datastore: Some(ManagedObjectReference::new(
                                "Datastore",
                                "datastore-2",
                            )),
                            ..Default::default()
                        },
                        disk_mode: "persistent".into(),
                        thin_provisioned: Some(true),
                        ..Default::default()
                    }),
                ));
        }
        let vim = CloneSpec::new(folder.clone())
            .disk_provisioning(0, DiskProvisioning::Thick)
            .to_vim(&template, &devices, None)
            .unwrap();
        assert_eq!(
            locators(&vim),
            [(2000, "datastore-2".to_string(), Some(false), Some(false))]
        );

        for (spec, wanted) in [
            (
                CloneSpec::new(folder.clone()).disk_provisioning(0, DiskProvisioning::Thick),
                "no datastore to copy it to",
            ),
            (
                spec.clone().disk_provisioning(2, DiskProvisioning::Thick),
                "has 2 disk(s), there is no disk 2",
            ),
            (
                spec.clone()
                    .linked()
                    .disk_provisioning(0, DiskProvisioning::Thick),
                "a linked clone shares the disks",
            ),
        ] {
            let snapshot = ManagedObjectReference::new("VirtualMachineSnapshot", "snapshot-1");
            let err = spec
                .to_vim(&template, &template_devices(), Some(&snapshot))
                .unwrap_err();
            assert_eq!(err.kind(), ErrorKind::InvalidArgument);
            assert!(err.to_string().contains(wanted), "{err}");
        }
    }

    #[test]
    fn a_placement_of_the_wrong_kind_fails_before_sending() {
        let template = ManagedObjectReference::new("VirtualMachine", "vm-1");
        let datastore = ManagedObjectReference::new("Datastore", "datastore-1");
        let err = CloneSpec::new(datastore.clone())
            .to_vim(&template, &[], None)
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidArgument);
        assert!(
            err.to_string()
                .contains("folder is Datastore:datastore-1, a Datastore, not a Folder"),
            "{err}"
        );
        let folder = ManagedObjectReference::new("Folder", "group-v3");
        let err = CloneSpec::new(folder.clone())
            .pool(datastore.clone())
            .to_vim(&template, &[], None)
            .unwrap_err();
        assert!(
            err.to_string().contains("not a ResourcePool or VirtualApp"),
            "{err}"
        );
        let vapp = ManagedObjectReference::new("VirtualApp", "resgroup-v1");
        assert!(CloneSpec::new(folder)
            .pool(vapp)
            .datastore(datastore)
            .to_vim(&template, &[], None)
            .is_ok());
    }

    #[test]
    fn a_linked_clone_needs_the_snapshot() {
        let template = ManagedObjectReference::new("VirtualMachine", "vm-1");
        let spec = CloneSpec::new(ManagedObjectReference::new("Folder", "f")).linked();
        let e = spec.to_vim(&template, &[], None).unwrap_err();
        assert!(e.to_string().contains("needs a snapshot"), "{e}");
        let snapshot = ManagedObjectReference::new("VirtualMachineSnapshot", "snapshot-4");
        let vim = spec.to_vim(&template, &[], Some(&snapshot)).unwrap();
        assert_eq!(vim.snapshot, Some(snapshot));
        assert_eq!(
            vim.location.disk_move_type.as_deref(),
            Some("createNewChildDiskBacking")
        );
    }

    #[test]
    fn clone_names_and_uuids_are_checked_before_sending() {
        let spec = CloneSpec::new(ManagedObjectReference::new("Folder", "f"));
        assert!(check_clone("web", &spec).is_ok());
        assert!(check_clone("", &spec).is_err());
        assert!(check_clone(&"x".repeat(81), &spec).is_err());
        assert!(check_clone("web", &spec.clone().instance_uuid("not-a-uuid")).is_err());
    }

    #[test]
    fn a_full_spec() {
        let spec = ConfigSpec::new()
            .cpus(4)
            .memory_mb(8192)
            .grow_disk(0, 20 * 1024 * 1024)
            .add_disk(1024 * 1024, DiskProvisioning::EagerZeroedThick, None)
            .add_disk(2048, DiskProvisioning::Thin, None)
            .replace_nics()
            .nic(standard("VM Network"))
            .firmware(Firmware::Efi { secure_boot: true })
            .vtpm()
            .guestinfo("metadata", "e30=")
            .to_vim(&template_devices())
            .expect("spec");
        assert_eq!((spec.num_cpus, spec.memory_mb), (Some(4), Some(8192)));
        assert_eq!(spec.firmware.as_deref(), Some("efi"));
        assert_eq!(
            spec.boot_options
                .as_ref()
                .and_then(|b| b.efi_secure_boot_enabled),
            Some(true)
        );
        let mut added_units = Vec::new();
        let mut keys = Vec::new();
        let mut ops = Vec::new();
        for change in &spec.device_change {
            let AnyVirtualDeviceConfigSpec::VirtualDeviceConfigSpec(change) = change else {
                panic!("{change:?}")
            };
            ops.push((change.operation.clone(), change.device.type_name()));
            match &change.device {
                AnyVirtualDevice::VirtualDisk(d) if d.key < 0 => {
                    added_units.push(d.unit_number);
                    keys.push(d.key);
                    assert_eq!(d.controller_key, Some(1000));
                }
                AnyVirtualDevice::VirtualDisk(d) => {
                    assert_eq!(d.key, 2000);
                    assert_eq!(d.capacity_in_kb, 20 * 1024 * 1024);
                }
                AnyVirtualDevice::VirtualVmxnet3(n) => keys.push(n.key),
                AnyVirtualDevice::VirtualTPM(t) => keys.push(t.key),
                _ => {}
            }
        }
        // Units 0 and 1 are taken: the new disks get 2 and 3.
        assert_eq!(added_units, [Some(2), Some(3)]);
        keys.sort();
        keys.dedup();
        assert_eq!(keys.len(), 4, "new devices get distinct negative keys");
        use VirtualDeviceConfigSpecOperation::*;
        assert_eq!(
            ops,
            [
                (Some(Add), "VirtualTPM"),
                (Some(Edit), "VirtualDisk"),
                (Some(Add), "VirtualDisk"),
                (Some(Add), "VirtualDisk"),
                (Some(Remove), "VirtualE1000"),
                (Some(Add), "VirtualVmxnet3"),
            ]
        );
        assert_eq!(spec.extra_config.len(), 1);
    }

    #[test]
    fn disks_never_shrink_and_a_vtpm_needs_efi() {
        let err = ConfigSpec::new()
            .grow_disk(0, 1024)
            .to_vim(&template_devices())
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidArgument);
        assert!(err.to_string().contains("cannot shrink"), "{err}");
        let err = ConfigSpec::new()
            .grow_disk(5, 1024)
            .to_vim(&template_devices())
            .unwrap_err();
        assert!(err.to_string().contains("no disk 5"), "{err}");
        let err = ConfigSpec::new()
            .firmware(Firmware::Bios)
            .vtpm()
            .to_vim(&[])
            .unwrap_err();
        assert!(err.to_string().contains("EFI"), "{err}");
        // The same size is no change.
        let same = ConfigSpec::new()
            .grow_disk(0, 10 * 1024 * 1024)
            .to_vim(&template_devices())
            .unwrap();
        assert!(same.device_change.is_empty());
    }

    #[test]
    fn new_disks_on_another_datastore_with_their_provisioning() {
        let placement = DiskPlacement {
            datastore_name: "fast-ssd".to_string(),
            datastore: ManagedObjectReference::new("Datastore", "datastore-9"),
        };
        let spec = ConfigSpec::new()
            .add_disk(4096, DiskProvisioning::Thick, Some(placement))
            .add_disk(4096, DiskProvisioning::EagerZeroedThick, None)
            .to_vim(&template_devices())
            .unwrap();
        let backings: Vec<VirtualDiskFlatVer2BackingInfo> = spec
            .device_change
            .iter()
            .filter_map(|c| match c {
                AnyVirtualDeviceConfigSpec::VirtualDeviceConfigSpec(c) => match &c.device {
                    AnyVirtualDevice::VirtualDisk(d) => match &d.backing {
                        Some(AnyVirtualDeviceBackingInfo::VirtualDiskFlatVer2BackingInfo(b)) => {
                            Some((**b).clone())
                        }
                        _ => None,
                    },
                    _ => None,
                },
                _ => None,
            })
            .collect();
        assert_eq!(backings.len(), 2);
        assert_eq!(backings[0].file_name, "[fast-ssd]");
        assert_eq!(
            backings[0].datastore,
            Some(ManagedObjectReference::new("Datastore", "datastore-9"))
        );
        assert_eq!(
            (backings[0].thin_provisioned, backings[0].eagerly_scrub),
            (Some(false), Some(false))
        );
        assert_eq!(backings[1].file_name, "", "the VM's own directory");
        assert_eq!(
            (backings[1].thin_provisioned, backings[1].eagerly_scrub),
            (Some(false), Some(true))
        );
    }

    #[test]
    fn nics_on_each_kind_of_network() {
        let dvpg = network(
            "pg",
            "DistributedVirtualPortgroup",
            "dvportgroup-1",
            NetworkKind::Distributed {
                portgroup_key: "dvportgroup-1".to_string(),
                switch: None,
                switch_uuid: "50 2a 9e".to_string(),
            },
        );
        let spec = ConfigSpec::new()
            .nic(standard("VM Network"))
            .nic_spec(NicSpec {
                network: dvpg,
                adapter: NicAdapter::E1000e,
                mac_address: Some("00:50:56:00:00:01".to_string()),
            })
            .to_vim(&[])
            .unwrap();
        let devices: Vec<&AnyVirtualDevice> = spec
            .device_change
            .iter()
            .map(|c| match c {
                AnyVirtualDeviceConfigSpec::VirtualDeviceConfigSpec(c) => &c.device,
                other => panic!("{other:?}"),
            })
            .collect();
        let AnyVirtualDevice::VirtualVmxnet3(first) = devices[0] else {
            panic!("{:?}", devices[0])
        };
        assert!(matches!(
            &first.backing,
            Some(AnyVirtualDeviceBackingInfo::VirtualEthernetCardNetworkBackingInfo(b)) if b.device_name == "VM Network"
        ));
        assert_eq!(first.address_type.as_deref(), Some("generated"));
        let AnyVirtualDevice::VirtualE1000e(second) = devices[1] else {
            panic!("{:?}", devices[1])
        };
        assert_eq!(second.address_type.as_deref(), Some("manual"));
        assert_eq!(second.mac_address.as_deref(), Some("00:50:56:00:00:01"));
        match &second.backing {
            Some(
                AnyVirtualDeviceBackingInfo::VirtualEthernetCardDistributedVirtualPortBackingInfo(
                    b,
                ),
            ) => {
                assert_eq!(b.port.switch_uuid, "50 2a 9e");
                assert_eq!(b.port.portgroup_key.as_deref(), Some("dvportgroup-1"));
            }
            other => panic!("{other:?}"),
        }
        let opaque = network("nsx", "OpaqueNetwork", "network-o1", NetworkKind::Opaque);
        assert_eq!(
            ConfigSpec::new()
                .nic(opaque)
                .to_vim(&[])
                .unwrap_err()
                .kind(),
            ErrorKind::InvalidArgument
        );
    }

    #[test]
    fn a_full_controller_is_an_error() {
        let mut devices = template_devices();
        for unit in 2..=15 {
            devices.push(AnyVirtualDevice::VirtualDisk(Box::new(VirtualDisk {
                virtual_device: VirtualDevice {
                    key: 3000 + unit,
                    controller_key: Some(1000),
                    unit_number: Some(unit),
                    ..Default::default()
                },
                ..Default::default()
            })));
        }
        let err = ConfigSpec::new()
            .add_disk(1024, DiskProvisioning::Thin, None)
            .to_vim(&devices)
            .unwrap_err();
        assert!(err.to_string().contains("no free unit"), "{err}");
    }
}

#[cfg(test)]
mod wire_tests {
    use super::*;
    use crate::xml::{Encode, XmlWriter};

    #[test]
    fn new_disks_are_sent_with_their_backing_type() {
        let spec = ConfigSpec::new()
            .add_disk(2048, DiskProvisioning::Thin, None)
            .to_vim(&[AnyVirtualDevice::ParaVirtualSCSIController(Box::default())])
            .unwrap();
        let mut w = XmlWriter::new();
        spec.encode(&mut w, "spec");
        let xml = String::from_utf8(w.into_bytes()).unwrap();
        assert!(xml.contains("VirtualDiskFlatVer2BackingInfo"), "{xml}");
    }

    #[test]
    fn a_disk_locator_is_sent_with_its_disk_and_backing() {
        let disk = VirtualDisk {
            virtual_device: VirtualDevice {
                key: 2000,
                ..Default::default()
            },
            ..Default::default()
        };
        let spec = CloneSpec::new(ManagedObjectReference::new("Folder", "group-v3"))
            .datastore(ManagedObjectReference::new("Datastore", "datastore-1"))
            .disk_provisioning(0, DiskProvisioning::EagerZeroedThick)
            .to_vim(
                &ManagedObjectReference::new("VirtualMachine", "vm-1"),
                &[AnyVirtualDevice::VirtualDisk(Box::new(disk))],
                None,
            )
            .unwrap();
        let mut w = XmlWriter::new();
        spec.encode(&mut w, "spec");
        let xml = String::from_utf8(w.into_bytes()).unwrap();
        let locator = xml
            .split("<disk>")
            .nth(1)
            .and_then(|rest| rest.split("</disk>").next())
            .unwrap_or_else(|| panic!("no disk locator: {xml}"));
        for part in [
            "<diskId>2000</diskId>",
            "type=\"Datastore\">datastore-1</datastore>",
            "xsi:type=\"VirtualDiskFlatVer2BackingInfo\"",
            "<thinProvisioned>false</thinProvisioned>",
            "<eagerlyScrub>true</eagerlyScrub>",
        ] {
            assert!(locator.contains(part), "{part} in {locator}");
        }
    }
}
