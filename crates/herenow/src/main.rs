//! The `herenow` binary: `herenow serve` runs the server, every other
//! subcommand is a small client of its HTTP API (docs/API.md).
//!
//! The binary is glue: [`cli`] parses flags and environment, [`serve`]
//! turns them into a `herenow_server::Config` and calls
//! `herenow_server::run`, [`commands`] sends requests through [`client`]
//! and prints with [`output`]. Errors end here, as one line on stderr and an
//! exit code:
//!
//! - 0: done;
//! - 1: the request or the server failed (unreachable, an error answer, a
//!   port taken);
//! - 2: the command line or the configuration is wrong (clap's own usage
//!   errors exit 2 as well).

mod cli;
mod client;
mod commands;
mod output;
mod serve;

use std::process::ExitCode;

use clap::Parser as _;

use crate::cli::{Cli, Command};

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Serve(args) => serve::main(args),
        Command::Client(command) => commands::main(command),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // `{:#}` keeps the causes on the one line: "cannot listen on …: Address in use".
            eprintln!("herenow: {e:#}");
            exit_code(&e)
        }
    }
}

/// 2 for a configuration the user must change, 1 for everything else.
fn exit_code(e: &anyhow::Error) -> ExitCode {
    let config_error = e.chain().any(|cause| {
        cause.is::<herenow_server::ConfigError>()
            || matches!(
                cause.downcast_ref::<herenow_server::ServerError>(),
                Some(herenow_server::ServerError::Config(_))
            )
    });
    if config_error {
        ExitCode::from(2)
    } else {
        ExitCode::FAILURE
    }
}
