//! Endpoints a space's configuration names ([`SpaceHook`]): where the
//! claim loop finds them and how it delivers to them.
//!
//! The store keeps each space's endpoints; the claim loop keeps a cache of
//! them, per space, and a version the store counts up with every change
//! (one cheap read per claim: when it moved, the cache is dropped and
//! refilled as events arrive). So a change made through any server reaches
//! every server's next claim, and a space without endpoints costs one
//! look-up, then nothing.
//!
//! Each distinct endpoint (URL and secret) gets a lane like an operator's
//! endpoint: its own bounded queue and task, so a slow one never holds
//! back another. Lanes are made when a first event needs them and closed
//! once idle ([`LANE_IDLE`]); at most
//! [`MAX_SPACE_LANES`] live at once (events for more are dropped for that
//! endpoint and counted, like a full queue).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use futures::{StreamExt as _, TryStreamExt as _};
use herenow_core::outbox::{OutboxEvent, OutboxKind, SpaceHook};
use herenow_core::{ErrorKind, Result, SpaceName};
use parking_lot::Mutex;
use tokio::time::Instant;

use super::allow::SpaceWebhookAllow;
use super::deliver::{LaneKit, LaneSender};
use super::endpoint::Endpoint;
use super::state::EndpointState;
use crate::metrics::Metrics;

/// Most lanes to spaces' endpoints one server runs at once.
pub const MAX_SPACE_LANES: usize = 256;

/// Most events waiting in one space endpoint's queue.
pub const SPACE_QUEUE_LIMIT: usize = 1_000;

/// A lane without events for this long is closed once its queue is empty.
pub const LANE_IDLE: Duration = Duration::from_secs(600);

/// A space not seen in an event for this long leaves the cache.
const CACHE_IDLE: Duration = Duration::from_secs(600);

/// Most spaces cached; past it the cache starts again empty.
const MAX_CACHED_SPACES: usize = 100_000;

/// Look-ups of spaces' endpoints in flight at once.
const FETCHES_IN_FLIGHT: usize = 16;

/// How often idle lanes and cache entries are looked for.
const SWEEP_EVERY: Duration = Duration::from_secs(30);

/// One endpoint: its URL and secret.
#[derive(Clone, PartialEq, Eq, Hash)]
struct LaneKey {
    url: String,
    secret: String,
}

/// One of a space's endpoints, as the cache keeps it.
struct Wanted {
    key: LaneKey,
    kinds: Vec<OutboxKind>,
}

struct Cached {
    hooks: Arc<[Wanted]>,
    /// The store holds endpoints for the space but could not read them:
    /// each of its events counts as skipped.
    unreadable: bool,
    used: Instant,
}

struct SpaceLane {
    sender: LaneSender,
    used: Instant,
}

/// What making a lane takes: the same as the operator's endpoints get.
pub struct Launch {
    /// What every lane needs, with the client every space's endpoint
    /// shares, whose resolver checks addresses ([`super::space_client`]).
    pub kit: LaneKit,
    /// Where spaces' endpoints may send: checked again as a lane starts,
    /// for an address written in the URL (not resolved, so not seen by
    /// the client's resolver).
    pub allow: Arc<SpaceWebhookAllow>,
    /// Where lanes' numbers go.
    pub metrics: Metrics,
    /// The lanes' numbers, for `GET /v1/webhooks`.
    pub states: Arc<Mutex<Vec<Arc<EndpointState>>>>,
}

/// The claim loop's view of spaces' endpoints: the cache and the lanes.
pub struct SpaceRoutes {
    launch: Launch,
    version: Option<u64>,
    cache: HashMap<SpaceName, Cached>,
    lanes: HashMap<LaneKey, SpaceLane>,
    swept: Instant,
    /// Endpoints skipped because they could not be used (counted once per
    /// cache fill, logged at the first).
    unusable_logged: bool,
}

