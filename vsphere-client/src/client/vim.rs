//! [`Vim`]: every vim25 operation as a typed method.

use crate::error::Error;
use crate::xml::Request;
use crate::Client;

/// Every operation of the vim25 API (928 of them) as a typed method returning a future,
/// named after the operation in snake case: `CloneVM_Task` is
/// [`clone_vm_task`](Vim::clone_vm_task), `RetrievePropertiesEx` is
/// [`retrieve_properties_ex`](Vim::retrieve_properties_ex). Made by
/// [`Client::vim`]; it borrows the client, so it costs nothing to make.
///
/// The first argument is the managed object the operation runs on (`_this`),
/// then the operation's parameters in schema order: required ones by
/// reference, optional ones as `Option`, repeated ones as slices. Each method
/// builds the operation's `*RequestType` and calls [`Client::invoke`] (the future borrows
/// the client, not the arguments), so it shares the client's session, re-login, retries
/// and call statistics.
///
/// The hand-written API on [`Client`] ([`finder`](Client::finder),
/// [`properties`](Client::properties), [`vm`](Client::vm),
/// [`task`](Client::task)...) covers the everyday work; reach for `Vim`
/// for anything else:
///
/// ```no_run
/// # async fn demo(client: vsphere_client::Client, vm: vsphere_client::types::ManagedObjectReference)
/// # -> Result<(), vsphere_client::Error> {
/// use vsphere_client::types::ManagedObjectReference;
/// let instance = ManagedObjectReference::new("ServiceInstance", "ServiceInstance");
/// let now = client.vim().current_time(&instance).await?;
/// // A task-returning operation: wait for it with `Client::task`.
/// let task = client.vim().power_on_vm_task(&vm, None).await?;
/// client.task(task).wait().await?;
/// println!("server time {now:?}");
/// # Ok(()) }
/// ```
#[derive(Clone, Copy)]
pub struct Vim<'a> {
    client: &'a Client,
}

impl std::fmt::Debug for Vim<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Vim").field(self.client).finish()
    }
}

impl Client {
    /// Every vim25 operation as a typed method: see [`Vim`].
    pub fn vim(&self) -> Vim<'_> {
        Vim { client: self }
    }
}

impl<'a> Vim<'a> {
    /// The client the operations go through.
    pub fn client(&self) -> &'a Client {
        self.client
    }

    /// [`Client::invoke`].
    #[inline]
    pub async fn invoke<R: Request>(&self, request: &R) -> Result<R::Response, Error> {
        self.client.invoke(request).await
    }

    /// [`Client::invoke`] of a request it owns: what every method of `Vim`
    /// returns. The future borrows the client only.
    #[inline]
    pub fn call<R: Request + 'a>(
        &self,
        request: R,
    ) -> impl std::future::Future<Output = Result<R::Response, Error>> + 'a {
        let client = self.client;
        async move { client.invoke(&request).await }
    }
}
