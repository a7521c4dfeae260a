//! The wire shapes every face of the server shares, and nothing else: no
//! routes, no store calls, no session state. Kept apart so that `api`,
//! `sse`, `ws`, `watch` and `pusher` depend on one leaf module rather than
//! on each other; a shape of one feature is that feature's
//! (`crate::ws::wire`, `crate::watch::shapes`).
//!
//! [`dto`] holds the JSON bodies more than one face sends; the others read
//! bodies strictly: `whole_numbers` (`2.0` is `2`, as JSON Schema reads
//! it), `bounded` (lists refused at their first item past the limit),
//! `objects_only` (structs from JSON objects only).

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
