//! One WebSocket connection: herenow's [`Protocol`] on the socket core
//! ([`crate::socket`]). The session applies client messages (through
//! `msg`'s handlers), forwards its subscriptions' events and holds its
//! own deadlines (hello, idle, a stalled queue); what a client too slow
//! for the queue loses is the [`SendQueue`]'s drop policy.
//!
//! However the session ends, it detaches the connection from every space
//! it joined before the socket is closed.

use std::sync::Arc;

use herenow_core::{ConnId, Event, MemberStatus, Metadata, RecvError, SpaceName};
use tokio::sync::OwnedSemaphorePermit;
use tokio::time::{Instant, timeout};

use super::guard::{Guards, rate_limited};
use super::joined::Joined;
use super::limits::DEFAULT_PAGE_SIZE;
use super::send_queue::{CAPACITY, Outcome, SendQueue};
use super::subscriptions::Subscriptions;
use super::timers::{Settings, Timers};
use crate::protocol::dto::MemberDto;
use crate::socket::{self, Ended, Frames, Protocol, Ws, drive};
use crate::state::AppState;
use crate::token::{Grant, TokenError};
use crate::watch::Watching;
use crate::watch::registry::Note;
use crate::ws::wire::{
    ClientMessage, ConnMeta, Envelope, Ref, ServerMessage, SnapshotMember, Undecodable, WsError,
    close, decode, ref_of,
};

/// Runs one connection to its end, then frees its slot.
pub(super) async fn run(
    socket: Ws,
    state: AppState,
    conn: ConnId,
    settings: Settings,
    url_token: Option<String>,
    permit: OwnedSemaphorePermit,
) {
    let metrics = state.metrics().clone();
    metrics.ws_connections(state.ws().open());
    let session_state = state.clone();
    socket::run(socket, CAPACITY, move |stream, inlet| async move {
        // Boxed: the session's state lives once, on the heap, rather than
        // in this future and again in the loop's.
        let session = Box::new(Session::new(
            session_state,
            conn,
            settings,
            SendQueue::new(inlet),
        ));
        session.run(stream, url_token).await;
    })
    .await;
    drop(permit);
    metrics.ws_connections(state.ws().open());
}

/// One connection, as the message handlers in `msg` see it.
pub(super) struct Session {
    pub(super) state: AppState,
    pub(super) conn: ConnId,
    /// What the token allows; `None` until `hello`.
    grant: Option<Grant>,
    pub(super) joined: Joined,
    subs: Subscriptions,
    pub(super) send_queue: SendQueue,
    pub(super) timers: Timers,
    guards: Guards,
    /// What this connection watches, once it sent `watch`.
    pub(super) watching: Option<Watching>,
    /// Users per `watching` page.
    pub(super) watch_page: usize,
    /// The close decided (see `Session::close`).
    closing: Option<(u16, String)>,
}

impl Session {
    fn new(state: AppState, conn: ConnId, settings: Settings, send_queue: SendQueue) -> Self {
        let now = Instant::now();
        Self {
            state,
            conn,
            grant: None,
            joined: Joined::default(),
            subs: Subscriptions::default(),
            send_queue,
            timers: Timers::new(settings, now),
            guards: Guards::new(now),
            watching: None,
            watch_page: DEFAULT_PAGE_SIZE,
            closing: None,
        }
    }

    /// Reads and dispatches until the session ends, then detaches.
    async fn run(mut self: Box<Self>, mut stream: Frames, url_token: Option<String>) {
        if let Some(token) = url_token
            && let Err(e) = self.hello(&token, None)
        {
            self.fail(None, e);
        }
        let shutdown = self.state.shutdown_token().clone();
        let liveness = self.timers.liveness();
        let ended = drive(&mut *self, &mut stream, liveness, &shutdown).await;
        // `1000` is the client's goodbye (`Client.close()`); a page going
        // away says `1001`.
        let goodbye = ended == Ended::ClientClosed(Some(close::NORMAL));
        Box::pin(self.end_all(goodbye)).await;
        tracing::debug!(
            conn = %self.conn,
            member = ?self.grant.as_ref().map(|g| &g.member),
            close = ?self.closing.as_ref().map(|c| c.0),
            "websocket session ended"
        );
        if let Some((code, reason)) = self.closing.take() {
            self.state.metrics().ws_close(code);
            self.send_queue.close(code, reason);
        }
    }

