//! `leave`: end this connection's presence in a space.

use herenow_core::SpaceName;

use crate::protocol::ws::{Leave, Ref, WsError};
use crate::ws::session::Session;

impl Leave<'_> {
    pub(crate) async fn apply(self, s: &mut Session, r: Option<Ref>) -> Result<(), WsError> {
        let space = SpaceName::new(&self.space)?;
        // Forgotten first: should the store fail now, the connection is
        // no longer refreshed and expires by its TTL.
        if s.joined.remove(&space).is_none() {
            return Err(WsError::new(
                "not-joined",
                format!("this connection did not join {space}"),
            ));
        }
        s.detach(&space).await?;
        s.ok(r);
        Ok(())
    }
}
