//! The vSphere Automation (REST) API: sessions, tags and content libraries.
//!
//! Some of what vSphere users need has no SOAP API. [`RestClient`] reaches
//! it with the SOAP [`Client`]'s connection settings (TLS mode, CA bundle,
//! proxy, timeouts, body size limit, retry policy):
//!
//! ```no_run
//! # async fn demo() -> Result<(), vsphere_client::Error> {
//! use vsphere_client::rest::{Cardinality, CategorySpec};
//! let client = vsphere_client::Client::builder("vcenter.example.com")
//!     .credentials("administrator@vsphere.local", "secret")
//!     .connect()
//!     .await?;
//! // Shares the SOAP session where the server allows it, else logs in with
//! // the same credentials.
//! let rest = client.rest().await?;
//! let zones = rest
//!     .tagging()
//!     .create_category(&CategorySpec::new("zone", Cardinality::Single).associable_types(["Datacenter"]))
//!     .await?;
//! println!("created category {zones}");
//! # Ok(()) }
//! ```
//!
//! Both generations of the API are spoken: `/api` (vSphere 7.0 U2 and
//! later: plain JSON, `?action=`) and `/rest` (6.5 and later: replies wrapped
//! in `{"value": ...}`, `?~action=`, `id:` path segments). The client tries
//! `/api` first and falls back to `/rest` when the server has no `/api`
//! paths ([`ApiFlavor`]). The `vcenter/vm-template` services are the
//! exception `/rest` makes: served at `/rest/vcenter/...` (not under
//! `com/vmware`), with plain ids and `?action=`, replies still wrapped.
//!
//! Sessions behave like the SOAP side's: the session id (header
//! `vmware-api-session-id`) is a secret that never appears in `Debug`
//! output, logs or errors; a keepalive checks it while idle; a call that
//! fails with 401 logs in again (once, however many calls hit the expired
//! session together) and is retried transparently.

/// An open enumeration of the Automation API: the known values as variants,
/// anything else kept as `Unknown(name)`; (de)serialized as its wire name.
/// The first variant is the `Default`.
macro_rules! open_enum {
    (
        $(#[$meta:meta])*
        $name:ident { $(#[$fmeta:meta])* $first:ident = $first_wire:literal, $( $(#[$vmeta:meta])* $variant:ident = $wire:literal, )* }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
        pub enum $name {
            $(#[$fmeta])*
            #[default]
            $first,
            $( $(#[$vmeta])* $variant, )*
            /// A value this crate does not know, as the server spelled it.
            Unknown(String),
        }

        impl $name {
            /// The wire name.
            pub fn as_str(&self) -> &str {
                match self {
                    $name::$first => $first_wire,
                    $( $name::$variant => $wire, )*
                    $name::Unknown(name) => name,
                }
            }
        }

        impl From<&str> for $name {
            fn from(name: &str) -> Self {
                match name {
                    $first_wire => $name::$first,
                    $( $wire => $name::$variant, )*
                    other => $name::Unknown(other.to_owned()),
                }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl serde::Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.serialize_str(self.as_str())
            }
        }

        impl<'de> serde::Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                let name = String::deserialize(deserializer)?;
                Ok($name::from(name.as_str()))
            }
        }
    };
}
pub(crate) use open_enum;

mod error;
#[cfg(fuzzing)]
#[doc(hidden)]
pub mod fuzzing;
mod library;
mod session;
mod tagging;
mod transport;
mod url;

use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::Method;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use tracing::Instrument;

pub use error::{LocalizableMessage, RestError, RestErrorType};
pub use library::{
    ContentLibrary, ItemFind, ItemSpec, Library, LibraryFind, LibraryItem, LibraryItemType,
    LibraryType, LocalLibrarySpec, NetworkMapping, OvfDeploySpec, StorageBacking,
    StorageBackingType, StorageProvisioning, VmTemplateDeploySpec, VmTemplateSpec,
};
pub use tagging::{
    AttachedObjects, AttachedTags, BatchResult, Cardinality, Category, CategorySpec,
    CategoryUpdate, Tag, TagSpec, TagUpdate, Tagging,
};

use self::url::{encode_query_value, ApiUrl};
use crate::client::Client;
use crate::error::{Error, ErrorKind};
use crate::redact::Secret;
use crate::session::{Credentials, Session};
use crate::types::ManagedObjectReference;
use transport::{check_status, decode_json, Call, Reply, Transport};

/// Which generation of the Automation API a server speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ApiFlavor {
    /// `/api/...` (vSphere 7.0 U2 and later): plain JSON bodies, `?action=`.
    Api,
    /// `/rest/com/vmware/...` (vSphere 6.5 and later, deprecated since 7.0 U2):
    /// replies wrapped in `{"value": ...}`, `?~action=`, `id:` path segments.
    Rest,
}

/// The current session, as the server describes it.
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize, Serialize)]
#[serde(default)]
pub struct SessionInfo {
    /// The user the session belongs to.
    pub user: String,
    /// RFC 3339 time stamps, as sent.
    pub created_time: Option<String>,
    pub last_accessed_time: Option<String>,
}

/// A client of the vSphere Automation API. Cheap to clone: clones share one
/// session.
#[derive(Clone)]
pub struct RestClient {
    inner: Arc<Inner>,
}

struct Inner {
    transport: Transport,
    flavor: ApiFlavor,
    session: Session,
    auth: Auth,
    keepalive_task: Mutex<Option<tokio::task::AbortHandle>>,
    logout_on_drop: bool,
}

/// How the client gets a new session when the current one expires.
enum Auth {
    /// Logs in with a user name and password.
    Credentials(Credentials),
    /// Uses the SOAP client's session (vCenter 8.0 U3 and later accept it):
    /// logging in again is the SOAP client's job.
    SoapSession(Client),
    /// A session id given by the caller: nothing to log in again with.
    Fixed,
}

impl fmt::Debug for RestClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let auth = match &self.inner.auth {
            Auth::Credentials(c) => format!("credentials of {}", c.username),
            Auth::SoapSession(_) => "shared SOAP session".to_owned(),
            Auth::Fixed => "given session id".to_owned(),
        };
        f.debug_struct("RestClient")
            .field("base", &format_args!("{}", self.inner.transport.base))
            .field("flavor", &self.inner.flavor)
            .field("auth", &auth)
            .field("logged_in", &self.has_session())
            .finish_non_exhaustive()
    }
}

