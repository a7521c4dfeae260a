//! `herenow serve --config FILE`: a TOML file holding any of `serve`'s
//! settings, under the flags' names and checked by the flags' parsers.
//!
//! The flags are the one table of settings: each argument of
//! [`ServeArgs`] is a key of the file (its clap id, the field's name:
//! `max_connections`, `api_keys`), a flag (`--max-connections`,
//! `--api-key`) and an environment variable (`HERENOW_MAX_CONNECTIONS`).
//! The file's values become the arguments' defaults ([`apply`]), so
//! clap's own order makes flags win over environment variables, those
//! over the file, and the file over the built-in defaults. Before that,
//! [`load`] checks every value with its flag's own parser, one key at a
//! time, so a bad value is told with its key and line, as is a key that
//! names no setting.
//!
//! Strings may name environment variables, `${NAME}`, replaced when the
//! file is read (`$${` is a literal `${`): secrets stay out of the file.
//! An unset variable is an error naming it.
//!
//! A reload reads it all again with [`parse_args`] on the process's
//! arguments: the file's path is [`ServeArgs::config`], and the answer a
//! fresh [`ServeArgs`] as at start.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use clap::{ArgAction, Args as _, CommandFactory as _, FromArgMatches as _};
use toml::de::{DeTable, DeValue};

use crate::cli::{Cli, ServeArgs};

/// One setting a file gives: the argument's id (the key), its values as
/// its flag takes them (`${…}` replaced), and the line it is on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Setting {
    /// The key: the argument's clap id, `max_connections`.
    pub key: String,
    /// The values, one for most settings, any number for the repeatable
    /// ones; `true` or `false` for switches.
    pub values: Vec<String>,
    /// The line of the key, counted from 1.
    pub line: usize,
}

/// A config file read and checked, its settings in the file's order.
#[derive(Clone, Debug)]
pub struct ConfigFile {
    /// Where it was read from, as given.
    pub path: PathBuf,
    /// What it sets.
    pub settings: Vec<Setting>,
}

impl ConfigFile {
    /// The setting the file gives for `key`, if any.
    pub fn get(&self, key: &str) -> Option<&Setting> {
        self.settings.iter().find(|s| s.key == key)
    }
}

/// What is wrong with a config file. Every variant names the file
/// (`path`), all but [`FileError::Read`] the line (`line`, from 1) and
/// most the setting (`key`); no variant holds a value of the file, which
/// may be a secret.
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    /// The file cannot be read.
    #[error("cannot read the config file {}: {source}", .path.display())]
    Read {
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The file is not TOML.
    #[error("{}:{line}: not valid TOML: {message}", .path.display())]
    Syntax {
        path: PathBuf,
        /// Where the parser stopped.
        line: usize,
        /// The parser's complaint.
        message: String,
    },
    /// A key that is no setting of `herenow serve`.
    #[error("{}:{line}: unknown key `{key}`{}", .path.display(),
            .suggestion.as_ref().map(|s| format!(" (did you mean `{s}`?)")).unwrap_or_default())]
    UnknownKey {
        path: PathBuf,
        line: usize,
        /// The key as written.
        key: String,
        /// The setting it probably means.
        suggestion: Option<String>,
    },
    /// A value of the wrong TOML type (a table, a float, a number for a
    /// switch).
    #[error("{}:{line}: `{key}` must be {expected}", .path.display())]
    Type {
        path: PathBuf,
        line: usize,
        key: String,
        /// What it takes.
        expected: &'static str,
    },
    /// A value its flag's parser refuses.
    #[error("{}:{line}: `{key}`: {reason}", .path.display())]
    Value {
        path: PathBuf,
        line: usize,
        key: String,
        /// The parser's reason (never the value of a secret).
        reason: String,
    },
    /// `${NAME}` of a variable that is not set.
    #[error("{}:{line}: `{key}` names ${{{var}}}, which is not set in the environment",
            .path.display())]
    Unset {
        path: PathBuf,
        line: usize,
        key: String,
        /// The variable's name.
        var: String,
    },
    /// A `${` that does not open a variable's name.
    #[error("{}:{line}: `{key}`: `${{` must be followed by a variable's name and `}}` \
             (`$${{` is a literal `${{`)", .path.display())]
    BadReference {
        path: PathBuf,
        line: usize,
        key: String,
    },
}

