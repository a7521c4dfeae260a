//! What the seed-layout tests share (`layouts.rs`, `layouts_rolling.rs`):
//! their imports, the time they start at, raw seed-style connections, and
//! the assertions every layout makes. Each test file uses a part of it.

#![allow(dead_code, unused_imports)]

pub use herenow_testkit as common;

pub use std::sync::Arc;
pub use std::time::Duration;

pub use redis::AsyncCommands;
pub use redis::aio::MultiplexedConnection;

pub use herenow_core::{
    Attach, Capability, ConnId, Error, Heartbeat, KindFilter, ListQuery, ManualClock, MemberId,
    MemberKey, Metadata, Order, PresenceStore, SpaceConfig, SpaceName, Status,
};
pub use herenow_redis::{LayoutOptions, SeedLayout, SeedLayoutStore};

/// 2023-11-14 22:13:20 UTC: minute 13 of the hour.
pub const T0: u64 = 1_700_000_000_000;
pub const T0_S: u64 = T0 / 1000;

pub fn user(id: &str) -> MemberKey {
    MemberKey::user(MemberId::new(id).unwrap())
}

pub fn guest(id: &str) -> MemberKey {
    MemberKey::guest(MemberId::new(id).unwrap())
}

pub fn space(name: &str) -> SpaceName {
    SpaceName::new(name).unwrap()
}

pub fn ids(members: &[herenow_core::MemberStatus]) -> Vec<&str> {
    members.iter().map(|m| m.member.id.as_str()).collect()
}

pub async fn raw(url: &str) -> MultiplexedConnection {
    redis::Client::open(url)
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap()
}

pub async fn open(
    url: &str,
    layout: SeedLayout,
    key: &str,
    guests: Option<&str>,
    clock: &ManualClock,
    opts: LayoutOptions,
) -> SeedLayoutStore {
    SeedLayoutStore::connect(
        url,
        layout,
        key,
        guests,
        Arc::new(clock.clone()),
        SpaceConfig::default(),
        opts,
    )
    .await
    .expect("connect")
}

pub fn by_id(limit: usize) -> ListQuery {
    ListQuery {
        order: Some(Order::Id),
        limit,
        ..ListQuery::default()
    }
}

/// Unsupported, and naming the layout.
pub fn assert_unsupported<T: std::fmt::Debug>(r: herenow_core::Result<T>, layout: &str) {
    match r {
        Err(Error::Unsupported { store, .. }) => {
            assert_eq!(store, format!("redis layout {layout}"))
        }
        other => panic!("expected Unsupported from {layout}, got {other:?}"),
    }
}

/// What no seed layout stores: metadata, friends, events, live
/// connections, policies, the list of spaces, remembered last seen (issue
/// 8: "last seen anywhere" and erasure). What a whole capability would
/// need, the layout does not offer at all, and a server answers its
/// calls `Unsupported`, naming the layout.
pub async fn assert_no_extras(s: &SeedLayoutStore, layout: &str) {
    let sp = space("room");
    let alice = MemberId::new("alice").unwrap();
    let meta = Metadata::from_json(r#"{"name":"Alice"}"#).unwrap();
    let with_meta = Heartbeat {
        meta: Some(meta),
        ..Heartbeat::now(user("alice"))
    };
    assert_unsupported(s.heartbeat(&sp, &[with_meta]).await, layout);
    assert_unsupported(s.friends(&alice).await, layout);
    assert_unsupported(s.set_friends(&alice, &[]).await, layout);
    assert_unsupported(s.online_friends(&sp, &alice, None, 10).await, layout);
    assert_unsupported(s.subscribe(&sp).await.map(|_| ()), layout);
    assert_unsupported(s.set_config(&sp, SpaceConfig::default()).await, layout);
    assert_unsupported(s.spaces(None, 10).await, layout);
    // Last seen anywhere and erasure: no user index. Live connections:
    // the seeds' keys hold none. No events to follow users by or to keep
    // for webhooks, and nowhere to keep a space's endpoints.
    assert!(s.user_index().is_none());
    assert!(s.live_connections().is_none());
    assert!(s.following().is_none());
    assert!(s.webhook_outbox().is_none());
    assert!(s.space_webhooks().is_none());
    assert!(Capability::offered_by(s).is_empty());
    let store: &dyn PresenceStore = s;
    assert_unsupported::<()>(Err(store.lacks(Capability::UserIndex)), layout);
    assert_unsupported::<()>(Err(store.lacks(Capability::LiveConnections)), layout);
    // Without a guest template there are no guests to write or read.
    assert_unsupported(
        s.heartbeat(&sp, &[Heartbeat::now(guest("1.2.3.4"))]).await,
        layout,
    );
    let guests = ListQuery {
        kinds: KindFilter::Guests,
        ..by_id(10)
    };
    assert_unsupported(s.list(&sp, &guests).await, layout);
}
