//! The condition reasons of each kind, with what each means. The controllers
//! set these constants; `crdgen` lists every one of them in the API
//! reference. Where the user guide names a case (its troubleshooting table),
//! the reason is the guide's: TLS and CA bundle problems are `ConnectFailed`,
//! a VirtualMachine whose candidate Providers are not Ready is
//! `ImageNotReady` (the image cannot be ready on them); the detail is in the
//! message.

/// A reason as the API reference lists it: the reason, the condition it is
/// set on, what it means.
pub type Documented = (&'static str, &'static str, &'static str);

/// Defines one `pub const` per reason and `ALL`, each [`Documented`].
macro_rules! reasons {
    ($($name:ident = $value:literal, $condition:literal => $meaning:literal;)*) => {
        $(#[doc = $meaning] pub const $name: &str = $value;)*
        /// Every reason of this module.
        pub const ALL: &[super::Documented] = &[$(($value, $condition, $meaning)),*];
    };
}

/// A Provider's `Ready`, `Deleting` and (operator-managed) `WorkloadReady` conditions.
pub mod provider {
    reasons! {
        CONNECTED = "Connected", "Ready=True" =>
            "Logged in to vCenter and walked its inventory: `status.failureDomains` is current.";
        INVALID_SPEC = "InvalidSpec", "Ready=False" =>
            "The spec breaks a rule beyond the schema (the message names the field); waits for the spec to change.";
        SECRET_MISSING = "SecretMissing", "Ready=False" =>
            "The `spec.connection.credentialsRef` Secret does not exist; looked at again with backoff.";
        SECRET_INVALID = "SecretInvalid", "Ready=False" =>
            "The Secret has no non-empty `username` or `password` key; looked at again with backoff.";
        CONNECT_FAILED = "ConnectFailed", "Ready=False" =>
            "Bad credentials, endpoint or TLS: vCenter refused the login or could not be reached, its certificate \
             is not trusted, or `spec.connection.caBundle` is unusable (its ConfigMap or Secret missing, no PEM \
             certificate under its key); the message says which. Retried with backoff.";
        VCENTER_UNRESPONSIVE = "VCenterUnresponsive", "Ready=False" =>
            "vCenter did not answer a call within `spec.connection.callDeadline`; retried with backoff on a new session.";
        INVENTORY_FAILED = "InventoryFailed", "Ready=False" =>
            "Logged in, but walking the inventory failed; retried with backoff. The last known failure domains are kept.";
        DUPLICATE_FAILURE_DOMAIN = "DuplicateFailureDomainName", "Ready=False" =>
            "Two (datacenter, cluster) pairs resolve to one failure-domain name (two overrides, or an override \
             and a generated name); the message names both.";
        RESOURCE_POOL_NOT_FOUND = "ResourcePoolNotFound", "Ready=False" =>
            "A resource pool of `spec.placement` is not in a failure domain it applies to (or its name is \
             ambiguous there); the message names the pool and the failure domain. Looked at again with backoff. \
             The last known failure domains are kept.";
        FOLDER_NOT_FOUND = "FolderNotFound", "Ready=False" =>
            "A folder of `spec.placement` cannot be had in a datacenter: a level above its last is missing (only \
             the last level is made), or a non-folder is in the way, or making it failed; the message names the \
             folder and the datacenter. Looked at again with backoff. The last known failure domains are kept.";
        CACHES_NOT_SYNCED = "CachesNotSynced", "Ready=False" =>
            "The provider role's watch caches are not synced yet, so the Provider is not reconciled; see the \
             provider's log.";
        WAITING_FOR_MACHINES = "WaitingForVSphereMachines", "Deleting=True" =>
            "The Provider is deleted and kept while VSphereMachines use it (named in the message), so they can \
             still destroy their VMs.";
        WORKLOAD_AVAILABLE = "WorkloadAvailable", "WorkloadReady=True" =>
            "Operator-managed install: a replica of the Provider's own provider workload (Deployment \
             `banlieue-provider-<name>`) is available; the message gives the replicas and the image.";
        WORKLOAD_UNAVAILABLE = "WorkloadUnavailable", "WorkloadReady=False" =>
            "Operator-managed install: no replica of the Provider's provider workload is available yet (starting, \
             rolling out a new image, or failing: see its pods).";
    }
}

/// A VMImage's `status.perProvider[].reason`.
pub mod vmimage {
    reasons! {
        TEMPLATE_FOUND = "TemplateFound", "ready: true" =>
            "The template exists in every datacenter of the Provider's failure domains.";
        TEMPLATE_NOT_FOUND = "TemplateNotFound", "ready: false" =>
            "The template is absent in a datacenter (named), or the Provider has no failure domains.";
        CONNECT_FAILED = "ConnectFailed", "ready: false" =>
            "The Provider is not Ready (its reason in the message) or vCenter could not be reached; retried with backoff.";
        VCENTER_UNRESPONSIVE = "VCenterUnresponsive", "ready: false" =>
            "vCenter did not answer the lookup within the Provider's call deadline; retried with backoff.";
        LOOKUP_FAILED = "LookupFailed", "ready: false" =>
            "Looking the template up failed; retried with backoff.";
        NO_VSPHERE_SOURCE = "NoVSphereSource", "ready: false" =>
            "The image has no `Template` or `ContentLibraryItem` source for the Provider's class.";
        LIBRARY_ITEM_DEPLOYED = "LibraryItemDeployed", "ready: true" =>
            "The content library item is deployed as a template in every datacenter of the Provider's failure \
             domains (`templates` names each).";
        LIBRARY_ITEM_NOT_FOUND = "LibraryItemNotFound", "ready: false" =>
            "The content library (named in the message) does not exist, or has no item of that name; \
             looked at again at each resync.";
        LIBRARY_ITEM_UNSUPPORTED = "LibraryItemUnsupported", "ready: false" =>
            "The content library item is neither an OVF template nor a VM template (an ISO, a file...).";
        DEPLOY_FAILED = "DeployFailed", "ready: false" =>
            "Deploying the content library item into a datacenter (named, with the library) failed; retried \
             with backoff.";
    }
}

/// A VirtualMachine's `Scheduled` and `Ready` conditions (`Ready` otherwise
/// mirrors its VSphereMachine's `Ready`, reason included).
pub mod virtualmachine {
    reasons! {
        SCHEDULED = "Scheduled", "Scheduled=True" =>
            "Placed: `status.scheduled` names the Provider and failure domain, and the VSphereMachine exists.";
        INVALID_SPEC = "InvalidSpec", "Scheduled=False" =>
            "The spec breaks a rule beyond the schema (the message names the field).";
        VMCLASS_NOT_FOUND = "VMClassNotFound", "Scheduled=False" => "The VMClass of `spec.classRef` does not exist.";
        VMIMAGE_NOT_FOUND = "VMImageNotFound", "Scheduled=False" => "The VMImage of `spec.imageRef` does not exist.";
        INVALID_VMCLASS = "InvalidVMClass", "Scheduled=False" =>
            "The VMClass breaks a rule beyond the schema (the message names the field).";
        INVALID_VMIMAGE = "InvalidVMImage", "Scheduled=False" =>
            "The VMImage breaks a rule beyond the schema (the message names the field).";
        FIRMWARE_MISMATCH = "FirmwareMismatch", "Scheduled=False" =>
            "The VMImage's template was built for another boot firmware than the VMClass asks \
             (`spec.template.firmware` `bios` against `efi` or `efi-secure`, or the other way round): \
             its clones would not boot. Make them agree.";
        MACHINE_CONFLICT = "VSphereMachineConflict", "Scheduled=False" =>
            "A VSphereMachine of the same name exists and is not owned by this VirtualMachine.";
        NO_PROVIDER_MATCHED = "NoProviderMatched", "Scheduled=False" =>
            "No Provider matches `placement.providerSelector`, or none advertises the storage or network \
             classes or features the VMClass needs, has a failure domain matching `failureDomainSelector` \
             that offers them, or has a source in the VMImage; a deleted Provider takes no new VM. The message \
             says what failed on each Provider.";
        TPM_UNSUPPORTED = "TpmUnsupported", "Scheduled=False" =>
            "The VMClass wants a vTPM but no candidate Provider advertises the `vtpm` feature.";
        IMAGE_NOT_READY = "ImageNotReady", "Scheduled=False" =>
            "The VMImage is not ready on any candidate Provider: its per-Provider reason, or the Provider is \
             not Ready (its reason in the message), so the image cannot be ready on it.";
        NOT_SCHEDULED = "NotScheduled", "Ready=False" => "Not scheduled: the `Scheduled` reason and message follow.";
        WAITING_FOR_PROVIDER = "WaitingForProvider", "Ready=False" =>
            "The VSphereMachine exists but has not reported readiness yet.";
    }
}

/// A VSphereMachine's `Ready` condition.
pub mod vspheremachine {
    reasons! {
        CLONING = "Cloning", "Ready=False" => "The clone task is being sent or is in flight (its progress in the message).";
        RECONFIGURING = "Reconfiguring", "Ready=False" => "The clone is being given the class's CPUs, memory and firmware.";
        POWERING_ON = "PoweringOn", "Ready=False" => "The VM is being powered on.";
        POWERING_OFF = "PoweringOff", "Ready=False" => "The guest is being shut down (a hard power-off after a minute).";
        WAITING_FOR_IP = "WaitingForIP", "Ready=False" => "The VM is on; waiting for the guest to report an IP address.";
        WAITING_FOR_IP_ADDRESS = "WaitingForIPAddress", "Ready=False" =>
            "A NIC's `ipam.pool` claim (Cluster API `IPAddressClaim`, in the Provider's namespace) is not bound \
             yet (the message names the claim, the pool and the claim's own reason), or a claim on a pool the \
             spec no longer names is being released; nothing is cloned until every pool NIC has its address. \
             Retried with backoff.";
        POOL_EXHAUSTED = "PoolExhausted", "Ready=False" =>
            "A NIC's IP pool has no free address: its claim says `PoolExhausted` (the message names the claim \
             and the pool); nothing is cloned. Retried with backoff, and cloned once an address is released \
             or the pool grows.";
        FAILED = "Failed", "Ready=False" =>
            "A task or call failed, or the machine cannot be made as asked; the message says why.";
        PLACEMENT_NOT_FOUND = "PlacementNotFound", "Ready=False" =>
            "The clone's resource pool, the folder above its VM folder, its datastore or datastore cluster is \
             not in vCenter (the message names it; a VirtualMachine's own `placement` is only verified here). \
             Nothing is cloned; retried with backoff.";
        LINKED_CLONE_BASE_BUSY = "LinkedCloneBaseBusy", "Ready=False" =>
            "A linked clone's template is busy: another provider is giving it its base snapshot (a line in \
             its notes, younger than 15 minutes, says so; the message says since when), or vCenter reports a \
             task in progress on it. Nothing is cloned; retried with backoff, and an older line is taken over.";
        DELETING = "Deleting", "Ready=False" => "The VM is being powered off and destroyed.";
        PROVIDER_NOT_FOUND = "ProviderNotFound", "Ready=False" =>
            "The Provider the machine names does not exist: recreate it, or remove the finalizer to leave the VM.";
        VCENTER_UNRESPONSIVE = "VCenterUnresponsive", "Ready=False" =>
            "vCenter did not answer within the Provider's call deadline; retried with backoff on a new session.";
        POWERED_ON = "PoweredOn", "Ready=True" => "The VM is on (with an IP address when it needs one).";
        POWERED_OFF = "PoweredOff", "Ready=True" => "The VM is off, as asked.";
        POOL_CHANGED = "PoolChanged", "IPAddressesUpToDate=False" =>
            "After the clone, a NIC's `ipam.pool` names another pool than its claim's: the VM keeps the address \
             its guest was configured with (the claim on the old pool is kept); re-create the VirtualMachine to \
             take an address from the new pool. Before the clone the claim is replaced instead.";
        POOL_REMOVED = "PoolRemoved", "IPAddressesUpToDate=False" =>
            "After the clone, a NIC with a pool claim was removed from the spec or no longer asks for a pool: the \
             claim and its address are kept while the VM (configured with it) exists, and released when the \
             machine is deleted. Before the clone the claim is released at once.";
        RESTARTING = "Restarting", "Ready=False" =>
            "The guest is being restarted for the VirtualMachine's `banlieue.io/restart-requested-at` annotation \
             (shut down, hard after a minute, then powered on); once per distinct value, handled in \
             `status.restartedAt`.";
        UP_TO_DATE = "UpToDate", "Reconfigured=True, IPAddressesUpToDate=True" =>
            "`Reconfigured`: the VM has the CPUs, memory and disks its spec asks for (its VMClass's). \
             `IPAddressesUpToDate`: every IP pool claim of the machine is one its spec asks for (set once the \
             condition has been False).";
        APPLYING = "Applying", "Reconfigured=False" =>
            "A change is being applied: CPUs or memory live (what grows, on a VM with hot add) or while the \
             VM is off, recorded in `status.resize` before it is sent; disks grown or added (live), the added \
             ones recorded in `status.disks` before they are sent.";
        DISK_SHRINK_REFUSED = "DiskShrinkRefused", "Reconfigured=False" =>
            "A disk of the spec is smaller than the VM's: disks never shrink, and nothing is attempted (the \
             message names the disk and both sizes). Other changes go on.";
        DISK_KEPT = "DiskKept", "Reconfigured=False" =>
            "A disk the VM has is no longer in its VMClass: it is kept with its data (never deleted by the \
             operator); remove it in vCenter if it is not wanted.";
        POWER_CYCLE_REQUIRED = "PowerCycleRequired", "Reconfigured=False" =>
            "The change cannot be applied to the running VM (fewer CPUs or less memory, or no hot add): it is \
             applied the next time the VM is off, or at once (a restart) when the VirtualMachine's \
             `spec.updatePolicy` is `AllowRestart`.";
    }
}

/// A VMSnapshot's `Ready` condition.
pub mod vmsnapshot {
    reasons! {
        CREATING = "Creating", "Ready=False" =>
            "The snapshot is being requested or taken (the task in `status.task`).";
        CREATED = "Created", "Ready=True" =>
            "The snapshot exists in vCenter: `status.snapshotID`, `creationTime` and, where vCenter reports it, \
             `sizeBytes` describe it.";
        REVERTING = "Reverting", "Ready=False" => "The VM is being reverted to the snapshot (`spec.revertRequest`).";
        WAITING_FOR_VM = "WaitingForVM", "Ready=False" =>
            "The VirtualMachine of `spec.vmRef` has no VM in vCenter yet (no VSphereMachine, or not cloned); \
             looked at again every 30 seconds.";
        VM_BUSY = "VMBusy", "Ready=False" =>
            "vCenter refused the snapshot because another task runs on the VM (perhaps a snapshot request sent \
             before a restart); the snapshot is looked for again, and asked for again, with backoff.";
        SNAPSHOT_LOST = "SnapshotLost", "Ready=False" =>
            "The snapshot was taken but is no longer in vCenter (removed by hand, or its VM replaced); it is not \
             taken again, since it would be another point in time. Delete the VMSnapshot.";
        FAILED = "Failed", "Ready=False" =>
            "Taking the snapshot failed (the fault in the message); retried with backoff.";
        DELETING = "Deleting", "Ready=False" =>
            "The snapshot is being removed (its disks consolidated); the finalizer stays until vCenter confirms it is gone.";
        PROVIDER_NOT_FOUND = "ProviderNotFound", "Ready=False" =>
            "The Provider of the VM's VSphereMachine does not exist: recreate it, or remove the finalizer to leave \
             the snapshot in vCenter.";
        VCENTER_UNRESPONSIVE = "VCenterUnresponsive", "Ready=False" =>
            "vCenter did not answer within the Provider's call deadline; retried with backoff on a new session.";
    }
}

/// A kind's reasons as the API reference lists them, with a note on where
/// they appear.
/// The `Ready` condition of the `IPAddressClaim`s the built-in pool binds.
pub mod ippool {
    reasons! {
        BOUND = "Bound", "Ready=True" =>
            "The claim has an address from the pool: `status.addressRef` names its `IPAddress` (the claim's name).";
        POOL_NOT_FOUND = "PoolNotFound", "Ready=False" =>
            "The claim's `spec.poolRef` names an IPPool that does not exist in the claim's namespace; retried with backoff.";
        INVALID_POOL = "InvalidPool", "Ready=False" =>
            "The IPPool's spec does not parse or is inconsistent (the message names the field); retried when it changes.";
        POOL_EXHAUSTED = "PoolExhausted", "Ready=False" =>
            "Every address of the pool is allocated or excluded (the message names the pool and its size); retried \
             with backoff, bound as soon as an address is released.";
    }
}

pub fn of_kind(kind: &str) -> Option<(&'static str, &'static [Documented])> {
    match kind {
        "Provider" => Some(("The reasons of `status.conditions`.", provider::ALL)),
        "VMImage" => Some((
            "The reasons of `status.perProvider[].reason`.",
            vmimage::ALL,
        )),
        "VirtualMachine" => Some((
            "The reasons of `status.conditions`; once the VSphereMachine reports, `Ready` is its `Ready` \
             (reason and message); its `IPAddressesUpToDate`, when it has one, and its `Reconfigured` \
             are mirrored too (see VSphereMachine).",
            virtualmachine::ALL,
        )),
        "VSphereMachine" => Some((
            "The reasons of `status.conditions` (`Ready`; `Reconfigured` once the VM is provisioned; \
             `IPAddressesUpToDate` once an IP pool claim differs from the spec).",
            vspheremachine::ALL,
        )),
        "VMSnapshot" => Some((
            "The reasons of `status.conditions`; a revert's outcome is in `status.lastRevert`.",
            vmsnapshot::ALL,
        )),
        "IPPool" => Some((
            "The reasons of the `Ready` condition of the Cluster API `IPAddressClaim`s the pool binds.",
            ippool::ALL,
        )),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    #[test]
    fn each_kind_names_a_reason_once_and_shared_ones_agree() {
        for kind in [
            "Provider",
            "VMImage",
            "VirtualMachine",
            "VSphereMachine",
            "VMSnapshot",
        ] {
            let (_, table) = of_kind(kind).expect("a table");
            let names: BTreeSet<&str> = table.iter().map(|(r, _, _)| *r).collect();
            assert_eq!(names.len(), table.len(), "{kind}: a reason listed twice");
        }
        assert_eq!(vmimage::CONNECT_FAILED, provider::CONNECT_FAILED);
        assert_eq!(
            vmimage::VCENTER_UNRESPONSIVE,
            provider::VCENTER_UNRESPONSIVE
        );
        assert_eq!(
            vspheremachine::VCENTER_UNRESPONSIVE,
            provider::VCENTER_UNRESPONSIVE
        );
        assert_eq!(
            vmsnapshot::VCENTER_UNRESPONSIVE,
            provider::VCENTER_UNRESPONSIVE
        );
        assert_eq!(
            vmsnapshot::PROVIDER_NOT_FOUND,
            vspheremachine::PROVIDER_NOT_FOUND
        );
    }
}
