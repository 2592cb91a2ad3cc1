//! Link options for this package's examples (the `vsphere` CLI), not for the
//! library: a library cannot choose how the programs using it are linked.
//!
//! On GNU/Linux the examples are linked with `-z pack-relative-relocs`
//! (DT_RELR; GNU ld 2.38+ or lld, glibc 2.36+). The generated bindings hold
//! ~120,000 pointers in static tables and vtables; in a position-independent
//! executable each is a 24-byte relocation record that the loader reads at
//! startup, 3 MB of resident memory. Packed, they take a few kilobytes.
//! Older linkers ignore the option with a warning; `VSPHERE_NO_RELR=1` turns
//! it off (for a glibc older than 2.36 at run time).

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=VSPHERE_NO_RELR");
    let target = std::env::var("TARGET").unwrap_or_default();
    let disabled = std::env::var_os("VSPHERE_NO_RELR").is_some_and(|v| v != "0");
    if target.ends_with("-linux-gnu") && !disabled {
        println!("cargo:rustc-link-arg-examples=-Wl,-z,pack-relative-relocs");
    }
}
