//! `GET /app/{key}`: one Pusher socket.
//!
//! Like herenow's own WebSocket (`crate::ws`), a socket is two futures:
//! the session (reading, subscribing, forwarding presence) and a writer
//! fed by a bounded queue, so nothing the session does waits on a slow
//! client. The socket shares the server's WebSocket bound and the tracker
//! shutdown waits on ([`Hub`](crate::hub::Hub)).
//!
//! A presence subscription is a live connection of the member in the
//! channel's space (`herenow_core::conn`), refreshed while the socket
//! lives, detached when it ends or unsubscribes; its member events are
//! the space's events, read from the store's subscription. The
//! subscriber's own user is in its roster from the start, so the
//! events of its own presence are not sent to it.
//!
//! **Lag.** A member event that does not fit the queue is not dropped
//! silently and does not cut the socket: the channel *lags*, its further
//! member events are skipped, and once half the queue is free the socket
//! gets a fresh `pusher_internal:subscription_succeeded` read from a new
//! store subscription (pusher-js rebuilds its member list from it), so
//! it always ends with the exact roster. The same happens when the
//! store's own event queue overflows. Only a client whose queue stays
//! full for [`MAX_STALL`] (or the WebSocket TTL, if shorter) is closed
//! (`4100`). An app event or client event
//! that does not fit closes the socket with `4100` at once (see
//! `channels`): it cannot be recovered from a roster.
//!
//! Why one file past 800 lines: it is one socket's state machine (frames,
//! channels, presence, client events, the writer); the shared pieces are
//! already apart (`frames.rs`, `sign.rs`, `crate::pusher_hub`).

use std::collections::{HashMap, HashSet};
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::ws::{CloseFrame, Message, WebSocket, WebSocketUpgrade};
use axum::extract::{Path, RawQuery, State};
use axum::response::Response;
use futures::stream::{SplitSink, SplitStream};
use futures::{SinkExt, Stream, StreamExt};
use herenow_core::{
    Attach, AttachReport, ConnId, DetachReport, Event, EventKind, EventReceiver, MemberId,
    MemberKey, MemberKind, Metadata, PresenceStore, RecvError, SpaceName,
};
use tokio::sync::{Notify, mpsc, oneshot};
use tokio::time::{Instant, sleep_until, timeout};
use tokio_stream::StreamMap;

use super::frames::{self, Incoming};
use super::sign;
use super::{ChannelKind, Pusher, PusherApp};
use crate::pusher_hub::{Out, QUEUE, RESERVE, Subscriber};
use crate::state::AppState;

/// The largest frame a client may send; a larger one closes the socket
/// with `1009`.
pub(crate) const MAX_FRAME: usize = 32 * 1024;

/// The silences of a socket: `activity_timeout`, told to clients, is the
/// server's WebSocket TTL (`--ws-ttl`, whole seconds, at least one): a
/// client pings after that long without a message, and so does the
/// server; a `pusher:ping` unanswered for half of it closes the socket
/// with `4201`. A dead socket is so noticed within 1.5 TTLs, and its
/// presence, no longer refreshed, expires in the store within one TTL of
/// a dead server.
fn silences(ttl: Duration) -> (Duration, Duration) {
    let activity = Duration::from_secs(ttl.as_secs().max(1));
    (activity, activity / 2)
}

/// How long a lagging socket's queue may stay without room before the
/// socket is closed (`4100`).
pub(crate) const MAX_STALL: Duration = Duration::from_secs(30);

/// How long what is queued and the close frame may take to go out once
/// the session has ended.
const CLOSE_GRACE: Duration = Duration::from_secs(5);

/// Most channels one socket may subscribe to.
pub(crate) const MAX_CHANNELS: usize = 100;

/// Longest client event name and data, in bytes (Pusher's 200 and 10 KB).
const MAX_EVENT_NAME: usize = 200;
const MAX_EVENT_DATA: usize = 10 * 1024;

/// Free slots a lagging socket needs before it gets fresh rosters.
const LAG_ROOM: usize = QUEUE / 2;

/// Protocol versions this server speaks (pusher-js 8 says 7).
const PROTOCOLS: std::ops::RangeInclusive<u32> = 5..=7;

