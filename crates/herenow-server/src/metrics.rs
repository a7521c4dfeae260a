//! Prometheus metrics, one recorder per [`crate::AppState`].
//!
//! No global recorder is installed: two servers in one process (tests, an
//! embedding application) keep separate numbers. Handles for fixed label
//! sets are registered once at start, so the hot path is an atomic add;
//! label sets that vary (routes, spaces) go through the recorder, and the
//! per-route handles are cached.
//!
//! Metrics:
//!
//! - `herenow_heartbeats_total`: heartbeats received;
//! - `herenow_queries_total{endpoint}`: queries answered, by endpoint;
//! - `herenow_erasures_total`: users erased (`DELETE /v1/users/{id}`);
//! - `herenow_space_members{space,kind}`: members stored per space (gauge,
//!   set by the ticker for up to [`MAX_GAUGED_SPACES`] spaces; a space that
//!   disappears drops out after a minute);
//! - `herenow_sweep_duration_seconds`, `herenow_expired_total`,
//!   `herenow_forgotten_total` (remembered times past their horizon),
//!   `herenow_transitions_total`: background maintenance;
//! - `herenow_http_request_duration_seconds{route,method}`: latency;
//! - `herenow_sse_subscribers`: open event streams (gauge);
//! - `herenow_ws_connections`: open WebSocket connections (gauge);
//! - `herenow_runtime_alive_tasks`: tasks alive in the async runtime that
//!   serves `/metrics` (gauge, read at each scrape): a leak of tasks shows
//!   as a count that keeps growing under steady load;
//!   `herenow_ws_messages_total{type}`: client messages by type;
//!   `herenow_ws_errors_total{code}`: `error` replies and refused tokens by
//!   code; `herenow_ws_closes_total{code}`: sockets the server closed, by
//!   close code;
//! - with a Redis store, its write buffer (sampled every few seconds):
//!   `herenow_redis_up` (1 while Redis answers), `herenow_redis_buffered`
//!   (members whose writes wait for Redis), `herenow_redis_dropped_total`
//!   (writes the buffer's cap refused), `herenow_redis_replayed_total`,
//!   `herenow_redis_unreplicated_total` (with `--redis-wait-replicas`:
//!   writes acknowledged without the replicas asked for);
//! - with a Redis store, every call it makes, labelled `op` (what the call
//!   was for: `heartbeat`, `leave`, `list`, `tick`, `outbox_claim`,
//!   `wait`…, a fixed set): `herenow_redis_command_duration_seconds`
//!   (from sending to the answer, buckets from 50 µs) and
//!   `herenow_redis_errors_total{op,outcome}` (`unavailable`: unreachable,
//!   timed out or failing over; `error`: an answer herenow did not
//!   expect);
//! - with webhooks, per operator endpoint (label `endpoint`, its name;
//!   every endpoint spaces name counts under one, `endpoint="spaces"`,
//!   since whoever holds a write key can name any number of them over
//!   time, and their queue depths are not exported; `GET /v1/webhooks`
//!   shows each):
//!   `herenow_webhook_delivered_total` (events answered 2xx),
//!   `herenow_webhook_retries_total` (requests sent again),
//!   `herenow_webhook_failures_total` (requests that failed),
//!   `herenow_webhook_dropped_total{reason}` (events given up: `overflow`,
//!   `rejected`, `expired`), `herenow_webhook_queue_depth` (gauge) and
//!   `herenow_webhook_request_duration_seconds`; and the store's outbox,
//!   sampled: `herenow_webhook_outbox_depth`, `herenow_webhook_outbox_pending`
//!   (gauges), `herenow_webhook_outbox_trimmed_total`.
//!
//! Every metric carries the label `store` (`memory`, `redis`): several
//! servers on different stores can feed one Prometheus.
//!
//! Every metric is described ([`DESCRIPTIONS`]), so the exposition has a
//! `# HELP` line for each, as well as its `# TYPE`. No label takes
//! unbounded values: the only one named after spaces,
//! `herenow_space_members{space}`, is bounded to [`MAX_GAUGED_SPACES`]
//! spaces (and a space drops out a minute after it stops being set);
//! routes are the router's patterns, codes and ops fixed sets.
//!
//! On a server whose API requires keys, `/metrics` needs a read key too
//! (declared in `crate::routes`).
//!
//! `descriptions.rs` is the catalog: every family's name, kind and HELP
//! text; a metric added here is described there.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::extract::{MatchedPath, Request, State};
use axum::middleware::Next;
use axum::response::Response;
use herenow_core::{OutboxStats, TickReport};
use metrics::{Counter, Gauge, Histogram, Key, KeyName, Label, Level, Metadata, Recorder};
use metrics_exporter_prometheus::{
    Matcher, PrometheusBuilder, PrometheusHandle, PrometheusRecorder,
};
use metrics_util::MetricKindMask;
use parking_lot::RwLock;

