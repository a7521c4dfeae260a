//! The memory store's webhook outbox ([`herenow_core::outbox`]): a bounded queue
//! beside the spaces, in the store's snapshot and journal.
//!
//! Spaces capture their events while [`Outbox::capturing`] is set (one
//! relaxed load per event otherwise); the store moves them here under the
//! space's lock, gives each an id, and journals them there, so the journal
//! orders them with the change that caused them.
//!
//! Claims follow the contract: a space's events go to one consumer at a
//! time (its *owner* while any of them is claimed and unacknowledged); a
//! consumer counts as gone once it has not called `claim` for the idle
//! time, and the next consumer then takes its spaces over, their
//! unacknowledged events first.

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::hash::BuildHasher;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use parking_lot::Mutex;

use herenow_core::event::Event;
use herenow_core::id::SpaceName;
use herenow_core::outbox::{OutboxEvent, OutboxKind, OutboxOptions, OutboxStats};
use herenow_core::time::Millis;

/// The outbox: the capture switch the spaces read, and the queue.
pub(super) struct Outbox {
    /// Set while webhooks are on; every space holds a clone.
    pub(super) capturing: Arc<AtomicBool>,
    queue: Mutex<Queue>,
}

impl Default for Outbox {
    fn default() -> Self {
        Self {
            capturing: Arc::new(AtomicBool::new(false)),
            queue: Mutex::new(Queue::new(OutboxOptions::default())),
        }
    }
}

struct Queue {
    options: OutboxOptions,
    /// Opened for its own sake (operator endpoints, a test): capture
    /// stays on when no space names endpoints. Read and set with the
    /// switch under this queue's lock, so an open and a last removal
    /// cannot interleave.
    sticky: bool,
    /// `{epoch:016x}-`, the start of every id this process gives.
    prefix: String,
    /// The number of the event at the front of `slots`; events are
    /// numbered in queue order, and this process's ids end with it.
    base: u64,
    /// By number from `base`; an acknowledged or trimmed event leaves a
    /// hole until the events before it go too.
    slots: VecDeque<Option<Kept>>,
    /// Events kept (the slots that are not holes).
    kept: usize,
    /// The bytes of the messages' bodies kept.
    body_bytes: usize,
    /// No event numbered below this is unclaimed.
    cursor: u64,
    /// Events restored from an earlier process (snapshot, journal), by
    /// their ids; this process's own are found by their number.
    by_id: HashMap<String, u64>,
    /// Spaces with claimed, unacknowledged events, and who claimed them.
    owners: HashMap<SpaceName, Owner>,
    /// When each consumer last called `claim`.
    consumers: HashMap<String, Millis>,
    trimmed: u64,
}

struct Kept {
    event: OutboxEvent,
    claimed: bool,
}

struct Owner {
    consumer: String,
    claimed: BTreeSet<u64>,
}

/// The most bytes of messages' bodies kept: the cap counts events, and a
/// message may be [`herenow_core::limits::MAX_OUTBOX_MESSAGE_BYTES`] long.
const MAX_BODY_BYTES: usize = 64 << 20;

/// The most consumers remembered: a server has one; more than this means
/// names are made up per call, and the oldest are forgotten.
const MAX_CONSUMERS: usize = 1_024;

impl Queue {
    fn new(options: OutboxOptions) -> Self {
        Self {
            options,
            sticky: false,
            prefix: format!(
                "{:016x}-",
                std::collections::hash_map::RandomState::new().hash_one(0u8)
            ),
            base: 0,
            slots: VecDeque::new(),
            kept: 0,
            body_bytes: 0,
            cursor: 0,
            by_id: HashMap::new(),
            owners: HashMap::new(),
            consumers: HashMap::new(),
            trimmed: 0,
        }
    }

    /// The number the next event gets.
    fn next(&self) -> u64 {
        self.base + self.slots.len() as u64
    }

    /// The id of the event `ahead` places after the next: random per
    /// process, then the event's number, so ids stay unique across
    /// restarts even without a data directory.
    fn next_id(&self, ahead: u64) -> String {
        format!("{}{}", self.prefix, self.next() + ahead)
    }

    fn slot(&self, seq: u64) -> Option<&Kept> {
        let i = usize::try_from(seq.checked_sub(self.base)?).ok()?;
        self.slots.get(i)?.as_ref()
    }

    fn slot_mut(&mut self, seq: u64) -> Option<&mut Kept> {
        let i = usize::try_from(seq.checked_sub(self.base)?).ok()?;
        self.slots.get_mut(i)?.as_mut()
    }

    /// The number of the event with `id`, if it is kept.
    fn seq_of(&self, id: &str) -> Option<u64> {
        if let Some(n) = id.strip_prefix(&self.prefix) {
            let seq = n.parse().ok()?;
            return self.slot(seq).is_some().then_some(seq);
        }
        self.by_id.get(id).copied()
    }

