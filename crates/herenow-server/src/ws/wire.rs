//! The WebSocket protocol's messages (docs/PROTOCOL.md): what a client
//! may send ([`ClientMessage`], one struct per `type`), what the server
//! sends ([`ServerMessage`]), the `ref` that ties a reply to its message,
//! the refusal of one message ([`WsError`]) and the close codes.
//!
//! Only shapes and parsing live here. What a message *does* to a
//! connection is `crate::ws::msg`, one file per message type.

use std::borrow::Cow;

use herenow_core::{ConnId, Event, MemberId, MemberKey, Metadata, SpaceName};
use serde::{Deserialize, Serialize};

use crate::protocol::WS_MESSAGE_TYPES;
use crate::protocol::dto::MemberDto;
use crate::watch::shapes::{WatchedUser, WatchingPage};

/// Longest string `ref`.
pub const MAX_REF_BYTES: usize = 64;

/// The WebSocket close codes of the protocol.
pub mod close {
    /// Either side is done.
    pub const NORMAL: u16 = 1000;
    /// Going away (a proxy in between, say); reconnect at once.
    pub const GOING_AWAY: u16 = 1001;
    /// A broken frame (unmasked, bad opcode, …).
    pub const PROTOCOL: u16 = 1002;
    /// A text frame that is not UTF-8.
    pub const BAD_DATA: u16 = 1007;
    /// A frame or message over 64 KiB.
    pub const TOO_BIG: u16 = 1009;
    /// The server shuts down (a restart, a rollout): reconnect at once,
    /// to another server, within the grace (`/client.js` waits at most a
    /// quarter second); the connection's presence lingers meanwhile.
    pub const SERVICE_RESTART: u16 = 1012;
    /// Bad token: malformed, forged, or signed with another secret.
    pub const BAD_TOKEN: u16 = 4001;
    /// The token is past its `exp`; a fresh one is needed.
    pub const TOKEN_EXPIRED: u16 = 4002;
    /// No `hello` in time.
    pub const NO_HELLO: u16 = 4003;
    /// No message within the TTL.
    pub const IDLE: u16 = 4004;
    /// Nothing at all (not even the pong a WebSocket layer sends by
    /// itself) within the pong wait of the server's ping: the client or
    /// its network is gone.
    pub const NO_PONG: u16 = 4005;
    /// Too many errors: repeated abuse.
    pub const ABUSE: u16 = 4008;
    /// The send queue stayed full.
    pub const TOO_SLOW: u16 = 4009;
}

/// A message's `ref`, echoed by its reply: a string of at most 64 bytes,
/// or an integer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum Ref {
    /// An integer, echoed as an integer.
    Int(i64),
    /// A string of at most [`MAX_REF_BYTES`] bytes.
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

// ----------------------------------------------------------------- client

