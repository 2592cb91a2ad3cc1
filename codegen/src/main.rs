//! `vsphere-codegen --wsdl DIR [--managed-objects FILE] [--additions FILE] --out DIR`

use std::path::PathBuf;
use std::process::ExitCode;

const USAGE: &str =
    "usage: vsphere-codegen --wsdl DIR [--managed-objects FILE] [--additions FILE] --out DIR";

fn main() -> ExitCode {
    let options = match parse_args(std::env::args().skip(1)) {
        Ok(options) => options,
        Err(message) => {
            eprintln!("vsphere-codegen: {message}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    match vsphere_codegen::run(&options) {
        Ok(summary) => {
            let c = summary.counts;
            eprintln!(
                "vsphere-codegen: {} files ({} KiB) from bundle {}: {} data types, {} request types, \
                 {} enumerations ({} values), {} polymorphic enums ({} variants), {} arrays, \
                 {} methods, {} managed objects",
                summary.files,
                summary.bytes / 1024,
                &summary.bundle_sha256[..12],
                c.structs,
                c.request_types,
                c.enums,
                c.enum_values,
                c.polymorphic_enums,
                c.polymorphic_variants,
                c.array_types,
                c.methods,
                c.managed_objects
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("vsphere-codegen: {e}");
            ExitCode::FAILURE
        }
    }
}

fn parse_args(mut args: impl Iterator<Item = String>) -> Result<vsphere_codegen::Options, String> {
    let mut wsdl = None;
    let mut managed_objects = None;
    let mut additions = None;
    let mut out = None;
    while let Some(arg) = args.next() {
        let mut value = |name: &str| args.next().ok_or(format!("{name} needs a value"));
        match arg.as_str() {
            "--wsdl" => wsdl = Some(PathBuf::from(value("--wsdl")?)),
            "--managed-objects" => {
                managed_objects = Some(PathBuf::from(value("--managed-objects")?))
            }
            "--additions" => additions = Some(PathBuf::from(value("--additions")?)),
            "--out" => out = Some(PathBuf::from(value("--out")?)),
            "-h" | "--help" => return Err("help".into()),
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    Ok(vsphere_codegen::Options {
        wsdl: wsdl.ok_or("--wsdl is required")?,
        managed_objects,
        additions,
        out: out.ok_or("--out is required")?,
    })
}
