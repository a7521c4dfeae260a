//! `GET /v1/ws`: live presence over one WebSocket (docs/PROTOCOL.md).
//!
//! A browser tab proves who it is with a token ([`crate::token`]), joins
//! spaces (its presence is a *connection* in the store, see
//! `herenow_core::conn`), pings, and subscribes to spaces' presence.
//!
//! - this file: the route and the upgrade (bounded by a semaphore; over
//!   the bound a `503` problem, never a queue), the two message enums
//!   ([`ClientMessage`], [`ServerMessage`]) and the bounds;
//! - [`msg`]: one file per client message, each parsing its fields and
//!   applying itself to the session;
//! - `session`: the per-connection task (reading, the send queue and its
//!   writer, timers, subscriptions, detaching on every way out);
//! - `guard`: the rate limit and the abuse counter.
//!
//! Every connection task is tracked ([`Hub`]), so [`crate::serve`] waits
//! for them to detach and close with `1001` at shutdown: axum's graceful
//! shutdown does not wait for upgraded connections.

mod guard;
pub mod msg;
mod session;

use std::borrow::Cow;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::extract::ws::WebSocketUpgrade;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use herenow_core::{ConnId, Event, MemberKey, Metadata, SpaceName};
use serde::{Deserialize, Serialize};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_util::task::TaskTracker;

use crate::api::MemberDto;
use crate::config::Config;
use crate::extract::ApiQuery;
use crate::problem::ApiError;
use crate::state::AppState;

/// Largest frame and message a client may send: 64 KiB. A larger one
/// closes the socket with `1009`.
pub const MAX_MESSAGE_BYTES: usize = 64 * 1024;
/// Messages queued for one client before it counts as lagging.
pub const SEND_QUEUE: usize = 1_024;
/// Most spaces one connection may join.
pub const MAX_JOINED: usize = 16;
/// Most spaces one connection may subscribe to.
pub const MAX_SUBSCRIBED: usize = 16;
/// How long a client has to send `hello` (or less: the TTL, if shorter).
pub const HELLO_TIMEOUT: Duration = Duration::from_secs(10);
/// Messages a client may send in a burst.
pub const RATE_BURST: u32 = 20;
/// Messages a client may send per second, sustained.
pub const RATE_PER_SECOND: u32 = 10;
/// Errors within [`ERROR_WINDOW`] that close the socket with `4008`.
pub const MAX_ERRORS: usize = 20;
/// See [`MAX_ERRORS`].
pub const ERROR_WINDOW: Duration = Duration::from_secs(10);
/// Pings closer together than this are answered but not written to the
/// store.
pub const MIN_STORE_PING: Duration = Duration::from_secs(1);
/// Snapshot page size when `subscribe` names none.
pub const DEFAULT_PAGE_SIZE: usize = 500;
/// Largest snapshot page.
pub const MAX_PAGE_SIZE: usize = 1_000;
/// Longest string `ref`.
pub const MAX_REF_BYTES: usize = 64;

/// The WebSocket close codes of the protocol.
pub mod close {
    /// Normal close.
    pub const NORMAL: u16 = 1000;
    /// The server shuts down.
    pub const GOING_AWAY: u16 = 1001;
    /// A broken frame (unmasked, bad opcode, …).
    pub const PROTOCOL: u16 = 1002;
    /// A text frame that is not UTF-8.
    pub const BAD_DATA: u16 = 1007;
    /// A frame or message over 64 KiB.
    pub const TOO_BIG: u16 = 1009;
    /// Bad token: malformed, forged, or signed with another secret.
    pub const BAD_TOKEN: u16 = 4001;
    /// Token expired.
    pub const TOKEN_EXPIRED: u16 = 4002;
    /// No `hello` in time.
    pub const NO_HELLO: u16 = 4003;
    /// No message within the TTL.
    pub const IDLE: u16 = 4004;
    /// Too many errors: repeated abuse.
    pub const ABUSE: u16 = 4008;
    /// The send queue stayed full.
    pub const TOO_SLOW: u16 = 4009;
}

/// The route.
pub fn router() -> Router<AppState> {
    Router::new().route("/v1/ws", get(upgrade))
}

/// The WebSocket side of the server: the connection bound, the tracker
/// every connection task runs under, connection ids, and the timing told
/// to clients.
pub struct Hub {
    permits: Arc<Semaphore>,
    max: usize,
    tracker: TaskTracker,
    prefix: String,
    next: AtomicU64,
    ttl: Duration,
    ping: Duration,
}

