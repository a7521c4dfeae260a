//! The bounds every input is held to. One place, so the server, the stores
//! and the docs agree.

/// Longest member id, in bytes.
pub const MAX_ID_BYTES: usize = 256;
/// Longest space name, in bytes.
pub const MAX_SPACE_BYTES: usize = 128;
/// Largest metadata document, in bytes of JSON text.
pub const MAX_META_BYTES: usize = 1024;
/// Most heartbeats, leaves or status look-ups in one call.
pub const MAX_BATCH: usize = 10_000;
/// Most members in one page of a listing.
pub const MAX_PAGE: usize = 1_000;
/// Most friends one user may have.
pub const MAX_FRIENDS: usize = 5_000;
/// Most members sent in a subscriber's snapshot; the rest are counted only.
pub const MAX_SNAPSHOT: usize = 10_000;
/// How far in the future an explicit heartbeat time may be (clock skew).
pub const MAX_FUTURE_SKEW_MS: u64 = 60_000;
/// Longest retention a space may be configured with (24 hours).
pub const MAX_RETENTION_MS: u64 = 24 * 60 * 60 * 1000;
/// Longest a space may remember last-seen times (three years).
pub const MAX_REMEMBER_MS: u64 = 1_096 * 24 * 60 * 60 * 1000;
/// Longest grace a space may give a member whose last connection ended
/// without a goodbye (five minutes): past it, "present" would lie.
pub const MAX_GRACE_MS: u64 = 5 * 60 * 1000;
/// Events a subscriber may fall behind before it is told it lagged.
pub const EVENT_QUEUE: usize = 4_096;
/// Longest connection id, in bytes.
pub const MAX_CONN_ID_BYTES: usize = 64;
/// Most live connections one member may hold in one space; an attach past
/// it is refused.
pub const MAX_CONNS_PER_MEMBER: usize = 64;
/// Shortest connection TTL a store accepts.
pub const MIN_CONN_TTL_MS: u64 = 1_000;
/// Longest connection TTL a store accepts (10 minutes).
pub const MAX_CONN_TTL_MS: u64 = 10 * 60 * 1000;

/// Longest name of an outbox consumer (a server), in bytes: stores keep
/// one entry per name.
pub const MAX_OUTBOX_CONSUMER_BYTES: usize = 200;

/// Largest body of a message kept in the webhook outbox, in bytes
/// ([`crate::outbox::OutboxKind::Message`]): room for a Pusher client
/// event (10 KB of data, escaped, and its names).
pub const MAX_OUTBOX_MESSAGE_BYTES: usize = 32 * 1024;

/// Most webhook endpoints one space's configuration names
/// ([`crate::outbox::SpaceHook`]).
pub const MAX_SPACE_HOOKS: usize = 8;

/// Longest URL of a space's webhook endpoint, in bytes.
pub const MAX_HOOK_URL_BYTES: usize = 2_048;

/// Longest signing secret of a space's webhook endpoint, in bytes (as
/// written, `whsec_` and base64).
pub const MAX_HOOK_SECRET_BYTES: usize = 256;

/// Longest topic of a relayed message, in bytes
/// ([`crate::relay`]).
pub const MAX_RELAY_TOPIC_BYTES: usize = 64;

/// Largest payload of a relayed message, in bytes: room for the largest
/// event a Pusher app may send (10 KB of data, escaped, to 100 channels).
/// Every server receives every relayed message, so it stays small.
pub const MAX_RELAY_PAYLOAD_BYTES: usize = 128 * 1024;
