//! The seeds' layouts: herenow and the seeds' own code on the same keys.
//! This file: seeds 001/004's sorted set; the layouts whose keys roll
//! over time are in `layouts_rolling.rs`.
//!
//! Every test writes and reads with raw commands exactly as the seed's
//! Python or Go code issues them, and checks that herenow and the seed see
//! the same who's online, both ways. Each test starts its own
//! `redis-server` (never the one that may run on 127.0.0.1:6379). herenow's
//! time is a `ManualClock`; the one thing it does not drive is `EXPIRE`
//! (the minute buckets), which runs on Redis's real clock, so those tests
//! check the expiry Redis was given rather than wait for it.

mod seed_support;

use seed_support::*;

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
            // The scores are times: most recent first by default.
            assert_eq!(page.order, Order::Recent);
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
                    order: Some(order),
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