mod descriptions;

use descriptions::REDIS_CALL_SECONDS;
pub use descriptions::{DESCRIPTIONS, Kind};

/// Spaces whose size is exported as a gauge; more would let clients that
/// invent space names blow up the metrics' cardinality.
pub const MAX_GAUGED_SPACES: usize = 1_000;

/// The endpoints counted by `herenow_queries_total`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Query {
    /// `GET members/{id}`.
    Member,
    /// `POST status`.
    Status,
    /// `GET online`.
    Online,
    /// `GET count`.
    Count,
    /// `POST online-among`.
    OnlineAmong,
    /// `GET friends/{user}/online`.
    OnlineFriends,
    /// `GET /v1/friends/{user}`.
    Friends,
    /// `GET config`.
    Config,
    /// `GET /v1/spaces`.
    Spaces,
    /// `GET history`.
    History,
    /// `GET /v1/users/{id}`.
    User,
    /// `POST /v1/users/status`.
    UsersStatus,
}

impl Query {
    const ALL: [Query; 12] = [
        Query::Member,
        Query::Status,
        Query::Online,
        Query::Count,
        Query::OnlineAmong,
        Query::OnlineFriends,
        Query::Friends,
        Query::Config,
        Query::Spaces,
        Query::History,
        Query::User,
        Query::UsersStatus,
    ];

    fn label(self) -> &'static str {
        match self {
            Query::Member => "member",
            Query::Status => "status",
            Query::Online => "online",
            Query::Count => "count",
            Query::OnlineAmong => "online_among",
            Query::OnlineFriends => "online_friends",
            Query::Friends => "friends",
            Query::Config => "config",
            Query::Spaces => "spaces",
            Query::History => "history",
            Query::User => "user",
            Query::UsersStatus => "users_status",
        }
    }
}

const META: Metadata<'static> = Metadata::new(module_path!(), Level::INFO, None);

/// Its buckets: a call on one host takes tens of microseconds, so they
/// start lower than requests'.
const REDIS_BUCKETS: [f64; 16] = [
    0.00005, 0.0001, 0.0002, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0,
    2.5, 5.0,
];

/// A Redis store opened with an [`Observer`](herenow_redis::Observer) of
/// these metrics reports each call to [`Metrics::redis_call`].
#[cfg(feature = "redis")]
impl herenow_redis::CallObserver for Metrics {
    fn call(&self, op: &'static str, took: Duration, outcome: herenow_redis::CallOutcome) {
        self.redis_call(op, took, outcome);
    }
}

/// The metrics of one server, on a recorder of its own (not the global
/// one). Cheap to clone (one `Arc`).
#[derive(Clone)]
pub struct Metrics(Arc<Inner>);

