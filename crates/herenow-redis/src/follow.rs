//! Following users across spaces on Redis: the per-user
//! channels that carry what happens to a user, wherever it happens, to the
//! servers whose watchers follow that user
//! ([`herenow_core::follow`]).
//!
//! # Channels
//!
//! `P:u:ID` ([`Keys::user_channel`](crate::key_names)) carries two kinds of
//! message:
//!
//! - a user's status changes (`join`, `away`, `back`, `leave`) in any
//!   space, published by the same script call that made them (heartbeat,
//!   leave, attach, detach, the sweep, erasure: the `publish` helper
//!   every script shares, see [`crate::scripts`]), one message per event:
//!   `[space, tuple]`, the tuple as the space's channel has it
//!   ([`crate::events`]) but without metadata (a watcher shows a status,
//!   and on a cluster every byte crosses to every node);
//! - `friends`, after a write to the user's friend set or the erasure of
//!   a user it held ([`ANNOUNCE`]), once the write is done (a call cut
//!   short in between answered an error; its retry says it).
//!
//! A store subscribes to the channel of each user it follows (counted:
//! the first follow subscribes, the last unfollow unsubscribes), so a
//! server receives what its watchers need and nothing about anyone else.
//!
//! # On a cluster
//!
//! A script may only touch its own slot, and `SPUBLISH` is a key-like
//! operation checked like one: a space's script cannot `SPUBLISH` to a
//! user's slot (Redis answers "Script attempted to access a non local
//! key"). Classic `PUBLISH` is allowed in any script and the cluster bus
//! carries it to every node, so a subscriber connected anywhere receives
//! it. The cost: each status change of a user crosses the cluster bus to
//! every node, whether anyone follows the user or not (a heartbeat that
//! changes no status publishes nothing; only joins, aways, backs and leaves
//! do). The alternative,
//! sharded channels in the users' slots, would take the publish out of the
//! script (the script returns its events and the server publishes them
//! afterwards): a second round trip per write, and a server that dies in
//! between loses events that nobody would ever send again. Watchers would
//! then stay wrong with no lag to tell them, so exactness won.
//!
//! # Lost messages
//!
//! Pub/sub keeps nothing for a client that was away. When the link to
//! Redis drops (the client's `Disconnection` push; on a cluster, the link
//! to any node), [`Follows::push`] wakes the store's restorer
//! (`store/follow.rs`), which subscribes to every followed user's channel
//! again (the client does too, by itself; doing it here tells us when it
//! is done) and then bumps [`Follows::lost`]: every open
//! [`UserFeed`] answers [`RecvError::Lagged`](herenow_core::RecvError)
//! and its reader reads every followed user again, through a link whose
//! subscriptions are whole. An unreadable message is treated the same.

use std::collections::HashMap;
use std::sync::LazyLock;

use parking_lot::Mutex;
use redis::{PushInfo, PushKind, Script};
use tokio::sync::{Notify, broadcast, watch};

use herenow_core::follow::{FEED_QUEUE, UserChange, UserFeed, changes_status};
use herenow_core::{MemberId, MemberKind, SpaceName};

use crate::events::read_tuple;
use crate::reply::bytes_of;
use crate::scripts::bare;

/// What a user's channel carries when its friend set changed.
pub(crate) const FRIENDS: &str = "friends";

/// Most channels one `SUBSCRIBE` or `UNSUBSCRIBE` names, and one
/// [`ANNOUNCE`] call publishes to.
pub(crate) const CHANNELS_PER_COMMAND: usize = 256;

/// Says [`FRIENDS`] on users' channels. No keys (any node of a cluster runs
/// it, and its `PUBLISH`es reach every node). ARGV: the channels. Returns
/// how many.
pub(crate) static ANNOUNCE: LazyLock<Script> =
    LazyLock::new(|| bare(include_str!("lua/announce.lua")));

/// The users one store follows, and the feeds of their changes. Shared by
/// the store and the client's push callback; every method is short and
/// never awaits.
pub(crate) struct Follows {
    /// `P:u:`: the prefix of every user's channel.
    prefix: String,
    /// How many times each user is followed.
    counts: Mutex<HashMap<MemberId, u32>>,
    tx: broadcast::Sender<UserChange>,
    /// Bumped once changes may have been lost: every feed lags.
    losses: watch::Sender<u64>,
    /// Wakes the restorer: the link to Redis dropped.
    broken: Notify,
    /// Held while counts change and the matching (un)subscribe commands
    /// are sent (and while the restorer subscribes again), so commands
    /// for one channel reach Redis in the order its count changed: an
    /// unsubscribe never overtakes the subscribe of a later follow.
    pub order: tokio::sync::Mutex<()>,
}

