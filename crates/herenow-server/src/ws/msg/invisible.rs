//! `invisible`: hide this connection, or show it again.

use crate::protocol::ws::{Invisible, Ref, WsError};
use crate::ws::session::Session;

impl Invisible {
    /// Changes the visibility of every joined space (and of those joined
    /// later); the same visibility again changes nothing.
    pub(in crate::ws) async fn apply(self, s: &mut Session, r: Option<Ref>) -> Result<(), WsError> {
        s.set_invisible(self.on).await?;
        s.ok(r);
        Ok(())
    }
}
