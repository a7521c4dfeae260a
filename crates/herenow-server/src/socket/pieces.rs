//! [`Pieces`]: a text message held in pieces of at most [`PIECE`] bytes,
//! which the writer sends as one message.
//!
//! A presence channel's roster is one message of up to hundreds of
//! kilobytes, made anew for sockets joining while the channel changes.
//! As one allocation each is a large block, and the allocator keeps the
//! pages of large blocks after a storm of joins (a page holding many such
//! blocks stays while one long-lived block of that size remains on it);
//! in pieces a roster is blocks of one common size, given back like any
//! others. The writer writes the pieces, one frame, without copying
//! them.

use std::sync::Arc;

use axum::body::Bytes;

/// The size of a piece: every piece but the last is this long.
pub(crate) const PIECE: usize = 16 * 1024;

/// A text message in pieces (their bytes together are UTF-8; a piece
/// may end inside a character).
#[derive(Debug, Clone)]
pub(crate) struct Pieces(Arc<[Bytes]>);

impl Pieces {
    /// The pieces, in order.
    pub(crate) fn pieces(&self) -> &Arc<[Bytes]> {
        &self.0
    }

    /// The message's length in bytes.
    pub(crate) fn len(&self) -> usize {
        self.0.iter().map(Bytes::len).sum()
    }

    /// The whole message, for tests.
    #[cfg(test)]
    pub(crate) fn to_text(&self) -> String {
        let bytes: Vec<u8> = self.0.iter().flat_map(|p| p.iter().copied()).collect();
        String::from_utf8(bytes).expect("pieces of a text")
    }
}

/// Writes a text message into [`Pieces`].
#[derive(Debug, Default)]
pub(crate) struct PiecesWriter {
    done: Vec<Bytes>,
    piece: Vec<u8>,
}

impl PiecesWriter {
    /// Appends `s`.
    pub(crate) fn push_str(&mut self, s: &str) {
        let mut bytes = s.as_bytes();
        while !bytes.is_empty() {
            if self.piece.capacity() == 0 {
                self.piece.reserve_exact(PIECE);
            }
            let n = (PIECE - self.piece.len()).min(bytes.len());
            self.piece.extend_from_slice(&bytes[..n]);
            bytes = &bytes[n..];
            if self.piece.len() == PIECE {
                self.done.push(Bytes::from(std::mem::take(&mut self.piece)));
            }
        }
    }

    /// The message written.
    pub(crate) fn finish(mut self) -> Pieces {
        if !self.piece.is_empty() {
            self.piece.shrink_to_fit();
            self.done.push(Bytes::from(self.piece));
        }
        Pieces(self.done.into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_text_is_cut_into_full_pieces_and_a_last_one() {
        let mut w = PiecesWriter::default();
        // Multi-byte characters, so some piece ends inside one.
        let part = "é€x".repeat(1000);
        for _ in 0..10 {
            w.push_str(&part);
        }
        let text = w.finish();
        let want = part.repeat(10);
        assert_eq!(text.to_text(), want);
        let sizes: Vec<usize> = text.pieces().iter().map(Bytes::len).collect();
        assert_eq!(sizes.len(), want.len().div_ceil(PIECE));
        assert!(sizes[..sizes.len() - 1].iter().all(|&n| n == PIECE));
        assert!(sizes.iter().all(|&n| n > 0));
    }

    #[test]
    fn an_empty_text_has_no_pieces() {
        let text = PiecesWriter::default().finish();
        assert!(text.pieces().is_empty());
        assert_eq!(text.to_text(), "");
    }
}
