//! The SOAP 1.1 envelope around vim25 requests and responses.

use std::fmt;

use super::reader::{DecodeErrorKind, XmlReader};
use super::schema::Registry;
use super::{
    response_element_name, ApiLevel, Decode, DecodeError, Encode, NewerItem, Request, Structure,
    XmlWriter,
};
use crate::types::AnyMethodFault;
use crate::xml::{DateTime, ManagedObjectReference};

/// A SOAP fault returned by the server.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SoapFault {
    /// `ServerFaultCode`, `ClientFaultCode`, ... (local part).
    pub faultcode: String,
    /// The server's message.
    pub faultstring: String,
    /// The typed vim25 fault from `<detail>`, when there is one. A fault
    /// type newer than the bindings decodes as its declared base,
    /// `MethodFault`; [`type_name`](Self::type_name) keeps its name.
    pub detail: Option<AnyMethodFault>,
    /// The fault's vim25 type as the server named it: the detail's
    /// `xsi:type`, else its element name without `Fault`
    /// (`<InvalidLoginFault>`).
    pub type_name: Option<String>,
}

impl SoapFault {
    /// The vim25 fault type name as the server sent it (`InvalidLogin`, or a
    /// type newer than the bindings), when the fault has a detail.
    pub fn fault_type(&self) -> Option<&str> {
        self.type_name.as_deref()
    }
}

impl fmt::Display for SoapFault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.fault_type() {
            Some(ty) => write!(f, "{ty}: {}", self.faultstring),
            None => write!(f, "{}: {}", self.faultcode, self.faultstring),
        }
    }
}

/// A response that is not the expected result.
#[derive(Debug, Clone, PartialEq)]
pub enum SoapError {
    /// Not a SOAP envelope, malformed or truncated XML, or unexpected content.
    Decode(DecodeError),
    /// The server answered with a SOAP fault.
    Fault(SoapFault),
}

impl fmt::Display for SoapError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SoapError::Decode(e) => write!(f, "invalid SOAP response: {e}"),
            SoapError::Fault(fault) => write!(f, "SOAP fault: {fault}"),
        }
    }
}

impl std::error::Error for SoapError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            SoapError::Decode(e) => Some(e),
            SoapError::Fault(_) => None,
        }
    }
}

impl From<DecodeError> for SoapError {
    fn from(e: DecodeError) -> Self {
        SoapError::Decode(e)
    }
}

/// A complete SOAP request document for `request`:
/// `<soapenv:Envelope ...><soapenv:Body><NAME xmlns="urn:vim25">...`.
pub fn encode_request_envelope<R: Request>(request: &R) -> Vec<u8> {
    let mut w = XmlWriter::new();
    w.write_request_envelope(R::NAME, request);
    w.into_bytes()
}

/// [`encode_request_envelope`] for a server that speaks API `server` at
/// most: the first item of the request that API `server` does not have
/// (see [`XmlWriter::since`]) instead of a document that carries it.
pub fn encode_request_envelope_for<R: Request>(
    request: &R,
    server: ApiLevel,
) -> Result<Vec<u8>, NewerItem> {
    let mut w = XmlWriter::for_server(server);
    w.write_request_envelope(R::NAME, request);
    match w.newer_than_server() {
        Some(newer) => Err(newer),
        None => Ok(w.into_bytes()),
    }
}

/// Decodes a SOAP response document for request type `R`: its result, or
/// the SOAP fault it carries.
pub fn decode_response<R: Request>(document: &[u8]) -> Result<R::Response, SoapError> {
    decode_response_with::<R>(document, &crate::generated::REGISTRY)
}

/// [`decode_response`] with another `xsi:type` registry.
pub fn decode_response_with<R: Request>(
    document: &[u8],
    registry: &'static Registry,
) -> Result<R::Response, SoapError> {
    let mut r = XmlReader::new(document, registry);
    let expected = response_element_name(R::NAME);
    open_body(&mut r, &expected)?;
    let response = R::decode_response(&mut r)?;
    r.finish()?;
    Ok(response)
}

/// Decodes only a SOAP fault, if the document is one (for error responses
/// whose operation is not at hand).
pub fn decode_fault(document: &[u8]) -> Result<SoapFault, SoapError> {
    let mut r = XmlReader::new(document, &crate::generated::REGISTRY);
    match open_body(&mut r, "") {
        Err(SoapError::Fault(fault)) => Ok(fault),
        Err(e) => Err(e),
        Ok(_) => Err(SoapError::Decode(r.error(
            DecodeErrorKind::UnexpectedContent,
            "the SOAP body holds no fault",
        ))),
    }
}

// The server side of the envelope: what a scripted vCenter (the test kit,
// `vsphere-testkit`) sends and reads. Each is the mirror of a client-side
// function above and decodes with the same reader.

/// A response's content as its `returnval` elements: nothing (`()`), one
/// (a value), at most one (`Option`) or one per item (`Vec`), as the
/// generated `Request::decode_response` reads them.
pub trait ReturnValue {
    /// Writes the `returnval` elements of `self`.
    fn encode_returnval(&self, w: &mut XmlWriter);
}

impl ReturnValue for () {
    fn encode_returnval(&self, _: &mut XmlWriter) {}
}

impl<T: Encode> ReturnValue for Option<T> {
    fn encode_returnval(&self, w: &mut XmlWriter) {
        if let Some(value) = self {
            value.encode_as(w, "returnval", None);
        }
    }
}

