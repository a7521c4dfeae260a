//! herenow-server: the HTTP face of a [`PresenceStore`].
//!
//! [`run`] serves on a listener until a shutdown future completes (it is
//! [`Backend::open`] then [`serve`], for a caller that wants the store up
//! before it announces itself); [`app`] builds the same router over an
//! [`AppState`] for tests and embedding, without a socket.
//!
//! What an embedding program uses is re-exported here and is all that is
//! public: [`Config`] and its parts, [`Backend`], [`AppState`],
//! [`Metrics`], [`token`], [`ServerError`], the wire types a client reads
//! ([`protocol`], [`ws::wire`], [`Problem`], [`SnapshotData`]) and
//! [`persist`], the memory store's snapshot file. Everything else is the
//! crate's own:
//!
//! - `config`: what the binary builds from flags; `backend`: the one
//!   handle on the store built from that spec, with the duties of its kind
//!   (snapshots, readiness, buffer gauges, a last flush); `state`: what
//!   every handler shares, and [`AppState::reload`], new settings applied
//!   while serving ([`ReloadReport`]);
//! - `routes`: every route, each declared once with the scope of API key
//!   it needs, which also makes its entry in `/openapi.json` (`openapi`);
//! - `api`: the JSON API under `/v1` (see `docs/API.md`), one file per
//!   resource, with RFC 9457 problem responses for every error (`problem`;
//!   extractors that reject with problems in `extract`);
//! - `auth`: the key check, over `api_keys`, the configured API keys and
//!   their constant-time lookup; `layers`: each route's one middleware
//!   (latency, key, timeout);
//! - `sse`: Server-Sent Events, a snapshot then every event of a space;
//! - `socket`: one socket core under both WebSocket protocols (the
//!   upgrade, the bounded queue and its writer, the session loop with the
//!   liveness probe, and the hub: the sockets' bound, the tracker shutdown
//!   waits on, connection ids);
//! - [`ws`]: herenow's WebSocket protocol at `/v1/ws` (docs/PROTOCOL.md)
//!   on that core: its messages, live connections, invisible mode,
//!   subscriptions, one session type per job, with tokens from [`token`]
//!   (`POST /v1/tokens`); `watch`: following users across spaces (its
//!   hub, what a watcher is told, `POST /v1/watch`);
//! - `pusher`: everything of the Pusher Channels protocol
//!   (docs/PUSHER.md): its socket on the same core, its signed HTTP API,
//!   what its sockets share in one server (apps, channels, member feeds,
//!   the relay between servers), its apps' configuration and its webhook
//!   format;
//! - [`persist`] (the memory store's snapshot file) and `journal` (its
//!   journal in the data directory, over `herenow-journal`);
//! - `page`: the live who's-online page at `/` and its assets, embedded in
//!   the binary; `demo`: simulated visitors for `herenow serve --demo`;
//! - `webhooks`: the backend told of joins and leaves, signed (Standard
//!   Webhooks, or Pusher's format for `--pusher-webhook`), claimed from
//!   the store's outbox so that one of many servers delivers each event;
//! - `streams`: the event streams' bound, which `sse` and the watch's
//!   stream share;
//! - `metrics`, `ops` (health), `history` (count history), `background`
//!   (the ticker, samplers and the store's periodic duty), `listener` (the
//!   connection bound), `error`, and `fuzzing` (test support for the
//!   property tests that fuzz the decoders).
//!
//! It knows HTTP and files, but no store internals: it talks to
//! `Arc<dyn PresenceStore>`; only [`Backend`] knows the concrete
//! [`MemoryStore`] and `RedisStore`.
//!
//! The Redis stores come with the `redis` feature (on by default); a build
//! without it refuses a Redis [`StoreSpec`] with
//! [`ConfigError::NoRedisSupport`].
//!
//! [`PresenceStore`]: herenow_core::PresenceStore
//! [`MemoryStore`]: herenow_memory::MemoryStore

#![forbid(unsafe_code)]

mod api;
mod api_keys;
mod auth;
mod backend;
mod background;
mod config;
mod demo;
mod error;
mod extract;
#[cfg(test)]
mod fuzzing;
mod history;
mod journal;
mod layers;
mod listener;
mod metrics;
mod openapi;
mod ops;
mod page;
pub mod persist;
mod problem;
pub mod protocol;
mod pusher;
mod routes;
mod socket;
mod sse;
mod state;
mod streams;
pub mod token;
mod watch;
mod webhooks;
pub mod ws;

