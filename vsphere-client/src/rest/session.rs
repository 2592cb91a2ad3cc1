//! REST sessions: creating one (`/api` first, `/rest` when the server has
//! no `/api` paths), adopting one (a given id, or the SOAP session), logging
//! in again (single-flight, through [`Session`]), the keepalive and logout.

use std::sync::{Arc, Weak};
use std::time::Duration;

use http::{Method, StatusCode};

use super::transport::{check_status, decode_json, error_from_reply, Call, Transport};
use super::{service_url, ApiFlavor, ApiUrl, Auth, Inner, RestClient, RestErrorType, SessionInfo};
use crate::client::Client;
use crate::error::{Error, ErrorKind};
use crate::redact::Secret;
use crate::session::{Credentials, LoginTurn, Snapshot};

/// `/api/session` or `/rest/com/vmware/cis/session`.
fn session_url(base: &http::Uri, flavor: ApiFlavor) -> ApiUrl {
    match flavor {
        ApiFlavor::Api => service_url(base, flavor, "session"),
        ApiFlavor::Rest => service_url(base, flavor, "cis/session"),
    }
}

/// The flavors to try, in order.
fn flavors(forced: Option<ApiFlavor>) -> Vec<ApiFlavor> {
    match forced {
        Some(flavor) => vec![flavor],
        None => vec![ApiFlavor::Api, ApiFlavor::Rest],
    }
}

/// Creates a session with basic authentication. Without a forced flavor,
/// `POST /api/session` first, and `POST /rest/com/vmware/cis/session` when
/// the server answers 404 (it has no `/api` paths).
pub(super) async fn create(
    transport: &Transport,
    forced: Option<ApiFlavor>,
    credentials: &Credentials,
) -> Result<(ApiFlavor, Secret), Error> {
    const OPERATION: &str = "create REST session";
    let order = flavors(forced);
    let mut last_not_found = None;
    for (i, flavor) in order.iter().copied().enumerate() {
        let mut call = Call::new(
            OPERATION,
            Method::POST,
            session_url(&transport.base, flavor),
        );
        call.basic_auth = Some(credentials.clone());
        // The reply is the session id.
        call.log_response_body = false;
        let reply = transport.send(&call, None).await?;
        if reply.status == StatusCode::NOT_FOUND && i + 1 < order.len() {
            tracing::debug!("the server has no /api paths; using /rest");
            last_not_found = Some(error_from_reply(OPERATION, &reply));
            continue;
        }
        let reply = check_status(OPERATION, reply)?;
        let id: Option<String> = decode_json(OPERATION, flavor, &reply)?;
        return match id.filter(|id| !id.is_empty()) {
            Some(id) => Ok((flavor, Secret::new(id))),
            None => Err(Error::new(
                ErrorKind::Decode,
                format!("{OPERATION}: the server sent no session id"),
            )),
        };
    }
    Err(last_not_found
        .unwrap_or_else(|| Error::new(ErrorKind::InvalidConfig, "no API flavor to try")))
}

/// The request that reads the current session: `GET /api/session`, or
/// `POST /rest/com/vmware/cis/session?~action=get`.
fn info_call(base: &http::Uri, flavor: ApiFlavor) -> Call {
    const OPERATION: &str = "get REST session";
    let mut url = session_url(base, flavor);
    let method = match flavor {
        ApiFlavor::Api => Method::GET,
        ApiFlavor::Rest => {
            url.set_query(Some("~action=get"));
            Method::POST
        }
    };
    let mut call = Call::new(OPERATION, method, url);
    call.idempotent = true;
    call
}

