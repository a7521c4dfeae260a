//! What the delivery tasks share with the claim loop and with
//! `GET /v1/webhooks`: each endpoint's counters, state and last error
//! ([`EndpointState`]), and the events claimed and not yet finished by
//! every endpoint that wants them ([`InFlight`]).

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use herenow_core::{Millis, OutboxStats};
use parking_lot::Mutex;
use serde::Serialize;
use utoipa::ToSchema;

use super::endpoint::Endpoint;
use crate::metrics::{WebhookDrop, WebhookMetrics};

/// Failed attempts in a row after which an endpoint shows `failing`
/// rather than `retrying`.
pub const FAILING_AFTER: u32 = 5;

/// The longest error text kept.
const MAX_ERROR_CHARS: usize = 300;

/// One endpoint's live numbers. Counters only grow; the state follows the
/// last attempts.
pub struct EndpointState {
    name: String,
    url: String,
    events: Vec<&'static str>,
    spaces: Option<String>,
    queue_limit: usize,
    depth: AtomicUsize,
    delivered: AtomicU64,
    retried: AtomicU64,
    failed: AtomicU64,
    dropped: [AtomicU64; 3],
    failures_in_row: AtomicU32,
    last: Mutex<Last>,
    metrics: WebhookMetrics,
}

#[derive(Default)]
struct Last {
    error: Option<LastError>,
    success_ms: Option<Millis>,
    gave_up: bool,
}

impl EndpointState {
    /// Fresh numbers for `endpoint`, counted into `metrics` too.
    pub fn new(endpoint: &Endpoint, queue_limit: usize, metrics: WebhookMetrics) -> Self {
        Self {
            name: endpoint.name.clone(),
            url: endpoint.redacted_url(),
            events: endpoint.filter.kinds(),
            spaces: endpoint.filter.spaces_text(),
            queue_limit,
            depth: AtomicUsize::new(0),
            delivered: AtomicU64::new(0),
            retried: AtomicU64::new(0),
            failed: AtomicU64::new(0),
            dropped: Default::default(),
            failures_in_row: AtomicU32::new(0),
            last: Mutex::new(Last::default()),
            metrics,
        }
    }

    /// The endpoint's name, for logs.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Sets how many events wait in its queue.
    pub fn set_depth(&self, depth: usize) {
        self.depth.store(depth, Ordering::Relaxed);
        self.metrics.queue_depth(depth);
    }

    /// A request that answered 2xx, carrying `events` events.
    pub fn delivered(&self, events: usize, took: Duration, now_ms: Millis) {
        self.delivered.fetch_add(events as u64, Ordering::Relaxed);
        self.failures_in_row.store(0, Ordering::Relaxed);
        self.metrics.delivered(events, took);
        let mut last = self.last.lock();
        last.success_ms = Some(now_ms);
        last.gave_up = false;
    }

    /// A request that failed (`why`), whether or not it will be retried.
    pub fn failed(&self, why: String, took: Duration, now_ms: Millis) {
        self.failed.fetch_add(1, Ordering::Relaxed);
        self.failures_in_row.fetch_add(1, Ordering::Relaxed);
        self.metrics.failed(took);
        let error: String = why.chars().take(MAX_ERROR_CHARS).collect();
        self.last.lock().error = Some(LastError {
            at_ms: now_ms,
            error,
        });
    }

    /// A failed request about to be sent again.
    pub fn retried(&self) {
        self.retried.fetch_add(1, Ordering::Relaxed);
        self.metrics.retried();
    }

    /// `events` events this endpoint will never get, and why.
    pub fn dropped(&self, reason: WebhookDrop, events: usize) {
        self.dropped[reason as usize].fetch_add(events as u64, Ordering::Relaxed);
        self.metrics.dropped(reason, events);
        if reason != WebhookDrop::Overflow {
            self.last.lock().gave_up = true;
        }
    }

    /// Events dropped for `reason` so far.
    pub fn dropped_count(&self, reason: WebhookDrop) -> u64 {
        self.dropped[reason as usize].load(Ordering::Relaxed)
    }

    /// What `GET /v1/webhooks` shows of it.
    pub fn view(&self) -> EndpointView {
        let last = self.last.lock();
        let in_row = self.failures_in_row.load(Ordering::Relaxed);
        let state = if in_row == 0 && !last.gave_up {
            EndpointHealth::Ok
        } else if in_row >= FAILING_AFTER || last.gave_up {
            EndpointHealth::Failing
        } else {
            EndpointHealth::Retrying
        };
        EndpointView {
            name: self.name.clone(),
            url: self.url.clone(),
            events: self.events.iter().map(|e| (*e).to_owned()).collect(),
            spaces: self.spaces.clone(),
            state,
            queue: QueueView {
                depth: self.depth.load(Ordering::Relaxed) as u64,
                limit: self.queue_limit as u64,
            },
            delivered: self.delivered.load(Ordering::Relaxed),
            retried: self.retried.load(Ordering::Relaxed),
            failed: self.failed.load(Ordering::Relaxed),
            dropped: DroppedView {
                overflow: self.dropped_count(WebhookDrop::Overflow),
                rejected: self.dropped_count(WebhookDrop::Rejected),
                expired: self.dropped_count(WebhookDrop::Expired),
            },
            failures_in_row: in_row,
            last_success_ms: last.success_ms,
            last_error: last.error.clone(),
        }
    }
}

/// The events claimed from the outbox and not yet finished by every
/// endpoint that wants them, and those finished and waiting to be
/// acknowledged. Bounded by construction: an event is held only while it
/// sits in some endpoint's bounded queue or batch.
#[derive(Default)]
pub struct InFlight(Mutex<Inner>);

