//! The wire shapes every face of the server shares, and nothing else: no
//! routes, no store calls, no session state.
//!
//! - [`dto`]: the JSON bodies more than one face sends — a member's
//!   presence ([`dto::MemberDto`]) goes out in HTTP answers, SSE snapshots
//!   and WebSocket snapshots alike; a member's [`dto::MemberKindDto`] is also a
//!   token claim; a space's policy ([`dto::SpaceConfigDto`]) is an HTTP
//!   body and part of the SSE snapshot;
//! - [`ws`]: the WebSocket protocol (docs/PROTOCOL.md): every client and
//!   server message, the `ref` they carry, the error a message can earn,
//!   and the close codes;
//! - [`watch_shapes`]: watching users, what the WebSocket and the
//!   `POST /v1/watch` stream both send;
//! - `whole_numbers`: whole numbers in bodies, read as JSON Schema reads them
//!   (`2.0` is `2`);
//! - `bounded`: lists in bodies, refused at their first item past the
//!   limit rather than read whole first;
//! - `objects_only`: structs in bodies read from JSON objects only (serde
//!   would also take an array of their fields).
//!
//! Kept apart so that `api`, `sse`, `ws` and `token` depend on one leaf
//! module rather than on each other: a change to a shape shows up here,
//! once, for every face.

pub(crate) mod bounded;
pub mod dto;
pub(crate) mod objects_only;
pub mod watch_shapes;
pub(crate) mod whole_numbers;
pub mod ws;
