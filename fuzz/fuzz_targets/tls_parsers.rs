//! The TLS settings parsers: certificate thumbprints (SHA-256/SHA-1, with or
//! without colons) and PEM CA bundles.
#![no_main]

use libfuzzer_sys::fuzz_target;
use vsphere_client::tls::{parse_pem_bundle, Thumbprint};

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        if let Ok(thumbprint) = Thumbprint::parse(text) {
            let _ = thumbprint.matches(data);
            let _ = thumbprint.to_string();
        }
    }
    if let Ok(certificates) = parse_pem_bundle(data) {
        let _ = certificates.len();
    }
});
