//! `config example` against the committed example, `config check`'s
//! report and its masks.

use super::*;

/// The example committed beside the deployment files.
const COMMITTED: &str = include_str!("../../../../deploy/herenow.example.toml");

#[test]
fn the_committed_example_is_what_config_example_prints() {
    assert!(
        COMMITTED == example(),
        "deploy/herenow.example.toml is stale: run \
         `cargo run -p herenow -- config example > deploy/herenow.example.toml`"
    );
}

#[test]
fn the_example_names_every_setting_with_its_flag_and_variable() {
    let text = example();
    for arg in serve_command().get_arguments().filter(|a| is_setting(a)) {
        let id = arg.get_id().as_str();
        assert!(text.contains(&format!("\n# {id} = ")), "{id} missing");
        let env = arg.get_env().unwrap().to_string_lossy().into_owned();
        assert!(env.starts_with("HERENOW_"), "{id}: {env}");
        assert!(text.contains(&format!("environment {env}.")), "{id}: {env}");
    }
    assert!(text.contains("\n# drain = \"10s\"\n"));
    assert!(text.contains("\n# max_connections = 16000\n"));
    assert!(text.contains("\n# demo = false\n"));
    assert!(text.contains("\n# api_keys = [\"KEY:SCOPE\"]\n"));
    assert!(text.lines().all(|l| l.is_empty() || l.starts_with('#')));
}

fn arg(id: &str) -> clap::Arg {
    serve_command()
        .get_arguments()
        .find(|a| a.get_id() == id)
        .unwrap()
        .clone()
}

#[test]
fn secrets_are_masked() {
    let cases = [
        ("api_keys", "writer-key-1:write", "****:write"),
        ("api_keys", "no-scope", "****"),
        ("token_secret", "0123456789abcdef0123456789abcdef", "****"),
        (
            "webhook_secret",
            "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
            "****",
        ),
        ("pusher_apps", "1:app-key:app-secret", "1:app-key:****"),
        ("pusher_apps", "lonely", "****"),
        (
            "webhooks",
            "https://u:pw@a.example/h,events=join,secret=whsec_x,name=a",
            "https://u:****@a.example/h,events=join,secret=****,name=a",
        ),
        (
            "pusher_webhooks",
            "1=https://:pw@a.example/p",
            "1=https://:****@a.example/p",
        ),
        (
            "store",
            "redis://:hunter2@h:6379/2",
            "redis://:****@h:6379/2",
        ),
        (
            "store",
            "rediss://default:hunter2@h:6379",
            "rediss://default:****@h:6379",
        ),
        ("store", "redis://hunter2@h:6379", "redis://****@h:6379"),
        (
            "store",
            "redis+cluster://:pw@h1:1,h2:2",
            "redis+cluster://:****@h1:1,h2:2",
        ),
        ("store", "redis://h:6379/0", "redis://h:6379/0"),
        ("store", "memory", "memory"),
        ("listen", "0.0.0.0:7700", "0.0.0.0:7700"),
    ];
    for (id, value, want) in cases {
        assert_eq!(mask(&arg(id), value), want, "{id} {value}");
    }
}

#[test]
fn values_print_as_toml() {
    assert_eq!(toml_value(&arg("max_connections"), &["5".into()]), "5");
    assert_eq!(toml_value(&arg("demo"), &["true".into()]), "true");
    assert_eq!(toml_value(&arg("drain"), &["3s".into()]), "\"3s\"");
    assert_eq!(
        toml_value(&arg("api_keys"), &["a\"b".into(), "c\\d".into()]),
        "[\"a\\\"b\", \"c\\\\d\"]"
    );
    assert_eq!(toml_string("tab\there"), "\"tab\\u0009here\"");
}

