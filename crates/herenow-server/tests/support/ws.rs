//! WebSocket tests' tools: a server on a real loopback socket over a
//! memory store with a [`ManualClock`], and a WebSocket client
//! (tokio-tungstenite) that reads JSON messages with a deadline.

use std::net::SocketAddr;
use std::sync::Arc;

use futures::{SinkExt, StreamExt};
use herenow_core::{ManualClock, MemberKey, PresenceStore};
use herenow_server::token::{Spaces, now_s};
use herenow_server::{AppState, Backend, Config, ServerError, serve};
use serde_json::{Value, json};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

use super::{PATIENCE, T0, memory_backend, memory_store, user_key};

/// A server serving a memory store whose clock only the test moves.
pub struct Server {
    pub addr: SocketAddr,
    pub state: AppState,
    pub store: Arc<dyn PresenceStore>,
    pub clock: ManualClock,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<Result<(), ServerError>>>,
}

impl Server {
    pub async fn start() -> Server {
        Self::start_with(Config::default()).await
    }

    pub async fn start_with(config: Config) -> Server {
        let clock = ManualClock::new(T0);
        Self::serve(memory_backend(memory_store(&clock)), config, clock).await
    }

    /// Serves a Redis store at `url` (the test's own `redis-server`),
    /// whose clock is `clock`.
    #[cfg(feature = "redis")]
    pub async fn on_redis(url: &str, config: Config, clock: &ManualClock) -> Server {
        let store = herenow_redis::RedisStore::connect(
            url,
            Arc::new(clock.clone()),
            herenow_core::SpaceConfig::default(),
            herenow_redis::RedisOptions::default(),
        )
        .await
        .expect("connect to the test's redis-server");
        Self::serve(super::redis_backend(Arc::new(store)), config, clock.clone()).await
    }

    /// Serves a store the caller opened, whose clock is `clock`.
    pub async fn serve(backend: Backend, config: Config, clock: ManualClock) -> Server {
        let state = AppState::new(backend, &config);
        let store = state.store().clone();
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(serve(listener, config, state.clone(), async {
            let _ = stopped.await;
        }));
        Server {
            addr,
            state,
            store,
            clock,
            stop: Some(stop),
            task: Some(task),
        }
    }

    /// A token for a user allowed `spaces`, valid an hour.
    pub fn token(&self, user: &str, spaces: &[&str]) -> String {
        self.token_for(&user_key(user), spaces)
    }

    pub fn token_for(&self, member: &MemberKey, spaces: &[&str]) -> String {
        let spaces = Spaces::parse(spaces).unwrap();
        self.state
            .tokens()
            .mint(member, &spaces, now_s(), 3600)
            .unwrap()
    }

    /// A socket, not yet past `hello`.
    pub async fn connect(&self) -> Client {
        self.connect_to(&format!("ws://{}/v1/ws", self.addr)).await
    }

    pub async fn connect_to(&self, url: &str) -> Client {
        let (ws, response) = tokio::time::timeout(PATIENCE, tokio_tungstenite::connect_async(url))
            .await
            .expect("the upgrade timed out")
            .expect("the upgrade failed");
        assert_eq!(response.status(), 101);
        Client { ws }
    }

    /// A socket to `url` whose receive buffer is `bytes` (the kernel's
    /// least above it): a client that stops reading jams the server's
    /// writes after little data, whatever the machine's buffer sizes.
    pub async fn connect_small(&self, url: &str, bytes: u32) -> Client {
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.set_recv_buffer_size(bytes).unwrap();
        let stream = socket.connect(self.addr).await.unwrap();
        let (ws, response) = tokio::time::timeout(
            PATIENCE,
            tokio_tungstenite::client_async(url, MaybeTlsStream::Plain(stream)),
        )
        .await
        .expect("the upgrade timed out")
        .expect("the upgrade failed");
        assert_eq!(response.status(), 101);
        Client { ws }
    }

    /// A socket past `hello` as `user`, allowed `spaces`; and its welcome.
    pub async fn hello(&self, user: &str, spaces: &[&str]) -> (Client, Value) {
        let mut c = self.connect().await;
        let token = self.token(user, spaces);
        let welcome = c.request(json!({"type": "hello", "token": token})).await;
        assert_eq!(welcome["type"], "welcome", "{welcome}");
        (c, welcome)
    }

