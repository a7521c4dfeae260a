//! A Pusher app for tests: its config, its signatures, a socket that
//! waits for `pusher:connection_established`, and the signed HTTP API
//! over a raw socket.

use hmac::{Hmac, Mac};
use serde_json::{Value, json};
use sha2::Sha256;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::ws::{Client, Server};
use herenow_server::{Config, PusherApp, PusherConfig};

/// The app's id, key and secret.
pub const ID: &str = "77";
pub const KEY: &str = "test-key";
pub const SECRET: &str = "test-secret-1234";

/// A config serving the app.
pub fn config() -> Config {
    let app: PusherApp = format!("{ID}:{KEY}:{SECRET}").parse().unwrap();
    Config {
        pusher: PusherConfig {
            apps: vec![app],
            ..PusherConfig::default()
        },
        ..Config::default()
    }
}

/// HMAC-SHA256 of `message` under the app's secret, in hex.
pub fn hmac_hex(message: &str) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(SECRET.as_bytes()).unwrap();
    mac.update(message.as_bytes());
    mac.finalize()
        .into_bytes()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A connected socket and its socket id.
pub async fn socket(s: &Server) -> (Client, String) {
    let mut c = s
        .connect_to(&format!("ws://{}/app/{KEY}?protocol=7&client=test", s.addr))
        .await;
    let hello = c.recv().await;
    assert_eq!(hello["event"], "pusher:connection_established");
    assert!(data(&hello)["activity_timeout"].as_u64().unwrap() > 0);
    let id = data(&hello)["socket_id"].as_str().unwrap().to_owned();
    (c, id)
}

/// The data of a message, parsed from its JSON string.
pub fn data(m: &Value) -> Value {
    match &m["data"] {
        Value::String(s) => serde_json::from_str(s).unwrap(),
        other => other.clone(),
    }
}

/// `pusher:signin` with `user_data`, signed as `authenticateUser` signs.
pub async fn signin(c: &mut Client, socket_id: &str, user_data: &Value) {
    let user_data = user_data.to_string();
    let auth = format!(
        "{KEY}:{}",
        hmac_hex(&format!("{socket_id}::user::{user_data}"))
    );
    c.send(json!({"event": "pusher:signin", "data": {"auth": auth, "user_data": user_data}}))
        .await;
}

/// A public subscription, answered.
pub async fn subscribe(c: &mut Client, channel: &str) {
    c.send(json!({"event": "pusher:subscribe", "data": {"channel": channel}}))
        .await;
    let ok = c.recv().await;
    assert_eq!(
        ok["event"], "pusher_internal:subscription_succeeded",
        "{ok}"
    );
}

/// The server's clock in seconds.
pub fn now_s() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// A request to the HTTP API, signed as Pusher's libraries sign it; its
/// status and body.
pub async fn api(s: &Server, method: &str, path: &str, body: &str) -> (u16, String) {
    signed(s, method, path, body, &[], now_s(), None).await
}

/// One signed request with `extra` query parameters and `timestamp`;
/// `tamper` changes the query after signing. Its status and body.
pub async fn signed(
    s: &Server,
    method: &str,
    path: &str,
    body: &str,
    extra: &[(&str, &str)],
    timestamp: u64,
    tamper: Option<(&str, &str)>,
) -> (u16, String) {
    let mut params: Vec<(String, String)> = vec![
        ("auth_key".into(), KEY.into()),
        ("auth_timestamp".into(), timestamp.to_string()),
        ("auth_version".into(), "1.0".into()),
    ];
    if !body.is_empty() {
        use md5::{Digest, Md5};
        let digest = Md5::digest(body.as_bytes());
        let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
        params.push(("body_md5".into(), hex));
    }
    for (k, v) in extra {
        params.push(((*k).into(), (*v).into()));
    }
    params.sort();
    let query: Vec<String> = params.iter().map(|(k, v)| format!("{k}={v}")).collect();
    let query = query.join("&");
    let signature = hmac_hex(&format!("{method}\n{path}\n{query}"));
    let mut query = format!("{query}&auth_signature={signature}");
    if let Some((from, to)) = tamper {
        query = query.replace(from, to);
    }
    let mut stream = tokio::net::TcpStream::connect(s.addr).await.unwrap();
    let request = format!(
        "{method} {path}?{query} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        s.addr,
        body.len()
    );
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).await.unwrap();
    let status = answer
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap();
    let body = answer
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default();
    (status, body)
}

/// Triggers `name` with `data` on `channel` through `s`'s API.
pub async fn trigger(s: &Server, channel: &str, name: &str, data: &str) {
    let body = json!({"name": name, "channel": channel, "data": data}).to_string();
    let (status, answer) = api(s, "POST", &format!("/apps/{ID}/events"), &body).await;
    assert_eq!(status, 200, "{answer}");
}
