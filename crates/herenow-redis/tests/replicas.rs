//! Issue 13, `RedisOptions::wait_replicas`: heartbeats are acknowledged
//! once a replica has them (Redis `WAIT`), a master without replicas is
//! never waited on, and a replica that stops answering costs one bounded
//! wait per slot, not one per write; every write acknowledged without its
//! replica is counted. Every other acknowledged write waits the same way:
//! friend sets, a space's policy and webhooks, erasure, live connections.

use herenow_testkit as common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use herenow_core::{
    Attach, ConnId, Heartbeat, LiveConnections, ManualClock, MemberId, MemberKey, OutboxKind,
    PresenceStore, SpaceConfig, SpaceHook, SpaceName, SpaceWebhooks, UserIndex,
};
use herenow_redis::{REPLICAS_RECHECK, RedisOptions, RedisStore};

const T0: u64 = 1_700_000_000_000;
const WAIT: Duration = Duration::from_millis(400);

fn user(id: &str) -> MemberKey {
    MemberKey::user(MemberId::new(id).unwrap())
}

async fn store(url: &str, clock: &ManualClock) -> RedisStore {
    RedisStore::connect(
        url,
        Arc::new(clock.clone()),
        SpaceConfig::default(),
        RedisOptions {
            prefix: "wr".into(),
            wait_replicas: 1,
            wait_timeout: WAIT,
            ..RedisOptions::default()
        },
    )
    .await
    .expect("connect")
}

/// One heartbeat of `id` at a new time (an unchanged score is not
/// replicated, and `WAIT` would have nothing to wait for); how long it
/// took.
async fn beat(s: &RedisStore, clock: &ManualClock, space: &SpaceName, id: &str) -> Duration {
    clock.advance(Duration::from_millis(10));
    let started = Instant::now();
    s.heartbeat(space, &[Heartbeat::now(user(id))])
        .await
        .expect("heartbeat");
    started.elapsed()
}

