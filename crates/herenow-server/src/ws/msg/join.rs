//! `join`: be present in a space through this connection.

use std::borrow::Cow;

use serde::Deserialize;

use super::metadata;
use crate::ws::session::Session;
use crate::ws::{MAX_JOINED, Ref, WsError};

/// `{"type": "join", "space": "room:1", "meta": {…}}` → `ok`. The first
/// visible connection of a member makes it `join`; further ones
/// `connect`. Joining again replaces this connection's metadata.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Join<'a> {
    /// The space; the token must allow it.
    #[serde(borrow)]
    pub space: Cow<'a, str>,
    /// This connection's metadata: an object of at most 1 KiB.
    #[serde(default)]
    pub meta: Option<serde_json::Value>,
}

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