#[derive(Default)]
struct Inner {
    /// Event id → endpoints that have not finished it yet.
    waiting: HashMap<String, u32>,
    /// Finished by every endpoint: to acknowledge.
    acks: HashSet<String>,
}

impl InFlight {
    /// Whether `id` is held already (an event the store handed out again
    /// after the reclaim time): waiting for endpoints, or finished and not
    /// yet acknowledged (a lane may finish it between a round's
    /// acknowledgement and its claim).
    pub fn holds(&self, id: &str) -> bool {
        let inner = self.0.lock();
        inner.waiting.contains_key(id) || inner.acks.contains(id)
    }

    /// Holds `id` until `endpoints` endpoints finished it; none: to be
    /// acknowledged at once.
    pub fn hold(&self, id: String, endpoints: u32) {
        let mut inner = self.0.lock();
        if endpoints == 0 {
            inner.acks.insert(id);
        } else {
            inner.waiting.insert(id, endpoints);
        }
    }

    /// One endpoint finished `ids` (delivered, or gave up and counted).
    pub fn finish<'a>(&self, ids: impl IntoIterator<Item = &'a str>) {
        let mut inner = self.0.lock();
        for id in ids {
            let Some(left) = inner.waiting.get_mut(id) else {
                continue;
            };
            *left -= 1;
            if *left == 0 {
                inner.waiting.remove(id);
                inner.acks.insert(id.to_owned());
            }
        }
    }

    /// Takes the ids to acknowledge.
    pub fn take_acks(&self) -> Vec<String> {
        self.0.lock().acks.drain().collect()
    }

    /// Puts back ids whose acknowledgement failed, for the next round.
    pub fn retry_acks(&self, ids: Vec<String>) {
        self.0.lock().acks.extend(ids);
    }
}

/// How an endpoint is doing.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum EndpointHealth {
    /// Its last request succeeded (or none was needed yet).
    Ok,
    /// Its last requests failed, fewer than five in a row; retrying.
    Retrying,
    /// Five or more failures in a row, or its last batch was given up.
    Failing,
}

/// The last failed request.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct LastError {
    /// When, by the store's clock (ms since the Unix epoch).
    pub at_ms: Millis,
    /// What went wrong: `HTTP 500`, `timeout`, `cannot connect: …`; for
    /// an endpoint a space names, only `HTTP 500` and the like or
    /// `delivery failed: no answer from the endpoint` (what the network
    /// answered is in the server's log).
    pub error: String,
}

/// An endpoint's queue.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct QueueView {
    /// Events waiting for it now.
    pub depth: u64,
    /// Events it may hold; more are dropped and counted as `overflow`.
    pub limit: u64,
}

/// Events an endpoint will never get, by reason.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct DroppedView {
    /// Its queue was full.
    pub overflow: u64,
    /// It answered a 4xx other than 408 and 429 (or a redirect, never
    /// followed).
    pub rejected: u64,
    /// Past the maximum age (`--webhook-max-age`) since they happened:
    /// still failing then, or already that old when their turn came.
    pub expired: u64,
}

/// One endpoint in `GET /v1/webhooks`; its secret is never shown.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct EndpointView {
    /// Its label in metrics and logs.
    pub name: String,
    /// Its URL, a password or query replaced by `***`.
    pub url: String,
    /// The event kinds it wants.
    pub events: Vec<String>,
    /// The glob its spaces must match (a Pusher endpoint has two, joined
    /// by a space: either matches); `null`: every space.
    pub spaces: Option<String>,
    /// `ok`, `retrying` or `failing`.
    pub state: EndpointHealth,
    /// Its queue now.
    pub queue: QueueView,
    /// Events delivered (answered 2xx).
    pub delivered: u64,
    /// Requests sent again after a failure.
    pub retried: u64,
    /// Requests that failed (timeouts, connection errors, non-2xx).
    pub failed: u64,
    /// Events dropped, by reason.
    pub dropped: DroppedView,
    /// Failed requests since the last success.
    pub failures_in_row: u32,
    /// When a request last succeeded (ms since the Unix epoch).
    pub last_success_ms: Option<Millis>,
    /// The last failure.
    pub last_error: Option<LastError>,
}

/// The store's outbox, as `GET /v1/webhooks` shows it.
#[derive(Clone, Copy, Debug, Serialize, ToSchema)]
pub struct OutboxView {
    /// Events kept and not yet acknowledged.
    pub depth: u64,
    /// Of those, claimed by a server and not yet acknowledged.
    pub pending: u64,
    /// Events trimmed by the outbox's cap before delivery.
    pub trimmed: u64,
}

impl From<OutboxStats> for OutboxView {
    fn from(s: OutboxStats) -> Self {
        Self {
            depth: s.depth,
            pending: s.pending,
            trimmed: s.trimmed,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_event_finished_but_not_acknowledged_is_still_held() {
        let f = InFlight::default();
        f.hold("e1".to_owned(), 2);
        assert!(f.holds("e1"));
        f.finish(["e1"]);
        assert!(f.holds("e1"), "one endpoint of two still has it");
        f.finish(["e1"]);
        // Finished by both, not acknowledged yet: a claim handing it out
        // again must not route it a second time.
        assert!(f.holds("e1"));
        let acks = f.take_acks();
        assert_eq!(acks, vec!["e1".to_owned()]);
        assert!(!f.holds("e1"));
        // An acknowledgement that failed is held again until retried.
        f.retry_acks(acks);
        assert!(f.holds("e1"));
        f.hold("e2".to_owned(), 0);
        assert!(
            f.holds("e2"),
            "wanted by no endpoint: held until acknowledged"
        );
    }
}
