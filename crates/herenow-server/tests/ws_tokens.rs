//! Tokens: `POST /v1/tokens` through the router (answers, bad input, API
//! key scopes, the OpenAPI document), and what `/v1/ws` does with good,
//! forged, expired, foreign and guest tokens on a real socket.

mod support;

use axum::body::Body;
use axum::http::{Method, Request, StatusCode, header};
use herenow_core::{MemberKind, SpaceName, Status};
use herenow_server::token::{Spaces, Tokens, now_s};
use herenow_server::{AppState, Config, TokenSecret, app};
use serde_json::{Value, json};
use support::http::{call, get};
use support::ws::Server;
use support::{guest_key, user_key};

fn secret(s: &str) -> TokenSecret {
    TokenSecret::new(s.repeat(32).into_bytes()).unwrap()
}

async fn mint(state: &AppState, key: Option<&str>, body: &str) -> (StatusCode, Value) {
    let mut r = Request::builder()
        .method(Method::POST)
        .uri("/v1/tokens")
        .header(header::CONTENT_TYPE, "application/json");
    if let Some(key) = key {
        r = r.header(header::AUTHORIZATION, format!("Bearer {key}"));
    }
    let answer = call(
        &app(state.clone()),
        r.body(Body::from(body.to_owned())).unwrap(),
    )
    .await;
    (
        answer.status,
        serde_json::from_slice(&answer.body).unwrap_or(Value::Null),
    )
}

