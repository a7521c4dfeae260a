//! Background work ([`PresenceStore::tick`](herenow_core::PresenceStore::tick)):
//! each registered space, shard by shard, under a per-shard lease so that
//! of many stores on one Redis one sweeps a shard at a time. The sweep
//! script closes expired connections first (its own budget), then moves
//! the watermarks and expires members, in bounded steps; an empty space
//! leaves the registry.

use std::time::Instant;

use redis::Value;

use herenow_core::{Result, SpaceName, TickReport};

use super::RedisStore;
use crate::conn_scripts;
use crate::keys::SpaceKeys;
use crate::reply::{array, int};
use crate::scripts;
use crate::writer::TOUCH_EVERY_MS;

impl RedisStore {
    /// [`PresenceStore::tick`](herenow_core::PresenceStore::tick): first
    /// drops event channels nobody listens to, then walks the registry in
    /// pages of 256 names and sweeps each space.
    pub(super) async fn sweep(&self) -> Result<TickReport> {
        {
            let _guard = self.sub_lock.lock().await;
            self.prune_channels().await;
        }
        let mut report = TickReport::default();
        let (names, _) = self.ctx.keys.registry();
        let mut start = "-".to_owned();
        loop {
            let mut c = self.ctx.client.clone();
            let batch: Vec<String> = self
                .ctx
                .io("tick", async {
                    redis::cmd("ZRANGEBYLEX")
                        .arg(&names)
                        .arg(&start)
                        .arg("+")
                        .arg("LIMIT")
                        .arg(0)
                        .arg(256)
                        .query_async(&mut c)
                        .await
                })
                .await?;
            for name in &batch {
                if let Ok(space) = SpaceName::new(name) {
                    self.sweep_space(&space, &mut report).await?;
                }
            }
            match batch.last() {
                Some(last) if batch.len() == 256 => start = format!("({last}"),
                _ => return Ok(report),
            }
        }
    }

    /// Background work on every shard of `space` (at once), then drops the
    /// space from the registry if nothing is stored in any shard.
    pub(super) async fn sweep_space(
        &self,
        space: &SpaceName,
        report: &mut TickReport,
    ) -> Result<()> {
        let shards = self.ctx.keys.all(space);
        let done =
            futures::future::try_join_all(shards.iter().map(|k| self.sweep_shard(k))).await?;
        let mut left = 0;
        for (r, stored) in done {
            report.expired += r.expired;
            report.transitions += r.transitions;
            report.connections_expired += r.connections_expired;
            report.max_hold_us = report.max_hold_us.max(r.max_hold_us);
            left += stored;
        }
        if left == 0 {
            let now = self.ctx.clock.now_ms();
            let (names, touched) = self.ctx.keys.registry();
            let cutoff = now.saturating_sub(2 * TOUCH_EVERY_MS);
            let mut c = self.ctx.client.clone();
            let dropped: i64 = self
                .ctx
                .io("unregister", async {
                    scripts::UNREGISTER
                        .key(names)
                        .key(touched)
                        .key(self.ctx.keys.registry_shards())
                        .arg(space.as_str())
                        .arg(cutoff)
                        .invoke_async(&mut c)
                        .await
                })
                .await?;
            report.spaces_dropped += dropped as u64;
        }
        Ok(())
    }

    /// Bounded steps of background work on one shard until nothing is left
    /// to do, or nothing at all if another store holds its sweep lease.
    /// Returns what it did and how many members and connections the shard
    /// still stores.
    pub(super) async fn sweep_shard(&self, k: &SpaceKeys) -> Result<(TickReport, i64)> {
        let d = self.ctx.defaults_args();
        let lease_ms = self.ctx.opts.lease.as_millis().max(1) as u64;
        let mut report = TickReport::default();
        loop {
            let now = self.ctx.clock.now_ms();
            let started = Instant::now();
            // Connections first (their own budget), then the watermarks
            // and expiry of members: one script call.
            let mut inv = conn_scripts::SWEEP.prepare_invoke();
            k.add_to(&mut inv);
            inv.arg(now)
                .arg(&d[..])
                .arg(self.ctx.publish_cmd())
                .arg(&k.channel)
                .arg(self.ctx.opts.tick_budget)
                .arg(&self.owner)
                .arg(lease_ms)
                .arg(self.ctx.opts.tick_budget);
            let mut c = self.ctx.client.clone();
            let v: Value = self
                .ctx
                .io("tick", async { inv.invoke_async(&mut c).await })
                .await?;
            report.max_hold_us = report.max_hold_us.max(started.elapsed().as_micros() as u64);
            let v = array(v)?;
            report.expired += int(v.first())? as u64;
            report.transitions += int(v.get(1))? as u64;
            report.connections_expired += int(v.get(4))? as u64;
            let more = int(v.get(2))? != 0;
            let left = int(v.get(3))?;
            if left < 0 {
                // Another store holds the sweep lease: it does this shard.
                return Ok((report, int(v.get(5))?));
            }
            if !more {
                return Ok((report, left));
            }
        }
    }
}