/// Why the command line cannot be run: a usage error (clap's own, told and
/// exited on by clap) or a config file in the way.
#[derive(Debug, thiserror::Error)]
pub enum ParseError {
    /// Flags, environment variables or `--help`/`--version`.
    #[error(transparent)]
    Usage(#[from] clap::Error),
    /// The file `--config` names.
    #[error(transparent)]
    File(#[from] FileError),
}

/// Parses the command line `argv` (the program's name first), with the
/// settings of the file `serve --config` (or `HERENOW_CONFIG`) names in
/// place under the flags and environment variables; the file as read, if
/// one was. `${…}` are looked up in the process's environment.
pub fn parse_args(argv: &[OsString]) -> Result<(Cli, Option<ConfigFile>), ParseError> {
    let first = Cli::command().try_get_matches_from(argv)?;
    let path = match first.subcommand() {
        Some(("serve", serve)) => serve.get_one::<PathBuf>("config").cloned(),
        _ => None,
    };
    let Some(path) = path else {
        return Ok((Cli::from_arg_matches(&first)?, None));
    };
    let file = load(&path, &|name| std::env::var(name).ok())?;
    let matches = Cli::command()
        .mut_subcommand("serve", |serve| apply(serve, &file))
        .try_get_matches_from(argv)?;
    Ok((Cli::from_arg_matches(&matches)?, Some(file)))
}

/// `herenow serve`'s arguments alone: the table of settings.
pub fn serve_command() -> clap::Command {
    ServeArgs::augment_args(clap::Command::new("serve"))
}

/// Whether `arg` is a setting a file may hold: every flag of `serve` but
/// `--config` (a file naming another would be a chain to follow).
pub fn is_setting(arg: &clap::Arg) -> bool {
    arg.get_long().is_some() && !matches!(arg.get_id().as_str(), "config" | "help" | "version")
}

/// `serve` with the file's settings as its arguments' defaults.
pub fn apply(serve: clap::Command, file: &ConfigFile) -> clap::Command {
    file.settings.iter().fold(serve, |serve, setting| {
        serve.mut_arg(&setting.key, |arg| {
            // Shown by `--help` as the default, a file's secret would be
            // printed: no file value is shown (a switch shows none anyway).
            let shows_default = !matches!(arg.get_action(), ArgAction::SetTrue);
            arg.default_values(setting.values.clone())
                .hide_default_value(shows_default)
        })
    })
}

/// Reads and checks the file at `path`; `env` answers `${NAME}`.
pub fn load(path: &Path, env: &dyn Fn(&str) -> Option<String>) -> Result<ConfigFile, FileError> {
    let text = std::fs::read_to_string(path).map_err(|source| FileError::Read {
        path: path.to_owned(),
        source,
    })?;
    let settings = parse(&text, path, env)?;
    Ok(ConfigFile {
        path: path.to_owned(),
        settings,
    })
}

/// The line (from 1) of byte `offset` of `text`.
fn line_of(text: &str, offset: usize) -> usize {
    text.as_bytes()[..offset.min(text.len())]
        .iter()
        .filter(|b| **b == b'\n')
        .count()
        + 1
}

/// The settings of the file at `path`, its `text`, each checked by its
/// flag's parser, in the file's order.
pub(crate) fn parse(
    text: &str,
    path: &Path,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Vec<Setting>, FileError> {
    let table = DeTable::parse(text).map_err(|e| FileError::Syntax {
        path: path.to_owned(),
        line: line_of(text, e.span().map_or(0, |s| s.start)),
        message: e.message().trim().to_owned(),
    })?;
    let serve = serve_command();
    // The parsers alone: no environment variable may stand in for a
    // value being checked.
    let mut checker = serve_command()
        .mut_args(|arg| arg.env(None))
        .no_binary_name(true);
    let mut settings = Vec::new();
    // In the file's order, so the first problem told is the first one in
    // the file.
    let mut entries: Vec<_> = table.get_ref().iter().collect();
    entries.sort_by_key(|(key, _)| key.span().start);
    for (key, value) in entries {
        let line = line_of(text, key.span().start);
        let key = key.get_ref().as_ref();
        let arg = serve
            .get_arguments()
            .find(|a| is_setting(a) && a.get_id() == key)
            .ok_or_else(|| FileError::UnknownKey {
                suggestion: suggestion(&serve, key),
                path: path.to_owned(),
                line,
                key: key.to_owned(),
            })?;
        let values = values_of(arg, value.get_ref())
            .map_err(|expected| FileError::Type {
                path: path.to_owned(),
                line,
                key: key.to_owned(),
                expected,
            })?
            .into_iter()
            .map(|v| substitute(&v, env))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| match e {
                Substitution::Unset(var) => FileError::Unset {
                    path: path.to_owned(),
                    line,
                    key: key.to_owned(),
                    var,
                },
                Substitution::BadReference => FileError::BadReference {
                    path: path.to_owned(),
                    line,
                    key: key.to_owned(),
                },
            })?;
        if !matches!(arg.get_action(), ArgAction::SetTrue) {
            check_values(&mut checker, arg, &values).map_err(|reason| FileError::Value {
                path: path.to_owned(),
                line,
                key: key.to_owned(),
                reason,
            })?;
        }
        settings.push(Setting {
            key: key.to_owned(),
            values,
            line,
        });
    }
    Ok(settings)
}

/// The setting a mistaken key likely means: the flag's name
/// (`api-key`, `api_key`, `webhook`) or the key in another case.
fn suggestion(serve: &clap::Command, key: &str) -> Option<String> {
    let wanted = key.to_ascii_lowercase().replace('-', "_");
    serve
        .get_arguments()
        .filter(|a| is_setting(a))
        .find(|a| {
            a.get_id() == wanted.as_str()
                || a.get_long().is_some_and(|l| l.replace('-', "_") == wanted)
        })
        .map(|a| a.get_id().to_string())
}

/// A TOML value as the flag's values: a string or an integer for a
/// setting of one value, a string or an array of them for a repeatable
/// one (a string is split as the environment variable is), a boolean for
/// a switch. What it must be, if not.
fn values_of(arg: &clap::Arg, value: &DeValue<'_>) -> Result<Vec<String>, &'static str> {
    match arg.get_action() {
        ArgAction::SetTrue => match value {
            DeValue::Boolean(b) => Ok(vec![b.to_string()]),
            _ => Err("true or false"),
        },
        ArgAction::Append => match value {
            DeValue::Array(items) => items
                .iter()
                .map(|item| scalar(item.get_ref()))
                .collect::<Option<Vec<_>>>()
                .ok_or("a string or an array of strings"),
            other => scalar(other)
                .map(|v| vec![v])
                .ok_or("a string or an array of strings"),
        },
        _ => scalar(value).map(|v| vec![v]).ok_or("a string or a number"),
    }
}

/// A string, or an integer in decimal.
fn scalar(value: &DeValue<'_>) -> Option<String> {
    match value {
        DeValue::String(s) => Some(s.to_string()),
        DeValue::Integer(i) => i128::from_str_radix(i.as_str(), i.radix())
            .ok()
            .map(|n| n.to_string()),
        _ => None,
    }
}

/// Runs `arg`'s parser on `values` as if given as flags; the reason for
/// a refusal, naming the value only where it is no secret.
fn check_values(
    checker: &mut clap::Command,
    arg: &clap::Arg,
    values: &[String],
) -> Result<(), String> {
    let long = arg.get_long().unwrap_or_default();
    let flags = values.iter().map(|v| format!("--{long}={v}"));
    match checker.try_get_matches_from_mut(flags) {
        Ok(_) => Ok(()),
        Err(e) => Err(reason(&e, arg.is_hide_env_values_set())),
    }
}

/// A clap error's reason without clap's framing (which names the flag,
/// not the key): the parser's own words, or the values it takes.
fn reason(e: &clap::Error, secret: bool) -> String {
    use clap::error::{ContextKind, ContextValue};
    if let Some(source) = std::error::Error::source(e) {
        return source.to_string();
    }
    if let Some(ContextValue::Strings(valid)) = e.get(ContextKind::ValidValue) {
        return format!("expected one of {}", valid.join(", "));
    }
    if secret {
        return "not a value it takes".to_owned();
    }
    clap_words(e)
}

/// clap's complaint, its first line without clap's framing.
pub(crate) fn clap_words(e: &clap::Error) -> String {
    let text = e.render().to_string();
    let first = text.lines().next().unwrap_or_default();
    first.trim_start_matches("error: ").to_owned()
}

/// Why a `${…}` could not be replaced.
#[derive(Debug, PartialEq, Eq)]
enum Substitution {
    /// The variable is not set.
    Unset(String),
    /// `${` without a name and `}`.
    BadReference,
}

/// `s` with every `${NAME}` replaced by `env(NAME)` and every `$${` by
/// `${`; any other `$` stays as it is.
fn substitute(s: &str, env: &dyn Fn(&str) -> Option<String>) -> Result<String, Substitution> {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        if let Some(literal) = after.strip_prefix("${") {
            out.push_str("${");
            rest = literal;
        } else if let Some(reference) = after.strip_prefix('{') {
            let end = reference.find('}').ok_or(Substitution::BadReference)?;
            let name = &reference[..end];
            let valid = name
                .chars()
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
            if !valid {
                return Err(Substitution::BadReference);
            }
            out.push_str(&env(name).ok_or_else(|| Substitution::Unset(name.to_owned()))?);
            rest = &reference[end + 1..];
        } else {
            out.push('$');
            rest = after;
        }
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests;
