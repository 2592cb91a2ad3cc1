//! The command line: `banlieue controller | provider vsphere | crdgen | check`.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

use crate::api::parse_interval;
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
        #[command(flatten)]
        election: LeaderElection,
        /// Operator-managed mode: make each Provider its own provider workload
        /// (ServiceAccount, Role, bindings, Lease, Deployment), owned by it.
        #[arg(long, env = "BANLIEUE_PROVIDER_WORKLOADS")]
        provider_workloads: bool,
        /// The image of the provider workloads: the controller's own.
        #[arg(long, env = "BANLIEUE_IMAGE", default_value_t = crate::bootstrap::default_image())]
        image: String,
    },
    /// Install the operator (`bootstrap operator`).
    Bootstrap {
        #[command(subcommand)]
        what: Bootstrap,
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
        /// Serve this one Provider of the namespace (a provider workload,
        /// made by the controller with `--provider-workloads`), on a Lease of its own.
        #[arg(long, env = "BANLIEUE_PROVIDER")]
        provider: Option<String>,
        #[arg(long, default_value = "0.0.0.0:8080", env = "BANLIEUE_HEALTH_ADDR")]
        health_addr: SocketAddr,
        /// How often every Provider and VMImage is re-verified against vCenter (`30s`, `5m`, `1h`).
        #[arg(long, default_value = "5m", env = "BANLIEUE_RESYNC_INTERVAL", value_parser = parse_interval)]
        resync_interval: Duration,
        #[command(flatten)]
        election: LeaderElection,
    },
}

/// Leader election: only the instance holding the role's Lease reconciles.
#[derive(Args, Clone, Debug)]
pub struct LeaderElection {
    /// Campaign for the role's Lease and reconcile only while holding it
    /// (`false`: reconcile at once, for a single instance).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set, env = "BANLIEUE_LEADER_ELECT")]
    pub leader_elect: bool,
    /// Namespace of the Lease (the provider's own `--namespace` when unset;
    /// the controller's defaults to `banlieue-system`).
    #[arg(long, env = "BANLIEUE_LEASE_NAMESPACE")]
    pub lease_namespace: Option<String>,
    /// How long a Lease stays valid after its last renewal (whole seconds:
    /// `15s`); another instance takes over within it when the leader is gone.
    #[arg(long, default_value = "15s", env = "BANLIEUE_LEASE_DURATION", value_parser = parse_interval)]
    pub lease_duration: Duration,
    /// The leader renews this long before its Lease would expire, and stops
    /// reconciling half of it before expiry when renewals fail (whole seconds).
    #[arg(long, default_value = "5s", env = "BANLIEUE_LEASE_GRACE", value_parser = parse_interval)]
    pub lease_grace: Duration,
}

#[derive(Subcommand)]
pub enum Bootstrap {
    /// The operator-managed install: the CRDs, the controller with its RBAC
    /// in `--provider-workloads` mode, and the provider ClusterRole its
    /// workloads are bound to; server-side applied (run it again to update).
    Operator {
        /// Print the YAML instead of applying it.
        #[arg(long)]
        dry_run: bool,
        /// The image the controller (and so every provider workload) runs.
        #[arg(long, default_value_t = crate::bootstrap::default_image())]
        image: String,
    },
}
