//! Subscribing, unsubscribing and client events of one socket.

use tokio::time::Instant;

use super::super::{ChannelKind, sign};
use super::{MAX_CHANNELS, MAX_EVENT_NAME, Session, code};
use crate::pusher::frames::{self, Incoming};
use crate::pusher::hub::{Relayed, Subscriber};

impl Session {
    /// The data of `msg` as a `T`, or `None` after telling the client
    /// that its event needs data with `what`.
    pub(super) fn data_of<T: for<'de> serde::Deserialize<'de>>(
        &mut self,
        msg: &Incoming,
        what: &str,
    ) -> Option<T> {
        let data = frames::data_of::<T>(msg.data.as_deref());
        if data.is_none() {
            self.reject(&format!("{} needs data with {what}", msg.event));
        }
        data
    }

    /// `pusher:subscribe`.
    pub(super) async fn subscribe(&mut self, msg: &Incoming) {
        let Some(sub) = self.data_of::<frames::Subscribe>(msg, "a channel") else {
            return;
        };
        let channel = sub.channel.as_str();
        let Some(kind) = ChannelKind::of(channel) else {
            self.reply(frames::subscription_error(
                channel,
                "BadRequest",
                "a channel name is 1 to 164 letters, digits or _ - = @ , . ;",
                400,
            ));
            return;
        };
        if kind == ChannelKind::User {
            // Joined at signin; pusher-js asks again, and only its own.
            let own = self
                .signed_in
                .as_ref()
                .is_some_and(|u| u.channel == channel);
            self.reply(if own {
                frames::subscribed(channel)
            } else {
                frames::subscription_error(
                    channel,
                    "AuthError",
                    "a user's channel is for the sockets signed in as that user",
                    403,
                )
            });
            return;
        }
        if self.channels.contains_key(channel) {
            // Already subscribed: said again, as Pusher does.
            if kind == ChannelKind::Presence {
                self.resend_roster(channel);
            } else {
                self.reply(frames::subscribed(channel));
            }
            return;
        }
        if self.channels.len() >= MAX_CHANNELS {
            self.reply(frames::subscription_error(
                channel,
                "LimitReached",
                "a socket may subscribe to at most 100 channels",
                4100,
            ));
            return;
        }
        if kind.needs_auth() && !self.authorized(channel, &sub) {
            self.reply(frames::subscription_error(
                channel,
                "AuthError",
                "Invalid signature: the connection is unauthorized for this channel",
                401,
            ));
            return;
        }
        if kind == ChannelKind::Presence {
            if let Err((kind, message, status)) = self.subscribe_presence(channel, &sub).await {
                self.reply(frames::subscription_error(channel, kind, &message, status));
            }
            return;
        }
        self.join_channel(channel, kind);
        if kind.is_occupancy() {
            self.sync_occupancy(channel).await;
        }
        self.reply(frames::subscribed(channel));
    }

    /// Whether `sub.auth` is `key:HMAC-SHA256(secret, socket_id:channel[:channel_data])`.
    fn authorized(&self, channel: &str, sub: &frames::Subscribe) -> bool {
        let message =
            sign::channel_auth_message(&self.socket_id, channel, sub.channel_data.as_deref());
        sub.auth
            .as_deref()
            .is_some_and(|auth| self.signs(auth, &message))
    }

    /// Whether `auth` is `key:HMAC-SHA256(secret, message)` with the
    /// app's key and secret.
    pub(super) fn signs(&self, auth: &str, message: &str) -> bool {
        let Some((key, signature)) = auth.split_once(':') else {
            return false;
        };
        let expected = sign::hmac_hex(&self.app.secret, message);
        // Both compared, so timing does not tell which was wrong.
        let key_ok = sign::same(key, &self.app.key);
        sign::same(signature, &expected) & key_ok
    }

    /// Counts the socket in `channel` here and for the app's events.
    pub(super) fn join_channel(&mut self, channel: &str, kind: ChannelKind) {
        self.channels.insert(channel, kind);
        self.pusher
            .channels
            .join(&self.app_id, channel, self.number, self.subscriber());
    }

