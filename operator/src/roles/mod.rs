//! The long-running subcommands, one file each: watches and `Controller`
//! wiring, no decisions (those are in [`crate::controllers`]).

pub mod controller;
pub mod provider;

use std::net::SocketAddr;
use std::sync::Arc;

use kube::Client;
use tracing::warn;

use crate::cli::LeaderElection;
use crate::health::{self, Metrics};
use crate::leadership::{self, Election, Leadership};

/// What every role starts with: the health listener (`/healthz`, `/readyz`,
/// `/metrics` on `addr`, served in the background) and a Kubernetes client
/// from the environment. The error says which of the two failed.
pub async fn start(addr: SocketAddr, metrics: Arc<Metrics>) -> Result<Client, String> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| format!("cannot listen on {addr}: {e}"))?;
    tokio::spawn(health::serve(listener, metrics));
    Client::try_default()
        .await
        .map_err(|e| format!("cannot build a Kubernetes client: {e}"))
}

/// Logs what a `Controller` loop yields besides successes: a queue or runner error
/// at warn level; a failed reconcile at debug (its error policy warned already);
/// a trigger for an object already deleted at debug (expected after a deletion).
pub(crate) fn log_loop_result<T, E, Q>(
    kind: &str,
    result: std::result::Result<T, kube::runtime::controller::Error<E, Q>>,
) where
    E: std::error::Error,
    Q: std::error::Error,
{
    use kube::runtime::controller::Error as LoopError;
    match result {
        Ok(_) => {}
        Err(e @ (LoopError::ObjectNotFound(_) | LoopError::ReconcilerFailed(..))) => {
            tracing::debug!(kind, error = %e, "reconcile loop");
        }
        Err(e) => warn!(kind, error = %e, "reconcile loop"),
    }
}

/// [`start`], then the role's leadership: a campaign for `lease` in the
/// flags' namespace (or `namespace`) when leader election is on, else always leading.
pub async fn start_elected(
    addr: SocketAddr,
    metrics: &Arc<Metrics>,
    flags: &LeaderElection,
    namespace: &str,
    lease: &str,
) -> Result<(Client, Leadership), String> {
    let client = start(addr, metrics.clone()).await?;
    if !flags.leader_elect {
        return Ok((client, Leadership::always()));
    }
    let election = Election::new(
        flags.lease_namespace.as_deref().unwrap_or(namespace),
        lease,
        leadership::identity(),
        flags.lease_duration,
        flags.lease_grace,
    )?;
    let leadership = leadership::campaign(client.clone(), election, metrics.clone());
    Ok((client, leadership))
}

/// A background task of a role, aborted when the role's future is dropped
/// (leadership lost) as well as when it ends.
pub(crate) struct Background(tokio::task::JoinHandle<()>);

impl Background {
    pub(crate) fn spawn(task: impl std::future::Future<Output = ()> + Send + 'static) -> Self {
        Self(tokio::spawn(task))
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        self.0.abort();
    }
}