/// Every message a client may send, by its `type`.
#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum ClientMessage<'a> {
    /// Presents the token.
    #[serde(borrow)]
    Hello(Hello<'a>),
    /// Be present in a space.
    #[serde(borrow)]
    Join(Join<'a>),
    /// Stop being present in a space.
    #[serde(borrow)]
    Leave(Leave<'a>),
    /// Change this connection's metadata in a space.
    #[serde(borrow)]
    Update(Update<'a>),
    /// Keep every joined space's presence alive.
    Ping(Ping),
    /// See a space's presence: a snapshot, then its events.
    #[serde(borrow)]
    Subscribe(Subscribe<'a>),
    /// Stop seeing a space.
    #[serde(borrow)]
    Unsubscribe(Unsubscribe<'a>),
    /// Hide this connection, or show it again.
    Invisible(Invisible),
    /// Watch users' status: a list, or the token's user's friends.
    Watch(Watch),
    /// Stop watching some users, or everyone.
    Unwatch(Unwatch),
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
            ClientMessage::Watch(_) => "watch",
            ClientMessage::Unwatch(_) => "unwatch",
        }
    }
}

/// A client message with its `ref`. The `ref` is taken here, so no message
/// struct sees it, and each can refuse fields it does not know.
#[derive(Debug, Deserialize)]
pub struct Envelope<'a> {
    /// Echoed by the reply.
    #[serde(rename = "ref", default)]
    pub reference: Option<Ref>,
    /// The message itself, parsed by its `type`.
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

/// A text frame that is not a message: the `ref` it had, if one could be
/// read, and the `error` to answer it with.
#[derive(Debug)]
pub struct Undecodable {
    /// The frame's `ref`, if it was a good one.
    pub reference: Option<Ref>,
    /// `bad-json` (not one JSON object) or `bad-message` (JSON, but no
    /// message of the protocol).
    pub error: WsError,
}

/// Parses one text frame (at most 64 KiB: the socket refuses bigger
/// ones) into a message and its `ref`. Never panics; nesting deeper than
/// serde_json's limit (128) is `bad-json`; a `type` that is not a string
/// is `bad-message`.
pub fn decode(text: &str) -> Result<Envelope<'_>, Undecodable> {
    if !text.trim_start().starts_with('{') {
        return Err(Undecodable {
            reference: None,
            error: WsError::new("bad-json", "a message must be one JSON object"),
        });
    }
    let envelope = serde_json::from_str::<Envelope<'_>>(text).map_err(|e| {
        let error = if e.is_data() {
            WsError::bad_message(fault_in(text).unwrap_or_else(|| e.to_string()))
        } else {
            WsError::new("bad-json", e.to_string())
        };
        Undecodable {
            reference: ref_of(text),
            error,
        }
    })?;
    // serde reads an internally tagged enum's tag through a buffer that
    // also takes a variant's index: `{"type": 4}` would be a `ping`.
    if serde_json::from_str::<TypeName<'_>>(text).is_err() {
        return Err(Undecodable {
            reference: envelope.reference,
            error: WsError::bad_message(type_not_a_string()),
        });
    }
    Ok(envelope)
}

/// A frame's `type`, read only to see that it is a string.
#[derive(Deserialize)]
struct TypeName<'a> {
    #[serde(rename = "type", borrow)]
    _kind: Cow<'a, str>,
}

fn type_not_a_string() -> String {
    format!(
        "type: must be a string, one of {}",
        WS_MESSAGE_TYPES.join(", ")
    )
}

/// Why a frame that is JSON is no message, starting with the field at
/// fault (`space: invalid type…`, `users[2]: …`, `ref: …`), or `None`
/// when no one field is (a missing or unknown `type`, a missing field:
/// serde's own text names those).
///
/// A message's fields sit next to its `type` and `ref` ([`Envelope`]), so
/// serde reads the message through a buffer that loses where it was; the
/// frame is parsed again here, its `type` and `ref` taken out and the rest
/// read as that type's struct with the path tracked. Only a refused frame
/// pays for it.
fn fault_in(text: &str) -> Option<String> {
    let mut fields: serde_json::Map<String, serde_json::Value> = serde_json::from_str(text).ok()?;
    if let Some(r) = fields.remove("ref")
        && let Err(e) = Ref::deserialize(&r)
    {
        return Some(format!("ref: {e}"));
    }
    let kind = fields.remove("type")?;
    let Some(kind) = kind.as_str() else {
        return Some(type_not_a_string());
    };
    let fields = serde_json::Value::Object(fields);
    match kind {
        "hello" => fault_of::<Hello>(&fields),
        "join" => fault_of::<Join>(&fields),
        "leave" => fault_of::<Leave>(&fields),
        "update" => fault_of::<Update>(&fields),
        "ping" => fault_of::<Ping>(&fields),
        "subscribe" => fault_of::<Subscribe>(&fields),
        "unsubscribe" => fault_of::<Unsubscribe>(&fields),
        "invisible" => fault_of::<Invisible>(&fields),
        "watch" => fault_of::<Watch>(&fields),
        "unwatch" => fault_of::<Unwatch>(&fields),
        _ => None,
    }
}

