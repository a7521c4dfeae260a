//! `GET /v1/webhooks`: each endpoint's state, queue, counters and last
//! error, and the store's outbox. Needs a write key (declared with the
//! route, `crate::routes`); secrets are never shown, nor a URL's password
//! or query.

use axum::Json;
use axum::extract::State;

use crate::state::AppState;
use crate::webhooks::WebhooksView;

/// Every webhook endpoint and how its delivery goes.
#[utoipa::path(
    get,
    path = "/v1/webhooks",
    operation_id = "webhooks",
    tag = "webhooks",
    responses(
        (status = 200, description = "Endpoints, in configuration order, and the outbox", body = WebhooksView),
    ),
)]
pub async fn list(State(state): State<AppState>) -> Json<WebhooksView> {
    Json(state.webhooks().view().await)
}