    /// Begins the shutdown (the drain), without waiting for it; see
    /// [`Server::stop`].
    pub fn begin_stop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }

    /// Stops the server and waits for `serve` to return.
    pub async fn stop(&mut self) {
        self.begin_stop();
        if let Some(task) = self.task.take() {
            tokio::time::timeout(PATIENCE, task)
                .await
                .expect("serve did not return after shutdown")
                .unwrap()
                .unwrap();
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

/// One end of a WebSocket, speaking JSON.
pub struct Client {
    pub ws: WebSocketStream<MaybeTlsStream<TcpStream>>,
}

/// What reading a socket found.
#[derive(Debug)]
pub enum Read {
    Json(Value),
    Closed(Option<u16>),
}

static NEXT_REF: std::sync::atomic::AtomicI64 = std::sync::atomic::AtomicI64::new(1);

impl Client {
    pub async fn send(&mut self, msg: Value) {
        self.send_text(&msg.to_string()).await;
    }

    pub async fn send_text(&mut self, text: &str) {
        self.ws.send(Message::text(text)).await.unwrap();
    }

    /// The next message or the close, within [`PATIENCE`].
    pub async fn read(&mut self) -> Read {
        loop {
            let next = tokio::time::timeout(PATIENCE, self.ws.next())
                .await
                .expect("the server neither sent nor closed");
            match next {
                Some(Ok(Message::Text(t))) => {
                    return Read::Json(serde_json::from_str(t.as_str()).unwrap());
                }
                Some(Ok(Message::Close(frame))) => {
                    return Read::Closed(frame.map(|f| u16::from(f.code)));
                }
                Some(Ok(Message::Binary(_))) => panic!("the server sent a binary frame"),
                Some(Ok(_)) => continue,
                Some(Err(_)) | None => return Read::Closed(None),
            }
        }
    }

    /// The next message; panics on a close.
    pub async fn recv(&mut self) -> Value {
        match self.read().await {
            Read::Json(v) => v,
            Read::Closed(code) => panic!("closed with {code:?} while a message was expected"),
        }
    }

    /// Sends `msg` with a fresh `ref` and returns the message echoing it;
    /// anything else arriving first (events) is kept in `skipped`.
    pub async fn request(&mut self, mut msg: Value) -> Value {
        let r = NEXT_REF.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        msg["ref"] = json!(r);
        self.send(msg).await;
        loop {
            let m = self.recv().await;
            if m["ref"] == json!(r) {
                return m;
            }
            assert!(
                matches!(
                    m["type"].as_str(),
                    Some("event" | "snapshot" | "lagged" | "watching" | "status" | "unwatched")
                ),
                "an unexpected message before the reply: {m}"
            );
        }
    }

    /// Like [`Client::request`], and asserts the reply is `ok`.
    pub async fn ok(&mut self, msg: Value) {
        let reply = self.request(msg.clone()).await;
        assert_eq!(reply["type"], "ok", "{msg} → {reply}");
    }

    /// Like [`Client::request`], and returns the error code.
    pub async fn error(&mut self, msg: Value) -> String {
        let reply = self.request(msg.clone()).await;
        assert_eq!(reply["type"], "error", "{msg} → {reply}");
        assert!(reply["message"].is_string(), "{reply}");
        reply["code"].as_str().unwrap().to_owned()
    }

    /// Subscribes and returns the snapshot's members (all pages).
    pub async fn subscribe(&mut self, space: &str) -> Vec<Value> {
        let r = NEXT_REF.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.send(json!({"type": "subscribe", "space": space, "ref": r}))
            .await;
        let mut members = Vec::new();
        loop {
            let m = self.recv().await;
            assert_eq!(m["type"], "snapshot", "{m}");
            assert_eq!(m["space"], space);
            members.extend(m["members"].as_array().unwrap().iter().cloned());
            if m["last"] == true {
                assert_eq!(m["ref"], json!(r), "the last page echoes the ref");
                return members;
            }
            assert!(m.get("ref").is_none());
        }
    }

    /// The next event of `space` (skipping nothing).
    pub async fn event(&mut self, space: &str) -> Value {
        let m = self.recv().await;
        assert_eq!(m["type"], "event", "{m}");
        assert_eq!(m["space"], space, "{m}");
        m["event"].clone()
    }

    /// Reads until the server closes; the close code.
    pub async fn closed(&mut self) -> Option<u16> {
        loop {
            if let Read::Closed(code) = self.read().await {
                return code;
            }
        }
    }

    /// Closes from the client's side.
    pub async fn close(mut self) {
        let _ = self
            .ws
            .close(Some(tokio_tungstenite::tungstenite::protocol::CloseFrame {
                code: CloseCode::Normal,
                reason: "bye".into(),
            }))
            .await;
        // Read the server's answer so the close handshake completes.
        let _ =
            tokio::time::timeout(PATIENCE, async { while self.ws.next().await.is_some() {} }).await;
    }
}
