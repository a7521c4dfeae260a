//! JSON shapes shared by the HTTP API, the event stream, the WebSocket
//! protocol and the token claims.
//!
//! Core types carry no OpenAPI schemas and no serde names of their own, so
//! their wire form is defined here; the DTOs hold core values (ids,
//! metadata), so building an answer moves them, never copies.

use herenow_core::outbox::OutboxKind;
use herenow_core::{MemberId, MemberKind, MemberStatus, Metadata, SpaceConfig, Status};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// Users or guests, on the wire.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
#[schema(as = Kind)]
pub enum MemberKindDto {
    /// An authenticated user (the default).
    #[default]
    User,
    /// An anonymous visitor.
    Guest,
}

impl From<MemberKindDto> for MemberKind {
    fn from(k: MemberKindDto) -> Self {
        match k {
            MemberKindDto::User => MemberKind::User,
            MemberKindDto::Guest => MemberKind::Guest,
        }
    }
}

impl From<MemberKind> for MemberKindDto {
    fn from(k: MemberKind) -> Self {
        match k {
            MemberKind::User => MemberKindDto::User,
            MemberKind::Guest => MemberKindDto::Guest,
        }
    }
}

/// Whom a token's socket may watch: its `watch` claim.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum WatchGrant {
    /// Its user's friends only (the default): a browser cannot probe the
    /// site's other users.
    #[default]
    Friends,
    /// Any user.
    Any,
    /// Nobody.
    None,
}

/// A member's status as clients see it: online, away or offline, on the
/// wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "lowercase")]
#[schema(as = Presence)]
pub enum StatusDto {
    /// Seen within the space's `online_ms`.
    Online,
    /// Seen within the space's `away_ms`.
    Away,
    /// Seen longer ago, never seen, or left (however recently).
    Offline,
}

impl From<Status> for StatusDto {
    fn from(s: Status) -> Self {
        match s {
            Status::Online => StatusDto::Online,
            Status::Away => StatusDto::Away,
            Status::Offline => StatusDto::Offline,
        }
    }
}

/// A member's presence, as answered.
#[derive(Debug, Serialize, ToSchema)]
pub struct MemberDto {
    /// The member's id; a user and a guest with the same id are two
    /// members.
    #[schema(value_type = String)]
    pub id: MemberId,
    /// User or guest.
    pub kind: MemberKindDto,
    /// By the space's thresholds.
    pub status: StatusDto,
    /// Last seen, ms since the UNIX epoch: the last heartbeat of a
    /// present member; for one whose presence ended (a leave, or expiry at
    /// the retention) the remembered time it ended (the leave's time, or
    /// its last heartbeat), with `status: offline`, until the space's
    /// `remember_ms` horizon. `null` if never seen, erased, past the
    /// horizon, or a guest in a space that does not remember guests.
    pub last_seen_ms: Option<u64>,
    /// The member's metadata, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub meta: Option<Metadata>,
}

impl From<MemberStatus> for MemberDto {
    fn from(m: MemberStatus) -> Self {
        Self {
            id: m.member.id,
            kind: m.member.kind.into(),
            status: m.status.into(),
            last_seen_ms: m.last_seen_ms,
            meta: m.meta,
        }
    }
}

/// A space's time policy, in ms. The thresholds must satisfy
/// `0 < online ≤ away ≤ retention ≤ 24h` and `0 < window ≤ retention`;
/// `remember_ms` is at most 1,096 days, `grace_ms` 5 minutes.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SpaceConfigDto {
    /// `online` while the last heartbeat is younger than this.
    #[serde(deserialize_with = "crate::protocol::whole_numbers::u64")]
    pub online_ms: u64,
    /// `away` while younger than this; `offline` after.
    #[serde(deserialize_with = "crate::protocol::whole_numbers::u64")]
    pub away_ms: u64,
    /// The default window of "who's online".
    #[serde(deserialize_with = "crate::protocol::whole_numbers::u64")]
    pub window_ms: u64,
    /// How long a member is kept after its last heartbeat.
    #[serde(deserialize_with = "crate::protocol::whole_numbers::u64")]
    pub retention_ms: u64,
    /// How long a user's last-seen time is remembered after presence
    /// ends (by leave or at the retention): status answers give it, with
    /// `offline`, until `last_seen + remember_ms`. `0`: not remembered.
    /// Default 30 days (the server's `--remember`), at most 1,096 days
    /// (94,694,400,000 ms). Absent in a `PUT`: the space keeps what it has.
    #[serde(default, deserialize_with = "crate::protocol::whole_numbers::opt_u64")]
    #[schema(minimum = 0, maximum = 94694400000.0)]
    pub remember_ms: Option<u64>,
    /// Whether guests are remembered too (default `false`: guests churn
    /// by the million). Absent in a `PUT`: unchanged.
    #[serde(default)]
    pub remember_guests: Option<bool>,
    /// How long a member whose last live connection ended without a
    /// goodbye (a page reload, a dropped network, its server stopping or
    /// dying) stays present: if a connection of the same member comes
    /// back within it, on any server and either protocol, nobody is told
    /// anything; if not, the member leaves when it ends, last seen when
    /// the connection ended. A member in its grace is listed and counted.
    /// `0` turns it off. Default 5 s (the server's `--grace`), at most
    /// 5 minutes (300,000 ms). Absent in a `PUT`: unchanged.
    #[serde(default, deserialize_with = "crate::protocol::whole_numbers::opt_u64")]
    #[schema(minimum = 0, maximum = 300000)]
    pub grace_ms: Option<u64>,
    /// Webhook endpoints of this space (at most 8): its events are sent
    /// there as well as to the operator's endpoints, signed and retried
    /// alike. Absent in a `PUT`: unchanged; `[]` removes them. Shown only
    /// to callers that may write (a read-scoped key gets no `webhooks`),
    /// never with their secrets.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "super::bounded::opt_objects"
    )]
    #[schema(max_items = 8)]
    pub webhooks: Option<Vec<SpaceWebhookDto>>,
}

