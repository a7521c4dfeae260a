//! `subscribe`: see a space's presence, a snapshot then its events.

use std::borrow::Cow;

use herenow_core::InvalidInput;
use serde::Deserialize;

use crate::ws::session::Session;
use crate::ws::{DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE, Ref, WsError};

/// `{"type": "subscribe", "space": "room:1", "page_size": 500}` →
/// `snapshot` pages (the last echoes the `ref`), then `event`s.
/// Subscribing again restarts the snapshot.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Subscribe<'a> {
    /// The space; the token must allow it.
    #[serde(borrow)]
    pub space: Cow<'a, str>,
    /// Members per snapshot page, 1 to 1,000 (default 500).
    #[serde(default)]
    pub page_size: Option<u64>,
}

impl Subscribe<'_> {
    pub(crate) async fn apply(self, s: &mut Session, r: Option<Ref>) -> Result<(), WsError> {
        let space = s.allowed_space(&self.space)?;
        let page_size = match self.page_size {
            None => DEFAULT_PAGE_SIZE,
            Some(n) if (1..=MAX_PAGE_SIZE as u64).contains(&n) => n as usize,
            Some(n) => {
                return Err(InvalidInput::LimitOutOfRange {
                    got: i64::try_from(n).unwrap_or(i64::MAX),
                    max: MAX_PAGE_SIZE,
                }
                .into());
            }
        };
        s.subscribe(space, page_size, r).await
    }
}
