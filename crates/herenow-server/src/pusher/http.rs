//! The HTTP API Pusher's server libraries call, under `/apps/{app_id}`.
//!
//! Every request is signed as Pusher signs it: the query carries
//! `auth_key`, `auth_timestamp` (within [`MAX_SKEW_S`] of the server's
//! clock), `auth_version=1.0`, `body_md5` (the MD5 of a non-empty body)
//! and `auth_signature`, the HMAC-SHA256 with the app's secret of
//! `METHOD\nPATH\nQUERY`, where `QUERY` is every other parameter, its key
//! lowercased, sorted by key, as `key=value` joined with `&`. A request
//! that fails the check is a `401` and changes nothing.
//!
//! - `POST /apps/{app_id}/events`: one event to up to [`MAX_CHANNELS`]
//!   channels, `socket_id` left out, `info` counts in the answer;
//! - `POST /apps/{app_id}/batch_events`: up to [`MAX_BATCH`] events;
//! - `GET /apps/{app_id}/channels` (`filter_by_prefix`, `info=user_count`
//!   for presence channels), `GET /apps/{app_id}/channels/{channel}`
//!   (`occupied`, `user_count`, `subscription_count`), `GET
//!   /apps/{app_id}/channels/{channel}/users`;
//! - `POST /apps/{app_id}/users/{user_id}/terminate_connections`.
//!
//! An event goes to every server's sockets, once, through the store's
//! relay (`crate::pusher_hub`); a user's channel `#server-to-user-{id}`
//! (`sendToUser`) reaches every socket signed in as the user.
//!
//! Channel lists, user counts, member lists and subscription counts come
//! from the store (presence channels' spaces, and the occupancy space in
//! which each server counts its sockets on public and private channels),
//! so they are the same whichever server is asked. Errors are plain text with a status, as Pusher's.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{FromRequest, FromRequestParts, Path, RawPathParams, Request, State};
use axum::http::{Method, StatusCode};
use axum::response::{IntoResponse, Response};
use herenow_core::{MemberKey, MemberKind, SpaceName};
use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::{ChannelKind, Pusher, PusherApp, sign};
use crate::pusher_hub::{Relayed, occupancy_count};
use crate::state::AppState;

/// How far `auth_timestamp` may be from the server's clock, in seconds.
pub(crate) const MAX_SKEW_S: u64 = 600;
/// Most channels one event goes to.
pub(crate) const MAX_CHANNELS: usize = 100;
/// Most events in one batch.
pub(crate) const MAX_BATCH: usize = 10;
/// Longest event name, in bytes.
const MAX_NAME: usize = 200;
/// Largest event data, in bytes.
pub(crate) const MAX_DATA: usize = 10 * 1024;
/// Largest request body.
const MAX_BODY: usize = 256 * 1024;

/// An answer that is not a success: a status and a plain-text reason.
pub(crate) struct Refusal(StatusCode, String);

impl IntoResponse for Refusal {
    fn into_response(self) -> Response {
        (self.0, self.1).into_response()
    }
}

fn bad(message: impl Into<String>) -> Refusal {
    Refusal(StatusCode::BAD_REQUEST, message.into())
}

fn unauthorized(message: &str) -> Refusal {
    Refusal(StatusCode::UNAUTHORIZED, message.to_owned())
}