impl<T: Encode> ReturnValue for Vec<T> {
    fn encode_returnval(&self, w: &mut XmlWriter) {
        for value in self {
            value.encode_as(w, "returnval", None);
        }
    }
}

impl<T: Structure> ReturnValue for T {
    fn encode_returnval(&self, w: &mut XmlWriter) {
        w.write("returnval", self);
    }
}

macro_rules! single_return_value {
    ($($ty:ty),*) => {$(
        impl ReturnValue for $ty {
            fn encode_returnval(&self, w: &mut XmlWriter) {
                w.write("returnval", self);
            }
        }
    )*};
}

single_return_value!(
    ManagedObjectReference,
    String,
    bool,
    i32,
    i64,
    DateTime,
    crate::types::AnyApplyProfile,
    crate::types::AnyGuestAuthentication
);
#[cfg(feature = "admin")]
single_return_value!(crate::types::AnyProfileExecuteResult);

/// The SOAP response document a server sends for a request of type `R`
/// that returned `response`.
pub fn encode_response_envelope<R: Request>(response: &R::Response) -> Vec<u8>
where
    R::Response: ReturnValue,
{
    let mut w = XmlWriter::new();
    w.envelope_start();
    let name = response_element_name(R::NAME);
    w.start_with_attribute(&name, None, Some(("xmlns", "urn:vim25")));
    response.encode_returnval(&mut w);
    w.end(&name);
    w.envelope_end();
    w.into_bytes()
}

/// The SOAP fault document a server sends (with HTTP status 500): code,
/// message and the typed fault as `<detail><TypeFault xsi:type="Type">`.
pub fn encode_fault_envelope(fault: &SoapFault) -> Vec<u8> {
    let mut w = XmlWriter::new();
    w.envelope_start();
    w.start("soapenv:Fault", None);
    w.text_element("faultcode", None, &fault.faultcode);
    w.text_element("faultstring", None, &fault.faultstring);
    if let Some(detail) = &fault.detail {
        w.start("detail", None);
        detail.encode(&mut w, &format!("{}Fault", detail.type_name()));
        w.end("detail");
    }
    w.end("soapenv:Fault");
    w.envelope_end();
    w.into_bytes()
}

/// The operation a SOAP request document invokes: the name of its body
/// element (`CloneVM_Task`).
pub fn request_operation(document: &[u8]) -> Result<&str, SoapError> {
    let mut r = XmlReader::new(document, &crate::generated::REGISTRY);
    open_body(&mut r, "")
}

/// Decodes a SOAP request document into its typed request (what a server
/// receives): an error if it is no envelope or invokes another operation.
pub fn decode_request_envelope<R: Request + Decode>(document: &[u8]) -> Result<R, SoapError> {
    let mut r = XmlReader::new(document, &crate::generated::REGISTRY);
    open_body(&mut r, R::NAME)?;
    let request = R::decode(&mut r)?;
    r.finish()?;
    Ok(request)
}

/// Enters Envelope and Body and the body's first element, which must be
/// `expected`; a `Fault` there is decoded and returned as the error.
fn open_body<'a>(r: &mut XmlReader<'a>, expected: &str) -> Result<&'a str, SoapError> {
    let root = r.root()?;
    if root != "Envelope" {
        return Err(SoapError::Decode(r.error(
            DecodeErrorKind::UnexpectedContent,
            format!("expected a SOAP Envelope, found <{root}>"),
        )));
    }
    loop {
        match r.next_child()? {
            Some("Body") => break,
            Some(_) => r.skip()?, // Header
            None => {
                return Err(SoapError::Decode(r.error(
                    DecodeErrorKind::UnexpectedContent,
                    "SOAP Envelope without a Body",
                )))
            }
        }
    }
    r.hide_path_prefix();
    let Some(name) = r.next_child()? else {
        return Err(SoapError::Decode(
            r.error(DecodeErrorKind::UnexpectedContent, "empty SOAP Body"),
        ));
    };
    if name == "Fault" {
        return Err(SoapError::Fault(read_fault(r)?));
    }
    if !expected.is_empty() && name != expected {
        return Err(SoapError::Decode(r.error(
            DecodeErrorKind::UnexpectedContent,
            format!("expected <{expected}>, found <{name}>"),
        )));
    }
    Ok(name)
}

fn read_fault(r: &mut XmlReader<'_>) -> Result<SoapFault, DecodeError> {
    let mut fault = SoapFault::default();
    while let Some(name) = r.next_child()? {
        match name {
            "faultcode" => {
                let code = r.read_text()?;
                let code = code.trim();
                fault.faultcode = code.rsplit(':').next().unwrap_or(code).to_string();
            }
            "faultstring" => fault.faultstring = r.read_text()?.into_owned(),
            "detail" => {
                while let Some(detail) = r.next_child()? {
                    if fault.detail.is_some() {
                        r.skip()?;
                        continue;
                    }
                    // `<InvalidLoginFault xsi:type="InvalidLogin">`; without
                    // `xsi:type`, the element name minus `Fault` names the type.
                    let type_name = match r.xsi_type() {
                        Some(ty) => ty.to_string(),
                        None => {
                            let ty = detail.strip_suffix("Fault").unwrap_or(detail).to_string();
                            r.set_xsi_type(ty.clone());
                            ty
                        }
                    };
                    fault.type_name = (!type_name.is_empty()).then_some(type_name);
                    fault.detail = Some(AnyMethodFault::decode(r)?);
                }
            }
            _ => r.skip()?,
        }
    }
    Ok(fault)
}