    /// Adds an event numbered [`Queue::next`], as [`Queue::next_id`]
    /// named it.
    fn push_own(&mut self, event: OutboxEvent) {
        self.body_bytes += event.body.as_ref().map_or(0, String::len);
        self.slots.push_back(Some(Kept {
            event,
            claimed: false,
        }));
        self.kept += 1;
        self.trim();
    }

    /// Adds an event of an earlier process (its id is its own); one kept
    /// already is not added twice.
    fn push_restored(&mut self, event: OutboxEvent) {
        if self.seq_of(&event.id).is_some() {
            return;
        }
        self.by_id.insert(event.id.clone(), self.next());
        self.push_own(event);
    }

    /// Forgets the oldest events past the cap, or while the messages'
    /// bodies hold more than [`MAX_BODY_BYTES`], counting them.
    fn trim(&mut self) {
        while self.kept as u64 > self.options.max_events.max(1)
            || (self.body_bytes > MAX_BODY_BYTES && self.kept > 1)
        {
            // Holes at the front are popped as they appear, so the front
            // is kept.
            if !self.remove(self.base) {
                break;
            }
            self.trimmed += 1;
        }
    }

    /// Forgets event `seq`, wherever it is.
    fn remove(&mut self, seq: u64) -> bool {
        let Some(i) = seq
            .checked_sub(self.base)
            .and_then(|i| usize::try_from(i).ok())
        else {
            return false;
        };
        let Some(Kept { event, claimed }) = self.slots.get_mut(i).and_then(Option::take) else {
            return false;
        };
        self.kept -= 1;
        self.body_bytes -= event.body.as_ref().map_or(0, String::len);
        if !event.id.starts_with(&self.prefix) {
            self.by_id.remove(&event.id);
        }
        if claimed && let Some(owner) = self.owners.get_mut(&event.space) {
            owner.claimed.remove(&seq);
            if owner.claimed.is_empty() {
                self.owners.remove(&event.space);
            }
        }
        while matches!(self.slots.front(), Some(None)) {
            self.slots.pop_front();
            self.base += 1;
        }
        true
    }

    fn claim(&mut self, consumer: &str, max: usize, idle: Millis, now: Millis) -> Vec<OutboxEvent> {
        // Spaces whose owner stopped claiming go back to the queue, their
        // events in order, for this consumer.
        let gone: Vec<SpaceName> = self
            .owners
            .iter()
            .filter(|(_, o)| {
                // A consumer claiming is alive: what it holds stays its own.
                let last = self.consumers.get(&o.consumer).copied().unwrap_or(0);
                o.consumer != consumer && now.saturating_sub(last) >= idle
            })
            .map(|(s, _)| s.clone())
            .collect();
        for space in gone {
            if let Some(owner) = self.owners.remove(&space) {
                for seq in owner.claimed {
                    if let Some(k) = self.slot_mut(seq) {
                        k.claimed = false;
                    }
                    self.cursor = self.cursor.min(seq);
                }
            }
        }
        self.touch(consumer, now);
        let mut out = Vec::new();
        // The first event left unclaimed (another consumer's space), or
        // where the walk stopped: where the next walk starts.
        let mut resume = None;
        let mut seq = self.cursor.max(self.base);
        while seq < self.next() {
            if out.len() >= max {
                resume.get_or_insert(seq);
                break;
            }
            let i = (seq - self.base) as usize;
            let Some(kept) = self.slots[i].as_mut().filter(|k| !k.claimed) else {
                seq += 1;
                continue;
            };
            match self.owners.get_mut(&kept.event.space) {
                Some(o) if o.consumer != consumer => {
                    resume.get_or_insert(seq);
                    seq += 1;
                    continue;
                }
                Some(o) => {
                    o.claimed.insert(seq);
                }
                None => {
                    self.owners.insert(
                        kept.event.space.clone(),
                        Owner {
                            consumer: consumer.to_owned(),
                            claimed: BTreeSet::from([seq]),
                        },
                    );
                }
            }
            kept.claimed = true;
            out.push(kept.event.clone());
            seq += 1;
        }
        self.cursor = resume.unwrap_or(seq);
        out
    }

    fn touch(&mut self, consumer: &str, now: Millis) {
        if !self.consumers.contains_key(consumer) && self.consumers.len() >= MAX_CONSUMERS {
            let owning: BTreeSet<&str> =
                self.owners.values().map(|o| o.consumer.as_str()).collect();
            let oldest = self
                .consumers
                .iter()
                .filter(|(c, _)| !owning.contains(c.as_str()))
                .min_by_key(|(_, at)| **at)
                .map(|(c, _)| c.clone());
            if let Some(c) = oldest {
                self.consumers.remove(&c);
            }
        }
        self.consumers.insert(consumer.to_owned(), now);
    }

    fn stats(&self) -> OutboxStats {
        OutboxStats {
            depth: self.kept as u64,
            pending: self.owners.values().map(|o| o.claimed.len() as u64).sum(),
            trimmed: self.trimmed,
            open: false,
        }
    }

    fn export(&self) -> Vec<OutboxEvent> {
        self.slots
            .iter()
            .flatten()
            .map(|k| k.event.clone())
            .collect()
    }
}

