//! Issue 44: every refusal of the Pusher HTTP API keeps its own
//! explanation. Each bad input is a real request, signed as Pusher's
//! server libraries sign it (then spoiled where the signature is what is
//! tested), sent on a socket to a running server; the answer must carry
//! its status, as before, and a plain-text body naming the problem, which
//! is what the npm `pusher` (`RequestError.body`) and PyPI `pusher`
//! (`PusherBadRequest(body)` and its siblings) show. The problem layer
//! around the router used to replace these bodies with generic sentences
//! ("the request was refused", "the request body is larger than 4 MiB").
//!
//! "Nothing changed" is shown by order: after every refusal, a socket on
//! the channel the refused events named gets the good event sent last as
//! its next message.

mod support;

use axum::body::Body;
use axum::http::{Request, header};
use serde_json::{Value, json};
use support::http::{call, raw_http};
use support::pusher::{ID, KEY, SECRET, config, now_s, socket, subscribe};
use support::ws::Server;

/// How a request is signed. [`Signing::right`] signs as the libraries do;
/// each field can be spoiled.
#[derive(Clone)]
struct Signing {
    key: Option<String>,
    secret: String,
    timestamp: Option<String>,
    version: Option<String>,
    /// `None`: the body's MD5 when there is a body; `Some(None)`: none.
    body_md5: Option<Option<String>>,
    extra: Vec<(String, String)>,
    signed: bool,
}

impl Signing {
    fn right() -> Self {
        Signing {
            key: Some(KEY.into()),
            secret: SECRET.into(),
            timestamp: Some(now_s().to_string()),
            version: Some("1.0".into()),
            body_md5: None,
            extra: Vec::new(),
            signed: true,
        }
    }

    fn with(mut self, key: &str, value: &str) -> Self {
        self.extra.push((key.into(), value.into()));
        self
    }
}