/// A file under the system's temporary directory, unique to this test.
fn temp_file(name: &str, text: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("herenow-config-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("herenow.toml");
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn check_reports_each_value_its_source_and_no_secret() {
    let path = temp_file(
        "report",
        "listen = \"0.0.0.0:7700\"\n\
         api_keys = [\"hunter2-hunter2:write\"]\n\
         store = \"redis://:hunter3@redis.internal:6379\"\n\
         token_secret = \"hunter4-hunter4-hunter4-hunter4-x\"\n",
    );
    let report = check(&path).unwrap();
    assert!(!report.contains("hunter"), "{report}");
    assert!(
        report.contains("\nlisten = \"0.0.0.0:7700\"  # file, line 1\n"),
        "{report}"
    );
    assert!(
        report.contains("\napi_keys = [\"****:write\"]  # file, line 2\n"),
        "{report}"
    );
    assert!(report.contains("\nstore = \"redis://:****@redis.internal:6379\"  # file, line 3\n"));
    assert!(report.contains("\ntoken_secret = \"****\"  # file, line 4\n"));
    assert!(
        report.contains("\ndrain = \"10s\"  # default\n"),
        "{report}"
    );
    assert!(report.contains("\n# data_dir: not set\n"), "{report}");
}

#[test]
fn check_refuses_what_serve_would_refuse() {
    // Settings that do not go together.
    let path = temp_file(
        "conflict",
        "store = \"redis://127.0.0.1:6379\"\ndata_dir = \"/var/lib/herenow\"\n",
    );
    let err = check(&path).unwrap_err();
    assert!(err.is::<Invalid>(), "{err:?}");
    // An open address without a key.
    let path = temp_file("open", "listen = \"0.0.0.0:7700\"\n");
    let err = check(&path).unwrap_err();
    assert!(
        matches!(
            err.downcast_ref::<herenow_server::ConfigError>(),
            Some(herenow_server::ConfigError::OpenOnNetwork(_))
        ),
        "{err:?}"
    );
    // A bad value, with its line.
    let path = temp_file("value", "\n\nwindow = \"soon\"\n");
    let err = check(&path).unwrap_err();
    assert!(
        matches!(
            err.downcast_ref::<crate::config_file::FileError>(),
            Some(crate::config_file::FileError::Value { line: 3, .. })
        ),
        "{err:?}"
    );
}

#[test]
fn every_setting_takes_its_own_default_from_a_file() {
    // The example's settings, every one uncommented that has a default:
    // each key is known and its default passes its own parser.
    let example = example();
    let mut uncommented = String::new();
    let mut unset = false;
    for line in example.lines() {
        if line == "# Not set by default." {
            unset = true;
            continue;
        }
        let Some(setting) = line.strip_prefix("# ") else {
            continue;
        };
        let is_setting = setting
            .split_once(" = ")
            .is_some_and(|(key, _)| key.chars().all(|c| c.is_ascii_lowercase() || c == '_'));
        if is_setting && !std::mem::take(&mut unset) {
            uncommented.push_str(setting);
            uncommented.push('\n');
        }
    }
    let got = crate::config_file::parse(
        &uncommented,
        std::path::Path::new("herenow.example.toml"),
        &|_| None,
    )
    .unwrap();
    let serve = serve_command();
    let with_defaults = serve
        .get_arguments()
        .filter(|a| is_setting(a))
        .filter(|a| {
            !a.get_default_values().is_empty() || matches!(a.get_action(), ArgAction::SetTrue)
        })
        .count();
    assert!(
        got.len() >= with_defaults,
        "{} of {with_defaults}",
        got.len()
    );
    // And clap takes them all as defaults.
    let file = ConfigFile {
        path: "herenow.toml".into(),
        settings: got,
    };
    let matches = apply(serve_command(), &file)
        .no_binary_name(true)
        .try_get_matches_from(Vec::<String>::new())
        .unwrap();
    let args = ServeArgs::from_arg_matches(&matches).unwrap();
    assert_eq!(args.webhooks.webhook_queue, 10_000);
}
