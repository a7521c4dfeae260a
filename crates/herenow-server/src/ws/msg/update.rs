//! `update`: change this connection's metadata in a joined space.

use herenow_core::SpaceName;

use super::metadata;
use crate::protocol::ws::{Ref, Update, WsError};
use crate::ws::session::Session;

impl Update<'_> {
    pub(crate) async fn apply(self, s: &mut Session, r: Option<Ref>) -> Result<(), WsError> {
        let space = SpaceName::new(&self.space)?;
        if !s.joined.contains_key(&space) {
            return Err(WsError::new(
                "not-joined",
                format!("this connection did not join {space}"),
            ));
        }
        let meta = metadata(Some(&self.meta))?;
        s.attach(&space, meta.clone()).await?;
        s.joined.insert(space, meta);
        s.ok(r);
        Ok(())
    }
}
