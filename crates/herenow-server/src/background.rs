//! Background tasks: the ticker, the history sampler and the snapshot
//! writer. Each stops when the state's shutdown token is cancelled; none
//! ever panics the process: failures are logged and the next round runs.

use std::time::Duration;

use tokio::time::{Instant, MissedTickBehavior, interval, interval_at};
use tokio_util::task::TaskTracker;

use crate::config::Config;
use crate::history;
use crate::persist;
use crate::state::AppState;

/// Time between updates of the sampled gauges.
const GAUGE_PERIOD: Duration = Duration::from_secs(5);

/// Starts the background tasks on `tracker`. The ticker's period is the
/// store's ([`StoreSpec::tick_interval`](crate::StoreSpec::tick_interval)):
/// a quarter second for memory, a second for Redis.
pub fn spawn(state: &AppState, config: &Config, tracker: &TaskTracker) {
    tracker.spawn(ticker(state.clone(), config.store.tick_interval()));
    tracker.spawn(sampler(state.clone()));
    if let (Some(dir), Some(_)) = (config.data_dir.clone(), state.memory()) {
        tracker.spawn(snapshotter(state.clone(), dir, config.snapshot_interval));
    }
}

async fn ticker(state: AppState, period: Duration) {
    let token = state.shutdown_token().clone();
    let period = period.max(Duration::from_millis(10));
    let gauge_every = (GAUGE_PERIOD.as_millis() / period.as_millis()).max(1) as u64;
    let mut every = interval(period);
    // A slow round delays the next instead of causing a burst.
    every.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let mut rounds = 0u64;
    loop {
        tokio::select! {
            biased;
            _ = token.cancelled() => break,
            _ = every.tick() => {}
        }
        state.tick().await;
        rounds += 1;
        if rounds % gauge_every == 1 % gauge_every {
            state.update_gauges().await;
        }
    }
}

async fn sampler(state: AppState) {
    let token = state.shutdown_token().clone();
    let mut every = interval(history::INTERVAL);
    every.set_missed_tick_behavior(MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            biased;
            _ = token.cancelled() => break,
            _ = every.tick() => {}
        }
        state.sample_history().await;
    }
}

async fn snapshotter(state: AppState, dir: std::path::PathBuf, period: Duration) {
    let Some(memory) = state.memory().cloned() else {
        return;
    };
    let token = state.shutdown_token().clone();
    let period = period.max(Duration::from_secs(1));
    // The first write is one period after start: the store was just
    // restored from the file there.
    let mut every = interval_at(Instant::now() + period, period);
    every.set_missed_tick_behavior(MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            biased;
            _ = token.cancelled() => break,
            _ = every.tick() => {}
        }
        let (memory, dir) = (memory.clone(), dir.clone());
        match tokio::task::spawn_blocking(move || persist::write(&memory, &dir)).await {
            Ok(Ok(bytes)) => tracing::debug!(bytes, "wrote snapshot"),
            Ok(Err(e)) => tracing::error!(error = %e, "writing snapshot failed"),
            Err(e) => tracing::error!(error = %e, "snapshot task failed"),
        }
    }
}
