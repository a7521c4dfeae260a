//! What a webhook request carries: one JSON body per batch of events,
//! and the Standard Webhooks headers that sign it (docs/API.md,
//! "Webhooks").
//!
//! ```json
//! {"type":"presence.events","timestamp":"2026-11-22T10:00:00.000Z",
//!  "data":{"events":[{"id":"…","type":"join","space":"lobby","at_ms":…,
//!    "member":"ann","kind":"user","status":"online","last_seen_ms":…}]}}
//! ```

use std::time::{Duration, SystemTime};

use herenow_core::outbox::{OutboxEvent, OutboxKind};
use herenow_core::{LeaveReason, Metadata, Millis, Status};
use serde::Serialize;
use sha2::{Digest, Sha256};

use super::sign::{Signer, hex};

/// The `type` of every body.
pub const BODY_TYPE: &str = "presence.events";

/// Bytes of a body around its events (the envelope), with room to spare.
pub const ENVELOPE_BYTES: usize = 128;

/// One event as the body carries it; fields that do not apply are left
/// out (a space's `occupied` has no member).
#[derive(Serialize)]
struct WireEvent<'a> {
    id: &'a str,
    #[serde(rename = "type")]
    kind: &'static str,
    space: &'a str,
    at_ms: Millis,
    #[serde(skip_serializing_if = "Option::is_none")]
    member: Option<&'a str>,
    #[serde(rename = "kind", skip_serializing_if = "Option::is_none")]
    member_kind: Option<herenow_core::MemberKind>,
    #[serde(skip_serializing_if = "Option::is_none")]
    status: Option<Status>,
    #[serde(skip_serializing_if = "Option::is_none")]
    last_seen_ms: Option<Millis>,
    #[serde(skip_serializing_if = "Option::is_none")]
    meta: Option<&'a Metadata>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    conn: Option<&'a str>,
}

/// Why a member left, as webhooks say it: `closed` when its last live
/// connection closed, `explicit` for a `leave`, `timeout` when it went
/// silent, `expired` when swept at the end of its retention.
pub fn leave_reason(event: &OutboxEvent) -> Option<&'static str> {
    if event.kind != OutboxKind::Leave {
        return None;
    }
    Some(match event.reason? {
        LeaveReason::Explicit if event.conn.is_some() => "closed",
        LeaveReason::Explicit => "explicit",
        LeaveReason::Timeout => "timeout",
        LeaveReason::Expired => "expired",
    })
}

/// `event` as one JSON object of a body's `events`.
pub fn event_json(event: &OutboxEvent) -> Vec<u8> {
    let wire = WireEvent {
        id: &event.id,
        kind: event.kind.as_str(),
        space: event.space.as_str(),
        at_ms: event.at_ms,
        member: event.member.as_ref().map(|m| m.id.as_str()),
        member_kind: event.member.as_ref().map(|m| m.kind),
        status: event.status,
        last_seen_ms: event.last_seen_ms,
        meta: event.meta.as_ref(),
        reason: leave_reason(event),
        conn: event.conn.as_ref().map(|c| c.as_str()),
    };
    // Ids, names and checked metadata always serialize.
    serde_json::to_vec(&wire).unwrap_or_else(|_| b"{}".to_vec())
}

/// One request's worth of events, ready to sign and send. Its id and
/// body stay the same on every retry.
#[derive(Clone, Debug)]
pub struct Batch {
    /// `webhook-id`: `msg_` and a hash of the events' ids, so the same
    /// events batched the same way carry the same id.
    pub id: String,
    /// The JSON body.
    pub body: Vec<u8>,
    /// The ids of the events in it, in order.
    pub event_ids: Vec<String>,
}

