//! The write path: the heartbeat and leave scripts split per shard and
//! sent together, and the registry mark that lets the sweep find a space.
//! Used by direct calls, by the heartbeat flusher (`flush.rs`) and by the
//! replayer (`replay.rs`), so a buffered write reaches Redis through the
//! same scripts as a direct one.

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::Mutex;
use redis::Value;

use herenow_core::{Error, MemberKey, MemberKind, Metadata, Millis, Result, SpaceName};

use crate::ctx::Ctx;
use crate::key_names::SpaceKeys;
use crate::outbox::{self, Captured};
use crate::reply::{array, bad_reply, int, opt_string};
use crate::scripts;
use crate::user_scripts;

/// How often one store re-marks a space it writes to in the space registry.
/// The sweep drops a space from the registry only when it is empty and was
/// not marked for twice this long, so a writer's cached mark is never stale
/// when the sweep looks.
pub(crate) const TOUCH_EVERY_MS: Millis = 60_000;

/// Most members one heartbeat script call writes: about a millisecond of
/// Redis's time, so a big batch never blocks it for long. Bigger batches
/// are split and the calls pipelined (so a reader may see part of one
/// before the rest).
pub(crate) const SCRIPT_BATCH: usize = 1_000;

/// What the heartbeat script did with one entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// Written; the member was present already.
    Accepted,
    /// Written, and the member joined.
    Joined,
    /// Ignored: the member had a newer time, or the time was past the
    /// retention.
    Stale,
}

/// `[accepted, joined, stale]` of a list of outcomes.
pub(crate) fn tally(outcomes: impl IntoIterator<Item = Outcome>) -> [u64; 3] {
    let mut t = [0; 3];
    for o in outcomes {
        match o {
            Outcome::Accepted => t[0] += 1,
            Outcome::Joined => {
                t[0] += 1;
                t[1] += 1;
            }
            Outcome::Stale => t[2] += 1,
        }
    }
    t
}

/// Reads the heartbeat script's reply: one outcome byte per entry, and
/// the users stored or remembered anew (to index).
fn outcomes_of(v: Vec<Value>, entries: usize) -> Result<(Vec<Outcome>, Vec<String>)> {
    let mut v = v.into_iter().skip(3);
    let outcomes = v.next();
    let fresh = match v.next() {
        Some(ids) => array(ids)?
            .into_iter()
            .map(|id| opt_string(Some(id))?.ok_or_else(|| bad_reply("a user id")))
            .collect::<Result<Vec<String>>>()?,
        None => Vec::new(),
    };
    let bytes = match outcomes {
        Some(Value::BulkString(b)) => b,
        Some(Value::SimpleString(s)) => s.into_bytes(),
        // An empty Lua string may come back as an empty bulk string; no
        // entries means nothing to read.
        _ if entries == 0 => Vec::new(),
        _ => return Err(Error::Internal("heartbeat script: no outcomes".into())),
    };
    if bytes.len() != entries {
        return Err(Error::Internal(format!(
            "heartbeat script: {} outcomes for {entries} heartbeats",
            bytes.len()
        )));
    }
    let outcomes = bytes
        .into_iter()
        .map(|b| match b {
            b'0' => Ok(Outcome::Accepted),
            b'1' => Ok(Outcome::Joined),
            b'2' => Ok(Outcome::Stale),
            _ => Err(Error::Internal("heartbeat script: a bad outcome".into())),
        })
        .collect::<Result<_>>()?;
    Ok((outcomes, fresh))
}

/// A heartbeat as the script takes it: member, time, metadata (`None`
/// keeps what the member had).
pub(crate) type BeatArg<'a> = (&'a MemberKey, Millis, Option<&'a Metadata>);

/// Writes heartbeats and leaves for one store. Shared (behind an `Arc`) by
/// the store, its flusher and its replayer.
pub(crate) struct Writer {
    ctx: Arc<Ctx>,
    /// When this store last marked each space in the registry.
    touched: Mutex<HashMap<SpaceName, Millis>>,
}

impl Writer {
    /// The write path of the store whose context is `ctx`.
    pub fn new(ctx: Arc<Ctx>) -> Self {
        Writer {
            ctx,
            touched: Mutex::new(HashMap::new()),
        }
    }

    /// The context it writes with.
    pub fn ctx(&self) -> &Ctx {
        &self.ctx
    }

