//! `GET /v1/ws`: live presence over one WebSocket (docs/PROTOCOL.md).
//!
//! A browser tab proves who it is with a token ([`crate::token`]), joins
//! spaces (its presence is a *connection* in the store, see
//! `herenow_core::conn`), pings, and subscribes to spaces' presence.
//!
//! - this file: the route and the upgrade (bounded by a semaphore; over
//!   the bound a `503` problem, never a queue) and the [`Hub`]; the
//!   messages themselves are [`crate::protocol::ws`], re-exported here;
//! - `limits`: the bounds of one connection;
//! - `session`: the per-connection task (reading, dispatching, detaching
//!   on every way out), composing one type per job: `joined` (the spaces
//!   it is present in), `subscriptions` (the spaces it watches),
//!   `outbox` (the bounded send queue and its drop policy for a client
//!   that does not read fast enough, drained by `writer`), `timers`
//!   (hello, idle, presence refresh) and `guard` (the rate limit and the
//!   abuse counter);
//! - `msg`: one file per client message, applying it to the session
//!   through the session's methods.
//!
//! Every connection task is tracked ([`Hub`]), so [`crate::serve`] waits
//! for them to detach and close with `1001` at shutdown: axum's graceful
//! shutdown does not wait for upgraded connections.

mod guard;
mod joined;
mod limits;
mod msg;
mod outbox;
mod session;
mod subscriptions;
mod timers;
mod writer;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::extract::ws::WebSocketUpgrade;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use herenow_core::ConnId;
use serde::Deserialize;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_util::task::TaskTracker;

use crate::config::Config;
use crate::extract::ApiQuery;
use crate::problem::ApiError;
use crate::state::AppState;

pub use crate::protocol::ws::{
    ClientMessage, ConnMeta, Envelope, MAX_REF_BYTES, MESSAGE_TYPES, Ref, RefOnly, ServerMessage,
    SnapshotMember, WsError, close,
};
pub use limits::{
    DEFAULT_PAGE_SIZE, ERROR_WINDOW, HELLO_TIMEOUT, MAX_ERRORS, MAX_JOINED, MAX_MESSAGE_BYTES,
    MAX_PAGE_SIZE, MAX_SUBSCRIBED, MIN_STORE_PING, RATE_BURST, RATE_PER_SECOND, SEND_QUEUE,
};

/// `GET /v1/ws`. It sits outside the API-key middleware ([`crate::app`]):
/// browsers cannot send headers with a WebSocket, so the token is the
/// credential.
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
    let config = timers::Settings {
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

#[cfg(test)]
mod tests {
    use super::*;

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
