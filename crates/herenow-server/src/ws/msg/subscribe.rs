//! `subscribe`: see a space's presence, a snapshot then its events.

use crate::ws::limits::page_size;
use crate::ws::session::Session;
use crate::ws::wire::{Ref, Subscribe, WsError};

impl Subscribe<'_> {
    /// Checks the space (allowed by the token) and the page size, then
    /// subscribes: the snapshot follows at once.
    pub(in crate::ws) async fn apply(self, s: &mut Session, r: Option<Ref>) -> Result<(), WsError> {
        let space = s.allowed_space(&self.space)?;
        let page_size = page_size(self.page_size)?;
        s.subscribe(space, page_size, r, false).await
    }
}
