//! The memory store's webhook outbox ([`crate::outbox`]): a bounded queue
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

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::hash::BuildHasher;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use parking_lot::Mutex;

use crate::event::Event;
use crate::id::SpaceName;
use crate::outbox::{OutboxEvent, OutboxKind, OutboxOptions, OutboxStats};
use crate::time::Millis;

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
    /// Random per process: with `next`, ids unique across restarts even
    /// without a data directory.
    epoch: u64,
    /// Ids given so far.
    issued: u64,
    /// The next local sequence number; the order of the queue.
    next: u64,
    events: BTreeMap<u64, OutboxEvent>,
    by_id: HashMap<String, u64>,
    /// Never claimed, or handed back by a takeover.
    unclaimed: BTreeSet<u64>,
    /// Spaces with claimed, unacknowledged events, and who claimed them.
    owners: HashMap<SpaceName, Owner>,
    /// When each consumer last called `claim`.
    consumers: HashMap<String, Millis>,
    trimmed: u64,
}

struct Owner {
    consumer: String,
    claimed: BTreeSet<u64>,
}

/// The most consumers remembered: a server has one; more than this means
/// names are made up per call, and the oldest are forgotten.
const MAX_CONSUMERS: usize = 1_024;

impl Queue {
    fn new(options: OutboxOptions) -> Self {
        Self {
            options,
            epoch: std::collections::hash_map::RandomState::new().hash_one(0u8),
            issued: 0,
            next: 0,
            events: BTreeMap::new(),
            by_id: HashMap::new(),
            unclaimed: BTreeSet::new(),
            owners: HashMap::new(),
            consumers: HashMap::new(),
            trimmed: 0,
        }
    }

    fn fresh_id(&mut self) -> String {
        self.issued += 1;
        format!("{:016x}-{}", self.epoch, self.issued)
    }

    /// Adds an event with its id given; trims the oldest past the cap.
    fn push(&mut self, event: OutboxEvent) {
        if self.by_id.contains_key(&event.id) {
            return;
        }
        let seq = self.next;
        self.next += 1;
        self.by_id.insert(event.id.clone(), seq);
        self.events.insert(seq, event);
        self.unclaimed.insert(seq);
        while self.events.len() as u64 > self.options.max_events.max(1) {
            let Some((&oldest, _)) = self.events.first_key_value() else {
                break;
            };
            self.remove(oldest);
            self.trimmed += 1;
        }
    }

    /// Forgets event `seq`, wherever it is.
    fn remove(&mut self, seq: u64) -> bool {
        let Some(event) = self.events.remove(&seq) else {
            return false;
        };
        self.by_id.remove(&event.id);
        if !self.unclaimed.remove(&seq)
            && let Some(owner) = self.owners.get_mut(&event.space)
        {
            owner.claimed.remove(&seq);
            if owner.claimed.is_empty() {
                self.owners.remove(&event.space);
            }
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
                self.unclaimed.extend(owner.claimed);
            }
        }
        self.touch(consumer, now);
        let mut out = Vec::new();
        let mut taken = Vec::new();
        for &seq in &self.unclaimed {
            if out.len() >= max {
                break;
            }
            let event = &self.events[&seq];
            match self.owners.get_mut(&event.space) {
                Some(o) if o.consumer != consumer => continue,
                Some(o) => {
                    o.claimed.insert(seq);
                }
                None => {
                    self.owners.insert(
                        event.space.clone(),
                        Owner {
                            consumer: consumer.to_owned(),
                            claimed: BTreeSet::from([seq]),
                        },
                    );
                }
            }
            taken.push(seq);
            out.push(event.clone());
        }
        for seq in taken {
            self.unclaimed.remove(&seq);
        }
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
            depth: self.events.len() as u64,
            pending: self.owners.values().map(|o| o.claimed.len() as u64).sum(),
            trimmed: self.trimmed,
        }
    }
}

impl Outbox {
    /// Turns capture on with `options` (again: new options).
    pub(super) fn open(&self, options: OutboxOptions) {
        self.queue.lock().options = options;
        self.capturing.store(true, Ordering::Relaxed);
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
            let id = q.fresh_id();
            let e = match event {
                Some(e) => OutboxEvent::of_member(id, now, &e),
                None => Some(OutboxEvent::of_space(id, now, space.clone(), kind)),
            };
            events.extend(e);
        }
        for e in &events {
            q.push(e.clone());
        }
        record(&events);
    }

    /// Restores journaled events, as at start.
    pub(super) fn restore(&self, events: &[OutboxEvent]) {
        let mut q = self.queue.lock();
        for e in events {
            q.push(e.clone());
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
            if let Some(seq) = q.by_id.get(id).copied() {
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
        self.queue.lock().stats()
    }

    /// Every event kept, in order: for the snapshot.
    pub(super) fn export(&self) -> Vec<OutboxEvent> {
        self.queue.lock().events.values().cloned().collect()
    }
}