fn md5_hex(body: &str) -> String {
    use md5::{Digest, Md5};
    Md5::digest(body.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn hmac_with(secret: &str, message: &str) -> String {
    use hmac::{Hmac, Mac};
    let mut mac = Hmac::<sha2::Sha256>::new_from_slice(secret.as_bytes()).unwrap();
    mac.update(message.as_bytes());
    mac.finalize()
        .into_bytes()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// An answer: its status, `Content-Type` and body.
struct Answer {
    status: u16,
    content_type: String,
    body: String,
}

/// `path?query` for `method path` with `body`, signed as `signing` says
/// (the path is signed as sent, percent-encoding and all).
fn target(method: &str, path: &str, body: &str, signing: &Signing) -> String {
    let mut params: Vec<(String, String)> = Vec::new();
    if let Some(k) = &signing.key {
        params.push(("auth_key".into(), k.clone()));
    }
    if let Some(t) = &signing.timestamp {
        params.push(("auth_timestamp".into(), t.clone()));
    }
    if let Some(v) = &signing.version {
        params.push(("auth_version".into(), v.clone()));
    }
    match &signing.body_md5 {
        None if !body.is_empty() => params.push(("body_md5".into(), md5_hex(body))),
        Some(Some(md5)) => params.push(("body_md5".into(), md5.clone())),
        _ => {}
    }
    params.extend(signing.extra.iter().cloned());
    params.sort();
    let query: Vec<String> = params.iter().map(|(k, v)| format!("{k}={v}")).collect();
    let mut query = query.join("&");
    if signing.signed {
        let signature = hmac_with(&signing.secret, &format!("{method}\n{path}\n{query}"));
        query = format!("{query}&auth_signature={signature}");
    }
    format!("{path}?{query}")
}

/// Sends `method path` with `body`, signed as `signing` says, on a socket.
async fn send(s: &Server, method: &str, path: &str, body: &str, signing: &Signing) -> Answer {
    let answer = raw_http(
        s.addr,
        &format!(
            "{method} {} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n\
             Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
            target(method, path, body, signing),
            body.len()
        ),
    )
    .await;
    let (head, body) = answer.split_once("\r\n\r\n").unwrap_or((&answer, ""));
    let status = head.split_whitespace().nth(1).unwrap().parse().unwrap();
    let content_type = head
        .lines()
        .find_map(|l| {
            let (name, value) = l.split_once(':')?;
            name.eq_ignore_ascii_case("content-type")
                .then(|| value.trim().to_owned())
        })
        .unwrap_or_default();
    Answer {
        status,
        content_type,
        body: body.to_owned(),
    }
}

/// Asserts a refusal: `status`, plain text, and a body holding each of
/// `names` (what the problem is: the parameter, the bound, the value).
#[track_caller]
fn refused(why: &str, answer: &Answer, status: u16, names: &[&str]) {
    assert_eq!(answer.status, status, "{why}: {}", answer.body);
    assert!(
        answer.content_type.starts_with("text/plain"),
        "{why}: a plain-text body as Pusher's, not {:?}: {}",
        answer.content_type,
        answer.body
    );
    for name in names {
        assert!(
            answer.body.contains(name),
            "{why}: the body should say {name:?}: {:?}",
            answer.body
        );
    }
}

fn event(channel: &str, name: &str, data: &str) -> String {
    json!({"name": name, "channel": channel, "data": data}).to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue_44_every_bad_event_is_refused_with_its_own_explanation() {
    let s = Server::start_with(config()).await;
    let (mut witness, _) = socket(&s).await;
    subscribe(&mut witness, "news").await;
    let events = format!("/apps/{ID}/events");
    let right = Signing::right();
    let many: Vec<String> = (0..101).map(|i| format!("c{i}")).collect();
    let cases: Vec<(&str, String, u16, Vec<&str>)> = vec![
        (
            "10,241 bytes of data",
            event("news", "e", &"x".repeat(10_241)),
            413,
            vec!["event data is larger than 10 KB", "10241 bytes"],
        ),
        (
            "101 channels",
            json!({"name": "e", "channels": many, "data": "x"}).to_string(),
            400,
            vec!["1 to 100 channels", "not 101"],
        ),
        (
            "no channel in the list",
            json!({"name": "e", "channels": [], "data": "x"}).to_string(),
            400,
            vec!["1 to 100 channels", "not 0"],
        ),
        (
            "an empty event name",
            event("news", "", "x"),
            400,
            vec!["event name is 1 to 200 bytes", "not 0"],
        ),
        (
            "an event name of 201 bytes",
            event("news", &"n".repeat(201), "x"),
            400,
            vec!["event name is 1 to 200 bytes", "not 201"],
        ),
        (
            "a channel name with a space",
            event("a b", "e", "x"),
            400,
            vec!["invalid channel name \"a b\"", "1 to 164 bytes"],
        ),
        (
            "a channel name of 165 bytes",
            event(&"c".repeat(165), "e", "x"),
            400,
            vec!["invalid channel name", "(165 bytes)"],
        ),
        (
            "channel and channels",
            json!({"name": "e", "channel": "news", "channels": ["news"], "data": "x"}).to_string(),
            400,
            vec!["channels or channel, not both"],
        ),
        (
            "no channel at all",
            json!({"name": "e", "data": "x"}).to_string(),
            400,
            vec!["channels (a list) or channel"],
        ),
        (
            "an encrypted channel with another",
            json!({"name": "e", "channels": ["private-encrypted-a", "news"], "data": "x"})
                .to_string(),
            400,
            vec!["encrypted channel", "that channel only"],
        ),
        (
            "a socket_id that is not one",
            json!({"name": "e", "channel": "news", "data": "x", "socket_id": "abc"}).to_string(),
            400,
            vec!["socket_id \"abc\"", "123.456"],
        ),
        (
            "an unknown info attribute",
            json!({"name": "e", "channel": "news", "data": "x", "info": "colour"}).to_string(),
            400,
            vec!["unknown info attribute \"colour\""],
        ),
        (
            "user_count of a public channel",
            json!({"name": "e", "channel": "news", "data": "x", "info": "user_count"}).to_string(),
            400,
            vec!["user_count is for presence channels only", "\"news\""],
        ),
        (
            "malformed JSON",
            "{\"name\": \"e\", ".to_owned(),
            400,
            vec!["the body is not an event", "EOF"],
        ),
        (
            "not an object",
            "[1, 2]".to_owned(),
            400,
            vec!["the body is not an event", "invalid type"],
        ),
        (
            "no name",
            json!({"channel": "news", "data": "x"}).to_string(),
            400,
            vec!["the body is not an event", "missing field `name`"],
        ),
        (
            "no data",
            json!({"name": "e", "channel": "news"}).to_string(),
            400,
            vec!["missing field `data`"],
        ),
        (
            "a field Pusher does not have",
            json!({"name": "e", "channel": "news", "data": "x", "colour": 1}).to_string(),
            400,
            vec!["unknown field `colour`"],
        ),
        (
            "a name that is a number",
            json!({"name": 5, "channel": "news", "data": "x"}).to_string(),
            400,
            vec!["name: invalid type: integer `5`"],
        ),
    ];
    for (why, body, status, names) in &cases {
        let answer = send(&s, "POST", &events, body, &right).await;
        refused(why, &answer, *status, names);
    }
    // The bound itself is taken.
    let fits = event("news", "fits", &"x".repeat(10_240));
    let answer = send(&s, "POST", &events, &fits, &right).await;
    assert_eq!((answer.status, answer.body.as_str()), (200, "{}"));
    let got = witness.recv().await;
    assert_eq!(got["event"], "fits", "nothing refused was sent first");
    let last = event("news", "last", "ok");
    assert_eq!(send(&s, "POST", &events, &last, &right).await.status, 200);
    assert_eq!(witness.recv().await["event"], "last");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue_44_every_bad_signature_names_what_failed() {
    let s = Server::start_with(config()).await;
    let (mut witness, _) = socket(&s).await;
    subscribe(&mut witness, "news").await;
    let events = format!("/apps/{ID}/events");
    let body = event("news", "forged", "x");
    let body_md5 = md5_hex(&body);
    let now = now_s();
    let right = Signing::right();
    let cases: Vec<(&str, Signing, u16, Vec<&str>)> = vec![
        (
            "a wrong secret",
            Signing {
                secret: "not-the-secret".into(),
                ..right.clone()
            },
            401,
            vec![
                "invalid signature",
                "HMAC-SHA256",
                "POST\\n/apps/77/events\\n",
            ],
        ),
        (
            "an unknown key",
            Signing {
                key: Some("other-key".into()),
                ..right.clone()
            },
            401,
            vec!["unknown auth_key \"other-key\"", "app \"77\""],
        ),
        (
            "no key",
            Signing {
                key: None,
                ..right.clone()
            },
            401,
            vec!["auth_key is missing"],
        ),
        (
            "a timestamp 601 s old",
            Signing {
                timestamp: Some((now - 601).to_string()),
                ..right.clone()
            },
            401,
            vec![
                "auth_timestamp",
                "s from the server's time",
                "600 s away at most",
            ],
        ),
        (
            "a timestamp 601 s ahead",
            Signing {
                timestamp: Some((now + 601).to_string()),
                ..right.clone()
            },
            401,
            vec!["auth_timestamp", "600 s away at most"],
        ),
        (
            "a timestamp that is not a number",
            Signing {
                timestamp: Some("soon".into()),
                ..right.clone()
            },
            401,
            vec!["auth_timestamp \"soon\" is not a whole number of seconds"],
        ),
        (
            "no timestamp",
            Signing {
                timestamp: None,
                ..right.clone()
            },
            401,
            vec!["auth_timestamp is missing"],
        ),
        (
            "another auth_version",
            Signing {
                version: Some("2.0".into()),
                ..right.clone()
            },
            401,
            vec!["auth_version \"2.0\" is not 1.0"],
        ),
        (
            "no auth_version",
            Signing {
                version: None,
                ..right.clone()
            },
            401,
            vec!["auth_version is missing"],
        ),
        (
            "the MD5 of another body",
            Signing {
                body_md5: Some(Some(md5_hex("another body"))),
                ..right.clone()
            },
            401,
            vec!["body_md5", "does not match the body", &body_md5],
        ),
        (
            "no body_md5 for a body",
            Signing {
                body_md5: Some(None),
                ..right.clone()
            },
            401,
            vec!["body_md5 is missing"],
        ),
        (
            "no signature",
            Signing {
                signed: false,
                ..right.clone()
            },
            401,
            vec!["auth_signature is missing"],
        ),
        (
            "a parameter given twice",
            right.clone().with("auth_key", KEY),
            400,
            vec!["the query parameter \"auth_key\" is given twice"],
        ),
    ];
    for (why, signing, status, names) in &cases {
        let answer = send(&s, "POST", &events, &body, signing).await;
        refused(why, &answer, *status, names);
    }
    // An app id no app has: 404, naming it.
    let answer = send(&s, "POST", "/apps/78/events", &body, &right).await;
    refused(
        "an unknown app id",
        &answer,
        404,
        &["unknown app", "\"78\""],
    );
    // A body past the API's bound of 256 KiB (under the server's 4 MiB),
    // its length declared and not: through the whole application without
    // a socket, which a server may close before reading all of it.
    let app = herenow_server::app(s.state.clone());
    let huge = event("news", "e", &"x".repeat(300 * 1024));
    for declared in [true, false] {
        let uri = target("POST", &events, &huge, &right);
        let request = Request::post(uri).header(header::CONTENT_TYPE, "application/json");
        let request = if declared {
            request
                .header(header::CONTENT_LENGTH, huge.len())
                .body(Body::from(huge.clone()))
        } else {
            let chunks: Vec<Result<Vec<u8>, std::io::Error>> = huge
                .as_bytes()
                .chunks(64 * 1024)
                .map(|c| Ok(c.to_vec()))
                .collect();
            request.body(Body::from_stream(futures::stream::iter(chunks)))
        };
        let answer = call(&app, request.unwrap()).await;
        let answer = Answer {
            status: answer.status.as_u16(),
            content_type: answer.headers[header::CONTENT_TYPE]
                .to_str()
                .unwrap()
                .to_owned(),
            body: String::from_utf8(answer.body).unwrap(),
        };
        refused(
            &format!("a 300 KiB body, declared: {declared}"),
            &answer,
            413,
            &["the request body is larger than 256 KiB"],
        );
    }

    let last = event("news", "last", "ok");
    assert_eq!(send(&s, "POST", &events, &last, &right).await.status, 200);
    assert_eq!(
        witness.recv().await["event"],
        "last",
        "nothing refused was sent"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue_44_every_bad_batch_names_the_event_and_the_problem() {
    let s = Server::start_with(config()).await;
    let (mut witness, _) = socket(&s).await;
    subscribe(&mut witness, "news").await;
    let path = format!("/apps/{ID}/batch_events");
    let ok = json!({"name": "e", "channel": "news", "data": "x"});
    let batch = |events: Vec<Value>| json!({ "batch": events }).to_string();
    let cases: Vec<(&str, String, u16, Vec<&str>)> = vec![
        (
            "11 events",
            batch(vec![ok.clone(); 11]),
            400,
            vec!["a batch holds 1 to 10 events, not 11"],
        ),
        (
            "no event",
            batch(vec![]),
            400,
            vec!["a batch holds 1 to 10 events, not 0"],
        ),
        (
            "a list of channels",
            batch(vec![
                json!({"name": "e", "channels": ["news"], "data": "x"}),
            ]),
            400,
            vec!["batch[0]", "one channel"],
        ),
        (
            "an empty name in the second",
            batch(vec![
                ok.clone(),
                json!({"name": "", "channel": "news", "data": "x"}),
            ]),
            400,
            vec!["batch[1]: an event name is 1 to 200 bytes"],
        ),
        (
            "10,241 bytes of data in the third",
            batch(vec![
                ok.clone(),
                ok.clone(),
                json!({"name": "e", "channel": "news", "data": "x".repeat(10_241)}),
            ]),
            413,
            vec!["batch[2]: the event data is larger than 10 KB"],
        ),
        (
            "a bad channel in the second",
            batch(vec![
                ok.clone(),
                json!({"name": "e", "channel": "a/b", "data": "x"}),
            ]),
            400,
            vec!["batch[1]: invalid channel name \"a/b\""],
        ),
        (
            "no name in the third",
            batch(vec![
                ok.clone(),
                ok.clone(),
                json!({"channel": "news", "data": "x"}),
            ]),
            400,
            vec![
                "the body is not a batch of events",
                "batch[2]",
                "missing field `name`",
            ],
        ),
        (
            "no batch",
            json!({"events": []}).to_string(),
            400,
            vec![
                "the body is not a batch of events",
                "unknown field `events`",
            ],
        ),
        (
            "not JSON",
            "batch".to_owned(),
            400,
            vec!["the body is not a batch of events", "expected"],
        ),
    ];
    for (why, body, status, names) in &cases {
        let answer = send(&s, "POST", &path, body, &Signing::right()).await;
        refused(why, &answer, *status, names);
    }
    let last = batch(vec![
        json!({"name": "last", "channel": "news", "data": "ok"}),
    ]);
    let answer = send(&s, "POST", &path, &last, &Signing::right()).await;
    assert_eq!((answer.status, answer.body.as_str()), (200, "{}"));
    assert_eq!(
        witness.recv().await["event"],
        "last",
        "no event of a refused batch was sent"
    );
}

/// Why, the method, the path, how it is signed, the status, what the
/// body names.
type QueryCase = (
    &'static str,
    &'static str,
    String,
    Signing,
    u16,
    Vec<&'static str>,
);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue_44_every_bad_query_names_the_problem() {
    let s = Server::start_with(config()).await;
    let right = Signing::right();
    let long_user = format!("/apps/{ID}/users/{}/terminate_connections", "u".repeat(257));
    let cases: Vec<QueryCase> = vec![
        (
            "user_count of every channel",
            "GET",
            format!("/apps/{ID}/channels"),
            right.clone().with("info", "user_count"),
            400,
            vec!["info=user_count needs filter_by_prefix=presence-"],
        ),
        (
            "a bad channel name",
            "GET",
            format!("/apps/{ID}/channels/a%20b"),
            right.clone(),
            400,
            vec!["invalid channel name \"a b\""],
        ),
        (
            "a channel name that is not UTF-8",
            "GET",
            format!("/apps/{ID}/channels/%FF"),
            right.clone(),
            400,
            vec!["not UTF-8", "channel"],
        ),
        (
            "user_count of a public channel",
            "GET",
            format!("/apps/{ID}/channels/news"),
            right.clone().with("info", "user_count"),
            400,
            vec!["user_count is for presence channels only", "\"news\""],
        ),
        (
            "an unknown info attribute",
            "GET",
            format!("/apps/{ID}/channels/news"),
            right.clone().with("info", "colour"),
            400,
            vec!["unknown info attribute \"colour\""],
        ),
        (
            "users of a public channel",
            "GET",
            format!("/apps/{ID}/channels/news/users"),
            right.clone(),
            400,
            vec!["presence channels only", "\"news\""],
        ),
        (
            "users of a bad channel name",
            "GET",
            format!("/apps/{ID}/channels/a%2Fb/users"),
            right.clone(),
            400,
            vec!["invalid channel name \"a/b\""],
        ),
        (
            "a user id with a control character",
            "POST",
            format!("/apps/{ID}/users/a%07b/terminate_connections"),
            right.clone(),
            400,
            vec!["user id \"a\\u{7}b\"", "control character"],
        ),
        (
            "a user id of 257 bytes",
            "POST",
            long_user,
            right.clone(),
            400,
            vec!["user id", "257 bytes"],
        ),
        (
            "a wrong secret on a query",
            "GET",
            format!("/apps/{ID}/channels"),
            Signing {
                secret: "not-the-secret".into(),
                ..right.clone()
            },
            401,
            vec!["invalid signature"],
        ),
        (
            "an unknown app id on a query",
            "GET",
            "/apps/78/channels/news".to_owned(),
            right.clone(),
            404,
            vec!["unknown app", "\"78\""],
        ),
    ];
    for (why, method, path, signing, status, names) in &cases {
        let answer = send(&s, method, path, "", signing).await;
        refused(why, &answer, *status, names);
    }
    // The same requests, right, are answered.
    let answer = send(&s, "GET", &format!("/apps/{ID}/channels/news"), "", &right).await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    let path = format!("/apps/{ID}/users/ann/terminate_connections");
    let answer = send(&s, "POST", &path, "", &right).await;
    assert_eq!((answer.status, answer.body.as_str()), (200, "{}"));
    // Every library sends body_md5, even of an empty body (PyPI `pusher`).
    let with_md5 = Signing {
        body_md5: Some(Some(md5_hex(""))),
        ..right.clone()
    };
    let answer = send(&s, "GET", &format!("/apps/{ID}/channels"), "", &with_md5).await;
    assert_eq!(answer.status, 200, "{}", answer.body);
}
