//! Issue 45: per-app limits of a Pusher app, set in the config file
//! (`pusher_app_limits`), each exceeded by a test client and answered as
//! Pusher answers it; and a reload changing them for what comes next.

use std::path::{Path, PathBuf};
use std::time::Instant;

use serde_json::{Value, json};

mod support;
use support::{Server, temp_dir};

#[path = "../../herenow-server/tests/support/receiver.rs"]
mod receiver;

#[path = "support/pusher_ws.rs"]
mod pusher_ws;
use pusher_ws::{Socket, connect, data, trigger};

const ID: &str = "1";
const KEY: &str = "key-one";
const SECRET: &str = "secret-one-aaaa";

fn write_config(dir: &Path, limits: &str) -> PathBuf {
    let path = dir.join("herenow.toml");
    let text = format!(
        "pusher_apps = [\"{ID}:{KEY}:{SECRET}\"]\npusher_app_limits = [\"{ID}:{limits}\"]\n"
    );
    std::fs::write(&path, text).unwrap();
    path
}

fn served(server: &Server) -> Socket {
    connect(server.addr(), KEY).unwrap_or_else(|r| panic!("refused: {r:?}"))
}

/// The answer of `POST /apps/1/events` with `bytes` bytes of data.
fn event_of(server: &Server, bytes: usize) -> (u16, String) {
    let body = json!({"name": "e", "channel": "news", "data": "x".repeat(bytes)});
    trigger(server.addr(), ID, KEY, SECRET, &body)
}

fn client_event(channel: &str, data: &str) -> Value {
    json!({"event": "client-hi", "channel": channel, "data": data})
}

#[test]
fn issue_45_each_pusher_limit_is_answered_as_pusher_answers_it() {
    let dir = temp_dir("pusher-limits");
    let path = write_config(
        &dir,
        "max_connections=2,client_events_per_second=1,max_presence_members=1,\
         max_event_bytes=100,max_client_event_bytes=50",
    );
    let server = Server::start(&["--config", path.to_str().unwrap()]);

    // Connections: the third is over the app's quota.
    let mut ann = served(&server);
    let mut bob = served(&server);
    let over = connect(server.addr(), KEY)
        .err()
        .expect("a third socket is refused");
    assert_eq!(
        (over.code(), over.close),
        (Some(4004), Some(4004)),
        "{over:?}"
    );

    // Presence members: one per channel; a second user is refused, the
    // socket stays.
    let member = |user: &str| json!({"user_id": user});
    let ok = ann.subscribe("presence-room", SECRET, Some(&member("ann")));
    assert_eq!(
        ok["event"], "pusher_internal:subscription_succeeded",
        "{ok}"
    );
    let full = bob.subscribe("presence-room", SECRET, Some(&member("bob")));
    assert_eq!(full["event"], "pusher:subscription_error", "{full}");
    assert_eq!(data(&full)["type"], "LimitReached", "{full}");
    bob.ping();

    // Client events: one a second; the rest of a quick run is refused
    // with 4301, and the socket stays.
    let ok = ann.subscribe("private-chat", SECRET, None);
    assert_eq!(
        ok["event"], "pusher_internal:subscription_succeeded",
        "{ok}"
    );
    let sent = 20;
    let started = Instant::now();
    for _ in 0..sent {
        ann.send(client_event("private-chat", "{}"));
    }
    let answers = ann.ping();
    let elapsed = started.elapsed().as_secs();
    let refused = answers
        .iter()
        .filter(|m| m["event"] == "pusher:error" && data(m)["code"] == 4301)
        .count();
    assert_eq!(
        refused,
        answers.len(),
        "only refusals are answered: {answers:?}"
    );
    // At most one saved up, plus one a second of the run.
    let allowed = 1 + usize::try_from(elapsed).unwrap() + 1;
    assert!(
        refused >= sent - allowed && refused < sent,
        "{refused} of {sent} refused"
    );

    // A client event's data: 50 bytes at most; the socket stays.
    ann.send(client_event("private-chat", &"y".repeat(60)));
    let big = ann.recv().unwrap();
    assert_eq!(big["event"], "pusher:error", "{big}");
    assert_eq!(data(&big)["code"], Value::Null, "{big}");
    assert!(
        data(&big)["message"].as_str().unwrap().contains("50 bytes"),
        "{big}"
    );
    ann.ping();

    // An HTTP API event's data: 100 bytes at most, a 413 past it.
    let (status, why) = event_of(&server, 101);
    assert_eq!(status, 413, "{why}");
    assert!(why.contains("101 bytes, of 100 at most"), "{why}");
    assert_eq!(event_of(&server, 100).0, 200);
}

#[test]
fn issue_45_a_reload_changes_the_limits_for_what_comes_next() {
    let dir = temp_dir("pusher-limits-reload");
    let path = write_config(&dir, "max_connections=1,max_event_bytes=100");
    let server = Server::start(&["--config", path.to_str().unwrap()]);
    let mut first = served(&server);
    let refused = connect(server.addr(), KEY).err().expect("over the quota");
    assert_eq!(refused.close, Some(4004));
    assert_eq!(event_of(&server, 150).0, 413);

    write_config(&dir, "max_connections=2,max_event_bytes=200");
    let told = server.hang_up();
    assert!(told.contains("1: limits"), "{told}");
    let mut second = served(&server);
    assert_eq!(event_of(&server, 150).0, 200);

    // Lowered: nobody admitted is closed, newcomers are refused.
    write_config(&dir, "max_connections=1");
    let told = server.hang_up();
    assert!(told.contains("1: limits"), "{told}");
    first.ping();
    second.ping();
    let refused = connect(server.addr(), KEY)
        .err()
        .expect("over the lower quota");
    assert_eq!(refused.close, Some(4004));
    // Back to the default: 10 KiB of event data.
    assert_eq!(event_of(&server, 150).0, 200);
    assert_eq!(event_of(&server, 10 * 1024 + 1).0, 413);
}
