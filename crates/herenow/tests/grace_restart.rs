//! The embedded store after a crash or a restart (issue 43): `herenow
//! serve --data-dir D` holds two members through WebSockets, is killed
//! with SIGKILL after a snapshot (or stopped with SIGTERM), and starts
//! again. The dead process's connections are gone
//! with it, so its members are present only for the grace: Bob, whose page
//! reconnects within it, stays; Ann, who does not come back, is gone once
//! it ends (never past it), last seen as before the crash.

mod support;

use std::time::{Duration, Instant};

use serde_json::Value;
use support::{DEADLINE, Server, now_ms, temp_dir, ws_read, ws_with_token};

const GRACE: &str = "3s";
const GRACE_MS: u64 = 3_000;

fn online_ids(server: &Server) -> Vec<String> {
    let page = server.json(&["online", "room"]);
    let mut ids: Vec<String> = page["members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap().to_owned())
        .collect();
    ids.sort();
    ids
}

type Ws = tungstenite::WebSocket<tungstenite::stream::MaybeTlsStream<std::net::TcpStream>>;

/// A socket of `user` joined to `room`.
fn join(server: &Server, user: &str) -> Ws {
    let token = server.ok(&["token", user, "--space", "room"]);
    let (mut ws, welcome) = ws_with_token(server, token.trim_end());
    assert_eq!(welcome.expect("welcome")["type"], "welcome");
    ws.send(tungstenite::Message::text(
        r#"{"type":"join","space":"room","ref":1}"#,
    ))
    .unwrap();
    assert_eq!(ws_read(&mut ws).unwrap()["type"], "ok");
    ws
}

fn start(dir: &std::path::Path) -> Server {
    Server::start(&[
        "--data-dir",
        dir.to_str().unwrap(),
        "--snapshot-interval",
        "1s",
        "--grace",
        GRACE,
    ])
}

#[test]
fn a_restarted_store_holds_the_dead_process_members_for_the_grace_only() {
    restart_holds_members_for_the_grace(Stop::Kill);
}

/// A restart with SIGTERM (a rollout of the one server): its sockets are
/// told to reconnect, and the snapshot taken at shutdown holds their
/// members, in their grace after the start.
#[test]
fn a_store_restarted_by_sigterm_holds_its_members_for_the_grace_only() {
    restart_holds_members_for_the_grace(Stop::Term);
}

enum Stop {
    Kill,
    Term,
}

fn restart_holds_members_for_the_grace(stop: Stop) {
    let dir = temp_dir("grace-restart");
    let mut server = start(&dir);
    let joined_ms = now_ms();
    let _ann = join(&server, "ann");
    let _bob = join(&server, "bob");
    assert_eq!(online_ids(&server), ["ann", "bob"]);
    match stop {
        Stop::Kill => {
            // A snapshot taken after both joined.
            let joined = std::time::SystemTime::now();
            let snapshot = dir.join("herenow.snapshot");
            let started = Instant::now();
            while std::fs::metadata(&snapshot)
                .and_then(|m| m.modified())
                .map_or(true, |t| t <= joined)
            {
                assert!(started.elapsed() < DEADLINE, "no snapshot was taken");
                std::thread::sleep(Duration::from_millis(50));
            }
            server.kill();
        }
        Stop::Term => assert!(server.terminate().success(), "{}", server.log()),
    }

    // Read before the new process starts: the grace runs from its
    // restore, which a loaded machine may finish well before the
    // server answers.
    let back = now_ms();
    let mut server = start(&dir);
    // In their grace: both listed.
    assert_eq!(online_ids(&server), ["ann", "bob"]);
    // Bob's page reconnects (a new socket); Ann's does not.
    let _bob = join(&server, "bob");
    let deadline = Instant::now() + Duration::from_millis(GRACE_MS) + DEADLINE;
    while online_ids(&server) != ["bob"] {
        assert!(Instant::now() < deadline, "Ann never left");
        std::thread::sleep(Duration::from_millis(50));
    }
    let gone_after = now_ms() - back;
    println!(
        "a dead process's member was gone {gone_after} ms after the restart (grace {GRACE_MS} ms)"
    );
    assert!(
        gone_after + 200 >= GRACE_MS,
        "Ann left before her grace ended: {gone_after} ms"
    );
    let ann: Value = server.json(&["status", "room", "ann"]);
    let seen = ann["members"][0]["last_seen_ms"].as_u64().unwrap_or(0);
    assert!(
        seen >= joined_ms && seen <= back,
        "Ann is last seen as the crashed process last saw her: {ann}"
    );
    let bob: Value = server.json(&["status", "room", "bob"]);
    assert_eq!(bob["members"][0]["status"], "online", "{bob}");
    assert!(server.terminate().success(), "{}", server.log());
}
