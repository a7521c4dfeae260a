//! `watch` and `unwatch`: live status of any set of users.

use herenow_core::{InvalidInput, MemberId};

use crate::protocol::watch_shapes::WatchScope;
use crate::protocol::ws::{Ref, Unwatch, Watch, WsError};
use crate::watch::limits::MAX_WATCHED;
use crate::ws::limits::{DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE};
use crate::ws::session::Session;

impl Watch {
    /// Checks the ids, the space (allowed by the token) and the page size,
    /// then watches: the `watching` pages follow at once.
    pub(in crate::ws) async fn apply(self, s: &mut Session, r: Option<Ref>) -> Result<(), WsError> {
        let users = user_ids(self.users)?;
        if users.is_empty() && !self.friends && !self.replace {
            return Err(WsError::bad_message(
                "watch names users, or friends: true (or replace: true to watch nobody)",
            ));
        }
        let scope = match self.space {
            Some(name) => WatchScope::Space(s.allowed_space(&name)?),
            None => WatchScope::Anywhere,
        };
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
        s.watch(scope, users, self.friends, self.replace, page_size, r)
            .await
    }
}

impl Unwatch {
    /// Stops watching the users named, or everyone; `ok`.
    pub(in crate::ws) async fn apply(self, s: &mut Session, r: Option<Ref>) -> Result<(), WsError> {
        let users = self.users.map(user_ids).transpose()?;
        s.unwatch(users).await?;
        s.ok(r);
        Ok(())
    }
}

/// Checks a list of user ids: at most [`MAX_WATCHED`], each a valid id
/// (repeats are harmless).
fn user_ids(ids: Vec<String>) -> Result<Vec<MemberId>, WsError> {
    if ids.len() > MAX_WATCHED {
        return Err(WsError::new(
            "too-many-watched",
            format!(
                "a connection watches at most {MAX_WATCHED} users; the message names {}",
                ids.len()
            ),
        ));
    }
    ids.iter()
        .map(|id| MemberId::new(id).map_err(WsError::from))
        .collect()
}
