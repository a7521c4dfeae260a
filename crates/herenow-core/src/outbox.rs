//! The outbox: the events a store keeps until a backend has been told of
//! them (webhooks), each handed to exactly one consumer at a time.
//!
//! Webhooks must survive what the store survives and, with many servers on
//! one Redis, be delivered by exactly one of them. So the outbox belongs to
//! the store, not to a server: the memory store keeps it beside its spaces
//! (in its snapshot and journal with a data directory), the Redis stores
//! keep it in Redis Streams written by the same scripts that change
//! presence. A server only opens it, claims (a space's events in order, by
//! one consumer at a time), delivers and acknowledges: the
//! [`WebhookOutbox`](crate::WebhookOutbox) calls.
//!
//! Delivery is at least once: an event claimed, delivered, and not yet
//! acknowledged when its consumer dies is delivered again by the next. The
//! [`OutboxEvent::id`] is stable across those deliveries, for receivers to
//! deduplicate.
//!
//! A space's configuration may name webhook endpoints of its own
//! ([`SpaceHook`], [`SpaceWebhooks::set_space_hooks`](crate::SpaceWebhooks::set_space_hooks)).
//!
//! Capture is bounded ([`OutboxOptions::max_events`]): past the cap the
//! oldest events are trimmed and counted ([`OutboxStats::trimmed`]), never
//! kept without bound.
//!
//! Beside the events presence makes, a server may keep a **message** in a
//! space's outbox ([`WebhookOutbox::outbox_message`](crate::WebhookOutbox::outbox_message),
//! [`OutboxKind::Message`]): a body opaque to the store (a Pusher client
//! event, already in the form its webhook sends), at most
//! [`limits::MAX_OUTBOX_MESSAGE_BYTES`], claimed in order with the space's
//! events and delivered once like them. The memory store also keeps at
//! most 64 MiB of bodies, trimming the oldest events past it as past its
//! cap.

use serde::{Deserialize, Serialize};

use crate::conn::ConnId;
use crate::error::InvalidInput;
use crate::event::{Event, EventKind, LeaveReason};
use crate::id::{MemberKey, SpaceName};
use crate::limits;
use crate::meta::Metadata;
use crate::policy::Status;
use crate::time::Millis;

/// What an outbox event says happened.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OutboxKind {
    /// A member became present.
    Join,
    /// A member went away (silent past the space's `online_ms`).
    Away,
    /// An away member came back.
    Back,
    /// A member stopped being present ([`OutboxEvent::reason`] says why).
    Leave,
    /// A present member's metadata changed.
    Update,
    /// The space's first present member joined.
    Occupied,
    /// The space's last present member left.
    Vacated,
    /// A message a server kept for webhooks ([`OutboxEvent::body`]); not
    /// a presence event, so not in [`OutboxKind::ALL`]: endpoints cannot
    /// ask for it by name.
    Message,
}

impl OutboxKind {
    /// The lowercase name webhooks carry.
    pub fn as_str(self) -> &'static str {
        match self {
            OutboxKind::Join => "join",
            OutboxKind::Away => "away",
            OutboxKind::Back => "back",
            OutboxKind::Leave => "leave",
            OutboxKind::Update => "update",
            OutboxKind::Occupied => "occupied",
            OutboxKind::Vacated => "vacated",
            OutboxKind::Message => "message",
        }
    }

    /// The kind of a member event, `None` for the events webhooks do not
    /// carry (`connect` / `disconnect` of a member's further devices).
    pub fn of_event(kind: EventKind) -> Option<OutboxKind> {
        Some(match kind {
            EventKind::Join => OutboxKind::Join,
            EventKind::Away => OutboxKind::Away,
            EventKind::Back => OutboxKind::Back,
            EventKind::Leave => OutboxKind::Leave,
            EventKind::Update => OutboxKind::Update,
            EventKind::Connect | EventKind::Disconnect => return None,
        })
    }

    /// Every kind of presence event, in a fixed order (not
    /// [`OutboxKind::Message`]).
    pub const ALL: [OutboxKind; 7] = [
        OutboxKind::Join,
        OutboxKind::Away,
        OutboxKind::Back,
        OutboxKind::Leave,
        OutboxKind::Update,
        OutboxKind::Occupied,
        OutboxKind::Vacated,
    ];
}

