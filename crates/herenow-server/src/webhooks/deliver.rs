//! Delivery to one endpoint: its bounded queue, drained by one task that
//! sends one batch at a time (so a member's events arrive in order), and
//! retries a failed batch, unchanged, with exponential backoff and full
//! jitter until it succeeds, is refused, or grows too old. Which answer
//! does what is docs/API.md's "Answers"; [`classify`] decides it.
//!
//! An event's age is counted from when it happened (the store's clock),
//! not from its first attempt, so an endpoint back after a long outage
//! gets the recent events, not a day-old backlog of joins and leaves.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use herenow_core::{Millis, PresenceStore};
use reqwest::{Client, StatusCode, header};
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::endpoint::{Endpoint, MAX_BATCH_BYTES, MAX_BATCH_EVENTS, USER_AGENT};
use super::state::{EndpointState, InFlight};
use super::wire::{Batch, ENVELOPE_BYTES};
use crate::metrics::WebhookDrop;

/// The most of a response body read (and thrown away) so the connection
/// can be used again; a longer body closes it instead.
const MAX_DRAIN_BYTES: usize = 64 * 1024;

/// One event waiting in an endpoint's queue: its id and JSON, shared by
/// every endpoint that wants it.
#[derive(Debug)]
pub struct Queued {
    /// [`herenow_core::OutboxEvent::id`].
    pub id: String,
    /// [`super::wire::event_json`] of it.
    pub json: Vec<u8>,
    /// When it happened ([`herenow_core::OutboxEvent::at_ms`]): its age
    /// decides when it is no longer worth delivering.
    pub at_ms: Millis,
}

/// How one attempt went.
#[derive(Debug, PartialEq, Eq)]
pub enum Attempt {
    /// Answered 2xx.
    Delivered,
    /// Worth another try, after `retry_after` if the endpoint said.
    Retry {
        /// What went wrong, for the last error.
        why: String,
        /// The endpoint's `Retry-After`.
        retry_after: Option<Duration>,
    },
    /// Refused for good.
    Reject {
        /// What went wrong, for the last error.
        why: String,
    },
}

/// What the delivery loop of an endpoint needs.
pub struct Lane {
    /// Where it delivers, and what it delivers there.
    pub endpoint: Endpoint,
    /// Its numbers.
    pub state: Arc<EndpointState>,
    /// Whether `GET /v1/webhooks` shows only that a request without an
    /// answer failed ([`OPAQUE_FAILURE`]), not why: spaces' endpoints.
    pub opaque: bool,
    /// What it shares with the other lanes.
    pub kit: LaneKit,
}

/// What a lane needs besides its endpoint, the same for many lanes:
/// made once by [`Webhooks::start`](super::Webhooks::start) for the
/// operator's endpoints (those configured later too), once for spaces'.
#[derive(Clone)]
pub struct LaneKit {
    /// The client every endpoint shares (one pool of connections); for
    /// spaces' endpoints, the one whose resolver checks addresses.
    pub client: Client,
    /// Time, for timestamps and the last error.
    pub store: Arc<dyn PresenceStore>,
    /// Where finished events are reported.
    pub in_flight: Arc<InFlight>,
    /// How failed batches are retried.
    pub policy: RetryPolicy,
    /// Stops the loop (shutdown): what it holds stays unacknowledged and
    /// is delivered again after a restart.
    pub token: CancellationToken,
    /// Where lane tasks run.
    pub tracker: TaskTracker,
}

impl LaneKit {
    /// Starts the lane of `endpoint`, counted in `state`, behind a queue
    /// of `queue_limit` events; `opaque` as [`Lane::opaque`]. The lane
    /// ends once every sender of its queue is gone.
    pub fn spawn(
        &self,
        endpoint: Endpoint,
        state: Arc<EndpointState>,
        queue_limit: usize,
        opaque: bool,
    ) -> LaneSender {
        let (tx, rx) = mpsc::channel(queue_limit);
        let lane = Lane {
            endpoint,
            state: state.clone(),
            opaque,
            kit: self.clone(),
        };
        self.tracker.spawn(lane.run(rx));
        LaneSender { tx, state }
    }
}

/// The sending end of a lane an event goes to: its queue and its numbers.
#[derive(Clone)]
pub struct LaneSender {
    /// The lane's bounded queue.
    pub tx: mpsc::Sender<Arc<Queued>>,
    /// The lane's numbers: its queue depth is set on each send.
    pub state: Arc<EndpointState>,
}

