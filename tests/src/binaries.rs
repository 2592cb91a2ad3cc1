//! Binaries of this workspace that tests run as processes.

use std::path::{Path, PathBuf};
use std::process::Command;

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
