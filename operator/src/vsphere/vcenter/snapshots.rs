//! [`Snapshots`] on a real vCenter session, with `vsphere-client`'s
//! snapshot helpers: the tree (and the file layout that sizes each
//! snapshot) is one `RetrievePropertiesEx`; each operation is one task call
//! on the VM or the snapshot by reference.

use vsphere_client::types::{ManagedObjectNotFound, ManagedObjectReference};
use vsphere_client::vm::snapshot::{RemoveOptions, SnapshotSpec};

use super::facts::error;
use super::VCenterSession;
use crate::vsphere::{Error, SnapshotFacts, SnapshotRequest, Snapshots};

fn reference(type_: &str, value: &str) -> ManagedObjectReference {
    ManagedObjectReference {
        type_: type_.into(),
        value: value.into(),
    }
}

impl Snapshots for VCenterSession {
    async fn snapshots(&self, vm: &str) -> Result<Option<Vec<SnapshotFacts>>, Error> {
        let tree = match self
            .client()
            .vm(reference("VirtualMachine", vm))
            .snapshot_tree()
            .await
        {
            Ok(tree) => tree,
            Err(e) if e.is_fault::<ManagedObjectNotFound>() => return Ok(None),
            Err(e) => return Err(error(&format!("reading the snapshots of {vm}"), &e)),
        };
        Ok(Some(
            tree.iter()
                .map(|(_, s)| SnapshotFacts {
                    mo_ref: s.reference.value.clone(),
                    name: s.name.clone(),
                    description: s.description.clone(),
                    created: s.created.as_str().to_string(),
                    size_bytes: tree.size(&s.reference),
                    current: tree.current.as_ref() == Some(&s.reference),
                })
                .collect(),
        ))
    }

    async fn start_create_snapshot(
        &self,
        vm: &str,
        request: &SnapshotRequest,
    ) -> Result<String, Error> {
        let spec = SnapshotSpec::new(&request.name)
            .description(&request.description)
            .memory(request.memory)
            .quiesce(request.quiesce);
        let task = self
            .client()
            .vm(reference("VirtualMachine", vm))
            .start_create_snapshot(&spec)
            .await
            .map_err(|e| error(&format!("snapshotting {vm}"), &e))?;
        Ok(task.reference().value.clone())
    }

    async fn start_revert_snapshot(&self, snapshot: &str) -> Result<String, Error> {
        let task = self
            .client()
            .snapshot(reference("VirtualMachineSnapshot", snapshot))
            .start_revert(false)
            .await
            .map_err(|e| error(&format!("reverting to {snapshot}"), &e))?;
        Ok(task.reference().value.clone())
    }

    async fn start_remove_snapshot(&self, snapshot: &str) -> Result<String, Error> {
        let task = self
            .client()
            .snapshot(reference("VirtualMachineSnapshot", snapshot))
            .start_remove(RemoveOptions::one())
            .await
            .map_err(|e| error(&format!("removing {snapshot}"), &e))?;
        Ok(task.reference().value.clone())
    }
}
