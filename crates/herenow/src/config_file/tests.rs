//! Reading config files: values, `${…}`, the errors and their lines, and
//! where the file stands among flags and defaults.

use std::collections::HashMap;
use std::time::Duration;

use super::*;
use crate::cli::Command;

/// An environment holding `vars` only.
fn env_of(vars: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
    let vars: HashMap<String, String> = vars
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    move |name| vars.get(name).cloned()
}

fn settings(text: &str) -> Vec<Setting> {
    parse(text, Path::new("herenow.toml"), &env_of(&[])).unwrap()
}

fn problem(text: &str, env: &[(&str, &str)]) -> FileError {
    parse(text, Path::new("herenow.toml"), &env_of(env)).unwrap_err()
}

fn setting(key: &str, values: &[&str], line: usize) -> Setting {
    Setting {
        key: key.to_owned(),
        values: values.iter().map(|v| (*v).to_owned()).collect(),
        line,
    }
}

#[test]
fn values_become_the_flags_values_with_their_lines() {
    let got = settings(
        "# a comment\n\
         listen = \"0.0.0.0:7700\"\n\
         max_connections = 500\n\
         \n\
         api_keys = [\"writer-key-1:write\", \"reader-key-1:read\"]\n\
         pusher_apps = \"1:k1:secret-one,2:k2:secret-two\"\n\
         demo = true\n\
         redis_shards = 0x10\n\
         webhook_outbox = 1_000\n",
    );
    assert_eq!(
        got,
        vec![
            setting("listen", &["0.0.0.0:7700"], 2),
            setting("max_connections", &["500"], 3),
            setting("api_keys", &["writer-key-1:write", "reader-key-1:read"], 5),
            // Split later by clap, as the environment variable is.
            setting("pusher_apps", &["1:k1:secret-one,2:k2:secret-two"], 6),
            setting("demo", &["true"], 7),
            setting("redis_shards", &["16"], 8),
            setting("webhook_outbox", &["1000"], 9),
        ]
    );
    assert!(settings("").is_empty());
}

#[test]
fn variables_are_replaced_and_an_unset_one_is_named() {
    let env = env_of(&[("KEY", "writer-key-1"), ("EMPTY", "")]);
    let got = parse(
        "api_keys = [\"${KEY}:write\"]\n\
         token_secret = \"a$${KEY}b$c${EMPTY}$\"\n",
        Path::new("herenow.toml"),
        &env,
    )
    .unwrap();
    assert_eq!(got[0].values, ["writer-key-1:write"]);
    assert_eq!(got[1].values, ["a${KEY}b$c$"]);

    match problem(
        "listen = \"127.0.0.1:1\"\ntoken_secret = \"${SECRET}\"\n",
        &[],
    ) {
        FileError::Unset { line, key, var, .. } => {
            assert_eq!(
                (line, key.as_str(), var.as_str()),
                (2, "token_secret", "SECRET")
            );
        }
        other => panic!("{other:?}"),
    }
    for bad in ["\"${}\"", "\"${1A}\"", "\"${OPEN\"", "\"${A-B}\""] {
        let err = problem(&format!("token_secret = {bad}"), &[("A", "x")]);
        assert!(
            matches!(err, FileError::BadReference { line: 1, .. }),
            "{bad}: {err:?}"
        );
    }
}

#[test]
fn unknown_keys_are_refused_with_their_line_and_a_guess() {
    let cases = [
        (
            "listen = \"127.0.0.1:1\"\nmax_conections = 5",
            2,
            "max_conections",
            None,
        ),
        ("\n\napi_key = \"k:write\"", 3, "api_key", Some("api_keys")),
        (
            "max-connections = 5",
            1,
            "max-connections",
            Some("max_connections"),
        ),
        ("webhook = \"https://a/h\"", 1, "webhook", Some("webhooks")),
        ("config = \"other.toml\"", 1, "config", None),
        ("help = true", 1, "help", None),
        ("[redis]\nlayout = \"herenow\"", 1, "redis", None),
    ];
    for (text, want_line, want_key, want_guess) in cases {
        match problem(text, &[]) {
            FileError::UnknownKey {
                line,
                key,
                suggestion,
                ..
            } => {
                assert_eq!(line, want_line, "{text}");
                assert_eq!(key, want_key, "{text}");
                assert_eq!(suggestion.as_deref(), want_guess, "{text}");
            }
            other => panic!("{text}: {other:?}"),
        }
    }
}

