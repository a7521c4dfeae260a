//! How each call to Redis went, told to whoever embeds the store: the
//! server turns it into `herenow_redis_command_duration_seconds` and
//! `herenow_redis_errors_total`. The store knows no metrics library; it
//! names the call and times it.
//!
//! Every call a store makes goes through [`timed`](crate::reply::timed),
//! which takes the store's [`Observer`], so no call is left out: scripts,
//! plain commands, pipelines, `WAIT` and `ROLE` for replicas, the replayer's
//! pings and the first connection.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

/// How a call to Redis ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CallOutcome {
    /// Redis answered as expected.
    Ok,
    /// Redis could not be reached or did not answer in time, or a cluster
    /// was failing over: retryable ([`Error::Unavailable`](herenow_core::Error::Unavailable)).
    Unavailable,
    /// Redis answered something herenow did not expect: a script error, a
    /// reply of the wrong shape, a key of the wrong type
    /// ([`Error::Internal`](herenow_core::Error::Internal)).
    Error,
}

impl CallOutcome {
    /// The outcome's name as a metric label: `ok`, `unavailable`, `error`.
    pub fn as_str(self) -> &'static str {
        match self {
            CallOutcome::Ok => "ok",
            CallOutcome::Unavailable => "unavailable",
            CallOutcome::Error => "error",
        }
    }
}

/// Told of every call a store sends to Redis, as it ends. Called on the
/// task that made the call, so it must be quick (an atomic add, a
/// histogram sample): it runs once per script call, not per heartbeat.
pub trait CallObserver: Send + Sync {
    /// `op` names what the call was for, from a fixed set of snake_case
    /// names (`heartbeat`, `leave`, `list`, `tick`, `outbox_claim`,
    /// `wait`…); `took` runs from the call's start to its answer, failure
    /// or timeout, waits for the connection included.
    fn call(&self, op: &'static str, took: Duration, outcome: CallOutcome);
}

/// The [`CallObserver`] of a store, if any: a field of
/// [`RedisOptions`](crate::RedisOptions) and
/// [`LayoutOptions`](crate::LayoutOptions). None by default, and then a
/// call costs no clock reads.
#[derive(Clone, Default)]
pub struct Observer(Option<Arc<dyn CallObserver>>);

impl Observer {
    /// Calls go to `observer`.
    pub fn new(observer: Arc<dyn CallObserver>) -> Self {
        Observer(Some(observer))
    }

    /// No observer: calls are not timed.
    pub fn none() -> Self {
        Observer(None)
    }

    /// The observer, if one is set.
    pub(crate) fn get(&self) -> Option<&dyn CallObserver> {
        self.0.as_deref()
    }
}

impl fmt::Debug for Observer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.0.is_some() {
            "Observer(set)"
        } else {
            "Observer(none)"
        })
    }
}
