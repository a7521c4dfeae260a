//! The writing half of every socket: sends, in order, what its session
//! queued, then the close frame.
//!
//! The session never waits on the socket; this task does, so a client
//! that stops reading stalls only its writer. What is queued is sent
//! before one flush (a burst of events is a few writes of up to
//! [`WRITE_BUFFER`], gathered by the socket's
//! [`Buffered`](super::buffered::Buffered) connection, not a system call
//! per event), and a message longer than [`FRAGMENT`] goes in fragments
//! of that size (RFC 6455 §5.4: one message, which clients reassemble).
//! tungstenite's own write buffer holds one frame at a time and keeps
//! the capacity of the largest it ever held, so a large message sent
//! whole (a presence channel's roster) would stay with every socket of a
//! large channel for its life; in fragments it stays near one fragment.
//!
//! A close that cannot wait behind a full queue comes by the *urgent*
//! channel and goes first. Once the session has ended, the writer has
//! [`CLOSE_GRACE`] to send what is queued and the close frame; a client
//! that reads nothing meanwhile is simply dropped.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use futures::stream::SplitSink;
use futures::{FutureExt, SinkExt};
use tokio::sync::oneshot;
use tungstenite::Message;
use tungstenite::protocol::frame::coding::{CloseCode, Data, OpCode};
use tungstenite::protocol::frame::{CloseFrame, Frame};

use super::Ws;
#[cfg(doc)]
use super::buffered::WRITE_BUFFER;
use super::queue::Receiver;

/// How long what is queued and the close frame may take to go out once
/// the session has ended, before the socket is simply dropped.
pub(crate) const CLOSE_GRACE: Duration = Duration::from_secs(5);

/// The largest fragment of a message the writer sends.
pub(crate) const FRAGMENT: usize = 1024;

/// The longest close reason the protocol allows, in bytes.
const MAX_CLOSE_REASON: usize = 123;

/// What a socket's writer sends.
#[derive(Debug)]
pub(crate) enum Out {
    /// A message, serialized once for every socket it goes to.
    Text(Arc<str>),
    /// A WebSocket Ping frame: the server asks whether the client is
    /// still there (its WebSocket layer answers with a Pong by itself).
    Ping,
    /// The close frame: the last thing sent.
    Close(u16, String),
}

/// The writer's ends of a socket's queue: the queue, and the urgent
/// close that overtakes it.
pub(crate) struct Outlet {
    pub(crate) rx: Receiver<Out>,
    pub(crate) urgent: oneshot::Receiver<(u16, String)>,
}