impl Client {
    /// A REST client sharing this client's connection settings and, where
    /// the server allows it (vCenter 8.0 U3 and later), its session; else
    /// logged in with this client's credentials. See
    /// [`RestClient::from_soap`].
    pub async fn rest(&self) -> Result<RestClient, Error> {
        RestClient::from_soap(self).await
    }
}

impl RestClient {
    /// Starts configuring a REST client that uses `soap`'s connection
    /// settings.
    pub fn builder(soap: &Client) -> RestClientBuilder {
        RestClientBuilder {
            soap: soap.clone(),
            credentials: None,
            session_id: None,
            flavor: None,
            keepalive: Some(crate::DEFAULT_KEEPALIVE),
            logout_on_drop: false,
            call_deadline: soap.call_deadline(),
        }
    }

    /// Logs in with a user name and password, over `soap`'s connection
    /// settings.
    pub async fn login(soap: &Client, username: &str, password: &str) -> Result<RestClient, Error> {
        RestClient::builder(soap)
            .credentials(username, password)
            .connect()
            .await
    }

    /// Reuses `soap`'s session so a program logs in once.
    ///
    /// vCenter 8.0 U3 and later accept the SOAP session id (the value of the
    /// `vmware_soap_session` cookie) as `vmware-api-session-id`: the client
    /// checks that with a session query and then shares the session (a
    /// re-login is the SOAP client's, and [`logout`](RestClient::logout)
    /// leaves the shared session to the SOAP client). Older servers, and the
    /// simulator, refuse it with 401: the client then creates a REST session
    /// with the SOAP client's credentials. Without either, it fails with
    /// [`ErrorKind::NotAuthenticated`].
    pub async fn from_soap(soap: &Client) -> Result<RestClient, Error> {
        RestClient::builder(soap).connect().await
    }

    /// The API generation in use.
    pub fn flavor(&self) -> ApiFlavor {
        self.inner.flavor
    }

    /// `https://host:port/`, the root of the API paths.
    pub fn base_url(&self) -> &http::Uri {
        &self.inner.transport.base
    }

