//! The WebSocket under a Pusher socket: the upgrade, and the writer.
//!
//! A presence channel's roster (`pusher_internal:subscription_succeeded`)
//! grows with the channel, and tungstenite's write buffer keeps the
//! capacity of the largest frame it ever held: sent as one frame, it would
//! stay with every socket of a large channel for the socket's life
//! (BENCHMARKS.md, "The Pusher endpoint against Sockudo"). The writer sends a message longer than [`FRAGMENT`] in
//! fragments of that size (RFC 6455 §5.4: one message, which clients
//! reassemble), so the buffer stays under [`WRITE_BUFFER`] plus one
//! fragment. axum's `WebSocket` cannot send a fragment, so the upgrade is
//! done here, with tungstenite's stream over hyper's upgraded connection.
//!
//! The writer also sends everything queued before it flushes once: a
//! burst of member events (a channel filling up) is a few writes of up to
//! [`WRITE_BUFFER`], not one system call per event.

use std::future::Future;
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::Request;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use futures::SinkExt;
use futures::stream::SplitSink;
use hyper::upgrade::{OnUpgrade, Upgraded};
use hyper_util::rt::TokioIo;
use tokio_tungstenite::WebSocketStream;
use tungstenite::Message;
use tungstenite::protocol::frame::coding::{CloseCode, Data, OpCode};
use tungstenite::protocol::frame::{CloseFrame, Frame};
use tungstenite::protocol::{Role, WebSocketConfig};

use crate::problem::ApiError;
use crate::pusher_hub::Out;
use crate::queue::Receiver;

/// A Pusher socket's WebSocket.
pub(super) type Ws = WebSocketStream<TokioIo<Upgraded>>;

/// The largest fragment of a message the writer sends.
pub(super) const FRAGMENT: usize = 4 * 1024;

/// What the writer gathers before it writes to the socket.
const WRITE_BUFFER: usize = 4 * 1024;

/// How many bytes the socket reads at a time: a client's messages are a
/// few hundred bytes; a larger one grows the buffer (up to `max_frame`).
const READ_BUFFER: usize = 512;

/// Answers a WebSocket handshake with `101 Switching Protocols` and runs
/// `socket` on the connection once upgraded; anything else gets a `426`
/// naming what the handshake lacks. `max_frame` bounds what the client
/// may send, in one frame and in one message.
pub(super) fn upgrade<F, Fut>(mut request: Request, max_frame: usize, socket: F) -> Response
where
    F: FnOnce(Ws) -> Fut + Send + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    let accept = match accept_key(request.headers()) {
        Ok(accept) => accept,
        Err(why) => {
            let mut refused =
                ApiError::new(StatusCode::UPGRADE_REQUIRED, "websocket-expected", why)
                    .into_response();
            let headers = refused.headers_mut();
            headers.insert(header::UPGRADE, HeaderValue::from_static("websocket"));
            headers.insert(
                header::SEC_WEBSOCKET_VERSION,
                HeaderValue::from_static("13"),
            );
            return refused;
        }
    };
    let Some(on_upgrade) = request.extensions_mut().remove::<OnUpgrade>() else {
        return ApiError::new(
            StatusCode::UPGRADE_REQUIRED,
            "websocket-expected",
            "this connection cannot be upgraded to a WebSocket (HTTP/1.1 is needed)",
        )
        .into_response();
    };
    let config = WebSocketConfig::default()
        .read_buffer_size(READ_BUFFER)
        .write_buffer_size(WRITE_BUFFER)
        .max_message_size(Some(max_frame))
        .max_frame_size(Some(max_frame));
    tokio::spawn(async move {
        let Ok(upgraded) = on_upgrade.await else {
            return;
        };
        let ws =
            WebSocketStream::from_raw_socket(TokioIo::new(upgraded), Role::Server, Some(config))
                .await;
        socket(ws).await;
    });
    let mut switching = Response::new(axum::body::Body::empty());
    *switching.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
    let headers = switching.headers_mut();
    headers.insert(header::CONNECTION, HeaderValue::from_static("upgrade"));
    headers.insert(header::UPGRADE, HeaderValue::from_static("websocket"));
    headers.insert(header::SEC_WEBSOCKET_ACCEPT, accept);
    switching
}

