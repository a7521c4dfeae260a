//! Issue 3, "Throughput": concurrent heartbeats are coalesced (one write
//! per member per flush) and pipelined, and every call still learns its
//! own counts.

use herenow_testkit as common;

use std::sync::Arc;

use herenow_core::{
    Heartbeat, HeartbeatReport, ManualClock, MemberId, MemberKey, PresenceStore, SpaceConfig,
    SpaceName,
};
use herenow_redis::{RedisOptions, RedisStore};

const T0: u64 = 1_700_000_000_000;

fn user(id: &str) -> MemberKey {
    MemberKey::user(MemberId::new(id).unwrap())
}

fn at(member: MemberKey, at_ms: u64) -> Heartbeat {
    Heartbeat {
        member,
        at_ms: Some(at_ms),
        meta: None,
    }
}

/// Script calls the server has run so far.
fn script_calls(port: u16) -> u64 {
    let stats = common::raw_command(port, "INFO commandstats").unwrap();
    stats
        .lines()
        .filter(|l| l.starts_with("cmdstat_evalsha:") || l.starts_with("cmdstat_eval:"))
        .filter_map(|l| {
            l.split(['=', ','])
                .nth(1)
                .and_then(|n| n.parse::<u64>().ok())
        })
        .sum()
}

/// A store on `server` with `clock`.
async fn connect(server: &common::RedisServer, clock: &ManualClock) -> RedisStore {
    RedisStore::connect(
        &server.url(),
        Arc::new(clock.clone()),
        SpaceConfig::default(),
        RedisOptions {
            prefix: "co".into(),
            ..RedisOptions::default()
        },
    )
    .await
    .unwrap()
}

fn sum(reports: &[HeartbeatReport]) -> (u64, u64, u64) {
    reports.iter().fold((0, 0, 0), |(a, j, s), r| {
        (a + r.accepted, j + r.joined, s + r.stale)
    })
}

#[tokio::test]
async fn concurrent_heartbeats_share_a_flush_and_each_learns_its_own_counts() {
    let server = common::RedisServer::standalone();
    let clock = ManualClock::new(T0);
    let s = connect(&server, &clock).await;
    let sp = SpaceName::new("hall").unwrap();
    // Scripts loaded and the space registered: what follows is heartbeats.
    s.heartbeat(&sp, &[Heartbeat::now(user("warm"))])
        .await
        .unwrap();
    let before = script_calls(server.port);

    // 50 calls at once, each with a shared member and one of its own.
    let calls: Vec<Vec<Heartbeat>> = (0..50)
        .map(|i| {
            vec![
                Heartbeat::now(user("shared")),
                Heartbeat::now(user(&format!("own-{i}"))),
            ]
        })
        .collect();
    let reports: Vec<HeartbeatReport> =
        futures::future::join_all(calls.iter().map(|b| s.heartbeat(&sp, b)))
            .await
            .into_iter()
            .collect::<Result<_, _>>()
            .unwrap();
    assert!(reports.iter().all(|r| r.accepted == 2 && r.stale == 0));
    assert_eq!(
        sum(&reports),
        (100, 51, 0),
        "the shared member joins once, in one call's report"
    );
    let calls_made = script_calls(server.port) - before;
    assert!(
        calls_made <= 3,
        "50 concurrent calls took {calls_made} script calls"
    );
    assert_eq!(s.count(&sp, None).await.unwrap().users, 52);

    // Older times for one member, newest first: the first call writes it,
    // the others are stale, as they would be one after the other.
    let calls: Vec<Vec<Heartbeat>> = (0..10u64)
        .map(|i| vec![at(user("late"), T0 - i * 1_000)])
        .collect();
    let reports: Vec<HeartbeatReport> =
        futures::future::join_all(calls.iter().map(|b| s.heartbeat(&sp, b)))
            .await
            .into_iter()
            .collect::<Result<_, _>>()
            .unwrap();
    assert_eq!(sum(&reports), (1, 1, 9));
    assert_eq!((reports[0].accepted, reports[0].joined), (1, 1));
    let st = s.status(&sp, &[user("late")]).await.unwrap();
    assert_eq!(st[0].last_seen_ms, Some(T0));

    // A batch bigger than one script call is split, and still answers
    // per member.
    clock.advance(std::time::Duration::from_secs(1));
    let big: Vec<Heartbeat> = (0..2_500)
        .map(|i| Heartbeat::now(user(&format!("big-{i}"))))
        .chain([Heartbeat::now(user("shared"))])
        .collect();
    let r = s.heartbeat(&sp, &big).await.unwrap();
    assert_eq!((r.accepted, r.joined, r.stale), (2_501, 2_500, 0));
    assert_eq!(s.count(&sp, None).await.unwrap().users, 2_553);
}

/// Callers on several threads, each sending its next call as soon as the
/// last is answered, so calls keep arriving while rounds are in Redis:
/// every call learns its own counts, each member joins exactly once,
/// nothing is lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn rounds_in_flight_together_lose_and_double_count_nothing() {
    let server = common::RedisServer::standalone();
    let s = Arc::new(connect(&server, &ManualClock::new(T0)).await);
    let sp = SpaceName::new("hall").unwrap();
    let (callers, each) = (16, 40);
    let tasks: Vec<_> = (0..callers)
        .map(|c| {
            let (s, sp) = (s.clone(), sp.clone());
            tokio::spawn(async move {
                let mut total = (0, 0, 0);
                for i in 0..each {
                    let r = s
                        .heartbeat(
                            &sp,
                            &[
                                Heartbeat::now(user("shared")),
                                Heartbeat::now(user(&format!("own-{c}-{i}"))),
                            ],
                        )
                        .await
                        .unwrap();
                    assert_eq!((r.accepted, r.stale), (2, 0), "call {c}/{i}");
                    total = (total.0 + r.accepted, total.1 + r.joined, total.2 + r.stale);
                }
                total
            })
        })
        .collect();
    let mut sum = (0, 0, 0);
    for t in tasks {
        let (a, j, st) = t.await.unwrap();
        sum = (sum.0 + a, sum.1 + j, sum.2 + st);
    }
    let members = callers * each;
    assert_eq!(
        sum,
        (2 * members, members + 1, 0),
        "every member joins once"
    );
    assert_eq!(s.count(&sp, None).await.unwrap().users, members + 1);
}
