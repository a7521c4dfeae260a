//! [`Seen`]: where members were seen, across spaces: the remembered
//! last-seen times (presence ended, horizon not yet passed) and, for
//! users, the spaces they are present in, so "last seen anywhere" and
//! erasure find a user's spaces without visiting every space.
//!
//! # Layout and cost
//!
//! A member is a 64-bit fingerprint: XXH3 of its kind and id under a seed
//! chosen per store and kept in the snapshot (so fingerprints survive a
//! restart, and nobody outside can aim ids at one another's
//! fingerprints). Each (member, space) is one 16-byte entry of a
//! `Table`: fingerprint, space id, present and guest bits, and the time.
//! 64 shards, each its own mutex, chosen by the fingerprint's low bits.
//! With the table's load between 0.58 and 0.875 a remembered member costs
//! 18 to 28 bytes, ids included: the id itself is not stored. Two members
//! of one space would have to share all 64 bits to be confused: about
//! one chance in 370,000 with ten million members in one space.
//!
//! # Who writes
//!
//! A space records what happened to its members in its outbox
//! (`Space::take_sightings`) and the store applies it here while it still
//! holds the space's lock, so for one (member, space) this table changes
//! in the order the space did. Sweeping past the horizon is incremental
//! ([`Seen::sweep`]).

mod table;

use std::hash::BuildHasher;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use parking_lot::{Mutex, RwLock};

use herenow_core::id::{MemberId, MemberKind, SpaceName};
use herenow_core::policy::SpaceConfig;
use herenow_core::time::Millis;

pub(crate) use self::table::{MAX_SPACES, Sighting, Table};

const SHARDS: usize = 64;

/// A remembered entry as snapshots keep it: fingerprint, guest, time.
pub type RememberedEntry = (u64, bool, Millis);

/// What a space tells [`Seen`] about one member.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SightingNote {
    /// The member became present (users only: guests are never looked up
    /// across spaces).
    Joined(MemberKind, MemberId, Millis),
    /// The member's presence ended (leave, connection closed, or the end
    /// of its retention) with this last-seen time.
    Ended(MemberKind, MemberId, Millis),
    /// A heartbeat too old to be presence: a sighting all the same.
    Backfill(MemberKind, MemberId, Millis),
    /// The member was erased: forget it here, remember nothing.
    Erased(MemberKind, MemberId),
}

/// What one space id stands for, readable without the space's lock.
struct SpaceSlot {
    name: SpaceName,
    remember_ms: AtomicU64,
    remember_guests: AtomicBool,
    /// Entries naming this space: the id is kept while any does.
    entries: AtomicU64,
    /// Whether the space itself exists in the store (it is dropped when
    /// idle; its remembered times outlive it, under this id).
    attached: AtomicBool,
}

#[derive(Default)]
struct SpaceIds {
    slots: Vec<Option<std::sync::Arc<SpaceSlot>>>,
    by_name: std::collections::HashMap<SpaceName, u32>,
    free: Vec<u32>,
}

impl SpaceIds {
    /// Frees `id` if its space is gone and no entry names it.
    fn release_if_unused(&mut self, id: u32) {
        let unused = self
            .slots
            .get(id as usize)
            .and_then(Option::as_ref)
            .is_some_and(|s| {
                !s.attached.load(Ordering::Relaxed) && s.entries.load(Ordering::Relaxed) == 0
            });
        if unused && let Some(slot) = self.slots[id as usize].take() {
            self.by_name.remove(&slot.name);
            self.free.push(id);
        }
    }
}

/// The store-wide table of sightings. See the module documentation.
pub struct Seen {
    seed: AtomicU64,
    shards: Box<[Mutex<Table>]>,
    spaces: RwLock<SpaceIds>,
    /// Where the sweep goes on: shard, then slot.
    cursor: Mutex<(usize, usize)>,
}

impl Default for Seen {
    fn default() -> Self {
        let seed = foldhash::fast::RandomState::default().hash_one(0x5eed_u64);
        Self {
            seed: AtomicU64::new(seed),
            shards: (0..SHARDS).map(|_| Mutex::new(Table::default())).collect(),
            spaces: RwLock::new(SpaceIds::default()),
            cursor: Mutex::new((0, 0)),
        }
    }
}

/// What a remembered lookup found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Found {
    /// The space.
    pub space: SpaceName,
    /// Present there now (its time is the space's to tell).
    pub present: bool,
    /// The remembered time, when not present.
    pub ms: Millis,
}

