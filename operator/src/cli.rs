//! The command line: `banlieue controller | provider vsphere | crdgen | check`.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Parser, Subcommand};

use crate::check::Output;

#[derive(Parser)]
#[command(
    name = "banlieue",
    version,
    about = "Kubernetes operator for banlieue.io/v1alpha1 VMs on vSphere"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand)]
pub enum Command {
    /// Schedule VirtualMachines onto Providers and create their VSphereMachines.
    Controller {
        /// Address of /healthz, /readyz and /metrics.
        #[arg(long, default_value = "0.0.0.0:8080", env = "BANLIEUE_HEALTH_ADDR")]
        health_addr: SocketAddr,
    },
    /// Run a backend provider role.
    Provider {
        #[command(subcommand)]
        backend: Backend,
    },
    /// Write the CRDs generated from the API types, and their API reference.
    Crdgen {
        /// Directory to write `<plural>.yaml` files into.
        #[arg(long, default_value = "deploy/crds")]
        out: PathBuf,
        /// The API reference generated from the CRDs' schemas.
        #[arg(long, default_value = crate::crdgen::REFERENCE)]
        reference: PathBuf,
    },
    /// Run the operator's reconcile code over manifests, without a cluster.
    Check {
        /// Manifest files or directories (multi-document YAML; Secrets and ConfigMaps included).
        #[arg(short = 'f', long = "filename", required = true, num_args = 1..)]
        files: Vec<PathBuf>,
        /// Also create the VMs in vCenter and wait for them to be Ready.
        #[arg(long)]
        apply: bool,
        /// With --apply: how long to wait for every VirtualMachine to be Ready (30s, 10m...).
        #[arg(long, default_value = "10m", value_parser = parse_interval)]
        timeout: Duration,
        #[arg(short = 'o', long, value_enum, default_value_t = Output::Table)]
        output: Output,
    },
}

#[derive(Subcommand)]
pub enum Backend {
    /// Reconcile the Providers of one namespace against vCenter.
    Vsphere {
        /// The install namespace: its Providers are served and its Secrets read.
        #[arg(long, env = "BANLIEUE_NAMESPACE")]
        namespace: String,
        #[arg(long, default_value = "0.0.0.0:8080", env = "BANLIEUE_HEALTH_ADDR")]
        health_addr: SocketAddr,
        /// How often every Provider and VMImage is re-verified against vCenter (`30s`, `5m`, `1h`).
        #[arg(long, default_value = "5m", env = "BANLIEUE_RESYNC_INTERVAL", value_parser = parse_interval)]
        resync_interval: Duration,
    },
}

/// Parses an interval: a number with a unit (`90s`, `5m`, `1h`; several
/// parts add up, `1m30s`), or plain seconds.
pub fn parse_interval(text: &str) -> std::result::Result<Duration, String> {
    let text = text.trim();
    if let Ok(seconds) = text.parse::<u64>() {
        return Ok(Duration::from_secs(seconds));
    }
    let mut total = Duration::ZERO;
    let mut number = String::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c.is_ascii_digit() {
            number.push(c);
            continue;
        }
        let mut unit = c.to_string();
        if c == 'm' && chars.peek() == Some(&'s') {
            unit.push('s');
            chars.next();
        }
        let n: u64 = number
            .parse()
            .map_err(|_| format!("invalid interval {text:?}: expected e.g. 30s, 5m, 1h"))?;
        number.clear();
        total += match unit.as_str() {
            "ms" => Duration::from_millis(n),
            "s" => Duration::from_secs(n),
            "m" => Duration::from_secs(n * 60),
            "h" => Duration::from_secs(n * 3600),
            _ => {
                return Err(format!(
                    "invalid interval {text:?}: unknown unit {unit:?} (use ms, s, m or h)"
                ))
            }
        };
    }
    if !number.is_empty() || total.is_zero() {
        return Err(format!(
            "invalid interval {text:?}: expected e.g. 30s, 5m, 1h"
        ));
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intervals() {
        assert_eq!(parse_interval("5m"), Ok(Duration::from_secs(300)));
        assert_eq!(parse_interval("90s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_interval("1h"), Ok(Duration::from_secs(3600)));
        assert_eq!(parse_interval("1m30s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_interval("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_interval("120"), Ok(Duration::from_secs(120)));
        for bad in ["", "5x", "m", "5m3", "0s"] {
            assert!(parse_interval(bad).is_err(), "{bad}");
        }
    }
}