impl LaneSender {
    /// Sends `queued`; a full queue drops it for that endpoint (counted),
    /// a closed one (shutting down) leaves it for the next start.
    /// Whether the endpoint still has to finish it.
    pub fn send(&self, queued: &Arc<Queued>) -> bool {
        match self.tx.try_send(queued.clone()) {
            Ok(()) => {
                let depth = self.tx.max_capacity() - self.tx.capacity();
                self.state.set_depth(depth);
                true
            }
            Err(mpsc::error::TrySendError::Closed(_)) => true,
            Err(mpsc::error::TrySendError::Full(_)) => {
                self.state.dropped(WebhookDrop::Overflow, 1);
                let dropped = self.state.dropped_count(WebhookDrop::Overflow);
                if dropped == 1 || dropped.is_multiple_of(1_000) {
                    tracing::warn!(
                        endpoint = self.state.name(),
                        dropped,
                        "webhook queue full: events dropped for this endpoint"
                    );
                }
                false
            }
        }
    }
}

/// How failed batches are retried.
#[derive(Clone, Copy, Debug)]
pub struct RetryPolicy {
    /// The first retry's longest delay.
    pub base: Duration,
    /// The longest delay, `Retry-After` included.
    pub cap: Duration,
    /// How long after it happened an event is still delivered.
    pub max_age: Duration,
}

impl RetryPolicy {
    /// Whether an event that happened at `at_ms` is past `max_age` at
    /// `now_ms` (an event stamped ahead of `now_ms`, by a server whose
    /// clock is ahead, is new).
    pub fn expired(&self, at_ms: Millis, now_ms: Millis) -> bool {
        let max = u64::try_from(self.max_age.as_millis()).unwrap_or(u64::MAX);
        now_ms.saturating_sub(at_ms) >= max
    }

    /// The delay before retry number `attempt` (0 for the first): a
    /// uniformly random time up to `base · 2^attempt`, capped ("full
    /// jitter"), at least a millisecond.
    pub fn backoff(&self, attempt: u32) -> Duration {
        let ceiling = self
            .base
            .saturating_mul(1u32.checked_shl(attempt.min(31)).unwrap_or(u32::MAX))
            .min(self.cap);
        let ms = u64::try_from(ceiling.as_millis())
            .unwrap_or(u64::MAX)
            .max(1);
        Duration::from_millis(random_u64() % ms + 1)
    }
}

fn random_u64() -> u64 {
    // A failing OS source only makes the jitter less random.
    getrandom::u64().unwrap_or(0x9e37_79b9_7f4a_7c15)
}

/// How a batch ended.
enum Ended {
    Delivered,
    Dropped(WebhookDrop),
    Shutdown,
}

impl Lane {
    /// Drains `queue` until shutdown or until every sender is gone.
    pub async fn run(self, mut queue: mpsc::Receiver<Arc<Queued>>) {
        let mut carry: Option<Arc<Queued>> = None;
        loop {
            let first = match carry.take() {
                Some(q) => q,
                None => tokio::select! {
                    biased;
                    _ = self.kit.token.cancelled() => return,
                    next = queue.recv() => match next {
                        Some(q) => q,
                        None => return,
                    },
                },
            };
            let mut bytes = ENVELOPE_BYTES + first.json.len();
            let mut items = vec![first];
            while items.len() < MAX_BATCH_EVENTS {
                let Ok(next) = queue.try_recv() else { break };
                if bytes + 1 + next.json.len() > MAX_BATCH_BYTES {
                    carry = Some(next);
                    break;
                }
                bytes += 1 + next.json.len();
                items.push(next);
            }
            self.state
                .set_depth(queue.len() + usize::from(carry.is_some()));
            let now = self.kit.store.now_ms();
            let (items, old): (Vec<_>, Vec<_>) = items
                .into_iter()
                .partition(|q| !self.kit.policy.expired(q.at_ms, now));
            self.dropped(WebhookDrop::Expired, old.iter().map(|q| q.id.as_str()));
            let Some(oldest) = items.iter().map(|q| q.at_ms).min() else {
                continue;
            };
            let batch = Batch::for_signer(
                &self.endpoint.signer,
                items.iter().map(|q| (q.id.as_str(), q.json.as_slice())),
                now,
            );
            match self.deliver(&batch, oldest).await {
                Ended::Shutdown => return,
                Ended::Delivered => self
                    .kit
                    .in_flight
                    .finish(batch.event_ids.iter().map(String::as_str)),
                Ended::Dropped(reason) => {
                    self.dropped(reason, batch.event_ids.iter().map(String::as_str));
                }
            }
        }
    }