/// `Sec-WebSocket-Accept` for a valid handshake (RFC 6455 §4.2.1), or what
/// is wrong with it.
fn accept_key(headers: &HeaderMap) -> Result<HeaderValue, &'static str> {
    let has_token = |name: header::HeaderName, token: &str| {
        headers.get_all(name).iter().any(|v| {
            v.to_str()
                .is_ok_and(|v| v.split(',').any(|t| t.trim().eq_ignore_ascii_case(token)))
        })
    };
    if !has_token(header::UPGRADE, "websocket") || !has_token(header::CONNECTION, "upgrade") {
        return Err(
            "GET /app/{key} is a WebSocket: send Upgrade: websocket and Connection: Upgrade",
        );
    }
    if headers
        .get(header::SEC_WEBSOCKET_VERSION)
        .is_none_or(|v| v.as_bytes() != b"13")
    {
        return Err("the WebSocket version must be 13 (Sec-WebSocket-Version: 13)");
    }
    let key = headers
        .get(header::SEC_WEBSOCKET_KEY)
        .filter(|k| !k.is_empty())
        .ok_or("a WebSocket handshake needs a Sec-WebSocket-Key")?;
    let accept = tungstenite::handshake::derive_accept_key(key.as_bytes());
    HeaderValue::from_str(&accept).map_err(|_| "a Sec-WebSocket-Key must be base64")
}

/// Tells the client why, then closes: one message and the close frame.
pub(super) async fn refuse(ws: &mut Ws, error: Arc<str>, code: u16, reason: &str) {
    let _ = ws.feed(Message::Text((*error).into())).await;
    let _ = ws.send(close_message(code, reason)).await;
}

/// The writer: sends what the session queued, in order, flushing when the
/// queue is empty, until the close or until the session is gone.
pub(super) async fn write(mut sink: SplitSink<Ws, Message>, mut rx: Receiver<Out>) {
    while let Some(first) = rx.recv().await {
        let mut next = Some(first);
        while let Some(out) = next {
            match out {
                Out::Text(text) => {
                    for frame in text_frames(text) {
                        if sink.feed(Message::Frame(frame)).await.is_err() {
                            return;
                        }
                    }
                }
                Out::Close(code, reason) => {
                    let _ = sink.send(close_message(code, &reason)).await;
                    return;
                }
            }
            next = rx.try_recv();
        }
        if sink.flush().await.is_err() {
            return;
        }
    }
    let _ = sink.close().await;
}

/// A close message; its reason cut to what the protocol allows.
fn close_message(code: u16, reason: &str) -> Message {
    let mut end = reason.len().min(123);
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
    fn a_handshake_without_its_headers_is_refused_with_the_reason() {
        let mut headers = HeaderMap::new();
        assert!(
            accept_key(&headers)
                .unwrap_err()
                .contains("Upgrade: websocket")
        );
        headers.insert(header::UPGRADE, HeaderValue::from_static("WebSocket"));
        headers.insert(
            header::CONNECTION,
            HeaderValue::from_static("keep-alive, Upgrade"),
        );
        assert!(
            accept_key(&headers)
                .unwrap_err()
                .contains("version must be 13")
        );
        headers.insert(
            header::SEC_WEBSOCKET_VERSION,
            HeaderValue::from_static("13"),
        );
        assert!(
            accept_key(&headers)
                .unwrap_err()
                .contains("Sec-WebSocket-Key")
        );
        // RFC 6455's example.
        headers.insert(
            header::SEC_WEBSOCKET_KEY,
            HeaderValue::from_static("dGhlIHNhbXBsZSBub25jZQ=="),
        );
        assert_eq!(
            accept_key(&headers).unwrap(),
            "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="
        );
    }
}
