//! The wire shapes every face of the server shares, and nothing else: no
//! routes, no store calls, no session state.
//!
//! - [`dto`]: the JSON bodies more than one face sends — a member's
//!   presence ([`dto::MemberDto`]) goes out in HTTP answers, SSE snapshots
//!   and WebSocket snapshots alike; a member's [`dto::MemberKindDto`] is also a
//!   token claim; a space's policy ([`dto::SpaceConfigDto`]) is an HTTP
//!   body and part of the SSE snapshot;
//! - [`WS_MESSAGE_TYPES`]: the names of the WebSocket's client messages,
//!   which the metrics count by (the messages are `crate::ws::wire`'s);
//! - `whole_numbers`: whole numbers in bodies, read as JSON Schema reads them
//!   (`2.0` is `2`);
//! - `bounded`: lists in bodies, refused at their first item past the
//!   limit rather than read whole first;
//! - `objects_only`: structs in bodies read from JSON objects only (serde
//!   would also take an array of their fields).
//!
//! Kept apart so that `api`, `sse`, `ws`, `watch` and `pusher` depend on
//! one leaf module rather than on each other: a change to a shape shows
//! up here, once, for every face. A shape of one feature is that
//! feature's: `crate::ws::wire` (the WebSocket protocol's messages),
//! `crate::watch::shapes` (what a watcher is told).

pub(crate) mod bounded;
pub mod dto;
pub(crate) mod objects_only;
pub(crate) mod whole_numbers;

/// The `type`s a WebSocket client may send (`crate::ws::wire`'s
/// `ClientMessage`), the labels of `herenow_ws_messages_total`.
pub const WS_MESSAGE_TYPES: [&str; 10] = [
    "hello",
    "join",
    "leave",
    "update",
    "ping",
    "subscribe",
    "unsubscribe",
    "invisible",
    "watch",
    "unwatch",
];
