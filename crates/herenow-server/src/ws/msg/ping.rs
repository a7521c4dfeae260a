//! `ping`: keeps every joined space's presence alive.

use serde::Deserialize;

use crate::ws::session::Session;
use crate::ws::{MIN_STORE_PING, Ref, ServerMessage, WsError};

/// `{"type": "ping"}` → `pong`. Re-attaches every joined space, unless the
/// last ping that did was less than a second ago (a tab that pings on
/// every focus change costs no more than one that pings on time).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Ping {}

impl Ping {
    pub(crate) async fn apply(self, s: &mut Session, r: Option<Ref>) -> Result<(), WsError> {
        s.refresh(MIN_STORE_PING).await;
        let server_time_ms = s.now_ms();
        s.reply(&ServerMessage::Pong {
            reference: r,
            server_time_ms,
        });
        Ok(())
    }
}
