//! herenow-server: the HTTP face of a [`PresenceStore`].
//!
//! [`run`] serves, on a listener it is given, until a shutdown future it is
//! given completes (it is [`Store::open`] then [`serve`], for a caller that
//! wants the store up before it announces itself); [`app`] builds the same
//! router over an [`AppState`] for tests and embedding, without a socket.
//!
//! - `api`: the JSON API under `/v1` (see `docs/API.md`), one file per
//!   resource, with RFC 9457 problem responses for every error
//!   ([`problem`]; extractors that reject with problems in `extract`;
//!   API keys and scopes in [`auth`]);
//! - [`sse`]: Server-Sent Events, a snapshot then every event of a space;
//! - [`ws`]: the WebSocket protocol at `/v1/ws` (docs/PROTOCOL.md): live
//!   connections, invisible mode, subscriptions, with tokens from
//!   [`token`] (`POST /v1/tokens`);
//! - `page`: the live who's-online page at `/` and its assets, embedded in
//!   the binary;
//! - `demo`: simulated visitors for `herenow serve --demo`;
//! - [`metrics`], `ops` (health), [`openapi`], [`persist`] (snapshots to
//!   disk), [`history`] (count history), `background` (the ticker and
//!   samplers), `listener` (the connection bound).
//!
//! It knows HTTP and files, but no store internals: it talks to
//! `Arc<dyn PresenceStore>`, plus the concrete [`MemoryStore`] for
//! snapshots and the concrete `RedisStore` (built from `--store redis://…`
//! or `redis+cluster://…`) for readiness, buffer metrics and the last
//! flush at shutdown.
//!
//! [`PresenceStore`]: herenow_core::PresenceStore

pub mod api;
pub mod auth;
mod background;
pub mod config;
pub mod demo;
mod extract;
pub mod history;
pub mod journal;
mod listener;
pub mod metrics;
pub mod openapi;
mod ops;
pub mod page;
pub mod persist;
pub mod problem;
pub mod protocol;
pub mod sse;
mod state;
pub mod token;
pub mod ws;

pub use config::{ApiKey, Config, ConfigError, Scope, StoreSpec, TokenSecret};
pub use state::AppState;

use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::{DefaultBodyLimit, Request, State};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use herenow_core::{MemoryStore, SystemClock};
use herenow_redis::{RedisOptions, RedisStore};
use tokio_util::task::TaskTracker;
use tower_http::catch_panic::CatchPanicLayer;
use tower_http::limit::RequestBodyLimitLayer;

use crate::problem::ApiError;

/// Largest request body: 4 MiB, enough for a batch of 10,000 heartbeats
/// with ids and a little metadata.
pub const MAX_BODY_BYTES: usize = 4 * 1024 * 1024;

/// Why the server stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// The configuration is not usable (a non-loopback address without API
    /// keys, say).
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The store could not be started or restored.
    #[error("store: {0}")]
    Store(#[from] herenow_core::Error),
    /// The Redis store named by `--store` could not be reached (or refused
    /// the connection) at start. The server does not start: it never falls
    /// back to the memory store, which would split presence in two.
    #[error(
        "cannot start the {kind} store at {address}: {source}; \
         herenow does not fall back to the memory store"
    )]
    StoreConnect {
        /// `redis` or `redis-cluster`.
        kind: &'static str,
        /// The address as given, password redacted.
        address: String,
        /// Why it failed.
        #[source]
        source: herenow_core::Error,
    },
    /// The snapshot file exists but cannot be loaded: corrupt, truncated,
    /// or not a herenow snapshot. The server refuses to start empty over it.
    #[error(
        "cannot restore {}: {source}; move the file away to start empty",
        path.display()
    )]
    Snapshot {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        #[source]
        source: herenow_core::Error,
    },
    /// Reading or writing the data directory failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done, naming the file.
        what: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
}

