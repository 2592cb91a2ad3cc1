//! TLS configuration: which server certificates the client trusts.
//!
//! Four modes, as vSphere users need them: the system's roots (default), a
//! PEM CA bundle (vCenter's own VMCA root, for instance), a pinned
//! certificate thumbprint (what `govc` stores in `GOVC_TLS_KNOWN_HOSTS`), and
//! insecure (accept anything, logged as a warning).

use std::fmt;
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{CertificateError, DigitallySignedStruct, OtherError, RootCertStore, SignatureScheme};

use crate::error::Error;

/// How the client decides whether to trust the server's certificate.
#[derive(Clone, Default)]
pub enum TlsMode {
    /// Verify against the operating system's trusted roots (and the host name).
    #[default]
    SystemRoots,
    /// Verify against these CA certificates only (and the host name).
    CaBundle(Vec<CertificateDer<'static>>),
    /// Accept only the certificate with this fingerprint; neither the chain
    /// nor the host name is checked, as with `govc`'s known hosts.
    Pinned(Thumbprint),
    /// Accept any certificate. Only for labs: anyone on the path can read
    /// the traffic, passwords included.
    Insecure,
}

impl fmt::Debug for TlsMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TlsMode::SystemRoots => f.write_str("SystemRoots"),
            TlsMode::CaBundle(certs) => write!(f, "CaBundle({} certificates)", certs.len()),
            TlsMode::Pinned(tp) => write!(f, "Pinned({tp})"),
            TlsMode::Insecure => f.write_str("Insecure"),
        }
    }
}

/// A certificate fingerprint: SHA-256 (32 bytes) or SHA-1 (20 bytes) of the
/// DER encoding of the server's leaf certificate.
#[derive(Clone, PartialEq, Eq, Hash)]
pub enum Thumbprint {
    Sha1([u8; 20]),
    Sha256([u8; 32]),
}

impl Thumbprint {
    /// Parses a hex fingerprint, with or without `:` separators, any case
    /// (`AB:CD:...` as vCenter shows it, or `abcd...`). The length tells
    /// SHA-1 (40 hex digits) from SHA-256 (64).
    pub fn parse(text: &str) -> Result<Thumbprint, Error> {
        let hex: String = text.trim().chars().filter(|c| *c != ':').collect();
        let invalid = || {
            Error::invalid_config(format!(
                "invalid certificate thumbprint {:?}: expected 40 (SHA-1) or 64 (SHA-256) hex digits, with or without colons",
                truncate_for_message(text)
            ))
        };
        if !hex.chars().all(|c| c.is_ascii_hexdigit()) {
            return Err(invalid());
        }
        let mut bytes = Vec::with_capacity(32);
        let digits = hex.as_bytes();
        for pair in digits.chunks(2) {
            let [hi, lo] = pair else {
                return Err(invalid());
            };
            bytes.push((hex_value(*hi) << 4) | hex_value(*lo));
        }
        match bytes.len() {
            20 => Ok(Thumbprint::Sha1(bytes.try_into().map_err(|_| invalid())?)),
            32 => Ok(Thumbprint::Sha256(bytes.try_into().map_err(|_| invalid())?)),
            _ => Err(invalid()),
        }
    }

    /// The SHA-256 thumbprint of a DER certificate.
    pub fn sha256_of(der: &[u8]) -> Thumbprint {
        let digest = ring::digest::digest(&ring::digest::SHA256, der);
        let mut out = [0u8; 32];
        out.copy_from_slice(digest.as_ref());
        Thumbprint::Sha256(out)
    }

    /// The SHA-1 thumbprint of a DER certificate (what older `govc` stores).
    pub fn sha1_of(der: &[u8]) -> Thumbprint {
        let digest = ring::digest::digest(&ring::digest::SHA1_FOR_LEGACY_USE_ONLY, der);
        let mut out = [0u8; 20];
        out.copy_from_slice(digest.as_ref());
        Thumbprint::Sha1(out)
    }

