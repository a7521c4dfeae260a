//! The writing half of every socket: a task of its own that sends, in
//! order, what its session queued, then the close frame. A client that
//! stops reading stalls only its writer.
//!
//! The writer writes WebSocket frames itself (RFC 6455 §5.2; a server's
//! frames are not masked, so a message is encoded once for every socket):
//! what is queued when it wakes goes out in one write, copied into one
//! buffer up to [`COPY_MAX`] bytes (the kernel's `send` costs less than
//! its `writev`, which is most of a small message's cost), else as
//! vectored writes of the frames' headers and the messages' own memory (a
//! roster in [`Pieces`] is its pieces). Nothing is kept between writes,
//! so an idle socket holds no write memory.

use std::io::{self, IoSlice};
use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use tokio::io::{AsyncWrite, AsyncWriteExt};

use super::pieces::Pieces;
use super::queue::Receiver;
#[cfg(doc)]
use super::queue::Sender;

/// How long what is queued and the close frame may take to go out once
/// the session has ended, before the socket is simply dropped.
pub(crate) const CLOSE_GRACE: Duration = Duration::from_secs(5);

/// The longest close reason the protocol allows, in bytes.
const MAX_CLOSE_REASON: usize = 123;

/// Most messages gathered into one write.
const BATCH: usize = 64;

/// The most bytes of frames copied into one write.
const COPY_MAX: usize = 16 * 1024;

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
    /// Frames tungstenite wrote in reply to the client's (a Pong), sent
    /// as they are.
    Reply(Bytes),
}

/// The writer: sends what the session queues, in order, until a close
/// (a close that could not wait comes first, [`Sender::push_first`]).
/// Ended by [`run`](super::run) when it is not done [`CLOSE_GRACE`] after
/// the session.
pub(crate) async fn write<W: AsyncWrite + Unpin>(mut io: W, mut rx: Receiver<Out>) {
    loop {
        let Some(first) = rx.recv().await else {
            // The session ended without a close of its own: the client
            // closed (this answers it) or vanished.
            let _ = io.write_all(&[0x88, 0]).await;
            return;
        };
        let mut batch = vec![first];
        while batch.len() < BATCH && !matches!(batch.last(), Some(Out::Close(..))) {
            match rx.try_recv() {
                Some(next) => batch.push(next),
                None => break,
            }
        }
        let closing = matches!(batch.last(), Some(Out::Close(..)));
        if send(&mut io, &batch).await.is_err() || closing {
            return;
        }
    }
}

/// Writes `batch`'s frames, copied or vectored as the module doc says.
pub(crate) async fn send<W: AsyncWrite + Unpin>(io: &mut W, batch: &[Out]) -> io::Result<()> {
    let heads: Vec<Head> = batch.iter().map(Head::of).collect();
    let mut slices = Vec::with_capacity(2 * batch.len());
    for (message, head) in batch.iter().zip(&heads) {
        slices.push(IoSlice::new(head.bytes()));
        match message {
            Out::Text(text) => slices.push(IoSlice::new(text.as_bytes())),
            Out::Pieces(pieces) => slices.extend(pieces.pieces().iter().map(|p| IoSlice::new(p))),
            Out::Ping => {}
            Out::Close(_, reason) => slices.push(IoSlice::new(close_reason(reason).as_bytes())),
            Out::Reply(frames) => slices.push(IoSlice::new(frames)),
        }
    }
    let len: usize = slices.iter().map(|s| s.len()).sum();
    if len <= COPY_MAX {
        let mut frames = Vec::with_capacity(len);
        for slice in &slices {
            frames.extend_from_slice(slice);
        }
        return io.write_all(&frames).await;
    }
    write_all(io, &mut slices).await
}

