//! The in-memory store: the default, embedded engine.
//!
//! [`MemoryStore`] owns a map of [`Space`]s, each behind its own mutex, the
//! global friend sets, and a [`Clock`]. Every operation locks one space for
//! the time of a synchronous call; background work ([`PresenceStore::tick`])
//! takes a space in steps of [`TICK_BUDGET`] members so no heartbeat waits
//! behind a long sweep.
//!
//! A `parking_lot` mutex, not tokio's: no lock is ever held across an
//! `.await`, and the critical sections are microseconds long.

mod conns;
mod erase;
mod friends;
mod hooks;
mod outbox;
pub mod seen;
mod snapshot;
mod space;

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, OnceLock};
use std::time::Instant;

use async_trait::async_trait;
use parking_lot::{Mutex, RwLock};

pub use snapshot::RestoreReport;
pub use space::{INDEX_ABOVE, Retired, Space, TickWork};

use crate::changes::{Change, ChangeLog, ChangeRef, Durable};
use crate::conn::{Attach, AttachReport, ConnId, Connection, DetachReport};
use crate::error::{InvalidInput, Result};
use crate::event::Subscription;
use crate::follow::{FollowTap, UserChange, UserFeed};
use crate::id::{MemberId, MemberKey, SpaceName};
use crate::limits;
use crate::outbox::{OutboxEvent, OutboxOptions, OutboxStats, SpaceHook};
use crate::policy::SpaceConfig;
use crate::store::{
    Counts, ErasureReport, Heartbeat, HeartbeatReport, ListQuery, MemberStatus, Order, Page,
    PresenceStore, SeenAnywhere, SpaceSummary, TickReport, check_batch,
};
use crate::time::{Clock, Millis, SystemClock};
use friends::{add_friends, remove_friends, set_friends};

/// Members one space may be held for in one step of background work:
/// about a millisecond's worth.
pub const TICK_BUDGET: usize = 2_048;

/// Slices of [`TICK_BUDGET`] slots of the `Seen` table swept per round.
const SWEEP_SLICES: usize = 16;

type SpaceMap = HashMap<SpaceName, Arc<Mutex<Space>>, foldhash::fast::RandomState>;
type FriendMap = HashMap<MemberId, BTreeSet<MemberId>>;

/// The embedded presence store. Cheap to share: use it as
/// `Arc<dyn PresenceStore>`.
pub struct MemoryStore {
    clock: Arc<dyn Clock>,
    defaults: SpaceConfig,
    spaces: RwLock<SpaceMap>,
    friends: RwLock<FriendMap>,
    /// Where changes are journaled, once the server has replayed the
    /// journal (see [`crate::changes`]). A `OnceLock`: the hot path reads
    /// it without a lock.
    log: OnceLock<Arc<dyn ChangeLog>>,
    /// Where members were seen across spaces: remembered last-seen times
    /// and users' present spaces.
    seen: seen::Seen,
    /// Erasures run one at a time (each locks several spaces).
    erasing: Mutex<()>,
    /// The users this store's watchers follow ([`crate::follow`]).
    follow: Arc<FollowTap>,
    /// The webhook outbox ([`crate::outbox`]), capturing once opened.
    outbox: outbox::Outbox,
    /// The webhook endpoints spaces name.
    hooks: hooks::Hooks,
}

impl Default for MemoryStore {
    fn default() -> Self {
        Self::new(Arc::new(SystemClock), SpaceConfig::default())
    }
}

impl MemoryStore {
    /// A store reading time from `clock`, giving new spaces `defaults`.
    pub fn new(clock: Arc<dyn Clock>, defaults: SpaceConfig) -> Self {
        Self {
            clock,
            defaults,
            spaces: RwLock::new(SpaceMap::default()),
            friends: RwLock::new(HashMap::new()),
            log: OnceLock::new(),
            seen: seen::Seen::default(),
            erasing: Mutex::new(()),
            follow: Arc::default(),
            outbox: outbox::Outbox::default(),
            hooks: hooks::Hooks::default(),
        }
    }

    /// From now on, records every change in `log` and acknowledges a write
    /// only once it is as durable as [`ChangeRef::durability`] says. Set it
    /// after replaying the journal with [`apply_change`](Self::apply_change),
    /// so replayed changes are not journaled again. Only the first call
    /// takes effect; later ones return `false`.
    pub fn set_change_log(&self, log: Arc<dyn ChangeLog>) -> bool {
        self.log.set(log).is_ok()
    }

