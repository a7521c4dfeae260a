//! The seeds' layouts: herenow and the seeds' own code on the same keys.
//!
//! Every test writes and reads with raw commands exactly as the seed's
//! Python or Go code issues them, and checks that herenow and the seed see
//! the same who's online, both ways. Each test starts its own
//! `redis-server` (never the one that may run on 127.0.0.1:6379). herenow's
//! time is a `ManualClock`; the one thing it does not drive is `EXPIRE`
//! (the minute buckets), which runs on Redis's real clock, so those tests
//! check the expiry Redis was given rather than wait for it.

use herenow_testkit as common;

use std::sync::Arc;
use std::time::Duration;

use redis::AsyncCommands;
use redis::aio::MultiplexedConnection;

use herenow_core::{
    Attach, ConnId, Error, Heartbeat, KindFilter, ListQuery, ManualClock, MemberId, MemberKey,
    Metadata, Order, PresenceStore, SpaceConfig, SpaceName, Status,
};
use herenow_redis::{LayoutOptions, SeedLayout, SeedLayoutStore};

/// 2023-11-14 22:13:20 UTC: minute 13 of the hour.
const T0: u64 = 1_700_000_000_000;
const T0_S: u64 = T0 / 1000;

fn user(id: &str) -> MemberKey {
    MemberKey::user(MemberId::new(id).unwrap())
}

fn guest(id: &str) -> MemberKey {
    MemberKey::guest(MemberId::new(id).unwrap())
}

fn space(name: &str) -> SpaceName {
    SpaceName::new(name).unwrap()
}

fn ids(members: &[herenow_core::MemberStatus]) -> Vec<&str> {
    members.iter().map(|m| m.member.id.as_str()).collect()
}

async fn raw(url: &str) -> MultiplexedConnection {
    redis::Client::open(url)
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap()
}

