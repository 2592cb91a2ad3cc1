//! Starts the project's vcsim launcher (`tests/vcsim/main.go`) for a test.

use std::fmt;
use std::fs::File;
use std::io::{self, BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::sync::OnceLock;
use std::thread;
use std::time::{Duration, Instant};

/// How the simulator serves TLS.
#[derive(Clone, Debug, Default)]
pub enum ServerTls {
    /// https with the simulator's built-in certificate for 127.0.0.1
    /// (clients need insecure mode or a thumbprint).
    #[default]
    BuiltIn,
    /// Plain http.
    Plain,
    /// https with this PEM certificate and key, e.g. from [`crate::TestCa::server_tls`].
    Certificate {
        cert_file: PathBuf,
        key_file: PathBuf,
    },
}

/// A VM template the launcher creates (cloned from a VM of the datacenter,
/// marked as template, in the datacenter's VM folder, e.g. `/DC0/vm/NAME`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Template {
    pub name: String,
    /// Datacenters (`DC0`, `DC1`, ...) that get the template; empty means all.
    pub datacenters: Vec<String>,
}

impl Template {
    /// A template of this name in every datacenter.
    pub fn everywhere(name: impl Into<String>) -> Template {
        Template {
            name: name.into(),
            datacenters: Vec::new(),
        }
    }

    /// A template of this name in the listed datacenters only.
    pub fn in_datacenters(name: impl Into<String>, datacenters: &[&str]) -> Template {
        Template {
            name: name.into(),
            datacenters: datacenters
                .iter()
                .map(std::string::ToString::to_string)
                .collect(),
        }
    }

    fn flag_value(&self) -> String {
        if self.datacenters.is_empty() {
            self.name.clone()
        } else {
            format!("{}@{}", self.name, self.datacenters.join(","))
        }
    }
}

/// What to start. The inventory defaults are govmomi's VPX model: one
/// datacenter `DC0` with a cluster `DC0_C0` of three hosts, one standalone
/// host, one datastore `LocalDS_0`, one distributed port group, and two
/// powered-on VMs per resource pool and standalone host (four in all).
#[derive(Clone)]
pub struct SimulatorOptions {
    /// `-dc`: datacenters.
    pub datacenters: u32,
    /// `-cluster`: clusters per datacenter.
    pub clusters: u32,
    /// `-host`: hosts per cluster.
    pub hosts_per_cluster: u32,
    /// `-standalone-host`: standalone hosts per datacenter.
    pub standalone_hosts: u32,
    /// `-pool`: resource pools per cluster besides the root pool.
    pub resource_pools: u32,
    /// `-vm`: VMs per resource pool and per standalone host.
    pub vms: u32,
    /// `-ds`: datastores.
    pub datastores: u32,
    /// `-pg`: distributed port groups per datacenter.
    pub portgroups: u32,
    /// `-folder`: nest datacenters and their contents in folders.
    pub folders: u32,
    /// `-app`: vApps per cluster.
    pub vapps: u32,
    /// `-pod`: storage pods per cluster.
    pub storage_pods: u32,
    /// `-autostart`: power on the model's VMs.
    pub autostart: bool,
    /// `-session-idle-timeout`: expire SOAP and REST sessions idle this long.
    pub session_idle_timeout: Option<Duration>,
    /// `-delay`: delay every (valid, authenticated) SOAP call.
    pub delay: Option<Duration>,
    /// `-method-delay`: extra delay for some methods, by WSDL name (`CloneVM_Task`).
    pub method_delays: Vec<(String, Duration)>,
    pub tls: ServerTls,
    /// The only user name and password Login accepts (SOAP; REST accepts any
    /// non-empty pair, a limitation of the simulator).
    pub username: String,
    pub password: String,
    pub templates: Vec<Template>,
    /// `-api-version`: the API version the server reports (default 6.5, vcsim's own).
    pub api_version: Option<String>,
    /// `-trace`: SOAP traffic into the log (see [`Simulator::log`]).
    pub trace: bool,
    /// How long to wait for the launcher to listen (large inventories take a while).
    pub start_timeout: Duration,
    /// More launcher flags, passed as given.
    pub extra_args: Vec<String>,
}

impl Default for SimulatorOptions {
    fn default() -> Self {
        SimulatorOptions {
            datacenters: 1,
            clusters: 1,
            hosts_per_cluster: 3,
            standalone_hosts: 1,
            resource_pools: 0,
            vms: 2,
            datastores: 1,
            portgroups: 1,
            folders: 0,
            vapps: 0,
            storage_pods: 0,
            autostart: true,
            session_idle_timeout: None,
            delay: None,
            method_delays: Vec::new(),
            tls: ServerTls::BuiltIn,
            username: "user".to_string(),
            password: "pass".to_string(),
            templates: Vec::new(),
            api_version: None,
            trace: false,
            start_timeout: Duration::from_secs(120),
            extra_args: Vec::new(),
        }
    }
}

