//! Reads of members and policy: status (and online among a list, which
//! friends use), counts, the space's policy, and the registry's list of
//! spaces. Each runs one script per shard, the shards at once, and sums or
//! merges their answers.

use redis::{AsyncCommands, Value};

use herenow_core::store::{check_batch, sort_most_recent_first};
use herenow_core::{
    Counts, Error, InvalidInput, MemberKey, MemberKind, MemberStatus, Metadata, Millis, Result,
    SpaceConfig, SpaceName, SpaceSummary, Status, limits,
};

use super::RedisStore;
use crate::reply::{array, config_of, int, meta_of, window_error};
use crate::scripts;

impl RedisStore {
    /// [`PresenceStore::status`](herenow_core::PresenceStore::status): one
    /// status script per shard that holds some of the members.
    pub(super) async fn status(
        &self,
        space: &SpaceName,
        members: &[MemberKey],
    ) -> Result<Vec<MemberStatus>> {
        check_batch(members.len())?;
        let now = self.ctx.clock.now_ms();
        Ok(self.status_with_config(space, members, now).await?.1)
    }

    /// [`PresenceStore::online_among`](herenow_core::PresenceStore::online_among):
    /// the statuses and the policy in one round trip, then filtered to the
    /// window here.
    pub(super) async fn online_among(
        &self,
        space: &SpaceName,
        members: &[MemberKey],
        window_ms: Option<Millis>,
        limit: usize,
    ) -> Result<Vec<MemberStatus>> {
        if members.is_empty() {
            let config = self.config(space).await?;
            config.check_window(window_ms)?;
            return Ok(Vec::new());
        }
        check_batch(members.len())?;
        let now = self.ctx.clock.now_ms();
        let (config, found) = self.lookup(space, members).await?;
        let window = config.check_window(window_ms)?;
        let cutoff = now.saturating_sub(window);
        // Members present (stored) in the window: a remembered time, however
        // recent, is not "online".
        let mut online: Vec<MemberStatus> = members
            .iter()
            .zip(found)
            .filter(|(_, f)| f.score.is_some_and(|t| t >= cutoff))
            .map(|(m, f)| f.status(m, &config, now))
            .collect();
        sort_most_recent_first(&mut online);
        online.dedup_by(|a, b| a.member == b.member);
        online.truncate(limit);
        Ok(online)
    }

    /// [`PresenceStore::count`](herenow_core::PresenceStore::count): the
    /// counts of every shard, summed.
    pub(super) async fn count(
        &self,
        space: &SpaceName,
        window_ms: Option<Millis>,
    ) -> Result<Counts> {
        if window_ms == Some(0) {
            return Err(self.zero_window(space).await);
        }
        let now = self.ctx.clock.now_ms();
        let shards = self.ctx.keys.all(space);
        let calls = shards.iter().map(|k| async move {
            let v: Value = self
                .ctx
                .invoke(
                    "count",
                    scripts::COUNT
                        .key(&k.zu)
                        .key(&k.zg)
                        .key(&k.config)
                        .arg(&self.ctx.defaults_args()[..])
                        .arg(now)
                        .arg(window_ms.unwrap_or(0)),
                )
                .await?;
            array(v)
        });
        let mut counts = Counts::default();
        for v in futures::future::try_join_all(calls).await? {
            if let Some(e) = window_error(&v, window_ms)? {
                return Err(e);
            }
            counts.users += int(v.first())? as u64;
            counts.guests += int(v.get(1))? as u64;
        }
        Ok(counts)
    }

