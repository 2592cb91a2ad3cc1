//! `MockVCenter`: the wiremock server, its built-in answers and its state.

use std::collections::HashMap;
use std::marker::PhantomData;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use vsphere_client::types::{
    AboutInfo, AnyMethodFault, DynamicProperty, InvalidLogin, LoginRequestType, LogoutRequestType,
    ManagedObjectReference, NoPermission, NotAuthenticated, ObjectContent,
    RetrievePropertiesExRequestType, RetrieveResult, RetrieveServiceContentRequestType,
    ServiceContent, SessionIsActiveRequestType, UserSession,
};
use vsphere_client::xml::soap::{self, ReturnValue, SoapFault};
use vsphere_client::xml::Decode;
use vsphere_client::{Client, ClientBuilder, DateTime, Request, RetryConfig, Value};
use wiremock::{Match, Mock, MockServer, Respond, ResponseTemplate};

use crate::reply::Reply;
use crate::rest;
use crate::tasks::{self, TaskScript, Tasks};

/// Priority of the built-in answers: any mock a test mounts (wiremock's
/// default priority is 5) comes first.
pub(crate) const BUILT_IN: u8 = 200;
/// Priority of the session checks and scenarios: before everything.
pub(crate) const SCENARIO: u8 = 1;

/// Operations a real vCenter answers without a session.
const WITHOUT_SESSION: &[&str] = &[
    "RetrieveServiceContent",
    "Login",
    "LoginByToken",
    "LoginExtensionByCertificate",
    "LoginExtensionBySubjectName",
    "CloneSession",
    "AcquireCloneTicket",
];

/// A scripted vCenter: a wiremock [`MockServer`] that already answers what
/// every program needs, so that a test scripts only the calls it is about.
///
/// Built in (each can be overridden by a mock of the same operation, which
/// takes precedence):
///
/// - `GET /sdk/vimServiceVersions.xml` (the API version, 8.0.3.0 unless
///   [`MockVCenterBuilder::api_version`] says otherwise), `RetrieveServiceContent`;
/// - `Login` (accepting [`MockVCenter::USER`] / [`MockVCenter::PASSWORD`] or
///   the builder's credentials, `InvalidLogin` otherwise; each login a new
///   session cookie), `Logout`, `SessionIsActive`, and the keepalive's
///   `currentSession` read;
/// - every call without a live session cookie gets `NotAuthenticated`, as
///   on vCenter (so [`expire_sessions`](Self::expire_sessions) makes the
///   client log in again);
/// - the task watcher: `CreateListView`, `ModifyListView`,
///   `CreatePropertyCollector`, `CreateFilter`, `WaitForUpdatesEx`, the
///   `Destroy*` calls and `CancelTask`, driven by the [`TaskScript`]s of
///   the tasks the mock handed out;
/// - a direct read of those tasks' `info` (`Task::info`, a
///   `RetrievePropertiesEx` of `info` only): the latest state whose time
///   has come, `ManagedObjectNotFound` for a task it did not make;
/// - the Automation API session: `POST`/`GET`/`DELETE /api/session` with
///   the same credentials, and 401 for `/api/...` calls without a live
///   `vmware-api-session-id`.
///
/// Dropping it shuts the server down and checks the
/// [`expect`](crate::On::expect)ations of its mocks (a failed one panics,
/// which fails the test).
pub struct MockVCenter {
    server: MockServer,
    shared: Arc<Shared>,
}

impl std::fmt::Debug for MockVCenter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MockVCenter")
            .field("url", &self.url())
            .finish_non_exhaustive()
    }
}

/// Configures a [`MockVCenter`] before it starts.
#[derive(Debug, Clone)]
pub struct MockVCenterBuilder {
    user: String,
    password: String,
    api_version: Option<String>,
    about: AboutInfo,
    check_sessions: bool,
    share_soap_session: bool,
}

pub(crate) struct Shared {
    pub(crate) config: Config,
    state: Mutex<State>,
}

pub(crate) struct Config {
    pub(crate) user: String,
    pub(crate) password: String,
    api_version: Option<String>,
    content: ServiceContent,
    check_sessions: bool,
    pub(crate) share_soap_session: bool,
}

