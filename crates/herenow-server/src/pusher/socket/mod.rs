//! `GET /app/{key}`: one Pusher socket, the Pusher protocol's adapter on
//! the socket core ([`crate::socket`]). This file is the session (its
//! [`Protocol`]); `channels` is subscribing and client events, `presence`
//! the presence channels, `user` `pusher:signin` and the Watchlist,
//! `by_channel` a socket's channels in exact vectors.
//!
//! A presence subscription is a live connection of the member in the
//! channel's space, refreshed while the socket lives; its roster and
//! member events come from the channel's feed (`pusher::hub`'s members).
//! The subscriber's own user is in its roster from the start, so the
//! events of its own presence are not sent to it. A public or private
//! channel's occupancy (`pusher::hub`'s occupancy) is written before the
//! socket is told it subscribed and after it leaves.
//!
//! **Lag.** A member event that does not fit the queue makes the feed
//! skip the socket's member events and, once half its queue is free, send
//! it the roster again, so it always ends with the exact roster; only a
//! queue full for [`MAX_STALL`] (or the TTL, if shorter) closes it
//! (`4100`). An app or client event that does not fit closes it with
//! `4100` at once: no roster can recover it. A socket whose writer ended
//! ends its session at once.
//!
//! A socket is served only once its server reads the relay feed, so an
//! event relayed after `pusher:connection_established` reaches it.

mod by_channel;
mod channels;
mod presence;
mod user;

use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Path, RawQuery, Request, State};
use axum::response::Response;
use herenow_core::{ConnId, MemberKey, Metadata, SpaceName};
use tokio::sync::OwnedSemaphorePermit;
use tokio::sync::mpsc::error::TrySendError;
use tokio::time::{Instant, timeout};

use self::by_channel::ByChannel;
use self::user::{SignedIn, Watchlist};
use super::frames;
use super::{ChannelKind, Pusher, PusherApp};
use crate::pusher::PusherState;
use crate::pusher::hub::{Ender, QUEUE, RESERVE, Slot};
use crate::socket::{self, Frames, Inlet, Out, Protocol, TokenBucket, Ws, drive};
use crate::watch::registry::Note;

/// The largest frame a client may send; a larger one closes the socket
/// with `1009`.
pub(crate) const MAX_FRAME: usize = 32 * 1024;

/// `activity_timeout`, told to clients: the server's ping interval in
/// whole seconds, rounded up, at least one (docs/PUSHER.md, "Pings").
fn activity_timeout(ping_interval: Duration) -> u64 {
    ping_interval
        .as_secs()
        .saturating_add(u64::from(ping_interval.subsec_nanos() > 0))
        .max(1)
}

/// How long a lagging socket's queue may stay without room before the
/// socket is closed (`4100`).
pub(crate) const MAX_STALL: Duration = Duration::from_secs(30);

/// Most channels one socket may subscribe to.
pub(crate) const MAX_CHANNELS: usize = 100;

/// Longest client event name, in bytes (Pusher's 200); its data's bound
/// is the app's (`PusherApp::max_client_event_bytes`).
const MAX_EVENT_NAME: usize = 200;

/// Protocol versions this server speaks (pusher-js 8 says 7).
const PROTOCOLS: std::ops::RangeInclusive<u32> = 5..=7;

/// Close codes (Pusher's: 4000–4099 do not reconnect, 4100–4199
/// reconnect after a while, 4200–4299 reconnect at once).
mod close {
    pub(crate) const UNKNOWN_APP: u16 = 4001;
    pub(crate) const OVER_QUOTA: u16 = 4004;
    pub(crate) const BAD_VERSION: u16 = 4006;
    pub(crate) const UNSUPPORTED_VERSION: u16 = 4007;
    pub(crate) const NO_VERSION: u16 = 4008;
    pub(crate) const UNAUTHORIZED: u16 = 4009;
    pub(crate) const OVER_CAPACITY: u16 = 4100;
    pub(crate) const RECONNECT: u16 = 4200;
    pub(crate) const NO_PONG: u16 = 4201;
    /// The writer ended (the client left or its writes failed): the
    /// session ends; nothing is sent.
    pub(crate) const GONE: u16 = 1001;
}

