//! The memory store's outbox switch: naming endpoints turns capture on,
//! removing the last space's endpoints turns it off again unless the
//! outbox was opened for its own sake (a server's own endpoints), so a
//! running store captures exactly when a restarted one would.

use std::sync::Arc;

use herenow_core::outbox::{OutboxKind, OutboxOptions, SpaceHook};
use herenow_core::{
    Heartbeat, ManualClock, MemberId, MemberKey, PresenceStore, SpaceConfig, SpaceName,
    SpaceWebhooks, WebhookOutbox,
};
use herenow_memory::MemoryStore;

fn user(id: &str) -> MemberKey {
    MemberKey::user(MemberId::new(id).unwrap())
}

fn hooks() -> Vec<SpaceHook> {
    vec![SpaceHook {
        url: "https://hooks.example.com/presence".into(),
        kinds: vec![OutboxKind::Join],
        secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw".into(),
    }]
}

/// Heartbeats a new member into `space` and returns how many events the
/// outbox then hands out (claimed and acknowledged).
async fn captured(s: &MemoryStore, space: &SpaceName, who: &str) -> usize {
    s.heartbeat(space, &[Heartbeat::now(user(who))])
        .await
        .unwrap();
    let got = s.outbox_claim("test", 100, 60_000).await.unwrap();
    let ids: Vec<String> = got.iter().map(|e| e.id.clone()).collect();
    if !ids.is_empty() {
        s.outbox_ack(&ids).await.unwrap();
    }
    got.len()
}

fn store() -> MemoryStore {
    MemoryStore::new(
        Arc::new(ManualClock::new(1_700_000_000_000)),
        SpaceConfig::default(),
    )
}

#[tokio::test]
async fn capture_follows_the_spaces_endpoints_unless_opened_for_its_own_sake() {
    let (a, b) = (SpaceName::new("a").unwrap(), SpaceName::new("b").unwrap());

    // Spaces only, as a server without endpoints of its own opens it.
    let s = store();
    assert!(!s.outbox_stats().await.unwrap().open);
    assert_eq!(captured(&s, &a, "ann").await, 0, "closed: nothing kept");
    s.set_space_hooks(&a, &hooks()).await.unwrap();
    s.outbox_open(OutboxOptions {
        max_events: 1_000,
        for_spaces: true,
        ..OutboxOptions::default()
    })
    .await
    .unwrap();
    s.set_space_hooks(&b, &hooks()).await.unwrap();
    assert!(s.outbox_stats().await.unwrap().open);
    assert!(captured(&s, &a, "bob").await > 0);
    s.set_space_hooks(&a, &[]).await.unwrap();
    assert!(
        s.outbox_stats().await.unwrap().open,
        "space b still names endpoints"
    );
    s.set_space_hooks(&b, &[]).await.unwrap();
    assert!(
        !s.outbox_stats().await.unwrap().open,
        "no space names endpoints: closed, as a restarted store would be"
    );
    assert_eq!(captured(&s, &a, "cy").await, 0);
    s.set_space_hooks(&b, &hooks()).await.unwrap();
    assert!(s.outbox_stats().await.unwrap().open, "named again: open");
    assert!(captured(&s, &b, "dee").await > 0);

    // Opened for its own sake (a server's own endpoints): stays open.
    let s = store();
    s.outbox_open(OutboxOptions::default()).await.unwrap();
    s.set_space_hooks(&a, &hooks()).await.unwrap();
    s.set_space_hooks(&a, &[]).await.unwrap();
    assert!(s.outbox_stats().await.unwrap().open);
    assert!(captured(&s, &a, "eve").await > 0);
}
