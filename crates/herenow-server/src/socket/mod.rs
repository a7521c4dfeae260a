//! One socket core under both WebSocket protocols: herenow's `/v1/ws`
//! ([`crate::ws`]) and Pusher's `/app/{key}` ([`crate::pusher`]); each
//! protocol is an adapter ([`Protocol`]) that parses its messages and
//! writes its frames. `upgrade` is the handshake and the connection's
//! halves, `queue` the bounded queue to the writer ([`Inlet`] a session's
//! end of it), `pieces` what keeps a roster's memory small, `writer` the
//! task that sends, `driver` the session loop ([`drive`]), `hub` the
//! sockets as a whole ([`Hub`]), `rate` the token bucket on what a client
//! sends.
//!
//! A socket is two tasks: the session (the loop, with the protocol) on
//! the read half, and the writer on the write half, so nothing the
//! session does waits on a slow client, and a message queued wakes only
//! the writer; [`run`] starts the writer and waits for both.

mod driver;
mod hub;
mod pieces;
pub(crate) mod queue;
mod rate;
mod upgrade;
mod writer;

use std::future::Future;
use std::sync::Arc;

use herenow_core::{
    Attach, Capability, ConnId, LiveConnections, MemberKey, PresenceStore, SpaceName,
};
use tokio::sync::mpsc::error::TrySendError;

pub(crate) use driver::{Ended, Protocol, drive};
pub use hub::Hub;
pub(crate) use hub::{Liveness, random_bytes};
pub(crate) use pieces::{Pieces, PiecesWriter};
pub(crate) use rate::TokenBucket;
pub(crate) use upgrade::upgrade;

/// An upgraded socket, whatever the protocol on it: the client's frames
/// and the half the writer writes to.
pub(crate) struct Ws {
    frames: Frames,
    outgoing: Outgoing,
}

/// The half of the connection the writer writes to.
type Outgoing = tokio::io::WriteHalf<hyper_util::rt::TokioIo<hyper::upgrade::Upgraded>>;

/// The client's frames, as a session reads them.
pub(crate) type Frames = tokio_tungstenite::WebSocketStream<upgrade::Incoming>;
pub(crate) use writer::{CLOSE_GRACE, Out};

/// A session's end of its socket's queue, where frames go in; the writer
/// holds the other end.
pub(crate) struct Inlet {
    tx: queue::Sender<Out>,
    /// A close was queued ([`Inlet::close`]).
    closed: bool,
}

impl Inlet {
    /// Queues `out`; full when `cap` are queued, closed once the writer
    /// is gone.
    pub(crate) fn try_send(&self, out: Out) -> Result<(), TrySendError<Out>> {
        self.tx.try_send(out)
    }

    /// The queue's sending end, for what delivers to this socket from
    /// elsewhere (a channel's fan-out).
    pub(crate) fn sender(&self) -> &queue::Sender<Out> {
        &self.tx
    }

    /// Free slots now.
    pub(crate) fn capacity(&self) -> usize {
        self.tx.capacity()
    }

    /// Whether everything queued has been taken by the writer.
    pub(crate) fn is_drained(&self) -> bool {
        self.tx.capacity() == self.tx.max_capacity()
    }

    /// Queues the close behind what is queued (so the client reads the
    /// replies before it), or sends it ahead of the queue when the queue
    /// is full. The first close wins.
    pub(crate) fn close(&mut self, code: u16, reason: String) {
        if std::mem::replace(&mut self.closed, true) {
            return;
        }
        if let Err(TrySendError::Full(close)) = self.tx.try_send(Out::Close(code, reason)) {
            self.tx.push_first(close);
        }
    }
}

/// Runs one socket to its end: `session` gets the client's frames and
/// the [`Inlet`] of a queue of `cap` messages, and the writer sends what
/// it queues until its close, with [`CLOSE_GRACE`] once the session is
/// over.
pub(crate) async fn run<S, Fut>(socket: Ws, cap: usize, session: S)
where
    S: FnOnce(Frames, Inlet) -> Fut,
    Fut: Future<Output = ()>,
{
    let Ws {
        mut frames,
        outgoing,
    } = socket;
    let (tx, rx) = queue::channel(cap);
    // tungstenite's Pongs go through the queue, between whole frames.
    frames.get_mut().replies = Some(tx.clone());
    let mut writer = tokio::spawn(writer::write(outgoing, rx));
    let inlet = Inlet { tx, closed: false };
    session(frames, inlet).await;
    if tokio::time::timeout(CLOSE_GRACE, &mut writer)
        .await
        .is_err()
    {
        writer.abort();
    }
}

/// Attaches a socket's live connection, in which both protocols hold a
/// socket's presence; the error names a store without live connections.
pub(crate) async fn attach_live(
    store: &Arc<dyn PresenceStore>,
    space: &SpaceName,
    attach: &Attach,
) -> herenow_core::Result<()> {
    live(store)?.attach(space, attach).await.map(drop)
}

/// Ends a socket's live connection: detached after a `goodbye`, else
/// lingering for the space's grace (`herenow_core::conn`), so a member
/// who comes straight back, on any server, never left.
pub(crate) async fn end_live(
    store: &Arc<dyn PresenceStore>,
    space: &SpaceName,
    member: &MemberKey,
    conn: &ConnId,
    goodbye: bool,
) -> herenow_core::Result<()> {
    let live = live(store)?;
    let ended = if goodbye {
        live.detach(space, member, conn).await
    } else {
        live.linger(space, member, conn).await
    };
    ended.map(drop)
}

fn live(store: &Arc<dyn PresenceStore>) -> herenow_core::Result<&dyn LiveConnections> {
    store
        .live_connections()
        .ok_or_else(|| store.lacks(Capability::LiveConnections))
}

/// Refuses a socket: one message saying why, then the close; a client
/// that reads nothing for [`CLOSE_GRACE`] is dropped.
pub(crate) async fn refuse(socket: Ws, text: Arc<str>, code: u16, reason: &str) {
    let Ws { mut outgoing, .. } = socket;
    let said = [Out::Text(text), Out::Close(code, reason.into())];
    let _ = tokio::time::timeout(CLOSE_GRACE, writer::send(&mut outgoing, &said)).await;
}
