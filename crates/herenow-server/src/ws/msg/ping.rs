//! `ping`: keeps every joined space's presence alive.

use crate::ws::session::Session;
use crate::ws::wire::{Ping, Ref, ServerMessage, WsError};

impl Ping {
    /// Refreshes the joined spaces (at most about once a second) and
    /// answers with the store's clock.
    pub(in crate::ws) async fn apply(self, s: &mut Session, r: Option<Ref>) -> Result<(), WsError> {
        s.refresh(true).await;
        let server_time_ms = s.now_ms();
        s.reply(&ServerMessage::Pong {
            reference: r,
            server_time_ms,
        });
        Ok(())
    }
}
