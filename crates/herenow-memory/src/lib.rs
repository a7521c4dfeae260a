//! herenow-memory: the in-memory store, herenow's default, embedded
//! engine.
//!
//! [`MemoryStore`] implements herenow-core's [`PresenceStore`] and every
//! capability trait, in one process, with snapshots to bytes and a journal
//! of its changes (the server writes both to disk; this crate does no
//! I/O). It owns a map of [`Space`]s, each behind its own mutex (or split
//! over stripes, each with its own), the global friend sets, and a
//! [`Clock`]. Every operation locks one space for the time of a
//! synchronous call; background work ([`PresenceStore::tick`]) takes a
//! space in steps of [`TICK_BUDGET`] members so no heartbeat waits behind
//! a long sweep.
//!
//! A `parking_lot` mutex, not tokio's: no lock is ever held across an
//! `.await`, and the critical sections are microseconds long.
//!
//! The modules:
//!
//! - this file: [`MemoryStore`], its one [`PresenceStore`] impl and its
//!   capability impls, mostly thin calls into the modules below;
//! - `space`: one space (or one stripe of one), a synchronous, clock-free
//!   data structure: its slab of members, block index, reads, writes,
//!   events, connections and background sweep;
//! - `stripes` and `occupancy`: a busy space split over stripes
//!   ([`MAX_STRIPES`], [`default_space_stripes`]), and its `occupied` /
//!   `vacated` across them;
//! - `shared`: what every write of a space hands its results to (clock,
//!   journal, the `Seen` table, the follow tap, the outbox);
//! - [`seen`]: where members were seen across spaces (remembered last-seen
//!   times, users' present spaces);
//! - `beats`, `live` and `conns`: heartbeats and leaves, and live
//!   connections;
//! - `friends` and `erase`: friend sets, and erasing a user everywhere;
//! - `outbox` and `hooks`: the webhook outbox and the endpoints spaces
//!   name;
//! - `relay`: relayed messages, within the one process;
//! - `snapshot`: the store as bytes and back ([`RestoreReport`]);
//! - [`changes`]: what the store tells its journal, and `replay`, which
//!   applies a journaled change back ([`MemoryStore::apply_change`]);
//! - `legacy`: core's values as older snapshots and journals wrote them.
//!
//! This file is long on purpose: one table of entry points.

// One exception, scoped and explained where it is: the prefetch hint in
// `space/index.rs`.
#![deny(unsafe_code)]

mod beats;
pub mod changes;
mod conns;
mod erase;
mod friends;
mod hooks;
mod legacy;
mod live;
mod occupancy;
mod outbox;
mod relay;
mod replay;
pub mod seen;
mod shared;
mod snapshot;
mod space;
mod stripes;

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Instant;

use async_trait::async_trait;
use parking_lot::{Mutex, RwLock, RwLockWriteGuard};

use herenow_core::capability::{
    Following, LiveConnections, Relay, SpaceWebhooks, UserIndex, WebhookOutbox,
};
use herenow_core::error::{InvalidInput, Result};
use herenow_core::event::Subscription;
use herenow_core::follow::UserFeed;
use herenow_core::id::{MemberId, MemberKey, SpaceName};
use herenow_core::outbox::{OutboxEvent, OutboxOptions, OutboxStats, SpaceHook};
use herenow_core::policy::SpaceConfig;
use herenow_core::store::{
    Counts, ErasureReport, Heartbeat, HeartbeatReport, ListQuery, MemberStatus, Order, Page,
    PresenceStore, SeenAnywhere, SpaceSummary, TickReport, check_batch,
};
use herenow_core::time::{Clock, Millis, SystemClock};

pub use snapshot::RestoreReport;
pub use space::{INDEX_ABOVE, Retired, Space, TickWork};
pub use stripes::{MAX_STRIPES, default_space_stripes};

use self::shared::Shared;
use self::stripes::{Locked, Stripes};
use crate::changes::{ChangeLog, ChangeRef, Durable};
use friends::{add_friends, remove_friends, set_friends};

/// Members one space may be held for in one step of background work:
/// about a millisecond's worth.
pub const TICK_BUDGET: usize = 2_048;

/// Slices of [`TICK_BUDGET`] slots of the `Seen` table swept per round.
const SWEEP_SLICES: usize = 16;