    /// Whether the client holds a session id.
    pub fn has_session(&self) -> bool {
        self.inner.session.cookie().is_some()
    }

    /// Whether the session is the SOAP client's (see
    /// [`from_soap`](RestClient::from_soap)).
    pub fn shares_soap_session(&self) -> bool {
        matches!(self.inner.auth, Auth::SoapSession(_))
    }

    /// Tags and categories.
    pub fn tagging(&self) -> Tagging<'_> {
        Tagging::new(self)
    }

    /// Content libraries.
    pub fn library(&self) -> ContentLibrary<'_> {
        ContentLibrary::new(self)
    }

    /// A request to an API service (`cis/tagging/category`, written without
    /// the flavor's prefix).
    pub(crate) fn request(
        &self,
        operation: &'static str,
        method: Method,
        service: &str,
    ) -> RequestBuilder<'_> {
        RequestBuilder {
            client: self,
            call: Call::new(
                operation,
                method,
                service_url(&self.inner.transport.base, self.inner.flavor, service),
            ),
            query: Vec::new(),
            body_error: None,
            plain_paths: false,
        }
    }

    /// A request to a service of the `vcenter` namespace that `/rest`
    /// serves outside `com/vmware` (`vcenter/vm-template/library-items`):
    /// `/api/<service>` or `/rest/<service>`, its ids plain path segments and
    /// its action `?action=` on both flavors; bodies as [`request`](Self::request)'s.
    pub(crate) fn vcenter_request(
        &self,
        operation: &'static str,
        method: Method,
        service: &str,
    ) -> RequestBuilder<'_> {
        let mut url = ApiUrl::root(&self.inner.transport.base);
        url.push(match self.inner.flavor {
            ApiFlavor::Api => "api",
            ApiFlavor::Rest => "rest",
        });
        url.extend(service.split('/'));
        RequestBuilder {
            client: self,
            call: Call::new(operation, method, url),
            query: Vec::new(),
            body_error: None,
            plain_paths: true,
        }
    }

    /// Sends a call with the session, logging in again once on 401.
    async fn execute(&self, call: Call) -> Result<Reply, Error> {
        let span = tracing::debug_span!(
            "rest_call",
            operation = call.operation,
            method = %call.method,
            path = call.url.path(),
            status = tracing::field::Empty,
            duration_ms = tracing::field::Empty,
        );
        let started = Instant::now();
        // One deadline for the call and its repetition after a re-login
        // (the re-login is a call of its own).
        let deadline = self.inner.transport.deadline();
        let result = async {
            let seen = self.inner.session.snapshot();
            let reply = self
                .inner
                .transport
                .send_within(&call, seen.cookie.as_ref(), deadline)
                .await?;
            tracing::Span::current().record("status", reply.status.as_u16());
            match check_status(&call.label(), reply) {
                Err(err)
                    if err.is_rest_error(&RestErrorType::Unauthenticated) && self.may_relogin() =>
                {
                    tracing::info!("REST session expired or invalid: logging in again");
                    if let Err(login_error) = self.relogin(&seen).await {
                        tracing::debug!(error = %login_error, "logging in again failed");
                        return Err(login_error);
                    }
                    let reply = self
                        .inner
                        .transport
                        .send_within(&call, self.inner.session.cookie().as_ref(), deadline)
                        .await?;
                    tracing::Span::current().record("status", reply.status.as_u16());
                    check_status(&call.label(), reply)
                }
                other => other,
            }
        }
        .instrument(span.clone())
        .await;
        span.record("duration_ms", started.elapsed().as_millis() as u64);
        match &result {
            Ok(_) => self.inner.session.touch(),
            Err(err) => span
                .in_scope(|| tracing::debug!(error = %err, kind = ?err.kind(), "REST call failed")),
        }
        result
    }

    fn may_relogin(&self) -> bool {
        !self.inner.session.is_closed() && !matches!(self.inner.auth, Auth::Fixed)
    }
}

/// Builds one request: path, action, query, body.
pub(crate) struct RequestBuilder<'a> {
    client: &'a RestClient,
    call: Call,
    query: Vec<String>,
    body_error: Option<Error>,
    /// Ids and actions as `/api` writes them, on both flavors
    /// ([`RestClient::vcenter_request`]).
    plain_paths: bool,
}

