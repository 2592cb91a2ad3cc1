//! [`Machines`] on a real vCenter session, with `vsphere-client`.
//!
//! Calls per VM: the lookup by instance UUID is `FindByUuid` (plus one
//! `RetrievePropertiesEx` when it finds the VM); a clone is one `CloneVM_Task`
//! through the SDK's clone with the template's devices, read once per session
//! (the root disk copied with the class's provisioning through a disk locator);
//! a linked clone reads the template's snapshot and devices (two more
//! `RetrievePropertiesEx`) and, the first time, takes the snapshot it is made
//! from ([`super::linked`]); each power, reconfigure or resize operation is one task call (a resize carries
//! the VM's `changeVersion`, so vCenter applies it at most once); tasks are waited for
//! through the client's one shared task filter. Placement (folder, resource
//! pool, datastores, port groups; see [`super::placement`]) is resolved once
//! per session and cached, so it is amortised over every VM of the Provider.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use vsphere_client::inventory::{escape_name, Network};
use vsphere_client::mo;
use vsphere_client::types::{
    AnyVirtualDevice, InvalidPowerState, ManagedObjectNotFound, ManagedObjectReference,
};
use vsphere_client::vm::{
    CloneSpec, ConfigSpec, DiskPlacement, DiskProvisioning, Firmware as VmFirmware, NicAdapter,
    NicSpec,
};

use super::facts::{error, facts_of, task_facts, VM_PROPERTIES};
use super::placement::placed_clone_spec;
use super::VCenterSession;
use crate::api::{Firmware, Provisioning};
use crate::vsphere::{
    CloneRequest, DiskChanges, Error, ExtraDisk, Located, Machines, Placement, Resize,
    ServerIdentity, Shape, TaskFacts, VmFacts,
};

/// What a session resolved once: inventory paths to references, port groups.
#[derive(Default)]
pub struct PlacementCache {
    paths: Mutex<HashMap<String, ManagedObjectReference>>,
    networks: Mutex<HashMap<(String, String), Network>>,
    /// Template reference -> its devices.
    devices: Mutex<HashMap<String, Vec<AnyVirtualDevice>>>,
    /// Host reference -> its name.
    hosts: Mutex<HashMap<String, String>>,
    /// A standalone host's compute resource (its inventory path) -> the host.
    pub(super) standalone_hosts: Mutex<HashMap<String, Located>>,
    /// The REST clients (content libraries): for lookups, and for deploys
    /// (a longer deadline).
    pub(super) rest: tokio::sync::OnceCell<vsphere_client::rest::RestClient>,
    pub(super) rest_deploy: tokio::sync::OnceCell<vsphere_client::rest::RestClient>,
}

impl PlacementCache {
    fn clear(&self) {
        if let Ok(mut p) = self.paths.lock() {
            p.clear();
        }
        if let Ok(mut n) = self.networks.lock() {
            n.clear();
        }
        if let Ok(mut d) = self.devices.lock() {
            d.clear();
        }
        if let Ok(mut h) = self.standalone_hosts.lock() {
            h.clear();
        }
    }

    /// Remembers a host's name (for the status mirror, see `named_host`).
    pub(super) fn name_host(&self, host: &str, name: &str) {
        if let Ok(mut hosts) = self.hosts.lock() {
            hosts.insert(host.to_owned(), name.to_owned());
        }
    }
}

impl std::fmt::Debug for PlacementCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PlacementCache")
    }
}

fn vm_ref(value: &str) -> ManagedObjectReference {
    ManagedObjectReference {
        type_: "VirtualMachine".into(),
        value: value.into(),
    }
}

fn firmware(firmware: Firmware) -> VmFirmware {
    match firmware {
        Firmware::Bios => VmFirmware::Bios,
        Firmware::Efi => VmFirmware::Efi { secure_boot: false },
        Firmware::EfiSecure => VmFirmware::Efi { secure_boot: true },
    }
}

fn provisioning(provisioning: Provisioning) -> DiskProvisioning {
    match provisioning {
        Provisioning::Thin => DiskProvisioning::Thin,
        Provisioning::Thick => DiskProvisioning::Thick,
        Provisioning::EagerZeroed => DiskProvisioning::EagerZeroedThick,
    }
}

