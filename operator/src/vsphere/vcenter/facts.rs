//! vim25 objects as the boundary's plain facts, and `vsphere-client` errors
//! as the boundary's [`Error`]: the one place the real backend translates.

use vsphere_client::mo;
use vsphere_client::types::{AnyVirtualDevice, TaskInfo, TaskInfoState};

use crate::vsphere::{ConnectParams, Error, ErrorKind, TaskFacts, TaskState, VmFacts};

/// What the lifecycle reads of a VM (the lookup, the update stream).
pub(crate) const VM_PROPERTIES: &[&str] = &[
    "name",
    "config.instanceUuid",
    "runtime.powerState",
    "config.hardware.numCPU",
    "config.hardware.memoryMB",
    "config.firmware",
    "config.bootOptions.efiSecureBootEnabled",
    "config.cpuHotAddEnabled",
    "config.memoryHotAddEnabled",
    "config.changeVersion",
    "runtime.host",
    "config.hardware.device",
    "guest.ipAddress",
    "guest.net",
];

pub(crate) fn facts_of(vm: &mo::VirtualMachine) -> VmFacts {
    let guest = vm.guest.as_ref();
    let mut ips: Vec<String> = guest
        .and_then(|g| g.ip_address.clone())
        .filter(|ip| !ip.is_empty())
        .into_iter()
        .collect();
    for nic in guest.map(|g| g.net.as_slice()).unwrap_or_default() {
        for ip in &nic.ip_address {
            if !ips.contains(ip) {
                ips.push(ip.clone());
            }
        }
    }
    VmFacts {
        mo_ref: vm.mo_ref.value.clone(),
        name: vm.name.clone().unwrap_or_default(),
        instance_uuid: vm
            .config
            .as_ref()
            .and_then(|c| c.instance_uuid.clone())
            .unwrap_or_default(),
        power_state: vm
            .runtime
            .as_ref()
            .map(|r| r.power_state.as_str().to_string())
            .unwrap_or_default(),
        cpus: vm
            .config
            .as_ref()
            .map(|c| c.hardware.num_cpu)
            .unwrap_or_default(),
        memory_mib: vm
            .config
            .as_ref()
            .map(|c| i64::from(c.hardware.memory_mb))
            .unwrap_or_default(),
        ip_addresses: ips,
        firmware: vm
            .config
            .as_ref()
            .and_then(|c| c.firmware.clone())
            .unwrap_or_else(|| "bios".into()),
        secure_boot: vm
            .config
            .as_ref()
            .and_then(|c| c.boot_options.as_ref())
            .and_then(|b| b.efi_secure_boot_enabled)
            .unwrap_or(false),
        cpu_hot_add: vm
            .config
            .as_ref()
            .and_then(|c| c.cpu_hot_add_enabled)
            .unwrap_or(false),
        memory_hot_add: vm
            .config
            .as_ref()
            .and_then(|c| c.memory_hot_add_enabled)
            .unwrap_or(false),
        change_version: vm
            .config
            .as_ref()
            .map(|c| c.change_version.clone())
            .unwrap_or_default(),
        // The reference; the session names it (see `machines`).
        host: vm
            .runtime
            .as_ref()
            .and_then(|r| r.host.as_ref())
            .map(|h| h.value.clone())
            .unwrap_or_default(),
        disks: vm
            .config
            .iter()
            .flat_map(|c| &c.hardware.device)
            .filter_map(|d| match d {
                AnyVirtualDevice::VirtualDisk(disk) => Some((
                    disk.virtual_device.key,
                    match disk.capacity_in_bytes {
                        Some(bytes) if bytes > 0 => bytes / 1024,
                        _ => disk.capacity_in_kb,
                    },
                )),
                _ => None,
            })
            .collect(),
    }
}

pub(crate) fn task_facts(info: &TaskInfo) -> TaskFacts {
    let state = match info.state {
        TaskInfoState::Queued => TaskState::Queued,
        TaskInfoState::Running => TaskState::Running,
        TaskInfoState::Success => TaskState::Success,
        _ => TaskState::Error,
    };
    let error = (state == TaskState::Error).then(|| {
        let e = vsphere_client::task::task_error(info);
        error("the task failed", &e)
    });
    TaskFacts {
        mo_ref: info.task.value.clone(),
        state,
        progress: info.progress,
        error,
        result: vsphere_client::task::task_result_reference(info).map(|r| r.value),
    }
}

/// A failed VM or task operation: vCenter's fault type when it sent one;
/// a call that got no answer within its deadline is
/// [`Unresponsive`](ErrorKind::Unresponsive).
pub(crate) fn error(context: &str, e: &vsphere_client::Error) -> Error {
    if e.kind() == vsphere_client::ErrorKind::Timeout {
        return Error::new(
            ErrorKind::Unresponsive,
            format!("{context}: {}", e.report()),
        );
    }
    match e.fault() {
        Some(fault) => Error::fault(
            fault.type_name().unwrap_or("Fault"),
            format!("{context}: {e}"),
        ),
        None => Error::operation(format!("{context}: {e}")),
    }
}

/// A connect failure as the Provider's condition message says it: the
/// endpoint, then the TLS, network or login cause. Never the password.
pub(crate) fn connect_error(params: &ConnectParams, e: &vsphere_client::Error) -> Error {
    use vsphere_client::ErrorKind as K;
    let cause = match e.kind() {
        // The client's TLS message already says why the certificate was refused.
        K::Tls if e.to_string().contains("TLS") => e.to_string(),
        K::Tls => format!("TLS: {e}"),
        K::InvalidLogin => {
            format!(
                "login as {:?} failed: incorrect user name or password ({e})",
                params.username
            )
        }
        K::Fault | K::NotAuthenticated => format!("login as {:?} failed: {e}", params.username),
        K::Transport => format!("unreachable: {}", e.report()),
        K::Timeout => format!("not answering: {}", e.report()),
        K::InvalidConfig => format!("invalid connection settings: {}", e.report()),
        _ => e.report().to_string(),
    };
    let message = format!("connecting to {}: {cause}", params.endpoint);
    let kind = match e.kind() {
        K::Timeout => ErrorKind::Unresponsive,
        _ => ErrorKind::Connect,
    };
    Error::new(kind, message)
}

/// A call failure once connected: a lost connection or session is a connect
/// problem (`ConnectFailed`), no answer within the deadline is
/// `Unresponsive`, anything else is `kind`.
pub(crate) fn call_error(kind: ErrorKind, what: &str, e: &vsphere_client::Error) -> Error {
    use vsphere_client::ErrorKind as K;
    let kind = match e.kind() {
        K::Timeout => ErrorKind::Unresponsive,
        K::Transport | K::Tls | K::NotAuthenticated => ErrorKind::Connect,
        _ => kind,
    };
    Error::new(kind, format!("{what}: {}", e.report()))
}
