//! What only a Redis store has to get right: the key layout in a cluster,
//! scripts after a flush, outages, and several stores sharing one Redis.

use herenow_testkit as common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use herenow_core::{
    Error, EventKind, Heartbeat, ManualClock, MemberId, MemberKey, PresenceStore, SpaceConfig,
    SpaceName, Status,
};
use herenow_redis::{RedisOptions, RedisStore};

const T0: u64 = 1_700_000_000_000;

fn user(id: &str) -> MemberKey {
    MemberKey::user(MemberId::new(id).unwrap())
}

async fn store(url: &str, clock: &ManualClock, prefix: &str, timeout: Duration) -> RedisStore {
    let opts = RedisOptions {
        prefix: prefix.into(),
        timeout,
        ..RedisOptions::default()
    };
    RedisStore::connect(url, Arc::new(clock.clone()), SpaceConfig::default(), opts)
        .await
        .expect("connect")
}

#[tokio::test]
async fn keys_of_a_space_share_one_slot() {
    let cluster = common::RedisCluster::start();
    let clock = ManualClock::new(T0);
    let s = store(&cluster.url(), &clock, "slots", Duration::from_secs(2)).await;
    let port = cluster.nodes[0].port;
    for name in ["room:42", "a.b-c_d@e", "x"] {
        let sp = SpaceName::new(name).unwrap();
        let slots: Vec<String> = s
            .space_keys(&sp)
            .iter()
            .map(|k| common::raw_command(port, &format!("CLUSTER KEYSLOT {k}")).unwrap())
            .collect();
        assert!(
            slots.iter().all(|x| *x == slots[0]),
            "keys of {name} in several slots: {slots:?}"
        );
        // And the scripts run there: a cross-slot script would be refused.
        s.heartbeat(&sp, &[Heartbeat::now(user("a"))])
            .await
            .unwrap();
        assert_eq!(s.count(&sp, None).await.unwrap().users, 1);
    }
}

#[tokio::test]
async fn scripts_reload_after_script_flush() {
    let server = common::RedisServer::standalone();
    let clock = ManualClock::new(T0);
    let s = store(&server.url(), &clock, "flush", Duration::from_secs(2)).await;
    let sp = SpaceName::new("flush").unwrap();
    s.heartbeat(&sp, &[Heartbeat::now(user("a"))])
        .await
        .unwrap();
    let reply = common::raw_command(server.port, "SCRIPT FLUSH").unwrap();
    assert!(reply.starts_with("+OK"), "{reply}");
    s.heartbeat(&sp, &[Heartbeat::now(user("b"))])
        .await
        .unwrap();
    assert_eq!(s.count(&sp, None).await.unwrap().users, 2);
    s.tick().await.unwrap();
}

#[tokio::test]
async fn scripts_reload_after_script_flush_on_a_cluster() {
    let cluster = common::RedisCluster::start();
    let clock = ManualClock::new(T0);
    let s = store(&cluster.url(), &clock, "flush", Duration::from_secs(2)).await;
    let sp = SpaceName::new("flush").unwrap();
    s.heartbeat(&sp, &[Heartbeat::now(user("a"))])
        .await
        .unwrap();
    for n in &cluster.nodes {
        common::raw_command(n.port, "SCRIPT FLUSH").unwrap();
    }
    s.heartbeat(&sp, &[Heartbeat::now(user("b"))])
        .await
        .unwrap();
    assert_eq!(s.count(&sp, None).await.unwrap().users, 2);
}