type SpaceMap = HashMap<SpaceName, Arc<Stripes>, foldhash::fast::RandomState>;
type FriendMap = HashMap<MemberId, BTreeSet<MemberId>>;

/// The embedded presence store. Cheap to share: use it as
/// `Arc<dyn PresenceStore>`.
pub struct MemoryStore {
    shared: Shared,
    /// The policy of spaces never configured; changed by
    /// [`set_defaults`](Self::set_defaults).
    defaults: RwLock<SpaceConfig>,
    /// The stripes each new space is split over (`stripes.rs`).
    stripes: usize,
    spaces: RwLock<SpaceMap>,
    friends: RwLock<FriendMap>,
    /// Erasures run one at a time (each locks several spaces).
    erasing: Mutex<()>,
    hooks: hooks::Hooks,
    relay: herenow_core::relay::RelayTap,
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
            shared: Shared::new(clock),
            defaults: RwLock::new(defaults),
            stripes: 1,
            spaces: RwLock::new(SpaceMap::default()),
            friends: RwLock::new(HashMap::new()),
            erasing: Mutex::new(()),
            hooks: hooks::Hooks::default(),
            relay: herenow_core::relay::RelayTap::default(),
        }
    }

    /// Splits every space created from now on over `stripes` stripes (1
    /// to [`MAX_STRIPES`]; 1, the default, keeps spaces whole), so that
    /// several threads can write one busy space at once. See
    /// ARCHITECTURE.md, "A busy space written from many threads": reads
    /// lock and merge every stripe, so a striped space answers exactly as
    /// a whole one.
    pub fn with_space_stripes(mut self, stripes: usize) -> Self {
        self.stripes = stripes.clamp(1, MAX_STRIPES);
        self
    }

    /// The stripes new spaces are split over.
    pub fn space_stripes(&self) -> usize {
        self.stripes
    }

    /// From now on, records every change in `log` and acknowledges a write
    /// only once it is as durable as [`ChangeRef::durability`] says. Set it
    /// after replaying the journal with [`apply_change`](Self::apply_change),
    /// so replayed changes are not journaled again. Only the first call
    /// takes effect; later ones return `false`.
    pub fn set_change_log(&self, log: Arc<dyn ChangeLog>) -> bool {
        self.shared.log.set(log).is_ok()
    }

    /// Gives a locked space `config`: its stripes, and the remembering
    /// policy its entries in the `Seen` table follow (a write, new
    /// defaults and a replay from the journal all come here).
    fn configure(&self, all: &mut Locked<'_>, config: SpaceConfig, now: Millis) {
        for s in all.stripes_mut() {
            s.set_config(config, now);
            self.shared.absorb(s);
        }
        if let Some(id) = all.first().seen_id() {
            self.shared.seen.set_policy(id, &config);
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
            (n, self.shared.record(change)?)
        };
        self.shared.follow.friends(user);
        settle(durable).await?;
        Ok(n)
    }

    /// The policy new spaces get.
    pub fn defaults(&self) -> SpaceConfig {
        *self.defaults.read()
    }

    /// Gives spaces never configured `defaults` from now on (a server's
    /// settings reloaded): new spaces get them, and so does every space
    /// whose policy is the old defaults, which the store cannot tell from
    /// one never configured (the rule that drops an idle space, too). Not
    /// journaled: defaults are the server's settings, which a restart
    /// reads again. How many spaces took them.
    pub fn set_defaults(&self, defaults: SpaceConfig) -> Result<usize> {
        defaults.validate()?;
        // Under the map's write lock, so no space is created meanwhile
        // with the old defaults and missed below.
        let spaces = self.spaces.write();
        let old = std::mem::replace(&mut *self.defaults.write(), defaults);
        if old == defaults {
            return Ok(0);
        }
        let spaces = RwLockWriteGuard::downgrade(spaces);
        let now = self.shared.clock.now_ms();
        let mut changed = 0;
        for space in spaces.values() {
            let mut all = space.lock_all();
            if all.first().config() != old {
                continue;
            }
            self.configure(&mut all, defaults, now);
            changed += 1;
        }
        Ok(changed)
    }

    /// Runs `f` on the space, every stripe locked, if it exists. The map's
    /// read lock is held throughout, so background work cannot drop the
    /// space meanwhile.
    fn read<T>(&self, name: &SpaceName, f: impl FnOnce(Option<&Locked<'_>>) -> T) -> T {
        let spaces = self.spaces.read();
        let locked = spaces.get(name).map(|space| space.lock_all());
        f(locked.as_ref())
    }

    /// Runs `f` on the space's stripes, creating the space first if
    /// needed, with the map's read lock held (as [`Self::read`]).
    fn with_space<T>(&self, name: &SpaceName, f: impl FnOnce(&Stripes) -> T) -> T {
        {
            let spaces = self.spaces.read();
            if let Some(space) = spaces.get(name) {
                return f(space);
            }
        }
        let mut spaces = self.spaces.write();
        if !spaces.contains_key(name) {
            let now = self.shared.clock.now_ms();
            let space = self.new_space(name, now);
            spaces.insert(name.clone(), Arc::new(space));
        }
        let spaces = RwLockWriteGuard::downgrade(spaces);
        f(&spaces[name])
    }

    /// A new space with the defaults, split over the store's stripes and
    /// registered in the `Seen` table.
    fn new_space(&self, name: &SpaceName, now: Millis) -> Stripes {
        let defaults = self.defaults();
        let seen_id = self.shared.seen.register(name, &defaults);
        Stripes::new(stripes::make(name, defaults, now, self.stripes, |s| {
            self.tap(s, seen_id)
        }))
    }

    /// Taps a space (a stripe) into the store: its followed users, the
    /// outbox's capture switch, and its id in the `Seen` table.
    fn tap(&self, space: &mut Space, seen_id: Option<u32>) {
        space.set_follow_tap(self.shared.follow.clone());
        space.set_outbox_flag(self.shared.outbox.capturing.clone());
        space.set_seen_id(seen_id);
    }

    /// The remembered last-seen time of each absent member of `statuses`.
    fn fill_remembered(&self, space: &Space, statuses: &mut [MemberStatus], now: Millis) {
        let Some(id) = space.seen_id() else {
            return;
        };
        let config = space.config();
        for st in statuses.iter_mut().filter(|st| st.last_seen_ms.is_none()) {
            st.last_seen_ms = self.shared.seen.remembered(
                id,
                &config,
                st.member.kind,
                st.member.id.as_str(),
                now,
            );
        }
    }

    /// Bytes of heap held by all spaces (an estimate).
    pub fn heap_bytes(&self) -> usize {
        self.spaces
            .read()
            .values()
            .map(|s| s.lock_all().heap_bytes())
            .sum()
    }

    /// Entries of the `Seen` table (remembered times, and users' present
    /// spaces) and the bytes of heap it holds.
    pub fn seen_usage(&self) -> (usize, usize) {
        self.shared.seen.usage()
    }
}