    /// Gives up on `ids` for this endpoint: logged, counted and finished
    /// (acknowledged once no other endpoint holds them).
    fn dropped<'a>(&self, reason: WebhookDrop, ids: impl ExactSizeIterator<Item = &'a str>) {
        if ids.len() == 0 {
            return;
        }
        tracing::warn!(
            endpoint = self.state.name(),
            events = ids.len(),
            reason = reason.label(),
            "webhook events dropped"
        );
        self.state.dropped(reason, ids.len());
        self.kit.in_flight.finish(ids);
    }

    /// Sends `batch`, whose oldest event happened at `oldest`, until it is
    /// delivered, refused, too old, or the server stops.
    async fn deliver(&self, batch: &Batch, oldest: Millis) -> Ended {
        let mut attempt = 0u32;
        loop {
            let started = Instant::now();
            let outcome = tokio::select! {
                biased;
                _ = self.kit.token.cancelled() => return Ended::Shutdown,
                outcome = post(&self.kit.client, &self.endpoint, batch, self.kit.store.now_ms()) => outcome,
            };
            let outcome = outcome.unwrap_or_else(|e| {
                let mut why = describe(&e);
                if self.opaque {
                    // The operator reads what happened in the log; the API
                    // says only that it failed.
                    tracing::info!(endpoint = self.state.name(), error = %why, "webhook to a space's endpoint failed");
                    why = OPAQUE_FAILURE.to_owned();
                }
                Attempt::Retry { why, retry_after: None }
            });
            let took = started.elapsed();
            let now = self.kit.store.now_ms();
            let (why, retry_after) = match outcome {
                Attempt::Delivered => {
                    self.state.delivered(batch.event_ids.len(), took, now);
                    return Ended::Delivered;
                }
                Attempt::Reject { why } => {
                    self.state.failed(why, took, now);
                    return Ended::Dropped(WebhookDrop::Rejected);
                }
                Attempt::Retry { why, retry_after } => (why, retry_after),
            };
            tracing::debug!(endpoint = self.state.name(), error = %why, attempt, "webhook failed");
            self.state.failed(why, took, now);
            let delay = match retry_after {
                Some(d) => d.min(self.kit.policy.cap),
                None => self.kit.policy.backoff(attempt),
            };
            let next_try = now.saturating_add(u64::try_from(delay.as_millis()).unwrap_or(u64::MAX));
            if self.kit.policy.expired(oldest, next_try) {
                return Ended::Dropped(WebhookDrop::Expired);
            }
            tokio::select! {
                biased;
                _ = self.kit.token.cancelled() => return Ended::Shutdown,
                _ = tokio::time::sleep(delay) => {}
            }
            attempt = attempt.saturating_add(1);
            self.state.retried();
        }
    }
}

/// One signed `POST` of `batch` to `endpoint` at `now_ms`.
pub async fn send(client: &Client, endpoint: &Endpoint, batch: &Batch, now_ms: Millis) -> Attempt {
    post(client, endpoint, batch, now_ms)
        .await
        .unwrap_or_else(|e| Attempt::Retry {
            why: describe(&e),
            retry_after: None,
        })
}

/// What a space's endpoint shows in `GET /v1/webhooks` for a request
/// that got no answer: that it failed, not what the network said (a
/// refused connection, a timeout, a refused address), which would tell
/// whoever set the endpoint what listens where.
pub const OPAQUE_FAILURE: &str = "delivery failed: no answer from the endpoint";

