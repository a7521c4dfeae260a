//! Issue 3, "When Redis fails": heartbeat under load, kill the test's
//! `redis-server`, keep heartbeating, start it again on the same port, and
//! check that every member heartbeated during the outage (and after it) is
//! present with its newest time and latest metadata (with one small round
//! of coalesced heartbeats in flight at a time and with four).

use herenow_testkit as common;

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use herenow_core::{
    Error, Heartbeat, ManualClock, MemberId, MemberKey, Metadata, PresenceStore, SpaceConfig,
    SpaceName,
};
use herenow_redis::{RedisOptions, RedisStore};

const T0: u64 = 1_700_000_000_000;
const TASKS: usize = 4;
/// Members per task in each group.
const MEMBERS: usize = 10;
/// Calls each task makes in a phase before the test moves on.
const CALLS_PER_PHASE: u64 = 30;

fn user(id: &str) -> MemberKey {
    MemberKey::user(MemberId::new(id).unwrap())
}

/// Waits for `cond` by polling, failing after `within`.
async fn wait_for(what: &str, within: Duration, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + within;
    while !cond() {
        assert!(Instant::now() < deadline, "{what}: not within {within:?}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

struct Load {
    phase: AtomicU8,
    stop: AtomicBool,
    /// Calls made, per phase (0 before the kill, 1 during the outage,
    /// 2 after the restart), per task.
    calls: [[AtomicU64; TASKS]; 3],
    /// Heartbeat times: strictly increasing over all tasks.
    next_at: AtomicU64,
    slowest_ms: AtomicU64,
}

impl Load {
    fn calls_in(&self, phase: usize) -> u64 {
        self.calls[phase]
            .iter()
            .map(|c| c.load(Ordering::SeqCst))
            .min()
            .unwrap()
    }
}

/// One task: each call heartbeats its `all-` members (every phase) and the
/// members of the current phase, each with a new time and metadata naming
/// that time. Returns the newest (time, metadata) it sent per member.
async fn heartbeater(
    store: Arc<RedisStore>,
    space: SpaceName,
    load: Arc<Load>,
    task: usize,
    bound: Duration,
) -> HashMap<String, u64> {
    let mut newest = HashMap::new();
    while !load.stop.load(Ordering::SeqCst) {
        let phase = load.phase.load(Ordering::SeqCst) as usize;
        let mut beats = Vec::new();
        for group in ["all".to_owned(), format!("p{phase}")] {
            for j in 0..MEMBERS {
                let id = format!("{group}-{task}-{j}");
                let at = load.next_at.fetch_add(1, Ordering::SeqCst);
                let meta = Metadata::from_json(&format!(r#"{{"at":{at}}}"#)).unwrap();
                beats.push(Heartbeat {
                    member: user(&id),
                    at_ms: Some(at),
                    meta: Some(meta),
                });
                newest.insert(id, at);
            }
        }
        let started = Instant::now();
        let r = store.heartbeat(&space, &beats).await;
        let took = started.elapsed();
        load.slowest_ms
            .fetch_max(took.as_millis() as u64, Ordering::SeqCst);
        let report = r.unwrap_or_else(|e| panic!("heartbeat in phase {phase} failed: {e:?}"));
        assert_eq!(report.accepted, beats.len() as u64, "phase {phase}");
        assert!(took < bound, "a heartbeat took {took:?} in phase {phase}");
        load.calls[phase][task].fetch_add(1, Ordering::SeqCst);
        // Let the other tasks and the replayer run between calls.
        tokio::task::yield_now().await;
    }
    newest
}

/// A failing round answers the calls queued behind it while others may
/// still be in flight.
#[tokio::test]
async fn no_heartbeat_lost_when_redis_is_killed_and_restarted() {
    let mut server = common::RedisServer::standalone();
    // Every heartbeat has an explicit time within the retention of "now".
    let clock = ManualClock::new(T0);
    let timeout = Duration::from_millis(500);
    let opts = RedisOptions {
        prefix: "outage".into(),
        timeout,
        ..RedisOptions::default()
    };
    let store = Arc::new(
        RedisStore::connect(
            &server.url(),
            Arc::new(clock.clone()),
            SpaceConfig::default(),
            opts,
        )
        .await
        .expect("connect"),
    );
    let space = SpaceName::new("lobby").unwrap();
    let load = Arc::new(Load {
        phase: AtomicU8::new(0),
        stop: AtomicBool::new(false),
        calls: Default::default(),
        next_at: AtomicU64::new(T0 - 600_000),
        slowest_ms: AtomicU64::new(0),
    });
    // A call may wait for one command's timeout (the first failure), never
    // for a dead server beyond it.
    let bound = timeout + Duration::from_millis(500);
    let tasks: Vec<_> = (0..TASKS)
        .map(|t| {
            tokio::spawn(heartbeater(
                store.clone(),
                space.clone(),
                load.clone(),
                t,
                bound,
            ))
        })
        .collect();

    wait_for(
        "heartbeats before the kill",
        Duration::from_secs(20),
        || load.calls_in(0) >= CALLS_PER_PHASE,
    )
    .await;
    assert!(store.is_ready());
    assert_eq!(store.stats().buffered, 0);

    let pid = server.pid().expect("running");
    server = tokio::task::spawn_blocking(move || {
        server.kill();
        server
    })
    .await
    .unwrap();
    assert!(!std::path::Path::new(&format!("/proc/{pid}")).exists());
    load.phase.store(1, Ordering::SeqCst);
    wait_for(
        "heartbeats during the outage",
        Duration::from_secs(30),
        || load.calls_in(1) >= CALLS_PER_PHASE,
    )
    .await;
    assert!(!store.is_ready(), "not ready while redis is down");
    // The replayer's ping fails within the timeout; heartbeats keep going
    // meanwhile, so the outage also covers its retries.
    wait_for("the store sees redis down", Duration::from_secs(10), || {
        !store.stats().redis_up
    })
    .await;
    let stats = store.stats();
    assert!(stats.buffered >= (TASKS * MEMBERS * 2) as u64, "{stats:?}");
    // Reads are refused quickly, never answered from memory.
    let started = Instant::now();
    let e = store.count(&space, None).await.unwrap_err();
    assert!(matches!(e, Error::Unavailable { .. }), "{e:?}");
    assert!(started.elapsed() < bound, "took {:?}", started.elapsed());

    server = tokio::task::spawn_blocking(move || {
        server.start_again();
        server
    })
    .await
    .unwrap();
    load.phase.store(2, Ordering::SeqCst);
    wait_for(
        "heartbeats after the restart",
        Duration::from_secs(30),
        || load.calls_in(2) >= CALLS_PER_PHASE,
    )
    .await;
    load.stop.store(true, Ordering::SeqCst);
    let mut newest: HashMap<String, u64> = HashMap::new();
    for t in tasks {
        newest.extend(t.await.unwrap());
    }
    wait_for("the buffer drained", Duration::from_secs(30), || {
        store.is_ready()
    })
    .await;

    // The data from before the kill is gone (no persistence), so check the
    // members heartbeated during the outage and after it: all of them.
    let checked: Vec<(&String, &u64)> = newest
        .iter()
        .filter(|(id, _)| !id.starts_with("p0-"))
        .collect();
    assert_eq!(checked.len(), TASKS * MEMBERS * 3);
    let members: Vec<MemberKey> = checked.iter().map(|(id, _)| user(id)).collect();
    let got = store.status(&space, &members).await.unwrap();
    for ((id, at), status) in checked.iter().zip(&got) {
        assert_eq!(status.last_seen_ms, Some(**at), "{id}: newest time");
        let meta = status.meta.as_ref().map(|m| m.as_json().to_owned());
        assert_eq!(
            meta.as_deref(),
            Some(format!(r#"{{"at":{at}}}"#).as_str()),
            "{id}: latest metadata"
        );
    }
    let stats = store.stats();
    assert_eq!(stats.dropped, 0, "{stats:?}");
    assert_eq!(stats.buffered, 0, "{stats:?}");
    assert!(
        stats.replayed >= (TASKS * MEMBERS * 2) as u64,
        "the outage's members were written back: {stats:?}"
    );
    assert!(stats.redis_up);
    eprintln!(
        "slowest heartbeat {} ms, {stats:?}",
        load.slowest_ms.load(Ordering::SeqCst)
    );
    store.shutdown().await;
    drop(server);
}

/// Leaves buffered during an outage are replayed after the heartbeats
/// before them, and a buffered heartbeat after a leave brings the member
/// back.
#[tokio::test]
async fn leaves_buffered_during_an_outage_win_over_earlier_heartbeats() {
    let mut server = common::RedisServer::standalone();
    let store = at_t0(&server, "leaves", RedisOptions::default()).await;
    let sp = SpaceName::new("room").unwrap();
    server.kill();
    let beat = |id: &str, at: u64| Heartbeat {
        member: user(id),
        at_ms: Some(at),
        meta: None,
    };
    store
        .heartbeat(&sp, &[beat("gone", T0 - 10), beat("back", T0 - 10)])
        .await
        .unwrap();
    assert_eq!(
        store
            .leave(&sp, &[user("gone"), user("back")])
            .await
            .unwrap(),
        0,
        "unknown while buffered"
    );
    store.heartbeat(&sp, &[beat("back", T0 - 5)]).await.unwrap();
    assert_eq!(store.stats().buffered, 2);
    server.start_again();
    wait_for("the buffer drained", Duration::from_secs(30), || {
        store.is_ready()
    })
    .await;
    let got = store
        .status(&sp, &[user("gone"), user("back")])
        .await
        .unwrap();
    assert_eq!(got[0].last_seen_ms, None, "the leave won");
    assert_eq!(got[1].last_seen_ms, Some(T0 - 5), "back after the leave");
}

/// A store on `server` whose clock stays at [`T0`], with keys under
/// `prefix`, `options` and a 500 ms timeout.
async fn at_t0(server: &common::RedisServer, prefix: &str, options: RedisOptions) -> RedisStore {
    RedisStore::connect(
        &server.url(),
        Arc::new(ManualClock::new(T0)),
        SpaceConfig::default(),
        RedisOptions {
            prefix: prefix.into(),
            timeout: Duration::from_millis(500),
            ..options
        },
    )
    .await
    .expect("connect")
}

/// A Redis that is back is noticed at the next read it answers, not at
/// the end of the replayer's backoff: here that backoff is an hour, so
/// only the read cuts it short.
#[tokio::test]
async fn a_read_that_redis_answers_ends_the_replayers_backoff() {
    let mut server = common::RedisServer::standalone();
    let hour = Duration::from_secs(3_600);
    let options = RedisOptions {
        backoff_min: hour,
        backoff_max: hour,
        ..RedisOptions::default()
    };
    let store = at_t0(&server, "answered", options).await;
    let sp = SpaceName::new("room").unwrap();
    server.kill();
    let beat = Heartbeat {
        member: user("ada"),
        at_ms: None,
        meta: None,
    };
    store.heartbeat(&sp, &[beat]).await.unwrap();
    assert_eq!(store.stats().buffered, 1);
    // The replayer's ping fails: it backs off for half an hour or more.
    wait_for(
        "the replayer saw Redis down",
        Duration::from_secs(30),
        || !store.stats().redis_up,
    )
    .await;
    server.start_again();
    assert!(!store.is_ready(), "nothing replayed before a call answers");
    // Reads reach Redis directly; the first that gets an answer (the
    // client may need one try to reconnect) wakes the replayer.
    let deadline = Instant::now() + Duration::from_secs(30);
    while store.count(&sp, None).await.is_err() {
        assert!(Instant::now() < deadline, "Redis never answered a read");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    wait_for("the buffer drained", Duration::from_secs(30), || {
        store.is_ready()
    })
    .await;
    let got = store.status(&sp, &[user("ada")]).await.unwrap();
    assert_eq!(got[0].last_seen_ms, Some(T0), "the buffered heartbeat");
}
