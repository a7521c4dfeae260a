//! A socket's presence channels: each a live connection of its member in
//! the channel's space, refreshed while the socket lives; member events
//! from the store's subscription, and a fresh roster after lag. And the
//! occupancy of its public and private channels, for webhooks: each a
//! live connection of the channel's guest in the app's occupancy space.

use std::sync::Arc;

use herenow_core::{
    Attach, AttachReport, ConnId, DetachReport, Event, EventKind, EventReceiver, MemberId,
    MemberKey, MemberKind, Metadata, PresenceStore, RecvError, SpaceName,
};
use tokio::time::Instant;
use tokio_stream::StreamMap;

use super::super::{ChannelKind, frames};
use super::{EventStream, Presence, Session};
use crate::pusher_hub::{OccupancyWrites, Out, RESERVE};

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
        let subscription = self
            .store_call(store.subscribe(&space))
            .await
            .map_err(|m| ("ServerError", m, 503))?;
        let already = subscription.snapshot.iter().any(|m| m.member == key);
        let users = subscription
            .snapshot
            .iter()
            .filter(|m| m.member.kind == MemberKind::User)
            .count()
            + usize::try_from(subscription.snapshot_omitted).unwrap_or(usize::MAX);
        if !already && users >= self.app.max_presence_members {
            return Err((
                "LimitReached",
                format!(
                    "the presence channel is full: at most {} members",
                    self.app.max_presence_members
                ),
                4100,
            ));
        }
        let attach = Attach {
            member: key.clone(),
            conn: self.conn.clone(),
            meta: meta.clone(),
            invisible: false,
            ttl_ms: self.ttl_ms(),
        };
        self.store_call(attach_live(&store, &space, &attach))
            .await
            .map_err(|m| ("ServerError", m, 503))?;
        let mut roster = roster(&subscription.snapshot);
        if !already {
            roster.push((member.user_id.clone(), meta.clone()));
        }
        self.streams
            .insert(channel.to_owned(), into_stream(subscription.events));
        self.presence.insert(
            channel.to_owned(),
            Presence {
                space,
                member: key,
                meta,
                conn: self.conn.clone(),
            },
        );
        self.join_channel(channel, ChannelKind::Presence);
        self.push_member(channel, frames::presence_succeeded(channel, &roster));
        Ok(())
    }

    /// Writes this server's count of `channel` (a public or private
    /// channel) after this socket joined or left it, so counts, the channel
    /// list and `channel_occupied` / `channel_vacated` are the same on every
    /// server (`crate::pusher_hub`'s occupancy). Waited for, never failing:
    /// a write that failed is tried again at the next refresh.
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

    /// One item of a presence channel's store subscription.
    pub(super) async fn on_member_event(
        &mut self,
        channel: String,
        item: Result<Arc<Event>, RecvError>,
    ) {
        let Some(presence) = self.presence.get(&channel) else {
            return;
        };
        let event = match item {
            Ok(event) => event,
            Err(RecvError::Lagged(_)) => {
                self.start_lag(&channel);
                return;
            }
            Err(RecvError::Closed) => return,
        };
        // Guests of the space (herenow's own API) are not Pusher members;
        // this socket's own user is in its roster while it is attached.
        if event.member.kind != MemberKind::User || event.member == presence.member {
            return;
        }
        let text = match event.kind {
            EventKind::Join => self.pusher.member_texts.get_or_make(&event, &channel, || {
                frames::member_added(&channel, event.member.id.as_str(), event.meta.as_ref())
            }),
            EventKind::Leave => self.pusher.member_texts.get_or_make(&event, &channel, || {
                frames::member_removed(&channel, event.member.id.as_str())
            }),
            _ => return,
        };
        self.push_member(&channel, text);
    }

    /// Queues a member event or roster of `channel`, unless it lags; one
    /// that does not fit starts the lag.
    pub(super) fn push_member(&mut self, channel: &str, text: Arc<str>) {
        if self.lagging.contains(channel) {
            return;
        }
        if self.tx.is_closed() {
            // The writer is gone (the client left): nothing is owed.
            self.close(super::close::GONE, "the client is gone");
            return;
        }
        if self.tx.capacity() > RESERVE && self.tx.try_send(Out::Text(text)).is_ok() {
            return;
        }
        self.start_lag(channel);
    }

    /// `channel` owes a fresh roster.
    pub(super) fn start_lag(&mut self, channel: &str) {
        self.lagging.insert(channel.to_owned());
        self.lag_since.get_or_insert_with(Instant::now);
    }

    /// Sends a presence channel's whole roster again, from a new store
    /// subscription whose events follow it.
    pub(super) async fn resync(&mut self, channel: &str) {
        let Some(p) = self.presence.get(channel) else {
            return;
        };
        let space = p.space.clone();
        let store = self.state.store().clone();
        match self.store_call(store.subscribe(&space)).await {
            Ok(sub) => {
                let (member, meta) = match self.presence.get(channel) {
                    Some(p) => (p.member.clone(), p.meta.clone()),
                    None => return,
                };
                let mut members = roster(&sub.snapshot);
                if !sub.snapshot.iter().any(|m| m.member == member) {
                    members.push((member.id.as_str().to_owned(), meta));
                }
                self.streams
                    .insert(channel.to_owned(), into_stream(sub.events));
                self.push_member(channel, frames::presence_succeeded(channel, &members));
            }
            Err(_) => self.start_lag(channel),
        }
    }

    /// Attaches every presence channel again, so the store keeps the
    /// socket's presence while it lives.
    pub(super) async fn refresh(&mut self) {
        let ttl_ms = self.ttl_ms();
        let store = self.state.store().clone();
        let signed_in = self.signed_in.as_ref().and_then(|u| u.presence.as_ref());
        for p in self.presence.values().chain(signed_in) {
            let attach = Attach {
                member: p.member.clone(),
                conn: p.conn.clone(),
                meta: p.meta.clone(),
                invisible: false,
                ttl_ms,
            };
            if let Err(e) = self
                .store_call(attach_live(&store, &p.space, &attach))
                .await
            {
                tracing::debug!(space = %p.space, error = e, "refreshing a Pusher member failed");
            }
        }
    }

    /// Leaves every channel: the socket is going away.
    pub(super) async fn leave_all(&mut self) {
        for channel in self.channels.keys() {
            self.pusher
                .channels
                .leave(&self.app_id, channel, self.number);
        }
        let channels = std::mem::take(&mut self.channels);
        self.streams = StreamMap::new();
        for (_, p) in std::mem::take(&mut self.presence) {
            self.detach(&p).await;
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
            if let Some(p) = &user.presence {
                self.detach(p).await;
            }
        }
        self.watchlist = None;
    }

    /// Ends this socket's presence in `p`'s space.
    pub(super) async fn detach(&self, p: &Presence) {
        let store = self.state.store().clone();
        if let Err(e) = self
            .store_call(detach_live(&store, &p.space, &p.member, &p.conn))
            .await
        {
            tracing::warn!(space = %p.space, error = e, "detaching a Pusher member failed; it expires by its TTL");
        }
    }

    /// The live connection's TTL: the server's WebSocket TTL.
    pub(super) fn ttl_ms(&self) -> u64 {
        let (ttl, _) = self.state.ws().timing();
        u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX)
    }
}

