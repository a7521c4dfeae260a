//! The webhook outbox ([`herenow_core::outbox`]) on Redis: opening
//! capture, and claiming, acknowledging and counting the events the
//! scripts put in the shards' streams ([`crate::outbox_scripts`] has the
//! design, `outbox.rs` the writers' side).
//!
//! A claim walks the index of streams (`P:{~outbox}:streams`) from where
//! this store's last claim stopped, in pages of [`PAGE`], at most
//! [`MAX_VISIT`] streams: for each stream's space it asks to be the
//! space's consumer ([`CLAIM_SPACE`]), then takes the stream's events
//! ([`CLAIM_STREAM`]), until it has `max`; a space whose events it took
//! records when ([`TOUCH_SPACE`]), one it took and found nothing in is
//! given back. A drained stream leaves the index (and Redis), and is put
//! back if an event arrived meanwhile. Now and then (every [`RESCAN_MS`]
//! by the store's clock, and at its first claim) it also `SCAN`s every
//! master for streams, a bounded step per claim, so a stream whose writer
//! died before indexing it is found. A space of one shard keeps its owner
//! in its stream's slot: one script call takes it and its events.
//!
//! Claims and acknowledgements of one store run one at a time (an async
//! lock): a server's own acknowledgement never gives a space back while
//! its own claim takes more of it.
//!
//! [`CLAIM_SPACE`]: crate::outbox_scripts::CLAIM_SPACE
//! [`CLAIM_STREAM`]: crate::outbox_scripts::CLAIM_STREAM
//! [`TOUCH_SPACE`]: crate::outbox_scripts::TOUCH_SPACE

use std::collections::{BTreeMap, HashMap, HashSet};

use futures::{StreamExt, TryStreamExt, stream};
use redis::Value;

use herenow_core::outbox::{OutboxEvent, OutboxKind, OutboxStats};
use herenow_core::store::check_batch;
use herenow_core::{Millis, Result, SpaceName};

use super::sweep::ids_of;
use super::{RedisStore, at_most};
use crate::events::read_tuple;
use crate::key_names::Keys;
use crate::outbox_scripts::{
    ACK_STREAM, CLAIM_SPACE, CLAIM_STREAM, GROUP, STREAM_STATS, TOUCH_SPACE,
};
use crate::reply::{array, bad_reply, int, opt_string};

/// Streams read from the index per round trip.
pub const PAGE: usize = 128;
/// Most streams one claim visits.
pub const MAX_VISIT: usize = 4_096;
/// How often (by the store's clock) a pass of `SCAN` for streams missing
/// from the index starts.
pub const RESCAN_MS: Millis = 60_000;
/// Most streams [`RedisStore::outbox_stats`] reads: past it the figures
/// are a lower bound.
pub const STATS_MAX: usize = 10_000;
/// Calls in flight at once for acknowledgements and stats.
const IN_FLIGHT: usize = 16;

/// One store's place in the index and in its `SCAN` passes.
#[derive(Default)]
pub(super) struct Consumer {
    /// The rank in the index where the next claim starts.
    next: usize,
    /// The `SCAN` pass under way: each master's slot and cursor, `None`
    /// once done. Empty between passes.
    scan: Vec<(u16, Option<String>)>,
    /// When the next pass starts.
    scan_due: Millis,
    /// Spaces this store holds (events handed out, not all acknowledged).
    owned: HashSet<SpaceName>,
    /// When their holds were last refreshed.
    refreshed: Millis,
}

/// One stream's acknowledgement: the space, and whether its consumer may
/// give it back (`holder`, when nothing of it is pending any more).
struct Acked {
    space: SpaceName,
    shard: u16,
    pending: i64,
    holder: Option<String>,
}