/// `path: error` for the first field of `fields` that `T` refuses.
fn fault_of<'a, T: Deserialize<'a>>(fields: &'a serde_json::Value) -> Option<String> {
    let e = serde_path_to_error::deserialize::<_, T>(fields).err()?;
    match e.path().to_string() {
        root if root == "." => None,
        path => Some(format!("{path}: {}", e.inner())),
    }
}

/// The `ref` of a frame that was not (or could not be) processed ([`RefOnly`]).
pub fn ref_of(text: &str) -> Option<Ref> {
    serde_json::from_str::<RefOnly>(text)
        .ok()
        .and_then(|r| r.reference)
}

/// `{"type": "hello", "token": "eyJ…"}` → `welcome`. A bad token closes
/// the socket with `4001`, an expired one with `4002`; a second `hello`
/// is an `already-hello` error.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Hello<'a> {
    /// The JWT from `POST /v1/tokens`.
    #[serde(borrow)]
    pub token: Cow<'a, str>,
}

/// `{"type": "join", "space": "room:1", "meta": {…}}` → `ok`. The first
/// visible connection of a member makes it `join`; further ones
/// `connect`. Joining again replaces this connection's metadata.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Join<'a> {
    /// The space; the token must allow it.
    #[serde(borrow)]
    pub space: Cow<'a, str>,
    /// This connection's metadata: an object of at most 1 KiB.
    #[serde(default)]
    pub meta: Option<serde_json::Value>,
}

/// `{"type": "leave", "space": "room:1"}` → `ok`. The member leaves when
/// this was its last visible connection there (`disconnect` otherwise).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Leave<'a> {
    /// A space this connection joined.
    #[serde(borrow)]
    pub space: Cow<'a, str>,
}

/// `{"type": "update", "space": "room:1", "meta": {…} | null}` → `ok`;
/// others see an `update` naming this connection.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Update<'a> {
    /// A space this connection joined.
    #[serde(borrow)]
    pub space: Cow<'a, str>,
    /// The new metadata, or `null` to clear it. Required.
    pub meta: serde_json::Value,
}

/// `{"type": "ping"}` → `pong`. Re-attaches every joined space, unless the
/// last write was less than a second ago (`MIN_STORE_PING`; less for a
/// very short TTL): a tab that pings on every focus change costs no more
/// than one that pings on time.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Ping {}

/// `{"type": "subscribe", "space": "room:1", "page_size": 500}` →
/// `snapshot` pages (the last echoes the `ref`), then `event`s.
/// Subscribing again restarts the snapshot.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Subscribe<'a> {
    /// The space; the token must allow it.
    #[serde(borrow)]
    pub space: Cow<'a, str>,
    /// Members per snapshot page, 1 to 1,000 (default 500).
    #[serde(default)]
    pub page_size: Option<u64>,
}

/// `{"type": "unsubscribe", "space": "room:1"}` → `ok`; no more of the
/// space's events follow.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Unsubscribe<'a> {
    /// A space this connection subscribed to.
    #[serde(borrow)]
    pub space: Cow<'a, str>,
}

/// `{"type": "invisible", "on": true}` → `ok`. Re-attaches every joined
/// space with the new visibility; spaces joined later follow it. An
/// invisible connection still subscribes and sees everyone.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Invisible {
    /// Hide (`true`) or show (`false`).
    pub on: bool,
}

/// `{"type": "watch", "users": ["bob"], "friends": true, "space": "site"}`
/// → `watching` pages of the users it added (the last echoes the `ref`),
/// then a `status` whenever a watched user's status changes. Without
/// `space`, status is anywhere (online if online in any space).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Watch {
    /// User ids to watch too (at most 5,000 watched in all).
    #[serde(default)]
    pub users: Vec<String>,
    /// Also watch the token's user's friend set, as it changes.
    #[serde(default)]
    pub friends: bool,
    /// Watch within this space (the token must allow it); absent:
    /// anywhere.
    #[serde(default)]
    pub space: Option<String>,
    /// Replace what is watched (and its scope) instead of adding to it.
    #[serde(default)]
    pub replace: bool,
    /// Users per `watching` page, 1 to 1,000 (default 500).
    #[serde(default)]
    pub page_size: Option<u64>,
}