/// Close codes (Pusher's: 4000–4099 do not reconnect, 4100–4199
/// reconnect after a while, 4200–4299 reconnect at once).
mod close {
    pub(crate) const UNKNOWN_APP: u16 = 4001;
    pub(crate) const BAD_VERSION: u16 = 4006;
    pub(crate) const UNSUPPORTED_VERSION: u16 = 4007;
    pub(crate) const NO_VERSION: u16 = 4008;
    pub(crate) const OVER_CAPACITY: u16 = 4100;
    pub(crate) const RECONNECT: u16 = 4200;
    pub(crate) const NO_PONG: u16 = 4201;
}

/// `pusher:error` codes that do not close.
mod code {
    pub(crate) const UNAUTHORIZED: u16 = 4009;
    pub(crate) const RATE_LIMITED: u16 = 4301;
}

/// Upgrades any request: refusals (unknown key, bad version, no room) are
/// the protocol's close codes, which clients act on, rather than an HTTP
/// status they cannot read.
pub(super) async fn upgrade(
    State(state): State<AppState>,
    Path(key): Path<String>,
    RawQuery(query): RawQuery,
    ws: WebSocketUpgrade,
) -> Response {
    let refusal = refusal(&state, &key, query.as_deref());
    let permit = if refusal.is_none() {
        state.ws().admit()
    } else {
        None
    };
    let tracked = state.ws().tracker().token();
    let upgraded = ws
        .max_message_size(MAX_FRAME)
        .max_frame_size(MAX_FRAME)
        .read_buffer_size(512)
        .write_buffer_size(0);
    upgraded.on_upgrade(move |socket| async move {
        let admitted = match (refusal, permit) {
            (Some(refused), _) => Err(refused),
            (None, None) => Err((close::OVER_CAPACITY, "over capacity")),
            (None, Some(permit)) => Ok(permit),
        };
        let app = state
            .pusher()
            .and_then(|p| p.by_key(&key).map(|app| (p.clone(), app.clone())));
        match (admitted, app) {
            (Ok(permit), Some((pusher, app))) => {
                run(socket, state, pusher, app).await;
                drop(permit);
            }
            (Err((code, reason)), _) => refuse(socket, code, reason).await,
            // Checked by `refusal` already.
            (Ok(_), None) => refuse(socket, close::UNKNOWN_APP, "unknown app key").await,
        }
        drop(tracked);
    })
}

/// Why a socket is closed at once, if it is.
fn refusal(state: &AppState, key: &str, query: Option<&str>) -> Option<(u16, &'static str)> {
    if state.shutdown_token().is_cancelled() {
        return Some((close::RECONNECT, "the server is shutting down"));
    }
    if state.pusher().is_none_or(|p| p.by_key(key).is_none()) {
        return Some((close::UNKNOWN_APP, "App key not in this server's apps"));
    }
    let protocol = query.and_then(|q| {
        q.split('&')
            .filter_map(|kv| kv.split_once('='))
            .find(|(k, _)| *k == "protocol")
            .map(|(_, v)| v)
    });
    match protocol.map(str::parse::<u32>) {
        None => Some((close::NO_VERSION, "No protocol version supplied")),
        Some(Err(_)) => Some((close::BAD_VERSION, "Invalid version string format")),
        Some(Ok(v)) if !PROTOCOLS.contains(&v) => {
            Some((close::UNSUPPORTED_VERSION, "Unsupported protocol version"))
        }
        Some(Ok(_)) => None,
    }
}

/// Tells the client why, then closes; a client that reads nothing for
/// [`CLOSE_GRACE`] is dropped.
async fn refuse(socket: WebSocket, code: u16, reason: &str) {
    let (mut sink, _) = socket.split();
    let _ = timeout(CLOSE_GRACE, async {
        let error = frames::error(Some(code), reason).to_string();
        sink.send(Message::Text(error.into())).await?;
        let frame = CloseFrame {
            code,
            reason: reason.into(),
        };
        sink.send(Message::Close(Some(frame))).await
    })
    .await;
}

