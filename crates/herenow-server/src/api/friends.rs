//! Friend sets (global, at most 5,000 users each) and online friends.

use std::borrow::Cow;

use axum::Json;
use axum::extract::State;
use herenow_core::{MemberId, limits};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::dto::MembersAnswer;
use crate::extract::{
    ApiQuery, JsonBody, SpaceUserPath, UserPath, page_limit, user_ids, window_ms,
};
use crate::metrics::Query;
use crate::problem::{ApiError, BadInput};
use crate::state::AppState;

/// A list of user ids to set, add or remove.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct FriendsBody<'a> {
    /// 1 to 10,000 user ids.
    #[serde(borrow, deserialize_with = "crate::protocol::bounded::batch")]
    #[schema(value_type = Vec<String>)]
    pub friends: Vec<Cow<'a, str>>,
}

/// The size of a friend set after a change.
#[derive(Debug, Serialize, ToSchema)]
pub struct FriendCount {
    /// How many friends the user now has.
    pub friends: u64,
}

/// A user's friend set.
#[derive(Debug, Serialize, ToSchema)]
pub struct FriendList {
    /// The user whose friends these are.
    #[schema(value_type = String)]
    pub user: MemberId,
    /// The friends, sorted by id.
    #[schema(value_type = Vec<String>)]
    pub friends: Vec<MemberId>,
}

/// Replaces a user's friend set; an empty list clears it.
#[utoipa::path(
    put,
    path = "/v1/friends/{user}",
    operation_id = "set_friends",
    tag = "friends",
    params(UserPath),
    request_body = FriendsBody,
    responses(
        (status = 200, description = "The new size", body = FriendCount),
        BadInput,
    ),
)]
pub async fn set(
    State(state): State<AppState>,
    UserPath(user): UserPath,
    body: JsonBody,
) -> Result<Json<FriendCount>, ApiError> {
    let list = body.parse::<FriendsBody<'_>>()?.friends;
    // Empty clears (`herenow friends set USER`); add and remove need an id.
    let ids = if list.is_empty() {
        Vec::new()
    } else {
        user_ids(&list)?
    };
    let friends = state.store().set_friends(&user, &ids).await?;
    Ok(Json(FriendCount { friends }))
}

/// Adds to a user's friend set.
#[utoipa::path(
    post,
    path = "/v1/friends/{user}/add",
    operation_id = "add_friends",
    tag = "friends",
    params(UserPath),
    request_body = FriendsBody,
    responses(
        (status = 200, description = "The new size", body = FriendCount),
        BadInput,
    ),
)]
pub async fn add(
    State(state): State<AppState>,
    UserPath(user): UserPath,
    body: JsonBody,
) -> Result<Json<FriendCount>, ApiError> {
    let ids = user_ids(&body.parse::<FriendsBody<'_>>()?.friends)?;
    let friends = state.store().add_friends(&user, &ids).await?;
    Ok(Json(FriendCount { friends }))
}

/// Removes from a user's friend set.
#[utoipa::path(
    post,
    path = "/v1/friends/{user}/remove",
    operation_id = "remove_friends",
    tag = "friends",
    params(UserPath),
    request_body = FriendsBody,
    responses(
        (status = 200, description = "The new size", body = FriendCount),
        BadInput,
    ),
)]
pub async fn remove(
    State(state): State<AppState>,
    UserPath(user): UserPath,
    body: JsonBody,
) -> Result<Json<FriendCount>, ApiError> {
    let ids = user_ids(&body.parse::<FriendsBody<'_>>()?.friends)?;
    let friends = state.store().remove_friends(&user, &ids).await?;
    Ok(Json(FriendCount { friends }))
}

/// A user's friends, sorted by id.
#[utoipa::path(
    get,
    path = "/v1/friends/{user}",
    operation_id = "friends",
    tag = "friends",
    params(UserPath),
    responses(
        (status = 200, description = "The friend set", body = FriendList),
        BadInput,
    ),
)]
pub async fn get_friends(
    State(state): State<AppState>,
    UserPath(user): UserPath,
) -> Result<Json<FriendList>, ApiError> {
    state.metrics().query(Query::Friends);
    let friends = state.store().friends(&user).await?;
    Ok(Json(FriendList { user, friends }))
}

/// The query of `GET friends/{user}/online`.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct FriendsOnlineQuery {
    /// Seen within this humantime duration (`10m`); default: the space's
    /// window.
    pub window: Option<String>,
    /// Most members answered, 1 to 1,000 (default 100).
    #[param(value_type = Option<u32>, minimum = 1, maximum = 1000)]
    pub limit: Option<String>,
}

/// A user's friends seen within the window in a space, most recent first.
#[utoipa::path(
    get,
    path = "/v1/spaces/{space}/friends/{user}/online",
    operation_id = "online_friends",
    tag = "friends",
    params(SpaceUserPath, FriendsOnlineQuery),
    responses(
        (status = 200, description = "Online friends, most recent first", body = MembersAnswer),
        BadInput,
    ),
)]
pub async fn online(
    State(state): State<AppState>,
    SpaceUserPath(space, user): SpaceUserPath,
    ApiQuery(q): ApiQuery<FriendsOnlineQuery>,
) -> Result<Json<MembersAnswer>, ApiError> {
    let window = window_ms(q.window.as_deref())?;
    let limit = page_limit(q.limit.as_deref(), 100, limits::MAX_PAGE)?;
    state.metrics().query(Query::OnlineFriends);
    let members = state
        .store()
        .online_friends(&space, &user, window, limit)
        .await?;
    Ok(Json(MembersAnswer::from_statuses(members)))
}
