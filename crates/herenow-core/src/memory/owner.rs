//! Busy spaces: while several threads write one space at once, its
//! heartbeat batches are handed to one owner thread, which applies them
//! back to back.
//!
//! Why not let every thread take the space's mutex in turn: a batch of
//! 1,000 heartbeats touches about eight cache lines per member (the
//! index's control group and bucket, the entry, its two list neighbours,
//! the block counts). On the thread that applied the last batch those
//! lines are in its own caches; on another core each one is a transfer
//! from the core that wrote it last, one dependent miss after another,
//! all while the lock is held. Taking turns, every batch pays that, and
//! across caches that do not share a level (another chiplet or socket) a
//! transfer costs more than a DRAM access, so the space's throughput fell
//! below what one core does alone (issue 10: 5.5M members/s on one core,
//! 1.5M on eight, with the cores idle behind the lock). The mutex's
//! hand-offs add a wake-up per batch on top.
//!
//! So once writers keep finding the space taken (about a quarter of
//! recent batches: [`BUSY`]), the writer that finds it taken starts an
//! owner thread for it (process-wide at most one per eight threads
//! writing at once, none below eight: [`max_owners`]; past that, writers wait for
//! the lock as before), and from then on
//! batches of at least [`HAND_OVER_AT`] heartbeats are staged for the
//! owner, which keeps
//! the space in one core's caches and never hands the lock between
//! writers. Callers wait asynchronously, so their threads parse the next
//! requests meanwhile. The owner applies each batch exactly as a caller
//! would (checked whole, journaled and absorbed under the lock, answered
//! only once applied: a heartbeat acknowledged is visible to the next
//! read), lets readers and the sweep in every [`HOLD`], watches its
//! queue for a while before it sleeps on it ([`DEFAULT_WATCH`]), and ends
//! after [`IDLE`] without work. A space with an owner is never dropped as
//! idle.
//!
//! Small writes (single heartbeats, leaves, connections) take the lock
//! themselves: handing one over costs two wake-ups, more than applying it.

use std::borrow::{Borrow, Cow};
use std::ops::Deref;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex, MutexGuard};
use tokio::sync::oneshot;

use super::shared::Shared;
use super::space::Space;
use crate::changes::{ChangeRef, Durable};
use crate::error::{Error, Result};
use crate::id::SpaceName;
use crate::store::{Heartbeat, HeartbeatReport};

/// Batches of at least this many heartbeats go to a busy space's owner;
/// smaller ones take the lock themselves.
pub(super) const HAND_OVER_AT: usize = 64;

/// How long an owner holds its space before letting a waiting reader or
/// the sweep in: the bound the sweep keeps too.
const HOLD: Duration = Duration::from_millis(1);

/// How long an owner waits for work before its thread ends.
const IDLE: Duration = Duration::from_millis(50);

/// Owner threads alive in this process.
static OWNERS: AtomicUsize = AtomicUsize::new(0);

/// The cap on owner threads as set ([`set_max_owners`] or
/// `HERENOW_SPACE_OWNERS`), [`BY_DEFAULT`] where neither says, `usize::MAX`
/// until first read.
static MAX_OWNERS: AtomicUsize = AtomicUsize::new(usize::MAX);

/// [`MAX_OWNERS`] when no cap was set: the default policy decides.
const BY_DEFAULT: usize = usize::MAX - 1;

/// The threads that write to the store at once, as the application says
/// ([`set_writer_threads`]); 0 until it does.
static WRITERS: AtomicUsize = AtomicUsize::new(0);

/// How many owner threads may run at once in this process, counting the
/// one about to start for a space that is `striped` or whole: what
/// [`set_max_owners`] or the environment variable `HERENOW_SPACE_OWNERS`
/// says, else none for a striped space and [`default_max_owners`] of the
/// cores this process may use and the writer threads it was told of for a
/// whole one.
fn max_owners(striped: bool) -> usize {
    let mut max = MAX_OWNERS.load(Ordering::Relaxed);
    if max == usize::MAX {
        max = std::env::var("HERENOW_SPACE_OWNERS")
            .ok()
            .and_then(|v| v.parse::<usize>().ok())
            .map_or(BY_DEFAULT, |n| n.min(BY_DEFAULT - 1));
        // A concurrent first read computes the same.
        MAX_OWNERS.store(max, Ordering::Relaxed);
    }
    cap(max, striped, writers_at_once)
}

/// The cap on owners: `set` ([`MAX_OWNERS`]) where one was set, else the
/// default for a `striped` or whole space and its `writers`.
fn cap(set: usize, striped: bool, writers: impl FnOnce() -> usize) -> usize {
    match set {
        BY_DEFAULT if striped => 0,
        BY_DEFAULT => default_max_owners(writers()),
        set => set,
    }
}