impl fmt::Debug for SimulatorOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Everything but the password.
        f.debug_struct("SimulatorOptions")
            .field("args", &self.inventory_args())
            .field("session_idle_timeout", &self.session_idle_timeout)
            .field("delay", &self.delay)
            .field("method_delays", &self.method_delays)
            .field("tls", &self.tls)
            .field("username", &self.username)
            .field("templates", &self.templates)
            .field("api_version", &self.api_version)
            .finish_non_exhaustive()
    }
}

impl SimulatorOptions {
    fn inventory_args(&self) -> Vec<String> {
        let counts = [
            ("-dc", self.datacenters),
            ("-cluster", self.clusters),
            ("-host", self.hosts_per_cluster),
            ("-standalone-host", self.standalone_hosts),
            ("-pool", self.resource_pools),
            ("-vm", self.vms),
            ("-ds", self.datastores),
            ("-pg", self.portgroups),
            ("-folder", self.folders),
            ("-app", self.vapps),
            ("-pod", self.storage_pods),
        ];
        let mut args: Vec<String> = counts
            .iter()
            .map(|(flag, n)| format!("{flag}={n}"))
            .collect();
        args.push(format!("-autostart={}", self.autostart));
        args
    }

    fn args(&self, listen: &str) -> Vec<String> {
        let mut args = vec![
            format!("-listen={listen}"),
            format!("-username={}", self.username),
            format!("-password={}", self.password),
            "-exit-on-stdin-eof".to_string(),
        ];
        args.extend(self.inventory_args());
        if let Some(timeout) = self.session_idle_timeout {
            args.push(format!("-session-idle-timeout={}", go_duration(timeout)));
        }
        if let Some(delay) = self.delay {
            args.push(format!("-delay={}", go_duration(delay)));
        }
        if !self.method_delays.is_empty() {
            let list: Vec<String> = self
                .method_delays
                .iter()
                .map(|(m, d)| format!("{m}={}", go_duration(*d)))
                .collect();
            args.push(format!("-method-delay={}", list.join(",")));
        }
        match &self.tls {
            ServerTls::BuiltIn => {}
            ServerTls::Plain => args.push("-plain".to_string()),
            ServerTls::Certificate {
                cert_file,
                key_file,
            } => {
                args.push(format!("-tls-cert={}", cert_file.display()));
                args.push(format!("-tls-key={}", key_file.display()));
            }
        }
        for template in &self.templates {
            args.push(format!("-template={}", template.flag_value()));
        }
        if let Some(version) = &self.api_version {
            args.push(format!("-api-version={version}"));
        }
        if self.trace {
            args.push("-trace".to_string());
        }
        args.extend(self.extra_args.iter().cloned());
        args
    }
}

/// Go's time.ParseDuration format, at microsecond precision.
fn go_duration(d: Duration) -> String {
    format!("{}us", d.as_micros())
}

#[derive(Debug)]
pub enum SimulatorError {
    /// The launcher binary could not be found or built.
    Build(String),
    Spawn(io::Error),
    /// The launcher exited before it listened.
    Exited {
        status: ExitStatus,
        log: String,
    },
    /// The launcher did not print its URL in time.
    Timeout {
        waited: Duration,
        log: String,
    },
    /// The launcher printed something unexpected instead of its URL.
    BadUrl(String),
}

impl fmt::Display for SimulatorError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SimulatorError::Build(msg) => write!(f, "vcsim launcher unavailable: {msg}"),
            SimulatorError::Spawn(e) => write!(f, "cannot start the vcsim launcher: {e}"),
            SimulatorError::Exited { status, log } => {
                write!(
                    f,
                    "vcsim launcher exited ({status}) before listening; its log:\n{log}"
                )
            }
            SimulatorError::Timeout { waited, log } => {
                write!(
                    f,
                    "vcsim launcher did not listen within {waited:?}; its log:\n{log}"
                )
            }
            SimulatorError::BadUrl(line) => {
                write!(f, "unexpected line from the vcsim launcher: {line}")
            }
        }
    }
}

impl std::error::Error for SimulatorError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            SimulatorError::Spawn(e) => Some(e),
            _ => None,
        }
    }
}

