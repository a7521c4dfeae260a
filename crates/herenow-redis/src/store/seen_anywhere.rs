//! Users across spaces: "last seen anywhere" and erasure. Both start from
//! the user's index of spaces ([`Keys::seen`](crate::key_names)), a sorted set
//! in a slot of its own (so never in the same script as a space): every
//! space the user is stored or remembered in is listed there (a writer
//! lists it before its call answers, the sweep if the writer failed), and
//! a space listed there may know nothing of the user any more (a spurious
//! entry costs a look-up; reads and the sweep drop such entries once their
//! mark is older than [`INDEX_GRACE_MS`]).
//!
//! Erasure is atomic per slot, not across them: each space (the user's
//! shard of it) is erased by one script, the user's own friend set and
//! index by single commands, and the user's place in each other user's
//! friend set by one command per set. A call that fails part-way has
//! erased some of it and answers the error; calling again finishes the
//! job (every step is idempotent and the index and the reverse index of
//! friends are emptied last, so a retry finds what is left).

use std::collections::{BTreeMap, HashSet};

use redis::Value;

use herenow_core::store::check_batch;
use herenow_core::{
    ErasureReport, MemberId, MemberKey, MemberKind, Millis, Result, SeenAnywhere, SpaceName, Status,
};

use super::sweep::{INDEX_GRACE_MS, ids_of, scored};
use super::{RedisStore, at_most};
use crate::conn_scripts;
use crate::outbox::{self, Captured};
use crate::reply::{array, int};
use crate::user_scripts;

/// Most spaces (or friend sets) one call looks up or writes at a time.
const LOOKUPS: usize = 64;

impl RedisStore {
    /// Users' indexes of spaces, in the order of `users`: `(space, mark)`
    /// pairs, the spaces' names as stored. One script per group of
    /// indexes (see `Ctx::user_groups`).
    async fn indexes_of<S: AsRef<str> + Sync>(
        &self,
        users: &[S],
    ) -> Result<Vec<Vec<(String, Millis)>>> {
        let groups = self.ctx.user_groups(users);
        let read = futures::future::try_join_all(groups.iter().map(|group| {
            let mut inv = user_scripts::READ_INDEXES.prepare_invoke();
            for &i in group {
                inv.key(self.ctx.keys.seen(users[i].as_ref()));
            }
            async move {
                let v: Value = self.ctx.invoke("seen", &inv).await?;
                array(v)
            }
        }))
        .await?;
        let mut out = vec![Vec::new(); users.len()];
        for (group, v) in groups.iter().zip(read) {
            for (&i, index) in group.iter().zip(v) {
                out[i] = scored(index)?;
            }
        }
        Ok(out)
    }

    /// [`UserIndex::seen_anywhere`](herenow_core::UserIndex::seen_anywhere):
    /// every user's index at once, then one status look-up per space
    /// listed (each for all the users that list it, its shards at once),
    /// merged per user.
    pub(super) async fn seen_anywhere(&self, users: &[MemberId]) -> Result<Vec<SeenAnywhere>> {
        check_batch(users.len())?;
        let now = self.ctx.clock.now_ms();
        let ids: Vec<&str> = users.iter().map(MemberId::as_str).collect();
        let indexes = self.indexes_of(&ids).await?;
        let mut by_space: BTreeMap<String, Vec<(usize, Millis)>> = BTreeMap::new();
        for (i, index) in indexes.into_iter().enumerate() {
            for (space, mark) in index {
                by_space.entry(space).or_default().push((i, mark));
            }
        }
        // Spaces at most LOOKUPS at a time: a batch of users may list
        // thousands, and a cluster client queues what it cannot send.
        let lookups: Vec<_> = at_most(
            LOOKUPS,
            by_space.into_iter().filter_map(|(name, who)| {
                let space = SpaceName::new(&name).ok()?;
                Some(async move {
                    let members: Vec<MemberKey> = who
                        .iter()
                        .map(|&(i, _)| MemberKey::user(users[i].clone()))
                        .collect();
                    let (config, found) = self.lookup(&space, &members).await?;
                    Ok::<_, herenow_core::Error>((space, who, config, found))
                })
            }),
        )
        .await?;
        let mut out: Vec<SeenAnywhere> = users.iter().cloned().map(SeenAnywhere::unseen).collect();
        let cutoff = now.saturating_sub(INDEX_GRACE_MS);
        let mut stale: Vec<(SpaceName, Vec<String>)> = Vec::new();
        for (space, who, config, found) in lookups {
            let mut gone = Vec::new();
            for (&(i, mark), f) in who.iter().zip(found) {
                match f.score {
                    Some(t) => out[i].merge(&space, config.status(Some(t), now), Some(t)),
                    None if f.remembered.is_some() => {
                        let t = f.remembered_now(&config, MemberKind::User, now);
                        out[i].merge(&space, Status::Offline, t);
                    }
                    None if mark <= cutoff => gone.push(users[i].as_str().to_owned()),
                    None => {}
                }
            }
            if !gone.is_empty() {
                stale.push((space, gone));
            }
        }
        // Tidying the indexes is not the caller's business: a failure here
        // leaves spurious entries, which cost a look-up and are tried again.
        for (space, gone) in &stale {
            if let Err(e) = self.unindex(space, gone, cutoff).await {
                tracing::debug!(error = %e, "could not drop stale entries of users' indexes");
            }
        }
        Ok(out)
    }