/// `pusher:error` codes that do not close (Pusher's 4300–4399, "any other
/// error"; 4000–4299 are for errors that close the connection, so a
/// refusal that keeps it open has `null` or one of these).
mod code {
    pub(crate) const RATE_LIMITED: u16 = 4301;
}

/// A socket's live connection id in presence spaces: `p` and its socket id.
fn socket_conn(socket_id: &str) -> ConnId {
    ConnId::new(&format!("p{socket_id}"))
        .unwrap_or_else(|_| unreachable!("digits and a dot make a valid connection id"))
}

/// Whether a live connection id is a Pusher socket's ([`socket_conn`]).
pub(super) fn is_socket_conn(conn: &str) -> bool {
    conn.strip_prefix('p').is_some_and(is_socket_id)
}

/// Whether `s` looks like a socket id: digits, a dot, digits.
pub(super) fn is_socket_id(s: &str) -> bool {
    s.split_once('.').is_some_and(|(a, b)| {
        [a, b]
            .iter()
            .all(|part| !part.is_empty() && part.bytes().all(|c| c.is_ascii_digit()))
    })
}

/// Upgrades any request: refusals (unknown key, bad version, no room) are
/// the protocol's close codes, which clients act on, rather than an HTTP
/// status they cannot read.
pub(super) async fn upgrade(
    State(state): State<PusherState>,
    Path(key): Path<String>,
    RawQuery(query): RawQuery,
    request: Request,
) -> Response {
    let admitted = admit(&state, &key, query.as_deref());
    let tracked = state.ws().tracker().token();
    socket::upgrade(request, MAX_FRAME, move |socket| async move {
        match admitted {
            Ok((app, slot, permit)) => {
                run(socket, state, app).await;
                drop((permit, slot));
            }
            Err((code, reason)) => refuse(socket, code, reason).await,
        }
        drop(tracked);
    })
}

/// The app of a new socket, its place in the app's quota and its permit
/// among the server's sockets (both held while it lives), or why it is
/// closed at once.
fn admit(
    state: &PusherState,
    key: &str,
    query: Option<&str>,
) -> Result<(Arc<PusherApp>, Slot, OwnedSemaphorePermit), (u16, &'static str)> {
    if state.shutdown_token().is_cancelled() {
        return Err((close::RECONNECT, "the server is shutting down"));
    }
    let app = state
        .pusher()
        .by_key(key)
        .ok_or((close::UNKNOWN_APP, "App key not in this server's apps"))?;
    let protocol = query.and_then(|q| {
        q.split('&')
            .filter_map(|kv| kv.split_once('='))
            .find(|(k, _)| *k == "protocol")
            .map(|(_, v)| v)
    });
    match protocol.map(str::parse::<u32>) {
        None => return Err((close::NO_VERSION, "No protocol version supplied")),
        Some(Err(_)) => return Err((close::BAD_VERSION, "Invalid version string format")),
        Some(Ok(v)) if !PROTOCOLS.contains(&v) => {
            return Err((close::UNSUPPORTED_VERSION, "Unsupported protocol version"));
        }
        Some(Ok(_)) => {}
    }
    let slot = state
        .pusher()
        .quota
        .take(&app.id, app.max_connections)
        .ok_or((close::OVER_QUOTA, "Application is over connection quota"))?;
    let permit = state
        .ws()
        .admit()
        .ok_or((close::OVER_CAPACITY, "over capacity"))?;
    Ok((app, slot, permit))
}

/// Tells the client why, then closes.
async fn refuse(socket: Ws, code: u16, reason: &str) {
    socket::refuse(socket, frames::error(Some(code), reason), code, reason).await;
}

/// Runs one socket to its end.
async fn run(socket: Ws, state: PusherState, app: Arc<PusherApp>) {
    let pusher = state.pusher().clone();
    socket::run(socket, QUEUE + RESERVE, move |stream, inlet| async move {
        let number = pusher.next_socket();
        let socket_id: Arc<str> = Arc::from(pusher.socket_id(number));
        let session = Session {
            conn: socket_conn(&socket_id),
            app_id: Arc::from(app.id.as_str()),
            bucket: TokenBucket::new(
                app.client_events_per_second,
                app.client_events_per_second,
                Instant::now(),
            ),
            state,
            pusher,
            app,
            // Looked up again once open, whatever happened meanwhile.
            app_version: u64::MAX,
            number,
            socket_id,
            inlet,
            ender: Arc::new(Ender::default()),
            channels: ByChannel::default(),
            memberships: ByChannel::default(),
            signed_in: None,
            watchlist: None,
            next_refresh: Instant::now(),
            closing: None,
        };
        // Boxed: the session lives once, on the heap, rather than in
        // this future and again in the loop's.
        Box::new(session).run(stream).await;
    })
    .await;
}

