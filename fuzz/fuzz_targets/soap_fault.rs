//! The SOAP fault parser: any document, as the body of an HTTP 500.
#![no_main]

use libfuzzer_sys::fuzz_target;
use vsphere_client::xml::soap;

fuzz_target!(|data: &[u8]| {
    if let Ok(fault) = soap::decode_fault(data) {
        // Display and the fault type name must not panic either.
        let _ = fault.to_string();
        let _ = fault.fault_type();
    }
});
