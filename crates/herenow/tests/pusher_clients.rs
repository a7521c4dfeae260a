//! The Pusher protocol with the client libraries apps use (issue 38), each
//! against a real `herenow serve --pusher-app ID:KEY:SECRET` on a free
//! port, from the scripts of `tests/pusher` (helpers in `harness.js`):
//!
//! - `echo.test.js`: laravel-echo 2 as a Laravel app configures it:
//!   docs/PUSHER.md's `.env` and `resources/js/echo.js` blocks, run as written
//!   (the server is started with the `.env`'s app); `Echo.join` with
//!   `here` / `joining` / `leaving`, `whisper` / `listenForWhisper`,
//!   `Echo.private`, `Echo.channel(...).listen('.name')`, against an
//!   auth endpoint signing with the npm `pusher` library;
//! - `browser.test.js`: pusher-js in headless Chromium (Debian's, driven
//!   by playwright-core), its dist file served by the script, sees a
//!   member from Node join and leave;
//! - `python.test.js`: PyPI `pusher` (the Django side, `pusher_py.py` in
//!   a venv made here from `requirements.txt`): `trigger` reaches
//!   pusher-js, `authenticate` output is accepted for private and
//!   presence channels;
//! - `thousand.test.js`: a presence channel of 1,000 pusher-js members
//!   in one Node process;
//! - `reload.test.js`: three Laravel Echo pages in headless Chromium; one
//!   reloads and nobody is told anything (pages, Pusher-format and
//!   herenow webhooks), then closes and leaves once after the grace
//!   (issue 43). It starts its own server, as its webhook endpoint.
//!
//! The tests take turns (one lock): each is light but for the crowd, and
//! the machine may have two cores. npm packages and the venv are
//! installed when missing (`support::pusher_node`); a missing tool fails
//! the test with what to install.

mod support;

use support::Server;
use support::pusher_node::{node_test, python};

/// The app of the tests that do not read the guide's.
const APP: &str = "4242:herenow-key:herenow-secret-123";

/// One test at a time, whether the tests share a process (cargo test)
/// or not (cargo-nextest).
fn turn() -> std::fs::File {
    support::pusher_node::machine_lock("pusher-clients-turn")
}

/// Debian's Chromium (`HERENOW_CHROMIUM` overrides /usr/bin/chromium);
/// the test fails saying what to install when it is missing.
fn chromium() -> String {
    let chromium =
        std::env::var("HERENOW_CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".to_owned());
    assert!(
        std::path::Path::new(&chromium).exists(),
        "{chromium} not found: install chromium (apt-get install chromium)"
    );
    chromium
}

/// The Laravel `.env` block of docs/PUSHER.md, the guide for apps on
/// pusher-js or Laravel Echo.
fn guide_dotenv() -> String {
    let guide =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/PUSHER.md"))
            .expect("read docs/PUSHER.md");
    guide
        .split("```dotenv\n")
        .nth(1)
        .and_then(|b| b.split("```").next())
        .expect("docs/PUSHER.md has a ```dotenv block")
        .to_owned()
}

/// The value of `KEY=` in a `.env`.
fn dotenv_value<'a>(dotenv: &'a str, key: &str) -> &'a str {
    dotenv
        .lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix('='))
        .unwrap_or_else(|| panic!("docs/PUSHER.md's .env has no {key}"))
        .trim_matches('"')
}

#[test]
fn laravel_echo_configured_as_a_laravel_app_is() {
    let _turn = turn();
    let dotenv = guide_dotenv();
    let app = format!(
        "{}:{}:{}",
        dotenv_value(&dotenv, "PUSHER_APP_ID"),
        dotenv_value(&dotenv, "PUSHER_APP_KEY"),
        dotenv_value(&dotenv, "PUSHER_APP_SECRET"),
    );
    assert_eq!(dotenv_value(&dotenv, "BROADCAST_CONNECTION"), "pusher");
    assert_eq!(dotenv_value(&dotenv, "PUSHER_SCHEME"), "http");
    let server = Server::start(&["--pusher-app", &app]);
    let addr = server.addr();
    assert_eq!(
        dotenv_value(&dotenv, "PUSHER_HOST"),
        addr.ip().to_string(),
        "the guide's host is the loopback a default server listens on"
    );
    // The same .env, on this test's port.
    let port_line = format!("PUSHER_PORT={}", dotenv_value(&dotenv, "PUSHER_PORT"));
    let here = dotenv.replace(&port_line, &format!("PUSHER_PORT={}", addr.port()));
    assert_ne!(here, dotenv, "the guide's .env has a PUSHER_PORT line");
    node_test("echo.test.js", &server, &[("LARAVEL_ENV", &here)]);
}

#[test]
fn pusher_js_in_headless_chromium() {
    let _turn = turn();
    let chromium = chromium();
    let server = Server::start(&["--pusher-app", APP]);
    node_test(
        "browser.test.js",
        &server,
        &[("PUSHER_APP", APP), ("HERENOW_CHROMIUM", &chromium)],
    );
}

#[test]
fn a_laravel_echo_page_reload_is_no_leave() {
    let _turn = turn();
    let chromium = chromium();
    let dir = support::pusher_node::node_dir();
    let out = std::process::Command::new("node")
        .args(["--test", "--test-reporter=spec", "reload.test.js"])
        .current_dir(&dir)
        .env("HERENOW_BIN", support::BIN)
        .env("PUSHER_APP", APP)
        .env("HERENOW_CHROMIUM", &chromium)
        .output()
        .expect("run node --test");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stdout.contains("ℹ pass 1"),
        "reload.test.js failed:\n{stdout}\n{stderr}"
    );
    println!("{stdout}");
}

#[test]
fn the_pusher_library_from_pypi() {
    let _turn = turn();
    let python = python();
    let server = Server::start(&["--pusher-app", APP]);
    node_test(
        "python.test.js",
        &server,
        &[
            ("PUSHER_APP", APP),
            ("PYTHON", python.to_str().expect("a UTF-8 venv path")),
        ],
    );
}

#[test]
fn a_presence_channel_of_a_thousand_pusher_js_members() {
    let _turn = turn();
    let server = Server::start(&["--pusher-app", APP]);
    let out = node_test(
        "thousand.test.js",
        &server,
        &[("PUSHER_APP", APP), ("MEMBERS", "1000")],
    );
    assert!(out.contains("1000 members in"), "{out}");
    assert!(
        !server.log().contains("panicked"),
        "server log:\n{}",
        server.log()
    );
}