/// Runs one socket to its end.
async fn run(socket: WebSocket, state: AppState, pusher: Arc<Pusher>, app: Arc<PusherApp>) {
    let (sink, stream) = socket.split();
    let (tx, rx) = mpsc::channel(QUEUE + RESERVE);
    let number = pusher.next_socket();
    let socket_id: Arc<str> = Arc::from(pusher.socket_id(number));
    let session = Session {
        conn: ConnId::new(&format!("p{socket_id}"))
            .unwrap_or_else(|_| unreachable!("digits and a dot make a valid connection id")),
        app_id: Arc::from(app.id.as_str()),
        bucket: Bucket::new(app.client_events_per_second, Instant::now()),
        state,
        pusher,
        app,
        number,
        socket_id,
        tx,
        overflow: Arc::new(Notify::new()),
        channels: HashMap::new(),
        presence: HashMap::new(),
        streams: StreamMap::new(),
        lagging: HashSet::new(),
        lag_since: None,
        closing: None,
    };
    let (ended_tx, ended_rx) = oneshot::channel::<()>();
    let session = async move {
        session.run(stream).await;
        drop(ended_tx);
    };
    let writer = async move {
        tokio::select! {
            () = write(sink, rx) => {}
            // Once the session has ended, what is queued and the close
            // have CLOSE_GRACE to go out: a client that stopped reading
            // cannot hold the task (and the server's shutdown) forever.
            () = async {
                let _ = ended_rx.await;
                tokio::time::sleep(CLOSE_GRACE).await;
            } => {}
        }
    };
    tokio::join!(session, writer);
}

/// The writer: sends what the session queued, in order, until the close
/// or until the session is gone.
async fn write(mut sink: SplitSink<WebSocket, Message>, mut rx: mpsc::Receiver<Out>) {
    while let Some(out) = rx.recv().await {
        match out {
            Out::Text(text) => {
                if sink.send(Message::Text((&*text).into())).await.is_err() {
                    return;
                }
            }
            Out::Close(code, reason) => {
                let frame = CloseFrame {
                    code,
                    reason: reason.into(),
                };
                let _ = sink.send(Message::Close(Some(frame))).await;
                return;
            }
        }
    }
    let _ = sink.close().await;
}

type EventStream = Pin<Box<dyn Stream<Item = Result<Arc<Event>, RecvError>> + Send + Sync>>;

/// A presence subscription: the space and who this socket is there.
struct Presence {
    space: SpaceName,
    member: MemberKey,
    meta: Option<Metadata>,
}

/// One socket.
struct Session {
    state: AppState,
    pusher: Arc<Pusher>,
    app: Arc<PusherApp>,
    app_id: Arc<str>,
    number: u64,
    socket_id: Arc<str>,
    /// This socket's live connection id in presence spaces.
    conn: ConnId,
    tx: mpsc::Sender<Out>,
    overflow: Arc<Notify>,
    /// Subscribed channels and their kinds.
    channels: HashMap<String, ChannelKind>,
    presence: HashMap<String, Presence>,
    /// The presence channels' member events, by channel.
    streams: StreamMap<String, EventStream>,
    /// Presence channels whose member events were skipped: a fresh roster
    /// is owed.
    lagging: HashSet<String>,
    lag_since: Option<Instant>,
    bucket: Bucket,
    closing: Option<(u16, String)>,
}