    /// Whether `der` is the certificate this thumbprint names.
    pub fn matches(&self, der: &[u8]) -> bool {
        let actual = match self {
            Thumbprint::Sha1(_) => Thumbprint::sha1_of(der),
            Thumbprint::Sha256(_) => Thumbprint::sha256_of(der),
        };
        // Fingerprints of a public certificate are not secret: a plain
        // comparison is fine.
        actual == *self
    }

    fn bytes(&self) -> &[u8] {
        match self {
            Thumbprint::Sha1(b) => b,
            Thumbprint::Sha256(b) => b,
        }
    }
}

impl fmt::Display for Thumbprint {
    /// Upper-case hex with colons, as vCenter and `govc` print them.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, b) in self.bytes().iter().enumerate() {
            if i > 0 {
                f.write_str(":")?;
            }
            write!(f, "{b:02X}")?;
        }
        Ok(())
    }
}

impl fmt::Debug for Thumbprint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let algo = match self {
            Thumbprint::Sha1(_) => "Sha1",
            Thumbprint::Sha256(_) => "Sha256",
        };
        write!(f, "{algo}({self})")
    }
}

impl std::str::FromStr for Thumbprint {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self, Error> {
        Thumbprint::parse(s)
    }
}

fn hex_value(digit: u8) -> u8 {
    match digit {
        b'0'..=b'9' => digit - b'0',
        b'a'..=b'f' => digit - b'a' + 10,
        b'A'..=b'F' => digit - b'A' + 10,
        _ => 0, // callers check is_ascii_hexdigit first
    }
}

fn truncate_for_message(text: &str) -> String {
    text.chars().take(100).collect()
}

/// Parses every certificate of a PEM bundle. Fails when the bundle holds no
/// certificate or a `CERTIFICATE` block is not valid base64; other PEM
/// blocks (a private key left in by mistake...) are ignored.
pub fn parse_pem_bundle(pem: &[u8]) -> Result<Vec<CertificateDer<'static>>, Error> {
    let mut certs = Vec::new();
    for item in CertificateDer::pem_slice_iter(pem) {
        let cert =
            item.map_err(|e| Error::invalid_config("invalid PEM in the CA bundle").with_source(e))?;
        certs.push(cert);
    }
    if certs.is_empty() {
        return Err(Error::invalid_config(
            "the CA bundle holds no PEM certificate (expected -----BEGIN CERTIFICATE-----)",
        ));
    }
    Ok(certs)
}

pub(crate) fn crypto_provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// The operating system's trusted roots, read once per process.
fn system_roots() -> Arc<RootCertStore> {
    static ROOTS: std::sync::OnceLock<Arc<RootCertStore>> = std::sync::OnceLock::new();
    ROOTS
        .get_or_init(|| {
            let loaded = rustls_native_certs::load_native_certs();
            let mut roots = RootCertStore::empty();
            let (added, _ignored) = roots.add_parsable_certificates(loaded.certs);
            if added == 0 {
                // Not fatal: plain http needs no roots, and an https
                // connection then fails with a certificate error.
                tracing::warn!(
                    errors = ?loaded.errors.iter().map(std::string::ToString::to_string).collect::<Vec<_>>(),
                    "no trusted root certificate found on this system; give a CA bundle or a thumbprint"
                );
            }
            Arc::new(roots)
        })
        .clone()
}

/// Builds the rustls configuration for a mode.
pub(crate) fn client_config(mode: &TlsMode) -> Result<rustls::ClientConfig, Error> {
    let provider = crypto_provider();
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| Error::invalid_config("TLS setup failed").with_source(e))?;
    let config = match mode {
        TlsMode::SystemRoots => builder
            .with_root_certificates(system_roots())
            .with_no_client_auth(),
        TlsMode::CaBundle(certs) => {
            let mut roots = RootCertStore::empty();
            for cert in certs {
                roots.add(cert.clone()).map_err(|e| {
                    Error::invalid_config(
                        "a certificate of the CA bundle is not a usable CA certificate",
                    )
                    .with_source(e)
                })?;
            }
            builder.with_root_certificates(roots).with_no_client_auth()
        }
        TlsMode::Pinned(thumbprint) => builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(LeafVerifier {
                pin: Some(thumbprint.clone()),
                provider,
            }))
            .with_no_client_auth(),
        TlsMode::Insecure => builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(LeafVerifier {
                pin: None,
                provider,
            }))
            .with_no_client_auth(),
    };
    Ok(config)
}

