//! Friend sets: one Redis set per user, global (in a slot of its own,
//! apart from every space), so they are read before a space's script runs
//! rather than inside it. Online friends are the trait's default methods
//! over [`friends`](RedisStore::friends) and the status script.
//!
//! Beside them, the reverse index erasure needs: `followers:F`, the users
//! whose set holds F. It lives in F's own slot, so it is written by its
//! own commands around the friend set's script, in the order that keeps
//! it a superset: a user is listed as F's follower before F enters its
//! set, and taken off after F left it (and listed again if F came back in
//! the meantime). A refused add may leave spurious entries; they cost
//! erasure one `SREM` that finds nothing.
//!
//! Every write that succeeds ends by saying `friends` on the owner's
//! channel, for the servers that follow the owner ([`crate::follow`]),
//! once the replicas [`RedisOptions::wait_replicas`](crate::RedisOptions::wait_replicas)
//! asks for have the set and the reverse index entries it changed.

use std::collections::{BTreeSet, HashSet};

use redis::{AsyncCommands, Value};

use herenow_core::store::check_batch;
use herenow_core::{InvalidInput, MemberId, Result, limits};

use super::RedisStore;
use super::sweep::ids_of;
use crate::reply::{array, int};
use crate::user_scripts;

impl RedisStore {
    /// [`PresenceStore::set_friends`](herenow_core::PresenceStore::set_friends):
    /// the whole set at once, refused past [`limits::MAX_FRIENDS`].
    pub(super) async fn set_friends(&self, user: &MemberId, friends: &[MemberId]) -> Result<u64> {
        let set: BTreeSet<&str> = friends
            .iter()
            .filter(|f| *f != user)
            .map(MemberId::as_str)
            .collect();
        if set.len() > limits::MAX_FRIENDS {
            return Err(InvalidInput::TooManyFriends { len: set.len() }.into());
        }
        let key = self.ctx.keys.friends(user.as_str());
        // Friends new to the set are listed as followed first.
        let old = self.members_of(&key).await?;
        let old: HashSet<&str> = old.iter().map(String::as_str).collect();
        let marked: Vec<&str> = set.iter().copied().filter(|f| !old.contains(f)).collect();
        self.mark_followers(user.as_str(), &marked).await?;
        let mut inv = user_scripts::SET_FRIENDS.prepare_invoke();
        inv.key(&key);
        for f in &set {
            inv.arg(*f);
        }
        let v: Value = self.ctx.invoke("set_friends", &inv).await?;
        let mut v = array(v)?.into_iter();
        let n = int(v.next().as_ref())?;
        let removed = ids_of(v.next())?;
        let added = ids_of(v.next())?;
        // Added although it was there when read: another call removed it
        // in between (and took this user off its followers).
        let marked: HashSet<&str> = marked.into_iter().collect();
        let late: Vec<&str> = added
            .iter()
            .map(String::as_str)
            .filter(|f| !marked.contains(f))
            .collect();
        self.mark_followers(user.as_str(), &late).await?;
        let removed: Vec<&str> = removed.iter().map(String::as_str).collect();
        self.unmark_followers(user.as_str(), Some(&key), &removed)
            .await?;
        let touched: Vec<&str> = marked
            .iter()
            .chain(&late)
            .chain(&removed)
            .copied()
            .collect();
        self.friends_replicated(&key, &touched).await?;
        self.announce_friends(&[user.as_str()]).await?;
        Ok(n as u64)
    }

    /// [`PresenceStore::add_friends`](herenow_core::PresenceStore::add_friends):
    /// the script refuses to grow the set past [`limits::MAX_FRIENDS`].
    pub(super) async fn add_friends(&self, user: &MemberId, friends: &[MemberId]) -> Result<u64> {
        check_batch(friends.len())?;
        let set: BTreeSet<&str> = friends
            .iter()
            .filter(|f| *f != user)
            .map(MemberId::as_str)
            .collect();
        let key = self.ctx.keys.friends(user.as_str());
        let listed: Vec<&str> = set.iter().copied().collect();
        self.mark_followers(user.as_str(), &listed).await?;
        let mut inv = user_scripts::ADD_FRIENDS.prepare_invoke();
        inv.key(&key).arg(limits::MAX_FRIENDS);
        for f in &set {
            inv.arg(*f);
        }
        let n: i64 = self.ctx.invoke("add_friends", &inv).await?;
        if n < 0 {
            return Err(InvalidInput::TooManyFriends { len: (-n) as usize }.into());
        }
        self.friends_replicated(&key, &listed).await?;
        self.announce_friends(&[user.as_str()]).await?;
        Ok(n as u64)
    }

    /// [`PresenceStore::remove_friends`](herenow_core::PresenceStore::remove_friends).
    pub(super) async fn remove_friends(
        &self,
        user: &MemberId,
        friends: &[MemberId],
    ) -> Result<u64> {
        check_batch(friends.len())?;
        let key = self.ctx.keys.friends(user.as_str());
        let mut inv = user_scripts::REMOVE_FRIENDS.prepare_invoke();
        inv.key(&key);
        for f in friends {
            inv.arg(f.as_str());
        }
        let n: i64 = self.ctx.invoke("remove_friends", &inv).await?;
        let gone: BTreeSet<&str> = friends.iter().map(MemberId::as_str).collect();
        let gone: Vec<&str> = gone.into_iter().collect();
        self.unmark_followers(user.as_str(), Some(&key), &gone)
            .await?;
        self.friends_replicated(&key, &gone).await?;
        self.announce_friends(&[user.as_str()]).await?;
        Ok(n as u64)
    }

    /// Returns once the replicas asked for have what a friend-set write
    /// changed: the set `own` and the reverse index of each of `friends`
    /// (at once when no replicas are asked for).
    async fn friends_replicated(&self, own: &str, friends: &[&str]) -> Result<()> {
        if !self.ctx.waits_for_replicas() {
            return Ok(());
        }
        let followers: Vec<String> = friends.iter().map(|f| self.ctx.keys.followers(f)).collect();
        self.ctx
            .replicated(std::iter::once(own).chain(followers.iter().map(String::as_str)))
            .await
    }

    /// [`PresenceStore::friends`](herenow_core::PresenceStore::friends),
    /// sorted (a Redis set has no order).
    pub(super) async fn friends(&self, user: &MemberId) -> Result<Vec<MemberId>> {
        let key = self.ctx.keys.friends(user.as_str());
        let mut c = self.ctx.client.clone();
        let ids: Vec<String> = self
            .ctx
            .io("friends", async { c.smembers(&key).await })
            .await?;
        let mut out: Vec<MemberId> = ids.iter().filter_map(|i| MemberId::new(i).ok()).collect();
        out.sort_unstable();
        Ok(out)
    }
}
