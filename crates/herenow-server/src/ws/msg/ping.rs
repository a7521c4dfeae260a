//! `ping`: keeps every joined space's presence alive.

use serde::Deserialize;

use crate::ws::session::Session;
use crate::ws::{Ref, ServerMessage, WsError};

/// `{"type": "ping"}` → `pong`. Re-attaches every joined space, unless the
/// last write was less than a second ago (`MIN_STORE_PING`; less for a
/// very short TTL): a tab that pings on every focus change costs no more
/// than one that pings on time.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Ping {}

impl Ping {
    pub(crate) async fn apply(self, s: &mut Session, r: Option<Ref>) -> Result<(), WsError> {
        s.refresh(s.ping_write_gap()).await;
        let server_time_ms = s.now_ms();
        s.reply(&ServerMessage::Pong {
            reference: r,
            server_time_ms,
        });
        Ok(())
    }
}