    /// One text frame: rate limit, parse, dispatch, answer.
    async fn on_message(&mut self, text: &str) {
        if !self.guards.allow(Instant::now()) {
            self.fail(ref_of(text), rate_limited());
            return;
        }
        let envelope = match decode(text) {
            Ok(e) => e,
            Err(Undecodable { reference, error }) => {
                self.fail(reference, error);
                return;
            }
        };
        let Envelope { reference, message } = envelope;
        self.state.metrics().ws_message(message.kind());
        if !matches!(message, ClientMessage::Hello(_))
            && let Err(e) = self.grant()
        {
            self.fail(reference, e);
            return;
        }
        let is_ping = matches!(message, ClientMessage::Ping(_));
        let r = reference.clone();
        let done = match message {
            ClientMessage::Hello(m) => m.apply(self, r).await,
            ClientMessage::Join(m) => m.apply(self, r).await,
            ClientMessage::Leave(m) => m.apply(self, r).await,
            ClientMessage::Update(m) => m.apply(self, r).await,
            ClientMessage::Ping(m) => m.apply(self, r).await,
            ClientMessage::Subscribe(m) => m.apply(self, r).await,
            ClientMessage::Unsubscribe(m) => m.apply(self, r).await,
            ClientMessage::Invisible(m) => m.apply(self, r).await,
            ClientMessage::Watch(m) => m.apply(self, r).await,
            ClientMessage::Unwatch(m) => m.apply(self, r).await,
        };
        if let Err(e) = done {
            self.fail(reference, e);
        }
        // Any message keeps presence alive, not only pings (`keepalive_due`).
        if !is_ping {
            self.refresh(false).await;
        }
    }

    /// One item of a subscription.
    async fn on_event(&mut self, space: SpaceName, item: Result<Arc<Event>, RecvError>) {
        match item {
            Ok(event) => {
                let msg = ServerMessage::Event {
                    space: &space,
                    event: &event,
                };
                let outcome = self.send_queue.push_event(&space, &msg);
                self.settle(outcome);
            }
            Err(RecvError::Lagged(missed)) => match self.send_queue.overflowed(&space, missed) {
                Outcome::Restart => Box::pin(self.restart(space)).await,
                outcome => {
                    self.settle(outcome);
                }
            },
            // The stream ends (the store is going away); the subscriptions
            // drop it.
            Err(RecvError::Closed) => {}
        }
    }

    // ----- for the message handlers -------------------------------------

    /// The store's clock, which `welcome` and `pong` report: the time
    /// `last_seen_ms` values are on, whatever the client's clock says.
    pub(super) fn now_ms(&self) -> u64 {
        self.state.store().now_ms()
    }

    /// Checks `hello`'s token and welcomes the client.
    pub(super) fn hello(&mut self, token: &str, reference: Option<Ref>) -> Result<(), WsError> {
        if self.grant.is_some() {
            return Err(WsError::new(
                "already-hello",
                "this connection already said hello",
            ));
        }
        let grant = self.state.tokens().verify(token).map_err(|e| {
            let (close, code) = match e {
                TokenError::Expired => (close::TOKEN_EXPIRED, "token-expired"),
                TokenError::Invalid(_) => (close::BAD_TOKEN, "bad-token"),
            };
            WsError::closing(close, code, e.to_string())
        })?;
        let welcome = ServerMessage::Welcome {
            reference,
            conn: &self.conn,
            member: &grant.member,
            spaces: grant.spaces.names(),
            ping_ms: self.timers.ping_ms(),
            ttl_ms: self.timers.ttl_ms(),
            server_time_ms: self.now_ms(),
        };
        let outcome = self.send_queue.push_reply(&welcome);
        self.grant = Some(grant);
        self.settle(outcome);
        Ok(())
    }