impl Session {
    async fn run(mut self, mut stream: SplitStream<WebSocket>) {
        let (ttl, refresh_every) = self.state.ws().timing();
        let (activity, pong_wait) = silences(ttl);
        self.reply(frames::connection_established(
            &self.socket_id,
            activity.as_secs(),
        ));
        let shutdown = self.state.shutdown_token().clone();
        let mut next_refresh = Instant::now() + refresh_every;
        let mut last_heard = Instant::now();
        let mut pinged: Option<Instant> = None;
        let room = self.tx.clone();
        let overflow = self.overflow.clone();
        while self.closing.is_none() {
            let quiet_deadline = match pinged {
                Some(at) => at + pong_wait,
                None => last_heard + activity,
            };
            let lagging = !self.lagging.is_empty();
            let stall = self.lag_since.map(|t| t + MAX_STALL.min(ttl));
            let has_streams = !self.streams.is_empty();
            tokio::select! {
                biased;
                () = shutdown.cancelled() => {
                    self.close(close::RECONNECT, "the server is shutting down");
                }
                () = overflow.notified() => {
                    self.close(close::OVER_CAPACITY, "too slow: the send queue is full");
                }
                () = sleep_until(stall.unwrap_or(quiet_deadline)), if stall.is_some() => {
                    self.close(close::OVER_CAPACITY, "too slow: the send queue stayed full");
                }
                // A socket whose queue is jammed cannot be read either (its
                // pongs wait behind its writes): the stall limit judges it.
                () = sleep_until(quiet_deadline), if stall.is_none() => {
                    if pinged.is_some() {
                        self.close(close::NO_PONG, "Pong reply not received");
                    } else {
                        pinged = Some(Instant::now());
                        self.reply(frames::bare("pusher:ping"));
                    }
                }
                () = sleep_until(next_refresh) => {
                    next_refresh = Instant::now() + refresh_every;
                    self.refresh().await;
                }
                permits = room.reserve_many(LAG_ROOM), if lagging => {
                    drop(permits);
                    for channel in std::mem::take(&mut self.lagging) {
                        self.resync(&channel).await;
                    }
                    if self.lagging.is_empty() {
                        self.lag_since = None;
                    }
                }
                frame = stream.next() => {
                    last_heard = Instant::now();
                    pinged = None;
                    match frame {
                        Some(Ok(Message::Text(text))) => self.on_text(text.as_str()).await,
                        Some(Ok(Message::Binary(_))) => {
                            self.reply(frames::error(None, "binary frames are not part of the protocol"));
                        }
                        Some(Ok(Message::Ping(_) | Message::Pong(_))) => {}
                        Some(Ok(Message::Close(_))) | None => break,
                        Some(Err(e)) => {
                            if let Some((code, reason)) = read_error_close(e) {
                                self.close(code, reason);
                            }
                            break;
                        }
                    }
                }
                Some((channel, item)) = self.streams.next(), if has_streams => {
                    self.on_member_event(channel, item).await;
                }
            }
        }
        self.leave_all().await;
        if let Some((code, reason)) = self.closing.take() {
            // In the reserve if need be; a queue full even there has a
            // writer that no longer writes, and dropping the sender ends it.
            let _ = self.tx.try_send(Out::Close(code, reason));
        }
    }

    /// One text frame.
    async fn on_text(&mut self, text: &str) {
        let Some(msg) = frames::decode(text) else {
            self.reply(frames::error(
                None,
                "a message must be a JSON object with an \"event\"",
            ));
            return;
        };
        match msg.event.as_str() {
            "pusher:ping" => self.reply(frames::bare("pusher:pong")),
            "pusher:pong" => {}
            "pusher:subscribe" => self.subscribe(&msg).await,
            "pusher:unsubscribe" => {
                match frames::data_of::<frames::Unsubscribe>(msg.data.as_deref()) {
                    Some(u) => self.unsubscribe(&u.channel).await,
                    None => self.reply(frames::error(
                        None,
                        "pusher:unsubscribe needs data with a channel",
                    )),
                }
            }
            name if name.starts_with("client-") => self.client_event(&msg),
            _ => self.reply(frames::error(None, "unknown event")),
        }
    }

