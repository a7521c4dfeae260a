//! `herenow serve` on `SIGHUP`: its settings read again and applied
//! without a restart.
//!
//! The command line is parsed again as at start ([`parse_args`]), so the
//! config file is read anew under the same flags and environment
//! variables, which still win over it. Everything `herenow config check`
//! checks is checked, then `AppState::reload` applies what can change live
//! and tells what takes a restart; a file that does not check changes
//! nothing. Without a config file a `SIGHUP` is logged and changes nothing
//! (but no longer ends the process, as a signal nobody handles would).

use std::ffi::OsString;
use std::net::SocketAddr;

use clap::CommandFactory as _;
use clap::parser::ValueSource;
use herenow_server::{AppState, Config, ConfigError, StoreSpec};
use tokio::sync::mpsc;

use crate::cli::{Cli, Command, LogFormat, ServeArgs};
use crate::config_file::{ConfigFile, ParseError, apply, clap_words, parse_args};

/// Makes the server's configuration of `serve`'s arguments and their
/// store (`serve::config`, given as a parameter: `serve` starts reloads).
pub type ConfigOf = fn(&ServeArgs, StoreSpec) -> Result<Config, ConfigError>;

/// What a reload compares the new settings with: what the process runs.
pub struct Running {
    /// The process's arguments, parsed again on each reload.
    argv: Vec<OsString>,
    config_of: ConfigOf,
    /// The file as last read, if `serve` has one.
    file: Option<ConfigFile>,
    listen: SocketAddr,
    log_format: LogFormat,
}

impl Running {
    /// What `herenow serve` started with: `args` read from this process's
    /// arguments with `file` (as [`parse_args`] read them), made a
    /// configuration by `config_of`.
    pub fn new(args: &ServeArgs, file: Option<ConfigFile>, config_of: ConfigOf) -> Self {
        Self {
            argv: std::env::args_os().collect(),
            config_of,
            file,
            listen: args.listen,
            log_format: args.log_format,
        }
    }
}

/// Reloads on every message of `hangups` (one per `SIGHUP`), one after
/// the other, until the channel closes.
pub async fn watch(
    mut hangups: mpsc::UnboundedReceiver<()>,
    mut running: Running,
    state: AppState,
) {
    while hangups.recv().await.is_some() {
        // Signals that came meanwhile are served by this one reload.
        while hangups.try_recv().is_ok() {}
        reload(&mut running, &state).await;
    }
}

/// One reload, logged.
async fn reload(running: &mut Running, state: &AppState) {
    let Some(path) = running.file.as_ref().map(|f| f.path.clone()) else {
        tracing::info!(
            "SIGHUP: nothing to reload without a config file (--config): flags and \
             environment variables are read at start only"
        );
        return;
    };
    let (argv, config_of) = (running.argv.clone(), running.config_of);
    let read = tokio::task::spawn_blocking(move || read(&argv, config_of)).await;
    let (args, file, config) = match read {
        Ok(Ok(read)) => read,
        Ok(Err(why)) => return refused(&path, &why),
        Err(e) => return refused(&path, &format!("reading it failed: {e}")),
    };
    let mut restart: Vec<String> = Vec::new();
    if args.listen != running.listen {
        restart.push("listen".into());
    }
    if args.log_format != running.log_format {
        restart.push("log_format".into());
    }
    let report = match state.reload(config).await {
        Ok(report) => report,
        Err(e) => return refused(&path, &crate::one_line(&anyhow::Error::new(e))),
    };
    restart.extend(report.needs_restart.iter().cloned());
    // What was left is told first, what changed last: the last line of a
    // reload is its outcome.
    if !restart.is_empty() {
        tracing::warn!(
            "{}: needs a restart to change, left as it runs: {}",
            path.display(),
            restart.join("; ")
        );
    }
    let hidden = overridden(&running.argv, running.file.as_ref(), &file);
    if !hidden.is_empty() {
        tracing::warn!(
            "{}: {} changed in the file, but given on the command line or in the \
             environment, which win over it",
            path.display(),
            hidden.join(", ")
        );
    }
    tracing::info!("reloaded {}: {report}", path.display());
    running.file = Some(file);
}