#[derive(Default)]
pub(crate) struct State {
    /// Live SOAP sessions: cookie value -> session.
    sessions: HashMap<String, UserSession>,
    /// Live Automation API session ids.
    pub(crate) rest_sessions: Vec<String>,
    /// Every Automation API session id handed out, in order.
    pub(crate) rest_sessions_issued: Vec<String>,
    next_session: u64,
    /// Every `vmware_soap_session` cookie `Login` handed out, in order.
    cookies: Vec<String>,
    latency: Duration,
    /// Latency of one operation's answers, on top of `latency`.
    operation_latency: HashMap<String, Duration>,
    /// Every answer given, in the order the requests came.
    exchanges: Vec<Exchange>,
    pub(crate) tasks: Tasks,
}

/// One request the kit answered, for assertions on timing and load:
/// [`MockVCenter::exchanges`], [`MockVCenter::max_in_flight`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exchange {
    /// The SOAP operation (`CurrentTime`), `None` for other requests (the
    /// Automation API, the version file).
    pub operation: Option<String>,
    /// The HTTP method (`POST`).
    pub method: String,
    /// The URL path (`/sdk`, `/api/session`).
    pub path: String,
    /// The HTTP status of the answer; `None` for a [`Reply::http`]
    /// answer, whose status the kit does not see.
    pub status: Option<u16>,
    /// When the request came.
    pub received: Instant,
    /// When its answer left: `received` plus the answer's delay and the
    /// server-wide latency.
    pub answered: Instant,
}

impl Exchange {
    /// Whether the request had come and its answer not yet left at `at`.
    pub fn in_flight_at(&self, at: Instant) -> bool {
        self.received <= at && at < self.answered
    }
}

/// The most exchanges in flight at one time: the most seen by one of them
/// as it came (itself, answered at once or not, and those come before it
/// and not yet answered).
fn max_overlap(exchanges: &[Exchange]) -> usize {
    exchanges
        .iter()
        .enumerate()
        .map(|(i, e)| {
            1 + exchanges
                .iter()
                .enumerate()
                .filter(|(j, f)| *j != i && f.in_flight_at(e.received))
                .count()
        })
        .max()
        .unwrap_or(0)
}

impl Shared {
    pub(crate) fn state(&self) -> MutexGuard<'_, State> {
        // A panic inside a responder poisons nothing worth keeping.
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Sends `answer` to `request` (which came at `received`): its delay
    /// plus the server-wide latency ([`MockVCenter::set_latency`]) later,
    /// noted in the exchange log.
    pub(crate) fn send(
        &self,
        request: &wiremock::Request,
        received: Instant,
        answer: Answer,
    ) -> ResponseTemplate {
        let operation = operation(request).map(str::to_string);
        let mut state = self.state();
        let of_operation = operation
            .as_ref()
            .and_then(|op| state.operation_latency.get(op))
            .copied()
            .unwrap_or_default();
        let delay = state.latency + of_operation + answer.delay;
        state.exchanges.push(Exchange {
            operation,
            method: request.method.to_string(),
            path: request.url.path().to_string(),
            status: answer.status,
            received,
            answered: received + delay,
        });
        drop(state);
        answer.template.set_delay(delay)
    }

    /// A SOAP response to `R` (200).
    pub(crate) fn soap_ok<R: Request>(&self, response: &R::Response) -> Answer
    where
        R::Response: ReturnValue,
    {
        xml_template(200, soap::encode_response_envelope::<R>(response))
    }

    fn session(&self, request: &wiremock::Request) -> Option<UserSession> {
        let cookie = soap_cookie(request)?;
        self.state().sessions.get(&cookie).cloned()
    }

    pub(crate) fn soap_session_valid(&self, id: &str) -> bool {
        self.state().sessions.contains_key(id)
    }

    pub(crate) fn new_session_id(&self, prefix: &str) -> String {
        let mut state = self.state();
        state.next_session += 1;
        format!("{prefix}-{:04}", state.next_session)
    }
}

pub(crate) fn xml_template(status: u16, body: Vec<u8>) -> Answer {
    Answer::new(status, body, "text/xml; charset=utf-8")
}

/// A SOAP fault response (500) carrying `fault`.
pub(crate) fn fault_template(fault: AnyMethodFault, message: &str) -> Answer {
    xml_template(
        500,
        soap::encode_fault_envelope(&SoapFault {
            faultcode: "ServerFaultCode".to_string(),
            faultstring: message.to_string(),
            type_name: Some(fault.type_name().to_string()),
            detail: Some(fault),
        }),
    )
}

