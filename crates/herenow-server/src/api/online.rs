//! Who's online: `GET online` (paged), `GET count`, `POST online-among`.

use axum::Json;
use axum::extract::State;
use herenow_core::{KindFilter, ListQuery, Order, SpaceName, limits};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::dto::{MemberRef, MembersAnswer, MembersBody};
use crate::extract::{
    ApiQuery, JsonBody, SpacePath, check_cursor, check_limit, page_limit, window_ms,
};
use crate::metrics::Query;
use crate::problem::{ApiError, BadInput};
use crate::protocol::dto::MemberDto;
use crate::state::AppState;

/// The query of `GET online`.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct OnlineQuery {
    /// Seen within this humantime duration (`10m`); default: the space's
    /// window.
    pub window: Option<String>,
    /// `users` (default), `guests` or `all`.
    pub kind: Option<String>,
    /// `recent` (most recently seen first) or `id`; default: the store's
    /// (`recent` where it keeps last-seen times, `id` where it keeps none,
    /// as seed 000's sets); the answer's `order` says which.
    pub order: Option<String>,
    /// Page size, 1 to 1,000 (default 100).
    #[param(value_type = Option<u32>, minimum = 1, maximum = 1000)]
    pub limit: Option<String>,
    /// `next_cursor` of the previous page, unchanged.
    pub cursor: Option<String>,
}

/// The order of a page of who's online, on the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum ListOrder {
    /// Most recently seen first.
    Recent,
    /// By id (bytewise), users before guests for equal ids.
    Id,
}

impl From<Order> for ListOrder {
    fn from(o: Order) -> Self {
        match o {
            Order::Recent => ListOrder::Recent,
            Order::Id => ListOrder::Id,
        }
    }
}

/// One page of who's online.
#[derive(Debug, Serialize, ToSchema)]
pub struct OnlineAnswer {
    /// Members seen within the window, in `order`.
    pub members: Vec<MemberDto>,
    /// Pass back as `cursor` for the next page; `null` on the last page.
    pub next_cursor: Option<String>,
    /// The window used, in ms: the one asked for, or the space's.
    pub window_ms: u64,
    /// The order of `members`: the one asked for, or, when the query
    /// named none, the store's default (`id` where it keeps no last-seen
    /// times).
    pub order: ListOrder,
}

fn kind_filter(s: Option<&str>) -> Result<KindFilter, ApiError> {
    match s {
        None | Some("users") => Ok(KindFilter::Users),
        Some("guests") => Ok(KindFilter::Guests),
        Some("all") => Ok(KindFilter::All),
        Some(other) => Err(ApiError::bad_request(
            "bad-kind",
            format!("kind {other:?} is not one of users, guests, all"),
        )),
    }
}

/// The order asked for; `None` leaves it to the store.
fn order(s: Option<&str>) -> Result<Option<Order>, ApiError> {
    match s {
        None => Ok(None),
        Some("recent") => Ok(Some(Order::Recent)),
        Some("id") => Ok(Some(Order::Id)),
        Some(other) => Err(ApiError::bad_request(
            "bad-order",
            format!("order {other:?} is not one of recent, id"),
        )),
    }
}

/// The window a query used: the one given, or the space's.
async fn effective_window(
    state: &AppState,
    space: &SpaceName,
    given: Option<u64>,
) -> Result<u64, ApiError> {
    match given {
        Some(w) => Ok(w),
        None => Ok(state.store().config(space).await?.window_ms),
    }
}

