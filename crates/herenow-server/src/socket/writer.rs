//! The writing half of every socket: sends, in order, what its session
//! queued, then the close frame. A client that stops reading stalls only
//! its writer.
//!
//! What is queued is sent before one flush (gathered into writes of up to
//! [`WRITE_BUFFER`] by the [`Buffered`](super::buffered::Buffered)
//! connection), and a message longer than [`FRAGMENT`] goes in fragments
//! (RFC 6455 §5.4): tungstenite's own buffer keeps the capacity of the
//! largest frame it ever held, so a roster sent whole would stay with
//! every socket of a large channel for its life.
//!
//! A close that cannot wait behind a full queue comes by the *urgent*
//! channel and goes first. Once the session has ended, the writer has
//! [`CLOSE_GRACE`] to send what is queued and the close frame.

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
use super::pieces::Pieces;
use super::queue::Receiver;

/// How long what is queued and the close frame may take to go out once
/// the session has ended, before the socket is simply dropped.
pub(crate) const CLOSE_GRACE: Duration = Duration::from_secs(5);

/// The largest fragment of a message the writer sends.
pub(crate) const FRAGMENT: usize = 256;

/// The longest close reason the protocol allows, in bytes.
const MAX_CLOSE_REASON: usize = 123;

/// What a socket's writer sends.
#[derive(Debug)]
pub(crate) enum Out {
    /// A message, serialized once for every socket it goes to.
    Text(Arc<str>),
    /// A message in pieces (a presence roster), sent as one message.
    Pieces(Pieces),
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
                let frames = match out {
                    Out::Text(text) => text_frames(text),
                    Out::Pieces(pieces) => pieces_frames(&pieces),
                    Out::Ping => Fragments::ping(),
                    Out::Close(code, reason) => {
                        return Stop::Close(code, reason).finish(&mut sink).await;
                    }
                };
                let mut sent = Ok(());
                for message in frames {
                    sent = or_urgent(&mut urgent, sink.feed(message)).await;
                    if sent.is_err() {
                        break;
                    }
                }
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
        piece: Bytes::from_owner(Text(text)),
        rest: None,
        at: 0,
        next: Next::First,
    }
}

/// The frames of a message in pieces, as [`text_frames`]: a fragment
/// ends at the latest where its piece does.
fn pieces_frames(pieces: &Pieces) -> Fragments {
    Fragments {
        piece: pieces.pieces().first().cloned().unwrap_or_default(),
        rest: Some((pieces.clone(), 1)),
        at: 0,
        next: Next::First,
    }
}

/// The message's text, as bytes the frames share.
struct Text(Arc<str>);

impl AsRef<[u8]> for Text {
    fn as_ref(&self) -> &[u8] {
        self.0.as_bytes()
    }
}

/// What the writer feeds for one queued message, in order: the frames of
/// a text, or a ping.
struct Fragments {
    /// The piece being cut: the whole text, or one of its pieces.
    piece: Bytes,
    /// The text's pieces, and the index of the next one.
    rest: Option<(Pieces, usize)>,
    /// Where the next fragment starts in `piece`.
    at: usize,
    next: Next,
}

/// What [`Fragments`] gives next.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Next {
    Ping,
    /// The frame that opens the text.
    First,
    /// A continuation.
    Continue,
    Done,
}

impl Fragments {
    /// A ping.
    fn ping() -> Self {
        Self {
            piece: Bytes::new(),
            rest: None,
            at: 0,
            next: Next::Ping,
        }
    }

    /// Whether a piece follows the one being cut.
    fn next_piece_exists(&self) -> bool {
        self.rest
            .as_ref()
            .is_some_and(|(pieces, next)| *next < pieces.pieces().len())
    }

    /// Moves on to the next piece once this one is cut; `false` when
    /// there is none.
    fn next_piece(&mut self) -> bool {
        let Some((pieces, next)) = &mut self.rest else {
            return false;
        };
        let Some(piece) = pieces.pieces().get(*next) else {
            return false;
        };
        self.piece = piece.clone();
        self.at = 0;
        *next += 1;
        true
    }
}

impl Iterator for Fragments {
    type Item = Message;

    fn next(&mut self) -> Option<Message> {
        let opcode = match self.next {
            Next::Done => return None,
            Next::Ping => {
                self.next = Next::Done;
                return Some(Message::Ping(Bytes::new()));
            }
            Next::First => Data::Text,
            Next::Continue => Data::Continue,
        };
        while self.at == self.piece.len() && self.next_piece() {}
        let end = self.piece.len().min(self.at + FRAGMENT);
        // An empty text is one empty frame.
        let last = end == self.piece.len() && !self.next_piece_exists();
        let frame = Frame::message(self.piece.slice(self.at..end), OpCode::Data(opcode), last);
        self.at = end;
        self.next = if last { Next::Done } else { Next::Continue };
        Some(Message::Frame(frame))
    }
}

#[cfg(test)]
mod tests {
    use super::super::pieces::{PIECE, PiecesWriter};
    use super::*;

    fn frames(text: &str) -> Vec<(Data, bool, Vec<u8>)> {
        described(text_frames(Arc::from(text)))
    }

    fn described(frames: Fragments) -> Vec<(Data, bool, Vec<u8>)> {
        frames
            .map(|m| {
                let Message::Frame(f) = m else {
                    panic!("a frame")
                };
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
    fn a_message_in_pieces_is_fragments_that_rebuild_it() {
        let text: String = "é€".repeat(3 * PIECE / 5);
        let mut w = PiecesWriter::default();
        w.push_str(&text);
        let got = described(pieces_frames(&w.finish()));
        assert!(got.len() >= text.len().div_ceil(FRAGMENT));
        assert_eq!(got[0].0, Data::Text);
        assert!(got[1..].iter().all(|f| f.0 == Data::Continue));
        assert!(got.iter().all(|f| f.2.len() <= FRAGMENT && !f.2.is_empty()));
        assert!(got[..got.len() - 1].iter().all(|f| !f.1));
        assert!(got.last().unwrap().1, "the last fragment ends the message");
        let whole: Vec<u8> = got.into_iter().flat_map(|f| f.2).collect();
        assert_eq!(whole, text.as_bytes());
        let empty = described(pieces_frames(&PiecesWriter::default().finish()));
        assert_eq!(empty, vec![(Data::Text, true, Vec::new())]);
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