/// `NotAuthenticated` as vCenter sends it for a call without a session.
pub(crate) fn not_authenticated() -> Answer {
    let fault = NotAuthenticated {
        no_permission: NoPermission {
            object: ManagedObjectReference::new("Folder", "group-d1"),
            privilege_id: "System.View".to_string(),
            ..Default::default()
        },
    };
    fault_template(fault.into(), "The session is not authenticated.")
}

/// The `vmware_soap_session` cookie of a request, without its quotes.
fn soap_cookie(request: &wiremock::Request) -> Option<String> {
    for value in request.headers.get_all("cookie") {
        let Ok(text) = value.to_str() else { continue };
        for pair in text.split(';') {
            if let Some(v) = pair.trim().strip_prefix("vmware_soap_session=") {
                return Some(v.trim().trim_matches('"').to_string());
            }
        }
    }
    None
}

fn is_post(request: &wiremock::Request) -> bool {
    request.method.as_str() == "POST"
}

/// The operation of a SOAP request, if it is one.
pub(crate) fn operation(request: &wiremock::Request) -> Option<&str> {
    if !is_post(request) {
        return None;
    }
    soap::request_operation(&request.body).ok()
}

impl Default for MockVCenterBuilder {
    fn default() -> Self {
        MockVCenterBuilder {
            user: MockVCenter::USER.to_string(),
            password: MockVCenter::PASSWORD.to_string(),
            api_version: Some("8.0.3.0".to_string()),
            about: AboutInfo {
                name: "VMware vCenter Server".to_string(),
                full_name: "VMware vCenter Server 8.0.3 build-24022515".to_string(),
                vendor: "VMware, Inc.".to_string(),
                version: "8.0.3".to_string(),
                build: "24022515".to_string(),
                os_type: "linux-x64".to_string(),
                product_line_id: "vpx".to_string(),
                api_type: "VirtualCenter".to_string(),
                api_version: "8.0.3.0".to_string(),
                instance_uuid: Some("5e0a3c18-0000-4000-8000-000000000001".to_string()),
                ..AboutInfo::default()
            },
            check_sessions: true,
            share_soap_session: false,
        }
    }
}

impl MockVCenterBuilder {
    /// The user name and password `Login` and `POST /api/session` accept.
    pub fn credentials(mut self, user: &str, password: &str) -> Self {
        self.user = user.to_string();
        self.password = password.to_string();
        self
    }

    /// The API version of `vimServiceVersions.xml` and the service
    /// content's `about.apiVersion`; `None` serves no version file (404),
    /// as some servers do.
    pub fn api_version(mut self, version: Option<&str>) -> Self {
        if let Some(v) = version {
            self.about.api_version = v.to_string();
        }
        self.api_version = version.map(str::to_string);
        self
    }

    /// The service content's `about` (product, build, API version).
    pub fn about(mut self, about: AboutInfo) -> Self {
        self.about = about;
        self
    }

    /// Answers calls without a session as if they had one (off: every
    /// call needs a session from `Login`, as on vCenter).
    pub fn without_session_checks(mut self) -> Self {
        self.check_sessions = false;
        self
    }

    /// Accepts the SOAP session cookie as `vmware-api-session-id`, as
    /// vCenter 8.0 U3 and later do (off: refused with 401, as older
    /// servers and the simulator do).
    pub fn share_soap_session(mut self) -> Self {
        self.share_soap_session = true;
        self
    }

    /// Starts the server with its built-in answers.
    pub async fn start(self) -> MockVCenter {
        let content = ServiceContent {
            root_folder: ManagedObjectReference::new("Folder", "group-d1"),
            property_collector: ManagedObjectReference::new(
                "PropertyCollector",
                "propertyCollector",
            ),
            view_manager: Some(ManagedObjectReference::new("ViewManager", "ViewManager")),
            about: self.about,
            session_manager: Some(ManagedObjectReference::new(
                "SessionManager",
                "SessionManager",
            )),
            search_index: Some(ManagedObjectReference::new("SearchIndex", "SearchIndex")),
            task_manager: Some(ManagedObjectReference::new("TaskManager", "TaskManager")),
            ..ServiceContent::default()
        };
        let shared = Arc::new(Shared {
            config: Config {
                user: self.user,
                password: self.password,
                api_version: self.api_version,
                content,
                check_sessions: self.check_sessions,
                share_soap_session: self.share_soap_session,
            },
            state: Mutex::new(State::default()),
        });
        let vc = MockVCenter {
            server: MockServer::start().await,
            shared,
        };
        vc.mount_built_ins().await;
        vc
    }
}

