//! Issue 9, watching a contact list, where the contract suite cannot look:
//! two servers on one Redis (a user goes online through one and a watcher
//! on the other sees it; a server that dies leaves no watcher stale beyond
//! the connection TTL), counted subscriptions, and feeds that lag when the
//! link to Redis drops and comes back.

use herenow_testkit as common;

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use herenow_core::{
    Attach, ConnId, Error, EventKind, Following, Heartbeat, InvalidInput, LeaveReason,
    LiveConnections, ManualClock, MemberId, MemberKey, Metadata, PresenceStore, RecvError,
    SpaceConfig, SpaceName, Status, UserChange, UserFeed,
};
use herenow_redis::{RedisOptions, RedisStore};

const T0: u64 = 1_700_000_000_000;
const TTL_MS: u64 = 30_000;

fn id(s: &str) -> MemberId {
    MemberId::new(s).unwrap()
}

fn user(s: &str) -> MemberKey {
    MemberKey::user(id(s))
}

/// How long a change may take to reach a feed: a bound on liveness, not
/// on speed. Generous, because on a loaded machine (a cluster's three
/// nodes and the test binaries sharing two cores) a publish can take
/// seconds to cross; what each test asserts is which changes arrive, in
/// which order.
const WITHIN: Duration = Duration::from_secs(15);

/// A store whose commands time out after 500 ms: the tests of a dropped
/// link want it noticed quickly.
async fn store(url: &str, clock: &ManualClock, prefix: &str) -> RedisStore {
    store_with(url, clock, prefix, Duration::from_millis(500)).await
}

async fn store_with(url: &str, clock: &ManualClock, prefix: &str, timeout: Duration) -> RedisStore {
    let opts = RedisOptions {
        prefix: prefix.into(),
        timeout,
        ..RedisOptions::default()
    };
    RedisStore::connect(url, Arc::new(clock.clone()), SpaceConfig::default(), opts)
        .await
        .expect("connect")
}

async fn next(feed: &mut UserFeed, within: Duration) -> Result<UserChange, RecvError> {
    tokio::time::timeout(within, feed.recv())
        .await
        .expect("a change in time")
}

/// The next change, a presence event: its kind, space, user, status and
/// reason.
async fn presence(feed: &mut UserFeed) -> (EventKind, String, String, Status, Option<LeaveReason>) {
    match next(feed, WITHIN).await {
        Ok(UserChange::Presence(e)) => (
            e.kind,
            e.space.to_string(),
            e.member.id.to_string(),
            e.status,
            e.reason,
        ),
        other => panic!("expected a presence change, got {other:?}"),
    }
}

async fn quiet(feed: &mut UserFeed) {
    if let Ok(c) = tokio::time::timeout(Duration::from_millis(150), feed.recv()).await {
        panic!("unexpected {c:?}");
    }
}