/// One event waiting in the outbox.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OutboxEvent {
    /// Unique in the store and stable across redeliveries.
    pub id: String,
    /// When it happened, by the store's clock.
    pub at_ms: Millis,
    /// The space it happened in.
    pub space: SpaceName,
    /// What happened.
    pub kind: OutboxKind,
    /// The member it happened to; `None` for `occupied` / `vacated`.
    pub member: Option<MemberKey>,
    /// The member's status after the event.
    pub status: Option<Status>,
    /// The member's last heartbeat after the event.
    pub last_seen_ms: Option<Millis>,
    /// The member's metadata after the event.
    #[serde(with = "crate::meta::as_text")]
    pub meta: Option<Metadata>,
    /// Why the member left; only on `leave`.
    pub reason: Option<LeaveReason>,
    /// The live connection that caused it, if one did.
    pub conn: Option<ConnId>,
    /// A [`OutboxKind::Message`]'s body, as the server gave it.
    pub body: Option<String>,
}

impl OutboxEvent {
    /// The outbox form of a member event at `at_ms`, `None` for kinds
    /// webhooks do not carry. The id is the store's to give.
    pub fn of_member(id: String, at_ms: Millis, event: &Event) -> Option<OutboxEvent> {
        Some(OutboxEvent {
            id,
            at_ms,
            space: event.space.clone(),
            kind: OutboxKind::of_event(event.kind)?,
            member: Some(event.member.clone()),
            status: Some(event.status),
            last_seen_ms: event.last_seen_ms,
            meta: event.meta.clone(),
            reason: event.reason,
            conn: event.conn.clone(),
            body: None,
        })
    }

    /// An `occupied` or `vacated` event of `space` at `at_ms`.
    pub fn of_space(id: String, at_ms: Millis, space: SpaceName, kind: OutboxKind) -> OutboxEvent {
        OutboxEvent {
            id,
            at_ms,
            space,
            kind,
            member: None,
            status: None,
            last_seen_ms: None,
            meta: None,
            reason: None,
            conn: None,
            body: None,
        }
    }

    /// A message of `space` at `at_ms` carrying `body`.
    pub fn message(id: String, at_ms: Millis, space: SpaceName, body: String) -> OutboxEvent {
        OutboxEvent {
            body: Some(body),
            ..OutboxEvent::of_space(id, at_ms, space, OutboxKind::Message)
        }
    }

    /// Checks a message's body against its bound.
    pub fn check_body(body: &str) -> Result<(), InvalidInput> {
        if body.len() > limits::MAX_OUTBOX_MESSAGE_BYTES {
            return Err(InvalidInput::MessageTooLarge { len: body.len() });
        }
        Ok(())
    }

    /// Checks a claim's consumer name; answers the most events the claim
    /// may hand out (`max`, at most [`limits::MAX_BATCH`]).
    pub fn check_claim(consumer: &str, max: usize) -> Result<usize, InvalidInput> {
        if consumer.is_empty() || consumer.len() > limits::MAX_OUTBOX_CONSUMER_BYTES {
            return Err(InvalidInput::BadConfig {
                why: "an outbox consumer's name must be 1 to 200 bytes",
            });
        }
        Ok(max.min(limits::MAX_BATCH))
    }
}

/// How the outbox captures.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OutboxOptions {
    /// The most events kept: in all on the memory store, per space on
    /// Redis (each of a big space's shards keeping its share, at least
    /// one). Older ones are trimmed and counted.
    pub max_events: u64,
    /// Opened only because spaces name endpoints (a server without
    /// endpoints of its own): the store may stop capturing again once no
    /// space names any, as a store restarted then would not capture. The
    /// memory store does; on Redis, where the switch is shared, such a
    /// store stops renewing it and follows it instead (so capture stops
    /// once it lapses, unless a server with endpoints of its own renews
    /// it). `false` (the default): capture whatever spaces name.
    pub for_spaces: bool,
    /// How long after it happened an event is still worth delivering (a
    /// server's `--webhook-max-age`; 24 hours by default). On Redis, where
    /// servers without webhooks capture for the others, it bounds what no
    /// one delivers: capture stops once no store that opened the outbox
    /// has renewed its switch for this long (at least
    /// [`MIN_LEASE_MS`]), and each stream expires this long after its
    /// newest event, when every event in it is too old to deliver. The
    /// memory store keeps its outbox only while its own server runs and
    /// needs no such bound.
    pub keep_ms: Millis,
}