impl Batch {
    /// The batch of `events` (ids and their [`event_json`]), stamped
    /// `now_ms`.
    pub fn new<'a>(events: impl IntoIterator<Item = (&'a str, &'a [u8])>, now_ms: Millis) -> Self {
        let head = format!(
            r#"{{"type":"{BODY_TYPE}","timestamp":"{}","data":{{"events":["#,
            rfc3339(now_ms)
        );
        Self::build(head, b"]}}", events)
    }

    /// The batch of `events` in the format `signer` signs: herenow's body
    /// for a Standard Webhooks secret, Pusher's (`{"time_ms", "events"}`,
    /// each event already in Pusher's form) for a Pusher app.
    pub fn for_signer<'a>(
        signer: &Signer,
        events: impl IntoIterator<Item = (&'a str, &'a [u8])>,
        now_ms: Millis,
    ) -> Self {
        match signer {
            Signer::Standard(_) => Self::new(events, now_ms),
            Signer::Pusher(_) => {
                Self::build(format!(r#"{{"time_ms":{now_ms},"events":["#), b"]}", events)
            }
        }
    }

    fn build<'a>(
        head: String,
        tail: &[u8],
        events: impl IntoIterator<Item = (&'a str, &'a [u8])>,
    ) -> Self {
        let mut hash = Sha256::new();
        let mut event_ids = Vec::new();
        let mut body = head.into_bytes();
        for (i, (id, json)) in events.into_iter().enumerate() {
            if i > 0 {
                body.push(b',');
            }
            body.extend_from_slice(json);
            hash.update(id.as_bytes());
            hash.update(b"\n");
            event_ids.push(id.to_owned());
        }
        body.extend_from_slice(tail);
        let digest = hash.finalize();
        let id = format!("msg_{}", hex(&digest[..16]));
        Self {
            id,
            body,
            event_ids,
        }
    }

    /// The headers that sign an attempt at `now_ms`: Standard Webhooks'
    /// three (whole seconds on the wire), or Pusher's key and signature.
    pub fn headers(&self, signer: &Signer, now_ms: Millis) -> Vec<(&'static str, String)> {
        match signer {
            Signer::Standard(secret) => {
                let timestamp = now_ms / 1000;
                vec![
                    ("webhook-id", self.id.clone()),
                    ("webhook-timestamp", timestamp.to_string()),
                    (
                        "webhook-signature",
                        secret.sign(&self.id, timestamp, &self.body),
                    ),
                ]
            }
            Signer::Pusher(app) => vec![
                ("x-pusher-key", app.key().to_owned()),
                ("x-pusher-signature", app.sign(&self.body)),
            ],
        }
    }
}

/// A sample batch for `herenow webhooks test`: one `join` of user
/// `sample` in space `herenow.test`, at `now_ms`.
pub fn sample(now_ms: Millis) -> Batch {
    let space = herenow_core::SpaceName::new("herenow.test")
        .unwrap_or_else(|_| unreachable!("a valid space name"));
    let id = format!("sample-{now_ms}");
    let mut event = OutboxEvent::of_space(id, now_ms, space, OutboxKind::Join);
    event.member = herenow_core::MemberId::new("sample")
        .ok()
        .map(herenow_core::MemberKey::user);
    event.status = Some(Status::Online);
    event.last_seen_ms = Some(now_ms);
    let json = event_json(&event);
    Batch::new([(event.id.as_str(), json.as_slice())], now_ms)
}

fn rfc3339(ms: Millis) -> String {
    let at = SystemTime::UNIX_EPOCH + Duration::from_millis(ms);
    humantime::format_rfc3339_millis(at).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use herenow_core::{ConnId, MemberId, MemberKey, SpaceName};

    fn leave(conn: Option<&str>, reason: LeaveReason) -> OutboxEvent {
        let mut e = OutboxEvent::of_space(
            "e1".into(),
            5,
            SpaceName::new("lobby").unwrap(),
            OutboxKind::Leave,
        );
        e.member = Some(MemberKey::user(MemberId::new("ann").unwrap()));
        e.status = Some(Status::Offline);
        e.reason = Some(reason);
        e.conn = conn.map(|c| ConnId::new(c).unwrap());
        e
    }

    #[test]
    fn leaves_say_why() {
        assert_eq!(
            leave_reason(&leave(None, LeaveReason::Explicit)),
            Some("explicit")
        );
        assert_eq!(
            leave_reason(&leave(Some("c1"), LeaveReason::Explicit)),
            Some("closed")
        );
        assert_eq!(
            leave_reason(&leave(None, LeaveReason::Timeout)),
            Some("timeout")
        );
        assert_eq!(
            leave_reason(&leave(None, LeaveReason::Expired)),
            Some("expired")
        );
        let json: serde_json::Value =
            serde_json::from_slice(&event_json(&leave(Some("c1"), LeaveReason::Explicit))).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"id":"e1","type":"leave","space":"lobby","at_ms":5,
                "member":"ann","kind":"user","status":"offline","reason":"closed","conn":"c1"})
        );
    }

    #[test]
    fn batches_are_json_with_a_stable_id() {
        let a = event_json(&leave(None, LeaveReason::Timeout));
        let batch = Batch::new([("e1", a.as_slice()), ("e2", a.as_slice())], 1_000);
        let body: serde_json::Value = serde_json::from_slice(&batch.body).unwrap();
        assert_eq!(body["type"], BODY_TYPE);
        assert_eq!(body["timestamp"], "1970-01-01T00:00:01.000Z");
        assert_eq!(body["data"]["events"].as_array().unwrap().len(), 2);
        let again = Batch::new([("e1", a.as_slice()), ("e2", a.as_slice())], 9_000);
        assert_eq!(batch.id, again.id);
        assert!(batch.id.starts_with("msg_") && batch.id.len() == 36);
        assert_ne!(batch.id, Batch::new([("e1", a.as_slice())], 1_000).id);
        let empty: serde_json::Value = serde_json::from_slice(&sample(7).body).unwrap();
        assert_eq!(empty["data"]["events"][0]["member"], "sample");
    }
}
