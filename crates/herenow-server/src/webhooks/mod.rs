//! Webhooks: telling a site's backend who came and went, signed as the
//! Standard Webhooks specification says, delivered at least once.
//!
//! The events wait in the store's outbox ([`herenow_core::outbox`]), not
//! here: in Redis every server shares it, and with `--data-dir` the memory
//! store keeps it across a restart. This module only claims, delivers and
//! acknowledges. The claim loop ([`Webhooks::start`]) hands each claimed
//! event to the queues of the endpoints whose filter wants it, and
//! acknowledges it once every one of them finished it (delivered, or gave
//! up and counted), at once when none wants it.
//!
//! `deliver` drains one endpoint's bounded queue; `space` finds the
//! endpoints spaces name and `allow` says where they may send; `endpoint`
//! is the configuration and its filter, `sign` the signatures, `wire` the
//! body and headers, `state` what `GET /v1/webhooks` and `/metrics` show;
//! `live` follows a reload ([`Webhooks::reconfigure`]). Pusher apps'
//! endpoints ([`PusherTarget`](endpoint::PusherTarget)) get lanes like the operator's, each event
//! written in the [`EventFormat`] the target brings (client events are
//! kept in the outbox as messages, [`Webhooks::keep_message`]).
//!
//! A server that dies mid-delivery leaves its claimed events pending; once
//! they have been idle for `reclaim_idle`, another server's claim takes
//! them over and delivers them again: at least once, with stable event ids
//! for receivers to deduplicate. On shutdown, events in queues are not
//! acknowledged: the next start (or another server) delivers them.

pub mod allow;
pub mod deliver;
pub mod endpoint;
mod live;
pub mod sign;
pub mod space;
pub mod state;
pub mod wire;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use arc_swap::ArcSwap;
use herenow_core::{Capability, ErrorKind, Millis, PresenceStore, SpaceName, WebhookOutbox};
use parking_lot::Mutex;
use reqwest::Client;
use serde::Serialize;
use tokio::sync::{Notify, watch};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use utoipa::ToSchema;

pub use allow::{AllowError, SpaceWebhookAllow};
pub use deliver::Attempt;
pub use endpoint::{Endpoint, EventFormat, WebhookConfig, WebhookError};
pub use live::WebhooksChange;
pub(crate) use live::differing_flags;
pub use sign::Secret;

use crate::metrics::Metrics;
use deliver::{LaneKit, LaneSender, Queued, RetryPolicy};
use endpoint::Filter;
use live::Live;
use space::{Launch, SpaceRoutes};
use state::{EndpointState, EndpointView, InFlight, OutboxView};

/// Most events claimed at once.
const CLAIM_MAX: usize = 500;

/// The longest pause between claims while the store fails.
const CLAIM_BACKOFF_MAX: Duration = Duration::from_secs(5);

/// How often a server without endpoints of its own looks whether a space
/// named some.
const DORMANT_POLL: Duration = Duration::from_secs(2);

/// Webhooks of one server: its endpoints' numbers from the start, its
/// tasks once [`start`](Self::start)ed. Cheap to clone (one `Arc`).
#[derive(Clone)]
pub struct Webhooks(Arc<Shared>);

struct Shared {
    /// The configuration it started with: what `live` does not hold
    /// takes a restart to change.
    config: WebhookConfig,
    /// The endpoints and secrets of now ([`Webhooks::reconfigure`]).
    live: ArcSwap<Live>,
    /// Counts reconfigurations, for the claim loop to follow.
    changed: watch::Sender<u64>,
    /// The lanes to spaces' endpoints, as the claim loop makes them.
    space_states: Arc<Mutex<Vec<Arc<EndpointState>>>>,
    /// See [`Webhooks::space_hooks_changed`].
    wake: Notify,
    /// Whether the claim loop claims (operator endpoints, or spaces'
    /// endpoints found).
    active: AtomicBool,
    in_flight: Arc<InFlight>,
    consumer: String,
    store: Arc<dyn PresenceStore>,
    metrics: Metrics,
}

