//! This connection's presence in the spaces it joined, through the store's
//! live connections: attached on `join` and every refresh, and ended on a
//! `leave` or on every way out of the session: detached after a goodbye
//! (a `leave` message, a close with `1000`), else handed to the grace.

use herenow_core::{Attach, Metadata, SpaceName};

use super::session::Session;
use crate::socket::{attach_live, end_live};
use crate::ws::wire::WsError;

impl Session {
    /// Opens, pings or changes this connection in `space`.
    pub(super) async fn attach(
        &self,
        space: &SpaceName,
        meta: Option<Metadata>,
    ) -> Result<(), WsError> {
        let attach = Attach {
            member: self.grant()?.member.clone(),
            conn: self.conn.clone(),
            meta,
            invisible: self.joined.is_invisible(),
            ttl_ms: self.timers.ttl_ms(),
        };
        self.store_call(attach_live(self.state.store(), space, &attach))
            .await
    }

    /// Ends this connection in `space` ([`end_live`]).
    pub(super) async fn end(&self, space: &SpaceName, goodbye: bool) -> Result<(), WsError> {
        let member = &self.grant()?.member;
        let store = self.state.store();
        self.store_call(end_live(store, space, member, &self.conn, goodbye))
            .await
    }

    /// Ends this connection in every joined space: it is going away.
    pub(super) async fn end_all(&mut self, goodbye: bool) {
        for space in self.joined.take_all() {
            if let Err(e) = self.end(&space, goodbye).await {
                tracing::warn!(%space, code = e.code, "ending a closed connection failed; it expires by its TTL");
            }
        }
    }
}