impl RedisStore {
    /// [`WebhookOutbox::outbox_claim`](herenow_core::WebhookOutbox::outbox_claim):
    /// see the module documentation.
    pub(super) async fn outbox_claim(
        &self,
        consumer: &str,
        max: usize,
        idle_ms: Millis,
    ) -> Result<Vec<OutboxEvent>> {
        let max = OutboxEvent::check_claim(consumer, max)?;
        let mut st = self.outbox.lock().await;
        let now = self.ctx.clock.now_ms();
        self.rescan(&mut st, now).await?;
        // A consumer that claims is alive: every space it holds is held
        // afresh (a few times per idle time, whatever this claim visits,
        // even a claim for nothing while its queues are full), so a slow
        // endpoint's events are never taken over while their server lives.
        if now.saturating_sub(st.refreshed) >= idle_ms / 4 {
            st.refreshed = now;
            let at = now.to_string();
            let lost: Vec<SpaceName> = stream::iter(st.owned.iter().cloned())
                .map(|space| {
                    let at = &at;
                    async move {
                        let held = self.touch_space(&space, consumer, at).await?;
                        Ok::<_, herenow_core::Error>((!held).then_some(space))
                    }
                })
                .buffer_unordered(IN_FLIGHT)
                .try_filter_map(|lost| async move { Ok(lost) })
                .try_collect()
                .await?;
            for space in lost {
                st.owned.remove(&space);
            }
        }
        if max == 0 {
            return Ok(Vec::new());
        }
        let (index, _) = self.ctx.keys.outbox_index();
        let total =
            usize::try_from(self.query_int(redis::cmd("ZCARD").arg(&index)).await?).unwrap_or(0);
        if total == 0 {
            return Ok(Vec::new());
        }
        let start = st.next % total;
        let visit = total.min(MAX_VISIT);
        let mut out = Vec::new();
        // Spaces asked for in this claim: taken now (1) or owned (0), and
        // whether anything of them was handed out.
        let mut spaces: HashMap<SpaceName, (i64, bool)> = HashMap::new();
        let mut seen = 0;
        let mut pos = start;
        'walk: while seen < visit {
            let n = PAGE.min(visit - seen).min(total - pos);
            let tags = self.index_page(&index, pos, n).await?;
            if tags.is_empty() {
                pos = 0;
                seen += n;
                continue;
            }
            for tag in &tags {
                seen += 1;
                pos = (pos + 1) % total;
                let Some((space, _)) = Keys::parse_outbox_tag(tag) else {
                    self.unindex_stream(tag).await?;
                    continue;
                };
                let solo = self.ctx.keys.shards(&space) == 1;
                if !solo {
                    let owned = match spaces.get(&space) {
                        Some(&(r, _)) => r,
                        None => {
                            let r = self.claim_space(&space, consumer, now, idle_ms).await?;
                            spaces.insert(space.clone(), (r, false));
                            r
                        }
                    };
                    if owned < 0 {
                        continue;
                    }
                }
                let got = self
                    .claim_stream(&space, tag, solo, consumer, now, idle_ms, max - out.len())
                    .await?;
                if !got.is_empty() {
                    if solo {
                        st.owned.insert(space.clone());
                    } else if let Some(s) = spaces.get_mut(&space) {
                        s.1 = true;
                    }
                    out.extend(got);
                }
                if out.len() >= max || seen >= visit {
                    break 'walk;
                }
            }
        }
        st.next = pos;
        for (space, (r, took)) in spaces {
            // Held afresh even when nothing new came: see the refresh above.
            if took || r == 0 {
                self.touch_space(&space, consumer, &now.to_string()).await?;
                st.owned.insert(space);
            } else if r == 1 {
                self.touch_space(&space, consumer, "").await?;
                st.owned.remove(&space);
            }
        }
        Ok(out)
    }

    /// [`WebhookOutbox::outbox_ack`](herenow_core::WebhookOutbox::outbox_ack):
    /// `XACK` and `XDEL` per stream; a space whose events are all
    /// acknowledged, in every shard, is given back by its consumer.
    /// Ids that are not ours (malformed, unknown, acknowledged before) are
    /// ignored.
    pub(super) async fn outbox_ack(&self, ids: &[String]) -> Result<()> {
        check_batch(ids.len())?;
        let mut by_tag: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for id in ids {
            if let Some((tag, entry)) = parse_event_id(id) {
                by_tag.entry(tag).or_default().push(entry);
            }
        }
        if by_tag.is_empty() {
            return Ok(());
        }
        let mut st = self.outbox.lock().await;
        let calls: Vec<_> = by_tag
            .into_iter()
            .flat_map(|(tag, entries)| {
                let (space, shard) = Keys::parse_outbox_tag(tag).expect("checked by parse");
                let (stream, _) = self.ctx.keys.stream(tag);
                entries
                    .chunks(1_000)
                    .map(|chunk| {
                        let mut inv = ACK_STREAM.prepare_invoke();
                        inv.key(&stream).arg(GROUP).arg(chunk);
                        (space.clone(), shard, inv)
                    })
                    .collect::<Vec<_>>()
            })
            .map(|(space, shard, inv)| async move {
                let v: Value = self.ctx.invoke("outbox_ack", &inv).await?;
                let v = array(v)?;
                Ok::<_, herenow_core::Error>(Acked {
                    space,
                    shard,
                    pending: int(v.first())?,
                    holder: opt_string(v.into_iter().nth(1))?,
                })
            })
            .collect();
        let acked: Vec<Acked> = at_most(IN_FLIGHT, calls).await?;
        // Per space: every acknowledged stream empty of pending entries,
        // all held by one consumer.
        let mut per: HashMap<SpaceName, (Option<String>, bool, Vec<u16>)> = HashMap::new();
        for a in acked {
            let e = per
                .entry(a.space)
                .or_insert_with(|| (a.holder.clone(), true, Vec::new()));
            e.1 &= a.pending == 0 && a.holder.is_some() && a.holder == e.0;
            e.2.push(a.shard);
        }
        for (space, (holder, free, shards)) in per {
            let Some(holder) = holder.filter(|_| free) else {
                continue;
            };
            let n = self.ctx.keys.shards(&space);
            let mut others_pending = 0;
            for k in (0..n).filter(|k| !shards.contains(k)) {
                others_pending += self.stream_stats(&Keys::outbox_tag(&space, k)).await?[1];
            }
            if others_pending == 0 {
                self.touch_space(&space, &holder, "").await?;
                st.owned.remove(&space);
            }
        }
        Ok(())
    }

    /// [`WebhookOutbox::outbox_stats`](herenow_core::WebhookOutbox::outbox_stats):
    /// sums over the first [`STATS_MAX`] streams of the index, plus the
    /// trimmed counts of streams deleted since.
    pub(super) async fn outbox_stats(&self) -> Result<OutboxStats> {
        let (index, trimmed_key) = self.ctx.keys.outbox_index();
        let tags = self.index_page(&index, 0, STATS_MAX).await?;
        let calls: Vec<_> = tags.iter().map(|t| self.stream_stats(t)).collect();
        let each: Vec<[u64; 3]> = at_most(IN_FLIGHT, calls).await?;
        let open = self
            .query_int(redis::cmd("EXISTS").arg(self.ctx.keys.outbox_switch()))
            .await?;
        let mut stats = OutboxStats {
            trimmed: u64::try_from(self.query_int(redis::cmd("GET").arg(&trimmed_key)).await?)
                .unwrap_or(0),
            open: open > 0,
            ..OutboxStats::default()
        };
        for [len, pending, trimmed] in each {
            stats.depth += len;
            stats.pending += pending;
            stats.trimmed += trimmed;
        }
        Ok(stats)
    }

    /// `{entries, pending, trimmed}` of the stream tagged `tag`.
    async fn stream_stats(&self, tag: &str) -> Result<[u64; 3]> {
        let (stream, state) = self.ctx.keys.stream(tag);
        let v: Value = self
            .ctx
            .invoke(
                "outbox_stats",
                STREAM_STATS.key(&stream).key(&state).arg(GROUP),
            )
            .await?;
        let v = array(v)?;
        let n = |i: usize| int(v.get(i)).map(|n| u64::try_from(n).unwrap_or(0));
        Ok([n(0)?, n(1)?, n(2)?])
    }

    /// Up to `n` tags of the index from rank `from`.
    async fn index_page(&self, index: &str, from: usize, n: usize) -> Result<Vec<String>> {
        if n == 0 {
            return Ok(Vec::new());
        }
        let v: Value = self
            .ctx
            .query(
                "outbox_index",
                redis::cmd("ZRANGE").arg(index).arg(from).arg(from + n - 1),
            )
            .await?;
        ids_of(Some(v))
    }

    /// One command answering an integer (nil as 0).
    async fn query_int(&self, cmd: &redis::Cmd) -> Result<i64> {
        match self.ctx.query("outbox", cmd).await? {
            Value::Nil => Ok(0),
            v => int(Some(&v)),
        }
    }

    /// [`CLAIM_SPACE`] on `space`'s owner hash.
    async fn claim_space(
        &self,
        space: &SpaceName,
        consumer: &str,
        now: Millis,
        idle_ms: Millis,
    ) -> Result<i64> {
        let key = self.ctx.keys.space_owner(space);
        self.ctx
            .invoke(
                "outbox_claim",
                CLAIM_SPACE.key(&key).arg(consumer).arg(now).arg(idle_ms),
            )
            .await
    }

    /// [`TOUCH_SPACE`] on `space`'s owner hash; whether `consumer` held it.
    async fn touch_space(&self, space: &SpaceName, consumer: &str, at: &str) -> Result<bool> {
        let key = self.ctx.keys.space_owner(space);
        let held: i64 = self
            .ctx
            .invoke("outbox_claim", TOUCH_SPACE.key(&key).arg(consumer).arg(at))
            .await?;
        Ok(held == 1)
    }

    /// [`CLAIM_STREAM`] on the stream tagged `tag` (`solo`: with the owner
    /// hash, one shard), decoded; a drained stream leaves the index, its
    /// trimmed count kept store-wide.
    #[allow(clippy::too_many_arguments)]
    async fn claim_stream(
        &self,
        space: &SpaceName,
        tag: &str,
        solo: bool,
        consumer: &str,
        now: Millis,
        idle_ms: Millis,
        max: usize,
    ) -> Result<Vec<OutboxEvent>> {
        let (stream, state) = self.ctx.keys.stream(tag);
        let owner = self.ctx.keys.space_owner(space);
        let mut inv = CLAIM_STREAM.prepare_invoke();
        inv.key(&stream).key(&state);
        if solo {
            inv.key(&owner);
        }
        inv.arg(consumer).arg(now).arg(idle_ms).arg(max).arg(GROUP);
        let v: Value = self.ctx.invoke("outbox_claim", &inv).await?;
        let v = array(v)?;
        let status = int(v.first())?;
        if status == 2 {
            return Ok(Vec::new());
        }
        if status == 1 {
            let trimmed = opt_string(v.into_iter().nth(1))?
                .and_then(|t| t.parse::<i64>().ok())
                .unwrap_or(0);
            if trimmed > 0 {
                let (_, key) = self.ctx.keys.outbox_index();
                self.query_int(redis::cmd("INCRBY").arg(&key).arg(trimmed))
                    .await?;
            }
            self.unindex_stream(tag).await?;
            return Ok(Vec::new());
        }
        let mut out = Vec::with_capacity(v.len() / 3);
        let mut bad = Vec::new();
        let mut it = v.into_iter().skip(2);
        while let (Some(id), Some(t), Some(e)) = (it.next(), it.next(), it.next()) {
            let id = opt_string(Some(id))?.ok_or_else(|| bad_reply("a stream entry id"))?;
            let (t, e) = (opt_string(Some(t))?, opt_string(Some(e))?);
            match decode(space, tag, &id, t.as_deref(), e.as_deref()) {
                Some(ev) => out.push(ev),
                None => bad.push(format!("{tag}/{id}")),
            }
        }
        if !bad.is_empty() {
            // Written by another version, or damaged: never deliverable,
            // so not left to block the stream.
            tracing::error!(stream, entries = ?bad, "outbox: unreadable entries dropped");
            let mut inv = ACK_STREAM.prepare_invoke();
            inv.key(&stream).arg(GROUP);
            for b in &bad {
                inv.arg(b.rsplit_once('/').map_or("", |(_, e)| e));
            }
            self.ctx.invoke::<Value>("outbox_ack", &inv).await?;
        }
        Ok(out)
    }

    /// Takes `tag` off the index, and puts it back if its stream holds
    /// anything now (an event added since the stream was found drained).
    async fn unindex_stream(&self, tag: &str) -> Result<()> {
        let (index, _) = self.ctx.keys.outbox_index();
        self.query_int(redis::cmd("ZREM").arg(&index).arg(tag))
            .await?;
        let (stream, _) = self.ctx.keys.stream(tag);
        if self.query_int(redis::cmd("EXISTS").arg(&stream)).await? > 0 {
            self.query_int(redis::cmd("ZADD").arg(&index).arg("NX").arg(0).arg(tag))
                .await?;
        }
        Ok(())
    }

    /// One step of the `SCAN` pass for streams (starting one when due):
    /// `SCAN … TYPE stream` once on each master, what it finds added to
    /// the index.
    async fn rescan(&self, st: &mut Consumer, now: Millis) -> Result<()> {
        if st.scan.is_empty() {
            if now < st.scan_due {
                return Ok(());
            }
            let mut c = self.ctx.client.clone();
            let slots = self.ctx.io("outbox_scan", c.master_slots()).await?;
            st.scan = slots.into_iter().map(|s| (s, Some("0".into()))).collect();
        }
        let pattern = self.ctx.keys.stream_pattern();
        let (index, _) = self.ctx.keys.outbox_index();
        for (slot, cursor) in &mut st.scan {
            let Some(cur) = cursor.as_deref() else {
                continue;
            };
            let (next, keys) = self
                .scan_step("outbox_scan", *slot, cur, &pattern, "stream")
                .await?;
            let tags: Vec<&str> = keys
                .iter()
                .filter_map(|k| self.ctx.keys.tag_of_stream(k))
                .collect();
            if !tags.is_empty() {
                let mut cmd = redis::cmd("ZADD");
                cmd.arg(&index).arg("NX");
                for t in &tags {
                    cmd.arg(0).arg(*t);
                }
                self.query_int(&cmd).await?;
            }
            *cursor = (next != "0").then_some(next);
        }
        if st.scan.iter().all(|(_, c)| c.is_none()) {
            st.scan.clear();
            st.scan_due = now.saturating_add(RESCAN_MS);
        }
        Ok(())
    }
}

