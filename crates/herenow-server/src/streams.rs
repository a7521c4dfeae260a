//! The event streams' shared bound (`--max-event-streams`) and keep-alive:
//! a space's events (`sse`) and a watch (`POST /v1/watch`, `watch`) each
//! hold a [`Slot`] while they stream.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;

use crate::metrics::Metrics;
use crate::problem::ApiError;

/// Time between keep-alive comments, so proxies keep idle streams open.
pub const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// The places for event streams, and what counts them.
#[derive(Clone)]
pub struct Streams(Arc<Inner>);

struct Inner {
    permits: Arc<Semaphore>,
    max: usize,
    metrics: Metrics,
    shutdown: CancellationToken,
}

impl Streams {
    /// At most `max` streams at once (at least one), counted into
    /// `metrics`, none opened once `shutdown` is cancelled.
    pub(crate) fn new(max: usize, metrics: Metrics, shutdown: CancellationToken) -> Self {
        let max = max.max(1);
        Self(Arc::new(Inner {
            permits: Arc::new(Semaphore::new(max)),
            max,
            metrics,
            shutdown,
        }))
    }

    /// Event streams open now, for the gauge.
    pub fn open(&self) -> usize {
        self.0.max - self.0.permits.available_permits()
    }

    /// A place for one more stream; `503` while shutting down or when
    /// every place is taken.
    pub(crate) fn slot(&self) -> Result<Slot, ApiError> {
        if self.0.shutdown.is_cancelled() {
            return Err(ApiError::unavailable(
                "shutting-down",
                "the server is shutting down",
                1,
            ));
        }
        let permit = self.0.permits.clone().try_acquire_owned().ok();
        self.0.metrics.sse_subscribers(self.open());
        let permit = permit.ok_or_else(|| {
            ApiError::unavailable(
                "too-many-streams",
                "the server has as many event streams open as it allows; retry later",
                5,
            )
        })?;
        Ok(Slot {
            permit: Some(permit),
            streams: self.clone(),
        })
    }
}

/// Frees the stream's place and updates the gauge when the stream ends,
/// however it ends (client gone, lag, shutdown).
pub(crate) struct Slot {
    permit: Option<OwnedSemaphorePermit>,
    streams: Streams,
}

impl Drop for Slot {
    fn drop(&mut self) {
        drop(self.permit.take());
        self.streams.0.metrics.sse_subscribers(self.streams.open());
    }
}