    /// Checks a space name and that the token allows it.
    pub(super) fn allowed_space(&self, name: &str) -> Result<SpaceName, WsError> {
        let space = SpaceName::new(name)?;
        if !self.grant()?.spaces.allows(&space) {
            return Err(WsError::new(
                "space-not-allowed",
                format!("the token does not allow the space {space}"),
            ));
        }
        Ok(space)
    }

    /// Makes this connection present in `space` with `meta` (replacing
    /// its metadata there, if it had joined already), and remembers the
    /// space only once the store took it: what `join` and `update` do
    /// after their checks.
    pub(super) async fn join(
        &mut self,
        space: SpaceName,
        meta: Option<Metadata>,
    ) -> Result<(), WsError> {
        self.attach(&space, meta.clone()).await?;
        self.joined.record(space, meta);
        Ok(())
    }

    /// Ends this connection's presence in `space`. Forgotten first: should
    /// the store fail now, the connection is no longer refreshed and
    /// expires by its TTL.
    pub(super) async fn leave(&mut self, space: &SpaceName) -> Result<(), WsError> {
        self.joined.forget(space)?;
        self.end(space, true).await
    }

    /// Hides or shows this connection: every joined space is attached
    /// again with the new visibility, and spaces joined later follow it.
    /// A failure is tried everywhere before it is answered; the next ping
    /// retries the rest.
    pub(super) async fn set_invisible(&mut self, on: bool) -> Result<(), WsError> {
        if !self.joined.set_invisible(on) {
            return Ok(());
        }
        let mut failed = None;
        for (space, meta) in self.joined.iter() {
            if let Err(e) = self.attach(space, meta.clone()).await {
                failed.get_or_insert(e);
            }
        }
        failed.map_or(Ok(()), Err)
    }

    /// Subscribes (or subscribes again) to `space`: a snapshot in pages,
    /// the last carrying `reference`, then its events; the snapshot is
    /// marked `resync` when it starts a lagging subscription over.
    pub(super) async fn subscribe(
        &mut self,
        space: SpaceName,
        page_size: usize,
        reference: Option<Ref>,
        resync: bool,
    ) -> Result<(), WsError> {
        self.subs.admit(&space)?;
        let sub = self
            .store_call(self.state.store().subscribe(&space))
            .await?;
        self.send_queue.forget(&space);
        self.subs.insert(space.clone(), sub.events, page_size);
        let sent = self
            .send_snapshot(
                &space,
                sub.snapshot,
                sub.snapshot_omitted,
                page_size,
                reference,
                resync,
            )
            .await;
        if sent.is_err() {
            self.unsubscribe(&space);
        }
        sent
    }

    /// Ends a subscription; false if there was none.
    pub(super) fn unsubscribe(&mut self, space: &SpaceName) -> bool {
        self.send_queue.forget(space);
        self.subs.remove(space)
    }

    /// Answers `ok`.
    pub(super) fn ok(&mut self, reference: Option<Ref>) {
        self.reply(&ServerMessage::Ok { reference });
    }

    /// Queues a reply; a client too slow to take it is closed with `4009`.
    pub(super) fn reply(&mut self, msg: &ServerMessage<'_>) {
        let outcome = self.send_queue.push_reply(msg);
        self.settle(outcome);
    }

    // ----- internals ------------------------------------------------------

    /// The grant; handlers run only after `hello`.
    pub(super) fn grant(&self) -> Result<&Grant, WsError> {
        self.grant
            .as_ref()
            .ok_or_else(|| WsError::new("hello-first", "send hello with a token first"))
    }

    /// Attaches every joined space again (with the current metadata and
    /// visibility) when due: for a `ping` unless that was done a moment
    /// ago, for any other message once `ping_ms` has passed since (joins
    /// and updates wrote their own spaces already).
    pub(super) async fn refresh(&mut self, ping: bool) {
        let now = Instant::now();
        let due = if ping {
            self.timers.ping_write_due(now)
        } else {
            self.timers.keepalive_due(now)
        };
        if !due || self.joined.is_empty() {
            return;
        }
        self.timers.wrote(now);
        for (space, meta) in self.joined.iter() {
            if let Err(e) = self.attach(space, meta.clone()).await {
                tracing::debug!(%space, code = e.code, "refreshing a connection failed");
            }
        }
    }

