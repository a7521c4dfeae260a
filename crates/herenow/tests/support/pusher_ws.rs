//! A Pusher client for the binary's tests, synchronous: a socket on
//! `/app/KEY` that subscribes with signatures made by a given secret, and
//! the signed HTTP API. Included by path where used
//! (`#[path = "support/pusher_ws.rs"] mod pusher_ws;`), beside the
//! webhook receiver whose HMAC it signs with.

// Each test file uses part of this.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};

use serde_json::{Value, json};
use tungstenite::Message;
use tungstenite::stream::MaybeTlsStream;

use crate::receiver::hmac_sha256;
use crate::support::{DEADLINE, now_ms};

type Ws = tungstenite::WebSocket<MaybeTlsStream<TcpStream>>;

/// HMAC-SHA256 of `message` under `secret`, in hex, as Pusher signs.
pub fn sign(secret: &str, message: &str) -> String {
    hmac_sha256(secret.as_bytes(), message.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// How a connection ended before it was served: the `pusher:error` the
/// server sent, and the close code.
#[derive(Debug)]
pub struct Refused {
    pub error: Option<Value>,
    pub close: Option<u16>,
}

impl Refused {
    /// The `code` of the `pusher:error` sent before the close.
    pub fn code(&self) -> Option<u64> {
        self.error.as_ref().and_then(|e| data(e)["code"].as_u64())
    }
}

/// A served socket.
pub struct Socket {
    ws: Ws,
    pub key: String,
    pub socket_id: String,
}

/// A socket to app `key` of the server at `addr`: served
/// (`pusher:connection_established`) or refused.
pub fn connect(addr: SocketAddr, key: &str) -> Result<Socket, Refused> {
    let url = format!("ws://{addr}/app/{key}?protocol=7&client=test");
    let (mut ws, _) = tungstenite::connect(url).expect("the upgrade failed");
    if let MaybeTlsStream::Plain(s) = ws.get_ref() {
        s.set_read_timeout(Some(DEADLINE)).unwrap();
    }
    match read(&mut ws) {
        Ok(hello) if hello["event"] == "pusher:connection_established" => {
            let socket_id = data(&hello)["socket_id"].as_str().unwrap().to_owned();
            Ok(Socket {
                ws,
                key: key.to_owned(),
                socket_id,
            })
        }
        Ok(error) => Err(Refused {
            error: Some(error),
            close: until_close(&mut ws),
        }),
        Err(close) => Err(Refused { error: None, close }),
    }
}

/// The data of a message, parsed from its JSON string.
pub fn data(m: &Value) -> Value {
    match &m["data"] {
        Value::String(s) => serde_json::from_str(s).unwrap_or(Value::String(s.clone())),
        other => other.clone(),
    }
}

/// The next message, or the close code. The server's pings are answered
/// and skipped.
fn read(ws: &mut Ws) -> Result<Value, Option<u16>> {
    loop {
        match ws.read() {
            Ok(Message::Text(t)) => {
                let v: Value = serde_json::from_str(t.as_str()).unwrap();
                if v["event"] == "pusher:ping" {
                    let pong = json!({"event": "pusher:pong", "data": {}}).to_string();
                    let _ = ws.send(Message::text(pong));
                    continue;
                }
                return Ok(v);
            }
            Ok(Message::Close(frame)) => return Err(frame.map(|f| u16::from(f.code))),
            Ok(_) => continue,
            Err(tungstenite::Error::ConnectionClosed | tungstenite::Error::AlreadyClosed) => {
                return Err(None);
            }
            Err(e) => panic!("reading the socket: {e}"),
        }
    }
}

/// Reads until the close; its code.
fn until_close(ws: &mut Ws) -> Option<u16> {
    loop {
        if let Err(code) = read(ws) {
            return code;
        }
    }
}

impl Socket {
    /// Sends `message`.
    pub fn send(&mut self, message: Value) {
        self.ws
            .send(Message::text(message.to_string()))
            .expect("send on the socket");
    }

    /// The next message, or the close code.
    pub fn recv(&mut self) -> Result<Value, Option<u16>> {
        read(&mut self.ws)
    }

    /// Reads until the server closes; the close code.
    pub fn closed(&mut self) -> Option<u16> {
        until_close(&mut self.ws)
    }

    /// Whether the socket still answers: a `pusher:ping` gets its pong,
    /// whatever came before it (returned).
    pub fn ping(&mut self) -> Vec<Value> {
        self.send(json!({"event": "pusher:ping", "data": {}}));
        let mut before = Vec::new();
        loop {
            let m = self.recv().expect("the socket is open");
            if m["event"] == "pusher:pong" {
                return before;
            }
            before.push(m);
        }
    }

    /// `pusher:subscribe` to a `private-` or `presence-` channel, signed
    /// with `secret` (and `channel_data` for presence); the answer.
    pub fn subscribe(
        &mut self,
        channel: &str,
        secret: &str,
        channel_data: Option<&Value>,
    ) -> Value {
        let channel_data = channel_data.map(Value::to_string);
        let message = match &channel_data {
            Some(d) => format!("{}:{channel}:{d}", self.socket_id),
            None => format!("{}:{channel}", self.socket_id),
        };
        let auth = format!("{}:{}", self.key, sign(secret, &message));
        let mut data = json!({"channel": channel, "auth": auth});
        if let Some(d) = channel_data {
            data["channel_data"] = Value::String(d);
        }
        self.send(json!({"event": "pusher:subscribe", "data": data}));
        self.recv().expect("an answer to pusher:subscribe")
    }
}

/// `POST /apps/{app_id}/events` with `body`, signed by `key` and `secret`
/// as Pusher's libraries sign it; the status and body.
pub fn trigger(
    addr: SocketAddr,
    app_id: &str,
    key: &str,
    secret: &str,
    body: &Value,
) -> (u16, String) {
    use md5::{Digest, Md5};
    let body = body.to_string();
    let path = format!("/apps/{app_id}/events");
    let md5: String = Md5::digest(body.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let timestamp = now_ms() / 1000;
    let query =
        format!("auth_key={key}&auth_timestamp={timestamp}&auth_version=1.0&body_md5={md5}");
    let signature = sign(secret, &format!("POST\n{path}\n{query}"));
    let mut stream = TcpStream::connect(addr).unwrap();
    stream.set_read_timeout(Some(DEADLINE)).unwrap();
    let request = format!(
        "POST {path}?{query}&auth_signature={signature} HTTP/1.1\r\nHost: {addr}\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
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
