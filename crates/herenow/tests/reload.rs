//! Issue 45: `herenow serve --config FILE` reads its file again on
//! SIGHUP and applies what can change without a restart, with sockets
//! open: API keys rotated, space defaults changed, Pusher apps added,
//! removed and their secrets rotated, webhook endpoints moved; a file that
//! does not check changes nothing, and what takes a restart is told and
//! left as it runs.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

mod support;
use support::{DEADLINE, Server, healthz, temp_dir};

#[path = "../../herenow-server/tests/support/receiver.rs"]
mod receiver;
use receiver::{Receiver, said, verify};

#[path = "support/pusher_ws.rs"]
mod pusher_ws;
use pusher_ws::{Socket, connect, data};

/// Writes `text` as the config file in `dir`; its path.
fn write_config(dir: &Path, text: &str) -> PathBuf {
    let path = dir.join("herenow.toml");
    std::fs::write(&path, text).unwrap();
    path
}

fn serve(path: &Path) -> Server {
    Server::start(&["--config", path.to_str().unwrap()])
}

/// One HTTP request with `key` as the API key; the status and the body as
/// JSON (`null` when it is none).
fn http(
    addr: SocketAddr,
    method: &str,
    path: &str,
    key: &str,
    body: Option<&Value>,
) -> (u16, Value) {
    let body = body.map(Value::to_string).unwrap_or_default();
    let mut stream = TcpStream::connect(addr).unwrap();
    stream.set_read_timeout(Some(DEADLINE)).unwrap();
    let request = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {key}\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    let status = answer.split_whitespace().nth(1).unwrap().parse().unwrap();
    let body = answer.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    (status, serde_json::from_str(body).unwrap_or(Value::Null))
}

const OLD_KEY: &str = "old-key-0000001";
const NEW_KEY: &str = "new-key-0000002";

#[test]
fn issue_45_sighup_rotates_api_keys_and_space_defaults_and_a_bad_file_changes_nothing() {
    let dir = temp_dir("reload-keys");
    let path = write_config(
        &dir,
        &format!("api_keys = [\"{OLD_KEY}:write\"]\naway_after = \"5m\"\n"),
    );
    let server = serve(&path);
    let addr = server.addr();
    let config = |key| http(addr, "GET", "/v1/spaces/room/config", key, None);
    let beat = json!({"id": "ann"});
    assert_eq!(
        http(
            addr,
            "POST",
            "/v1/spaces/room/heartbeat",
            OLD_KEY,
            Some(&beat)
        )
        .0,
        200
    );
    let (status, before) = config(OLD_KEY);
    assert_eq!((status, before["away_ms"].as_u64()), (200, Some(300_000)));

    // New key, shorter away; a setting that takes a restart (drain), and
    // one the command line gives (listen), changed too.
    write_config(
        &dir,
        &format!(
            "api_keys = [\"{NEW_KEY}:write\"]\naway_after = \"2m\"\ndrain = \"3s\"\n\
             listen = \"127.0.0.1:9\"\n"
        ),
    );
    let told = server.hang_up();
    assert!(
        told.contains("reloaded") && told.contains("api_keys: 1 added, 1 removed"),
        "{told}"
    );
    assert!(told.contains("space defaults changed"), "{told}");
    assert!(
        told.contains("needs a restart") && told.contains("drain"),
        "{told}"
    );
    assert!(
        told.contains("listen changed in the file, but given on the command line"),
        "{told}"
    );
    assert_eq!(config(OLD_KEY).0, 401, "the old key is refused");
    let (status, after) = config(NEW_KEY);
    assert_eq!(status, 200, "the new key is accepted");
    // The space with a member in it follows the new default.
    assert_eq!(after["away_ms"].as_u64(), Some(120_000));
    assert_eq!(
        http(addr, "GET", "/v1/spaces/elsewhere/config", NEW_KEY, None).1["away_ms"],
        120_000
    );

    // A bad value on line 3: refused whole, the key and line told.
    write_config(
        &dir,
        &format!("api_keys = [\"{OLD_KEY}:write\"]\n# a comment\naway_after = \"soon\"\n"),
    );
    let told = server.hang_up();
    assert!(told.contains("refused, nothing changed"), "{told}");
    assert!(told.contains("herenow.toml:3: `away_after`"), "{told}");
    assert!(healthz(addr), "the server keeps serving");
    assert_eq!(config(OLD_KEY).0, 401);
    assert_eq!(config(NEW_KEY).1["away_ms"].as_u64(), Some(120_000));

    // An unknown key, likewise.
    write_config(
        &dir,
        &format!("api_keys = [\"{OLD_KEY}:write\"]\naway_afte = \"1m\"\n"),
    );
    let told = server.hang_up();
    assert!(
        told.contains("herenow.toml:2: unknown key `away_afte`"),
        "{told}"
    );
    assert_eq!(config(NEW_KEY).0, 200);
}

#[test]
fn issue_45_sighup_without_a_config_file_changes_nothing() {
    let server = Server::start(&[]);
    let told = server.hang_up();
    assert!(
        told.contains("nothing to reload without a config file"),
        "{told}"
    );
    // Once more: the signal is handled every time, never the end.
    server.hang_up();
    assert!(healthz(server.addr()));
}

