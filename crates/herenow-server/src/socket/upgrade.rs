//! The WebSocket handshake, done here for both protocols: `101 Switching
//! Protocols`, then the connection in two halves. tungstenite reads the
//! client's frames from one ([`Incoming`]); the [writer](super::writer)
//! writes the server's own frames to the other, without a WebSocket
//! library's buffer between (RFC 6455 §4.2).

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use axum::body::Bytes;
use axum::extract::Request;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use hyper::upgrade::{OnUpgrade, Upgraded};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf, ReadHalf};
use tokio_tungstenite::WebSocketStream;
use tungstenite::protocol::{Role, WebSocketConfig};

use super::Ws;
use super::queue;
use super::writer::Out;
use crate::problem::ApiError;

/// How many bytes a socket reads at a time: a client's messages are a
/// few hundred bytes; a larger one grows the buffer (up to the protocol's
/// largest message).
const READ_BUFFER: usize = 512;

/// Answers a WebSocket handshake with `101 Switching Protocols` and runs
/// `socket` on the connection once upgraded; anything else gets a `426`
/// problem naming what the handshake lacks. `max_message` bounds what the
/// client may send, in one frame and in one message.
pub(crate) fn upgrade<F, Fut>(mut request: Request, max_message: usize, socket: F) -> Response
where
    F: FnOnce(Ws) -> Fut + Send + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    let path = request.uri().path().to_owned();
    let accept = match accept_key(request.headers(), &path) {
        Ok(accept) => accept,
        Err(why) => return upgrade_required(why),
    };
    let Some(on_upgrade) = request.extensions_mut().remove::<OnUpgrade>() else {
        return upgrade_required(
            "this connection cannot be upgraded to a WebSocket (HTTP/1.1 is needed)".into(),
        );
    };
    let config = WebSocketConfig::default()
        .read_buffer_size(READ_BUFFER)
        // Each frame goes through to the socket's own buffer at once.
        .write_buffer_size(0)
        .max_message_size(Some(max_message))
        .max_frame_size(Some(max_message));
    tokio::spawn(async move {
        let Ok(upgraded) = on_upgrade.await else {
            return;
        };
        let (read, outgoing) = tokio::io::split(TokioIo::new(upgraded));
        let incoming = Incoming {
            read,
            replies: None,
        };
        let frames = WebSocketStream::from_raw_socket(incoming, Role::Server, Some(config)).await;
        socket(Ws { frames, outgoing }).await;
    });
    let mut switching = Response::new(axum::body::Body::empty());
    *switching.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
    let headers = switching.headers_mut();
    headers.insert(header::CONNECTION, HeaderValue::from_static("upgrade"));
    headers.insert(header::UPGRADE, HeaderValue::from_static("websocket"));
    headers.insert(header::SEC_WEBSOCKET_ACCEPT, accept);
    switching
}

/// What tungstenite reads the client's frames from. The frames it
/// writes itself (the Pong that answers a Ping) go to the writer's queue
/// once the session has one, and are dropped when that queue is full (a
/// client that far behind is being closed).
pub(crate) struct Incoming {
    read: ReadHalf<TokioIo<Upgraded>>,
    pub(super) replies: Option<queue::Sender<Out>>,
}

impl AsyncRead for Incoming {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.read).poll_read(cx, buf)
    }
}

impl AsyncWrite for Incoming {
    fn poll_write(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        if let Some(replies) = &self.replies {
            let _ = replies.try_send(Out::Reply(Bytes::copy_from_slice(buf)));
        }
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

/// `426 Upgrade Required`, saying why and which version to speak.
fn upgrade_required(why: String) -> Response {
    let mut refused =
        ApiError::new(StatusCode::UPGRADE_REQUIRED, "websocket-expected", why).into_response();
    let headers = refused.headers_mut();
    headers.insert(header::UPGRADE, HeaderValue::from_static("websocket"));
    headers.insert(
        header::SEC_WEBSOCKET_VERSION,
        HeaderValue::from_static("13"),
    );
    refused
}

/// `Sec-WebSocket-Accept` for a valid handshake (RFC 6455 §4.2.1), or what
/// is wrong with it.
fn accept_key(headers: &HeaderMap, path: &str) -> Result<HeaderValue, String> {
    let has_token = |name: header::HeaderName, token: &str| {
        headers.get_all(name).iter().any(|v| {
            v.to_str()
                .is_ok_and(|v| v.split(',').any(|t| t.trim().eq_ignore_ascii_case(token)))
        })
    };
    if !has_token(header::UPGRADE, "websocket") || !has_token(header::CONNECTION, "upgrade") {
        return Err(format!(
            "GET {path} is a WebSocket: send Upgrade: websocket and Connection: Upgrade"
        ));
    }
    if headers
        .get(header::SEC_WEBSOCKET_VERSION)
        .is_none_or(|v| v.as_bytes() != b"13")
    {
        return Err("the WebSocket version must be 13 (Sec-WebSocket-Version: 13)".into());
    }
    let key = headers
        .get(header::SEC_WEBSOCKET_KEY)
        .filter(|k| !k.is_empty())
        .ok_or("a WebSocket handshake needs a Sec-WebSocket-Key")?;
    let accept = tungstenite::handshake::derive_accept_key(key.as_bytes());
    HeaderValue::from_str(&accept).map_err(|_| "a Sec-WebSocket-Key must be base64".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_handshake_without_its_headers_is_refused_with_the_reason() {
        let mut headers = HeaderMap::new();
        let why = |h: &HeaderMap| accept_key(h, "/app/k").unwrap_err();
        assert!(why(&headers).contains("GET /app/k is a WebSocket"));
        headers.insert(header::UPGRADE, HeaderValue::from_static("WebSocket"));
        headers.insert(
            header::CONNECTION,
            HeaderValue::from_static("keep-alive, Upgrade"),
        );
        assert!(why(&headers).contains("version must be 13"));
        headers.insert(
            header::SEC_WEBSOCKET_VERSION,
            HeaderValue::from_static("13"),
        );
        assert!(why(&headers).contains("Sec-WebSocket-Key"));
        // RFC 6455's example.
        headers.insert(
            header::SEC_WEBSOCKET_KEY,
            HeaderValue::from_static("dGhlIHNhbXBsZSBub25jZQ=="),
        );
        assert_eq!(
            accept_key(&headers, "/v1/ws").unwrap(),
            "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="
        );
    }
}
