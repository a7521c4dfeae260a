//! The catalog of metric families: each one's name, kind and `# HELP`
//! text, which the recorder (`super`) describes at start.

/// The histogram of a Redis store's calls.
pub(super) const REDIS_CALL_SECONDS: &str = "herenow_redis_command_duration_seconds";

/// What kind of metric a family is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Only grows.
    Counter,
    /// Goes up and down.
    Gauge,
    /// Samples in buckets.
    Histogram,
}

/// Every metric family, its kind and its `# HELP` text.
pub const DESCRIPTIONS: &[(&str, Kind, &str)] = &[
    (
        "herenow_heartbeats_total",
        Kind::Counter,
        "Heartbeats received.",
    ),
    (
        "herenow_queries_total",
        Kind::Counter,
        "Queries answered, by endpoint.",
    ),
    (
        "herenow_erasures_total",
        Kind::Counter,
        "Users erased (DELETE /v1/users/{id}).",
    ),
    (
        "herenow_space_members",
        Kind::Gauge,
        "Members stored per space, by kind (at most 1000 spaces).",
    ),
    (
        "herenow_sweep_duration_seconds",
        Kind::Histogram,
        "Duration of one round of background maintenance.",
    ),
    (
        "herenow_expired_total",
        Kind::Counter,
        "Members expired by background maintenance.",
    ),
    (
        "herenow_forgotten_total",
        Kind::Counter,
        "Remembered last-seen times forgotten past their horizon.",
    ),
    (
        "herenow_transitions_total",
        Kind::Counter,
        "Presence transitions found by background maintenance.",
    ),
    (
        "herenow_http_request_duration_seconds",
        Kind::Histogram,
        "HTTP request latency, by route pattern and method.",
    ),
    (
        "herenow_sse_subscribers",
        Kind::Gauge,
        "Open Server-Sent Events streams.",
    ),
    (
        "herenow_ws_connections",
        Kind::Gauge,
        "Open WebSocket connections.",
    ),
    (
        "herenow_watch_watchers",
        Kind::Gauge,
        "Watchers of users' presence held by this server (SSE and WebSocket).",
    ),
    (
        "herenow_watch_pairs",
        Kind::Gauge,
        "(watcher, watched user) pairs held by this server.",
    ),
    (
        "herenow_runtime_alive_tasks",
        Kind::Gauge,
        "Tasks alive in the server's async runtime, read at each scrape.",
    ),
    (
        "herenow_ws_messages_total",
        Kind::Counter,
        "WebSocket client messages, by type.",
    ),
    (
        "herenow_ws_errors_total",
        Kind::Counter,
        "WebSocket error replies and refused tokens, by code.",
    ),
    (
        "herenow_ws_closes_total",
        Kind::Counter,
        "WebSockets the server closed, by close code.",
    ),
    (
        "herenow_redis_up",
        Kind::Gauge,
        "1 while Redis answers, else 0.",
    ),
    (
        "herenow_redis_buffered",
        Kind::Gauge,
        "Members whose writes wait for Redis.",
    ),
    (
        "herenow_redis_dropped_total",
        Kind::Counter,
        "Writes refused by the full Redis write buffer.",
    ),
    (
        "herenow_redis_replayed_total",
        Kind::Counter,
        "Buffered writes replayed to Redis.",
    ),
    (
        "herenow_redis_unreplicated_total",
        Kind::Counter,
        "Writes acknowledged without the replicas asked for.",
    ),
    (
        REDIS_CALL_SECONDS,
        Kind::Histogram,
        "Duration of Redis calls, by what the call was for.",
    ),
    (
        "herenow_redis_errors_total",
        Kind::Counter,
        "Redis calls that failed, by op and outcome.",
    ),
    (
        "herenow_webhook_delivered_total",
        Kind::Counter,
        "Webhook events delivered (answered 2xx), by endpoint.",
    ),
    (
        "herenow_webhook_retries_total",
        Kind::Counter,
        "Webhook requests sent again, by endpoint.",
    ),
    (
        "herenow_webhook_failures_total",
        Kind::Counter,
        "Webhook requests that failed, by endpoint.",
    ),
    (
        "herenow_webhook_dropped_total",
        Kind::Counter,
        "Webhook events given up, by endpoint and reason.",
    ),
    (
        "herenow_webhook_queue_depth",
        Kind::Gauge,
        "Webhook events waiting in an operator endpoint's queue.",
    ),
    (
        "herenow_webhook_request_duration_seconds",
        Kind::Histogram,
        "Webhook request latency, by endpoint.",
    ),
    (
        "herenow_webhook_outbox_depth",
        Kind::Gauge,
        "Events in the store's webhook outbox.",
    ),
    (
        "herenow_webhook_outbox_pending",
        Kind::Gauge,
        "Outbox events claimed and not yet acknowledged.",
    ),
    (
        "herenow_webhook_outbox_trimmed_total",
        Kind::Counter,
        "Outbox events trimmed undelivered past its bound.",
    ),
    (
        "herenow_webhook_space_endpoint_skipped_total",
        Kind::Counter,
        "Events a space's webhook endpoint did not get (too many lanes, or an endpoint that cannot or may not be used).",
    ),
];
