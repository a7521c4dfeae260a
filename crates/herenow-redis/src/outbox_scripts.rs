//! The Lua of the webhook outbox ([`herenow_core::outbox`]; the Rust side
//! is `outbox.rs` and `store/outbox.rs`): the capture every script that
//! changes presence runs inside its `publish`, and the scripts that claim,
//! acknowledge and count the events.
//!
//! # Capture
//!
//! Every script that changes presence ends in `publish` (see
//! [`crate::scripts`]), whose `cmd` argument is the publish command
//! (`PUBLISH` / `SPUBLISH`) while the store's outbox is closed, so a store
//! without webhooks pays one string length comparison per call that has
//! events, and nothing else. While it is open the argument is `CMD CAP MODE
//! KEEP` (`SPUBLISH 100000 1 86400000`): CAP the most events the shard's
//! stream keeps, MODE `1` for a space of one shard, `2` for a shard of a
//! space split over several, KEEP how long (ms) the stream lives after its
//! newest event (`0`: for ever). `publish` then also `XADD`s each `join`,
//! `away`, `back`, `leave` and `update` (not `connect` / `disconnect`) to
//! the shard's stream `P:{T}:wh`, in the same script as the change, so an
//! event is in the stream if and only if its change happened, whichever
//! server made it and whatever happens to that server next. An entry is `t`
//! (the script's `now`, the injected clock) and `e` (the event's tuple,
//! as published, or `["occupied"]` / `["vacated"]`; a message a server
//! keeps, [`MESSAGE`], is `["message", body]`).
//!
//! The stream is trimmed to CAP after the adds (`XTRIM MAXLEN`, exact),
//! and what was trimmed is added to the `trimmed` field of the stream's
//! state hash `P:{T}:whs`. Then the stream and its state are set to
//! expire KEEP after now (`PEXPIRE`): KEEP is the servers' maximum age
//! of an event, so a stream nothing was added to for that long holds
//! only events no server would deliver, and goes (its events uncounted:
//! no server claimed them to count them) instead of staying for ever.
//!
//! `occupied` / `vacated`: a call's events move the shard's present count
//! one way only (a heartbeat or attach only joins, a leave, detach, erase or
//! sweep only leaves), so the count after the call (members above the gone
//! watermark, both kinds) and the call's joins and leaves give the count
//! before it. With one shard (MODE 1) `occupied` is added before the
//! call's events when the count left 0, `vacated` after them when it came
//! to 0. With several (MODE 2) a shard's keys cannot see the others', so the
//! script only numbers the shard's transition (`whocc` in its state hash)
//! and reports it; the store then runs [`OCCUPY`] on shard 0, which keeps
//! which shards are occupied and adds `occupied` when the first is,
//! `vacated` when the last empties. A transition reported late (another
//! server's) loses to a later one by its number. A server that dies
//! between the two loses that one transition until the shard's next.
//!
//! Each script returns `{added, transition}` (`WH`) as its reply's last
//! element, `{0, 0}` with the outbox closed, for the store's follow-up
//! (`outbox.rs`).
//!
//! # Claims
//!
//! One consumer group, `herenow`, per stream, created by the first claim
//! (from the stream's first entry). A space's events go to one consumer at
//! a time ([`CLAIM_SPACE`], then [`CLAIM_STREAM`] per stream), judged by
//! the injected clock, never Redis' own idle times. The owner hash
//! `P:{S}:whown` also expires a day (Redis' time) after its last write, so
//! a space nobody claims again leaves nothing behind; an owner silent that
//! long is long past any idle time.

use std::sync::LazyLock;

use redis::Script;

use crate::scripts::bare;

/// Turns the outbox's switch on, or renews it, for `lease` ms. KEYS: the
/// switch (the cap), the keep key (ms). ARGV: cap, keep, lease, `nx`
/// (`1`: only where no switch is on; one on already keeps its values).
/// Returns 1 when it wrote.
pub static RENEW_SWITCH: LazyLock<Script> =
    LazyLock::new(|| bare(include_str!("lua/renew_switch.lua")));

/// Reads the outbox's switch. KEYS: the switch, the keep key. ARGV: the
/// lease to give a switch that has none (one an earlier version set, which
/// would keep every store capturing for ever). Returns `{cap|false,
/// keep|false}`.
pub static READ_SWITCH: LazyLock<Script> =
    LazyLock::new(|| bare(include_str!("lua/read_switch.lua")));

/// The consumer group of every outbox stream.
pub(crate) const GROUP: &str = "herenow";