    /// `pusher:subscribe`.
    async fn subscribe(&mut self, msg: &Incoming) {
        let Some(sub) = frames::data_of::<frames::Subscribe>(msg.data.as_deref()) else {
            self.reply(frames::error(
                None,
                "pusher:subscribe needs data with a channel",
            ));
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
        if self.channels.contains_key(channel) {
            // Already subscribed: said again, as Pusher does.
            if kind != ChannelKind::Presence {
                self.reply(frames::event(
                    "pusher_internal:subscription_succeeded",
                    Some(channel),
                    "{}",
                ));
            } else {
                self.resync(channel).await;
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
        self.reply(frames::event(
            "pusher_internal:subscription_succeeded",
            Some(channel),
            "{}",
        ));
    }

    /// Whether `sub.auth` is `key:HMAC-SHA256(secret, socket_id:channel[:channel_data])`.
    fn authorized(&self, channel: &str, sub: &frames::Subscribe) -> bool {
        let Some((key, signature)) = sub.auth.as_deref().and_then(|a| a.split_once(':')) else {
            return false;
        };
        let message =
            sign::channel_auth_message(&self.socket_id, channel, sub.channel_data.as_deref());
        let expected = sign::hmac_hex(&self.app.secret, &message);
        // Both compared, so timing does not tell which was wrong.
        let key_ok = sign::same(key, &self.app.key);
        sign::same(signature, &expected) & key_ok
    }

    /// Subscribes to a presence channel: the member's connection in the
    /// space, then its roster in one message.
    async fn subscribe_presence(
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
        let space = SpaceName::new(channel).map_err(|_| {
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
            },
        );
        self.join_channel(channel, ChannelKind::Presence);
        self.push_member(channel, frames::presence_succeeded(channel, &roster));
        Ok(())
    }

    /// Counts the socket in `channel` here and for the app's events.
    fn join_channel(&mut self, channel: &str, kind: ChannelKind) {
        self.channels.insert(channel.to_owned(), kind);
        self.pusher.channels.join(
            &self.app_id,
            channel,
            self.number,
            Subscriber {
                socket_id: self.socket_id.clone(),
                queue: self.tx.clone(),
                overflow: self.overflow.clone(),
            },
        );
    }

    /// `pusher:unsubscribe`: nothing is answered.
    async fn unsubscribe(&mut self, channel: &str) {
        if self.channels.remove(channel).is_none() {
            return;
        }
        self.pusher
            .channels
            .leave(&self.app_id, channel, self.number);
        self.streams.remove(channel);
        self.lagging.remove(channel);
        if let Some(p) = self.presence.remove(channel) {
            self.detach(&p).await;
        }
    }

    /// A `client-` event: relayed to the channel's other subscribers.
    fn client_event(&mut self, msg: &Incoming) {
        let channel = msg.channel.as_deref().unwrap_or_default();
        let kind = self.channels.get(channel).copied();
        let refusal = match kind {
            None => Some("Client event rejected: the socket is not subscribed to the channel"),
            Some(ChannelKind::Public) => {
                Some("Client event rejected: only private and presence channels take client events")
            }
            Some(ChannelKind::Encrypted) => {
                Some("Client event rejected: encrypted channels take no client events")
            }
            Some(ChannelKind::Private | ChannelKind::Presence) => None,
        };
        if let Some(refusal) = refusal {
            self.reply(frames::error(Some(code::UNAUTHORIZED), refusal));
            return;
        }
        if msg.event.len() > MAX_EVENT_NAME
            || msg
                .data
                .as_ref()
                .is_some_and(|d| d.get().len() > MAX_EVENT_DATA)
        {
            self.reply(frames::error(
                None,
                "Client event rejected: the name is over 200 bytes or the data over 10 KB",
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
        let user_id = self.presence.get(channel).map(|p| p.member.id.as_str());
        let text = frames::client_event(&msg.event, channel, msg.data.as_deref(), user_id);
        self.pusher
            .channels
            .publish(&self.app_id, channel, &text, Some(&self.socket_id));
    }

    /// One item of a presence channel's store subscription.
    async fn on_member_event(&mut self, channel: String, item: Result<Arc<Event>, RecvError>) {
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
            EventKind::Join => {
                frames::member_added(&channel, event.member.id.as_str(), event.meta.as_ref())
            }
            EventKind::Leave => frames::member_removed(&channel, event.member.id.as_str()),
            _ => return,
        };
        self.push_member(&channel, text);
    }

    /// Queues a member event or roster of `channel`, unless it lags; one
    /// that does not fit starts the lag.
    fn push_member(&mut self, channel: &str, text: Arc<str>) {
        if self.lagging.contains(channel) {
            return;
        }
        if self.tx.capacity() > RESERVE && self.tx.try_send(Out::Text(text)).is_ok() {
            return;
        }
        self.start_lag(channel);
    }

    /// `channel` owes a fresh roster.
    fn start_lag(&mut self, channel: &str) {
        self.lagging.insert(channel.to_owned());
        self.lag_since.get_or_insert_with(Instant::now);
    }

    /// Sends a presence channel's whole roster again, from a new store
    /// subscription whose events follow it.
    async fn resync(&mut self, channel: &str) {
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
    async fn refresh(&mut self) {
        let ttl_ms = self.ttl_ms();
        let store = self.state.store().clone();
        for p in self.presence.values() {
            let attach = Attach {
                member: p.member.clone(),
                conn: self.conn.clone(),
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
    async fn leave_all(&mut self) {
        for channel in self.channels.keys() {
            self.pusher
                .channels
                .leave(&self.app_id, channel, self.number);
        }
        self.channels.clear();
        self.streams = StreamMap::new();
        for (_, p) in std::mem::take(&mut self.presence) {
            self.detach(&p).await;
        }
    }

    /// Ends this socket's presence in `p`'s space.
    async fn detach(&self, p: &Presence) {
        let store = self.state.store().clone();
        if let Err(e) = self
            .store_call(detach_live(&store, &p.space, &p.member, &self.conn))
            .await
        {
            tracing::warn!(space = %p.space, error = e, "detaching a Pusher member failed; it expires by its TTL");
        }
    }

    /// The live connection's TTL: the server's WebSocket TTL.
    fn ttl_ms(&self) -> u64 {
        let (ttl, _) = self.state.ws().timing();
        u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX)
    }

    /// Queues a reply, in the reserve if need be; a client too slow even
    /// for that is closed.
    fn reply(&mut self, text: Arc<str>) {
        if let Err(mpsc::error::TrySendError::Full(_)) = self.tx.try_send(Out::Text(text)) {
            self.close(close::OVER_CAPACITY, "too slow: the send queue is full");
        }
    }

    /// Decides the close; the first reason wins.
    fn close(&mut self, code: u16, reason: &str) {
        if self.closing.is_none() {
            self.closing = Some((code, reason.to_owned()));
        }
    }

    /// A store call bounded by the request timeout; the error as a message.
    async fn store_call<T>(
        &self,
        call: impl Future<Output = herenow_core::Result<T>>,
    ) -> Result<T, String> {
        match timeout(self.state.request_timeout(), call).await {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(e)) => Err(e.to_string()),
            Err(_) => Err("the store took longer than the request timeout".into()),
        }
    }
}

/// Attaches a socket through the store's live connections (every store
/// the server opens with Pusher apps offers them; one that does not is
/// named in the error).
async fn attach_live(
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
async fn detach_live(
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

/// The close for a read that failed because of what the client sent.
fn read_error_close(e: axum::Error) -> Option<(u16, &'static str)> {
    let inner = e.into_inner();
    match inner.downcast_ref::<tungstenite::Error>()? {
        tungstenite::Error::Capacity(_) => Some((1009, "a message over 32 KiB")),
        tungstenite::Error::Utf8(_) => Some((1007, "a text frame that is not UTF-8")),
        tungstenite::Error::Protocol(_) => Some((1002, "a WebSocket protocol error")),
        _ => None,
    }
}

/// A token bucket: `rate` a second, bursts of `rate`.
struct Bucket {
    tokens: f64,
    rate: f64,
    last: Instant,
}

impl Bucket {
    fn new(rate: u32, now: Instant) -> Self {
        Self {
            tokens: f64::from(rate),
            rate: f64::from(rate),
            last: now,
        }
    }

    fn allow(&mut self, now: Instant) -> bool {
        let elapsed = now.saturating_duration_since(self.last).as_secs_f64();
        self.last = now;
        self.tokens = (self.tokens + elapsed * self.rate).min(self.rate);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bucket_allows_the_rate() {
        let t = Instant::now();
        let mut b = Bucket::new(10, t);
        assert_eq!((0..15).filter(|_| b.allow(t)).count(), 10);
        assert!(!b.allow(t + Duration::from_millis(50)));
        assert!(b.allow(t + Duration::from_millis(200)));
    }
}
