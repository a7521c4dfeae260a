//! A socket's presence channels (a live connection of its member in each
//! channel's space, refreshed while the socket lives) and the occupancy
//! of its public and private channels.

use herenow_core::{Attach, MemberId, MemberKey, Metadata, SpaceName};

use super::super::{ChannelKind, frames};
use super::{LiveMembership, MAX_STALL, Session};
use crate::pusher::hub::{JoinError, Listener, OccupancyWrites};
use crate::socket::{attach_live, end_live};

impl Session {
    /// Subscribes to a presence channel: the member's connection in the
    /// space, then its roster in one message.
    pub(super) async fn subscribe_presence(
        &mut self,
        channel: &str,
        sub: &frames::Subscribe,
    ) -> Result<(), (&'static str, String, u16)> {
        let bad = |m: &str| ("BadRequest", m.to_owned(), 400);
        let member = sub
            .channel_data
            .as_deref()
            .and_then(frames::member)
            .ok_or_else(|| bad("channel_data must be a JSON object with a user_id"))?;
        let meta = match &member.user_info {
            None => None,
            Some(info) => Some(Metadata::from_json(info.get()).map_err(|e| match e {
                herenow_core::InvalidInput::MetaTooLarge { .. } => (
                    "LimitReached",
                    "user_info is larger than 1 KiB".to_owned(),
                    413,
                ),
                _ => bad("user_info must be a JSON object"),
            })?),
        };
        let space = SpaceName::new(&self.app.presence_space(channel)).map_err(|_| {
            bad("a presence channel is a herenow space: at most 128 letters, digits or - _ . : @")
        })?;
        let id = MemberId::new(&member.user_id)
            .map_err(|_| bad("user_id must be 1 to 256 bytes without control characters"))?;
        let key = MemberKey::user(id);
        let store = self.state.store().clone();
        let wait = self.state.request_timeout();
        let admitted = self
            .pusher
            .members
            .admit(
                &store,
                &space,
                channel,
                &key,
                self.app.max_presence_members,
                wait,
            )
            .await
            .map_err(|e| match e {
                JoinError::Full(max) => (
                    "LimitReached",
                    format!("the presence channel is full: at most {max} members"),
                    4100,
                ),
                JoinError::Unavailable => unavailable(),
            })?;
        let membership = LiveMembership {
            space,
            member: key,
            meta,
            conn: self.conn.clone(),
        };
        self.attach(&membership)
            .await
            .map_err(|m| ("ServerError", m, 503))?;
        let (ttl, _) = self.state.ws().timing();
        let listener = Listener {
            number: self.number,
            member: membership.member.clone(),
            meta: membership.meta.clone(),
            queue: self.inlet.sender().clone(),
            ender: self.ender.clone(),
            stall: MAX_STALL.min(ttl),
        };
        // In the channel's fan-out before the feed queues the roster: an
        // event sent once the client has its roster (another member's
        // client event, one from the HTTP API) must reach it. One sent
        // meanwhile may come before the roster (docs/PUSHER.md).
        self.join_channel(channel, ChannelKind::Presence);
        if !admitted.enter(listener, wait).await {
            self.leave_channel(channel);
            self.end(&membership, true).await;
            return Err(unavailable());
        }
        self.memberships.insert(channel, membership);
        Ok(())
    }

    /// Writes this server's count of `channel` (public or private) after
    /// this socket joined or left it (`pusher::hub`'s occupancy says why
    /// and how); waited for, never failing.
    pub(super) async fn sync_occupancy(&self, channel: &str) {
        let (_, refresh_every) = self.state.ws().timing();
        let writes = OccupancyWrites {
            store: self.state.store().clone(),
            ttl_ms: self.ttl_ms(),
            wait: self.state.request_timeout(),
            refresh_every,
            stop: self.state.shutdown_token().clone(),
        };
        self.pusher
            .sync_occupancy(&self.app, channel, &writes)
            .await;
    }

    /// `channel`'s roster again (the socket subscribed again).
    pub(super) fn resend_roster(&self, channel: &str) {
        if let Some(p) = self.memberships.get(channel) {
            self.pusher.members.resend(&p.space, self.number);
        }
    }

    /// This socket leaves `p`'s member feed, then the space ([`end_live`];
    /// a goodbye is `pusher:unsubscribe` or `terminate_connections`).
    pub(super) async fn leave_presence(&self, p: &LiveMembership, goodbye: bool) {
        self.pusher.members.leave(&p.space, self.number);
        self.end(p, goodbye).await;
    }

    /// Attaches every presence channel again, so the store keeps the
    /// socket's presence while it lives.
    pub(super) async fn refresh(&mut self) {
        let signed_in = self.signed_in.as_ref().and_then(|u| u.membership.as_ref());
        for p in self.memberships.values().chain(signed_in) {
            if let Err(e) = self.attach(p).await {
                tracing::debug!(space = %p.space, error = e, "refreshing a Pusher member failed");
            }
        }
    }

    /// Leaves every channel: the socket is going away, with a goodbye or
    /// not (see [`Self::leave_presence`]).
    pub(super) async fn leave_all(&mut self, goodbye: bool) {
        for channel in self.channels.keys() {
            self.pusher
                .channels
                .leave(&self.app_id, channel, self.number);
        }
        let channels = std::mem::take(&mut self.channels);
        for (_, p) in std::mem::take(&mut self.memberships) {
            self.leave_presence(&p, goodbye).await;
        }
        for (channel, kind) in channels {
            if kind.is_occupancy() {
                self.sync_occupancy(&channel).await;
            }
        }
        if let Some(user) = self.signed_in.take() {
            self.pusher
                .channels
                .leave(&self.app_id, &user.channel, self.number);
            if let Some(p) = &user.membership {
                self.end(p, goodbye).await;
            }
        }
        self.watchlist = None;
    }

    /// Ends this socket's presence in `p`'s space ([`end_live`]).
    pub(super) async fn end(&self, p: &LiveMembership, goodbye: bool) {
        let store = self.state.store();
        let call = end_live(store, &p.space, &p.member, &p.conn, goodbye);
        if let Err(e) = self.store_call(call).await {
            tracing::warn!(space = %p.space, error = e, "ending a Pusher member's presence failed; it expires by its TTL");
        }
    }

    /// Attaches `p` (again).
    pub(super) async fn attach(&self, p: &LiveMembership) -> Result<(), String> {
        let attach = Attach {
            member: p.member.clone(),
            conn: p.conn.clone(),
            meta: p.meta.clone(),
            invisible: false,
            ttl_ms: self.ttl_ms(),
        };
        self.store_call(attach_live(self.state.store(), &p.space, &attach))
            .await
    }

    /// The live connection's TTL: the server's WebSocket TTL.
    pub(super) fn ttl_ms(&self) -> u64 {
        let (ttl, _) = self.state.ws().timing();
        u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX)
    }
}

/// The refusal when the store does not answer.
fn unavailable() -> (&'static str, String, u16) {
    (
        "ServerError",
        "the store is unavailable; try again".to_owned(),
        503,
    )
}