/// How many threads write to the store at once: the cores this process
/// may use, or the writer threads it was told of ([`set_writer_threads`])
/// where there are fewer: a server whose runtime has 2 workers on a
/// 16-core machine meets the 2-core case.
fn writers_at_once() -> usize {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    match WRITERS.load(Ordering::Relaxed) {
        0 => cores,
        writers => cores.min(writers),
    }
}

/// Owners by default: none below 8 threads writing at once
/// ([`writers_at_once`]), one per eight from 8 on. Measured on a 16-core
/// machine (BENCHMARKS.md, "Sixteen cores"): at 4 threads an owner cost
/// a quarter of one space's batch rate (18M against 24M members/s, two
/// sittings); at 8 it gave 1.5×
/// with 32 connections writing one space and about the same with 8; with
/// 64 busy spaces every extra owner cost (44M members/s with none, 32M
/// with up to 16). On two cores shared with the load a third thread
/// cost more than it saved. Striped spaces get none by default
/// ([`max_owners`]): on 16 cores owners on top of 4 stripes cost 0.55–0.8×
/// one space's batch rate at 4 and 8 cores (BENCHMARKS.md, "Sixteen cores, third sitting").
fn default_max_owners(at_once: usize) -> usize {
    if at_once < 8 { 0 } else { at_once / 8 }
}

/// How long an owner watches its queue before it sleeps on it, in
/// nanoseconds; `u64::MAX` until first read.
static WATCH_NS: AtomicU64 = AtomicU64::new(u64::MAX);

/// How long an owner with nothing staged watches its queue (reading a
/// flag, writing nothing) before it sleeps: a batch staged meanwhile
/// needs no wake-up, which on a virtual machine can take as long as
/// applying the batch. What [`set_owner_watch`] or
/// `HERENOW_SPACE_OWNER_WATCH_US` says, else [`DEFAULT_WATCH`].
fn watch() -> Duration {
    let ns = WATCH_NS.load(Ordering::Relaxed);
    if ns != u64::MAX {
        return Duration::from_nanos(ns);
    }
    let watch = std::env::var("HERENOW_SPACE_OWNER_WATCH_US")
        .ok()
        .and_then(|v| v.parse().ok())
        .map_or(DEFAULT_WATCH, Duration::from_micros);
    // A concurrent first read computes the same.
    set_owner_watch(watch);
    watch
}

/// An owner's watch by default: about one batch of 1,000 heartbeats'
/// apply. Measured on a 16-core machine (BENCHMARKS.md, "Sixteen cores,
/// second sitting"): one space's batches from 8 cores, 16.5M members/s
/// with it, 14.4M without (about even in another sitting). Owners run by
/// default only where 8 threads or more write at once, where a core
/// watching is one to spare.
const DEFAULT_WATCH: Duration = Duration::from_micros(50);

/// Sets how long owner threads watch their queue before they sleep
/// (zero: never), over the default and `HERENOW_SPACE_OWNER_WATCH_US`.
/// For tests and benchmarks.
pub fn set_owner_watch(watch: Duration) {
    let ns = u64::try_from(watch.as_nanos()).unwrap_or(u64::MAX);
    WATCH_NS.store(ns.min(u64::MAX - 1), Ordering::Relaxed);
}

/// Spins until `ready` says so or `budget` is spent; returns what `ready`
/// last said.
fn watch_until(budget: Duration, mut ready: impl FnMut() -> bool) -> bool {
    if budget.is_zero() {
        return ready();
    }
    let start = Instant::now();
    loop {
        for _ in 0..32 {
            if ready() {
                return true;
            }
            std::hint::spin_loop();
        }
        if start.elapsed() >= budget {
            return ready();
        }
    }
}

/// Tells the default owner policy how many threads write to the store at
/// once (a server's runtime workers; a server calls it when it opens its
/// store). Read each time an owner could start; [`set_max_owners`] and
/// `HERENOW_SPACE_OWNERS` still come first.
pub fn set_writer_threads(n: usize) {
    WRITERS.store(n, Ordering::Relaxed);
}

/// Sets how many busy spaces may have an owner thread at once in this
/// process (`0`: none, every writer takes the lock itself), over the
/// default and `HERENOW_SPACE_OWNERS`. For tests and benchmarks; owners
/// already running finish as usual.
pub fn set_max_owners(n: usize) {
    MAX_OWNERS.store(n.min(BY_DEFAULT - 1), Ordering::Relaxed);
}

/// A heartbeat as a batch holds it: owned (a whole call) or borrowed (a
/// striped space's part of a call, `memory/stripes.rs`, applied without a
/// copy).
pub(super) trait Beat: Borrow<Heartbeat> + Sized {
    /// The beats as one slice of owned heartbeats, for the journal and an
    /// owner's queue: the slice itself, or a copy of borrowed ones.
    fn whole(beats: &[Self]) -> Cow<'_, [Heartbeat]>;
}

