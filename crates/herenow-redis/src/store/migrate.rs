//! One-time migrations of what earlier versions wrote, run by
//! [`RedisStore::connect`] before it answers. Each is idempotent and, once
//! it has finished, recorded in `P:migrations`, so a later store skips it
//! for one `HEXISTS`. Stores
//! started together may each run one not recorded yet: the work is done
//! twice, not wrongly. A migration that fails fails `connect` (loudly, as
//! a Redis that cannot be reached does); the next start runs it again.
//!
//! - `followers`: friend sets written before the reverse index
//!   `P:{~B}:followers:ID` existed are not in it, and erasure finds the sets
//!   that list a user only through it. The migration `SCAN`s every master
//!   (a cluster's keys are spread over them) for the sets `P:friends:*`, in
//!   pages of [`SCAN_COUNT`], and lists each set's owner among the
//!   followers of each of its friends: per page, one script per group of
//!   followers keys (per bucket on a cluster), at most [`PAIRS_PER_CALL`]
//!   entries a call. A set this version writes meanwhile is indexed by its
//!   writer; a friend removed meanwhile may be left listed, which the
//!   index allows (it is a superset: erasure's `SREM` finds nothing).
//!   Servers of an earlier version that still write friend sets after the
//!   migration ran are not covered: once none is left, `HDEL P:migrations
//!   followers` runs it again at the next start.
//! - `hooked`: spaces that named webhook endpoints before the list of
//!   such spaces (`P:{~outbox}:hooked`) existed are not on it, and a
//!   server opened for spaces' endpoints alone stops capturing when the
//!   list is empty. The migration `SCAN`s every master for the spaces'
//!   endpoint keys `P:{S}:hooks` and lists their spaces. The same caveat
//!   about earlier versions still writing holds.

use std::collections::BTreeMap;
use std::sync::LazyLock;

use redis::{Script, Value};

use herenow_core::{MemberId, Result};

use super::sweep::ids_of;
use super::{RedisStore, at_most};
use crate::reply::{array, bad_reply, opt_string};
use crate::scripts::bare;

/// The `COUNT` hint of each `SCAN` step: keys looked at per round trip.
const SCAN_COUNT: usize = 1_000;

/// Most (follower, friend) entries one script call adds.
const PAIRS_PER_CALL: usize = 10_000;

/// Most friend sets read at a time.
const READS: usize = 64;

/// The `followers` migration's field in `P:migrations`.
const FOLLOWERS: &str = "followers";

/// The `hooked` migration's field in `P:migrations`.
const HOOKED: &str = "hooked";

/// Adds users to the followers of several users. KEYS: their followers
/// sets (of one bucket on a cluster). ARGV: for each key in turn, how many
/// users, then the users. Returns the number of keys.
static FOLLOWED_BY: LazyLock<Script> =
    LazyLock::new(|| bare(include_str!("../lua/followed_by.lua")));

impl RedisStore {
    /// Runs the migrations not yet recorded (see the module docs).
    pub(super) async fn migrate(&self) -> Result<()> {
        if !self.migrated(FOLLOWERS).await? {
            self.index_old_friend_sets().await?;
            self.record_migration(FOLLOWERS).await?;
        }
        if !self.migrated(HOOKED).await? {
            self.list_old_hooked_spaces().await?;
            self.record_migration(HOOKED).await?;
        }
        Ok(())
    }

    /// Every key on every master matching `pattern` (of `type`), a page
    /// of `SCAN` at a time, handed to `page`.
    async fn scan_masters<F, Fut>(&self, pattern: &str, kind: &str, mut page: F) -> Result<()>
    where
        F: FnMut(Vec<String>) -> Fut,
        Fut: std::future::Future<Output = Result<()>>,
    {
        let mut c = self.ctx.client.clone();
        let slots = self.ctx.io("migrate", c.master_slots()).await?;
        for slot in slots {
            let mut cursor = "0".to_owned();
            loop {
                let (next, keys) = self
                    .scan_step("migrate", slot, &cursor, pattern, kind)
                    .await?;
                page(keys).await?;
                if next == "0" {
                    break;
                }
                cursor = next;
            }
        }
        Ok(())
    }

    /// One `SCAN` step from `cursor` on the master serving `slot`, for
    /// keys matching `pattern` of type `kind`: the next cursor (`0` once
    /// done) and the keys it found.
    pub(super) async fn scan_step(
        &self,
        what: &'static str,
        slot: u16,
        cursor: &str,
        pattern: &str,
        kind: &str,
    ) -> Result<(String, Vec<String>)> {
        let mut cmd = redis::cmd("SCAN");
        cmd.arg(cursor)
            .arg("MATCH")
            .arg(pattern)
            .arg("COUNT")
            .arg(SCAN_COUNT)
            .arg("TYPE")
            .arg(kind);
        let mut c = self.ctx.client.clone();
        let v = self.ctx.io(what, c.query_on(slot, cmd)).await?;
        let mut v = array(v)?.into_iter();
        let next = opt_string(v.next())?.ok_or_else(|| bad_reply("a SCAN cursor"))?;
        Ok((next, ids_of(v.next())?))
    }

