//! Pusher users with the real third-party libraries (issue 38):
//! `tests/pusher/users.test.js` runs pusher-js 8 (`signin`, `user.bind`,
//! the Watchlist) and the npm `pusher` server library (`authenticateUser`,
//! `sendToUser`, `terminateUserConnections`) against two real `herenow
//! serve --pusher-app` processes sharing one Redis, so every event, user
//! event and termination crosses servers.
//!
//! It needs Node.js and npm (the packages of `tests/pusher`, installed by
//! `npm ci` when missing) and `redis-server`.

mod support;

use std::process::Command;

use herenow_testkit::RedisServer;
use support::Server;

const APP: &str = "4242:herenow-key:herenow-secret-123";

#[test]
fn pusher_js_users_and_the_watchlist_on_two_servers() {
    let dir = support::pusher_node::node_dir();
    let redis = RedisServer::standalone();
    let store = redis.url();
    let mut a = Server::start(&["--pusher-app", APP, "--store", &store]);
    let mut b = Server::start(&["--pusher-app", APP, "--store", &store]);
    let out = Command::new("node")
        .args(["--test", "--test-reporter=spec", "users.test.js"])
        .current_dir(&dir)
        .env("HERENOW_URL_A", a.url())
        .env("HERENOW_URL_B", b.url())
        .env("PUSHER_APP", APP)
        .output()
        .expect("run node --test");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "users.test.js failed:\n{stdout}\n{stderr}\nserver a:\n{}\nserver b:\n{}",
        a.log(),
        b.log()
    );
    println!("{stdout}");
    assert!(a.terminate().success(), "{}", a.log());
    assert!(b.terminate().success(), "{}", b.log());
}
