//! `banlieue`: one binary, roles by subcommand (see `lib.rs` for the module map).

use std::process::ExitCode;
use std::sync::Arc;

use clap::Parser;
use tracing::{error, info};

use banlieue::check;
use banlieue::cli::{Backend, Cli, Command};
use banlieue::health::Metrics;
use banlieue::leadership;
use banlieue::roles;
use banlieue::vsphere::vcenter::{self, VCenter};

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    banlieue::telemetry::init();
    match cli.command {
        Command::Crdgen { out, reference } => match banlieue::crdgen::write(&out)
            .and_then(|()| banlieue::crdgen::write_reference(&reference))
        {
            Ok(()) => {
                info!(dir = %out.display(), reference = %reference.display(), "CRDs written");
                ExitCode::SUCCESS
            }
            Err(e) => {
                error!(error = %e, "crdgen failed");
                ExitCode::FAILURE
            }
        },
        Command::Bootstrap {
            what: banlieue::cli::Bootstrap::Operator { dry_run, image },
        } => {
            if dry_run {
                return match banlieue::bootstrap::render(&image) {
                    Ok(yaml) => {
                        print!("{yaml}");
                        ExitCode::SUCCESS
                    }
                    Err(e) => {
                        error!(error = %e, "bootstrap failed");
                        ExitCode::FAILURE
                    }
                };
            }
            let applied = match kube::Client::try_default().await {
                Ok(client) => banlieue::bootstrap::apply(&client, &image).await,
                Err(e) => Err(e.into()),
            };
            match applied {
                Ok(n) => {
                    info!(objects = n, %image, "operator installed (server-side apply)");
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    error!(error = %e, "bootstrap failed");
                    ExitCode::FAILURE
                }
            }
        }
        Command::Controller {
            health_addr,
            election,
            provider_workloads,
            image,
        } => {
            let metrics = Arc::new(Metrics::default());
            let started = roles::start_elected(
                health_addr,
                &metrics,
                &election,
                roles::controller::NAMESPACE,
                roles::controller::LEASE,
            )
            .await;
            let (client, leadership) = match started {
                Ok(c) => c,
                Err(e) => {
                    error!(error = %e, "controller cannot start");
                    return ExitCode::FAILURE;
                }
            };
            info!("controller starting");
            // Providers live in the install namespace, the controller's own.
            let workloads = provider_workloads.then(|| {
                let namespace = election
                    .lease_namespace
                    .clone()
                    .unwrap_or_else(|| roles::controller::NAMESPACE.to_string());
                (namespace, image.clone())
            });
            let role =
                || roles::controller::run(client.clone(), metrics.clone(), workloads.clone());
            match leadership::lead(&leadership, role).await {
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
                    provider,
                    health_addr,
                    resync_interval,
                    election,
                },
        } => {
            let metrics = Arc::new(Metrics::default());
            let started = roles::start_elected(
                health_addr,
                &metrics,
                &election,
                &namespace,
                &provider.as_deref().map_or(
                    roles::provider::LEASE.to_string(),
                    banlieue::bootstrap::workload::name,
                ),
            )
            .await;
            let (client, leadership) = match started {
                Ok(c) => c,
                Err(e) => {
                    error!(error = %e, "provider cannot start");
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
            let role = || {
                roles::provider::run_scoped(
                    client.clone(),
                    &namespace,
                    provider.as_deref(),
                    resync_interval,
                    vcenter.clone(),
                    metrics.clone(),
                )
            };
            match leadership::lead(&leadership, role).await {
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
