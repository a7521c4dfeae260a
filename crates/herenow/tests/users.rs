//! Issue 8 end to end: the real binary as a server and as its client,
//! `herenow user`, `herenow users status` and `herenow erase`, checked
//! through their output, the server's JSON and their exit codes.

mod support;
use support::{Server, stderr, temp_dir};

#[test]
fn issue_8_last_seen_anywhere_and_erase_through_the_cli() {
    let mut server = Server::start(&[]);
    server.ok(&["seen", "lobby", "ann", "bob"]);
    server.ok(&["leave", "lobby", "ann"]);
    server.ok(&["friends", "set", "bob", "ann", "cy"]);
    server.ok(&["friends", "set", "ann", "bob"]);

    // Left, and still remembered: offline, with the leave's time and space.
    let ann = server.json(&["user", "ann"]);
    assert_eq!(ann["id"], "ann");
    assert_eq!(ann["status"], "offline");
    assert!(ann["last_seen_ms"].is_u64(), "{ann}");
    assert_eq!(ann["space"], "lobby");
    let table = server.ok(&["user", "ann"]);
    let lines: Vec<&str> = table.lines().collect();
    assert_eq!(lines.len(), 2, "{table}");
    assert!(
        lines[0].starts_with("ID") && lines[0].contains("SPACE"),
        "{table}"
    );
    assert!(
        lines[1].starts_with("ann")
            && lines[1].contains("○ offline")
            && lines[1].ends_with("lobby"),
        "{table}"
    );

    // Many at once, in the order given.
    let users = server.json(&["users", "status", "bob", "nobody", "ann"]);
    let got: Vec<(&str, &str)> = users["users"]
        .as_array()
        .unwrap()
        .iter()
        .map(|u| (u["id"].as_str().unwrap(), u["status"].as_str().unwrap()))
        .collect();
    assert_eq!(
        got,
        [("bob", "online"), ("nobody", "offline"), ("ann", "offline")]
    );
    assert!(users["users"][1]["last_seen_ms"].is_null());
    let table = server.ok(&["users", "status", "bob", "nobody"]);
    assert!(table.lines().nth(2).unwrap().contains("never"), "{table}");

    // Erase: asks nothing, says what went.
    let report = server.json(&["erase", "ann"]);
    assert_eq!(
        report,
        serde_json::json!({"presence": 0, "remembered": 1, "friend_set": true, "listed_by": 1})
    );
    assert_eq!(
        server.ok(&["erase", "bob"]),
        "bob erased: left 1 space, forgot 0 last-seen times, deleted its friend set, \
         removed from 0 friend sets\n"
    );
    assert_eq!(
        server.ok(&["erase", "ann"]),
        "ann: nothing to erase (never seen, or erased already)\n"
    );
    assert!(server.json(&["user", "ann"])["last_seen_ms"].is_null());
    assert!(
        server
            .ok(&["friends", "list", "ann"])
            .contains("no friends")
    );

    // A bad id is the server's problem to name, exit 1.
    let out = server.cli(&["erase", &"x".repeat(300)]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("(bad-member-id, HTTP 400)"),
        "{}",
        stderr(&out)
    );
    assert!(server.terminate().success());
}

#[test]
fn issue_8_erase_needs_a_write_key() {
    let mut server = Server::start(&["--api-key", "reader-secret-8:read"]);
    let out = server.cli(&["erase", "ann", "--api-key", "reader-secret-8"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("(insufficient-scope, HTTP 403)"),
        "{}",
        stderr(&out)
    );
    // Reads are fine with a read key.
    let out = server.cli(&["users", "status", "ann", "--api-key", "reader-secret-8"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(server.terminate().success());
}

#[test]
fn issue_8_an_erasure_survives_a_crash() {
    let data = temp_dir("erase-crash");
    let data_arg = data.to_str().unwrap();
    let mut server = Server::start(&["--data-dir", data_arg]);
    server.ok(&["seen", "lobby", "ann", "bob"]);
    server.ok(&["friends", "set", "bob", "ann", "cy"]);
    assert_eq!(server.json(&["erase", "ann"])["presence"], 1);
    // SIGKILL: no shutdown snapshot; the erasure's 2xx came after its
    // journal record was synced.
    server.kill();

    let mut server = Server::start(&["--data-dir", data_arg]);
    assert!(server.json(&["user", "ann"])["last_seen_ms"].is_null());
    assert_eq!(
        server.json(&["friends", "list", "bob"])["friends"],
        serde_json::json!(["cy"])
    );
    assert!(server.terminate().success());
    let _ = std::fs::remove_dir_all(&data);
}