    /// The `hooked` migration: every space whose endpoints key exists,
    /// listed among the spaces that may name endpoints.
    async fn list_old_hooked_spaces(&self) -> Result<()> {
        let mut listed = 0usize;
        self.scan_masters(&self.ctx.keys.hooks_pattern(), "string", |keys| {
            let spaces: Vec<String> = keys
                .iter()
                .filter_map(|k| self.ctx.keys.space_of_hooks(k))
                .map(str::to_owned)
                .collect();
            listed += spaces.len();
            async move { self.list_hooked(&spaces).await }
        })
        .await?;
        if listed > 0 {
            tracing::info!(spaces = listed, "spaces naming webhook endpoints listed");
        }
        Ok(())
    }

    async fn migrated(&self, name: &str) -> Result<bool> {
        let key = self.ctx.keys.migrations();
        self.ctx
            .query("migrate", redis::cmd("HEXISTS").arg(&key).arg(name))
            .await
    }

    async fn record_migration(&self, name: &str) -> Result<()> {
        let key = self.ctx.keys.migrations();
        let now = self.ctx.clock.now_ms();
        self.ctx
            .query::<Value>("migrate", redis::cmd("HSET").arg(&key).arg(name).arg(now))
            .await?;
        Ok(())
    }

    /// The `followers` migration: every friend set under this prefix, on
    /// every master, into the reverse index.
    async fn index_old_friend_sets(&self) -> Result<()> {
        // Summed by each page's future: a lock, as the futures are `Send`.
        let counts = parking_lot::Mutex::new((0u64, 0u64));
        self.scan_masters(&self.ctx.keys.friends_pattern(), "set", |keys| {
            let counts = &counts;
            async move {
                let (n, e) = self.index_friend_sets(&keys).await?;
                let mut c = counts.lock();
                c.0 += n;
                c.1 += e;
                Ok(())
            }
        })
        .await?;
        let (sets, entries) = counts.into_inner();
        if sets > 0 {
            tracing::info!(
                sets,
                entries,
                "friend sets indexed for erasure (written before the reverse index)"
            );
        }
        Ok(())
    }

    /// Lists the owner of each of the friend sets `keys` among the
    /// followers of each of its friends. Returns how many sets and
    /// entries.
    async fn index_friend_sets(&self, keys: &[String]) -> Result<(u64, u64)> {
        let calls: Vec<_> = keys
            .iter()
            .filter_map(|k| {
                let owner = self.ctx.keys.owner_of_friends(k)?;
                MemberId::new(owner).ok()?;
                Some(
                    async move { Ok::<_, herenow_core::Error>((owner, self.members_of(k).await?)) },
                )
            })
            .collect();
        let sets: Vec<(&str, Vec<String>)> = at_most(READS, calls).await?;
        let mut by_friend: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for (owner, friends) in &sets {
            for f in friends {
                by_friend.entry(f.as_str()).or_default().push(owner);
            }
        }
        let friends: Vec<&str> = by_friend.keys().copied().collect();
        let mut batches: Vec<Vec<usize>> = Vec::new();
        for group in self.ctx.user_groups(&friends) {
            let mut batch = Vec::new();
            let mut pairs = 0;
            for i in group {
                pairs += by_friend[friends[i]].len();
                batch.push(i);
                if pairs >= PAIRS_PER_CALL {
                    batches.push(std::mem::take(&mut batch));
                    pairs = 0;
                }
            }
            if !batch.is_empty() {
                batches.push(batch);
            }
        }
        let calls: Vec<_> = batches
            .into_iter()
            .map(|batch| {
                let mut inv = FOLLOWED_BY.prepare_invoke();
                for i in batch {
                    let owners = &by_friend[friends[i]];
                    inv.key(self.ctx.keys.followers(friends[i]))
                        .arg(owners.len());
                    for o in owners {
                        inv.arg(*o);
                    }
                }
                async move { self.ctx.invoke::<Value>("migrate", &inv).await }
            })
            .collect();
        let _: Vec<Value> = at_most(READS, calls).await?;
        let entries = by_friend.values().map(Vec::len).sum::<usize>();
        Ok((sets.len() as u64, entries as u64))
    }
}
