//! The messages of the Pusher protocol, as this server reads and writes
//! them: `{"event": ..., "channel": ..., "data": ...}`, where `data` is
//! a JSON string for the server's `pusher_internal:` and app events (as
//! Pusher sends them; pusher-js parses it again) and an object for
//! `pusher:error`.

use std::fmt::Write as _;
use std::sync::Arc;

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Value, json};

use crate::socket::{Pieces, PiecesWriter};

/// One message from a client.
#[derive(Debug, Deserialize)]
pub(crate) struct Incoming {
    /// `pusher:ping`, `pusher:subscribe`, `client-…`, …
    pub(crate) event: String,
    /// The channel of a client event.
    pub(crate) channel: Option<String>,
    /// The payload, kept as written (a client event's is relayed as is).
    pub(crate) data: Option<Box<RawValue>>,
}

/// Reads a text frame; `None` when it is not a message.
pub(crate) fn decode(text: &str) -> Option<Incoming> {
    serde_json::from_str(text).ok()
}

/// `pusher:subscribe`'s data.
#[derive(Debug, Deserialize)]
pub(crate) struct Subscribe {
    pub(crate) channel: String,
    /// `key:signature`, for private, encrypted and presence channels.
    pub(crate) auth: Option<String>,
    /// A presence channel's member, as a JSON string (it is signed as
    /// written).
    pub(crate) channel_data: Option<String>,
}

/// `pusher:unsubscribe`'s data.
#[derive(Debug, Deserialize)]
pub(crate) struct Unsubscribe {
    pub(crate) channel: String,
}

/// `pusher:signin`'s data.
#[derive(Debug, Deserialize)]
pub(crate) struct Signin {
    /// `key:signature`.
    pub(crate) auth: String,
    /// The user, as a JSON string (signed as written).
    pub(crate) user_data: String,
}

/// A signed-in user's `user_data`.
#[derive(Debug)]
pub(crate) struct UserData {
    /// `id`: a non-empty string.
    pub(crate) id: String,
    /// `user_info` as written, if any.
    pub(crate) user_info: Option<Box<RawValue>>,
    /// `watchlist`: user ids.
    pub(crate) watchlist: Vec<String>,
}

/// Reads `user_data`: an object with a non-empty string `id`, an
/// optional `user_info` and an optional `watchlist` of strings.
pub(crate) fn user_data(text: &str) -> Option<UserData> {
    #[derive(Deserialize)]
    struct Raw {
        id: String,
        user_info: Option<Box<RawValue>>,
        watchlist: Option<Vec<String>>,
    }
    let raw: Raw = object(text)?;
    if raw.id.is_empty() {
        return None;
    }
    Some(UserData {
        id: raw.id,
        user_info: raw.user_info.filter(|info| info.get() != "null"),
        watchlist: raw.watchlist.unwrap_or_default(),
    })
}

/// Reads `text` as a `T` if it is a JSON object (serde reads a struct
/// from an array too).
fn object<T: for<'de> Deserialize<'de>>(text: &str) -> Option<T> {
    let is_object = text.trim_start().starts_with('{');
    is_object.then(|| serde_json::from_str(text).ok())?
}

/// Reads a `data` given as an object or as a JSON string holding one
/// (clients send both).
pub(crate) fn data_of<T: for<'de> Deserialize<'de>>(raw: Option<&RawValue>) -> Option<T> {
    let raw = raw?.get();
    if raw.starts_with('"') {
        let inner: String = serde_json::from_str(raw).ok()?;
        serde_json::from_str(&inner).ok()
    } else {
        serde_json::from_str(raw).ok()
    }
}

/// A presence member, from `channel_data`.
#[derive(Debug)]
pub(crate) struct Member {
    /// `user_id`, as a string (a number is taken in its decimal form).
    pub(crate) user_id: String,
    /// `user_info` as written, if any.
    pub(crate) user_info: Option<Box<RawValue>>,
}

