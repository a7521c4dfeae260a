//! The middleware of the routes: one function per group of routes, so a
//! route is wrapped once.
//!
//! Why not one `from_fn` per concern: axum applies a layer to every route,
//! and on each request clones the route's service together with every
//! service it wraps, one allocation per level, at each level again. With
//! the seven levels a single heartbeat used to pass (latency, key,
//! timeout, and the four layers every request passes), that was 42
//! allocations and 11 boxed futures per request, most of the router's own
//! cost (issue 10). So the concerns of a group of routes run in one
//! middleware, in the order they had; and the layers every request passes
//! (problems, panics, body limits) wrap the router once, from outside
//! ([`crate::app`]).
//!
//! - [`v1`]: the JSON API: latency, then the API key, then the request
//!   timeout;
//! - [`keyed`]: the event streams: latency, then the API key (no timeout:
//!   streams end on disconnect or shutdown);
//! - the other routes (WebSocket, health, OpenAPI, the page) record their
//!   latency alone ([`crate::metrics::track_latency`]).

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::auth;
use crate::metrics::Latency;
use crate::problem::ApiError;
use crate::state::AppState;

/// Middleware of `/v1`: times the request, refuses it without a fitting
/// key, and answers `503` when it outlives the configured request timeout,
/// so a stuck store call cannot pin a connection.
pub async fn v1(State(state): State<AppState>, mut request: Request, next: Next) -> Response {
    let timer = Latency::start(&request);
    let response = match auth::authorize(&state, &mut request) {
        Err(refused) => refused.into_response(),
        Ok(()) => match tokio::time::timeout(state.request_timeout(), next.run(request)).await {
            Ok(response) => response,
            Err(_) => ApiError::unavailable(
                "timeout",
                "the request took longer than the server's request timeout",
                1,
            )
            .into_response(),
        },
    };
    timer.finish(state.metrics());
    response
}

/// Middleware of the event streams: times the request and refuses it
/// without a fitting key.
pub async fn keyed(State(state): State<AppState>, mut request: Request, next: Next) -> Response {
    let timer = Latency::start(&request);
    let response = match auth::authorize(&state, &mut request) {
        Err(refused) => refused.into_response(),
        Ok(()) => next.run(request).await,
    };
    timer.finish(state.metrics());
    response
}
