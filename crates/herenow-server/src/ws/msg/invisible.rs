//! `invisible`: hide this connection, or show it again.

use crate::ws::session::Session;
use crate::ws::wire::{Invisible, Ref, WsError};

impl Invisible {
    /// Changes the visibility of every joined space (and of those joined
    /// later); the same visibility again changes nothing.
    pub(in crate::ws) async fn apply(self, s: &mut Session, r: Option<Ref>) -> Result<(), WsError> {
        s.set_invisible(self.on).await?;
        s.ok(r);
        Ok(())
    }
}