    /// Uncounts the socket in `channel` ([`Self::join_channel`] undone):
    /// the channel's kind, if it was in it.
    pub(super) fn leave_channel(&mut self, channel: &str) -> Option<ChannelKind> {
        let kind = self.channels.remove(channel)?;
        self.pusher
            .channels
            .leave(&self.app_id, channel, self.number);
        Some(kind)
    }

    /// This socket as a channel's fan-out sees it.
    pub(super) fn subscriber(&self) -> Subscriber {
        Subscriber {
            socket_id: self.socket_id.clone(),
            queue: self.inlet.sender().clone(),
            ender: self.ender.clone(),
        }
    }

    /// `pusher:unsubscribe`: nothing is answered. A user's channel stays
    /// while the socket is signed in.
    pub(super) async fn unsubscribe(&mut self, channel: &str) {
        let Some(kind) = self.leave_channel(channel) else {
            return;
        };
        if let Some(p) = self.memberships.remove(channel) {
            self.leave_presence(&p, true).await;
        }
        if kind.is_occupancy() {
            self.sync_occupancy(channel).await;
        }
    }

    /// A `client-` event: relayed to the channel's other subscribers, on
    /// every server.
    pub(super) async fn client_event(&mut self, msg: &Incoming) {
        let channel = msg.channel.as_deref().unwrap_or_default();
        let kind = self.channels.get(channel).copied();
        let refusal = match kind {
            None => Some("Client event rejected: the socket is not subscribed to the channel"),
            Some(ChannelKind::Public | ChannelKind::User) => {
                Some("Client event rejected: only private and presence channels take client events")
            }
            Some(ChannelKind::Encrypted) => {
                Some("Client event rejected: encrypted channels take no client events")
            }
            Some(ChannelKind::Private | ChannelKind::Presence) => None,
        };
        if let Some(refusal) = refusal {
            // `null`, as Pusher answers it: 4009 ("connection is
            // unauthorized") would tell the client its connection closes.
            self.reject(refusal);
            return;
        }
        let max_data = self.app.max_client_event_bytes;
        if msg.event.len() > MAX_EVENT_NAME
            || msg.data.as_ref().is_some_and(|d| d.get().len() > max_data)
        {
            self.reject(&format!(
                "Client event rejected: the name is over {MAX_EVENT_NAME} bytes or the data \
                 over {max_data} bytes (the app's limit)"
            ));
            return;
        }
        if !self.bucket.allow(Instant::now()) {
            self.reply(frames::error(
                Some(code::RATE_LIMITED),
                "Client event rejected - rate limit exceeded",
            ));
            return;
        }
        let user_id = self.memberships.get(channel).map(|p| p.member.id.as_str());
        let rejected = "Client event rejected: the server could not relay it; try again";
        // Kept for the app's webhooks first (when they ask for client
        // events), by the server whose socket sent it: once across
        // servers. A client told to try again may make a webhook twice,
        // never none for an event relayed.
        let event = crate::pusher::webhook_format::ClientEvent {
            app_id: &self.app.id,
            channel,
            event: &msg.event,
            data: msg.data.as_deref(),
            socket_id: &self.socket_id,
            user_id,
        };
        let hooks = self.state.webhooks();
        let presence = self.memberships.get(channel).map(|p| &p.space);
        if let Err(e) = self.store_call(event.keep_for(hooks, presence)).await {
            tracing::warn!(error = %e, "a client event could not be kept for webhooks");
            self.reject(rejected);
            return;
        }
        let text = frames::client_event(&msg.event, channel, msg.data.as_deref(), user_id);
        let relayed = Relayed::Frame {
            app: self.app.id.clone(),
            channel: channel.to_owned(),
            text: text.to_string(),
            except: Some(self.socket_id.to_string()),
        };
        let sent = self
            .pusher
            .send(self.state.store(), self.state.request_timeout(), relayed)
            .await;
        if let Err(e) = sent {
            tracing::debug!(error = %e, "a client event could not be relayed");
            self.reject(rejected);
        }
    }
}
