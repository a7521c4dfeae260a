//! Signing a socket in as a user (`pusher:signin`) and its Watchlist.
//!
//! A signed-in socket is subscribed to `#server-to-user-{id}`, is known to
//! `terminate_connections`, and is a live connection of its user in the
//! space `pusher-users:{app_id}`, so herenow's watch sees it online. The
//! `watchlist` is watched "anywhere" with herenow's watch
//! (`crate::watch`), sent as `pusher_internal:watchlist_events`.

use std::collections::HashMap;

use herenow_core::{MemberId, MemberKey, Metadata, SpaceName};
use serde_json::json;
use tokio::time::timeout;

use super::super::USER_CHANNEL;
use super::{LiveMembership, Session, close};
use crate::protocol::dto::StatusDto;
use crate::pusher::frames::{self, Incoming};
use crate::watch::WatchScope;
use crate::watch::registry::Note;
use crate::watch::shapes::WatchedUser;
use crate::watch::{Out as WatchOut, Policy, Watching};

/// Largest `user_data`, in bytes.
pub(crate) const MAX_USER_DATA: usize = 16 * 1024;

/// Most users one watchlist names (Pusher's bound).
pub(crate) const MAX_WATCHLIST: usize = 100;

/// The user a socket signed in as.
pub(in crate::pusher) struct SignedIn {
    /// `#server-to-user-{id}`.
    pub(super) channel: String,
    /// Its live connection in `pusher-users:{app_id}`.
    pub(super) membership: Option<LiveMembership>,
}

/// A signed-in socket's watchlist: herenow's watch, and what was last
/// shown of each user (online or not).
pub(in crate::pusher) struct Watchlist {
    watching: Watching,
    online: HashMap<MemberId, bool>,
}

impl Watchlist {
    /// Notes `user`'s state; adds its id to `on` or `off` when that
    /// changes what was shown.
    fn note(&mut self, user: WatchedUser, on: &mut Vec<String>, off: &mut Vec<String>) {
        let online = user.status != StatusDto::Offline;
        if self.online.insert(user.id.clone(), online) != Some(online) {
            let list = if online { on } else { off };
            list.push(user.id.as_str().to_owned());
        }
    }
}

/// The watchlist's next note; never, without a watchlist.
pub(super) async fn next_note(w: &mut Option<Watchlist>) -> Option<Note> {
    match w {
        Some(w) => w.watching.next().await,
        None => std::future::pending().await,
    }
}

impl Session {
    /// `pusher:signin`.
    pub(super) async fn signin(&mut self, msg: &Incoming) {
        let Some(data) = self.data_of::<frames::Signin>(msg, "auth and user_data") else {
            return;
        };
        if self.signed_in.is_some() {
            self.reject("this socket is signed in already");
            return;
        }
        if !self.user_authorized(&data) {
            self.reply(frames::error(
                Some(close::UNAUTHORIZED),
                "Invalid signature: the connection is unauthorized",
            ));
            self.close(close::UNAUTHORIZED, "Invalid signature");
            return;
        }
        let user = match checked_user(&data.user_data) {
            Ok(user) => user,
            Err(why) => {
                self.reject(&why);
                return;
            }
        };
        let membership = match self.attach_user(&user).await {
            Ok(p) => p,
            Err(why) => {
                self.reject(&why);
                return;
            }
        };
        let channel = format!("{USER_CHANNEL}{}", user.id.as_str());
        self.pusher
            .channels
            .join(&self.app_id, &channel, self.number, self.subscriber());
        self.pusher.sockets.sign_in(self.number, user.id.as_str());
        self.signed_in = Some(SignedIn {
            channel,
            membership,
        });
        let answer = json!({ "user_data": data.user_data }).to_string();
        self.reply(frames::event("pusher:signin_success", None, &answer));
        if !user.watchlist.is_empty() {
            self.open_watchlist(user.watchlist).await;
        }
    }

    /// Whether `auth` is `key:HMAC-SHA256(secret, socket_id::user::user_data)`.
    fn user_authorized(&self, data: &frames::Signin) -> bool {
        let message = format!("{}::user::{}", self.socket_id, data.user_data);
        self.signs(&data.auth, &message)
    }

    /// The user's live connection in `pusher-users:{app_id}`.
    async fn attach_user(&self, user: &User) -> Result<Option<LiveMembership>, String> {
        let Ok(space) = SpaceName::new(&format!("pusher-users:{}", self.app.id)) else {
            return Ok(None);
        };
        let p = LiveMembership {
            space,
            member: MemberKey::user(user.id.clone()),
            meta: user.info.clone(),
            conn: self.conn.clone(),
        };
        self.attach(&p)
            .await
            .map_err(|e| format!("the sign-in could not be recorded: {e}"))?;
        Ok(Some(p))
    }