#[test]
fn values_of_the_wrong_type_are_refused_with_their_line() {
    for (text, key) in [
        ("listen = 1.5", "listen"),
        ("listen = true", "listen"),
        ("listen = [\"127.0.0.1:1\"]", "listen"),
        ("listen = { host = \"x\" }", "listen"),
        ("demo = \"yes\"", "demo"),
        ("api_keys = [[\"k:write\"]]", "api_keys"),
        ("api_keys = 1.0", "api_keys"),
        ("grace = 1979-05-27", "grace"),
    ] {
        let err = problem(&format!("\n{text}"), &[]);
        assert!(
            matches!(&err, FileError::Type { line: 2, key: k, .. } if k == key),
            "{text}: {err:?}"
        );
    }
}

#[test]
fn values_their_flag_refuses_are_refused_with_key_and_line() {
    for (text, key) in [
        ("drain = 10", "drain"),
        ("drain = \"11m\"", "drain"),
        ("listen = \"nowhere\"", "listen"),
        ("max_connections = 0", "max_connections"),
        ("max_connections = \"many\"", "max_connections"),
        ("space_stripes = 65", "space_stripes"),
        ("log_format = \"xml\"", "log_format"),
        ("redis_layout = \"sideways\"", "redis_layout"),
        (
            "api_keys = [\"writer-key-1:write\", \"no-scope-key\"]",
            "api_keys",
        ),
    ] {
        let err = problem(&format!("online_after = \"30s\"\n{text}"), &[]);
        assert!(
            matches!(&err, FileError::Value { line: 2, key: k, .. } if k == key),
            "{text}: {err:?}"
        );
        let message = err.to_string();
        assert!(message.starts_with("herenow.toml:2: `"), "{message}");
    }
    // A refused secret is not repeated.
    let err = problem("api_keys = \"hunter2-hunter2\"", &[]);
    assert!(!err.to_string().contains("hunter2"), "{err}");
}

#[test]
fn a_file_that_is_not_toml_is_refused_with_the_line() {
    for (text, want) in [
        ("listen = \"127.0.0.1:1\"\n\nlisten = \"127.0.0.1:2\"", 3),
        ("listen = \n", 1),
        ("max_connections = 5\ndemo = tru\n", 2),
        ("\"unclosed = 1", 1),
    ] {
        match problem(text, &[]) {
            FileError::Syntax { line, .. } => assert_eq!(line, want, "{text}"),
            other => panic!("{text}: {other:?}"),
        }
    }
}

#[test]
fn a_missing_file_is_a_read_error() {
    let err = load(Path::new("/nonexistent/herenow.toml"), &env_of(&[])).unwrap_err();
    assert!(matches!(err, FileError::Read { .. }), "{err:?}");
}

/// `herenow serve ARGS` with `text` as its config file's settings.
fn serve_with_file(text: &str, args: &[&str]) -> ServeArgs {
    let file = ConfigFile {
        path: "herenow.toml".into(),
        settings: settings(text),
    };
    let argv = ["herenow", "serve"].iter().chain(args);
    let matches = Cli::command()
        .mut_subcommand("serve", |serve| apply(serve, &file))
        .try_get_matches_from(argv)
        .unwrap();
    match Cli::from_arg_matches(&matches).unwrap().command {
        Command::Serve(args) => args,
        _ => panic!("not serve"),
    }
}

#[test]
fn flags_win_over_the_file_and_the_file_over_defaults() {
    let file = "drain = \"3s\"\ngrace = \"0\"\nmax_connections = 9\n\
                api_keys = [\"file-key-01:write\"]\ndemo = true\n\
                data_dir = \"/var/lib/herenow\"\n";
    let args = serve_with_file(file, &[]);
    assert_eq!(args.drain, Duration::from_secs(3));
    assert_eq!(args.grace, Duration::ZERO);
    assert_eq!(args.max_connections, 9);
    assert_eq!(args.api_keys.len(), 1);
    assert!(args.demo);
    assert_eq!(args.data_dir, Some("/var/lib/herenow".into()));
    // Untouched by the file: the defaults.
    assert_eq!(args.pong_wait, Duration::from_secs(10));
    assert_eq!(args.listen, "127.0.0.1:7700".parse().unwrap());

    let args = serve_with_file(
        file,
        &[
            "--drain",
            "1s",
            "--api-key",
            "flag-key-01:read",
            "--api-key",
            "flag-key-02:read",
        ],
    );
    assert_eq!(args.drain, Duration::from_secs(1));
    // A repeatable flag replaces the file's list, it does not add to it.
    assert_eq!(args.api_keys.len(), 2);
    assert_eq!(args.max_connections, 9);
}
