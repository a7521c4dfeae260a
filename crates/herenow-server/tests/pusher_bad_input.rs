//! Every bad input to the Pusher protocol (issue 38) answered as the
//! protocol says, each while a well-behaved socket in the same channel
//! keeps receiving: bad signatures, oversized or malformed member data,
//! client events where they are not allowed, floods past the rate and
//! past the channel bound, and malformed frames. Frames are read as sent
//! (raw WebSocket, like `pusher_ws.rs`); the libraries' view of the same
//! refusals is in `crates/herenow/tests/pusher_js.rs`.
//!
//! The codes are Pusher's ("Pusher Channels Protocol", version 7): a
//! refused subscription is `pusher:subscription_error` on the channel
//! with `{type, error, status}`; a refusal that keeps the socket open is
//! `pusher:error` with `code` `null` or 4301 (rate limit), never one of
//! 4000–4299, which tell the client that its connection closes.
//!
//! "Nothing else disturbed" is shown by order: after the bad inputs, the
//! next message the witness reads is the good one sent after them.

mod support;

use std::time::Duration;

use futures::SinkExt;
use herenow_server::Config;
use herenow_server::{PusherApp, PusherConfig};
use hmac::{Hmac, Mac};
use serde_json::{Value, json};
use sha2::Sha256;
use support::ws::{Client, Read, Server};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::frame::Frame;
use tokio_tungstenite::tungstenite::protocol::frame::coding::{Data, OpCode};

const ID: &str = "91";
const KEY: &str = "bad-input-key";
const SECRET: &str = "bad-input-secret-123";

fn config() -> Config {
    Config {
        pusher: PusherConfig {
            apps: vec![format!("{ID}:{KEY}:{SECRET}").parse::<PusherApp>().unwrap()],
            ..PusherConfig::default()
        },
        ..Config::default()
    }
}

fn hmac_hex(secret: &str, message: &str) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).unwrap();
    mac.update(message.as_bytes());
    mac.finalize()
        .into_bytes()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// `KEY:signature` for a socket, channel and optional `channel_data`.
fn auth(socket_id: &str, channel: &str, channel_data: Option<&str>) -> String {
    let message = match channel_data {
        Some(d) => format!("{socket_id}:{channel}:{d}"),
        None => format!("{socket_id}:{channel}"),
    };
    format!("{KEY}:{}", hmac_hex(SECRET, &message))
}

/// A connected socket and its socket id.
async fn socket(s: &Server) -> (Client, String) {
    let mut c = s
        .connect_to(&format!("ws://{}/app/{KEY}?protocol=7&client=js", s.addr))
        .await;
    let hello = c.recv().await;
    assert_eq!(hello["event"], "pusher:connection_established");
    let id = data(&hello)["socket_id"].as_str().unwrap().to_owned();
    (c, id)
}

/// The data of a message, parsed from its JSON string.
fn data(m: &Value) -> Value {
    match &m["data"] {
        Value::String(s) => serde_json::from_str(s).unwrap_or(Value::String(s.clone())),
        other => other.clone(),
    }
}

/// Subscribes with `subscribe`'s data; the answer.
async fn subscribe_raw(c: &mut Client, subscribe: Value) -> Value {
    c.send(json!({"event": "pusher:subscribe", "data": subscribe}))
        .await;
    c.recv().await
}

/// Subscribes correctly (signed when the channel needs it; `user` for a
/// presence channel) and asserts it succeeded.
async fn join(c: &mut Client, socket_id: &str, channel: &str, user: Option<&str>) -> Value {
    let mut sub = json!({ "channel": channel });
    if let Some(user) = user {
        let channel_data = json!({"user_id": user, "user_info": {"name": user}}).to_string();
        sub["auth"] = auth(socket_id, channel, Some(&channel_data)).into();
        sub["channel_data"] = channel_data.into();
    } else if channel.starts_with("private-") {
        sub["auth"] = auth(socket_id, channel, None).into();
    }
    let answer = subscribe_raw(c, sub).await;
    assert_eq!(
        answer["event"], "pusher_internal:subscription_succeeded",
        "{channel}: {answer}"
    );
    assert_eq!(answer["channel"], channel);
    answer
}