/// `{"type": "unwatch", "users": ["bob"]}` → `ok`; without `users`,
/// nothing is watched any more (the friend set included).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Unwatch {
    /// The users to stop watching; absent: all.
    #[serde(default)]
    pub users: Option<Vec<String>>,
}

// ----------------------------------------------------------------- server

/// A live connection of a member, as a snapshot lists it.
#[derive(Debug, Serialize)]
pub struct ConnMeta {
    /// The connection's id, as its `welcome` told it and as `connect`
    /// and `disconnect` events name it.
    pub conn: ConnId,
    /// What the connection set with `join` or `update`; absent when none.
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
        /// This connection's id, unique across servers: events this socket
        /// causes carry it as `conn`.
        conn: &'a ConnId,
        /// The member the token names; the socket joins spaces as it.
        member: &'a MemberKey,
        /// The spaces the token allows (`["*"]`: all).
        spaces: Vec<String>,
        /// How often the client should ping, in ms (a third of the TTL by
        /// default), so one lost ping does not drop it.
        ping_ms: u64,
        /// Silence after which the connection is dropped.
        ttl_ms: u64,
        /// The store's clock now, in ms since the UNIX epoch: the time
        /// `last_seen_ms` values are on.
        server_time_ms: u64,
    },
    /// The message was applied; for a message that changes presence
    /// (`join`, `update`, `leave`), the store had it before this was sent.
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
        /// The store's clock now, as in `welcome`.
        server_time_ms: u64,
    },
    /// A message was refused; the socket stays open.
    Error {
        /// The message's `ref`, if it had a readable one.
        #[serde(rename = "ref", skip_serializing_if = "Option::is_none")]
        reference: Option<Ref>,
        /// A stable code to match on (`not-joined`, `rate-limited`, …).
        code: &'a str,
        /// A sentence for people; it may change, so never match on it.
        message: &'a str,
    },
    /// One page of a space's present members.
    Snapshot {
        /// The subscribe's `ref`, on the last page.
        #[serde(rename = "ref", skip_serializing_if = "Option::is_none")]
        reference: Option<Ref>,
        /// The space the pages are of: a socket may be subscribed to
        /// several at once.
        space: &'a SpaceName,
        /// This page's members, most recent first, continuing the previous
        /// page.
        members: Vec<SnapshotMember>,
        /// Whether this is the last page.
        last: bool,
        /// On the last page: present members beyond the snapshot limit.
        #[serde(skip_serializing_if = "Option::is_none")]
        omitted: Option<u64>,
        /// The subscription lagged and starts over: this snapshot replaces
        /// everything the client knew of the space (absent otherwise).
        #[serde(skip_serializing_if = "std::ops::Not::not")]
        resync: bool,
    },
    /// A presence event, as the SSE stream sends it.
    Event {
        /// The space the event happened in.
        space: &'a SpaceName,
        /// The event, as the SSE stream's `data` carries it.
        event: &'a Event,
    },
    /// A page of watched users' states.
    Watching {
        /// The watch's `ref`, on the last page of its answer.
        #[serde(rename = "ref", skip_serializing_if = "Option::is_none")]
        reference: Option<Ref>,
        /// The page.
        #[serde(flatten)]
        page: WatchingPage,
    },
    /// A watched user's status changed.
    Status {
        /// The user's new state.
        #[serde(flatten)]
        user: &'a WatchedUser,
    },
    /// Users no longer watched (they left the followed friend set).
    Unwatched {
        /// Their ids.
        users: &'a [MemberId],
    },
    /// Events were lost; a fresh snapshot follows.
    Lagged {
        /// The subscription that lost messages.
        space: &'a SpaceName,
        /// Messages this connection could not take.
        missed: u64,
    },
}