impl RequestBuilder<'_> {
    fn flavor(&self) -> ApiFlavor {
        self.client.inner.flavor
    }

    /// How this request writes ids and actions in its URL.
    fn path_flavor(&self) -> ApiFlavor {
        if self.plain_paths {
            ApiFlavor::Api
        } else {
            self.flavor()
        }
    }

    /// Appends an object id to the path (`/{id}`, or `/id:{id}` on `/rest`).
    pub(crate) fn id(mut self, id: &str) -> Self {
        if self.call.subject.is_none() {
            self.call.subject = Some(id.to_owned());
        }
        let segment = match self.path_flavor() {
            ApiFlavor::Api => id.to_owned(),
            ApiFlavor::Rest => format!("id:{id}"),
        };
        self.call.url.push(&segment);
        self
    }

    /// Names what the call acts on in its errors (`create category "zone"`);
    /// [`id`](Self::id) names the id unless this was given.
    pub(crate) fn subject(mut self, subject: &str) -> Self {
        self.call.subject = Some(subject.to_owned());
        self
    }

    /// Appends the same id, but only on `/rest` (where some operations take
    /// in the path what `/api` takes in the body).
    pub(crate) fn rest_id(self, id: &str) -> Self {
        match self.flavor() {
            ApiFlavor::Rest => self.id(id),
            ApiFlavor::Api => self,
        }
    }

    /// Names the operation: `?action=NAME` (`?~action=NAME` on `/rest`).
    pub(crate) fn action(mut self, action: &str) -> Self {
        let key = match self.path_flavor() {
            ApiFlavor::Api => "action",
            ApiFlavor::Rest => "~action",
        };
        self.query
            .push(format!("{key}={}", encode_query_value(action)));
        self
    }

    /// Adds a query parameter.
    pub(crate) fn query(mut self, key: &str, value: &str) -> Self {
        self.query
            .push(format!("{key}={}", encode_query_value(value)));
        self
    }

    /// The operation's one structure parameter as the body: the structure
    /// itself on `/api`, `{"<param>": structure}` on `/rest`.
    pub(crate) fn spec(self, param: &str, value: &impl Serialize) -> Self {
        match self.flavor() {
            ApiFlavor::Api => self.fields(value),
            ApiFlavor::Rest => {
                let mut wrapper = serde_json::Map::new();
                match serde_json::to_value(value) {
                    Ok(json) => {
                        wrapper.insert(param.to_owned(), json);
                        self.fields(&wrapper)
                    }
                    Err(e) => self.fail(e),
                }
            }
        }
    }

    /// The operation's named parameters as the body, the same on both
    /// flavors (`{"object_id": ..., "tag_ids": [...]}`).
    pub(crate) fn fields(mut self, value: &impl Serialize) -> Self {
        match serde_json::to_vec(value) {
            Ok(body) => self.call.body = Some(Bytes::from(body)),
            Err(e) => return self.fail(e),
        }
        self
    }

    /// A raw body (a file upload).
    pub(crate) fn raw_body(mut self, body: Bytes, content_type: &'static str) -> Self {
        self.call.body = Some(body);
        self.call.content_type = content_type;
        self.call.log_request_body = false;
        self
    }

    fn fail(mut self, e: serde_json::Error) -> Self {
        self.body_error = Some(
            Error::new(ErrorKind::InvalidConfig, "cannot encode the request body").with_source(e),
        );
        self
    }

    /// Marks the call safe to repeat after it may have reached the server.
    pub(crate) fn idempotent(mut self) -> Self {
        self.call.idempotent = true;
        self
    }

    /// Replaces the URL (an upload endpoint the server named).
    pub(crate) fn url(mut self, url: ApiUrl) -> Self {
        self.call.url = url;
        self
    }

    fn finish(mut self) -> Result<(Call, ApiFlavor), Error> {
        if let Some(err) = self.body_error {
            return Err(err);
        }
        if !self.query.is_empty() {
            let existing = self.call.url.query().map(str::to_owned);
            let mut query = existing
                .into_iter()
                .filter(|q| !q.is_empty())
                .collect::<Vec<_>>();
            query.extend(self.query);
            self.call.url.set_query(Some(&query.join("&")));
        }
        Ok((self.call, self.client.inner.flavor))
    }

    /// Sends and decodes the reply's JSON.
    pub(crate) async fn send<T: DeserializeOwned>(self) -> Result<T, Error> {
        let client = self.client;
        let (call, flavor) = self.finish()?;
        let operation = call.label();
        let reply = client.execute(call).await?;
        decode_json(&operation, flavor, &reply)
    }

    /// Sends, ignoring the reply's body.
    pub(crate) async fn send_unit(self) -> Result<(), Error> {
        let client = self.client;
        let (call, _) = self.finish()?;
        client.execute(call).await.map(|_| ())
    }
}

