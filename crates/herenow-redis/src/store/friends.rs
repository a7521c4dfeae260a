//! Friend sets: one Redis set per user, global (in a slot of its own,
//! apart from every space), so they are read before a space's script runs
//! rather than inside it. Online friends are the trait's default methods
//! over [`read_friends`](RedisStore::read_friends) and the status script.

use std::collections::BTreeSet;

use redis::AsyncCommands;

use herenow_core::store::check_batch;
use herenow_core::{InvalidInput, MemberId, Result, limits};

use super::RedisStore;
use crate::scripts;

impl RedisStore {
    /// [`PresenceStore::set_friends`](herenow_core::PresenceStore::set_friends):
    /// the whole set at once, refused past [`limits::MAX_FRIENDS`].
    pub(super) async fn replace_friends(
        &self,
        user: &MemberId,
        friends: &[MemberId],
    ) -> Result<u64> {
        let set: BTreeSet<&str> = friends
            .iter()
            .filter(|f| *f != user)
            .map(MemberId::as_str)
            .collect();
        if set.len() > limits::MAX_FRIENDS {
            return Err(InvalidInput::TooManyFriends { len: set.len() }.into());
        }
        let key = self.ctx.keys.friends(user);
        let mut c = self.ctx.client.clone();
        let n: i64 = self
            .ctx
            .io("set_friends", async {
                let mut inv = scripts::SET_FRIENDS.prepare_invoke();
                inv.key(&key);
                for f in &set {
                    inv.arg(*f);
                }
                inv.invoke_async(&mut c).await
            })
            .await?;
        Ok(n as u64)
    }

    /// [`PresenceStore::add_friends`](herenow_core::PresenceStore::add_friends):
    /// the script refuses to grow the set past [`limits::MAX_FRIENDS`].
    pub(super) async fn insert_friends(
        &self,
        user: &MemberId,
        friends: &[MemberId],
    ) -> Result<u64> {
        check_batch(friends.len())?;
        let set: BTreeSet<&str> = friends
            .iter()
            .filter(|f| *f != user)
            .map(MemberId::as_str)
            .collect();
        let key = self.ctx.keys.friends(user);
        let mut c = self.ctx.client.clone();
        let n: i64 = self
            .ctx
            .io("add_friends", async {
                let mut inv = scripts::ADD_FRIENDS.prepare_invoke();
                inv.key(&key).arg(limits::MAX_FRIENDS);
                for f in &set {
                    inv.arg(*f);
                }
                inv.invoke_async(&mut c).await
            })
            .await?;
        if n < 0 {
            return Err(InvalidInput::TooManyFriends { len: (-n) as usize }.into());
        }
        Ok(n as u64)
    }

    /// [`PresenceStore::remove_friends`](herenow_core::PresenceStore::remove_friends).
    pub(super) async fn delete_friends(
        &self,
        user: &MemberId,
        friends: &[MemberId],
    ) -> Result<u64> {
        check_batch(friends.len())?;
        let key = self.ctx.keys.friends(user);
        let mut c = self.ctx.client.clone();
        let n: i64 = self
            .ctx
            .io("remove_friends", async {
                let mut inv = scripts::REMOVE_FRIENDS.prepare_invoke();
                inv.key(&key);
                for f in friends {
                    inv.arg(f.as_str());
                }
                inv.invoke_async(&mut c).await
            })
            .await?;
        Ok(n as u64)
    }

    /// [`PresenceStore::friends`](herenow_core::PresenceStore::friends),
    /// sorted (a Redis set has no order).
    pub(super) async fn read_friends(&self, user: &MemberId) -> Result<Vec<MemberId>> {
        let key = self.ctx.keys.friends(user);
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
