//! The Node folder of the Pusher tests (`tests/pusher`): its npm packages
//! installed, its `node --test` scripts run and their counts checked, and
//! the Python venv for PyPI `pusher`. Shared by `pusher_js.rs` and
//! `pusher_clients.rs`.
//!
//! Installs happen only when something is missing (`npm ci` at the
//! versions of `package-lock.json`, `pip install -r requirements.txt`),
//! once per process; nothing is skipped when a tool is absent: the test
//! fails saying what to install.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use super::Server;

/// A lock shared by every test process of this machine (cargo-nextest
/// runs each test in its own process): an exclusive `flock` on a file in
/// the temporary directory, held until the returned file is dropped.
pub fn machine_lock(name: &str) -> File {
    let path = std::env::temp_dir().join(format!("herenow-tests-{name}.lock"));
    let file = File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .unwrap_or_else(|e| panic!("open {}: {e}", path.display()));
    file.lock()
        .unwrap_or_else(|e| panic!("lock {}: {e}", path.display()));
    file
}

/// Held while installing, so two tests never run `npm ci` or `pip` at
/// once, in one process or several.
fn install_lock() -> File {
    machine_lock("pusher-install")
}

/// `tests/pusher`.
pub fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/pusher")
}

/// The folder, with every package of its `package.json` installed at the
/// version it names (else `npm ci`).
pub fn node_dir() -> PathBuf {
    let dir = dir();
    assert!(
        Command::new("node").arg("--version").output().is_ok(),
        "node not found: install Node.js and npm (apt-get install nodejs npm)"
    );
    let _held = install_lock();
    if !installed(&dir) {
        let status = Command::new("npm")
            .args([
                "ci",
                "--no-audit",
                "--no-fund",
                "--loglevel=error",
                "--prefix",
            ])
            .arg(&dir)
            .status()
            .expect("run npm ci (is npm installed?)");
        assert!(status.success(), "npm ci in {} failed", dir.display());
        assert!(installed(&dir), "npm ci left packages missing");
    }
    dir
}

/// Whether each dependency of `package.json` is in `node_modules` at its
/// pinned version.
fn installed(dir: &Path) -> bool {
    let read = |p: PathBuf| -> Option<Value> {
        serde_json::from_str(&std::fs::read_to_string(p).ok()?).ok()
    };
    let Some(package) = read(dir.join("package.json")) else {
        panic!("no package.json in {}", dir.display());
    };
    let Some(deps) = package["dependencies"].as_object() else {
        return true;
    };
    deps.iter().all(|(name, version)| {
        read(dir.join("node_modules").join(name).join("package.json"))
            .is_some_and(|p| p["version"] == *version)
    })
}

/// The venv's Python with `requirements.txt` installed (made in
/// `tests/pusher/.venv`, git-ignored; reinstalled when the requirements
/// change).
pub fn python() -> PathBuf {
    let dir = dir();
    let venv = dir.join(".venv");
    let python = venv.join("bin/python");
    let _held = install_lock();
    if !python.exists() {
        let out = Command::new("python3")
            .args(["-m", "venv"])
            .arg(&venv)
            .output()
            .expect("run python3 (install python3 and python3-venv)");
        assert!(
            out.status.success(),
            "python3 -m venv failed (apt-get install python3-venv): {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let requirements = std::fs::read_to_string(dir.join("requirements.txt")).unwrap();
    let stamp = venv.join(".herenow-installed");
    if std::fs::read_to_string(&stamp).ok().as_deref() != Some(requirements.as_str()) {
        let out = Command::new(&python)
            .args([
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
                "-r",
            ])
            .arg(dir.join("requirements.txt"))
            .output()
            .expect("run pip");
        assert!(
            out.status.success(),
            "pip install -r requirements.txt failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        std::fs::write(&stamp, &requirements).unwrap();
    }
    python
}

/// Runs `node --test SCRIPT` in the folder with `env`, against `server`;
/// fails the test, with the output and the server's log, unless every
/// test in it ran and passed (none skipped, none left to do). Its
/// standard output.
pub fn node_test(script: &str, server: &Server, env: &[(&str, &str)]) -> String {
    let dir = node_dir();
    let out = Command::new("node")
        .args(["--test", "--test-reporter=spec", script])
        .current_dir(&dir)
        .env("HERENOW_URL", server.url())
        .envs(env.iter().copied())
        .output()
        .expect("run node --test");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let count = |what: &str| -> Option<u64> {
        stdout.lines().find_map(|l| {
            l.trim()
                .strip_prefix(&format!("ℹ {what} "))
                .and_then(|n| n.trim().parse().ok())
        })
    };
    let ok = out.status.success()
        && count("tests").is_some_and(|n| n > 0)
        && count("pass") == count("tests")
        && [
            count("fail"),
            count("skipped"),
            count("todo"),
            count("cancelled"),
        ]
        .iter()
        .all(|n| *n == Some(0));
    assert!(
        ok,
        "{script} failed or ran short:\n{stdout}\n{stderr}\nserver log:\n{}",
        server.log()
    );
    println!("{stdout}");
    stdout
}