/// Asserts `answer` is a subscription refusal on `channel` with this
/// type and status.
fn refused(answer: &Value, channel: &str, kind: &str, status: u16, why: &str) {
    assert_eq!(
        answer["event"], "pusher:subscription_error",
        "{why}: {answer}"
    );
    assert_eq!(answer["channel"], channel, "{why}: {answer}");
    assert_eq!(answer["data"]["type"], kind, "{why}: {answer}");
    assert_eq!(answer["data"]["status"], status, "{why}: {answer}");
    assert!(
        answer["data"]["error"]
            .as_str()
            .is_some_and(|e| !e.is_empty()),
        "{why}: {answer}"
    );
}

/// Asserts `answer` is a `pusher:error` that keeps the socket open: code
/// `null` or 43xx, and a message.
fn kept_open_error(answer: &Value, code: Option<u16>, why: &str) {
    assert_eq!(answer["event"], "pusher:error", "{why}: {answer}");
    match code {
        None => assert!(answer["data"]["code"].is_null(), "{why}: {answer}"),
        Some(code) => assert_eq!(answer["data"]["code"], code, "{why}: {answer}"),
    }
    assert!(
        answer["data"]["message"]
            .as_str()
            .is_some_and(|m| !m.is_empty()),
        "{why}: {answer}"
    );
}

/// The socket still answers: a ping gets a pong as its next message.
async fn still_answers(c: &mut Client, who: &str) {
    c.send(json!({"event": "pusher:ping", "data": {}})).await;
    let pong = c.recv().await;
    assert_eq!(pong["event"], "pusher:pong", "{who}: {pong}");
}

/// An app event through the signed HTTP API, as Pusher's libraries send it.
async fn trigger(s: &Server, channel: &str, name: &str, payload: &str) {
    use md5::{Digest, Md5};
    let body = json!({"name": name, "channel": channel, "data": payload}).to_string();
    let path = format!("/apps/{ID}/events");
    let body_md5: String = Md5::digest(body.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let query = format!("auth_key={KEY}&auth_timestamp={now}&auth_version=1.0&body_md5={body_md5}");
    let signature = hmac_hex(SECRET, &format!("POST\n{path}\n{query}"));
    let mut stream = tokio::net::TcpStream::connect(s.addr).await.unwrap();
    let request = format!(
        "POST {path}?{query}&auth_signature={signature} HTTP/1.1\r\nHost: {}\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        s.addr,
        body.len()
    );
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).await.unwrap();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
}

