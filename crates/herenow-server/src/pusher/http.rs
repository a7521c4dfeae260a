//! The HTTP API Pusher's server libraries call, under `/apps/{app_id}`
//! (routes: [`crate::pusher::router`]), every request checked by Pusher's
//! signature first ([`signed`], which also says how errors are answered).
//!
//! An event goes to every server's sockets, once, through the store's
//! relay (`pusher::hub`). Channel lists and counts come from the store
//! (presence channels' spaces and the occupancy space), so they are the
//! same whichever server is asked.

mod signed;

use std::sync::Arc;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use herenow_core::{MemberKey, MemberKind, SpaceName};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value, json};

use self::signed::{Refusal, Signed, bad, quoted};
use super::socket::{is_socket_conn, is_socket_id};
use super::{ChannelKind, Pusher, PusherApp, USER_CHANNEL};
use crate::pusher::PusherState;
use crate::pusher::hub::{Relayed, occupancy_count};

/// Most channels one event goes to.
pub(crate) const MAX_CHANNELS: usize = 100;
/// Most events in one batch.
pub(crate) const MAX_BATCH: usize = 10;
/// Longest event name, in bytes. The largest data is the app's
/// (`PusherApp::max_event_bytes`, 10 KiB unless its limits say).
const MAX_NAME: usize = 200;

/// One event as the API takes it.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct EventBody {
    name: String,
    data: Value,
    channels: Option<Vec<String>>,
    channel: Option<String>,
    socket_id: Option<String>,
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

/// The refusal of a channel name the protocol does not allow.
fn invalid_channel(name: &str) -> Refusal {
    bad(format!(
        "invalid channel name {}: a channel name is 1 to {} bytes of letters, digits \
         and _ - = @ , . ; or {USER_CHANNEL} and a user id",
        quoted(name),
        super::MAX_CHANNEL_BYTES,
    ))
}

/// `n` bytes as a person reads them: `10 KB` for whole kibibytes (as
/// Pusher writes its 10,240 bytes), else `1000 bytes`.
fn size(n: usize) -> String {
    if n >= 1024 && n.is_multiple_of(1024) {
        format!("{} KB", n / 1024)
    } else {
        format!("{n} bytes")
    }
}

/// Checks one event, every bound before anything is sent; its data is
/// at most `max_data` bytes.
fn check_event(e: EventBody, max_data: usize) -> Result<Checked, Refusal> {
    let channels = match (e.channels, e.channel) {
        (Some(c), None) => c,
        (None, Some(c)) => vec![c],
        (Some(_), Some(_)) => {
            return Err(bad("an event gives channels or channel, not both"));
        }
        (None, None) => {
            return Err(bad(
                "an event names where it goes: channels (a list) or channel",
            ));
        }
    };
    if channels.is_empty() || channels.len() > MAX_CHANNELS {
        return Err(bad(format!(
            "an event goes to 1 to {MAX_CHANNELS} channels, not {}",
            channels.len()
        )));
    }
    let mut encrypted = false;
    for c in &channels {
        match ChannelKind::of(c) {
            None => return Err(invalid_channel(c)),
            Some(ChannelKind::Encrypted) => encrypted = true,
            Some(_) => {}
        }
    }
    if encrypted && channels.len() > 1 {
        return Err(bad(
            "an event to an encrypted channel (private-encrypted-) goes to that channel only",
        ));
    }
    if e.name.is_empty() || e.name.len() > MAX_NAME {
        return Err(bad(format!(
            "an event name is 1 to {MAX_NAME} bytes, not {}",
            e.name.len()
        )));
    }
    let data = match e.data {
        Value::String(s) => s,
        other => other.to_string(),
    };
    if data.len() > max_data {
        return Err(Refusal(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!(
                "the event data is larger than {}: {} bytes, of {max_data} at most",
                size(max_data),
                data.len()
            ),
        ));
    }
    if let Some(id) = &e.socket_id
        && !is_socket_id(id)
    {
        return Err(bad(format!(
            "socket_id {} is not a socket id, which looks like 123.456",
            quoted(id)
        )));
    }
    let info = info_of(e.info.as_ref());
    // Checked before anything is sent, so a bad `info` changes nothing.
    for attribute in &info {
        match attribute.as_str() {
            "subscription_count" => {}
            "user_count" => {
                if let Some(c) = channels
                    .iter()
                    .find(|c| ChannelKind::of(c) != Some(ChannelKind::Presence))
                {
                    return Err(user_count_refused(c));
                }
            }
            other => return Err(unknown_info(other)),
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

/// The attributes an `info` parameter asks for (`a,,b` asks for two).
fn info_of(info: Option<&String>) -> Vec<String> {
    info.map(|i| {
        i.split(',')
            .filter(|a| !a.is_empty())
            .map(str::to_owned)
            .collect()
    })
    .unwrap_or_default()
}

/// The refusal of `info=user_count` for `channel`, not a presence one.
fn user_count_refused(channel: &str) -> Refusal {
    bad(format!(
        "info user_count is for presence channels only, and {} is not one",
        quoted(channel)
    ))
}

/// The refusal of an `info` attribute that is not known.
fn unknown_info(attribute: &str) -> Refusal {
    bad(format!(
        "unknown info attribute {}: ask for user_count or subscription_count",
        quoted(attribute)
    ))
}

/// A store call within the request timeout; a failure is a `503`.
async fn stored<T>(
    state: &PusherState,
    call: impl Future<Output = herenow_core::Result<T>>,
) -> Result<T, Refusal> {
    tokio::time::timeout(state.request_timeout(), call)
        .await
        .map_err(|_| {
            Refusal(
                StatusCode::SERVICE_UNAVAILABLE,
                format!(
                    "the store did not answer within the request timeout ({} ms)",
                    state.request_timeout().as_millis()
                ),
            )
        })?
        .map_err(|e| {
            Refusal(
                StatusCode::SERVICE_UNAVAILABLE,
                format!("the store failed: {e}"),
            )
        })
}

/// The members of `kind` present in `space`: the store's snapshot (none
/// when no space can be so named).
async fn present(
    state: &PusherState,
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
    state: &PusherState,
    app: &PusherApp,
    channel: &str,
) -> Result<Vec<MemberKey>, Refusal> {
    present(state, &app.presence_space(channel), MemberKind::User).await
}

/// A channel's subscriptions on every server: a presence channel's
/// sockets in its space, a public or private channel's counts each server
/// wrote (`pusher::hub`'s occupancy); a user's channel's here.
async fn subscriptions(
    state: &PusherState,
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

/// A presence channel's subscriptions on every server: its members'
/// live connections that are Pusher sockets (each socket subscribed is
/// one, `p{socket_id}`; herenow's own sockets in the space are not).
async fn presence_subscriptions(
    state: &PusherState,
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
        .filter(|c| is_socket_conn(c.conn.as_str()))
        .count())
}

/// A channel's counts as `info` asks for them.
async fn channel_info(
    state: &PusherState,
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
                    return Err(user_count_refused(channel));
                }
                out.insert(
                    attribute.clone(),
                    users_of(state, app, channel).await?.len().into(),
                );
            }
            other => return Err(unknown_info(other)),
        }
    }
    Ok(out)
}