impl Hub {
    /// A hub with the bounds and timing of `config`.
    pub fn new(config: &Config) -> Self {
        let max = config.max_ws_connections.max(1);
        Self {
            permits: Arc::new(Semaphore::new(max)),
            max,
            tracker: TaskTracker::new(),
            prefix: conn_prefix(),
            next: AtomicU64::new(1),
            ttl: config.ws_ttl,
            ping: config.ws_ping,
        }
    }

    /// WebSocket connections open now.
    pub fn open(&self) -> usize {
        self.max - self.permits.available_permits()
    }

    /// The tracker of connection tasks: closed and waited for at shutdown.
    pub fn tracker(&self) -> &TaskTracker {
        &self.tracker
    }

    /// A connection id unique across servers: this process's random
    /// prefix and a counter.
    fn next_conn(&self) -> ConnId {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        // Hex digits, a dash and a decimal number: always a valid id.
        ConnId::new(&format!("{}-{n}", self.prefix))
            .unwrap_or_else(|_| unreachable!("prefix and counter make a valid connection id"))
    }
}

/// 48 random bits as 12 hex digits: servers sharing a Redis store (and a
/// restarted server) never hand out the same connection id.
fn conn_prefix() -> String {
    let mut bytes = [0u8; 6];
    if getrandom::fill(&mut bytes).is_err() {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        bytes.copy_from_slice(&nanos.to_le_bytes()[..6]);
        bytes[0] ^= std::process::id() as u8;
    }
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The upgrade URL's query: an optional token.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct WsQuery {
    token: Option<String>,
}

/// Upgrades to a WebSocket, or answers `503` when the server holds its
/// maximum of sockets or shuts down.
async fn upgrade(
    State(state): State<AppState>,
    ApiQuery(query): ApiQuery<WsQuery>,
    ws: WebSocketUpgrade,
) -> Result<Response, ApiError> {
    if state.shutdown_token().is_cancelled() {
        return Err(ApiError::unavailable(
            "shutting-down",
            "the server is shutting down",
            1,
        ));
    }
    let hub = state.ws();
    let permit: OwnedSemaphorePermit = hub.permits.clone().try_acquire_owned().map_err(|_| {
        ApiError::unavailable(
            "too-many-connections",
            "the server has as many WebSocket connections open as it allows; retry later",
            5,
        )
    })?;
    // Taken before the upgrade: `serve` waits for this connection from
    // now on, even if the upgrade completes after shutdown began.
    let tracked = hub.tracker().token();
    let conn = hub.next_conn();
    let config = session::Settings {
        ttl: hub.ttl,
        ping: hub.ping,
    };
    Ok(ws
        .max_message_size(MAX_MESSAGE_BYTES)
        .max_frame_size(MAX_MESSAGE_BYTES)
        // Small buffers: 10,000 idle sockets should not cost a gigabyte.
        .read_buffer_size(4 * 1024)
        .write_buffer_size(0)
        .on_upgrade(move |socket| async move {
            session::run(socket, state, conn, config, query.token, permit).await;
            drop(tracked);
        })
        .into_response())
}

/// A message's `ref`, echoed by its reply: a string of at most 64 bytes,
/// or an integer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum Ref {
    /// An integer.
    Int(i64),
    /// A string.
    Str(String),
}

impl<'de> Deserialize<'de> for Ref {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = Ref;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                write!(f, "an integer or a string of at most {MAX_REF_BYTES} bytes")
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Ref, E> {
                Ok(Ref::Int(v))
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Ref, E> {
                i64::try_from(v)
                    .map(Ref::Int)
                    .map_err(|_| E::custom("ref is too large an integer"))
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Ref, E> {
                if v.len() > MAX_REF_BYTES {
                    return Err(E::custom(format!(
                        "ref is {} bytes; the limit is {MAX_REF_BYTES}",
                        v.len()
                    )));
                }
                Ok(Ref::Str(v.to_owned()))
            }
        }
        d.deserialize_any(V)
    }
}

