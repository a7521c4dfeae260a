//! The shapes of watching a contact list (docs/PROTOCOL.md, "Watching
//! users"): what a watched user looks like to a watcher, and what a
//! watcher is told. The WebSocket sends them as messages, the
//! `POST /v1/watch` stream as SSE events of the same names and bodies.

use herenow_core::{MemberId, Millis, SpaceName};
use serde::Serialize;
use utoipa::ToSchema;

use crate::protocol::dto::StatusDto;

/// A watched user, as a watcher sees it: its status (within the watched
/// space, or its best over every space) and its last seen.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, ToSchema)]
pub struct WatchedUser {
    /// The user's id.
    #[schema(value_type = String)]
    pub id: MemberId,
    /// `online` or `away` while present (anywhere: in any space),
    /// `offline` otherwise. An invisible user is `offline`.
    pub status: StatusDto,
    /// Last seen, ms since the UNIX epoch: the last heartbeat while
    /// present, the remembered time after (see `GET /v1/users/{id}`);
    /// `null` when never seen or past the horizon.
    pub last_seen_ms: Option<Millis>,
    /// Watching anywhere: the space of `last_seen_ms`, when the watcher
    /// may know it (a token that allows that space; always for an API
    /// key). Absent otherwise, and when watching within one space.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>)]
    pub space: Option<SpaceName>,
}

/// One page of watched users' states: the answer to a `watch` (the users
/// it added), what a friend added to a followed friend set brings, and
/// after lag a fresh picture of everyone watched (`resync`).
#[derive(Debug, Serialize, ToSchema)]
pub struct WatchingPage {
    /// The watched space, or `null` when watching anywhere.
    #[schema(value_type = Option<String>)]
    pub space: Option<SpaceName>,
    /// The users of this page.
    pub users: Vec<WatchedUser>,
    /// Whether this is the last page of this answer.
    pub last: bool,
    /// This picture replaces everything watched before (after lag, or a
    /// `watch` with `replace`): users not in it are no longer watched.
    pub resync: bool,
}

impl WatchingPage {
    /// `users` in pages of at most `size`, built as they are taken: at
    /// least one page (an empty picture is one empty last page).
    pub fn split(
        space: Option<SpaceName>,
        users: Vec<WatchedUser>,
        size: usize,
        resync: bool,
    ) -> impl Iterator<Item = WatchingPage> {
        let pages = users.len().div_ceil(size).max(1);
        let mut rest = users.into_iter();
        (0..pages).map(move |page| WatchingPage {
            space: space.clone(),
            users: rest.by_ref().take(size).collect(),
            last: page + 1 == pages,
            resync,
        })
    }
}

/// Users no longer watched because they left the followed friend set
/// (or, with a friends-only token, stopped being friends).
#[derive(Debug, Serialize, ToSchema)]
pub struct UnwatchedData {
    /// Their ids.
    #[schema(value_type = Vec<String>)]
    pub users: Vec<MemberId>,
}