/// The reason given when a pinned thumbprint does not match.
#[derive(Debug)]
struct ThumbprintMismatch {
    expected: Thumbprint,
    actual_sha256: Thumbprint,
}

impl fmt::Display for ThumbprintMismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "certificate thumbprint does not match the pinned one (pinned {}, server's SHA-256 is {})",
            self.expected, self.actual_sha256
        )
    }
}

impl std::error::Error for ThumbprintMismatch {}

/// Verifies the leaf certificate against a pinned thumbprint (`pin`), or
/// accepts any certificate (`pin: None`, insecure mode). With a pin, the
/// handshake signatures are checked too, so the server must hold the
/// pinned certificate's private key.
#[derive(Debug)]
struct LeafVerifier {
    pin: Option<Thumbprint>,
    provider: Arc<CryptoProvider>,
}

impl ServerCertVerifier for LeafVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match &self.pin {
            None => Ok(ServerCertVerified::assertion()),
            Some(pin) if pin.matches(end_entity) => Ok(ServerCertVerified::assertion()),
            Some(pin) => Err(rustls::Error::InvalidCertificate(CertificateError::Other(
                OtherError(Arc::new(ThumbprintMismatch {
                    expected: pin.clone(),
                    actual_sha256: Thumbprint::sha256_of(end_entity),
                })),
            ))),
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        if self.pin.is_none() {
            // Insecure accepts any certificate, so checking that the server
            // holds its key proves nothing, and would refuse old servers
            // whose keys ring does not handle (vcsim's 1024-bit RSA).
            return Ok(HandshakeSignatureValid::assertion());
        }
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        if self.pin.is_none() {
            return Ok(HandshakeSignatureValid::assertion());
        }
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thumbprints_parse_with_or_without_colons() {
        let sha1 = "AB:CD:EF:01:23:45:67:89:AB:CD:EF:01:23:45:67:89:AB:CD:EF:01";
        let parsed = Thumbprint::parse(sha1).unwrap();
        assert!(matches!(parsed, Thumbprint::Sha1(_)));
        assert_eq!(parsed.to_string(), sha1);
        assert_eq!(
            Thumbprint::parse(&sha1.replace(':', "").to_lowercase()).unwrap(),
            parsed
        );

        let sha256 = "00".repeat(31) + "ff";
        let parsed = Thumbprint::parse(&sha256).unwrap();
        assert!(matches!(parsed, Thumbprint::Sha256(_)));
        assert!(parsed.to_string().ends_with(":FF"));
    }

    #[test]
    fn bad_thumbprints_are_config_errors() {
        for bad in [
            "",
            "abc",
            "zz".repeat(20).as_str(),
            "ab".repeat(21).as_str(),
            "a".repeat(41).as_str(),
        ] {
            let err = Thumbprint::parse(bad).unwrap_err();
            assert_eq!(err.kind(), crate::ErrorKind::InvalidConfig, "{bad:?}");
        }
    }

    #[test]
    fn thumbprint_matches_its_certificate_only() {
        let der = b"not really a certificate but bytes are bytes";
        assert!(Thumbprint::sha256_of(der).matches(der));
        assert!(Thumbprint::sha1_of(der).matches(der));
        assert!(!Thumbprint::sha256_of(der).matches(b"other"));
    }

    #[test]
    fn empty_or_garbage_bundles_are_rejected() {
        assert!(parse_pem_bundle(b"").is_err());
        assert!(parse_pem_bundle(b"hello").is_err());
        let broken = b"-----BEGIN CERTIFICATE-----\n!!!!\n-----END CERTIFICATE-----\n";
        assert!(parse_pem_bundle(broken).is_err());
    }
}
