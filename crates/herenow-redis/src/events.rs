//! From Redis pub/sub to subscribers: the [`Router`] that the client's
//! push callback feeds.
//!
//! Every script that changes presence publishes its events, numbered by the
//! space's event sequence, in one message on the space's channel. A
//! subscriber is registered *before* its snapshot is read and buffers what
//! arrives meanwhile; once the snapshot (and the sequence number it
//! reflects) is known, older events are dropped and the rest delivered. A
//! subscriber that sees a gap in the sequence (a message lost while the
//! link to Redis was down) is closed rather than shown a wrong picture: it
//! should subscribe again for a fresh snapshot.
//!
//! A space split over shards ([`crate::key_names`]) has a channel per shard,
//! each with its own sequence. Its subscriber is registered on every one
//! under one id, with one sender; whatever closes it on one channel (a
//! gap, an overflow, a bad message) closes it on all, so it never goes on
//! with a hole in one shard's events.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;
use redis::{PushInfo, PushKind};
use tokio::sync::broadcast;

use herenow_core::{
    ConnId, Event, EventKind, LeaveReason, MemberId, MemberKey, MemberKind, Metadata, SpaceName,
    Status, limits,
};

use crate::reply::bytes_of;

/// One event tuple as published by the scripts (its fields: the
/// conventions of `scripts.rs`). Eight-element tuples (from servers that
/// predate connections, and every event no connection caused) still read.
struct Wire {
    typ: String,
    kind: String,
    id: String,
    ts: String,
    presence: u8,
    reason: String,
    meta: serde_json::Value,
    seq: String,
    conn: Option<String>,
}

impl Wire {
    /// Reads one tuple; `None` if it is not shaped like one.
    fn parse(v: serde_json::Value) -> Option<Wire> {
        let serde_json::Value::Array(a) = v else {
            return None;
        };
        if !(8..=9).contains(&a.len()) {
            return None;
        }
        let mut it = a.into_iter();
        let text = |v: Option<serde_json::Value>| match v {
            Some(serde_json::Value::String(s)) => Some(s),
            _ => None,
        };
        // Fields are evaluated in the order written: the tuple's order.
        Some(Wire {
            typ: text(it.next())?,
            kind: text(it.next())?,
            id: text(it.next())?,
            ts: text(it.next())?,
            presence: u8::try_from(it.next()?.as_u64()?).ok()?,
            reason: text(it.next())?,
            meta: it.next()?,
            seq: text(it.next())?,
            conn: match it.next() {
                None | Some(serde_json::Value::Bool(false)) | Some(serde_json::Value::Null) => None,
                Some(serde_json::Value::String(c)) => Some(c),
                Some(_) => return None,
            },
        })
    }
}

/// Reads one event tuple of `space`, as a user's channel carries it
/// ([`crate::follow`]); `None` if it is not shaped like one.
pub(crate) fn read_tuple(space: &SpaceName, tuple: serde_json::Value) -> Option<Arc<Event>> {
    decode(space, Wire::parse(tuple)?).map(|(_, e)| e)
}

/// Reads one published message: a JSON array of tuples. `None` if any
/// tuple is malformed (the subscribers are closed then).
fn parse_message(payload: &[u8]) -> Option<Vec<Wire>> {
    let v: Vec<serde_json::Value> = serde_json::from_slice(payload).ok()?;
    v.into_iter().map(Wire::parse).collect()
}

enum SubState {
    /// Registered, snapshot not read yet: events wait here.
    Pending(Vec<(u64, Arc<Event>)>),
    /// Delivering events numbered above `after`.
    Live { after: u64 },
}

struct Sub {
    id: u64,
    tx: broadcast::Sender<Arc<Event>>,
    state: SubState,
}

impl Sub {
    /// Delivers one event; false if this subscriber must be dropped (gap or
    /// overflow while pending, or nobody listening).
    fn offer(&mut self, seq: u64, event: &Arc<Event>) -> bool {
        match &mut self.state {
            SubState::Pending(buf) => {
                if buf.len() >= limits::EVENT_QUEUE {
                    return false;
                }
                buf.push((seq, event.clone()));
                true
            }
            SubState::Live { after } => {
                if seq <= *after {
                    return true;
                }
                if seq != *after + 1 {
                    return false;
                }
                *after = seq;
                self.tx.send(event.clone()).is_ok()
            }
        }
    }
}

struct Channel {
    space: SpaceName,
    subs: Vec<Sub>,
}

/// Subscribers by channel. Shared between the store and the client's
/// push callback; every method is short and never awaits.
#[derive(Default)]
pub struct Router {
    channels: Mutex<HashMap<String, Channel>>,
    next_id: AtomicU64,
}