/// Every message a client may send, by its `type`.
#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum ClientMessage<'a> {
    /// Presents the token.
    #[serde(borrow)]
    Hello(msg::hello::Hello<'a>),
    /// Be present in a space.
    #[serde(borrow)]
    Join(msg::join::Join<'a>),
    /// Stop being present in a space.
    #[serde(borrow)]
    Leave(msg::leave::Leave<'a>),
    /// Change this connection's metadata in a space.
    #[serde(borrow)]
    Update(msg::update::Update<'a>),
    /// Keep every joined space's presence alive.
    Ping(msg::ping::Ping),
    /// See a space's presence: a snapshot, then its events.
    #[serde(borrow)]
    Subscribe(msg::subscribe::Subscribe<'a>),
    /// Stop seeing a space.
    #[serde(borrow)]
    Unsubscribe(msg::unsubscribe::Unsubscribe<'a>),
    /// Hide this connection, or show it again.
    Invisible(msg::invisible::Invisible),
}

impl ClientMessage<'_> {
    /// The `type`, for metrics.
    pub fn kind(&self) -> &'static str {
        match self {
            ClientMessage::Hello(_) => "hello",
            ClientMessage::Join(_) => "join",
            ClientMessage::Leave(_) => "leave",
            ClientMessage::Update(_) => "update",
            ClientMessage::Ping(_) => "ping",
            ClientMessage::Subscribe(_) => "subscribe",
            ClientMessage::Unsubscribe(_) => "unsubscribe",
            ClientMessage::Invisible(_) => "invisible",
        }
    }
}

/// The types of [`ClientMessage`], for metrics.
pub const MESSAGE_TYPES: [&str; 8] = [
    "hello",
    "join",
    "leave",
    "update",
    "ping",
    "subscribe",
    "unsubscribe",
    "invisible",
];

/// A client message with its `ref`. The `ref` is taken here, so no message
/// struct sees it, and each can refuse fields it does not know.
#[derive(Debug, Deserialize)]
pub struct Envelope<'a> {
    /// Echoed by the reply.
    #[serde(rename = "ref", default)]
    pub reference: Option<Ref>,
    /// The message.
    #[serde(flatten, borrow)]
    pub message: ClientMessage<'a>,
}

/// Only the `ref` of a message that could not be parsed (or was not
/// processed), so its error can still name it.
#[derive(Debug, Deserialize)]
pub struct RefOnly {
    /// The `ref`, if it was a good one.
    #[serde(rename = "ref", default)]
    pub reference: Option<Ref>,
}

/// A live connection of a member, as a snapshot lists it.
#[derive(Debug, Serialize)]
pub struct ConnMeta {
    /// The connection's id.
    pub conn: ConnId,
    /// Its metadata.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub meta: Option<Metadata>,
}

/// A member in a snapshot page: its presence and its visible connections.
#[derive(Debug, Serialize)]
pub struct SnapshotMember {
    /// Presence, as the HTTP API answers it.
    #[serde(flatten)]
    pub member: MemberDto,
    /// Its visible live connections, by id; `[]` for a member present by
    /// HTTP heartbeats only.
    pub metas: Vec<ConnMeta>,
}

/// Every message the server sends, by its `type`.
#[derive(Debug, Serialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum ServerMessage<'a> {
    /// The answer to `hello` (or to a `?token=` upgrade).
    Welcome {
        /// The hello's `ref`.
        #[serde(rename = "ref", skip_serializing_if = "Option::is_none")]
        reference: Option<Ref>,
        /// This connection's id.
        conn: &'a ConnId,
        /// Who this connection is.
        member: &'a MemberKey,
        /// The spaces the token allows (`["*"]`: all).
        spaces: Vec<String>,
        /// How often to ping.
        ping_ms: u64,
        /// Silence after which the connection is dropped.
        ttl_ms: u64,
        /// The store's clock.
        server_time_ms: u64,
    },
    /// Done.
    Ok {
        /// The message's `ref`.
        #[serde(rename = "ref", skip_serializing_if = "Option::is_none")]
        reference: Option<Ref>,
    },
    /// The answer to `ping`.
    Pong {
        /// The ping's `ref`.
        #[serde(rename = "ref", skip_serializing_if = "Option::is_none")]
        reference: Option<Ref>,
        /// The store's clock.
        server_time_ms: u64,
    },
    /// A message was refused; the socket stays open.
    Error {
        /// The message's `ref`, if it had a readable one.
        #[serde(rename = "ref", skip_serializing_if = "Option::is_none")]
        reference: Option<Ref>,
        /// A stable code.
        code: &'a str,
        /// For people.
        message: &'a str,
    },
    /// One page of a space's present members.
    Snapshot {
        /// The subscribe's `ref`, on the last page.
        #[serde(rename = "ref", skip_serializing_if = "Option::is_none")]
        reference: Option<Ref>,
        /// The space.
        space: &'a SpaceName,
        /// Members, most recent first.
        members: Vec<SnapshotMember>,
        /// Whether this is the last page.
        last: bool,
        /// On the last page: present members beyond the snapshot limit.
        #[serde(skip_serializing_if = "Option::is_none")]
        omitted: Option<u64>,
    },
    /// A presence event, as the SSE stream sends it.
    Event {
        /// The space.
        space: &'a SpaceName,
        /// The event.
        event: &'a Event,
    },
    /// Events were lost; a fresh snapshot follows.
    Lagged {
        /// The space.
        space: &'a SpaceName,
        /// Messages this connection could not take.
        missed: u64,
    },
}

/// A refusal of one message: an `error` reply, or for a bad token a close.
#[derive(Debug, Clone)]
pub struct WsError {
    /// The stable code.
    pub code: &'static str,
    /// For people.
    pub message: Cow<'static, str>,
    /// Close the socket with this code instead of answering.
    pub close: Option<u16>,
}

impl WsError {
    /// An error reply.
    pub fn new(code: &'static str, message: impl Into<Cow<'static, str>>) -> Self {
        Self {
            code,
            message: message.into(),
            close: None,
        }
    }

    /// A close of the socket.
    pub fn closing(close: u16, code: &'static str, message: impl Into<Cow<'static, str>>) -> Self {
        Self {
            code,
            message: message.into(),
            close: Some(close),
        }
    }

    /// `bad-message`, for a field that parsed but does not fit.
    pub fn bad_message(message: impl Into<Cow<'static, str>>) -> Self {
        Self::new("bad-message", message)
    }

    /// Whether the client is at fault, so the error counts towards the
    /// abuse limit. A store that is down is nobody's abuse.
    pub fn is_clients_fault(&self) -> bool {
        !matches!(
            self.code,
            "store-unavailable" | "timeout" | "internal" | "unsupported" | "bad-snapshot"
        )
    }
}

impl From<herenow_core::Error> for WsError {
    fn from(e: herenow_core::Error) -> Self {
        if e.kind() == herenow_core::ErrorKind::Internal {
            tracing::error!(error = %e, "internal store error");
        }
        Self::new(e.code(), e.to_string())
    }
}

impl From<herenow_core::InvalidInput> for WsError {
    fn from(e: herenow_core::InvalidInput) -> Self {
        herenow_core::Error::from(e).into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Result<Envelope<'_>, serde_json::Error> {
        serde_json::from_str(s)
    }

    #[test]
    fn messages_parse_by_type_with_their_ref() {
        let e = parse(r#"{"type":"join","space":"a","ref":7,"meta":{"x":1}}"#).unwrap();
        assert_eq!(e.reference, Some(Ref::Int(7)));
        assert_eq!(e.message.kind(), "join");
        let e = parse(r#"{"ref":"r-1","type":"ping"}"#).unwrap();
        assert_eq!(e.reference, Some(Ref::Str("r-1".into())));
        for bad in [
            r#"{"type":"nope"}"#,
            r#"{"space":"a"}"#,
            r#"{"type":"join"}"#,
            r#"{"type":"join","space":"a","bogus":1}"#,
            r#"{"type":"ping","ref":{}}"#,
            r#"{"type":"update","space":"a"}"#,
            r#"{"type":"invisible","on":"yes"}"#,
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
        let long = format!(r#"{{"type":"ping","ref":"{}"}}"#, "x".repeat(65));
        assert!(parse(&long).is_err());
        assert!(serde_json::from_str::<RefOnly>(&long).is_err());
        let r: RefOnly = serde_json::from_str(r#"{"type":"??","ref":-3}"#).unwrap();
        assert_eq!(r.reference, Some(Ref::Int(-3)));
    }

    #[test]
    fn server_messages_are_tagged() {
        let space = SpaceName::new("s").unwrap();
        let m = ServerMessage::Lagged {
            space: &space,
            missed: 3,
        };
        assert_eq!(
            serde_json::to_string(&m).unwrap(),
            r#"{"type":"lagged","space":"s","missed":3}"#
        );
        let m = ServerMessage::Ok {
            reference: Some(Ref::Str("a".into())),
        };
        assert_eq!(
            serde_json::to_string(&m).unwrap(),
            r#"{"type":"ok","ref":"a"}"#
        );
    }

    #[test]
    fn connection_ids_are_valid_and_distinct() {
        let hub = Hub::new(&Config::default());
        let a = hub.next_conn();
        let b = hub.next_conn();
        assert_ne!(a, b);
        assert!(a.as_str().len() <= herenow_core::limits::MAX_CONN_ID_BYTES);
        assert_eq!(hub.open(), 0);
    }
}
