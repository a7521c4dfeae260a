//! `POST /v1/watch`: a backend watches users over Server-Sent Events, with
//! the WebSocket's contract: `watching` pages (the users' states), then a
//! `status` event whenever a watched user's status changes; `unwatched`
//! when followed friends leave the set, and after lag a fresh picture
//! (`watching` with `resync: true`) instead of a cut.

use std::collections::VecDeque;
use std::convert::Infallible;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use futures::Stream;
use herenow_core::{MemberId, SpaceName};
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;
use utoipa::ToSchema;

use super::WatchScope;
use super::limits::over_watched;
use super::{Out, Policy, WatchError, WatchState, Watching};
use crate::extract::JsonBody;
use crate::problem::{ApiError, Problem};
use crate::streams::{KEEP_ALIVE, Slot};
use crate::watch::shapes::{UnwatchedData, WatchedUser, WatchingPage};

/// Users per `watching` event.
const PAGE: usize = 500;

/// What to watch.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct WatchRequest {
    /// User ids to watch (at most 5,000 watched in all; a list past
    /// 10,000 is refused as a batch too large while it is read).
    #[serde(default, deserialize_with = "crate::protocol::bounded::batch")]
    #[schema(value_type = Vec<String>, max_items = 5000)]
    pub users: Vec<String>,
    /// Also watch this user's friend set, followed as it changes.
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub friends_of: Option<String>,
    /// Watch within this space; absent: anywhere (online if online in
    /// any space).
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub space: Option<String>,
}

/// A [`WatchRequest`] whose ids and space name passed their checks.
struct Checked {
    users: Vec<MemberId>,
    friends_of: Option<MemberId>,
    space: Option<SpaceName>,
}

