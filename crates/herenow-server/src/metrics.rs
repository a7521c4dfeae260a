//! Prometheus metrics, one recorder per [`crate::AppState`].
//!
//! No global recorder is installed: two servers in one process (tests, an
//! embedding application) keep separate numbers. Handles for fixed label
//! sets are registered once at start, so the hot path is an atomic add;
//! label sets that vary (routes, spaces) go through the recorder, and the
//! per-route handles are cached.
//!
//! Every metric carries the label `store` (`memory`, `redis`): several
//! servers on different stores can feed one Prometheus.
//!
//! Every metric is described ([`DESCRIPTIONS`], in `descriptions.rs`: the
//! catalog of names, kinds and HELP texts, where a new metric is added), so
//! the exposition has a `# HELP` line for each. No label takes
//! unbounded values: the only one named after spaces,
//! `herenow_space_members{space}`, is bounded to [`MAX_GAUGED_SPACES`]
//! spaces (and a space drops out a minute after it stops being set);
//! routes are the router's patterns, codes and ops fixed sets.
//!
//! On a server whose API requires keys, `/metrics` needs a read key too
//! (declared in `crate::routes`).

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
    /// Every endpoint and its `endpoint` label.
    #[rustfmt::skip]
    const LABELS: [(Query, &'static str); 12] = [
        (Query::Member, "member"), (Query::Status, "status"), (Query::Online, "online"),
        (Query::Count, "count"), (Query::OnlineAmong, "online_among"),
        (Query::OnlineFriends, "online_friends"), (Query::Friends, "friends"),
        (Query::Config, "config"), (Query::Spaces, "spaces"), (Query::History, "history"),
        (Query::User, "user"), (Query::UsersStatus, "users_status"),
    ];
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

fn counter(r: &PrometheusRecorder, name: &'static str, labels: Vec<Label>) -> Counter {
    r.register_counter(&Key::from_parts(name, labels), &META)
}

fn gauge(r: &PrometheusRecorder, name: &'static str, labels: Vec<Label>) -> Gauge {
    r.register_gauge(&Key::from_parts(name, labels), &META)
}

fn histogram(r: &PrometheusRecorder, name: &'static str, labels: Vec<Label>) -> Histogram {
    r.register_histogram(&Key::from_parts(name, labels), &META)
}

impl Metrics {
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
        let r = &recorder;
        let queries = Query::LABELS
            .iter()
            .map(|&(q, l)| {
                let labels = vec![Label::new("endpoint", l)];
                (q, counter(r, "herenow_queries_total", labels))
            })
            .collect();
        let ws_messages = crate::protocol::WS_MESSAGE_TYPES
            .iter()
            .map(|&t| {
                let labels = vec![Label::new("type", t)];
                (t, counter(r, "herenow_ws_messages_total", labels))
            })
            .collect();
        Self(Arc::new(Inner {
            handle,
            heartbeats: counter(r, "herenow_heartbeats_total", vec![]),
            erasures: counter(r, "herenow_erasures_total", vec![]),
            queries,
            sweep: histogram(r, "herenow_sweep_duration_seconds", vec![]),
            expired: counter(r, "herenow_expired_total", vec![]),
            forgotten: counter(r, "herenow_forgotten_total", vec![]),
            transitions: counter(r, "herenow_transitions_total", vec![]),
            ws_messages,
            routes: RwLock::new(RouteMap::default()),
            #[cfg(feature = "redis")]
            redis_calls: RwLock::new(RouteMap::default()),
            recorder,
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
            let labels = vec![
                Label::new("space", space.to_owned()),
                Label::new("kind", kind),
            ];
            gauge(&self.0.recorder, "herenow_space_members", labels).set(n as f64);
        }
    }

    /// Sets the open-event-streams gauge.
    pub fn sse_subscribers(&self, n: usize) {
        gauge(&self.0.recorder, "herenow_sse_subscribers", vec![]).set(n as f64);
    }

    /// Sets the open-WebSockets gauge.
    pub fn ws_connections(&self, n: usize) {
        gauge(&self.0.recorder, "herenow_ws_connections", vec![]).set(n as f64);
    }

    /// Sets the watch gauges: watchers held by this server, and the
    /// (watcher, user) pairs they watch.
    pub fn watch_usage(&self, pairs: usize, watchers: usize) {
        gauge(&self.0.recorder, "herenow_watch_watchers", vec![]).set(watchers as f64);
        gauge(&self.0.recorder, "herenow_watch_pairs", vec![]).set(pairs as f64);
    }

    /// Sets the alive-tasks gauge (the runtime's count, read by the caller).
    pub fn runtime_alive_tasks(&self, n: usize) {
        gauge(&self.0.recorder, "herenow_runtime_alive_tasks", vec![]).set(n as f64);
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
        let labels = vec![Label::new("code", code)];
        counter(&self.0.recorder, "herenow_ws_errors_total", labels).increment(1);
    }

    /// Counts one socket the server closed, by close code.
    pub fn ws_close(&self, code: u16) {
        let labels = vec![Label::new("code", code.to_string())];
        counter(&self.0.recorder, "herenow_ws_closes_total", labels).increment(1);
    }

    /// Sets the gauges and counters of a Redis store's write buffer.
    #[cfg(feature = "redis")]
    pub fn redis(&self, stats: &herenow_redis::RedisStats) {
        let r = &self.0.recorder;
        gauge(r, "herenow_redis_up", vec![]).set(if stats.redis_up { 1.0 } else { 0.0 });
        gauge(r, "herenow_redis_buffered", vec![]).set(stats.buffered as f64);
        counter(r, "herenow_redis_dropped_total", vec![]).absolute(stats.dropped);
        counter(r, "herenow_redis_replayed_total", vec![]).absolute(stats.replayed);
        counter(r, "herenow_redis_unreplicated_total", vec![]).absolute(stats.unreplicated);
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
        let r = &self.0.recorder;
        let cached = self.0.redis_calls.read().get(op).cloned();
        let h = cached.unwrap_or_else(|| {
            let h = histogram(r, REDIS_CALL_SECONDS, vec![Label::new("op", op)]);
            self.0.redis_calls.write().insert(op, h.clone());
            h
        });
        h.record(took.as_secs_f64());
        if outcome != herenow_redis::CallOutcome::Ok {
            // Rare: registered (looked up) each time.
            let labels = vec![
                Label::new("op", op),
                Label::new("outcome", outcome.as_str()),
            ];
            counter(r, "herenow_redis_errors_total", labels).increment(1);
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
        WebhookMetrics {
            delivered: counter(r, "herenow_webhook_delivered_total", label()),
            retried: counter(r, "herenow_webhook_retries_total", label()),
            failed: counter(r, "herenow_webhook_failures_total", label()),
            dropped: WebhookDrop::ALL.map(|reason| {
                let mut labels = label();
                labels.push(Label::new("reason", reason.label()));
                counter(r, "herenow_webhook_dropped_total", labels)
            }),
            queue: if queue {
                gauge(r, "herenow_webhook_queue_depth", label())
            } else {
                Gauge::noop()
            },
            latency: histogram(r, "herenow_webhook_request_duration_seconds", label()),
        }
    }

    /// Sets the gauges and counter of the store's webhook outbox.
    pub fn webhook_outbox(&self, stats: &OutboxStats) {
        let r = &self.0.recorder;
        gauge(r, "herenow_webhook_outbox_depth", vec![]).set(stats.depth as f64);
        gauge(r, "herenow_webhook_outbox_pending", vec![]).set(stats.pending as f64);
        counter(r, "herenow_webhook_outbox_trimmed_total", vec![]).absolute(stats.trimmed);
    }

    /// An event a space's webhook endpoint did not get: this server runs
    /// as many lanes to spaces' endpoints as it may, or the endpoint the
    /// store holds cannot be used.
    pub fn webhook_space_endpoint_skipped(&self) {
        let name = "herenow_webhook_space_endpoint_skipped_total";
        counter(&self.0.recorder, name, vec![]).increment(1);
    }

    /// Records a request's latency under its route pattern.
    pub fn request(&self, route: &str, method: &'static str, took: Duration) {
        let secs = took.as_secs_f64();
        if let Some(h) = self.0.routes.read().get(route).and_then(|m| m.get(method)) {
            h.record(secs);
            return;
        }
        let labels = vec![
            Label::new("route", route.to_owned()),
            Label::new("method", method),
        ];
        let h = histogram(
            &self.0.recorder,
            "herenow_http_request_duration_seconds",
            labels,
        );
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
