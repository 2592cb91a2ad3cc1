//! vsphere-codegen: generates vsphere-client's vim25 bindings from a WSDL bundle.
//!
//! Stages, each with its own model: [`parse`] reads the documents as they are;
//! [`normalize`] builds the [`model`]; [`fixups`] handle named schema quirks;
//! [`naming`] and [`plan`] make every naming and layout decision; [`emit`]
//! writes formatted Rust. [`run`] chains them and checks the counts.

pub mod additions;
pub mod emit;
pub mod error;
pub mod families;
pub mod fixups;
pub mod idempotent;
pub mod managed_objects;
pub mod model;
pub mod naming;
pub mod normalize;
pub mod parse;
pub mod plan;
pub mod secrets;

use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::error::{Error, Result};

/// What to generate from and where to.
#[derive(Debug, Clone)]
pub struct Options {
    /// The bundle directory (holding `vim.wsdl`).
    pub wsdl: PathBuf,
    /// `managed-objects.json`; without it no managed object structs are emitted.
    pub managed_objects: Option<PathBuf>,
    /// `additions.json`: what API versions after the bundle's added.
    pub additions: Option<PathBuf>,
    /// The output directory (replaced).
    pub out: PathBuf,
}

/// What a run produced.
#[derive(Debug)]
pub struct Summary {
    pub bundle_sha256: String,
    pub counts: emit::Counts,
    pub files: usize,
    pub bytes: usize,
}

/// Generates the bindings for `options` into memory.
pub fn generate(options: &Options) -> Result<(emit::Output, Summary)> {
    let mut bundle = parse::read_bundle(&options.wsdl)?;
    let bundle_sha256 = bundle_id(&options.wsdl, &bundle)?;
    let mut schema_counts = normalize::count(&bundle);
    fixups::apply_raw(&mut bundle)?;
    let managed = match &options.managed_objects {
        Some(path) => Some(managed_objects::read(path)?),
        None => None,
    };
    let additions = match &options.additions {
        Some(path) => Some(additions::read(path)?),
        None => None,
    };
    if let Some(additions) = &additions {
        schema_counts = schema_counts.plus(normalize::count_additions(additions));
    }
    let mut model = normalize::normalize(&bundle, managed.as_ref(), additions.as_ref())?;
    model.schema_counts = schema_counts;
    fixups::apply_model(&mut model, &bundle)?;
    let plan = plan::plan(&model)?;
    let output = emit::generate(&model, &plan, &bundle_sha256)?;
    check_counts(&model, &output.counts, managed.as_ref())?;
    let summary = Summary {
        bundle_sha256,
        counts: output.counts,
        files: output.files.len(),
        bytes: output.files.values().map(String::len).sum(),
    };
    Ok((output, summary))
}

/// Generates the bindings and writes them to `options.out`.
pub fn run(options: &Options) -> Result<Summary> {
    let (output, summary) = generate(options)?;
    emit::write(&output, &options.out)?;
    Ok(summary)
}

/// The emitted counts must equal what the documents declare: every complex
/// type (one of them the built-in `ManagedObjectReference`), enumeration,
/// enumeration value and operation.
fn check_counts(
    model: &model::Model,
    counts: &emit::Counts,
    managed: Option<&managed_objects::ManagedObjectsFile>,
) -> Result<()> {
    let schema = model.schema_counts;
    let emitted_complex = counts.structs + counts.request_types + counts.array_types + 1;
    let additions = model
        .managed_objects
        .values()
        .filter(|m| m.since.is_some())
        .count();
    let checks = [
        ("complex types", schema.complex_types, emitted_complex),
        ("ArrayOf types", schema.array_types, counts.array_types),
        ("enumerations", schema.enums, counts.enums),
        ("enumeration values", schema.enum_values, counts.enum_values),
        (
            "operations (request types)",
            schema.operations,
            counts.operations,
        ),
        ("operations (methods)", schema.operations, counts.methods),
        (
            "managed objects",
            managed.map_or(0, |m| m.managed_objects.len()) + additions,
            counts.managed_objects,
        ),
    ];
    for (what, expected, emitted) in checks {
        if expected != emitted {
            return Err(Error::new(format!(
                "count check: the schema has {expected} {what}, {emitted} were emitted"
            )));
        }
    }
    Ok(())
}

/// The bundle's identity: the sha256 of its `SHA256SUMS` (after checking
/// every file it lists), or of the same listing computed over the bundle's
/// `*.wsdl` and `*.xsd` files when it has none.
pub fn bundle_id(dir: &Path, bundle: &parse::RawBundle) -> Result<String> {
    let sums_path = dir.join("SHA256SUMS");
    if sums_path.exists() {
        let sums = std::fs::read(&sums_path)?;
        let text = String::from_utf8_lossy(&sums);
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            let Some((hash, name)) = line.split_once("  ") else {
                return Err(Error::new(format!("SHA256SUMS: malformed line {line:?}")));
            };
            let name = name.trim_start_matches('*');
            let bytes = match bundle.files.get(name) {
                Some(bytes) => bytes.clone(),
                None => std::fs::read(dir.join(name))?,
            };
            if hex(&Sha256::digest(&bytes)) != hash {
                return Err(Error::new(format!(
                    "{}: {name} does not match SHA256SUMS",
                    dir.display()
                )));
            }
        }
        for name in bundle.files.keys() {
            if !text.lines().any(|l| l.ends_with(&format!("  {name}"))) {
                return Err(Error::new(format!("SHA256SUMS does not list {name}")));
            }
        }
        return Ok(hex(&Sha256::digest(&sums)));
    }
    let mut names: Vec<String> = std::fs::read_dir(dir)?
        .filter_map(std::result::Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".wsdl") || n.ends_with(".xsd"))
        .collect();
    // `sha256sum *.wsdl *.xsd` order: WSDL files first, each kind sorted.
    names.sort_by_key(|n| (n.ends_with(".xsd"), n.clone()));
    let mut listing = String::new();
    for name in names {
        let bytes = std::fs::read(dir.join(&name))?;
        listing.push_str(&format!("{}  {name}\n", hex(&Sha256::digest(&bytes))));
    }
    Ok(hex(&Sha256::digest(listing.as_bytes())))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