impl Beat for Heartbeat {
    fn whole(beats: &[Self]) -> Cow<'_, [Heartbeat]> {
        Cow::Borrowed(beats)
    }
}

impl Beat for &Heartbeat {
    fn whole(beats: &[Self]) -> Cow<'_, [Heartbeat]> {
        Cow::Owned(beats.iter().map(|b| (*b).clone()).collect())
    }
}

/// What a heartbeat call gets back once applied: its report, and what to
/// wait on for durability.
pub(super) type Applied = (HeartbeatReport, Option<Durable>);

/// One space, or one stripe of a striped space (`stripes.rs`), and the
/// batches staged for its owner. Dereferences to its mutex, which every
/// other operation locks as before.
pub(super) struct SpaceCell {
    space: Mutex<Space>,
    staging: Mutex<Staging>,
    work: Condvar,
    /// Batches are staged: set with the staging lock held, read by an
    /// owner watching its queue.
    queued: AtomicBool,
}

#[derive(Default)]
struct Staging {
    jobs: Vec<Job>,
    /// An owner thread is alive for this space.
    owned: bool,
    /// How often recent batches found the space taken: a moving average
    /// over about the last 16, in 1/65536ths.
    contended: u32,
}

/// An owner starts once about this share of recent batches (in
/// 1/65536ths: a quarter) found the space taken, not at the first
/// collision: two threads that meet now and then wait less than a
/// hand-over costs.
const BUSY: u32 = 1 << 14;

impl Staging {
    /// Counts one batch that found the space free (`false`) or taken.
    fn note(&mut self, taken: bool) -> u32 {
        self.contended -= self.contended >> 4;
        if taken {
            self.contended += 1 << 12;
        }
        self.contended
    }
}

struct Job {
    beats: Vec<Heartbeat>,
    done: oneshot::Sender<Result<Applied>>,
}

/// Where a heartbeat batch goes ([`SpaceCell::route`]).
pub(super) enum Route<'a> {
    /// The space was free: apply it here, under this guard.
    Here(MutexGuard<'a, Space>),
    /// Staged for the owner: the answer comes on this receiver.
    Owner(oneshot::Receiver<Result<Applied>>),
    /// Taken, and no owner may start: wait for the lock.
    Wait,
}

impl Deref for SpaceCell {
    type Target = Mutex<Space>;

    fn deref(&self) -> &Mutex<Space> {
        &self.space
    }
}

impl SpaceCell {
    /// A cell for `space`, with no owner.
    pub(super) fn new(space: Space) -> Self {
        Self {
            space: Mutex::new(space),
            staging: Mutex::new(Staging::default()),
            work: Condvar::new(),
            queued: AtomicBool::new(false),
        }
    }

    /// Whether an owner thread is alive for this space (it may hold
    /// batches not yet applied): such a space is not dropped as idle.
    pub(super) fn is_owned(&self) -> bool {
        self.staging.lock().owned
    }

