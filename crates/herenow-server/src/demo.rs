//! `herenow serve --demo`: simulated visitors, so a newcomer sees a living
//! page at once.
//!
//! (Being built: see the page helper's brief.)

use std::sync::Arc;

use herenow_core::PresenceStore;
use tokio_util::sync::CancellationToken;

/// Simulates visitors on `store` until `stop` is cancelled.
pub async fn run(store: Arc<dyn PresenceStore>, stop: CancellationToken) {
    let _ = store;
    stop.cancelled().await;
}