    /// Acts on what the send queue made of a message: a client too slow for
    /// its queue is closed. True when the message was queued.
    pub(super) fn settle(&mut self, outcome: Outcome) -> bool {
        match outcome {
            Outcome::Queued => true,
            Outcome::Dropped | Outcome::Restart => false,
            Outcome::TooSlow(reason) => {
                self.close(close::TOO_SLOW, reason);
                false
            }
        }
    }

    /// Sends `snapshot` as pages of `page_size` members, each with its
    /// visible connections.
    async fn send_snapshot(
        &mut self,
        space: &SpaceName,
        snapshot: Vec<MemberStatus>,
        omitted: u64,
        page_size: usize,
        reference: Option<Ref>,
        resync: bool,
    ) -> Result<(), WsError> {
        let pages = snapshot.len().div_ceil(page_size).max(1);
        let mut rest = snapshot.into_iter();
        let mut reference = reference;
        for page in 0..pages {
            let chunk: Vec<MemberStatus> = rest.by_ref().take(page_size).collect();
            let conns = match self.state.store().live_connections() {
                _ if chunk.is_empty() => Vec::new(),
                Some(live) => {
                    let keys: Vec<_> = chunk.iter().map(|m| m.member.clone()).collect();
                    self.store_call(live.connections(space, &keys)).await?
                }
                // A store without live connections: nobody has any.
                None => vec![Vec::new(); chunk.len()],
            };
            let mut conns = conns.into_iter();
            let members = chunk
                .into_iter()
                .map(|m| SnapshotMember {
                    member: MemberDto::from(m),
                    // Invisible connections are never shown to anyone.
                    metas: conns
                        .next()
                        .unwrap_or_default()
                        .into_iter()
                        .filter(|c| !c.invisible)
                        .map(|c| ConnMeta {
                            conn: c.conn,
                            meta: c.meta,
                        })
                        .collect(),
                })
                .collect();
            let last = page + 1 == pages;
            let msg = ServerMessage::Snapshot {
                reference: if last { reference.take() } else { None },
                space,
                members,
                last,
                omitted: last.then_some(omitted),
                resync,
            };
            let outcome = self.send_queue.push_event(space, &msg);
            if !self.settle(outcome) {
                // Lagging: the rest would be dropped too.
                break;
            }
        }
        Ok(())
    }

    /// Starts a subscription over after lag.
    async fn restart(&mut self, space: SpaceName) {
        let page_size = self.subs.page_size(&space);
        if let Err(e) = self.subscribe(space.clone(), page_size, None, true).await {
            self.unsubscribe(&space);
            self.fail(
                None,
                WsError::new(
                    e.code,
                    format!("the subscription to {space} ended: {}", e.message),
                ),
            );
        }
    }

    /// Answers an error, or closes for a bad token; too many of the
    /// client's own errors close the socket with `4008`.
    pub(super) fn fail(&mut self, reference: Option<Ref>, e: WsError) {
        self.state.metrics().ws_error(e.code);
        if let Some(code) = e.close {
            self.close(code, e.message);
            return;
        }
        self.reply(&ServerMessage::Error {
            reference,
            code: e.code,
            message: &e.message,
        });
        if let Some(reason) = self.guards.abuse(&e, Instant::now()) {
            self.close(close::ABUSE, reason);
        }
    }

    /// Decides the close, sent once the session has detached; the first
    /// reason wins.
    fn close(&mut self, code: u16, reason: impl Into<String>) {
        if self.closing.is_none() {
            self.closing = Some((code, reason.into()));
        }
    }

    /// A store call, bounded by the request timeout.
    pub(super) async fn store_call<T>(
        &self,
        call: impl Future<Output = herenow_core::Result<T>>,
    ) -> Result<T, WsError> {
        let bounded = timeout(self.state.request_timeout(), call).await;
        bounded.map_err(|_| timed_out())?.map_err(WsError::from)
    }
}

