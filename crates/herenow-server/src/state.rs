//! [`AppState`]: what every handler shares.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::FutureExt;
use herenow_core::{MemoryStore, PresenceStore, SpaceName, TickReport};
use herenow_redis::RedisStore;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;

use crate::auth::Keys;
use crate::config::Config;
use crate::history::History;
use crate::metrics::{MAX_GAUGED_SPACES, Metrics};
use crate::token::Tokens;
use crate::ws::Hub;

/// The state behind the router: the store, the keys, metrics, history and
/// the shutdown signal. Cheap to clone (one `Arc`).
#[derive(Clone)]
pub struct AppState(Arc<Inner>);

struct Inner {
    store: Arc<dyn PresenceStore>,
    memory: Option<Arc<MemoryStore>>,
    redis: Option<Arc<RedisStore>>,
    keys: Keys,
    metrics: Metrics,
    history: History,
    shutdown: CancellationToken,
    streams: Arc<Semaphore>,
    max_streams: usize,
    request_timeout: Duration,
    tokens: Tokens,
    ws: Hub,
}

impl AppState {
    /// State over any store, with keys and bounds from `config`.
    pub fn new(store: Arc<dyn PresenceStore>, config: &Config) -> Self {
        Self::build(store, None, None, config)
    }

    /// State over the memory store, which it can also snapshot.
    pub fn with_memory(store: Arc<MemoryStore>, config: &Config) -> Self {
        Self::build(store.clone(), Some(store), None, config)
    }

    /// State over a Redis store, whose readiness (Redis answers, nothing
    /// waits in its write buffer) `/readyz` reports and whose buffer
    /// counters the metrics export.
    pub fn with_redis(store: Arc<RedisStore>, config: &Config) -> Self {
        Self::build(store.clone(), None, Some(store), config)
    }

    fn build(
        store: Arc<dyn PresenceStore>,
        memory: Option<Arc<MemoryStore>>,
        redis: Option<Arc<RedisStore>>,
        config: &Config,
    ) -> Self {
        let max_streams = config.max_event_streams.max(1);
        let metrics = Metrics::for_store(store.name());
        Self(Arc::new(Inner {
            store,
            memory,
            redis,
            keys: Keys::new(config.api_keys.clone()),
            metrics,
            history: History::new(),
            shutdown: CancellationToken::new(),
            streams: Arc::new(Semaphore::new(max_streams)),
            max_streams,
            request_timeout: config.request_timeout,
            tokens: match &config.token_secret {
                Some(secret) => Tokens::new(secret),
                None => Tokens::random(),
            },
            ws: Hub::new(config),
        }))
    }

    /// The store.
    pub fn store(&self) -> &Arc<dyn PresenceStore> {
        &self.0.store
    }

    /// The memory store, when that is the store.
    pub fn memory(&self) -> Option<&Arc<MemoryStore>> {
        self.0.memory.as_ref()
    }

    /// The Redis store, when that is the store.
    pub fn redis(&self) -> Option<&Arc<RedisStore>> {
        self.0.redis.as_ref()
    }

    /// The configured API keys.
    pub fn keys(&self) -> &Keys {
        &self.0.keys
    }

    /// This server's metrics.
    pub fn metrics(&self) -> &Metrics {
        &self.0.metrics
    }

    /// The count history.
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

    /// WebSocket connections open now.
    pub fn open_websockets(&self) -> usize {
        self.0.ws.open()
    }

    /// How long a non-streaming request may take.
    pub fn request_timeout(&self) -> Duration {
        self.0.request_timeout
    }

    /// A slot for one event stream, or `None` when all are taken.
    pub(crate) fn try_stream_slot(&self) -> Option<OwnedSemaphorePermit> {
        let permit = self.0.streams.clone().try_acquire_owned().ok();
        self.0.metrics.sse_subscribers(self.open_streams());
        permit
    }

    /// Event streams open now.
    pub fn open_streams(&self) -> usize {
        self.0.max_streams - self.0.streams.available_permits()
    }

    /// One round of background maintenance: `store.tick()`, timed into the
    /// metrics. Errors and even panics of the store are logged, never
    /// propagated: the ticker must outlive a bad round.
    pub async fn tick(&self) -> Option<TickReport> {
        let started = Instant::now();
        let round = std::panic::AssertUnwindSafe(self.0.store.tick()).catch_unwind();
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
    /// space, open event streams and a Redis store's write buffer. Also
    /// folds histogram samples.
    pub async fn update_gauges(&self) {
        let m = &self.0.metrics;
        m.sse_subscribers(self.open_streams());
        m.ws_connections(self.open_websockets());
        if let Some(redis) = &self.0.redis {
            m.redis(&redis.stats());
        }
        let mut after: Option<SpaceName> = None;
        let mut done = 0;
        while done < MAX_GAUGED_SPACES {
            let page = match self
                .0
                .store
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
        if let Err(e) = self.0.history.sample(self.0.store.as_ref()).await {
            tracing::warn!(error = %e, "sampling count history failed");
        }
    }
}