/// Store `a` writes, store `b` follows: every change made through `a`,
/// and by the sweep of either, reaches `b`'s feed; when `a` dies, `b`'s
/// sweep closes its connections after their TTL and `b`'s watchers see
/// the leave.
///
/// The stores keep the default command timeout (2 s): with 500 ms, a
/// command slowed by load could time out, and the heartbeat then waits in
/// the outage buffer and comes back after the replayer's backoff (up to
/// 5 s), later than the test used to wait for its event. Nothing here is
/// about a link that drops.
async fn two_servers_one_redis(url: &str) {
    let clock = ManualClock::new(T0);
    let timeout = RedisOptions::default().timeout;
    let a = store_with(url, &clock, "two", timeout).await;
    let b = store_with(url, &clock, "two", timeout).await;
    let room = SpaceName::new("room").unwrap();
    let hall = SpaceName::new("hall").unwrap();
    let mut feed = b.user_feed().unwrap();
    b.follow(&[id("ann")]).await.unwrap();
    let s = |n: &str| n.to_owned();

    a.heartbeat(&room, &[Heartbeat::now(user("ann"))])
        .await
        .unwrap();
    assert_eq!(
        presence(&mut feed).await,
        (EventKind::Join, s("room"), s("ann"), Status::Online, None)
    );
    a.set_friends(&id("ann"), &[id("bob")]).await.unwrap();
    assert_eq!(
        next(&mut feed, WITHIN).await,
        Ok(UserChange::Friends(id("ann")))
    );
    // Away by the sweep of the writing server (which takes the room's
    // lease), back by its next heartbeat.
    clock.advance(Duration::from_secs(60));
    a.tick().await.unwrap();
    assert_eq!(presence(&mut feed).await.0, EventKind::Away);
    a.heartbeat(&room, &[Heartbeat::now(user("ann"))])
        .await
        .unwrap();
    assert_eq!(presence(&mut feed).await.0, EventKind::Back);

    // A live connection through `a` in a space `b` sweeps; then `a` dies
    // without closing it, and without a word.
    a.attach(
        &hall,
        &Attach {
            member: user("ann"),
            conn: ConnId::new("a-phone").unwrap(),
            meta: None,
            invisible: false,
            ttl_ms: TTL_MS,
        },
    )
    .await
    .unwrap();
    assert_eq!(
        presence(&mut feed).await,
        (EventKind::Join, s("hall"), s("ann"), Status::Online, None)
    );
    b.tick().await.unwrap();
    drop(a);
    clock.advance(Duration::from_millis(TTL_MS - 1));
    b.tick().await.unwrap();
    quiet(&mut feed).await;
    clock.advance(Duration::from_millis(2));
    assert_eq!(b.tick().await.unwrap().connections_expired, 1);
    assert_eq!(
        presence(&mut feed).await,
        (
            EventKind::Leave,
            s("hall"),
            s("ann"),
            Status::Offline,
            Some(LeaveReason::Timeout)
        )
    );
    // A friend write through the survivor reaches its own feed too.
    b.add_friends(&id("ann"), &[id("cy")]).await.unwrap();
    assert_eq!(
        next(&mut feed, WITHIN).await,
        Ok(UserChange::Friends(id("ann")))
    );
    quiet(&mut feed).await;
}

#[tokio::test]
async fn two_servers_one_standalone_redis() {
    let server = common::RedisServer::standalone();
    two_servers_one_redis(&server.url()).await;
}

#[tokio::test]
async fn two_servers_one_cluster() {
    let cluster = common::RedisCluster::start();
    two_servers_one_redis(&cluster.url()).await;
}

/// The largest `sub=` count `CLIENT LIST` shows: the subscriptions of the
/// store's client (the test's own connections subscribe to nothing).
fn subscriptions(port: u16) -> u64 {
    let list = common::raw_command(port, "CLIENT LIST").expect("client list");
    list.split_whitespace()
        .filter_map(|f| f.strip_prefix("sub="))
        .filter_map(|n| n.parse().ok())
        .max()
        .unwrap_or(0)
}

#[tokio::test]
async fn follows_are_counted_subscriptions_in_bounded_commands() {
    let server = common::RedisServer::standalone();
    let clock = ManualClock::new(T0);
    let s = store(&server.url(), &clock, "count").await;
    s.follow(&[id("ann"), id("ann")]).await.unwrap();
    s.follow(&[id("ann")]).await.unwrap();
    assert_eq!((s.followed_users(), subscriptions(server.port)), (1, 1));
    s.unfollow(&[id("ann"), id("ann")]).await.unwrap();
    assert_eq!(subscriptions(server.port), 1);
    s.unfollow(&[id("ann"), id("bob")]).await.unwrap();
    assert_eq!((s.followed_users(), subscriptions(server.port)), (0, 0));
    // A contact list of 1,000: several SUBSCRIBE commands of at most 256
    // channels each.
    let many: Vec<MemberId> = (0..1_000).map(|i| id(&format!("u{i}"))).collect();
    s.follow(&many).await.unwrap();
    assert_eq!(subscriptions(server.port), 1_000);
    s.unfollow(&many).await.unwrap();
    assert_eq!(subscriptions(server.port), 0);
    // Bounded like every batch.
    let too_many: Vec<MemberId> = (0..=herenow_core::limits::MAX_BATCH)
        .map(|i| id(&format!("u{i}")))
        .collect();
    assert!(matches!(
        s.follow(&too_many).await,
        Err(Error::Invalid(InvalidInput::BatchTooLarge { .. }))
    ));
    assert_eq!(s.followed_users(), 0);
}

