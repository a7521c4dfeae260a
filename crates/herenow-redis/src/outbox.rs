//! The writers' side of the webhook outbox: what a store does right after
//! a script that captured events (see [`crate::outbox_scripts`]). A script
//! cannot write outside its slot, so the store that ran it adds the shard's
//! stream to the index of streams (`P:{~outbox}:streams`, where consumers
//! look) and, for a space split over several shards, runs
//! [`OCCUPY`](crate::outbox_scripts::OCCUPY) on shard 0 for the shard's
//! transition. Should a server die in between, the events are in the
//! stream all the same: consumers also `SCAN` for streams now and then
//! (`store/outbox.rs`), and find it.
//!
//! Neither step fails the write that captured: the change happened and is
//! answered; a failure here is logged and left to that `SCAN`.
//!
//! [`message`] is the other writer: a message a server keeps in a space's
//! outbox, added to shard 0's stream by [`MESSAGE`](crate::outbox_scripts::MESSAGE)
//! while the outbox captures, then indexed the same way.

use std::sync::atomic::Ordering;

use redis::Value;

use herenow_core::outbox::OutboxEvent;
use herenow_core::{Result, SpaceName};

use crate::ctx::Ctx;
use crate::key_names::SpaceKeys;
use crate::outbox_scripts;

/// What a script's `outbox` reply element says it captured.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Captured {
    /// Events it added to the shard's stream.
    pub added: u64,
    /// The shard's occupancy transition (see
    /// [`OCCUPY`](crate::outbox_scripts::OCCUPY)); 0 for none.
    pub shift: i64,
}

impl Captured {
    /// Reads `{added, transition}`; anything else (a script that returned
    /// early, before publishing) captured nothing.
    pub fn of(v: Option<&Value>) -> Captured {
        let Some(Value::Array(a)) = v else {
            return Captured::default();
        };
        let int = |v: Option<&Value>| match v {
            Some(Value::Int(n)) => *n,
            _ => 0,
        };
        Captured {
            added: u64::try_from(int(a.first())).unwrap_or(0),
            shift: int(a.get(1)),
        }
    }

    /// Whether there is anything to do after the script.
    pub fn any(self) -> bool {
        self.added > 0 || self.shift != 0
    }
}

/// After a script on shard `k` of `space` captured `c`: the module
/// documentation's follow-up (shard 0's stream indexed too when `OCCUPY`
/// added to it). Never fails.
pub(crate) async fn after(ctx: &Ctx, space: &SpaceName, k: &SpaceKeys, c: Captured) {
    if !c.any() {
        return;
    }
    if let Err(e) = follow_up(ctx, space, k, c).await {
        tracing::warn!(
            space = space.as_str(),
            error = %e,
            "outbox: indexing captured events failed; the periodic scan will find them"
        );
    }
}

async fn follow_up(ctx: &Ctx, space: &SpaceName, k: &SpaceKeys, c: Captured) -> Result<()> {
    let mut tags = Vec::with_capacity(2);
    if c.added > 0 {
        tags.push(k.outbox.clone());
    }
    if c.shift != 0 {
        let cap = ctx.outbox_cap.load(Ordering::Relaxed);
        let keep = ctx.outbox_keep.load(Ordering::Relaxed);
        let per = (cap / u64::from(ctx.keys.shards(space))).max(1);
        let tag0 = crate::key_names::Keys::outbox_tag(space, 0);
        let (stream, state) = ctx.keys.stream(&tag0);
        let occ = ctx.keys.occupancy(space);
        let now = ctx.clock.now_ms();
        let added: i64 = ctx
            .invoke(
                "outbox_occupancy",
                outbox_scripts::OCCUPY
                    .key(&occ)
                    .key(&stream)
                    .key(&state)
                    .arg(now)
                    .arg(per)
                    .arg(k.shard)
                    .arg(c.shift)
                    .arg(keep),
            )
            .await?;
        if added > 0 && !tags.contains(&tag0) {
            tags.push(tag0);
        }
    }
    if tags.is_empty() {
        return Ok(());
    }
    let (index, _) = ctx.keys.outbox_index();
    let keep = ctx.outbox_keep.load(Ordering::Relaxed);
    let mut cl = ctx.client.clone();
    ctx.io("outbox_index", async {
        let mut pipe = redis::pipe();
        let zadd = pipe.cmd("ZADD").arg(&index).arg("NX");
        for t in &tags {
            zadd.arg(0).arg(t);
        }
        // The index goes with the streams it names: once no event was
        // captured for the keep time, every one of them has expired.
        if keep > 0 {
            pipe.cmd("PEXPIRE").arg(&index).arg(keep);
        }
        pipe.query_async::<Value>(&mut cl).await
    })
    .await?;
    Ok(())
}

/// [`WebhookOutbox::outbox_message`](herenow_core::WebhookOutbox::outbox_message):
/// see the module documentation; `false` when the outbox does not
/// capture (nothing written).
pub(crate) async fn message(ctx: &Ctx, space: &SpaceName, body: &str) -> Result<bool> {
    OutboxEvent::check_body(body)?;
    let cap = ctx.outbox_cap.load(Ordering::Acquire);
    if cap == 0 {
        return Ok(false);
    }
    let per = (cap / u64::from(ctx.keys.shards(space))).max(1);
    let keep = ctx.outbox_keep.load(Ordering::Relaxed);
    let k = ctx.keys.space(space);
    let (stream, state) = ctx.keys.stream(&k.outbox);
    let entry = serde_json::to_string(&("message", body)).expect("a string pair serializes");
    let now = ctx.clock.now_ms();
    ctx.invoke::<i64>(
        "outbox_message",
        outbox_scripts::MESSAGE
            .key(&stream)
            .key(&state)
            .arg(now)
            .arg(per)
            .arg(keep)
            .arg(&entry),
    )
    .await?;
    after(ctx, space, &k, Captured { added: 1, shift: 0 }).await;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_what_a_script_captured() {
        let v = Value::Array(vec![Value::Int(3), Value::Int(-7)]);
        assert_eq!(
            Captured::of(Some(&v)),
            Captured {
                added: 3,
                shift: -7
            }
        );
        assert!(!Captured::of(None).any());
        assert!(!Captured::of(Some(&Value::Int(1))).any());
    }
}
