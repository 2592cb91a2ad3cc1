//! Views: server-side lists of managed objects that the PropertyCollector
//! walks (`ContainerView`: everything of some types under a container;
//! `ListView`: an explicit list).
//!
//! A view lives in the session until destroyed. [`ContainerView`] and
//! [`ListView`] destroy theirs when [`destroy`](ContainerView::destroy)ed, or,
//! best effort, when dropped inside a Tokio runtime.

use std::future::Future;

use crate::error::{Error, ErrorKind};
use crate::types::ManagedObjectReference;
use crate::Client;

/// Runs a cleanup call in the background when a Tokio runtime is there to
/// run it; failures are logged at debug level (the session ending cleans up
/// anyway).
pub(crate) fn spawn_cleanup<F, T>(call: F)
where
    F: Future<Output = Result<T, Error>> + Send + 'static,
{
    if let Ok(handle) = tokio::runtime::Handle::try_current() {
        handle.spawn(async move {
            if let Err(err) = call.await {
                tracing::debug!(error = %err, "background cleanup call failed");
            }
        });
    }
}

fn view_manager(client: &Client) -> Result<ManagedObjectReference, Error> {
    client
        .service_content()
        .view_manager
        .clone()
        .ok_or_else(|| {
            Error::new(
                ErrorKind::InvalidArgument,
                "the server has no ViewManager (an ESXi host without vCenter?)",
            )
        })
}

/// A `ContainerView`: every object of some types under a container (folder,
/// datacenter, compute resource, resource pool, host), kept up to date by the
/// server.
#[derive(Debug)]
pub struct ContainerView {
    client: Client,
    view: ManagedObjectReference,
    destroyed: bool,
}

impl ContainerView {
    /// Creates a view of the objects of `types` (`VirtualMachine`,
    /// `HostSystem`; empty for every type) under `container`, recursively or
    /// only its direct children.
    pub async fn create(
        client: &Client,
        container: &ManagedObjectReference,
        types: &[&str],
        recursive: bool,
    ) -> Result<ContainerView, Error> {
        let manager = view_manager(client)?;
        let types: Vec<String> = types.iter().map(std::string::ToString::to_string).collect();
        let view = client
            .vim()
            .create_container_view(&manager, container, &types, recursive)
            .await?;
        Ok(ContainerView {
            client: client.clone(),
            view,
            destroyed: false,
        })
    }

    /// The view's reference, for [`PropertyQuery::in_view`](crate::property::PropertyQuery::in_view)
    /// or a filter spec.
    pub fn reference(&self) -> &ManagedObjectReference {
        &self.view
    }

    /// Destroys the view on the server.
    pub async fn destroy(mut self) -> Result<(), Error> {
        self.destroyed = true;
        self.client.vim().destroy_view(&self.view).await
    }

    /// Drops the handle without destroying the view (it is already gone
    /// with its session).
    pub(crate) fn forget(&mut self) {
        self.destroyed = true;
    }
}

impl Drop for ContainerView {
    fn drop(&mut self) {
        if !self.destroyed {
            let client = self.client.clone();
            let view = self.view.clone();
            spawn_cleanup(async move { client.vim().destroy_view(&view).await });
        }
    }
}

/// A `ListView`: an explicit, modifiable list of objects.
#[derive(Debug)]
pub struct ListView {
    client: Client,
    view: ManagedObjectReference,
    destroyed: bool,
}

impl ListView {
    /// Creates a view listing `objects` (possibly none).
    pub async fn create(
        client: &Client,
        objects: &[ManagedObjectReference],
    ) -> Result<ListView, Error> {
        let manager = view_manager(client)?;
        let view = client.vim().create_list_view(&manager, objects).await?;
        Ok(ListView {
            client: client.clone(),
            view,
            destroyed: false,
        })
    }

    /// The view's reference.
    pub fn reference(&self) -> &ManagedObjectReference {
        &self.view
    }

    /// Adds objects; returns those the server could not add (no longer
    /// existing).
    pub async fn add(
        &self,
        objects: &[ManagedObjectReference],
    ) -> Result<Vec<ManagedObjectReference>, Error> {
        self.client
            .vim()
            .modify_list_view(&self.view, objects, &[])
            .await
    }

    /// Removes objects; returns those that were not in the view.
    pub async fn remove(
        &self,
        objects: &[ManagedObjectReference],
    ) -> Result<Vec<ManagedObjectReference>, Error> {
        self.client
            .vim()
            .modify_list_view(&self.view, &[], objects)
            .await
    }

    /// Replaces the list; returns the objects the server could not add.
    pub async fn reset(
        &self,
        objects: &[ManagedObjectReference],
    ) -> Result<Vec<ManagedObjectReference>, Error> {
        self.client.vim().reset_list_view(&self.view, objects).await
    }

    /// Destroys the view on the server.
    pub async fn destroy(mut self) -> Result<(), Error> {
        self.destroyed = true;
        self.client.vim().destroy_view(&self.view).await
    }
}

impl Drop for ListView {
    fn drop(&mut self) {
        if !self.destroyed {
            let client = self.client.clone();
            let view = self.view.clone();
            spawn_cleanup(async move { client.vim().destroy_view(&view).await });
        }
    }
}

impl Client {
    /// Creates a [`ContainerView`] of `types` under `container`.
    pub async fn container_view(
        &self,
        container: &ManagedObjectReference,
        types: &[&str],
        recursive: bool,
    ) -> Result<ContainerView, Error> {
        ContainerView::create(self, container, types, recursive).await
    }

    /// Creates a [`ListView`] of `objects`.
    pub async fn list_view(&self, objects: &[ManagedObjectReference]) -> Result<ListView, Error> {
        ListView::create(self, objects).await
    }
}
