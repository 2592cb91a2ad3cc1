//! The crate's error type.
//!
//! One `Error` for everything a call can run into, with a stable
//! [`ErrorKind`] to branch on, the underlying cause kept as
//! [`std::error::Error::source`] (never repeated in `Display`), and, for SOAP
//! faults, the typed [`Fault`].

use std::fmt;

use crate::types::{AnyMethodFault, InvalidLogin};
use crate::xml::{SchemaType, VariantOf};

type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// What went wrong, coarsely: stable across versions, meant for `match`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The builder was given something unusable (bad URL, unreadable CA
    /// bundle, malformed thumbprint...). Nothing was sent.
    InvalidConfig,
    /// The connection failed or broke (refused, reset, DNS, proxy...).
    Transport,
    /// TLS failed: most often the server's certificate was not trusted
    /// (unknown CA, wrong host name, expired, thumbprint mismatch).
    Tls,
    /// The call did not complete in time; [`Error::timeout_cause`] says
    /// which bound ended it (the call's deadline, an attempt's timeout, a
    /// response body that stalled or came too slowly).
    Timeout,
    /// The server answered with an HTTP status that is neither success nor a
    /// SOAP fault (for example a 503 from a proxy, or a 404 on a wrong path).
    HttpStatus(u16),
    /// The server answered with a SOAP fault; see [`Error::fault`] and
    /// [`Error::is_fault`].
    Fault,
    /// The server refused the user name or password: vim25's `InvalidLogin`
    /// fault (or its subtype `PasswordExpired`), on connect or when the
    /// client logged in again. [`Error::fault`] holds the fault. Never
    /// retried: a wrong password stays wrong.
    InvalidLogin,
    /// The response looked like SOAP but could not be decoded (malformed or
    /// truncated XML, an unexpected element).
    Decode,
    /// The response is not SOAP at all (an HTML error page, an empty body).
    NotSoap,
    /// The response body was larger than the configured limit.
    BodyTooLarge,
    /// The call needs a session and the client has no credentials to create
    /// one, or logging in again did not help.
    NotAuthenticated,
    /// The vSphere Automation (REST) API answered with a vAPI error
    /// (`com.vmware.vapi.std.errors.*`); see
    /// [`Error::rest_error`](crate::Error::rest_error) for its type and messages.
    Rest,
    /// A REST response that should be JSON is not (an HTML page, plain text).
    NotJson,
    /// An argument is unusable before anything is sent: an unknown property
    /// path, a malformed inventory path or UUID. The message names it.
    InvalidArgument,
    /// The request carries a field, enumeration value, type or operation
    /// that vSphere added after the API version negotiated with the server
    /// (the lower of the server's and the bindings'): nothing was sent. The
    /// message names the item, the version that added it and the server's.
    /// A field newer than the server is only an error when it is set; left
    /// unset (`None`, empty), it is not sent and the call goes ahead.
    NewerThanServer,
    /// What was looked up does not exist: an inventory path that matches
    /// nothing, a UUID no VM has. (A managed object reference that no longer
    /// exists is the server's `ManagedObjectNotFound` fault instead.)
    NotFound,
}

/// Which bound ended a call of kind [`ErrorKind::Timeout`]
/// ([`Error::timeout_cause`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum TimeoutCause {
    /// The call's deadline passed: the bound on the whole call, every
    /// attempt and backoff included
    /// ([`ClientBuilder::call_deadline`](crate::ClientBuilder::call_deadline)).
    CallDeadline,
    /// One attempt took longer than the per-attempt timeout
    /// ([`ClientBuilder::call_timeout`](crate::ClientBuilder::call_timeout)).
    AttemptTimeout,
    /// The response body stopped: no byte for the body idle timeout
    /// ([`ClientBuilder::body_idle_timeout`](crate::ClientBuilder::body_idle_timeout)).
    BodyIdle,
    /// The response body kept coming, but more slowly than the minimum
    /// transfer rate ([`ClientBuilder::min_body_rate`](crate::ClientBuilder::min_body_rate)).
    BodyTooSlow,
    /// The TCP or TLS connection was not established within the connect
    /// timeout.
    Connect,
}