/// The launcher binary: `$VCSIM_BIN` (set by the Makefile), else built (or
/// found in the cache) by `tests/vcsim/build`, once per process.
pub fn launcher_binary() -> Result<PathBuf, SimulatorError> {
    static BINARY: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    BINARY
        .get_or_init(|| {
            if let Some(bin) = std::env::var_os("VCSIM_BIN").filter(|v| !v.is_empty()) {
                let bin = PathBuf::from(bin);
                return if bin.is_file() {
                    Ok(bin)
                } else {
                    Err(format!("VCSIM_BIN={} is not a file", bin.display()))
                };
            }
            let script = Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("vcsim")
                .join("build");
            let out = Command::new("bash")
                .arg(&script)
                .stdin(Stdio::null())
                .output()
                .map_err(|e| format!("running {}: {e}", script.display()))?;
            if !out.status.success() {
                return Err(format!(
                    "{} failed ({}):\n{}",
                    script.display(),
                    out.status,
                    String::from_utf8_lossy(&out.stderr)
                ));
            }
            let stdout = String::from_utf8_lossy(&out.stdout);
            match stdout.lines().last() {
                Some(path) if Path::new(path.trim()).is_file() => Ok(PathBuf::from(path.trim())),
                _ => Err(format!(
                    "{} printed no binary path: {stdout}",
                    script.display()
                )),
            }
        })
        .clone()
        .map_err(SimulatorError::Build)
}

struct Running {
    child: Child,
    /// Closing it makes the launcher exit (`-exit-on-stdin-eof`).
    stdin: Option<ChildStdin>,
}

/// A running simulator, stopped on drop (also when the test panics). If the
/// test process itself dies, the launcher sees its stdin close and exits.
pub struct Simulator {
    options: SimulatorOptions,
    binary: PathBuf,
    scheme: String,
    host: String,
    port: u16,
    running: Option<Running>,
    /// Holds the launcher's log and its TMPDIR (the model's datastore
    /// directories), removed on drop even if the launcher was killed.
    workdir: tempfile::TempDir,
}

impl fmt::Debug for Simulator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Simulator")
            .field("sdk_url", &self.sdk_url())
            .field("running", &self.running.is_some())
            .field("options", &self.options)
            .finish()
    }
}

impl Simulator {
    /// Starts the launcher on a free loopback port and waits until it listens.
    /// Blocks (up to `options.start_timeout`); from async code, call it before
    /// spawning work that needs the runtime or through `spawn_blocking`.
    pub fn start(options: SimulatorOptions) -> Result<Simulator, SimulatorError> {
        let binary = launcher_binary()?;
        let workdir = tempfile::Builder::new()
            .prefix("vsphere-rs-vcsim-")
            .tempdir()
            .map_err(SimulatorError::Spawn)?;
        let mut sim = Simulator {
            options,
            binary,
            scheme: String::new(),
            host: String::new(),
            port: 0,
            running: None,
            workdir,
        };
        sim.spawn("127.0.0.1:0")?;
        Ok(sim)
    }