    /// [`UserIndex::erase_user`](herenow_core::UserIndex::erase_user):
    /// see the module documentation. Refused while writes wait in the
    /// buffer (Redis failed and they are not written back yet): a buffered
    /// heartbeat of the user written after the erasure would bring it back.
    pub(super) async fn erase_user(&self, user: &MemberId) -> Result<ErasureReport> {
        self.refuse_while_held()?;
        let now = self.ctx.clock.now_ms();
        let mut report = ErasureReport::default();
        let member = MemberKey::user(user.clone());

        // Every space the index lists: one script in the user's shard of each.
        let index = self
            .indexes_of(&[user.as_str()])
            .await?
            .pop()
            .unwrap_or_default();
        // (The futures are made first: a stream of a borrowing closure is
        // not `Send` enough for `async_trait`.)
        let calls: Vec<_> = index
            .iter()
            .filter_map(|(name, _)| {
                let space = SpaceName::new(name).ok()?;
                let k = self.ctx.keys.of_member(&space, &member);
                let mut inv = conn_scripts::ERASE.prepare_invoke();
                k.add_to(&mut inv);
                inv.arg(now)
                    .arg(&self.ctx.defaults_args()[..])
                    .arg(self.ctx.publish_arg(&space).as_ref())
                    .arg(&k.channel)
                    .arg(user.as_str());
                Some(async move {
                    let v: Value = self.ctx.invoke("erase", &inv).await?;
                    let v = array(v)?;
                    outbox::after(&self.ctx, &space, &k, Captured::of(v.get(3))).await;
                    Ok::<_, herenow_core::Error>(v)
                })
            })
            .collect();
        let erased: Vec<Vec<Value>> = at_most(LOOKUPS, calls).await?;
        for v in erased {
            report.presence += int(v.first())? as u64;
            report.remembered += int(v.get(1))? as u64;
        }
        // Then the index, each space unless a writer stored the user there
        // again since (and marked it later).
        let seen = self.ctx.keys.seen(user.as_str());
        let calls: Vec<_> = index
            .iter()
            .map(|(name, mark)| {
                let seen = &seen;
                async move {
                    self.ctx
                        .invoke::<Value>(
                            "erase",
                            user_scripts::UNINDEX.key(seen).arg(name).arg(*mark),
                        )
                        .await
                }
            })
            .collect();
        let _: Vec<Value> = at_most(LOOKUPS, calls).await?;

        // The user's own friend set: first off the reverse index of each
        // friend (so a retry still finds them), then the set.
        let own = self.ctx.keys.friends(user.as_str());
        let friends = self.members_of(&own).await?;
        report.friend_set = !friends.is_empty();
        let friends: Vec<&str> = friends.iter().map(String::as_str).collect();
        self.unmark_followers(user.as_str(), None, &friends).await?;
        self.remove_members(&own, &friends).await?;

        // Other users' friend sets, found by the reverse index.
        let followers = self.ctx.keys.followers(user.as_str());
        let listed_by = self.members_of(&followers).await?;
        // One command per friend set (each in a slot of its own), a
        // bounded number at a time: a user may be listed by very many.
        let calls: Vec<_> = listed_by
            .iter()
            .map(|f| {
                let key = self.ctx.keys.friends(f);
                async move {
                    self.ctx
                        .query::<i64>("erase", redis::cmd("SREM").arg(&key).arg(user.as_str()))
                        .await
                }
            })
            .collect();
        let removed: Vec<i64> = at_most(LOOKUPS, calls).await?;
        report.listed_by = removed.into_iter().filter(|&n| n > 0).count() as u64;
        let listed_by: Vec<&str> = listed_by.iter().map(String::as_str).collect();
        // Servers that follow those users (or the user) read their sets
        // again: said of every owner the reverse index lists (a superset),
        // before it is emptied, so a retry says it too.
        let mut owners = listed_by.clone();
        owners.push(user.as_str());
        self.announce_friends(&owners).await?;
        self.remove_members(&followers, &listed_by).await?;

        // Acknowledged once the replicas asked for have all of it: an
        // erasure lost in a failover would bring the user back.
        if self.ctx.waits_for_replicas() {
            let mut keys: Vec<String> = index
                .iter()
                .filter_map(|(name, _)| {
                    let space = SpaceName::new(name).ok()?;
                    Some(self.ctx.keys.of_member(&space, &member).zu)
                })
                .collect();
            keys.extend([seen, own, followers]);
            keys.extend(friends.iter().map(|f| self.ctx.keys.followers(f)));
            keys.extend(listed_by.iter().map(|f| self.ctx.keys.friends(f)));
            self.ctx.replicated(keys.iter().map(String::as_str)).await?;
        }
        Ok(report)
    }