/// The whole HTTP application over `state`: `/v1`, events, health,
/// metrics, OpenAPI, docs and the page. Bounded in body size; every error
/// is a problem.
pub fn app(state: AppState) -> Router {
    let v1 = api::router()
        .route_layer(middleware::from_fn_with_state(state.clone(), time_limit))
        .route_layer(middleware::from_fn_with_state(
            state.clone(),
            auth::require_key,
        ));
    // Streams are not timed out: they end on disconnect or shutdown.
    let events = sse::router().route_layer(middleware::from_fn_with_state(
        state.clone(),
        auth::require_key,
    ));
    // The WebSocket's credential is its token, not an API key: browsers
    // cannot send headers with a WebSocket.
    Router::new()
        .merge(v1)
        .merge(events)
        .merge(ws::router())
        .merge(ops::router())
        .merge(openapi::router())
        .merge(page::router())
        .route_layer(middleware::from_fn_with_state(
            state.clone(),
            metrics::track_latency,
        ))
        .fallback(problem::not_found)
        .layer(DefaultBodyLimit::disable())
        .layer(RequestBodyLimitLayer::new(MAX_BODY_BYTES))
        .layer(CatchPanicLayer::new())
        .layer(middleware::from_fn(problem::problemize))
        .with_state(state)
}

/// Middleware: answers `503` when a request outlives the configured
/// request timeout, so a stuck store call cannot pin a connection.
async fn time_limit(State(state): State<AppState>, request: Request, next: Next) -> Response {
    match tokio::time::timeout(state.request_timeout(), next.run(request)).await {
        Ok(response) => response,
        Err(_) => ApiError::unavailable(
            "timeout",
            "the request took longer than the server's request timeout",
            1,
        )
        .into_response(),
    }
}

/// The store `--store` names, started (memory store restored from its
/// snapshot, Redis connected and answering), not yet serving: what
/// [`Store::open`] gives and [`serve`] takes. The binary opens it before it
/// prints its "listening" line, so that line means "serving".
pub struct Store {
    state: AppState,
    memory: Option<Arc<MemoryStore>>,
    redis: Option<Arc<RedisStore>>,
}

impl Store {
    /// A memory store built by the caller (with its own clock, say), as
    /// [`serve`] takes it. No snapshot is restored or written unless
    /// `config.data_dir` is set.
    pub fn from_memory(memory: Arc<MemoryStore>, config: &Config) -> Store {
        Store {
            state: AppState::with_memory(memory.clone(), config),
            memory: Some(memory),
            redis: None,
        }
    }

    /// A Redis store connected by the caller (with its own clock, say), as
    /// [`serve`] takes it.
    pub fn from_redis(redis: Arc<RedisStore>, config: &Config) -> Store {
        Store {
            state: AppState::with_redis(redis.clone(), config),
            memory: None,
            redis: Some(redis),
        }
    }

    /// The state the server will serve, for a caller that wants to watch
    /// it (tests: open sockets, the store).
    pub fn state(&self) -> &AppState {
        &self.state
    }

    /// Builds the store `config.store` names: the memory store (restored
    /// from `config.data_dir` when set) or a Redis store, connected and
    /// answering a `PING`.
    ///
    /// Fails when a Redis store cannot be reached ([`ServerError::StoreConnect`],
    /// naming the address; never a fallback to memory) or when the data
    /// directory holds a snapshot that cannot be read.
    pub async fn open(config: &Config) -> Result<Store, ServerError> {
        match &config.store {
            StoreSpec::Memory => {
                let memory = Arc::new(MemoryStore::new(
                    Arc::new(SystemClock),
                    config.space_defaults,
                ));
                if let Some(dir) = config.data_dir.clone() {
                    restore_snapshot(&memory, dir).await?;
                }
                Ok(Store {
                    state: AppState::with_memory(memory.clone(), config),
                    memory: Some(memory),
                    redis: None,
                })
            }
            StoreSpec::Redis(url) | StoreSpec::RedisCluster(url)
                if config.redis_layout.is_some() =>
            {
                let layout = config.redis_layout.expect("matched by the guard");
                // A seed's layout: checked by `Config::check` to have a key.
                let key = config.redis_key.as_deref().unwrap_or_default();
                let seed = herenow_redis::SeedLayoutStore::connect(
                    url,
                    layout,
                    key,
                    config.redis_guest_key.as_deref(),
                    Arc::new(SystemClock),
                    config.space_defaults,
                    herenow_redis::LayoutOptions::default(),
                )
                .await
                .map_err(|source| ServerError::StoreConnect {
                    kind: config.store.name(),
                    address: config.store.redacted(),
                    source,
                })?;
                tracing::info!(
                    store = %config.store.redacted(),
                    %layout,
                    key,
                    "connected to Redis with a seed's key layout"
                );
                Ok(Store {
                    state: AppState::new(Arc::new(seed), config),
                    memory: None,
                    redis: None,
                })
            }
            StoreSpec::Redis(url) | StoreSpec::RedisCluster(url) => {
                let redis = RedisStore::connect(
                    url,
                    Arc::new(SystemClock),
                    config.space_defaults,
                    RedisOptions {
                        shards: config.redis_shards,
                        space_shards: config.redis_space_shards.clone(),
                        ..RedisOptions::default()
                    },
                )
                .await
                .map_err(|source| ServerError::StoreConnect {
                    kind: config.store.name(),
                    address: config.store.redacted(),
                    source,
                })?;
                let redis = Arc::new(redis);
                tracing::info!(store = %config.store.redacted(), "connected to Redis");
                Ok(Store {
                    state: AppState::with_redis(redis.clone(), config),
                    memory: None,
                    redis: Some(redis),
                })
            }
        }
    }
}

