//! The long-running subcommands, one file each: watches and `Controller`
//! wiring, no decisions (those are in [`crate::controllers`]).

pub mod controller;
pub mod provider;

use std::net::SocketAddr;
use std::sync::Arc;

use kube::Client;
use tracing::warn;

use crate::health::{self, Metrics};

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
