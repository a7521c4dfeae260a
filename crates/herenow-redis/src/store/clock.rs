//! How far this store's clock is from Redis' (`TIME`), and why that
//! matters: [`RedisOptions::max_clock_skew`](crate::RedisOptions::max_clock_skew).
//! Time still comes from the injected clock; Redis' is only read to compare.

use std::sync::atomic::Ordering;

use herenow_core::Result;
use redis::Value;

use super::RedisStore;
use crate::ctx::NO_SKEW;

/// How often the skew is measured again, by the store's clock.
const MEASURE_EVERY_MS: u64 = 10_000;

impl RedisStore {
    /// Measures the skew when it is due (at connect, then every ten
    /// seconds on `tick`), if this store was asked to watch it. Logs once
    /// per measure while it is past the bound.
    pub(super) async fn measure_clock_skew(&self) -> Result<()> {
        let Some(max) = self.ctx.opts.max_clock_skew else {
            return Ok(());
        };
        let now = self.ctx.clock.now_ms();
        let last = self.ctx.skew_measured.load(Ordering::Relaxed);
        if self.ctx.clock_skew.load(Ordering::Relaxed) != NO_SKEW
            && now.saturating_sub(last) < MEASURE_EVERY_MS
        {
            return Ok(());
        }
        let before = self.ctx.clock.now_ms();
        let reply: Value = self.ctx.query("clock", &redis::cmd("TIME")).await?;
        let after = self.ctx.clock.now_ms();
        let Some(redis_ms) = time_ms(&reply) else {
            return Ok(());
        };
        // Redis answered somewhere between the two readings.
        let ours = (before + after) / 2;
        let skew = i64::try_from(redis_ms).unwrap_or(i64::MAX) - i64::try_from(ours).unwrap_or(0);
        self.ctx.clock_skew.store(skew, Ordering::Relaxed);
        self.ctx.skew_measured.store(after, Ordering::Relaxed);
        if skew.unsigned_abs() > max.as_millis() as u64 {
            tracing::warn!(
                skew_ms = skew,
                max_ms = max.as_millis() as u64,
                "this server's clock differs from Redis' by more than allowed; it reports not ready until it is fixed"
            );
        }
        Ok(())
    }

    /// Redis' clock minus this store's, in ms, as last measured; `None`
    /// when the store does not watch it or has not measured yet.
    pub fn clock_skew(&self) -> Option<i64> {
        let skew = self.ctx.clock_skew.load(Ordering::Relaxed);
        (skew != NO_SKEW).then_some(skew)
    }

    /// The measured skew when it is past
    /// [`RedisOptions::max_clock_skew`](crate::RedisOptions::max_clock_skew):
    /// why this store is not fit to serve.
    pub fn clock_skew_exceeded(&self) -> Option<i64> {
        let max = self.ctx.opts.max_clock_skew?;
        self.clock_skew()
            .filter(|s| s.unsigned_abs() > max.as_millis() as u64)
    }
}

/// `TIME`'s `[seconds, microseconds]` as milliseconds.
fn time_ms(reply: &Value) -> Option<u64> {
    let Value::Array(parts) = reply else {
        return None;
    };
    let num = |v: &Value| -> Option<u64> {
        match v {
            Value::BulkString(b) => std::str::from_utf8(b).ok()?.parse().ok(),
            Value::Int(i) => u64::try_from(*i).ok(),
            _ => None,
        }
    };
    Some(num(parts.first()?)? * 1_000 + num(parts.get(1)?)? / 1_000)
}
