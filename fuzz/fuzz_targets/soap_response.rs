//! The generated decoders from the SOAP envelope down. The first byte picks
//! the response type: a few representative operations through
//! `soap::decode_response`, or (otherwise) any registry type by index, decoded
//! from a bare element the way an `xsi:type`'d anyType slot is.
#![no_main]

use libfuzzer_sys::fuzz_target;
use vsphere_client::types::{
    RetrievePropertiesExRequestType, RetrieveServiceContentRequestType, WaitForUpdatesExRequestType,
    ContinueRetrievePropertiesExRequestType, CreateContainerViewRequestType, LoginRequestType,
};
use vsphere_client::xml::{soap, Registry, XmlReader};

fuzz_target!(|data: &[u8]| {
    let Some((&selector, rest)) = data.split_first() else { return };
    match selector % 8 {
        0 => drop(soap::decode_response::<RetrievePropertiesExRequestType>(rest)),
        1 => drop(soap::decode_response::<RetrieveServiceContentRequestType>(rest)),
        2 => drop(soap::decode_response::<WaitForUpdatesExRequestType>(rest)),
        3 => drop(soap::decode_response::<ContinueRetrievePropertiesExRequestType>(rest)),
        4 => drop(soap::decode_response::<LoginRequestType>(rest)),
        5 => drop(soap::decode_response::<CreateContainerViewRequestType>(rest)),
        _ => decode_registry_type(rest),
    }
});

/// Two bytes pick a registry type; the rest is one element of that type.
fn decode_registry_type(data: &[u8]) {
    let Some((index, body)) = data.split_first_chunk::<2>() else { return };
    let registry: &'static Registry = vsphere_client::fuzzing_registry();
    let types: Vec<_> = registry.iter().filter(|t| t.decodes_as_object()).collect();
    if types.is_empty() {
        return;
    }
    let info = types[usize::from(u16::from_le_bytes(*index)) % types.len()];
    let mut reader = XmlReader::new(body, registry);
    if reader.root().is_ok() {
        drop(info.decode(&mut reader));
    }
}