struct Inner {
    recorder: PrometheusRecorder,
    handle: PrometheusHandle,
    heartbeats: Counter,
    erasures: Counter,
    queries: HashMap<Query, Counter>,
    sweep: Histogram,
    expired: Counter,
    forgotten: Counter,
    transitions: Counter,
    ws_messages: HashMap<&'static str, Counter>,
    /// Latency histograms by route pattern, then method. Hashed with
    /// foldhash: looked up on every request with keys from the router's
    /// own patterns, not from clients, where SipHash cost more than the
    /// recording itself.
    routes: RwLock<RouteMap<String, RouteMap<&'static str, Histogram>>>,
    /// Redis call latency histograms by `op`, registered on first use.
    #[cfg(feature = "redis")]
    redis_calls: RwLock<RouteMap<&'static str, Histogram>>,
}

type RouteMap<K, V> = HashMap<K, V, foldhash::fast::FixedState>;

fn key(name: &'static str, labels: Vec<Label>) -> Key {
    Key::from_parts(name, labels)
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// A fresh recorder and its handles, labelled `store="memory"`.
    pub fn new() -> Self {
        Self::for_store("memory")
    }

    /// A fresh recorder and its handles; every metric is labelled
    /// `store=STORE` (the store's [`name`](herenow_core::PresenceStore::name)).
    pub fn for_store(store: &'static str) -> Self {
        let latency_buckets = [
            0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0,
            2.5, 5.0, 10.0,
        ];
        let recorder = PrometheusBuilder::new()
            .idle_timeout(MetricKindMask::GAUGE, Some(Duration::from_secs(60)))
            .set_buckets(&latency_buckets)
            .and_then(|b| {
                b.set_buckets_for_metric(
                    Matcher::Full("herenow_sweep_duration_seconds".into()),
                    &latency_buckets,
                )
            })
            .and_then(|b| {
                b.set_buckets_for_metric(Matcher::Full(REDIS_CALL_SECONDS.into()), &REDIS_BUCKETS)
            })
            // The buckets are constant and non-empty, so this cannot fail;
            // fall back to summaries rather than panic if it ever did.
            .unwrap_or_else(|_| PrometheusBuilder::new())
            .add_global_label("store", store)
            .build_recorder();
        for (name, kind, help) in DESCRIPTIONS {
            let (name, help) = (KeyName::from_const_str(name), (*help).into());
            match kind {
                Kind::Counter => recorder.describe_counter(name, None, help),
                Kind::Gauge => recorder.describe_gauge(name, None, help),
                Kind::Histogram => recorder.describe_histogram(name, None, help),
            }
        }
        let handle = recorder.handle();
        let heartbeats = recorder.register_counter(&key("herenow_heartbeats_total", vec![]), &META);
        let erasures = recorder.register_counter(&key("herenow_erasures_total", vec![]), &META);
        let queries = Query::ALL
            .iter()
            .map(|q| {
                let k = key(
                    "herenow_queries_total",
                    vec![Label::new("endpoint", q.label())],
                );
                (*q, recorder.register_counter(&k, &META))
            })
            .collect();
        let sweep =
            recorder.register_histogram(&key("herenow_sweep_duration_seconds", vec![]), &META);
        let expired = recorder.register_counter(&key("herenow_expired_total", vec![]), &META);
        let forgotten = recorder.register_counter(&key("herenow_forgotten_total", vec![]), &META);
        let transitions =
            recorder.register_counter(&key("herenow_transitions_total", vec![]), &META);
        let ws_messages = crate::protocol::WS_MESSAGE_TYPES
            .iter()
            .map(|t| {
                let k = key("herenow_ws_messages_total", vec![Label::new("type", *t)]);
                (*t, recorder.register_counter(&k, &META))
            })
            .collect();
        Self(Arc::new(Inner {
            recorder,
            handle,
            heartbeats,
            erasures,
            queries,
            sweep,
            expired,
            forgotten,
            transitions,
            ws_messages,
            routes: RwLock::new(RouteMap::default()),
            #[cfg(feature = "redis")]
            redis_calls: RwLock::new(RouteMap::default()),
        }))
    }

    /// Counts received heartbeats.
    pub fn heartbeats(&self, n: u64) {
        self.0.heartbeats.increment(n);
    }

    /// Counts one erased user.
    pub fn erasure(&self) {
        self.0.erasures.increment(1);
    }

    /// Counts one answered query.
    pub fn query(&self, q: Query) {
        if let Some(c) = self.0.queries.get(&q) {
            c.increment(1);
        }
    }

    /// Records one round of background maintenance.
    pub fn sweep(&self, took: Duration, report: &TickReport) {
        self.0.sweep.record(took.as_secs_f64());
        self.0.expired.increment(report.expired);
        self.0.forgotten.increment(report.forgotten);
        self.0.transitions.increment(report.transitions);
    }

    /// Sets the members-per-space gauge of one space.
    pub fn space_members(&self, space: &str, users: u64, guests: u64) {
        for (kind, n) in [("user", users), ("guest", guests)] {
            let k = key(
                "herenow_space_members",
                vec![
                    Label::new("space", space.to_owned()),
                    Label::new("kind", kind),
                ],
            );
            self.0.recorder.register_gauge(&k, &META).set(n as f64);
        }
    }

    /// Sets the open-event-streams gauge.
    pub fn sse_subscribers(&self, n: usize) {
        self.0
            .recorder
            .register_gauge(&key("herenow_sse_subscribers", vec![]), &META)
            .set(n as f64);
    }

    /// Sets the open-WebSockets gauge.
    pub fn ws_connections(&self, n: usize) {
        self.0
            .recorder
            .register_gauge(&key("herenow_ws_connections", vec![]), &META)
            .set(n as f64);
    }

    /// Sets the alive-tasks gauge (the runtime's count, read by the caller).
    pub fn runtime_alive_tasks(&self, n: usize) {
        self.0
            .recorder
            .register_gauge(&key("herenow_runtime_alive_tasks", vec![]), &META)
            .set(n as f64);
    }

    /// Counts one client message of a type from [`crate::protocol::WS_MESSAGE_TYPES`].
    pub fn ws_message(&self, kind: &'static str) {
        if let Some(c) = self.0.ws_messages.get(kind) {
            c.increment(1);
        }
    }

    /// Counts one WebSocket error by its code (a fixed set: the protocol's
    /// and the core's codes).
    pub fn ws_error(&self, code: &'static str) {
        let k = key("herenow_ws_errors_total", vec![Label::new("code", code)]);
        self.0.recorder.register_counter(&k, &META).increment(1);
    }

    /// Counts one socket the server closed, by close code.
    pub fn ws_close(&self, code: u16) {
        let k = key(
            "herenow_ws_closes_total",
            vec![Label::new("code", code.to_string())],
        );
        self.0.recorder.register_counter(&k, &META).increment(1);
    }

    /// Sets the gauges and counters of a Redis store's write buffer.
    #[cfg(feature = "redis")]
    pub fn redis(&self, stats: &herenow_redis::RedisStats) {
        let r = &self.0.recorder;
        r.register_gauge(&key("herenow_redis_up", vec![]), &META)
            .set(if stats.redis_up { 1.0 } else { 0.0 });
        r.register_gauge(&key("herenow_redis_buffered", vec![]), &META)
            .set(stats.buffered as f64);
        r.register_counter(&key("herenow_redis_dropped_total", vec![]), &META)
            .absolute(stats.dropped);
        r.register_counter(&key("herenow_redis_replayed_total", vec![]), &META)
            .absolute(stats.replayed);
        r.register_counter(&key("herenow_redis_unreplicated_total", vec![]), &META)
            .absolute(stats.unreplicated);
    }

    /// Records one call a Redis store made (see [`CallObserver`]).
    ///
    /// [`CallObserver`]: herenow_redis::CallObserver
    #[cfg(feature = "redis")]
    pub fn redis_call(
        &self,
        op: &'static str,
        took: Duration,
        outcome: herenow_redis::CallOutcome,
    ) {
        let secs = took.as_secs_f64();
        let cached = self.0.redis_calls.read().get(op).cloned();
        let h = cached.unwrap_or_else(|| {
            let k = key(REDIS_CALL_SECONDS, vec![Label::new("op", op)]);
            let h = self.0.recorder.register_histogram(&k, &META);
            self.0.redis_calls.write().insert(op, h.clone());
            h
        });
        h.record(secs);
        if outcome != herenow_redis::CallOutcome::Ok {
            // Rare: registered (looked up) each time.
            let k = key(
                "herenow_redis_errors_total",
                vec![
                    Label::new("op", op),
                    Label::new("outcome", outcome.as_str()),
                ],
            );
            self.0.recorder.register_counter(&k, &META).increment(1);
        }
    }

    /// The handles of one operator webhook endpoint, labelled
    /// `endpoint=NAME`.
    pub fn webhook(&self, endpoint: &str) -> WebhookMetrics {
        self.webhook_labelled(endpoint, true)
    }

    /// The handles of an endpoint a space names: all of them count under
    /// `endpoint="spaces"` (their number has no bound over time), without
    /// a queue gauge (one gauge cannot hold many queues).
    pub fn space_webhook(&self) -> WebhookMetrics {
        self.webhook_labelled("spaces", false)
    }

    fn webhook_labelled(&self, endpoint: &str, queue: bool) -> WebhookMetrics {
        let r = &self.0.recorder;
        let label = || vec![Label::new("endpoint", endpoint.to_owned())];
        let counter = |name| r.register_counter(&key(name, label()), &META);
        WebhookMetrics {
            delivered: counter("herenow_webhook_delivered_total"),
            retried: counter("herenow_webhook_retries_total"),
            failed: counter("herenow_webhook_failures_total"),
            dropped: WebhookDrop::ALL.map(|reason| {
                let mut labels = label();
                labels.push(Label::new("reason", reason.label()));
                r.register_counter(&key("herenow_webhook_dropped_total", labels), &META)
            }),
            queue: if queue {
                r.register_gauge(&key("herenow_webhook_queue_depth", label()), &META)
            } else {
                Gauge::noop()
            },
            latency: r.register_histogram(
                &key("herenow_webhook_request_duration_seconds", label()),
                &META,
            ),
        }
    }

    /// Sets the gauges and counter of the store's webhook outbox.
    pub fn webhook_outbox(&self, stats: &OutboxStats) {
        let r = &self.0.recorder;
        r.register_gauge(&key("herenow_webhook_outbox_depth", vec![]), &META)
            .set(stats.depth as f64);
        r.register_gauge(&key("herenow_webhook_outbox_pending", vec![]), &META)
            .set(stats.pending as f64);
        r.register_counter(&key("herenow_webhook_outbox_trimmed_total", vec![]), &META)
            .absolute(stats.trimmed);
    }

    /// An event a space's webhook endpoint did not get: this server runs
    /// as many lanes to spaces' endpoints as it may, or the endpoint the
    /// store holds cannot be used.
    pub fn webhook_space_endpoint_skipped(&self) {
        self.0
            .recorder
            .register_counter(
                &key("herenow_webhook_space_endpoint_skipped_total", vec![]),
                &META,
            )
            .increment(1);
    }

    /// Records a request's latency under its route pattern.
    pub fn request(&self, route: &str, method: &'static str, took: Duration) {
        let secs = took.as_secs_f64();
        if let Some(h) = self.0.routes.read().get(route).and_then(|m| m.get(method)) {
            h.record(secs);
            return;
        }
        let k = key(
            "herenow_http_request_duration_seconds",
            vec![
                Label::new("route", route.to_owned()),
                Label::new("method", method),
            ],
        );
        let h = self.0.recorder.register_histogram(&k, &META);
        h.record(secs);
        self.0
            .routes
            .write()
            .entry(route.to_owned())
            .or_default()
            .insert(method, h);
    }

    /// Folds histogram samples into their buckets; call now and then.
    pub fn upkeep(&self) {
        self.0.handle.run_upkeep();
    }

    /// The Prometheus text exposition that `/metrics` serves.
    pub fn render(&self) -> String {
        self.0.handle.render()
    }
}

