//! The replayer: one task per store that writes the
//! [`WriteBuffer`](crate::buffer::WriteBuffer) back when Redis answers
//! again.
//!
//! While writes are held it pings Redis with a jittered, doubling backoff
//! (up to `backoff_max`, 5 s by default), cut short when any other call
//! of the store gets an answer from Redis meanwhile (a read, or the ping
//! of [`RedisStore::probe`](crate::RedisStore::probe) that readiness
//! probes send: writes wait in the buffer): then it tries again at once,
//! though not within
//! [`ANSWERED_GAP`] of its last try, so a Redis that is back is noticed
//! at the next call rather than at the end of a long backoff, and a
//! cluster with one node down, whose other nodes keep answering, is not
//! pinged in a loop.
//!
//! Once Redis answers it takes bounded batches of one space from the
//! buffer and writes several of them at once (the multiplexed client
//! pipelines them), with the [`Writer`]'s scripts, the ones a direct call
//! uses. Heartbeats carry their buffered times, so a newer heartbeat that
//! reached Redis first still wins; leaves carry their time too, so a
//! replayed leave never removes a newer heartbeat. While writes are not
//! held it pings once a [`PROBE_EVERY`], so readiness notices an outage
//! even when no request does.

use std::hash::BuildHasher;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use tokio::sync::watch;

use herenow_core::{Error, MemberKey, Millis, Result, SpaceName};

use crate::buffer::Pending;
use crate::writer::{BeatArg, Writer};

/// How often a healthy store pings Redis, so that readiness turns false
/// during an outage nobody has written or read through yet.
pub const PROBE_EVERY: Duration = Duration::from_secs(1);

/// The shortest time between two tries of the replayer while other calls
/// keep getting answers from Redis (see the module documentation).
pub(crate) const ANSWERED_GAP: Duration = Duration::from_millis(100);

/// Batches the replayer writes at once.
const REPLAY_CONCURRENCY: usize = 8;

/// How the replayer backs off and how much it writes at once.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ReplayTuning {
    /// Most members one replayed script call writes.
    pub batch: usize,
    /// First wait after a failed ping.
    pub backoff_min: Duration,
    /// Longest wait between pings.
    pub backoff_max: Duration,
}

/// Writes one batch taken from the buffer: its leaves first, then the
/// heartbeats that came after them.
async fn replay(w: &Writer, space: &SpaceName, items: &[(MemberKey, Pending)]) -> Result<()> {
    let now = w.ctx().clock.now_ms();
    let leaves: Vec<(&MemberKey, Option<Millis>)> = items
        .iter()
        .filter_map(|(m, p)| p.leave.map(|at| (m, Some(at))))
        .collect();
    if !leaves.is_empty() {
        w.write_leaves(space, now, &leaves).await?;
    }
    let beats: Vec<BeatArg<'_>> = items
        .iter()
        .filter_map(|(m, p)| p.beat.as_ref().map(|b| (m, b.at, b.meta.as_ref())))
        .collect();
    if !beats.is_empty() {
        w.write_beats(space, now, &beats).await?;
    }
    Ok(())
}

/// Writes everything buffered, [`REPLAY_CONCURRENCY`] batches at a time.
/// A batch Redis could not take goes back into the buffer and ends the
/// drain with the error; a batch Redis refused as a bug is dropped
/// (retrying it would fail forever) and counted.
async fn drain(w: &Writer, batch: usize) -> Result<()> {
    let buffer = &w.ctx().health.buffer;
    loop {
        let taken: Vec<_> = std::iter::from_fn(|| buffer.take(batch))
            .take(REPLAY_CONCURRENCY)
            .collect();
        if taken.is_empty() {
            return Ok(());
        }
        let results =
            futures::future::join_all(taken.iter().map(|(s, items)| replay(w, s, items))).await;
        let mut failed = None;
        for ((space, items), r) in taken.into_iter().zip(results) {
            match r {
                Ok(()) => {
                    w.ctx()
                        .health
                        .replayed
                        .fetch_add(items.len() as u64, Ordering::Relaxed);
                }
                Err(e @ Error::Unavailable { .. }) => {
                    buffer.restore(&space, items);
                    failed = Some(e);
                }
                Err(e) => {
                    tracing::error!(
                        space = space.as_str(),
                        members = items.len(),
                        error = %e,
                        "redis refused buffered writes; they are dropped"
                    );
                    buffer.add_dropped(items.len() as u64);
                }
            }
        }
        if let Some(e) = failed {
            return Err(e);
        }
    }
}

/// The replayer: see the module documentation. Runs until `stop` changes
/// (or its sender is dropped), then makes one last attempt, bounded by the
/// timeout, to write what is buffered.
pub(crate) async fn run(w: Arc<Writer>, tuning: ReplayTuning, mut stop: watch::Receiver<bool>) {
    let ctx = w.ctx();
    let health = &ctx.health;
    let mut backoff = tuning.backoff_min;
    loop {
        if !health.buffer.holding() {
            tokio::select! {
                _ = stop.changed() => break,
                _ = health.wake.notified() => {}
                _ = tokio::time::sleep(PROBE_EVERY) => {}
            }
            if !health.buffer.holding() {
                // A failed probe holds writes by itself (see `Ctx::io`).
                let _ = ctx.ping().await;
                continue;
            }
        }
        let tried = tokio::time::Instant::now();
        let r = match ctx.ping().await {
            Ok(()) => drain(&w, tuning.batch).await,
            Err(e) => Err(e),
        };
        match r {
            Ok(()) => {
                backoff = tuning.backoff_min;
                if !health.up.swap(true, Ordering::SeqCst) {
                    tracing::info!("redis answers again; writing buffered heartbeats back");
                }
                if health.buffer.settle() {
                    tracing::info!(
                        replayed = health.replayed.load(Ordering::Relaxed),
                        "write buffer drained; writing to redis directly"
                    );
                }
            }
            Err(e) => {
                if health.up.swap(false, Ordering::SeqCst) {
                    tracing::warn!(
                        error = %e,
                        "redis unavailable: heartbeats and leaves are buffered until it answers"
                    );
                }
                tokio::select! {
                    _ = stop.changed() => break,
                    _ = tokio::time::sleep(jitter(backoff)) => {}
                    _ = async {
                        health.answered.notified().await;
                        tokio::time::sleep_until(tried + ANSWERED_GAP).await;
                    } => {}
                }
                backoff = (backoff * 2).min(tuning.backoff_max);
            }
        }
    }
    if health.buffer.counts().buffered > 0 {
        let last = async {
            ctx.ping().await?;
            drain(&w, tuning.batch).await
        };
        match tokio::time::timeout(ctx.opts.timeout, last).await {
            Ok(Ok(())) => {}
            _ => tracing::warn!(
                lost = health.buffer.counts().buffered,
                "store stopped with buffered writes redis did not take"
            ),
        }
    }
}

/// Somewhere between half of `d` and `d`, so that stores restarted together
/// do not reconnect in lockstep.
fn jitter(d: Duration) -> Duration {
    // A fresh RandomState is randomly keyed: enough randomness for spreading
    // retries, without a dependency.
    let r = std::collections::hash_map::RandomState::new().hash_one(Instant::now());
    d / 2 + d.mul_f64((r % 1_000) as f64 / 2_000.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jitter_stays_within_half_and_whole() {
        for ms in [50, 400, 5_000] {
            let d = Duration::from_millis(ms);
            for _ in 0..100 {
                let j = jitter(d);
                assert!(j >= d / 2 && j <= d, "{j:?} for {d:?}");
            }
        }
    }
}