pub use backend::{Backend, Snapshots};
pub use config::{
    ApiKey, Config, ConfigError, DEFAULT_DRAIN, DEFAULT_PING_INTERVAL, DEFAULT_PONG_WAIT,
    DEFAULT_REDIS_WAIT, DEFAULT_SNAPSHOT_INTERVAL, MAX_REDIS_WAIT, MAX_SOCKET_TIMER,
    MIN_TOKEN_SECRET_BYTES, RedisLayout, RedisTarget, Scope, StoreSpec, StoreTarget, TokenSecret,
};
pub use error::ServerError;
pub use layers::App;
pub use metrics::Metrics;
pub use problem::Problem;
pub use pusher::{
    AppsChange as PusherAppsChange, PusherApp, PusherAppLimits, PusherConfig, PusherConfigError,
    PusherWebhook,
};
pub use sse::SnapshotData;
pub use state::{AppState, ReloadError, ReloadReport};
pub use webhooks::{
    AllowError as SpaceWebhookAllowError, Attempt as WebhookAttempt, Endpoint as WebhookEndpoint,
    Secret as WebhookSecret, SpaceWebhookAllow, WebhookConfig, WebhookError, WebhooksChange,
    send_test as send_test_webhook,
};

use std::future::{Future, IntoFuture};
use std::time::Duration;

use axum::Router;
use tokio_util::task::TaskTracker;

/// What the examples that time the server's own parts reach past the API:
/// not part of it, hidden from its documentation, and free to change with
/// them.
#[doc(hidden)]
pub mod measure {
    pub use crate::api::heartbeat::HeartbeatsBody;

    /// The routes that need a key, without the middleware that checks it
    /// (and times them out): what that middleware costs is the difference
    /// to [`crate::app`] (`examples/http_stack.rs`).
    pub fn unguarded_routes(state: crate::AppState) -> axum::Router {
        crate::routes::unguarded().with_state(state)
    }
}

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
/// is a problem. Each route is wrapped once, by its own middleware, and
/// the layers every request passes wrap the router once (`layers` says
/// why).
pub fn app(state: AppState) -> App {
    let routes = Router::new()
        .merge(routes::router(&state))
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
    checked_addr(&listener, &config)?;
    let backend = Backend::open(&config).await?;
    let state = AppState::new(backend, &config);
    serve(listener, config, state, shutdown).await
}

/// The address `listener` is bound to, once `config` is checked to fit it.
fn checked_addr(
    listener: &tokio::net::TcpListener,
    config: &Config,
) -> Result<std::net::SocketAddr, ServerError> {
    let addr = listener.local_addr().map_err(|source| ServerError::Io {
        what: "reading the listener's address".into(),
        source,
    })?;
    config.check(addr)?;
    Ok(addr)
}

/// How long open HTTP requests may take to finish once the shutdown began.
const DRAIN_GRACE: Duration = Duration::from_secs(10);

/// Serves `state` on `listener` until `shutdown` completes, then drains:
/// stops accepting connections, answers `/readyz` with `503`, lets open
/// requests finish, ends event streams, tells every socket to reconnect
/// now (its members lingering for the grace meanwhile) and waits for them
/// for [`Config::drain`] at most; then does the store's last duty (the
/// memory store's snapshot, a Redis store's flush). `config` must be the
/// one `state` was built with; the state is the caller's to build so it
/// can watch it (tests: open sockets, the store).
pub async fn serve(
    listener: tokio::net::TcpListener,
    config: Config,
    state: AppState,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ServerError> {
    let addr = checked_addr(&listener, &config)?;

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
    // Once `shutdown` completes, axum drops the listener (a new connection
    // is refused, so a new socket goes to another server) and lets each
    // connection finish its request; the token ends event streams and
    // background tasks (without it open streams would hold the graceful
    // shutdown forever), turns `/readyz` to `503`, refuses upgrades still
    // in flight, and tells every socket to reconnect now.
    let serving = axum::serve(listener, app)
        .with_graceful_shutdown(async move {
            shutdown.await;
            stop.cancel();
        })
        .into_future();
    tokio::pin!(serving);
    let served = tokio::select! {
        served = &mut serving => Some(served),
        () = token.cancelled() => None,
    };
    // The drain of sockets runs from here, when they were told.
    let began = tokio::time::Instant::now();
    // Draining requests is bounded too: a client that stops reading in
    // the middle of a response cannot hold the shutdown.
    let served = match served {
        Some(served) => served,
        None => match tokio::time::timeout(DRAIN_GRACE, serving).await {
            Ok(served) => served,
            Err(_) => {
                tracing::warn!(
                    "requests still open {} s after the shutdown began were dropped",
                    DRAIN_GRACE.as_secs()
                );
                Ok(())
            }
        },
    };
    token.cancel();
    // WebSocket tasks outlive axum's graceful shutdown: wait for them (the
    // drain at most) before the last snapshot or Redis flush. Waited for
    // only now, once every upgrade in flight took its place in the tracker.
    let sockets = state.ws().tracker();
    sockets.close();
    if tokio::time::timeout_at(began + config.drain, sockets.wait())
        .await
        .is_err()
    {
        tracing::warn!(
            open = state.open_websockets(),
            "WebSocket connections did not close within the drain ({:?})",
            config.drain
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