/// Logs a reload refused.
fn refused(path: &std::path::Path, why: &str) {
    tracing::error!(
        "reload of {} refused, nothing changed: {why}",
        path.display()
    );
}

/// The settings `argv` gives now, checked as `herenow config check`
/// checks them: the arguments, the file read, and the configuration.
fn read(argv: &[OsString], config_of: ConfigOf) -> Result<(ServeArgs, ConfigFile, Config), String> {
    let (cli, file) = match parse_args(argv) {
        Ok(parsed) => parsed,
        Err(ParseError::File(e)) => return Err(e.to_string()),
        Err(ParseError::Usage(e)) => return Err(clap_words(&e)),
    };
    let (Command::Serve(args), Some(file)) = (cli.command, file) else {
        return Err("the command line no longer names a config file".into());
    };
    let store = crate::store_flags::store_spec(&args).map_err(|e| clap_words(&e))?;
    let config = config_of(&args, store).map_err(|e| e.to_string())?;
    config.check(args.listen).map_err(|e| e.to_string())?;
    Ok((args, file, config))
}

/// The keys whose value `new` changes from `old` (the file as read
/// before) although a flag or an environment variable gives the setting,
/// so the change has no effect.
fn overridden(argv: &[OsString], old: Option<&ConfigFile>, new: &ConfigFile) -> Vec<String> {
    let matches = Cli::command()
        .mut_subcommand("serve", |serve| apply(serve, new))
        .try_get_matches_from(argv);
    let Some(serve) = matches
        .as_ref()
        .ok()
        .and_then(|m| m.subcommand_matches("serve"))
    else {
        return Vec::new();
    };
    new.settings
        .iter()
        .filter(|s| old.and_then(|old| old.get(&s.key)).map(|o| &o.values) != Some(&s.values))
        .filter(|s| {
            !matches!(
                serve.value_source(&s.key),
                Some(ValueSource::DefaultValue) | None
            )
        })
        .map(|s| s.key.clone())
        .collect()
}

/// `SIGHUP`s, as a stream the signal thread reads.
pub struct Hangups {
    #[cfg(unix)]
    signal: tokio::signal::unix::Signal,
}

impl Hangups {
    /// Handles `SIGHUP` from now on (within a runtime).
    pub fn new() -> anyhow::Result<Self> {
        #[cfg(unix)]
        {
            use anyhow::Context as _;
            use tokio::signal::unix::{SignalKind, signal};
            let signal = signal(SignalKind::hangup()).context("cannot handle SIGHUP")?;
            Ok(Self { signal })
        }
        #[cfg(not(unix))]
        Ok(Self {})
    }

    /// The next `SIGHUP` (never, where there are none).
    pub async fn next(&mut self) {
        #[cfg(unix)]
        if self.signal.recv().await.is_some() {
            return;
        }
        std::future::pending::<()>().await;
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;
    use crate::config_file::Setting;

    fn file(settings: &[(&str, &str)]) -> ConfigFile {
        ConfigFile {
            path: PathBuf::from("herenow.toml"),
            settings: settings
                .iter()
                .enumerate()
                .map(|(i, (key, value))| Setting {
                    key: (*key).to_owned(),
                    values: vec![(*value).to_owned()],
                    line: i + 1,
                })
                .collect(),
        }
    }

    #[test]
    fn a_changed_setting_a_flag_gives_is_told() {
        let argv: Vec<OsString> = ["herenow", "serve", "--away-after", "3m"]
            .iter()
            .map(OsString::from)
            .collect();
        let old = file(&[("away_after", "5m"), ("window", "10m")]);
        let new = file(&[("away_after", "2m"), ("window", "20m")]);
        // `window` changes and takes effect; `away_after` is the flag's.
        assert_eq!(overridden(&argv, Some(&old), &new), ["away_after"]);
        // Unchanged in the file: nothing to tell.
        assert!(overridden(&argv, Some(&new), &new).is_empty());
    }
}