impl MockVCenter {
    /// The user name the mock accepts by default.
    pub const USER: &'static str = "administrator@vsphere.local";
    /// The password the mock accepts by default.
    pub const PASSWORD: &'static str = "testkit-password";

    /// Starts a mock vCenter with the default configuration.
    pub async fn start() -> MockVCenter {
        MockVCenter::builder().start().await
    }

    /// Configures one first.
    pub fn builder() -> MockVCenterBuilder {
        MockVCenterBuilder::default()
    }

    /// The SDK URL to give [`Client::builder`]: `http://127.0.0.1:PORT/sdk`.
    pub fn url(&self) -> String {
        format!("{}/sdk", self.server.uri())
    }

    /// The underlying wiremock server, for mocks the kit has no words for
    /// (raw bytes, REST calls).
    pub fn server(&self) -> &MockServer {
        &self.server
    }

    /// A client builder for this server with the accepted credentials, no
    /// keepalive and fast retries (3 retries, 5-20 ms apart).
    pub fn client_builder(&self) -> ClientBuilder {
        Client::builder(&self.url())
            .credentials(&self.shared.config.user, &self.shared.config.password)
            .keepalive(None)
            .retry(RetryConfig {
                max_retries: 3,
                initial_backoff: Duration::from_millis(5),
                max_backoff: Duration::from_millis(20),
            })
    }

    /// A client connected and logged in ([`client_builder`](Self::client_builder)).
    ///
    /// # Panics
    /// When the connection fails (a test helper: the test fails).
    pub async fn client(&self) -> Client {
        match self.client_builder().connect().await {
            Ok(client) => client,
            Err(err) => panic!("connecting to the mock vCenter failed: {err}"),
        }
    }

    /// The service content the mock serves.
    pub fn service_content(&self) -> &ServiceContent {
        &self.shared.config.content
    }

    /// Scripts the answer to operation `R`: `vc.on::<CloneVMRequestType>()`.
    pub fn on<R: Request + Decode + 'static>(&self) -> On<'_, R> {
        On {
            vc: self,
            predicate: None,
            times: None,
            expect: None,
        }
    }

    /// The requests of operation `R` received so far, decoded, in order.
    pub async fn received<R: Request + Decode>(&self) -> Vec<R> {
        self.raw_requests()
            .await
            .iter()
            .filter(|r| operation(r) == Some(R::NAME))
            .filter_map(|r| soap::decode_request_envelope::<R>(&r.body).ok())
            .collect()
    }

    /// How many requests of operation `R` were received.
    pub async fn count<R: Request + Decode>(&self) -> usize {
        self.raw_requests()
            .await
            .iter()
            .filter(|r| operation(r) == Some(R::NAME))
            .count()
    }

    /// The operation of each SOAP request received so far, in order
    /// (`["RetrieveServiceContent", "Login", "CloneVM_Task", ...]`).
    pub async fn operations(&self) -> Vec<String> {
        self.raw_requests()
            .await
            .iter()
            .filter_map(|r| operation(r).map(str::to_string))
            .collect()
    }

    /// Every request received (SOAP, REST, the version file), as wiremock
    /// recorded it.
    pub async fn raw_requests(&self) -> Vec<wiremock::Request> {
        self.server.received_requests().await.unwrap_or_default()
    }

    /// The requests of operation `R` received so far, as wiremock recorded
    /// them (for their headers: `SOAPAction`, `Cookie`).
    pub async fn received_raw<R: Request>(&self) -> Vec<wiremock::Request> {
        self.raw_requests()
            .await
            .into_iter()
            .filter(|r| operation(r) == Some(R::NAME))
            .collect()
    }

    /// Every answer the kit gave so far (built in or scripted with
    /// [`on`](Self::on), the scenarios), in the order the requests came;
    /// not the answers of raw mocks on [`server`](Self::server), nor
    /// dropped connections.
    pub fn exchanges(&self) -> Vec<Exchange> {
        self.shared.state().exchanges.clone()
    }

    /// How many requests have come and not yet been answered, now.
    pub fn in_flight(&self) -> usize {
        let now = Instant::now();
        let state = self.shared.state();
        state
            .exchanges
            .iter()
            .filter(|e| e.in_flight_at(now))
            .count()
    }