impl Follows {
    /// Nobody followed yet; users' channels start with `prefix`.
    pub fn new(prefix: String) -> Self {
        Follows {
            prefix,
            counts: Mutex::new(HashMap::new()),
            tx: broadcast::channel(FEED_QUEUE).0,
            losses: watch::channel(0).0,
            broken: Notify::new(),
            order: tokio::sync::Mutex::new(()),
        }
    }

    /// A new feed of the followed users' changes, from now on.
    pub fn feed(&self) -> UserFeed {
        UserFeed::with_losses(self.tx.subscribe(), self.losses.subscribe())
    }

    fn channel(&self, user: &str) -> String {
        format!("{}{user}", self.prefix)
    }

    /// Follows each of `users` once more. Returns the channels of those
    /// followed now and not before (to subscribe to).
    pub fn add(&self, users: &[MemberId]) -> Vec<String> {
        let mut counts = self.counts.lock();
        let mut new = Vec::new();
        for u in users {
            let n = counts.entry(u.clone()).or_insert(0);
            if *n == 0 {
                new.push(self.channel(u.as_str()));
            }
            *n += 1;
        }
        new
    }

    /// Follows each of `users` once less (users not followed are passed
    /// over). Returns the channels of those no longer followed at all (to
    /// unsubscribe from): their messages are dropped from now on.
    pub fn remove(&self, users: &[MemberId]) -> Vec<String> {
        let mut counts = self.counts.lock();
        let mut gone = Vec::new();
        for u in users {
            if let Some(n) = counts.get_mut(u.as_str()) {
                *n -= 1;
                if *n == 0 {
                    counts.remove(u.as_str());
                    gone.push(self.channel(u.as_str()));
                }
            }
        }
        gone
    }

    /// The channels of every user followed now.
    pub fn channels(&self) -> Vec<String> {
        let counts = self.counts.lock();
        counts.keys().map(|u| self.channel(u.as_str())).collect()
    }

    /// How many users are followed now.
    pub fn followed(&self) -> usize {
        self.counts.lock().len()
    }

    /// Changes may have been lost: every open feed lags.
    pub fn lost(&self) {
        self.losses.send_modify(|n| *n += 1);
    }

    /// Waits until the link to Redis dropped (at once if it dropped since
    /// the last call).
    pub async fn broken(&self) {
        self.broken.notified().await;
    }

    /// Takes the messages of users' channels out of the client's pushes
    /// and notes a dropped link; hands back every other push (for the
    /// [`Router`](crate::events::Router)).
    pub fn push(&self, info: PushInfo) -> Option<PushInfo> {
        match info.kind {
            PushKind::Message => {
                let Some(user) = info
                    .data
                    .first()
                    .and_then(bytes_of)
                    .and_then(|c| c.strip_prefix(self.prefix.as_bytes()))
                else {
                    return Some(info);
                };
                match info.data.get(1).and_then(bytes_of) {
                    Some(payload) => self.deliver(user, payload),
                    None => self.unreadable(user),
                }
                None
            }
            PushKind::Disconnection => {
                self.broken.notify_one();
                Some(info)
            }
            _ => Some(info),
        }
    }

    /// One message of `user`'s channel, passed on if the user is followed.
    fn deliver(&self, user: &[u8], payload: &[u8]) {
        let Ok(user) = std::str::from_utf8(user) else {
            return;
        };
        if !self.counts.lock().contains_key(user) {
            // Unfollowed while its unsubscribe was on its way.
            return;
        }
        let change = if payload == FRIENDS.as_bytes() {
            MemberId::new(user).ok().map(UserChange::Friends)
        } else {
            read_change(payload).filter(|c| c.user().as_str() == user)
        };
        match change {
            Some(UserChange::Presence(e)) if !changes_status(e.kind) => {}
            Some(change) => {
                // An error only means no feed is open.
                let _ = self.tx.send(change);
            }
            None => self.unreadable(user.as_bytes()),
        }
    }

    /// A message that cannot be read: whatever it said is lost.
    fn unreadable(&self, user: &[u8]) {
        tracing::warn!(
            user = %String::from_utf8_lossy(user),
            "unreadable message on a user's channel; feeds lag"
        );
        self.lost();
    }
}