impl VCenterSession {
    /// The object at an inventory path, cached for the session.
    pub(super) async fn path(&self, path: &str) -> Result<Option<ManagedObjectReference>, Error> {
        self.lookup(path, false).await
    }

    /// The object at an inventory path: from the session's cache unless
    /// `fresh`; vCenter's answer is remembered (or forgotten, when none).
    pub(super) async fn lookup(
        &self,
        path: &str,
        fresh: bool,
    ) -> Result<Option<ManagedObjectReference>, Error> {
        if !fresh {
            if let Some(found) = self
                .placement()
                .paths
                .lock()
                .ok()
                .and_then(|p| p.get(path).cloned())
            {
                return Ok(Some(found));
            }
        }
        let found = self
            .client()
            .search_inventory_path(path)
            .await
            .map_err(|e| error(&format!("looking up {path}"), &e))?;
        match &found {
            Some(r) => self.remember(path, r),
            None => {
                if let Ok(mut paths) = self.placement().paths.lock() {
                    paths.remove(path);
                }
            }
        }
        Ok(found)
    }

    /// Caches `found` as the object at `path` for the session.
    pub(super) fn remember(&self, path: &str, found: &ManagedObjectReference) {
        if let Ok(mut paths) = self.placement().paths.lock() {
            paths.insert(path.to_string(), found.clone());
        }
    }

    pub(super) async fn required(
        &self,
        path: &str,
        what: &str,
    ) -> Result<ManagedObjectReference, Error> {
        self.path(path)
            .await?
            .ok_or_else(|| Error::fault("NotFound", format!("{what} {path} not found")))
    }

    /// The template a clone copies: its reference, or looked up by name in the datacenter's VM folder.
    pub(super) async fn template_of(
        &self,
        request: &CloneRequest,
    ) -> Result<ManagedObjectReference, Error> {
        match &request.template_mo_ref {
            Some(r) => Ok(vm_ref(r)),
            None => {
                self.required(
                    &format!(
                        "{}/vm/{}",
                        escape_name(&request.datacenter),
                        escape_name(&request.template_name)
                    ),
                    "template",
                )
                .await
            }
        }
    }

    /// A template's devices (the clone's device changes are computed from
    /// them), read once per session: templates do not change under a clone.
    async fn template_devices(
        &self,
        template: &ManagedObjectReference,
    ) -> Result<Vec<AnyVirtualDevice>, Error> {
        if let Some(found) = self
            .placement()
            .devices
            .lock()
            .ok()
            .and_then(|d| d.get(&template.value).cloned())
        {
            return Ok(found);
        }
        let source = self
            .client()
            .properties::<mo::VirtualMachine>(&["config.hardware.device"])
            .map_err(|e| error("reading the template", &e))?
            .get(template)
            .await
            .map_err(|e| error(&format!("reading template {}", template.value), &e))?;
        let devices = source.config.map(|c| c.hardware.device).unwrap_or_default();
        if let Ok(mut cache) = self.placement().devices.lock() {
            cache.insert(template.value.clone(), devices.clone());
        }
        Ok(devices)
    }

    /// The VM's host by name: read once per host and session (a resync
    /// from the update stream costs no call); its reference when the name
    /// cannot be read (a label is no reason to fail a reconcile).
    async fn named_host(&self, mut vm: VmFacts) -> VmFacts {
        if vm.host.is_empty() {
            return vm;
        }
        let cached = self
            .placement()
            .hosts
            .lock()
            .ok()
            .and_then(|h| h.get(&vm.host).cloned());
        if let Some(name) = cached {
            vm.host = name;
            return vm;
        }
        let host = ManagedObjectReference {
            type_: "HostSystem".into(),
            value: vm.host.clone(),
        };
        let name = match self.client().properties::<mo::HostSystem>(&["name"]) {
            Ok(query) => query.get(&host).await.ok().and_then(|h| h.name),
            Err(_) => None,
        };
        if let Some(name) = name {
            self.placement().name_host(&vm.host, &name);
            vm.host = name;
        }
        vm
    }

    /// `config` with `disks` added, each on its datastore.
    async fn add_disks(
        &self,
        mut config: ConfigSpec,
        datacenter: &str,
        disks: &[ExtraDisk],
    ) -> Result<ConfigSpec, Error> {
        for disk in disks {
            let datastore = self
                .disk_datastore(
                    datacenter,
                    &disk.datastore,
                    disk.datastore_cluster.as_deref(),
                )
                .await?;
            config = config.add_disk(
                disk.size_gib as i64 * 1024 * 1024,
                provisioning(disk.provisioning),
                Some(DiskPlacement {
                    datastore_name: disk.datastore.clone(),
                    datastore,
                }),
            );
        }
        Ok(config)
    }