/// One signed `POST` of `batch` to `endpoint` at `now_ms`: how the answer
/// classifies, or the error of a request that got none.
async fn post(
    client: &Client,
    endpoint: &Endpoint,
    batch: &Batch,
    now_ms: Millis,
) -> Result<Attempt, reqwest::Error> {
    let mut request = client
        .post(endpoint.url.clone())
        .header(header::CONTENT_TYPE, "application/json")
        .header(header::USER_AGENT, USER_AGENT);
    for (name, value) in batch.headers(&endpoint.signer, now_ms) {
        request = request.header(name, value);
    }
    let response = request.body(batch.body.clone()).send().await?;
    let status = response.status();
    let retry_after = response
        .headers()
        .get(header::RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .and_then(parse_retry_after);
    if let Err(e) = drain(response).await
        && status.is_success()
    {
        // The answer was 2xx before the body broke off: delivered.
        tracing::debug!(endpoint = %endpoint.name, error = %describe(&e), "webhook answer cut");
    }
    Ok(classify(status, retry_after))
}

/// What a status means for the batch.
pub fn classify(status: StatusCode, retry_after: Option<Duration>) -> Attempt {
    if status.is_success() {
        return Attempt::Delivered;
    }
    let why = format!("HTTP {}", status.as_u16());
    if status.is_server_error()
        || status == StatusCode::TOO_MANY_REQUESTS
        || status == StatusCode::REQUEST_TIMEOUT
    {
        return Attempt::Retry { why, retry_after };
    }
    if status.is_redirection() {
        return Attempt::Reject {
            why: format!("{why}: a redirect, never followed; configure the final URL"),
        };
    }
    Attempt::Reject { why }
}

/// Reads a response's body up to [`MAX_DRAIN_BYTES`] so its connection
/// can serve the next request.
async fn drain(mut response: reqwest::Response) -> Result<(), reqwest::Error> {
    let mut read = 0;
    while let Some(chunk) = response.chunk().await? {
        read += chunk.len();
        if read > MAX_DRAIN_BYTES {
            break;
        }
    }
    Ok(())
}

/// `Retry-After`: whole seconds, or an HTTP date (from now on).
pub fn parse_retry_after(value: &str) -> Option<Duration> {
    let value = value.trim();
    if let Ok(secs) = value.parse::<u64>() {
        return Some(Duration::from_secs(secs));
    }
    let at = httpdate::parse_http_date(value).ok()?;
    Some(
        at.duration_since(SystemTime::now())
            .unwrap_or(Duration::ZERO),
    )
}

/// A failed request in a few words: a timeout, a refused connection.
fn describe(e: &reqwest::Error) -> String {
    let mut cause: &dyn std::error::Error = e;
    while let Some(inner) = cause.source() {
        cause = inner;
    }
    if e.is_timeout() {
        "timeout".to_owned()
    } else if e.is_connect() {
        format!("cannot connect: {cause}")
    } else {
        format!("request failed: {cause}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_are_delivered_retried_or_rejected() {
        assert_eq!(classify(StatusCode::NO_CONTENT, None), Attempt::Delivered);
        for s in [500, 502, 503, 429, 408] {
            let s = StatusCode::from_u16(s).unwrap();
            assert!(matches!(classify(s, None), Attempt::Retry { .. }), "{s}");
        }
        for s in [400, 401, 404, 410, 301, 302, 307] {
            let s = StatusCode::from_u16(s).unwrap();
            assert!(matches!(classify(s, None), Attempt::Reject { .. }), "{s}");
        }
    }

    #[test]
    fn retry_after_is_seconds_or_a_date() {
        assert_eq!(parse_retry_after("7"), Some(Duration::from_secs(7)));
        assert_eq!(parse_retry_after(" 0 "), Some(Duration::ZERO));
        let later = SystemTime::now() + Duration::from_secs(120);
        let d = parse_retry_after(&httpdate::fmt_http_date(later)).unwrap();
        assert!(
            d > Duration::from_secs(100) && d <= Duration::from_secs(120),
            "{d:?}"
        );
        assert_eq!(
            parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT"),
            Some(Duration::ZERO)
        );
        assert_eq!(parse_retry_after("soon"), None);
    }

    #[test]
    fn an_event_expires_max_age_after_it_happened() {
        let p = RetryPolicy {
            base: Duration::from_secs(1),
            cap: Duration::from_secs(600),
            max_age: Duration::from_secs(3600),
        };
        let at = 1_700_000_000_000;
        assert!(!p.expired(at, at));
        assert!(!p.expired(at, at + 3_599_999));
        assert!(p.expired(at, at + 3_600_000));
        // Stamped ahead of this server's clock (another server's): new.
        assert!(!p.expired(at + 5_000, at));
    }

    #[test]
    fn backoff_doubles_with_full_jitter_up_to_the_cap() {
        let p = RetryPolicy {
            base: Duration::from_secs(1),
            cap: Duration::from_secs(600),
            max_age: Duration::from_secs(3600),
        };
        for attempt in 0..40 {
            let ceiling = Duration::from_secs(1 << attempt.min(20)).min(p.cap);
            for _ in 0..20 {
                let d = p.backoff(attempt);
                assert!(d >= Duration::from_millis(1) && d <= ceiling + Duration::from_millis(1));
            }
        }
        let spread: std::collections::HashSet<Duration> = (0..50).map(|_| p.backoff(5)).collect();
        assert!(spread.len() > 10, "jittered");
    }
}
