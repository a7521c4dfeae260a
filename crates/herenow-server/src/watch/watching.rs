//! One watcher: the users one connection (or one `POST /v1/watch`
//! stream) watches, what it may watch, and what it last showed of each.
//!
//! The watched set is the users named explicitly plus, when following a
//! friend set, the owner's friends; a friends-only watcher's explicit
//! users must be friends too, and stop being watched when they stop
//! being friends. Every change of the set goes through [`Watching::apply`],
//! which keeps the registry's index and the store's follows in step.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use herenow_core::{MemberId, limits::MAX_BATCH};
use tokio::sync::mpsc;

use super::WatchScope;
use super::limits::{NOTE_QUEUE, over_watched};
use super::registry::{Full, Note, WatcherId};
use super::{Hints, WatchHub, read_states, visible_space};
use crate::protocol::dto::StatusDto;
use crate::token::Spaces;
use crate::watch::shapes::WatchedUser;

/// What a watcher may watch and be told.
#[derive(Clone, Debug)]
pub(crate) struct Policy {
    /// Whose friend set `friends` follows, and against which a
    /// friends-only watcher's users are checked: the token's user, or the
    /// `friends_of` of a backend's stream. `None`: a guest, or a stream
    /// that names none.
    pub(crate) owner: Option<MemberId>,
    /// Only the owner's friends may be watched.
    pub(crate) friends_only: bool,
    /// The spaces the watcher may be told of (`None`: all, an API key).
    pub(crate) spaces: Option<Spaces>,
}

/// Why a watch was refused.
#[derive(Debug, thiserror::Error)]
pub(crate) enum WatchError {
    /// The request does not fit (too many users, nothing to follow).
    #[error("{message}")]
    Bad {
        /// Stable code.
        code: &'static str,
        /// For people.
        message: String,
    },
    /// The token may not watch these users.
    #[error("{message}")]
    Forbidden {
        /// Stable code.
        code: &'static str,
        /// For people.
        message: String,
    },
    /// The server's bounds are reached.
    #[error(transparent)]
    Full(#[from] Full),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] herenow_core::Error),
}

impl WatchError {
    fn bad(code: &'static str, message: impl Into<String>) -> Self {
        Self::Bad {
            code,
            message: message.into(),
        }
    }

    /// The stable code of the refusal.
    pub(crate) fn code(&self) -> &'static str {
        match self {
            WatchError::Bad { code, .. } | WatchError::Forbidden { code, .. } => code,
            WatchError::Full(_) => "watch-capacity",
            WatchError::Store(e) => e.code(),
        }
    }
}

/// What a watcher sends its client after a note.
#[derive(Debug, PartialEq)]
pub(crate) enum Out {
    /// A watched user's status changed.
    Status(WatchedUser),
    /// Users newly watched (friends added to the followed set).
    Added(Vec<WatchedUser>),
    /// Users no longer watched.
    Unwatched(Vec<MemberId>),
    /// Notes were lost: everything watched, afresh.
    Resync(Vec<WatchedUser>),
}

/// One watcher's state.
pub(crate) struct Watching {
    hub: Arc<WatchHub>,
    id: WatcherId,
    rx: mpsc::Receiver<Note>,
    lagged: Arc<AtomicBool>,
    scope: WatchScope,
    policy: Policy,
    /// Users named in `watch` messages (allowed ones only).
    explicit: HashSet<MemberId>,
    /// Whether the owner's friend set is watched as it changes.
    follow_friends: bool,
    /// The owner's friend set as last read; read only once needed.
    friends: Option<HashSet<MemberId>>,
    /// Watched users, with the status last shown.
    shown: HashMap<MemberId, StatusDto>,
}

impl Watching {
    /// A watcher of `scope` under `policy`, watching nobody yet. A
    /// friends-only watcher follows its owner's friend set at once, so a
    /// friend removed is unwatched.
    pub(crate) async fn open(
        hub: &Arc<WatchHub>,
        scope: WatchScope,
        policy: Policy,
    ) -> Result<Self, WatchError> {
        hub.ensure_started()?;
        let (tx, rx) = mpsc::channel(NOTE_QUEUE);
        let lagged = Arc::new(AtomicBool::new(false));
        let id = hub.registry.lock().open(scope.clone(), tx, lagged.clone());
        let mut w = Watching {
            hub: hub.clone(),
            id,
            rx,
            lagged,
            scope,
            policy,
            explicit: HashSet::new(),
            follow_friends: false,
            friends: None,
            shown: HashMap::new(),
        };
        if w.policy.friends_only {
            w.read_friends().await?;
        }
        Ok(w)
    }

    /// Where this watcher looks.
    pub(crate) fn scope(&self) -> &WatchScope {
        &self.scope
    }