impl Shared {
    /// The store's outbox, or `Unsupported` naming the store where it has
    /// none (a seed's layout).
    fn outbox(&self) -> herenow_core::Result<&dyn WebhookOutbox> {
        self.store
            .webhook_outbox()
            .ok_or_else(|| self.store.lacks(Capability::WebhookOutbox))
    }
}

/// Why webhooks could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The configuration or the HTTP client.
    #[error(transparent)]
    Config(#[from] WebhookError),
    /// The store has no outbox (a seed's layout, say) or failed to open it.
    #[error("the store's webhook outbox: {0}")]
    Store(#[from] herenow_core::Error),
}

impl Webhooks {
    /// Webhooks over `store` as `config` says, counted into `metrics`.
    /// Nothing runs before [`start`](Self::start).
    pub fn new(config: WebhookConfig, store: Arc<dyn PresenceStore>, metrics: &Metrics) -> Self {
        let live = Live::new(&config, None, metrics);
        Self(Arc::new(Shared {
            config,
            live: ArcSwap::from_pointee(live),
            changed: watch::Sender::new(0),
            space_states: Arc::default(),
            wake: Notify::new(),
            active: AtomicBool::new(false),
            in_flight: Arc::new(InFlight::default()),
            consumer: consumer_name(),
            store,
            metrics: metrics.clone(),
        }))
    }

    /// Whether the operator configured any endpoint (`--webhook` or
    /// `--pusher-webhook`).
    pub fn is_on(&self) -> bool {
        !self.0.live.load().endpoints.is_empty()
    }

    /// Whether a `--pusher-webhook` of app `app_id` asks for its client
    /// events.
    pub fn wants_client_events(&self, app_id: &str) -> bool {
        self.0
            .live
            .load()
            .pusher
            .iter()
            .any(|t| t.app_id == app_id && t.client_events)
    }

    /// Keeps `body` in the store's outbox as a message of `space`, so
    /// that one server delivers it once to the endpoints that take
    /// messages, after a restart too.
    pub async fn keep_message(&self, space: &SpaceName, body: &str) -> herenow_core::Result<()> {
        self.0.outbox()?.outbox_message(space, body).await?;
        Ok(())
    }

    /// Whether this server delivers: operator endpoints, or spaces'
    /// endpoints found in the store.
    pub fn is_active(&self) -> bool {
        self.is_on() || self.0.active.load(Ordering::Relaxed)
    }

    /// The secret that signs for endpoints given without one
    /// (`--webhook-secret`).
    pub fn default_secret(&self) -> Option<Secret> {
        self.0.live.load().default_secret.clone()
    }

    /// Where spaces' endpoints may send (`--space-webhook-allow`).
    pub fn space_allow(&self) -> &SpaceWebhookAllow {
        &self.0.config.space_allow
    }

    /// This server set a space's endpoints: a sleeping claim loop looks
    /// at once (the others find them within a few seconds).
    pub fn space_hooks_changed(&self) {
        self.0.wake.notify_one();
    }

    /// Checks the configuration, sets up the HTTP client and, with
    /// operator endpoints, opens the store's outbox, so that a store
    /// without one (a seed's layout) or a bad setting stops a start before
    /// the server announces itself. [`start`](Self::start) does it too;
    /// doing it twice is harmless. Without operator endpoints the store
    /// keeps no outbox until a space names an endpoint.
    pub async fn prepare(&self) -> Result<Client, StartError> {
        let shared = &self.0;
        shared.config.check()?;
        let client = http_client(shared.config.timeout)?;
        if self.is_on() {
            shared
                .outbox()?
                .outbox_open(shared.config.outbox_options(false))
                .await?;
        }
        Ok(client)
    }

    /// Opens the store's outbox ([`prepare`](Self::prepare)) and starts the
    /// claim loop and one task per operator endpoint on `tracker`, until
    /// `token` is cancelled. Without operator endpoints, and on a store
    /// that keeps spaces' endpoints, the claim loop sleeps until a space
    /// names one; on a store that cannot (a seed's layout) nothing starts.
    pub async fn start(
        &self,
        tracker: &TaskTracker,
        token: &CancellationToken,
    ) -> Result<(), StartError> {
        let shared = &self.0;
        if !self.is_on() && shared.store.space_webhooks().is_none() {
            return Ok(());
        }
        let client = self.prepare().await?;
        let space_client = space_client(shared.config.timeout, &shared.config.space_allow)?;
        let policy = RetryPolicy {
            base: shared.config.backoff_base,
            cap: shared.config.backoff_cap,
            max_age: shared.config.max_age,
        };
        let kit = LaneKit {
            client,
            store: shared.store.clone(),
            in_flight: shared.in_flight.clone(),
            policy,
            token: token.clone(),
            tracker: tracker.clone(),
        };
        // Seen from here on: a reconfiguration after this is followed.
        let changes = shared.changed.subscribe();
        let routes = live::routes(shared, &shared.live.load(), Vec::new(), &kit);
        let spaces = SpaceRoutes::new(Launch {
            kit: LaneKit {
                client: space_client,
                ..kit.clone()
            },
            allow: Arc::new(shared.config.space_allow.clone()),
            metrics: shared.metrics.clone(),
            states: shared.space_states.clone(),
        });
        if self.is_on() {
            tracing::info!(
                endpoints = routes.len(),
                consumer = %shared.consumer,
                "webhooks on"
            );
        }
        let lanes = Lanes {
            routes,
            kit,
            changes,
        };
        tracker.spawn(claim_loop(self.clone(), lanes, spaces, token.clone()));
        Ok(())
    }

    /// What `GET /v1/webhooks` shows: every endpoint, and the store's
    /// outbox (`None` when webhooks are off or the store did not answer).
    pub async fn view(&self) -> WebhooksView {
        let active = self.is_active();
        let outbox = match self.0.store.webhook_outbox() {
            Some(outbox) if active => outbox.outbox_stats().await.ok().map(OutboxView::from),
            _ => None,
        };
        WebhooksView {
            enabled: active,
            consumer: active.then(|| self.0.consumer.clone()),
            endpoints: self.states().iter().map(|s| s.view()).collect(),
            outbox,
        }
    }

    /// Every endpoint's numbers: the operator's, then spaces'.
    fn states(&self) -> Vec<Arc<EndpointState>> {
        let mut states = self.0.live.load().states.clone();
        states.extend(self.0.space_states.lock().iter().cloned());
        states
    }

    /// Samples the gauges: queue depths (set again so they never go
    /// stale) and the store's outbox.
    pub async fn sample(&self) {
        if !self.is_active() {
            return;
        }
        for s in self.states() {
            s.set_depth(s.view().queue.depth as usize);
        }
        let Some(outbox) = self.0.store.webhook_outbox() else {
            return;
        };
        match outbox.outbox_stats().await {
            Ok(stats) => self.0.metrics.webhook_outbox(&stats),
            Err(e) => tracing::debug!(error = %e, "reading the webhook outbox's stats failed"),
        }
    }
}

/// Every endpoint and the outbox, as `GET /v1/webhooks` answers.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct WebhooksView {
    /// Whether this server delivers webhooks: the operator configured
    /// endpoints, or spaces name some.
    pub enabled: bool,
    /// This server's name as an outbox consumer.
    pub consumer: Option<String>,
    /// Each operator endpoint, in configuration order, then each
    /// endpoint spaces name that this server delivers to now
    /// (`space:HOST:HASH`).
    pub endpoints: Vec<EndpointView>,
    /// The store's outbox (shared by every server on one Redis).
    pub outbox: Option<OutboxView>,
}

