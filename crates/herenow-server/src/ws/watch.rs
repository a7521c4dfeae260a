//! The watch of one connection as the session runs it (the protocol's
//! side of [`crate::watch`]): the `watch` and `unwatch` messages checked,
//! the watcher's notes turned into messages. They go through the send
//! queue's watch lane, which lags as a whole and catches up with a fresh
//! picture (`resync`) once there is room.

use std::time::Duration;

use herenow_core::{MemberId, MemberKind};
use tokio::time::timeout;

use super::limits::page_size;
use super::session::{Session, timed_out};
use crate::protocol::dto::WatchGrant;
use crate::watch::limits::over_watched;
use crate::watch::registry::Note;
use crate::watch::shapes::{WatchedUser, WatchingPage};
use crate::watch::{Out, Policy, WatchError, WatchScope, Watching};
use crate::ws::wire::{Ref, ServerMessage, Unwatch, Watch, WsError};

impl Session {
    /// Watches `users` (and with `friends` the token's user's friend set)
    /// in `scope`: a fresh watch with `replace`, else added to the
    /// current one, which must have the same scope. The added users'
    /// states follow in pages, the last carrying `reference`.
    pub(super) async fn watch(
        &mut self,
        scope: WatchScope,
        users: Vec<MemberId>,
        friends: bool,
        replace: bool,
        page_size: usize,
        reference: Option<Ref>,
    ) -> Result<(), WsError> {
        let grant = self.grant()?;
        if grant.watch == WatchGrant::None {
            return Err(WsError::new(
                "watch-not-allowed",
                "this token may not watch anyone (its watch claim is none)",
            ));
        }
        let policy = Policy {
            owner: (grant.member.kind == MemberKind::User).then(|| grant.member.id.clone()),
            friends_only: grant.watch == WatchGrant::Friends,
            spaces: Some(grant.spaces.clone()),
        };
        if let Some(w) = &self.watching
            && !replace
            && *w.scope() != scope
        {
            return Err(WsError::new(
                "watch-scope",
                "this connection watches in another scope; send replace: true to change it",
            ));
        }
        let fresh = replace || self.watching.is_none();
        if fresh {
            // The old watch ends before the new one follows anyone.
            self.watching = None;
            let hub = self.state.watch().clone();
            let wait = self.state.request_timeout();
            let w = bounded(wait, Watching::open(&hub, scope.clone(), policy)).await?;
            self.watching = Some(w);
        }
        let w = self.watching.as_mut().expect("a watch was opened above");
        let answer = bounded(self.state.request_timeout(), w.watch(users, friends)).await;
        let added = match answer {
            Ok(added) => added,
            Err(e) => {
                // A refused fresh watch leaves nothing watched.
                if fresh {
                    self.watching = None;
                }
                return Err(e);
            }
        };
        self.watch_page = page_size;
        self.send_watching(added, replace, reference);
        Ok(())
    }

    /// Stops watching `users`, or everything.
    pub(super) async fn unwatch(&mut self, users: Option<Vec<MemberId>>) -> Result<(), WsError> {
        let all = users.is_none();
        let Some(w) = self.watching.as_mut() else {
            return Err(WsError::new(
                "not-watching",
                "this connection watches nobody",
            ));
        };
        bounded(self.state.request_timeout(), w.unwatch(users)).await?;
        if all {
            self.watching = None;
        }
        Ok(())
    }

    /// One note of the watch.
    pub(super) async fn on_watch_note(&mut self, note: Note) {
        let Some(w) = self.watching.as_mut() else {
            return;
        };
        let outs = bounded(self.state.request_timeout(), w.on_note(note)).await;
        self.send_watch_outs(outs);
    }

    /// After the watch lagged: a fresh picture of everything watched.
    pub(super) async fn watch_resync(&mut self) {
        let Some(w) = self.watching.as_mut() else {
            return;
        };
        let outs = bounded(self.state.request_timeout(), w.resync()).await;
        self.send_watch_outs(outs);
    }

    fn send_watch_outs(&mut self, outs: Result<Vec<Out>, WsError>) {
        let outs = match outs {
            Ok(outs) => outs,
            Err(e) => return self.fail(None, e),
        };
        for out in outs {
            match out {
                Out::Status(user) => {
                    let outcome = self
                        .send_queue
                        .push_watch(&ServerMessage::Status { user: &user });
                    self.settle(outcome);
                }
                Out::Unwatched(users) => {
                    let outcome = self
                        .send_queue
                        .push_watch(&ServerMessage::Unwatched { users: &users });
                    self.settle(outcome);
                }
                Out::Added(users) => self.send_watching(users, false, None),
                Out::Resync(users) => self.send_watching(users, true, None),
            }
        }
    }

    /// Sends `users` as `watching` pages, the last carrying `last`.
    fn send_watching(&mut self, users: Vec<WatchedUser>, resync: bool, mut last: Option<Ref>) {
        let Some(space) = self.watching.as_ref().map(|w| w.scope().space().cloned()) else {
            return;
        };
        for page in WatchingPage::split(space, users, self.watch_page, resync) {
            let reference = if page.last { last.take() } else { None };
            let outcome = self
                .send_queue
                .push_watch(&ServerMessage::Watching { reference, page });
            if !self.settle(outcome) {
                // Lagging: a fresh picture follows once there is room.
                break;
            }
        }
    }
}

/// A call of the watch, bounded by `wait`; its refusal as the protocol
/// says it.
async fn bounded<T>(
    wait: Duration,
    call: impl Future<Output = Result<T, WatchError>>,
) -> Result<T, WsError> {
    match timeout(wait, call).await.map_err(|_| timed_out())? {
        Ok(v) => Ok(v),
        Err(WatchError::Store(e)) => Err(WsError::from(e)),
        Err(other) => Err(WsError::new(other.code(), other.to_string())),
    }
}

impl Watch {
    /// Checks the ids, the space (allowed by the token) and the page size,
    /// then watches: the `watching` pages follow at once.
    pub(in crate::ws) async fn apply(self, s: &mut Session, r: Option<Ref>) -> Result<(), WsError> {
        let users = user_ids(self.users)?;
        if users.is_empty() && !self.friends && !self.replace {
            return Err(WsError::bad_message(
                "watch names users, or friends: true (or replace: true to watch nobody)",
            ));
        }
        let scope = match self.space {
            Some(name) => WatchScope::Space(s.allowed_space(&name)?),
            None => WatchScope::Anywhere,
        };
        let page_size = page_size(self.page_size)?;
        s.watch(scope, users, self.friends, self.replace, page_size, r)
            .await
    }
}

impl Unwatch {
    /// Stops watching the users named, or everyone; `ok`.
    pub(in crate::ws) async fn apply(self, s: &mut Session, r: Option<Ref>) -> Result<(), WsError> {
        let users = self.users.map(user_ids).transpose()?;
        s.unwatch(users).await?;
        s.ok(r);
        Ok(())
    }
}

/// Checks a list of user ids: at most
/// [`MAX_WATCHED`](crate::watch::limits::MAX_WATCHED), each a valid id
/// (repeats are harmless).
fn user_ids(ids: Vec<String>) -> Result<Vec<MemberId>, WsError> {
    if let Some(detail) = over_watched(ids.len(), "a connection", "the message names") {
        return Err(WsError::new("too-many-watched", detail));
    }
    ids.iter()
        .map(|id| MemberId::new(id).map_err(WsError::from))
        .collect()
}