    /// The most requests in flight at one time so far (come, and not yet
    /// answered): what a client's concurrency limit bounds, against a slow
    /// server ([`set_latency`](Self::set_latency), [`Reply::delay`]).
    pub fn max_in_flight(&self) -> usize {
        max_overlap(&self.shared.state().exchanges)
    }

    /// The `vmware_soap_session` cookie values `Login` handed out so far,
    /// in order (live or not), as a test needs them to check that they
    /// are sent, or never logged.
    pub fn session_cookies(&self) -> Vec<String> {
        self.shared.state().cookies.clone()
    }

    /// The Automation API session ids `POST /api/session` handed out so
    /// far, in order (live or not).
    pub fn api_session_ids(&self) -> Vec<String> {
        self.shared.state().rest_sessions_issued.clone()
    }

    /// A task whose `info` follows `script`, for a test that starts no
    /// operation (`client.task(vc.task(script))`).
    pub fn task(&self, script: TaskScript) -> ManagedObjectReference {
        self.shared
            .state()
            .tasks
            .start("Task", None, &self.shared.config.user, script)
    }

    // --- scenarios ------------------------------------------------------

    /// Ends every SOAP and Automation API session, as a vCenter restart or
    /// a session timeout does: the next call gets `NotAuthenticated` (or
    /// 401), the client logs in again. Session-scoped objects (the task
    /// watcher's collector and view) go with them.
    pub fn expire_sessions(&self) {
        let mut state = self.shared.state();
        state.sessions.clear();
        state.rest_sessions.clear();
        state.tasks.forget_session_objects();
    }

    /// The next `n` SOAP calls (any operation) get `503 Service Unavailable`
    /// with vCenter's HTML page, as a vCenter that is overloaded or starting.
    pub async fn storm_503(&self, n: u64) {
        Mock::given(SoapCall)
            .respond_with(Latent(self.shared.clone(), status_template(503)))
            .up_to_n_times(n)
            .with_priority(SCENARIO)
            .mount(&self.server)
            .await;
    }

    /// Adds `latency` to every answer of the kit from now on (a slow or
    /// distant vCenter); answers already on their way keep theirs.
    pub fn set_latency(&self, latency: Duration) {
        self.shared.state().latency = latency;
    }

    /// Adds `latency` to every answer to operation `R` from now on, built
    /// in or scripted, on top of [`set_latency`](Self::set_latency): a
    /// slow `Login` that concurrent callers pile up behind, a slow
    /// `RetrievePropertiesEx`. `Duration::ZERO` ends it.
    pub fn set_latency_of<R: Request>(&self, latency: Duration) {
        self.shared
            .state()
            .operation_latency
            .insert(R::NAME.to_string(), latency);
    }

    /// The next `n` SOAP calls (any operation) get no answer: the server
    /// closes the connection, as a crashing vCenter or a load balancer
    /// does.
    pub async fn drop_connections(&self, n: u64) {
        Mock::given(SoapCall)
            .respond_with_err(|_: &wiremock::Request| {
                std::io::Error::new(
                    std::io::ErrorKind::ConnectionReset,
                    "vsphere-testkit: connection dropped",
                )
            })
            .up_to_n_times(n)
            .with_priority(SCENARIO)
            .mount(&self.server)
            .await;
    }

