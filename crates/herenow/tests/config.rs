//! `herenow serve --config FILE` end to end: the real binary reads the
//! file, `${…}` from its environment, with flags and `HERENOW_*` over
//! the file; a bad file stops it with exit 2 naming the key and line;
//! `herenow config check` accepts the committed example.

use std::path::{Path, PathBuf};

mod support;
use support::{Server, herenow, stderr, temp_dir};

/// `text` written to `herenow.toml` in a fresh directory.
fn config_file(name: &str, text: &str) -> PathBuf {
    let path = temp_dir(name).join("herenow.toml");
    std::fs::write(&path, text).unwrap();
    path
}

/// `herenow seen lobby alice` against `server` with `key`; whether the
/// server took it.
fn writes_with(server: &Server, key: &str) -> bool {
    let out = server.cli(&["seen", "lobby", "alice", "--api-key", key]);
    assert!(
        out.status.success() || stderr(&out).contains("HTTP 401"),
        "{}",
        stderr(&out)
    );
    out.status.success()
}

#[test]
fn serve_takes_its_settings_from_the_file_under_flags_and_environment() {
    // The listen address is the flag's (`Server` passes --listen
    // 127.0.0.1:0): a flag wins over the file's port 1, which nobody may
    // bind. The key comes from a variable the file names.
    let path = config_file(
        "config-serve",
        "# herenow, as deployed\n\
         listen = \"127.0.0.1:1\"\n\
         api_keys = [\"${TEST_WRITE_KEY}:write\"]\n\
         drain = \"2s\"\n",
    );
    let path = path.to_str().unwrap();
    let mut server = Server::start_with_env(
        &["--config", path],
        &[("TEST_WRITE_KEY", "file-writer-key-1")],
    );
    assert!(writes_with(&server, "file-writer-key-1"));
    assert!(!writes_with(&server, "some-other-key-1"));
    assert!(server.terminate().success());

    // HERENOW_API_KEYS wins over the file's key; HERENOW_CONFIG names
    // the file as --config does.
    let mut server = Server::start_with_env(
        &[],
        &[
            ("HERENOW_CONFIG", path),
            ("TEST_WRITE_KEY", "file-writer-key-1"),
            ("HERENOW_API_KEYS", "env-writer-key-1:write"),
        ],
    );
    assert!(writes_with(&server, "env-writer-key-1"));
    assert!(!writes_with(&server, "file-writer-key-1"));
    assert!(server.terminate().success());
}

#[test]
fn a_bad_file_stops_serve_with_exit_2_naming_key_and_line() {
    for (name, text, named) in [
        (
            "config-value",
            "listen = \"127.0.0.1:0\"\n\nmax_connections = \"many\"\n",
            ":3: `max_connections`",
        ),
        (
            "config-key",
            "listen = \"127.0.0.1:0\"\nmax_conections = 5\n",
            ":2: unknown key `max_conections`",
        ),
        (
            "config-unset",
            "api_keys = \"${TEST_UNSET_VARIABLE}:write\"\n",
            ":1: `api_keys` names ${TEST_UNSET_VARIABLE}",
        ),
    ] {
        let path = config_file(name, text);
        let out = herenow()
            .args(["serve", "--config"])
            .arg(&path)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{name}: {}", stderr(&out));
        assert!(stderr(&out).contains(named), "{name}: {}", stderr(&out));
        assert!(out.stdout.is_empty(), "{name}: it must not have started");
    }
    let out = herenow()
        .args(["serve", "--config", "/nonexistent/herenow.toml"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
}

#[test]
fn config_check_accepts_the_example_and_masks_secrets() {
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/herenow.example.toml");
    let out = herenow()
        .args(["config", "check"])
        .arg(&example)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let printed = herenow().args(["config", "example"]).output().unwrap();
    assert_eq!(
        String::from_utf8(printed.stdout).unwrap(),
        std::fs::read_to_string(&example).unwrap()
    );

    let path = config_file(
        "config-check",
        "listen = \"0.0.0.0:7700\"\napi_keys = [\"${TEST_WRITE_KEY}:write\"]\n",
    );
    let out = herenow()
        .args(["config", "check"])
        .arg(&path)
        .env("TEST_WRITE_KEY", "hunter2-hunter2")
        .env("HERENOW_DRAIN", "4s")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let report = String::from_utf8(out.stdout).unwrap();
    assert!(!report.contains("hunter2"), "{report}");
    assert!(
        report.contains("api_keys = [\"****:write\"]  # file, line 2"),
        "{report}"
    );
    assert!(
        report.contains("drain = \"4s\"  # environment HERENOW_DRAIN"),
        "{report}"
    );

    // Without a key an open address is refused, as `serve` refuses it.
    let out = herenow()
        .args(["config", "check"])
        .arg(config_file("config-open", "listen = \"0.0.0.0:7700\"\n"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
}
