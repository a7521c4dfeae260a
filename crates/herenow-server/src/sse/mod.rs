//! Server-Sent Events: `GET /v1/spaces/{space}/events` (`POST /v1/watch`
//! is `crate::watch`'s).
//!
//! A stream opens with one `snapshot` event, then one event per change,
//! named by its type. A subscriber that falls more than the store's queue
//! behind gets one `lagged` event (`{"missed": N}`), then a fresh
//! `snapshot` marked `"resync": true`, and the stream goes on: the reader
//! catches up instead of being cut.
//!
//! At most `max_event_streams` streams are open at once (both kinds,
//! `crate::streams`); every stream ends when the server shuts down
//! (axum's graceful shutdown would otherwise wait for it).

use std::convert::Infallible;

use axum::extract::State;
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use futures::Stream;
use std::sync::Arc;

use herenow_core::{EventReceiver, PresenceStore, RecvError, SpaceName};
use serde::Serialize;
use tokio_util::sync::CancellationToken;
use utoipa::ToSchema;

use crate::extract::SpacePath;
use crate::problem::{ApiError, Problem};
use crate::protocol::dto::{MemberDto, SpaceConfigDto};
use crate::state::AppState;
use crate::streams::{KEEP_ALIVE, Slot};

/// The data of the first event of a stream.
#[derive(Debug, Serialize, ToSchema)]
pub struct SnapshotData {
    /// The space this stream follows; every later event is of it.
    pub space: String,
    /// Members present, most recent first (at most 10,000).
    pub members: Vec<MemberDto>,
    /// Present members left out of `members`.
    pub omitted: u64,
    /// The space's policy: the thresholds that turn `last_seen_ms` into a
    /// status.
    pub config: SpaceConfigDto,
    /// The stream lagged and starts over: this snapshot replaces
    /// everything the reader knew of the space (absent otherwise).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub resync: bool,
}

enum Phase {
    Snapshot(String),
    Events,
    Done,
}

struct Feed {
    phase: Phase,
    events: EventReceiver,
    store: Arc<dyn PresenceStore>,
    space: SpaceName,
    stop: CancellationToken,
    _slot: Slot,
}

async fn next(mut feed: Feed) -> Option<(Result<SseEvent, Infallible>, Feed)> {
    match std::mem::replace(&mut feed.phase, Phase::Events) {
        Phase::Done => None,
        Phase::Snapshot(data) => {
            if feed.stop.is_cancelled() {
                return None;
            }
            let event = SseEvent::default().event("snapshot").data(data);
            Some((Ok(event), feed))
        }
        Phase::Events => {
            let received = tokio::select! {
                biased;
                _ = feed.stop.cancelled() => return None,
                r = feed.events.recv() => r,
            };
            match received {
                Ok(event) => {
                    let data = match serde_json::to_string(&*event) {
                        Ok(d) => d,
                        Err(e) => {
                            tracing::error!(error = %e, "an event could not be serialized");
                            return None;
                        }
                    };
                    let sse = SseEvent::default().event(event.kind.as_str()).data(data);
                    Some((Ok(sse), feed))
                }
                Err(RecvError::Lagged(missed)) => {
                    // Start over (see the module doc); only a store that
                    // cannot answer ends the stream.
                    feed.phase = match snapshot(feed.store.as_ref(), &feed.space, true).await {
                        Ok((data, events)) => {
                            feed.events = events;
                            Phase::Snapshot(data)
                        }
                        Err(e) => {
                            tracing::warn!(error = %e, space = %feed.space, "an event stream could not start over after lag");
                            Phase::Done
                        }
                    };
                    let sse = SseEvent::default()
                        .event("lagged")
                        .data(format!("{{\"missed\":{missed}}}"));
                    Some((Ok(sse), feed))
                }
                Err(RecvError::Closed) => None,
            }
        }
    }
}

/// A snapshot of the space, then its events as they happen.
#[utoipa::path(
    get,
    path = "/v1/spaces/{space}/events",
    operation_id = "events",
    tag = "events",
    params(SpacePath),
    responses(
        (status = 200, description = "An event stream: `snapshot`, then `join`, `away`, `back`, `leave`, `update`, `connect`, `disconnect`; `lagged` then a `snapshot` with `resync: true` for a reader that fell behind", body = SnapshotData, content_type = "text/event-stream"),
        (status = 400, description = "Bad space name", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "Too many open streams, or shutting down", body = Problem, content_type = "application/problem+json"),
    ),
)]
pub async fn events(
    State(state): State<AppState>,
    SpacePath(space): SpacePath,
) -> Result<Sse<impl Stream<Item = Result<SseEvent, Infallible>>>, ApiError> {
    let stop = state.shutdown_token().clone();
    let slot = state.streams().slot()?;
    let (data, events) = snapshot(state.store().as_ref(), &space, false).await?;
    let feed = Feed {
        phase: Phase::Snapshot(data),
        events,
        store: state.store().clone(),
        space,
        stop,
        _slot: slot,
    };
    let stream = futures::stream::unfold(feed, next);
    Ok(Sse::new(stream).keep_alive(KeepAlive::new().interval(KEEP_ALIVE)))
}

/// Subscribes to `space`: the first event's data (the snapshot and the
/// policy) and the events after it.
async fn snapshot(
    store: &dyn PresenceStore,
    space: &SpaceName,
    resync: bool,
) -> herenow_core::Result<(String, EventReceiver)> {
    let config = store.config(space).await?;
    let subscription = store.subscribe(space).await?;
    let snapshot = SnapshotData {
        space: space.to_string(),
        members: subscription
            .snapshot
            .into_iter()
            .map(MemberDto::from)
            .collect(),
        omitted: subscription.snapshot_omitted,
        config: config.into(),
        resync,
    };
    let data = serde_json::to_string(&snapshot).map_err(|e| {
        herenow_core::Error::Internal(format!("snapshot could not be serialized: {e}"))
    })?;
    Ok((data, subscription.events))
}
