//! [`ManagedObject`]: what the property API needs of a generated managed
//! object struct beyond [`ManagedObjectType`]: to be made for a reference.

use crate::mo;
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

// The generated trait has no way to set `mo_ref` or `retrieved`, every struct
// has the fields: one impl per type. A test checks that the list covers the generated table.
macro_rules! managed_objects {
    ($($name:ident),* $(,)?) => {
        $(impl ManagedObject for mo::$name {
            fn set_mo_ref(&mut self, mo_ref: ManagedObjectReference) {
                self.mo_ref = mo_ref;
            }
            fn retrieved(&self) -> &RetrievedPaths {
                &self.retrieved
            }
            fn retrieved_mut(&mut self) -> &mut RetrievedPaths {
                &mut self.retrieved
            }
        })*

        #[cfg(test)]
        pub(crate) const COVERED: &[&str] = &[$(stringify!($name)),*];
    };
}

managed_objects!(
    Alarm,
    AlarmManager,
    AuthorizationManager,
    CertificateManager,
    ClusterComputeResource,
    ClusterEVCManager,
    ClusterProfile,
    ClusterProfileManager,
    ComputeResource,
    ContainerView,
    CryptoManager,
    CryptoManagerHost,
    CryptoManagerHostKMS,
    CryptoManagerKmip,
    CustomFieldsManager,
    CustomizationSpecManager,
    Datacenter,
    Datastore,
    DatastoreNamespaceManager,
    DiagnosticManager,
    DirectPathProfileManager,
    DistributedVirtualPortgroup,
    DistributedVirtualSwitch,
    DistributedVirtualSwitchManager,
    EnvironmentBrowser,
    EventHistoryCollector,
    EventManager,
    ExtensibleManagedObject,
    ExtensionManager,
    FailoverClusterConfigurator,
    FailoverClusterManager,
    FileManager,
    Folder,
    GuestAliasManager,
    GuestAuthManager,
    GuestFileManager,
    GuestOperationsManager,
    GuestProcessManager,
    GuestWindowsRegistryManager,
    HealthUpdateManager,
    HistoryCollector,
    HostAccessManager,
    HostActiveDirectoryAuthentication,
    HostAssignableHardwareManager,
    HostAuthenticationManager,
    HostAuthenticationStore,
    HostAutoStartManager,
    HostBootDeviceSystem,
    HostCacheConfigurationManager,
    HostCertificateManager,
    HostCpuSchedulerSystem,
    HostDatastoreBrowser,
    HostDatastoreSystem,
    HostDateTimeSystem,
    HostDiagnosticSystem,
    HostDirectoryStore,
    HostEsxAgentHostManager,
    HostFirewallSystem,
    HostFirmwareSystem,
    HostGraphicsManager,
    HostHealthStatusSystem,
    HostImageConfigManager,
    HostKernelModuleSystem,
    HostLocalAccountManager,
    HostLocalAuthentication,
    HostMemorySystem,
    HostNetworkSystem,
    HostNvdimmSystem,
    HostPatchManager,
    HostPciPassthruSystem,
    HostPowerSystem,
    HostProfile,
    HostProfileManager,
    HostServiceSystem,
    HostSnmpSystem,
    HostSpecificationManager,
    HostStorageSystem,
    HostSystem,
    HostVFlashManager,
    HostVMotionSystem,
    HostVStorageObjectManager,
    HostVirtualNicManager,
    HostVsanInternalSystem,
    HostVsanSystem,
    HttpNfcLease,
    InventoryView,
    IoFilterManager,
    IpPoolManager,
    IscsiManager,
    LicenseAssignmentManager,
    LicenseManager,
    ListView,
    LocalizationManager,
    ManagedEntity,
    ManagedObjectView,
    MessageBusProxy,
    Network,
    OpaqueNetwork,
    OptionManager,
    OverheadMemoryManager,
    OvfManager,
    PerformanceManager,
    Profile,
    ProfileComplianceManager,
    ProfileManager,
    PropertyCollector,
    PropertyFilter,
    ResourcePlanningManager,
    ResourcePool,
    ScheduledTask,
    ScheduledTaskManager,
    SearchIndex,
    ServiceInstance,
    ServiceManager,
    SessionManager,
    SimpleCommand,
    SiteInfoManager,
    StoragePod,
    StorageQueryManager,
    StorageResourceManager,
    Task,
    TaskHistoryCollector,
    TaskManager,
    TenantTenantManager,
    TransitGateway,
    UserDirectory,
    VStorageObjectManagerBase,
    VcenterVStorageObjectManager,
    View,
    ViewManager,
    VirtualApp,
    VirtualDiskManager,
    VirtualMachine,
    VirtualMachineCompatibilityChecker,
    VirtualMachineGuestCustomizationManager,
    VirtualMachineProvisioningChecker,
    VirtualMachineSnapshot,
    VirtualizationManager,
    VmwareDistributedVirtualSwitch,
    VsanUpgradeSystem,
);

#[cfg(test)]
mod tests {
    use super::COVERED;

    #[test]
    fn every_generated_managed_object_type_is_covered() {
        let missing: Vec<&str> = crate::mo::MANAGED_OBJECTS
            .iter()
            .map(|m| m.name)
            .filter(|name| !COVERED.contains(name))
            .collect();
        assert!(missing.is_empty(), "add to managed_objects!: {missing:?}");
    }
}
