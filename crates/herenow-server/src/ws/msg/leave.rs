//! `leave`: end this connection's presence in a space.

use std::borrow::Cow;

use herenow_core::SpaceName;
use serde::Deserialize;

use crate::ws::session::Session;
use crate::ws::{Ref, WsError};

/// `{"type": "leave", "space": "room:1"}` → `ok`. The member leaves when
/// this was its last visible connection there (`disconnect` otherwise).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Leave<'a> {
    /// A space this connection joined.
    #[serde(borrow)]
    pub space: Cow<'a, str>,
}

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