/// Whether the server accepts `id` as a session, and with which flavor.
/// `Ok(None)`: refused (401).
pub(super) async fn probe(
    transport: &Transport,
    forced: Option<ApiFlavor>,
    id: &Secret,
) -> Result<Option<ApiFlavor>, Error> {
    let order = flavors(forced);
    for (i, flavor) in order.iter().copied().enumerate() {
        let call = info_call(&transport.base, flavor);
        let reply = transport.send(&call, Some(id)).await?;
        match reply.status {
            status if status.is_success() => return Ok(Some(flavor)),
            StatusCode::NOT_FOUND if i + 1 < order.len() => continue,
            StatusCode::UNAUTHORIZED => return Ok(None),
            _ => return Err(error_from_reply(&call.label(), &reply)),
        }
    }
    Ok(None)
}

/// The SOAP session id as the Automation API takes it: the
/// `vmware_soap_session` cookie value without its quotes.
fn soap_session_id(soap: &Client) -> Option<Secret> {
    let cookie = soap.session_cookie()?;
    let id = cookie.expose().trim().trim_matches('"');
    (!id.is_empty()).then(|| Secret::new(id))
}

/// The session of a client built from a SOAP client: the SOAP session when
/// the server accepts it, else a new one with the SOAP client's credentials.
pub(super) async fn from_soap(
    transport: &Transport,
    forced: Option<ApiFlavor>,
    soap: &Client,
) -> Result<(ApiFlavor, Secret, Auth), Error> {
    if let Some(id) = soap_session_id(soap) {
        if let Some(flavor) = probe(transport, forced, &id).await? {
            tracing::debug!(
                "the server accepts the SOAP session for the Automation API: sharing it"
            );
            return Ok((flavor, id, Auth::SoapSession(soap.clone())));
        }
        tracing::debug!("the server refuses the SOAP session for the Automation API; logging in with the credentials");
    }
    match soap.credentials() {
        Some(credentials) => {
            let (flavor, id) = create(transport, forced, credentials).await?;
            Ok((flavor, id, Auth::Credentials(credentials.clone())))
        }
        None => Err(Error::new(
            ErrorKind::NotAuthenticated,
            "the server does not accept the SOAP session for the Automation API (vCenter 8.0 U3 and later do) \
             and the SOAP client has no credentials to log in with",
        )),
    }
}

impl RestClient {
    /// Logs in again unless another task already did since `seen`.
    pub(super) async fn relogin(&self, seen: &Snapshot) -> Result<(), Error> {
        let (_guard, turn) = self.inner.session.login_turn(seen).await?;
        let LoginTurn::LogIn { generation_before } = turn else {
            return Ok(());
        };
        let result = self.login_again().await;
        self.inner
            .session
            .login_finished(generation_before, result.as_ref().map(|_| ()));
        result
    }

    async fn login_again(&self) -> Result<(), Error> {
        let inner = &self.inner;
        match &inner.auth {
            Auth::Credentials(credentials) => {
                let (_, id) = create(&inner.transport, Some(inner.flavor), credentials).await?;
                inner.session.adopt_cookie(id);
                Ok(())
            }
            Auth::SoapSession(soap) => {
                // Renews the SOAP session if it is the one that died.
                soap.check_session().await?;
                let id = soap_session_id(soap).ok_or_else(|| {
                    Error::new(
                        ErrorKind::NotAuthenticated,
                        "the SOAP client has no session to share",
                    )
                })?;
                if inner.session.cookie().as_ref() == Some(&id) {
                    return Err(Error::new(
                        ErrorKind::NotAuthenticated,
                        "the server refuses the shared SOAP session although the SOAP client still holds it",
                    ));
                }
                inner.session.adopt_cookie(id);
                Ok(())
            }
            Auth::Fixed => Err(Error::new(
                ErrorKind::NotAuthenticated,
                "the REST session expired and the client has no credentials to log in again",
            )),
        }
    }