/// Decodes one query component (`%XX`, `+` for a space).
fn decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => {
                match (hex_digit(bytes[i + 1]), hex_digit(bytes[i + 2])) {
                    (Some(hi), Some(lo)) => {
                        out.push(hi << 4 | lo);
                        i += 3;
                        continue;
                    }
                    _ => out.push(b'%'),
                }
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn hex_digit(b: u8) -> Option<u8> {
    char::from(b)
        .to_digit(16)
        .and_then(|d| u8::try_from(d).ok())
}

/// The query's parameters, keys lowercased; a key given twice is refused.
fn params(query: Option<&str>) -> Result<BTreeMap<String, String>, Refusal> {
    let mut out = BTreeMap::new();
    for pair in query
        .unwrap_or_default()
        .split('&')
        .filter(|p| !p.is_empty())
    {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        if out
            .insert(decode(k).to_ascii_lowercase(), decode(v))
            .is_some()
        {
            return Err(bad("a query parameter is given twice"));
        }
    }
    Ok(out)
}

/// The seconds of the server's clock.
fn now_s() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// Checks the request's signature; the app it is for, and its other
/// parameters.
fn verify(
    pusher: &Pusher,
    app_id: &str,
    method: &Method,
    path: &str,
    query: Option<&str>,
    body: &[u8],
) -> Result<(Arc<PusherApp>, BTreeMap<String, String>), Refusal> {
    let app = pusher
        .by_id(app_id)
        .cloned()
        .ok_or_else(|| Refusal(StatusCode::NOT_FOUND, "Unknown app".into()))?;
    let mut params = params(query)?;
    let signature = params
        .remove("auth_signature")
        .ok_or_else(|| unauthorized("auth_signature is missing"))?;
    if params.get("auth_key").map(String::as_str) != Some(app.key.as_str()) {
        return Err(unauthorized("auth_key is not this app's key"));
    }
    if params.get("auth_version").map(String::as_str) != Some("1.0") {
        return Err(unauthorized("auth_version must be 1.0"));
    }
    let timestamp = params
        .get("auth_timestamp")
        .and_then(|t| t.parse::<u64>().ok())
        .ok_or_else(|| unauthorized("auth_timestamp is missing"))?;
    if now_s().abs_diff(timestamp) > MAX_SKEW_S {
        return Err(unauthorized(
            "auth_timestamp is more than 600 s from the server's time",
        ));
    }
    if !body.is_empty() || params.contains_key("body_md5") {
        let given = params.get("body_md5").map(String::as_str).unwrap_or("");
        if !sign::same(given, &sign::md5_hex(body)) {
            return Err(unauthorized("body_md5 does not match the body"));
        }
    }
    let query: Vec<String> = params.iter().map(|(k, v)| format!("{k}={v}")).collect();
    let message = format!("{}\n{path}\n{}", method.as_str(), query.join("&"));
    if !sign::same(&signature, &sign::hmac_hex(&app.secret, &message)) {
        return Err(unauthorized("Invalid signature"));
    }
    Ok((app, params))
}

/// The Pusher side, which the router is only built with.
fn pusher(state: &AppState) -> Result<&Arc<Pusher>, Refusal> {
    state
        .pusher()
        .ok_or_else(|| Refusal(StatusCode::NOT_FOUND, "no Pusher apps".into()))
}

/// A request to the HTTP API whose signature checked out: the app it is
/// for, its other query parameters and its body. Every handler takes it,
/// so none runs on a request the app did not sign.
pub(super) struct Signed {
    pusher: Arc<Pusher>,
    app: Arc<PusherApp>,
    params: BTreeMap<String, String>,
    body: Bytes,
}

impl FromRequest<AppState> for Signed {
    type Rejection = Refusal;

    async fn from_request(req: Request, state: &AppState) -> Result<Self, Refusal> {
        let pusher = pusher(state)?.clone();
        let (mut parts, body) = req.into_parts();
        let path_params = RawPathParams::from_request_parts(&mut parts, state)
            .await
            .map_err(|_| bad("bad path"))?;
        let app_id = path_params
            .iter()
            .find_map(|(k, v)| (k == "app_id").then(|| v.to_owned()))
            .ok_or_else(|| bad("no app id"))?;
        let (method, uri) = (parts.method.clone(), parts.uri.clone());
        let body = Bytes::from_request(Request::from_parts(parts, body), state)
            .await
            .map_err(|e| bad(format!("bad body: {e}")))?;
        let (app, params) = verify(&pusher, &app_id, &method, uri.path(), uri.query(), &body)?;
        Ok(Self {
            pusher,
            app,
            params,
            body,
        })
    }
}

/// One event as the API takes it.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct EventBody {
    name: String,
    data: Value,
    #[serde(default)]
    channels: Option<Vec<String>>,
    #[serde(default)]
    channel: Option<String>,
    #[serde(default)]
    socket_id: Option<String>,
    #[serde(default)]
    info: Option<String>,
}

/// A batch as the API takes it.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct BatchBody {
    batch: Vec<EventBody>,
}