/// `https://host:port/api/<service>` or `https://host:port/rest/com/vmware/<service>`.
fn service_url(base: &http::Uri, flavor: ApiFlavor, service: &str) -> ApiUrl {
    let mut url = ApiUrl::root(base);
    match flavor {
        ApiFlavor::Api => url.push("api"),
        ApiFlavor::Rest => url.extend(["rest", "com", "vmware"]),
    };
    url.extend(service.split('/'));
    url
}

/// A managed object reference as the Automation API writes it
/// (`vapi.std.DynamicID`): `{"type": "VirtualMachine", "id": "vm-42"}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct DynamicId {
    #[serde(rename = "type")]
    pub type_: String,
    pub id: String,
}

impl From<&ManagedObjectReference> for DynamicId {
    fn from(mor: &ManagedObjectReference) -> Self {
        DynamicId {
            type_: mor.type_.clone(),
            id: mor.value.clone(),
        }
    }
}

impl From<DynamicId> for ManagedObjectReference {
    fn from(id: DynamicId) -> Self {
        ManagedObjectReference {
            type_: id.type_,
            value: id.id,
        }
    }
}

/// Configures and connects a [`RestClient`].
pub struct RestClientBuilder {
    soap: Client,
    credentials: Option<Credentials>,
    session_id: Option<Secret>,
    flavor: Option<ApiFlavor>,
    keepalive: Option<Duration>,
    logout_on_drop: bool,
    /// The SOAP handle's unless set.
    call_deadline: Option<Duration>,
}

impl fmt::Debug for RestClientBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RestClientBuilder")
            .field("soap", &self.soap)
            .field("credentials", &self.credentials)
            .field("session_id", &self.session_id)
            .field("flavor", &self.flavor)
            .field("keepalive", &self.keepalive)
            .field("logout_on_drop", &self.logout_on_drop)
            .field("call_deadline", &self.call_deadline)
            .finish()
    }
}

impl RestClientBuilder {
    /// Logs in with this user name and password (and again whenever the
    /// session expires), instead of reusing the SOAP session.
    pub fn credentials(mut self, username: impl Into<String>, password: impl Into<String>) -> Self {
        self.credentials = Some(Credentials {
            username: username.into(),
            password: Secret::new(password.into()),
        })
        .filter(|c| !c.username.is_empty());
        self
    }

    /// Uses an existing REST session id (checked on connect). The client
    /// cannot log in again when it expires.
    pub fn session_id(mut self, id: impl Into<String>) -> Self {
        self.session_id = Some(Secret::new(id.into()));
        self
    }

    /// Speaks this API generation instead of detecting it.
    pub fn flavor(mut self, flavor: ApiFlavor) -> Self {
        self.flavor = Some(flavor);
        self
    }

    /// How often to check the session while idle (default 5 min), logging
    /// in again when it died. `None` disables the keepalive.
    pub fn keepalive(mut self, interval: Option<Duration>) -> Self {
        self.keepalive = interval.filter(|d| !d.is_zero());
        self
    }

    /// Delete the session when the last handle is dropped (default off; a
    /// session shared with the SOAP client is never deleted this way).
    pub fn logout_on_drop(mut self, enabled: bool) -> Self {
        self.logout_on_drop = enabled;
        self
    }