/// Polls `cond` every 20 ms, failing after 20 s.
fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !cond() {
        assert!(Instant::now() < deadline, "{what}: not within 20 s");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn uid(id: &str) -> MemberId {
    MemberId::new(id).unwrap()
}

/// A master and a replica of it, in sync.
fn replicated_pair() -> (common::RedisServer, common::RedisServer) {
    let master = common::RedisServer::standalone();
    let replica = common::RedisServer::standalone();
    common::raw_command(
        replica.port,
        &format!("REPLICAOF 127.0.0.1 {}", master.port),
    )
    .unwrap();
    wait_until("the replica in sync", || {
        common::raw_command(replica.port, "INFO replication")
            .is_ok_and(|r| r.contains("master_link_status:up"))
            && common::raw_command(master.port, "INFO replication")
                .is_ok_and(|r| r.contains("state=online"))
    });
    (master, replica)
}

#[tokio::test]
async fn a_master_without_replicas_is_not_waited_on_and_its_writes_are_counted() {
    let server = common::RedisServer::standalone();
    let clock = ManualClock::new(T0);
    let s = store(&server.url(), &clock).await;
    let space = SpaceName::new("bare").unwrap();
    for i in 0..20 {
        let took = beat(&s, &clock, &space, &format!("u{i}")).await;
        // `ROLE` says there is no replica: no `WAIT` blocks for its timeout.
        assert!(took < WAIT, "heartbeat {i} took {took:?}");
    }
    assert!(
        s.stats().unreplicated >= 20,
        "every call counted: {:?}",
        s.stats()
    );
    assert!(s.is_ready());
}

#[tokio::test]
async fn writes_wait_for_the_replica_and_a_stopped_replica_costs_one_wait_per_recheck() {
    let (master, replica) = replicated_pair();
    let clock = ManualClock::new(T0);
    let s = store(&master.url(), &clock).await;
    let space = SpaceName::new("replicated").unwrap();
    for i in 0..10 {
        let id = format!("u{i}");
        beat(&s, &clock, &space, &id).await;
        // Acknowledged, so on the replica already.
        let score =
            common::raw_command(replica.port, &format!("ZSCORE wr:{{replicated}}:u {id}")).unwrap();
        assert!(
            !score.starts_with("$-1"),
            "{id} acknowledged but not on the replica: {score:?}"
        );
    }
    assert_eq!(s.stats().unreplicated, 0);

    // A replica that stops answering: the next write waits once, for the
    // wait's timeout, and is counted; until the next check the slot is
    // not waited on.
    replica.pause();
    let first = beat(&s, &clock, &space, "stopped-0").await;
    assert!(
        first >= WAIT && first < WAIT + Duration::from_secs(1),
        "the first write waited {first:?}"
    );
    let counted = s.stats().unreplicated;
    assert!(counted >= 1, "{:?}", s.stats());
    let checked = Instant::now();
    let mut i = 1;
    while checked.elapsed() < REPLICAS_RECHECK / 2 {
        let took = beat(&s, &clock, &space, &format!("stopped-{i}")).await;
        assert!(took < WAIT, "write {i} within the recheck waited {took:?}");
        i += 1;
    }
    assert!(s.stats().unreplicated > counted);
    replica.resume();
    assert!(s.is_ready());
}

#[tokio::test]
async fn every_acknowledged_write_waits_for_the_replica() {
    let (master, replica) = replicated_pair();
    let clock = ManualClock::new(T0);
    let s = store(&master.url(), &clock).await;
    let space = SpaceName::new("all-writes").unwrap();

    // With the replica answering, an acknowledged friend set is on it.
    s.set_friends(&uid("alice"), &[uid("bob"), uid("carol")])
        .await
        .unwrap();
    let on_replica = common::raw_command(replica.port, "SMEMBERS wr:friends:alice").unwrap();
    assert!(
        on_replica.contains("bob") && on_replica.contains("carol"),
        "acknowledged but not on the replica: {on_replica:?}"
    );
    assert_eq!(s.stats().unreplicated, 0);

    // With the replica stopped, each kind of write still answers (after
    // one bounded wait) and is counted as acknowledged without it: each
    // went through the wait, none skipped it.
    replica.pause();
    let first = beat(&s, &clock, &space, "first").await;
    assert!(first >= WAIT, "the first write waited {first:?}");
    let conn = ConnId::new("c1").unwrap();
    let hook = SpaceHook {
        url: "http://127.0.0.1:9/hook".into(),
        kinds: vec![OutboxKind::Join],
        secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw".into(),
    };
    let mut counted = s.stats().unreplicated;
    macro_rules! counts {
        ($what:literal, $write:expr) => {
            clock.advance(Duration::from_millis(10));
            $write.await.expect($what);
            let now = s.stats().unreplicated;
            assert!(
                now > counted,
                "{} acknowledged without waiting for replicas",
                $what
            );
            counted = now;
        };
    }
    counts!("set_friends", s.set_friends(&uid("dave"), &[uid("erin")]));
    counts!("add_friends", s.add_friends(&uid("dave"), &[uid("frank")]));
    counts!(
        "remove_friends",
        s.remove_friends(&uid("dave"), &[uid("erin")])
    );
    counts!(
        "set_config",
        s.set_config(
            &space,
            SpaceConfig {
                online_ms: 20_000,
                ..SpaceConfig::default()
            }
        )
    );
    counts!(
        "set_space_hooks",
        s.set_space_hooks(&space, std::slice::from_ref(&hook))
    );
    counts!(
        "attach",
        s.attach(
            &space,
            &Attach {
                member: user("gina"),
                conn: conn.clone(),
                meta: None,
                invisible: false,
                ttl_ms: 60_000,
            }
        )
    );
    counts!("detach", s.detach(&space, &user("gina"), &conn));
    counts!("erase_user", s.erase_user(&uid("dave")));
    let _ = counted;
    replica.resume();
}