    /// Stops the simulator and starts a fresh one on the same port: same URL,
    /// new inventory (same names, possibly other morefs), no sessions.
    pub fn restart(&mut self) -> Result<(), SimulatorError> {
        self.stop();
        let listen = format!("{}:{}", self.host, self.port);
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            match self.spawn(&listen) {
                Ok(()) => return Ok(()),
                // The old socket may linger for a moment.
                Err(SimulatorError::Exited { log, .. })
                    if log.contains("address already in use") && Instant::now() < deadline =>
                {
                    thread::sleep(Duration::from_millis(100));
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Stops the simulator (idempotent): closes its stdin so it exits cleanly,
    /// and kills it if it has not exited after a few seconds.
    pub fn stop(&mut self) {
        let Some(mut running) = self.running.take() else {
            return;
        };
        drop(running.stdin.take());
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            match running.child.try_wait() {
                Ok(Some(_)) => return,
                Ok(None) if Instant::now() < deadline => thread::sleep(Duration::from_millis(10)),
                _ => break,
            }
        }
        let _ = running.child.kill();
        let _ = running.child.wait();
    }

    /// Kills the simulator at once (SIGKILL), as a crash or a power cut
    /// would: connections in flight are cut, nothing is cleaned up.
    /// [`Simulator::restart`] brings it back on the same port. Idempotent.
    pub fn kill(&mut self) {
        let Some(mut running) = self.running.take() else {
            return;
        };
        let _ = running.child.kill();
        let _ = running.child.wait();
    }

    pub fn is_running(&mut self) -> bool {
        match &mut self.running {
            Some(running) => matches!(running.child.try_wait(), Ok(None)),
            None => false,
        }
    }

    /// `https://127.0.0.1:PORT/sdk` (or `http://` with [`ServerTls::Plain`]).
    pub fn sdk_url(&self) -> String {
        format!("{}/sdk", self.base_url())
    }

    /// `https://127.0.0.1:PORT`.
    pub fn base_url(&self) -> String {
        format!("{}://{}:{}", self.scheme, self.host, self.port)
    }

    /// `https://USER:PASSWORD@127.0.0.1:PORT/sdk`, as govc's `GOVC_URL` takes it.
    /// The credentials are not URL-escaped: keep test passwords plain.
    pub fn url_with_credentials(&self) -> String {
        format!(
            "{}://{}:{}@{}:{}/sdk",
            self.scheme, self.options.username, self.options.password, self.host, self.port
        )
    }

    /// `127.0.0.1:PORT`.
    pub fn host_port(&self) -> String {
        format!("{}:{}", self.host, self.port)
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    pub fn username(&self) -> &str {
        &self.options.username
    }

    pub fn password(&self) -> &str {
        &self.options.password
    }

    pub fn options(&self) -> &SimulatorOptions {
        &self.options
    }

    /// The options, to change before a [`Simulator::restart`] (a fault
    /// injection test may restart without the delays that made its window).
    /// The address stays the same.
    pub fn options_mut(&mut self) -> &mut SimulatorOptions {
        &mut self.options
    }

    /// The launcher's stderr so far (all runs, restarts included).
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.log_file()).unwrap_or_default()
    }

    fn log_file(&self) -> PathBuf {
        self.workdir.path().join("vcsim.log")
    }

    fn spawn(&mut self, listen: &str) -> Result<(), SimulatorError> {
        let tmp = self.workdir.path().join("tmp");
        std::fs::create_dir_all(&tmp).map_err(SimulatorError::Spawn)?;
        let log = File::options()
            .create(true)
            .append(true)
            .open(self.log_file())
            .map_err(SimulatorError::Spawn)?;
        let log_start = log.metadata().map(|m| m.len()).unwrap_or(0);
        let mut child = Command::new(&self.binary)
            .args(self.options.args(listen))
            .env("TMPDIR", &tmp)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(log)
            .spawn()
            .map_err(SimulatorError::Spawn)?;
        let stdin = child.stdin.take();
        let Some(stdout) = child.stdout.take() else {
            let _ = child.kill();
            let _ = child.wait();
            return Err(SimulatorError::Spawn(io::Error::other("no stdout pipe")));
        };
        // Drain stdout on a thread so the launcher never blocks on it; the
        // first line is the URL.
        let (tx, rx) = mpsc::channel::<String>();
        thread::spawn(move || {
            let mut lines = BufReader::new(stdout).lines();
            if let Some(Ok(first)) = lines.next() {
                let _ = tx.send(first);
            }
            for _ in lines {}
        });
        let mut running = Running { child, stdin };
        let timeout = self.options.start_timeout;
        let line = match rx.recv_timeout(timeout) {
            Ok(line) => line,
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                let status = running.child.wait().map_err(SimulatorError::Spawn)?;
                return Err(SimulatorError::Exited {
                    status,
                    log: self.log_since(log_start),
                });
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {
                let _ = running.child.kill();
                let _ = running.child.wait();
                return Err(SimulatorError::Timeout {
                    waited: timeout,
                    log: self.log_since(log_start),
                });
            }
        };
        let parsed = parse_url_line(&line);
        let Some((scheme, host, port)) = parsed else {
            let _ = running.child.kill();
            let _ = running.child.wait();
            return Err(SimulatorError::BadUrl(redact(
                &line,
                &self.options.password,
            )));
        };
        self.scheme = scheme;
        self.host = host;
        self.port = port;
        self.running = Some(running);
        Ok(())
    }

    fn log_since(&self, offset: u64) -> String {
        let log = self.log();
        log.get(offset as usize..).unwrap_or(&log).to_string()
    }
}

impl Drop for Simulator {
    fn drop(&mut self) {
        self.stop();
    }
}

/// `VCSIM_URL=https://user:pass@127.0.0.1:PORT/sdk` -> (scheme, host, port).
fn parse_url_line(line: &str) -> Option<(String, String, u16)> {
    let url = line.trim().strip_prefix("VCSIM_URL=")?;
    let (scheme, rest) = url.split_once("://")?;
    let authority = rest.split('/').next()?;
    let host_port = authority.rsplit('@').next()?;
    let (host, port) = host_port.rsplit_once(':')?;
    let port = port.parse().ok()?;
    if scheme != "http" && scheme != "https" {
        return None;
    }
    Some((scheme.to_string(), host.to_string(), port))
}

fn redact(text: &str, secret: &str) -> String {
    if secret.is_empty() {
        text.to_string()
    } else {
        text.replace(secret, "***")
    }
}

/// The smallest OVF descriptor vcsim's OvfManager turns into an import spec
/// (one CPU, 64 MB, no disk): a content library item's file in tests.
pub const TINY_OVF: &str = r#"<?xml version="1.0" encoding="UTF-8"?>
<Envelope xmlns="http://schemas.dmtf.org/ovf/envelope/1" xmlns:ovf="http://schemas.dmtf.org/ovf/envelope/1"
  xmlns:rasd="http://schemas.dmtf.org/wbem/wscim/1/cim-schema/2/CIM_ResourceAllocationSettingData"
  xmlns:vssd="http://schemas.dmtf.org/wbem/wscim/1/cim-schema/2/CIM_VirtualSystemSettingData">
  <References/>
  <VirtualSystem ovf:id="tiny">
    <Info>A tiny virtual machine</Info>
    <Name>tiny</Name>
    <VirtualHardwareSection>
      <Info>Virtual hardware</Info>
      <System>
        <vssd:ElementName>Virtual Hardware Family</vssd:ElementName>
        <vssd:InstanceID>0</vssd:InstanceID>
        <vssd:VirtualSystemType>vmx-13</vssd:VirtualSystemType>
      </System>
      <Item>
        <rasd:AllocationUnits>hertz * 10^6</rasd:AllocationUnits>
        <rasd:ElementName>1 virtual CPU</rasd:ElementName>
        <rasd:InstanceID>1</rasd:InstanceID>
        <rasd:ResourceType>3</rasd:ResourceType>
        <rasd:VirtualQuantity>1</rasd:VirtualQuantity>
      </Item>
      <Item>
        <rasd:AllocationUnits>byte * 2^20</rasd:AllocationUnits>
        <rasd:ElementName>64MB of memory</rasd:ElementName>
        <rasd:InstanceID>2</rasd:InstanceID>
        <rasd:ResourceType>4</rasd:ResourceType>
        <rasd:VirtualQuantity>64</rasd:VirtualQuantity>
      </Item>
    </VirtualHardwareSection>
  </VirtualSystem>
</Envelope>
"#;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn url_line() {
        assert_eq!(
            parse_url_line("VCSIM_URL=https://user:pass@127.0.0.1:8989/sdk\n"),
            Some(("https".to_string(), "127.0.0.1".to_string(), 8989))
        );
        assert_eq!(
            parse_url_line("VCSIM_URL=http://u:p%40ss@127.0.0.1:1/sdk"),
            Some(("http".to_string(), "127.0.0.1".to_string(), 1))
        );
        assert_eq!(parse_url_line("panic: boom"), None);
        assert_eq!(parse_url_line("VCSIM_URL=ftp://127.0.0.1:1/sdk"), None);
    }

    #[test]
    fn args_carry_every_option() {
        let options = SimulatorOptions {
            session_idle_timeout: Some(Duration::from_millis(1500)),
            delay: Some(Duration::from_millis(20)),
            method_delays: vec![("CloneVM_Task".to_string(), Duration::from_secs(1))],
            tls: ServerTls::Plain,
            templates: vec![
                Template::everywhere("t1"),
                Template::in_datacenters("t2", &["DC0", "DC2"]),
            ],
            api_version: Some("7.0.3.0".to_string()),
            ..SimulatorOptions::default()
        };
        let args = options.args("127.0.0.1:0");
        for expected in [
            "-listen=127.0.0.1:0",
            "-dc=1",
            "-host=3",
            "-vm=2",
            "-session-idle-timeout=1500000us",
            "-delay=20000us",
            "-method-delay=CloneVM_Task=1000000us",
            "-plain",
            "-template=t1",
            "-template=t2@DC0,DC2",
            "-api-version=7.0.3.0",
            "-exit-on-stdin-eof",
        ] {
            assert!(
                args.iter().any(|a| a == expected),
                "{expected} missing from {args:?}"
            );
        }
    }

    #[test]
    fn debug_hides_the_password() {
        let options = SimulatorOptions {
            password: "s3cret-pw".to_string(),
            ..Default::default()
        };
        assert!(!format!("{options:?}").contains("s3cret-pw"));
        assert_eq!(
            redact("https://u:s3cret-pw@h/sdk", "s3cret-pw"),
            "https://u:***@h/sdk"
        );
    }
}