/// This socket's live connection in one space: a presence channel's, or
/// the signed-in user's `pusher-users` space.
struct LiveMembership {
    space: SpaceName,
    member: MemberKey,
    meta: Option<Metadata>,
    conn: ConnId,
}

/// One socket.
struct Session {
    state: PusherState,
    pusher: Arc<Pusher>,
    /// The app's settings as last looked up ([`Session::current_app`]).
    app: Arc<PusherApp>,
    /// [`Pusher::apps_version`] when `app` was looked up.
    app_version: u64,
    app_id: Arc<str>,
    number: u64,
    socket_id: Arc<str>,
    /// [`socket_conn`] of this socket.
    conn: ConnId,
    inlet: Inlet,
    /// Asked to close from elsewhere: a full queue, a relayed
    /// `terminate_connections`, a lagging relay feed.
    ender: Arc<Ender>,
    /// Subscribed channels and their kinds.
    channels: ByChannel<ChannelKind>,
    /// Presence channels subscribed, by name, and this socket's membership
    /// of each one's space.
    memberships: ByChannel<LiveMembership>,
    /// The user this socket signed in as (`pusher:signin`).
    signed_in: Option<SignedIn>,
    /// The signed-in user's watchlist, if it named one.
    watchlist: Option<Watchlist>,
    bucket: TokenBucket,
    /// When the presence this socket holds is next written again.
    next_refresh: Instant,
    closing: Option<(u16, String)>,
}

impl Session {
    async fn run(mut self: Box<Self>, mut stream: Frames) {
        let liveness = self.state.ws().liveness();
        // The rare and large steps are boxed while they run, as herenow's
        // own session does: the socket's future, which lives as long as
        // the socket, then holds only the loop.
        let ready = Box::pin(self.pusher.relay_ready(
            self.state.store(),
            self.state.shutdown_token(),
            self.state.request_timeout(),
        ))
        .await;
        if !ready {
            // Events from other servers could not reach it: the client
            // tries again later.
            self.inlet
                .close(close::OVER_CAPACITY, "the store is unavailable".into());
            return;
        }
        self.pusher
            .sockets
            .open(self.number, &self.app_id, self.ender.clone());
        // Open first, looked up then: an app removed meanwhile either
        // found this socket to close, or is found gone here.
        if !self.current_app() {
            self.pusher.sockets.close(self.number);
            if let Some((code, reason)) = self.closing.take() {
                self.inlet.close(code, reason);
            }
            return;
        }
        self.reply(frames::connection_established(
            &self.socket_id,
            activity_timeout(liveness.ping_interval),
        ));
        self.next_refresh = Instant::now() + self.state.ws().timing().1;
        let shutdown = self.state.shutdown_token().clone();
        drive(&mut *self, &mut stream, liveness, &shutdown).await;
        self.pusher.sockets.close(self.number);
        // `terminate_connections` is a goodbye; every other end (the
        // client closed or went silent, the server stops) goes through the
        // grace.
        let goodbye = matches!(self.closing, Some((close::UNAUTHORIZED, _)));
        Box::pin(self.leave_all(goodbye)).await;
        if let Some((code, reason)) = self.closing.take() {
            self.inlet.close(code, reason);
        }
    }

    /// Looks the app up again if the apps changed since it last did (a
    /// reload: its secret or limits may be new); `false`, with the socket
    /// closing, when the app is served no more.
    fn current_app(&mut self) -> bool {
        let version = self.pusher.apps_version();
        if version == self.app_version {
            return true;
        }
        match self.pusher.by_id(&self.app_id) {
            Some(app) => {
                let rate = app.client_events_per_second;
                self.bucket.set_rate(rate, rate, Instant::now());
                self.app = app;
                self.app_version = version;
                true
            }
            None => {
                self.close(close::UNKNOWN_APP, "Application does not exist");
                false
            }
        }
    }

