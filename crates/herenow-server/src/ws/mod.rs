//! `GET /v1/ws`: live presence over one WebSocket (docs/PROTOCOL.md).
//!
//! A browser tab proves who it is with a token ([`crate::token`]), joins
//! spaces (its presence is a *connection* in the store, see
//! `herenow_core::conn`), pings, and subscribes to spaces' presence.
//! This file is the route and the upgrade (over the socket hub's bound a
//! `503` problem, never a queue); [`wire`] the messages (public, for
//! clients written in Rust); `session` the protocol on the socket core,
//! composed of one type per job (`joined`, `subscriptions`, `send_queue`,
//! `timers`, `guard`, `watch`, `session_presence` its presence in its
//! spaces); `limits` its bounds; `msg` one file per client message.
//!
//! Every connection task is tracked by the socket hub, so [`crate::serve`]
//! waits for it at shutdown.

mod guard;
mod joined;
mod limits;
mod msg;
mod send_queue;
mod session;
mod session_presence;
mod subscriptions;
mod timers;
mod watch;
pub mod wire;

use axum::Router;
use axum::extract::{Request, State};
use axum::response::Response;
use axum::routing::get;
use serde::Deserialize;
use tokio::sync::OwnedSemaphorePermit;

use crate::extract::ApiQuery;
use crate::problem::ApiError;
use crate::state::AppState;

use crate::socket;
use limits::MAX_MESSAGE_BYTES;

/// `GET /v1/ws`. It sits outside the API-key middleware ([`crate::app`]):
/// its credential is the token ([`crate::token`] says why).
pub(crate) fn router() -> Router<AppState> {
    Router::new().route("/v1/ws", get(upgrade))
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
    request: Request,
) -> Result<Response, ApiError> {
    if state.shutdown_token().is_cancelled() {
        return Err(ApiError::unavailable(
            "shutting-down",
            "the server is shutting down",
            1,
        ));
    }
    let hub = state.ws();
    let permit: OwnedSemaphorePermit = hub.admit().ok_or_else(|| {
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
    let (ttl, ping) = hub.timing();
    let config = timers::Settings {
        ttl,
        ping,
        liveness: hub.liveness(),
    };
    Ok(socket::upgrade(
        request,
        MAX_MESSAGE_BYTES,
        move |socket| async move {
            session::run(socket, state, conn, config, query.token, permit).await;
            drop(tracked);
        },
    ))
}
