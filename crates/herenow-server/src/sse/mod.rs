//! Server-Sent Events: `GET /v1/spaces/{space}/events` here, and
//! `POST /v1/watch` in [`watch`].
//!
//! A stream opens with one `snapshot` event (the members present, from
//! `store.subscribe`, and the space's policy), then one event per change,
//! named by its type (`join`, `away`, `back`, `leave`, `update`, and
//! `connect`/`disconnect` for WebSocket connections). A
//! subscriber that falls more than the store's queue behind gets one
//! `lagged` event (`{"missed": N}`) and the stream ends: a fresh snapshot
//! is cheaper than replaying, and the client knows to reconnect.
//!
//! Bounded: at most `max_event_streams` streams are open at once; one more
//! is answered `503` with `Retry-After`. Every stream ends when the server
//! shuts down (axum's graceful shutdown would otherwise wait for it).

pub mod watch;

use std::convert::Infallible;
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::routing::get;
use futures::Stream;
use herenow_core::{EventReceiver, RecvError};
use serde::Serialize;
use tokio::sync::OwnedSemaphorePermit;
use tokio_util::sync::CancellationToken;
use utoipa::ToSchema;

use crate::extract::SpacePath;
use crate::problem::{ApiError, Problem};
use crate::protocol::dto::{MemberDto, SpaceConfigDto};
use crate::state::AppState;

/// Time between keep-alive comments, so proxies keep idle streams open.
pub const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// `GET /v1/spaces/{space}/events`. Behind the API-key middleware but not
/// the request timeout ([`crate::app`]): a stream lasts until the client
/// or the server ends it.
pub fn router() -> Router<AppState> {
    Router::new()
        .route("/v1/spaces/{space}/events", get(events))
        .merge(watch::router())
}

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
}

/// Frees the stream's slot and updates the gauge when the stream ends,
/// however it ends (client gone, lag, shutdown).
pub(crate) struct Slot {
    permit: Option<OwnedSemaphorePermit>,
    state: AppState,
}

impl Slot {
    /// A place for one more stream; `503` while shutting down or when
    /// every place is taken.
    pub(crate) fn open(state: &AppState) -> Result<Slot, ApiError> {
        if state.shutdown_token().is_cancelled() {
            return Err(ApiError::unavailable(
                "shutting-down",
                "the server is shutting down",
                1,
            ));
        }
        let permit = state.try_stream_slot().ok_or_else(|| {
            ApiError::unavailable(
                "too-many-streams",
                "the server has as many event streams open as it allows; retry later",
                5,
            )
        })?;
        Ok(Slot {
            permit: Some(permit),
            state: state.clone(),
        })
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        drop(self.permit.take());
        self.state
            .metrics()
            .sse_subscribers(self.state.open_streams());
    }
}

enum Phase {
    Snapshot(String),
    Events,
    Done,
}

struct Feed {
    phase: Phase,
    events: EventReceiver,
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
                    feed.phase = Phase::Done;
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
    params(("space" = String, Path, description = "Space name")),
    responses(
        (status = 200, description = "An event stream: `snapshot`, then `join`, `away`, `back`, `leave`, `update`, `connect`, `disconnect`; `lagged` before it ends for a slow reader", body = SnapshotData, content_type = "text/event-stream"),
        (status = 400, description = "Bad space name", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "Too many open streams, or shutting down", body = Problem, content_type = "application/problem+json"),
    ),
    security(("api_key" = []))
)]
pub async fn events(
    State(state): State<AppState>,
    SpacePath(space): SpacePath,
) -> Result<Sse<impl Stream<Item = Result<SseEvent, Infallible>>>, ApiError> {
    let stop = state.shutdown_token().clone();
    let slot = Slot::open(&state)?;
    let config = state.store().config(&space).await?;
    let subscription = state.store().subscribe(&space).await?;
    let snapshot = SnapshotData {
        space: space.to_string(),
        members: subscription
            .snapshot
            .into_iter()
            .map(MemberDto::from)
            .collect(),
        omitted: subscription.snapshot_omitted,
        config: config.into(),
    };
    let data = serde_json::to_string(&snapshot).map_err(|e| {
        ApiError::from(herenow_core::Error::Internal(format!(
            "snapshot could not be serialized: {e}"
        )))
    })?;
    let feed = Feed {
        phase: Phase::Snapshot(data),
        events: subscription.events,
        stop,
        _slot: slot,
    };
    let stream = futures::stream::unfold(feed, next);
    Ok(Sse::new(stream).keep_alive(KeepAlive::new().interval(KEEP_ALIVE)))
}