/// Writes every byte of `slices`, as few writes as the socket allows.
async fn write_all<W: AsyncWrite + Unpin>(
    io: &mut W,
    mut slices: &mut [IoSlice<'_>],
) -> io::Result<()> {
    while !slices.is_empty() {
        // The standard library passes at most `IOV_MAX` of them.
        let n = io.write_vectored(slices).await?;
        if n == 0 {
            return Err(io::ErrorKind::WriteZero.into());
        }
        IoSlice::advance_slices(&mut slices, n);
    }
    Ok(())
}

/// A close reason cut to what the protocol allows, at a character
/// boundary.
fn close_reason(reason: &str) -> &str {
    let mut end = reason.len().min(MAX_CLOSE_REASON);
    while !reason.is_char_boundary(end) {
        end -= 1;
    }
    &reason[..end]
}

/// A frame's header (RFC 6455 §5.2): final, unmasked, with the close
/// code where the frame is a close.
#[derive(Default)]
struct Head {
    bytes: [u8; 12],
    len: usize,
}

impl Head {
    fn of(message: &Out) -> Self {
        match message {
            Out::Text(text) => Self::frame(0x1, text.len()),
            Out::Pieces(pieces) => Self::frame(0x1, pieces.len()),
            Out::Ping => Self::frame(0x9, 0),
            Out::Close(code, reason) => {
                let mut head = Self::frame(0x8, 2 + close_reason(reason).len());
                head.bytes[head.len..head.len + 2].copy_from_slice(&code.to_be_bytes());
                head.len += 2;
                head
            }
            Out::Reply(_) => Self::default(),
        }
    }

    /// The header of a final frame of `opcode` with `len` bytes.
    fn frame(opcode: u8, len: usize) -> Self {
        let mut bytes = [0; 12];
        bytes[0] = 0x80 | opcode;
        let n = match len {
            0..=125 => {
                bytes[1] = len as u8;
                2
            }
            126..=0xFFFF => {
                bytes[1] = 126;
                bytes[2..4].copy_from_slice(&(len as u16).to_be_bytes());
                4
            }
            _ => {
                bytes[1] = 127;
                bytes[2..10].copy_from_slice(&(len as u64).to_be_bytes());
                10
            }
        };
        Self { bytes, len: n }
    }

    fn bytes(&self) -> &[u8] {
        &self.bytes[..self.len]
    }
}

#[cfg(test)]
mod tests {
    use futures::StreamExt;
    use tokio_tungstenite::WebSocketStream;
    use tungstenite::Message;
    use tungstenite::protocol::Role;
    use tungstenite::protocol::frame::coding::CloseCode;

    use super::super::pieces::{PIECE, PiecesWriter};
    use super::super::queue;
    use super::*;

    /// What a client reads until the close frame.
    async fn read_until_close(far: tokio::io::DuplexStream) -> Vec<Message> {
        let mut ws = WebSocketStream::from_raw_socket(far, Role::Client, None).await;
        let mut got = Vec::new();
        while let Some(message) = ws.next().await {
            let message = message.expect("a well-formed frame");
            let close = message.is_close();
            got.push(message);
            if close {
                break;
            }
        }
        got
    }

    #[tokio::test]
    async fn every_length_of_frame_reads_back_as_the_message_sent() {
        // A small pipe: the writes go in parts as the client reads.
        let (near, far) = tokio::io::duplex(1024);
        // Multi-byte characters, so some piece ends inside one.
        let long: String = "é€".repeat(14_000);
        let mut roster = PiecesWriter::default();
        roster.push_str(&"x€".repeat(PIECE));
        let roster = roster.finish();
        assert!(roster.pieces().len() > 2);
        let batch = vec![
            Out::Text(Arc::from("{}")),
            Out::Text(Arc::from("")),
            Out::Text(Arc::from("y".repeat(300))),
            Out::Text(Arc::from(long.as_str())),
            Out::Pieces(roster.clone()),
            Out::Ping,
            Out::Close(4009, "é".repeat(100)),
        ];
        let mut near = near;
        let (sent, got) = tokio::join!(send(&mut near, &batch), read_until_close(far));
        sent.unwrap();
        let text = |m: &Message| m.to_text().unwrap().to_owned();
        assert_eq!(got.len(), batch.len());
        assert_eq!(text(&got[0]), "{}");
        assert_eq!(text(&got[1]), "");
        assert_eq!(text(&got[2]), "y".repeat(300));
        assert_eq!(text(&got[3]), long);
        assert_eq!(text(&got[4]), roster.to_text());
        assert!(got[5].is_ping());
        let Message::Close(Some(close)) = &got[6] else {
            panic!("a close frame with a code")
        };
        assert_eq!(close.code, CloseCode::from(4009));
        assert_eq!(close.reason.len(), 122, "cut at a character boundary");
    }

    #[tokio::test]
    async fn the_writer_sends_in_order_then_answers_the_end_with_a_close() {
        let (near, far) = tokio::io::duplex(1 << 16);
        let (tx, rx) = queue::channel(8);
        for i in 0..3 {
            tx.try_send(Out::Text(Arc::from(i.to_string()))).unwrap();
        }
        drop(tx);
        let ((), got) = tokio::join!(write(near, rx), read_until_close(far));
        let texts: Vec<&str> = got[..3].iter().map(|m| m.to_text().unwrap()).collect();
        assert_eq!(texts, ["0", "1", "2"]);
        assert_eq!(got[3], Message::Close(None), "no code: the session ended");
    }
}
