//! `ping`: keeps every joined space's presence alive.

use crate::protocol::ws::{Ping, Ref, ServerMessage, WsError};
use crate::ws::session::Session;

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