#[async_trait]
impl PresenceStore for MemoryStore {
    fn name(&self) -> &'static str {
        "memory"
    }

    fn now_ms(&self) -> Millis {
        self.shared.clock.now_ms()
    }

    async fn heartbeat(&self, space: &SpaceName, beats: &[Heartbeat]) -> Result<HeartbeatReport> {
        self.beat(space, beats).await
    }

    async fn leave(&self, space: &SpaceName, members: &[MemberKey]) -> Result<u64> {
        self.leave_now(space, members).await
    }

    async fn status(&self, space: &SpaceName, members: &[MemberKey]) -> Result<Vec<MemberStatus>> {
        check_batch(members.len())?;
        let now = self.shared.clock.now_ms();
        let defaults = self.defaults();
        Ok(self.read(space, |s| match s {
            Some(s) => {
                let mut statuses = s.status(members, now)?;
                self.fill_remembered(s.first(), &mut statuses, now);
                Ok::<_, InvalidInput>(statuses)
            }
            None => {
                // Dropped when idle, its remembered times may live on.
                let detached = self.shared.seen.detached(space);
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
                            self.shared
                                .seen
                                .remembered(id, &config, m.kind, m.id.as_str(), now)
                        }),
                        meta: None,
                    })
                    .collect())
            }
        })?)
    }

    async fn list(&self, space: &SpaceName, query: &ListQuery) -> Result<Page> {
        let now = self.shared.clock.now_ms();
        let defaults = self.defaults();
        Ok(self.read(space, |s| match s {
            Some(s) => s.list(query, now),
            None => {
                query.check_limit()?;
                defaults.check_window(query.window_ms)?;
                // A cursor is checked whether or not the space exists, so
                // nonsense is refused alike everywhere.
                let order = query.order_or(Order::Recent);
                if let Some(c) = query.cursor.as_deref() {
                    herenow_core::cursor::Cursor::decode(c, order)?;
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
        let now = self.shared.clock.now_ms();
        let defaults = self.defaults();
        Ok(self.read(space, |s| match s {
            Some(s) => s.count(window_ms, now),
            None => {
                defaults.check_window(window_ms)?;
                Ok(Counts::default())
            }
        })?)
    }

    async fn config(&self, space: &SpaceName) -> Result<SpaceConfig> {
        Ok(self.read(space, |s| s.map_or(self.defaults(), |s| s.first().config())))
    }

    async fn set_config(&self, space: &SpaceName, config: SpaceConfig) -> Result<()> {
        config.validate()?;
        let now = self.shared.clock.now_ms();
        let durable = self.with_space(space, |st| {
            self.configure(&mut st.lock_all(), config, now);
            self.shared.record(ChangeRef::SetConfig { space, config })
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
        names.truncate(limit.min(herenow_core::limits::MAX_BATCH));
        Ok(names
            .into_iter()
            .map(|n| SpaceSummary {
                space: n.clone(),
                members: spaces[n].lock_all().totals(),
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
        // As the trait's default: an empty list is not a bad batch.
        if !members.is_empty() {
            check_batch(members.len())?;
        }
        let now = self.shared.clock.now_ms();
        let defaults = self.defaults();
        Ok(self.read(space, |s| match s {
            Some(s) => s.online_among(members, window_ms, limit, now),
            None => {
                defaults.check_window(window_ms)?;
                Ok(Vec::new())
            }
        })?)
    }

    async fn subscribe(&self, space: &SpaceName) -> Result<Subscription> {
        let now = self.shared.clock.now_ms();
        Ok(self.with_space(space, |st| st.lock_all().subscribe(now)))
    }

    async fn tick(&self) -> Result<TickReport> {
        let mut report = TickReport::default();
        let defaults = self.defaults();
        let all: Vec<Arc<Stripes>> = self.spaces.read().values().cloned().collect();
        let mut empty = Vec::new();
        for space in all {
            // Idle if every stripe is, each judged under the lock of its
            // last step.
            let mut idle = true;
            for k in 0..space.len() {
                loop {
                    let now = self.shared.clock.now_ms();
                    let started = Instant::now();
                    let mut s = space.cell(k).lock();
                    let work = s.tick(now, TICK_BUDGET);
                    self.shared.absorb(&mut s);
                    if !work.more {
                        idle &= s.is_empty()
                            && s.connection_count() == 0
                            && s.subscribers() == 0
                            && s.config() == defaults;
                    }
                    let retired = s.take_retired();
                    drop(s);
                    // Freed after the lock: see `Space::take_retired`.
                    drop(retired);
                    let held = started.elapsed().as_micros() as u64;
                    report.max_hold_us = report.max_hold_us.max(held);
                    report.expired += work.expired;
                    report.transitions += work.transitions;
                    report.connections_expired += work.connections_expired;
                    if !work.more {
                        break;
                    }
                }
            }
            if idle {
                empty.push(space.cell(0).lock().name().clone());
            }
        }
        // Remembered times past their horizon, a few slices at a time.
        let now = self.shared.clock.now_ms();
        let (forgotten, held_us) = self.shared.seen.sweep(now, SWEEP_SLICES, TICK_BUDGET);
        report.forgotten += forgotten;
        report.max_hold_us = report.max_hold_us.max(held_us);
        if !empty.is_empty() {
            let mut spaces = self.spaces.write();
            for name in empty {
                // Check again under the write lock: a heartbeat or a
                // subscriber may have arrived since.
                let still_idle = spaces.get(&name).and_then(|cell| {
                    let s = cell.lock_all();
                    s.is_idle(self.defaults()).then(|| s.first().seen_id())
                });
                if let Some(seen_id) = still_idle {
                    spaces.remove(&name);
                    if let Some(id) = seen_id {
                        self.shared.seen.unregister(id);
                    }
                    report.spaces_dropped += 1;
                }
            }
        }
        Ok(report)
    }

    fn live_connections(&self) -> Option<&dyn LiveConnections> {
        Some(self)
    }

    fn following(&self) -> Option<&dyn Following> {
        Some(self)
    }

    fn webhook_outbox(&self) -> Option<&dyn WebhookOutbox> {
        Some(self)
    }

    fn space_webhooks(&self) -> Option<&dyn SpaceWebhooks> {
        Some(self)
    }

    fn user_index(&self) -> Option<&dyn UserIndex> {
        Some(self)
    }

    fn relay(&self) -> Option<&dyn Relay> {
        Some(self)
    }
}

#[async_trait]
impl Following for MemoryStore {
    fn user_feed(&self) -> Result<UserFeed> {
        Ok(self.shared.follow.feed())
    }

    async fn follow(&self, users: &[MemberId]) -> Result<()> {
        check_batch(users.len())?;
        self.shared.follow.follow(users);
        Ok(())
    }

    async fn unfollow(&self, users: &[MemberId]) -> Result<()> {
        check_batch(users.len())?;
        self.shared.follow.unfollow(users);
        Ok(())
    }
}

#[async_trait]
impl WebhookOutbox for MemoryStore {
    async fn outbox_open(&self, options: OutboxOptions) -> Result<()> {
        self.shared.outbox.open(options);
        Ok(())
    }

    async fn outbox_claim(
        &self,
        consumer: &str,
        max: usize,
        reclaim_idle_ms: Millis,
    ) -> Result<Vec<OutboxEvent>> {
        let max = OutboxEvent::check_claim(consumer, max)?;
        let now = self.shared.clock.now_ms();
        Ok(self
            .shared
            .outbox
            .claim(consumer, max, reclaim_idle_ms, now))
    }

    async fn outbox_ack(&self, ids: &[String]) -> Result<()> {
        check_batch(ids.len())?;
        self.shared.outbox.ack(ids, |ids| {
            let _ = self.shared.record(ChangeRef::OutboxAck { ids });
        });
        Ok(())
    }

    async fn outbox_stats(&self) -> Result<OutboxStats> {
        Ok(self.shared.outbox.stats())
    }

    async fn outbox_message(&self, space: &SpaceName, body: &str) -> Result<bool> {
        OutboxEvent::check_body(body)?;
        let now = self.shared.clock.now_ms();
        Ok(self.shared.outbox.message(space, body, now, |events| {
            // Lazy, as the space's own events are.
            let _ = self.shared.record(ChangeRef::OutboxAdd { events });
        }))
    }
}

#[async_trait]
impl SpaceWebhooks for MemoryStore {
    async fn space_hooks(&self, space: &SpaceName) -> Result<Vec<SpaceHook>> {
        Ok(self.hooks.get(space))
    }

    async fn set_space_hooks(&self, space: &SpaceName, hooks: &[SpaceHook]) -> Result<()> {
        self.put_hooks(space, hooks).await
    }

    async fn space_hooks_version(&self) -> Result<u64> {
        Ok(self.hooks.version())
    }
}

#[async_trait]
impl UserIndex for MemoryStore {
    async fn seen_anywhere(&self, users: &[MemberId]) -> Result<Vec<SeenAnywhere>> {
        check_batch(users.len())?;
        let now = self.shared.clock.now_ms();
        let mut out = Vec::with_capacity(users.len());
        for user in users {
            let mut seen = SeenAnywhere::unseen(user.clone());
            for found in self.shared.seen.of_user(user.as_str(), now) {
                if found.present {
                    let key = [MemberKey::user(user.clone())];
                    let here = self.read(&found.space, |s| {
                        let s = s?;
                        let mut v = s.status(&key, now).ok()?;
                        // Gone since `of_user` (a leave between the two
                        // reads): its leave handed the remembered time
                        // over under this lock, so it is there to answer.
                        self.fill_remembered(s.first(), &mut v, now);
                        v.pop()
                    });
                    if let Some(st) = here {
                        seen.merge(&found.space, st.status, st.last_seen_ms);
                    }
                } else {
                    seen.merge(
                        &found.space,
                        herenow_core::policy::Status::Offline,
                        Some(found.ms),
                    );
                }
            }
            out.push(seen);
        }
        Ok(out)
    }

    async fn erase_user(&self, user: &MemberId) -> Result<ErasureReport> {
        let (report, durable) = self.erase(user)?;
        settle(durable).await?;
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

#[cfg(test)]
mod journaled;
#[cfg(test)]
mod tests;
