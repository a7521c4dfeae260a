//! A webhook receiver for tests, on a loopback socket: plain HTTP/1.1 by
//! hand (keep-alive included), so it can do what a framework would not
//! let a handler do: hang, or close the connection mid-request. Each
//! request is recorded, then answered by the next scripted [`Reply`]
//! (`200` once the script is empty). Signatures are checked by
//! [`verify`], written from the Standard Webhooks specification with its
//! own HMAC over SHA-256, independently of the server's signer.

#![allow(dead_code)]

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use sha2::{Digest, Sha256};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio::time::Instant;

/// How the receiver answers one request.
#[derive(Clone, Copy, Debug)]
pub enum Reply {
    /// `200 OK`.
    Ok,
    /// That status, no body.
    Status(u16),
    /// `429` with `Retry-After: SECONDS`.
    RetryAfter(u64),
    /// Never answers (the connection stays open).
    Hang,
    /// Closes the connection without answering.
    Close,
}

/// One request as received.
#[derive(Clone, Debug)]
pub struct Received {
    /// The request's path (`/hook`).
    pub path: String,
    /// `webhook-id`.
    pub id: String,
    /// `webhook-timestamp`.
    pub timestamp: String,
    /// `webhook-signature`.
    pub signature: String,
    /// `content-type`.
    pub content_type: String,
    /// `x-pusher-key` (webhooks in Pusher's format).
    pub pusher_key: String,
    /// `x-pusher-signature` (webhooks in Pusher's format).
    pub pusher_signature: String,
    /// The body's bytes.
    pub body: Vec<u8>,
    /// When it arrived, by tokio's clock.
    pub at: Instant,
}

impl Received {
    /// The body's `data.events`.
    pub fn events(&self) -> Vec<serde_json::Value> {
        let body: serde_json::Value = serde_json::from_slice(&self.body).expect("JSON body");
        body["data"]["events"]
            .as_array()
            .expect("data.events")
            .clone()
    }
}

/// A receiver listening on loopback.
pub struct Receiver {
    /// Its address.
    pub addr: SocketAddr,
    script: Arc<Mutex<VecDeque<Reply>>>,
    got: mpsc::UnboundedReceiver<Received>,
    task: tokio::task::JoinHandle<()>,
}

impl Receiver {
    /// A receiver on a free port.
    pub async fn start() -> Self {
        Self::on(TcpListener::bind("127.0.0.1:0").await.unwrap())
    }

    /// A receiver on `listener`.
    pub fn on(listener: TcpListener) -> Self {
        let addr = listener.local_addr().unwrap();
        let script = Arc::new(Mutex::new(VecDeque::new()));
        let (tx, got) = mpsc::unbounded_channel();
        let s = script.clone();
        let task = tokio::spawn(async move {
            loop {
                let Ok((socket, _)) = listener.accept().await else {
                    return;
                };
                tokio::spawn(serve(socket, s.clone(), tx.clone()));
            }
        });
        Self {
            addr,
            script,
            got,
            task,
        }
    }

    /// The URL to configure: `http://ADDR/hook`.
    pub fn url(&self) -> String {
        format!("http://{}/hook", self.addr)
    }

    /// Answers the next requests so, in order.
    pub fn script(&self, replies: impl IntoIterator<Item = Reply>) {
        self.script.lock().unwrap().extend(replies);
    }

    /// The next request, within `patience`.
    pub async fn next_within(&mut self, patience: Duration) -> Received {
        tokio::time::timeout(patience, self.got.recv())
            .await
            .expect("a webhook request in time")
            .expect("the receiver runs")
    }

    /// The next request, within 20 s.
    pub async fn next(&mut self) -> Received {
        self.next_within(Duration::from_secs(20)).await
    }

    /// A request if one arrived already.
    pub fn try_next(&mut self) -> Option<Received> {
        self.got.try_recv().ok()
    }

