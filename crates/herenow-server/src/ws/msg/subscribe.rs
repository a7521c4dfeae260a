//! `subscribe`: see a space's presence, a snapshot then its events.

use herenow_core::InvalidInput;

use crate::ws::limits::{DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE};
use crate::ws::session::Session;
use crate::ws::wire::{Ref, Subscribe, WsError};

impl Subscribe<'_> {
    /// Checks the space (allowed by the token) and the page size, then
    /// subscribes: the snapshot follows at once.
    pub(in crate::ws) async fn apply(self, s: &mut Session, r: Option<Ref>) -> Result<(), WsError> {
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
