//! vAPI errors: the `com.vmware.vapi.std.errors.*` bodies of the Automation
//! API, in both its shapes, decoded into [`RestError`].
//!
//! ```text
//! /api:  {"error_type": "NOT_FOUND", "messages": [{"id": "...", "default_message": "...", "args": []}]}
//! /rest: {"type": "com.vmware.vapi.std.errors.not_found", "value": {"messages": [...]}}
//! ```

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::error::{Error, ErrorKind};

/// The prefix of vAPI standard error type names in `/rest` bodies.
const STD_ERRORS_PREFIX: &str = "com.vmware.vapi.std.errors.";

/// The type of a vAPI standard error. Open: a type this crate does not know
/// is kept as [`RestErrorType::Unknown`] with its name.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum RestErrorType {
    AlreadyExists,
    AlreadyInDesiredState,
    Canceled,
    ConcurrentChange,
    /// The generic `error` type.
    Error,
    FeatureInUse,
    InternalServerError,
    InvalidArgument,
    InvalidElementConfiguration,
    InvalidElementType,
    InvalidRequest,
    NotAllowedInCurrentState,
    NotFound,
    OperationNotFound,
    ResourceBusy,
    ResourceInUse,
    ResourceInaccessible,
    ServiceUnavailable,
    TimedOut,
    UnableToAllocateResource,
    /// The session is missing, expired or invalid (HTTP 401).
    Unauthenticated,
    /// The user lacks a privilege (HTTP 403).
    Unauthorized,
    UnexpectedInput,
    Unsupported,
    UnverifiedPeer,
    /// A type this crate does not know, as the server named it.
    Unknown(String),
}

/// Each known type with its `/api` name and its `/rest` name suffix.
const KNOWN: &[(RestErrorType, &str, &str)] = &[
    (
        RestErrorType::AlreadyExists,
        "ALREADY_EXISTS",
        "already_exists",
    ),
    (
        RestErrorType::AlreadyInDesiredState,
        "ALREADY_IN_DESIRED_STATE",
        "already_in_desired_state",
    ),
    (RestErrorType::Canceled, "CANCELED", "canceled"),
    (
        RestErrorType::ConcurrentChange,
        "CONCURRENT_CHANGE",
        "concurrent_change",
    ),
    (RestErrorType::Error, "ERROR", "error"),
    (
        RestErrorType::FeatureInUse,
        "FEATURE_IN_USE",
        "feature_in_use",
    ),
    (
        RestErrorType::InternalServerError,
        "INTERNAL_SERVER_ERROR",
        "internal_server_error",
    ),
    (
        RestErrorType::InvalidArgument,
        "INVALID_ARGUMENT",
        "invalid_argument",
    ),
    (
        RestErrorType::InvalidElementConfiguration,
        "INVALID_ELEMENT_CONFIGURATION",
        "invalid_element_configuration",
    ),
    (
        RestErrorType::InvalidElementType,
        "INVALID_ELEMENT_TYPE",
        "invalid_element_type",
    ),
    (
        RestErrorType::InvalidRequest,
        "INVALID_REQUEST",
        "invalid_request",
    ),
    (
        RestErrorType::NotAllowedInCurrentState,
        "NOT_ALLOWED_IN_CURRENT_STATE",
        "not_allowed_in_current_state",
    ),
    (RestErrorType::NotFound, "NOT_FOUND", "not_found"),
    (
        RestErrorType::OperationNotFound,
        "OPERATION_NOT_FOUND",
        "operation_not_found",
    ),
    (
        RestErrorType::ResourceBusy,
        "RESOURCE_BUSY",
        "resource_busy",
    ),
    (
        RestErrorType::ResourceInUse,
        "RESOURCE_IN_USE",
        "resource_in_use",
    ),
    (
        RestErrorType::ResourceInaccessible,
        "RESOURCE_INACCESSIBLE",
        "resource_inaccessible",
    ),
    (
        RestErrorType::ServiceUnavailable,
        "SERVICE_UNAVAILABLE",
        "service_unavailable",
    ),
    (RestErrorType::TimedOut, "TIMED_OUT", "timed_out"),
    (
        RestErrorType::UnableToAllocateResource,
        "UNABLE_TO_ALLOCATE_RESOURCE",
        "unable_to_allocate_resource",
    ),
    (
        RestErrorType::Unauthenticated,
        "UNAUTHENTICATED",
        "unauthenticated",
    ),
    (RestErrorType::Unauthorized, "UNAUTHORIZED", "unauthorized"),
    (
        RestErrorType::UnexpectedInput,
        "UNEXPECTED_INPUT",
        "unexpected_input",
    ),
    (RestErrorType::Unsupported, "UNSUPPORTED", "unsupported"),
    (
        RestErrorType::UnverifiedPeer,
        "UNVERIFIED_PEER",
        "unverified_peer",
    ),
];

