//! A space whose webhook endpoints the store holds but cannot read (a
//! hand-edited Redis key, say) must not hold back every other space's
//! events: its events go to no space endpoint and are counted, the other
//! spaces' are delivered as usual.

mod support;

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use axum::http::{Method, StatusCode};
use herenow_core::store::{
    Counts, HeartbeatReport, ListQuery, MemberStatus, Page, SpaceSummary, TickReport,
};
use herenow_core::*;
use herenow_server::Config;
use herenow_server::webhooks::WebhookConfig;
use serde_json::json;
use support::http::{Api, request};
use support::receiver::{Receiver, said};
use support::{T0, memory_store, state_over};
use tokio_util::task::TaskTracker;

const WRITER: &str = "writer-key-1";

/// A memory store whose endpoints of space `broken` cannot be read, as a
/// Redis store answers for a key that is not its JSON.
struct Unreadable(Arc<MemoryStore>);

const BROKEN: &str = "broken";

#[async_trait]
impl PresenceStore for Unreadable {
    fn name(&self) -> &'static str {
        "memory"
    }
    fn now_ms(&self) -> Millis {
        self.0.now_ms()
    }
    async fn heartbeat(&self, s: &SpaceName, b: &[Heartbeat]) -> Result<HeartbeatReport> {
        self.0.heartbeat(s, b).await
    }
    async fn leave(&self, s: &SpaceName, m: &[MemberKey]) -> Result<u64> {
        self.0.leave(s, m).await
    }
    async fn status(&self, s: &SpaceName, m: &[MemberKey]) -> Result<Vec<MemberStatus>> {
        self.0.status(s, m).await
    }
    async fn list(&self, s: &SpaceName, q: &ListQuery) -> Result<Page> {
        self.0.list(s, q).await
    }
    async fn count(&self, s: &SpaceName, w: Option<Millis>) -> Result<Counts> {
        self.0.count(s, w).await
    }
    async fn config(&self, s: &SpaceName) -> Result<SpaceConfig> {
        self.0.config(s).await
    }
    async fn set_config(&self, s: &SpaceName, c: SpaceConfig) -> Result<()> {
        self.0.set_config(s, c).await
    }
    async fn spaces(&self, a: Option<&SpaceName>, l: usize) -> Result<Vec<SpaceSummary>> {
        self.0.spaces(a, l).await
    }
    async fn set_friends(&self, u: &MemberId, f: &[MemberId]) -> Result<u64> {
        self.0.set_friends(u, f).await
    }
    async fn add_friends(&self, u: &MemberId, f: &[MemberId]) -> Result<u64> {
        self.0.add_friends(u, f).await
    }
    async fn remove_friends(&self, u: &MemberId, f: &[MemberId]) -> Result<u64> {
        self.0.remove_friends(u, f).await
    }
    async fn friends(&self, u: &MemberId) -> Result<Vec<MemberId>> {
        self.0.friends(u).await
    }
    async fn subscribe(&self, s: &SpaceName) -> Result<Subscription> {
        self.0.subscribe(s).await
    }
    async fn tick(&self) -> Result<TickReport> {
        self.0.tick().await
    }
    async fn outbox_open(&self, o: OutboxOptions) -> Result<()> {
        self.0.outbox_open(o).await
    }
    async fn outbox_claim(&self, c: &str, max: usize, idle: Millis) -> Result<Vec<OutboxEvent>> {
        self.0.outbox_claim(c, max, idle).await
    }
    async fn outbox_ack(&self, ids: &[String]) -> Result<()> {
        self.0.outbox_ack(ids).await
    }
    async fn outbox_stats(&self) -> Result<OutboxStats> {
        self.0.outbox_stats().await
    }
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
        api_keys: vec![format!("{WRITER}:write").parse().unwrap()],
        webhooks: WebhookConfig {
            poll: Duration::from_millis(10),
            backoff_base: Duration::from_millis(20),
            backoff_cap: Duration::from_secs(1),
            ..WebhookConfig::default()
        },
        ..Config::default()
    };
    let clock = ManualClock::new(T0);
    let store = Arc::new(Unreadable(memory_store(&clock)));
    let state = state_over(store, &config);
    state
        .webhooks()
        .start(&TaskTracker::new(), state.shutdown_token())
        .await
        .unwrap();
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
        let answer = api
            .call(request(Method::PUT, &uri, Some(&body), Some(WRITER)))
            .await;
        if space == BROKEN {
            // Stored, then read back for the answer: the store cannot.
            answer.problem(StatusCode::INTERNAL_SERVER_ERROR, "internal");
        } else {
            answer.ok();
        }
    }
    // The broken space's events come first in the outbox, in the same
    // claim as the fine space's.
    for (space, id) in [(BROKEN, "ann"), ("fine", "bob")] {
        let uri = format!("/v1/spaces/{space}/heartbeat");
        api.call(request(
            Method::POST,
            &uri,
            Some(&json!({"id": id})),
            Some(WRITER),
        ))
        .await
        .ok();
    }

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