    /// Applies a journaled change, as at start before serving. Replaying a
    /// journal suffix over a snapshot that already holds part of it gives
    /// the state the store had (see [`crate::changes`]).
    pub fn apply_change(&self, change: &Change) -> Result<()> {
        match change {
            Change::Heartbeats { space, now, beats } => {
                // As at restore: each beat at its own time (its record's
                // for a beat "now"), at most the store's clock, judged by
                // that clock. A record's "now" (any u64) as the store's
                // overflowed, and spread a space's block index over years.
                let clock = self.clock.now_ms();
                let beats: Vec<Heartbeat> = beats
                    .iter()
                    .map(|b| Heartbeat {
                        member: b.member.clone(),
                        at_ms: Some(b.at_ms.unwrap_or(*now).min(clock)),
                        meta: b.meta.clone(),
                    })
                    .collect();
                self.write(space, |s| s.heartbeat(&beats, clock))?;
            }
            Change::Leave { space, at, members } => {
                if self.spaces.read().contains_key(space) {
                    self.write(space, |s| s.leave(members, *at))?;
                }
            }
            Change::SetConfig { space, config } => {
                config.validate()?;
                let now = self.clock.now_ms();
                self.write(space, |s| s.set_config(*config, now));
            }
            Change::SetFriends { user, friends } => {
                set_friends(&mut self.friends.write(), user, friends)?;
            }
            Change::AddFriends { user, friends } => {
                add_friends(&mut self.friends.write(), user, friends)?;
            }
            Change::RemoveFriends { user, friends } => {
                remove_friends(&mut self.friends.write(), user, friends);
            }
            Change::Erase { user } => {
                self.erase(user)?;
            }
            Change::OutboxAdd { events } => self.outbox.restore(events),
            Change::OutboxAck { ids } => self.outbox.restore_acks(ids),
            Change::SetHooks { space, hooks } => self.restore_hooks(space, hooks)?,
        }
        Ok(())
    }

    /// Journals `change` if a log is set. Called under the lock the change
    /// was applied under, so the journal's order is the order applied.
    /// The change borrows the call's arguments: nothing is cloned.
    fn record(&self, change: ChangeRef<'_>) -> Result<Option<Durable>> {
        match self.log.get() {
            None => Ok(None),
            Some(log) => log.record(change),
        }
    }

    /// Applies a friend write under the friend sets' lock, journals it
    /// there, and returns once it is durable: the one path of every friend
    /// write.
    async fn write_friends(
        &self,
        user: &MemberId,
        apply: impl FnOnce(&mut FriendMap) -> Result<u64>,
        change: ChangeRef<'_>,
    ) -> Result<u64> {
        let (n, durable) = {
            let mut all = self.friends.write();
            let n = apply(&mut all)?;
            (n, self.record(change)?)
        };
        self.follow.friends(user);
        settle(durable).await?;
        Ok(n)
    }

    /// The policy new spaces get.
    pub fn defaults(&self) -> SpaceConfig {
        self.defaults
    }

    /// Runs `f` on the space if it exists. The map's read lock is held
    /// throughout, so background work cannot drop the space meanwhile.
    fn read<T>(&self, name: &SpaceName, f: impl FnOnce(Option<&Space>) -> T) -> T {
        let spaces = self.spaces.read();
        match spaces.get(name) {
            Some(space) => f(Some(&space.lock())),
            None => f(None),
        }
    }

    /// Runs `f` on the space, creating it first if needed.
    fn write<T>(&self, name: &SpaceName, f: impl FnOnce(&mut Space) -> T) -> T {
        {
            let spaces = self.spaces.read();
            if let Some(space) = spaces.get(name) {
                let mut guard = space.lock();
                let out = f(&mut guard);
                self.absorb(&mut guard);
                return out;
            }
        }
        let mut spaces = self.spaces.write();
        let now = self.clock.now_ms();
        let space = spaces
            .entry(name.clone())
            .or_insert_with(|| Arc::new(Mutex::new(self.new_space(name.clone(), now))))
            .clone();
        let mut guard = space.lock();
        let out = f(&mut guard);
        self.absorb(&mut guard);
        out
    }

