//! Heartbeats and leaves: written to Redis (heartbeats through the
//! flusher, which merges concurrent calls), or accepted into the write
//! buffer while Redis fails, so a member's writes reach Redis in order.

use std::collections::HashMap;

use herenow_core::store::{check_batch, check_beats};
use herenow_core::{Error, Heartbeat, HeartbeatReport, MemberKey, Millis, Result, SpaceName};

use super::RedisStore;
use crate::buffer::Pending;
use crate::writer::{self, BeatArg};

impl RedisStore {
    /// [`PresenceStore::heartbeat`](herenow_core::PresenceStore::heartbeat):
    /// duplicates merged to one entry per member, then buffered, flushed
    /// with concurrent calls, or written directly (see `flush.rs`).
    pub(super) async fn heartbeat(
        &self,
        space: &SpaceName,
        beats: &[Heartbeat],
    ) -> Result<HeartbeatReport> {
        let now = self.ctx.clock.now_ms();
        check_beats(beats, now)?;
        // One write per member: the newest time wins, and the metadata of
        // the newest heartbeat that carried some. Later duplicates are
        // counted as the memory store counts them.
        let mut report = HeartbeatReport::default();
        let mut index: HashMap<&MemberKey, usize> = HashMap::with_capacity(beats.len());
        let mut merged: Vec<BeatArg<'_>> = Vec::with_capacity(beats.len());
        for b in beats {
            let at = b.at_ms.unwrap_or(now);
            match index.get(&b.member) {
                Some(&i) => {
                    let m = &mut merged[i];
                    if at >= m.1 {
                        m.1 = at;
                        if b.meta.is_some() {
                            m.2 = b.meta.as_ref();
                        }
                        report.accepted += 1;
                    } else {
                        report.stale += 1;
                    }
                }
                None => {
                    index.insert(&b.member, merged.len());
                    merged.push((&b.member, at, b.meta.as_ref()));
                }
            }
        }
        // While writes are held (Redis failed and the buffer is not yet
        // written back), this one waits its turn behind the earlier ones.
        if let Some(r) = self.buffer_beats(space, &merged, report, false) {
            return r;
        }
        // Concurrent calls share flushes (see `flush.rs`).
        let written = match self.flusher.submit(space, now, &merged).await {
            Some(r) => r,
            None => self
                .writer
                .write_beats(space, now, &merged)
                .await
                .map(writer::tally),
        };
        match written {
            Ok([accepted, joined, stale]) => {
                report.accepted += accepted;
                report.joined += joined;
                report.stale += stale;
                Ok(report)
            }
            Err(Error::Unavailable { .. }) => self
                .buffer_beats(space, &merged, report, true)
                .expect("a forced hold always buffers"),
            Err(e) => Err(e),
        }
    }

    /// [`PresenceStore::leave`](herenow_core::PresenceStore::leave): one
    /// script per shard, or the buffer while writes are held.
    pub(super) async fn leave(&self, space: &SpaceName, members: &[MemberKey]) -> Result<u64> {
        check_batch(members.len())?;
        let now = self.ctx.clock.now_ms();
        if let Some(r) = self.buffer_leaves(space, members, now, false) {
            return r;
        }
        let args: Vec<(&MemberKey, Option<Millis>)> = members.iter().map(|m| (m, None)).collect();
        match self.writer.write_leaves(space, now, &args).await {
            Ok(n) => Ok(n),
            Err(Error::Unavailable { .. }) => self
                .buffer_leaves(space, members, now, true)
                .expect("a forced hold always buffers"),
            Err(e) => Err(e),
        }
    }

    /// Puts coalesced heartbeats into the write buffer if writes are held
    /// (or `force`: a direct write just failed). `None`: write directly.
    /// A call of which the cap kept nothing answers
    /// [`Error::Unavailable`], so the client retries rather than believe it
    /// was recorded.
    fn buffer_beats(
        &self,
        space: &SpaceName,
        merged: &[BeatArg<'_>],
        mut report: HeartbeatReport,
        force: bool,
    ) -> Option<Result<HeartbeatReport>> {
        let kept = {
            let mut held = self.ctx.health.buffer.hold(force)?;
            merged
                .iter()
                .filter(|(m, at, meta)| {
                    held.put(space, (*m).clone(), Pending::beat(*at, meta.cloned()))
                })
                .count() as u64
        };
        self.ctx.health.wake.notify_one();
        if kept == 0 {
            return Some(Err(buffer_full()));
        }
        // The buffered ones are accepted; whether they are joins is only
        // known when they reach Redis.
        report.accepted += kept;
        Some(Ok(report))
    }

    /// Puts leaves into the write buffer, like
    /// [`buffer_beats`](Self::buffer_beats).
    fn buffer_leaves(
        &self,
        space: &SpaceName,
        members: &[MemberKey],
        now: Millis,
        force: bool,
    ) -> Option<Result<u64>> {
        let kept = {
            let mut held = self.ctx.health.buffer.hold(force)?;
            members
                .iter()
                .filter(|m| held.put(space, (*m).clone(), Pending::leave(now)))
                .count()
        };
        self.ctx.health.wake.notify_one();
        if kept == 0 {
            return Some(Err(buffer_full()));
        }
        Some(Ok(0))
    }
}

fn buffer_full() -> Error {
    Error::Unavailable {
        reason: "redis is unavailable and the write buffer is full".into(),
        source: None,
    }
}