/// The witness's next message is the app event `name` on `channel`.
async fn next_is_event(witness: &mut Client, channel: &str, name: &str, payload: &str) {
    let m = witness.recv().await;
    assert_eq!(
        (
            m["event"].as_str(),
            m["channel"].as_str(),
            m["data"].as_str()
        ),
        (Some(name), Some(channel), Some(payload)),
        "the witness got something else first: {m}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_signatures_are_refused_and_the_channel_goes_on() {
    let s = Server::start_with(config()).await;
    let (mut witness, w_id) = socket(&s).await;
    join(&mut witness, &w_id, "private-room", None).await;
    join(&mut witness, &w_id, "presence-hall", Some("wit")).await;
    let (mut bad, b_id) = socket(&s).await;
    let (_, other_id) = socket(&s).await;

    let ch = "private-room";
    let good = auth(&b_id, ch, None);
    let signature = good.split_once(':').unwrap().1;
    for (why, auth_value) in [
        ("no auth", Value::Null),
        ("no colon", Value::from(signature)),
        ("another key", format!("other-key:{signature}").into()),
        (
            "another socket's signature",
            auth(&other_id, ch, None).into(),
        ),
        (
            "another channel's signature",
            auth(&b_id, "private-else", None).into(),
        ),
        (
            "another secret",
            format!(
                "{KEY}:{}",
                hmac_hex("not-the-secret", &format!("{b_id}:{ch}"))
            )
            .into(),
        ),
        ("not hex", format!("{KEY}:{}", "zz".repeat(32)).into()),
        (
            "a truncated signature",
            format!("{KEY}:{}", &signature[..10]).into(),
        ),
        ("an empty signature", format!("{KEY}:").into()),
    ] {
        let answer = subscribe_raw(&mut bad, json!({"channel": ch, "auth": auth_value})).await;
        refused(&answer, ch, "AuthError", 401, why);
    }

    // Presence: the signature covers channel_data as written.
    let hall = "presence-hall";
    let signed = json!({"user_id": "ann"}).to_string();
    let forged = json!({"user_id": "root"}).to_string();
    for (why, sub) in [
        (
            "channel_data changed after signing",
            json!({"channel": hall, "auth": auth(&b_id, hall, Some(&signed)), "channel_data": forged}),
        ),
        (
            "channel_data not signed",
            json!({"channel": hall, "auth": auth(&b_id, hall, None), "channel_data": signed}),
        ),
        (
            "signed for another socket",
            json!({"channel": hall, "auth": auth(&other_id, hall, Some(&signed)), "channel_data": signed}),
        ),
    ] {
        let answer = subscribe_raw(&mut bad, sub).await;
        refused(&answer, hall, "AuthError", 401, why);
    }

    // The refused socket goes on, and may subscribe when signed right.
    still_answers(&mut bad, "the refused socket").await;
    join(&mut bad, &b_id, ch, None).await;
    join(&mut bad, &b_id, hall, Some("carl")).await;
    // The witness saw nothing of the refused: carl is the first to join.
    let added = witness.recv().await;
    assert_eq!(added["event"], "pusher_internal:member_added", "{added}");
    assert_eq!(data(&added)["user_id"], "carl");
    trigger(&s, ch, "after", "ok").await;
    next_is_event(&mut witness, ch, "after", "ok").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_or_malformed_member_data_is_refused_and_nobody_joins() {
    let s = Server::start_with(config()).await;
    let hall = "presence-guests";
    let (mut witness, w_id) = socket(&s).await;
    join(&mut witness, &w_id, hall, Some("wit")).await;
    let (mut bad, b_id) = socket(&s).await;

    // {"bio":"…"} of 1,025 bytes: one over the bound.
    let big = json!({"user_id": "big", "user_info": {"bio": "x".repeat(1015)}}).to_string();
    let cases: Vec<(&str, String, &str, u16)> = vec![
        ("user_info of 1,025 bytes", big, "LimitReached", 413),
        (
            "user_info not an object",
            json!({"user_id": "s", "user_info": "a string"}).to_string(),
            "BadRequest",
            400,
        ),
        ("not JSON", "{user_id: 1".to_owned(), "BadRequest", 400),
        (
            "no user_id",
            json!({"user_info": {}}).to_string(),
            "BadRequest",
            400,
        ),
        (
            "an empty user_id",
            json!({"user_id": ""}).to_string(),
            "BadRequest",
            400,
        ),
        (
            "a fractional user_id",
            json!({"user_id": 1.5}).to_string(),
            "BadRequest",
            400,
        ),
        (
            "an object user_id",
            json!({"user_id": {"a": 1}}).to_string(),
            "BadRequest",
            400,
        ),
        (
            "a user_id over 256 bytes",
            json!({"user_id": "u".repeat(300)}).to_string(),
            "BadRequest",
            400,
        ),
        (
            "a user_id with a control character",
            json!({"user_id": "a\u{7}b"}).to_string(),
            "BadRequest",
            400,
        ),
    ];
    for (why, channel_data, kind, status) in cases {
        // Signed right: the data itself is what is refused.
        let sub = json!({"channel": hall, "auth": auth(&b_id, hall, Some(&channel_data)), "channel_data": channel_data});
        let answer = subscribe_raw(&mut bad, sub).await;
        refused(&answer, hall, kind, status, why);
    }
    // A presence subscription with no channel_data at all.
    let answer = subscribe_raw(
        &mut bad,
        json!({"channel": hall, "auth": auth(&b_id, hall, None)}),
    )
    .await;
    refused(&answer, hall, "BadRequest", 400, "no channel_data");

    // user_info of exactly 1 KiB is taken.
    still_answers(&mut bad, "the refused socket").await;
    let info = json!({"bio": "x".repeat(1014)});
    assert_eq!(info.to_string().len(), 1024);
    let fits = json!({"user_id": "fine", "user_info": info}).to_string();
    let sub =
        json!({"channel": hall, "auth": auth(&b_id, hall, Some(&fits)), "channel_data": fits});
    let roster = subscribe_raw(&mut bad, sub).await;
    assert_eq!(
        roster["event"], "pusher_internal:subscription_succeeded",
        "{roster}"
    );
    assert_eq!(data(&roster)["presence"]["count"], 2, "{roster}");
    assert_eq!(data(&roster)["presence"]["hash"]["fine"], info);
    let added = witness.recv().await;
    assert_eq!(added["event"], "pusher_internal:member_added", "{added}");
    assert_eq!(
        data(&added)["user_id"],
        "fine",
        "nobody refused joined first"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_events_where_they_are_not_allowed_are_refused_and_not_relayed() {
    let s = Server::start_with(config()).await;
    let (mut witness, w_id) = socket(&s).await;
    let (mut bad, b_id) = socket(&s).await;
    for c in ["lobby", "private-encrypted-vault", "private-talk"] {
        join(&mut witness, &w_id, c, None).await;
    }
    join(&mut bad, &b_id, "lobby", None).await;
    join(&mut bad, &b_id, "private-encrypted-vault", None).await;

    for (why, msg) in [
        (
            "on a public channel",
            json!({"event": "client-hi", "channel": "lobby", "data": {}}),
        ),
        (
            "on an encrypted channel",
            json!({"event": "client-hi", "channel": "private-encrypted-vault", "data": {}}),
        ),
        (
            "on a channel it has not subscribed",
            json!({"event": "client-hi", "channel": "private-talk", "data": {}}),
        ),
        ("with no channel", json!({"event": "client-hi", "data": {}})),
    ] {
        bad.send(msg).await;
        let answer = bad.recv().await;
        kept_open_error(&answer, None, why);
        assert!(
            answer["data"]["message"]
                .as_str()
                .unwrap()
                .starts_with("Client event rejected"),
            "{why}: {answer}"
        );
    }
    // Too large, on a channel that takes client events.
    join(&mut bad, &b_id, "private-talk", None).await;
    let long_name = format!("client-{}", "n".repeat(200));
    for (why, msg) in [
        (
            "a name over 200 bytes",
            json!({"event": long_name, "channel": "private-talk", "data": {}}),
        ),
        (
            "data over 10 KB",
            json!({"event": "client-big", "channel": "private-talk", "data": {"x": "y".repeat(11 * 1024)}}),
        ),
    ] {
        bad.send(msg).await;
        kept_open_error(&bad.recv().await, None, why);
    }
    still_answers(&mut bad, "the refused sender").await;
    // None of them reached the witness: the next thing it reads on each
    // channel is what comes after.
    for channel in ["lobby", "private-encrypted-vault"] {
        trigger(&s, channel, "after", "ok").await;
        next_is_event(&mut witness, channel, "after", "ok").await;
    }
    bad.send(json!({"event": "client-ok", "channel": "private-talk", "data": {"n": 1}}))
        .await;
    let relayed = witness.recv().await;
    assert_eq!(relayed["event"], "client-ok", "{relayed}");
    assert_eq!(relayed["data"]["n"], 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_past_the_rate_gets_4301_and_the_channel_goes_on() {
    let s = Server::start_with(config()).await;
    let ch = "private-flood";
    let (mut witness, w_id) = socket(&s).await;
    let (mut flooder, f_id) = socket(&s).await;
    let (mut calm, c_id) = socket(&s).await;
    join(&mut witness, &w_id, ch, None).await;
    join(&mut flooder, &f_id, ch, None).await;
    join(&mut calm, &c_id, ch, None).await;

    const SENT: usize = 60;
    for i in 0..SENT {
        flooder
            .send(json!({"event": "client-n", "channel": ch, "data": {"i": i}}))
            .await;
    }
    // Every answer to the flood comes before the pong to a later ping.
    flooder
        .send(json!({"event": "pusher:ping", "data": {}}))
        .await;
    let mut limited = 0;
    loop {
        let m = flooder.recv().await;
        if m["event"] == "pusher:pong" {
            break;
        }
        kept_open_error(&m, Some(4301), "past the rate");
        limited += 1;
    }
    // The calm socket's event, sent after the flood was read, comes after
    // every relayed one.
    calm.send(json!({"event": "client-mark", "channel": ch, "data": {}}))
        .await;
    let mut relayed = Vec::new();
    loop {
        let m = witness.recv().await;
        if m["event"] == "client-mark" {
            break;
        }
        assert_eq!(m["event"], "client-n", "{m}");
        relayed.push(m["data"]["i"].as_u64().unwrap());
    }
    assert_eq!(relayed.len() + limited, SENT, "each relayed or refused");
    assert!(
        (10..SENT).contains(&relayed.len()),
        "the burst of 10 passes, not all {SENT}: {} relayed",
        relayed.len()
    );
    let mut sorted = relayed.clone();
    sorted.sort_unstable();
    assert_eq!(sorted, relayed, "relayed in order");
    assert_eq!(relayed[..10], [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
    // The flooder, still connected, gets the calm one's event as usual.
    assert_eq!(flooder.recv().await["event"], "client-mark");
    still_answers(&mut flooder, "the flooder stays connected").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subscribe_flood_stops_at_the_channel_bound_and_the_socket_goes_on() {
    let s = Server::start_with(config()).await;
    let (mut witness, w_id) = socket(&s).await;
    join(&mut witness, &w_id, "lobby", None).await;
    let (mut greedy, _) = socket(&s).await;
    for i in 0..130 {
        greedy
            .send(json!({"event": "pusher:subscribe", "data": {"channel": format!("c{i}")}}))
            .await;
    }
    let mut ok = 0;
    for i in 0..130 {
        let m = greedy.recv().await;
        let channel = format!("c{i}");
        if i < 100 {
            assert_eq!(m["event"], "pusher_internal:subscription_succeeded", "{m}");
            ok += 1;
        } else {
            refused(&m, &channel, "LimitReached", 4100, "past 100 channels");
        }
    }
    assert_eq!(ok, 100);
    // Unsubscribing makes room again.
    greedy
        .send(json!({"event": "pusher:unsubscribe", "data": {"channel": "c0"}}))
        .await;
    greedy
        .send(json!({"event": "pusher:subscribe", "data": {"channel": "lobby"}}))
        .await;
    assert_eq!(
        greedy.recv().await["event"],
        "pusher_internal:subscription_succeeded"
    );
    trigger(&s, "lobby", "after", "ok").await;
    next_is_event(&mut witness, "lobby", "after", "ok").await;
    next_is_event(&mut greedy, "lobby", "after", "ok").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_frames_get_pusher_error_and_the_socket_goes_on() {
    let s = Server::start_with(config()).await;
    let (mut witness, w_id) = socket(&s).await;
    join(&mut witness, &w_id, "lobby", None).await;
    let (mut bad, _) = socket(&s).await;
    let deep = "[".repeat(20_000);
    let unknown =
        json!({"event": format!("pusher:{}", "x".repeat(20_000)), "data": {}}).to_string();
    for (why, text) in [
        ("not JSON", "not json"),
        ("an empty frame", ""),
        ("a JSON array", "[1,2]"),
        ("a JSON number", "42"),
        ("a JSON string", "\"pusher:ping\""),
        ("an event that is a number", r#"{"event":5,"data":{}}"#),
        ("no event", r#"{"data":{}}"#),
        ("nested past any depth", deep.as_str()),
        (
            "an unknown pusher: event",
            r#"{"event":"pusher:nope","data":{}}"#,
        ),
        ("a long unknown event", unknown.as_str()),
        ("subscribe without data", r#"{"event":"pusher:subscribe"}"#),
        (
            "subscribe with data that is not JSON",
            r#"{"event":"pusher:subscribe","data":"{nope"}"#,
        ),
        (
            "subscribe with a number for a channel",
            r#"{"event":"pusher:subscribe","data":{"channel":5}}"#,
        ),
        (
            "an auth that is a number",
            r#"{"event":"pusher:subscribe","data":{"channel":"private-x","auth":42}}"#,
        ),
        (
            "unsubscribe without data",
            r#"{"event":"pusher:unsubscribe"}"#,
        ),
    ] {
        bad.send_text(text).await;
        kept_open_error(&bad.recv().await, None, why);
    }
    bad.ws
        .send(Message::Binary(vec![0, 1, 2].into()))
        .await
        .unwrap();
    kept_open_error(&bad.recv().await, None, "a binary frame");
    // Channel names the protocol refuses.
    for (why, channel) in [
        ("a space", "a b".to_owned()),
        ("an empty name", String::new()),
        ("165 bytes", "c".repeat(165)),
        ("a slash", "a/b".to_owned()),
    ] {
        let answer = subscribe_raw(&mut bad, json!({"channel": channel})).await;
        refused(&answer, &channel, "BadRequest", 400, why);
    }
    // Unsubscribing from a channel it is not in: nothing, as Pusher.
    bad.send(json!({"event": "pusher:unsubscribe", "data": {"channel": "never"}}))
        .await;
    still_answers(&mut bad, "after every malformed frame").await;
    trigger(&s, "lobby", "after", "ok").await;
    next_is_event(&mut witness, "lobby", "after", "ok").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn broken_websocket_frames_close_that_socket_only() {
    let s = Server::start_with(config()).await;
    let (mut witness, w_id) = socket(&s).await;
    join(&mut witness, &w_id, "lobby", None).await;
    // A text frame that is not UTF-8: 1007.
    let (mut bad, _) = socket(&s).await;
    bad.ws
        .send(Message::Frame(Frame::message(
            vec![0xff, 0xfe, 0x80],
            OpCode::Data(Data::Text),
            true,
        )))
        .await
        .unwrap();
    assert_eq!(closed(&mut bad).await, Some(1007));
    // A continuation with nothing to continue: a protocol error, 1002.
    let (mut bad, _) = socket(&s).await;
    bad.ws
        .send(Message::Frame(Frame::message(
            b"x".to_vec(),
            OpCode::Data(Data::Continue),
            true,
        )))
        .await
        .unwrap();
    assert_eq!(closed(&mut bad).await, Some(1002));
    // Over the frame bound: 1009.
    let (mut bad, _) = socket(&s).await;
    bad.send_text(&"x".repeat(40 * 1024)).await;
    assert_eq!(closed(&mut bad).await, Some(1009));
    trigger(&s, "lobby", "after", "ok").await;
    next_is_event(&mut witness, "lobby", "after", "ok").await;
    still_answers(&mut witness, "the witness").await;
}

/// Reads to the close, within a bound; its code.
async fn closed(c: &mut Client) -> Option<u16> {
    tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            if let Read::Closed(code) = c.read().await {
                return code;
            }
        }
    })
    .await
    .expect("the socket was not closed")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_that_is_not_a_websocket_handshake_gets_426_naming_what_it_lacks() {
    let s = Server::start_with(config()).await;
    let (mut witness, w_id) = socket(&s).await;
    join(&mut witness, &w_id, "lobby", None).await;
    let url = format!("http://{}/app/{KEY}?protocol=7", s.addr);
    let client = reqwest::Client::new();
    for (headers, why) in [
        (vec![], "Upgrade: websocket"),
        (
            vec![("upgrade", "websocket"), ("connection", "Upgrade")],
            "version must be 13",
        ),
        (
            vec![
                ("upgrade", "websocket"),
                ("connection", "Upgrade"),
                ("sec-websocket-version", "8"),
            ],
            "version must be 13",
        ),
        (
            vec![
                ("upgrade", "websocket"),
                ("connection", "Upgrade"),
                ("sec-websocket-version", "13"),
            ],
            "Sec-WebSocket-Key",
        ),
    ] {
        let mut request = client.get(&url);
        for (name, value) in &headers {
            request = request.header(*name, *value);
        }
        let answer = request.send().await.unwrap();
        assert_eq!(answer.status(), 426, "{headers:?}");
        assert_eq!(answer.headers()["upgrade"], "websocket");
        assert_eq!(answer.headers()["sec-websocket-version"], "13");
        let problem: Value = answer.json().await.unwrap();
        assert_eq!(problem["code"], "websocket-expected", "{problem}");
        let detail = problem["detail"].as_str().unwrap();
        assert!(detail.contains(why), "{headers:?}: {detail}");
    }
    trigger(&s, "lobby", "after", "ok").await;
    next_is_event(&mut witness, "lobby", "after", "ok").await;
    still_answers(&mut witness, "the witness").await;
}
