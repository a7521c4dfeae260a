//! `join`: be present in a space through this connection.

use super::metadata;
use crate::ws::session::Session;
use crate::ws::wire::{Join, Ref, WsError};

impl Join<'_> {
    /// Checks the space (allowed by the token, within the join limit) and
    /// the metadata, then attaches.
    pub(in crate::ws) async fn apply(self, s: &mut Session, r: Option<Ref>) -> Result<(), WsError> {
        let space = s.allowed_space(&self.space)?;
        let meta = metadata(self.meta.as_ref())?;
        s.joined.admit(&space)?;
        s.join(space, meta).await?;
        s.ok(r);
        Ok(())
    }
}
