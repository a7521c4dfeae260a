//! `unsubscribe`: stop seeing a space.

use herenow_core::SpaceName;

use crate::ws::session::Session;
use crate::ws::wire::{Ref, Unsubscribe, WsError};

impl Unsubscribe<'_> {
    /// Ends a subscription; a space not subscribed to is `not-subscribed`.
    pub(in crate::ws) async fn apply(self, s: &mut Session, r: Option<Ref>) -> Result<(), WsError> {
        let space = SpaceName::new(&self.space)?;
        if !s.unsubscribe(&space) {
            return Err(WsError::new(
                "not-subscribed",
                format!("this connection is not subscribed to {space}"),
            ));
        }
        s.ok(r);
        Ok(())
    }
}