/// A webhook endpoint a space names.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SpaceWebhookDto {
    /// Where events go: an `http` or `https` URL without a fragment, at
    /// most 2,048 bytes; each URL once per space.
    #[schema(min_length = 1, max_length = 2048)]
    pub url: String,
    /// The kinds of events it wants, each once; absent in a `PUT`: all.
    #[serde(default, deserialize_with = "super::bounded::opt_batch")]
    #[schema(min_items = 1, max_items = 7)]
    pub events: Option<Vec<WebhookEvent>>,
    /// The signing secret, `whsec_` and the base64 of 24 to 64 bytes (the
    /// Standard Webhooks form). Absent: the server's `--webhook-secret`
    /// (refused when it has none). Never shown.
    // Never set in an answer (`hooks_view` leaves it out), so never sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(write_only, min_length = 1, max_length = 256)]
    pub secret: Option<String>,
    /// Its name in `GET /v1/webhooks` and `/metrics`
    /// (`space:HOST:HASH`); ignored in a `PUT`.
    #[serde(default)]
    #[schema(read_only)]
    pub name: Option<String>,
}

/// A kind of webhook event.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum WebhookEvent {
    /// A member became present.
    Join,
    /// A member went away.
    Away,
    /// An away member came back.
    Back,
    /// A member left (explicitly, by expiry, or its last connection
    /// closed).
    Leave,
    /// A present member's metadata changed.
    Update,
    /// The space's first present member joined.
    Occupied,
    /// The space's last present member left.
    Vacated,
}

impl From<WebhookEvent> for OutboxKind {
    fn from(e: WebhookEvent) -> Self {
        match e {
            WebhookEvent::Join => OutboxKind::Join,
            WebhookEvent::Away => OutboxKind::Away,
            WebhookEvent::Back => OutboxKind::Back,
            WebhookEvent::Leave => OutboxKind::Leave,
            WebhookEvent::Update => OutboxKind::Update,
            WebhookEvent::Occupied => OutboxKind::Occupied,
            WebhookEvent::Vacated => OutboxKind::Vacated,
        }
    }
}

impl WebhookEvent {
    /// The name of an outbox kind; `None` for a message, which no
    /// endpoint names.
    pub fn of(k: OutboxKind) -> Option<Self> {
        Some(match k {
            OutboxKind::Join => WebhookEvent::Join,
            OutboxKind::Away => WebhookEvent::Away,
            OutboxKind::Back => WebhookEvent::Back,
            OutboxKind::Leave => WebhookEvent::Leave,
            OutboxKind::Update => WebhookEvent::Update,
            OutboxKind::Occupied => WebhookEvent::Occupied,
            OutboxKind::Vacated => WebhookEvent::Vacated,
            OutboxKind::Message => return None,
        })
    }
}

impl SpaceConfigDto {
    /// The policy this body sets on a space whose policy is `current`:
    /// the four thresholds as given, the remembering fields as given or
    /// as they were.
    pub fn onto(&self, current: SpaceConfig) -> SpaceConfig {
        SpaceConfig {
            online_ms: self.online_ms,
            away_ms: self.away_ms,
            window_ms: self.window_ms,
            retention_ms: self.retention_ms,
            remember_ms: self.remember_ms.unwrap_or(current.remember_ms),
            remember_guests: self.remember_guests.unwrap_or(current.remember_guests),
            grace_ms: self.grace_ms.unwrap_or(current.grace_ms),
        }
    }
}

impl From<SpaceConfig> for SpaceConfigDto {
    fn from(c: SpaceConfig) -> Self {
        Self {
            online_ms: c.online_ms,
            away_ms: c.away_ms,
            window_ms: c.window_ms,
            retention_ms: c.retention_ms,
            remember_ms: Some(c.remember_ms),
            remember_guests: Some(c.remember_guests),
            grace_ms: Some(c.grace_ms),
            webhooks: None,
        }
    }
}
