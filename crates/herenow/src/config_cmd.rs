//! `herenow config check FILE` and `herenow config example`: both read
//! the table of settings [`crate::config_file`] reads files with (the
//! arguments of `serve`), so the example lists every setting there is
//! and the check prints every setting there is.

use std::any::TypeId;
use std::fmt::Write as _;
use std::path::Path;

use anyhow::Result;
use clap::parser::ValueSource;
use clap::{ArgAction, FromArgMatches as _};

use crate::cli::ServeArgs;
use crate::config_file::{ConfigFile, apply, is_setting, load, serve_command};

/// Settings that do not work together, or an environment variable with a
/// bad value: what `config check` finds beyond the file itself.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct Invalid(String);

impl Invalid {
    /// clap's complaint, its first line without clap's framing.
    fn from_clap(e: &clap::Error) -> Invalid {
        Invalid(crate::config_file::clap_words(e))
    }
}

/// `herenow config check FILE`: the file read as `serve --config FILE`
/// would read it, with this process's environment, checked as `serve`
/// checks its settings before serving; the settings it gives, as a TOML
/// file with each value's source and every secret masked.
pub fn check(path: &Path) -> Result<String> {
    let file = load(path, &|name| std::env::var(name).ok())?;
    let matches = apply(serve_command(), &file)
        .no_binary_name(true)
        .try_get_matches_from(Vec::<String>::new())
        .map_err(|e| Invalid::from_clap(&e))?;
    let args = ServeArgs::from_arg_matches(&matches).map_err(|e| Invalid::from_clap(&e))?;
    let store = crate::store_flags::store_spec(&args).map_err(|e| Invalid::from_clap(&e))?;
    let config = crate::serve::config(&args, store)?;
    config.check(args.listen)?;
    Ok(report(&file, &matches))
}

/// The settings `matches` holds, one line each, as TOML.
fn report(file: &ConfigFile, matches: &clap::ArgMatches) -> String {
    let mut out = format!(
        "# {}: valid. The settings `herenow serve --config` runs with here\n\
         # (flags > environment > file > defaults), secrets masked:\n",
        file.path.display()
    );
    for arg in serve_command().get_arguments().filter(|a| is_setting(a)) {
        let id = arg.get_id().as_str();
        let source = match matches.value_source(id) {
            Some(ValueSource::EnvVariable) => format!(
                "environment {}",
                arg.get_env().unwrap_or_default().to_string_lossy()
            ),
            Some(ValueSource::DefaultValue) => match file.get(id) {
                Some(setting) => format!("file, line {}", setting.line),
                None => "default".to_owned(),
            },
            Some(_) => "command line".to_owned(),
            None => {
                let _ = writeln!(out, "# {id}: not set");
                continue;
            }
        };
        let raw: Vec<String> = matches
            .get_raw(id)
            .into_iter()
            .flatten()
            .map(|v| mask(arg, &v.to_string_lossy()))
            .collect();
        let _ = writeln!(out, "{id} = {}  # {source}", toml_value(arg, &raw));
    }
    out
}

/// A setting's value as the file would hold it: a list for the
/// repeatable ones, a bare boolean or number where the flag takes one.
fn toml_value(arg: &clap::Arg, values: &[String]) -> String {
    let one = |v: &str| {
        if matches!(arg.get_action(), ArgAction::SetTrue) || takes_number(arg) {
            v.to_owned()
        } else {
            toml_string(v)
        }
    };
    if matches!(arg.get_action(), ArgAction::Append) {
        let items: Vec<String> = values.iter().map(|v| one(v)).collect();
        format!("[{}]", items.join(", "))
    } else {
        one(values.first().map_or("", String::as_str))
    }
}

/// Whether the flag's parser makes a number.
fn takes_number(arg: &clap::Arg) -> bool {
    let made = arg.get_value_parser().type_id();
    [
        TypeId::of::<u16>(),
        TypeId::of::<u32>(),
        TypeId::of::<u64>(),
        TypeId::of::<usize>(),
    ]
    .iter()
    .any(|t| made == *t)
}

