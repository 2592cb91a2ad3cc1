//! The `xsd:anyType` decoder: one element, typed by its `xsi:type` through
//! the generated registry (primitives, ArrayOf*, data objects, unknown types).
#![no_main]

use libfuzzer_sys::fuzz_target;
use vsphere_client::xml::{Decode, Value, XmlReader};

fuzz_target!(|data: &[u8]| {
    let mut reader = XmlReader::new(data, vsphere_client::fuzzing_registry());
    if reader.root().is_err() {
        return;
    }
    if let Ok(value) = Value::decode(&mut reader) {
        let _ = value.type_name();
        let _ = format!("{value:?}");
    }
});