#[tokio::test]
async fn post_tokens_mints_a_token_the_server_accepts() {
    let s = Server::start().await;
    let before_ms = now_s() * 1000;
    let (status, answer) = mint(
        &s.state,
        None,
        r#"{"user": "ann", "spaces": ["room:1", "room:2"], "ttl_s": 600}"#,
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{answer}");
    let token = answer["token"].as_str().unwrap();
    let expires = answer["expires_at_ms"].as_u64().unwrap();
    assert!(expires >= before_ms + 600_000 && expires <= before_ms + 602_000);
    let grant = s.state.tokens().verify(token).unwrap();
    assert_eq!(grant.member, user_key("ann"));
    assert_eq!(grant.spaces.names(), ["room:1", "room:2"]);
    assert_eq!(grant.expires_at_s * 1000, expires);

    // Defaults: a user, an hour.
    let (status, answer) = mint(&s.state, None, r#"{"user": "bo", "spaces": ["*"]}"#).await;
    assert_eq!(status, StatusCode::CREATED);
    let grant = s
        .state
        .tokens()
        .verify(answer["token"].as_str().unwrap())
        .unwrap();
    assert_eq!(grant.spaces, Spaces::All);
    assert!(grant.expires_at_s >= now_s() + 3590);

    // The token opens a socket as that member.
    let mut c = s
        .connect_to(&format!(
            "ws://{}/v1/ws?token={}",
            s.addr,
            answer["token"].as_str().unwrap()
        ))
        .await;
    let w = c.recv().await;
    assert_eq!(w["member"], json!({"kind": "user", "id": "bo"}));
}

#[tokio::test]
async fn post_tokens_refuses_bad_input_with_problem_codes() {
    let s = Server::start().await;
    let many: Vec<String> = (0..33).map(|i| format!("s{i}")).collect();
    let many = json!({"user": "ann", "spaces": many}).to_string();
    let long_id = json!({"user": "x".repeat(257), "spaces": ["a"]}).to_string();
    for (body, code) in [
        (r#"{"user": "", "spaces": ["a"]}"#, "bad-member-id"),
        (long_id.as_str(), "bad-member-id"),
        (r#"{"user": "ann", "spaces": []}"#, "bad-spaces"),
        (many.as_str(), "bad-spaces"),
        (r#"{"user": "ann", "spaces": ["*", "a"]}"#, "bad-spaces"),
        (
            r#"{"user": "ann", "spaces": ["no spaces"]}"#,
            "bad-space-name",
        ),
        (r#"{"user": "ann", "spaces": ["a"], "ttl_s": 0}"#, "bad-ttl"),
        (
            r#"{"user": "ann", "spaces": ["a"], "ttl_s": 86401}"#,
            "bad-ttl",
        ),
        (
            r#"{"user": "ann", "spaces": ["a"], "ttl_s": -1}"#,
            "bad-json",
        ),
        (
            r#"{"user": "ann", "spaces": ["a"], "kind": "robot"}"#,
            "bad-json",
        ),
        (
            r#"{"user": "ann", "spaces": ["a"], "ttl": 5}"#,
            "unknown-field",
        ),
        (r#"{"spaces": ["a"]}"#, "bad-json"),
        ("{", "bad-json"),
    ] {
        let (status, problem) = mint(&s.state, None, body).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}: {problem}");
        assert_eq!(problem["code"], code, "{body}: {problem}");
    }
}

#[tokio::test]
async fn post_tokens_needs_a_write_key() {
    let config = Config {
        api_keys: vec![
            "reader-key-1:read".parse().unwrap(),
            "writer-key-1:write".parse().unwrap(),
        ],
        ..Config::default()
    };
    let s = Server::start_with(config).await;
    let body = r#"{"user": "ann", "spaces": ["a"]}"#;
    let (status, problem) = mint(&s.state, None, body).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert_eq!(problem["code"], "missing-api-key");
    let (status, problem) = mint(&s.state, Some("reader-key-1"), body).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert_eq!(problem["code"], "insufficient-scope");
    let (status, _) = mint(&s.state, Some("writer-key-1"), body).await;
    assert_eq!(status, StatusCode::CREATED);

    // The socket itself needs no key: the token is its credential.
    let (mut c, _) = s.hello("ann", &["a"]).await;
    assert_eq!(c.request(json!({"type": "ping"})).await["type"], "pong");
}

#[tokio::test]
async fn the_openapi_document_has_post_tokens() {
    let s = Server::start().await;
    let answer = get(&app(s.state.clone()), "/openapi.json").await;
    let doc: Value = serde_json::from_slice(&answer.body).unwrap();
    let op = &doc["paths"]["/v1/tokens"]["post"];
    assert_eq!(op["operationId"], "mint_token");
    assert!(op["responses"]["201"].is_object());
    assert!(op["responses"]["403"].is_object());
}

#[tokio::test]
async fn forged_expired_and_malformed_tokens_close_the_socket() {
    let s = Server::start().await;
    let foreign = Tokens::new(&secret("z"));
    let forged = foreign
        .mint(&user_key("ann"), &Spaces::All, now_s(), 3600)
        .unwrap();
    let expired = s
        .state
        .tokens()
        .mint(&user_key("ann"), &Spaces::All, now_s() - 7200, 3600)
        .unwrap();
    // A good token with its signature cut off, and one signed for another
    // member whose payload was swapped in.
    let good = s.token("ann", &["*"]);
    let unsigned = good.rsplit_once('.').unwrap().0.to_owned() + ".";
    let other = s.token("root", &["*"]);
    let mut parts: Vec<&str> = good.split('.').collect();
    parts[1] = other.split('.').nth(1).unwrap();
    let swapped = parts.join(".");
    for (token, code) in [
        (forged.as_str(), 4001),
        (expired.as_str(), 4002),
        ("", 4001),
        ("a.b.c", 4001),
        (unsigned.as_str(), 4001),
        (swapped.as_str(), 4001),
    ] {
        let mut c = s.connect().await;
        c.send(json!({"type": "hello", "token": token})).await;
        assert_eq!(c.closed().await, Some(code), "{token}");
        // The same in the URL.
        let mut c = s
            .connect_to(&format!("ws://{}/v1/ws?token={token}", s.addr))
            .await;
        assert_eq!(c.closed().await, Some(code), "{token} in the URL");
    }
}

#[tokio::test]
async fn servers_sharing_a_secret_accept_each_others_tokens() {
    let config = Config {
        token_secret: Some(secret("shared")),
        ..Config::default()
    };
    let a = Server::start_with(config.clone()).await;
    let b = Server::start_with(config).await;
    let other = Server::start_with(Config {
        token_secret: Some(secret("other")),
        ..Config::default()
    })
    .await;
    let random = Server::start().await;
    let token = a.token("ann", &["room"]);
    let mut c = b.connect().await;
    let w = c.request(json!({"type": "hello", "token": token})).await;
    assert_eq!(w["type"], "welcome");
    for s in [&other, &random] {
        let mut c = s.connect().await;
        c.send(json!({"type": "hello", "token": token})).await;
        assert_eq!(c.closed().await, Some(4001));
    }
}

#[tokio::test]
async fn a_guest_token_makes_a_guest_member() {
    let s = Server::start().await;
    let token = s.token_for(&guest_key("visitor-7"), &["lobby"]);
    let mut c = s.connect().await;
    let w = c.request(json!({"type": "hello", "token": token})).await;
    assert_eq!(w["member"], json!({"kind": "guest", "id": "visitor-7"}));
    c.ok(json!({"type": "join", "space": "lobby"})).await;
    let lobby = SpaceName::new("lobby").unwrap();
    let st = s
        .store
        .status(&lobby, &[guest_key("visitor-7")])
        .await
        .unwrap();
    assert_eq!(st[0].status, Status::Online);
    // Not the user of the same id.
    let st = s
        .store
        .status(&lobby, &[user_key("visitor-7")])
        .await
        .unwrap();
    assert_eq!(st[0].status, Status::Offline);
    let counts = s.store.count(&lobby, None).await.unwrap();
    assert_eq!((counts.users, counts.guests), (0, 1));
    let members = c.subscribe("lobby").await;
    assert_eq!(members[0]["kind"], "guest");
    assert_eq!(
        s.state.tokens().verify(&token).unwrap().member.kind,
        MemberKind::Guest
    );
}

#[tokio::test]
async fn a_token_for_one_space_cannot_reach_another() {
    let s = Server::start().await;
    let (mut c, w) = s.hello("ann", &["room:1"]).await;
    assert_eq!(w["spaces"], json!(["room:1"]));
    assert_eq!(
        c.error(json!({"type": "join", "space": "room:2"})).await,
        "space-not-allowed"
    );
    assert_eq!(
        c.error(json!({"type": "subscribe", "space": "room:2"}))
            .await,
        "space-not-allowed"
    );
    c.ok(json!({"type": "join", "space": "room:1"})).await;
    let st = s
        .store
        .status(&SpaceName::new("room:2").unwrap(), &[user_key("ann")])
        .await
        .unwrap();
    assert_eq!(st[0].status, Status::Offline);
}