impl Seen {
    /// The fingerprint seed, for snapshots.
    pub fn seed(&self) -> u64 {
        self.seed.load(Ordering::Relaxed)
    }

    /// Restores the seed of a snapshot; only before anything is recorded.
    pub fn set_seed(&self, seed: u64) {
        self.seed.store(seed, Ordering::Relaxed);
    }

    /// The member's fingerprint (never 0).
    pub fn fingerprint(&self, kind: MemberKind, id: &str) -> u64 {
        // On the stack: ids are at most MAX_ID_BYTES long.
        let mut bytes = [0u8; 1 + herenow_core::limits::MAX_ID_BYTES];
        let id = &id.as_bytes()[..id.len().min(herenow_core::limits::MAX_ID_BYTES)];
        bytes[0] = kind.letter().as_bytes()[0];
        bytes[1..=id.len()].copy_from_slice(id);
        xxhash_rust::xxh3::xxh3_64_with_seed(&bytes[..=id.len()], self.seed()).max(1)
    }

    fn shard(&self, fp: u64) -> &Mutex<Table> {
        &self.shards[(fp as usize) % SHARDS]
    }

    /// The id of space `name` as it (re)enters the store, with its
    /// remembering policy: the id it had if its remembered times outlived
    /// it, else a new one; `None` when every id is taken (then nothing of
    /// that space is remembered).
    pub fn register(&self, name: &SpaceName, config: &SpaceConfig) -> Option<u32> {
        let mut ids = self.spaces.write();
        if let Some(&id) = ids.by_name.get(name)
            && let Some(Some(slot)) = ids.slots.get(id as usize)
        {
            slot.attached.store(true, Ordering::Relaxed);
            slot.remember_ms
                .store(config.remember_ms, Ordering::Relaxed);
            slot.remember_guests
                .store(config.remember_guests, Ordering::Relaxed);
            return Some(id);
        }
        let slot = std::sync::Arc::new(SpaceSlot {
            name: name.clone(),
            remember_ms: AtomicU64::new(config.remember_ms),
            remember_guests: AtomicBool::new(config.remember_guests),
            entries: AtomicU64::new(0),
            attached: AtomicBool::new(true),
        });
        let id = match ids.free.pop() {
            Some(id) => {
                ids.slots[id as usize] = Some(slot);
                id
            }
            None => {
                if ids.slots.len() >= MAX_SPACES as usize {
                    return None;
                }
                ids.slots.push(Some(slot));
                (ids.slots.len() - 1) as u32
            }
        };
        ids.by_name.insert(name.clone(), id);
        Some(id)
    }

    /// The space of `id` left the store (dropped when idle): its id stays
    /// while remembered times name it, so they keep answering.
    pub fn unregister(&self, id: u32) {
        let mut ids = self.spaces.write();
        if let Some(Some(slot)) = ids.slots.get(id as usize) {
            slot.attached.store(false, Ordering::Relaxed);
        }
        ids.release_if_unused(id);
    }

    /// The id and policy of a space that is not in the store but whose
    /// remembered times are: `(id, remember_ms, remember_guests)`.
    pub fn detached(&self, name: &SpaceName) -> Option<(u32, u64, bool)> {
        let ids = self.spaces.read();
        let &id = ids.by_name.get(name)?;
        let slot = ids.slots.get(id as usize)?.as_ref()?;
        Some((
            id,
            slot.remember_ms.load(Ordering::Relaxed),
            slot.remember_guests.load(Ordering::Relaxed),
        ))
    }

    fn slot(&self, id: u32) -> Option<std::sync::Arc<SpaceSlot>> {
        self.spaces.read().slots.get(id as usize).cloned().flatten()
    }

    /// The names of space ids (those still registered).
    pub fn names(&self, ids: &[u32]) -> Vec<SpaceName> {
        let spaces = self.spaces.read();
        ids.iter()
            .filter_map(|&id| {
                spaces
                    .slots
                    .get(id as usize)?
                    .as_ref()
                    .map(|s| s.name.clone())
            })
            .collect()
    }

    /// A space's policy changed: remembered entries follow it at once
    /// (reads check the horizon; the sweep removes what it ended).
    pub fn set_policy(&self, id: u32, config: &SpaceConfig) {
        if let Some(slot) = self.slot(id) {
            slot.remember_ms
                .store(config.remember_ms, Ordering::Relaxed);
            slot.remember_guests
                .store(config.remember_guests, Ordering::Relaxed);
        }
    }

