//! Coalescing of concurrent heartbeats: one write per member per flush.
//!
//! Every heartbeat call of a space joins the space's queue and waits. One
//! task per space (started by the call that finds no queue, ended when the
//! queue is empty) drains it in rounds: a round takes the calls waiting
//! (up to [`ROUND_MAX`] members), merges their heartbeats into one entry
//! per member — the newest time, and the metadata of the newest heartbeat
//! that brought some, as one call's duplicates are merged — and writes
//! them with the heartbeat script in calls of at most
//! [`SCRIPT_BATCH`] members, sent at once
//! (pipelined on the multiplexed client). At most
//! [`ROUNDS_IN_FLIGHT`] rounds of a space are in flight; meanwhile the next
//! calls queue up, so under load each round carries what arrived during
//! the previous ones: 64 concurrent single-member requests cost a few
//! script calls rather than 64.
//!
//! When the next round goes out: a round that fills a script call at once
//! (the call that brings the queue to [`SCRIPT_BATCH`] members wakes the
//! drain task); a smaller one only while no round is out: it waits for
//! the round before it and takes what queued meanwhile, the fewest script
//! calls, Redis' cheapest way.
//!
//! Each call still learns its own answer. The script reports every
//! entry's outcome (accepted, joined, stale); the first heartbeat of a
//! member in arrival order takes it, and a later one in the same round is
//! accepted if it is not older than the newest before it, else stale —
//! the rule for duplicates within one call. So exactly one call counts a
//! member's `join`.
//!
//! A round that fails to reach Redis answers every call waiting in the
//! queue with [`Error::Unavailable`] (each then buffers its own heartbeats,
//! see [`crate::buffer`]), so none waits behind a dead link to Redis for
//! a timeout per round. The queue never grows without bound
//! ([`QUEUE_MAX`]).

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use futures::StreamExt;
use futures::stream::FuturesUnordered;
use parking_lot::Mutex;
use tokio::sync::{Notify, oneshot};

use herenow_core::{Error, MemberKey, Metadata, Millis, Result, SpaceName};

use crate::writer::{BeatArg, Outcome, SCRIPT_BATCH, Writer, tally};

/// Most members one round takes from a space's queue (a round takes at
/// least one call, whatever its size): about one script call, so that
/// calls are answered as their own script returns, not when a long round
/// does; rounds in flight together keep Redis busy.
const ROUND_MAX: usize = SCRIPT_BATCH;

/// Most members waiting in one space's queue; calls past it write
/// directly.
const QUEUE_MAX: usize = 65_536;

/// Rounds of one space in flight at once: while one is in Redis the next
/// is sent, so Redis is not idle while herenow reads a reply. (Rounds go
/// out in order on the one Redis client; whatever order Redis runs them
/// in, a member's newest time wins.)
const ROUNDS_IN_FLIGHT: usize = 4;

/// A heartbeat owned by the queue: member, time (`None`: "now", stamped
/// with the time of the round that writes it), metadata.
type OwnedBeat = (MemberKey, Option<Millis>, Option<Metadata>);

/// `[accepted, joined, stale]` for one call.
pub(crate) type Tally = [u64; 3];

struct Waiting {
    beats: Vec<OwnedBeat>,
    tx: oneshot::Sender<Result<Tally>>,
}

struct Queue {
    waiting: VecDeque<Waiting>,
    members: usize,
    /// Wakes the drain task, waiting on its rounds in flight, once
    /// `wake_at` members wait (`usize::MAX`: no round could start).
    wake: Arc<Notify>,
    wake_at: usize,
}

impl Default for Queue {
    fn default() -> Self {
        Queue {
            waiting: VecDeque::new(),
            members: 0,
            wake: Arc::new(Notify::new()),
            wake_at: usize::MAX,
        }
    }
}

/// The per-space queues. A space has an entry exactly while its drain task
/// runs.
pub(crate) struct Flusher {
    writer: Arc<Writer>,
    queues: Mutex<HashMap<SpaceName, Queue>>,
}

impl Flusher {
    /// Queues writing through `writer`.
    pub fn new(writer: Arc<Writer>) -> Arc<Self> {
        Arc::new(Flusher {
            writer,
            queues: Mutex::new(HashMap::new()),
        })
    }

