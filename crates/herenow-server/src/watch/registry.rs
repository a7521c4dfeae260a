//! Who watches whom on this server: the index the dispatcher reads to
//! find a user's watchers in time proportional to their number.
//!
//! A watcher (one WebSocket connection's watch, or one `POST /v1/watch`
//! stream) is an id, a scope and a bounded queue of [`Note`]s. The
//! registry maps each watched user to its watchers, and each user whose
//! friend set a watcher follows to those watchers. Which users a watcher
//! watches is the watcher's own business ([`super::Watching`]); the
//! registry only keeps the reverse index, under the bounds of
//! [`super::limits`].

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use herenow_core::MemberId;
use tokio::sync::mpsc;

use super::WatchScope;
use super::limits::{MAX_WATCH_PAIRS, MAX_WATCHERS_PER_USER};
use crate::watch::shapes::WatchedUser;

/// A watcher's id, unique within the server's life.
pub(crate) type WatcherId = u64;

/// What the dispatcher tells a watcher.
#[derive(Debug)]
pub(crate) enum Note {
    /// A watched user's state, read after a change: shown if its status
    /// differs from what the watcher last showed.
    User(WatchedUser),
    /// The followed friend set changed: read it again.
    Friends,
    /// Notes were lost: read everything again.
    Resync,
}

/// The registry's side of one watcher.
pub(crate) struct Entry {
    pub(crate) scope: WatchScope,
    tx: mpsc::Sender<Note>,
    /// Set when a note did not fit: the watcher must read everything
    /// again, which supersedes whatever was lost.
    lagged: Arc<AtomicBool>,
}

impl Entry {
    /// Queues `note`; a full queue marks the watcher lagged instead (it
    /// has notes to read, so it will notice).
    pub(crate) fn tell(&self, note: Note) {
        if self.tx.try_send(note).is_err() {
            self.lagged.store(true, Ordering::Relaxed);
        }
    }

    /// Marks the watcher lagged and wakes it if its queue has room.
    pub(crate) fn resync(&self) {
        self.lagged.store(true, Ordering::Relaxed);
        let _ = self.tx.try_send(Note::Resync);
    }
}

/// Why a watch does not fit the server's bounds.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum Full {
    /// The user has as many watchers on this server as allowed.
    #[error(
        "user {0} has {MAX_WATCHERS_PER_USER} watchers on this server already; no more are allowed"
    )]
    User(MemberId),
    /// The server holds as many (watcher, user) pairs as allowed.
    #[error("the server watches {MAX_WATCH_PAIRS} users in all already; no more are allowed")]
    Server,
}

/// Watchers by the users they watch, and by the friend sets they follow.
#[derive(Default)]
pub(crate) struct Registry {
    next: WatcherId,
    watchers: HashMap<WatcherId, Entry>,
    users: HashMap<MemberId, Vec<WatcherId>>,
    owners: HashMap<MemberId, Vec<WatcherId>>,
    pairs: usize,
}

impl Registry {
    /// A new watcher of `scope`, with its queue.
    pub(crate) fn open(
        &mut self,
        scope: WatchScope,
        tx: mpsc::Sender<Note>,
        lagged: Arc<AtomicBool>,
    ) -> WatcherId {
        self.next += 1;
        self.watchers.insert(self.next, Entry { scope, tx, lagged });
        self.next
    }

    /// Adds `users` (none watched by `id` yet) to watcher `id`, all or
    /// none.
    pub(crate) fn add(&mut self, id: WatcherId, users: &[MemberId]) -> Result<(), Full> {
        if self.pairs + users.len() > MAX_WATCH_PAIRS {
            return Err(Full::Server);
        }
        if let Some(u) = users.iter().find(|u| {
            self.users
                .get(u.as_str())
                .is_some_and(|w| w.len() >= MAX_WATCHERS_PER_USER)
        }) {
            return Err(Full::User(u.clone()));
        }
        for u in users {
            self.users.entry(u.clone()).or_default().push(id);
        }
        self.pairs += users.len();
        Ok(())
    }

