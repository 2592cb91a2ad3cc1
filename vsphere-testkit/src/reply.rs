//! `Reply`: what the mock answers to one request, from typed values.

use std::marker::PhantomData;
use std::sync::Arc;
use std::time::Duration;

use vsphere_client::types::{AnyMethodFault, ManagedObjectReference};
use vsphere_client::xml::soap::{self, ReturnValue};
use vsphere_client::Request;
use wiremock::ResponseTemplate;

use crate::server::{fault_template, status_template, xml_template, Answer, Shared};
use crate::tasks::TaskScript;

/// An answer to a request of operation `R`: its typed response, a typed
/// fault, an HTTP error, a new task, or raw bytes; optionally late.
///
/// ```
/// # use vsphere_testkit::Reply;
/// # use std::time::Duration;
/// use vsphere_client::types::{CurrentTimeRequestType, InvalidState};
/// use vsphere_client::DateTime;
///
/// let now: Reply<CurrentTimeRequestType> = Reply::ok(DateTime::new("2024-05-01T12:00:00Z"));
/// let busy: Reply<CurrentTimeRequestType> = Reply::status(503);
/// let refused: Reply<CurrentTimeRequestType> =
///     Reply::fault(InvalidState::default(), "The operation is not allowed in the current state.");
/// let slow = now.delay(Duration::from_secs(2));
/// ```
pub struct Reply<R> {
    body: Body,
    delay: Duration,
    _request: PhantomData<fn() -> R>,
}

impl<R> Clone for Reply<R> {
    fn clone(&self) -> Self {
        Reply {
            body: self.body.clone(),
            delay: self.delay,
            _request: PhantomData,
        }
    }
}

impl<R> std::fmt::Debug for Reply<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let body = match &self.body {
            Body::Soap(_) => "response".to_string(),
            Body::Fault(fault, message) => format!("fault {}: {message}", fault.type_name()),
            Body::Status(status) => format!("HTTP {status}"),
            Body::Http(_) => "raw HTTP".to_string(),
            Body::Task(..) => "task".to_string(),
        };
        f.debug_struct("Reply")
            .field("body", &body)
            .field("delay", &self.delay)
            .finish()
    }
}

#[derive(Clone)]
enum Body {
    /// An encoded SOAP response document (200).
    Soap(Arc<Vec<u8>>),
    /// A SOAP fault (500).
    Fault(AnyMethodFault, String),
    /// An HTML error page with this status.
    Status(u16),
    /// Anything.
    Http(ResponseTemplate),
    /// A new task following the script; its reference is the response,
    /// encoded by the operation's encoder.
    Task(TaskScript, fn(&ManagedObjectReference) -> Vec<u8>),
}

impl<R: Request> Reply<R> {
    fn new(body: Body) -> Self {
        Reply {
            body,
            delay: Duration::ZERO,
            _request: PhantomData,
        }
    }

    /// The operation's typed result (`()` for operations without one).
    pub fn ok(response: R::Response) -> Self
    where
        R::Response: ReturnValue,
    {
        Reply::new(Body::Soap(Arc::new(soap::encode_response_envelope::<R>(
            &response,
        ))))
    }

    /// A SOAP fault (HTTP 500) carrying the typed `fault` and `message`.
    pub fn fault(fault: impl Into<AnyMethodFault>, message: &str) -> Self {
        Reply::new(Body::Fault(fault.into(), message.to_string()))
    }

    /// An HTTP error with an HTML page as vCenter's reverse proxy sends it
    /// (503: "Too many outstanding operations").
    pub fn status(status: u16) -> Self {
        Reply::new(Body::Status(status))
    }

    /// Any HTTP response, for what is not a well-formed answer (malformed
    /// or truncated bodies, odd encodings, headers). Its
    /// [`Exchange::status`](crate::Exchange::status) is `None`.
    pub fn http(response: ResponseTemplate) -> Self {
        Reply::new(Body::Http(response))
    }

    /// The same answer, `delay` later (on top of the server-wide latency).
    pub fn delay(mut self, delay: Duration) -> Self {
        self.delay = delay;
        self
    }

    pub(crate) fn into_answer(self, request: &R, shared: &Arc<Shared>) -> Answer {
        let answer = match self.body {
            Body::Soap(bytes) => xml_template(200, bytes.as_ref().clone()),
            Body::Fault(fault, message) => fault_template(fault, &message),
            Body::Status(status) => status_template(status),
            Body::Http(template) => Answer::raw(template),
            Body::Task(script, encode) => {
                let task = shared.state().tasks.start(
                    R::NAME,
                    Some(request.this().clone()),
                    &shared.config.user,
                    script,
                );
                xml_template(200, encode(&task))
            }
        };
        answer.after(self.delay)
    }
}

impl<R: Request<Response = ManagedObjectReference>> Reply<R> {
    /// A new task (its reference is the response) whose `info` follows
    /// `script`, for `*_Task` operations.
    pub fn task(script: TaskScript) -> Self {
        Reply::new(Body::Task(script, soap::encode_response_envelope::<R>))
    }
}