    /// A new space with the defaults, registered in the `Seen` table.
    fn new_space(&self, name: SpaceName, now: Millis) -> Space {
        let mut space = Space::new(name, self.defaults, now);
        space.set_follow_tap(self.follow.clone());
        space.set_outbox_flag(self.outbox.capturing.clone());
        space.set_seen_id(self.seen.register(space.name(), &self.defaults));
        space
    }

    /// Hands what `space` noted about its members to the `Seen` table,
    /// then its followed users' status changes to the follow tap, then
    /// its events to the outbox (journaled), under the space's lock: a
    /// watcher that reads a user on its change (as `seen_anywhere` does)
    /// finds the table already up to date.
    fn absorb(&self, space: &mut Space) {
        let notes = space.take_sightings();
        if let Some(id) = space.seen_id() {
            self.seen.absorb(id, &space.config(), notes);
        }
        self.tell_followers(space);
        self.to_outbox(space);
    }

    /// Moves `space`'s captured events into the outbox and journals them.
    fn to_outbox(&self, space: &mut Space) {
        let captured = space.take_outboxed();
        if captured.is_empty() {
            return;
        }
        let now = self.clock.now_ms();
        self.outbox.add(space.name(), captured, now, |events| {
            // Lazy, like the change that caused them: an error here is
            // the journal's failure, which that change reported.
            let _ = self.record(ChangeRef::OutboxAdd { events });
        });
    }

    /// Sends `space`'s followed users' status changes to the feed.
    fn tell_followers(&self, space: &mut Space) {
        for event in space.take_followed() {
            self.follow.send(UserChange::Presence(event));
        }
    }

    /// The remembered last-seen time of each absent member of `statuses`.
    fn fill_remembered(&self, space: &Space, statuses: &mut [MemberStatus], now: Millis) {
        let Some(id) = space.seen_id() else {
            return;
        };
        let config = space.config();
        for st in statuses.iter_mut().filter(|st| st.last_seen_ms.is_none()) {
            st.last_seen_ms =
                self.seen
                    .remembered(id, &config, st.member.kind, st.member.id.as_str(), now);
        }
    }

    /// Bytes of heap held by all spaces (an estimate).
    pub fn heap_bytes(&self) -> usize {
        self.spaces
            .read()
            .values()
            .map(|s| s.lock().heap_bytes())
            .sum()
    }

    /// Entries of the `Seen` table (remembered times, and users' present
    /// spaces) and the bytes of heap it holds.
    pub fn seen_usage(&self) -> (usize, usize) {
        self.seen.usage()
    }

    /// Members stored per space, for metrics.
    pub fn space_sizes(&self) -> Vec<(SpaceName, Counts)> {
        self.spaces
            .read()
            .iter()
            .map(|(n, s)| (n.clone(), s.lock().totals()))
            .collect()
    }
}