    /// Requests until `n` events arrived in them (each request's events
    /// counted once per request, so redeliveries count again).
    pub async fn events(&mut self, n: usize) -> Vec<serde_json::Value> {
        let mut out = Vec::new();
        while out.len() < n {
            out.extend(self.next().await.events());
        }
        out
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn serve(
    socket: TcpStream,
    script: Arc<Mutex<VecDeque<Reply>>>,
    got: mpsc::UnboundedSender<Received>,
) {
    let mut socket = BufReader::new(socket);
    loop {
        let mut headers = Vec::new();
        loop {
            let mut line = String::new();
            match socket.read_line(&mut line).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
            let line = line.trim_end().to_owned();
            if line.is_empty() {
                break;
            }
            headers.push(line);
        }
        let header = |name: &str| {
            headers
                .iter()
                .filter_map(|h| h.split_once(':'))
                .find(|(k, _)| k.trim().eq_ignore_ascii_case(name))
                .map(|(_, v)| v.trim().to_owned())
                .unwrap_or_default()
        };
        let path = headers
            .first()
            .and_then(|l| l.split_whitespace().nth(1))
            .unwrap_or_default()
            .to_owned();
        let len: usize = header("content-length").parse().unwrap_or(0);
        let mut body = vec![0; len];
        if socket.read_exact(&mut body).await.is_err() {
            return;
        }
        let _ = got.send(Received {
            path,
            id: header("webhook-id"),
            timestamp: header("webhook-timestamp"),
            signature: header("webhook-signature"),
            content_type: header("content-type"),
            pusher_key: header("x-pusher-key"),
            pusher_signature: header("x-pusher-signature"),
            body,
            at: Instant::now(),
        });
        let reply = script.lock().unwrap().pop_front().unwrap_or(Reply::Ok);
        let answer = match reply {
            Reply::Ok => "HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n".to_owned(),
            Reply::Status(s) => format!("HTTP/1.1 {s} Status\r\ncontent-length: 0\r\n\r\n"),
            Reply::RetryAfter(secs) => format!(
                "HTTP/1.1 429 Too Many Requests\r\nretry-after: {secs}\r\ncontent-length: 0\r\n\r\n"
            ),
            Reply::Hang => return std::future::pending().await,
            Reply::Close => return,
        };
        if socket.get_mut().write_all(answer.as_bytes()).await.is_err() {
            return;
        }
    }
}

/// HMAC-SHA256 as RFC 2104 defines it, over the `sha2` digest alone.
pub fn hmac_sha256(key: &[u8], message: &[u8]) -> [u8; 32] {
    let mut block = [0u8; 64];
    if key.len() > 64 {
        block[..32].copy_from_slice(&Sha256::digest(key));
    } else {
        block[..key.len()].copy_from_slice(key);
    }
    let pad = |byte: u8| block.iter().map(|b| b ^ byte).collect::<Vec<u8>>();
    let inner = Sha256::new()
        .chain_update(pad(0x36))
        .chain_update(message)
        .finalize();
    Sha256::new()
        .chain_update(pad(0x5c))
        .chain_update(inner)
        .finalize()
        .into()
}

/// Whether `signature` (a `webhook-signature` header: space-separated
/// `v1,BASE64` entries) holds a valid signature of `body` sent as
/// message `id` at `timestamp`, under `secret` (`whsec_BASE64`).
pub fn verify(secret: &str, id: &str, timestamp: &str, body: &[u8], signature: &str) -> bool {
    let Some(key) = secret
        .strip_prefix("whsec_")
        .and_then(|b| STANDARD.decode(b).ok())
    else {
        return false;
    };
    let mut signed = format!("{id}.{timestamp}.").into_bytes();
    signed.extend_from_slice(body);
    let expected = format!("v1,{}", STANDARD.encode(hmac_sha256(&key, &signed)));
    signature.split(' ').any(|s| s == expected)
}

/// Whether `signature` (an `x-pusher-signature` header) is the hex
/// HMAC-SHA256 of `body` under a Pusher app's `secret`, as Pusher's
/// server libraries check it.
pub fn verify_pusher(secret: &str, body: &[u8], signature: &str) -> bool {
    let expected: String = hmac_sha256(secret.as_bytes(), body)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    signature == expected
}

/// `(type, member)` of each event of a request's body; `-` for a space's
/// own events (`occupied`, `vacated`).
pub fn said(events: &[serde_json::Value]) -> Vec<(String, String)> {
    events
        .iter()
        .map(|e| {
            (
                e["type"].as_str().unwrap().to_owned(),
                e["member"].as_str().unwrap_or("-").to_owned(),
            )
        })
        .collect()
}