    /// Queues `beats` (one entry per member) and waits for the round that
    /// writes them. Entries at `now` (the caller's "now") are written at
    /// the round's time instead, a few milliseconds later at most, which
    /// lets the script send them as one argument each. `None`: the queue
    /// is full, write directly.
    pub async fn submit(
        self: &Arc<Self>,
        space: &SpaceName,
        now: Millis,
        beats: &[BeatArg<'_>],
    ) -> Option<Result<Tally>> {
        let (tx, rx) = oneshot::channel();
        {
            let mut queues = self.queues.lock();
            let start = !queues.contains_key(space);
            let q = queues.entry(space.clone()).or_default();
            if q.members + beats.len() > QUEUE_MAX && !q.waiting.is_empty() {
                return None;
            }
            q.members += beats.len();
            if q.members >= q.wake_at {
                q.wake_at = usize::MAX;
                q.wake.notify_one();
            }
            q.waiting.push_back(Waiting {
                beats: beats
                    .iter()
                    .map(|(m, at, meta)| ((*m).clone(), (*at != now).then_some(*at), meta.cloned()))
                    .collect(),
                tx,
            });
            if start {
                tokio::spawn(self.clone().drain(space.clone()));
            }
        }
        Some(rx.await.unwrap_or_else(|_| {
            Err(Error::Internal(
                "the heartbeat flush ended without an answer".into(),
            ))
        }))
    }

    /// The drain task of `space`: rounds until its queue is empty, at most
    /// [`ROUNDS_IN_FLIGHT`] at a time.
    async fn drain(self: Arc<Self>, space: SpaceName) {
        // Should the task end early (a panic), the queue goes with it and
        // its callers are answered (their senders dropped) rather than left
        // waiting; a normal end removes the entry itself and disarms this.
        let mut guard = Guard {
            flusher: &self,
            space: &space,
            armed: true,
        };
        let mut in_flight = FuturesUnordered::new();
        loop {
            while in_flight.len() < ROUNDS_IN_FLIGHT {
                let Some(round) = self.take_round(&space, round_min(in_flight.len())) else {
                    break;
                };
                let this = &self;
                let space = &space;
                in_flight.push(async move {
                    // Writes held in the buffer (Redis failed): these join
                    // it, in order, rather than slip past what it holds.
                    let result = if this.writer.ctx().health.buffer.holding() {
                        Err(Error::Unavailable {
                            reason: "redis failed; writes are buffered until it answers".into(),
                            source: None,
                        })
                    } else {
                        this.write_round(space, &round).await
                    };
                    (round, result)
                });
            }
            if in_flight.is_empty() {
                // Nothing in flight and nothing taken: done, unless a call
                // arrived since.
                let mut queues = self.queues.lock();
                if queues.get(&space).is_none_or(|q| q.waiting.is_empty()) {
                    queues.remove(&space);
                    guard.armed = false;
                    return;
                }
                continue;
            }
            // Until a round returns, the call that queues enough members
            // for another round wakes this task to send it.
            let Some(wake) = self.arm(&space, round_min(in_flight.len())) else {
                continue;
            };
            tokio::select! {
                biased;
                done = in_flight.next() => {
                    if let Some((round, result)) = done {
                        self.answer(&space, round, result);
                    }
                }
                () = wake.notified() => {}
            }
        }
    }

    /// Asks the call that brings `space`'s queue to `at` members to wake
    /// the drain task; returns what it wakes, or `None` if that many
    /// already wait (they queued after the last look: no call is left to
    /// wake the task for them).
    fn arm(&self, space: &SpaceName, at: usize) -> Option<Arc<Notify>> {
        let mut queues = self.queues.lock();
        let q = queues
            .get_mut(space)
            .expect("a space has a queue while its drain task runs");
        if q.members >= at {
            return None;
        }
        q.wake_at = at;
        Some(q.wake.clone())
    }

    /// Answers the calls of a round that returned.
    fn answer(&self, space: &SpaceName, mut round: Vec<Waiting>, result: Result<Vec<Tally>>) {
        match result {
            Ok(tallies) => {
                for (w, t) in round.into_iter().zip(tallies) {
                    let _ = w.tx.send(Ok(t));
                }
            }
            Err(e) => {
                if matches!(e, Error::Unavailable { .. }) {
                    // Nobody waits behind a dead link to Redis.
                    let mut queues = self.queues.lock();
                    if let Some(q) = queues.get_mut(space) {
                        q.members = 0;
                        round.extend(q.waiting.drain(..));
                    }
                }
                for w in round {
                    let _ = w.tx.send(Err(copy_error(&e)));
                }
            }
        }
    }

    /// The calls the next round writes: those waiting, up to
    /// [`ROUND_MAX`] members (at least one call), if at least `min`
    /// members wait.
    fn take_round(&self, space: &SpaceName, min: usize) -> Option<Vec<Waiting>> {
        let mut queues = self.queues.lock();
        let q = queues.get_mut(space)?;
        if q.waiting.is_empty() || q.members < min {
            return None;
        }
        let mut taken = Vec::new();
        let mut n = 0;
        while let Some(w) = q.waiting.front() {
            if !taken.is_empty() && n + w.beats.len() > ROUND_MAX {
                break;
            }
            n += w.beats.len();
            taken.extend(q.waiting.pop_front());
        }
        q.members -= n;
        (!taken.is_empty()).then_some(taken)
    }

    /// Merges a round into one entry per member, writes it, and tells each
    /// call its own counts (see the module documentation).
    async fn write_round(&self, space: &SpaceName, round: &[Waiting]) -> Result<Vec<Tally>> {
        let now = self.writer.ctx().clock.now_ms();
        if let [only] = round {
            // One call: its entries are one per member already.
            let beats: Vec<BeatArg<'_>> = only
                .beats
                .iter()
                .map(|(m, at, meta)| (m, at.unwrap_or(now), meta.as_ref()))
                .collect();
            let outcomes = self.writer.write_beats(space, now, &beats).await?;
            return Ok(vec![tally(outcomes)]);
        }
        let total: usize = round.iter().map(|w| w.beats.len()).sum();
        let mut index: HashMap<&MemberKey, usize> = HashMap::with_capacity(total);
        let mut merged: Vec<BeatArg<'_>> = Vec::with_capacity(total);
        let mut slots: Vec<usize> = Vec::with_capacity(total);
        for w in round {
            for (m, at, meta) in &w.beats {
                let at = at.unwrap_or(now);
                match index.get(m) {
                    Some(&i) => {
                        let e = &mut merged[i];
                        if at >= e.1 {
                            e.1 = at;
                            if meta.is_some() {
                                e.2 = meta.as_ref();
                            }
                        }
                        slots.push(i);
                    }
                    None => {
                        index.insert(m, merged.len());
                        slots.push(merged.len());
                        merged.push((m, at, meta.as_ref()));
                    }
                }
            }
        }
        let outcomes = self.writer.write_beats(space, now, &merged).await?;
        let mut newest: Vec<Option<Millis>> = vec![None; merged.len()];
        let mut slots = slots.into_iter();
        Ok(round
            .iter()
            .map(|w| {
                tally(w.beats.iter().zip(slots.by_ref()).map(|((_, at, _), i)| {
                    let at = at.unwrap_or(now);
                    match newest[i] {
                        None => {
                            newest[i] = Some(at);
                            outcomes[i]
                        }
                        Some(n) if outcomes[i] != Outcome::Stale && at >= n => {
                            newest[i] = Some(at);
                            Outcome::Accepted
                        }
                        Some(_) => Outcome::Stale,
                    }
                }))
            })
            .collect())
    }
}

struct Guard<'a> {
    flusher: &'a Flusher,
    space: &'a SpaceName,
    armed: bool,
}

impl Drop for Guard<'_> {
    fn drop(&mut self) {
        if self.armed {
            self.flusher.queues.lock().remove(self.space);
        }
    }
}

/// The same error for every call of a round (errors are not `Clone`: the
/// source is dropped, the text kept).
fn copy_error(e: &Error) -> Error {
    match e {
        Error::Invalid(i) => Error::Invalid(i.clone()),
        Error::Unsupported { what, store } => Error::Unsupported {
            what,
            store: store.clone(),
        },
        Error::Unavailable { reason, .. } => Error::Unavailable {
            reason: reason.clone(),
            source: None,
        },
        Error::Internal(s) => Error::Internal(s.clone()),
        other => Error::Internal(other.to_string()),
    }
}

/// The fewest members that start a round while `in_flight` rounds of a
/// space are out: any number when none is, a full script call below
/// [`ROUNDS_IN_FLIGHT`], else none (`usize::MAX`).
fn round_min(in_flight: usize) -> usize {
    match in_flight {
        0 => 1,
        n if n < ROUNDS_IN_FLIGHT => SCRIPT_BATCH,
        _ => usize::MAX,
    }
}