/// Serves herenow on `listener` until `shutdown` completes, then drains
/// requests, ends event streams and writes the snapshot: [`Store::open`]
/// then [`serve`].
///
/// Fails before serving when the configuration does not fit the address
/// (no API key beyond loopback, `--data-dir` with Redis), when a Redis
/// store cannot be reached, or when the data directory holds a snapshot
/// that cannot be read.
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
    let store = Store::open(&config).await?;
    serve(listener, config, store, shutdown).await
}

/// Serves an opened [`Store`] on `listener` until `shutdown` completes,
/// then drains requests, ends event streams, writes the memory store's
/// snapshot or flushes a Redis store's write buffer. `config` must be the
/// one the store was opened with.
pub async fn serve(
    listener: tokio::net::TcpListener,
    config: Config,
    store: Store,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ServerError> {
    let addr = listener.local_addr().map_err(|source| ServerError::Io {
        what: "reading the listener's address".into(),
        source,
    })?;
    config.check(addr)?;
    let Store {
        state,
        memory,
        redis,
    } = store;

    if config.token_secret.is_none() && config.store.is_redis() {
        tracing::warn!(
            "no --token-secret: this server signs WebSocket tokens with a random secret, \
             so other servers sharing this Redis store refuse its tokens (and it theirs); \
             give every server the same --token-secret"
        );
    }
    let token = state.shutdown_token().clone();
    let tracker = TaskTracker::new();
    background::spawn(&state, &config, &tracker);
    if config.demo {
        tracker.spawn(demo::run(state.store().clone(), token.clone()));
    }

    tracing::info!(%addr, store = state.store().name(), "serving");
    let listener = listener::LimitedListener::new(listener, config.max_connections);
    let stop = token.clone();
    let served = axum::serve(listener, app(state.clone()))
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

    if let (Some(dir), Some(memory)) = (config.data_dir, memory) {
        let bytes = tokio::task::spawn_blocking(move || persist::write(&memory, &dir))
            .await
            .map_err(|e| ServerError::Store(herenow_core::Error::Internal(e.to_string())))??;
        tracing::info!(bytes, "wrote final snapshot");
    }
    if let Some(redis) = redis {
        // One last bounded attempt to write heartbeats buffered during an
        // outage; what still cannot be written is counted and logged.
        redis.shutdown().await;
        let stats = redis.stats();
        if stats.buffered > 0 {
            tracing::warn!(
                buffered = stats.buffered,
                "Redis still unavailable at shutdown; buffered heartbeats are lost"
            );
        }
    }
    tracing::info!("stopped");
    Ok(())
}

/// Loads the snapshot in `dir` into `memory`, off the async threads.
async fn restore_snapshot(memory: &Arc<MemoryStore>, dir: PathBuf) -> Result<(), ServerError> {
    let store = memory.clone();
    let restored = tokio::task::spawn_blocking(move || persist::restore(&store, &dir))
        .await
        .map_err(|e| ServerError::Store(herenow_core::Error::Internal(e.to_string())))??;
    match restored {
        Some(r) => tracing::info!(
            spaces = r.spaces,
            members = r.members,
            friend_sets = r.friend_sets,
            taken_ms = r.taken_ms,
            "restored snapshot"
        ),
        None => tracing::info!("no snapshot yet; starting empty"),
    }
    Ok(())
}
