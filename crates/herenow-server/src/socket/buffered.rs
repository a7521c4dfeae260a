//! A socket's connection with the write buffer the socket owns: frames
//! are gathered here up to [`WRITE_BUFFER`] and written in one system
//! call, and the buffer is given back once it is written out.
//!
//! tungstenite's own buffer keeps the largest capacity it ever reached
//! for the socket's life: after a burst every socket of a large channel
//! kept kilobytes it no longer used. So tungstenite writes each frame
//! through at once (its buffer holds one frame, at most a
//! [`FRAGMENT`](super::writer::FRAGMENT)), and the gathering is done
//! here, in a buffer that an idle socket does not hold.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// What is gathered before it is written to the connection.
pub(crate) const WRITE_BUFFER: usize = 4 * 1024;

/// `inner` with a write buffer of at most [`WRITE_BUFFER`] bytes, empty
/// (holding no memory) once flushed.
pub(crate) struct Buffered<S> {
    inner: S,
    /// Bytes accepted and not yet written; `buf[written..]` is what is
    /// left of them.
    buf: Vec<u8>,
    written: usize,
}

impl<S> Buffered<S> {
    pub(crate) fn new(inner: S) -> Self {
        Self {
            inner,
            buf: Vec::new(),
            written: 0,
        }
    }
}

impl<S: AsyncWrite + Unpin> Buffered<S> {
    /// Writes what the buffer holds; once it is all out, the buffer's
    /// memory is given back.
    fn poll_drain(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while self.written < self.buf.len() {
            let n = ready!(Pin::new(&mut self.inner).poll_write(cx, &self.buf[self.written..]))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            self.written += n;
        }
        self.buf = Vec::new();
        self.written = 0;
        Poll::Ready(Ok(()))
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Buffered<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Buffered<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        if this.buf.len() + data.len() > WRITE_BUFFER {
            ready!(this.poll_drain(cx))?;
        }
        if data.len() >= WRITE_BUFFER {
            return Pin::new(&mut this.inner).poll_write(cx, data);
        }
        if this.buf.capacity() == 0 {
            this.buf.reserve_exact(WRITE_BUFFER);
        }
        this.buf.extend_from_slice(data);
        Poll::Ready(Ok(data.len()))
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        ready!(self.poll_drain(cx))?;
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        ready!(self.poll_drain(cx))?;
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;

    #[tokio::test]
    async fn writes_are_gathered_until_a_flush_then_the_buffer_is_given_back() {
        let (near, mut far) = tokio::io::duplex(64 * 1024);
        let mut io = Buffered::new(near);
        io.write_all(b"one ").await.unwrap();
        io.write_all(b"two").await.unwrap();
        assert_eq!(io.buf, b"one two", "held until flushed");
        io.flush().await.unwrap();
        assert_eq!(io.buf.capacity(), 0, "an idle socket holds no buffer");
        let mut got = [0u8; 7];
        far.read_exact(&mut got).await.unwrap();
        assert_eq!(&got, b"one two");
    }

    #[tokio::test]
    async fn what_would_pass_the_bound_goes_out_first_and_in_order() {
        let (near, mut far) = tokio::io::duplex(64 * 1024);
        let mut io = Buffered::new(near);
        let small = vec![b'a'; WRITE_BUFFER - 10];
        let large = vec![b'b'; WRITE_BUFFER + 10];
        io.write_all(&small).await.unwrap();
        io.write_all(b"0123456789x").await.unwrap();
        assert!(io.buf.len() <= WRITE_BUFFER);
        io.write_all(&large).await.unwrap();
        io.shutdown().await.unwrap();
        let mut got = Vec::new();
        far.read_to_end(&mut got).await.unwrap();
        let mut want = small;
        want.extend_from_slice(b"0123456789x");
        want.extend_from_slice(&large);
        assert_eq!(got, want);
    }

    #[tokio::test]
    async fn a_slow_reader_holds_the_writes_back_without_losing_any() {
        // Room for less than one buffer: draining waits for the reader.
        let (near, mut far) = tokio::io::duplex(100);
        let writer = tokio::spawn(async move {
            let mut io = Buffered::new(near);
            for i in 0..2_000u32 {
                io.write_all(&i.to_le_bytes()).await.unwrap();
            }
            io.shutdown().await.unwrap();
        });
        let mut got = Vec::new();
        far.read_to_end(&mut got).await.unwrap();
        writer.await.unwrap();
        let want: Vec<u8> = (0..2_000u32).flat_map(u32::to_le_bytes).collect();
        assert_eq!(got, want);
    }
}
