//! Watching a contact list: live status of any set of users, within a
//! space or anywhere, for WebSocket clients (`watch`, and a Pusher
//! socket's `watchlist`) and backends (`POST /v1/watch`, `stream`).
//!
//! The store does not know watchers. It feeds the server the changes of
//! the users the server *follows* ([`herenow_core::follow`]); the
//! [`WatchHub`] keeps who watches whom (`registry`) and one dispatcher
//! task that, for each change, reads the user's state once per scope its
//! watchers use (`seen_anywhere`, or `status` in one space) and queues it
//! to each of them. A status change therefore costs its user's watchers,
//! not every connection; reading after the change (rather than trusting
//! the event) makes "anywhere" right when a user leaves one space while
//! online in another, and gives the remembered last seen after a leave.
//!
//! Each watcher (`Watching`) remembers what it last showed per user and
//! sends a `status` only when the status changed. A watcher whose queue
//! overflows, or any watcher when the store's feed lags, reads everything
//! again and sends a fresh picture: it catches up instead of being cut.
//!
//! Each protocol's socket turns a watcher's `Out` into its own frames
//! (`crate::ws`'s session, `crate::pusher`'s signed-in sockets);
//! `stream` serves it as Server-Sent Events, over the [`WatchState`] the
//! server's state hands it.

pub(crate) mod registry;
pub(crate) mod shapes;
pub(crate) mod stream;
mod watching;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use herenow_core::limits::MAX_BATCH;
use herenow_core::{
    Capability, Following, MemberId, MemberKey, Millis, PresenceStore, RecvError, Result,
    SpaceName, Status, UserChange, UserFeed,
};
use parking_lot::Mutex;
use tokio_util::sync::CancellationToken;

use crate::protocol::dto::StatusDto;
use crate::streams::Streams;
use crate::watch::shapes::WatchedUser;
use registry::{Note, Registry};
pub(crate) use watching::{Out, Policy, WatchError, Watching};

/// The bounds of watching (docs/PROTOCOL.md states them to clients).
pub mod limits {
    /// Most users one connection (or one `POST /v1/watch` stream)
    /// watches.
    pub const MAX_WATCHED: usize = 5_000;
    /// Most watchers one user has on one server.
    pub const MAX_WATCHERS_PER_USER: usize = 20_000;
    /// Most (watcher, user) pairs one server holds: about 200 bytes each.
    pub const MAX_WATCH_PAIRS: usize = 5_000_000;
    /// Notes queued for one watcher before it lags and reads everything
    /// again.
    pub const NOTE_QUEUE: usize = 1_024;
    /// Changes the dispatcher takes from the feed before it reads states.
    pub const DISPATCH_BATCH: usize = 1_024;

    /// The detail of a `too-many-watched` refusal, `None` while `n` users
    /// are within [`MAX_WATCHED`]: `watcher` says who watches ("a
    /// stream"), `counted` how `n` came ("the request names").
    pub fn over_watched(n: usize, watcher: &str, counted: &str) -> Option<String> {
        (n > MAX_WATCHED)
            .then(|| format!("{watcher} watches at most {MAX_WATCHED} users; {counted} {n}"))
    }
}

/// Where a watch looks: one space, or every space.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum WatchScope {
    /// Presence within this space.
    Space(SpaceName),
    /// Presence anywhere: online if online in any space.
    Anywhere,
}

impl WatchScope {
    /// The space, or `None` for anywhere, as the wire says it.
    pub fn space(&self) -> Option<&SpaceName> {
        match self {
            WatchScope::Space(s) => Some(s),
            WatchScope::Anywhere => None,
        }
    }
}

/// What `POST /v1/watch` uses of the server, as its handler's state: the
/// hub, the event streams' bound, the request timeout and the shutdown.
/// The server's state makes it (`FromRef`); nothing here names that
/// state.
#[derive(Clone)]
pub struct WatchState {
    pub(crate) hub: Arc<WatchHub>,
    pub(crate) streams: Streams,
    pub(crate) request_timeout: Duration,
    pub(crate) shutdown: CancellationToken,
}

/// The server's watchers and the task that feeds them.
pub struct WatchHub {
    store: Arc<dyn PresenceStore>,
    registry: Mutex<Registry>,
    /// Whether the dispatcher runs: it starts with the first watcher, so a
    /// store that cannot follow users fails only when someone watches.
    started: Mutex<bool>,
    stop: CancellationToken,
}

impl WatchHub {
    /// A hub over `store`; its dispatcher stops with `stop`.
    pub fn new(store: Arc<dyn PresenceStore>, stop: CancellationToken) -> Self {
        Self {
            store,
            registry: Mutex::new(Registry::default()),
            started: Mutex::new(false),
            stop,
        }
    }

    /// The store's following of users, or `Unsupported` naming the store
    /// where it cannot follow (a seed's layout).
    fn following(&self) -> Result<&dyn Following> {
        self.store
            .following()
            .ok_or_else(|| self.store.lacks(Capability::Following))
    }

    /// (watcher, user) pairs and watchers held now (`herenow_watch_pairs`
    /// and `herenow_watch_watchers`).
    pub fn usage(&self) -> (usize, usize) {
        self.registry.lock().usage()
    }

