//! The seeds' layouts whose keys roll over time, herenow and the seeds'
//! own code on the same keys: seed 002's minute buckets and seed 000's
//! rotation of generations. The conventions are `layouts.rs`'s: raw
//! commands exactly as the seeds issue them, a `redis-server` per test,
//! and `EXPIRE` (real time) checked as given rather than waited for.

mod seed_support;

use seed_support::*;

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
        // The buckets hold (minute) times: most recent first by default.
        assert_eq!(page.order, Order::Recent);
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
        let recent = ListQuery {
            order: Some(Order::Recent),
            ..ListQuery::default()
        };
        assert_unsupported(s.list(&sp, &recent).await, "rotation");
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

    /// Issue 13, "Seed 000 in place": `herenow online site` asks for no
    /// order, and the sets hold no times, so the listing is by id and says
    /// so (`order: id`), page after page; asking for most recent first
    /// explicitly is still `Unsupported`, naming the layout.
    #[tokio::test]
    async fn issue_13_a_listing_without_an_order_is_by_id() {
        let server = common::RedisServer::standalone();
        let mut r = raw(&server.url()).await;
        let _: () = r.sadd(CURRENT, &["erin", "alice", "dave"]).await.unwrap();
        let _: () = r.sadd(OLD, &["carol", "bob"]).await.unwrap();
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
        let mut q = ListQuery {
            limit: 2,
            ..ListQuery::default()
        };
        let mut got = Vec::new();
        let mut pages = 0;
        loop {
            let page = s.list(&sp, &q).await.unwrap();
            assert_eq!(page.order, Order::Id);
            got.extend(ids(&page.members).iter().map(|i| i.to_string()));
            pages += 1;
            match page.next_cursor {
                Some(c) => q.cursor = Some(c),
                None => break,
            }
        }
        assert_eq!(got, ["alice", "bob", "carol", "dave", "erin"]);
        assert_eq!(pages, 3);
        // The first page's cursor also continues a listing that asks for
        // the order the page named.
        let first = s
            .list(
                &sp,
                &ListQuery {
                    limit: 2,
                    ..ListQuery::default()
                },
            )
            .await
            .unwrap();
        let next = s
            .list(
                &sp,
                &ListQuery {
                    cursor: first.next_cursor,
                    ..by_id(2)
                },
            )
            .await
            .unwrap();
        assert_eq!(ids(&next.members), ["carol", "dave"]);
        // Asked for explicitly, most recent first is refused, naming the
        // layout, as before.
        let recent = ListQuery {
            order: Some(Order::Recent),
            ..ListQuery::default()
        };
        assert_unsupported(s.list(&sp, &recent).await, "rotation");
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