/// A SOAP fault returned by the server: the fault code and message, and the
/// typed fault from `detail` when there was one.
#[derive(Clone, PartialEq)]
pub struct Fault {
    code: String,
    message: String,
    type_name: Option<String>,
    detail: Option<AnyMethodFault>,
}

impl Fault {
    /// Builds a fault from its parts (used by the SOAP layer and by tests).
    pub fn new(
        code: impl Into<String>,
        message: impl Into<String>,
        type_name: Option<String>,
        detail: Option<AnyMethodFault>,
    ) -> Self {
        Fault {
            code: code.into(),
            message: message.into(),
            type_name,
            detail,
        }
    }

    /// The SOAP `faultcode` (usually `ServerFaultCode`).
    pub fn code(&self) -> &str {
        &self.code
    }

    /// The server's message (`faultstring`), possibly empty.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The typed fault from the `detail` element. A fault type this crate
    /// does not know decodes as its nearest known base (at worst
    /// `MethodFault`); [`Fault::type_name`] still names the real type.
    pub fn detail(&self) -> Option<&AnyMethodFault> {
        self.detail.as_ref()
    }

    /// The vim25 type name of the fault as the server sent it
    /// (`InvalidLogin`, `NotAuthenticated`, or a type newer than this crate).
    pub fn type_name(&self) -> Option<&str> {
        self.type_name.as_deref()
    }

    /// Whether the server's fault type is `name` (the vim25 name, e.g.
    /// `"NotAuthenticated"`), exactly. [`is_a`](Self::is_a) also accepts
    /// subtypes.
    pub fn is(&self, name: &str) -> bool {
        self.type_name.as_deref() == Some(name)
    }

    /// Whether the fault is a `T` or a subtype of `T`
    /// (`is_a::<FileFault>()` holds for `FileNotFound`). A fault type newer
    /// than this crate counts as its nearest known base, the type its
    /// [`detail`](Self::detail) decoded as.
    pub fn is_a<T: SchemaType>(&self) -> bool {
        let registry = &vsphere_vim25::REGISTRY;
        let known = |name: &str| registry.get(name).is_some();
        if let Some(name) = self.type_name.as_deref().filter(|n| known(n)) {
            return registry.is_subtype_of(name, T::TYPE_NAME);
        }
        self.detail
            .as_ref()
            .is_some_and(|d| registry.is_subtype_of(d.type_name(), T::TYPE_NAME))
    }

    /// The fault's detail as a `T`, when it is exactly a `T`:
    /// `fault.detail_as::<DuplicateName>().map(|d| &d.object)`.
    pub fn detail_as<T: VariantOf<AnyMethodFault>>(&self) -> Option<&T> {
        self.detail.as_ref()?.downcast_ref()
    }
}

impl fmt::Debug for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Fault")
            .field("code", &self.code)
            .field("message", &self.message)
            .field("type_name", &self.type_name)
            .field("detail", &self.detail)
            .finish()
    }
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.type_name.as_deref(), self.message.is_empty()) {
            (Some(name), false) => write!(f, "{name}: {}", self.message),
            (Some(name), true) => f.write_str(name),
            (None, false) => write!(f, "{}: {}", self.code, self.message),
            (None, true) => f.write_str(&self.code),
        }
    }
}

/// An error from the vSphere client.
///
/// Branch on [`Error::kind`]; for SOAP faults [`Error::fault`] gives the
/// typed fault:
///
/// ```no_run
/// # async fn demo(client: vsphere_client::Client, err: vsphere_client::Error) {
/// use vsphere_client::{types::AnyMethodFault, ErrorKind};
/// match err.kind() {
///     ErrorKind::Fault => match err.fault().and_then(|f| f.detail()) {
///         Some(AnyMethodFault::DuplicateName(dup)) => { /* already there */ }
///         _ => { /* another fault */ }
///     },
///     ErrorKind::Timeout => { /* try later */ }
///     _ => {}
/// }
/// # }
/// ```
pub struct Error {
    inner: Box<Inner>,
}