    /// Decides where a batch of heartbeats for the space `name` goes:
    /// to its owner if it has one; here if the space is free; else to a
    /// new owner, if one may start (for a stripe of a `striped` space, by
    /// default none: [`max_owners`]).
    pub(super) fn route<B: Beat>(
        self: &Arc<Self>,
        shared: &Arc<Shared>,
        name: &SpaceName,
        beats: &[B],
        striped: bool,
    ) -> Route<'_> {
        let mut staging = self.staging.lock();
        if !staging.owned {
            // `try_lock` never waits, so taking it under the staging lock
            // (the owner takes them in the other order) cannot deadlock.
            if let Some(space) = self.space.try_lock() {
                staging.note(false);
                return Route::Here(space);
            }
            if staging.note(true) < BUSY || !self.start_owner(shared, name, striped) {
                return Route::Wait;
            }
            staging.owned = true;
        }
        let (done, answer) = oneshot::channel();
        staging.jobs.push(Job {
            beats: B::whole(beats).into_owned(),
            done,
        });
        self.queued.store(true, Ordering::Release);
        drop(staging);
        self.work.notify_one();
        Route::Owner(answer)
    }

    /// Starts an owner thread for this space, if another may run. Called
    /// with the staging lock held, so the thread finds `owned` set.
    fn start_owner(
        self: &Arc<Self>,
        shared: &Arc<Shared>,
        name: &SpaceName,
        striped: bool,
    ) -> bool {
        let max = max_owners(striped);
        let taken = OWNERS.fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
            (n < max).then_some(n + 1)
        });
        if taken.is_err() {
            return false;
        }
        let (cell, shared, name) = (self.clone(), Arc::downgrade(shared), name.clone());
        let started = std::thread::Builder::new()
            .name("herenow-space-owner".into())
            .spawn(move || cell.own(&shared, &name));
        if started.is_err() {
            OWNERS.fetch_sub(1, Ordering::AcqRel);
        }
        started.is_ok()
    }

    /// The owner thread: applies staged batches until none comes for
    /// [`IDLE`].
    fn own(&self, shared: &Weak<Shared>, name: &SpaceName) {
        let mut jobs = Vec::new();
        let watch = watch();
        loop {
            {
                watch_until(watch, || self.queued.load(Ordering::Acquire));
                let mut staging = self.staging.lock();
                while staging.jobs.is_empty() {
                    let idle = self.work.wait_for(&mut staging, IDLE).timed_out();
                    if idle && staging.jobs.is_empty() {
                        staging.owned = false;
                        staging.contended = 0;
                        OWNERS.fetch_sub(1, Ordering::AcqRel);
                        return;
                    }
                }
                std::mem::swap(&mut jobs, &mut staging.jobs);
                self.queued.store(false, Ordering::Relaxed);
            }
            // The store is gone only once no caller waits on it: its
            // calls borrow it. Dropping the jobs answers them with errors.
            let Some(shared) = shared.upgrade() else {
                jobs.clear();
                continue;
            };
            let mut space = self.space.lock();
            let mut held_since = Instant::now();
            loop {
                shared
                    .handed_over
                    .fetch_add(jobs.len() as u64, Ordering::Relaxed);
                for job in jobs.drain(..) {
                    let out = apply(&shared, name, &mut space, &job.beats);
                    // A caller that stopped waiting has its batch applied
                    // all the same, like a request whose answer was lost.
                    let _ = job.done.send(out);
                }
                {
                    let mut staging = self.staging.lock();
                    std::mem::swap(&mut jobs, &mut staging.jobs);
                    self.queued.store(false, Ordering::Relaxed);
                }
                if jobs.is_empty() {
                    break;
                }
                if held_since.elapsed() >= HOLD {
                    MutexGuard::bump(&mut space);
                    held_since = Instant::now();
                }
            }
        }
    }
}

/// Applies one heartbeat call to `space` (named `name`) under its lock,
/// at the clock's time: checked whole, journaled, then absorbed. The one
/// path of a heartbeat batch, whichever thread runs it.
pub(super) fn apply<B: Beat>(
    shared: &Shared,
    name: &SpaceName,
    space: &mut Space,
    beats: &[B],
) -> Result<Applied> {
    let now = shared.clock.now_ms();
    let out = space
        .heartbeat(beats, now)
        .map_err(Error::from)
        .and_then(|report| {
            let durable = if report.accepted == 0 || shared.log.get().is_none() {
                None
            } else {
                shared.record(ChangeRef::Heartbeats {
                    space: name,
                    now,
                    beats: &B::whole(beats),
                })?
            };
            Ok((report, durable))
        });
    shared.absorb(space);
    out
}

/// The answer to a batch handed to an owner.
pub(super) async fn answer(answer: oneshot::Receiver<Result<Applied>>) -> Result<Applied> {
    answer.await.map_err(|_| {
        Error::Internal("a busy space's owner stopped before applying a batch".into())
    })?
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::{BY_DEFAULT, cap, default_max_owners, watch_until};

    #[test]
    fn owners_need_eight_threads_writing_at_once() {
        // threads writing at once -> owners
        for (at_once, owners) in [
            (1, 0),
            (2, 0),
            (4, 0),
            (7, 0),
            (8, 1),
            (15, 1),
            (16, 2),
            (64, 8),
        ] {
            assert_eq!(default_max_owners(at_once), owners, "{at_once} writers");
        }
    }

    #[test]
    fn striped_spaces_get_owners_only_when_asked() {
        assert_eq!(cap(BY_DEFAULT, true, || 16), 0, "striped: none by default");
        assert_eq!(cap(BY_DEFAULT, false, || 16), 2, "whole: one per eight");
        assert_eq!(cap(BY_DEFAULT, false, || 4), 0);
        assert_eq!(cap(3, true, || 1), 3, "a cap set counts for both");
        assert_eq!(cap(0, false, || 16), 0);
    }

    #[test]
    fn a_watch_stops_at_ready_or_at_its_budget() {
        let mut calls = 0;
        assert!(watch_until(Duration::from_secs(5), || {
            calls += 1;
            calls == 3
        }));
        assert_eq!(calls, 3);
        assert!(!watch_until(Duration::from_micros(20), || false));
        let mut once = 0;
        assert!(!watch_until(Duration::ZERO, || {
            once += 1;
            false
        }));
        assert_eq!(once, 1, "no budget: asked once");
    }
}