impl ServerMessage<'_> {
    /// The text frame, or `None` (logged) when it cannot be serialized:
    /// a message lost that way is the server's bug, not a reason to drop
    /// the connection.
    pub fn to_text(&self) -> Option<String> {
        match serde_json::to_string(self) {
            Ok(text) => Some(text),
            Err(e) => {
                tracing::error!(error = %e, "a WebSocket message could not be serialized");
                None
            }
        }
    }
}

/// A refusal of one message: an `error` reply, or for a bad token a close.
#[derive(Debug, Clone)]
pub struct WsError {
    /// The stable code of the `error` reply (or the close's reason).
    pub code: &'static str,
    /// A sentence for people.
    pub message: Cow<'static, str>,
    /// Close the socket with this code instead of answering.
    pub close: Option<u16>,
}

impl WsError {
    /// An `error` reply with this code; the socket stays open.
    pub fn new(code: &'static str, message: impl Into<Cow<'static, str>>) -> Self {
        Self {
            code,
            message: message.into(),
            close: None,
        }
    }

    /// A refusal that closes the socket with `close` (a bad token)
    /// instead of answering.
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
            "store-unavailable"
                | "timeout"
                | "internal"
                | "unsupported"
                | "bad-snapshot"
                | "watch-capacity"
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
mod fuzz;

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

    /// What [`decode`] answers a frame it refuses, for these frames.
    fn refusal(text: &str) -> String {
        let e = decode(text).unwrap_err().error;
        assert_eq!(e.code, "bad-message", "{text}");
        e.message.into_owned()
    }

    #[test]
    fn a_refused_message_names_the_field_at_fault() {
        for (text, starts) in [
            (
                r#"{"type":"join","space":1}"#,
                "space: invalid type: integer `1`",
            ),
            (
                r#"{"type":"hello","token":[]}"#,
                "token: invalid type: sequence",
            ),
            (
                r#"{"type":"invisible","on":"yes"}"#,
                "on: invalid type: string",
            ),
            (
                r#"{"type":"watch","users":["a",7]}"#,
                "users[1]: invalid type: integer `7`",
            ),
            (
                r#"{"type":"watch","users":"bob"}"#,
                "users: invalid type: string",
            ),
            (
                r#"{"type":"subscribe","space":"a","page_size":-1}"#,
                "page_size: invalid value",
            ),
            (
                r#"{"type":"unwatch","users":[null]}"#,
                "users[0]: invalid type: null",
            ),
            (r#"{"ref":{"a":1},"type":"ping"}"#, "ref: invalid type: map"),
            (
                r#"{"type":"join","space":"a","bogus":1}"#,
                "bogus: unknown field `bogus`",
            ),
            (r#"{"type":"update","space":"a"}"#, "missing field `meta`"),
            (r#"{"type":"nope"}"#, "unknown variant `nope`"),
            (r#"{"space":"a"}"#, "missing field `type`"),
            // serde would take a variant's index for its name.
            (
                r#"{"type":4}"#,
                "type: must be a string, one of hello, join,",
            ),
            (r#"{"type":1,"space":"a"}"#, "type: must be a string"),
            (r#"{"type":null,"space":"a"}"#, "type: must be a string"),
        ] {
            let got = refusal(text);
            assert!(got.starts_with(starts), "{text}: {got}");
        }
        let long = format!(r#"{{"type":"ping","ref":"{}"}}"#, "x".repeat(65));
        assert_eq!(refusal(&long), "ref: ref is 65 bytes; the limit is 64");
        // Every type is looked up by `fault_in`: a field none has is named.
        for kind in WS_MESSAGE_TYPES {
            let got = refusal(&format!(r#"{{"type":"{kind}","zz":1}}"#));
            assert!(got.starts_with("zz: unknown field `zz`"), "{kind}: {got}");
        }
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
}
