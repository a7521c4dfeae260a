//! The webhook outbox's switch: whether the stores sharing a Redis
//! capture (see [`crate::outbox_scripts`]), with what cap, and how long
//! their streams live.
//!
//! A server delivers webhooks only where it has endpoints (its own, or
//! spaces'), yet the writes every server makes must be captured for it.
//! So a store whose server opened the outbox
//! ([`open_outbox`](RedisStore::open_outbox)) writes the switch, the cap
//! (`P:{~outbox}:open`) and the keep time (`P:{~outbox}:keep`, how long a
//! stream lives after its newest event), for a lease, and renews it on
//! every `tick`; every other store reads it when it connects and on every
//! tick, and captures while it is there.
//!
//! The lease is the keep time (the delivering servers' maximum age of an
//! event, a day by default), at least a minute
//! ([`OutboxOptions::lease_ms`]). Once no store that opened the outbox has
//! renewed it for that long (every server with webhooks stopped), the
//! switch lapses, the other stores stop capturing at their next tick, and
//! what they captured expires with its streams, every event in them by
//! then too old to deliver. So a `--webhook` server started once costs
//! the others nothing a day after it is gone. A server with webhooks that
//! comes back after that long delivers what happened from its return on.
//!
//! A store that opened captures with its own cap and keep time, whatever
//! the switch says; with several such servers of different settings the
//! switch holds the last renewal's.

use std::sync::atomic::Ordering;

use redis::Value;

use herenow_core::outbox::OutboxOptions;
use herenow_core::{InvalidInput, Millis, Result};

use super::RedisStore;
use crate::outbox_scripts::{READ_SWITCH, RENEW_SWITCH};
use crate::reply::bad_reply;

/// The longest keep time and lease given to Redis (ten years): far past
/// any useful maximum age, and far from where `PEXPIRE` overflows.
const MAX_KEEP_MS: Millis = 10 * 365 * 86_400_000;

impl RedisStore {
    /// [`PresenceStore::outbox_open`](herenow_core::PresenceStore::outbox_open):
    /// from now on this store's scripts capture, and so do every other
    /// store's on the same Redis while this one renews the switch (see the
    /// module documentation). So a server without webhook endpoints still
    /// captures the changes it makes, and the servers with endpoints
    /// deliver them.
    pub(super) async fn open_outbox(&self, options: OutboxOptions) -> Result<()> {
        if options.max_events == 0 {
            return Err(InvalidInput::BadConfig {
                why: "the outbox must keep at least one event",
            }
            .into());
        }
        if options.keep_ms == 0 {
            return Err(InvalidInput::BadConfig {
                why: "the outbox must keep events for some time",
            }
            .into());
        }
        let options = OutboxOptions {
            keep_ms: options.keep_ms.min(MAX_KEEP_MS),
            ..options
        };
        *self.opened.lock() = Some(options);
        self.capture(options.max_events, options.keep_ms);
        self.renew_switch(options, false).await
    }

    /// Turns the switch on with the default cap and keep time unless it
    /// is on already (a server with webhooks set its own, which stay), and
    /// captures: a space names endpoints, and every server's claim loop
    /// opens its own outbox within seconds.
    pub(super) async fn open_outbox_if_closed(&self) -> Result<()> {
        self.renew_switch(OutboxOptions::default(), true).await?;
        self.follow_outbox_switch().await
    }

    /// On connect and every tick: renews the switch if this store opened
    /// the outbox, else captures as the switch says (and stops when it
    /// lapsed).
    pub(super) async fn follow_outbox_switch(&self) -> Result<()> {
        let opened = *self.opened.lock();
        if let Some(options) = opened {
            return self.renew_switch(options, false).await;
        }
        let (cap, keep) = self.read_switch().await?;
        self.capture(cap, keep);
        Ok(())
    }

    /// Captures with `cap` (0: not at all) and `keep`.
    fn capture(&self, cap: u64, keep: Millis) {
        // The keep time first: a script that sees the cap sees it too.
        self.ctx.outbox_keep.store(keep, Ordering::Relaxed);
        self.ctx.outbox_cap.store(cap, Ordering::Relaxed);
    }

    async fn renew_switch(&self, options: OutboxOptions, only_if_off: bool) -> Result<()> {
        let keys = &self.ctx.keys;
        let (switch, keep) = (keys.outbox_switch(), keys.outbox_keep());
        let mut c = self.ctx.client.clone();
        self.ctx
            .io("outbox_switch", async {
                RENEW_SWITCH
                    .key(&switch)
                    .key(&keep)
                    .arg(options.max_events)
                    .arg(options.keep_ms)
                    .arg(options.lease_ms().min(MAX_KEEP_MS))
                    .arg(if only_if_off { "1" } else { "0" })
                    .invoke_async::<Value>(&mut c)
                    .await
            })
            .await?;
        Ok(())
    }

    /// The switch's cap (0 when it is off) and keep time (the default
    /// when an earlier version, which wrote none, turned it on).
    async fn read_switch(&self) -> Result<(u64, Millis)> {
        let keys = &self.ctx.keys;
        let (switch, keep) = (keys.outbox_switch(), keys.outbox_keep());
        let mut c = self.ctx.client.clone();
        let v: Vec<Option<String>> = self
            .ctx
            .io("outbox_switch", async {
                READ_SWITCH
                    .key(&switch)
                    .key(&keep)
                    .arg(OutboxOptions::default().lease_ms())
                    .invoke_async(&mut c)
                    .await
            })
            .await?;
        let number = |s: Option<&String>| -> Result<Option<u64>> {
            s.map(|s| s.parse().map_err(|_| bad_reply("the outbox's switch")))
                .transpose()
        };
        let Some(cap) = number(v.first().and_then(Option::as_ref))? else {
            return Ok((0, 0));
        };
        let keep = number(v.get(1).and_then(Option::as_ref))?
            .filter(|&k| k > 0)
            .unwrap_or(OutboxOptions::default().keep_ms)
            .min(MAX_KEEP_MS);
        Ok((cap, keep))
    }
}
