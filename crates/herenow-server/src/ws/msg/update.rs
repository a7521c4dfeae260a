//! `update`: change this connection's metadata in a joined space.

use std::borrow::Cow;

use herenow_core::SpaceName;
use serde::Deserialize;

use super::metadata;
use crate::ws::session::Session;
use crate::ws::{Ref, WsError};

/// `{"type": "update", "space": "room:1", "meta": {…} | null}` → `ok`;
/// others see an `update` naming this connection.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Update<'a> {
    /// A space this connection joined.
    #[serde(borrow)]
    pub space: Cow<'a, str>,
    /// The new metadata, or `null` to clear it. Required.
    pub meta: serde_json::Value,
}

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