    /// Watches `users` and sends their state now.
    async fn open_watchlist(&mut self, users: Vec<MemberId>) {
        let hub = self.state.watch().clone();
        let policy = Policy {
            owner: None,
            friends_only: false,
            spaces: None,
        };
        let wait = self.state.request_timeout();
        let opened = timeout(wait, async {
            let mut w = Watching::open(&hub, WatchScope::Anywhere, policy).await?;
            let states = w.watch(users, false).await?;
            Ok::<_, crate::watch::WatchError>((w, states))
        })
        .await;
        let Ok(Ok((watching, states))) = opened else {
            self.reject("the watchlist could not be followed; sign in again later");
            return;
        };
        let mut list = Watchlist {
            watching,
            online: HashMap::new(),
        };
        let (mut on, mut off) = (Vec::new(), Vec::new());
        for s in states {
            list.note(s, &mut on, &mut off);
        }
        self.watchlist = Some(list);
        self.send_watch_events(&on, &off);
    }

    /// A note of the watchlist's watch: the users whose online state
    /// changed.
    pub(super) async fn on_watch_note(&mut self, note: Note) {
        let wait = self.state.request_timeout();
        let Some(list) = self.watchlist.as_mut() else {
            return;
        };
        let outs = match timeout(wait, list.watching.on_note(note)).await {
            Ok(Ok(outs)) => outs,
            _ => {
                // What the client sees can no longer be kept right.
                self.close(close::OVER_CAPACITY, "the watchlist could not be read");
                return;
            }
        };
        let (mut on, mut off) = (Vec::new(), Vec::new());
        for out in outs {
            match out {
                WatchOut::Status(u) => list.note(u, &mut on, &mut off),
                WatchOut::Added(users) | WatchOut::Resync(users) => {
                    for u in users {
                        list.note(u, &mut on, &mut off);
                    }
                }
                WatchOut::Unwatched(_) => {}
            }
        }
        self.send_watch_events(&on, &off);
    }

    /// `pusher_internal:watchlist_events` with the users now online and
    /// offline; nothing when both are empty.
    fn send_watch_events(&mut self, on: &[String], off: &[String]) {
        let mut events = Vec::new();
        if !on.is_empty() {
            events.push(json!({ "name": "online", "user_ids": on }));
        }
        if !off.is_empty() {
            events.push(json!({ "name": "offline", "user_ids": off }));
        }
        if events.is_empty() {
            return;
        }
        let data = json!({ "events": events }).to_string();
        self.reply(frames::event(
            "pusher_internal:watchlist_events",
            None,
            &data,
        ));
    }
}

/// `user_data` checked: its id, `user_info` and watchlist.
struct User {
    id: MemberId,
    info: Option<Metadata>,
    watchlist: Vec<MemberId>,
}

/// Reads `user_data`, or says why it cannot be used.
fn checked_user(user_data: &str) -> Result<User, String> {
    if user_data.len() > MAX_USER_DATA {
        return Err(format!("user_data is larger than {MAX_USER_DATA} bytes"));
    }
    let raw = frames::user_data(user_data).ok_or(
        "user_data must be a JSON object with a string id, an optional user_info object and an optional watchlist of string ids",
    )?;
    let id = MemberId::new(&raw.id)
        .map_err(|_| "the user id must be 1 to 256 bytes without control characters")?;
    let info = match raw.user_info {
        None => None,
        Some(info) => Some(Metadata::from_json(info.get()).map_err(|e| match e {
            herenow_core::InvalidInput::MetaTooLarge { .. } => {
                "user_info is larger than 1 KiB".to_owned()
            }
            _ => "user_info must be a JSON object".to_owned(),
        })?),
    };
    if raw.watchlist.len() > MAX_WATCHLIST {
        return Err(format!(
            "a watchlist names at most {MAX_WATCHLIST} users; this one {}",
            raw.watchlist.len()
        ));
    }
    let mut watchlist: Vec<MemberId> = Vec::with_capacity(raw.watchlist.len());
    for u in &raw.watchlist {
        let u = MemberId::new(u).map_err(|_| {
            "a watchlist's ids are 1 to 256 bytes without control characters".to_owned()
        })?;
        if !watchlist.contains(&u) {
            watchlist.push(u);
        }
    }
    Ok(User {
        id,
        info,
        watchlist,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_data_is_checked() {
        let u =
            checked_user(r#"{"id":"7","user_info":{"n":1},"watchlist":["a","b","a"]}"#).unwrap();
        assert_eq!(u.id.as_str(), "7");
        assert_eq!(u.watchlist.len(), 2);
        assert!(u.info.is_some());
        for bad in [
            "[]",
            r#"{"id":7}"#,
            r#"{"id":""}"#,
            r#"{"id":"7","user_info":[1]}"#,
            r#"{"id":"7","watchlist":[1]}"#,
            r#"{"id":"7","watchlist":"a"}"#,
        ] {
            assert!(checked_user(bad).is_err(), "{bad}");
        }
        let long: Vec<String> = (0..=MAX_WATCHLIST).map(|i| format!("u{i}")).collect();
        let data = json!({ "id": "7", "watchlist": long }).to_string();
        assert!(checked_user(&data).is_err());
        let info = json!({ "id": "7", "user_info": { "x": "y".repeat(2000) } }).to_string();
        assert!(checked_user(&info).is_err());
        assert!(checked_user(&" ".repeat(MAX_USER_DATA + 1)).is_err());
    }
}
