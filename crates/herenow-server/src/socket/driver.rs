//! The loop every socket runs, whatever its protocol: it reads frames,
//! keeps the liveness probe, fires the protocol's own deadline, wakes the
//! protocol for what its subscriptions bring, and stops at shutdown,
//! when the protocol decides a close, or when the client goes.
//!
//! A protocol is a [`Protocol`]: it parses its messages, writes its
//! frames (through its [`Inlet`](super::Inlet)) and says what its own
//! timers and sources are; this loop owns the order in which they are
//! served. Everything it holds lives as long as the socket, so it is
//! small: one timer serves the protocol's deadline and the probe.

use std::future::Future;

use futures::StreamExt;
use tokio::time::{Instant, sleep_until};
use tokio_util::sync::CancellationToken;
use tungstenite::Message;

use super::Frames;
use super::hub::Liveness;

/// One protocol on a socket: what the [loop](drive) asks of it.
pub(crate) trait Protocol {
    /// What the protocol's own sources ([`wake`](Self::wake)) bring.
    type Wake;

    /// Whether the session is over: a close was decided, or the writer
    /// is gone.
    fn is_closing(&self) -> bool;

    /// The protocol's next deadline of its own (a hello due, an idle
    /// limit, a refresh), if any.
    fn deadline(&self) -> Option<Instant>;

    /// [`deadline`](Self::deadline) has come.
    fn on_deadline(&mut self, now: Instant) -> impl Future<Output = ()>;

    /// The server shuts down: decide the close that sends the client to
    /// another server.
    fn shutdown(&mut self);

    /// The socket has been silent for the ping interval: ask whether the
    /// client is there, in the protocol's way.
    fn ping(&mut self);

    /// Pinged, and nothing came within the pong wait: decide the close.
    fn no_pong(&mut self);

    /// A text frame: one client message.
    fn on_text(&mut self, text: &str) -> impl Future<Output = ()>;

    /// A binary frame, which neither protocol accepts.
    fn on_binary(&mut self);

    /// A read that failed because of what the client sent: close with
    /// `code` (the WebSocket's own, `1002`, `1007` or `1009`).
    fn on_bad_frame(&mut self, code: u16, reason: &'static str);

    /// The next thing the protocol's own sources bring (subscriptions,
    /// a watch, a close asked from elsewhere); pending forever when it
    /// has none. Dropped whenever another branch wins, so cancel-safe.
    fn wake(&mut self) -> impl Future<Output = Self::Wake>;

    /// Acts on what [`wake`](Self::wake) brought.
    fn on_wake(&mut self, wake: Self::Wake) -> impl Future<Output = ()>;
}

/// How the loop ended, for the protocol's goodbye rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ended {
    /// The client sent a close frame, with this code if it gave one.
    ClientClosed(Option<u16>),
    /// The connection ended under it (no close frame).
    Vanished,
    /// The server or the protocol decided the close.
    Closed,
}

/// Runs `protocol` on `stream` until the session is over.
pub(crate) async fn drive<P: Protocol>(
    protocol: &mut P,
    stream: &mut Frames,
    liveness: Liveness,
    shutdown: &CancellationToken,
) -> Ended {
    let mut probe = Probe::new(liveness, Instant::now());
    // Made once and polled again on each turn: the timer is reset only
    // when its deadline moves.
    let cancelled = shutdown.cancelled();
    let timer = sleep_until(probe.deadline().0);
    tokio::pin!(cancelled, timer);
    while !protocol.is_closing() {
        let (at, due) = earliest(protocol.deadline(), probe.deadline());
        if timer.deadline() != at {
            timer.as_mut().reset(at);
        }
        tokio::select! {
            biased;
            () = &mut cancelled => protocol.shutdown(),
            () = &mut timer => {
                let now = Instant::now();
                match due {
                    Due::Own => protocol.on_deadline(now).await,
                    Due::Ping => {
                        probe.pinged(now);
                        protocol.ping();
                    }
                    Due::NoPong => protocol.no_pong(),
                }
            }
            frame = stream.next() => {
                // Any frame, pongs included, says the client is there.
                probe.heard(Instant::now());
                match frame {
                    Some(Ok(Message::Text(text))) => protocol.on_text(text.as_str()).await,
                    Some(Ok(Message::Binary(_))) => protocol.on_binary(),
                    // Pings are answered by the WebSocket layer.
                    Some(Ok(Message::Ping(_) | Message::Pong(_) | Message::Frame(_))) => {}
                    Some(Ok(Message::Close(frame))) => {
                        return Ended::ClientClosed(frame.map(|f| u16::from(f.code)));
                    }
                    None => return Ended::Vanished,
                    Some(Err(e)) => {
                        if let Some((code, reason)) = bad_frame(&e) {
                            protocol.on_bad_frame(code, reason);
                            return Ended::Closed;
                        }
                        return Ended::Vanished;
                    }
                }
            }
            wake = protocol.wake() => protocol.on_wake(wake).await,
        }
    }
    Ended::Closed
}