/// An event id, `TAG/ENTRY`: the stream's tag and a stream entry id
/// (`MS-SEQ`); `None` for anything else.
fn parse_event_id(id: &str) -> Option<(&str, &str)> {
    let (tag, entry) = id.rsplit_once('/')?;
    Keys::parse_outbox_tag(tag)?;
    let (ms, seq) = entry.split_once('-')?;
    let digits = |s: &str| !s.is_empty() && s.len() <= 20 && s.bytes().all(|b| b.is_ascii_digit());
    (digits(ms) && digits(seq)).then_some((tag, entry))
}

/// One stream entry as an event: `t` the time, `e` the event's tuple,
/// `["occupied"]` / `["vacated"]`, or `["message", body]`.
fn decode(
    space: &SpaceName,
    tag: &str,
    entry: &str,
    t: Option<&str>,
    e: Option<&str>,
) -> Option<OutboxEvent> {
    let at: Millis = t?.parse().ok()?;
    let v: serde_json::Value = serde_json::from_str(e?).ok()?;
    let id = format!("{tag}/{entry}");
    if let serde_json::Value::Array(a) = &v
        && a.len() == 1
    {
        let kind = match a[0].as_str()? {
            "occupied" => OutboxKind::Occupied,
            "vacated" => OutboxKind::Vacated,
            _ => return None,
        };
        return Some(OutboxEvent::of_space(id, at, space.clone(), kind));
    }
    if let serde_json::Value::Array(a) = &v
        && let [kind, serde_json::Value::String(body)] = &a[..]
        && kind == "message"
    {
        return Some(OutboxEvent::message(id, at, space.clone(), body.clone()));
    }
    OutboxEvent::of_member(id, at, &*read_tuple(space, v)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_ids() {
        assert_eq!(
            parse_event_id("room:1#3/1700000000000-12"),
            Some(("room:1#3", "1700000000000-12"))
        );
        assert_eq!(parse_event_id("room/1-0"), Some(("room", "1-0")));
        for bad in [
            "no-such-event",
            "room/1",
            "room/-1",
            "room/a-1",
            "#3/1-1",
            "/1-1",
        ] {
            assert_eq!(parse_event_id(bad), None, "{bad}");
        }
    }

    #[test]
    fn entries_decode() {
        let s = SpaceName::new("room").unwrap();
        let e = decode(&s, "room", "5-0", Some("42"), Some(r#"["occupied"]"#)).unwrap();
        assert_eq!(
            (e.kind, e.at_ms, e.id.as_str()),
            (OutboxKind::Occupied, 42, "room/5-0")
        );
        let tuple = r#"["leave","u","ann","40",0,"timeout",false,"7"]"#;
        let e = decode(&s, "room#2", "6-1", Some("42"), Some(tuple)).unwrap();
        assert_eq!(e.kind, OutboxKind::Leave);
        assert_eq!(e.last_seen_ms, Some(40));
        assert_eq!(e.id, "room#2/6-1");
        assert!(decode(&s, "room", "1-0", Some("x"), Some(tuple)).is_none());
        let e = decode(
            &s,
            "room",
            "7-0",
            Some("42"),
            Some(r#"["message","{\"a\":1}"]"#),
        );
        let e = e.unwrap();
        assert_eq!(
            (e.kind, e.body.as_deref(), e.member),
            (OutboxKind::Message, Some(r#"{"a":1}"#), None)
        );
        assert!(decode(&s, "room", "7-0", Some("42"), Some(r#"["message",1]"#)).is_none());
        assert!(
            decode(
                &s,
                "room",
                "1-0",
                Some("1"),
                Some(r#"["connect","u","a","1",2,"",false,"1"]"#)
            )
            .is_none()
        );
    }
}