impl Router {
    /// A fresh subscriber id, for [`add_pending_as`](Self::add_pending_as).
    pub fn new_id(&self) -> u64 {
        self.next_id.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// Registers pending subscriber `id` on `channel` (one subscriber may
    /// be registered on the channels of several shards). Returns whether
    /// the channel is new (the caller must subscribe to it).
    pub fn add_pending_as(
        &self,
        id: u64,
        channel: &str,
        space: &SpaceName,
        tx: broadcast::Sender<Arc<Event>>,
    ) -> bool {
        let mut channels = self.channels.lock();
        let new = !channels.contains_key(channel);
        channels
            .entry(channel.to_owned())
            .or_insert_with(|| Channel {
                space: space.clone(),
                subs: Vec::new(),
            })
            .subs
            .push(Sub {
                id,
                tx,
                state: SubState::Pending(Vec::new()),
            });
        new
    }

    /// The snapshot of subscriber `id` reflects events up to `seq`: deliver
    /// what it buffered after that and go live. False if it was dropped
    /// (it is then dropped from every channel).
    pub fn activate(&self, channel: &str, id: u64, seq: u64) -> bool {
        let mut channels = self.channels.lock();
        let live = (|| {
            let ch = channels.get_mut(channel)?;
            let sub = ch.subs.iter_mut().find(|s| s.id == id)?;
            let buffered = match std::mem::replace(&mut sub.state, SubState::Live { after: seq }) {
                SubState::Pending(buf) => buf,
                SubState::Live { .. } => Vec::new(),
            };
            buffered
                .into_iter()
                .all(|(s, e)| sub.offer(s, &e))
                .then_some(())
        })()
        .is_some();
        if !live {
            drop_everywhere(&mut channels, &[id]);
        }
        live
    }

    /// Forgets subscriber `id` on every channel.
    pub fn remove_everywhere(&self, id: u64) {
        drop_everywhere(&mut self.channels.lock(), &[id]);
    }

    /// Forgets a channel whose subscription failed.
    pub fn remove_channel(&self, channel: &str) {
        self.channels.lock().remove(channel);
    }

    /// Channels nobody listens to any more, removed from the router; the
    /// caller unsubscribes from them.
    pub fn take_idle(&self) -> Vec<String> {
        let mut idle = Vec::new();
        self.channels.lock().retain(|name, ch| {
            ch.subs
                .retain(|s| matches!(s.state, SubState::Pending(_)) || s.tx.receiver_count() > 0);
            if ch.subs.is_empty() {
                idle.push(name.clone());
            }
            !ch.subs.is_empty()
        });
        idle
    }

    /// Whether anyone listens on `channel` (for tests and metrics).
    pub fn listeners(&self, channel: &str) -> usize {
        self.channels
            .lock()
            .get(channel)
            .map_or(0, |c| c.subs.len())
    }

    /// Handles one push from the client.
    pub fn push(&self, info: PushInfo) {
        match info.kind {
            PushKind::Message | PushKind::SMessage => {
                let mut data = info.data.into_iter();
                let (Some(chan), Some(payload)) = (data.next(), data.next()) else {
                    return;
                };
                let (Some(chan), Some(payload)) = (bytes_of(&chan), bytes_of(&payload)) else {
                    return;
                };
                let Ok(chan) = std::str::from_utf8(chan) else {
                    return;
                };
                self.deliver(chan, payload);
            }
            PushKind::Disconnection => {
                // Messages published while the link to Redis was down are
                // lost; the sequence check catches that on the next event,
                // but a quiet space would never tell. Close every
                // subscriber now so it re-subscribes with a fresh snapshot.
                let mut channels = self.channels.lock();
                for ch in channels.values_mut() {
                    ch.subs.clear();
                }
            }
            _ => {}
        }
    }

    fn deliver(&self, chan: &str, payload: &[u8]) {
        let mut channels = self.channels.lock();
        let Some(ch) = channels.get_mut(chan) else {
            return;
        };
        let mut dropped = Vec::new();
        match parse_message(payload) {
            None => {
                tracing::warn!(
                    channel = chan,
                    "unreadable event message; closing its subscribers"
                );
                dropped.extend(ch.subs.drain(..).map(|s| s.id));
            }
            Some(wire) => {
                let events: Vec<(u64, Arc<Event>)> = wire
                    .into_iter()
                    .filter_map(|w| decode(&ch.space, w))
                    .collect();
                ch.subs.retain_mut(|sub| {
                    let keep = events.iter().all(|(seq, e)| sub.offer(*seq, e));
                    if !keep {
                        dropped.push(sub.id);
                    }
                    keep
                });
            }
        }
        if !dropped.is_empty() {
            drop_everywhere(&mut channels, &dropped);
        }
    }
}

/// Removes subscribers `ids` from every channel (a subscriber of a sharded
/// space is registered on several).
fn drop_everywhere(channels: &mut HashMap<String, Channel>, ids: &[u64]) {
    for ch in channels.values_mut() {
        ch.subs.retain(|s| !ids.contains(&s.id));
    }
}

fn decode(space: &SpaceName, w: Wire) -> Option<(u64, Arc<Event>)> {
    let event_kind = match w.typ.as_str() {
        "join" => EventKind::Join,
        "away" => EventKind::Away,
        "back" => EventKind::Back,
        "leave" => EventKind::Leave,
        "update" => EventKind::Update,
        "connect" => EventKind::Connect,
        "disconnect" => EventKind::Disconnect,
        _ => return None,
    };
    let member_kind = MemberKind::from_letter(&w.kind)?;
    let status = match w.presence {
        0 => Status::Offline,
        1 => Status::Away,
        _ => Status::Online,
    };
    let reason = match w.reason.as_str() {
        "explicit" => Some(LeaveReason::Explicit),
        "timeout" => Some(LeaveReason::Timeout),
        "expired" => Some(LeaveReason::Expired),
        _ => None,
    };
    let meta = match w.meta {
        serde_json::Value::String(m) => Metadata::from_json(&m).ok(),
        _ => None,
    };
    let event = Event {
        space: space.clone(),
        kind: event_kind,
        member: MemberKey {
            kind: member_kind,
            id: MemberId::new(&w.id).ok()?,
        },
        status,
        last_seen_ms: w.ts.parse().ok(),
        meta,
        reason,
        conn: match w.conn {
            Some(c) => Some(ConnId::new(&c).ok()?),
            None => None,
        },
    };
    Some((w.seq.parse().ok()?, Arc::new(event)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn space() -> SpaceName {
        SpaceName::new("room").unwrap()
    }

    fn read(payload: &str) -> Vec<(u64, Arc<Event>)> {
        parse_message(payload.as_bytes())
            .expect("a readable message")
            .into_iter()
            .filter_map(|w| decode(&space(), w))
            .collect()
    }

    /// What servers published before live connections: eight elements.
    #[test]
    fn eight_element_tuples_still_read() {
        let got = read(r#"[["join","u","ann","1700000000000",2,"",false,"7"]]"#);
        assert_eq!(got.len(), 1);
        let (seq, e) = &got[0];
        assert_eq!(*seq, 7);
        assert_eq!(
            (e.kind, e.status, e.conn.as_ref()),
            (EventKind::Join, Status::Online, None)
        );
        assert_eq!(e.last_seen_ms, Some(1_700_000_000_000));
    }

    #[test]
    fn connection_events_carry_their_connection() {
        let got = read(
            r#"[["connect","u","ann","5",2,"","{\"d\":\"phone\"}","8","c-1"],
                ["disconnect","g","bo","5",1,"",false,"9","c-2"],
                ["leave","u","cy","5",0,"timeout",false,"10","c-3"],
                ["update","u","ann","5",2,"",false,"11",false]]"#,
        );
        let seen: Vec<_> = got
            .iter()
            .map(|(s, e)| (*s, e.kind, e.conn.as_ref().map(ConnId::as_str), e.reason))
            .collect();
        assert_eq!(
            seen,
            [
                (8, EventKind::Connect, Some("c-1"), None),
                (9, EventKind::Disconnect, Some("c-2"), None),
                (
                    10,
                    EventKind::Leave,
                    Some("c-3"),
                    Some(LeaveReason::Timeout)
                ),
                (11, EventKind::Update, None, None),
            ]
        );
        assert_eq!(
            got[0].1.meta.as_ref().map(Metadata::as_json),
            Some(r#"{"d":"phone"}"#)
        );
        assert_eq!(got[1].1.status, Status::Away);
    }

    /// A subscriber of a sharded space listens on one channel per shard;
    /// a gap on one closes it on all.
    #[test]
    fn a_gap_on_one_shard_closes_the_subscriber_everywhere() {
        let router = Router::default();
        let (tx, mut rx) = broadcast::channel(16);
        let id = router.new_id();
        for ch in ["s0", "s1"] {
            assert!(router.add_pending_as(id, ch, &space(), tx.clone()));
        }
        drop(tx);
        assert!(router.activate("s0", id, 0) && router.activate("s1", id, 4));
        router.deliver("s1", br#"[["join","u","ann","5",2,"",false,"5"]]"#);
        assert_eq!(rx.try_recv().unwrap().member.id.as_str(), "ann");
        // Shard 0 skips from 0 to 2: a message was lost.
        router.deliver("s0", br#"[["join","u","bo","5",2,"",false,"2"]]"#);
        assert_eq!((router.listeners("s0"), router.listeners("s1")), (0, 0));
        assert!(matches!(
            rx.try_recv(),
            Err(broadcast::error::TryRecvError::Closed)
        ));
    }

    #[test]
    fn malformed_tuples_make_the_message_unreadable() {
        for bad in [
            r#"[["join","u","ann","5",2,"",false]]"#,
            r#"[["join","u","ann","5",2,"",false,"7","c",1]]"#,
            r#"[["join","u","ann","5",2,"",false,"7",3]]"#,
            r#"[["join","u","ann","5","2","",false,"7"]]"#,
            r#"{"join":1}"#,
        ] {
            assert!(parse_message(bad.as_bytes()).is_none(), "{bad}");
        }
    }
}
