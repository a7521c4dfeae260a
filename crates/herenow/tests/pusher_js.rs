//! The Pusher Channels protocol with the real third-party libraries
//! (issue 38): `tests/pusher/pusher.test.js` runs pusher-js 8 in Node and
//! the `pusher` server library from npm against a real `herenow serve
//! --pusher-app ID:KEY:SECRET` started on a free port, under Node's test
//! runner. Public, private, encrypted and presence channels, the HTTP API,
//! and each bad input answered as the protocol says.
//!
//! It needs Node.js and npm; the packages are installed with `npm ci` (the
//! versions pinned by `tests/pusher/package-lock.json`) when one is
//! missing (`support::pusher_node`). The other client libraries (laravel-echo,
//! pusher-js in Chromium, PyPI `pusher`) are in `pusher_clients.rs`.

mod support;

use std::process::Command;

use support::Server;
use support::pusher_node::node_dir;

const APP: &str = "4242:herenow-key:herenow-secret-123";
/// 32 bytes, base64: the server library's master key for encrypted
/// channels (the server never sees it).
const ENCRYPTION_KEY: &str = "bm90LWEtcmVhbC1rZXktanVzdC0zMi1ieXRlcyEhISE=";

#[test]
fn pusher_js_and_the_pusher_server_library() {
    let dir = node_dir();
    let mut server = Server::start(&["--pusher-app", APP]);
    let out = Command::new("node")
        .args(["--test", "--test-reporter=spec", "pusher.test.js"])
        .current_dir(&dir)
        .env("HERENOW_URL", server.url())
        .env("PUSHER_APP", APP)
        .env("PUSHER_ENCRYPTION_KEY", ENCRYPTION_KEY)
        .output()
        .expect("run node --test");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "pusher.test.js failed:\n{stdout}\n{stderr}\nserver log:\n{}",
        server.log()
    );
    println!("{stdout}");
    assert!(server.terminate().success(), "{}", server.log());
}

#[test]
fn pusher_apps_are_checked_at_start_naming_the_flag() {
    for bad in ["1:key", "1:k y:secret-123", "1:key:short"] {
        let out = support::herenow()
            .args(["serve", "--listen", "127.0.0.1:0", "--pusher-app", bad])
            .output()
            .expect("run herenow serve");
        assert!(!out.status.success(), "{bad} was accepted");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("--pusher-app"), "{bad}: {stderr}");
        assert!(!stderr.contains("short"), "the secret is echoed: {stderr}");
    }
    // Two apps with one key.
    let out = support::herenow()
        .args(["serve", "--listen", "127.0.0.1:0"])
        .env("HERENOW_PUSHER_APPS", "1:key:secret-123,2:key:secret-456")
        .output()
        .expect("run herenow serve");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--pusher-app"));
}

#[test]
fn without_apps_nothing_of_pusher_is_served() {
    let server = Server::start(&[]);
    let addr = server.addr();
    for path in ["/apps/1/channels", "/app/key?protocol=7"] {
        assert_eq!(status_of(addr, path), 404, "{path}");
    }
}

/// The status of a plain `GET path`.
fn status_of(addr: std::net::SocketAddr, path: &str) -> u16 {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(addr).expect("connect");
    let request = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).expect("send");
    let mut answer = String::new();
    let _ = stream.read_to_string(&mut answer);
    answer
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0)
}
