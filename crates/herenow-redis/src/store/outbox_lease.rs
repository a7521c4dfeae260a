//! The webhook outbox's switch: whether the stores sharing a Redis
//! capture (see [`crate::outbox_scripts`]), with what cap, and how long
//! their streams live.
//!
//! A server delivers webhooks only where it has endpoints (its own, or
//! spaces'), yet the writes every server makes must be captured for it.
//! So a store whose server opened the outbox
//! ([`outbox_open`](RedisStore::outbox_open)) writes the switch, the cap
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
//!
//! A store opened for spaces' endpoints alone (a server without endpoints
//! of its own: every server opens so once a space named some) renews and
//! captures only while some space may name endpoints, and otherwise
//! follows the switch like any other. Which spaces may is a list,
//! `P:{~outbox}:hooked` (`hooks.rs`): a superset, since clearing a
//! space's endpoints leaves it listed; when and how the store looks and
//! cleans it: `spaces_name_hooks`, `look_for_hooks`. So capture stops a
//! lease after the last space's endpoints were cleared.

use std::sync::atomic::Ordering;

use redis::Value;

use herenow_core::outbox::OutboxOptions;
use herenow_core::{InvalidInput, Millis, Result, SpaceName};

use super::RedisStore;
use crate::outbox_scripts::{READ_SWITCH, RENEW_SWITCH};
use crate::reply::bad_reply;

/// How often a store opened for spaces' endpoints alone looks whether
/// some space still names any (sooner when their version moves).
pub const HOOKS_LOOK_MS: Millis = 60_000;
/// Listed spaces read per look.
const HOOKS_SAMPLE: usize = 64;

/// What a store opened for spaces' endpoints alone last found.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct HooksSeen {
    /// The endpoints' version then.
    version: u64,
    /// When (the store's clock); `None`: look at the next tick.
    looked: Option<Millis>,
    /// Whether some space may name endpoints.
    any: bool,
    /// Whether the look took spaces off the list (more may be left to
    /// take off: look again at the next tick).
    cleaning: bool,
}

/// The longest keep time and lease given to Redis (ten years): far past
/// any useful maximum age, and far from where `PEXPIRE` overflows.
const MAX_KEEP_MS: Millis = 10 * 365 * 86_400_000;

impl RedisStore {
    /// [`WebhookOutbox::outbox_open`](herenow_core::WebhookOutbox::outbox_open):
    /// from now on this store's scripts capture, and so do every other
    /// store's on the same Redis while this one renews the switch (see the
    /// module documentation).
    pub(super) async fn outbox_open(&self, options: OutboxOptions) -> Result<()> {
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
        if options.for_spaces {
            return self.follow_outbox_switch().await;
        }
        self.capture(options.max_events, options.keep_ms);
        self.renew_switch(options, false).await
    }

    /// Turns the switch on with the default cap and keep time unless it
    /// is on already (a server with webhooks set its own, which stay), and
    /// captures: a space is about to name endpoints, and every server's
    /// claim loop opens its own outbox within seconds.
    pub(super) async fn outbox_open_if_closed(&self) -> Result<()> {
        self.renew_switch(OutboxOptions::default(), true).await?;
        let opened = *self.opened.lock();
        match opened {
            Some(options) => {
                // Opened for spaces' endpoints, perhaps idle since none
                // named any: capture now, and look again at the next tick
                // (the space is listed by then).
                self.capture(options.max_events, options.keep_ms);
                *self.hooks_seen.lock() = HooksSeen {
                    any: true,
                    ..HooksSeen::default()
                };
                Ok(())
            }
            None => self.follow_outbox_switch().await,
        }
    }

    /// On connect and every tick: renews the switch if this store opened
    /// the outbox (for spaces' endpoints alone: while some space names
    /// any), else captures as the switch says (and stops when it lapsed).
    pub(super) async fn follow_outbox_switch(&self) -> Result<()> {
        let opened = *self.opened.lock();
        if let Some(options) = opened
            && (!options.for_spaces || self.spaces_name_hooks().await?)
        {
            self.capture(options.max_events, options.keep_ms);
            return self.renew_switch(options, false).await;
        }
        let (cap, keep) = self.read_switch().await?;
        self.capture(cap, keep);
        Ok(())
    }