/// The refusal of a call the store did not answer in time.
pub(super) fn timed_out() -> WsError {
    WsError::new(
        "timeout",
        "the store took longer than the server's request timeout",
    )
}

/// What a session's own sources bring.
pub(super) enum Wake {
    /// The queue has room again (`false`: the writer is gone).
    Room(bool),
    /// An item of a subscription.
    Event(SpaceName, Result<Arc<Event>, RecvError>),
    /// A note of the watch.
    Note(Note),
}

impl Protocol for Session {
    type Wake = Wake;

    fn is_closing(&self) -> bool {
        self.closing.is_some() || self.send_queue.is_gone()
    }

    /// The earliest of the hello deadline (until `hello`), the idle one
    /// and the stall of a lagging queue.
    fn deadline(&self) -> Option<Instant> {
        let hello = self.grant.is_none().then(|| self.timers.hello_deadline());
        let stall = self
            .send_queue
            .lagging_since()
            .map(|since| since + self.timers.stall());
        [hello, stall]
            .into_iter()
            .flatten()
            .chain([self.timers.idle_deadline()])
            .min()
    }

    /// Closes for the deadline that passed; on a tie the hello deadline
    /// first, then the idle one, then the stall.
    async fn on_deadline(&mut self, now: Instant) {
        if self.grant.is_none() && now >= self.timers.hello_deadline() {
            self.close(close::NO_HELLO, "no hello in time");
        } else if now >= self.timers.idle_deadline() {
            self.close(close::IDLE, "no message within the TTL");
        } else if self
            .send_queue
            .lagging_since()
            .is_some_and(|since| now >= since + self.timers.stall())
        {
            self.close(close::TOO_SLOW, "too slow: the send queue stayed full");
        }
    }

    fn shutdown(&mut self) {
        self.close(
            close::SERVICE_RESTART,
            "the server is restarting: reconnect now",
        );
    }

    fn ping(&mut self) {
        self.send_queue.ping();
    }

    fn no_pong(&mut self) {
        self.close(
            close::NO_PONG,
            "nothing within the pong wait of the server's ping",
        );
    }

    async fn on_text(&mut self, text: &str) {
        self.timers.heard(Instant::now());
        Box::pin(self.on_message(text)).await;
    }

    fn on_binary(&mut self) {
        self.timers.heard(Instant::now());
        if self.guards.allow(Instant::now()) {
            self.fail(
                None,
                WsError::bad_message("binary frames are not accepted; send JSON in text frames"),
            );
        } else {
            self.fail(None, rate_limited());
        }
    }

    fn on_bad_frame(&mut self, code: u16, reason: &'static str) {
        let reason = if code == close::TOO_BIG {
            "a message over 64 KiB"
        } else {
            reason
        };
        self.close(code, reason);
    }

    async fn wake(&mut self) -> Wake {
        // Taken only while lagging; why a handle: `SendQueue::room`.
        let room = self.send_queue.is_lagging().then(|| self.send_queue.room());
        let has_subs = !self.subs.is_empty();
        let has_watch = self.watching.is_some();
        tokio::select! {
            has_room = async {
                match &room {
                    Some(room) => room.wait().await,
                    None => std::future::pending().await,
                }
            } => Wake::Room(has_room),
            Some((space, item)) = self.subs.next(), if has_subs => Wake::Event(space, item),
            Some(note) = next_note(&mut self.watching), if has_watch => Wake::Note(note),
        }
    }

    async fn on_wake(&mut self, wake: Wake) {
        match wake {
            Wake::Room(false) => self.send_queue.mark_gone(),
            Wake::Room(true) => {
                for space in self.send_queue.recover() {
                    Box::pin(self.restart(space)).await;
                }
                if self.send_queue.take_watch_lag() {
                    Box::pin(self.watch_resync()).await;
                }
            }
            Wake::Event(space, item) => self.on_event(space, item).await,
            Wake::Note(note) => Box::pin(self.on_watch_note(note)).await,
        }
    }
}

/// The next note of the watch, if any (for `select!`).
async fn next_note(watching: &mut Option<Watching>) -> Option<Note> {
    match watching {
        Some(w) => w.next().await,
        None => None,
    }
}