/// Records a shard's transition for a space split over several shards
/// and adds `occupied` / `vacated` to shard 0's stream when the space's
/// first shard fills or its last empties. KEYS: occupancy, shard 0's
/// stream, its state hash. ARGV: now, cap, shard, the transition (its
/// number, negative when the shard emptied), keep (as in the capture).
/// Returns how many events it added (0 or 1).
///
/// Trimming keeps the newest events, and the space's event comes first
/// among those of its millisecond (with one shard it is added before the
/// call's joins): so when shard 0's stream is full and its oldest entry
/// is no older than the transition, the space's event is the one trimmed
/// (counted, not added) rather than a member's event of the same moment.
/// A transition numbered at or below the shard's last one is stale
/// (reported late) and ignored.
pub static OCCUPY: LazyLock<Script> = LazyLock::new(|| bare(include_str!("lua/occupy.lua")));

/// Keeps a message in a shard's stream (shard 0 of its space), trimmed
/// and set to expire as the capture does. KEYS: the stream, its state
/// hash. ARGV: now, cap, keep (ms, `0` for ever), the entry
/// (`["message", body]`). Returns 1.
pub static MESSAGE: LazyLock<Script> = LazyLock::new(|| bare(include_str!("lua/message.lua")));

/// Whether a consumer may take a space's events now. KEYS: the space's
/// owner hash. ARGV: consumer, now, idle (ms). Returns `-1` when another
/// consumer took events less than `idle` ago (busy), `0` when the
/// consumer owns the space already, `1` when it takes it now (free, or
/// its owner idle): then it is the owner, since now.
pub static CLAIM_SPACE: LazyLock<Script> =
    LazyLock::new(|| bare(include_str!("lua/claim_space.lua")));

/// The owner took events at `now` (KEYS: the owner hash; ARGV: consumer,
/// now), or gives the space back having taken none (ARGV: consumer, `''`).
/// Either only if the consumer still owns it.
pub static TOUCH_SPACE: LazyLock<Script> =
    LazyLock::new(|| bare(include_str!("lua/touch_space.lua")));

/// Hands a consumer (the space's owner, by [`CLAIM_SPACE`]) up to `max`
/// events of one stream. KEYS: stream, its state hash (and, for a space
/// of one shard, its owner hash). ARGV: consumer, now, idle (ms), max,
/// group.
///
/// Pending entries of other consumers (the space changed hands) are moved
/// to this one (`XAUTOCLAIM` with min-idle 0: the owner's clock decided)
/// and handed out again from the first; its own pending entries are in
/// its hands (it is claiming, so alive) and are not handed out twice. Then
/// what it has not been handed
/// (`upto`, the last id handed), then new entries. Entries trimmed while
/// pending are acknowledged away.
///
/// A space of one shard needs no [`CLAIM_SPACE`] and [`TOUCH_SPACE`]
/// around it: its owner hash shares the stream's slot, so it comes as a
/// third key and this script does both (one round trip per space): it
/// answers `{2, 0}` while another consumer owns the space, and records the
/// consumer as owner, since now, when it hands anything out.
///
/// Returns `{0, 0, id, t, e, …}`, or `{1, trimmed}` when the stream is
/// drained: no entries, none pending. It is deleted then (with its state
/// and group; its trimmed count is the caller's to keep), so drained
/// spaces leave nothing behind.
pub static CLAIM_STREAM: LazyLock<Script> =
    LazyLock::new(|| bare(include_str!("lua/claim_stream.lua")));

/// Acknowledges delivered entries of one stream and deletes them. KEYS:
/// stream. ARGV: group, ids. Returns `{pending_left, holder|false}`:
/// the entries still pending, and the consumer that held the first of
/// these ids (the one that may now give the space back).
pub static ACK_STREAM: LazyLock<Script> =
    LazyLock::new(|| bare(include_str!("lua/ack_stream.lua")));

/// One stream's numbers. KEYS: stream, its state hash. ARGV: group.
/// Returns `{entries, pending, trimmed}`.
pub static STREAM_STATS: LazyLock<Script> =
    LazyLock::new(|| bare(include_str!("lua/stream_stats.lua")));

#[cfg(test)]
mod tests {
    use super::*;

    /// The capture finds the stream from the channel's name: the shard's
    /// prefix is the channel without its last word.
    #[test]
    fn the_channel_ends_in_events() {
        assert!(crate::scripts::PRELUDE.contains("string.sub(chan, 1, #chan - 6)"));
        assert_eq!("events".len(), 6);
        let shas = [
            OCCUPY.get_hash(),
            CLAIM_SPACE.get_hash(),
            TOUCH_SPACE.get_hash(),
            CLAIM_STREAM.get_hash(),
            ACK_STREAM.get_hash(),
            STREAM_STATS.get_hash(),
            RENEW_SWITCH.get_hash(),
            READ_SWITCH.get_hash(),
        ];
        for (i, a) in shas.iter().enumerate() {
            for b in &shas[i + 1..] {
                assert_ne!(a, b);
            }
        }
    }
}
