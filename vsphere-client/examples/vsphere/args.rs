//! Go-style flag parsing (`-name`, `-name=value`, `-name value`), the
//! global flags every command accepts (`-u URL`, `-k`, `-timeout D`), and
//! the CLI error.

use std::fmt;
use std::sync::Mutex;

use vsphere_client::Client;

use crate::config::Config;

/// What a command can fail with.
#[derive(Debug)]
pub enum CliError {
    /// Bad command line: printed with the command's usage, exit code 2.
    Usage(String),
    /// A vSphere call or connection failed.
    Client(vsphere_client::Error),
    /// Anything else (a file that cannot be read...).
    Other(String),
}

impl fmt::Display for CliError {
    /// One line: the error and its causes, joined with `: `.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CliError::Usage(message) | CliError::Other(message) => f.write_str(message),
            CliError::Client(err) => write!(f, "{}", err.report()),
        }
    }
}

impl From<vsphere_client::Error> for CliError {
    fn from(err: vsphere_client::Error) -> Self {
        CliError::Client(err)
    }
}

/// Clients opened by the command, closed when it is done.
static OPEN_CLIENTS: Mutex<Vec<Client>> = Mutex::new(Vec::new());

/// Logs out every client the command connected: a short-lived tool must
/// not leave sessions behind on the server.
pub(crate) async fn close_all() {
    let clients = OPEN_CLIENTS
        .lock()
        .map(|mut open| std::mem::take(&mut *open))
        .unwrap_or_default();
    for client in clients {
        if let Err(err) = client.close().await {
            tracing::debug!(error = %err, "logout failed");
        }
    }
}

/// The arguments of one command, the global flags already taken out.
pub struct Args {
    config: Config,
    rest: Vec<String>,
}

impl Args {
    /// Takes `-u URL`, `-k` and `-timeout D` out of the arguments.
    pub fn new(raw: Vec<String>) -> Result<Args, CliError> {
        let mut args = Args {
            config: Config::default(),
            rest: raw,
        };
        let url = args.value("u")?;
        let insecure = args.flag("k")?;
        let timeout = args.value("timeout")?;
        args.config = Config::from_env_and_flags(url, insecure, timeout)?;
        Ok(args)
    }

    /// The connection settings (environment and global flags).
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Connects as configured. The session is closed (logged out) when the
    /// command returns, by [`close_all`].
    pub async fn connect(&self) -> Result<Client, CliError> {
        let client = self.config.connect().await?;
        if let Ok(mut open) = OPEN_CLIENTS.lock() {
            open.push(client.clone());
        }
        Ok(client)
    }

    /// Removes a boolean flag: `-name`, `-name=true`, `-name=false`.
    pub fn flag(&mut self, name: &str) -> Result<bool, CliError> {
        self.flag_or(name, false)
    }

    /// Removes a boolean flag that is `default` when absent (govc's `-m`
    /// of `snapshot.create` is on unless `-m=false`).
    pub fn flag_or(&mut self, name: &str, default: bool) -> Result<bool, CliError> {
        let mut found = default;
        let mut i = 0;
        while i < self.rest.len() {
            match split_flag(&self.rest[i], name) {
                Some(None) => {
                    found = true;
                    self.rest.remove(i);
                }
                Some(Some(value)) => {
                    found = parse_bool(name, &value)?;
                    self.rest.remove(i);
                }
                None => i += 1,
            }
        }
        Ok(found)
    }

    /// Removes a flag with a value: `-name value` or `-name=value` (the last
    /// one wins, as with Go's flag package).
    pub fn value(&mut self, name: &str) -> Result<Option<String>, CliError> {
        Ok(self.values(name)?.pop())
    }

    /// Removes a repeatable flag with a value (`-t A -t B`): every value,
    /// in order.
    pub fn values(&mut self, name: &str) -> Result<Vec<String>, CliError> {
        let mut found = Vec::new();
        let mut i = 0;
        while i < self.rest.len() {
            match split_flag(&self.rest[i], name) {
                Some(Some(value)) => {
                    found.push(value);
                    self.rest.remove(i);
                }
                Some(None) => {
                    if i + 1 >= self.rest.len() {
                        return Err(CliError::Usage(format!("flag needs an argument: -{name}")));
                    }
                    self.rest.remove(i);
                    found.push(self.rest.remove(i));
                }
                None => i += 1,
            }
        }
        Ok(found)
    }

    /// What is left, once the command took its flags: positional arguments.
    /// A leftover `-flag` is an error.
    pub fn positionals(&mut self) -> Result<Vec<String>, CliError> {
        if let Some(unknown) = self.rest.iter().find(|a| a.starts_with('-') && a.len() > 1) {
            return Err(CliError::Usage(format!(
                "flag provided but not defined: {unknown}"
            )));
        }
        Ok(std::mem::take(&mut self.rest))
    }
}

/// `Some(None)` for `-name`/`--name`, `Some(Some(v))` for `-name=v`, `None`
/// when `arg` is another flag or not a flag.
fn split_flag(arg: &str, name: &str) -> Option<Option<String>> {
    let body = arg.strip_prefix("--").or_else(|| arg.strip_prefix('-'))?;
    match body.split_once('=') {
        Some((flag, value)) if flag == name => Some(Some(value.to_string())),
        None if body == name => Some(None),
        _ => None,
    }
}

fn parse_bool(name: &str, value: &str) -> Result<bool, CliError> {
    match value {
        "1" | "t" | "T" | "true" | "TRUE" | "True" => Ok(true),
        "0" | "f" | "F" | "false" | "FALSE" | "False" => Ok(false),
        _ => Err(CliError::Usage(format!(
            "invalid boolean value {value:?} for -{name}"
        ))),
    }
}
