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
//! Following is counted: a user followed twice stays followed until
//! unfollowed twice. [`FollowTap`] is that bookkeeping, plus the channel
//! the feed reads, for stores that produce the changes themselves (the
//! memory store); a store over a shared database (Redis) subscribes to the
//! followed users' channels instead, so a change made through another
//! server reaches this one.

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::Poll;

use parking_lot::RwLock;
use tokio::sync::{broadcast, watch};

use crate::event::{Event, EventKind, RecvError};
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
/// shard produced them.
pub struct UserFeed {
    rx: broadcast::Receiver<UserChange>,
    /// Bumped by the store whenever changes may have been lost on their
    /// way to it ([`with_losses`](Self::with_losses)); `None` for a store
    /// that loses nothing but what a slow reader misses.
    losses: Option<watch::Receiver<u64>>,
}

impl UserFeed {
    /// Wraps a broadcast receiver (for stores outside this crate).
    pub fn new(rx: broadcast::Receiver<UserChange>) -> Self {
        Self { rx, losses: None }
    }

    /// Wraps a broadcast receiver that may miss changes without falling
    /// behind: a store over a shared database, whose changes come through
    /// a link that can drop (Redis pub/sub keeps nothing for a client that
    /// was away). The store bumps `losses` once changes may have been lost
    /// and the link is whole again; the feed then answers
    /// [`RecvError::Lagged`] (with 0: nobody knows how many were lost)
    /// before any further change. Losses before the feed was made do not
    /// count.
    pub fn with_losses(rx: broadcast::Receiver<UserChange>, losses: watch::Receiver<u64>) -> Self {
        Self {
            rx,
            losses: Some(losses),
        }
    }

    /// Waits for the next change. [`RecvError::Lagged`] means changes
    /// were lost (the reader fell behind, or a store lost its link to the
    /// database): every followed user must be read again.
    pub async fn recv(&mut self) -> Result<UserChange, RecvError> {
        if let Some(losses) = &mut self.losses {
            // A loss is told first, before the changes queued behind it:
            // the reader starts over at once. Both futures are
            // cancel-safe: the one not chosen loses nothing when dropped.
            // `Err(bumped)`: the store bumped its count (true) or dropped
            // its side (false).
            let first = {
                let mut lost = std::pin::pin!(losses.changed());
                let mut next = std::pin::pin!(self.rx.recv());
                std::future::poll_fn(|cx| {
                    if let Poll::Ready(r) = lost.as_mut().poll(cx) {
                        return Poll::Ready(Err(r.is_ok()));
                    }
                    next.as_mut().poll(cx).map(Ok)
                })
                .await
            };
            match first {
                Ok(next) => return lift(next),
                Err(true) => return Err(RecvError::Lagged(0)),
                // No more losses to tell.
                Err(false) => self.losses = None,
            }
        }
        lift(self.rx.recv().await)
    }

    /// The next change if one is queued now, without waiting; a loss the
    /// store told of comes first, as in [`recv`](Self::recv).
    pub fn try_recv(&mut self) -> Option<Result<UserChange, RecvError>> {
        if let Some(losses) = &mut self.losses
            && losses.has_changed().unwrap_or(false)
        {
            losses.borrow_and_update();
            return Some(Err(RecvError::Lagged(0)));
        }
        match self.rx.try_recv() {
            Ok(c) => Some(Ok(c)),
            Err(broadcast::error::TryRecvError::Empty) => None,
            Err(broadcast::error::TryRecvError::Lagged(n)) => Some(Err(RecvError::Lagged(n))),
            Err(broadcast::error::TryRecvError::Closed) => Some(Err(RecvError::Closed)),
        }
    }
}

/// A broadcast receiver's answer as a feed's.
fn lift(r: Result<UserChange, broadcast::error::RecvError>) -> Result<UserChange, RecvError> {
    match r {
        Ok(c) => Ok(c),
        Err(broadcast::error::RecvError::Lagged(n)) => Err(RecvError::Lagged(n)),
        Err(broadcast::error::RecvError::Closed) => Err(RecvError::Closed),
    }
}

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
        assert!(matches!(
            feed.rx.try_recv(),
            Err(broadcast::error::TryRecvError::Empty)
        ));
    }

    #[tokio::test]
    async fn a_store_that_lost_changes_makes_its_feeds_lag() {
        let (tx, _) = broadcast::channel(16);
        let (losses, _) = watch::channel(0u64);
        losses.send_modify(|n| *n += 1);
        // A loss before the feed was made is none of its business.
        let mut feed = UserFeed::with_losses(tx.subscribe(), losses.subscribe());
        tx.send(UserChange::Friends(id("ann"))).unwrap();
        assert_eq!(feed.recv().await.unwrap(), UserChange::Friends(id("ann")));
        // Queued changes wait behind the loss, which is told once.
        tx.send(UserChange::Friends(id("bob"))).unwrap();
        losses.send_modify(|n| *n += 1);
        losses.send_modify(|n| *n += 1);
        assert_eq!(feed.recv().await, Err(RecvError::Lagged(0)));
        assert_eq!(feed.recv().await.unwrap(), UserChange::Friends(id("bob")));
        // The store gone: the changes still queued are read, then the end.
        tx.send(UserChange::Friends(id("cy"))).unwrap();
        drop(losses);
        assert_eq!(feed.recv().await.unwrap(), UserChange::Friends(id("cy")));
        drop(tx);
        assert_eq!(feed.recv().await, Err(RecvError::Closed));
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