impl SpaceRoutes {
    /// No endpoints known yet.
    pub fn new(launch: Launch) -> Self {
        Self {
            launch,
            version: None,
            cache: HashMap::new(),
            lanes: HashMap::new(),
            swept: Instant::now(),
            unusable_logged: false,
        }
    }

    /// Makes sure the endpoints of every space of `events` are known and
    /// current: drops the cache when the store's version moved, then looks
    /// up the spaces not cached. An error leaves the events unrouted: the
    /// caller tries again before routing them, so no event of a space
    /// reaches its endpoints out of order or not at all. A space whose
    /// endpoints the store holds but cannot read (an internal error, not
    /// an outage) is logged, counted with the unusable endpoints and
    /// cached with none, so it never holds back the other spaces' events.
    pub async fn refresh(&mut self, events: &[OutboxEvent]) -> Result<()> {
        if events.is_empty() {
            return Ok(());
        }
        let store = self.launch.kit.store.clone();
        // A store that keeps no spaces' endpoints: every space has none,
        // and its events go to the operator's endpoints alone.
        let Some(endpoints) = store.space_webhooks() else {
            return Ok(());
        };
        let version = endpoints.space_hooks_version().await?;
        if self.version != Some(version) {
            self.cache.clear();
            self.version = Some(version);
        }
        let mut missing: Vec<SpaceName> = Vec::new();
        for e in events {
            if !self.cache.contains_key(&e.space) && !missing.contains(&e.space) {
                missing.push(e.space.clone());
            }
        }
        let found: Vec<(SpaceName, Option<Vec<SpaceHook>>)> = futures::stream::iter(missing)
            .map(|space| {
                async move {
                    match endpoints.space_hooks(&space).await {
                        Ok(hooks) => Ok((space, Some(hooks))),
                        // Endpoints the store holds but cannot read (a
                        // hand-edited Redis key): asking again will not
                        // help, and waiting would hold back every space's
                        // events. The space gets none until they are set
                        // again (which moves the version).
                        Err(e) if e.kind() == ErrorKind::Internal => {
                            tracing::warn!(
                                space = %space, error = %e,
                                "a space's webhook endpoints cannot be read; its events go \
                                 to the operator's endpoints only until they are set again"
                            );
                            Ok((space, None))
                        }
                        Err(e) => Err(e),
                    }
                }
            })
            .buffer_unordered(FETCHES_IN_FLIGHT)
            .try_collect()
            .await?;
        if self.cache.len() + found.len() > MAX_CACHED_SPACES {
            self.cache.clear();
        }
        let now = Instant::now();
        for (space, hooks) in found {
            let unreadable = hooks.is_none();
            let wanted: Vec<Wanted> = hooks
                .unwrap_or_default()
                .into_iter()
                .map(|h| Wanted {
                    kinds: h.kinds,
                    key: LaneKey {
                        url: h.url,
                        secret: h.secret,
                    },
                })
                .collect();
            self.cache.insert(
                space,
                Cached {
                    hooks: wanted.into(),
                    unreadable,
                    used: now,
                },
            );
        }
        Ok(())
    }

    /// The lanes that want `event`, made as needed. Call after
    /// [`refresh`](Self::refresh) with the event; a space not cached
    /// (cannot happen then) wants nothing.
    pub fn targets(&mut self, event: &OutboxEvent) -> Vec<LaneSender> {
        let now = Instant::now();
        let Some(cached) = self.cache.get_mut(&event.space) else {
            return Vec::new();
        };
        cached.used = now;
        if cached.unreadable {
            self.launch.metrics.webhook_space_endpoint_skipped();
        }
        let hooks = cached.hooks.clone();
        let mut targets = Vec::new();
        for w in hooks.iter().filter(|w| w.kinds.contains(&event.kind)) {
            if let Some(lane) = self.lane(&w.key, &w.kinds, now) {
                lane.used = now;
                targets.push(lane.sender.clone());
            }
        }
        targets
    }