    /// [`PresenceStore::config`](herenow_core::PresenceStore::config): shard
    /// 0's copy, or the defaults when the space has none.
    pub(super) async fn config(&self, space: &SpaceName) -> Result<SpaceConfig> {
        let k = self.ctx.keys.space(space);
        let mut c = self.ctx.client.clone();
        let v: Vec<Option<Millis>> = self
            .ctx
            .io("config", async {
                c.hmget(
                    &k.config,
                    &[
                        "online",
                        "away",
                        "window",
                        "retention",
                        "remember",
                        "rguests",
                        "grace",
                    ],
                )
                .await
            })
            .await?;
        let d = self.ctx.defaults();
        match v.as_slice() {
            [
                Some(online_ms),
                Some(away_ms),
                Some(window_ms),
                Some(retention_ms),
                remember_ms,
                remember_guests,
                grace_ms,
            ] => Ok(SpaceConfig {
                online_ms: *online_ms,
                away_ms: *away_ms,
                window_ms: *window_ms,
                retention_ms: *retention_ms,
                // A policy written before remembering existed has neither
                // field: the defaults remember for it (as the scripts do).
                remember_ms: remember_ms.unwrap_or(d.remember_ms),
                remember_guests: remember_guests.map_or(d.remember_guests, |g| g != 0),
                // Nor one written before the grace: the default grace.
                grace_ms: grace_ms.unwrap_or(d.grace_ms),
            }),
            _ => Ok(d),
        }
    }

    /// [`PresenceStore::set_config`](herenow_core::PresenceStore::set_config):
    /// every shard's copy, the shards at once.
    pub(super) async fn set_config(&self, space: &SpaceName, config: SpaceConfig) -> Result<()> {
        config.validate()?;
        let now = self.ctx.clock.now_ms();
        let shards = self.ctx.keys.all(space);
        let calls = shards.iter().map(|k| async move {
            self.ctx
                .invoke::<Value>(
                    "set_config",
                    scripts::SET_CONFIG
                        .key(&k.state)
                        .key(&k.config)
                        .arg(now)
                        .arg(config.online_ms)
                        .arg(config.away_ms)
                        .arg(config.window_ms)
                        .arg(config.retention_ms)
                        .arg(config.remember_ms)
                        .arg(u8::from(config.remember_guests))
                        .arg(config.grace_ms),
                )
                .await
        });
        futures::future::try_join_all(calls).await?;
        self.ctx
            .replicated(shards.iter().map(|k| k.config.as_str()))
            .await
    }

    /// [`PresenceStore::spaces`](herenow_core::PresenceStore::spaces): a
    /// page of the registry, each space's members counted over its shards.
    pub(super) async fn spaces(
        &self,
        after: Option<&SpaceName>,
        limit: usize,
    ) -> Result<Vec<SpaceSummary>> {
        let (names, _) = self.ctx.keys.registry();
        let start = after.map_or("-".to_owned(), |a| format!("({}", a.as_str()));
        // One call lists at most a batch; callers page with `after`.
        let limit = limit.min(limits::MAX_BATCH);
        if limit == 0 {
            return Ok(Vec::new());
        }
        let page = redis::Cmd::zrangebylex_limit(&names, &start, "+", 0, limit as isize);
        let found: Vec<String> = self.ctx.query("spaces", &page).await?;
        let spaces: Vec<SpaceName> = found
            .iter()
            .filter_map(|n| SpaceName::new(n).ok())
            .collect();
        let counts = futures::future::try_join_all(spaces.iter().map(|s| {
            let shards = self.ctx.keys.all(s);
            let mut c = self.ctx.client.clone();
            self.ctx.io("spaces", async move {
                let mut n = Counts::default();
                for k in &shards {
                    let users: u64 = c.zcard(&k.zu).await?;
                    let guests: u64 = c.zcard(&k.zg).await?;
                    n.users += users;
                    n.guests += guests;
                }
                Ok(n)
            })
        }))
        .await?;
        Ok(spaces
            .into_iter()
            .zip(counts)
            .map(|(space, members)| SpaceSummary { space, members })
            .collect())
    }

    /// The retention of a space, for the error of a zero window.
    pub(super) async fn zero_window(&self, space: &SpaceName) -> Error {
        match self.config(space).await {
            Ok(c) => InvalidInput::WindowOutOfRange {
                window_ms: 0,
                max_ms: c.retention_ms,
            }
            .into(),
            Err(e) => e,
        }
    }

