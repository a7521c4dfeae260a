//! The writing half of a connection: sends, in order, what the session
//! queued in its [`SendQueue`](super::send_queue::SendQueue), then the close frame.
//!
//! The session never waits on the socket; this task does, so a client
//! that stops reading stalls only the writer. A close that cannot wait
//! behind a full queue comes by a separate *urgent* channel and goes
//! first. After the session ends, the writer has [`CLOSE_GRACE`] to send
//! what is queued and the close frame; a client that reads nothing
//! meanwhile is simply dropped.

use std::time::Duration;

use axum::extract::ws::{CloseFrame, Message, WebSocket};
use futures::stream::SplitSink;
use futures::{FutureExt, SinkExt};
use tokio::sync::oneshot;

use crate::queue::Receiver;

/// How long what is queued and the close frame may take to go out once the
/// session has ended, before the socket is simply dropped.
const CLOSE_GRACE: Duration = Duration::from_secs(5);

/// The longest close reason the protocol allows, in bytes.
const MAX_CLOSE_REASON: usize = 123;

/// What the writer sends.
#[derive(Debug)]
pub(super) enum Outbound {
    /// A message, serialized.
    Text(String),
    /// A WebSocket Ping frame: the server asks whether the client is
    /// still there (its WebSocket layer answers with a Pong by itself).
    Ping,
    /// The close frame: the last thing sent.
    Close(u16, String),
}

/// The writer's ends of the send queue: the queue, and the urgent close that
/// overtakes it.
pub(super) struct Outlet {
    /// What the session queued, in order.
    pub(super) rx: Receiver<Outbound>,
    /// A close for when not even the queue's reserve had room.
    pub(super) urgent: oneshot::Receiver<(u16, String)>,
}

/// The writer: sends what the session queues, in order, until a close; an
/// urgent close (nothing more fits in the queue) goes ahead of the queue.
/// Once the session has ended, it has [`CLOSE_GRACE`] to finish.
pub(super) async fn write(
    mut sink: SplitSink<WebSocket, Message>,
    outlet: Outlet,
    ended: oneshot::Receiver<()>,
) {
    let Outlet { mut rx, urgent } = outlet;
    // Fused: once the session drops its sender, polling again must wait
    // forever, not panic.
    let mut urgent = urgent.fuse();
    let writing = async {
        loop {
            let next = tokio::select! {
                biased;
                Ok((code, reason)) = &mut urgent => Outbound::Close(code, reason),
                next = rx.recv() => match next {
                    Some(next) => next,
                    None => {
                        // The session ended without a close of its own:
                        // the client closed (finish its handshake) or
                        // vanished.
                        let _ = sink.close().await;
                        return;
                    }
                },
            };
            let message = match next {
                Outbound::Text(text) => Message::Text(text.into()),
                Outbound::Ping => Message::Ping(Default::default()),
                Outbound::Close(code, reason) => {
                    close_with(&mut sink, code, reason).await;
                    return;
                }
            };
            let sent = tokio::select! {
                biased;
                Ok((code, reason)) = &mut urgent => {
                    // A frame cut short stays whole in the socket's
                    // buffer; the close goes after it.
                    close_with(&mut sink, code, reason).await;
                    return;
                }
                sent = sink.send(message) => sent,
            };
            if sent.is_err() {
                return;
            }
        }
    };
    tokio::select! {
        () = writing => {}
        () = async {
            let _ = ended.await;
            tokio::time::sleep(CLOSE_GRACE).await;
        } => {}
    }
}

/// Sends the close frame, its reason cut to what the protocol allows.
async fn close_with(sink: &mut SplitSink<WebSocket, Message>, code: u16, mut reason: String) {
    if reason.len() > MAX_CLOSE_REASON {
        let mut end = MAX_CLOSE_REASON;
        while !reason.is_char_boundary(end) {
            end -= 1;
        }
        reason.truncate(end);
    }
    let frame = CloseFrame {
        code,
        reason: reason.into(),
    };
    let _ = sink.send(Message::Close(Some(frame))).await;
}