    /// Watches `users` too, and with `friends` the owner's friend set as
    /// it changes. Answers the states of the users it added. Nothing
    /// changes when it is refused.
    pub(crate) async fn watch(
        &mut self,
        users: Vec<MemberId>,
        friends: bool,
    ) -> Result<Vec<WatchedUser>, WatchError> {
        if friends && self.policy.owner.is_none() {
            return Err(WatchError::bad(
                "no-friend-set",
                "only a user has a friend set: this token is a guest's (a backend's stream names `friends_of`)",
            ));
        }
        if friends || self.policy.friends_only {
            self.read_friends().await?;
        }
        if self.policy.friends_only {
            let friends = self.friends.as_ref();
            let strangers: Vec<&str> = users
                .iter()
                .filter(|u| !friends.is_some_and(|f| f.contains(*u)))
                .map(MemberId::as_str)
                .collect();
            if !strangers.is_empty() {
                return Err(WatchError::Forbidden {
                    code: "watch-not-allowed",
                    message: format!(
                        "this token may watch its user's friends only; not friends: {}",
                        preview(&strangers)
                    ),
                });
            }
        }
        let explicit: HashSet<MemberId> = self.explicit.iter().cloned().chain(users).collect();
        let want = self.wanted(&explicit, self.follow_friends || friends);
        let (added, _) = self.apply(want).await?;
        self.explicit = explicit;
        self.follow_friends |= friends;
        Ok(added)
    }

    /// Stops watching `users` (`None`: everything, the friend set
    /// included). A user that is also a followed friend stays watched.
    /// Answers who is no longer watched.
    pub(crate) async fn unwatch(
        &mut self,
        users: Option<Vec<MemberId>>,
    ) -> Result<Vec<MemberId>, WatchError> {
        let (explicit, follow) = match users {
            None => (HashSet::new(), false),
            Some(users) => {
                let drop: HashSet<MemberId> = users.into_iter().collect();
                let kept = self
                    .explicit
                    .iter()
                    .filter(|u| !drop.contains(*u))
                    .cloned()
                    .collect();
                (kept, self.follow_friends)
            }
        };
        let want = self.wanted(&explicit, follow);
        let (_, removed) = self.apply(want).await?;
        self.explicit = explicit;
        self.follow_friends = follow;
        Ok(removed)
    }

    /// The next note of the dispatcher; `None` once the hub is gone.
    pub(crate) async fn next(&mut self) -> Option<Note> {
        self.rx.recv().await
    }

    /// What `note` means for the client. After lag (a note that did not
    /// fit, or a feed that lagged) it is a fresh picture of everything.
    pub(crate) async fn on_note(&mut self, note: Note) -> Result<Vec<Out>, WatchError> {
        if self.lagged.swap(false, Ordering::Relaxed) || matches!(note, Note::Resync) {
            // What is queued is older than what is read now.
            while self.rx.try_recv().is_ok() {}
            return self.resync().await;
        }
        match note {
            Note::User(mut user) => {
                let Some(shown) = self.shown.get_mut(user.id.as_str()) else {
                    // Unwatched since the dispatcher read it.
                    return Ok(Vec::new());
                };
                if *shown == user.status {
                    return Ok(Vec::new());
                }
                *shown = user.status;
                user.space = visible_space(user.space.take(), &self.policy);
                Ok(vec![Out::Status(user)])
            }
            Note::Friends => {
                self.read_friends().await?;
                let want = self.wanted(&self.explicit, self.follow_friends);
                let (added, removed) = self.apply(want).await?;
                self.explicit
                    .retain(|u| self.shown.contains_key(u.as_str()));
                let mut out = Vec::new();
                if !removed.is_empty() {
                    out.push(Out::Unwatched(removed));
                }
                if !added.is_empty() {
                    out.push(Out::Added(added));
                }
                Ok(out)
            }
            Note::Resync => unreachable!("handled above"),
        }
    }

    /// Reads the friend set and every watched user again: the picture
    /// after lag.
    pub(crate) async fn resync(&mut self) -> Result<Vec<Out>, WatchError> {
        if self.friends.is_some() {
            self.read_friends().await?;
        }
        let want = self.wanted(&self.explicit, self.follow_friends);
        self.apply(want).await?;
        self.explicit
            .retain(|u| self.shown.contains_key(u.as_str()));
        let users: Vec<MemberId> = self.shown.keys().cloned().collect();
        let states = self.read(&users).await?;
        for s in &states {
            self.shown.insert(s.id.clone(), s.status);
        }
        Ok(vec![Out::Resync(states)])
    }

    /// The watched set `explicit` and `follow` mean, under the policy.
    fn wanted(&self, explicit: &HashSet<MemberId>, follow: bool) -> HashSet<MemberId> {
        let friends = self.friends.as_ref();
        let mut want: HashSet<MemberId> = explicit
            .iter()
            .filter(|u| !self.policy.friends_only || friends.is_some_and(|f| f.contains(*u)))
            .cloned()
            .collect();
        if follow && let Some(f) = friends {
            want.extend(f.iter().cloned());
        }
        want
    }

