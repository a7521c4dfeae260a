//! One socket core under both WebSocket protocols: herenow's `/v1/ws`
//! ([`crate::ws`]) and Pusher's `/app/{key}` ([`crate::pusher`]); each
//! protocol is an adapter ([`Protocol`]) that parses its messages and
//! writes its frames. `upgrade` is the handshake, `queue` the bounded
//! queue to the writer ([`Inlet`] a session's end of it), `buffered` and
//! `pieces` what keeps a socket's memory small, `writer` the task that
//! sends, `driver` the session loop ([`drive`]), `hub` the sockets as a
//! whole ([`Hub`]), `rate` the token bucket on what a client sends.
//!
//! A socket is two futures side by side: the session (the loop, with
//! the protocol) and the writer, so nothing the session does waits on a
//! slow client; [`run`] joins them.

mod buffered;
mod driver;
mod hub;
mod pieces;
pub(crate) mod queue;
mod rate;
mod upgrade;
mod writer;

use std::future::Future;
use std::sync::Arc;

use futures::stream::SplitStream;
use futures::{SinkExt, StreamExt};
use herenow_core::{
    Attach, Capability, ConnId, LiveConnections, MemberKey, PresenceStore, SpaceName,
};
use tokio::sync::mpsc::error::TrySendError;
use tokio::sync::oneshot;

pub(crate) use driver::{Ended, Protocol, drive};
pub use hub::Hub;
pub(crate) use hub::{Liveness, random_bytes};
pub(crate) use pieces::{Pieces, PiecesWriter};
pub(crate) use rate::TokenBucket;
pub(crate) use upgrade::upgrade;

/// An upgraded socket, whatever the protocol on it.
pub(crate) type Ws = tokio_tungstenite::WebSocketStream<
    buffered::Buffered<hyper_util::rt::TokioIo<hyper::upgrade::Upgraded>>,
>;
pub(crate) use writer::{CLOSE_GRACE, Out};
use writer::{Outlet, close_message};

/// A session's end of its socket's queue, where frames go in; the writer
/// holds the other end, the `Outlet`.
pub(crate) struct Inlet {
    tx: queue::Sender<Out>,
    urgent: Option<oneshot::Sender<(u16, String)>>,
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
        let queued = self.tx.try_send(Out::Close(code, reason));
        if let Err(TrySendError::Full(Out::Close(code, reason))) = queued
            && let Some(urgent) = self.urgent.take()
        {
            let _ = urgent.send((code, reason));
        }
    }
}

/// Runs one socket to its end: `session` gets the read half and the
/// [`Inlet`] of a queue of `cap` messages, and the writer sends what it
/// queues until its close, with [`CLOSE_GRACE`] once the session is over.
pub(crate) async fn run<S, Fut>(socket: Ws, cap: usize, session: S)
where
    S: FnOnce(SplitStream<Ws>, Inlet) -> Fut,
    Fut: Future<Output = ()>,
{
    let (sink, stream) = socket.split();
    let (tx, rx) = queue::channel(cap);
    let (urgent_tx, urgent) = oneshot::channel();
    let inlet = Inlet {
        tx,
        urgent: Some(urgent_tx),
    };
    let (ended_tx, ended_rx) = oneshot::channel::<()>();
    let session = async move {
        session(stream, inlet).await;
        // Dropped with the session: the writer's grace starts.
        drop(ended_tx);
    };
    tokio::join!(
        session,
        writer::write(sink, Outlet { rx, urgent }, ended_rx)
    );
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
pub(crate) async fn refuse(mut socket: Ws, text: Arc<str>, code: u16, reason: &str) {
    let _ = tokio::time::timeout(CLOSE_GRACE, async {
        let _ = socket
            .feed(tungstenite::Message::Text((*text).into()))
            .await;
        let _ = socket.send(close_message(code, reason)).await;
    })
    .await;
}
