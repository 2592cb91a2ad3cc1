//! A template's linked-clone base snapshot on a real vCenter: vCenter does
//! not snapshot a VM marked as a template, so a template without a current
//! snapshot is turned into a VM (`MarkAsVirtualMachine` into the failure
//! domain's resource pool, on a host of it), snapshotted
//! ([`LINKED_CLONE_SNAPSHOT`], no memory) and marked a template again. It is
//! never powered on.
//!
//! Crashes: before the template is turned into a VM, a line
//! ([`CONVERTING`] and the time) is added to its annotation (the one setting
//! vCenter changes on a template besides its name). A VM bearing it is a
//! template of ours halfway through: the template lookup
//! ([`Session::find_template`](crate::vsphere::Session)) still finds it, and
//! it and the next linked clone finish the job (the snapshot if it is
//! missing, the template mark, the line removed), so an image is never
//! reported missing because a provider stopped midway, and the snapshot is
//! never taken twice: it is looked for before it is taken.
//!
//! Concurrency: conversions of a process run one at a time (one lock for
//! every session: two Providers may share a vCenter). Another process (a
//! former leader) is kept off by the line itself: a line younger than
//! [`CONVERSION_LEASE`] that this process did not write means someone else
//! is converting, and the clone waits (`TaskInProgress`, retried); an older
//! one is taken over (written anew under the VM's `changeVersion`, which
//! vCenter applies only to the configuration it was read from). Turning
//! the template into a VM succeeds once: a second converter's
//! `MarkAsVirtualMachine` fails.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::jiff::{SignedDuration, Timestamp};
use tracing::{info, warn};
use vsphere_client::mo;
use vsphere_client::types::{
    HostSystemConnectionState, ManagedObjectReference, VirtualMachineConfigSpec,
    VirtualMachinePowerState,
};
use vsphere_client::vm::snapshot::SnapshotSpec;

use super::facts::error;
use super::machines::LINKED_CLONE_SNAPSHOT;
use super::placement::reference;
use super::VCenterSession;
use crate::vsphere::{Error, Placement};

/// The start of the annotation line that marks a template being converted
/// for its linked-clone snapshot; the time it was written follows.
pub const CONVERTING: &str = "banlieue.io/linked-clone-base: converting since ";

/// How long a conversion's line keeps other processes off; longer than a
/// conversion takes (the snapshot's wait is 10 minutes).
pub const CONVERSION_LEASE: Duration = Duration::from_secs(15 * 60);

/// How long the snapshot may take.
const SNAPSHOT_WAIT: Duration = Duration::from_secs(600);

/// Held for each conversion; the lines this process wrote (by vCenter and
/// template) and has not removed yet: a conversion of its own that failed
/// midway is resumed at once, not after the lease.
static CONVERSIONS: tokio::sync::Mutex<BTreeMap<String, String>> =
    tokio::sync::Mutex::const_new(BTreeMap::new());

/// The conversion line in `annotation`, if any: the whole line and when it
/// was written (`None` when the time does not parse: an old line).
pub fn converting_since(annotation: &str) -> Option<(&str, Option<Timestamp>)> {
    annotation.lines().find_map(|line| {
        let rest = line.strip_prefix(CONVERTING)?;
        let at = rest.split_whitespace().next().unwrap_or_default();
        Some((line, at.parse::<Timestamp>().ok()))
    })
}

/// `annotation` with the conversion line `line` added (on a line of its own).
fn with_line(annotation: &str, line: &str) -> String {
    let kept = without_line(annotation);
    if kept.is_empty() {
        line.to_string()
    } else {
        format!("{kept}\n{line}")
    }
}

