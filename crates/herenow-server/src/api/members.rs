//! Status and last seen: `GET /v1/spaces/{space}/members/{id}` and
//! `POST /v1/spaces/{space}/status`.

use axum::Json;
use axum::extract::State;
use herenow_core::MemberKey;
use serde::Deserialize;
use utoipa::IntoParams;

use super::dto::{MembersAnswer, MembersBody};
use super::only;
use crate::extract::{ApiQuery, JsonBody, SpaceMemberPath, SpacePath, member_kind};
use crate::metrics::Query;
use crate::problem::{ApiError, BadInput};
use crate::protocol::dto::MemberDto;
use crate::state::AppState;

/// The query of `GET members/{id}`.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct KindQuery {
    /// `user` (default) or `guest`.
    pub kind: Option<String>,
}

/// One member's status and last-seen time. A member who left or expired
/// is `offline` with its remembered last-seen time until the space's
/// `remember_ms`; a never-seen (or forgotten) id is `offline` with
/// `last_seen_ms: null`.
#[utoipa::path(
    get,
    path = "/v1/spaces/{space}/members/{id}",
    operation_id = "member_status",
    tag = "status",
    params(SpaceMemberPath, KindQuery),
    responses(
        (status = 200, description = "The member", body = MemberDto),
        BadInput,
    ),
)]
pub async fn one(
    State(state): State<AppState>,
    SpaceMemberPath(space, id): SpaceMemberPath,
    ApiQuery(q): ApiQuery<KindQuery>,
) -> Result<Json<MemberDto>, ApiError> {
    let key = MemberKey {
        kind: member_kind(q.kind.as_deref())?,
        id,
    };
    state.metrics().query(Query::Member);
    let answer = state
        .store()
        .status(&space, std::slice::from_ref(&key))
        .await?;
    Ok(Json(
        only(answer, "status answered no member for one asked")?.into(),
    ))
}

/// Status and last-seen time of up to 10,000 members, in the order asked,
/// remembered times of absent members included.
#[utoipa::path(
    post,
    path = "/v1/spaces/{space}/status",
    operation_id = "status",
    tag = "status",
    params(SpacePath),
    request_body = MembersBody,
    responses(
        (status = 200, description = "The members, in the order asked", body = MembersAnswer),
        BadInput,
    ),
)]
pub async fn status(
    State(state): State<AppState>,
    SpacePath(space): SpacePath,
    body: JsonBody,
) -> Result<Json<MembersAnswer>, ApiError> {
    let keys = body.parse::<MembersBody<'_>>()?.keys()?;
    state.metrics().query(Query::Status);
    let members = state.store().status(&space, &keys).await?;
    Ok(Json(MembersAnswer::from_statuses(members)))
}