    async fn mount_built_ins(&self) {
        let server = &self.server;
        let shared = &self.shared;
        // The version file.
        let versions = match &shared.config.api_version {
            Some(version) => Answer::new(
                200,
                format!(
                    r#"<?xml version="1.0" encoding="UTF-8" ?><namespaces version="1.0"><namespace><name>urn:vim25</name><version>{version}</version><priorVersions><version>7.0</version><version>6.7</version></priorVersions></namespace></namespaces>"#
                ),
                "text/xml",
            ),
            None => Answer::new(404, "<html>404 Not Found</html>", "text/html"),
        };
        Mock::given(wiremock::matchers::method("GET"))
            .and(wiremock::matchers::path_regex("/vimServiceVersions.xml$"))
            .respond_with(Latent(shared.clone(), versions))
            .with_priority(BUILT_IN)
            .mount(server)
            .await;

        // Calls without a session.
        if shared.config.check_sessions {
            Mock::given(NoSession(shared.clone()))
                .respond_with(Latent(shared.clone(), not_authenticated()))
                .with_priority(SCENARIO)
                .mount(server)
                .await;
        }

        built_in::<RetrieveServiceContentRequestType, _>(self, |_, _, shared| {
            shared.soap_ok::<RetrieveServiceContentRequestType>(&shared.config.content)
        })
        .await;
        built_in::<LoginRequestType, _>(self, |login, _, shared| {
            let config = &shared.config;
            if login.user_name != config.user || login.password != config.password {
                return fault_template(
                    InvalidLogin::default().into(),
                    "Cannot complete login due to an incorrect user name or password.",
                );
            }
            let cookie = shared.new_session_id("testkit-soap-cookie");
            shared.state().cookies.push(cookie.clone());
            let session = UserSession {
                key: format!("{cookie}-key"),
                user_name: login.user_name.clone(),
                full_name: login.user_name.clone(),
                login_time: DateTime::new("2024-01-01T00:00:00Z"),
                last_active_time: DateTime::new("2024-01-01T00:00:00Z"),
                locale: "en".to_string(),
                message_locale: "en".to_string(),
                ..UserSession::default()
            };
            shared
                .state()
                .sessions
                .insert(cookie.clone(), session.clone());
            shared.soap_ok::<LoginRequestType>(&session).header(
                "Set-Cookie",
                &format!("vmware_soap_session=\"{cookie}\"; Path=/; HttpOnly; Secure;"),
            )
        })
        .await;
        built_in::<LogoutRequestType, _>(self, |_, request, shared| {
            if let Some(cookie) = soap_cookie(request) {
                shared.state().sessions.remove(&cookie);
            }
            shared.soap_ok::<LogoutRequestType>(&())
        })
        .await;
        built_in::<SessionIsActiveRequestType, _>(self, |ask, _, shared| {
            let active = shared
                .state()
                .sessions
                .values()
                .any(|s| s.key == ask.session_id && s.user_name == ask.user_name);
            shared.soap_ok::<SessionIsActiveRequestType>(&active)
        })
        .await;
        // The keepalive's check: the session manager's `currentSession`.
        mount::<RetrievePropertiesExRequestType>(
            self,
            BUILT_IN,
            Some(Arc::new(|r: &RetrievePropertiesExRequestType| {
                r.spec_set.iter().any(|spec| {
                    spec.object_set
                        .iter()
                        .any(|o| o.obj.type_ == "SessionManager")
                        && spec
                            .prop_set
                            .iter()
                            .any(|p| p.path_set.iter().any(|path| path == "currentSession"))
                })
            })),
            None,
            None,
            Arc::new(|_, request, shared| {
                let manager = shared
                    .config
                    .content
                    .session_manager
                    .clone()
                    .unwrap_or_default();
                let prop_set = match shared.session(request) {
                    Some(session) => vec![DynamicProperty {
                        name: "currentSession".to_string(),
                        val: Value::object(session),
                    }],
                    None => Vec::new(),
                };
                shared.soap_ok::<RetrievePropertiesExRequestType>(&Some(RetrieveResult {
                    token: None,
                    objects: vec![ObjectContent {
                        obj: manager,
                        prop_set,
                        missing_set: Vec::new(),
                    }],
                }))
            }),
        )
        .await;
        tasks::mount_watcher(self).await;
        rest::mount_session(self).await;
    }

    pub(crate) fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }
}

/// What a responder of operation `R` makes of a decoded request: the
/// answer and how much later than the server-wide latency it goes.
pub(crate) type Handler<R> =
    Arc<dyn Fn(&R, &wiremock::Request, &Arc<Shared>) -> Answer + Send + Sync>;

/// An answer: the response, its status for the exchange log and its delay
/// on top of the server-wide latency.
#[derive(Clone)]
pub(crate) struct Answer {
    template: ResponseTemplate,
    status: Option<u16>,
    delay: Duration,
}

impl Answer {
    /// `status` with `body` of type `mime`.
    pub(crate) fn new(status: u16, body: impl Into<Vec<u8>>, mime: &str) -> Answer {
        Answer {
            template: ResponseTemplate::new(status).set_body_raw(body.into(), mime),
            status: Some(status),
            delay: Duration::ZERO,
        }
    }

    /// `status` without a body.
    pub(crate) fn empty(status: u16) -> Answer {
        Answer {
            template: ResponseTemplate::new(status),
            status: Some(status),
            delay: Duration::ZERO,
        }
    }

