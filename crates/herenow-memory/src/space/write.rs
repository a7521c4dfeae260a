//! Heartbeats and leaves: the writes members make themselves.
//!
//! [`Space::apply`] is the one place a member is created or moved; a
//! visible connection's attach goes through it too, with the connection as
//! the [`Cause`]. It compares the member's presence before and after (by
//! the watermarks) to choose `join`, `back`, `connect` or `update`.

use std::borrow::Borrow;

use herenow_core::error::InvalidInput;
use herenow_core::event::{EventKind, LeaveReason};
use herenow_core::id::{MemberId, MemberKey, MemberKind};
use herenow_core::meta::Metadata;
use herenow_core::store::{Heartbeat, HeartbeatReport, check_batch, check_beats};
use herenow_core::time::Millis;

use super::Space;
use super::events::{Cause, MarkedStatus};
use crate::seen::SightingNote;

impl Space {
    /// Applies a batch of heartbeats. The whole batch is checked before any
    /// of it is applied, so a bad item leaves the space untouched.
    /// The beats may be borrowed (`&Heartbeat`): a striped space applies
    /// each stripe's part of a call without copying it.
    pub fn heartbeat<B: Borrow<Heartbeat>>(
        &mut self,
        beats: &[B],
        now: Millis,
    ) -> Result<HeartbeatReport, InvalidInput> {
        check_beats(beats, now)?;
        // A batch runs three stages ahead of applying, `AHEAD` beats
        // apart, so the cache misses of many beats overlap instead of
        // each beat waiting on its own in turn: hash the id and prefetch
        // its index group; read the group and prefetch the entry; read
        // the entry and prefetch its list neighbours and block counts.
        // The stages only prefetch (a beat applied in between may change
        // what they guessed, which costs a miss, never a result); beats
        // are applied one by one, in order, exactly as they come.
        const AHEAD: usize = 4;
        const RING: usize = 16;
        let mut hashes = [0u64; RING];
        let mut guesses = [None; RING];
        let mut report = HeartbeatReport::default();
        for step in 0..beats.len() + 3 * AHEAD {
            if let Some(beat) = beats.get(step).map(Borrow::borrow) {
                let hash = self.hash(beat.member.kind, beat.member.id.as_str());
                hashes[step % RING] = hash;
                self.prefetch_group(hash);
            }
            if let Some(j) = step.checked_sub(AHEAD).filter(|&j| j < beats.len()) {
                guesses[j % RING] = self.prefetch_entry(hashes[j % RING]);
            }
            if let Some(j) = step.checked_sub(2 * AHEAD).filter(|&j| j < beats.len())
                && let Some(slot) = guesses[j % RING]
            {
                self.prefetch_neighbours(slot);
            }
            if let Some(j) = step.checked_sub(3 * AHEAD)
                && let Some(beat) = beats.get(j).map(Borrow::borrow)
            {
                let at = beat.at_ms.unwrap_or(now);
                self.apply_hashed(
                    hashes[j % RING],
                    beat.member.kind,
                    &beat.member.id,
                    at,
                    beat.meta.as_ref(),
                    now,
                    &mut report,
                    None,
                );
            }
        }
        Ok(report)
    }

    /// Applies one heartbeat "now" without metadata: the hot path, with no
    /// batch checks and no copy of the id for a known member. Returns
    /// whether the member joined.
    pub fn touch(&mut self, kind: MemberKind, id: &MemberId, now: Millis) -> bool {
        let mut report = HeartbeatReport::default();
        self.apply(kind, id, now, None, now, &mut report, None);
        report.joined == 1
    }