    async fn network(&self, datacenter: &str, port_group: &str) -> Result<Network, Error> {
        let key = (datacenter.to_string(), port_group.to_string());
        if let Some(found) = self
            .placement()
            .networks
            .lock()
            .ok()
            .and_then(|n| n.get(&key).cloned())
        {
            return Ok(found);
        }
        let dc = self
            .required(&escape_name(datacenter), "datacenter")
            .await?;
        let found = self
            .client()
            .finder()
            .under(dc)
            .network(port_group)
            .await
            .map_err(|e| error(&format!("port group {port_group} in {datacenter}"), &e))?;
        if let Ok(mut networks) = self.placement().networks.lock() {
            networks.insert(key, found.clone());
        }
        Ok(found)
    }

    async fn config_spec(
        &self,
        datacenter: &str,
        shape: &Shape,
        instance_uuid: &str,
    ) -> Result<ConfigSpec, Error> {
        let mut config = ConfigSpec::new()
            .cpus(shape.cpus)
            .memory_mb(shape.memory_mib)
            .instance_uuid(instance_uuid)
            .firmware(firmware(shape.firmware));
        if shape.hot_add_cpu {
            config = config.cpu_hot_add(true);
        }
        if shape.hot_add_memory {
            config = config.memory_hot_add(true);
        }
        if shape.vtpm {
            config = config.vtpm();
        }
        if let Some(gib) = shape.root_disk_gib {
            config = config.grow_disk(0, gib as i64 * 1024 * 1024);
        }
        config = self
            .add_disks(config, datacenter, &shape.extra_disks)
            .await?;
        if !shape.nics.is_empty() {
            config = config.replace_nics();
        }
        for nic in &shape.nics {
            let network = self.network(datacenter, &nic.port_group).await?;
            config = config.nic_spec(NicSpec {
                network,
                adapter: NicAdapter::Vmxnet3,
                mac_address: Some(nic.mac_address.clone()),
            });
        }
        for (key, value) in &shape.extra_config {
            config = config.extra_config(key.clone(), value.clone());
        }
        Ok(config)
    }
}

impl Machines for VCenterSession {
    async fn find_vm(&self, instance_uuid: &str, fresh: bool) -> Result<Option<VmFacts>, Error> {
        if let Some(found) = self
            .watch()
            .filter(|_| !fresh)
            .and_then(|w| w.by_uuid(instance_uuid))
        {
            return Ok(Some(self.named_host(found).await));
        }
        let client = self.client();
        let Some(found) = client
            .search_vm_by_uuid(instance_uuid, true, None)
            .await
            .map_err(|e| error("looking up the VM by instance UUID", &e))?
        else {
            return Ok(None);
        };
        // Destroyed between the two calls: gone.
        self.vm(&found.value, true).await
    }

    async fn vm(&self, mo_ref: &str, fresh: bool) -> Result<Option<VmFacts>, Error> {
        if let Some(found) = self
            .watch()
            .filter(|_| !fresh)
            .and_then(|w| w.by_ref(mo_ref))
        {
            return Ok(Some(self.named_host(found).await));
        }
        let query = self
            .client()
            .properties::<mo::VirtualMachine>(VM_PROPERTIES)
            .map_err(|e| error("reading the VM", &e))?;
        match query.get(&vm_ref(mo_ref)).await {
            Ok(vm) => Ok(Some(self.named_host(facts_of(&vm)).await)),
            Err(e) if e.is_fault::<ManagedObjectNotFound>() => Ok(None),
            Err(e) => Err(error(&format!("reading {mo_ref}"), &e)),
        }
    }

    async fn task(&self, mo_ref: &str) -> Result<Option<TaskFacts>, Error> {
        let task = self.client().task(ManagedObjectReference {
            type_: "Task".into(),
            value: mo_ref.into(),
        });
        match task.info().await {
            Ok(info) => Ok(Some(task_facts(&info))),
            Err(e) if e.is_fault::<ManagedObjectNotFound>() => Ok(None),
            Err(e) => Err(error(&format!("reading task {mo_ref}"), &e)),
        }
    }