    /// Starts the dispatcher if it does not run yet: the feed is open
    /// before any watcher follows a user, so no change is missed.
    fn ensure_started(self: &Arc<Self>) -> Result<()> {
        let mut started = self.started.lock();
        if !*started {
            let feed = self.following()?.user_feed()?;
            let hub = self.clone();
            tokio::spawn(async move { hub.dispatch(feed).await });
            *started = true;
        }
        Ok(())
    }

    /// Reads the feed until the server stops: each batch of changes is
    /// turned into the states their watchers need, read once per scope.
    async fn dispatch(self: Arc<Self>, mut feed: UserFeed) {
        loop {
            let first = tokio::select! {
                () = self.stop.cancelled() => return,
                c = feed.recv() => c,
            };
            let mut batch = vec![first];
            while batch.len() < limits::DISPATCH_BATCH {
                match feed.try_recv() {
                    Some(c) => batch.push(c),
                    None => break,
                }
            }
            let mut wanted: HashMap<WatchScope, HashSet<MemberId>> = HashMap::new();
            // An "anywhere" read may not show a change yet on a store that
            // indexes a user's spaces apart from the space itself (Redis).
            let mut hints = Hints::new();
            for change in batch {
                match change {
                    Ok(UserChange::Presence(e)) => {
                        hints
                            .entry(e.member.id.clone())
                            .or_default()
                            .insert(e.space.clone(), (e.status, e.last_seen_ms));
                        let registry = self.registry.lock();
                        for w in registry.watchers_of(e.member.id.as_str()) {
                            let hit = match &w.scope {
                                WatchScope::Anywhere => true,
                                WatchScope::Space(s) => *s == e.space,
                            };
                            if hit {
                                wanted
                                    .entry(w.scope.clone())
                                    .or_default()
                                    .insert(e.member.id.clone());
                            }
                        }
                    }
                    Ok(UserChange::Friends(owner)) => {
                        for w in self.registry.lock().followers_of(owner.as_str()) {
                            w.tell(Note::Friends);
                        }
                    }
                    Err(RecvError::Lagged(missed)) => {
                        tracing::warn!(
                            missed,
                            "the feed of watched users lagged; every watcher reads again"
                        );
                        for w in self.registry.lock().all() {
                            w.resync();
                        }
                    }
                    Err(RecvError::Closed) => return,
                }
            }
            for (scope, users) in wanted {
                let users: Vec<MemberId> = users.into_iter().collect();
                match read_states(&*self.store, &scope, &users, &hints).await {
                    Ok(states) => {
                        let registry = self.registry.lock();
                        for state in states {
                            for w in registry.watchers_of(state.id.as_str()) {
                                if w.scope == scope {
                                    w.tell(Note::User(state.clone()));
                                }
                            }
                        }
                    }
                    Err(e) => {
                        // The store is down: these watchers read again
                        // when it answers (their next note, or lag).
                        tracing::warn!(error = %e, "reading watched users failed");
                        let registry = self.registry.lock();
                        for u in &users {
                            for w in registry.watchers_of(u.as_str()) {
                                if w.scope == scope {
                                    w.resync();
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// What changes said of users in spaces: user → space → (status, last
/// seen), the newest per space, folded into "anywhere" reads.
pub(crate) type Hints = HashMap<MemberId, HashMap<SpaceName, (Status, Option<Millis>)>>;

/// The states of `users` in `scope`, in the order asked, read in batches
/// the store accepts; an "anywhere" read folds in `hints`.
pub(crate) async fn read_states(
    store: &dyn PresenceStore,
    scope: &WatchScope,
    users: &[MemberId],
    hints: &Hints,
) -> Result<Vec<WatchedUser>> {
    let mut out = Vec::with_capacity(users.len());
    for chunk in users.chunks(MAX_BATCH) {
        match scope {
            WatchScope::Anywhere => {
                let index = store
                    .user_index()
                    .ok_or_else(|| store.lacks(Capability::UserIndex))?;
                for mut s in index.seen_anywhere(chunk).await? {
                    for (space, (status, last_seen)) in hints.get(&s.id).into_iter().flatten() {
                        s.merge(space, *status, *last_seen);
                    }
                    out.push(WatchedUser {
                        id: s.id,
                        status: StatusDto::from(s.status),
                        last_seen_ms: s.last_seen_ms,
                        space: s.space,
                    });
                }
            }
            WatchScope::Space(space) => {
                let keys: Vec<MemberKey> = chunk.iter().cloned().map(MemberKey::user).collect();
                for m in store.status(space, &keys).await? {
                    out.push(WatchedUser {
                        id: m.member.id,
                        status: StatusDto::from(m.status),
                        last_seen_ms: m.last_seen_ms,
                        space: None,
                    });
                }
            }
        }
    }
    Ok(out)
}

/// The space a watcher may be told, or `None`.
pub(crate) fn visible_space(space: Option<SpaceName>, policy: &Policy) -> Option<SpaceName> {
    space.filter(|s| {
        policy
            .spaces
            .as_ref()
            .is_none_or(|allowed| allowed.allows(s))
    })
}