/// An event checked: its channels, name, data as the string sent to
/// clients, and whom to leave out.
struct Checked {
    channels: Vec<String>,
    name: String,
    data: String,
    socket_id: Option<String>,
    info: Vec<String>,
}

fn is_socket_id(s: &str) -> bool {
    s.split_once('.').is_some_and(|(a, b)| {
        !a.is_empty()
            && !b.is_empty()
            && a.bytes().all(|c| c.is_ascii_digit())
            && b.bytes().all(|c| c.is_ascii_digit())
    })
}

fn check_event(e: EventBody) -> Result<Checked, Refusal> {
    let channels = match (e.channels, e.channel) {
        (Some(c), None) => c,
        (None, Some(c)) => vec![c],
        _ => return Err(bad("give either channels or channel")),
    };
    if channels.is_empty() || channels.len() > MAX_CHANNELS {
        return Err(bad("an event goes to 1 to 100 channels"));
    }
    let mut encrypted = false;
    for c in &channels {
        match ChannelKind::of(c) {
            None => return Err(bad(format!("invalid channel name {c:?}"))),
            Some(ChannelKind::Encrypted) => encrypted = true,
            Some(_) => {}
        }
    }
    if encrypted && channels.len() > 1 {
        return Err(bad(
            "an event to an encrypted channel goes to that channel only",
        ));
    }
    if e.name.is_empty() || e.name.len() > MAX_NAME {
        return Err(bad("an event name is 1 to 200 bytes"));
    }
    let data = match e.data {
        Value::String(s) => s,
        other => other.to_string(),
    };
    if data.len() > MAX_DATA {
        return Err(Refusal(
            StatusCode::PAYLOAD_TOO_LARGE,
            "event data is larger than 10 KB".into(),
        ));
    }
    if let Some(id) = &e.socket_id
        && !is_socket_id(id)
    {
        return Err(bad("socket_id must look like 123.456"));
    }
    let info: Vec<String> = e
        .info
        .as_deref()
        .map(|i| {
            i.split(',')
                .filter(|a| !a.is_empty())
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default();
    // Checked before anything is sent, so a bad `info` changes nothing.
    for attribute in &info {
        match attribute.as_str() {
            "subscription_count" => {}
            "user_count"
                if channels
                    .iter()
                    .all(|c| ChannelKind::of(c) == Some(ChannelKind::Presence)) => {}
            "user_count" => return Err(bad("user_count is for presence channels only")),
            other => return Err(bad(format!("unknown info attribute {other:?}"))),
        }
    }
    Ok(Checked {
        channels,
        name: e.name,
        data,
        socket_id: e.socket_id,
        info,
    })
}

/// A store call within the request timeout; a failure is a `503`.
async fn stored<T>(
    state: &AppState,
    call: impl Future<Output = herenow_core::Result<T>>,
) -> Result<T, Refusal> {
    tokio::time::timeout(state.request_timeout(), call)
        .await
        .map_err(|_| {
            Refusal(
                StatusCode::SERVICE_UNAVAILABLE,
                "the store timed out".into(),
            )
        })?
        .map_err(|e| Refusal(StatusCode::SERVICE_UNAVAILABLE, e.to_string()))
}

/// The members of `kind` present in `space`: the store's snapshot (none
/// when no space can be so named).
async fn present(
    state: &AppState,
    space: &str,
    kind: MemberKind,
) -> Result<Vec<MemberKey>, Refusal> {
    let Ok(space) = SpaceName::new(space) else {
        return Ok(Vec::new());
    };
    let sub = stored(state, state.store().subscribe(&space)).await?;
    Ok(sub
        .snapshot
        .into_iter()
        .filter(|m| m.member.kind == kind)
        .map(|m| m.member)
        .collect())
}

/// Users present in `app`'s presence channel's space.
async fn users_of(
    state: &AppState,
    app: &PusherApp,
    channel: &str,
) -> Result<Vec<String>, Refusal> {
    let users = present(state, &app.presence_space(channel), MemberKind::User).await?;
    Ok(users
        .into_iter()
        .map(|m| m.id.as_str().to_owned())
        .collect())
}

/// A channel's subscriptions on every server: a presence channel's
/// sockets in its space, a public or private channel's counts each server
/// wrote (`crate::pusher_hub`'s occupancy); a user's channel's here.
async fn subscriptions(
    state: &AppState,
    pusher: &Pusher,
    app: &PusherApp,
    channel: &str,
) -> Result<usize, Refusal> {
    match ChannelKind::of(channel) {
        Some(ChannelKind::Presence) => presence_subscriptions(state, app, channel).await,
        Some(kind) if kind.is_occupancy() => {
            let counted = stored(
                state,
                occupancy_count(state.store(), &app.occupancy_space(), channel),
            )
            .await?;
            Ok(counted.unwrap_or_else(|| pusher.channels.subscription_count(&app.id, channel)))
        }
        _ => Ok(pusher.channels.subscription_count(&app.id, channel)),
    }
}

/// The public and private channels some server holds: the guests
/// present in the app's occupancy space.
async fn occupied_channels(state: &AppState, app: &PusherApp) -> Result<Vec<String>, Refusal> {
    let guests = present(state, &app.occupancy_space(), MemberKind::Guest).await?;
    Ok(guests
        .into_iter()
        .map(|m| m.id.as_str().to_owned())
        .collect())
}

/// A presence channel's subscriptions on every server: its members'
/// live connections that are Pusher sockets (each socket subscribed is
/// one, `p{socket_id}`; herenow's own sockets in the space are not).
async fn presence_subscriptions(
    state: &AppState,
    app: &PusherApp,
    channel: &str,
) -> Result<usize, Refusal> {
    let Ok(space) = SpaceName::new(&app.presence_space(channel)) else {
        return Ok(0);
    };
    let members = present(state, space.as_str(), MemberKind::User).await?;
    let Some(live) = state.store().live_connections() else {
        return Ok(0);
    };
    let conns = stored(state, live.connections(&space, &members)).await?;
    Ok(conns
        .iter()
        .flatten()
        .filter(|c| super::socket::is_socket_conn(c.conn.as_str()))
        .count())
}

/// A channel's counts as `info` asks for them.
async fn channel_info(
    state: &AppState,
    pusher: &Pusher,
    app: &PusherApp,
    channel: &str,
    info: &[String],
) -> Result<Map<String, Value>, Refusal> {
    let mut out = Map::new();
    for attribute in info {
        match attribute.as_str() {
            "subscription_count" => {
                let n = subscriptions(state, pusher, app, channel).await?;
                out.insert(attribute.clone(), n.into());
            }
            "user_count" => {
                if ChannelKind::of(channel) != Some(ChannelKind::Presence) {
                    return Err(bad("user_count is for presence channels only"));
                }
                out.insert(
                    attribute.clone(),
                    users_of(state, app, channel).await?.len().into(),
                );
            }
            "" => {}
            other => return Err(bad(format!("unknown info attribute {other:?}"))),
        }
    }
    Ok(out)
}

/// Sends `msg` to every server's sockets (through the store's relay);
/// a `503` when the store cannot take it.
async fn send(state: &AppState, pusher: &Arc<Pusher>, msg: Relayed) -> Result<(), Refusal> {
    pusher
        .send(state.store(), state.request_timeout(), msg)
        .await
        .map_err(|e| match e.kind() {
            // Checked sizes make this unreachable; said plainly if not.
            herenow_core::ErrorKind::InvalidInput => {
                Refusal(StatusCode::PAYLOAD_TOO_LARGE, e.to_string())
            }
            _ => Refusal(StatusCode::SERVICE_UNAVAILABLE, e.to_string()),
        })
}

/// Publishes one checked event, once, to every server; its channels'
/// `info`.
async fn publish(
    state: &AppState,
    pusher: &Arc<Pusher>,
    app: &PusherApp,
    event: &Checked,
) -> Result<Map<String, Value>, Refusal> {
    let msg = Relayed::Event {
        app: app.id.clone(),
        channels: event.channels.clone(),
        name: event.name.clone(),
        data: event.data.clone(),
        except: event.socket_id.clone(),
    };
    send(state, pusher, msg).await?;
    let mut infos = Map::new();
    if !event.info.is_empty() {
        for channel in &event.channels {
            let info = channel_info(state, pusher, app, channel, &event.info).await?;
            infos.insert(channel.clone(), Value::Object(info));
        }
    }
    Ok(infos)
}

/// Reads a JSON body, as a `400` when it does not fit.
fn body_of<T: for<'de> Deserialize<'de>>(body: &[u8]) -> Result<T, Refusal> {
    if body.len() > MAX_BODY {
        return Err(Refusal(
            StatusCode::PAYLOAD_TOO_LARGE,
            "the body is larger than 256 KiB".into(),
        ));
    }
    serde_json::from_slice(body).map_err(|e| bad(format!("bad body: {e}")))
}

/// `POST /apps/{app_id}/events`.
pub(super) async fn events(
    State(state): State<AppState>,
    Signed {
        pusher, app, body, ..
    }: Signed,
) -> Result<Response, Refusal> {
    let pusher = &pusher;
    // Every check before any event goes out.
    let event = check_event(body_of(&body)?)?;
    let infos = publish(&state, pusher, &app, &event).await?;
    let answer = if event.info.is_empty() {
        json!({})
    } else {
        json!({ "channels": infos })
    };
    Ok(axum::Json(answer).into_response())
}

/// `POST /apps/{app_id}/batch_events`.
pub(super) async fn batch_events(
    State(state): State<AppState>,
    Signed {
        pusher, app, body, ..
    }: Signed,
) -> Result<Response, Refusal> {
    let pusher = &pusher;
    let batch: BatchBody = body_of(&body)?;
    if batch.batch.is_empty() || batch.batch.len() > MAX_BATCH {
        return Err(bad("a batch holds 1 to 10 events"));
    }
    let mut checked = Vec::with_capacity(batch.batch.len());
    for e in batch.batch {
        if e.channels.is_some() {
            return Err(bad("a batched event names one channel"));
        }
        checked.push(check_event(e)?);
    }
    let any_info = checked.iter().any(|e| !e.info.is_empty());
    let mut answers = Vec::with_capacity(checked.len());
    for event in &checked {
        let mut infos = publish(&state, pusher, &app, event).await?;
        let info = event
            .channels
            .first()
            .and_then(|c| infos.remove(c))
            .unwrap_or_else(|| json!({}));
        answers.push(info);
    }
    let answer = if any_info {
        json!({ "batch": answers })
    } else {
        json!({})
    };
    Ok(axum::Json(answer).into_response())
}

/// Spaces read per store call when listing presence channels.
const PAGE: usize = 1_000;

/// `GET /apps/{app_id}/channels`.
pub(super) async fn channels(
    State(state): State<AppState>,
    Signed { app, params, .. }: Signed,
) -> Result<Response, Refusal> {
    let prefix = params
        .get("filter_by_prefix")
        .map(String::as_str)
        .unwrap_or("");
    let info: Vec<String> = params
        .get("info")
        .map(|i| i.split(',').map(str::to_owned).collect())
        .unwrap_or_default();
    if info.iter().any(|i| i == "user_count") && !prefix.starts_with("presence-") {
        return Err(bad("info=user_count needs filter_by_prefix=presence-"));
    }
    // Public and private channels: the guests of the app's occupancy
    // space, which each server holding one attaches (users' channels are
    // not listed, as Pusher lists none).
    let mut names: std::collections::BTreeSet<String> = occupied_channels(&state, &app)
        .await?
        .into_iter()
        .filter(|name| name.starts_with(prefix))
        .collect();
    // Presence channels are spaces: occupied whichever server holds the
    // sockets. Spaces come by name, so this app's presence channels that
    // start with the prefix are one run of them: read from its start, not
    // through every space of the store.
    if "presence-".starts_with(prefix) || prefix.starts_with("presence-") {
        let start = app.presence_space(prefix.max("presence-"));
        // `spaces` lists those after a name: the run's first name itself
        // is asked apart (a channel named exactly the prefix).
        if ChannelKind::of(&start[app.space_prefix.len()..]) == Some(ChannelKind::Presence)
            && !users_of(&state, &app, &start[app.space_prefix.len()..])
                .await?
                .is_empty()
        {
            names.insert(start[app.space_prefix.len()..].to_owned());
        }
        // No space can be named so (a channel may hold `= , ;`): none.
        let mut after = SpaceName::new(&start).ok();
        while let Some(from) = after.take() {
            let page = stored(&state, state.store().spaces(Some(&from), PAGE)).await?;
            let run: Vec<_> = page
                .iter()
                .take_while(|s| s.space.as_str().starts_with(&start))
                .collect();
            for summary in &run {
                if summary.members.users > 0 {
                    let name = &summary.space.as_str()[app.space_prefix.len()..];
                    names.insert(name.to_owned());
                }
            }
            if run.len() == PAGE {
                after = run.last().map(|s| s.space.clone());
            }
        }
    }
    let mut out = Map::new();
    for name in names {
        let mut entry = Map::new();
        if info.iter().any(|i| i == "user_count") {
            entry.insert(
                "user_count".into(),
                users_of(&state, &app, &name).await?.len().into(),
            );
        }
        out.insert(name, Value::Object(entry));
    }
    Ok(axum::Json(json!({ "channels": out })).into_response())
}

/// `GET /apps/{app_id}/channels/{channel}`.
pub(super) async fn channel(
    State(state): State<AppState>,
    Path((_, channel)): Path<(String, String)>,
    Signed {
        pusher,
        app,
        params,
        ..
    }: Signed,
) -> Result<Response, Refusal> {
    let pusher = &pusher;
    let kind = ChannelKind::of(&channel).ok_or_else(|| bad("invalid channel name"))?;
    let info: Vec<String> = params
        .get("info")
        .map(|i| i.split(',').map(str::to_owned).collect())
        .unwrap_or_default();
    let mut out = channel_info(&state, pusher, &app, &channel, &info).await?;
    // From what `info` read already, else asked.
    let counted = |name: &str| out.get(name).and_then(Value::as_u64).map(|n| n > 0);
    let occupied = match (kind, counted("user_count"), counted("subscription_count")) {
        (ChannelKind::Presence, Some(any), _) => any,
        (ChannelKind::Presence, None, _) => !users_of(&state, &app, &channel).await?.is_empty(),
        (_, _, Some(any)) => any,
        _ => subscriptions(&state, pusher, &app, &channel).await? > 0,
    };
    out.insert("occupied".into(), occupied.into());
    Ok(axum::Json(Value::Object(out)).into_response())
}

/// `GET /apps/{app_id}/channels/{channel}/users`.
pub(super) async fn users(
    State(state): State<AppState>,
    Path((_, channel)): Path<(String, String)>,
    Signed { app, .. }: Signed,
) -> Result<Response, Refusal> {
    if ChannelKind::of(&channel) != Some(ChannelKind::Presence) {
        return Err(bad("users are listed for presence channels only"));
    }
    let users: Vec<Value> = users_of(&state, &app, &channel)
        .await?
        .into_iter()
        .map(|id| json!({ "id": id }))
        .collect();
    Ok(axum::Json(json!({ "users": users })).into_response())
}

/// `POST /apps/{app_id}/users/{user_id}/terminate_connections`: closes
/// every socket signed in as the user, on every server, with `4009`.
pub(super) async fn terminate_connections(
    State(state): State<AppState>,
    Path((_, user_id)): Path<(String, String)>,
    Signed { pusher, app, .. }: Signed,
) -> Result<Response, Refusal> {
    if herenow_core::MemberId::new(&user_id).is_err() {
        return Err(bad(
            "a user id is 1 to 256 bytes without control characters",
        ));
    }
    let msg = Relayed::Terminate {
        app: app.id.clone(),
        user: user_id,
    };
    send(&state, &pusher, msg).await?;
    Ok(axum::Json(json!({})).into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_query_components() {
        assert_eq!(decode("a%2Cb+c"), "a,b c");
        assert_eq!(decode("100%"), "100%");
        assert_eq!(decode("%zz"), "%zz");
        assert!(is_socket_id("123.456"));
        assert!(!is_socket_id("123."));
        assert!(!is_socket_id("a.1"));
    }
}
