//! Errors of the presence domain, classified in one place.
//!
//! The server maps [`ErrorKind`] to an HTTP status and [`Error::code`] to a
//! stable problem type; nothing else inspects error text.

use crate::limits;

/// Why an input was refused. Every variant names the problem precisely
/// enough for a 4xx answer a caller can act on.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum InvalidInput {
    /// Empty member id.
    #[error("member id is empty")]
    EmptyId,
    /// Member id longer than the limit.
    #[error(
        "member id is {len} bytes; the limit is {} bytes",
        limits::MAX_ID_BYTES
    )]
    IdTooLong {
        /// Its length in bytes.
        len: usize,
    },
    /// Member id with a control character.
    #[error("member id contains a control character")]
    IdControlChar,
    /// Empty space name.
    #[error("space name is empty")]
    EmptySpaceName,
    /// Space name longer than the limit.
    #[error(
        "space name is {len} bytes; the limit is {} bytes",
        limits::MAX_SPACE_BYTES
    )]
    SpaceNameTooLong {
        /// Its length in bytes.
        len: usize,
    },
    /// Space name with a character outside `[A-Za-z0-9-_.:@]`.
    #[error("space name contains {found:?}; allowed are ASCII letters, digits and - _ . : @")]
    SpaceNameChar {
        /// The first character that is not allowed.
        found: char,
    },
    /// Space name `.` or `..`: URLs fold them away, so no path could name
    /// the space.
    #[error("space name {0:?} is refused: URLs fold . and .. away, so no path could name it")]
    SpaceNameDots(&'static str),
    /// A batch with too many items.
    #[error("batch has {len} items; the limit is {max}")]
    BatchTooLarge {
        /// Items sent.
        len: usize,
        /// The most one call may carry ([`limits::MAX_BATCH`]).
        max: usize,
    },
    /// A batch with no items.
    #[error("batch is empty")]
    EmptyBatch,
    /// Metadata larger than the limit.
    #[error(
        "metadata is {len} bytes of JSON; the limit is {} bytes",
        limits::MAX_META_BYTES
    )]
    MetaTooLarge {
        /// Its size in bytes.
        len: usize,
    },
    /// Metadata that is not a JSON object.
    #[error("metadata must be a JSON object")]
    MetaNotObject,
    /// A cursor this store did not issue, or issued for another query.
    #[error("cursor is not valid for this query")]
    BadCursor,
    /// A page size out of range.
    #[error("limit must be between 1 and {max}; got {got}")]
    LimitOutOfRange {
        /// What was asked for, as sent (a query parameter may be negative).
        got: i64,
        /// The largest page allowed ([`limits::MAX_PAGE`]).
        max: usize,
    },
    /// A window of zero, or longer than the space keeps members.
    #[error(
        "window of {window_ms} ms is out of range; it must be between 1 ms and the retention ({max_ms} ms)"
    )]
    WindowOutOfRange {
        /// What was asked for.
        window_ms: u64,
        /// The space's retention.
        max_ms: u64,
    },
    /// An explicit heartbeat time too far in the future.
    #[error(
        "heartbeat time {at_ms} is more than {} ms in the future",
        limits::MAX_FUTURE_SKEW_MS
    )]
    AtInFuture {
        /// The time given, in ms since the UNIX epoch.
        at_ms: u64,
    },
    /// A friend set larger than the limit.
    #[error(
        "a user may have at most {} friends; this would make {len}",
        limits::MAX_FRIENDS
    )]
    TooManyFriends {
        /// The size it would have had.
        len: usize,
    },
    /// A space configuration whose thresholds do not fit together.
    #[error("bad space configuration: {why}")]
    BadConfig {
        /// What is wrong.
        why: &'static str,
    },
    /// A friends operation naming a guest; friends are users.
    #[error("friends are users; guests have no friend sets")]
    GuestFriends,
    /// A connection id that is empty, too long or has a character outside
    /// `[A-Za-z0-9-_.:]`.
    #[error(
        "connection id must be 1 to {} bytes of ASCII letters, digits and - _ . :",
        limits::MAX_CONN_ID_BYTES
    )]
    BadConnId,
    /// A connection TTL out of range.
    #[error(
        "connection TTL of {ttl_ms} ms is out of range; it must be between {} and {} ms",
        limits::MIN_CONN_TTL_MS,
        limits::MAX_CONN_TTL_MS
    )]
    ConnTtlOutOfRange {
        /// What was asked for.
        ttl_ms: u64,
    },
    /// A member with too many live connections in one space.
    #[error(
        "this member already has {} live connections in this space",
        limits::MAX_CONNS_PER_MEMBER
    )]
    TooManyConnections,
    /// A connection id already attached for another member.
    #[error("connection id is in use by another member")]
    ConnIdTaken,
    /// A relay topic that is empty, too long or has a character outside
    /// `[A-Za-z0-9-_.:]`.
    #[error(
        "a relay topic is 1 to {} bytes of ASCII letters, digits and - _ . :",
        limits::MAX_RELAY_TOPIC_BYTES
    )]
    BadRelayTopic,
    /// A relayed payload over the limit.
    #[error(
        "a relayed message is at most {} bytes; this one is {len}",
        limits::MAX_RELAY_PAYLOAD_BYTES
    )]
    RelayTooLarge {
        /// Its size.
        len: usize,
    },
    /// A webhook outbox message larger than the limit.
    #[error(
        "an outbox message is {len} bytes; the limit is {} bytes",
        limits::MAX_OUTBOX_MESSAGE_BYTES
    )]
    MessageTooLarge {
        /// Its size.
        len: usize,
    },
}