    /// Applies a space's notes (see [`SightingNote`]), under that space's
    /// lock, with its current policy.
    pub fn absorb(&self, space: u32, config: &SpaceConfig, notes: Vec<SightingNote>) {
        if notes.is_empty() {
            return;
        }
        let Some(slot) = self.slot(space) else {
            return;
        };
        let sighting = |kind: MemberKind, present, ms| Sighting {
            space,
            present,
            guest: kind == MemberKind::Guest,
            ms,
        };
        let mut added = 0i64;
        for note in notes {
            match note {
                SightingNote::Joined(kind, id, at) => {
                    let fp = self.fingerprint(kind, id.as_str());
                    if self.shard(fp).lock().put(fp, sighting(kind, true, at)) {
                        added += 1;
                    }
                }
                SightingNote::Ended(kind, id, at) => {
                    let fp = self.fingerprint(kind, id.as_str());
                    let mut shard = self.shard(fp).lock();
                    if config.remembers(kind) {
                        if shard.put(fp, sighting(kind, false, at)) {
                            added += 1;
                        }
                    } else if shard.remove(fp, space).is_some() {
                        added -= 1;
                    }
                }
                SightingNote::Backfill(kind, id, at) => {
                    if !config.remembers(kind) {
                        continue;
                    }
                    let fp = self.fingerprint(kind, id.as_str());
                    let mut shard = self.shard(fp).lock();
                    let newer = match shard.get(fp, space) {
                        Some(s) => !s.present && s.ms < at,
                        None => true,
                    };
                    if newer && shard.put(fp, sighting(kind, false, at)) {
                        added += 1;
                    }
                }
                SightingNote::Erased(kind, id) => {
                    let fp = self.fingerprint(kind, id.as_str());
                    if self.shard(fp).lock().remove(fp, space).is_some() {
                        added -= 1;
                    }
                }
            }
        }
        if added >= 0 {
            slot.entries.fetch_add(added as u64, Ordering::Relaxed);
        } else {
            slot.entries
                .fetch_sub(added.unsigned_abs(), Ordering::Relaxed);
        }
    }

    /// The remembered last-seen time of an absent member of space `id`
    /// whose policy is `config`: `None` when not remembered, present, or
    /// past the horizon at `now`.
    pub fn remembered(
        &self,
        space: u32,
        config: &SpaceConfig,
        kind: MemberKind,
        id: &str,
        now: Millis,
    ) -> Option<Millis> {
        if !config.remembers(kind) {
            return None;
        }
        let fp = self.fingerprint(kind, id);
        let s = self.shard(fp).lock().get(fp, space)?;
        (!s.present && config.still_remembered(s.ms, now)).then_some(s.ms)
    }

    /// Every space where user `id` is present or still remembered at
    /// `now`.
    pub fn of_user(&self, id: &str, now: Millis) -> Vec<Found> {
        let fp = self.fingerprint(MemberKind::User, id);
        let mut raw = Vec::new();
        self.shard(fp).lock().all(fp, &mut raw);
        let ids = self.spaces.read();
        raw.into_iter()
            .filter(|s| !s.guest)
            .filter_map(|s| {
                let slot = ids.slots.get(s.space as usize)?.as_ref()?;
                let horizon = slot.remember_ms.load(Ordering::Relaxed);
                let live = s.present || (horizon > 0 && now < s.ms.saturating_add(horizon));
                live.then(|| Found {
                    space: slot.name.clone(),
                    present: s.present,
                    ms: s.ms,
                })
            })
            .collect()
    }

    /// The space ids holding an entry of user `id` (present or not).
    pub fn user_spaces(&self, id: &str) -> Vec<u32> {
        let fp = self.fingerprint(MemberKind::User, id);
        let mut raw = Vec::new();
        self.shard(fp).lock().all(fp, &mut raw);
        let mut spaces: Vec<u32> = raw.iter().filter(|s| !s.guest).map(|s| s.space).collect();
        spaces.sort_unstable();
        spaces
    }

