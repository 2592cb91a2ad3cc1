//! Starts the Kubernetes API emulator (`tests/kube-emulator/apiserver.py`) for a test,
//! and writes a kubeconfig pointing at it.

use std::fmt;
use std::fs::{self, File};
use std::io::{self, BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

/// How long the emulator may take to load its manifests and listen.
const START_TIMEOUT: Duration = Duration::from_secs(60);

/// The emulator's script in this repository.
pub fn kube_emulator_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("kube-emulator/apiserver.py")
}

/// The Python that runs it: `$KUBE_EMULATOR_PYTHON`, else `python3`.
fn python() -> String {
    std::env::var("KUBE_EMULATOR_PYTHON")
        .ok()
        .filter(|p| !p.is_empty())
        .unwrap_or_else(|| "python3".to_string())
}

#[derive(Debug)]
pub enum KubeEmulatorError {
    /// Python or its packages (kmock, PyYAML) are missing.
    Missing(String),
    Spawn(io::Error),
    /// It exited, or did not say READY in time; its output so far.
    NotReady(String),
}

impl fmt::Display for KubeEmulatorError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KubeEmulatorError::Missing(m) => write!(
                f,
                "the Kubernetes API emulator cannot run: {m} (tests/ensure-deps installs kmock and PyYAML)"
            ),
            KubeEmulatorError::Spawn(e) => write!(f, "cannot start the Kubernetes API emulator: {e}"),
            KubeEmulatorError::NotReady(log) => {
                write!(f, "the Kubernetes API emulator did not start; its output:\n{log}")
            }
        }
    }
}

impl std::error::Error for KubeEmulatorError {}

/// A running emulator, killed on drop.
pub struct KubeEmulator {
    child: Child,
    url: String,
    log_file: PathBuf,
}

impl fmt::Debug for KubeEmulator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KubeEmulator")
            .field("url", &self.url)
            .finish()
    }
}

impl KubeEmulator {
    /// Starts the emulator on a free port with every document of `manifest_dir/*.yaml`
    /// loaded; its output goes to `log_file`.
    pub fn start(manifest_dir: &Path, log_file: &Path) -> Result<KubeEmulator, KubeEmulatorError> {
        let python = python();
        let probe = Command::new(&python)
            .args(["-c", "import kmock, yaml"])
            .output()
            .map_err(|e| KubeEmulatorError::Missing(format!("{python}: {e}")))?;
        if !probe.status.success() {
            return Err(KubeEmulatorError::Missing(format!(
                "{python} -c 'import kmock, yaml': {}",
                String::from_utf8_lossy(&probe.stderr).trim()
            )));
        }
        let mut child = Command::new(&python)
            .arg("-u")
            .arg(kube_emulator_script())
            .arg("0")
            .arg(manifest_dir)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(KubeEmulatorError::Spawn)?;
        let log = File::create(log_file).map_err(KubeEmulatorError::Spawn)?;
        let stdout = child.stdout.take().expect("piped stdout");
        let stderr = child.stderr.take().expect("piped stderr");
        let (tx, rx) = mpsc::channel::<String>();
        // Everything it prints goes to the log; the READY line is also sent here.
        {
            let mut log = log.try_clone().map_err(KubeEmulatorError::Spawn)?;
            thread::spawn(move || {
                for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                    use std::io::Write;
                    let _ = writeln!(log, "{line}");
                    if let Some(url) = line.strip_prefix("READY ") {
                        let _ = tx.send(url.trim().to_string());
                    }
                }
            });
        }
        {
            let mut log = log;
            thread::spawn(move || {
                let _ = io::copy(&mut BufReader::new(stderr), &mut log);
            });
        }
        match rx.recv_timeout(START_TIMEOUT) {
            Ok(url) => Ok(KubeEmulator {
                child,
                url,
                log_file: log_file.to_path_buf(),
            }),
            Err(_) => {
                let _ = child.kill();
                let _ = child.wait();
                thread::sleep(Duration::from_millis(100));
                Err(KubeEmulatorError::NotReady(
                    fs::read_to_string(log_file).unwrap_or_default(),
                ))
            }
        }
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// What it printed so far.
    pub fn log(&self) -> String {
        fs::read_to_string(&self.log_file).unwrap_or_default()
    }

    /// Writes a kubeconfig for it (any token is accepted) to `path`.
    pub fn write_kubeconfig(&self, path: &Path) -> io::Result<()> {
        fs::write(
            path,
            format!(
                "apiVersion: v1\nkind: Config\n\
                 clusters: [{{name: emulator, cluster: {{server: \"{}\"}}}}]\n\
                 users: [{{name: test, user: {{token: test-token}}}}]\n\
                 contexts: [{{name: test, context: {{cluster: emulator, user: test, namespace: default}}}}]\n\
                 current-context: test\n",
                self.url
            ),
        )
    }
}

impl Drop for KubeEmulator {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