    /// Whether some space may name endpoints: looked up again when the
    /// endpoints' version moved, every [`HOOKS_LOOK_MS`] otherwise, and at
    /// the next tick while the list held only spaces whose endpoints were
    /// gone (each look takes up to [`HOOKS_SAMPLE`] of them off).
    async fn spaces_name_hooks(&self) -> Result<bool> {
        let version = self.space_hooks_version().await?;
        let now = self.ctx.clock.now_ms();
        let seen = *self.hooks_seen.lock();
        let due = seen
            .looked
            .is_none_or(|t| now.saturating_sub(t) >= HOOKS_LOOK_MS)
            || version != seen.version
            || seen.cleaning;
        if !due {
            return Ok(seen.any);
        }
        let (any, cleaning) = self.look_for_hooks().await?;
        *self.hooks_seen.lock() = HooksSeen {
            version,
            looked: Some(now),
            any,
            cleaning,
        };
        Ok(any)
    }

    /// Reads up to [`HOOKS_SAMPLE`] listed spaces: any with endpoints
    /// answers yes. Those without are taken off the list, then looked at
    /// again and listed back if they have endpoints now (a set that raced
    /// the look; a set lists its space again after writing, so it cannot
    /// be left off). Returns whether some space may name endpoints (yes
    /// while the list is not empty) and whether spaces were taken off.
    async fn look_for_hooks(&self) -> Result<(bool, bool)> {
        let hooked = self.ctx.keys.hooked_spaces();
        let sample: Vec<String> = self
            .ctx
            .query(
                "outbox_switch",
                redis::cmd("SRANDMEMBER").arg(&hooked).arg(HOOKS_SAMPLE),
            )
            .await?;
        if sample.is_empty() {
            return Ok((false, false));
        }
        let spaces: Vec<SpaceName> = sample
            .iter()
            .filter_map(|s| SpaceName::new(s).ok())
            .collect();
        let named = self.named_hooks(&spaces).await?;
        if named.iter().any(|&n| n) {
            return Ok((true, false));
        }
        self.ctx
            .query::<()>(
                "outbox_switch",
                redis::cmd("SREM").arg(&hooked).arg(&sample),
            )
            .await?;
        let again = self.named_hooks(&spaces).await?;
        let back: Vec<&str> = spaces
            .iter()
            .zip(again)
            .filter_map(|(space, named)| named.then_some(space.as_str()))
            .collect();
        self.list_hooked(&back).await?;
        let any = !back.is_empty();
        let left: u64 = self
            .ctx
            .query("outbox_switch", redis::cmd("SCARD").arg(&hooked))
            .await?;
        Ok((any || left > 0, left > 0))
    }

    /// Whether each of `spaces` names endpoints now.
    async fn named_hooks(&self, spaces: &[SpaceName]) -> Result<Vec<bool>> {
        let calls = spaces.iter().map(|space| {
            let key = self.ctx.keys.space_hooks(space);
            async move {
                let n: i64 = self
                    .ctx
                    .query("outbox_switch", redis::cmd("EXISTS").arg(&key))
                    .await?;
                Ok::<_, herenow_core::Error>(n > 0)
            }
        });
        futures::future::try_join_all(calls).await
    }

    /// Captures with `cap` (0: not at all, `keep` then unused) and `keep`.
    fn capture(&self, cap: u64, keep: Millis) {
        // The keep time first, and left as it was when capture stops: a
        // script that sees a cap sees a keep time with it.
        if cap > 0 {
            self.ctx.outbox_keep.store(keep, Ordering::Release);
        }
        self.ctx.outbox_cap.store(cap, Ordering::Release);
    }

    async fn renew_switch(&self, options: OutboxOptions, only_if_off: bool) -> Result<()> {
        let keys = &self.ctx.keys;
        let (switch, keep) = (keys.outbox_switch(), keys.outbox_keep());
        self.ctx
            .invoke::<Value>(
                "outbox_switch",
                RENEW_SWITCH
                    .key(&switch)
                    .key(&keep)
                    .arg(options.max_events)
                    .arg(options.keep_ms)
                    .arg(options.lease_ms().min(MAX_KEEP_MS))
                    .arg(if only_if_off { "1" } else { "0" }),
            )
            .await?;
        Ok(())
    }

    /// The switch's cap (0 when it is off) and keep time (the default
    /// when an earlier version, which wrote none, turned it on).
    async fn read_switch(&self) -> Result<(u64, Millis)> {
        let keys = &self.ctx.keys;
        let (switch, keep) = (keys.outbox_switch(), keys.outbox_keep());
        let v: Vec<Option<String>> = self
            .ctx
            .invoke(
                "outbox_switch",
                READ_SWITCH
                    .key(&switch)
                    .key(&keep)
                    .arg(OutboxOptions::default().lease_ms()),
            )
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
