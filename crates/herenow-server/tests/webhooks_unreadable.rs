//! A space whose webhook endpoints the store holds but cannot read (a
//! hand-edited Redis key, say) must not hold back every other space's
//! events: its events go to no space endpoint and are counted, the other
//! spaces' are delivered as usual.

mod support;

use std::sync::Arc;
use std::time::Duration;

use axum::http::{Method, StatusCode};
use herenow_core::{
    Error, ManualClock, Result, SpaceHook, SpaceName, SpaceWebhooks, WebhookOutbox,
};
use herenow_memory::MemoryStore;
use herenow_server::Config;
use serde_json::json;
use support::http::{Api, request};
use support::receiver::{Receiver, said};
use support::{T0, memory_store, state_over, store_over_memory};

/// A memory store whose endpoints of space `broken` cannot be read, as a
/// Redis store answers for a key that is not its JSON.
struct Unreadable(Arc<MemoryStore>);

const BROKEN: &str = "broken";

store_over_memory!(Unreadable, "memory", {
    fn webhook_outbox(&self) -> Option<&dyn WebhookOutbox> {
        self.0.webhook_outbox()
    }
    fn space_webhooks(&self) -> Option<&dyn SpaceWebhooks> {
        Some(self)
    }
});

#[async_trait::async_trait]
impl SpaceWebhooks for Unreadable {
    async fn space_hooks(&self, s: &SpaceName) -> Result<Vec<SpaceHook>> {
        if s.as_str() == BROKEN {
            return Err(Error::Internal(
                "unexpected reply from redis: a space's webhook endpoints".into(),
            ));
        }
        self.0.space_hooks(s).await
    }
    async fn set_space_hooks(&self, s: &SpaceName, h: &[SpaceHook]) -> Result<()> {
        self.0.set_space_hooks(s, h).await
    }
    async fn space_hooks_version(&self) -> Result<u64> {
        self.0.space_hooks_version().await
    }
}

#[tokio::test]
async fn unreadable_endpoints_of_one_space_hold_back_no_other() {
    let config = Config {
        webhooks: support::quick_webhooks(),
        ..Config::default()
    };
    let clock = ManualClock::new(T0);
    let store = Arc::new(Unreadable(memory_store(&clock)));
    let state = state_over(store, &config);
    support::start_webhooks(&state).await;
    let api = Api::over(state.clone(), clock);

    let mut broken_rx = Receiver::start().await;
    let mut fine_rx = Receiver::start().await;
    for (space, rx) in [(BROKEN, &broken_rx), ("fine", &fine_rx)] {
        let body = json!({
            "online_ms": 30_000, "away_ms": 60_000, "window_ms": 60_000,
            "retention_ms": 120_000,
            "webhooks": [{"url": rx.url(), "events": ["join"],
                          "secret": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}],
        });
        let uri = format!("/v1/spaces/{space}/config");
        // The answer shows the endpoints the call set: nothing is read
        // back, so the broken space's call succeeds like the other.
        api.call(request(Method::PUT, &uri, Some(&body), None))
            .await
            .ok();
    }
    // A call that changes the policy only must show the stored endpoints,
    // which cannot be read: it fails before it writes anything, rather
    // than after the policy was changed.
    let policy_only = json!({
        "online_ms": 10_000, "away_ms": 20_000, "window_ms": 20_000,
        "retention_ms": 40_000,
    });
    let uri = format!("/v1/spaces/{BROKEN}/config");
    api.call(request(Method::PUT, &uri, Some(&policy_only), None))
        .await
        .problem(StatusCode::INTERNAL_SERVER_ERROR, "internal");
    let kept = state
        .store()
        .config(&SpaceName::new(BROKEN).unwrap())
        .await
        .unwrap();
    assert_eq!(
        (kept.online_ms, kept.retention_ms),
        (30_000, 120_000),
        "the refused call changed the policy"
    );
    // The broken space's events come first in the outbox, in the same
    // claim as the fine space's.
    api.beat(BROKEN, "ann").await;
    api.beat("fine", "bob").await;

    let got = fine_rx.next_within(Duration::from_secs(10)).await;
    assert_eq!(said(&got.events()), [("join".into(), "bob".into())]);
    assert!(
        broken_rx.try_next().is_none(),
        "the unreadable space's endpoint gets nothing"
    );
    let text = state.metrics().render();
    let skipped = text
        .lines()
        .find(|l| l.starts_with("herenow_webhook_space_endpoint_skipped_total"))
        .unwrap_or_else(|| panic!("no skipped count in\n{text}"));
    // Its join and its `occupied`: which kinds its endpoints want is
    // what cannot be read, so each of its events counts.
    assert!(
        skipped.ends_with(" 2"),
        "the broken space's events: {skipped}"
    );
}