    /// Marks `space` in the registry unless this store did so recently.
    pub async fn register(&self, space: &SpaceName, now: Millis) -> Result<()> {
        let fresh = self
            .touched
            .lock()
            .get(space)
            .is_some_and(|&at| at <= now && now - at < TOUCH_EVERY_MS);
        if fresh {
            return Ok(());
        }
        let (names, touched) = self.ctx.keys.registry();
        let shards = self.ctx.keys.shards(space);
        let r: i64 = self
            .ctx
            .invoke(
                "register",
                user_scripts::REGISTER
                    .key(&names)
                    .key(touched)
                    .key(self.ctx.keys.registry_shards())
                    .arg(space.as_str())
                    .arg(now)
                    .arg(shards),
            )
            .await?;
        if r < 0 {
            tracing::error!(
                space = space.as_str(),
                recorded = -r,
                configured = shards,
                "space has another shard count than this store is configured with; not writing"
            );
            return Err(Error::Internal(format!(
                "space {} is split over {} shards in redis but this server is configured \
                 with {shards} (RedisOptions::shards / space_shards must agree on every server)",
                space.as_str(),
                -r
            )));
        }
        // A registry entry lost in a failover would hide the space from
        // the sweep until this store marks it again.
        self.ctx.replicated([names.as_str()]).await?;
        let mut t = self.touched.lock();
        if t.len() > 100_000 {
            t.retain(|_, at| now.saturating_sub(*at) < TOUCH_EVERY_MS);
        }
        t.insert(space.clone(), now);
        Ok(())
    }