impl InvalidInput {
    /// A stable, machine-readable code for this problem.
    pub fn code(&self) -> &'static str {
        match self {
            InvalidInput::EmptyId
            | InvalidInput::IdTooLong { .. }
            | InvalidInput::IdControlChar => "bad-member-id",
            InvalidInput::EmptySpaceName
            | InvalidInput::SpaceNameTooLong { .. }
            | InvalidInput::SpaceNameChar { .. }
            | InvalidInput::SpaceNameDots(_) => "bad-space-name",
            InvalidInput::BatchTooLarge { .. } => "batch-too-large",
            InvalidInput::EmptyBatch => "empty-batch",
            InvalidInput::MetaTooLarge { .. } | InvalidInput::MetaNotObject => "bad-metadata",
            InvalidInput::BadCursor => "bad-cursor",
            InvalidInput::LimitOutOfRange { .. } => "bad-limit",
            InvalidInput::WindowOutOfRange { .. } => "bad-window",
            InvalidInput::AtInFuture { .. } => "bad-time",
            InvalidInput::TooManyFriends { .. } => "too-many-friends",
            InvalidInput::BadConfig { .. } => "bad-config",
            InvalidInput::GuestFriends => "guest-friends",
            InvalidInput::BadConnId => "bad-connection-id",
            InvalidInput::ConnTtlOutOfRange { .. } => "bad-ttl",
            InvalidInput::TooManyConnections => "too-many-connections",
            InvalidInput::ConnIdTaken => "connection-id-taken",
            InvalidInput::BadRelayTopic => "bad-relay-topic",
            InvalidInput::RelayTooLarge { .. } => "relay-too-large",
            InvalidInput::MessageTooLarge { .. } => "message-too-large",
        }
    }
}

/// How an error should be treated by whoever reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    /// The caller sent something wrong: their fault, do not retry as is.
    InvalidInput,
    /// The store cannot answer this question (a layout without last-seen
    /// times, say): their question, our limitation; do not retry.
    Unsupported,
    /// The store is down or slow; the same call may work later.
    Unavailable,
    /// A bug or a broken invariant.
    Internal,
}

/// The error of every store operation.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The caller's input was refused; [`InvalidInput`] says which rule
    /// it broke.
    #[error(transparent)]
    Invalid(#[from] InvalidInput),
    /// The store cannot answer this question.
    #[error("{what} is not supported by {store}")]
    Unsupported {
        /// The operation or field it cannot serve, as a phrase
        /// ("live connections").
        what: &'static str,
        /// The store or layout that lacks it.
        store: String,
    },
    /// The store is unreachable, slow or refusing writes.
    #[error("store unavailable: {reason}")]
    Unavailable {
        /// What went wrong.
        reason: String,
        /// The underlying error, where there is one.
        #[source]
        source: Option<Box<dyn std::error::Error + Send + Sync>>,
    },
    /// A snapshot that cannot be read.
    #[error("snapshot {what}")]
    Snapshot {
        /// What is wrong with it.
        what: String,
    },
    /// A broken invariant: a bug, or a reply from a backend that does not
    /// have the shape the store wrote. Not retryable.
    #[error("internal error: {0}")]
    Internal(String),
}

impl Error {
    /// The classification of this error.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::Invalid(_) => ErrorKind::InvalidInput,
            Error::Unsupported { .. } => ErrorKind::Unsupported,
            Error::Unavailable { .. } => ErrorKind::Unavailable,
            Error::Snapshot { .. } | Error::Internal(_) => ErrorKind::Internal,
        }
    }

    /// Whether the same call may succeed later.
    pub fn is_retryable(&self) -> bool {
        self.kind() == ErrorKind::Unavailable
    }

    /// A stable, machine-readable code (the server's problem `code`); for
    /// invalid input, [`InvalidInput::code`].
    pub fn code(&self) -> &'static str {
        match self {
            Error::Invalid(i) => i.code(),
            Error::Unsupported { .. } => "unsupported",
            Error::Unavailable { .. } => "store-unavailable",
            Error::Snapshot { .. } => "bad-snapshot",
            Error::Internal(_) => "internal",
        }
    }
}

/// The result of every store operation.
pub type Result<T, E = Error> = std::result::Result<T, E>;
