//! Heartbeats and leaves of the memory store: a call's items split by
//! stripe (`stripes.rs`; a whole space is one stripe), each part applied
//! under its stripe's lock and journaled there.

use std::borrow::{Borrow, Cow};

use herenow_core::error::{Error, Result};
use herenow_core::id::{MemberKey, SpaceName};
#[cfg(doc)]
use herenow_core::store::PresenceStore;
use herenow_core::store::{Heartbeat, HeartbeatReport, check_batch, check_beats};
use herenow_core::time::Millis;

use super::shared::Shared;
use super::space::Space;
use super::stripes;
use super::{MemoryStore, settle};
use crate::changes::{ChangeRef, Durable};

impl MemoryStore {
    /// [`PresenceStore::heartbeat`] (see the module doc).
    pub(super) async fn beat(
        &self,
        space: &SpaceName,
        beats: &[Heartbeat],
    ) -> Result<HeartbeatReport> {
        check_batch(beats.len())?;
        // Every space has the store's stripes (created or restored here).
        let Some(parts) = stripes::split_refs(self.stripes, beats, |b| &b.member) else {
            let (report, durable) = self.beat_stripe(space, 0, beats)?;
            settle(durable).await?;
            return Ok(report);
        };
        // Checked whole first: a bad item leaves every stripe untouched.
        check_beats(beats, self.shared.clock.now_ms())?;
        // Every stripe's part is applied, even after one fails, before
        // any durability is awaited.
        let mut report = HeartbeatReport::default();
        let mut durables = Vec::new();
        let mut failed = None;
        for (k, part) in parts.iter().enumerate().filter(|(_, p)| !p.is_empty()) {
            match self.beat_stripe(space, k, part) {
                Ok((r, durable)) => {
                    report += r;
                    durables.extend(durable);
                }
                Err(e) => failed = failed.or(Some(e)),
            }
        }
        for d in durables {
            settle(Some(d)).await?;
        }
        failed.map_or(Ok(report), Err)
    }

    /// [`PresenceStore::leave`] (see the module doc).
    pub(super) async fn leave_now(&self, space: &SpaceName, members: &[MemberKey]) -> Result<u64> {
        check_batch(members.len())?;
        // A leave to an unknown space creates nothing.
        if !self.spaces.read().contains_key(space) {
            return Ok(0);
        }
        let now = self.shared.clock.now_ms();
        let (left, durables) = self.leave_here(space, members, now, |part, durables| {
            durables.extend(self.shared.record(ChangeRef::Leave {
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

    /// A heartbeat call's batch for stripe `stripe` of `name` (the whole
    /// batch for a whole space), applied under the stripe's lock.
    fn beat_stripe<B: BatchedHeartbeat>(
        &self,
        name: &SpaceName,
        stripe: usize,
        beats: &[B],
    ) -> Result<Applied> {
        self.with_space(name, |st| {
            apply(&self.shared, name, &mut st.cell(stripe).lock(), beats)
        })
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
                    self.shared.absorb(&mut s);
                }
                Some(parts) => {
                    check_beats(beats, now)?;
                    for (k, part) in parts.iter().enumerate().filter(|(_, p)| !p.is_empty()) {
                        let mut s = st.cell(k).lock();
                        report += s.heartbeat(part, now)?;
                        self.shared.absorb(&mut s);
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
                let out = s.leave(part, at).map_err(Error::from).and_then(|n| {
                    note(part, &mut durables)?;
                    Ok(n)
                });
                self.shared.absorb(&mut s);
                left += out?;
            }
            Ok((left, durables))
        })
    }
}

/// A heartbeat as a batch holds it: owned (a whole call) or borrowed (a
/// striped space's part of a call, `stripes.rs`, applied without a copy).
pub(super) trait BatchedHeartbeat: Borrow<Heartbeat> + Sized {
    /// The beats as one slice of owned heartbeats, for the journal: the
    /// slice itself, or a copy of borrowed ones.
    fn whole(beats: &[Self]) -> Cow<'_, [Heartbeat]>;
}

impl BatchedHeartbeat for Heartbeat {
    fn whole(beats: &[Self]) -> Cow<'_, [Heartbeat]> {
        Cow::Borrowed(beats)
    }
}

impl BatchedHeartbeat for &Heartbeat {
    fn whole(beats: &[Self]) -> Cow<'_, [Heartbeat]> {
        Cow::Owned(beats.iter().map(|b| (*b).clone()).collect())
    }
}

/// What a heartbeat call gets back once applied: its report, and what to
/// wait on for durability.
type Applied = (HeartbeatReport, Option<Durable>);

/// Applies one heartbeat call to `space` (named `name`) under its lock,
/// at the clock's time: checked whole, journaled, then absorbed.
fn apply<B: BatchedHeartbeat>(
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