#[async_trait]
impl PresenceStore for MemoryStore {
    fn name(&self) -> &'static str {
        "memory"
    }

    fn now_ms(&self) -> Millis {
        self.clock.now_ms()
    }

    async fn heartbeat(&self, space: &SpaceName, beats: &[Heartbeat]) -> Result<HeartbeatReport> {
        check_batch(beats.len())?;
        let now = self.clock.now_ms();
        let (report, durable) = self.write(space, |s| -> Result<_> {
            let report = s.heartbeat(beats, now)?;
            if report.accepted == 0 {
                return Ok((report, None));
            }
            let durable = self.record(ChangeRef::Heartbeats { space, now, beats })?;
            Ok((report, durable))
        })?;
        settle(durable).await?;
        Ok(report)
    }

    async fn leave(&self, space: &SpaceName, members: &[MemberKey]) -> Result<u64> {
        check_batch(members.len())?;
        // A leave to an unknown space creates nothing.
        if !self.spaces.read().contains_key(space) {
            return Ok(0);
        }
        let now = self.clock.now_ms();
        let (left, durable) = self.write(space, |s| -> Result<_> {
            let left = s.leave(members, now)?;
            let durable = self.record(ChangeRef::Leave {
                space,
                at: now,
                members,
            })?;
            Ok((left, durable))
        })?;
        settle(durable).await?;
        Ok(left)
    }

    async fn status(&self, space: &SpaceName, members: &[MemberKey]) -> Result<Vec<MemberStatus>> {
        check_batch(members.len())?;
        let now = self.clock.now_ms();
        let defaults = self.defaults;
        Ok(self.read(space, |s| match s {
            Some(s) => {
                let mut statuses = s.status(members, now)?;
                self.fill_remembered(s, &mut statuses, now);
                Ok::<_, InvalidInput>(statuses)
            }
            None => {
                // Dropped when idle, its remembered times may live on.
                let detached = self.seen.detached(space);
                Ok(members
                    .iter()
                    .map(|m| MemberStatus {
                        member: m.clone(),
                        status: defaults.status(None, now),
                        last_seen_ms: detached.and_then(|(id, remember_ms, guests)| {
                            let config = SpaceConfig {
                                remember_ms,
                                remember_guests: guests,
                                ..defaults
                            };
                            self.seen
                                .remembered(id, &config, m.kind, m.id.as_str(), now)
                        }),
                        meta: None,
                    })
                    .collect())
            }
        })?)
    }

    async fn list(&self, space: &SpaceName, query: &ListQuery) -> Result<Page> {
        let now = self.clock.now_ms();
        let defaults = self.defaults;
        Ok(self.read(space, |s| match s {
            Some(s) => s.list(query, now),
            None => {
                query.check_limit()?;
                defaults.check_window(query.window_ms.unwrap_or(defaults.window_ms))?;
                // A cursor is checked whether or not the space exists, so
                // nonsense is refused alike everywhere.
                let order = query.order_or(Order::Recent);
                if let Some(c) = query.cursor.as_deref() {
                    crate::cursor::Cursor::decode(c, order)?;
                }
                Ok(Page {
                    members: Vec::new(),
                    next_cursor: None,
                    order,
                })
            }
        })?)
    }

    async fn count(&self, space: &SpaceName, window_ms: Option<Millis>) -> Result<Counts> {
        let now = self.clock.now_ms();
        let defaults = self.defaults;
        Ok(self.read(space, |s| match s {
            Some(s) => s.count(window_ms, now),
            None => {
                defaults.check_window(window_ms.unwrap_or(defaults.window_ms))?;
                Ok(Counts::default())
            }
        })?)
    }

    async fn config(&self, space: &SpaceName) -> Result<SpaceConfig> {
        Ok(self.read(space, |s| s.map_or(self.defaults, Space::config)))
    }

    async fn set_config(&self, space: &SpaceName, config: SpaceConfig) -> Result<()> {
        config.validate()?;
        let now = self.clock.now_ms();
        let durable = self.write(space, |s| {
            s.set_config(config, now);
            if let Some(id) = s.seen_id() {
                self.seen.set_policy(id, &config);
            }
            self.record(ChangeRef::SetConfig { space, config })
        })?;
        settle(durable).await?;
        Ok(())
    }

    async fn spaces(&self, after: Option<&SpaceName>, limit: usize) -> Result<Vec<SpaceSummary>> {
        let spaces = self.spaces.read();
        let mut names: Vec<&SpaceName> = spaces
            .keys()
            .filter(|n| after.is_none_or(|a| *n > a))
            .collect();
        names.sort_unstable();
        names.truncate(limit);
        Ok(names
            .into_iter()
            .map(|n| SpaceSummary {
                space: n.clone(),
                members: spaces[n].lock().totals(),
            })
            .collect())
    }

    async fn set_friends(&self, user: &MemberId, friends: &[MemberId]) -> Result<u64> {
        self.write_friends(
            user,
            |all| set_friends(all, user, friends),
            ChangeRef::SetFriends { user, friends },
        )
        .await
    }

    async fn add_friends(&self, user: &MemberId, friends: &[MemberId]) -> Result<u64> {
        check_batch(friends.len())?;
        self.write_friends(
            user,
            |all| add_friends(all, user, friends),
            ChangeRef::AddFriends { user, friends },
        )
        .await
    }

    async fn remove_friends(&self, user: &MemberId, friends: &[MemberId]) -> Result<u64> {
        check_batch(friends.len())?;
        self.write_friends(
            user,
            |all| Ok(remove_friends(all, user, friends)),
            ChangeRef::RemoveFriends { user, friends },
        )
        .await
    }

    async fn friends(&self, user: &MemberId) -> Result<Vec<MemberId>> {
        Ok(self
            .friends
            .read()
            .get(user)
            .map(|s| s.iter().cloned().collect())
            .unwrap_or_default())
    }

    async fn online_among(
        &self,
        space: &SpaceName,
        members: &[MemberKey],
        window_ms: Option<Millis>,
        limit: usize,
    ) -> Result<Vec<MemberStatus>> {
        check_batch(members.len())?;
        let now = self.clock.now_ms();
        let defaults = self.defaults;
        Ok(self.read(space, |s| match s {
            Some(s) => s.online_among(members, window_ms, limit, now),
            None => {
                defaults.check_window(window_ms.unwrap_or(defaults.window_ms))?;
                Ok(Vec::new())
            }
        })?)
    }

    async fn online_friends(
        &self,
        space: &SpaceName,
        user: &MemberId,
        window_ms: Option<Millis>,
        limit: usize,
    ) -> Result<Vec<MemberStatus>> {
        let friends: Vec<MemberKey> = self
            .friends
            .read()
            .get(user)
            .map(|s| s.iter().cloned().map(MemberKey::user).collect())
            .unwrap_or_default();
        let now = self.clock.now_ms();
        Ok(self.read(space, |s| match s {
            Some(s) => s.online_among(&friends, window_ms, limit, now),
            None => {
                defaults_window_check(self.defaults, window_ms)?;
                Ok(Vec::new())
            }
        })?)
    }

    async fn seen_anywhere(&self, users: &[MemberId]) -> Result<Vec<SeenAnywhere>> {
        check_batch(users.len())?;
        let now = self.clock.now_ms();
        let mut out = Vec::with_capacity(users.len());
        for user in users {
            let mut seen = SeenAnywhere::unseen(user.clone());
            for found in self.seen.of_user(user.as_str(), now) {
                if found.present {
                    let key = [MemberKey::user(user.clone())];
                    let here = self.read(&found.space, |s| {
                        let s = s?;
                        let mut v = s.status(&key, now).ok()?;
                        // Gone since `of_user` (a leave between the two
                        // reads): its leave handed the remembered time
                        // over under this lock, so it is there to answer.
                        self.fill_remembered(s, &mut v, now);
                        v.pop()
                    });
                    if let Some(st) = here {
                        seen.merge(&found.space, st.status, st.last_seen_ms);
                    }
                } else {
                    seen.merge(&found.space, crate::policy::Status::Offline, Some(found.ms));
                }
            }
            out.push(seen);
        }
        Ok(out)
    }

    fn user_feed(&self) -> Result<UserFeed> {
        Ok(self.follow.feed())
    }

    async fn follow(&self, users: &[MemberId]) -> Result<()> {
        check_batch(users.len())?;
        self.follow.follow(users);
        Ok(())
    }

    async fn unfollow(&self, users: &[MemberId]) -> Result<()> {
        check_batch(users.len())?;
        self.follow.unfollow(users);
        Ok(())
    }

    async fn outbox_open(&self, options: OutboxOptions) -> Result<()> {
        self.outbox.open(options);
        Ok(())
    }

    async fn outbox_claim(
        &self,
        consumer: &str,
        max: usize,
        reclaim_idle_ms: Millis,
    ) -> Result<Vec<OutboxEvent>> {
        if consumer.is_empty() || consumer.len() > limits::MAX_OUTBOX_CONSUMER_BYTES {
            return Err(InvalidInput::BadConfig {
                why: "an outbox consumer's name must be 1 to 200 bytes",
            }
            .into());
        }
        let max = max.min(limits::MAX_BATCH);
        let now = self.clock.now_ms();
        Ok(self.outbox.claim(consumer, max, reclaim_idle_ms, now))
    }

    async fn outbox_ack(&self, ids: &[String]) -> Result<()> {
        check_batch(ids.len())?;
        self.outbox.ack(ids, |ids| {
            let _ = self.record(ChangeRef::OutboxAck { ids });
        });
        Ok(())
    }

    async fn outbox_stats(&self) -> Result<OutboxStats> {
        Ok(self.outbox.stats())
    }

    async fn space_hooks(&self, space: &SpaceName) -> Result<Vec<SpaceHook>> {
        Ok(self.hooks.get(space))
    }

    async fn set_space_hooks(&self, space: &SpaceName, hooks: &[SpaceHook]) -> Result<()> {
        self.put_hooks(space, hooks).await
    }

    async fn space_hooks_version(&self) -> Result<u64> {
        Ok(self.hooks.version())
    }

    async fn erase_user(&self, user: &MemberId) -> Result<ErasureReport> {
        let (report, durable) = self.erase(user)?;
        settle(durable).await?;
        Ok(report)
    }

    async fn attach(&self, space: &SpaceName, attach: &Attach) -> Result<AttachReport> {
        attach.check()?;
        let now = self.clock.now_ms();
        Ok(self.write(space, |s| s.attach(attach, now))?)
    }

    async fn detach(
        &self,
        space: &SpaceName,
        member: &MemberKey,
        conn: &ConnId,
    ) -> Result<DetachReport> {
        // A detach from an unknown space creates nothing.
        let spaces = self.spaces.read();
        Ok(match spaces.get(space) {
            Some(s) => {
                let mut s = s.lock();
                let report = s.detach(member, conn, self.clock.now_ms());
                self.absorb(&mut s);
                report
            }
            None => DetachReport::default(),
        })
    }

    async fn connections(
        &self,
        space: &SpaceName,
        members: &[MemberKey],
    ) -> Result<Vec<Vec<Connection>>> {
        check_batch(members.len())?;
        Ok(self.read(space, |s| match s {
            Some(s) => s.connections(members),
            None => Ok(vec![Vec::new(); members.len()]),
        })?)
    }

    async fn subscribe(&self, space: &SpaceName) -> Result<Subscription> {
        let now = self.clock.now_ms();
        Ok(self.write(space, |s| s.subscribe(now)))
    }

    async fn tick(&self) -> Result<TickReport> {
        let mut report = TickReport::default();
        let all: Vec<Arc<Mutex<Space>>> = self.spaces.read().values().cloned().collect();
        let mut empty = Vec::new();
        for space in all {
            loop {
                let now = self.clock.now_ms();
                let started = Instant::now();
                let mut s = space.lock();
                let work = s.tick(now, TICK_BUDGET);
                self.absorb(&mut s);
                let idle = s.is_empty()
                    && s.connection_count() == 0
                    && s.subscribers() == 0
                    && s.config() == self.defaults;
                let name = s.name().clone();
                let retired = s.take_retired();
                drop(s);
                // Freed after the lock: a big slab takes milliseconds.
                drop(retired);
                let held = started.elapsed().as_micros() as u64;
                report.max_hold_us = report.max_hold_us.max(held);
                report.expired += work.expired;
                report.transitions += work.transitions;
                report.connections_expired += work.connections_expired;
                if !work.more {
                    if idle {
                        empty.push(name);
                    }
                    break;
                }
            }
        }
        // Remembered times past their horizon, a few slices at a time.
        let now = self.clock.now_ms();
        let (forgotten, held_us) = self.seen.sweep(now, SWEEP_SLICES, TICK_BUDGET);
        report.forgotten += forgotten;
        report.max_hold_us = report.max_hold_us.max(held_us);
        if !empty.is_empty() {
            let mut spaces = self.spaces.write();
            for name in empty {
                // Check again under the write lock: a heartbeat or a
                // subscriber may have arrived since.
                let still_idle = spaces.get(&name).and_then(|s| {
                    let s = s.lock();
                    let idle = s.is_empty()
                        && s.connection_count() == 0
                        && s.subscribers() == 0
                        && s.config() == self.defaults;
                    idle.then(|| s.seen_id())
                });
                if let Some(seen_id) = still_idle {
                    spaces.remove(&name);
                    if let Some(id) = seen_id {
                        self.seen.unregister(id);
                    }
                    report.spaces_dropped += 1;
                }
            }
        }
        Ok(report)
    }
}

/// Waits until a journaled change is as durable as it must be (at once
/// when the store journals nothing).
async fn settle(durable: Option<Durable>) -> Result<()> {
    match durable {
        Some(d) => d.await,
        None => Ok(()),
    }
}

fn defaults_window_check(
    defaults: SpaceConfig,
    window_ms: Option<Millis>,
) -> Result<(), InvalidInput> {
    defaults
        .check_window(window_ms.unwrap_or(defaults.window_ms))
        .map(|_| ())
}

#[cfg(test)]
mod journaled;
#[cfg(test)]
mod tests;