impl RestErrorType {
    /// The `/api` name (`NOT_FOUND`), or the unknown type's name as sent.
    pub fn as_str(&self) -> &str {
        if let RestErrorType::Unknown(name) = self {
            return name;
        }
        KNOWN
            .iter()
            .find(|(t, _, _)| t == self)
            .map_or("", |(_, api, _)| *api)
    }

    /// Parses any spelling the server uses: `NOT_FOUND`, `not_found`, or
    /// `com.vmware.vapi.std.errors.not_found`.
    pub fn parse(name: &str) -> RestErrorType {
        let short = name.strip_prefix(STD_ERRORS_PREFIX).unwrap_or(name);
        KNOWN
            .iter()
            .find(|(_, api, rest)| short == *api || short == *rest)
            .map(|(t, _, _)| t.clone())
            .unwrap_or_else(|| RestErrorType::Unknown(name.to_owned()))
    }

    /// The type the vAPI maps to an HTTP status, for error bodies that say
    /// nothing more (an empty 401, a plain-text 404).
    pub(crate) fn from_status(status: u16) -> Option<RestErrorType> {
        match status {
            401 => Some(RestErrorType::Unauthenticated),
            403 => Some(RestErrorType::Unauthorized),
            404 => Some(RestErrorType::NotFound),
            _ => None,
        }
    }
}

impl FromStr for RestErrorType {
    type Err = std::convert::Infallible;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(RestErrorType::parse(s))
    }
}

impl fmt::Display for RestErrorType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A message of a vAPI error or result: a stable id, the English text and
/// its arguments.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct LocalizableMessage {
    pub id: String,
    pub default_message: String,
    pub args: Vec<String>,
}

/// A vAPI error returned by the Automation API: its type, its messages and
/// the HTTP status it came with. Reached through
/// [`Error::rest_error`](crate::Error::rest_error).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RestError {
    error_type: RestErrorType,
    messages: Vec<LocalizableMessage>,
    http_status: u16,
}

impl RestError {
    pub(crate) fn new(
        error_type: RestErrorType,
        messages: Vec<LocalizableMessage>,
        http_status: u16,
    ) -> Self {
        RestError {
            error_type,
            messages,
            http_status,
        }
    }

    /// What kind of error the server reported.
    pub fn error_type(&self) -> &RestErrorType {
        &self.error_type
    }

    /// The server's messages (possibly none).
    pub fn messages(&self) -> &[LocalizableMessage] {
        &self.messages
    }

    /// The HTTP status of the response (0 when the error came inside a
    /// successful response, as OVF deployment results do).
    pub fn http_status(&self) -> u16 {
        self.http_status
    }
}

impl fmt::Display for RestError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.error_type.as_str())?;
        let texts: Vec<&str> = self
            .messages
            .iter()
            .map(|m| {
                if m.default_message.is_empty() {
                    m.id.as_str()
                } else {
                    m.default_message.as_str()
                }
            })
            .filter(|t| !t.is_empty())
            .collect();
        if !texts.is_empty() {
            write!(f, ": {}", texts.join("; "))?;
        }
        Ok(())
    }
}

impl std::error::Error for RestError {}

impl Error {
    /// The vAPI error, when [`kind`](Error::kind) is [`ErrorKind::Rest`].
    ///
    /// ```no_run
    /// # async fn demo(rest: vsphere_client::rest::RestClient) -> Result<(), vsphere_client::Error> {
    /// use vsphere_client::rest::RestErrorType;
    /// match rest.tagging().get_category("urn:vmomi:InventoryServiceCategory:x:GLOBAL").await {
    ///     Ok(category) => println!("{}", category.name),
    ///     Err(err) if err.rest_error().is_some_and(|e| *e.error_type() == RestErrorType::NotFound) => {}
    ///     Err(err) => return Err(err),
    /// }
    /// # Ok(()) }
    /// ```
    pub fn rest_error(&self) -> Option<&RestError> {
        if self.kind() != ErrorKind::Rest {
            return None;
        }
        std::error::Error::source(self).and_then(|s| s.downcast_ref::<RestError>())
    }

    /// Whether this is a vAPI error of type `error_type`.
    pub fn is_rest_error(&self, error_type: &RestErrorType) -> bool {
        self.rest_error()
            .is_some_and(|e| e.error_type() == error_type)
    }
}

/// Builds the crate error for a vAPI error of `operation`.
pub(crate) fn rest_error(operation: &str, error: RestError) -> Error {
    Error::new(ErrorKind::Rest, format!("{operation}: {error}")).with_source(error)
}

/// A message either as the vAPI structure or as a plain string (vcsim's
/// `/rest` errors use strings).
#[derive(Deserialize)]
#[serde(untagged)]
enum WireMessage {
    Structured(LocalizableMessage),
    Text(String),
}