/// An endpoint as the claim loop sees it.
struct Route {
    filter: Filter,
    /// The format it takes when not herenow's (`--pusher-webhook`).
    format: Option<EventFormat>,
    lane: LaneSender,
}

/// An endpoint as configured: the operator's, or a Pusher app's.
struct Configured {
    endpoint: Endpoint,
    /// The format it takes when not herenow's.
    format: Option<EventFormat>,
}

/// The claim loop's lanes to the configured endpoints, and what it needs
/// to follow their reconfigurations.
struct Lanes {
    routes: Vec<Route>,
    kit: LaneKit,
    changes: watch::Receiver<u64>,
}

impl Lanes {
    /// Follows a reconfiguration, if one came since it last looked.
    fn follow(&mut self, shared: &Shared) {
        if self.changes.has_changed().unwrap_or(false) {
            self.changes.mark_unchanged();
            let old = std::mem::take(&mut self.routes);
            self.routes = live::routes(shared, &shared.live.load(), old, &self.kit);
        }
    }
}

async fn claim_loop(
    hooks: Webhooks,
    mut lanes: Lanes,
    mut spaces: SpaceRoutes,
    token: CancellationToken,
) {
    let shared = &hooks.0;
    // `start` runs no claim loop on a store without an outbox: `prepare`
    // refuses operator endpoints there, and spaces' endpoints come with
    // an outbox.
    let Some(outbox) = shared.store.webhook_outbox() else {
        return;
    };
    if lanes.routes.is_empty() && !wait_for_space_hooks(shared, &mut lanes, &token).await {
        return;
    }
    if lanes.routes.is_empty() {
        // Opened from this server too: its store captures from now on
        // (on Redis, the others follow the switch within a tick).
        // No endpoints of this server's own: a memory store stops
        // capturing once no space names any, as after a restart.
        let options = shared.config.outbox_options(true);
        let mut failures = 0u32;
        while let Err(e) = outbox.outbox_open(options).await {
            let what = "opening the webhook outbox";
            if !retry_after(e, what, shared.config.poll, &mut failures, &token).await {
                return;
            }
        }
        tracing::info!(consumer = %shared.consumer, "webhooks on: spaces name endpoints");
    }
    shared.active.store(true, Ordering::Relaxed);
    let reclaim_ms =
        Millis::try_from(shared.config.reclaim_idle.as_millis()).unwrap_or(Millis::MAX);
    let poll = shared.config.poll;
    let mut wait = Duration::ZERO;
    let mut failures = 0u32;
    loop {
        tokio::select! {
            biased;
            _ = token.cancelled() => break,
            _ = tokio::time::sleep(wait) => {}
        }
        acknowledge(shared, outbox).await;
        lanes.follow(shared);
        let routes = &lanes.routes;
        // Claimed even when no queue has room (`max` 0): a claim is how the
        // store knows this server lives, so its spaces stay its own while
        // a slow endpoint holds their events. Spaces' endpoints get lanes
        // as their events come, so without operator endpoints a full
        // claim is always wanted.
        let room = if routes.is_empty() {
            CLAIM_MAX
        } else {
            let own = routes
                .iter()
                .map(|r| r.lane.tx.capacity())
                .max()
                .unwrap_or(0);
            own.max(spaces.room())
        };
        let want = room.min(CLAIM_MAX);
        let claimed = match outbox
            .outbox_claim(&shared.consumer, want, reclaim_ms)
            .await
        {
            Ok(events) => events,
            Err(e) => {
                if !retry_after(e, "claiming webhook events", poll, &mut failures, &token).await {
                    break;
                }
                wait = Duration::ZERO;
                continue;
            }
        };
        // Every space's endpoints are known before any of its events is
        // routed: until the store answers, the claimed events wait here
        // (a retry per round, like a failed claim).
        while let Err(e) = spaces.refresh(&claimed).await {
            let what = "reading spaces' webhook endpoints";
            if !retry_after(e, what, poll, &mut failures, &token).await {
                // Unrouted, unacknowledged: delivered after a restart.
                return;
            }
        }
        if failures > 0 {
            tracing::info!("claiming webhook events works again");
        }
        failures = 0;
        let full = want > 0 && claimed.len() >= want;
        for event in claimed {
            route(shared, &lanes.routes, &mut spaces, event);
        }
        spaces.sweep();
        wait = if full { Duration::ZERO } else { poll };
    }
    // What is finished is acknowledged; the rest waits in the outbox.
    acknowledge(shared, outbox).await;
}