/// `annotation` without any conversion line.
pub fn without_line(annotation: &str) -> String {
    annotation
        .lines()
        .filter(|l| !l.starts_with(CONVERTING))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Is a line written at `since` still holding others off at `now`?
fn held(since: Option<Timestamp>, now: Timestamp) -> bool {
    let lease = SignedDuration::try_from(CONVERSION_LEASE).unwrap_or(SignedDuration::ZERO);
    since.is_some_and(|at| now.duration_since(at) < lease)
}

/// What the conversion reads of the template.
#[derive(Debug, Default)]
struct Base {
    template: bool,
    annotation: String,
    change_version: String,
    /// The current snapshot.
    snapshot: Option<ManagedObjectReference>,
    power: Option<VirtualMachinePowerState>,
    host: Option<ManagedObjectReference>,
    datastores: Vec<ManagedObjectReference>,
}

impl Base {
    fn line(&self) -> Option<(&str, Option<Timestamp>)> {
        converting_since(&self.annotation)
    }
}

fn busy(name: &str, since: Option<Timestamp>) -> Error {
    let since = since.map_or_else(|| "an unknown time".to_string(), |t| t.to_string());
    Error::fault(
        "TaskInProgress",
        format!(
            "template {name} is being given its linked-clone snapshot by another provider since {since} \
             (its annotation says so); waiting for it (taken over after {} minutes)",
            CONVERSION_LEASE.as_secs() / 60
        ),
    )
}

impl VCenterSession {
    fn conversion_key(&self, template: &ManagedObjectReference) -> String {
        let guid = self
            .client()
            .service_content()
            .about
            .instance_uuid
            .clone()
            .unwrap_or_default();
        format!("{guid}/{}", template.value)
    }

    async fn read_base(
        &self,
        template: &ManagedObjectReference,
        name: &str,
    ) -> Result<Base, Error> {
        let vm = self
            .client()
            .properties::<mo::VirtualMachine>(&[
                "config.template",
                "config.annotation",
                "config.changeVersion",
                "snapshot.currentSnapshot",
                "runtime.powerState",
                "runtime.host",
                "datastore",
            ])
            .map_err(|e| error("reading the template", &e))?
            .get(template)
            .await
            .map_err(|e| error(&format!("reading template {name}"), &e))?;
        let config = vm.config.unwrap_or_default();
        Ok(Base {
            template: config.template,
            annotation: config.annotation.unwrap_or_default(),
            change_version: config.change_version,
            snapshot: vm.snapshot.and_then(|s| s.current_snapshot),
            power: vm.runtime.as_ref().map(|r| r.power_state.clone()),
            host: vm.runtime.and_then(|r| r.host),
            datastores: vm.datastore.unwrap_or_default(),
        })
    }

    /// Writes `annotation` (the only change: vCenter refuses others on a
    /// template), under `change_version` when given.
    async fn annotate(
        &self,
        vm: &ManagedObjectReference,
        annotation: &str,
        change_version: Option<&str>,
        what: &str,
    ) -> Result<(), Error> {
        let spec = VirtualMachineConfigSpec {
            annotation: Some(annotation.to_string()),
            change_version: change_version.map(str::to_string),
            ..Default::default()
        };
        let fail = |e: vsphere_client::Error| error(what, &e);
        let task = self
            .client()
            .vim()
            .reconfig_vm_task(vm, &spec)
            .await
            .map_err(fail)?;
        self.client()
            .task(task)
            .wait_timeout(Duration::from_secs(120))
            .await
            .map_err(fail)?;
        Ok(())
    }

    /// Makes sure `template` has a current snapshot, the base of its linked
    /// clones, converting it as the module says when it has none. With
    /// `placement` `None` (the template lookup), only a conversion left
    /// halfway is finished: a template is left as it is. The snapshot, when
    /// it was there from the start (`None`: read it again if need be).
    pub(super) async fn linked_clone_base(
        &self,
        template: &ManagedObjectReference,
        name: &str,
        placement: Option<&Placement>,
    ) -> Result<Option<ManagedObjectReference>, Error> {
        let mut mine = CONVERSIONS.lock().await;
        let key = self.conversion_key(template);
        let base = self.read_base(template, name).await?;
        let line = base.line().map(|(l, at)| (l.to_string(), at));
        if base.snapshot.is_some() && base.template {
            if let Some((line, _)) = line {
                // Finished but for the line (or a snapshot someone else took).
                let kept = without_line(&base.annotation);
                if let Err(e) = self
                    .annotate(template, &kept, None, "removing the conversion note")
                    .await
                {
                    warn!(template = %name, error = %e, line = %line, "could not remove the conversion line; it is removed next time");
                } else {
                    mine.remove(&key);
                }
            }
            return Ok(base.snapshot);
        }
        let Some((line, since)) = line else {
            if base.template && placement.is_none() {
                // A template without a snapshot: the next linked clone converts it.
                return Ok(None);
            }
            if !base.template {
                // A plain VM (not ours): snapshotted as it is.
                self.snapshot_once(template, name, &base).await?;
                return Ok(None);
            }
            self.convert(template, name, placement, base, &mut mine, &key)
                .await?;
            return Ok(None);
        };
        let ours = mine.get(&key) == Some(&line);
        if !ours && held(since, Timestamp::now()) {
            if placement.is_none() {
                return Ok(None);
            }
            return Err(busy(name, since));
        }
        if base.template && placement.is_none() {
            // Left before it was turned into a VM: the next linked clone
            // converts it (it needs the failure domain's pool).
            return Ok(None);
        }
        info!(template = %name, line = %line, ours, "finishing the linked-clone conversion left halfway");
        self.convert(template, name, placement, base, &mut mine, &key)
            .await?;
        Ok(None)
    }

    /// [`Self::linked_clone_base`] for a clone placed at `placement`, and
    /// the snapshot it is made from: `<name>@<snapshot reference>`.
    pub(super) async fn linked_clone_base_of(
        &self,
        template: &ManagedObjectReference,
        name: &str,
        placement: &Placement,
    ) -> Result<Option<String>, Error> {
        let snapshot = match self
            .linked_clone_base(template, name, Some(placement))
            .await?
        {
            Some(snapshot) => Some(snapshot),
            None => self.read_base(template, name).await?.snapshot,
        };
        Ok(snapshot.map(|s| format!("{name}@{}", s.value)))
    }

    /// A snapshot of a VM that is not a template, unless it has one: only
    /// of a VM that is off.
    async fn snapshot_once(
        &self,
        vm: &ManagedObjectReference,
        name: &str,
        base: &Base,
    ) -> Result<(), Error> {
        if base.snapshot.is_some() {
            return Ok(());
        }
        if base.power != Some(VirtualMachinePowerState::PoweredOff) {
            let state = base
                .power
                .as_ref()
                .map_or("of unknown power state".to_string(), |p| {
                    p.as_str().to_string()
                });
            return Err(Error::fault(
                "InvalidPowerState",
                format!(
                    "template {name} ({}) has no snapshot to make linked clones from and is {state}: \
                     a snapshot is taken only of a template that is off (take one in vCenter, or use cloneMode full)",
                    vm.value
                ),
            ));
        }
        let spec = SnapshotSpec::new(LINKED_CLONE_SNAPSHOT)
            .description("The base of banlieue's linked clones: keep it while they exist.");
        let fail = |e: vsphere_client::Error| {
            error(
                &format!("taking the linked-clone snapshot of template {name}"),
                &e,
            )
        };
        self.client()
            .vm(vm.clone())
            .start_create_snapshot(&spec)
            .await
            .map_err(fail)?
            .wait_timeout(SNAPSHOT_WAIT)
            .await
            .map_err(fail)?;
        Ok(())
    }

    /// The conversion from wherever it stands: the line written (anew),
    /// the template turned into a VM, snapshotted unless it has a snapshot,
    /// marked a template, the line removed.
    async fn convert(
        &self,
        template: &ManagedObjectReference,
        name: &str,
        placement: Option<&Placement>,
        base: Base,
        mine: &mut BTreeMap<String, String>,
        key: &str,
    ) -> Result<(), Error> {
        // The line, under the change version read (on a VM; a template
        // takes no other change than its annotation), then read back.
        let line = format!("{CONVERTING}{}", Timestamp::now());
        let change_version =
            Some(base.change_version.as_str()).filter(|v| !base.template && !v.is_empty());
        match self
            .annotate(
                template,
                &with_line(&base.annotation, &line),
                change_version,
                &format!("noting the linked-clone conversion of template {name}"),
            )
            .await
        {
            Ok(()) => {}
            Err(e) if e.is_fault("ConcurrentAccess") => return Err(busy(name, None)),
            Err(e) => return Err(e),
        }
        mine.insert(key.to_string(), line.clone());
        let mut base = self.read_base(template, name).await?;
        if base.line().map(|(l, _)| l) != Some(line.as_str()) {
            mine.remove(key);
            return Err(busy(name, base.line().and_then(|(_, at)| at)));
        }
        if base.template {
            let Some(placement) = placement else {
                return Ok(());
            };
            let pool = reference(&placement.resource_pool);
            let host = match &placement.host {
                Some(host) => Some(reference(host)),
                None => self.host_for(&pool, &base).await?,
            };
            if let Err(e) = self
                .client()
                .vim()
                .mark_as_virtual_machine(template, &pool, host.as_ref())
                .await
            {
                let e = error(
                    &format!(
                        "turning template {name} into a VM in {} for its linked-clone snapshot",
                        placement.resource_pool.path
                    ),
                    &e,
                );
                mine.remove(key);
                // Turned into a VM by someone else meanwhile: theirs to finish.
                if !self.read_base(template, name).await?.template {
                    return Err(busy(name, None));
                }
                return Err(e);
            }
            base = self.read_base(template, name).await?;
        }
        if let Err(e) = self.snapshot_once(template, name, &base).await {
            if e.unresponsive() || e.timed_out() {
                // The snapshot may still be under way: the lease, not this
                // process, says when it is taken over.
                mine.remove(key);
            }
            return Err(e);
        }
        self.client()
            .vm(template.clone())
            .mark_as_template()
            .await
            .map_err(|e| error(&format!("marking {name} a template again"), &e))?;
        let kept = without_line(&base.annotation);
        match self
            .annotate(template, &kept, None, "removing the conversion note")
            .await
        {
            Ok(()) => {
                mine.remove(key);
            }
            // A template with its snapshot: the line goes next time.
            Err(e) => {
                warn!(template = %name, error = %e, "could not remove the conversion line; it is removed next time")
            }
        }
        info!(template = %name, "template converted, snapshotted for linked clones and marked a template again");
        Ok(())
    }

    /// The host a template turned into a VM in `pool` is registered on: its
    /// own when it is in the pool's compute resource, else a connected one
    /// there (not in maintenance) that mounts its datastores; `None` when
    /// none is found (vCenter chooses in a DRS cluster).
    async fn host_for(
        &self,
        pool: &ManagedObjectReference,
        base: &Base,
    ) -> Result<Option<ManagedObjectReference>, Error> {
        let fail = |e: vsphere_client::Error| error("reading the resource pool's hosts", &e);
        let Some(owner) = self
            .client()
            .properties::<mo::ResourcePool>(&["owner"])
            .map_err(fail)?
            .get(pool)
            .await
            .map_err(fail)?
            .owner
        else {
            return Ok(None);
        };
        let hosts = self
            .client()
            .properties::<mo::ComputeResource>(&["host"])
            .map_err(fail)?
            .get(&owner)
            .await
            .map_err(fail)?
            .host
            .unwrap_or_default();
        if let Some(own) = base
            .host
            .as_ref()
            .filter(|h| hosts.iter().any(|c| c.value == h.value))
        {
            return Ok(Some(own.clone()));
        }
        if hosts.is_empty() {
            return Ok(None);
        }
        let read = self
            .client()
            .properties::<mo::HostSystem>(&[
                "runtime.connectionState",
                "runtime.inMaintenanceMode",
                "datastore",
            ])
            .map_err(fail)?
            .get_many(&hosts)
            .await
            .map_err(fail)?;
        Ok(read
            .into_iter()
            .find(|h| {
                let up = h.runtime.as_ref().is_some_and(|r| {
                    r.connection_state == HostSystemConnectionState::Connected
                        && !r.in_maintenance_mode
                });
                let mounted = h.datastore.as_deref().unwrap_or_default();
                up && base
                    .datastores
                    .iter()
                    .all(|d| mounted.iter().any(|m| m.value == d.value))
            })
            .map(|h| h.mo_ref))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_conversion_line_is_added_found_and_removed_keeping_the_notes() {
        let line = format!("{CONVERTING}2026-12-06T17:30:00Z");
        let notes = with_line("Ubuntu 24.04\nbuilt by packer", &line);
        assert_eq!(notes, format!("Ubuntu 24.04\nbuilt by packer\n{line}"));
        let (found, at) = converting_since(&notes).expect("the line");
        assert_eq!(found, line);
        assert_eq!(at, Some("2026-12-06T17:30:00Z".parse().expect("time")));
        assert_eq!(without_line(&notes), "Ubuntu 24.04\nbuilt by packer");
        // Written anew, not twice.
        let again = with_line(&notes, &line);
        assert_eq!(again.matches(CONVERTING).count(), 1);
        assert_eq!(with_line("", &line), line);
        assert_eq!(converting_since("Ubuntu"), None);
        // A time that does not parse: an old line.
        assert_eq!(
            converting_since(&format!("{CONVERTING}yesterday")).map(|(_, at)| at),
            Some(None)
        );
    }

    #[test]
    fn a_line_holds_others_off_for_the_lease_only() {
        let at: Timestamp = "2026-12-06T17:30:00Z".parse().expect("time");
        let later = |minutes: i64| at + SignedDuration::from_mins(minutes);
        assert!(held(Some(at), later(1)));
        assert!(held(Some(at), later(14)));
        assert!(!held(Some(at), later(16)));
        assert!(!held(None, later(1)));
    }
}
