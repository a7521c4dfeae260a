//! This connection's presence in the spaces it joined, through the store's
//! live connections: attached on `join` and every refresh, and ended on a
//! `leave` or on every way out of the session (see `herenow_core::conn`):
//! detached after a goodbye (a `leave` message, a close with `1000`),
//! else handed to the grace (a close with another code, a drop, a silence,
//! the server's shutdown), so a member who comes straight back, on any
//! server, never left.

use herenow_core::{Attach, AttachReport, Capability, DetachReport, Metadata, SpaceName};

use super::session::Session;
use crate::ws::wire::WsError;

impl Session {
    /// Opens, pings or changes this connection in `space`.
    pub(super) async fn attach(
        &self,
        space: &SpaceName,
        meta: Option<Metadata>,
    ) -> Result<AttachReport, WsError> {
        let attach = Attach {
            member: self.grant()?.member.clone(),
            conn: self.conn.clone(),
            meta,
            invisible: self.joined.is_invisible(),
            ttl_ms: self.timers.ttl_ms(),
        };
        let store = self.state.store();
        let live = store
            .live_connections()
            .ok_or_else(|| store.lacks(Capability::LiveConnections))?;
        self.store_call(live.attach(space, &attach)).await
    }

    /// Ends this connection in `space`: detached after a `goodbye`, else
    /// lingering for the space's grace.
    pub(super) async fn end(
        &self,
        space: &SpaceName,
        goodbye: bool,
    ) -> Result<DetachReport, WsError> {
        let member = &self.grant()?.member;
        let store = self.state.store();
        let live = store
            .live_connections()
            .ok_or_else(|| store.lacks(Capability::LiveConnections))?;
        if goodbye {
            self.store_call(live.detach(space, member, &self.conn))
                .await
        } else {
            self.store_call(live.linger(space, member, &self.conn))
                .await
        }
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
