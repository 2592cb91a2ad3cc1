//! A certificate authority made at test time, for TLS tests against the simulator.

use std::fmt::Write as _;
use std::io;
use std::path::{Path, PathBuf};

use rcgen::{
    date_time_ymd, BasicConstraints, CertificateParams, DistinguishedName, DnType,
    ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair, KeyUsagePurpose,
};

use crate::simulator::ServerTls;

/// A CA, a server certificate it signed for `127.0.0.1` and `localhost`, and a
/// second, unrelated CA for "wrong CA" tests.
///
/// The PEM files live in a temporary directory removed on drop; hand
/// [`TestCa::server_tls`] to the simulator and [`TestCa::ca_pem`] to the client.
/// Its `Debug` shows where the files are, never the keys.
pub struct TestCa {
    dir: tempfile::TempDir,
    ca_pem: String,
    unrelated_ca_pem: String,
    server_cert_pem: String,
    server_cert_der: Vec<u8>,
    /// The CA's private key (PEM), for secrets audits: it must never show.
    ca_key_pem: String,
    /// Signs more server certificates ([`TestCa::other_server_tls`]).
    issuer: Issuer<'static, KeyPair>,
}

/// How an extra server certificate of [`TestCa::other_server_tls`] differs
/// from the good one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ServerCertificate {
    /// Valid now, for these names (DNS names or IP addresses) only.
    ForNames(Vec<String>),
    /// For `127.0.0.1` and `localhost`, but expired (valid in 2020 only).
    Expired,
}

impl std::fmt::Debug for TestCa {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestCa")
            .field("dir", &self.dir.path())
            .finish_non_exhaustive()
    }
}

impl TestCa {
    /// Generates the CAs and the server certificate (ECDSA P-256) and writes
    /// `ca.pem`, `unrelated-ca.pem`, `server.pem` and `server-key.pem`.
    pub fn new() -> io::Result<TestCa> {
        let (ca_params, ca_key) = new_ca_params("vsphere-rs test CA")?;
        let ca_cert = ca_params.self_signed(&ca_key).map_err(to_io)?;
        let (unrelated_params, unrelated_key) = new_ca_params("vsphere-rs unrelated test CA")?;
        let unrelated_cert = unrelated_params
            .self_signed(&unrelated_key)
            .map_err(to_io)?;

        let server_params = server_params(&["127.0.0.1", "localhost"])?;
        let server_key = KeyPair::generate().map_err(to_io)?;
        let ca_key_pem = ca_key.serialize_pem();
        let issuer = Issuer::new(ca_params, ca_key);
        let server_cert = server_params
            .signed_by(&server_key, &issuer)
            .map_err(to_io)?;

        let dir = tempfile::Builder::new()
            .prefix("vsphere-rs-test-ca-")
            .tempdir()?;
        let ca = TestCa {
            ca_pem: ca_cert.pem(),
            unrelated_ca_pem: unrelated_cert.pem(),
            server_cert_pem: server_cert.pem(),
            server_cert_der: server_cert.der().to_vec(),
            ca_key_pem,
            issuer,
            dir,
        };
        std::fs::write(ca.ca_file(), &ca.ca_pem)?;
        std::fs::write(ca.unrelated_ca_file(), &ca.unrelated_ca_pem)?;
        std::fs::write(ca.server_cert_file(), &ca.server_cert_pem)?;
        std::fs::write(ca.server_key_file(), server_key.serialize_pem())?;
        Ok(ca)
    }

    /// The CA certificate (PEM) that signed the server certificate.
    pub fn ca_pem(&self) -> &str {
        &self.ca_pem
    }

    /// A CA certificate (PEM) unrelated to the server certificate.
    pub fn unrelated_ca_pem(&self) -> &str {
        &self.unrelated_ca_pem
    }

    /// A bundle of two certificates, the unrelated CA first, then the right
    /// one: a client must accept the server when any certificate of a bundle
    /// matches.
    pub fn bundle_pem(&self) -> String {
        format!("{}{}", self.unrelated_ca_pem, self.ca_pem)
    }

    pub fn ca_file(&self) -> PathBuf {
        self.dir.path().join("ca.pem")
    }

    pub fn unrelated_ca_file(&self) -> PathBuf {
        self.dir.path().join("unrelated-ca.pem")
    }

    /// The server certificate (PEM), for `-tls-cert`.
    pub fn server_cert_file(&self) -> PathBuf {
        self.dir.path().join("server.pem")
    }

    /// The server's private key (PEM), for `-tls-key`.
    pub fn server_key_file(&self) -> PathBuf {
        self.dir.path().join("server-key.pem")
    }

    pub fn server_cert_pem(&self) -> &str {
        &self.server_cert_pem
    }

    pub fn server_cert_der(&self) -> &[u8] {
        &self.server_cert_der
    }

    /// SHA-256 of the server certificate, `AB:CD:...` (upper case, colons), as
    /// vCenter and govc print it.
    pub fn server_sha256_thumbprint(&self) -> String {
        thumbprint(&ring::digest::SHA256, &self.server_cert_der)
    }

