//! Operations: `/healthz`, `/readyz` (no key needed) and the handler of
//! `/metrics`, which `crate::routes` declares behind a read key.

use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use herenow_core::SpaceName;

use crate::problem::ApiError;
use crate::state::AppState;

/// How long `/readyz` waits for the store.
const READY_TIMEOUT: Duration = Duration::from_secs(2);

/// `/healthz` and `/readyz`: outside `/v1` and its API keys, so probes
/// need none.
pub fn router() -> Router<AppState> {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
}

/// `200 ok` while the process runs.
async fn healthz() -> &'static str {
    "ok"
}

/// `200` when the store answers a count, `503` otherwise; `503`
/// (`shutting-down`) from the moment the shutdown begins, so a load
/// balancer that still asks stops sending clients here. A Redis store is
/// also not ready while Redis failed its last ping or heartbeats buffered
/// during an outage still wait to be written: a load balancer should send
/// reads elsewhere until this server's view is whole again. Asked then,
/// it also pings Redis in the background (`RedisStore::probe`), so a
/// server that only writes is ready again as soon as Redis answers.
async fn readyz(State(state): State<AppState>) -> Response {
    if state.shutdown_token().is_cancelled() {
        return ApiError::unavailable("shutting-down", "the server is shutting down", 1)
            .into_response();
    }
    if let Some(why) = state.backend().not_ready() {
        return ApiError::unavailable("not-ready", why, 1).into_response();
    }
    let probe = match SpaceName::new("herenow.readyz") {
        Ok(p) => p,
        Err(e) => return ApiError::from(e).into_response(),
    };
    match tokio::time::timeout(READY_TIMEOUT, state.store().count(&probe, None)).await {
        Ok(Ok(_)) => "ready".into_response(),
        Ok(Err(e)) => {
            ApiError::unavailable("not-ready", format!("the store did not answer: {e}"), 1)
                .into_response()
        }
        Err(_) => ApiError::unavailable("not-ready", "the store did not answer within 2 s", 1)
            .into_response(),
    }
}

/// Prometheus text exposition (`/metrics`), with the alive-tasks gauge
/// read from the runtime this handler runs on.
pub(crate) async fn metrics(State(state): State<AppState>) -> Response {
    let tasks = tokio::runtime::Handle::current()
        .metrics()
        .num_alive_tasks();
    state.metrics().runtime_alive_tasks(tasks);
    let mut response = state.metrics().render().into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
    );
    (StatusCode::OK, response).into_response()
}