    /// Makes `want` the watched set: the registry and the store's follows
    /// change with it, and the added users' states are read. Answers the
    /// added users' states and the removed ids; on error nothing changed.
    async fn apply(
        &mut self,
        want: HashSet<MemberId>,
    ) -> Result<(Vec<WatchedUser>, Vec<MemberId>), WatchError> {
        let added: Vec<MemberId> = want
            .iter()
            .filter(|u| !self.shown.contains_key(u.as_str()))
            .cloned()
            .collect();
        let removed: Vec<MemberId> = self
            .shown
            .keys()
            .filter(|u| !want.contains(u.as_str()))
            .cloned()
            .collect();
        if let Some(detail) = over_watched(want.len(), "a connection", "this would make") {
            return Err(WatchError::bad("too-many-watched", detail));
        }
        self.hub.registry.lock().add(self.id, &added)?;
        let states = match self.follow_and_read(&added).await {
            Ok(states) => states,
            Err(e) => {
                self.hub.registry.lock().remove(self.id, &added);
                return Err(e);
            }
        };
        for s in &states {
            self.shown.insert(s.id.clone(), s.status);
        }
        if !removed.is_empty() {
            self.hub.registry.lock().remove(self.id, &removed);
            for u in &removed {
                self.shown.remove(u.as_str());
            }
            self.unfollow(removed.clone());
        }
        Ok((states, removed))
    }

    /// Follows `users` in the store, then reads their states (after the
    /// follow, so no change between the two is missed).
    async fn follow_and_read(&self, users: &[MemberId]) -> Result<Vec<WatchedUser>, WatchError> {
        let following = self.hub.following()?;
        let mut followed = 0;
        for chunk in users.chunks(MAX_BATCH) {
            if let Err(e) = following.follow(chunk).await {
                self.unfollow(users[..followed].to_vec());
                return Err(e.into());
            }
            followed += chunk.len();
        }
        match self.read(users).await {
            Ok(states) => Ok(states),
            Err(e) => {
                self.unfollow(users.to_vec());
                Err(e)
            }
        }
    }

    /// The states of `users`, with the spaces the watcher may know.
    async fn read(&self, users: &[MemberId]) -> Result<Vec<WatchedUser>, WatchError> {
        let mut states = read_states(&*self.hub.store, &self.scope, users, &Hints::new()).await?;
        for s in &mut states {
            s.space = visible_space(s.space.take(), &self.policy);
        }
        Ok(states)
    }

    /// Reads the owner's friend set, following it first the first time.
    async fn read_friends(&mut self) -> Result<(), WatchError> {
        let Some(owner) = self.policy.owner.clone() else {
            self.friends = Some(HashSet::new());
            return Ok(());
        };
        if self.friends.is_none() {
            self.hub
                .following()?
                .follow(std::slice::from_ref(&owner))
                .await?;
            self.hub.registry.lock().follow_friends(self.id, &owner);
        }
        let set = self.hub.store.friends(&owner).await?;
        self.friends = Some(set.into_iter().collect());
        Ok(())
    }

    /// Unfollows `users` in the store, in the background: a failure only
    /// costs changes nobody reads.
    fn unfollow(&self, users: Vec<MemberId>) {
        if users.is_empty() {
            return;
        }
        let store = self.hub.store.clone();
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(async move {
                // Nothing was followed on a store that cannot follow.
                let Some(following) = store.following() else {
                    return;
                };
                for chunk in users.chunks(MAX_BATCH) {
                    if let Err(e) = following.unfollow(chunk).await {
                        tracing::debug!(error = %e, "unfollowing watched users failed");
                    }
                }
            });
        }
    }
}

impl Drop for Watching {
    fn drop(&mut self) {
        let mut users: Vec<MemberId> = self.shown.drain().map(|(u, _)| u).collect();
        {
            let mut registry = self.hub.registry.lock();
            registry.remove(self.id, &users);
            if self.friends.is_some()
                && let Some(owner) = &self.policy.owner
            {
                registry.unfollow_friends(self.id, owner);
                users.push(owner.clone());
            }
            registry.close(self.id);
        }
        self.unfollow(users);
    }
}

/// The first few of `ids`, for an error message.
fn preview(ids: &[&str]) -> String {
    const SHOWN: usize = 5;
    let mut s = ids
        .iter()
        .take(SHOWN)
        .copied()
        .collect::<Vec<_>>()
        .join(", ");
    if ids.len() > SHOWN {
        s.push_str(&format!(" and {} more", ids.len() - SHOWN));
    }
    s
}