struct Inner {
    kind: ErrorKind,
    message: String,
    method: Option<&'static str>,
    fault: Option<Fault>,
    source: Option<BoxError>,
    timeout_cause: Option<TimeoutCause>,
}

impl Error {
    pub(crate) fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Error {
            inner: Box::new(Inner {
                kind,
                message: message.into(),
                method: None,
                fault: None,
                source: None,
                timeout_cause: None,
            }),
        }
    }

    /// An error of kind [`ErrorKind::Timeout`] saying which bound ended the call.
    pub(crate) fn timeout(cause: TimeoutCause, message: impl Into<String>) -> Self {
        let mut err = Error::new(ErrorKind::Timeout, message);
        err.inner.timeout_cause = Some(cause);
        err
    }

    pub(crate) fn with_source(mut self, source: impl Into<BoxError>) -> Self {
        self.inner.source = Some(source.into());
        self
    }

    /// Adds a remark to the message: `message (note)`.
    pub(crate) fn with_note(mut self, note: &str) -> Self {
        self.inner.message = if self.inner.message.is_empty() {
            note.to_string()
        } else {
            format!("{} ({note})", self.inner.message)
        };
        self
    }

    /// The error for a fault the server sent: of kind
    /// [`ErrorKind::InvalidLogin`] for a refused login, else
    /// [`ErrorKind::Fault`].
    pub(crate) fn from_fault(fault: Fault) -> Self {
        let kind = if fault.is_a::<InvalidLogin>() {
            ErrorKind::InvalidLogin
        } else {
            ErrorKind::Fault
        };
        let mut err = Error::new(kind, String::new());
        err.inner.fault = Some(fault);
        err
    }

    /// Attaches the fault and method of another error this one reports on.
    pub(crate) fn with_fault(mut self, fault: Option<Fault>, method: Option<&'static str>) -> Self {
        self.inner.fault = fault;
        self.inner.method = self.inner.method.or(method);
        self
    }

    /// Records which SOAP method failed (shown in `Display`).
    pub(crate) fn in_method(mut self, method: &'static str) -> Self {
        if self.inner.method.is_none() {
            self.inner.method = Some(method);
        }
        self
    }

    pub(crate) fn invalid_config(message: impl Into<String>) -> Self {
        Error::new(ErrorKind::InvalidConfig, message)
    }

    /// What kind of failure this is.
    pub fn kind(&self) -> ErrorKind {
        self.inner.kind
    }

    /// The SOAP fault, when [`kind`](Error::kind) is [`ErrorKind::Fault`]
    /// or [`ErrorKind::InvalidLogin`] (and for a failed task: the task's
    /// fault).
    pub fn fault(&self) -> Option<&Fault> {
        self.inner.fault.as_ref()
    }

    /// Whether the error carries a fault of type `T` or of a subtype of `T`:
    ///
    /// ```
    /// # fn demo(err: &vsphere_client::Error) {
    /// use vsphere_client::types::{DuplicateName, FileFault, ManagedObjectNotFound};
    /// if err.is_fault::<DuplicateName>() { /* the name is taken */ }
    /// if err.is_fault::<FileFault>() { /* FileNotFound, FileLocked, ... */ }
    /// if err.is_fault::<ManagedObjectNotFound>() { /* the object is gone */ }
    /// # }
    /// ```
    pub fn is_fault<T: SchemaType>(&self) -> bool {
        self.fault().is_some_and(Fault::is_a::<T>)
    }

    /// The fault's detail as a `T`, when the error carries exactly a `T`.
    pub fn fault_as<T: VariantOf<AnyMethodFault>>(&self) -> Option<&T> {
        self.fault()?.detail_as()
    }

    /// The error with its whole chain of causes, on one line (see [`report`]).
    pub fn report(&self) -> Report<'_> {
        Report(self)
    }

    /// For an error of kind [`ErrorKind::Timeout`], which bound ended the
    /// call: its deadline, an attempt's timeout, a stalled or too slow
    /// response body, the connect timeout.
    ///
    /// ```no_run
    /// # fn demo(err: &vsphere_client::Error) {
    /// use vsphere_client::TimeoutCause;
    /// if err.timeout_cause() == Some(TimeoutCause::CallDeadline) {
    ///     eprintln!("vCenter did not answer in time: {}", err.report());
    /// }
    /// # }
    /// ```
    pub fn timeout_cause(&self) -> Option<TimeoutCause> {
        self.inner.timeout_cause
    }

    /// The SOAP method that failed, when the error came from a call.
    pub fn method(&self) -> Option<&'static str> {
        self.inner.method
    }

    /// Whether this is the `NotAuthenticated` fault (the session is gone).
    pub fn is_not_authenticated(&self) -> bool {
        self.fault().is_some_and(|f| {
            f.is("NotAuthenticated")
                || matches!(f.detail(), Some(AnyMethodFault::NotAuthenticated(_)))
        })
    }

    /// Whether the request can be known not to have reached the server
    /// (connection refused, DNS failure...), so repeating it is always safe.
    pub(crate) fn request_not_sent(&self) -> bool {
        // A connect timeout is a Timeout, and still never reached the server.
        matches!(self.inner.kind, ErrorKind::Transport | ErrorKind::Timeout)
            && self
                .inner
                .source
                .as_deref()
                .is_some_and(|s| crate::http_client::is_connect_error(s))
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("Error");
        d.field("kind", &self.inner.kind);
        if !self.inner.message.is_empty() {
            d.field("message", &self.inner.message);
        }
        if let Some(method) = self.inner.method {
            d.field("method", &method);
        }
        if let Some(cause) = self.inner.timeout_cause {
            d.field("timeout_cause", &cause);
        }
        if let Some(fault) = &self.inner.fault {
            d.field("fault", fault);
        }
        if let Some(source) = &self.inner.source {
            d.field("source", source);
        }
        d.finish()
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(method) = self.inner.method {
            write!(f, "{method}: ")?;
        }
        match (&self.inner.fault, self.inner.message.is_empty()) {
            (Some(fault), true) => write!(f, "{fault}"),
            (Some(fault), false) => write!(f, "{}: {fault}", self.inner.message),
            (None, _) => f.write_str(&self.inner.message),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.inner
            .source
            .as_deref()
            .map(|s| s as &(dyn std::error::Error + 'static))
    }
}

/// Formats an error and its causes ([`std::error::Error::source`]) on one
/// line, joined with `: `, leaving out a cause whose text the line already
/// holds: `cannot connect to https://vc/sdk: tcp connect error: Connection
/// refused (os error 111)`. For any error type, so that a program's own errors
/// wrapping this crate's print the same way.
///
/// ```
/// let err = std::io::Error::other("disk full");
/// assert_eq!(vsphere_client::report(&err).to_string(), "disk full");
/// ```
pub fn report<'a>(err: &'a (dyn std::error::Error + 'static)) -> Report<'a> {
    Report(err)
}

/// An error with its chain of causes, on one line; made by [`report`] or
/// [`Error::report`].
#[derive(Clone, Copy)]
pub struct Report<'a>(&'a (dyn std::error::Error + 'static));

impl fmt::Display for Report<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut line = self.0.to_string();
        let mut source = self.0.source();
        while let Some(cause) = source {
            let text = cause.to_string();
            if !text.is_empty() && !line.contains(&text) {
                line.push_str(": ");
                line.push_str(&text);
            }
            source = cause.source();
        }
        f.write_str(&line.replace(['\r', '\n'], " "))
    }
}

impl fmt::Debug for Report<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// Says in words why a certificate was refused.
pub(crate) fn describe_certificate_error(reason: &rustls::CertificateError) -> String {
    use rustls::CertificateError as E;
    match reason {
        E::UnknownIssuer => "the certificate is not signed by a trusted CA (unknown issuer)".into(),
        E::NotValidForName => "the certificate is not valid for this host name".into(),
        E::NotValidForNameContext { expected, presented } => {
            let names: Vec<&str> = presented.iter().map(|n| presented_name(n)).collect();
            format!(
                "the certificate is not valid for the host name {} (it names {})",
                expected.to_str(),
                if names.is_empty() {
                    "no host".to_string()
                } else {
                    names.join(", ")
                }
            )
        }
        E::Expired => "the certificate has expired".into(),
        E::ExpiredContext { time, not_after } => {
            let days = time.as_secs().saturating_sub(not_after.as_secs()) / 86_400;
            format!("the certificate has expired ({days} days ago)")
        }
        E::NotValidYet | E::NotValidYetContext { .. } => "the certificate is not valid yet".into(),
        E::Revoked => "the certificate was revoked".into(),
        E::BadSignature | E::BadEncoding => "the certificate is malformed or badly signed".into(),
        E::InvalidPurpose | E::InvalidPurposeContext { .. } => {
            "the certificate is not meant for TLS servers".into()
        }
        E::Other(other) => match other.to_string().as_str() {
            // webpki's name for a self-signed server certificate.
            "CaUsedAsEndEntity" => {
                "the server's certificate is self-signed (a CA certificate used as the server's own), not trusted".into()
            }
            // Our own verifiers' reasons (thumbprint mismatch) are sentences.
            text => text.to_owned(),
        },
        other => format!("the certificate was refused ({other:?})"),
    }
}

/// A subject name as webpki reports it (`DnsName("vc.example.com")`,
/// `IpAddress(10.0.0.1)`), without the wrapper.
fn presented_name(name: &str) -> &str {
    name.strip_prefix("DnsName(\"")
        .and_then(|n| n.strip_suffix("\")"))
        .or_else(|| {
            name.strip_prefix("IpAddress(")
                .and_then(|n| n.strip_suffix(')'))
        })
        .unwrap_or(name)
}

/// The first error of type `T` in `err`'s source chain (itself included).
pub(crate) fn find_in_chain<'a, T: std::error::Error + 'static>(
    err: &'a (dyn std::error::Error + 'static),
) -> Option<&'a T> {
    let mut current = Some(err);
    while let Some(e) = current {
        if let Some(found) = e.downcast_ref::<T>() {
            return Some(found);
        }
        // io::Error's `source` skips the error it wraps (rustls errors
        // arrive as io::Error, sometimes wrapped twice): look inside.
        let mut io = e.downcast_ref::<std::io::Error>();
        while let Some(inner) = io.and_then(std::io::Error::get_ref) {
            if let Some(found) = inner.downcast_ref::<T>() {
                return Some(found);
            }
            io = inner.downcast_ref::<std::io::Error>();
        }
        current = e.source();
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_does_not_repeat_source() {
        let io = std::io::Error::other("connection reset by peer");
        let err =
            Error::new(ErrorKind::Transport, "cannot connect to https://vc/sdk").with_source(io);
        assert_eq!(err.to_string(), "cannot connect to https://vc/sdk");
        assert_eq!(
            std::error::Error::source(&err)
                .map(std::string::ToString::to_string)
                .as_deref(),
            Some("connection reset by peer")
        );
    }

    #[test]
    fn certificate_name_and_date_errors_say_what_is_wrong() {
        use rustls::pki_types::{ServerName, UnixTime};
        let wrong_name = rustls::CertificateError::NotValidForNameContext {
            expected: ServerName::try_from("127.0.0.1").unwrap(),
            presented: vec![
                "DnsName(\"vc.example.test\")".to_string(),
                "IpAddress(10.0.0.1)".to_string(),
            ],
        };
        assert_eq!(
            describe_certificate_error(&wrong_name),
            "the certificate is not valid for the host name 127.0.0.1 (it names vc.example.test, 10.0.0.1)"
        );
        let expired = rustls::CertificateError::ExpiredContext {
            time: UnixTime::since_unix_epoch(std::time::Duration::from_secs(10 * 86_400)),
            not_after: UnixTime::since_unix_epoch(std::time::Duration::from_secs(3 * 86_400)),
        };
        assert_eq!(
            describe_certificate_error(&expired),
            "the certificate has expired (7 days ago)"
        );
    }

    #[test]
    fn fault_display_names_type_and_message() {
        let fault = Fault::new(
            "ServerFaultCode",
            "Login failure",
            Some("InvalidLogin".into()),
            None,
        );
        let err = Error::from_fault(fault).in_method("Login");
        assert_eq!(err.to_string(), "Login: InvalidLogin: Login failure");
    }

    fn fault_error(type_name: &str, detail: Option<AnyMethodFault>) -> Error {
        Error::from_fault(Fault::new(
            "ServerFaultCode",
            "message",
            Some(type_name.into()),
            detail,
        ))
    }

    #[test]
    fn a_refused_login_has_its_own_kind() {
        use crate::types::{NotAuthenticated, PasswordExpired};
        let wrong_password = fault_error("InvalidLogin", None);
        assert_eq!(wrong_password.kind(), ErrorKind::InvalidLogin);
        assert!(wrong_password.is_fault::<InvalidLogin>());
        assert!(!wrong_password.is_not_authenticated());
        // PasswordExpired is an InvalidLogin.
        let expired = fault_error(
            "PasswordExpired",
            Some(AnyMethodFault::PasswordExpired(Box::default())),
        );
        assert_eq!(expired.kind(), ErrorKind::InvalidLogin);
        assert!(expired.fault_as::<PasswordExpired>().is_some());
        let gone = fault_error("NotAuthenticated", None);
        assert_eq!(gone.kind(), ErrorKind::Fault);
        assert!(gone.is_not_authenticated() && gone.is_fault::<NotAuthenticated>());
    }

    #[test]
    fn typed_fault_checks_accept_subtypes() {
        use crate::types::{
            DuplicateName, FileFault, FileNotFound, InvalidState, MethodFault, VimFault,
        };
        let missing = fault_error(
            "FileNotFound",
            Some(AnyMethodFault::FileNotFound(Box::new(FileNotFound {
                file_fault: FileFault {
                    file: "[ds] vm/vm.vmx".into(),
                    ..Default::default()
                },
            }))),
        );
        assert!(missing.is_fault::<FileNotFound>());
        assert!(missing.is_fault::<FileFault>());
        assert!(missing.is_fault::<VimFault>() && missing.is_fault::<MethodFault>());
        assert!(!missing.is_fault::<DuplicateName>() && !missing.is_fault::<InvalidState>());
        assert_eq!(
            missing.fault_as::<FileNotFound>().map(|f| f.file.as_str()),
            Some("[ds] vm/vm.vmx")
        );
        // Exactly a T: a FileNotFound is not handed out as a FileFault.
        assert!(missing.fault_as::<FileFault>().is_none());
        // A fault type newer than the crate counts as the base it decoded as.
        let newer = fault_error(
            "FileBrandNewFault",
            Some(AnyMethodFault::FileFault(Box::default())),
        );
        assert!(newer.is_fault::<FileFault>() && !newer.is_fault::<FileNotFound>());
        // Not a fault at all.
        let timeout = Error::new(ErrorKind::Timeout, "slow");
        assert!(!timeout.is_fault::<MethodFault>() && timeout.fault_as::<MethodFault>().is_none());
    }

    #[test]
    fn a_report_holds_every_cause_once_on_one_line() {
        #[derive(Debug)]
        struct Wrapper(Error);
        impl fmt::Display for Wrapper {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("provisioning web-1")
            }
        }
        impl std::error::Error for Wrapper {
            fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
                Some(&self.0)
            }
        }
        let io = std::io::Error::other("connection refused\n(os error 111)");
        let err =
            Error::new(ErrorKind::Transport, "cannot connect to https://vc/sdk").with_source(io);
        assert_eq!(
            err.report().to_string(),
            "cannot connect to https://vc/sdk: connection refused (os error 111)"
        );
        let wrapped = Wrapper(err);
        assert_eq!(
            report(&wrapped).to_string(),
            "provisioning web-1: cannot connect to https://vc/sdk: connection refused (os error 111)"
        );
        // A cause the message already quotes is not repeated.
        let quoted = Error::new(ErrorKind::Transport, "failed: disk full")
            .with_source(std::io::Error::other("disk full"));
        assert_eq!(quoted.report().to_string(), "failed: disk full");
    }
}
