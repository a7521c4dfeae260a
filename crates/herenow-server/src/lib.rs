//! herenow-server: the HTTP face of a [`PresenceStore`].
//!
//! [`run`] serves, on a listener it is given, until a shutdown future it is
//! given completes (it is [`Backend::open`] then [`serve`], for a caller
//! that wants the store up before it announces itself); [`app`] builds the
//! same router over an [`AppState`] for tests and embedding, without a
//! socket.
//!
//! - [`config`]: what the binary builds from flags, the store included
//!   ([`StoreSpec`]: memory with its data directory, or Redis with its key
//!   layout);
//! - `backend`: [`Backend`], the one handle on the store built from that
//!   spec, with the duties of its kind (snapshots, readiness, buffer
//!   gauges, a last flush); `state`: [`AppState`], what every handler
//!   shares;
//! - [`protocol`]: the wire shapes every face shares (members, kinds,
//!   policies, and every WebSocket message), so `api`, `sse`, `ws` and
//!   `token` depend on it rather than on each other;
//! - [`api`]: the JSON API under `/v1` (see `docs/API.md`), one file per
//!   resource, with RFC 9457 problem responses for every error
//!   ([`problem`]; extractors that reject with problems in `extract`);
//! - [`auth`]: the key check and the scope each route needs, over
//!   [`keys`], the configured API keys and their constant-time lookup;
//!   `layers`: each group of routes' one middleware (latency, key,
//!   timeout);
//! - [`sse`]: Server-Sent Events, a snapshot then every event of a space;
//! - [`ws`]: the WebSocket protocol at `/v1/ws` (docs/PROTOCOL.md): live
//!   connections, invisible mode, subscriptions, one session type per job,
//!   with tokens from [`token`] (`POST /v1/tokens`); [`hub`]: the sockets
//!   as a whole (their bound, the tracker shutdown waits on, connection
//!   ids);
//! - [`persist`] (the memory store's snapshot file) and [`journal`] (its
//!   journal in the data directory, [`journal::DiskLog`] over
//!   `herenow-journal`);
//! - [`page`]: the live who's-online page at `/` and its assets, embedded
//!   in the binary; [`demo`]: simulated visitors for `herenow serve
//!   --demo`;
//! - [`webhooks`]: the backend told of joins and leaves, signed (Standard
//!   Webhooks), claimed from the store's outbox so that one of many
//!   servers delivers each event;
//! - [`metrics`], `ops` (health), [`openapi`], [`history`] (count
//!   history), `background` (the ticker, samplers and the store's periodic
//!   duty), `listener` (the connection bound), `error` ([`ServerError`]).
//!
//! It knows HTTP and files, but no store internals: it talks to
//! `Arc<dyn PresenceStore>`; only [`Backend`] knows the concrete
//! [`MemoryStore`] (snapshots) and `RedisStore` (readiness, buffer
//! metrics, the last flush at shutdown).
//!
//! The Redis stores come with the `redis` feature (on by default); a build
//! without it has the memory store only and refuses a Redis
//! [`StoreSpec`] with [`ConfigError::NoRedisSupport`].
//!
//! [`PresenceStore`]: herenow_core::PresenceStore
//! [`MemoryStore`]: herenow_core::MemoryStore

pub mod api;
pub mod auth;
mod backend;
mod background;
pub mod config;
pub mod demo;
mod error;
mod extract;
#[cfg(test)]
mod fuzzing;
pub mod history;
pub mod hub;
pub mod journal;
pub mod keys;
mod layers;
mod listener;
pub mod metrics;
pub mod openapi;
mod ops;
pub mod page;
pub mod persist;
pub mod problem;
pub mod protocol;
pub mod pusher;
pub mod sse;
mod state;
pub mod token;
pub mod watch;
pub mod webhooks;
pub mod ws;

pub use backend::{Backend, Snapshots};
pub use config::{
    ApiKey, Config, ConfigError, DEFAULT_REDIS_WAIT, MAX_REDIS_WAIT, RedisLayout, RedisTarget,
    Scope, StoreSpec, StoreTarget, TokenSecret,
};
pub use error::ServerError;
pub use state::AppState;

use std::future::Future;
use std::time::Duration;

use axum::Router;
use axum::middleware;
pub use layers::App;
use tokio_util::task::TaskTracker;

/// Largest request body: 4 MiB, enough for a batch of 10,000 heartbeats
/// with ids and a little metadata.
pub const MAX_BODY_BYTES: usize = 4 * 1024 * 1024;

/// What a `413 body-too-large` says: [`MAX_BODY_BYTES`] in words, for the
/// body extractor and the problem layer alike (the assertion keeps the
/// two together).
pub(crate) const BODY_TOO_LARGE: &str = "the request body is larger than 4 MiB";
const _: () = assert!(MAX_BODY_BYTES == 4 << 20, "BODY_TOO_LARGE names the bound");

