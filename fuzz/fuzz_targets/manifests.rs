//! The manifest loader of `banlieue check`: multi-document YAML into JSON
//! values, then each document schema-checked, typed and validated.
#![no_main]

use banlieue::check::{parse_documents, World};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let Ok(documents) = parse_documents(text) else { return };
    let mut world = World::default();
    for document in documents {
        world.add("fuzz.yaml", document);
    }
});