/// After the link to Redis dropped: the feed lags once the watcher's
/// subscriptions are back, and a change of ann's made after that (by
/// `write`) reaches it as an event of kind `kind`. The writer's write may
/// wait in its outage buffer first: the event comes when it is written
/// back.
async fn lag_then<F: Future<Output = ()>>(feed: &mut UserFeed, write: F, kind: EventKind) {
    let deadline = Instant::now() + Duration::from_secs(20);
    let left = || deadline.saturating_duration_since(Instant::now());
    match next(feed, left()).await {
        Err(RecvError::Lagged(_)) => {}
        other => panic!("expected a lag, got {other:?}"),
    }
    write.await;
    loop {
        match next(feed, left()).await {
            Ok(UserChange::Presence(e)) if e.kind == kind => {
                assert_eq!(e.member.id.as_str(), "ann");
                return;
            }
            // Told again: the link dropped twice.
            Err(RecvError::Lagged(_)) => {}
            other => panic!("expected ann's {kind:?}, got {other:?}"),
        }
    }
}

/// The watching store and a writing one; ann joins and the watcher hears
/// it.
async fn watcher_and_writer(url: &str, clock: &ManualClock) -> (RedisStore, RedisStore, UserFeed) {
    let watcher = store(url, clock, "lost").await;
    let writer = store(url, clock, "lost").await;
    let mut feed = watcher.user_feed().unwrap();
    watcher.follow(&[id("ann")]).await.unwrap();
    writer
        .heartbeat(&room(), &[Heartbeat::now(user("ann"))])
        .await
        .unwrap();
    assert_eq!(presence(&mut feed).await.0, EventKind::Join);
    (watcher, writer, feed)
}

fn room() -> SpaceName {
    SpaceName::new("room").unwrap()
}

#[tokio::test]
async fn feeds_lag_and_subscriptions_come_back_when_redis_restarts() {
    let mut server = common::RedisServer::standalone();
    let clock = ManualClock::new(T0);
    let (watcher, writer, mut feed) = watcher_and_writer(&server.url(), &clock).await;
    // Restarted empty: ann's presence, and whatever was published while
    // the link was down, are gone.
    server.restart();
    let beat = async {
        writer
            .heartbeat(&room(), &[Heartbeat::now(user("ann"))])
            .await
            .unwrap();
    };
    lag_then(&mut feed, beat, EventKind::Join).await;
    assert_eq!(watcher.followed_users(), 1);
    assert_eq!(subscriptions(server.port), 1);
}

#[tokio::test]
async fn feeds_lag_and_subscriptions_come_back_when_cluster_links_drop() {
    let cluster = common::RedisCluster::start();
    let clock = ManualClock::new(T0);
    let (_watcher, writer, mut feed) = watcher_and_writer(&cluster.url(), &clock).await;
    // Every client of every node cut off (the test's own connection is
    // spared); the data stays.
    for n in &cluster.nodes {
        for kind in ["normal", "pubsub"] {
            common::raw_command(n.port, &format!("CLIENT KILL TYPE {kind}")).unwrap();
        }
    }
    let leave = async {
        writer.leave(&room(), &[user("ann")]).await.unwrap();
    };
    lag_then(&mut feed, leave, EventKind::Leave).await;
    let subscribed: u64 = cluster.nodes.iter().map(|n| subscriptions(n.port)).sum();
    assert_eq!(subscribed, 1);
}

/// A user's channel says what changed, not the metadata: the space's
/// events still carry it.
#[tokio::test]
async fn users_channels_leave_metadata_out() {
    let server = common::RedisServer::standalone();
    let clock = ManualClock::new(T0);
    let s = store(&server.url(), &clock, "meta").await;
    let mut feed = s.user_feed().unwrap();
    s.follow(&[id("ann")]).await.unwrap();
    let mut sub = s.subscribe(&room()).await.unwrap();
    let beat = Heartbeat {
        member: user("ann"),
        at_ms: None,
        meta: Some(Metadata::from_json(r#"{"device":"phone"}"#).unwrap()),
    };
    s.heartbeat(&room(), &[beat]).await.unwrap();
    let Ok(UserChange::Presence(e)) = next(&mut feed, WITHIN).await else {
        panic!("expected ann's join");
    };
    assert_eq!((e.kind, e.meta.as_ref()), (EventKind::Join, None));
    let e = tokio::time::timeout(Duration::from_secs(2), sub.events.recv())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        e.meta.as_ref().map(Metadata::as_json),
        Some(r#"{"device":"phone"}"#)
    );
}