/// Attaches a socket through the store's live connections (every store
/// the server opens with Pusher apps offers them; one that does not is
/// named in the error).
pub(super) async fn attach_live(
    store: &Arc<dyn PresenceStore>,
    space: &SpaceName,
    attach: &Attach,
) -> herenow_core::Result<AttachReport> {
    match store.live_connections() {
        Some(live) => live.attach(space, attach).await,
        None => Err(store.lacks("live connections")),
    }
}

/// Detaches a socket through the store's live connections.
pub(super) async fn detach_live(
    store: &Arc<dyn PresenceStore>,
    space: &SpaceName,
    member: &MemberKey,
    conn: &ConnId,
) -> herenow_core::Result<DetachReport> {
    match store.live_connections() {
        Some(live) => live.detach(space, member, conn).await,
        None => Err(store.lacks("live connections")),
    }
}

/// The users of a snapshot, with their metadata.
fn roster(snapshot: &[herenow_core::MemberStatus]) -> Vec<(String, Option<Metadata>)> {
    snapshot
        .iter()
        .filter(|m| m.member.kind == MemberKind::User)
        .map(|m| (m.member.id.as_str().to_owned(), m.meta.clone()))
        .collect()
}

/// A subscription's events as a stream that ends when the store closes.
fn into_stream(rx: EventReceiver) -> EventStream {
    Box::pin(futures::stream::unfold(rx, |mut rx| async move {
        match rx.recv().await {
            Err(RecvError::Closed) => None,
            item => Some((item, rx)),
        }
    }))
}