    async fn wait_task(
        &self,
        mo_ref: &str,
        timeout: Duration,
        mut on_progress: impl FnMut(&TaskFacts) + Send,
    ) -> Result<TaskFacts, Error> {
        let task = self.client().task(ManagedObjectReference {
            type_: "Task".into(),
            value: mo_ref.into(),
        });
        match task
            .wait_with_progress(Some(timeout), |info| on_progress(&task_facts(info)))
            .await
        {
            Ok(info) => Ok(task_facts(&info)),
            // A failed task is a result, not an error of the wait: the step reports its fault.
            Err(e) if e.kind() == vsphere_client::ErrorKind::Fault => self
                .task(mo_ref)
                .await?
                .ok_or_else(|| error(&format!("task {mo_ref}"), &e)),
            // The wait's own bound (no cause): the task goes on. A call of the
            // wait that got no answer (a cause) is vCenter not answering.
            Err(e)
                if e.kind() == vsphere_client::ErrorKind::Timeout
                    && e.timeout_cause().is_none() =>
            {
                Err(Error::timeout(format!("waiting for task {mo_ref}: {e}")))
            }
            Err(e) => Err(error(&format!("waiting for task {mo_ref}"), &e)),
        }
    }

    async fn place(&self, request: &CloneRequest) -> Result<Placement, Error> {
        self.decide_placement(request).await
    }

    async fn start_clone(&self, request: &CloneRequest) -> Result<String, Error> {
        let template = self.template_of(request).await?;
        let placement = match &request.placement {
            Some(placement) => placement.clone(),
            None => self.decide_placement(request).await?,
        };
        let config = self
            .config_spec(&request.datacenter, &request.shape, &request.instance_uuid)
            .await?;
        let spec = placed_clone_spec(&placement).config(config);
        self.clone_source(&template, request, &placement, spec)
            .await
    }

    async fn start_reconfigure(&self, vm: &str, shape: &Shape) -> Result<String, Error> {
        // Configuration only: no device is touched, so no device list is needed.
        let mut config = ConfigSpec::new()
            .cpus(shape.cpus)
            .memory_mb(shape.memory_mib)
            .firmware(firmware(shape.firmware));
        if shape.hot_add_cpu {
            config = config.cpu_hot_add(true);
        }
        if shape.hot_add_memory {
            config = config.memory_hot_add(true);
        }
        let spec = config
            .to_vim(&[])
            .map_err(|e| error("the configuration", &e))?;
        let task = self
            .client()
            .vim()
            .reconfig_vm_task(&vm_ref(vm), &spec)
            .await
            .map_err(|e| error(&format!("reconfiguring {vm}"), &e))?;
        Ok(task.value)
    }

    async fn start_resize(&self, vm: &str, resize: &Resize) -> Result<String, Error> {
        let mut spec = ConfigSpec::new()
            .cpus(resize.cpus)
            .memory_mb(resize.memory_mib)
            .to_vim(&[])
            .map_err(|e| error("the configuration", &e))?;
        // vCenter applies it only to the configuration it was decided on.
        spec.change_version = resize.change_version.clone().filter(|v| !v.is_empty());
        let task = self
            .client()
            .vim()
            .reconfig_vm_task(&vm_ref(vm), &spec)
            .await
            .map_err(|e| error(&format!("resizing {vm}"), &e))?;
        Ok(task.value)
    }

    async fn start_disks(&self, vm: &str, changes: &DiskChanges) -> Result<String, Error> {
        // The device changes are computed against the VM's disks as they are.
        let current = self
            .client()
            .properties::<mo::VirtualMachine>(&["config.hardware.device"])
            .map_err(|e| error("reading the VM's devices", &e))?
            .get(&vm_ref(vm))
            .await
            .map_err(|e| error(&format!("reading {vm}'s devices"), &e))?;
        let devices = current
            .config
            .map(|c| c.hardware.device)
            .unwrap_or_default();
        let keys: Vec<i32> = devices
            .iter()
            .filter_map(|d| match d {
                AnyVirtualDevice::VirtualDisk(disk) => Some(disk.virtual_device.key),
                _ => None,
            })
            .collect();
        let mut config = ConfigSpec::new();
        for (key, kib) in &changes.grow {
            let index = keys
                .iter()
                .position(|k| k == key)
                .ok_or_else(|| Error::fault("NotFound", format!("{vm} has no disk {key}")))?;
            config = config.grow_disk(index, *kib);
        }
        config = self
            .add_disks(config, &changes.datacenter, &changes.add)
            .await?;
        let mut spec = config
            .to_vim(&devices)
            .map_err(|e| error("the disk changes", &e))?;
        spec.change_version = changes.change_version.clone().filter(|v| !v.is_empty());
        let task = self
            .client()
            .vim()
            .reconfig_vm_task(&vm_ref(vm), &spec)
            .await
            .map_err(|e| error(&format!("changing {vm}'s disks"), &e))?;
        Ok(task.value)
    }