/// `s` as a TOML basic string.
fn toml_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if c.is_control() => {
                let _ = write!(out, "\\u{:04X}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

const MASK: &str = "****";

/// `value` of `arg` fit to print: API keys show their scope, Pusher apps
/// their id and key, webhook endpoints all but `secret=`, URLs all but
/// their password; any other secret nothing.
fn mask(arg: &clap::Arg, value: &str) -> String {
    match arg.get_id().as_str() {
        "api_keys" => match value.rsplit_once(':') {
            Some((_, scope)) => format!("{MASK}:{scope}"),
            None => MASK.to_owned(),
        },
        "pusher_apps" => match value.splitn(3, ':').collect::<Vec<_>>()[..] {
            [id, key, _] => format!("{id}:{key}:{MASK}"),
            _ => MASK.to_owned(),
        },
        "webhooks" => value
            .split(',')
            .map(|part| match part.split_once('=') {
                Some(("secret", _)) => format!("secret={MASK}"),
                _ => mask_url_password(part),
            })
            .collect::<Vec<_>>()
            .join(","),
        "pusher_webhooks" | "store" => mask_url_password(value),
        _ if arg.is_hide_env_values_set() => MASK.to_owned(),
        _ => mask_url_password(value),
    }
}

/// `value` with the password of any `scheme://user:password@` (or the
/// whole `scheme://secret@`, Redis' password alone) masked.
fn mask_url_password(value: &str) -> String {
    let Some(start) = value.find("://").map(|i| i + 3) else {
        return value.to_owned();
    };
    let authority_end = value[start..]
        .find(['/', '?', '#'])
        .map_or(value.len(), |i| start + i);
    let Some(at) = value[start..authority_end].rfind('@').map(|i| start + i) else {
        return value.to_owned();
    };
    let userinfo = &value[start..at];
    let masked = match userinfo.split_once(':') {
        Some((user, _)) => format!("{user}:{MASK}"),
        None => MASK.to_owned(),
    };
    format!("{}{masked}{}", &value[..start], &value[at..])
}

/// `herenow config example`: a config file with every setting commented
/// out at its default, each with its flag's help, flag and environment
/// variable. `deploy/herenow.example.toml` holds the same text (tested).
pub fn example() -> String {
    let mut out = String::from(EXAMPLE_HEADER);
    for arg in serve_command().get_arguments().filter(|a| is_setting(a)) {
        out.push('\n');
        let help = arg
            .get_long_help()
            .or(arg.get_help())
            .map(ToString::to_string)
            .unwrap_or_default();
        for paragraph in help.split("\n\n") {
            // clap drops the full stop of a one-sentence help.
            let end = if paragraph.trim_end().ends_with(['.', ')', ':']) {
                ""
            } else {
                "."
            };
            for line in wrap(&format!("{}{end}", paragraph.trim_end()), 76) {
                let _ = writeln!(out, "# {line}");
            }
        }
        let env = arg.get_env().unwrap_or_default().to_string_lossy();
        let long = arg.get_long().unwrap_or_default();
        let _ = writeln!(out, "# Flag --{long}, environment {env}.");
        if arg.is_hide_env_values_set() {
            out.push_str("# A secret: better \"${VARIABLE}\" than the value itself.\n");
        }
        let id = arg.get_id().as_str();
        let mut defaults: Vec<String> = arg
            .get_default_values()
            .iter()
            .map(|v| v.to_string_lossy().into_owned())
            .collect();
        // A switch is off unless given (clap says so only once built).
        if defaults.is_empty() && matches!(arg.get_action(), ArgAction::SetTrue) {
            defaults.push("false".to_owned());
        }
        let value = if defaults.is_empty() {
            out.push_str("# Not set by default.\n");
            placeholder(arg)
        } else {
            toml_value(arg, &defaults)
        };
        let _ = writeln!(out, "# {id} = {value}");
    }
    out
}

/// An example value for a setting without a default: its value name.
fn placeholder(arg: &clap::Arg) -> String {
    let name = arg
        .get_value_names()
        .and_then(|names| names.first())
        .map_or_else(|| "VALUE".to_owned(), ToString::to_string);
    toml_value(arg, &[name])
}

/// `text`'s words in lines of at most `width` characters (a longer word
/// alone on its line).
fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines = Vec::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        if !line.is_empty() && line.chars().count() + 1 + word.chars().count() > width {
            lines.push(std::mem::take(&mut line));
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    if !line.is_empty() {
        lines.push(line);
    }
    lines
}

const EXAMPLE_HEADER: &str = "\
# herenow.toml: the settings of `herenow serve --config herenow.toml`.
#
# Every setting is below, commented out at its default. Each is also a flag
# of `herenow serve` and an environment variable: a flag wins over its
# variable, and the variable over this file. A string may name an
# environment variable, \"${NAME}\", replaced when the file is read (an unset
# one is an error; \"$${\" is a literal \"${\"): keep secrets in the
# environment, not here. Durations take a unit: \"1500ms\", \"90s\", \"10m\",
# \"1h\", \"30d\". A repeatable setting takes a list, or a string split as
# its environment variable is. An unknown key or a bad value is refused
# with its line.
#
# `herenow config check FILE` checks a file and prints what it sets.
# `herenow config example` prints this file (deploy/herenow.example.toml).
#
# A running server reads this file again on SIGHUP (`kill -HUP PID`) and
# applies what can change without a restart: api_keys, pusher_apps,
# pusher_app_limits, webhooks, webhook_secret, pusher_webhooks,
# pusher_webhook_client_events and the space defaults (online_after,
# away_after, window, retention, remember, grace). Its log tells what
# changed, and which other settings changed but take a restart; a file that
# does not check changes nothing.
";

#[cfg(test)]
mod tests;