/// Sends `msg` to every server's sockets (through the store's relay);
/// a `503` when the store cannot take it.
async fn send(state: &PusherState, pusher: &Arc<Pusher>, msg: Relayed) -> Result<(), Refusal> {
    pusher
        .send(state.store(), state.request_timeout(), msg)
        .await
        .map_err(|e| match e.kind() {
            // Checked sizes make this unreachable; said plainly if not.
            herenow_core::ErrorKind::InvalidInput => Refusal(
                StatusCode::PAYLOAD_TOO_LARGE,
                format!("the event is too large to relay: {e}"),
            ),
            _ => Refusal(
                StatusCode::SERVICE_UNAVAILABLE,
                format!("the event could not be relayed to the servers: {e}"),
            ),
        })
}

/// Publishes one checked event, once, to every server; its channels'
/// `info`.
async fn publish(
    state: &PusherState,
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

/// Reads a JSON body as `T`, what the body should be (`an event`) named
/// in the `400` when it is not, with where it went wrong: the field's
/// path (`batch[2]`), then serde's reason and place.
fn body_of<T: DeserializeOwned>(body: &[u8], what: &str) -> Result<T, Refusal> {
    serde_json::from_slice(body).map_err(|e| {
        // `?`: a place no path names (the body ended early, say).
        let at = match crate::extract::where_in::<T>(body) {
            path if path.is_empty() || path == "?" => String::new(),
            path => format!("{path}: "),
        };
        bad(format!("the body is not {what}: {at}{e}"))
    })
}

/// `POST /apps/{app_id}/events`.
pub(super) async fn events(
    State(state): State<PusherState>,
    Signed {
        pusher, app, body, ..
    }: Signed,
) -> Result<Response, Refusal> {
    // Every check before any event goes out.
    let event = check_event(body_of(&body, "an event")?, app.max_event_bytes)?;
    let infos = publish(&state, &pusher, &app, &event).await?;
    let answer = if event.info.is_empty() {
        json!({})
    } else {
        json!({ "channels": infos })
    };
    Ok(axum::Json(answer).into_response())
}

/// `POST /apps/{app_id}/batch_events`.
pub(super) async fn batch_events(
    State(state): State<PusherState>,
    Signed {
        pusher, app, body, ..
    }: Signed,
) -> Result<Response, Refusal> {
    let batch: BatchBody = body_of(&body, "a batch of events")?;
    if batch.batch.is_empty() || batch.batch.len() > MAX_BATCH {
        return Err(bad(format!(
            "a batch holds 1 to {MAX_BATCH} events, not {}",
            batch.batch.len()
        )));
    }
    let mut checked = Vec::with_capacity(batch.batch.len());
    for (i, e) in batch.batch.into_iter().enumerate() {
        // Which event of the batch, ahead of what is wrong with it.
        let which = |Refusal(status, why)| Refusal(status, format!("batch[{i}]: {why}"));
        if e.channels.is_some() {
            return Err(which(bad(
                "a batched event names one channel (channel), not a list (channels)",
            )));
        }
        checked.push(check_event(e, app.max_event_bytes).map_err(which)?);
    }
    let any_info = checked.iter().any(|e| !e.info.is_empty());
    let mut answers = Vec::with_capacity(checked.len());
    for event in &checked {
        let mut infos = publish(&state, &pusher, &app, event).await?;
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
    State(state): State<PusherState>,
    Signed { app, params, .. }: Signed,
) -> Result<Response, Refusal> {
    let prefix = params
        .get("filter_by_prefix")
        .map(String::as_str)
        .unwrap_or("");
    let info = info_of(params.get("info"));
    if info.iter().any(|i| i == "user_count") && !prefix.starts_with("presence-") {
        return Err(bad("info=user_count needs filter_by_prefix=presence-"));
    }
    // Public and private channels: the guests of the app's occupancy
    // space, which each server holding one attaches (users' channels are
    // not listed, as Pusher lists none).
    let occupied = present(&state, &app.occupancy_space(), MemberKind::Guest).await?;
    let mut names: std::collections::BTreeSet<String> = occupied
        .iter()
        .map(|m| m.id.as_str().to_owned())
        .filter(|name| name.starts_with(prefix))
        .collect();
    // Presence channels are spaces: occupied whichever server holds the
    // sockets. Spaces come by name, so this app's presence channels that
    // start with the prefix are one run of them: read from its start, not
    // through every space of the store.
    if "presence-".starts_with(prefix) || prefix.starts_with("presence-") {
        let first = prefix.max("presence-");
        let start = app.presence_space(first);
        // `spaces` lists those after a name: the run's first name itself
        // is asked apart (a channel named exactly the prefix).
        if ChannelKind::of(first) == Some(ChannelKind::Presence)
            && !users_of(&state, &app, first).await?.is_empty()
        {
            names.insert(first.to_owned());
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
    State(state): State<PusherState>,
    signed: Signed,
) -> Result<Response, Refusal> {
    let channel = signed.path_param("channel")?;
    let Signed {
        pusher,
        app,
        params,
        ..
    } = &signed;
    let kind = ChannelKind::of(channel).ok_or_else(|| invalid_channel(channel))?;
    let info = info_of(params.get("info"));
    let mut out = channel_info(&state, pusher, app, channel, &info).await?;
    // From what `info` read already, else asked.
    let counted = |name: &str| out.get(name).and_then(Value::as_u64).map(|n| n > 0);
    let occupied = match (kind, counted("user_count"), counted("subscription_count")) {
        (ChannelKind::Presence, Some(any), _) => any,
        (ChannelKind::Presence, None, _) => !users_of(&state, app, channel).await?.is_empty(),
        (_, _, Some(any)) => any,
        _ => subscriptions(&state, pusher, app, channel).await? > 0,
    };
    out.insert("occupied".into(), occupied.into());
    Ok(axum::Json(Value::Object(out)).into_response())
}

/// `GET /apps/{app_id}/channels/{channel}/users`.
pub(super) async fn users(
    State(state): State<PusherState>,
    signed: Signed,
) -> Result<Response, Refusal> {
    let channel = signed.path_param("channel")?;
    match ChannelKind::of(channel) {
        None => return Err(invalid_channel(channel)),
        Some(ChannelKind::Presence) => {}
        Some(_) => {
            return Err(bad(format!(
                "users are listed for presence channels only, and {} is not one",
                quoted(channel)
            )));
        }
    }
    let users: Vec<Value> = users_of(&state, &signed.app, channel)
        .await?
        .into_iter()
        .map(|m| json!({ "id": m.id.as_str() }))
        .collect();
    Ok(axum::Json(json!({ "users": users })).into_response())
}

/// `POST /apps/{app_id}/users/{user_id}/terminate_connections`: closes
/// every socket signed in as the user, on every server, with `4009`.
pub(super) async fn terminate_connections(
    State(state): State<PusherState>,
    signed: Signed,
) -> Result<Response, Refusal> {
    let user_id = signed.path_param("user_id")?;
    if let Err(e) = herenow_core::MemberId::new(user_id) {
        return Err(bad(format!(
            "user id {}: a user id is 1 to 256 bytes without control characters ({e})",
            quoted(user_id)
        )));
    }
    let msg = Relayed::Terminate {
        app: signed.app.id.clone(),
        user: user_id.to_owned(),
    };
    send(&state, &signed.pusher, msg).await?;
    Ok(axum::Json(json!({})).into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn socket_ids() {
        assert!(is_socket_id("123.456"));
        assert!(!is_socket_id("123."));
        assert!(!is_socket_id("a.1"));
    }
}
