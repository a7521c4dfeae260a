//! `GET /v1/spaces`: spaces holding members, by name.

use axum::Json;
use axum::extract::State;
use herenow_core::{SpaceName, limits};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use crate::extract::{ApiQuery, page_limit};
use crate::metrics::Query;
use crate::problem::{ApiError, BadInput};
use crate::state::AppState;

/// The query of `GET /v1/spaces`.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct SpacesQuery {
    /// Start after this space name (the last one of the previous page).
    pub after: Option<String>,
    /// Page size, 1 to 1,000 (default 100).
    #[param(value_type = Option<u32>, minimum = 1, maximum = 1000)]
    pub limit: Option<String>,
}

/// Members stored in a space, by kind.
#[derive(Debug, Serialize, ToSchema)]
pub struct MemberCounts {
    /// Users among them.
    pub users: u64,
    /// Guests among them.
    pub guests: u64,
}

/// A space that holds members, and how many.
#[derive(Debug, Serialize, ToSchema)]
pub struct SpaceDto {
    /// The space's name, as `after` takes it.
    #[schema(value_type = String)]
    pub space: SpaceName,
    /// Members stored (seen within the retention).
    pub members: MemberCounts,
}

/// A page of spaces.
#[derive(Debug, Serialize, ToSchema)]
pub struct SpacesAnswer {
    /// Spaces by name.
    pub spaces: Vec<SpaceDto>,
}

/// Spaces holding members, by name, after `after`.
#[utoipa::path(
    get,
    path = "/v1/spaces",
    operation_id = "spaces",
    tag = "spaces",
    params(SpacesQuery),
    responses(
        (status = 200, description = "A page of spaces", body = SpacesAnswer),
        BadInput,
    ),
)]
pub async fn list(
    State(state): State<AppState>,
    ApiQuery(q): ApiQuery<SpacesQuery>,
) -> Result<Json<SpacesAnswer>, ApiError> {
    let after = q.after.as_deref().map(SpaceName::new).transpose()?;
    let limit = page_limit(q.limit.as_deref(), 100, limits::MAX_PAGE)?;
    state.metrics().query(Query::Spaces);
    let spaces = state.store().spaces(after.as_ref(), limit).await?;
    Ok(Json(SpacesAnswer {
        spaces: spaces
            .into_iter()
            .map(|s| SpaceDto {
                space: s.space,
                members: MemberCounts {
                    users: s.members.users,
                    guests: s.members.guests,
                },
            })
            .collect(),
    }))
}
