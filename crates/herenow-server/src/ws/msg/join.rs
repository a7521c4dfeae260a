//! `join`: be present in a space through this connection.

use super::metadata;
use crate::protocol::ws::{Join, Ref, WsError};
use crate::ws::limits::MAX_JOINED;
use crate::ws::session::Session;

impl Join<'_> {
    pub(crate) async fn apply(self, s: &mut Session, r: Option<Ref>) -> Result<(), WsError> {
        let space = s.allowed_space(&self.space)?;
        let meta = metadata(self.meta.as_ref())?;
        if !s.joined.contains_key(&space) && s.joined.len() >= MAX_JOINED {
            return Err(WsError::new(
                "too-many-spaces",
                format!("a connection may join at most {MAX_JOINED} spaces"),
            ));
        }
        s.attach(&space, meta.clone()).await?;
        s.joined.insert(space, meta);
        s.ok(r);
        Ok(())
    }
}