    /// Last seen, status and metadata of `members`, and the space's policy.
    pub(super) async fn status_with_config(
        &self,
        space: &SpaceName,
        members: &[MemberKey],
        now: Millis,
    ) -> Result<(SpaceConfig, Vec<MemberStatus>)> {
        let (config, found) = self.lookup(space, members).await?;
        let out = members
            .iter()
            .zip(found)
            .map(|(m, f)| f.status(m, &config, now))
            .collect();
        Ok((config, out))
    }

    /// What the space stores of each of `members` (its last heartbeat and
    /// metadata, or its remembered time, unchecked against the horizon),
    /// and the space's policy: one status script per shard that has some
    /// of them, at once.
    pub(super) async fn lookup(
        &self,
        space: &SpaceName,
        members: &[MemberKey],
    ) -> Result<(SpaceConfig, Vec<Found>)> {
        let groups = self
            .ctx
            .keys
            .by_shard(space, members.len(), |i| &members[i]);
        let calls = groups.iter().map(|(shard, idx)| {
            let k = self.ctx.keys.shard(space, *shard);
            let mut inv = scripts::STATUS.prepare_invoke();
            inv.key(&k.zu)
                .key(&k.zg)
                .key(&k.meta)
                .key(&k.config)
                .key(&k.ru)
                .key(&k.rg)
                .arg(&self.ctx.defaults_args()[..]);
            for &i in idx {
                inv.arg(members[i].kind.letter())
                    .arg(members[i].id.as_str());
            }
            async move {
                let v: Value = self.ctx.invoke("status", &inv).await?;
                array(v)
            }
        });
        let replies = futures::future::try_join_all(calls).await?;
        let mut config = None;
        let mut found: Vec<Found> = vec![Found::default(); members.len()];
        for ((_, idx), v) in groups.iter().zip(replies) {
            // Every shard holds a copy of the policy.
            let c = config_of(&v)?;
            config.get_or_insert(c);
            let mut it = v.into_iter().skip(6);
            for &i in idx {
                found[i] = Found {
                    score: opt_millis(it.next())?,
                    meta: meta_of(it.next())?,
                    remembered: opt_millis(it.next())?,
                };
            }
        }
        let config = match config {
            Some(c) => c,
            None => self.config(space).await?,
        };
        Ok((config, found))
    }
}

/// What a space stores of one member ([`RedisStore::lookup`]).
#[derive(Clone, Debug, Default)]
pub(super) struct Found {
    /// Its last heartbeat, if it is stored (present, or past its away
    /// threshold but within the retention).
    pub score: Option<Millis>,
    /// Its metadata, if stored.
    pub meta: Option<Metadata>,
    /// Its remembered last seen, if not stored: possibly past the horizon
    /// already (the sweep forgets it in its own time).
    pub remembered: Option<Millis>,
}

impl Found {
    /// The remembered time, if the space's policy still remembers it now.
    pub fn remembered_now(
        &self,
        config: &SpaceConfig,
        kind: MemberKind,
        now: Millis,
    ) -> Option<Millis> {
        self.remembered
            .filter(|&t| config.remembers(kind) && config.still_remembered(t, now))
    }

    /// The member's status: by its last heartbeat if stored, else offline
    /// with the remembered time while it is remembered.
    pub fn status(self, member: &MemberKey, config: &SpaceConfig, now: Millis) -> MemberStatus {
        match self.score {
            Some(t) => MemberStatus {
                member: member.clone(),
                status: config.status(Some(t), now),
                last_seen_ms: Some(t),
                meta: self.meta,
            },
            None => MemberStatus {
                member: member.clone(),
                status: Status::Offline,
                last_seen_ms: self.remembered_now(config, member.kind, now),
                meta: None,
            },
        }
    }
}

/// A time in a script's reply, or `None` for nil and Lua's `false`.
fn opt_millis(v: Option<Value>) -> Result<Option<Millis>> {
    match v {
        None | Some(Value::Nil) | Some(Value::Boolean(false)) => Ok(None),
        Some(s) => Ok(Some(int(Some(&s))? as Millis)),
    }
}