    /// Registers the space and runs the heartbeat script: one entry per
    /// member (the caller coalesces), split by shard, at most
    /// [`SCRIPT_BATCH`] members per script call, the calls sent at once (the
    /// multiplexed client pipelines them; on a cluster each goes to its
    /// shard's node). Returns the script's outcome for each entry, in order
    /// (see [`Outcome`]). Entries at `now` without metadata cost one
    /// argument each (the script's argument list is described at
    /// [`scripts::HEARTBEAT`]).
    pub async fn write_beats(
        &self,
        space: &SpaceName,
        now: Millis,
        beats: &[BeatArg<'_>],
    ) -> Result<Vec<Outcome>> {
        self.register(space, now).await?;
        let groups = self.ctx.keys.by_shard(space, beats.len(), |i| beats[i].0);
        let calls = groups.iter().flat_map(|(shard, idx)| {
            let k = self.ctx.keys.shard(space, *shard);
            idx.chunks(SCRIPT_BATCH)
                .map(move |chunk| self.heartbeat_call(space, k.clone(), now, beats, chunk))
        });
        let parts = futures::future::try_join_all(calls).await?;
        let mut out = vec![Outcome::Accepted; beats.len()];
        let mut fresh = Vec::new();
        let mut written = Vec::new();
        for (idx, got, k, ids) in parts {
            for (o, i) in got.into_iter().zip(idx) {
                out[i] = o;
            }
            if self.ctx.waits_for_replicas() {
                written.push(k.zu.clone());
            }
            if !ids.is_empty() {
                fresh.push((k, ids));
            }
        }
        // Before the call answers, so the user's "last seen anywhere" and
        // erasure see the space at once.
        futures::future::try_join_all(
            fresh
                .iter()
                .map(|(k, ids)| self.index_users(space, k, ids, now)),
        )
        .await?;
        // After the index's `SREM`s too, which went to the shards' slots.
        self.ctx
            .replicated(written.iter().map(String::as_str))
            .await?;
        Ok(out)
    }

    /// Adds `space` to the index of spaces of each of `users`, stored or
    /// remembered anew in shard `k` (and so listed in its `unidx`), then
    /// takes them off `unidx`. Users' indexes live in slots of their own,
    /// so this cannot be part of the script that stored them: `unidx`,
    /// written by that script, is what makes it certain. Should this call
    /// never happen or fail, the sweep does it (see `store/sweep.rs`).
    pub async fn index_users(
        &self,
        space: &SpaceName,
        k: &SpaceKeys,
        users: &[String],
        now: Millis,
    ) -> Result<()> {
        // One script per bucket of indexes on a cluster (see
        // `key_names::user_bucket`), one pipeline per 1,000 users on a server.
        let cluster = self.ctx.is_cluster();
        let groups = self.ctx.user_groups(users);
        // One key per group stands for its slot.
        let slots: Vec<String> = groups
            .iter()
            .map(|g| self.ctx.keys.seen(&users[g[0]]))
            .collect();
        futures::future::try_join_all(groups.into_iter().map(|group| {
            let mut c = self.ctx.client.clone();
            let keys: Vec<String> = group
                .iter()
                .map(|&i| self.ctx.keys.seen(&users[i]))
                .collect();
            self.ctx.io("index", async move {
                if cluster {
                    let mut inv = user_scripts::INDEX.prepare_invoke();
                    for k in &keys {
                        inv.key(k);
                    }
                    inv.arg(now).arg(space.as_str());
                    inv.invoke_async::<Value>(&mut c).await
                } else {
                    let mut pipe = redis::pipe();
                    for k in &keys {
                        pipe.cmd("ZADD")
                            .arg(k)
                            .arg(now)
                            .arg(space.as_str())
                            .ignore();
                    }
                    pipe.query_async::<Value>(&mut c).await
                }
            })
        }))
        .await?;
        // The index must be on the replicas before `unidx` forgets that it
        // was to be written.
        self.ctx
            .replicated(slots.iter().map(String::as_str))
            .await?;
        for chunk in users.chunks(1_000) {
            self.ctx
                .query::<Value>("index", redis::cmd("SREM").arg(&k.unidx).arg(chunk))
                .await?;
        }
        Ok(())
    }

    /// One heartbeat script call on one shard for `beats[i]`, `i` in
    /// `chunk`. Returns the chunk and its outcomes, in the chunk's order.
    async fn heartbeat_call(
        &self,
        space: &SpaceName,
        k: SpaceKeys,
        now: Millis,
        beats: &[BeatArg<'_>],
        chunk: &[usize],
    ) -> Result<(Vec<usize>, Vec<Outcome>, SpaceKeys, Vec<String>)> {
        // Users first, then guests: the order of the script's ids and of
        // its outcomes.
        let (mut order, guests): (Vec<usize>, Vec<usize>) = chunk
            .iter()
            .copied()
            .partition(|&i| beats[i].0.kind == MemberKind::User);
        let users = order.len();
        order.extend(guests);
        let mut inv = scripts::HEARTBEAT.prepare_invoke();
        inv.key(&k.zu)
            .key(&k.zg)
            .key(&k.meta)
            .key(&k.state)
            .key(&k.config)
            .key(&k.ru)
            .key(&k.rg)
            .key(&k.unidx)
            .arg(now)
            .arg(&self.ctx.defaults_args()[..])
            .arg(self.ctx.publish_arg(space).as_ref())
            .arg(&k.channel)
            .arg(users)
            .arg(chunk.len() - users);
        for &i in &order {
            inv.arg(beats[i].0.id.as_str());
        }
        for (pos, &i) in order.iter().enumerate() {
            let (_, at, meta) = beats[i];
            if at != now || meta.is_some() {
                inv.arg(pos + 1)
                    .arg(at)
                    .arg(meta.map_or("", |m| m.as_json()));
            }
        }
        let v: Value = self.ctx.invoke("heartbeat", &inv).await?;
        let v = array(v)?;
        let captured = Captured::of(v.get(5));
        let (got, fresh) = outcomes_of(v, order.len())?;
        outbox::after(&self.ctx, space, &k, captured).await;
        Ok((order, got, k, fresh))
    }

    /// Runs the leave script. `upto`: remove the member only if its last
    /// heartbeat is at or before this time (`None`: whatever its time); it
    /// is also the leave's time, remembered as the member's last seen
    /// (`None`: `now`). Returns how many were present.
    pub async fn write_leaves(
        &self,
        space: &SpaceName,
        now: Millis,
        members: &[(&MemberKey, Option<Millis>)],
    ) -> Result<u64> {
        let groups = self
            .ctx
            .keys
            .by_shard(space, members.len(), |i| members[i].0);
        let calls = groups.iter().map(|(shard, idx)| {
            let k = self.ctx.keys.shard(space, *shard);
            let mut inv = scripts::LEAVE.prepare_invoke();
            inv.key(&k.zu)
                .key(&k.zg)
                .key(&k.meta)
                .key(&k.state)
                .key(&k.config)
                .key(&k.ru)
                .key(&k.rg)
                .arg(now)
                .arg(&self.ctx.defaults_args()[..])
                .arg(self.ctx.publish_arg(space).as_ref())
                .arg(&k.channel);
            for &i in idx {
                let (m, upto) = members[i];
                inv.arg(m.kind.letter())
                    .arg(m.id.as_str())
                    .arg(upto.map_or(String::new(), |t| t.to_string()));
            }
            async move {
                let v: Value = self.ctx.invoke("leave", &inv).await?;
                let v = array(v)?;
                outbox::after(&self.ctx, space, &k, Captured::of(v.get(1))).await;
                Ok::<_, Error>(int(v.first())? as u64)
            }
        });
        let left = futures::future::try_join_all(calls)
            .await?
            .into_iter()
            .sum();
        if self.ctx.waits_for_replicas() {
            let written: Vec<String> = groups
                .iter()
                .map(|(shard, _)| self.ctx.keys.shard(space, *shard).zu)
                .collect();
            self.ctx
                .replicated(written.iter().map(String::as_str))
                .await?;
        }
        Ok(left)
    }
}