    /// A response the kit did not make (its status unknown to the log).
    pub(crate) fn raw(template: ResponseTemplate) -> Answer {
        Answer {
            template,
            status: None,
            delay: Duration::ZERO,
        }
    }

    pub(crate) fn header(mut self, name: &'static str, value: &str) -> Answer {
        self.template = self.template.insert_header(name, value);
        self
    }

    /// The same answer, `delay` later.
    pub(crate) fn after(mut self, delay: Duration) -> Answer {
        self.delay += delay;
        self
    }
}
pub(crate) type Predicate<R> = Arc<dyn Fn(&R) -> bool + Send + Sync>;

/// Mounts a built-in answer to `R`.
pub(crate) async fn built_in<R: Request + Decode + 'static, A: Into<Answer>>(
    vc: &MockVCenter,
    handler: impl Fn(&R, &wiremock::Request, &Arc<Shared>) -> A + Send + Sync + 'static,
) {
    mount::<R>(
        vc,
        BUILT_IN,
        None,
        None,
        None,
        Arc::new(move |r, request, shared| handler(r, request, shared).into()),
    )
    .await
}

/// Mounts a mock of operation `R`.
pub(crate) async fn mount<R: Request + Decode + 'static>(
    vc: &MockVCenter,
    priority: u8,
    predicate: Option<Predicate<R>>,
    times: Option<u64>,
    expect: Option<u64>,
    handler: Handler<R>,
) {
    let mut mock = Mock::given(Operation::<R> {
        predicate,
        _request: PhantomData,
    })
    .respond_with(Typed::<R> {
        shared: vc.shared.clone(),
        handler,
    })
    .with_priority(priority);
    if let Some(n) = times {
        mock = mock.up_to_n_times(n);
    }
    if let Some(n) = expect {
        mock = mock.expect(n);
    }
    mock.mount(&vc.server).await;
}

/// Matches the SOAP requests of operation `R` (and the predicate on the
/// decoded request, if any).
struct Operation<R> {
    predicate: Option<Predicate<R>>,
    _request: PhantomData<fn() -> R>,
}

impl<R: Request + Decode + 'static> Match for Operation<R> {
    fn matches(&self, request: &wiremock::Request) -> bool {
        if operation(request) != Some(R::NAME) {
            return false;
        }
        match &self.predicate {
            None => true,
            Some(predicate) => soap::decode_request_envelope::<R>(&request.body)
                .map(|decoded| predicate(&decoded))
                .unwrap_or(false),
        }
    }
}

/// Decodes the request and hands it to the handler; the server-wide
/// latency is added to whatever it answers.
struct Typed<R> {
    shared: Arc<Shared>,
    handler: Handler<R>,
}

impl<R: Request + Decode + 'static> Respond for Typed<R> {
    fn respond(&self, request: &wiremock::Request) -> ResponseTemplate {
        let received = Instant::now();
        let answer = match soap::decode_request_envelope::<R>(&request.body) {
            Ok(decoded) => (self.handler)(&decoded, request, &self.shared),
            Err(err) => xml_template(
                500,
                soap::encode_fault_envelope(&SoapFault {
                    faultcode: "ClientFaultCode".to_string(),
                    faultstring: format!("vsphere-testkit cannot decode this {}: {err}", R::NAME),
                    detail: None,
                    type_name: None,
                }),
            ),
        };
        self.shared.send(request, received, answer)
    }
}

/// Any SOAP call.
struct SoapCall;

impl Match for SoapCall {
    fn matches(&self, request: &wiremock::Request) -> bool {
        operation(request).is_some()
    }
}

/// A SOAP call that needs a session and carries no live one.
struct NoSession(Arc<Shared>);

impl Match for NoSession {
    fn matches(&self, request: &wiremock::Request) -> bool {
        let Some(op) = operation(request) else {
            return false;
        };
        if WITHOUT_SESSION.contains(&op) {
            return false;
        }
        match soap_cookie(request) {
            Some(cookie) => !self.0.soap_session_valid(&cookie),
            None => true,
        }
    }
}

/// A fixed answer with the server-wide latency added.
pub(crate) struct Latent(pub(crate) Arc<Shared>, pub(crate) Answer);

impl Respond for Latent {
    fn respond(&self, request: &wiremock::Request) -> ResponseTemplate {
        self.0.send(request, Instant::now(), self.1.clone())
    }
}