/// Reads `channel_data`: an object with a `user_id` (a non-empty string
/// or an integer) and an optional `user_info`.
pub(crate) fn member(channel_data: &str) -> Option<Member> {
    #[derive(Deserialize)]
    struct Raw {
        user_id: Value,
        user_info: Option<Box<RawValue>>,
    }
    let raw: Raw = object(channel_data)?;
    let user_id = match raw.user_id {
        Value::String(s) if !s.is_empty() => s,
        Value::Number(n) if n.is_i64() || n.is_u64() => n.to_string(),
        _ => return None,
    };
    Some(Member {
        user_id,
        user_info: raw.user_info.filter(|info| info.get() != "null"),
    })
}

/// `{"event", "channel", "data"}` with `data` a JSON string.
pub(crate) fn event(event: &str, channel: Option<&str>, data: &str) -> Arc<str> {
    let mut msg = json!({ "event": event, "data": data });
    if let Some(channel) = channel {
        msg["channel"] = channel.into();
    }
    Arc::from(msg.to_string())
}

/// A client event as relayed to the channel's other subscribers: its
/// data as the sender wrote it, and on a presence channel the sender's
/// `user_id`.
pub(crate) fn client_event(
    event: &str,
    channel: &str,
    data: Option<&RawValue>,
    user_id: Option<&str>,
) -> Arc<str> {
    let event = Value::from(event).to_string();
    let channel = Value::from(channel).to_string();
    let data = data.map_or("null", RawValue::get);
    let text = match user_id {
        Some(id) => {
            let id = Value::from(id).to_string();
            format!(r#"{{"event":{event},"channel":{channel},"data":{data},"user_id":{id}}}"#)
        }
        None => format!(r#"{{"event":{event},"channel":{channel},"data":{data}}}"#),
    };
    Arc::from(text)
}

/// `pusher:connection_established`.
pub(crate) fn connection_established(socket_id: &str, activity_timeout_s: u64) -> Arc<str> {
    let data = json!({ "socket_id": socket_id, "activity_timeout": activity_timeout_s });
    event("pusher:connection_established", None, &data.to_string())
}

/// `pusher_internal:subscription_succeeded` of a channel other than a
/// presence one.
pub(crate) fn subscribed(channel: &str) -> Arc<str> {
    event(
        "pusher_internal:subscription_succeeded",
        Some(channel),
        "{}",
    )
}

/// `pusher:error`, with a code or `null`.
pub(crate) fn error(code: Option<u16>, message: &str) -> Arc<str> {
    Arc::from(
        json!({ "event": "pusher:error", "data": { "code": code, "message": message } })
            .to_string(),
    )
}

/// `pusher:subscription_error` on `channel`.
pub(crate) fn subscription_error(
    channel: &str,
    kind: &str,
    message: &str,
    status: u16,
) -> Arc<str> {
    Arc::from(
        json!({
            "event": "pusher:subscription_error",
            "channel": channel,
            "data": { "type": kind, "error": message, "status": status },
        })
        .to_string(),
    )
}

/// `pusher:pong` / `pusher:ping`.
pub(crate) fn bare(event: &str) -> Arc<str> {
    Arc::from(json!({ "event": event, "data": {} }).to_string())
}

/// `pusher_internal:subscription_succeeded` of a presence channel: the
/// whole roster in one message, `members` each with its `user_info`,
/// each id once, in the order given (the `ids` array's).
///
/// Written into [`Pieces`], `data` escaped as it goes, a member at a time
/// through one reused `String`: a roster may hold thousands of members,
/// so no allocation per member and no large block.
pub(crate) fn presence_succeeded<'a, I>(channel: &str, members: I) -> Pieces
where
    I: IntoIterator<Item = (&'a str, Option<&'a herenow_core::Metadata>)>,
    I::IntoIter: Clone,
{
    let members = members.into_iter();
    let mut out = PiecesWriter::default();
    // Each id quoted once as JSON, before `data` is quoted as a whole;
    // each member's text escaped in `member`, then added to the pieces.
    let (mut quoted, mut member) = (String::new(), String::new());
    out.push_str(r#"{"event":"pusher_internal:subscription_succeeded","channel":""#);
    push_escaped(&mut member, channel);
    out.push_str(&member);
    // From here on `data`, a JSON string: every piece of it escaped.
    out.push_str(r#"","data":"{\"presence\":{\"ids\":["#);
    let mut count = 0usize;
    for (id, _) in members.clone() {
        member.clear();
        if count > 0 {
            member.push(',');
        }
        count += 1;
        quote_into(&mut quoted, id);
        push_escaped(&mut member, &quoted);
        out.push_str(&member);
    }
    out.push_str(r#"],\"hash\":{"#);
    for (i, (id, info)) in members.enumerate() {
        member.clear();
        if i > 0 {
            member.push(',');
        }
        quote_into(&mut quoted, id);
        push_escaped(&mut member, &quoted);
        member.push(':');
        push_escaped(&mut member, info.map_or("null", |m| m.as_json()));
        out.push_str(&member);
    }
    out.push_str(r#"},\"count\":"#);
    out.push_str(&count.to_string());
    out.push_str(r#"}}"}"#);
    out.finish()
}

/// `s` as a JSON string, quotes included, in `buf` (emptied first).
fn quote_into(buf: &mut String, s: &str) {
    buf.clear();
    buf.push('"');
    push_escaped(buf, s);
    buf.push('"');
}

/// Appends `s` escaped as the inside of a JSON string, as serde_json
/// escapes it: `"` and `\`, the short forms of control characters where
/// JSON has one, `\u00XX` for the others; everything else as is.
fn push_escaped(out: &mut String, s: &str) {
    let mut from = 0;
    for (i, b) in s.bytes().enumerate() {
        let short = match b {
            b'"' => "\\\"",
            b'\\' => "\\\\",
            b'\n' => "\\n",
            b'\r' => "\\r",
            b'\t' => "\\t",
            0x08 => "\\b",
            0x0c => "\\f",
            0x00..=0x1f => "",
            _ => continue,
        };
        // An ASCII byte: never inside a character, so a boundary.
        out.push_str(&s[from..i]);
        from = i + 1;
        if short.is_empty() {
            let _ = write!(out, "\\u{b:04x}");
        } else {
            out.push_str(short);
        }
    }
    out.push_str(&s[from..]);
}

/// `pusher_internal:member_added`.
pub(crate) fn member_added(
    channel: &str,
    user_id: &str,
    info: Option<&herenow_core::Metadata>,
) -> Arc<str> {
    let data = json!({ "user_id": user_id, "user_info": info_value(info) });
    event(
        "pusher_internal:member_added",
        Some(channel),
        &data.to_string(),
    )
}

/// `pusher_internal:member_removed`.
pub(crate) fn member_removed(channel: &str, user_id: &str) -> Arc<str> {
    let data = json!({ "user_id": user_id });
    event(
        "pusher_internal:member_removed",
        Some(channel),
        &data.to_string(),
    )
}

/// A member's `user_info` as JSON (`null` when it gave none).
fn info_value(info: Option<&herenow_core::Metadata>) -> Value {
    info.and_then(|m| serde_json::from_str(m.as_json()).ok())
        .unwrap_or(Value::Null)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn roster(members: &[(String, Option<herenow_core::Metadata>)]) -> String {
        presence_succeeded(
            "presence-x",
            members
                .iter()
                .map(|(id, info)| (id.as_str(), info.as_ref())),
        )
        .to_text()
    }

    #[test]
    fn a_roster_is_the_json_pusher_js_reads() {
        let meta = herenow_core::Metadata::from_json(r#"{"name":"A \"q\"","n":1}"#).unwrap();
        let members = vec![("a\"1".to_owned(), Some(meta)), ("b".to_owned(), None)];
        let msg: Value = serde_json::from_str(&roster(&members)).unwrap();
        assert_eq!(msg["event"], "pusher_internal:subscription_succeeded");
        assert_eq!(msg["channel"], "presence-x");
        let data: Value = serde_json::from_str(msg["data"].as_str().unwrap()).unwrap();
        assert_eq!(
            data,
            json!({"presence": {
                "ids": ["a\"1", "b"],
                "hash": {"a\"1": {"name": "A \"q\"", "n": 1}, "b": null},
                "count": 2,
            }})
        );
        let empty: Value = serde_json::from_str(&roster(&[])).unwrap();
        let data: Value = serde_json::from_str(empty["data"].as_str().unwrap()).unwrap();
        assert_eq!(
            data,
            json!({"presence": {"ids": [], "hash": {}, "count": 0}})
        );
    }

    #[test]
    fn a_roster_is_escaped_byte_for_byte_as_serde_json_escapes() {
        let meta = herenow_core::Metadata::from_json(r#"{"s":"\\ \" \n \u0001 é ✓ /","n":[1,{}]}"#)
            .unwrap();
        let ids = [
            "plain",
            "q\"uote",
            "back\\slash",
            "nl\n",
            "tab\t",
            "cr\r",
            "\u{8}\u{c}",
            "\u{1}\u{1f}\u{7f}",
            "é✓😀",
            "/slash",
        ];
        let members: Vec<(String, Option<herenow_core::Metadata>)> = ids
            .iter()
            .enumerate()
            .map(|(i, id)| ((*id).to_owned(), (i % 2 == 0).then(|| meta.clone())))
            .collect();
        // As it was written before: serde_json quoting each id, then the
        // whole `data`.
        let quoted = |s: &str| Value::from(s).to_string();
        let ids_json: Vec<String> = members.iter().map(|(id, _)| quoted(id)).collect();
        let hash_json: Vec<String> = members
            .iter()
            .map(|(id, info)| {
                let info = info.as_ref().map_or("null", |m| m.as_json());
                format!("{}:{info}", quoted(id))
            })
            .collect();
        let data = format!(
            r#"{{"presence":{{"ids":[{}],"hash":{{{}}},"count":{}}}}}"#,
            ids_json.join(","),
            hash_json.join(","),
            members.len()
        );
        let want = format!(
            r#"{{"event":"pusher_internal:subscription_succeeded","channel":{},"data":{}}}"#,
            quoted("presence-x"),
            quoted(&data)
        );
        assert_eq!(roster(&members), want);
    }

    #[test]
    fn reads_subscribe_data_as_object_or_string() {
        let m =
            decode(r#"{"event":"pusher:subscribe","data":{"channel":"a","auth":"k:s"}}"#).unwrap();
        let s: Subscribe = data_of(m.data.as_deref()).unwrap();
        assert_eq!((s.channel.as_str(), s.auth.as_deref()), ("a", Some("k:s")));
        let m = decode(r#"{"event":"pusher:subscribe","data":"{\"channel\":\"b\"}"}"#).unwrap();
        let s: Subscribe = data_of(m.data.as_deref()).unwrap();
        assert_eq!(s.channel, "b");
        assert!(decode("not json").is_none());
        assert!(decode(r#"{"data":{}}"#).is_none());
    }

    #[test]
    fn members() {
        let m = member(r#"{"user_id":"7","user_info":{"name":"Ada"}}"#).unwrap();
        assert_eq!(m.user_id, "7");
        assert_eq!(m.user_info.unwrap().get(), r#"{"name":"Ada"}"#);
        assert_eq!(member(r#"{"user_id":42}"#).unwrap().user_id, "42");
        assert!(member(r#"{"user_id":""}"#).is_none());
        assert!(member(r#"{"user_id":1.5}"#).is_none());
        assert!(member(r#"{"user_info":{}}"#).is_none());
        assert!(member(r#"["7"]"#).is_none());
        assert!(user_data(r#"["7"]"#).is_none());
        assert_eq!(user_data(r#"{"id":"7"}"#).unwrap().id, "7");
    }

    #[test]
    fn writes_client_events_with_the_senders_id() {
        let data = RawValue::from_string(r#"{"x":1}"#.into()).unwrap();
        let text = client_event("client-a", "presence-r", Some(&data), Some("7"));
        let v: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["data"]["x"], 1);
        assert_eq!(v["user_id"], "7");
        assert_eq!(v["channel"], "presence-r");
    }
}
