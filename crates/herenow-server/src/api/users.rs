//! A user over every space: `GET /v1/users/{id}` and
//! `POST /v1/users/status` answer its last seen anywhere (what a contact
//! list shows next to an avatar), `DELETE /v1/users/{id}` erases it
//! everywhere (account deletion, erasure requests).
//!
//! Users only: a guest is a visitor of one space, never looked up across
//! spaces, and has no friend set to erase.

use std::borrow::Cow;

use axum::Json;
use axum::extract::State;
use herenow_core::{
    Capability, ErasureReport, InvalidInput, MemberId, SeenAnywhere, SpaceName, UserIndex,
    limits::MAX_BATCH,
};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::only;
use crate::extract::{IdPath, JsonBody};
use crate::metrics::Query;
use crate::problem::{ApiError, BadInput, Problem};
use crate::protocol::dto::StatusDto;
use crate::state::AppState;

/// A user's last seen anywhere: the newest sighting over every space.
#[derive(Debug, Serialize, ToSchema)]
pub struct SeenAnywhereDto {
    /// The user asked about.
    #[schema(value_type = String)]
    pub id: MemberId,
    /// The best status over the spaces the user is present in (`online`
    /// if online in any); `offline` when present nowhere.
    pub status: StatusDto,
    /// The newest last-seen time over every space, present or remembered,
    /// in ms since the UNIX epoch; `null` when never seen, erased, or past
    /// every space's `remember_ms` horizon.
    pub last_seen_ms: Option<u64>,
    /// The space of `last_seen_ms`; `null` with it.
    #[schema(value_type = Option<String>)]
    pub space: Option<SpaceName>,
}

impl From<SeenAnywhere> for SeenAnywhereDto {
    fn from(s: SeenAnywhere) -> Self {
        Self {
            id: s.id,
            status: s.status.into(),
            last_seen_ms: s.last_seen_ms,
            space: s.space,
        }
    }
}

/// The body of `POST /v1/users/status`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct UsersBody<'a> {
    /// 1 to 10,000 user ids.
    #[serde(borrow, deserialize_with = "crate::protocol::bounded::batch")]
    #[schema(value_type = Vec<String>)]
    pub ids: Vec<Cow<'a, str>>,
}

/// Users' last seen anywhere, in the order asked.
#[derive(Debug, Serialize, ToSchema)]
pub struct UsersAnswer {
    /// One per id asked, in the same order (an id asked twice is answered
    /// twice).
    pub users: Vec<SeenAnywhereDto>,
}

/// What erasing a user removed.
#[derive(Debug, Serialize, ToSchema)]
pub struct ErasureDto {
    /// Spaces the user was present in; each got a `leave` event.
    pub presence: u64,
    /// Remembered last-seen times forgotten.
    pub remembered: u64,
    /// Whether the user's own friend set existed (it is gone).
    pub friend_set: bool,
    /// Other users' friend sets the user was removed from.
    pub listed_by: u64,
}

impl From<ErasureReport> for ErasureDto {
    fn from(r: ErasureReport) -> Self {
        Self {
            presence: r.presence,
            remembered: r.remembered,
            friend_set: r.friend_set,
            listed_by: r.listed_by,
        }
    }
}

/// The id whose `GET` and `DELETE` the batch route `/v1/users/status`
/// shadows: the router sends them to [`one_named_status`] and
/// [`erase_named_status`], so a user called `status` is a user like any.
pub const SHADOWED_ID: &str = "status";

/// A user's last seen anywhere: the newest last-seen time over every
/// space (present, or remembered after a leave or expiry until the
/// space's `remember_ms`), and which space. A never-seen id is `offline`
/// with `last_seen_ms: null`.
#[utoipa::path(
    get,
    path = "/v1/users/{id}",
    operation_id = "user_seen_anywhere",
    tag = "users",
    params(IdPath),
    responses(
        (status = 200, description = "The user's last seen anywhere", body = SeenAnywhereDto),
        BadInput,
        (status = 501, description = "This store's key layout cannot answer it", body = Problem, content_type = "application/problem+json"),
    ),
)]
pub async fn one(
    State(state): State<AppState>,
    IdPath(id): IdPath,
) -> Result<Json<SeenAnywhereDto>, ApiError> {
    state.metrics().query(Query::User);
    let answer = user_index(&state)?
        .seen_anywhere(std::slice::from_ref(&id))
        .await?;
    Ok(Json(
        only(answer, "seen_anywhere answered no user for one asked")?.into(),
    ))
}

/// `GET /v1/users/status`: [`one`] for the user called `status`.
pub async fn one_named_status(state: State<AppState>) -> Result<Json<SeenAnywhereDto>, ApiError> {
    one(state, shadowed()?).await
}