    /// One heartbeat of `member` seen `at`: stale if older than what the
    /// space holds or past retention, else stored and announced.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn apply(
        &mut self,
        kind: MemberKind,
        member: &MemberId,
        at: Millis,
        meta: Option<&Metadata>,
        now: Millis,
        report: &mut HeartbeatReport,
        cause: Option<Cause<'_>>,
    ) {
        let hash = self.hash(kind, member.as_str());
        self.apply_hashed(hash, kind, member, at, meta, now, report, cause);
    }

    /// [`Space::apply`], with the member's index hash already computed.
    #[allow(clippy::too_many_arguments)]
    fn apply_hashed(
        &mut self,
        hash: u64,
        kind: MemberKind,
        member: &MemberId,
        at: Millis,
        meta: Option<&Metadata>,
        now: Millis,
        report: &mut HeartbeatReport,
        cause: Option<Cause<'_>>,
    ) {
        if now.saturating_sub(at) >= self.config.retention_ms {
            report.stale += 1;
            self.sightings
                .push(SightingNote::Backfill(kind, member.clone(), at));
            return;
        }
        let found = self.find_hashed(hash, kind, member.as_str());
        let (slot, old) = match found {
            Some(slot) => {
                let e = &self.entries[slot as usize];
                if at < e.ts {
                    report.stale += 1;
                    return;
                }
                (slot, Some(e.key()))
            }
            None => {
                self.seq += self.seq_step;
                let slot = self.alloc(hash, kind, member.clone().into_compact(), at, self.seq);
                if kind == MemberKind::User {
                    self.sightings
                        .push(SightingNote::Joined(kind, member.clone(), at));
                }
                (slot, None)
            }
        };
        report.accepted += 1;
        let old_status = old.map_or(MarkedStatus::Gone, |k| self.marked_status(k));
        let meta_changed = match meta {
            Some(m) => {
                let changed = self.meta.get(&slot) != Some(m);
                if changed {
                    self.meta.insert(slot, m.clone());
                }
                changed
            }
            None => false,
        };
        let new_key = match old {
            None => {
                self.link(slot);
                self.entries[slot as usize].key()
            }
            Some(old_key) if old_key.0 == at => old_key,
            Some(_) => {
                self.seq += self.seq_step;
                self.relink(slot, at, self.seq);
                (at, self.seq)
            }
        };
        // The marked status only grows with the key: no comparison for a member
        // already online.
        let new_status = if old_status == MarkedStatus::Online {
            MarkedStatus::Online
        } else {
            self.marked_status(new_key)
        };
        let event = match (old_status, new_status) {
            (_, MarkedStatus::Gone) => None,
            (MarkedStatus::Gone, _) => {
                report.joined += 1;
                Some(EventKind::Join)
            }
            (MarkedStatus::Away, MarkedStatus::Online) => Some(EventKind::Back),
            _ if cause.is_some_and(|c| c.opened) => Some(EventKind::Connect),
            // A connection's metadata is its own: compared with what that
            // connection had, not with what the member shows.
            _ if cause.map_or(meta_changed, |c| c.meta_changed) => Some(EventKind::Update),
            _ => None,
        };
        if let Some(kind) = event {
            self.emit_caused(
                kind,
                slot,
                new_status.status(),
                Some(new_key.0),
                None,
                cause,
            );
        }
    }

    /// Members say goodbye at `now`. Returns how many were present.
    ///
    /// A present member is remembered as last seen at `now` (never before
    /// its last heartbeat). One still stored but no longer present (timed
    /// out, not yet expired) is remembered at its last heartbeat: its
    /// presence already ended there, with a timeout `leave` saying so, and
    /// a goodbye from someone absent is not a sighting (as for a member
    /// already remembered, the leave changes nothing anyone can read).
    pub fn leave(&mut self, members: &[MemberKey], now: Millis) -> Result<u64, InvalidInput> {
        check_batch(members.len())?;
        let mut present = 0;
        for m in members {
            let Some(slot) = self.find(m.kind, m.id.as_str()) else {
                continue;
            };
            let key = self.entries[slot as usize].key();
            let mut last = key.0;
            if self.marked_status(key) != MarkedStatus::Gone {
                present += 1;
                self.emit_leave(slot, key.0, LeaveReason::Explicit);
                last = last.max(now);
            }
            self.remove(slot);
            self.sightings
                .push(SightingNote::Ended(m.kind, m.id.clone(), last));
        }
        Ok(present)
    }

    /// Erases user `id` from this space: a `leave` if it was present, and
    /// nothing remembered (the store forgets its sightings itself).
    /// Returns whether it was present.
    pub fn erase_user(&mut self, id: &MemberId) -> bool {
        let Some(slot) = self.find(MemberKind::User, id.as_str()) else {
            return false;
        };
        let key = self.entries[slot as usize].key();
        let present = self.marked_status(key) != MarkedStatus::Gone;
        if present {
            self.emit_leave(slot, key.0, LeaveReason::Explicit);
        }
        self.remove(slot);
        present
    }
}
