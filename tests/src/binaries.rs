//! Binaries of this workspace that tests run as processes.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::SystemTime;

/// The `banlieue` binary next to the running test binary (built there by
/// `cargo nextest run --workspace`, which the operator's own tests need);
/// built with `cargo build -p banlieue` into the same target directory when
/// it is missing (a run of this package alone).
pub fn banlieue_binary() -> PathBuf {
    let exe = std::env::current_exe().expect("test binary path");
    // <target>/<profile>/deps/<test>-HASH
    let profile_dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("the test binary lives in <target>/<profile>/deps")
        .to_path_buf();
    let binary = profile_dir.join(format!("banlieue{}", std::env::consts::EXE_SUFFIX));
    if !binary.is_file() {
        let target_dir = profile_dir.parent().expect("target dir");
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        let status = Command::new(cargo)
            .args([
                "build",
                "-p",
                "banlieue",
                "--bin",
                "banlieue",
                "--target-dir",
            ])
            .arg(target_dir)
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .status()
            .expect("run cargo build -p banlieue");
        assert!(status.success(), "building banlieue failed");
    }
    binary
}

/// The example binary. `cargo test --workspace` (and nextest) build it
/// beside the test executables; when it is missing or older than the
/// client's sources (`cargo test -p vsphere-tests` alone), it is built here.
pub fn vsphere_cli_binary() -> PathBuf {
    static BINARY: OnceLock<PathBuf> = OnceLock::new();
    BINARY
        .get_or_init(|| {
            let exe = std::env::current_exe().expect("test executable path");
            // target/<profile>/deps/<test>
            let profile_dir = exe.parent().and_then(|d| d.parent()).expect("profile dir");
            let target_dir = profile_dir.parent().expect("target dir");
            let binary = profile_dir.join("examples").join("vsphere");
            let client_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../vsphere-client");
            let built = std::fs::metadata(&binary).and_then(|m| m.modified()).ok();
            if built.is_some_and(|built| newest_change(&client_dir) <= built) {
                return binary;
            }
            let mut build = Command::new(env!("CARGO"));
            build
                .args([
                    "build",
                    "-q",
                    "-p",
                    "vsphere-client",
                    "--example",
                    "vsphere",
                    "--target-dir",
                ])
                .arg(target_dir)
                .current_dir(env!("CARGO_MANIFEST_DIR"));
            if profile_dir.file_name().is_some_and(|n| n == "release") {
                build.arg("--release");
            }
            let status = build.status().expect("run cargo build");
            assert!(status.success(), "building the vsphere example failed");
            binary
        })
        .clone()
}

/// The latest modification time of the files under `dir`.
fn newest_change(dir: &Path) -> SystemTime {
    let mut newest = SystemTime::UNIX_EPOCH;
    let mut pending = vec![dir.to_path_buf()];
    while let Some(dir) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let Ok(meta) = entry.metadata() else { continue };
            if meta.is_dir() {
                pending.push(entry.path());
            } else if let Ok(modified) = meta.modified() {
                newest = newest.max(modified);
            }
        }
    }
    newest
}
