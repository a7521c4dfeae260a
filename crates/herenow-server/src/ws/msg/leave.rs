//! `leave`: end this connection's presence in a space.

use herenow_core::SpaceName;

use crate::ws::session::Session;
use crate::ws::wire::{Leave, Ref, WsError};

impl Leave<'_> {
    /// Detaches from a joined space; any other is `not-joined`.
    pub(in crate::ws) async fn apply(self, s: &mut Session, r: Option<Ref>) -> Result<(), WsError> {
        let space = SpaceName::new(&self.space)?;
        s.leave(&space).await?;
        s.ok(r);
        Ok(())
    }
}