const APP_ONE: (&str, &str) = ("1", "key-one");
const APP_TWO: (&str, &str) = ("2", "key-two");
const APP_THREE: (&str, &str) = ("3", "key-three");
const SECRET_ONE: &str = "secret-one-aaaa";
const SECRET_ONE_NEW: &str = "secret-one-bbbb";
const SECRET_TWO: &str = "secret-two-aaaa";
const SECRET_THREE: &str = "secret-three-aaaa";

fn apps(list: &[((&str, &str), &str)]) -> String {
    let apps: Vec<String> = list
        .iter()
        .map(|((id, key), secret)| format!("\"{id}:{key}:{secret}\""))
        .collect();
    format!("pusher_apps = [{}]\n", apps.join(", "))
}

fn served(addr: SocketAddr, app: (&str, &str)) -> Socket {
    connect(addr, app.1).unwrap_or_else(|r| panic!("app {} refused: {r:?}", app.0))
}

#[test]
fn issue_45_sighup_adds_removes_and_rotates_pusher_apps_with_sockets_open() {
    let dir = temp_dir("reload-pusher");
    let path = write_config(&dir, &apps(&[(APP_ONE, SECRET_ONE), (APP_TWO, SECRET_TWO)]));
    let server = serve(&path);
    let addr = server.addr();
    let mut one = served(addr, APP_ONE);
    let ok = one.subscribe("private-a", SECRET_ONE, None);
    assert_eq!(
        ok["event"], "pusher_internal:subscription_succeeded",
        "{ok}"
    );
    let mut two = served(addr, APP_TWO);
    two.ping();

    // App 1's secret rotated, app 2 removed, app 3 added.
    write_config(
        &dir,
        &apps(&[(APP_ONE, SECRET_ONE_NEW), (APP_THREE, SECRET_THREE)]),
    );
    let told = server.hang_up();
    assert!(told.contains("added 3"), "{told}");
    assert!(told.contains("removed 2 (1 sockets closed)"), "{told}");
    assert!(told.contains("1: secret"), "{told}");

    // The removed app's socket is closed: "application does not exist".
    assert_eq!(two.closed(), Some(4001));
    // App 1's socket stays, subscribed, and signs with the new secret.
    one.ping();
    let old = one.subscribe("private-b", SECRET_ONE, None);
    assert_eq!(old["event"], "pusher:subscription_error", "{old}");
    assert_eq!(data(&old)["status"], 401, "{old}");
    let new = one.subscribe("private-c", SECRET_ONE_NEW, None);
    assert_eq!(
        new["event"], "pusher_internal:subscription_succeeded",
        "{new}"
    );
    // The new app's key connects; the removed one's is refused.
    let mut three = served(addr, APP_THREE);
    let ok = three.subscribe("private-a", SECRET_THREE, None);
    assert_eq!(
        ok["event"], "pusher_internal:subscription_succeeded",
        "{ok}"
    );
    let refused = connect(addr, APP_TWO.1)
        .err()
        .expect("a removed app's key is refused");
    assert_eq!(
        (refused.code(), refused.close),
        (Some(4001), Some(4001)),
        "{refused:?}"
    );
    // Its HTTP API too, while the others' answer.
    let body = json!({"name": "e", "channel": "private-a", "data": "{}"});
    assert_eq!(
        pusher_ws::trigger(addr, APP_TWO.0, APP_TWO.1, SECRET_TWO, &body).0,
        404
    );
    let (status, answer) = pusher_ws::trigger(addr, APP_ONE.0, APP_ONE.1, SECRET_ONE_NEW, &body);
    assert_eq!(status, 200, "{answer}");
    let got = one.recv().unwrap();
    assert_eq!(
        (&got["event"], &got["channel"]),
        (&json!("e"), &json!("private-a"))
    );
}

const HOOK_SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue_45_sighup_moves_webhooks_to_a_new_endpoint() {
    let mut first = Receiver::start().await;
    let mut second = Receiver::start().await;
    let dir = temp_dir("reload-webhooks");
    let hooks = |url: &str| {
        format!("webhooks = [\"{url},events=join\"]\nwebhook_secret = \"{HOOK_SECRET}\"\n")
    };
    let path = write_config(&dir, &hooks(&first.url()));
    let server = serve(&path);
    server.ok(&["seen", "room", "ann"]);
    let got = first.next().await;
    assert!(verify(
        HOOK_SECRET,
        &got.id,
        &got.timestamp,
        &got.body,
        &got.signature
    ));
    assert_eq!(said(&got.events()), [("join".to_owned(), "ann".to_owned())]);

    write_config(&dir, &hooks(&second.url()));
    let told = server.hang_up();
    assert!(
        told.contains("webhook endpoints: 1 added, 1 removed, 1 now"),
        "{told}"
    );
    server.ok(&["seen", "room", "bob"]);
    let got = second.next().await;
    assert_eq!(said(&got.events()), [("join".to_owned(), "bob".to_owned())]);
    // Nothing more went to the first.
    assert!(first.try_next().is_none());
}