/// Reads `[space, tuple]`: a status change of a user.
fn read_change(payload: &[u8]) -> Option<UserChange> {
    let (space, tuple): (String, serde_json::Value) = serde_json::from_slice(payload).ok()?;
    let event = read_tuple(&SpaceName::new(&space).ok()?, tuple)?;
    (event.member.kind == MemberKind::User).then_some(UserChange::Presence(event))
}

#[cfg(test)]
mod tests {
    use super::*;
    use herenow_core::{EventKind, LeaveReason, RecvError, Status};
    use redis::Value;

    fn id(s: &str) -> MemberId {
        MemberId::new(s).unwrap()
    }

    fn message(chan: &str, payload: &str) -> PushInfo {
        PushInfo {
            kind: PushKind::Message,
            data: vec![
                Value::BulkString(chan.as_bytes().to_vec()),
                Value::BulkString(payload.as_bytes().to_vec()),
            ],
        }
    }

    async fn next(feed: &mut UserFeed) -> Result<UserChange, RecvError> {
        tokio::time::timeout(std::time::Duration::from_secs(1), feed.recv())
            .await
            .expect("a change")
    }

    #[test]
    fn announce_says_friends() {
        assert!(include_str!("lua/announce.lua").contains(&format!("'{FRIENDS}'")));
    }

    #[test]
    fn follows_are_counted_and_name_their_channels() {
        let f = Follows::new("p:u:".into());
        assert_eq!(
            f.add(&[id("ann"), id("ann"), id("bob")]),
            ["p:u:ann", "p:u:bob"]
        );
        assert!(f.add(&[id("bob")]).is_empty());
        assert!(f.remove(&[id("ann"), id("bob"), id("cy")]).is_empty());
        assert_eq!(f.remove(&[id("ann"), id("bob")]), ["p:u:ann", "p:u:bob"]);
        assert_eq!(f.followed(), 0);
    }

    #[tokio::test]
    async fn messages_of_followed_users_reach_the_feeds() {
        let f = Follows::new("p:u:".into());
        let mut feed = f.feed();
        f.add(&[id("ann")]);
        // Another channel is the router's business.
        let other = message("p:{room}:events", "[]");
        assert_eq!(f.push(other.clone()), Some(other));
        // A user nobody follows (any more): taken, dropped.
        assert_eq!(f.push(message("p:u:bob", FRIENDS)), None);
        let leave = r#"["room",["leave","u","ann","5",0,"timeout",false,"9","c-1"]]"#;
        assert_eq!(f.push(message("p:u:ann", leave)), None);
        let UserChange::Presence(e) = next(&mut feed).await.unwrap() else {
            panic!("a presence change");
        };
        assert_eq!(
            (e.kind, e.space.as_str(), e.member.id.as_str(), e.status),
            (EventKind::Leave, "room", "ann", Status::Offline)
        );
        assert_eq!(
            (
                e.reason,
                e.last_seen_ms,
                e.conn.as_ref().map(|c| c.as_str())
            ),
            (Some(LeaveReason::Timeout), Some(5), Some("c-1"))
        );
        f.push(message("p:u:ann", FRIENDS));
        assert_eq!(next(&mut feed).await, Ok(UserChange::Friends(id("ann"))));
    }

    #[tokio::test]
    async fn unreadable_messages_and_lost_links_make_feeds_lag() {
        let f = Follows::new("p:u:".into());
        let mut feed = f.feed();
        f.add(&[id("ann")]);
        // Someone else's event on ann's channel, a guest, garbage.
        for bad in [
            r#"["room",["join","u","bob","5",2,"",false,"9"]]"#,
            r#"["room",["join","g","ann","5",2,"",false,"9"]]"#,
            r#"["room#1",["join","u","ann","5",2,"",false,"9"]]"#,
            "{",
        ] {
            f.push(message("p:u:ann", bad));
            assert_eq!(next(&mut feed).await, Err(RecvError::Lagged(0)), "{bad}");
        }
        // A dropped link is passed on, and wakes the restorer.
        let gone = PushInfo {
            kind: PushKind::Disconnection,
            data: vec![],
        };
        assert_eq!(f.push(gone.clone()), Some(gone));
        tokio::time::timeout(std::time::Duration::from_secs(1), f.broken())
            .await
            .expect("woken");
    }
}