/// The pause after `failures` failures in a row: `poll` doubled per
/// failure, capped.
fn backoff(poll: Duration, failures: u32) -> Duration {
    poll.saturating_mul(1u32 << failures.min(6))
        .min(CLAIM_BACKOFF_MAX)
}

/// After a failed try at `what`: warns on the first failure in a row,
/// counts it, then waits out the [`backoff`]. `false` when `token` is
/// cancelled first.
async fn retry_after(
    error: impl std::fmt::Display,
    what: &str,
    poll: Duration,
    failures: &mut u32,
    token: &CancellationToken,
) -> bool {
    if *failures == 0 {
        tracing::warn!(error = %error, "{what} failed; retrying");
    }
    *failures = failures.saturating_add(1);
    tokio::select! {
        biased;
        _ = token.cancelled() => false,
        _ = tokio::time::sleep(backoff(poll, *failures)) => true,
    }
}

/// Sleeps until the store holds spaces' endpoints or a reconfiguration
/// brings endpoints of the operator's (`true`), or until shutdown or a
/// store that cannot hold them (`false`).
async fn wait_for_space_hooks(
    shared: &Shared,
    lanes: &mut Lanes,
    token: &CancellationToken,
) -> bool {
    let Some(endpoints) = shared.store.space_webhooks() else {
        return false;
    };
    loop {
        lanes.follow(shared);
        if !lanes.routes.is_empty() {
            return true;
        }
        match endpoints.space_hooks_version().await {
            Ok(v) if v > 0 => return true,
            Ok(_) => {}
            Err(e) if e.kind() == ErrorKind::Unsupported => return false,
            Err(e) => tracing::debug!(error = %e, "looking for spaces' webhook endpoints failed"),
        }
        tokio::select! {
            biased;
            _ = token.cancelled() => return false,
            _ = shared.wake.notified() => {}
            _ = lanes.changes.changed() => {}
            _ = tokio::time::sleep(DORMANT_POLL) => {}
        }
    }
}