impl WatchRequest {
    /// Checks every id and the space name, refusing the first bad one
    /// with its own code (`bad-member-id`, `bad-space-name`) and where it
    /// is, as every other route does.
    fn check(self) -> Result<Checked, ApiError> {
        let users = self
            .users
            .iter()
            .enumerate()
            .map(|(i, id)| {
                MemberId::new(id).map_err(|e| ApiError::invalid_at(format_args!("users[{i}]"), e))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let friends_of = self
            .friends_of
            .map(|id| MemberId::new(&id).map_err(|e| ApiError::invalid_at("friends_of", e)))
            .transpose()?;
        let space = self
            .space
            .map(|name| SpaceName::new(&name).map_err(|e| ApiError::invalid_at("space", e)))
            .transpose()?;
        Ok(Checked {
            users,
            friends_of,
            space,
        })
    }
}

struct Feed {
    watching: Watching,
    pending: VecDeque<SseEvent>,
    stop: CancellationToken,
    _slot: Slot,
}

impl Feed {
    fn push(&mut self, name: &str, data: &impl Serialize) {
        match serde_json::to_string(data) {
            Ok(d) => self
                .pending
                .push_back(SseEvent::default().event(name).data(d)),
            Err(e) => tracing::error!(error = %e, "a watch event could not be serialized"),
        }
    }

    fn pages(&mut self, users: Vec<WatchedUser>, resync: bool) {
        let space = self.watching.scope().space().cloned();
        for page in WatchingPage::split(space, users, PAGE, resync) {
            self.push("watching", &page);
        }
    }

    fn outs(&mut self, outs: Vec<Out>) {
        for out in outs {
            match out {
                Out::Status(user) => self.push("status", &user),
                Out::Unwatched(users) => self.push("unwatched", &UnwatchedData { users }),
                Out::Added(users) => self.pages(users, false),
                Out::Resync(users) => self.pages(users, true),
            }
        }
    }
}

async fn next(mut feed: Feed) -> Option<(Result<SseEvent, Infallible>, Feed)> {
    loop {
        if feed.stop.is_cancelled() {
            return None;
        }
        if let Some(e) = feed.pending.pop_front() {
            return Some((Ok(e), feed));
        }
        let note = tokio::select! {
            biased;
            () = feed.stop.cancelled() => return None,
            n = feed.watching.next() => n?,
        };
        match feed.watching.on_note(note).await {
            Ok(outs) => feed.outs(outs),
            Err(e) => {
                // The store failed: say so and end; the client reconnects
                // for a fresh picture.
                tracing::warn!(error = %e, "a watch stream could not read its users");
                feed.push(
                    "error",
                    &serde_json::json!({ "code": e.code(), "detail": e.to_string() }),
                );
                let last = feed.pending.pop_front()?;
                feed.stop.cancel();
                return Some((Ok(last), feed));
            }
        }
    }
}

/// Watches users: their states, then their status changes, as they
/// happen.
#[utoipa::path(
    post,
    path = "/v1/watch",
    operation_id = "watch",
    tag = "events",
    request_body = WatchRequest,
    responses(
        (status = 200, description = "An event stream: `watching` pages (`WatchingPage`), then `status` (`WatchedUser`) whenever a watched user goes online, away, back or offline; `unwatched` (`UnwatchedData`) when followed friends leave the set; after lag, `watching` pages with `resync: true` replace everything", body = WatchingPage, content_type = "text/event-stream"),
        (status = 400, description = "Bad ids (`bad-member-id`), too many users (`too-many-watched`), nothing to watch (`nothing-to-watch`)", body = Problem, content_type = "application/problem+json"),
        (status = 501, description = "The store cannot follow users (a seed layout)", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "Too many open streams, the server's watch bounds reached (`watch-capacity`), or shutting down", body = Problem, content_type = "application/problem+json"),
    ),
)]
pub async fn watch(
    State(state): State<WatchState>,
    body: JsonBody,
) -> Result<Sse<impl Stream<Item = Result<SseEvent, Infallible>>>, ApiError> {
    let req: WatchRequest = body.parse()?;
    if let Some(detail) = over_watched(req.users.len(), "a stream", "the request names") {
        return Err(ApiError::bad_request("too-many-watched", detail));
    }
    if req.users.is_empty() && req.friends_of.is_none() {
        return Err(ApiError::bad_request(
            "nothing-to-watch",
            "name users, friends_of, or both",
        ));
    }
    let req = req.check()?;
    let slot = state.streams.slot()?;
    let scope = req.space.map_or(WatchScope::Anywhere, WatchScope::Space);
    let policy = Policy {
        friends_only: false,
        spaces: None,
        owner: req.friends_of.clone(),
    };
    let hub = state.hub.clone();
    let call = async {
        let mut w = Watching::open(&hub, scope, policy).await?;
        let users = w.watch(req.users, req.friends_of.is_some()).await?;
        Ok::<_, WatchError>((w, users))
    };
    let (watching, users) = match tokio::time::timeout(state.request_timeout, call).await {
        Ok(r) => r.map_err(api_error)?,
        Err(_) => {
            return Err(ApiError::unavailable(
                "timeout",
                "the store took longer than the server's request timeout",
                1,
            ));
        }
    };
    let mut feed = Feed {
        watching,
        pending: VecDeque::new(),
        stop: state.shutdown.child_token(),
        _slot: slot,
    };
    feed.pages(users, false);
    let stream = futures::stream::unfold(feed, next);
    Ok(Sse::new(stream).keep_alive(KeepAlive::new().interval(KEEP_ALIVE)))
}

/// A refused watch as a problem.
pub(crate) fn api_error(e: WatchError) -> ApiError {
    match e {
        WatchError::Store(e) => ApiError::from(e),
        WatchError::Full(full) => ApiError::unavailable("watch-capacity", full.to_string(), 5),
        WatchError::Forbidden { code, message } => {
            ApiError::new(StatusCode::FORBIDDEN, code, message)
        }
        WatchError::Bad { code, message } => ApiError::bad_request(code, message),
    }
}
