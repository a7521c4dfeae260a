//! End to end: the real `herenow` binary as a server on a free port, and the
//! same binary as its client, checked through their exit codes, their
//! output and the server's JSON.
//!
//! Every server is started with `--listen 127.0.0.1:0` and the port is read
//! from the line it prints, so tests never race for a port and never talk
//! to a server someone left running. The environment is scrubbed of
//! `HERENOW_*` and `RUST_LOG` so a developer's shell cannot change results.

use std::collections::BTreeSet;
use std::net::TcpListener;

use serde_json::Value;

mod support;
use support::{RefusedPort, Server, herenow, now_ms, stderr, temp_dir, ws_read, ws_with_token};

fn ids(members: &Value) -> Vec<String> {
    members["members"]
        .as_array()
        .unwrap_or_else(|| panic!("no members in {members}"))
        .iter()
        .map(|m| m["id"].as_str().unwrap().to_owned())
        .collect()
}

fn set(ids: &[&str]) -> BTreeSet<String> {
    ids.iter().map(|s| s.to_string()).collect()
}

#[test]
fn presence_round_trip_through_the_cli_and_a_restart() {
    let data = temp_dir("round-trip");
    let data_arg = data.to_str().unwrap();
    let mut server = Server::start(&["--data-dir", data_arg]);

    let out = server.ok(&["seen", "lobby", "alice", "bob", "--meta", r#"{"name":"A"}"#]);
    assert_eq!(out, "lobby: 2 seen, 2 joined\n");
    let beat = server.json(&["seen", "lobby", "g-1", "--guest"]);
    assert_eq!(beat["accepted"], 1);
    assert_eq!(beat["joined"], 1);

    // Who's online: users by default, guests apart, everyone with --all.
    let online = server.json(&["online", "lobby"]);
    assert_eq!(
        ids(&online).into_iter().collect::<BTreeSet<_>>(),
        set(&["alice", "bob"])
    );
    for m in online["members"].as_array().unwrap() {
        assert_eq!(m["kind"], "user");
        assert_eq!(m["status"], "online");
        assert!(m["last_seen_ms"].is_u64());
    }
    assert_eq!(ids(&server.json(&["online", "lobby", "--guests"])), ["g-1"]);
    assert_eq!(ids(&server.json(&["online", "lobby", "--all"])).len(), 3);

    // Paging by id: one member a page, the cursor leads to the next.
    let first = server.json(&["online", "lobby", "--order", "id", "--limit", "1"]);
    assert_eq!(ids(&first), ["alice"]);
    let cursor = first["next_cursor"]
        .as_str()
        .expect("a next cursor")
        .to_owned();
    let second = server.json(&[
        "online", "lobby", "--order", "id", "--limit", "1", "--cursor", &cursor,
    ]);
    assert_eq!(ids(&second), ["bob"]);
    let table = server.ok(&["online", "lobby", "--order", "id", "--limit", "1"]);
    assert!(table.starts_with("ID "), "{table}");
    assert!(
        table.contains("alice") && table.contains("● online"),
        "{table}"
    );
    assert!(table.contains(&format!("--cursor {cursor}")), "{table}");

    // Status, in the order asked, with a never-seen id.
    let status = server.json(&["status", "lobby", "alice", "nobody"]);
    assert_eq!(ids(&status), ["alice", "nobody"]);
    assert_eq!(status["members"][0]["status"], "online");
    assert_eq!(status["members"][0]["meta"]["name"], "A");
    assert_eq!(status["members"][1]["status"], "offline");
    assert!(status["members"][1]["last_seen_ms"].is_null());
    let table = server.ok(&["status", "lobby", "alice", "nobody"]);
    let lines: Vec<&str> = table.lines().collect();
    assert_eq!(lines.len(), 3, "{table}");
    assert!(
        lines[1].starts_with("alice") && lines[1].contains("● online"),
        "{table}"
    );
    assert!(
        lines[2].starts_with("nobody") && lines[2].contains("○ offline"),
        "{table}"
    );
    assert!(lines[2].contains("never"), "{table}");

    let count = server.json(&["count", "lobby"]);
    assert_eq!(
        (count["users"].as_u64(), count["guests"].as_u64()),
        (Some(2), Some(1))
    );
    assert_eq!(count["total"], 3);
    assert_eq!(
        server.ok(&["count", "lobby", "--window", "5m"]),
        "lobby: 2 users, 1 guest, 3 in all, seen within 5m\n"
    );

    // Friends: set, add, remove, list, and which of them are online.
    assert_eq!(
        server.ok(&["friends", "set", "alice", "bob", "carol"]),
        "alice has 2 friends\n"
    );
    assert_eq!(
        server.json(&["friends", "add", "alice", "dave"])["friends"],
        3
    );
    assert_eq!(
        server.json(&["friends", "remove", "alice", "dave"])["friends"],
        2
    );
    let list = server.json(&["friends", "list", "alice"]);
    let friends: BTreeSet<String> = list["friends"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f.as_str().unwrap().to_owned())
        .collect();
    assert_eq!(friends, set(&["bob", "carol"]));
    assert_eq!(
        ids(&server.json(&["friends", "online", "lobby", "alice"])),
        ["bob"]
    );

    // Leave: bob is offline at once; a second leave finds nobody.
    assert_eq!(
        server.ok(&["leave", "lobby", "bob"]),
        "lobby: 1 member left\n"
    );
    assert_eq!(
        server.ok(&["leave", "lobby", "bob"]),
        "lobby: 0 members left, 1 not present\n"
    );
    assert_eq!(server.json(&["count", "lobby"])["users"], 1);
    assert!(ids(&server.json(&["friends", "online", "lobby", "alice"])).is_empty());

    // SIGTERM: a clean exit, which writes the snapshot.
    let status = server.terminate();
    assert!(status.success(), "exit after SIGTERM: {status:?}");

    // The same data dir on a new server: presence and friends survived.
    let mut server = Server::start(&["--data-dir", data_arg]);
    assert_eq!(ids(&server.json(&["online", "lobby"])), ["alice"]);
    assert_eq!(ids(&server.json(&["online", "lobby", "--guests"])), ["g-1"]);
    assert_eq!(
        server.json(&["friends", "list", "alice"])["friends"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
    assert!(server.terminate().success());
    let _ = std::fs::remove_dir_all(&data);
}

#[test]
fn seen_sends_more_than_one_batch_for_many_ids() {
    let mut server = Server::start(&[]);
    // 10,001 ids: two requests (10,000 + 1), one summed answer.
    let ids: Vec<String> = (0..10_001).map(|i| format!("u{i}")).collect();
    let mut args = vec!["seen", "crowd"];
    args.extend(ids.iter().map(String::as_str));
    let beat = server.json(&args);
    assert_eq!(beat["accepted"], 10_001);
    assert_eq!(beat["joined"], 10_001);
    assert_eq!(server.json(&["count", "crowd"])["users"], 10_001);
    let status = server.json(&["status", "crowd", "u0", "u10000", "u10001"]);
    assert_eq!(status["members"][1]["status"], "online");
    assert_eq!(status["members"][2]["status"], "offline");
    // Ctrl-C stops it as cleanly as SIGTERM.
    let exit = server.stop("-INT");
    assert!(exit.success(), "exit after SIGINT: {exit:?}");
}

#[test]
fn a_bad_member_id_prints_the_servers_problem() {
    let mut server = Server::start(&[]);
    let long_id = "x".repeat(300);
    let out = server.cli(&["seen", "lobby", &long_id]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.starts_with("herenow: "), "{err}");
    assert!(err.contains("(bad-member-id, HTTP 400)"), "{err}");
    assert!(out.stdout.is_empty());

    // A bad space name or window is the server's to judge too.
    let out = server.cli(&["count", "no spaces allowed"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("HTTP 400"), "{}", stderr(&out));
    assert!(server.terminate().success());
}

#[test]
fn api_keys_from_flags_and_environment_guard_the_api() {
    let mut server = Server::start_with_env(
        &["--api-key", "writer-key-1:write"],
        &[("HERENOW_API_KEYS", "ignored-when-the-flag-is-given:read")],
    );
    // No key: 401, with a hint.
    let out = server.cli(&["seen", "lobby", "alice"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("HTTP 401"), "{}", stderr(&out));
    assert!(stderr(&out).contains("--api-key"), "{}", stderr(&out));

    server.ok(&["seen", "lobby", "alice", "--api-key", "writer-key-1"]);
    assert!(server.terminate().success());

    // Keys from HERENOW_API_KEYS, comma-separated; the client's key from
    // HERENOW_API_KEY.
    let mut server = Server::start_with_env(
        &[],
        &[("HERENOW_API_KEYS", "writer-key-2:write,reader-key-2:read")],
    );
    let with_key = |key: &str, args: &[&str]| {
        herenow()
            .args(args)
            .args(["--server", &server.url])
            .env("HERENOW_API_KEY", key)
            .output()
            .unwrap()
    };
    assert!(
        with_key("writer-key-2", &["seen", "lobby", "bob"])
            .status
            .success()
    );
    let out = with_key("reader-key-2", &["count", "lobby", "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let count: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(count["users"], 1);
    // A read key cannot write.
    let out = with_key("reader-key-2", &["seen", "lobby", "carol"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("HTTP 403"), "{}", stderr(&out));
    assert!(server.terminate().success());
}

#[test]
fn an_unreachable_server_is_named_and_exits_1() {
    // A port nobody listens on, held so for the whole test.
    let refused = RefusedPort::new();
    let url = format!("http://127.0.0.1:{}", refused.port);
    let out = herenow()
        .args(["online", "lobby", "--server", &url])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(
        err.starts_with(&format!("herenow: cannot reach the server at {url}: ")),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1, "{err}");

    // The same through HERENOW_SERVER.
    let out = herenow()
        .args(["count", "lobby"])
        .env("HERENOW_SERVER", &url)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("cannot reach the server at"));
}

#[test]
fn bad_client_input_is_refused_before_any_request() {
    // The server URL points nowhere: had a request been sent, the error
    // would be "cannot reach" with exit code 1, not a usage error.
    let nowhere = "http://127.0.0.1:9";
    for args in [
        &["seen", "lobby", "alice", "--meta", "{not json"][..],
        &["seen", "lobby", "alice", "--meta", "[1,2]"],
        &["online", "lobby", "--window", "10"],
        &["count", "lobby", "--window", "0s"],
        &["online", "lobby", "--limit", "5000"],
        &["seen", "lobby"],
    ] {
        let out = herenow()
            .args(args)
            .args(["--server", nowhere])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert!(!stderr(&out).contains("cannot reach"), "{args:?}");
    }
}

#[test]
fn serve_refuses_an_open_address_without_an_api_key() {
    let out = herenow()
        .args(["serve", "--listen", "0.0.0.0:0"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(
        err.starts_with("herenow: refusing to listen on 0.0.0.0:0"),
        "{err}"
    );
    assert!(err.contains("--api-key"), "{err}");
    assert!(out.stdout.is_empty(), "it must not have started");
}

#[test]
fn serve_refuses_a_bad_api_key() {
    for key in ["no-scope-here", "short:write", "long-enough:admin"] {
        let out = herenow()
            .args(["serve", "--listen", "127.0.0.1:0", "--api-key", key])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{key}");
        assert!(
            stderr(&out).contains("--api-key"),
            "{key}: {}",
            stderr(&out)
        );
        assert!(out.stdout.is_empty());
    }
    // The same from the environment.
    let out = herenow()
        .args(["serve", "--listen", "127.0.0.1:0"])
        .env("HERENOW_API_KEYS", "fine-key-123:write,broken")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn serve_refuses_thresholds_out_of_order() {
    let out = herenow()
        .args(["serve", "--listen", "127.0.0.1:0", "--online-after", "10m"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).starts_with("herenow: "), "{}", stderr(&out));
}

#[test]
fn serve_names_an_address_already_taken() {
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let out = herenow()
        .args(["serve", "--listen", &addr])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(
        err.starts_with(&format!("herenow: cannot listen on {addr}: ")),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1, "{err}");
    drop(taken);
}

#[test]
fn serve_with_demo_and_json_logs() {
    let mut server = Server::start(&["--demo", "--log-format", "json"]);
    // The simulated visitors live in `lobby`; whatever their number, the
    // answer has the documented shape.
    let count = server.json(&["count", "lobby"]);
    assert!(count["total"].is_u64(), "{count}");
    assert!(server.terminate().success());
    let log = server.log();
    assert!(!log.is_empty());
    for line in log.lines() {
        let entry: Value =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: not JSON: {line}"));
        assert!(entry["level"].is_string(), "{line}");
    }
}

#[test]
fn serve_reports_a_data_dir_it_cannot_use() {
    // A regular file where a directory should be: the store cannot start.
    let dir = temp_dir("bad-data-dir");
    let file = dir.join("not-a-directory");
    std::fs::write(&file, b"").unwrap();
    let data = file.join("data");
    let out = herenow()
        .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(&data)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let last = stderr(&out).lines().last().unwrap_or_default().to_owned();
    assert!(last.starts_with("herenow: "), "{}", stderr(&out));
    assert!(last.contains(data.to_str().unwrap()), "{last}");
    let _ = std::fs::remove_dir_all(&dir);
}

// ----- WebSocket tokens ------------------------------------------------------

#[test]
fn token_mints_what_the_websocket_accepts() {
    let mut server = Server::start(&[
        "--api-key",
        "writer-key-1:write",
        "--api-key",
        "reader-key-1:read",
    ]);
    let key = ["--api-key", "writer-key-1"];

    // The plain output is the token alone, for `$(herenow token …)`.
    let out = server.ok(&[&["token", "ann", "--space", "room:1"][..], &key].concat());
    let token = out.trim_end();
    assert_eq!(out.lines().count(), 1, "{out}");
    assert_eq!(token.split('.').count(), 3, "not a JWT: {token}");
    let (mut ws, welcome) = ws_with_token(&server, token);
    let welcome = welcome.expect("welcome");
    assert_eq!(welcome["type"], "welcome");
    assert_eq!(welcome["member"]["id"], "ann");
    assert_eq!(welcome["member"]["kind"], "user");
    assert_eq!(welcome["spaces"], serde_json::json!(["room:1"]));

    // Present over the socket, seen over HTTP.
    ws.send(tungstenite::Message::text(
        r#"{"type":"join","space":"room:1","ref":1}"#,
    ))
    .unwrap();
    assert_eq!(ws_read(&mut ws).unwrap()["type"], "ok");
    let online = server.json(&[&["online", "room:1"][..], &key].concat());
    assert_eq!(ids(&online), ["ann"]);

    // --json: the server's answer; --guest; --ttl.
    let before = now_ms();
    let minted = server.json(
        &[
            &[
                "token", "visitor", "--guest", "--space", "*", "--ttl", "10m",
            ][..],
            &key,
        ]
        .concat(),
    );
    let expires = minted["expires_at_ms"].as_u64().unwrap();
    assert!(
        expires >= before + 599_000 && expires <= before + 602_000,
        "{minted}"
    );
    let (_guest, welcome) = ws_with_token(&server, minted["token"].as_str().unwrap());
    let welcome = welcome.expect("welcome");
    assert_eq!(welcome["member"]["kind"], "guest");
    assert_eq!(welcome["spaces"], serde_json::json!(["*"]));

    // Minting needs a write key.
    let out = server.cli(&["token", "ann", "--space", "room:1"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("HTTP 401"), "{}", stderr(&out));
    let out = server.cli(&[
        "token",
        "ann",
        "--space",
        "room:1",
        "--api-key",
        "reader-key-1",
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("HTTP 403"), "{}", stderr(&out));
    // What the server refuses is named.
    let out = server.cli(&[&["token", "ann", "--space", "no spaces"][..], &key].concat());
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("(bad-space-name, HTTP 400)"),
        "{}",
        stderr(&out)
    );
    drop(ws);
    assert!(server.terminate().success());
}

#[test]
fn servers_given_one_token_secret_accept_each_others_tokens() {
    let secret = "a-shared-secret-of-at-least-32-bytes!";
    let mut a = Server::start_with_env(&[], &[("HERENOW_TOKEN_SECRET", secret)]);
    let mut b = Server::start(&["--token-secret", secret]);
    let mut c = Server::start(&[]);
    let token = a.ok(&["token", "ann", "--space", "room"]);
    let (_ws, welcome) = ws_with_token(&b, token.trim_end());
    assert_eq!(welcome.expect("welcome")["member"]["id"], "ann");
    // A server with its own random secret refuses it: close 4001.
    let (_ws, refused) = ws_with_token(&c, token.trim_end());
    assert_eq!(refused.unwrap_err(), Some(4001));
    for s in [&mut a, &mut b, &mut c] {
        assert!(s.terminate().success());
    }
}

#[test]
fn websocket_flags_are_checked_before_serving() {
    // A short secret: refused, and never echoed.
    let out = herenow()
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--token-secret",
            "hunter2",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(err.contains("token secret"), "{err}");
    assert!(!err.contains("hunter2"), "{err}");
    assert!(out.stdout.is_empty());
    for args in [
        &["--ws-ttl", "500ms"][..],
        &["--ws-ttl", "11m"],
        &["--ws-ttl", "30"],
        &["--ws-max-connections", "0"],
    ] {
        let out = herenow()
            .args(["serve", "--listen", "127.0.0.1:0"])
            .args(args)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert!(out.stdout.is_empty(), "{args:?}");
    }
    // The client refuses what it can judge before any request.
    for args in [
        &["token", "ann"][..],
        &["token", "ann", "--space", "a", "--ttl", "25h"],
        &["token", "ann", "--space", "a", "--ttl", "0s"],
    ] {
        let out = herenow()
            .args(args)
            .args(["--server", "http://127.0.0.1:9"])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
    }
}
