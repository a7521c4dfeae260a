//! `GET` / `PUT /v1/spaces/{space}/config`: a space's time policy.

use axum::Json;
use axum::extract::State;
use herenow_core::SpaceConfig;

use crate::extract::{JsonBody, SpacePath};
use crate::metrics::Query;
use crate::problem::{ApiError, Problem};
use crate::state::AppState;

pub use crate::protocol::dto::SpaceConfigDto;

/// The space's time policy (the defaults for a space never configured).
#[utoipa::path(
    get,
    path = "/v1/spaces/{space}/config",
    operation_id = "space_config",
    tag = "spaces",
    params(("space" = String, Path, description = "Space name")),
    responses(
        (status = 200, description = "The policy", body = SpaceConfigDto),
        (status = 400, description = "Bad input", body = Problem, content_type = "application/problem+json"),
    ),
    security(("api_key" = []))
)]
pub async fn get_config(
    State(state): State<AppState>,
    SpacePath(space): SpacePath,
) -> Result<Json<SpaceConfigDto>, ApiError> {
    state.metrics().query(Query::Config);
    Ok(Json(state.store().config(&space).await?.into()))
}

/// Sets the space's time policy; the four thresholds are required, the
/// remembering fields keep their value when absent.
#[utoipa::path(
    put,
    path = "/v1/spaces/{space}/config",
    operation_id = "set_space_config",
    tag = "spaces",
    params(("space" = String, Path, description = "Space name")),
    request_body = SpaceConfigDto,
    responses(
        (status = 200, description = "The new policy", body = SpaceConfigDto),
        (status = 400, description = "Bad input", body = Problem, content_type = "application/problem+json"),
    ),
    security(("api_key" = []))
)]
pub async fn put_config(
    State(state): State<AppState>,
    SpacePath(space): SpacePath,
    body: JsonBody,
) -> Result<Json<SpaceConfigDto>, ApiError> {
    let current = state.store().config(&space).await?;
    let config: SpaceConfig = body.parse::<SpaceConfigDto>()?.onto(current);
    config.validate()?;
    state.store().set_config(&space, config).await?;
    Ok(Json(config.into()))
}
