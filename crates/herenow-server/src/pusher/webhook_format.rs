//! Webhooks in Pusher's format (`--pusher-webhook`): what an app on
//! Pusher's server libraries reads with `webhook(...).isValid()` and
//! `getEvents()`; the events and their bodies are docs/PUSHER.md's
//! "Webhooks in Pusher's format".
//!
//! Every event comes from the store's outbox like every webhook. A
//! channel's `channel_occupied` / `channel_vacated` is its space's
//! `occupied` / `vacated` for a presence channel, and the `join` / `leave`
//! of the guest named by the channel in the app's occupancy space
//! ([`occupancy_space`]) for another; guests are not Pusher members. A
//! presence channel of the first app is the space of the same name,
//! another app's is `ID:` and the name (`PusherApp::space_prefix`). A
//! client event is a message ([`OutboxKind::Message`]) whose body is its
//! `client_event` JSON, kept by the sender's server in the presence
//! channel's space, or in the app's occupancy space for a private channel.

use herenow_core::outbox::{OutboxEvent, OutboxKind};
use herenow_core::{MemberKind, SpaceName};
use serde::Serialize;
use serde_json::value::RawValue;

use crate::webhooks::Webhooks;

/// What begins every presence channel's name (and so its space's).
pub const PRESENCE_PREFIX: &str = "presence-";

/// What begins the name of an app's occupancy space.
pub const OCCUPANCY_PREFIX: &str = "pusher-channels:";

/// The space that holds app `app_id`'s occupied public, `private-` and
/// `private-encrypted-` channels: one guest per channel, named by it, with
/// a live connection per server holding it (an app id is 1 to 64 letters,
/// digits, `-` and `_`, so the name is a valid space name), its metadata
/// the server's count of subscriptions (`pusher::hub`'s occupancy).
pub fn occupancy_space(app_id: &str) -> String {
    format!("{OCCUPANCY_PREFIX}{app_id}")
}

#[derive(Serialize)]
struct ChannelEvent<'a> {
    name: &'static str,
    channel: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    user_id: Option<&'a str>,
}

/// `event` as one of a Pusher body's `events`; `None` for what Pusher
/// does not tell (a space that is not a presence channel, a guest, an
/// `away`, the occupancy space's own occupancy).
pub fn event_json(event: &OutboxEvent) -> Option<Vec<u8>> {
    if event.kind == OutboxKind::Message {
        // A client event, kept in the form it is sent in.
        return event.body.as_ref().map(|b| b.as_bytes().to_vec());
    }
    let member = |kind: MemberKind| {
        let member = event.member.as_ref().filter(|m| m.kind == kind);
        member.map(|m| m.id.as_str())
    };
    let space = event.space.as_str();
    let (name, channel, user_id) = if space.starts_with(OCCUPANCY_PREFIX) {
        // Its guest's `join` is the channel named by the guest becoming
        // occupied, its `leave` vacated; nothing else.
        let channel = member(MemberKind::Guest)?;
        match event.kind {
            OutboxKind::Join => ("channel_occupied", channel, None),
            OutboxKind::Leave => ("channel_vacated", channel, None),
            _ => return None,
        }
    } else {
        // The first app's channel is its space's name; another app's
        // space is `ID:` and the channel (a channel name has no `:`);
        // endpoints get only their app's spaces.
        let channel = space.rsplit_once(':').map_or(space, |(_, channel)| channel);
        if !channel.starts_with(PRESENCE_PREFIX) {
            return None;
        }
        match event.kind {
            OutboxKind::Occupied => ("channel_occupied", channel, None),
            OutboxKind::Vacated => ("channel_vacated", channel, None),
            OutboxKind::Join => ("member_added", channel, Some(member(MemberKind::User)?)),
            OutboxKind::Leave => ("member_removed", channel, Some(member(MemberKind::User)?)),
            OutboxKind::Away | OutboxKind::Back | OutboxKind::Update | OutboxKind::Message => {
                return None;
            }
        }
    };
    let event = ChannelEvent {
        name,
        channel,
        user_id,
    };
    serde_json::to_vec(&event).ok()
}

/// A client event as a socket sent it.
#[derive(Clone, Copy, Debug)]
pub struct ClientEvent<'a> {
    /// The app whose socket sent it.
    pub app_id: &'a str,
    /// Its channel (`private-…` or `presence-…`).
    pub channel: &'a str,
    /// Its name (`client-…`).
    pub event: &'a str,
    /// Its data, as the socket wrote it.
    pub data: Option<&'a RawValue>,
    /// The sending socket.
    pub socket_id: &'a str,
    /// The sender's user on a presence channel.
    pub user_id: Option<&'a str>,
}

