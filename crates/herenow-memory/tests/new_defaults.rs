//! Defaults changed while the store runs (a server's settings reloaded,
//! issue 45): spaces never configured take them, with their members'
//! statuses judged by them at once; a space configured through the API
//! keeps its own policy; an invalid policy changes nothing.

use std::sync::Arc;

use herenow_core::{
    Heartbeat, ManualClock, MemberId, MemberKey, PresenceStore, SpaceConfig, SpaceName, Status,
};
use herenow_memory::MemoryStore;

const T0: u64 = 1_700_000_000_000;

fn user(id: &str) -> MemberKey {
    MemberKey::user(MemberId::new(id).unwrap())
}

fn space(name: &str) -> SpaceName {
    SpaceName::new(name).unwrap()
}

#[tokio::test]
async fn spaces_never_configured_follow_new_defaults() {
    let clock = ManualClock::new(T0);
    let store = MemoryStore::new(Arc::new(clock.clone()), SpaceConfig::default());
    let (plain, own) = (space("plain"), space("own"));
    let custom = SpaceConfig {
        away_ms: 600_000,
        ..SpaceConfig::default()
    };
    store.set_config(&own, custom).await.unwrap();
    for s in [&plain, &own] {
        store
            .heartbeat(s, &[Heartbeat::now(user("ada"))])
            .await
            .unwrap();
    }
    // Past the default online threshold (60 s), before any away one.
    clock.advance(std::time::Duration::from_secs(90));
    let status = |s: &SpaceName| {
        let store = &store;
        let s = s.clone();
        async move { store.status(&s, &[user("ada")]).await.unwrap()[0].status }
    };
    assert_eq!(status(&plain).await, Status::Away);

    let shorter = SpaceConfig {
        online_ms: 30_000,
        away_ms: 60_000,
        ..SpaceConfig::default()
    };
    assert_eq!(store.set_defaults(shorter).unwrap(), 1);
    assert_eq!(store.defaults(), shorter);
    assert_eq!(store.config(&plain).await.unwrap(), shorter);
    assert_eq!(store.config(&own).await.unwrap(), custom);
    // Judged by the new thresholds at once: 90 s is past away (60 s).
    assert_eq!(status(&plain).await, Status::Offline);
    assert_eq!(status(&own).await, Status::Away);
    // A space created from now on, and one never seen, get them too.
    assert_eq!(store.config(&space("later")).await.unwrap(), shorter);
    // The same defaults again change nothing.
    assert_eq!(store.set_defaults(shorter).unwrap(), 0);
}

#[tokio::test]
async fn invalid_defaults_change_nothing() {
    let store = MemoryStore::new(Arc::new(ManualClock::new(T0)), SpaceConfig::default());
    store
        .heartbeat(&space("s"), &[Heartbeat::now(user("ada"))])
        .await
        .unwrap();
    let backwards = SpaceConfig {
        online_ms: 600_000,
        away_ms: 60_000,
        ..SpaceConfig::default()
    };
    assert!(store.set_defaults(backwards).is_err());
    assert_eq!(store.defaults(), SpaceConfig::default());
    assert_eq!(
        store.config(&space("s")).await.unwrap(),
        SpaceConfig::default()
    );
}