    /// The lane of `key`, made if missing and allowed.
    fn lane(
        &mut self,
        key: &LaneKey,
        kinds: &[OutboxKind],
        now: Instant,
    ) -> Option<&mut SpaceLane> {
        if !self.lanes.contains_key(key) {
            let lane = self.make_lane(key, kinds, now)?;
            self.lanes.insert(key.clone(), lane);
        }
        self.lanes.get_mut(key)
    }

    fn make_lane(
        &mut self,
        key: &LaneKey,
        kinds: &[OutboxKind],
        now: Instant,
    ) -> Option<SpaceLane> {
        if self.lanes.len() >= MAX_SPACE_LANES {
            return self.skip(|| {
                tracing::warn!(
                    lanes = MAX_SPACE_LANES,
                    "too many distinct webhook endpoints named by spaces: \
                     events for more are dropped for them and counted"
                );
            });
        }
        let hook = SpaceHook {
            url: key.url.clone(),
            kinds: kinds.to_vec(),
            secret: key.secret.clone(),
        };
        let endpoint = match Endpoint::of_space_hook(&hook) {
            Ok(e) => e,
            // Checked when set; only a hand-edited store gets here.
            Err(e) => {
                return self.skip(|| {
                    tracing::warn!(error = %e, "a space names a webhook endpoint that cannot be used");
                });
            }
        };
        if let Some(Err(e)) = self.launch.allow.check_static(&endpoint.url) {
            // Set before the operator narrowed the allow-list, or written
            // to the store by hand.
            return self.skip(|| {
                tracing::warn!(error = %e, "a space names a webhook endpoint it may not reach");
            });
        }
        let state = Arc::new(EndpointState::new(
            &endpoint,
            SPACE_QUEUE_LIMIT,
            self.launch.metrics.space_webhook(),
        ));
        let sender = self
            .launch
            .kit
            .spawn(endpoint, state.clone(), SPACE_QUEUE_LIMIT, true);
        self.launch.states.lock().push(state);
        tracing::info!(
            endpoint = sender.state.name(),
            "webhook endpoint of a space in use"
        );
        Some(SpaceLane { sender, used: now })
    }

    /// Counts an endpoint that cannot be used; `log` says why, unless
    /// one was logged already (`unusable_logged`).
    fn skip(&mut self, log: impl FnOnce()) -> Option<SpaceLane> {
        self.launch.metrics.webhook_space_endpoint_skipped();
        if !std::mem::replace(&mut self.unusable_logged, true) {
            log();
        }
        None
    }

    /// The most events one lane's queue could take now; 0 without lanes.
    pub fn room(&self) -> usize {
        self.lanes
            .values()
            .map(|l| l.sender.tx.capacity())
            .max()
            .unwrap_or(0)
    }

    /// Closes lanes idle for [`LANE_IDLE`] with empty queues (their task
    /// ends once it has sent what it holds) and forgets spaces idle for
    /// `CACHE_IDLE`; at most every `SWEEP_EVERY`.
    pub fn sweep(&mut self) {
        let now = Instant::now();
        if now.duration_since(self.swept) < SWEEP_EVERY {
            return;
        }
        self.swept = now;
        self.cache
            .retain(|_, c| now.duration_since(c.used) < CACHE_IDLE);
        let mut closed = Vec::new();
        self.lanes.retain(|_, l| {
            let tx = &l.sender.tx;
            let idle =
                now.duration_since(l.used) >= LANE_IDLE && tx.capacity() == tx.max_capacity();
            if idle {
                closed.push(l.sender.state.clone());
            }
            !idle
        });
        if !closed.is_empty() {
            self.launch
                .states
                .lock()
                .retain(|s| !closed.iter().any(|c| Arc::ptr_eq(c, s)));
            self.unusable_logged = false;
        }
    }
}
