//! Background tasks: the ticker, the history sampler and the store's
//! periodic duty (the memory store's snapshot writer). Each stops when the
//! state's shutdown token is cancelled; none ever panics the process:
//! failures are logged and the next round runs.

use std::time::Duration;

use tokio::time::{Instant, Interval, MissedTickBehavior, interval, interval_at};
use tokio_util::task::TaskTracker;

use crate::history;
use crate::state::AppState;

/// Time between updates of the sampled gauges.
const GAUGE_PERIOD: Duration = Duration::from_secs(5);

/// Starts the background tasks on `tracker`. The ticker's period is the
/// store's ([`Backend::tick_interval`](crate::Backend::tick_interval)):
/// a quarter second for memory, a second for Redis.
pub fn spawn(state: &AppState, tracker: &TaskTracker) {
    tracker.spawn(ticker(state.clone(), state.backend().tick_interval()));
    tracker.spawn(sampler(state.clone()));
    if let Some(period) = state.backend().duty_period() {
        tracker.spawn(duty(state.clone(), period));
    }
}

async fn ticker(state: AppState, period: Duration) {
    let period = period.max(Duration::from_millis(10));
    let gauge_every = (GAUGE_PERIOD.as_millis() / period.as_millis()).max(1) as u64;
    let mut rounds = 0u64;
    each_tick(&state, interval(period), || {
        rounds += 1;
        let gauges = rounds % gauge_every == 1 % gauge_every;
        let state = &state;
        async move {
            state.tick().await;
            if gauges {
                state.update_gauges().await;
            }
        }
    })
    .await;
}

async fn sampler(state: AppState) {
    each_tick(&state, interval(history::INTERVAL), || {
        state.sample_history()
    })
    .await;
}

async fn duty(state: AppState, period: Duration) {
    let period = period.max(Duration::from_secs(1));
    // The first round is one period after start: the memory store was just
    // restored from the file its duty writes.
    let every = interval_at(Instant::now() + period, period);
    each_tick(&state, every, || state.backend().periodic_duty()).await;
}

/// Runs `round` at each tick of `every` until the state's shutdown. A
/// slow round delays the next instead of causing a burst.
async fn each_tick<F: Future<Output = ()>>(
    state: &AppState,
    mut every: Interval,
    mut round: impl FnMut() -> F,
) {
    let token = state.shutdown_token().clone();
    every.set_missed_tick_behavior(MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            biased;
            _ = token.cancelled() => break,
            _ = every.tick() => {}
        }
        round().await;
    }
}