    async fn start_power_on(&self, vm: &str) -> Result<String, Error> {
        let task = self
            .client()
            .vim()
            .power_on_vm_task(&vm_ref(vm), None)
            .await
            .map_err(|e| error(&format!("powering {vm} on"), &e))?;
        Ok(task.value)
    }

    async fn power_off(&self, vm: &str, graceful: Option<Duration>) -> Result<(), Error> {
        let handle = self.client().vm(vm_ref(vm));
        let result = match graceful {
            Some(timeout) => handle.shutdown(timeout).await.map(|_| ()),
            None => handle.power_off().await,
        };
        match result {
            Ok(()) => Ok(()),
            // Already off (raced with the guest or a user): what we wanted.
            Err(e) if e.is_fault::<InvalidPowerState>() => Ok(()),
            Err(e) => Err(error(&format!("powering {vm} off"), &e)),
        }
    }

    async fn start_destroy(&self, vm: &str) -> Result<String, Error> {
        let task = self
            .client()
            .vim()
            .destroy_task(&vm_ref(vm))
            .await
            .map_err(|e| error(&format!("destroying {vm}"), &e))?;
        Ok(task.value)
    }

    fn cached(&self) -> bool {
        self.watch().is_some_and(super::watch::VmWatch::is_live)
    }

    fn server(&self) -> ServerIdentity {
        let url = self.client().url();
        let host = match (url.host(), url.port_u16()) {
            (Some(h), Some(p)) => format!("{h}:{p}"),
            (Some(h), None) => h.to_string(),
            _ => String::new(),
        };
        ServerIdentity {
            host,
            server_guid: self
                .client()
                .service_content()
                .about
                .instance_uuid
                .clone()
                .unwrap_or_default(),
        }
    }
}

/// The name of the snapshot a template's linked clones are made from, when
/// banlieue takes it.
pub const LINKED_CLONE_SNAPSHOT: &str = "banlieue-linked-clone-base";

impl VCenterSession {
    /// Sends the clone of `template` with `spec` (placement and
    /// configuration): a full copy of its disks, the root disk with the
    /// class's provisioning (a disk locator vCenter converts it with while
    /// copying), or a linked clone of its current snapshot, taken first if
    /// it has none (see [`super::linked`]: the template is turned into a VM
    /// in `placement`'s pool for it, and back).
    async fn clone_source(
        &self,
        template: &ManagedObjectReference,
        request: &CloneRequest,
        placement: &Placement,
        mut spec: CloneSpec,
    ) -> Result<String, Error> {
        let source = self.client().vm(template.clone());
        let sent = if request.linked {
            self.linked_clone_base(template, &request.template_name, Some(placement))
                .await?;
            // Reads the template's devices and current snapshot in one call.
            source.start_clone(&request.name, &spec.linked()).await
        } else {
            if let Some(root) = request.shape.root_disk_provisioning {
                spec = spec.disk_provisioning(0, provisioning(root));
            }
            let devices = self.template_devices(template).await?;
            source
                .start_clone_with_devices(&request.name, &spec, &devices)
                .await
        };
        let task = sent.map_err(|e| {
            if e.is_fault::<ManagedObjectNotFound>() {
                // A folder, pool, datastore or template cached earlier is gone
                // (removed, or re-created by an administrator): resolve anew next time.
                self.placement().clear();
            }
            error(
                &format!("cloning {} as {}", request.template_name, request.name),
                &e,
            )
        })?;
        Ok(task.reference().value.clone())
    }
}

/// A shared handle so the cache outlives a session value.
pub type SharedPlacement = Arc<PlacementCache>;
