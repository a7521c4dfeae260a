//! [`AppState`]: what every handler shares; `reload`, its settings
//! changed while it serves ([`AppState::reload`]).

mod reload;

pub use reload::{ReloadError, ReloadReport};

use std::sync::Arc;
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use axum::extract::FromRef;
use futures::FutureExt;
use herenow_core::{PresenceStore, SpaceName, TickReport};
use tokio_util::sync::CancellationToken;

use crate::api_keys::ApiKeys;
use crate::backend::Backend;
use crate::config::Config;
use crate::history::History;
use crate::metrics::{MAX_GAUGED_SPACES, Metrics};
use crate::pusher::{PusherParts, PusherState};
use crate::socket::{Hub, Liveness};
use crate::streams::Streams;
use crate::token::Tokens;
use crate::watch::{WatchHub, WatchState};
use crate::webhooks::Webhooks;

/// The state behind the router: the store (as a [`Backend`]), the keys,
/// metrics, history and the shutdown signal. Cheap to clone (one `Arc`).
#[derive(Clone)]
pub struct AppState(Arc<Inner>);

struct Inner {
    backend: Backend,
    keys: ApiKeys,
    metrics: Metrics,
    history: History,
    shutdown: CancellationToken,
    streams: Streams,
    request_timeout: Duration,
    tokens: Tokens,
    ws: Arc<Hub>,
    watch: Arc<WatchHub>,
    webhooks: Webhooks,
    pusher: Option<Arc<crate::pusher::Pusher>>,
    /// The settings served now: the configuration it was built with, with
    /// what reloads applied.
    config: ArcSwap<Config>,
    /// One reload at a time.
    reloading: tokio::sync::Mutex<()>,
}

impl AppState {
    /// State over `backend`, with keys and bounds from `config`: the one
    /// constructor, for the server and for tests alike.
    pub fn new(backend: Backend, config: &Config) -> Self {
        let metrics = backend
            .metrics()
            .cloned()
            .unwrap_or_else(|| Metrics::for_store(backend.store().name()));
        let shutdown = CancellationToken::new();
        let watch = Arc::new(WatchHub::new(backend.store().clone(), shutdown.clone()));
        let mut hooks = config.webhooks.clone();
        hooks.pusher = config.pusher.webhook_targets();
        let webhooks = Webhooks::new(hooks, backend.store().clone(), &metrics);
        let streams = Streams::new(config.max_event_streams, metrics.clone(), shutdown.clone());
        Self(Arc::new(Inner {
            backend,
            keys: ApiKeys::new(config.api_keys.clone()),
            metrics,
            history: History::new(),
            shutdown,
            streams,
            request_timeout: config.request_timeout,
            tokens: match &config.token_secret {
                Some(secret) => Tokens::new(secret),
                None => Tokens::random(),
            },
            ws: Arc::new(Hub::new(
                config.max_ws_connections,
                config.ws_ttl,
                config.ws_ping,
                Liveness {
                    ping_interval: config.ping_interval,
                    pong_wait: config.pong_wait,
                },
            )),
            watch,
            webhooks,
            pusher: crate::pusher::Pusher::new(&config.pusher),
            config: ArcSwap::from_pointee(config.clone()),
            reloading: tokio::sync::Mutex::new(()),
        }))
    }

    /// The store every handler talks to.
    pub fn store(&self) -> &Arc<dyn PresenceStore> {
        self.0.backend.store()
    }

    /// The store with its kind's duties: readiness, gauges, snapshots,
    /// the last flush.
    pub fn backend(&self) -> &Backend {
        &self.0.backend
    }

    /// The configured API keys, which the key middleware checks.
    pub fn keys(&self) -> &ApiKeys {
        &self.0.keys
    }

    /// This server's metrics: handlers count into them, `/metrics`
    /// renders them.
    pub fn metrics(&self) -> &Metrics {
        &self.0.metrics
    }

    /// The count history that `/v1/spaces/{space}/history` answers from.
    pub fn history(&self) -> &History {
        &self.0.history
    }

    /// Cancelled when the server shuts down: event streams and background
    /// tasks end on it.
    pub fn shutdown_token(&self) -> &CancellationToken {
        &self.0.shutdown
    }

    /// The WebSocket token signer and checker.
    pub fn tokens(&self) -> &Tokens {
        &self.0.tokens
    }