    /// Takes `users` (each watched by `id`) from watcher `id`.
    pub(crate) fn remove(&mut self, id: WatcherId, users: &[MemberId]) {
        for u in users {
            if take(&mut self.users, u, id) {
                self.pairs -= 1;
            }
        }
    }

    /// Watcher `id` follows `owner`'s friend set from now on.
    pub(crate) fn follow_friends(&mut self, id: WatcherId, owner: &MemberId) {
        self.owners.entry(owner.clone()).or_default().push(id);
    }

    /// Watcher `id` no longer follows `owner`'s friend set.
    pub(crate) fn unfollow_friends(&mut self, id: WatcherId, owner: &MemberId) {
        take(&mut self.owners, owner, id);
    }

    /// Forgets watcher `id` (its users and friend set taken already).
    pub(crate) fn close(&mut self, id: WatcherId) {
        self.watchers.remove(&id);
    }

    /// The watchers of `user`, each with its entry.
    pub(crate) fn watchers_of(&self, user: &str) -> impl Iterator<Item = &Entry> {
        self.entries(self.users.get(user))
    }

    /// The watchers following `owner`'s friend set.
    pub(crate) fn followers_of(&self, owner: &str) -> impl Iterator<Item = &Entry> {
        self.entries(self.owners.get(owner))
    }

    /// The entries of the watchers `ids` names, if any.
    fn entries<'a>(&'a self, ids: Option<&'a Vec<WatcherId>>) -> impl Iterator<Item = &'a Entry> {
        ids.into_iter()
            .flatten()
            .filter_map(|id| self.watchers.get(id))
    }

    /// Every watcher.
    pub(crate) fn all(&self) -> impl Iterator<Item = &Entry> {
        self.watchers.values()
    }

    /// (watcher, user) pairs held, and watchers.
    pub(crate) fn usage(&self) -> (usize, usize) {
        (self.pairs, self.watchers.len())
    }
}

/// Removes `id` from `key`'s list (dropping an emptied list); whether it
/// was there.
fn take(map: &mut HashMap<MemberId, Vec<WatcherId>>, key: &MemberId, id: WatcherId) -> bool {
    let Some(list) = map.get_mut(key.as_str()) else {
        return false;
    };
    let Some(at) = list.iter().position(|w| *w == id) else {
        return false;
    };
    list.swap_remove(at);
    if list.is_empty() {
        map.remove(key.as_str());
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(s: &str) -> MemberId {
        MemberId::new(s).unwrap()
    }

    #[test]
    fn the_index_finds_watchers_and_forgets_them() {
        let mut r = Registry::default();
        let (tx, _rx) = mpsc::channel(4);
        let a = r.open(WatchScope::Anywhere, tx.clone(), Arc::default());
        let b = r.open(WatchScope::Anywhere, tx, Arc::default());
        r.add(a, &[id("ann"), id("bob")]).unwrap();
        r.add(b, &[id("ann")]).unwrap();
        assert_eq!(r.watchers_of("ann").count(), 2);
        assert_eq!(r.usage(), (3, 2));
        r.remove(a, &[id("ann"), id("bob")]);
        assert_eq!(r.watchers_of("ann").count(), 1);
        assert_eq!(r.watchers_of("bob").count(), 0);
        assert!(!r.users.contains_key("bob"));
        r.follow_friends(b, &id("cy"));
        assert_eq!(r.followers_of("cy").count(), 1);
        r.unfollow_friends(b, &id("cy"));
        r.remove(b, &[id("ann")]);
        r.close(a);
        r.close(b);
        assert_eq!(r.usage(), (0, 0));
        assert!(r.owners.is_empty() && r.users.is_empty());
    }

    #[test]
    fn a_full_queue_marks_the_watcher_lagged() {
        let mut r = Registry::default();
        let (tx, _rx) = mpsc::channel(1);
        let lagged = Arc::new(AtomicBool::new(false));
        let a = r.open(WatchScope::Anywhere, tx, lagged.clone());
        r.add(a, &[id("ann")]).unwrap();
        for e in r.watchers_of("ann") {
            e.tell(Note::Friends);
            e.tell(Note::Friends);
        }
        assert!(lagged.load(Ordering::Relaxed));
    }
}