/// The writer: sends what the session queues, in order, until a close;
/// an urgent close goes ahead of the queue. Once `ended` fires (the
/// session is over), it has [`CLOSE_GRACE`] to finish.
pub(crate) async fn write(
    mut sink: SplitSink<Ws, Message>,
    outlet: Outlet,
    ended: oneshot::Receiver<()>,
) {
    let Outlet { mut rx, urgent } = outlet;
    // Fused: once the session drops its sender, polling again must wait
    // forever, not panic.
    let mut urgent = urgent.fuse();
    let writing = async {
        loop {
            let first = tokio::select! {
                biased;
                Ok((code, reason)) = &mut urgent => Out::Close(code, reason),
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
            let mut next = Some(first);
            while let Some(out) = next {
                let sent = match out {
                    Out::Text(text) => {
                        let mut sent = Ok(());
                        for frame in text_frames(text) {
                            sent = or_urgent(&mut urgent, sink.feed(Message::Frame(frame))).await;
                            if sent.is_err() {
                                break;
                            }
                        }
                        sent
                    }
                    Out::Ping => {
                        or_urgent(&mut urgent, sink.feed(Message::Ping(Bytes::new()))).await
                    }
                    Out::Close(code, reason) => Err(Stop::Close(code, reason)),
                };
                if let Err(stop) = sent {
                    return stop.finish(&mut sink).await;
                }
                next = rx.try_recv();
            }
            if let Err(stop) = or_urgent(&mut urgent, sink.flush()).await {
                return stop.finish(&mut sink).await;
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

/// Why the writer stops early.
enum Stop {
    /// The socket failed: nobody to tell.
    Failed,
    /// Send this close frame, then stop.
    Close(u16, String),
}

impl Stop {
    async fn finish(self, sink: &mut SplitSink<Ws, Message>) {
        if let Stop::Close(code, reason) = self {
            // A frame cut short stays whole in the socket's buffer; the
            // close goes after it.
            let _ = sink.send(close_message(code, &reason)).await;
        }
    }
}

/// A write to the socket, unless an urgent close comes first.
async fn or_urgent<F>(
    urgent: &mut futures::future::Fuse<oneshot::Receiver<(u16, String)>>,
    write: F,
) -> Result<(), Stop>
where
    F: Future<Output = Result<(), tungstenite::Error>>,
{
    tokio::select! {
        biased;
        Ok((code, reason)) = urgent => Err(Stop::Close(code, reason)),
        sent = write => sent.map_err(|_| Stop::Failed),
    }
}

/// A close message; its reason cut to what the protocol allows.
pub(crate) fn close_message(code: u16, reason: &str) -> Message {
    let mut end = reason.len().min(MAX_CLOSE_REASON);
    while !reason.is_char_boundary(end) {
        end -= 1;
    }
    Message::Close(Some(CloseFrame {
        code: CloseCode::from(code),
        reason: reason[..end].into(),
    }))
}

/// The frames of one text message: one frame, or fragments of at most
/// [`FRAGMENT`] bytes that share the message's memory (a fragment may end
/// inside a character: only the whole message must be UTF-8).
fn text_frames(text: Arc<str>) -> Fragments {
    Fragments {
        bytes: Bytes::from_owner(Text(text)),
        at: 0,
        done: false,
    }
}

/// The message's text, as bytes the frames share.
struct Text(Arc<str>);

impl AsRef<[u8]> for Text {
    fn as_ref(&self) -> &[u8] {
        self.0.as_bytes()
    }
}

/// The frames of one message, in order.
struct Fragments {
    bytes: Bytes,
    /// Where the next fragment starts.
    at: usize,
    done: bool,
}

impl Iterator for Fragments {
    type Item = Frame;

    fn next(&mut self) -> Option<Frame> {
        if self.done {
            return None;
        }
        let len = self.bytes.len();
        let end = len.min(self.at + FRAGMENT);
        let opcode = if self.at == 0 {
            Data::Text
        } else {
            Data::Continue
        };
        // An empty message is one empty frame.
        self.done = end == len;
        let frame = Frame::message(
            self.bytes.slice(self.at..end),
            OpCode::Data(opcode),
            self.done,
        );
        self.at = end;
        Some(frame)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frames(text: &str) -> Vec<(Data, bool, Vec<u8>)> {
        text_frames(Arc::from(text))
            .map(|f| {
                let OpCode::Data(data) = f.header().opcode else {
                    panic!("a data frame")
                };
                (data, f.header().is_final, f.payload().to_vec())
            })
            .collect()
    }

    #[test]
    fn a_short_message_is_one_final_text_frame() {
        assert_eq!(frames("{}"), vec![(Data::Text, true, b"{}".to_vec())]);
        assert_eq!(frames(""), vec![(Data::Text, true, Vec::new())]);
    }

    #[test]
    fn a_long_message_is_fragments_that_rebuild_it() {
        // Multi-byte characters, so some fragment ends inside one.
        let text: String = "é€".repeat(FRAGMENT);
        let got = frames(&text);
        assert_eq!(got.len(), text.len().div_ceil(FRAGMENT));
        assert_eq!(got[0].0, Data::Text);
        assert!(got[1..].iter().all(|f| f.0 == Data::Continue));
        assert!(
            got[..got.len() - 1]
                .iter()
                .all(|f| !f.1 && f.2.len() == FRAGMENT)
        );
        assert!(got.last().unwrap().1, "the last fragment ends the message");
        let whole: Vec<u8> = got.into_iter().flat_map(|f| f.2).collect();
        assert_eq!(whole, text.as_bytes());
    }

    #[test]
    fn a_message_of_exactly_one_fragment_is_one_frame() {
        let text = "x".repeat(FRAGMENT);
        assert_eq!(frames(&text).len(), 1);
        assert_eq!(frames(&"x".repeat(FRAGMENT + 1)).len(), 2);
    }

    #[test]
    fn a_close_reason_is_cut_at_a_character_boundary() {
        let Message::Close(Some(frame)) = close_message(4009, &"é".repeat(100)) else {
            panic!("a close frame")
        };
        assert_eq!(frame.reason.len(), 122);
        assert_eq!(u16::from(frame.code), 4009);
    }
}
