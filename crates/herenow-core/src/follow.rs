//! Following users across spaces: the store's side of watching a contact
//! list.
//!
//! A server that has watchers *follows* the users they watch
//! ([`Following::follow`](crate::Following::follow)) and reads one
//! [`UserFeed`] of what happens to them, in any space: their presence
//! events (`join`, `away`, `back`, `leave`) and changes to their friend
//! sets. What the watchers see (a status per user, within a space or
//! anywhere) the server derives from that feed and the store's answers;
//! the store only says *that* a followed user changed, and never spends
//! anything on users nobody follows.
//!
//! [`FollowTap`] is the counting of follows
//! ([`Following::follow`](crate::Following::follow)), plus the channel
//! the feed reads, for stores that produce the changes themselves (the
//! memory store); a store over a shared database (Redis) subscribes to the
//! followed users' channels instead, so a change made through another
//! server reaches this one.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use parking_lot::RwLock;
use tokio::sync::broadcast;

use crate::event::{Event, EventKind};
use crate::feed::Feed;
use crate::id::{MemberId, MemberKind};

/// How many changes a feed may fall behind before it lags and must start
/// over (re-read every followed user).
pub const FEED_QUEUE: usize = 65_536;

/// What happened to a followed user.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum UserChange {
    /// A presence event of the user in one space: `join`, `away`, `back`
    /// or `leave` (the events that change a status).
    Presence(Arc<Event>),
    /// The user's friend set changed (written, grown, shrunk, or an
    /// erased user taken out of it): read it again.
    Friends(MemberId),
}

impl UserChange {
    /// The user it is about.
    pub fn user(&self) -> &MemberId {
        match self {
            UserChange::Presence(e) => &e.member.id,
            UserChange::Friends(u) => u,
        }
    }
}

/// Whether an event changes a member's status, so a watcher must hear of
/// it: `join`, `away`, `back` and `leave`. Metadata updates and a second
/// device opening or closing do not.
pub fn changes_status(kind: EventKind) -> bool {
    matches!(
        kind,
        EventKind::Join | EventKind::Away | EventKind::Back | EventKind::Leave
    )
}

/// The changes of the users a server follows, in the order each store
/// shard produced them; a [`Feed`] tells of lost changes first, after
/// which every followed user must be read again.
pub type UserFeed = Feed<UserChange>;

/// Counted follows and the channel of their changes: what a store that
/// produces changes itself keeps to feed [`UserFeed`]s.
pub struct FollowTap {
    followed: RwLock<HashMap<MemberId, u32>>,
    /// Users followed now: read without the lock, so a store nobody
    /// follows users of pays one atomic load per event.
    count: AtomicUsize,
    tx: broadcast::Sender<UserChange>,
}

impl Default for FollowTap {
    fn default() -> Self {
        Self {
            followed: RwLock::new(HashMap::new()),
            count: AtomicUsize::new(0),
            tx: broadcast::channel(FEED_QUEUE).0,
        }
    }
}

impl std::fmt::Debug for FollowTap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FollowTap")
            .field("followed", &self.count.load(Ordering::Relaxed))
            .finish()
    }
}

impl FollowTap {
    /// A new feed of the followed users' changes, from now on.
    pub fn feed(&self) -> UserFeed {
        UserFeed::new(self.tx.subscribe())
    }

    /// Follows each of `users` once more.
    pub fn follow(&self, users: &[MemberId]) {
        let mut followed = self.followed.write();
        for u in users {
            *followed.entry(u.clone()).or_insert(0) += 1;
        }
        self.count.store(followed.len(), Ordering::Relaxed);
    }

    /// Follows each of `users` once less; a user no longer followed at
    /// all costs nothing from then on.
    pub fn unfollow(&self, users: &[MemberId]) {
        let mut followed = self.followed.write();
        for u in users {
            if let Some(n) = followed.get_mut(u.as_str()) {
                *n -= 1;
                if *n == 0 {
                    followed.remove(u.as_str());
                }
            }
        }
        self.count.store(followed.len(), Ordering::Relaxed);
    }

    /// Users followed now.
    pub fn followed(&self) -> usize {
        self.count.load(Ordering::Relaxed)
    }

    /// Whether a member of this kind and id is followed: users only.
    pub fn wants(&self, kind: MemberKind, id: &str) -> bool {
        kind == MemberKind::User
            && self.count.load(Ordering::Relaxed) > 0
            && self.followed.read().contains_key(id)
    }

    /// Passes on `event` if it is a status change of a followed user.
    pub fn presence(&self, event: &Arc<Event>) {
        if changes_status(event.kind) && self.wants(event.member.kind, event.member.id.as_str()) {
            self.send(UserChange::Presence(event.clone()));
        }
    }

    /// Passes on a change its caller found followed ([`wants`](Self::wants)).
    pub fn send(&self, change: UserChange) {
        // An error only means no feed is open.
        let _ = self.tx.send(change);
    }

    /// Says `user`'s friend set changed, if the user is followed.
    pub fn friends(&self, user: &MemberId) {
        if self.wants(MemberKind::User, user.as_str()) {
            self.send(UserChange::Friends(user.clone()));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::id::{MemberKey, SpaceName};
    use crate::policy::Status;

    fn event(kind: EventKind, member: MemberKey) -> Arc<Event> {
        Arc::new(Event {
            space: SpaceName::new("s").unwrap(),
            kind,
            member,
            status: Status::Online,
            last_seen_ms: Some(1),
            meta: None,
            reason: None,
            conn: None,
        })
    }

    fn id(s: &str) -> MemberId {
        MemberId::new(s).unwrap()
    }

    #[tokio::test]
    async fn only_followed_users_status_changes_reach_the_feed() {
        let tap = FollowTap::default();
        let mut feed = tap.feed();
        tap.presence(&event(EventKind::Join, MemberKey::user(id("ann"))));
        tap.follow(&[id("ann")]);
        // A guest of the same id, an update, another user: nothing.
        tap.presence(&event(EventKind::Join, MemberKey::guest(id("ann"))));
        tap.presence(&event(EventKind::Update, MemberKey::user(id("ann"))));
        tap.presence(&event(EventKind::Join, MemberKey::user(id("bob"))));
        tap.friends(&id("bob"));
        tap.presence(&event(EventKind::Away, MemberKey::user(id("ann"))));
        tap.friends(&id("ann"));
        let UserChange::Presence(e) = feed.recv().await.unwrap() else {
            panic!("expected a presence change");
        };
        assert_eq!((e.kind, e.member.id.as_str()), (EventKind::Away, "ann"));
        assert_eq!(feed.recv().await.unwrap(), UserChange::Friends(id("ann")));
        assert!(feed.try_recv().is_none(), "nothing else");
    }

    #[test]
    fn follows_are_counted() {
        let tap = FollowTap::default();
        tap.follow(&[id("ann"), id("ann"), id("bob")]);
        assert_eq!(tap.followed(), 2);
        tap.unfollow(&[id("ann"), id("bob")]);
        assert!(tap.wants(MemberKind::User, "ann"));
        assert!(!tap.wants(MemberKind::User, "bob"));
        tap.unfollow(&[id("ann"), id("cy")]);
        assert_eq!(tap.followed(), 0);
        assert!(!tap.wants(MemberKind::User, "ann"));
    }
}