/// An HTTP error page as vCenter's reverse proxy sends it.
pub(crate) fn status_template(status: u16) -> Answer {
    let reason = match status {
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        _ => "Error",
    };
    Answer::new(
        status,
        format!(
            "<!DOCTYPE html><html><head><title>{status} {reason}</title></head><body><h1>{status} {reason}</h1><p>Too many outstanding operations</p></body></html>"
        ),
        "text/html",
    )
}

/// Scripts the answer to one operation: made by [`MockVCenter::on`],
/// narrowed with [`when`](Self::when), [`times`](Self::times) and
/// [`expect`](Self::expect), mounted by one of the answers
/// ([`returns`](Self::returns), [`fails`](Self::fails),
/// [`returns_task`](Self::returns_task), [`reply`](Self::reply),
/// [`reply_with`](Self::reply_with), [`drops_connection`](Self::drops_connection)).
///
/// Mocks mounted later take precedence over earlier ones of the same
/// priority only when the earlier ones do not match: wiremock answers with
/// the first mounted mock that matches, so mount the narrow ones
/// ([`when`](Self::when), [`times`](Self::times)) first.
#[must_use = "an On does nothing until one of its answers is mounted"]
pub struct On<'a, R> {
    vc: &'a MockVCenter,
    predicate: Option<Predicate<R>>,
    times: Option<u64>,
    expect: Option<u64>,
}

impl<R> std::fmt::Debug for On<'_, R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("On")
            .field("operation", &std::any::type_name::<R>())
            .field("filtered", &self.predicate.is_some())
            .field("times", &self.times)
            .field("expect", &self.expect)
            .finish_non_exhaustive()
    }
}

impl<R: Request + Decode + 'static> On<'_, R> {
    /// Only requests for which `predicate` holds on the decoded request
    /// (`|clone| clone.name == "web-1"`).
    pub fn when(mut self, predicate: impl Fn(&R) -> bool + Send + Sync + 'static) -> Self {
        self.predicate = Some(Arc::new(predicate));
        self
    }

    /// Answers at most `n` requests; later ones fall through to the next
    /// matching mock (or the built-in answer).
    pub fn times(mut self, n: u64) -> Self {
        self.times = Some(n);
        self
    }

    /// Expects exactly `n` matching requests: checked when the
    /// [`MockVCenter`] is dropped (a panic naming the mock if not).
    pub fn expect(mut self, n: u64) -> Self {
        self.expect = Some(n);
        self
    }

    /// Answers with `response`, the operation's typed result.
    pub async fn returns(self, response: R::Response)
    where
        R::Response: ReturnValue,
    {
        self.reply(Reply::ok(response)).await
    }

    /// Answers with a SOAP fault carrying `fault` (a typed vim25 fault:
    /// `InvalidState::default()`, `DuplicateName { .. }`) and `message`.
    pub async fn fails(self, fault: impl Into<AnyMethodFault>, message: &str) {
        self.reply(Reply::fault(fault, message)).await
    }

    /// Answers with `reply`.
    pub async fn reply(self, reply: Reply<R>) {
        self.reply_with(move |_| reply.clone()).await
    }

    /// Answers each request with what `respond` makes of it.
    pub async fn reply_with(self, respond: impl Fn(&R) -> Reply<R> + Send + Sync + 'static) {
        let handler: Handler<R> =
            Arc::new(move |request, _, shared| respond(request).into_answer(request, shared));
        mount::<R>(self.vc, 5, self.predicate, self.times, self.expect, handler).await
    }

    /// Answers with no answer: the server closes the connection.
    pub async fn drops_connection(self) {
        let mut mock = Mock::given(Operation::<R> {
            predicate: self.predicate,
            _request: PhantomData,
        })
        .respond_with_err(|_: &wiremock::Request| {
            std::io::Error::new(
                std::io::ErrorKind::ConnectionReset,
                "vsphere-testkit: connection dropped",
            )
        });
        if let Some(n) = self.times {
            mock = mock.up_to_n_times(n);
        }
        if let Some(n) = self.expect {
            mock = mock.expect(n);
        }
        mock.mount(&self.vc.server).await;
    }
}

impl<R: Request<Response = ManagedObjectReference> + Decode + 'static> On<'_, R> {
    /// Answers a `*_Task` operation with a new task whose `info` follows
    /// `script`, as the client's task watcher sees it.
    pub async fn returns_task(self, script: TaskScript) {
        self.reply(Reply::task(script)).await
    }
}
