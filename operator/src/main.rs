//! `banlieue`: one binary, roles by subcommand.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use clap::{Parser, Subcommand};
use tracing::{error, info};

use banlieue::check::{self, Output};
use banlieue::health::{self, Metrics};
use banlieue::provider_role;
use banlieue::vsphere::vcenter::{self, VCenter};

#[derive(Parser)]
#[command(
    name = "banlieue",
    version,
    about = "Kubernetes operator for banlieue.io/v1alpha1 VMs on vSphere"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
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
    /// Write the CRDs generated from the API types.
    Crdgen {
        /// Directory to write `<plural>.yaml` files into.
        #[arg(long, default_value = "deploy/crds")]
        out: PathBuf,
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
        #[arg(long, default_value = "10m", value_parser = provider_role::parse_interval)]
        timeout: std::time::Duration,
        #[arg(short = 'o', long, value_enum, default_value_t = Output::Table)]
        output: Output,
    },
}

#[derive(Subcommand)]
enum Backend {
    /// Reconcile the Providers of one namespace against vCenter.
    Vsphere {
        /// The install namespace: its Providers are served and its Secrets read.
        #[arg(long, env = "BANLIEUE_NAMESPACE")]
        namespace: String,
        #[arg(long, default_value = "0.0.0.0:8080", env = "BANLIEUE_HEALTH_ADDR")]
        health_addr: SocketAddr,
        /// How often every Provider and VMImage is re-verified against vCenter (`30s`, `5m`, `1h`).
        #[arg(long, default_value = "5m", env = "BANLIEUE_RESYNC_INTERVAL", value_parser = provider_role::parse_interval)]
        resync_interval: std::time::Duration,
    },
}

fn init_tracing() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info,kube=warn"));
    use std::io::IsTerminal;
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr)
        .init();
}

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    init_tracing();
    match cli.command {
        Command::Crdgen { out } => match banlieue::crdgen::write(&out) {
            Ok(()) => {
                info!(dir = %out.display(), "CRDs written");
                ExitCode::SUCCESS
            }
            Err(e) => {
                error!(error = %e, "crdgen failed");
                ExitCode::FAILURE
            }
        },
        Command::Controller { health_addr } => {
            let metrics = Arc::new(Metrics::default());
            let listener = match tokio::net::TcpListener::bind(health_addr).await {
                Ok(l) => l,
                Err(e) => {
                    error!(%health_addr, error = %e, "cannot listen");
                    return ExitCode::FAILURE;
                }
            };
            tokio::spawn(health::serve(listener, metrics.clone()));
            let client = match kube::Client::try_default().await {
                Ok(c) => c,
                Err(e) => {
                    error!(error = %e, "cannot build a Kubernetes client");
                    return ExitCode::FAILURE;
                }
            };
            info!("controller starting");
            match banlieue::controller::run(client, metrics).await {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    error!(error = %e, "controller failed");
                    ExitCode::FAILURE
                }
            }
        }
        Command::Provider {
            backend:
                Backend::Vsphere {
                    namespace,
                    health_addr,
                    resync_interval,
                },
        } => {
            let metrics = Arc::new(Metrics::default());
            let listener = match tokio::net::TcpListener::bind(health_addr).await {
                Ok(l) => l,
                Err(e) => {
                    error!(%health_addr, error = %e, "cannot listen");
                    return ExitCode::FAILURE;
                }
            };
            tokio::spawn(health::serve(listener, metrics.clone()));
            let client = match kube::Client::try_default().await {
                Ok(c) => c,
                Err(e) => {
                    error!(error = %e, "cannot build a Kubernetes client");
                    return ExitCode::FAILURE;
                }
            };
            info!(%namespace, resync = ?resync_interval, "vSphere provider starting");
            let vcenter = Arc::new(VCenter::new(vcenter::Options {
                watch_vms: true,
                ..Default::default()
            }));
            let sessions = vcenter.clone();
            metrics.set_vsphere_source(Arc::new(move || sessions.call_stats()));
            match provider_role::run(client, &namespace, resync_interval, vcenter, metrics).await {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    error!(error = %e, "provider failed");
                    ExitCode::FAILURE
                }
            }
        }
        Command::Check {
            files,
            apply,
            timeout,
            output,
        } => {
            let mut world = match check::World::load(&files) {
                Ok(w) => w,
                Err(e) => {
                    error!(error = %e, "cannot read manifests");
                    return ExitCode::from(2);
                }
            };
            // With --apply, VM changes (power, IPs) arrive through one update
            // stream per Provider instead of a read per VM per pass.
            let vcenter = VCenter::new(vcenter::Options {
                watch_vms: apply,
                ..Default::default()
            });
            check::reconcile(&mut world, &vcenter, &banlieue::conditions::now()).await;
            if apply {
                let deadline = std::time::Instant::now() + timeout;
                check::apply(&mut world, &vcenter, deadline, &banlieue::conditions::now()).await;
            }
            // A check leaves no session behind on vCenter.
            vcenter.close_all().await;
            let report = check::report(&world, output, apply);
            print!("{}", report.output);
            eprintln!("{}", report.summary);
            if report.passed {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            }
        }
    }
}