    /// The current session, as the server describes it.
    pub async fn session_info(&self) -> Result<SessionInfo, Error> {
        const OPERATION: &str = "get REST session";
        let request = match self.inner.flavor {
            ApiFlavor::Api => self.request(OPERATION, Method::GET, "session"),
            ApiFlavor::Rest => self
                .request(OPERATION, Method::POST, "cis/session")
                .action("get"),
        };
        let info: Option<SessionInfo> = request.idempotent().send().await?;
        Ok(info.unwrap_or_default())
    }

    /// Checks the session with a cheap authenticated read and logs in again
    /// when it is gone. The keepalive calls this; callers may too.
    pub async fn check_session(&self) -> Result<(), Error> {
        self.session_info().await.map(|_| ())
    }

    pub(super) fn spawn_keepalive(&self, interval: Duration) {
        let weak = Arc::downgrade(&self.inner);
        let task = tokio::spawn(keepalive_loop(weak, interval));
        if let Ok(mut slot) = self.inner.keepalive_task.lock() {
            *slot = Some(task.abort_handle());
        }
    }

    /// Ends the session and stops the keepalive; later calls fail with the
    /// server's `UNAUTHENTICATED` instead of logging in again. A session
    /// shared with the SOAP client is left to it (ending it would log the
    /// SOAP client out too). Idempotent.
    pub async fn logout(&self) -> Result<(), Error> {
        const OPERATION: &str = "delete REST session";
        let inner = &self.inner;
        inner.session.close();
        stop_keepalive(inner);
        let Some(id) = inner.session.clear_cookie() else {
            return Ok(());
        };
        if matches!(inner.auth, Auth::SoapSession(_)) {
            return Ok(());
        }
        let mut call = Call::new(
            OPERATION,
            Method::DELETE,
            session_url(&inner.transport.base, inner.flavor),
        );
        call.idempotent = true;
        let result = inner.transport.send(&call, Some(&id)).await;
        match result.and_then(|reply| check_status(OPERATION, reply)) {
            Ok(_) => Ok(()),
            // Already gone on the server: that is what we wanted.
            Err(err) if err.is_rest_error(&RestErrorType::Unauthenticated) => Ok(()),
            Err(err) => Err(err),
        }
    }
}

fn stop_keepalive(inner: &Inner) {
    if let Ok(mut slot) = inner.keepalive_task.lock() {
        if let Some(task) = slot.take() {
            task.abort();
        }
    }
}

async fn keepalive_loop(client: Weak<Inner>, interval: Duration) {
    let mut ticker = tokio::time::interval_at(tokio::time::Instant::now() + interval, interval);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticker.tick().await;
        let Some(inner) = client.upgrade() else {
            return;
        };
        let client = RestClient { inner };
        if client.inner.session.is_closed() {
            return;
        }
        // Calls keep the session alive by themselves; check only when idle.
        if client.inner.session.idle_for() < interval / 2 {
            continue;
        }
        match client.check_session().await {
            Ok(()) => tracing::trace!("REST keepalive: session alive"),
            Err(err) => tracing::warn!(error = %err, "REST keepalive failed; will try again"),
        }
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        stop_keepalive(self);
        if !self.logout_on_drop
            || self.session.is_closed()
            || matches!(self.auth, Auth::SoapSession(_))
        {
            return;
        }
        let Some(id) = self.session.cookie() else {
            return;
        };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            tracing::debug!("REST logout_on_drop: no Tokio runtime, the session is left to expire");
            return;
        };
        let transport = self.transport.clone();
        let mut call = Call::new(
            "delete REST session",
            Method::DELETE,
            session_url(&transport.base, self.flavor),
        );
        call.idempotent = true;
        runtime.spawn(async move {
            match transport.send(&call, Some(&id)).await {
                Ok(reply) if reply.status.is_success() => {
                    tracing::debug!("REST session deleted on drop")
                }
                Ok(reply) => tracing::debug!(
                    status = reply.status.as_u16(),
                    "REST logout on drop answered with an error"
                ),
                Err(err) => tracing::debug!(error = %err, "REST logout on drop failed"),
            }
        });
    }
}