/// Which deadline the timer waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Due {
    Own,
    Ping,
    NoPong,
}

/// The earlier of the protocol's deadline and the probe's; on a tie the
/// protocol's (a ping due with a close is not worth sending).
fn earliest(own: Option<Instant>, probe: (Instant, Due)) -> (Instant, Due) {
    match own {
        Some(at) if at <= probe.0 => (at, Due::Own),
        _ => probe,
    }
}

/// The liveness probe: a ping after the ping interval without any frame
/// from the client, and the close a pong wait after an unanswered ping.
#[derive(Debug)]
struct Probe {
    liveness: Liveness,
    /// The last frame of any kind.
    heard: Instant,
    /// When the server pinged, if nothing came since.
    pinged: Option<Instant>,
}

impl Probe {
    fn new(liveness: Liveness, now: Instant) -> Self {
        Self {
            liveness,
            heard: now,
            pinged: None,
        }
    }

    fn deadline(&self) -> (Instant, Due) {
        match self.pinged {
            Some(at) => (at + self.liveness.pong_wait, Due::NoPong),
            None => (self.heard + self.liveness.ping_interval, Due::Ping),
        }
    }

    fn heard(&mut self, now: Instant) {
        self.heard = now;
        self.pinged = None;
    }

    fn pinged(&mut self, now: Instant) {
        self.pinged = Some(now);
    }
}

/// The close for a read that failed because of what the client sent: a
/// frame or message over the limit (`1009`), text that is not UTF-8
/// (`1007`), a broken frame (`1002`). `None` when the connection itself
/// failed: there is nobody left to tell.
fn bad_frame(e: &tungstenite::Error) -> Option<(u16, &'static str)> {
    match e {
        tungstenite::Error::Capacity(_) => Some((1009, "a message over the size limit")),
        tungstenite::Error::Utf8(_) => Some((1007, "a text frame that is not UTF-8")),
        tungstenite::Error::Protocol(_) => Some((1002, "a WebSocket protocol error")),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn a_socket_is_pinged_after_the_interval_and_closed_after_the_wait() {
        let s = Duration::from_secs;
        let t0 = Instant::now();
        let mut probe = Probe::new(
            Liveness {
                ping_interval: s(20),
                pong_wait: s(10),
            },
            t0,
        );
        assert_eq!(probe.deadline(), (t0 + s(20), Due::Ping));
        probe.heard(t0 + s(5));
        assert_eq!(probe.deadline(), (t0 + s(25), Due::Ping));
        probe.pinged(t0 + s(25));
        assert_eq!(probe.deadline(), (t0 + s(35), Due::NoPong));
        // Anything at all answers the ping.
        probe.heard(t0 + s(26));
        assert_eq!(probe.deadline(), (t0 + s(46), Due::Ping));
    }

    #[test]
    fn the_protocols_deadline_wins_a_tie_with_the_probe() {
        let t0 = Instant::now();
        let later = t0 + Duration::from_secs(1);
        assert_eq!(earliest(None, (t0, Due::Ping)), (t0, Due::Ping));
        assert_eq!(earliest(Some(t0), (t0, Due::NoPong)), (t0, Due::Own));
        assert_eq!(earliest(Some(later), (t0, Due::Ping)), (t0, Due::Ping));
        assert_eq!(earliest(Some(t0), (later, Due::Ping)), (t0, Due::Own));
    }
}