impl Outbox {
    /// Takes `options` (again: new ones) and, unless they are
    /// [`OutboxOptions::for_spaces`], turns capture on for good. Capture
    /// for spaces follows [`Outbox::spaces_name_endpoints`].
    pub(super) fn open(&self, options: OutboxOptions) {
        let mut q = self.queue.lock();
        q.options = options;
        if !options.for_spaces {
            q.sticky = true;
            self.capturing.store(true, Ordering::Relaxed);
        }
    }

    /// Whether any space names endpoints now: capture turns on when one
    /// does, and off when none does unless the outbox was opened for its
    /// own sake, so a running store captures when a restarted one would.
    /// Events kept stay until they are acknowledged either way.
    pub(super) fn spaces_name_endpoints(&self, any: bool) {
        let q = self.queue.lock();
        self.capturing.store(any || q.sticky, Ordering::Relaxed);
    }

    /// Gives the events a space captured their ids and time, and queues
    /// them; `record` journals them while the queue's lock is held, so
    /// the journal has them in queue order. Called under the space's lock.
    pub(super) fn add(
        &self,
        space: &SpaceName,
        captured: Vec<(OutboxKind, Option<Arc<Event>>)>,
        now: Millis,
        record: impl FnOnce(&[OutboxEvent]),
    ) {
        if captured.is_empty() {
            return;
        }
        let mut q = self.queue.lock();
        let mut events = Vec::with_capacity(captured.len());
        for (kind, event) in captured {
            let id = q.next_id(events.len() as u64);
            let e = match event {
                Some(e) => OutboxEvent::of_member(id, now, &e),
                None => Some(OutboxEvent::of_space(id, now, space.clone(), kind)),
            };
            events.extend(e);
        }
        // Journaled first, then moved in: the ids were given in order.
        record(&events);
        for e in events {
            q.push_own(e);
        }
    }

    /// Queues a message of `space` with `body` if the outbox captures
    /// (`false`: it does not); `record` journals it under the queue's
    /// lock, as [`Outbox::add`] does events.
    pub(super) fn message(
        &self,
        space: &SpaceName,
        body: &str,
        now: Millis,
        record: impl FnOnce(&[OutboxEvent]),
    ) -> bool {
        let mut q = self.queue.lock();
        // Read under the queue's lock, as `spaces_name_endpoints` sets it.
        if !self.is_open() {
            return false;
        }
        let event = OutboxEvent::message(q.next_id(0), now, space.clone(), body.to_owned());
        record(std::slice::from_ref(&event));
        q.push_own(event);
        true
    }

    /// Restores journaled events, as at start.
    pub(super) fn restore(&self, events: &[OutboxEvent]) {
        let mut q = self.queue.lock();
        for e in events {
            q.push_restored(e.clone());
        }
    }

    /// Hands `consumer` its next events (see the module documentation).
    pub(super) fn claim(
        &self,
        consumer: &str,
        max: usize,
        idle: Millis,
        now: Millis,
    ) -> Vec<OutboxEvent> {
        self.queue.lock().claim(consumer, max, idle, now)
    }

    /// Forgets the events of `ids`; `record` journals those that were
    /// kept, under the queue's lock.
    pub(super) fn ack(&self, ids: &[String], record: impl FnOnce(&[String])) {
        let mut q = self.queue.lock();
        let mut known = Vec::new();
        for id in ids {
            if let Some(seq) = q.seq_of(id) {
                q.remove(seq);
                known.push(id.clone());
            }
        }
        if !known.is_empty() {
            record(&known);
        }
    }

    /// Forgets journaled acknowledgements, as at start.
    pub(super) fn restore_acks(&self, ids: &[String]) {
        self.ack(ids, |_| {});
    }

    pub(super) fn stats(&self) -> OutboxStats {
        OutboxStats {
            open: self.is_open(),
            ..self.queue.lock().stats()
        }
    }

    /// Whether it captures.
    pub(super) fn is_open(&self) -> bool {
        self.capturing.load(Ordering::Relaxed)
    }

    /// Every event kept, in order: for the snapshot.
    pub(super) fn export(&self) -> Vec<OutboxEvent> {
        self.queue.lock().export()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_past_their_byte_bound_trim_the_oldest_events_counted() {
        let outbox = Outbox::default();
        outbox.open(OutboxOptions::default());
        let space = SpaceName::new("s").unwrap();
        let body = "x".repeat(herenow_core::limits::MAX_OUTBOX_MESSAGE_BYTES);
        let fit = MAX_BODY_BYTES / body.len();
        for _ in 0..fit + 10 {
            assert!(outbox.message(&space, &body, 0, |_| {}));
        }
        let stats = outbox.stats();
        assert_eq!((stats.depth, stats.trimmed), (fit as u64, 10));
        // Acknowledged messages give their bytes back.
        let ids: Vec<String> = outbox
            .claim("c", fit, 0, 0)
            .into_iter()
            .map(|e| e.id)
            .collect();
        outbox.ack(&ids, |_| {});
        assert_eq!(outbox.queue.lock().body_bytes, 0);
    }
}