/// Members seen within the window, one page at a time.
#[utoipa::path(
    get,
    path = "/v1/spaces/{space}/online",
    operation_id = "online",
    tag = "online",
    params(SpacePath, OnlineQuery),
    responses(
        (status = 200, description = "One page", body = OnlineAnswer),
        BadInput,
    ),
)]
pub async fn online(
    State(state): State<AppState>,
    SpacePath(space): SpacePath,
    ApiQuery(q): ApiQuery<OnlineQuery>,
) -> Result<Json<OnlineAnswer>, ApiError> {
    let query = ListQuery {
        window_ms: window_ms(q.window.as_deref())?,
        kinds: kind_filter(q.kind.as_deref())?,
        order: order(q.order.as_deref())?,
        limit: page_limit(q.limit.as_deref(), 100, limits::MAX_PAGE)?,
        cursor: check_cursor(q.cursor)?,
    };
    state.metrics().query(Query::Online);
    let page = state.store().list(&space, &query).await?;
    let window_ms = effective_window(&state, &space, query.window_ms).await?;
    Ok(Json(OnlineAnswer {
        members: page.members.into_iter().map(MemberDto::from).collect(),
        next_cursor: page.next_cursor,
        window_ms,
        order: page.order.into(),
    }))
}

/// The query of `GET count`.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct WindowQuery {
    /// Seen within this humantime duration (`10m`); default: the space's
    /// window.
    pub window: Option<String>,
}

/// How many users and guests were seen within a window.
#[derive(Debug, Serialize, ToSchema)]
pub struct CountAnswer {
    /// Users seen within the window.
    pub users: u64,
    /// Guests seen within the window.
    pub guests: u64,
    /// Users and guests together.
    pub total: u64,
    /// The window used, in ms: the one asked for, or the space's.
    pub window_ms: u64,
}

/// Counts users and guests seen within the window.
#[utoipa::path(
    get,
    path = "/v1/spaces/{space}/count",
    operation_id = "count",
    tag = "online",
    params(SpacePath, WindowQuery),
    responses(
        (status = 200, description = "The counts", body = CountAnswer),
        BadInput,
    ),
)]
pub async fn count(
    State(state): State<AppState>,
    SpacePath(space): SpacePath,
    ApiQuery(q): ApiQuery<WindowQuery>,
) -> Result<Json<CountAnswer>, ApiError> {
    let window = window_ms(q.window.as_deref())?;
    state.metrics().query(Query::Count);
    let counts = state.store().count(&space, window).await?;
    let window_ms = effective_window(&state, &space, window).await?;
    Ok(Json(CountAnswer {
        users: counts.users,
        guests: counts.guests,
        total: counts.total(),
        window_ms,
    }))
}

/// The body of `online-among`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AmongBody<'a> {
    /// 1 to 10,000 members to look at.
    #[serde(borrow, deserialize_with = "crate::protocol::bounded::objects")]
    pub members: Vec<MemberRef<'a>>,
    /// A humantime duration (`10m`); default: the space's window.
    #[serde(borrow, default)]
    #[schema(value_type = Option<String>)]
    pub window: Option<std::borrow::Cow<'a, str>>,
    /// Most members answered, 1 to 1,000 (default 100).
    #[serde(default, deserialize_with = "crate::protocol::whole_numbers::opt_i64")]
    pub limit: Option<i64>,
}

/// Of an ad-hoc list, those seen within the window, most recent first.
#[utoipa::path(
    post,
    path = "/v1/spaces/{space}/online-among",
    operation_id = "online_among",
    tag = "online",
    params(SpacePath),
    request_body = AmongBody,
    responses(
        (status = 200, description = "The online ones, most recent first", body = MembersAnswer),
        BadInput,
    ),
)]
pub async fn among(
    State(state): State<AppState>,
    SpacePath(space): SpacePath,
    body: JsonBody,
) -> Result<Json<MembersAnswer>, ApiError> {
    let parsed: AmongBody<'_> = body.parse()?;
    let keys = MembersBody {
        members: parsed.members,
    }
    .keys()?;
    let window = window_ms(parsed.window.as_deref())?;
    let limit = parsed
        .limit
        .map_or(Ok(100), |n| check_limit(n, limits::MAX_PAGE))?;
    state.metrics().query(Query::OnlineAmong);
    let members = state
        .store()
        .online_among(&space, &keys, window, limit)
        .await?;
    Ok(Json(MembersAnswer::from_statuses(members)))
}