/// The whole HTTP application over `state`: `/v1`, events, health,
/// metrics, OpenAPI, docs and the page. Bounded in body size; every error
/// is a problem.
///
/// Each route is wrapped once, by its group's middleware (`layers`),
/// and the layers every request passes wrap the router as one service
/// from outside rather than each route: axum clones a route's whole stack
/// of services on every request, so every level on a route costs each
/// request allocations.
pub fn app(state: AppState) -> App {
    let v1 = api::router().route_layer(layers::V1Layer::new(state.clone()));
    // Streams are not timed out: they end on disconnect or shutdown.
    let events =
        sse::router().route_layer(middleware::from_fn_with_state(state.clone(), layers::keyed));
    // The WebSocket's credential is its token, not an API key: browsers
    // cannot send headers with a WebSocket.
    let open = Router::new()
        .merge(ws::router())
        .merge(pusher::router(&state))
        .merge(ops::router())
        .merge(openapi::router())
        .merge(page::router())
        .route_layer(middleware::from_fn_with_state(
            state.clone(),
            metrics::track_latency,
        ));
    let routes = Router::new()
        .merge(v1)
        .merge(events)
        .merge(open)
        .fallback(problem::not_found)
        .with_state(state);
    App::new(routes, MAX_BODY_BYTES)
}

impl From<webhooks::StartError> for ServerError {
    fn from(e: webhooks::StartError) -> Self {
        match e {
            webhooks::StartError::Config(e) => ServerError::Config(e.into()),
            webhooks::StartError::Store(e) => ServerError::Store(e),
        }
    }
}

/// Serves herenow on `listener` until `shutdown` completes, then drains
/// requests, ends event streams and writes the snapshot: [`Backend::open`],
/// [`AppState::new`], then [`serve`].
///
/// Fails before serving when the configuration does not fit the address
/// (no API key beyond loopback, say), when a Redis store cannot be
/// reached, or when the data directory holds a snapshot that cannot be
/// read.
pub async fn run(
    listener: tokio::net::TcpListener,
    config: Config,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ServerError> {
    let addr = listener.local_addr().map_err(|source| ServerError::Io {
        what: "reading the listener's address".into(),
        source,
    })?;
    config.check(addr)?;
    let backend = Backend::open(&config).await?;
    let state = AppState::new(backend, &config);
    serve(listener, config, state, shutdown).await
}

/// Serves `state` on `listener` until `shutdown` completes, then drains
/// requests, ends event streams, and does the store's last duty (the
/// memory store's snapshot, a Redis store's flush). `config` must be the
/// one `state` was built with; the state is the caller's to build so it
/// can watch it (tests: open sockets, the store).
pub async fn serve(
    listener: tokio::net::TcpListener,
    config: Config,
    state: AppState,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ServerError> {
    let addr = listener.local_addr().map_err(|source| ServerError::Io {
        what: "reading the listener's address".into(),
        source,
    })?;
    config.check(addr)?;

    if config.token_secret.is_none() && state.backend().is_shared() {
        tracing::warn!(
            "no --token-secret: this server signs WebSocket tokens with a random secret, \
             so other servers sharing this Redis store refuse its tokens (and it theirs); \
             give every server the same --token-secret"
        );
    }
    let token = state.shutdown_token().clone();
    let tracker = TaskTracker::new();
    // Before serving: a store without an outbox, or an outbox that cannot
    // be opened, stops the start rather than losing events quietly.
    state.webhooks().start(&tracker, &token).await?;
    background::spawn(&state, &tracker);
    if config.demo {
        tracker.spawn(demo::run(state.store().clone(), token.clone()));
    }

    tracing::info!(%addr, store = state.store().name(), "serving");
    let listener = listener::LimitedListener::new(listener, config.max_connections);
    let stop = token.clone();
    let app = axum::ServiceExt::<axum::extract::Request>::into_make_service(app(state.clone()));
    let served = axum::serve(listener, app)
        .with_graceful_shutdown(async move {
            shutdown.await;
            // Ends event streams and background tasks; without it open
            // streams would hold the graceful shutdown forever.
            stop.cancel();
        })
        .await;
    token.cancel();
    // WebSocket tasks outlive axum's graceful shutdown: wait for them to
    // detach from the store and close with 1001 before the last snapshot
    // or Redis flush.
    let sockets = state.ws().tracker();
    sockets.close();
    if tokio::time::timeout(Duration::from_secs(10), sockets.wait())
        .await
        .is_err()
    {
        tracing::warn!(
            open = state.open_websockets(),
            "WebSocket connections did not close within 10 s"
        );
    }
    tracker.close();
    if tokio::time::timeout(Duration::from_secs(10), tracker.wait())
        .await
        .is_err()
    {
        tracing::warn!("background tasks did not stop within 10 s");
    }
    served.map_err(|source| ServerError::Io {
        what: format!("serving on {addr}"),
        source,
    })?;

    state.backend().shutdown().await?;
    tracing::info!("stopped");
    Ok(())
}