/// Why events were dropped for a webhook endpoint.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WebhookDrop {
    /// Its queue was full.
    Overflow = 0,
    /// It refused them (a 4xx other than 408 and 429, or a redirect).
    Rejected = 1,
    /// They still failed after the maximum age.
    Expired = 2,
}

impl WebhookDrop {
    /// Every reason, in index order.
    pub const ALL: [WebhookDrop; 3] = [
        WebhookDrop::Overflow,
        WebhookDrop::Rejected,
        WebhookDrop::Expired,
    ];

    /// The `reason` label.
    pub fn label(self) -> &'static str {
        match self {
            WebhookDrop::Overflow => "overflow",
            WebhookDrop::Rejected => "rejected",
            WebhookDrop::Expired => "expired",
        }
    }
}

/// One webhook endpoint's metric handles (registered once, so counting is
/// an atomic add). The queue gauge is set at every change and again by the
/// sampler every few seconds, so the recorder's idle timeout never drops
/// a quiet endpoint's.
#[derive(Clone)]
pub struct WebhookMetrics {
    delivered: Counter,
    retried: Counter,
    failed: Counter,
    dropped: [Counter; 3],
    queue: Gauge,
    latency: Histogram,
}

impl WebhookMetrics {
    /// A request answered 2xx, carrying `events` events.
    pub fn delivered(&self, events: usize, took: Duration) {
        self.delivered.increment(events as u64);
        self.latency.record(took.as_secs_f64());
    }