    /// The members of a set.
    pub(super) async fn members_of(&self, key: &str) -> Result<Vec<String>> {
        let v: Value = self
            .ctx
            .query("smembers", redis::cmd("SMEMBERS").arg(key))
            .await?;
        ids_of(Some(v))
    }

    /// Removes `members` from a set, in bounded commands.
    async fn remove_members(&self, key: &str, members: &[&str]) -> Result<()> {
        for chunk in members.chunks(1_000) {
            self.ctx
                .query::<Value>("srem", redis::cmd("SREM").arg(key).arg(chunk))
                .await?;
        }
        Ok(())
    }

    /// Lists `user` among the followers of each of `friends` (the reverse
    /// index of friend sets): before the friends are added to its set, so
    /// the reverse index is never missing one.
    pub(super) async fn mark_followers(&self, user: &str, friends: &[&str]) -> Result<()> {
        self.update_followers("SADD", user, friends).await
    }

    /// Runs `SADD` or `SREM` of `user` on the followers of each of
    /// `friends`: one script per group of them (see `Ctx::user_groups`).
    async fn update_followers(
        &self,
        cmd: &'static str,
        user: &str,
        friends: &[&str],
    ) -> Result<()> {
        futures::future::try_join_all(self.ctx.user_groups(friends).into_iter().map(|group| {
            let mut inv = user_scripts::FOLLOW.prepare_invoke();
            for i in group {
                inv.key(self.ctx.keys.followers(friends[i]));
            }
            inv.arg(cmd).arg(user);
            async move { self.ctx.invoke::<Value>("followers", &inv).await }
        }))
        .await?;
        Ok(())
    }

    /// Takes `user` off the followers of each of `friends`, after they left
    /// its set. With `own` (the user's friend set), those that are in the
    /// set again by now (a concurrent add) are listed again.
    pub(super) async fn unmark_followers(
        &self,
        user: &str,
        own: Option<&str>,
        friends: &[&str],
    ) -> Result<()> {
        if friends.is_empty() {
            return Ok(());
        }
        self.update_followers("SREM", user, friends).await?;
        let Some(own) = own else { return Ok(()) };
        let mut back = Vec::new();
        for chunk in friends.chunks(1_000) {
            let v: Value = self
                .ctx
                .query("followers", redis::cmd("SMISMEMBER").arg(own).arg(chunk))
                .await?;
            for (f, is) in chunk.iter().zip(array(v)?) {
                if int(Some(&is)).is_ok_and(|n| n != 0) || matches!(is, Value::Boolean(true)) {
                    back.push(*f);
                }
            }
        }
        let distinct: HashSet<&str> = back.into_iter().collect();
        let back: Vec<&str> = distinct.into_iter().collect();
        self.mark_followers(user, &back).await
    }
}