    /// SHA-1 of the server certificate, `AB:CD:...`.
    pub fn server_sha1_thumbprint(&self) -> String {
        thumbprint(
            &ring::digest::SHA1_FOR_LEGACY_USE_ONLY,
            &self.server_cert_der,
        )
    }

    /// What the simulator needs to serve the server certificate.
    pub fn server_tls(&self) -> ServerTls {
        ServerTls::Certificate {
            cert_file: self.server_cert_file(),
            key_file: self.server_key_file(),
        }
    }

    /// The directory holding the PEM files.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The CA's private key (PEM). Never give it to a client: it is here so
    /// that secrets audits can check it never shows in logs or errors.
    pub fn ca_key_pem(&self) -> &str {
        &self.ca_key_pem
    }

    /// Another server certificate signed by the same CA (so a client that
    /// trusts [`TestCa::ca_pem`] gets past the chain check and fails on the
    /// name or the dates alone), written as `<label>.pem` and
    /// `<label>-key.pem`; what the simulator needs to serve it.
    pub fn other_server_tls(&self, label: &str, kind: &ServerCertificate) -> io::Result<ServerTls> {
        let mut params = match kind {
            ServerCertificate::ForNames(names) => {
                let names: Vec<&str> = names.iter().map(String::as_str).collect();
                server_params(&names)?
            }
            ServerCertificate::Expired => server_params(&["127.0.0.1", "localhost"])?,
        };
        if *kind == ServerCertificate::Expired {
            params.not_before = date_time_ymd(2020, 1, 1);
            params.not_after = date_time_ymd(2020, 12, 31);
        }
        let key = KeyPair::generate().map_err(to_io)?;
        let cert = params.signed_by(&key, &self.issuer).map_err(to_io)?;
        let cert_file = self.dir.path().join(format!("{label}.pem"));
        let key_file = self.dir.path().join(format!("{label}-key.pem"));
        std::fs::write(&cert_file, cert.pem())?;
        std::fs::write(&key_file, key.serialize_pem())?;
        Ok(ServerTls::Certificate {
            cert_file,
            key_file,
        })
    }
}

/// A TLS server certificate's parameters for these names (the first is
/// also the common name).
fn server_params(names: &[&str]) -> io::Result<CertificateParams> {
    let sans: Vec<String> = names.iter().map(std::string::ToString::to_string).collect();
    let mut params = CertificateParams::new(sans).map_err(to_io)?;
    let mut name = DistinguishedName::new();
    name.push(
        DnType::CommonName,
        names.first().copied().unwrap_or("server"),
    );
    params.distinguished_name = name;
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    params.use_authority_key_identifier_extension = true;
    Ok(params)
}

fn new_ca_params(common_name: &str) -> io::Result<(CertificateParams, KeyPair)> {
    let mut params = CertificateParams::new(Vec::<String>::new()).map_err(to_io)?;
    let mut name = DistinguishedName::new();
    name.push(DnType::CommonName, common_name);
    params.distinguished_name = name;
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    let key = KeyPair::generate().map_err(to_io)?;
    Ok((params, key))
}

/// Colon-separated upper-case hex of a digest.
pub fn thumbprint(algorithm: &'static ring::digest::Algorithm, der: &[u8]) -> String {
    let digest = ring::digest::digest(algorithm, der);
    let mut out = String::with_capacity(digest.as_ref().len() * 3);
    for (i, byte) in digest.as_ref().iter().enumerate() {
        if i > 0 {
            out.push(':');
        }
        let _ = write!(out, "{byte:02X}");
    }
    out
}

fn to_io(e: rcgen::Error) -> io::Error {
    io::Error::other(e)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thumbprints_have_the_vcenter_shape() {
        let ca = TestCa::new().expect("test CA");
        let sha256 = ca.server_sha256_thumbprint();
        let sha1 = ca.server_sha1_thumbprint();
        assert_eq!(sha256.len(), 32 * 3 - 1);
        assert_eq!(sha1.len(), 20 * 3 - 1);
        assert!(sha256
            .chars()
            .all(|c| c == ':' || c.is_ascii_digit() || c.is_ascii_uppercase()));
        // A different certificate has a different thumbprint.
        let other = TestCa::new().expect("second test CA");
        assert_ne!(sha256, other.server_sha256_thumbprint());
    }

    #[test]
    fn known_digest() {
        // SHA-256("abc") from FIPS 180-2.
        assert_eq!(
            thumbprint(&ring::digest::SHA256, b"abc"),
            "BA:78:16:BF:8F:01:CF:EA:41:41:40:DE:5D:AE:22:23:B0:03:61:A3:96:17:7A:9C:B4:10:FF:61:F2:00:15:AD"
        );
    }

    #[test]
    fn files_are_written() {
        let ca = TestCa::new().expect("test CA");
        for file in [
            ca.ca_file(),
            ca.unrelated_ca_file(),
            ca.server_cert_file(),
            ca.server_key_file(),
        ] {
            let text = std::fs::read_to_string(&file).expect("PEM file");
            assert!(text.starts_with("-----BEGIN "), "{}", file.display());
        }
        assert_eq!(ca.bundle_pem().matches("BEGIN CERTIFICATE").count(), 2);
    }
}