/// Acknowledges the events every endpoint finished; a failure keeps them
/// for the next round.
async fn acknowledge(shared: &Shared, outbox: &dyn WebhookOutbox) {
    let acks = shared.in_flight.take_acks();
    if acks.is_empty() {
        return;
    }
    // A store takes at most a batch's worth of ids per call; a busy
    // round finishes more than that.
    let mut failed = Vec::new();
    for chunk in acks.chunks(herenow_core::limits::MAX_BATCH) {
        if let Err(e) = outbox.outbox_ack(chunk).await {
            tracing::warn!(error = %e, events = chunk.len(), "acknowledging webhook events failed");
            failed.extend_from_slice(chunk);
        }
    }
    if !failed.is_empty() {
        shared.in_flight.retry_acks(failed);
    }
}

/// Hands `event` to the queues of the endpoints that want it: the
/// operator's whose filter wants it, and those its space names.
fn route(
    shared: &Shared,
    routes: &[Route],
    spaces: &mut SpaceRoutes,
    event: herenow_core::OutboxEvent,
) {
    // Ours already: the store handed it out again after the reclaim time.
    if shared.in_flight.holds(&event.id) {
        return;
    }
    let mut targets: Vec<LaneSender> = Vec::new();
    let mut foreign: Vec<(Vec<u8>, LaneSender)> = Vec::new();
    for r in routes.iter().filter(|r| r.filter.wants(&event)) {
        let target = r.lane.clone();
        match r.format {
            // What its format does not tell (Pusher's: a guest) goes
            // nowhere.
            Some(format) => foreign.extend(format(&event).map(|json| (json, target))),
            None => targets.push(target),
        }
    }
    targets.extend(spaces.targets(&event));
    shared.in_flight.hold(
        event.id.clone(),
        u32::try_from(targets.len() + foreign.len()).unwrap_or(u32::MAX),
    );
    let queue = |targets: &[LaneSender], json: Vec<u8>| {
        let queued = Arc::new(Queued {
            json,
            at_ms: event.at_ms,
            id: event.id.clone(),
        });
        for t in targets {
            if !t.send(&queued) {
                shared.in_flight.finish([queued.id.as_str()]);
            }
        }
    };
    for (json, target) in foreign {
        queue(std::slice::from_ref(&target), json);
    }
    if !targets.is_empty() {
        queue(&targets, wire::event_json(&event));
    }
}

