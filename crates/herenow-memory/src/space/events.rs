//! What subscribers are told: a member's [`MarkedStatus`] as the watermarks
//! say, and the events the engine emits.
//!
//! Writes, connections and the background sweep decide *which* event a
//! change means; this module only knows how the watermarks classify a key
//! and how an event is built and sent.

use std::sync::Arc;

use herenow_core::conn::ConnId;
use herenow_core::event::{Event, EventKind, LeaveReason};
use herenow_core::follow::changes_status;
use herenow_core::id::{MemberId, MemberKey};
use herenow_core::meta::Metadata;
use herenow_core::outbox::OutboxKind;
use herenow_core::policy::Status;
use herenow_core::time::Millis;

use super::Space;
use super::entry::Key;

/// A member's status as the watermarks mark it: what subscribers have
/// been told. It may lag the clock's verdict
/// ([`herenow_core::policy::SpaceConfig::status`]) until `tick` moves the
/// marks, but it always agrees with the events sent.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
pub(super) enum MarkedStatus {
    Gone,
    Away,
    Online,
}

impl MarkedStatus {
    pub(super) fn status(self) -> Status {
        match self {
            MarkedStatus::Gone => Status::Offline,
            MarkedStatus::Away => Status::Away,
            MarkedStatus::Online => Status::Online,
        }
    }
}

/// The connection behind an event.
#[derive(Clone, Copy)]
pub(super) struct Cause<'a> {
    pub(super) conn: &'a ConnId,
    pub(super) meta: Option<&'a Metadata>,
    /// The connection just became visible (opened, or stopped hiding).
    pub(super) opened: bool,
    /// The connection's metadata differs from what it had.
    pub(super) meta_changed: bool,
}

impl Space {
    /// Where `key` falls against the watermarks.
    pub(super) fn marked_status(&self, key: Key) -> MarkedStatus {
        if key <= self.gone_mark {
            MarkedStatus::Gone
        } else if key <= self.away_mark {
            MarkedStatus::Away
        } else {
            MarkedStatus::Online
        }
    }

    /// Sends an event about `slot`, showing the member's own metadata.
    pub(super) fn emit(
        &self,
        kind: EventKind,
        slot: u32,
        status: Status,
        last_seen: Option<Millis>,
        reason: Option<LeaveReason>,
    ) {
        self.emit_caused(kind, slot, status, last_seen, reason, None);
    }

    /// Sends the leave of `slot`, last seen at `last_seen`, for `reason`.
    pub(super) fn emit_leave(&self, slot: u32, last_seen: Millis, reason: LeaveReason) {
        self.emit(
            EventKind::Leave,
            slot,
            Status::Offline,
            Some(last_seen),
            Some(reason),
        );
    }

    /// [`Space::emit`], for an event a connection caused: it names the
    /// connection and carries the connection's metadata.
    pub(super) fn emit_caused(
        &self,
        kind: EventKind,
        slot: u32,
        status: Status,
        last_seen: Option<Millis>,
        reason: Option<LeaveReason>,
        cause: Option<Cause<'_>>,
    ) {
        let e = &self.entries[slot as usize];
        // Occupancy follows the events, whoever listens.
        let (occupied, vacated) = match kind {
            EventKind::Join => {
                self.present.set(self.present.get() + 1);
                (self.present.get() == 1, false)
            }
            EventKind::Leave => {
                self.present.set(self.present.get().saturating_sub(1));
                (false, self.present.get() == 0)
            }
            _ => (false, false),
        };
        let outboxed = self
            .outboxing()
            .then(|| OutboxKind::of_event(kind))
            .flatten();
        let followed = changes_status(kind)
            && self
                .follow
                .as_ref()
                .is_some_and(|tap| tap.wants(e.kind(), &e.id));
        if self.events.receiver_count() == 0 && !followed && outboxed.is_none() {
            return;
        }
        let event = Event {
            space: self.name.clone(),
            kind,
            member: MemberKey {
                kind: e.kind(),
                id: MemberId::from_compact_unchecked(e.id.clone()),
            },
            status,
            last_seen_ms: last_seen,
            meta: match cause {
                Some(c) => c.meta.cloned(),
                None => self.meta.get(&slot).cloned(),
            },
            reason,
            conn: cause.map(|c| c.conn.clone()),
        };
        let event = Arc::new(event);
        if followed {
            self.followed.borrow_mut().push(event.clone());
        }
        if let Some(ok) = outboxed {
            let mut out = self.outboxed.borrow_mut();
            if occupied {
                out.push((OutboxKind::Occupied, None));
            }
            out.push((ok, Some(event.clone())));
            if vacated {
                out.push((OutboxKind::Vacated, None));
            }
        }
        // An error only means nobody listens any more.
        let _ = self.events.send(event);
    }
}
