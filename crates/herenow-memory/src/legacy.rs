//! Core's values as older journals and snapshots wrote them, read back
//! into today's forms: an outbox event before messages' bodies, a space's
//! policy before the grace. Only this engine's files hold them.

use serde::{Deserialize, Serialize};

use herenow_core::conn::ConnId;
use herenow_core::event::LeaveReason;
use herenow_core::id::{MemberKey, SpaceName};
use herenow_core::meta::Metadata;
use herenow_core::outbox::{OutboxEvent, OutboxKind};
use herenow_core::policy::{SpaceConfig, Status};
use herenow_core::time::Millis;

/// [`OutboxEvent`] as snapshots up to version 5 and journals of version 1
/// hold it, before messages' bodies.
#[derive(Deserialize)]
#[cfg_attr(test, derive(Serialize))]
pub(crate) struct OutboxEventV1 {
    id: String,
    at_ms: Millis,
    space: SpaceName,
    kind: OutboxKind,
    member: Option<MemberKey>,
    status: Option<Status>,
    last_seen_ms: Option<Millis>,
    #[serde(with = "herenow_core::meta::as_text")]
    meta: Option<Metadata>,
    reason: Option<LeaveReason>,
    conn: Option<ConnId>,
}

impl From<OutboxEventV1> for OutboxEvent {
    fn from(e: OutboxEventV1) -> Self {
        OutboxEvent {
            id: e.id,
            at_ms: e.at_ms,
            space: e.space,
            kind: e.kind,
            member: e.member,
            status: e.status,
            last_seen_ms: e.last_seen_ms,
            meta: e.meta,
            reason: e.reason,
            conn: e.conn,
            body: None,
        }
    }
}

/// A [`SpaceConfig`] as journals and snapshots wrote it before the grace
/// (`grace_ms`): read back with the default grace.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct SpaceConfigV2 {
    online_ms: Millis,
    away_ms: Millis,
    window_ms: Millis,
    retention_ms: Millis,
    remember_ms: Millis,
    remember_guests: bool,
}

impl SpaceConfigV2 {
    /// The policy it was, with `grace_ms` for the field it lacked.
    pub(crate) fn upgrade(self, grace_ms: Millis) -> SpaceConfig {
        SpaceConfig {
            online_ms: self.online_ms,
            away_ms: self.away_ms,
            window_ms: self.window_ms,
            retention_ms: self.retention_ms,
            remember_ms: self.remember_ms,
            remember_guests: self.remember_guests,
            grace_ms,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    impl From<&OutboxEvent> for OutboxEventV1 {
        fn from(e: &OutboxEvent) -> Self {
            OutboxEventV1 {
                id: e.id.clone(),
                at_ms: e.at_ms,
                space: e.space.clone(),
                kind: e.kind,
                member: e.member.clone(),
                status: e.status,
                last_seen_ms: e.last_seen_ms,
                meta: e.meta.clone(),
                reason: e.reason,
                conn: e.conn.clone(),
            }
        }
    }

    impl From<SpaceConfig> for SpaceConfigV2 {
        fn from(c: SpaceConfig) -> Self {
            SpaceConfigV2 {
                online_ms: c.online_ms,
                away_ms: c.away_ms,
                window_ms: c.window_ms,
                retention_ms: c.retention_ms,
                remember_ms: c.remember_ms,
                remember_guests: c.remember_guests,
            }
        }
    }
}