    /// The bound on each REST call, every attempt and backoff included
    /// (`None`: none). By default the SOAP handle's
    /// ([`Client::call_deadline`]: 10 min unless set), so
    /// `soap.with_call_deadline(d).rest()` bounds its REST calls by `d` too.
    /// A call that runs out fails with [`ErrorKind::Timeout`] and
    /// [`TimeoutCause::CallDeadline`](crate::TimeoutCause::CallDeadline).
    pub fn call_deadline(mut self, deadline: Option<Duration>) -> Self {
        self.call_deadline = deadline;
        self
    }

    /// Creates or adopts the session (see [`RestClient::from_soap`] for the
    /// order of attempts) and starts the keepalive.
    pub async fn connect(self) -> Result<RestClient, Error> {
        let mut transport = transport_of(&self.soap, self.credentials.as_ref());
        transport.call_deadline = self.call_deadline;
        let (flavor, session_id, auth) = if let Some(credentials) = self.credentials {
            let (flavor, id) = session::create(&transport, self.flavor, &credentials).await?;
            (flavor, id, Auth::Credentials(credentials))
        } else if let Some(id) = self.session_id {
            match session::probe(&transport, self.flavor, &id).await? {
                Some(flavor) => (flavor, id, Auth::Fixed),
                None => {
                    return Err(error::rest_error(
                        "adopt REST session",
                        RestError::new(
                            RestErrorType::Unauthenticated,
                            vec![LocalizableMessage {
                                default_message: "the server does not accept the given session id"
                                    .into(),
                                ..Default::default()
                            }],
                            401,
                        ),
                    ))
                }
            }
        } else {
            session::from_soap(&transport, self.flavor, &self.soap).await?
        };
        let session = Session::new();
        session.adopt_cookie(session_id);
        let client = RestClient {
            inner: Arc::new(Inner {
                transport,
                flavor,
                session,
                auth,
                keepalive_task: Mutex::new(None),
                logout_on_drop: self.logout_on_drop,
            }),
        };
        tracing::debug!(
            ?flavor,
            shared = client.shares_soap_session(),
            "REST session ready"
        );
        if let Some(interval) = self.keepalive {
            client.spawn_keepalive(interval);
        }
        Ok(client)
    }
}

/// `https://host:port/` of the SOAP endpoint `https://host:port/sdk`.
fn root_of(sdk: &http::Uri) -> http::Uri {
    // Scheme and authority come from a valid URI: the path is the only new part.
    crate::http_client::with_path(sdk, "/").unwrap_or_else(|_| sdk.clone())
}

/// The REST transport of a SOAP client: its HTTP client (TLS, proxy,
/// connect timeout) and its per-call settings.
fn transport_of(soap: &Client, credentials: Option<&Credentials>) -> Transport {
    let config = soap.transport_config();
    let base = root_of(soap.url());
    let secrets: Vec<Secret> = credentials
        .into_iter()
        .chain(soap.credentials())
        .map(|c| c.password.clone())
        .collect();
    Transport {
        http: soap.http().clone(),
        base,
        call_timeout: config.call_timeout,
        call_deadline: soap.call_deadline(),
        max_response_size: config.max_response_size,
        body_progress: config.body_progress,
        retry: config.retry.clone(),
        limit: config
            .concurrency_limit
            .map(|n| Arc::new(tokio::sync::Semaphore::new(n.max(1)))),
        secrets: secrets.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn service_urls_per_flavor() {
        let base = root_of(&"https://vc.example.com:8443/sdk".parse().unwrap());
        assert_eq!(base.to_string(), "https://vc.example.com:8443/");
        assert_eq!(
            service_url(&base, ApiFlavor::Api, "cis/tagging/category").to_string(),
            "https://vc.example.com:8443/api/cis/tagging/category"
        );
        assert_eq!(
            service_url(&base, ApiFlavor::Rest, "cis/tagging/category").to_string(),
            "https://vc.example.com:8443/rest/com/vmware/cis/tagging/category"
        );
    }

    #[test]
    fn dynamic_ids_map_to_references() {
        let mor = ManagedObjectReference::new("VirtualMachine", "vm-42");
        let json = serde_json::to_string(&DynamicId::from(&mor)).unwrap();
        assert_eq!(json, r#"{"type":"VirtualMachine","id":"vm-42"}"#);
        let back: DynamicId = serde_json::from_str(&json).unwrap();
        assert_eq!(ManagedObjectReference::from(back), mor);
    }
}
