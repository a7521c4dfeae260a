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
//! lives, detached when it ends or unsubscribes; its roster and member
//! events come from the channel's feed on this server
//! (`crate::pusher_hub`'s members), which reads the space's events from
//! the store once for all its sockets. The subscriber's own user is in
//! its roster from the start, so the events of its own presence are not
//! sent to it. A public or private
//! channel is held by one live connection per server, which counts its
//! sockets there (`crate::pusher_hub`'s occupancy), written before the
//! socket is told it subscribed and after it leaves.
//!
//! **Lag.** A member event that does not fit the queue is not dropped
//! silently and does not cut the socket: the feed skips the socket's
//! further member events and, once half its queue is free, sends it the
//! roster again (pusher-js rebuilds its member list from it), so it
//! always ends with the exact roster. Only a client whose queue stays
//! full for [`MAX_STALL`] (or the WebSocket TTL, if shorter) is closed
//! (`4100`). An app event or client event that does not fit closes the
//! socket with `4100` at once (see `crate::pusher_hub`'s channels): it
//! cannot be recovered from a roster. A socket whose writer has ended
//! (the client left, a write failed) ends its session at once: no roster
//! is owed to it.
//!
//! **Between servers.** Client events go out through the store's relay
//! (`crate::pusher_hub`) and reach every server's subscribers from its
//! feed; a socket is served only once its server reads the feed, so an
//! event relayed after `pusher:connection_established` reaches it.
//!
//! This file is the session's loop; `wire` the WebSocket under it (the
//! upgrade, and the writer, which sends large messages in fragments);
//! `channels` is subscribing and client events, `presence` the presence
//! channels, and `user` signing in (`pusher:signin`) and the Watchlist.

mod channels;
mod presence;
mod user;
mod wire;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Path, RawQuery, Request, State};
use axum::response::Response;
use futures::StreamExt;
use futures::stream::SplitStream;
use herenow_core::{ConnId, MemberKey, Metadata, SpaceName};
use tokio::sync::mpsc::error::TrySendError;
use tokio::sync::oneshot;
use tokio::time::{Instant, sleep_until, timeout};
use tungstenite::Message;

use self::channels::Bucket;
use self::user::{SignedIn, Watchlist};
use self::wire::Ws;
use super::frames;
use super::{ChannelKind, Pusher, PusherApp};
use crate::hub::Liveness;
use crate::pusher_hub::{Ender, Out, QUEUE, RESERVE};
use crate::queue;
use crate::state::AppState;

/// The largest frame a client may send; a larger one closes the socket
/// with `1009`.
pub(crate) const MAX_FRAME: usize = 32 * 1024;