async fn open(
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

fn by_id(limit: usize) -> ListQuery {
    ListQuery {
        order: Order::Id,
        limit,
        ..ListQuery::default()
    }
}

/// Unsupported, and naming the layout.
fn assert_unsupported<T: std::fmt::Debug>(r: herenow_core::Result<T>, layout: &str) {
    match r {
        Err(Error::Unsupported { store, .. }) => {
            assert_eq!(store, format!("redis layout {layout}"))
        }
        other => panic!("expected Unsupported from {layout}, got {other:?}"),
    }
}

/// What no seed layout stores: metadata, friends, events, live
/// connections, policies, the list of spaces, remembered last seen (issue
/// 8: "last seen anywhere" and erasure).
async fn assert_no_extras(s: &SeedLayoutStore, layout: &str) {
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
    assert_unsupported(s.seen_anywhere(std::slice::from_ref(&alice)).await, layout);
    assert_unsupported(s.erase_user(&alice).await, layout);
    // Live connections: the seeds' keys hold none.
    let phone = Attach {
        member: user("alice"),
        conn: ConnId::new("c-1").unwrap(),
        meta: None,
        invisible: false,
        ttl_ms: 30_000,
    };
    assert_unsupported(s.attach(&sp, &phone).await, layout);
    assert_unsupported(s.detach(&sp, &user("alice"), &phone.conn).await, layout);
    assert_eq!(
        s.connections(&sp, &[user("alice")]).await.unwrap(),
        [Vec::new()],
        "nobody has connections"
    );
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

mod sorted_set {
    use super::*;

    const KEY: &str = "whos_online:users";

    #[tokio::test]
    async fn seed_001_writes_are_read_back() {
        let server = common::RedisServer::standalone();
        let mut r = raw(&server.url()).await;
        // conn.zadd(USER_SET_KEY, ts, username), scores in whole seconds.
        for (ts, who) in [
            (T0_S - 30, "sally"),
            (T0_S - 700, "harry"),
            (T0_S - 60, "joe"),
        ] {
            let _: () = redis::cmd("ZADD")
                .arg(KEY)
                .arg(ts)
                .arg(who)
                .query_async(&mut r)
                .await
                .unwrap();
        }
        let clock = ManualClock::new(T0);
        let s = open(
            &server.url(),
            SeedLayout::SortedSet,
            KEY,
            None,
            &clock,
            LayoutOptions::default(),
        )
        .await;
        // A template without {space}: every space reads the same key.
        for name in ["room", "lobby"] {
            let page = s.list(&space(name), &ListQuery::default()).await.unwrap();
            assert_eq!(ids(&page.members), ["sally", "joe"]);
            assert_eq!(page.members[0].last_seen_ms, Some((T0_S - 30) * 1000));
            assert_eq!(page.members[0].status, Status::Online);
            assert_eq!(page.members[1].status, Status::Away);
            assert_eq!(page.next_cursor, None);
            assert_eq!(s.count(&space(name), None).await.unwrap().users, 2);
        }
        let st = s
            .status(
                &space("room"),
                &[user("harry"), user("nobody"), user("joe")],
            )
            .await
            .unwrap();
        assert_eq!(st[0].last_seen_ms, Some((T0_S - 700) * 1000));
        assert_eq!(st[0].status, Status::Offline);
        assert_eq!(st[1].last_seen_ms, None);
        assert_eq!(st[2].last_seen_ms, Some((T0_S - 60) * 1000));
        // A 15-minute window (seed 001's MAX_AGE) takes harry in.
        assert_eq!(
            s.count(&space("room"), Some(15 * 60_000))
                .await
                .unwrap()
                .users,
            3
        );
    }

    #[tokio::test]
    async fn herenow_writes_are_seen_by_the_seeds() {
        let server = common::RedisServer::standalone();
        let mut r = raw(&server.url()).await;
        let clock = ManualClock::new(T0 + 999);
        let s = open(
            &server.url(),
            SeedLayout::SortedSet,
            "presence:{space}",
            None,
            &clock,
            LayoutOptions::default(),
        )
        .await;
        let chat = space("chat");
        let report = s
            .heartbeat(
                &chat,
                &[
                    Heartbeat::now(user("alice")),
                    Heartbeat {
                        // Older than `away`: stored, but offline, so not a join.
                        at_ms: Some(T0 - 400_000),
                        ..Heartbeat::now(user("bob"))
                    },
                ],
            )
            .await
            .unwrap();
        assert_eq!((report.accepted, report.joined), (2, 1));
        // Seed 004: ZSCORE presence:{ns} {user-id}, raw ids, whole seconds.
        let score: String = r.zscore("presence:chat", "alice").await.unwrap();
        assert_eq!(score, T0_S.to_string());
        // ZRANGE presence {ts-now} {ts-one-minute-ago} BYSCORE REV.
        let green: Vec<String> = redis::cmd("ZRANGE")
            .arg("presence:chat")
            .arg(T0_S)
            .arg(T0_S - 60)
            .arg("BYSCORE")
            .arg("REV")
            .query_async(&mut r)
            .await
            .unwrap();
        assert_eq!(green, ["alice"]);
        // Seed 001: zrangebyscore(USER_SET_KEY, min, max).
        let online: Vec<String> = r
            .zrangebyscore("presence:chat", T0_S - 15 * 60, T0_S)
            .await
            .unwrap();
        assert_eq!(online, ["bob", "alice"]);
        // Another space has its own key.
        let _: () = r.zadd("presence:other", "eve", T0_S).await.unwrap();
        assert_eq!(s.count(&chat, None).await.unwrap().users, 2);
        assert_eq!(s.count(&space("other"), None).await.unwrap().users, 1);
    }

    #[tokio::test]
    async fn newest_time_wins_against_the_seed() {
        let server = common::RedisServer::standalone();
        let mut r = raw(&server.url()).await;
        let clock = ManualClock::new(T0);
        let s = open(
            &server.url(),
            SeedLayout::SortedSet,
            KEY,
            None,
            &clock,
            LayoutOptions::default(),
        )
        .await;
        let _: () = r.zadd(KEY, "sally", T0_S).await.unwrap();
        let late = Heartbeat {
            at_ms: Some(T0 - 30_000),
            ..Heartbeat::now(user("sally"))
        };
        let report = s.heartbeat(&space("a"), &[late]).await.unwrap();
        assert_eq!((report.accepted, report.stale), (0, 1));
        let score: u64 = r.zscore(KEY, "sally").await.unwrap();
        assert_eq!(score, T0_S);
        // Leave is ZREM: gone for the seed too.
        assert_eq!(
            s.leave(&space("a"), &[user("sally"), user("x")])
                .await
                .unwrap(),
            1
        );
        let left: Option<f64> = r.zscore(KEY, "sally").await.unwrap();
        assert_eq!(left, None);
    }

    #[tokio::test]
    async fn pages_are_exact_across_members_of_one_second() {
        let server = common::RedisServer::standalone();
        let mut r = raw(&server.url()).await;
        // 25 members in one second (the seeds' precision makes ties
        // common), 10 spread out after it.
        let mut expected = Vec::new();
        for i in 0..10 {
            let id = format!("late{i:02}");
            let _: () = r.zadd(KEY, &id, T0_S - 10 + i).await.unwrap();
        }
        for i in (0..10).rev() {
            expected.push(format!("late{i:02}"));
        }
        for i in 0..25 {
            let id = format!("tie{i:02}");
            let _: () = r.zadd(KEY, &id, T0_S - 100).await.unwrap();
            expected.push(id);
        }
        let clock = ManualClock::new(T0);
        let opts = LayoutOptions {
            // Small chunks, so the boundary second spans several reads.
            expire_batch: 4,
            ..LayoutOptions::default()
        };
        let s = open(
            &server.url(),
            SeedLayout::SortedSet,
            KEY,
            None,
            &clock,
            opts,
        )
        .await;
        for order in [Order::Recent, Order::Id] {
            let mut seen = Vec::new();
            let mut cursor = None;
            loop {
                let q = ListQuery {
                    order,
                    limit: 7,
                    cursor,
                    ..ListQuery::default()
                };
                let page = s.list(&space("x"), &q).await.unwrap();
                seen.extend(ids(&page.members).iter().map(|i| i.to_string()));
                cursor = page.next_cursor;
                if cursor.is_none() {
                    break;
                }
            }
            let mut want = expected.clone();
            if order == Order::Id {
                want.sort();
            }
            assert_eq!(seen, want, "{order:?}");
        }
    }

    #[tokio::test]
    async fn expiry_runs_in_bounded_batches() {
        let server = common::RedisServer::standalone();
        let mut r = raw(&server.url()).await;
        let mut pipe = redis::pipe();
        for i in 0..2_500 {
            pipe.zadd(KEY, format!("old{i}"), T0_S - 16 * 60).ignore();
        }
        pipe.zadd(KEY, "fresh", T0_S - 60).ignore();
        let _: () = pipe.query_async(&mut r).await.unwrap();
        let clock = ManualClock::new(T0);
        let opts = LayoutOptions {
            expire_batch: 1_000,
            tick_batches: 2,
            ..LayoutOptions::default()
        };
        let s = open(
            &server.url(),
            SeedLayout::SortedSet,
            KEY,
            None,
            &clock,
            opts,
        )
        .await;
        // Past the retention they are forgotten before any sweep.
        let st = s.status(&space("a"), &[user("old7")]).await.unwrap();
        assert_eq!(st[0].last_seen_ms, None);
        // Two batches of 1000 per tick, never one long ZREMRANGEBYSCORE.
        assert_eq!(s.tick().await.unwrap().expired, 2_000);
        assert_eq!(r.zcard::<_, u64>(KEY).await.unwrap(), 501);
        assert_eq!(s.tick().await.unwrap().expired, 500);
        assert_eq!(s.tick().await.unwrap().expired, 0);
        let left: Vec<String> = r.zrange(KEY, 0, -1).await.unwrap();
        assert_eq!(left, ["fresh"]);
        // The clock the sweep follows is herenow's.
        clock.advance(Duration::from_secs(15 * 60));
        assert_eq!(s.tick().await.unwrap().expired, 1);
    }

    #[tokio::test]
    async fn guests_live_under_their_own_template() {
        let server = common::RedisServer::standalone();
        let mut r = raw(&server.url()).await;
        let clock = ManualClock::new(T0);
        let s = open(
            &server.url(),
            SeedLayout::SortedSet,
            KEY,
            Some("whos_online:guests"),
            &clock,
            LayoutOptions::default(),
        )
        .await;
        let sp = space("a");
        s.heartbeat(
            &sp,
            &[Heartbeat::now(guest("1.2.3.4")), Heartbeat::now(user("u"))],
        )
        .await
        .unwrap();
        let g: Vec<String> = r.zrange("whos_online:guests", 0, -1).await.unwrap();
        assert_eq!(g, ["1.2.3.4"]);
        let c = s.count(&sp, None).await.unwrap();
        assert_eq!((c.users, c.guests), (1, 1));
        let all = ListQuery {
            kinds: KindFilter::All,
            ..by_id(10)
        };
        assert_eq!(
            ids(&s.list(&sp, &all).await.unwrap().members),
            ["1.2.3.4", "u"]
        );
    }

    #[tokio::test]
    async fn what_the_layout_cannot_answer_is_unsupported() {
        let server = common::RedisServer::standalone();
        let clock = ManualClock::new(T0);
        let s = open(
            &server.url(),
            SeedLayout::SortedSet,
            KEY,
            None,
            &clock,
            LayoutOptions::default(),
        )
        .await;
        assert_no_extras(&s, "sorted-set").await;
        // The server's online endpoint reads the policy: it answers.
        assert_eq!(s.config(&space("a")).await.unwrap(), SpaceConfig::default());
    }

    #[tokio::test]
    async fn works_on_a_cluster() {
        let cluster = common::RedisCluster::start();
        let clock = ManualClock::new(T0);
        let s = open(
            &cluster.url(),
            SeedLayout::SortedSet,
            "presence:{space}",
            None,
            &clock,
            LayoutOptions::default(),
        )
        .await;
        let nodes: Vec<String> = cluster
            .nodes
            .iter()
            .map(|n| format!("redis://127.0.0.1:{}", n.port))
            .collect();
        let mut r = redis::cluster::ClusterClient::new(nodes)
            .unwrap()
            .get_async_connection()
            .await
            .unwrap();
        for name in ["a", "b", "c", "d"] {
            let key = format!("presence:{name}");
            let _: () = r.zadd(&key, "seed", T0_S - 5).await.unwrap();
            s.heartbeat(&space(name), &[Heartbeat::now(user("herenow"))])
                .await
                .unwrap();
            let online: Vec<String> = r.zrangebyscore(&key, T0_S - 60, T0_S).await.unwrap();
            assert_eq!(online, ["seed", "herenow"]);
            let page = s.list(&space(name), &ListQuery::default()).await.unwrap();
            assert_eq!(ids(&page.members), ["herenow", "seed"]);
        }
        assert_eq!(s.tick().await.unwrap().expired, 0);
    }
}

mod minute_buckets {
    use super::*;

    const KEY: &str = "active.users:{minute}";

    /// Seed 002's `time_to_key`, with UTC for the host's local time.
    fn bucket(ms: u64) -> String {
        format!("active.users:{:02}", (ms / 60_000) % 60)
    }

    /// Seed 002's `keys_in_last_10_minutes`.
    fn last_10(now: u64) -> Vec<String> {
        (0..10).map(|i| bucket(now - i * 60_000)).collect()
    }

    /// Seed 002's `visit`: SADD and EXPIRE 10 minutes, in one pipeline.
    async fn visit(r: &mut MultiplexedConnection, now: u64, ua: &str) {
        let key = bucket(now);
        let _: () = redis::pipe()
            .sadd(&key, ua)
            .ignore()
            .expire(&key, 10 * 60)
            .ignore()
            .query_async(r)
            .await
            .unwrap();
    }

    const SAFARI: &str = "Mozilla/5.0 (Macintosh) Safari/605.1.15";
    const FIREFOX: &str = "Mozilla/5.0 (X11; Linux x86_64) Firefox/120.0";

    #[tokio::test]
    async fn seed_002_writes_are_read_back() {
        let server = common::RedisServer::standalone();
        let mut r = raw(&server.url()).await;
        visit(&mut r, T0, SAFARI).await;
        visit(&mut r, T0 - 3 * 60_000, FIREFOX).await;
        visit(&mut r, T0 - 11 * 60_000, "too old").await;
        let clock = ManualClock::new(T0);
        let s = open(
            &server.url(),
            SeedLayout::MinuteBuckets,
            KEY,
            None,
            &clock,
            LayoutOptions::default(),
        )
        .await;
        let sp = space("site");
        let page = s.list(&sp, &ListQuery::default()).await.unwrap();
        assert_eq!(ids(&page.members), [SAFARI, FIREFOX]);
        // Minute precision: the start of the newest bucket holding them.
        let minute = T0 / 60_000 * 60_000;
        assert_eq!(page.members[0].last_seen_ms, Some(minute));
        assert_eq!(page.members[0].status, Status::Online);
        assert_eq!(page.members[1].last_seen_ms, Some(minute - 3 * 60_000));
        assert_eq!(page.members[1].status, Status::Away);
        assert_eq!(s.count(&sp, None).await.unwrap().users, 2);
        // Shorter windows read fewer buckets (rounded up to minutes).
        assert_eq!(s.count(&sp, Some(4 * 60_000)).await.unwrap().users, 2);
        assert_eq!(s.count(&sp, Some(2 * 60_000)).await.unwrap().users, 1);
        let st = s
            .status(&sp, &[user("too old"), user(FIREFOX)])
            .await
            .unwrap();
        assert_eq!(st[0].last_seen_ms, None);
        assert_eq!(st[1].last_seen_ms, Some(minute - 3 * 60_000));
        // A window past the buckets' retention is refused, not shortened.
        assert!(matches!(
            s.count(&sp, Some(11 * 60_000)).await,
            Err(Error::Invalid(_))
        ));
    }

    #[tokio::test]
    async fn herenow_writes_are_seen_by_the_seed() {
        let server = common::RedisServer::standalone();
        let mut r = raw(&server.url()).await;
        let clock = ManualClock::new(T0);
        let s = open(
            &server.url(),
            SeedLayout::MinuteBuckets,
            KEY,
            None,
            &clock,
            LayoutOptions::default(),
        )
        .await;
        let sp = space("site");
        let report = s
            .heartbeat(&sp, &[Heartbeat::now(user("ua"))])
            .await
            .unwrap();
        assert_eq!((report.accepted, report.joined), (1, 1));
        // Seed 002's `online`: r.sunion(keys_in_last_10_minutes()).
        let online: Vec<String> = r.sunion(last_10(T0)).await.unwrap();
        assert_eq!(online, ["ua"]);
        // The seed's EXPIRE, on Redis's clock.
        let ttl: i64 = r.ttl(bucket(T0)).await.unwrap();
        assert!((1..=600).contains(&ttl), "ttl {ttl}");
        clock.advance(Duration::from_secs(60));
        let now = T0 + 60_000;
        let again = s
            .heartbeat(
                &sp,
                &[Heartbeat::now(user("ub")), Heartbeat::now(user("ua"))],
            )
            .await
            .unwrap();
        assert_eq!((again.accepted, again.joined), (2, 1));
        let mut online: Vec<String> = r.sunion(last_10(now)).await.unwrap();
        online.sort();
        assert_eq!(online, ["ua", "ub"]);
        let this_minute: Vec<String> = r.smembers(bucket(now)).await.unwrap();
        assert_eq!(this_minute.len(), 2);
        // Leave takes a member out of every bucket, for the seed too.
        assert_eq!(s.leave(&sp, &[user("ua")]).await.unwrap(), 1);
        let online: Vec<String> = r.sunion(last_10(now)).await.unwrap();
        assert_eq!(online, ["ub"]);
        // herenow's clock moves the window; the buckets still exist in
        // Redis (their EXPIRE runs on real time) but are no longer read.
        clock.advance(Duration::from_secs(10 * 60));
        assert_eq!(s.count(&sp, None).await.unwrap().users, 0);
        assert!(
            s.list(&sp, &ListQuery::default())
                .await
                .unwrap()
                .members
                .is_empty()
        );
        let still: bool = r.exists(bucket(now)).await.unwrap();
        assert!(still);
    }

    #[tokio::test]
    async fn what_the_layout_cannot_answer_is_unsupported() {
        let server = common::RedisServer::standalone();
        let clock = ManualClock::new(T0);
        let s = open(
            &server.url(),
            SeedLayout::MinuteBuckets,
            KEY,
            None,
            &clock,
            LayoutOptions::default(),
        )
        .await;
        assert_no_extras(&s, "minute-buckets").await;
        // Expiry is Redis's EXPIRE: nothing for tick to do.
        assert_eq!(s.tick().await.unwrap(), herenow_core::TickReport::default());
        // Key names repeat every hour: a window of an hour cannot work.
        let hour = SpaceConfig {
            window_ms: 60 * 60_000,
            retention_ms: 60 * 60_000,
            ..SpaceConfig::default()
        };
        let refused = SeedLayoutStore::connect(
            &server.url(),
            SeedLayout::MinuteBuckets,
            KEY,
            None,
            Arc::new(clock.clone()),
            hour,
            LayoutOptions::default(),
        )
        .await;
        assert!(matches!(refused, Err(Error::Invalid(_))));
    }
}

mod rotation {
    use super::*;

    const KEY: &str = "wo_user_{generation}";
    const CURRENT: &str = "wo_user_current";
    const OLD: &str = "wo_user_old";

    fn opts() -> LayoutOptions {
        LayoutOptions {
            rotate_every: Duration::from_secs(5 * 60),
            ..LayoutOptions::default()
        }
    }

    async fn members(r: &mut MultiplexedConnection, key: &str) -> Vec<String> {
        let mut m: Vec<String> = r.smembers(key).await.unwrap();
        m.sort();
        m
    }

    #[tokio::test]
    async fn seed_000_writes_are_read_back() {
        let server = common::RedisServer::standalone();
        let mut r = raw(&server.url()).await;
        // report_user: conn.sadd(USER_CURRENT_KEY, username); and an
        // earlier period already rotated into "old".
        let _: () = r.sadd(CURRENT, "alice").await.unwrap();
        let _: () = r.sadd(OLD, "bob").await.unwrap();
        let clock = ManualClock::new(T0);
        let s = open(
            &server.url(),
            SeedLayout::Rotation,
            KEY,
            None,
            &clock,
            opts(),
        )
        .await;
        let sp = space("site");
        let page = s.list(&sp, &by_id(10)).await.unwrap();
        assert_eq!(ids(&page.members), ["alice", "bob"]);
        assert!(page.members.iter().all(|m| m.status == Status::Online));
        assert!(page.members.iter().all(|m| m.last_seen_ms.is_none()));
        assert_eq!(s.count(&sp, None).await.unwrap().users, 2);
        // The layout's one window (twice the period) is answered...
        assert_eq!(s.config(&sp).await.unwrap().window_ms, 10 * 60_000);
        assert_eq!(s.count(&sp, Some(10 * 60_000)).await.unwrap().users, 2);
        // ...and nothing the sets do not record.
        assert_unsupported(s.count(&sp, Some(60_000)).await, "rotation");
        assert_unsupported(s.status(&sp, &[user("alice")]).await, "rotation");
        assert_unsupported(s.list(&sp, &ListQuery::default()).await, "rotation");
        let past = Heartbeat {
            at_ms: Some(T0 - 1_000),
            ..Heartbeat::now(user("carol"))
        };
        assert_unsupported(s.heartbeat(&sp, &[past]).await, "rotation");
        assert_unsupported(
            s.online_among(&sp, &[user("alice")], None, 10).await,
            "rotation",
        );
        assert_no_extras(&s, "rotation").await;
    }

    #[tokio::test]
    async fn herenow_writes_are_seen_by_the_seed() {
        let server = common::RedisServer::standalone();
        let mut r = raw(&server.url()).await;
        let _: () = r.sadd(OLD, "alice").await.unwrap();
        let clock = ManualClock::new(T0);
        let s = open(
            &server.url(),
            SeedLayout::Rotation,
            KEY,
            None,
            &clock,
            opts(),
        )
        .await;
        let sp = space("site");
        let report = s
            .heartbeat(
                &sp,
                &[Heartbeat::now(user("carol")), Heartbeat::now(user("alice"))],
            )
            .await
            .unwrap();
        assert_eq!((report.accepted, report.joined), (2, 1));
        assert_eq!(members(&mut r, CURRENT).await, ["alice", "carol"]);
        // get_users_online: conn.sunion([USER_CURRENT_KEY, USER_OLD_KEY]).
        let mut online: Vec<String> = r.sunion(&[CURRENT, OLD]).await.unwrap();
        online.sort();
        assert_eq!(online, ["alice", "carol"]);
        assert_eq!(
            s.leave(&sp, &[user("alice"), user("zed")]).await.unwrap(),
            1
        );
        let online: Vec<String> = r.sunion(&[CURRENT, OLD]).await.unwrap();
        assert_eq!(online, ["carol"]);
    }

    #[tokio::test]
    async fn tick_rotates_once_per_period_as_the_seed_does() {
        let server = common::RedisServer::standalone();
        let mut r = raw(&server.url()).await;
        let _: () = r.sadd(CURRENT, "alice").await.unwrap();
        let _: () = r.sadd(OLD, "bob").await.unwrap();
        let clock = ManualClock::new(T0);
        let s = open(
            &server.url(),
            SeedLayout::Rotation,
            KEY,
            None,
            &clock,
            opts(),
        )
        .await;
        // A second server on the same keys: they must not both rotate.
        let s2 = open(
            &server.url(),
            SeedLayout::Rotation,
            KEY,
            None,
            &clock,
            opts(),
        )
        .await;
        let sp = space("site");
        // The first tick only starts the period: when the seed's cron
        // last rotated is unknown.
        assert_eq!(s.tick().await.unwrap().expired, 0);
        assert_eq!(members(&mut r, CURRENT).await, ["alice"]);
        clock.advance(Duration::from_secs(4 * 60));
        s.tick().await.unwrap();
        s2.tick().await.unwrap();
        assert_eq!(members(&mut r, OLD).await, ["bob"]);
        // A period on: RENAME current old; bob is forgotten.
        clock.advance(Duration::from_secs(60));
        assert_eq!(s.tick().await.unwrap().expired, 1);
        assert_eq!(s2.tick().await.unwrap().expired, 0);
        assert_eq!(members(&mut r, OLD).await, ["alice"]);
        assert!(!r.exists::<_, bool>(CURRENT).await.unwrap());
        assert_eq!(
            ids(&s.list(&sp, &by_id(10)).await.unwrap().members),
            ["alice"]
        );
        s.heartbeat(&sp, &[Heartbeat::now(user("dave"))])
            .await
            .unwrap();
        clock.advance(Duration::from_secs(5 * 60));
        assert_eq!(s2.tick().await.unwrap().expired, 1);
        assert_eq!(members(&mut r, OLD).await, ["dave"]);
        // Nobody seen for a period: "current" does not exist, so the
        // seed's tick() deletes "old" instead.
        clock.advance(Duration::from_secs(5 * 60));
        assert_eq!(s.tick().await.unwrap().expired, 1);
        assert!(!r.exists::<_, bool>(OLD).await.unwrap());
        assert_eq!(s.count(&sp, None).await.unwrap().users, 0);
        // The seed's own rotation is read the same way.
        let _: () = r.sadd(CURRENT, "erin").await.unwrap();
        let _: () = r.rename(CURRENT, OLD).await.unwrap();
        assert_eq!(
            ids(&s.list(&sp, &by_id(10)).await.unwrap().members),
            ["erin"]
        );
    }

    #[tokio::test]
    async fn guests_rotate_in_their_own_pair() {
        let server = common::RedisServer::standalone();
        let mut r = raw(&server.url()).await;
        let clock = ManualClock::new(T0);
        let s = open(
            &server.url(),
            SeedLayout::Rotation,
            KEY,
            Some("wo_guest_{generation}"),
            &clock,
            opts(),
        )
        .await;
        let sp = space("site");
        s.heartbeat(
            &sp,
            &[Heartbeat::now(guest("10.0.0.1")), Heartbeat::now(user("u"))],
        )
        .await
        .unwrap();
        assert_eq!(members(&mut r, "wo_guest_current").await, ["10.0.0.1"]);
        assert_eq!(members(&mut r, CURRENT).await, ["u"]);
        let c = s.count(&sp, None).await.unwrap();
        assert_eq!((c.users, c.guests), (1, 1));
        s.tick().await.unwrap();
        clock.advance(Duration::from_secs(5 * 60));
        s.tick().await.unwrap();
        assert_eq!(members(&mut r, "wo_guest_old").await, ["10.0.0.1"]);
        assert_eq!(members(&mut r, OLD).await, ["u"]);
        let all = ListQuery {
            kinds: KindFilter::All,
            ..by_id(10)
        };
        let page = s.list(&sp, &all).await.unwrap();
        assert_eq!(ids(&page.members), ["10.0.0.1", "u"]);
    }

    #[tokio::test]
    async fn a_cluster_needs_a_hash_tag() {
        let cluster = common::RedisCluster::start();
        let clock = ManualClock::new(T0);
        let untagged = SeedLayoutStore::connect(
            &cluster.url(),
            SeedLayout::Rotation,
            KEY,
            None,
            Arc::new(clock.clone()),
            SpaceConfig::default(),
            opts(),
        )
        .await;
        assert!(matches!(untagged, Err(Error::Invalid(_))));
        let s = open(
            &cluster.url(),
            SeedLayout::Rotation,
            "{wo}_user_{generation}",
            Some("{wo}_guest_{generation}"),
            &clock,
            opts(),
        )
        .await;
        let nodes: Vec<String> = cluster
            .nodes
            .iter()
            .map(|n| format!("redis://127.0.0.1:{}", n.port))
            .collect();
        let mut r = redis::cluster::ClusterClient::new(nodes)
            .unwrap()
            .get_async_connection()
            .await
            .unwrap();
        let _: () = r.sadd("{wo}_user_old", "seed").await.unwrap();
        let sp = space("site");
        s.heartbeat(
            &sp,
            &[Heartbeat::now(user("herenow")), Heartbeat::now(guest("g"))],
        )
        .await
        .unwrap();
        let c = s.count(&sp, None).await.unwrap();
        assert_eq!((c.users, c.guests), (2, 1));
        s.tick().await.unwrap();
        clock.advance(Duration::from_secs(5 * 60));
        assert_eq!(s.tick().await.unwrap().expired, 1);
        let mut online: Vec<String> = r
            .sunion(&["{wo}_user_current", "{wo}_user_old"])
            .await
            .unwrap();
        online.sort();
        assert_eq!(online, ["herenow"]);
        assert_eq!(
            ids(&s.list(&sp, &by_id(10)).await.unwrap().members),
            ["herenow"]
        );
    }
}