    async fn on_message(&mut self, text: &str) {
        if !self.current_app() {
            return;
        }
        let Some(msg) = frames::decode(text) else {
            self.reject("a message must be a JSON object with an \"event\"");
            return;
        };
        match msg.event.as_str() {
            "pusher:ping" => self.reply(frames::bare("pusher:pong")),
            "pusher:pong" => {}
            "pusher:subscribe" => self.subscribe(&msg).await,
            "pusher:signin" => self.signin(&msg).await,
            "pusher:unsubscribe" => {
                if let Some(u) = self.data_of::<frames::Unsubscribe>(&msg, "a channel") {
                    self.unsubscribe(&u.channel).await;
                }
            }
            name if name.starts_with("client-") => self.client_event(&msg).await,
            _ => self.reject("unknown event"),
        }
    }

    /// Queues a reply, in the reserve if need be; a client too slow even
    /// for that is closed.
    fn reply(&mut self, text: Arc<str>) {
        match self.inlet.try_send(Out::Text(text)) {
            Err(TrySendError::Full(_)) => {
                self.close(close::OVER_CAPACITY, "too slow: the send queue is full");
            }
            Err(TrySendError::Closed(_)) => {
                self.close(close::GONE, "the client is gone");
            }
            Ok(()) => {}
        }
    }

    /// `pusher:error` with code `null`: refused, and the socket stays.
    fn reject(&mut self, message: &str) {
        self.reply(frames::error(None, message));
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

/// What a Pusher session's own sources bring.
enum Wake {
    /// `ender` fired, with its close code and reason.
    Ended(u16, &'static str),
    /// A change of the signed-in user's watchlist.
    Note(Note),
}

impl Protocol for Session {
    type Wake = Wake;

    fn is_closing(&self) -> bool {
        self.closing.is_some()
    }

    fn deadline(&self) -> Option<Instant> {
        Some(self.next_refresh)
    }

    async fn on_deadline(&mut self, now: Instant) {
        self.next_refresh = now + self.state.ws().timing().1;
        Box::pin(self.refresh()).await;
    }

    fn shutdown(&mut self) {
        self.close(close::RECONNECT, "the server is shutting down");
    }

    fn ping(&mut self) {
        self.reply(frames::bare("pusher:ping"));
    }

    fn no_pong(&mut self) {
        if self.inlet.is_drained() {
            self.close(close::NO_PONG, "Pong reply not received");
        } else {
            // The ping still waits in the queue behind writes the client
            // does not read: too slow, not silent.
            self.close(
                close::OVER_CAPACITY,
                "too slow: the send queue did not drain",
            );
        }
    }

    async fn on_text(&mut self, text: &str) {
        Box::pin(self.on_message(text)).await;
    }

    fn on_binary(&mut self) {
        self.reject("binary frames are not part of the protocol");
    }

    fn on_bad_frame(&mut self, code: u16, reason: &'static str) {
        self.close(code, reason);
    }

    async fn wake(&mut self) -> Wake {
        tokio::select! {
            (code, reason) = self.ender.ended() => Wake::Ended(code, reason),
            Some(note) = user::next_note(&mut self.watchlist) => Wake::Note(note),
        }
    }

    async fn on_wake(&mut self, wake: Wake) {
        match wake {
            Wake::Ended(code, reason) => self.close(code, reason),
            Wake::Note(note) => Box::pin(self.on_watch_note(note)).await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn activity_timeout_is_the_ping_interval_in_whole_seconds_rounded_up() {
        let ms = Duration::from_millis;
        assert_eq!(activity_timeout(ms(20_000)), 20);
        assert_eq!(activity_timeout(ms(1_500)), 2);
        assert_eq!(activity_timeout(ms(1)), 1);
        assert_eq!(activity_timeout(ms(600_000)), 600);
    }

    #[test]
    fn a_sockets_connection_id_is_told_from_others() {
        let conn = socket_conn("1234.56");
        assert!(is_socket_conn(conn.as_str()));
        for other in ["c1", "p", "p1.", "p.1", "p12", "px.1", "o1.abc", "p1.2.3"] {
            assert!(!is_socket_conn(other), "{other}");
        }
    }
}