/// The shortest lease a store that opened the outbox renews its switch
/// for, whatever [`OutboxOptions::keep_ms`] says: many ticks long, so a
/// busy or briefly disconnected server does not let capture stop.
pub const MIN_LEASE_MS: Millis = 60_000;

impl OutboxOptions {
    /// How long the switch stays on after the last renewal:
    /// [`keep_ms`](Self::keep_ms), at least [`MIN_LEASE_MS`].
    pub fn lease_ms(&self) -> Millis {
        self.keep_ms.max(MIN_LEASE_MS)
    }
}

impl Default for OutboxOptions {
    fn default() -> Self {
        Self {
            max_events: 100_000,
            for_spaces: false,
            keep_ms: 24 * 3_600_000,
        }
    }
}

/// The outbox's state, for metrics and `GET /v1/webhooks`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct OutboxStats {
    /// Events kept and not yet acknowledged (claimed or not).
    pub depth: u64,
    /// Of those, claimed by a consumer and not yet acknowledged.
    pub pending: u64,
    /// Events trimmed by the cap before they were acknowledged, since
    /// the store started counting (this process, or the Redis stream's
    /// life).
    pub trimmed: u64,
    /// Whether the outbox captures: opened by a server with webhooks, or
    /// by a space that names webhook endpoints (on Redis: whether the
    /// shared switch is on, a lease those servers renew).
    pub open: bool,
}

/// A webhook endpoint a space's configuration names: the space's events go
/// there as well as to the operator's endpoints. Core keeps it as given,
/// within bounds; what a URL and a secret must look like is the server's
/// to check. `Debug` never shows the secret.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SpaceHook {
    /// Where the events go.
    pub url: String,
    /// The kinds it wants, each once; never empty.
    pub kinds: Vec<OutboxKind>,
    /// What requests to it are signed with.
    pub secret: String,
}

impl std::fmt::Debug for SpaceHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SpaceHook")
            .field("url", &self.url)
            .field("kinds", &self.kinds)
            .finish_non_exhaustive()
    }
}

impl SpaceHook {
    /// Checks one space's endpoints together: at most
    /// [`limits::MAX_SPACE_HOOKS`], URLs and secrets non-empty and within
    /// their byte bounds, kinds non-empty without repeats, no URL twice.
    pub fn check_all(hooks: &[SpaceHook]) -> Result<(), InvalidInput> {
        let bad = |why: &'static str| Err(InvalidInput::BadConfig { why });
        if hooks.len() > limits::MAX_SPACE_HOOKS {
            return bad("a space names at most 8 webhook endpoints");
        }
        for (i, h) in hooks.iter().enumerate() {
            if h.url.is_empty() || h.url.len() > limits::MAX_HOOK_URL_BYTES {
                return bad("a webhook URL must be 1 to 2,048 bytes");
            }
            if h.secret.is_empty() || h.secret.len() > limits::MAX_HOOK_SECRET_BYTES {
                return bad("a webhook secret must be 1 to 256 bytes");
            }
            if h.kinds.is_empty() {
                return bad("a webhook endpoint wants at least one kind of event");
            }
            if h.kinds
                .iter()
                .enumerate()
                .any(|(j, k)| h.kinds[..j].contains(k))
            {
                return bad("a webhook endpoint names each kind of event once");
            }
            if hooks[..i].iter().any(|o| o.url == h.url) {
                return bad("a space names each webhook URL once");
            }
        }
        Ok(())
    }

    /// Whether it wants events of `kind`.
    pub fn wants(&self, kind: OutboxKind) -> bool {
        self.kinds.contains(&kind)
    }
}