/// Last seen anywhere of up to 10,000 users, in the order asked: a
/// contact list in one call.
#[utoipa::path(
    post,
    path = "/v1/users/status",
    operation_id = "users_seen_anywhere",
    tag = "users",
    request_body = UsersBody,
    responses(
        (status = 200, description = "The users, in the order asked", body = UsersAnswer),
        BadInput,
        (status = 501, description = "This store's key layout cannot answer it", body = Problem, content_type = "application/problem+json"),
    ),
)]
pub async fn status(
    State(state): State<AppState>,
    body: JsonBody,
) -> Result<Json<UsersAnswer>, ApiError> {
    let ids = user_batch(&body.parse::<UsersBody<'_>>()?.ids)?;
    state.metrics().query(Query::UsersStatus);
    let users = user_index(&state)?.seen_anywhere(&ids).await?;
    Ok(Json(UsersAnswer {
        users: users.into_iter().map(SeenAnywhereDto::from).collect(),
    }))
}

/// Erases a user everywhere: its presence in every space (each gets a
/// `leave` event), its remembered last-seen times, its friend set, and its
/// place in other users' friend sets. Durable before it answers, like a
/// friend write. Erasing an unknown user (or erasing twice) is not an
/// error: the report is all zeros. Needs a write key.
#[utoipa::path(
    delete,
    path = "/v1/users/{id}",
    operation_id = "erase_user",
    tag = "users",
    params(IdPath),
    responses(
        (status = 200, description = "What was erased", body = ErasureDto),
        BadInput,
        (status = 501, description = "This store's key layout cannot erase", body = Problem, content_type = "application/problem+json"),
    ),
)]
pub async fn erase(
    State(state): State<AppState>,
    IdPath(id): IdPath,
) -> Result<Json<ErasureDto>, ApiError> {
    let report = user_index(&state)?.erase_user(&id).await?;
    // Counted, never logged by id: the point is to forget the user.
    state.metrics().erasure();
    Ok(Json(report.into()))
}

/// `DELETE /v1/users/status`: [`erase`] for the user called `status`.
pub async fn erase_named_status(state: State<AppState>) -> Result<Json<ErasureDto>, ApiError> {
    erase(state, shadowed()?).await
}

/// The path of the user called `status`, which the batch route shadows.
fn shadowed() -> Result<IdPath, ApiError> {
    Ok(IdPath(MemberId::new(SHADOWED_ID)?))
}

/// The store's user index, or the answer of a store without one.
fn user_index(state: &AppState) -> Result<&dyn UserIndex, ApiError> {
    let store = state.store();
    store
        .user_index()
        .ok_or_else(|| store.lacks(Capability::UserIndex).into())
}

/// Checks a batch of user ids: its size, then each id, naming the bound
/// or the id (by position, and its start) that is wrong.
fn user_batch(ids: &[Cow<'_, str>]) -> Result<Vec<MemberId>, ApiError> {
    if let Err(e) = herenow_core::store::check_batch(ids.len()) {
        let detail = match &e {
            InvalidInput::EmptyBatch => {
                format!("ids is empty; ask about 1 to {MAX_BATCH} users at once")
            }
            InvalidInput::BatchTooLarge { len, max } => {
                format!("ids holds {len} users; at most {max} may be asked about at once")
            }
            other => other.to_string(),
        };
        return Err(ApiError::from(e).with_detail(detail));
    }
    ids.iter()
        .enumerate()
        .map(|(i, id)| {
            MemberId::new(id).map_err(|e| {
                let detail = format!("ids[{i}] {}: {e}", shown(id));
                ApiError::from(e).with_detail(detail)
            })
        })
        .collect()
}

/// An id as a problem's detail shows it: quoted, escaped, and cut after
/// 32 characters (a refused id may be kilobytes long).
fn shown(id: &str) -> String {
    const SHOWN: usize = 32;
    match id.char_indices().nth(SHOWN) {
        Some((end, _)) => format!("{:?}…", &id[..end]),
        None => format!("{id:?}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batches_name_the_bound_and_the_bad_id() {
        let e = user_batch(&[]).unwrap_err();
        assert_eq!(e.code(), "empty-batch");
        let many: Vec<Cow<'_, str>> = (0..=MAX_BATCH).map(|i| i.to_string().into()).collect();
        assert_eq!(user_batch(&many).unwrap_err().code(), "batch-too-large");
        let bad: Vec<Cow<'_, str>> = vec!["ok".into(), "a\u{7}b".into()];
        assert_eq!(user_batch(&bad).unwrap_err().code(), "bad-member-id");
        assert_eq!(user_batch(&many[..MAX_BATCH]).unwrap().len(), MAX_BATCH);
    }

    #[test]
    fn long_ids_are_cut_when_shown() {
        assert_eq!(shown("ann"), "\"ann\"");
        assert_eq!(shown("a\u{7}"), "\"a\\u{7}\"");
        let long = "é".repeat(300);
        assert_eq!(shown(&long), format!("{:?}…", "é".repeat(32)));
    }
}
