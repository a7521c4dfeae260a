//! Heartbeats and leaves of the memory store: a call's items split by
//! stripe (`stripes.rs`; a whole space is one stripe), each part handed to
//! its stripe's owner thread or applied under its lock (`owner.rs`), and
//! journaled there.

use super::owner::{self, Beat, Route};
use super::stripes;
use super::{MemoryStore, SpaceMap, check_beats, settle};
use crate::changes::{ChangeRef, Durable};
use crate::error::Result;
use crate::id::{MemberKey, SpaceName};
#[cfg(doc)]
use crate::store::PresenceStore;
use crate::store::{Heartbeat, HeartbeatReport, check_batch};
use crate::time::Millis;

impl MemoryStore {
    /// [`PresenceStore::heartbeat`]: each stripe's part handed to its
    /// owner or applied under its lock.
    pub(super) async fn beat(
        &self,
        space: &SpaceName,
        beats: &[Heartbeat],
    ) -> Result<HeartbeatReport> {
        check_batch(beats.len())?;
        // Every space has the store's stripes (created or restored here).
        let Some(parts) = stripes::split_refs(self.stripes, beats, |b| &b.member) else {
            let (report, durable) = match self.beat_stripe(space, 0, beats) {
                HandOver::Done(out) => out?,
                HandOver::Staged(answer) => owner::answer(answer).await?,
            };
            settle(durable).await?;
            return Ok(report);
        };
        // Checked whole first: a bad item leaves every stripe untouched.
        check_beats(beats, self.shared.clock.now_ms())?;
        // Every stripe's part handed over or applied before any answer is
        // awaited, so busy stripes' owners apply theirs in parallel.
        let handed: Vec<HandOver> = parts
            .iter()
            .enumerate()
            .filter(|(_, p)| !p.is_empty())
            .map(|(k, part)| self.beat_stripe(space, k, part))
            .collect();
        let mut report = HeartbeatReport::default();
        let mut durables = Vec::with_capacity(handed.len());
        let mut failed = None;
        for h in handed {
            let out = match h {
                HandOver::Done(out) => out,
                HandOver::Staged(answer) => owner::answer(answer).await,
            };
            match out {
                Ok((r, durable)) => {
                    add_report(&mut report, r);
                    durables.extend(durable);
                }
                Err(e) => failed = failed.or(Some(e)),
            }
        }
        for d in durables {
            settle(Some(d)).await?;
        }
        match failed {
            Some(e) => Err(e),
            None => Ok(report),
        }
    }

    /// [`PresenceStore::leave`]: each stripe's part under its lock,
    /// journaled there.
    pub(super) async fn leave_now(&self, space: &SpaceName, members: &[MemberKey]) -> Result<u64> {
        check_batch(members.len())?;
        // A leave to an unknown space creates nothing.
        if !self.spaces.read().contains_key(space) {
            return Ok(0);
        }
        let now = self.shared.clock.now_ms();
        let (left, durables) = self.leave_here(space, members, now, |part, durables| {
            durables.extend(self.record(ChangeRef::Leave {
                space,
                at: now,
                members: part,
            })?);
            Ok(())
        })?;
        for d in durables {
            settle(Some(d)).await?;
        }
        Ok(left)
    }

    /// A batch of at least [`owner::HAND_OVER_AT`] heartbeats for stripe
    /// `stripe` of the space `name`, that exists: applied here when the
    /// stripe is free (`Done`), staged for its owner when it is busy
    /// (`Staged`), or `None` to wait for the lock as every other write
    /// does (small batches, new spaces, no owner allowed). See `owner.rs`.
    fn hand_over<B: Beat>(
        &self,
        spaces: &SpaceMap,
        name: &SpaceName,
        stripe: usize,
        beats: &[B],
    ) -> Option<HandOver> {
        if beats.len() < owner::HAND_OVER_AT {
            return None;
        }
        let space = spaces.get(name)?;
        match space
            .cell(stripe)
            .route(&self.shared, name, beats, space.len() > 1)
        {
            Route::Here(mut space) => Some(HandOver::Done(owner::apply(
                &self.shared,
                name,
                &mut space,
                beats,
            ))),
            Route::Owner(answer) => Some(HandOver::Staged(answer)),
            Route::Wait => None,
        }
    }

    /// A heartbeat call's batch for stripe `stripe` of `name` (the whole
    /// batch for a whole space): handed to the stripe's owner, or applied
    /// here under the stripe's lock.
    fn beat_stripe<B: Beat>(&self, name: &SpaceName, stripe: usize, beats: &[B]) -> HandOver {
        if let Some(h) = self.hand_over(&self.spaces.read(), name, stripe, beats) {
            return h;
        }
        HandOver::Done(self.with_space(name, |st| {
            let mut s = st.cell(stripe).lock();
            let out = owner::apply(&self.shared, name, &mut s, beats);
            drop(s);
            out
        }))
    }

    /// Heartbeats applied here, each stripe's under its lock (replay and
    /// restore: nothing journaled).
    pub(super) fn beats_here(
        &self,
        name: &SpaceName,
        beats: &[Heartbeat],
        now: Millis,
    ) -> Result<HeartbeatReport> {
        self.with_space(name, |st| {
            let mut report = HeartbeatReport::default();
            match stripes::split_refs(st.len(), beats, |b| &b.member) {
                None => {
                    let mut s = st.cell(0).lock();
                    report = s.heartbeat(beats, now)?;
                    self.absorb(&mut s);
                }
                Some(parts) => {
                    check_beats(beats, now)?;
                    for (k, part) in parts.iter().enumerate().filter(|(_, p)| !p.is_empty()) {
                        let mut s = st.cell(k).lock();
                        add_report(&mut report, s.heartbeat(part, now)?);
                        self.absorb(&mut s);
                    }
                }
            }
            Ok(report)
        })
    }

    /// Members leave `name` at `at`, each stripe's under its lock; `note`
    /// journals each stripe's part there (replay journals nothing). The
    /// space exists.
    pub(super) fn leave_here(
        &self,
        name: &SpaceName,
        members: &[MemberKey],
        at: Millis,
        mut note: impl FnMut(&[MemberKey], &mut Vec<Durable>) -> Result<()>,
    ) -> Result<(u64, Vec<Durable>)> {
        check_batch(members.len())?;
        self.with_space(name, |st| {
            let mut durables = Vec::new();
            let parts = stripes::split(st.len(), members, |m| m);
            let parts: Vec<&[MemberKey]> = match &parts {
                None => vec![members],
                Some(p) => p.iter().map(Vec::as_slice).collect(),
            };
            let mut left = 0;
            for (k, part) in parts.into_iter().enumerate().filter(|(_, p)| !p.is_empty()) {
                let mut s = st.cell(k).lock();
                let out = s
                    .leave(part, at)
                    .map_err(crate::error::Error::from)
                    .and_then(|n| {
                        note(part, &mut durables)?;
                        Ok(n)
                    });
                self.absorb(&mut s);
                left += out?;
            }
            Ok((left, durables))
        })
    }
}

/// Where [`MemoryStore::hand_over`] put a batch.
enum HandOver {
    /// Applied here: its report and durability, or why not.
    Done(Result<owner::Applied>),
    /// Staged for the stripe's owner thread.
    Staged(tokio::sync::oneshot::Receiver<Result<owner::Applied>>),
}

/// Adds what one stripe's part of a heartbeat call did to the call's report.
fn add_report(total: &mut HeartbeatReport, part: HeartbeatReport) {
    total.accepted += part.accepted;
    total.joined += part.joined;
    total.stale += part.stale;
}