    /// The WebSocket connections: their bound, tracker and ids.
    pub fn ws(&self) -> &Hub {
        &self.0.ws
    }

    /// What the Pusher protocol's routes use of this state, if any app is
    /// configured.
    pub fn pusher_state(&self) -> Option<PusherState> {
        let hub = self.0.pusher.clone()?;
        Some(PusherState::new(PusherParts {
            hub,
            store: self.store().clone(),
            sockets: self.0.ws.clone(),
            watch: self.0.watch.clone(),
            webhooks: self.0.webhooks.clone(),
            shutdown: self.0.shutdown.clone(),
            request_timeout: self.0.request_timeout,
        }))
    }

    /// The watchers of users (WebSocket `watch`, `POST /v1/watch`).
    pub fn watch(&self) -> &Arc<WatchHub> {
        &self.0.watch
    }

    /// Webhooks: their endpoints' numbers, and their tasks once `serve`
    /// started them.
    pub fn webhooks(&self) -> &Webhooks {
        &self.0.webhooks
    }

    /// WebSocket connections open now, for the gauge and shutdown logs.
    pub fn open_websockets(&self) -> usize {
        self.0.ws.open()
    }

    /// How long a non-streaming request may take.
    pub fn request_timeout(&self) -> Duration {
        self.0.request_timeout
    }

    /// The event streams' bound.
    pub fn streams(&self) -> &Streams {
        &self.0.streams
    }

    /// Event streams open now, for the gauge.
    pub fn open_streams(&self) -> usize {
        self.0.streams.open()
    }

    /// One round of background maintenance: `store.tick()`, timed into the
    /// metrics. Errors and even panics of the store are logged, never
    /// propagated: the ticker must outlive a bad round.
    pub async fn tick(&self) -> Option<TickReport> {
        let started = Instant::now();
        let round = std::panic::AssertUnwindSafe(self.store().tick()).catch_unwind();
        match round.await {
            Ok(Ok(report)) => {
                self.0.metrics.sweep(started.elapsed(), &report);
                Some(report)
            }
            Ok(Err(e)) => {
                tracing::warn!(error = %e, "background sweep failed");
                None
            }
            Err(_) => {
                tracing::error!("background sweep panicked");
                None
            }
        }
    }

    /// Sets the gauges that are sampled rather than counted: members per
    /// space, open event streams and sockets, watchers, and those of the store's kind (a Redis
    /// store's write buffer). Also folds histogram samples.
    pub async fn update_gauges(&self) {
        let m = &self.0.metrics;
        m.sse_subscribers(self.open_streams());
        m.ws_connections(self.open_websockets());
        let (pairs, watchers) = self.0.watch.usage();
        m.watch_usage(pairs, watchers);
        self.0.webhooks.sample().await;
        #[cfg(feature = "redis")]
        if let Some(stats) = self.0.backend.redis_stats() {
            m.redis(&stats);
        }
        let mut after: Option<SpaceName> = None;
        let mut done = 0;
        while done < MAX_GAUGED_SPACES {
            let page = match self
                .store()
                .spaces(after.as_ref(), MAX_GAUGED_SPACES - done)
                .await
            {
                Ok(p) => p,
                Err(e) => {
                    tracing::warn!(error = %e, "listing spaces for metrics failed");
                    break;
                }
            };
            if page.is_empty() {
                break;
            }
            done += page.len();
            for s in &page {
                m.space_members(s.space.as_str(), s.members.users, s.members.guests);
            }
            after = page.last().map(|s| s.space.clone());
        }
        m.upkeep();
    }

    /// Takes one history sample of every space.
    pub async fn sample_history(&self) {
        if let Err(e) = self.0.history.sample(self.store().as_ref()).await {
            tracing::warn!(error = %e, "sampling count history failed");
        }
    }
}

impl FromRef<AppState> for WatchState {
    fn from_ref(state: &AppState) -> Self {
        WatchState {
            hub: state.0.watch.clone(),
            streams: state.0.streams.clone(),
            request_timeout: state.0.request_timeout,
            shutdown: state.0.shutdown.clone(),
        }
    }
}

/// The latency middleware takes only the metrics.
impl FromRef<AppState> for Metrics {
    fn from_ref(state: &AppState) -> Self {
        state.0.metrics.clone()
    }
}