/// The HTTP client every endpoint shares: rustls over ring, the system's
/// roots or `SSL_CERT_FILE` / `SSL_CERT_DIR`, no redirects, `timeout` per
/// request, idle connections kept for reuse.
pub fn http_client(timeout: Duration) -> Result<Client, WebhookError> {
    client_builder(timeout)?
        .build()
        .map_err(|e| WebhookError::Client(e.to_string()))
}

/// The client of spaces' endpoints: [`http_client`]'s, with a resolver
/// that refuses names resolving to addresses `allow` does not let through
/// ([`allow::GuardedResolver`]), and no proxy (a proxy would resolve the
/// endpoint's name, not this client).
pub fn space_client(timeout: Duration, allow: &SpaceWebhookAllow) -> Result<Client, WebhookError> {
    client_builder(timeout)?
        .dns_resolver(Arc::new(allow::GuardedResolver::new(allow.clone())))
        .no_proxy()
        .build()
        .map_err(|e| WebhookError::Client(e.to_string()))
}

fn client_builder(timeout: Duration) -> Result<reqwest::ClientBuilder, WebhookError> {
    // This client brings its own provider; installing ring process-wide
    // too keeps other reqwest clients of the program working, since the
    // feature this one needs leaves reqwest without a provider of its own.
    // An error only means one is installed already.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = rustls::RootCertStore::empty();
    let found = rustls_native_certs::load_native_certs();
    for cert in found.certs {
        // A certificate rustls cannot use is skipped, as browsers do.
        let _ = roots.add(cert);
    }
    if roots.is_empty() {
        tracing::warn!(
            errors = ?found.errors,
            "no trusted root certificates found: https webhooks will fail; set SSL_CERT_FILE"
        );
    }
    let mut tls = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| WebhookError::Client(e.to_string()))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    tls.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Client::builder()
        .tls_backend_preconfigured(tls)
        .redirect(reqwest::redirect::Policy::none())
        .timeout(timeout)
        .connect_timeout(timeout)
        .pool_idle_timeout(Duration::from_secs(60)))
}

/// Sends one signed sample event (`wire::sample`) to `url`, as
/// `herenow webhooks test` does; answers how it went and the message id.
pub async fn send_test(
    url: &str,
    secret: Secret,
    timeout: Duration,
    now_ms: Millis,
) -> Result<(Attempt, String), WebhookError> {
    let endpoint = Endpoint::parse(url, 0, Some(&secret))?;
    let client = http_client(timeout)?;
    let batch = wire::sample(now_ms);
    let attempt = deliver::send(&client, &endpoint, &batch, now_ms).await;
    Ok((attempt, batch.id))
}

/// `HOST-PID-RANDOM`: unique per process, readable in Redis' consumer
/// list. The host is the kernel's host name (a library reads no
/// environment).
fn consumer_name() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").ok();
    let random = getrandom::u32().unwrap_or(0);
    name_of(host.as_deref(), std::process::id(), random)
}

/// `host-pid-random`, the host cut to 64 bytes: a store keeps consumer
/// names up to `limits::MAX_OUTBOX_CONSUMER_BYTES`, and a host name can be
/// anything.
fn name_of(host: Option<&str>, pid: u32, random: u32) -> String {
    let host = host
        .map(str::trim)
        .filter(|h| !h.is_empty())
        .unwrap_or("herenow");
    let mut end = host.len().min(64);
    while !host.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}-{pid}-{random:08x}", &host[..end])
}

#[cfg(test)]
mod name_tests {
    use super::name_of;

    #[test]
    fn consumer_names_stay_short_whatever_the_host() {
        assert_eq!(name_of(Some("web-1\n"), 7, 255), "web-1-7-000000ff");
        assert_eq!(name_of(None, 7, 0), "herenow-7-00000000");
        let long = name_of(Some(&"é".repeat(500)), 7, 0);
        assert!(long.len() <= 64 + 20, "{long}");
        assert!(long.len() <= herenow_core::limits::MAX_OUTBOX_CONSUMER_BYTES);
    }
}