/// Reads fail fast while Redis is down; heartbeats are buffered (issue 3)
/// and written back after the client (redis-rs' `ConnectionManager`)
/// reconnects.
#[tokio::test]
async fn a_stopped_server_is_unavailable_within_the_timeout() {
    let mut server = common::RedisServer::standalone();
    let clock = ManualClock::new(T0);
    let timeout = Duration::from_millis(500);
    let s = store(&server.url(), &clock, "down", timeout).await;
    let sp = SpaceName::new("down").unwrap();
    s.heartbeat(&sp, &[Heartbeat::now(user("a"))])
        .await
        .unwrap();
    assert!(s.is_ready());
    server.stop();
    for _ in 0..3 {
        let started = Instant::now();
        let e = s.count(&sp, None).await.unwrap_err();
        assert!(matches!(e, Error::Unavailable { .. }), "{e:?}");
        s.heartbeat(&sp, &[Heartbeat::now(user("b"))])
            .await
            .expect("a heartbeat is buffered while redis is down");
        assert!(
            started.elapsed() < 4 * timeout,
            "took {:?}",
            started.elapsed()
        );
    }
    assert!(!s.is_ready());
    assert_eq!(s.stats().buffered, 1, "coalesced to one member");
    // Back again: the client reconnects by itself and the
    // buffer is written back.
    server.restart();
    let deadline = Instant::now() + Duration::from_secs(10);
    while !s.is_ready() {
        assert!(Instant::now() < deadline, "not ready within 10 s");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    s.heartbeat(&sp, &[Heartbeat::now(user("c"))])
        .await
        .unwrap();
    let got = s.status(&sp, &[user("b"), user("c")]).await.unwrap();
    assert_eq!(got[0].status, Status::Online);
    assert_eq!(got[1].status, Status::Online);
}

#[tokio::test]
async fn connecting_to_nothing_fails_loudly() {
    let server = common::RedisServer::standalone();
    let url = server.url();
    drop(server);
    let started = Instant::now();
    let r = RedisStore::connect(
        &url,
        Arc::new(ManualClock::new(T0)),
        SpaceConfig::default(),
        RedisOptions {
            timeout: Duration::from_millis(500),
            ..RedisOptions::default()
        },
    )
    .await;
    assert!(matches!(r, Err(Error::Unavailable { .. })));
    assert!(started.elapsed() < Duration::from_secs(3));
    let r = RedisStore::connect(
        "memcached://x",
        Arc::new(ManualClock::new(T0)),
        SpaceConfig::default(),
        RedisOptions::default(),
    )
    .await;
    assert!(matches!(r, Err(Error::Invalid(_))));
}

/// Two herenow servers over one Redis: heartbeats through one, reads and
/// events through the other.
async fn two_stores(url: &str) {
    let clock = ManualClock::new(T0);
    let a = store(url, &clock, "two", Duration::from_secs(2)).await;
    let b = store(url, &clock, "two", Duration::from_secs(2)).await;
    let sp = SpaceName::new("lobby").unwrap();
    a.heartbeat(&sp, &[Heartbeat::now(user("early"))])
        .await
        .unwrap();
    let mut sub = b.subscribe(&sp).await.unwrap();
    assert_eq!(sub.snapshot.len(), 1);
    a.heartbeat(&sp, &[Heartbeat::now(user("ada"))])
        .await
        .unwrap();
    let e = tokio::time::timeout(Duration::from_secs(2), sub.events.recv())
        .await
        .expect("an event within 2 s")
        .unwrap();
    assert_eq!((e.kind, e.member.id.as_str()), (EventKind::Join, "ada"));
    assert_eq!(b.count(&sp, None).await.unwrap().users, 2);
    clock.advance(Duration::from_secs(61));
    // Background work on either server moves everyone's status once.
    a.tick().await.unwrap();
    b.tick().await.unwrap();
    let mut kinds = Vec::new();
    for _ in 0..2 {
        let e = tokio::time::timeout(Duration::from_secs(2), sub.events.recv())
            .await
            .expect("an event within 2 s")
            .unwrap();
        kinds.push(e.kind);
    }
    assert_eq!(kinds, [EventKind::Away, EventKind::Away]);
    assert!(
        tokio::time::timeout(Duration::from_millis(150), sub.events.recv())
            .await
            .is_err(),
        "no duplicate events from the second tick"
    );
}

#[tokio::test]
async fn two_stores_standalone() {
    let server = common::RedisServer::standalone();
    two_stores(&server.url()).await;
}

#[tokio::test]
async fn two_stores_cluster() {
    let cluster = common::RedisCluster::start();
    two_stores(&cluster.url()).await;
}

/// Issue 3, "Expiry that never stalls Redis": with several servers only one
/// sweeps a space at a time, and when it stops another takes over once its
/// lease expires in Redis (real time: the manual clock does not move
/// Redis's own expiry, so this polls with a deadline).
#[tokio::test]
async fn one_store_sweeps_a_space_and_another_takes_over_when_it_stops() {
    let server = common::RedisServer::standalone();
    let clock = ManualClock::new(T0);
    let lease = Duration::from_secs(1);
    let url = server.url();
    let open = || {
        RedisStore::connect(
            &url,
            Arc::new(clock.clone()),
            SpaceConfig::default(),
            RedisOptions {
                prefix: "lease".into(),
                lease,
                ..RedisOptions::default()
            },
        )
    };
    let a = open().await.unwrap();
    let b = open().await.unwrap();
    assert_ne!(a.lease_owner(), b.lease_owner());
    let sp = SpaceName::new("hall").unwrap();
    a.heartbeat(&sp, &[Heartbeat::now(user("x")), Heartbeat::now(user("y"))])
        .await
        .unwrap();
    // `a` sweeps first and takes the lease.
    assert_eq!(a.tick().await.unwrap().transitions, 0);
    let lease_key = "lease:{hall}:lease";
    assert!(
        common::raw_command(server.port, &format!("GET {lease_key}"))
            .unwrap()
            .contains(a.lease_owner())
    );

    clock.advance(Duration::from_secs(61));
    assert_eq!(
        b.tick().await.unwrap().transitions,
        0,
        "b skips the space a holds"
    );
    assert_eq!(a.tick().await.unwrap().transitions, 2, "a marks both away");

    // `a` stops ticking. Time moves past `away`: b takes over once a's
    // lease has expired, and emits the two timeout leaves itself.
    clock.advance(Duration::from_secs(5 * 60));
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut skipped = 0;
    loop {
        let r = b.tick().await.unwrap();
        if r.transitions > 0 {
            assert_eq!(r.transitions, 2);
            break;
        }
        skipped += 1;
        assert!(Instant::now() < deadline, "b did not take over within 10 s");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(skipped > 0, "b waited for the lease to expire");
    // Now b holds it: a skips the space while b keeps ticking.
    a.heartbeat(&sp, &[Heartbeat::now(user("z"))])
        .await
        .unwrap();
    clock.advance(Duration::from_secs(61));
    assert_eq!(a.tick().await.unwrap().transitions, 0);
    assert_eq!(b.tick().await.unwrap().transitions, 1);
}
