//! `vsphere`: a small govc-like command line on top of vsphere-client.
//!
//! ```text
//! export GOVC_URL=https://user:pass@vcenter.example.com/sdk GOVC_INSECURE=1
//! cargo run --release -p vsphere-client --example vsphere -- about
//! ```
//!
//! Configured like govc (see `config.rs`): `GOVC_URL`, `GOVC_USERNAME`,
//! `GOVC_PASSWORD`, `GOVC_INSECURE`, `GOVC_TLS_CA_CERTS`,
//! `GOVC_TLS_KNOWN_HOSTS`, `GOVC_TIMEOUT`, and the flags `-u URL`, `-k` and
//! `-timeout D` on any command.
//! One module per command group; each exposes `COMMANDS` (name, usage,
//! handler) and is listed in [`command_table`]. A handler gets [`Args`]
//! with the global flags already taken: `args.flag("on")`,
//! `args.value("vm")`, `args.positionals()`, then `args.connect()`; the
//! sessions it opens are logged out when it returns.

mod about;
mod args;
mod config;
mod inventory;
mod library;
mod snapshot;
mod tags;
mod vm;
mod walk;

use std::process::ExitCode;

use args::{Args, CliError};

/// A command handler: parses its own flags from `Args` and runs.
type Handler =
    fn(Args) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<(), CliError>>>>;

/// One entry of the command table.
pub struct Command {
    pub name: &'static str,
    pub usage: &'static str,
    pub run: Handler,
}

fn command_table() -> Vec<&'static Command> {
    let mut table = Vec::new();
    table.extend(about::COMMANDS);
    table.extend(tags::COMMANDS);
    table.extend(library::COMMANDS);
    table.extend(inventory::COMMANDS);
    table.extend(vm::COMMANDS);
    table.extend(snapshot::COMMANDS);
    table.extend(walk::COMMANDS);
    table
}

fn usage(table: &[&Command]) -> String {
    let mut out = String::from(
        "Usage: vsphere <COMMAND> [-u URL] [-k] [-timeout D] [ARGS]\n\n\
         Configuration as govc: GOVC_URL, GOVC_USERNAME, GOVC_PASSWORD, GOVC_INSECURE,\n\
         GOVC_TLS_CA_CERTS, GOVC_TLS_KNOWN_HOSTS, GOVC_TIMEOUT (or -timeout: the deadline\n\
         of each call, retries included, like 30s or 5m; default 10m). VSPHERE_LOG=warn|info|debug|trace logs to stderr\n\
         (trace includes the SOAP bodies, with passwords and session cookies redacted).\n\nCommands:\n",
    );
    for command in table {
        out.push_str(&format!("  {:<20} {}\n", command.name, command.usage));
    }
    out
}

fn init_logging() {
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    let level = match std::env::var("VSPHERE_LOG")
        .unwrap_or_default()
        .to_ascii_lowercase()
        .as_str()
    {
        "trace" => tracing::Level::TRACE,
        "debug" => tracing::Level::DEBUG,
        "info" => tracing::Level::INFO,
        "warn" => tracing::Level::WARN,
        // Quiet by default: errors reach the user as the one-line message.
        _ => tracing::Level::ERROR,
    };
    // The client's own events at the chosen level; its dependencies'
    // (hyper, rustls) only from warnings up.
    let filter = tracing_subscriber::filter::Targets::new()
        .with_default(tracing::Level::WARN.min(level))
        .with_target("vsphere_client", level);
    tracing_subscriber::registry()
        .with(tracing_subscriber::fmt::layer().with_writer(std::io::stderr))
        .with(filter)
        .init();
}

fn main() -> ExitCode {
    init_logging();
    let mut raw: Vec<String> = std::env::args().skip(1).collect();
    let table = command_table();
    if raw.is_empty() || matches!(raw[0].as_str(), "-h" | "-help" | "--help" | "help") {
        print!("{}", usage(&table));
        return if raw.is_empty() {
            ExitCode::from(2)
        } else {
            ExitCode::SUCCESS
        };
    }
    let name = raw.remove(0);
    let Some(command) = table.iter().find(|c| c.name == name) else {
        eprintln!("vsphere: unknown command {name:?} (see vsphere -h)");
        return ExitCode::from(2);
    };
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("vsphere: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async {
        let args = Args::new(raw)?;
        let result = (command.run)(args).await;
        args::close_all().await;
        result
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(CliError::Usage(message)) => {
            eprintln!(
                "vsphere {name}: {message}\nusage: vsphere {name} {}",
                command.usage
            );
            ExitCode::from(2)
        }
        Err(err) => {
            eprintln!("vsphere: {err}");
            ExitCode::FAILURE
        }
    }
}
