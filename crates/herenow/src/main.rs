//! The `herenow` binary: `herenow serve` runs the server, every other
//! subcommand is a small client of its HTTP API (docs/API.md).
//!
//! The binary is glue: [`cli`] parses flags and environment (each value
//! checked by [`parse`]),
//! [`config_file`] adds the settings of `serve --config FILE` under them
//! ([`config_cmd`] checks such a file and prints an example),
//! [`store_flags`] checks the store's flags together into a
//! `herenow_server::StoreSpec`, [`serve`] turns them into a
//! `herenow_server::Config` and serves it, [`commands`] sends requests
//! through [`client`] and prints with [`output`]; [`webhook_flags`] and
//! [`webhooks`] are the webhook flags and the `webhooks` command;
//! [`reload`] reads the settings again on SIGHUP. Errors end here, as one
//! line on stderr and an exit code:
//!
//! - 0: done;
//! - 1: the request or the server failed (unreachable, an error answer, a
//!   port taken);
//! - 2: the command line or the configuration is wrong (clap's own usage
//!   errors exit 2 as well).

#![forbid(unsafe_code)]

mod cli;
mod client;
mod commands;
mod config_cmd;
mod config_file;
mod output;
mod parse;
mod reload;
mod serve;
mod store_flags;
mod webhook_flags;
mod webhooks;

use std::process::ExitCode;

use crate::cli::{Command, ConfigCommand};
use crate::config_file::ParseError;

/// mimalloc rather than the system's allocator: a request allocates a few
/// dozen small blocks that live for microseconds, the load a thread-local
/// allocator is made for (glibc's `malloc` and `free` took a large share of
/// a single heartbeat's work).
///
/// Built with mimalloc's `no_thp`: it does not ask the kernel for
/// transparent huge pages, which khugepaged may build from a 2 MiB range
/// with a single page in use (the default `max_ptes_none`), so the pages
/// freed after a burst (a join storm) would come back as resident memory.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    // reqwest is built with rustls and no crypto provider of its own (the
    // server's webhooks speak HTTPS): every client needs one installed.
    // An error only means one is installed already.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let argv: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let (cli, file) = match config_file::parse_args(&argv) {
        Ok(parsed) => parsed,
        Err(ParseError::Usage(e)) => e.exit(),
        Err(ParseError::File(e)) => {
            eprintln!("herenow: {e}");
            return ExitCode::from(2);
        }
    };
    let result = match cli.command {
        Command::Serve(args) => {
            // Flags that do not fit the store are usage errors, told and
            // exited on as clap's own.
            let store = store_flags::store_spec(&args).unwrap_or_else(|e| {
                if let Some(file) = &file {
                    let _ = e.print();
                    eprintln!(
                        "note: the config file {} may give some of these: its keys are the \
                         flags' names in snake case (data_dir for --data-dir)",
                        file.path.display()
                    );
                    std::process::exit(2);
                }
                e.exit()
            });
            serve::main(args, store, file)
        }
        Command::Config(args) => match args.command {
            ConfigCommand::Check { file } => {
                config_cmd::check(&file).map(|report| print!("{report}"))
            }
            ConfigCommand::Example => {
                print!("{}", config_cmd::example());
                Ok(())
            }
        },
        Command::Client(command) => commands::main(command),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("herenow: {}", one_line(&e));
            exit_code(&e)
        }
    }
}

/// 2 for a configuration the user must change, 1 for everything else.
fn exit_code(e: &anyhow::Error) -> ExitCode {
    let config_error = e.chain().any(|cause| {
        cause.is::<herenow_server::ConfigError>()
            || cause.is::<config_file::FileError>()
            || cause.is::<config_cmd::Invalid>()
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

/// The error and its causes on one line, "cannot listen on …: Address in
/// use". A cause whose text the line already holds is left out: many error
/// types print their source in their own message too, and "No such file or
/// directory" twice reads like two problems.
fn one_line(e: &anyhow::Error) -> String {
    let mut line = String::new();
    for cause in e.chain() {
        let text = cause.to_string();
        if line.contains(&text) {
            continue;
        }
        if !line.is_empty() {
            line.push_str(": ");
        }
        line.push_str(&text);
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug)]
    struct Wrapper(std::io::Error);

    impl std::fmt::Display for Wrapper {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "creating data directory /x: {}", self.0)
        }
    }

    impl std::error::Error for Wrapper {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.0)
        }
    }

    #[test]
    fn causes_join_on_one_line_without_repeats() {
        let io = std::io::Error::new(std::io::ErrorKind::NotFound, "no such file");
        let e = anyhow::Error::new(Wrapper(io)).context("starting the store");
        assert_eq!(
            one_line(&e),
            "starting the store: creating data directory /x: no such file"
        );
    }

    #[test]
    fn config_errors_exit_2_and_others_1() {
        let config = anyhow::Error::new(herenow_server::ConfigError::ApiKeyFormat);
        assert_eq!(exit_code(&config), ExitCode::from(2));
        let wrapped = anyhow::Error::new(herenow_server::ServerError::Config(
            herenow_server::ConfigError::ApiKeyFormat,
        ));
        assert_eq!(exit_code(&wrapped), ExitCode::from(2));
        assert_eq!(
            exit_code(&anyhow::anyhow!("connection refused")),
            ExitCode::FAILURE
        );
    }
}
