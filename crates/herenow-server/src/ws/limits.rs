//! The bounds of one WebSocket connection, in one place (docs/PROTOCOL.md
//! states them to clients).

use std::time::Duration;

use herenow_core::InvalidInput;

/// Largest frame and message a client may send: 64 KiB. A larger one
/// closes the socket with `1009`.
pub const MAX_MESSAGE_BYTES: usize = 64 * 1024;
/// Messages queued for one client before it counts as lagging.
pub const SEND_QUEUE: usize = 1_024;
/// The longest a lagging connection's queue may stay without room
/// before the reader counts as stopped and is closed with `4009` (or a
/// third of the TTL, if shorter).
pub const MAX_STALL: Duration = Duration::from_secs(10);
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
/// The window in which [`MAX_ERRORS`] errors close the socket.
pub const ERROR_WINDOW: Duration = Duration::from_secs(10);
/// Pings closer together than this are answered but not written to the
/// store.
pub const MIN_STORE_PING: Duration = Duration::from_secs(1);
/// Snapshot page size when `subscribe` names none.
pub const DEFAULT_PAGE_SIZE: usize = 500;
/// Largest snapshot page.
pub const MAX_PAGE_SIZE: usize = 1_000;

/// The snapshot page size a `subscribe` or `watch` asks for:
/// [`DEFAULT_PAGE_SIZE`] when it names none, else 1 to [`MAX_PAGE_SIZE`].
pub(in crate::ws) fn page_size(asked: Option<u64>) -> Result<usize, InvalidInput> {
    match asked {
        None => Ok(DEFAULT_PAGE_SIZE),
        Some(n) if (1..=MAX_PAGE_SIZE as u64).contains(&n) => Ok(n as usize),
        Some(n) => Err(InvalidInput::LimitOutOfRange {
            got: i64::try_from(n).unwrap_or(i64::MAX),
            max: MAX_PAGE_SIZE,
        }),
    }
}