impl From<WireMessage> for LocalizableMessage {
    fn from(message: WireMessage) -> Self {
        match message {
            WireMessage::Structured(m) => m,
            WireMessage::Text(text) => LocalizableMessage {
                default_message: text,
                ..Default::default()
            },
        }
    }
}

#[derive(Deserialize)]
struct ApiErrorBody {
    error_type: String,
    #[serde(default)]
    messages: Option<Vec<WireMessage>>,
}

#[derive(Deserialize)]
struct RestErrorBody {
    #[serde(rename = "type")]
    type_: String,
    #[serde(default)]
    value: Option<RestErrorValue>,
}

#[derive(Deserialize)]
struct RestErrorValue {
    #[serde(default)]
    messages: Option<Vec<WireMessage>>,
}

/// Decodes a vAPI error body in either shape. `None` when the body is not
/// one (not JSON, or JSON of another shape).
pub(crate) fn parse_error_body(body: &[u8], http_status: u16) -> Option<RestError> {
    let value: serde_json::Value = serde_json::from_slice(body).ok()?;
    if value
        .get("error_type")
        .is_some_and(serde_json::Value::is_string)
    {
        let parsed: ApiErrorBody = serde_json::from_value(value).ok()?;
        return Some(RestError::new(
            RestErrorType::parse(&parsed.error_type),
            parsed
                .messages
                .unwrap_or_default()
                .into_iter()
                .map(Into::into)
                .collect(),
            http_status,
        ));
    }
    let looks_like_rest = value
        .get("type")
        .and_then(|t| t.as_str())
        .is_some_and(|t| t.starts_with(STD_ERRORS_PREFIX) || t.contains("errors."));
    if looks_like_rest {
        let parsed: RestErrorBody = serde_json::from_value(value).ok()?;
        let messages = parsed.value.and_then(|v| v.messages).unwrap_or_default();
        return Some(RestError::new(
            RestErrorType::parse(&parsed.type_),
            messages.into_iter().map(Into::into).collect(),
            http_status,
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn types_parse_in_every_spelling() {
        for (_, api, rest) in KNOWN {
            let a = RestErrorType::parse(api);
            assert!(!matches!(a, RestErrorType::Unknown(_)), "{api}");
            assert_eq!(a, RestErrorType::parse(rest));
            assert_eq!(
                a,
                RestErrorType::parse(&format!("{STD_ERRORS_PREFIX}{rest}"))
            );
            assert_eq!(a.as_str(), *api);
        }
        let unknown = RestErrorType::parse("com.vmware.vapi.std.errors.brand_new");
        assert_eq!(
            unknown,
            RestErrorType::Unknown("com.vmware.vapi.std.errors.brand_new".into())
        );
        assert_eq!(unknown.as_str(), "com.vmware.vapi.std.errors.brand_new");
    }

    #[test]
    fn api_shape_decodes() {
        let body = br#"{"error_type":"ALREADY_EXISTS","messages":[{"args":["zone"],"default_message":"Category zone exists","id":"cis.tagging.exists"}]}"#;
        let err = parse_error_body(body, 400).unwrap();
        assert_eq!(*err.error_type(), RestErrorType::AlreadyExists);
        assert_eq!(err.messages()[0].args, vec!["zone".to_string()]);
        assert_eq!(err.to_string(), "ALREADY_EXISTS: Category zone exists");
        assert_eq!(err.http_status(), 400);
    }

    #[test]
    fn rest_shape_decodes_with_or_without_messages() {
        let body = br#"{"type":"com.vmware.vapi.std.errors.not_found","value":{"messages":[{"args":[],"default_message":"gone","id":"x"}]}}"#;
        let err = parse_error_body(body, 404).unwrap();
        assert_eq!(*err.error_type(), RestErrorType::NotFound);
        assert_eq!(err.to_string(), "NOT_FOUND: gone");
        // vcsim: no messages at all.
        let err = parse_error_body(
            br#"{"type":"com.vmware.vapi.std.errors.already_exists","value":{}}"#,
            400,
        )
        .unwrap();
        assert_eq!(*err.error_type(), RestErrorType::AlreadyExists);
        assert!(err.messages().is_empty());
        let err = parse_error_body(br#"{"type":"com.vmware.vapi.std.errors.invalid_argument","value":{"messages":["bad"]}}"#, 400).unwrap();
        assert_eq!(err.messages()[0].default_message, "bad");
    }

    #[test]
    fn other_bodies_are_not_vapi_errors() {
        for body in [
            &b"404 page not found"[..],
            b"",
            b"{}",
            b"[1,2]",
            b"{\"type\":\"text\"}",
            b"<html>",
            b"{\"error_type\":3}",
        ] {
            assert!(
                parse_error_body(body, 404).is_none(),
                "{:?}",
                String::from_utf8_lossy(body)
            );
        }
    }
}