    /// Forgets user `id` everywhere; returns how many of its entries were
    /// remembered times (not presence).
    pub fn forget_user(&self, id: &str) -> u64 {
        let fp = self.fingerprint(MemberKind::User, id);
        let gone = self.shard(fp).lock().remove_where(fp, |s| !s.guest);
        let mut ids = self.spaces.write();
        let mut remembered = 0;
        for s in &gone {
            if let Some(Some(slot)) = ids.slots.get(s.space as usize) {
                slot.entries.fetch_sub(1, Ordering::Relaxed);
            }
            ids.release_if_unused(s.space);
            if !s.present {
                remembered += 1;
            }
        }
        remembered
    }

    /// One round of sweeping: `slices` steps, each looking at up to
    /// `budget` slots of one shard (and the rest of the run of entries it
    /// ends in), removing remembered times past their space's horizon or
    /// no longer remembered by its policy. Returns how many were removed
    /// and the longest a shard was held, in microseconds.
    pub fn sweep(&self, now: Millis, slices: usize, budget: usize) -> (u64, u64) {
        // Policies read once per round, not per slice: there may be many
        // spaces.
        let policies: Vec<Option<(u64, bool)>> = self
            .spaces
            .read()
            .slots
            .iter()
            .map(|s| {
                s.as_ref().map(|s| {
                    (
                        s.remember_ms.load(Ordering::Relaxed),
                        s.remember_guests.load(Ordering::Relaxed),
                    )
                })
            })
            .collect();
        let doomed = |s: Sighting| {
            !s.present
                && match policies.get(s.space as usize).copied().flatten() {
                    None => true,
                    Some((horizon, guests)) => {
                        horizon == 0 || (s.guest && !guests) || now >= s.ms.saturating_add(horizon)
                    }
                }
        };
        let (mut removed, mut longest_us) = (0, 0);
        let mut per_space: Vec<(u32, u64)> = Vec::new();
        for _ in 0..slices {
            let mut cursor = self.cursor.lock();
            let (shard, slot) = *cursor;
            let started = std::time::Instant::now();
            let mut table = self.shards[shard].lock();
            let (n, next) = table.sweep(slot, budget, |s| {
                let d = doomed(s);
                if d {
                    match per_space.last_mut() {
                        Some((space, k)) if *space == s.space => *k += 1,
                        _ => per_space.push((s.space, 1)),
                    }
                }
                d
            });
            drop(table);
            longest_us = longest_us.max(started.elapsed().as_micros() as u64);
            removed += n;
            *cursor = if next == 0 {
                ((shard + 1) % SHARDS, 0)
            } else {
                (shard, next)
            };
        }
        if !per_space.is_empty() {
            let mut ids = self.spaces.write();
            for (space, n) in per_space {
                if let Some(Some(slot)) = ids.slots.get(space as usize) {
                    slot.entries.fetch_sub(n, Ordering::Relaxed);
                }
                ids.release_if_unused(space);
            }
        }
        (removed, longest_us)
    }

    /// Remembered entries (not presence), by space name: for snapshots.
    pub fn remembered_entries(&self) -> Vec<(SpaceName, Vec<RememberedEntry>)> {
        let ids = self.spaces.read();
        let mut by_space: std::collections::BTreeMap<u32, Vec<RememberedEntry>> =
            Default::default();
        for shard in self.shards.iter() {
            for (fp, s) in shard.lock().entries() {
                if !s.present {
                    by_space
                        .entry(s.space)
                        .or_default()
                        .push((fp, s.guest, s.ms));
                }
            }
        }
        by_space
            .into_iter()
            .filter_map(|(id, list)| {
                let slot = ids.slots.get(id as usize)?.as_ref()?;
                Some((slot.name.clone(), list))
            })
            .collect()
    }

    /// Puts back remembered entries of a snapshot into space `id`.
    pub fn restore_remembered(&self, space: u32, entries: &[RememberedEntry]) {
        let Some(slot) = self.slot(space) else {
            return;
        };
        let mut added = 0;
        for &(fp, guest, ms) in entries {
            let s = Sighting {
                space,
                present: false,
                guest,
                ms,
            };
            let mut shard = self.shard(fp.max(1)).lock();
            if shard.get(fp.max(1), space).is_some_and(|s| s.present) {
                continue;
            }
            if shard.put(fp.max(1), s) {
                added += 1;
            }
        }
        slot.entries.fetch_add(added, Ordering::Relaxed);
    }

    /// Entries held and bytes of heap, for metrics and the memory
    /// benchmark.
    pub fn usage(&self) -> (usize, usize) {
        self.shards.iter().fold((0, 0), |(n, b), s| {
            let s = s.lock();
            (n + s.len(), b + s.heap_bytes())
        })
    }
}