    /// A request failed.
    pub fn failed(&self, took: Duration) {
        self.failed.increment(1);
        self.latency.record(took.as_secs_f64());
    }

    /// A failed request is sent again.
    pub fn retried(&self) {
        self.retried.increment(1);
    }

    /// `events` events dropped for `reason`.
    pub fn dropped(&self, reason: WebhookDrop, events: usize) {
        self.dropped[reason as usize].increment(events as u64);
    }

    /// Events waiting in the endpoint's queue.
    pub fn queue_depth(&self, depth: usize) {
        self.queue.set(depth as f64);
    }
}

/// Middleware: records each request's latency under its matched route.
/// Installed with `route_layer`, so unknown routes (unbounded paths) are
/// not recorded. It takes the metrics out of the state (`FromRef`), so
/// this module does not depend on the state's. Routes with more to do
/// per request time themselves with [`Latency`] (`crate::layers`).
pub async fn track_latency(
    State(metrics): State<Metrics>,
    request: Request,
    next: Next,
) -> Response {
    let timer = Latency::start(&request);
    let response = next.run(request).await;
    timer.finish(&metrics);
    response
}

/// A request's latency being measured: started before anything else runs
/// on a route, recorded under the route's pattern once it answered.
pub struct Latency {
    started: Instant,
    route: Option<MatchedPath>,
    method: &'static str,
}

impl Latency {
    /// Starts timing `request`.
    pub fn start(request: &Request) -> Self {
        Self {
            started: Instant::now(),
            route: request.extensions().get::<MatchedPath>().cloned(),
            method: method_label(request.method()),
        }
    }

    /// Records the time since [`Latency::start`] (nothing for a request
    /// that matched no route).
    pub fn finish(self, metrics: &Metrics) {
        if let Some(route) = self.route {
            metrics.request(route.as_str(), self.method, self.started.elapsed());
        }
    }
}

fn method_label(m: &axum::http::Method) -> &'static str {
    match *m {
        axum::http::Method::GET => "GET",
        axum::http::Method::POST => "POST",
        axum::http::Method::PUT => "PUT",
        axum::http::Method::DELETE => "DELETE",
        axum::http::Method::HEAD => "HEAD",
        _ => "OTHER",
    }
}