impl ClientEvent<'_> {
    /// Keeps it in the store's outbox when a `--pusher-webhook` of its app
    /// asks for client events (else nothing happens), so that one server
    /// delivers it once, after a restart too. It is a message of
    /// `presence`, the presence channel's space (in order with the
    /// channel's members), or of the app's occupancy space for a private
    /// channel.
    pub async fn keep_for(
        &self,
        hooks: &Webhooks,
        presence: Option<&SpaceName>,
    ) -> herenow_core::Result<()> {
        if !hooks.wants_client_events(self.app_id) {
            return Ok(());
        }
        let occupancy;
        let space = match presence {
            Some(space) => space,
            None => {
                occupancy = SpaceName::new(&occupancy_space(self.app_id))?;
                &occupancy
            }
        };
        let body = client_event_json(self);
        let body = std::str::from_utf8(&body).expect("serde_json writes UTF-8");
        hooks.keep_message(space, body).await
    }
}

#[derive(Serialize)]
struct ClientEventJson<'a> {
    name: &'static str,
    channel: &'a str,
    event: &'a str,
    data: String,
    socket_id: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    user_id: Option<&'a str>,
}

/// `client_event` as one of a Pusher body's `events`. Its `data` is a
/// string, as Pusher sends it: a string the client sent as is, anything
/// else as its JSON text.
pub fn client_event_json(e: &ClientEvent<'_>) -> Vec<u8> {
    let data = match e.data {
        None => String::new(),
        Some(raw) => {
            serde_json::from_str::<String>(raw.get()).unwrap_or_else(|_| raw.get().to_owned())
        }
    };
    serde_json::to_vec(&ClientEventJson {
        name: "client_event",
        channel: e.channel,
        event: e.event,
        data,
        socket_id: e.socket_id,
        user_id: e.user_id,
    })
    .unwrap_or_else(|_| b"{}".to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::webhooks::endpoint::PusherTarget;
    use crate::webhooks::sign::Signer;
    use crate::webhooks::wire::Batch;
    use herenow_core::{MemberId, MemberKey};
    use reqwest::Url;

    fn event(space: &str, kind: OutboxKind, member: Option<MemberKey>) -> OutboxEvent {
        let mut e = OutboxEvent::of_space("e".into(), 5, SpaceName::new(space).unwrap(), kind);
        e.member = member;
        e
    }

    /// Each event is written as its case says (`None`: not told).
    fn formats<const N: usize>(cases: [(OutboxEvent, Option<serde_json::Value>); N]) {
        for (e, want) in cases {
            let got = event_json(&e).map(|b| serde_json::from_slice(&b).unwrap());
            assert_eq!(got, want, "{e:?}");
        }
    }

    #[test]
    fn presence_spaces_events_become_pushers() {
        let ann = Some(MemberKey::user(MemberId::new("ann").unwrap()));
        let guest = Some(MemberKey::guest(MemberId::new("g1").unwrap()));
        let cases = [
            (
                event("presence-room", OutboxKind::Occupied, None),
                Some(serde_json::json!({"name":"channel_occupied","channel":"presence-room"})),
            ),
            (
                event("presence-room", OutboxKind::Vacated, None),
                Some(serde_json::json!({"name":"channel_vacated","channel":"presence-room"})),
            ),
            (
                event("presence-room", OutboxKind::Join, ann.clone()),
                Some(
                    serde_json::json!({"name":"member_added","channel":"presence-room","user_id":"ann"}),
                ),
            ),
            (
                event("presence-room", OutboxKind::Leave, ann.clone()),
                Some(
                    serde_json::json!({"name":"member_removed","channel":"presence-room","user_id":"ann"}),
                ),
            ),
            (event("presence-room", OutboxKind::Join, guest), None),
            (event("presence-room", OutboxKind::Away, ann.clone()), None),
            (
                event("presence-room", OutboxKind::Update, ann.clone()),
                None,
            ),
            (event("lobby", OutboxKind::Join, ann), None),
            (event("lobby", OutboxKind::Occupied, None), None),
        ];
        formats(cases);
    }

    #[test]
    fn occupancy_spaces_guests_are_public_and_private_channels() {
        let news = Some(MemberKey::guest(MemberId::new("news").unwrap()));
        let private = Some(MemberKey::guest(MemberId::new("private-a").unwrap()));
        let user = Some(MemberKey::user(MemberId::new("news").unwrap()));
        let cases = [
            (
                event("pusher-channels:1", OutboxKind::Join, news.clone()),
                Some(serde_json::json!({"name":"channel_occupied","channel":"news"})),
            ),
            (
                event("pusher-channels:1", OutboxKind::Leave, news.clone()),
                Some(serde_json::json!({"name":"channel_vacated","channel":"news"})),
            ),
            (
                event("pusher-channels:app-2", OutboxKind::Join, private.clone()),
                Some(serde_json::json!({"name":"channel_occupied","channel":"private-a"})),
            ),
            (
                event("pusher-channels:app-2", OutboxKind::Leave, private),
                Some(serde_json::json!({"name":"channel_vacated","channel":"private-a"})),
            ),
            (event("pusher-channels:1", OutboxKind::Occupied, None), None),
            (event("pusher-channels:1", OutboxKind::Vacated, None), None),
            (
                event("pusher-channels:1", OutboxKind::Away, news.clone()),
                None,
            ),
            (
                event("pusher-channels:1", OutboxKind::Back, news.clone()),
                None,
            ),
            (event("pusher-channels:1", OutboxKind::Update, news), None),
            // Only the socket side's guests, not a user herenow's API added.
            (event("pusher-channels:1", OutboxKind::Join, user), None),
        ];
        formats(cases);
        assert_eq!(occupancy_space("42"), "pusher-channels:42");
        assert!(SpaceName::new(&occupancy_space(&"a".repeat(64))).is_ok());
    }

    #[test]
    fn client_events_carry_their_data_as_a_string() {
        let object = RawValue::from_string(r#"{"typing":true}"#.into()).unwrap();
        let text = RawValue::from_string(r#""hi""#.into()).unwrap();
        let mut e = ClientEvent {
            app_id: "1",
            channel: "presence-room",
            event: "client-typing",
            data: Some(&object),
            socket_id: "1.2",
            user_id: Some("ann"),
        };
        let json = |e: &ClientEvent<'_>| -> serde_json::Value {
            serde_json::from_slice(&client_event_json(e)).unwrap()
        };
        assert_eq!(
            json(&e),
            serde_json::json!({"name":"client_event","channel":"presence-room",
            "event":"client-typing","data":"{\"typing\":true}","socket_id":"1.2","user_id":"ann"})
        );
        e.data = Some(&text);
        e.user_id = None;
        e.channel = "private-a";
        assert_eq!(
            json(&e),
            serde_json::json!({"name":"client_event","channel":"private-a",
            "event":"client-typing","data":"hi","socket_id":"1.2"})
        );
    }

    #[test]
    fn a_target_is_an_endpoint_signed_by_its_app() {
        let target = PusherTarget {
            app_id: "42".into(),
            key: "app-key".into(),
            secret: "app-secret-1".into(),
            url: Url::parse("http://hooks.example.com/pusher").unwrap(),
            client_events: true,
            space_prefix: String::new(),
            occupancy_space: occupancy_space("42"),
            format: event_json,
        };
        assert!(!format!("{target:?}").contains("app-secret-1"));
        let endpoint = target.endpoint(3);
        assert_eq!(endpoint.name, "pusher:3:42:hooks.example.com");
        assert_eq!(
            endpoint.filter.kinds(),
            ["join", "leave", "occupied", "vacated"]
        );
        let ann = Some(MemberKey::user(MemberId::new("ann").unwrap()));
        let joined = |space| event(space, OutboxKind::Join, ann.clone());
        assert!(endpoint.filter.wants(&joined("presence-a")));
        assert!(!endpoint.filter.wants(&joined("lobby")));
        // Another app's spaces are `ID:presence-…`: not this app's.
        assert!(!endpoint.filter.wants(&joined("7:presence-a")));
        let second = PusherTarget {
            app_id: "7".into(),
            space_prefix: "7:".into(),
            occupancy_space: occupancy_space("7"),
            ..target.clone()
        }
        .endpoint(4);
        assert!(second.filter.wants(&joined("7:presence-a")));
        assert!(!second.filter.wants(&joined("presence-a")));
        // Each app's occupancy space goes to its own endpoints only.
        let news = Some(MemberKey::guest(MemberId::new("news").unwrap()));
        let occupied = |space| event(space, OutboxKind::Join, news.clone());
        assert!(endpoint.filter.wants(&occupied("pusher-channels:42")));
        assert!(!endpoint.filter.wants(&occupied("pusher-channels:7")));
        assert!(!endpoint.filter.wants(&occupied("pusher-channels:420")));
        assert!(second.filter.wants(&occupied("pusher-channels:7")));
        assert!(!second.filter.wants(&occupied("pusher-channels:42")));
        assert_eq!(
            endpoint.filter.spaces_text().as_deref(),
            Some("presence-* pusher-channels:42")
        );
        let theirs = event_json(&event("7:presence-a", OutboxKind::Join, ann)).unwrap();
        assert_eq!(
            serde_json::from_slice::<serde_json::Value>(&theirs).unwrap(),
            serde_json::json!({"name":"member_added","channel":"presence-a","user_id":"ann"})
        );
        let one = event_json(&event("presence-a", OutboxKind::Occupied, None)).unwrap();
        let batch = Batch::for_signer(&endpoint.signer, [("e", one.as_slice())], 1_234);
        let body: serde_json::Value = serde_json::from_slice(&batch.body).unwrap();
        assert_eq!(
            body,
            serde_json::json!({"time_ms":1234,"events":[{"name":"channel_occupied","channel":"presence-a"}]})
        );
        let headers = batch.headers(&endpoint.signer, 1_234);
        let Signer::Pusher(signer) = &endpoint.signer else {
            panic!("a Pusher signer")
        };
        assert_eq!(
            headers,
            [
                ("x-pusher-key", "app-key".to_owned()),
                ("x-pusher-signature", signer.sign(&batch.body)),
            ]
        );
    }
}
