//! `POST /v1/spaces/{space}/leave`: explicit goodbyes.

use axum::Json;
use axum::extract::State;
use serde::Serialize;
use utoipa::ToSchema;

use super::dto::MembersBody;
use crate::extract::{JsonBody, SpacePath};
use crate::problem::{ApiError, BadInput};
use crate::state::AppState;

/// What a leave call did.
#[derive(Debug, Serialize, ToSchema)]
pub struct LeaveAnswer {
    /// How many of the members were present.
    pub left: u64,
}

/// Members leave: offline at once.
#[utoipa::path(
    post,
    path = "/v1/spaces/{space}/leave",
    operation_id = "leave",
    tag = "heartbeats",
    params(SpacePath),
    request_body = MembersBody,
    responses(
        (status = 200, description = "Done", body = LeaveAnswer),
        BadInput,
    ),
)]
pub async fn leave(
    State(state): State<AppState>,
    SpacePath(space): SpacePath,
    body: JsonBody,
) -> Result<Json<LeaveAnswer>, ApiError> {
    let keys = body.parse::<MembersBody<'_>>()?.keys()?;
    let left = state.store().leave(&space, &keys).await?;
    Ok(Json(LeaveAnswer { left }))
}
