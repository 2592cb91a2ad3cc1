//! SOAP bodies without a server: encode a request, decode a captured
//! response (a fixture, a wire log, a body a program fetched itself).
//!
//! ```
//! use vsphere_client::types::{ManagedObjectReference, RetrieveServiceContentRequestType};
//!
//! let request = RetrieveServiceContentRequestType {
//!     this: ManagedObjectReference::new("ServiceInstance", "ServiceInstance"),
//! };
//! let body = vsphere_client::codec::encode_request(&request);
//! assert!(String::from_utf8_lossy(&body).contains("<RetrieveServiceContent"));
//!
//! let captured = br#"<soapenv:Envelope xmlns:soapenv="http://schemas.xmlsoap.org/soap/envelope/"
//!   xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"><soapenv:Body>
//!   <RetrieveServiceContentResponse xmlns="urn:vim25"><returnval>
//!   <rootFolder type="Folder">group-d1</rootFolder>
//!   <propertyCollector type="PropertyCollector">propertyCollector</propertyCollector>
//!   <about><apiVersion>8.0.3.0</apiVersion></about>
//!   </returnval></RetrieveServiceContentResponse></soapenv:Body></soapenv:Envelope>"#;
//! let content = vsphere_client::codec::decode_response::<RetrieveServiceContentRequestType>(captured)?;
//! assert_eq!(content.root_folder.value, "group-d1");
//! assert_eq!(content.about.api_version, "8.0.3.0");
//! # Ok::<(), vsphere_client::Error>(())
//! ```

use crate::error::Error;
use crate::xml::Request;

/// The SOAP envelope a [`Client`](crate::Client) sends for `request`.
pub fn encode_request<R: Request>(request: &R) -> Vec<u8> {
    crate::xml::soap::encode_request_envelope(request)
}

/// Decodes a SOAP response body for request type `R`, as a call would: the
/// typed response, or an [`Error`] of kind [`Fault`](crate::ErrorKind::Fault)
/// (or [`InvalidLogin`](crate::ErrorKind::InvalidLogin)) carrying the typed
/// fault, [`Decode`](crate::ErrorKind::Decode) for a malformed envelope, and
/// [`NotSoap`](crate::ErrorKind::NotSoap) for a body that is no envelope.
pub fn decode_response<R: Request>(body: &[u8]) -> Result<R::Response, Error> {
    crate::client::response::decode_body::<R>(body, http::StatusCode::OK, None, &"the response")
}
