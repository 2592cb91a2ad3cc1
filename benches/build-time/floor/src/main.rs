//! The build-time benchmark's floor (benches/build-time/run): vsphere-client's
//! dependencies with their features, and none of its code. One SOAP call over
//! the same stack (hyper-util's pooled client, rustls with ring, tokio, a tower
//! timeout, gzip, memchr; serde_json for the REST side's share), so the seat
//! shows what any Rust program on that stack pays before a single vim25 type.
//! usage: GOVC_URL=https://user:pass@host/sdk floor  (the certificate is not checked)

use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};
use std::io::Read;
use std::sync::Arc;
use std::time::Duration;
use tower::{Service, ServiceExt};

/// Changed by the benchmark to time a rebuild after an edit of `main`.
const EDIT: &str = "0";

const RETRIEVE_SERVICE_CONTENT: &str = r#"<?xml version="1.0" encoding="UTF-8"?><soapenv:Envelope xmlns:soapenv="http://schemas.xmlsoap.org/soap/envelope/"><soapenv:Body><RetrieveServiceContent xmlns="urn:vim25"><_this type="ServiceInstance">ServiceInstance</_this></RetrieveServiceContent></soapenv:Body></soapenv:Envelope>"#;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let url = std::env::var("GOVC_URL").map_err(|_| "set GOVC_URL=https://user:pass@host/sdk")?;
    // No credentials on the wire: RetrieveServiceContent needs no session.
    let url = match (url.find("://"), url.find('@')) {
        (Some(scheme), Some(at)) => format!("{}{}", &url[..scheme + 3], &url[at + 1..]),
        _ => url,
    };
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let tls = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(AnyCertificate(provider)))
        .with_no_client_auth();
    let https = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(tls)
        .https_or_http()
        .enable_http1()
        .build();
    let client: Client<_, Full<bytes::Bytes>> = Client::builder(TokioExecutor::new()).build(https);
    let mut service = tower::ServiceBuilder::new()
        .timeout(Duration::from_secs(30))
        .service(client);
    let request = http::Request::post(url.as_str())
        .header("content-type", "text/xml; charset=utf-8")
        .header("soapaction", "urn:vim25/7.0.3.0")
        .header("accept-encoding", "gzip")
        .body(Full::new(bytes::Bytes::from_static(RETRIEVE_SERVICE_CONTENT.as_bytes())))?;
    // tower's errors are `Send + Sync` boxes, which `?` does not turn into this one.
    let ready = service.ready().await.map_err(|e| e.to_string())?;
    let response = ready.call(request).await.map_err(|e| e.to_string())?;
    tracing::debug!(status = %response.status(), "service content");
    let body = response.into_body().collect().await?.to_bytes();
    let mut text = Vec::new();
    if body.starts_with(&[0x1f, 0x8b]) {
        flate2::read::GzDecoder::new(&body[..]).read_to_end(&mut text)?;
    } else {
        text.extend_from_slice(&body);
    }
    let name = element(&text, b"fullName").ok_or("no <fullName> in the service content")?;
    let summary = serde_json::json!({ "fullName": name, "edit": EDIT });
    println!("{summary}");
    Ok(())
}

/// The text of the first `<tag>` element.
fn element<'a>(xml: &'a [u8], tag: &[u8]) -> Option<&'a str> {
    let open = [b"<".as_slice(), tag, b">"].concat();
    let start = memchr::memmem::find(xml, &open)? + open.len();
    let end = start + memchr::memchr(b'<', &xml[start..])?;
    std::str::from_utf8(&xml[start..end]).ok()
}

/// Accepts any certificate and any handshake signature, like vsphere-client's
/// insecure mode (the seat programs' GOVC_INSECURE=1): with any certificate
/// accepted, a signature proves nothing (and the simulator's does not verify).
#[derive(Debug)]
struct AnyCertificate(Arc<rustls::crypto::CryptoProvider>);

impl ServerCertVerifier for AnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }
    fn verify_tls12_signature(
        &self,
        _message: &[u8],
        _cert: &CertificateDer<'_>,
        _dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        Ok(HandshakeSignatureValid::assertion())
    }
    fn verify_tls13_signature(
        &self,
        _message: &[u8],
        _cert: &CertificateDer<'_>,
        _dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        Ok(HandshakeSignatureValid::assertion())
    }
    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}