/// `activity_timeout`, told to clients: the server's ping interval
/// (`--ping-interval`) in whole seconds, rounded up, at least one. A
/// client pings after that long without a message, and so does the
/// server (after its exact interval); a `pusher:ping` unanswered for the
/// pong wait closes the socket with `4201`. A dead socket is so noticed
/// within the interval and the wait (30 s by default), and its members
/// go through the grace; a dead server's presence, no longer refreshed,
/// expires in the store within one TTL.
fn activity_timeout(ping_interval: Duration) -> u64 {
    ping_interval
        .as_secs()
        .saturating_add(u64::from(ping_interval.subsec_nanos() > 0))
        .max(1)
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

/// Protocol versions this server speaks (pusher-js 8 says 7).
const PROTOCOLS: std::ops::RangeInclusive<u32> = 5..=7;

/// Close codes (Pusher's: 4000–4099 do not reconnect, 4100–4199
/// reconnect after a while, 4200–4299 reconnect at once).
mod close {
    pub(crate) const UNKNOWN_APP: u16 = 4001;
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

/// A socket's live connection id in presence spaces: `p` and its
/// socket id.
fn socket_conn(socket_id: &str) -> ConnId {
    ConnId::new(&format!("p{socket_id}"))
        .unwrap_or_else(|_| unreachable!("digits and a dot make a valid connection id"))
}

/// Whether a live connection id is a Pusher socket's ([`socket_conn`]):
/// `p`, digits, a dot, digits.
pub(super) fn is_socket_conn(conn: &str) -> bool {
    conn.strip_prefix('p')
        .and_then(|id| id.split_once('.'))
        .is_some_and(|(a, b)| {
            [a, b]
                .iter()
                .all(|part| !part.is_empty() && part.bytes().all(|c| c.is_ascii_digit()))
        })
}

/// Upgrades any request: refusals (unknown key, bad version, no room) are
/// the protocol's close codes, which clients act on, rather than an HTTP
/// status they cannot read.
pub(super) async fn upgrade(
    State(state): State<AppState>,
    Path(key): Path<String>,
    RawQuery(query): RawQuery,
    request: Request,
) -> Response {
    let refusal = refusal(&state, &key, query.as_deref());
    let permit = if refusal.is_none() {
        state.ws().admit()
    } else {
        None
    };
    let tracked = state.ws().tracker().token();
    wire::upgrade(request, MAX_FRAME, move |socket| async move {
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
async fn refuse(mut socket: Ws, code: u16, reason: &str) {
    let error = frames::error(Some(code), reason);
    let _ = timeout(CLOSE_GRACE, wire::refuse(&mut socket, error, code, reason)).await;
}

/// Runs one socket to its end.
async fn run(socket: Ws, state: AppState, pusher: Arc<Pusher>, app: Arc<PusherApp>) {
    let (sink, stream) = socket.split();
    let (tx, rx) = queue::channel(QUEUE + RESERVE);
    let number = pusher.next_socket();
    let socket_id: Arc<str> = Arc::from(pusher.socket_id(number));
    let session = Session {
        conn: socket_conn(&socket_id),
        app_id: Arc::from(app.id.as_str()),
        bucket: Bucket::new(app.client_events_per_second, Instant::now()),
        state,
        pusher,
        app,
        number,
        socket_id,
        tx,
        ender: Arc::new(Ender::default()),
        channels: HashMap::new(),
        presence: HashMap::new(),
        signed_in: None,
        watchlist: None,
        closing: None,
    };
    let (ended_tx, ended_rx) = oneshot::channel::<()>();
    let session = async move {
        session.run(stream).await;
        drop(ended_tx);
    };
    let writer = async move {
        tokio::select! {
            () = wire::write(sink, rx) => {}
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

/// A live connection of this socket: the space, who it is there, and
/// the connection's id (the socket's own).
struct Presence {
    space: SpaceName,
    member: MemberKey,
    meta: Option<Metadata>,
    conn: ConnId,
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
    tx: queue::Sender<Out>,
    /// Asked to close from elsewhere: a full queue, a relayed
    /// `terminate_connections`, a lagging relay feed.
    ender: Arc<Ender>,
    /// Subscribed channels and their kinds.
    channels: HashMap<String, ChannelKind>,
    presence: HashMap<String, Presence>,
    /// The user this socket signed in as (`pusher:signin`).
    signed_in: Option<SignedIn>,
    /// The signed-in user's watchlist, if it named one.
    watchlist: Option<Watchlist>,
    bucket: Bucket,
    closing: Option<(u16, String)>,
}

impl Session {
    async fn run(mut self, mut stream: SplitStream<Ws>) {
        let (_, refresh_every) = self.state.ws().timing();
        let Liveness {
            ping_interval: activity,
            pong_wait,
        } = self.state.ws().liveness();
        let ready = self
            .pusher
            .relay_ready(
                self.state.store(),
                self.state.shutdown_token(),
                self.state.request_timeout(),
            )
            .await;
        if !ready {
            // Events from other servers could not reach it: the client
            // tries again later.
            let _ = self.tx.try_send(Out::Close(
                close::OVER_CAPACITY,
                "the store is unavailable".into(),
            ));
            return;
        }
        self.pusher
            .sockets
            .open(self.number, &self.app_id, self.ender.clone());
        self.reply(frames::connection_established(
            &self.socket_id,
            activity_timeout(activity),
        ));
        let shutdown = self.state.shutdown_token().clone();
        let mut next_refresh = Instant::now() + refresh_every;
        let mut last_heard = Instant::now();
        let mut pinged: Option<Instant> = None;
        let ender = self.ender.clone();
        // Made once and polled again on each turn (a member event wakes
        // every socket of its channel): the timers are reset only when
        // their deadlines move.
        let cancelled = shutdown.cancelled();
        let ended = ender.ended();
        let timer = sleep_until(last_heard + activity);
        let refresh = sleep_until(next_refresh);
        tokio::pin!(cancelled, ended, timer, refresh);
        while self.closing.is_none() {
            let deadline = match pinged {
                Some(at) => at + pong_wait,
                None => last_heard + activity,
            };
            if timer.deadline() != deadline {
                timer.as_mut().reset(deadline);
            }
            if refresh.deadline() != next_refresh {
                refresh.as_mut().reset(next_refresh);
            }
            tokio::select! {
                biased;
                () = &mut cancelled => {
                    self.close(close::RECONNECT, "the server is shutting down");
                }
                (code, reason) = &mut ended => self.close(code, reason),
                () = &mut timer => {
                    if pinged.is_some() && self.tx.capacity() < self.tx.max_capacity() {
                        // The ping still waits in the queue behind writes
                        // the client does not read: too slow, not silent.
                        self.close(close::OVER_CAPACITY, "too slow: the send queue did not drain");
                    } else if pinged.is_some() {
                        self.close(close::NO_PONG, "Pong reply not received");
                    } else {
                        pinged = Some(Instant::now());
                        self.reply(frames::bare("pusher:ping"));
                    }
                }
                () = &mut refresh => {
                    next_refresh = Instant::now() + refresh_every;
                    self.refresh().await;
                }
                frame = stream.next() => {
                    last_heard = Instant::now();
                    pinged = None;
                    match frame {
                        Some(Ok(Message::Text(text))) => self.on_text(text.as_str()).await,
                        Some(Ok(Message::Binary(_))) => {
                            self.reply(frames::error(None, "binary frames are not part of the protocol"));
                        }
                        Some(Ok(Message::Ping(_) | Message::Pong(_) | Message::Frame(_))) => {}
                        Some(Ok(Message::Close(_))) | None => break,
                        Some(Err(e)) => {
                            if let Some((code, reason)) = read_error_close(e) {
                                self.close(code, reason);
                            }
                            break;
                        }
                    }
                }
                Some(note) = user::next_note(&mut self.watchlist) => {
                    self.on_watch_note(note).await;
                }
            }
        }
        self.pusher.sockets.close(self.number);
        // `terminate_connections` is a goodbye; every other end (the
        // client closed or went silent, the server stops) goes through the
        // grace.
        let goodbye = matches!(self.closing, Some((close::UNAUTHORIZED, _)));
        self.leave_all(goodbye).await;
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
            "pusher:signin" => self.signin(&msg).await,
            "pusher:unsubscribe" => {
                match frames::data_of::<frames::Unsubscribe>(msg.data.as_deref()) {
                    Some(u) => self.unsubscribe(&u.channel).await,
                    None => self.reply(frames::error(
                        None,
                        "pusher:unsubscribe needs data with a channel",
                    )),
                }
            }
            name if name.starts_with("client-") => self.client_event(&msg).await,
            _ => self.reply(frames::error(None, "unknown event")),
        }
    }

    /// Queues a reply, in the reserve if need be; a client too slow even
    /// for that is closed.
    fn reply(&mut self, text: Arc<str>) {
        match self.tx.try_send(Out::Text(text)) {
            Err(TrySendError::Full(_)) => {
                self.close(close::OVER_CAPACITY, "too slow: the send queue is full");
            }
            Err(TrySendError::Closed(_)) => {
                self.close(close::GONE, "the client is gone");
            }
            Ok(()) => {}
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

/// The close for a read that failed because of what the client sent.
fn read_error_close(e: tungstenite::Error) -> Option<(u16, &'static str)> {
    match e {
        tungstenite::Error::Capacity(_) => Some((1009, "a message over 32 KiB")),
        tungstenite::Error::Utf8(_) => Some((1007, "a text frame that is not UTF-8")),
        tungstenite::Error::Protocol(_) => Some((1002, "a WebSocket protocol error")),
        _ => None,
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
