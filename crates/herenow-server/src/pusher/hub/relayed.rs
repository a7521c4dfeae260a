//! What the Pusher side relays between the servers sharing a store
//! ([`herenow_core::Relay`], topic [`TOPIC`]), and how each server
//! delivers it to its own sockets. Every server, the one that took it
//! included, delivers from its own feed: nothing is delivered twice and
//! nothing depends on which server was asked.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::{Pusher, frames};

/// The relay topic of Pusher messages.
pub(crate) const TOPIC: &str = "pusher";

/// The close code of a socket whose server may have missed relayed
/// messages.
pub(crate) const LAG_CLOSE: (u16, &str) = (4100, "events may have been missed: reconnect");

/// The close code of a socket whose user's connections were terminated
/// (`4009`: do not reconnect on its own).
pub(crate) const TERMINATED: (u16, &str) = (4009, "Connection terminated by the app");

/// One relayed message.
#[derive(Debug, Serialize, Deserialize, PartialEq)]
#[serde(tag = "t", rename_all = "snake_case")]
pub(crate) enum Relayed {
    /// An event of the HTTP API: `name` and `data` (the string clients
    /// get) to each of `channels`, but not to socket `except`.
    Event {
        app: String,
        channels: Vec<String>,
        name: String,
        data: String,
        except: Option<String>,
    },
    /// A frame written once (a client event) to `channel`, but not to
    /// the sender `except`.
    Frame {
        app: String,
        channel: String,
        text: String,
        except: Option<String>,
    },
    /// Close every socket of `app` signed in as `user`.
    Terminate { app: String, user: String },
}

impl Relayed {
    /// The bytes relayed.
    pub(crate) fn encode(&self) -> Vec<u8> {
        serde_json::to_vec(self).unwrap_or_else(|_| unreachable!("strings serialize"))
    }

    /// A relayed message, or `None` for bytes that are not one.
    pub(crate) fn decode(bytes: &[u8]) -> Option<Self> {
        serde_json::from_slice(bytes).ok()
    }
}

impl Pusher {
    /// Delivers a relayed message to this server's sockets.
    pub(crate) fn deliver(&self, msg: Relayed) {
        match msg {
            Relayed::Event {
                app,
                channels,
                name,
                data,
                except,
            } => {
                let app: Arc<str> = Arc::from(app);
                for channel in &channels {
                    let text = frames::event(&name, Some(channel), &data);
                    self.channels
                        .publish(&app, channel, &text, except.as_deref());
                }
            }
            Relayed::Frame {
                app,
                channel,
                text,
                except,
            } => {
                let (app, text): (Arc<str>, Arc<str>) = (app.into(), text.into());
                self.channels
                    .publish(&app, &channel, &text, except.as_deref());
            }
            Relayed::Terminate { app, user } => {
                let (code, reason) = TERMINATED;
                self.sockets.end_user(&app, &user, code, reason);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_round_trip() {
        let m = Relayed::Event {
            app: "1".into(),
            channels: vec!["a".into(), "#server-to-user-7".into()],
            name: "e".into(),
            data: "{\"x\":1}".into(),
            except: Some("1.2".into()),
        };
        assert_eq!(Relayed::decode(&m.encode()), Some(m));
        let t = Relayed::Terminate {
            app: "1".into(),
            user: "7".into(),
        };
        assert_eq!(Relayed::decode(&t.encode()), Some(t));
        assert_eq!(Relayed::decode(b"{\"t\":\"other\"}"), None);
    }
}
