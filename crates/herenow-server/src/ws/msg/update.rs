//! `update`: change this connection's metadata in a joined space.

use herenow_core::SpaceName;

use super::metadata;
use crate::ws::session::Session;
use crate::ws::wire::{Ref, Update, WsError};

impl Update<'_> {
    /// Checks that the space was joined, then the metadata, then attaches
    /// again with it.
    pub(in crate::ws) async fn apply(self, s: &mut Session, r: Option<Ref>) -> Result<(), WsError> {
        let space = SpaceName::new(&self.space)?;
        s.joined.require(&space)?;
        let meta = metadata(Some(&self.meta))?;
        s.join(space, meta).await?;
        s.ok(r);
        Ok(())
    }
}
