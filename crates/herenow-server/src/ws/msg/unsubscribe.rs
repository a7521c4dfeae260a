//! `unsubscribe`: stop seeing a space.

use std::borrow::Cow;

use herenow_core::SpaceName;
use serde::Deserialize;

use crate::ws::session::Session;
use crate::ws::{Ref, WsError};

/// `{"type": "unsubscribe", "space": "room:1"}` → `ok`; no more of the
/// space's events follow.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Unsubscribe<'a> {
    /// A space this connection subscribed to.
    #[serde(borrow)]
    pub space: Cow<'a, str>,
}

impl Unsubscribe<'_> {
    pub(crate) async fn apply(self, s: &mut Session, r: Option<Ref>) -> Result<(), WsError> {
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
