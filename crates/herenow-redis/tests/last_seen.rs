//! Issue 8, "Last seen that lasts", on Redis where the contract suite
//! cannot look: what live connections leave remembered, the users' index
//! of spaces repaired by the sweep (a writer that died before indexing,
//! users stored by an earlier version), the registry of remembered times,
//! the reverse index of friend sets that erasure uses (and its one-time
//! migration of friend sets written before it), and policies written
//! before remembering existed.

use herenow_testkit as common;

use std::sync::Arc;
use std::time::Duration;

use redis::AsyncCommands;
use redis::aio::MultiplexedConnection;

use herenow_core::{
    Attach, ConnId, ErasureReport, Error, LiveConnections, ManualClock, MemberId, MemberKey,
    PresenceStore, SpaceConfig, SpaceName, Status, UserIndex,
};
use herenow_redis::{RedisOptions, RedisStore};

const T0: u64 = 1_700_000_000_000;

fn id(s: &str) -> MemberId {
    MemberId::new(s).unwrap()
}

fn user(s: &str) -> MemberKey {
    MemberKey::user(id(s))
}

fn space(s: &str) -> SpaceName {
    SpaceName::new(s).unwrap()
}

fn attach(member: MemberKey, conn: &str, invisible: bool) -> Attach {
    Attach {
        member,
        conn: ConnId::new(conn).unwrap(),
        meta: None,
        invisible,
        ttl_ms: 30_000,
    }
}

async fn store(url: &str, clock: &ManualClock, prefix: &str, defaults: SpaceConfig) -> RedisStore {
    let opts = RedisOptions {
        prefix: prefix.into(),
        timeout: Duration::from_millis(500),
        ..RedisOptions::default()
    };
    RedisStore::connect(url, Arc::new(clock.clone()), defaults, opts)
        .await
        .expect("connect")
}

async fn raw(url: &str) -> MultiplexedConnection {
    redis::Client::open(url)
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap()
}

async fn settle(s: &RedisStore) {
    for _ in 0..20 {
        let r = s.tick().await.unwrap();
        if r.expired == 0 && r.transitions == 0 && r.connections_expired == 0 {
            return;
        }
    }
}

async fn last_seen(s: &RedisStore, sp: &SpaceName, who: &str) -> (Status, Option<u64>) {
    let st = s.status(sp, &[user(who)]).await.unwrap();
    (st[0].status, st[0].last_seen_ms)
}

/// A space's key by its suffix (`state`, `unidx`, …), shard 0.
fn space_key(s: &RedisStore, sp: &SpaceName, suffix: &str) -> String {
    s.space_keys(sp)
        .into_iter()
        .find(|k| k.ends_with(&format!(":{suffix}")))
        .unwrap()
}

#[tokio::test]
async fn connections_that_end_are_remembered() {
    let server = common::RedisServer::standalone();
    let clock = ManualClock::new(T0);
    let s = store(&server.url(), &clock, "ls-conn", SpaceConfig::default()).await;
    let sp = space("room");
    // Closing the last visible connection: remembered at the close.
    s.attach(&sp, &attach(user("ann"), "a1", false))
        .await
        .unwrap();
    clock.advance(Duration::from_secs(5));
    let r = s
        .detach(&sp, &user("ann"), &ConnId::new("a1").unwrap())
        .await
        .unwrap();
    assert!(r.left);
    assert_eq!(
        last_seen(&s, &sp, "ann").await,
        (Status::Offline, Some(T0 + 5_000))
    );
    // Turning it invisible: remembered at that moment.
    s.attach(&sp, &attach(user("bo"), "b1", false))
        .await
        .unwrap();
    clock.advance(Duration::from_secs(1));
    s.attach(&sp, &attach(user("bo"), "b1", true))
        .await
        .unwrap();
    assert_eq!(
        last_seen(&s, &sp, "bo").await,
        (Status::Offline, Some(T0 + 6_000))
    );
    // A connection that stops pinging: remembered at its last ping.
    s.attach(&sp, &attach(user("cy"), "c1", false))
        .await
        .unwrap();
    clock.advance(Duration::from_secs(31));
    settle(&s).await;
    assert_eq!(
        last_seen(&s, &sp, "cy").await,
        (Status::Offline, Some(T0 + 6_000))
    );
    let any = s.seen_anywhere(&[id("cy")]).await.unwrap();
    assert_eq!(
        (any[0].last_seen_ms, any[0].space.as_ref()),
        (Some(T0 + 6_000), Some(&sp))
    );
    // Back: present again, the remembered time superseded.
    s.attach(&sp, &attach(user("ann"), "a2", false))
        .await
        .unwrap();
    assert_eq!(
        last_seen(&s, &sp, "ann").await,
        (Status::Online, Some(T0 + 37_000))
    );
    // Erasing closes the user's connections too.
    let report = s.erase_user(&id("ann")).await.unwrap();
    assert_eq!(report.presence, 1);
    assert!(s.connections(&sp, &[user("ann")]).await.unwrap()[0].is_empty());
}

#[tokio::test]
async fn the_sweep_indexes_what_a_writer_left_undone() {
    let server = common::RedisServer::standalone();
    let clock = ManualClock::new(T0);
    let s = store(&server.url(), &clock, "ls-undone", SpaceConfig::default()).await;
    let mut r = raw(&server.url()).await;
    let sp = space("room");
    s.heartbeat(&sp, &[herenow_core::Heartbeat::now(user("ann"))])
        .await
        .unwrap();
    // As if the writer died between its script and the index: the space is
    // missing from the user's index, the user still waits in `unidx`.
    let [seen, _, _] = s.user_keys(&id("ann"));
    let unidx = space_key(&s, &sp, "unidx");
    let _: () = r.del(&seen).await.unwrap();
    let _: () = r.sadd(&unidx, "ann").await.unwrap();
    assert_eq!(
        s.seen_anywhere(&[id("ann")]).await.unwrap()[0].last_seen_ms,
        None,
        "reads trust the index"
    );
    s.tick().await.unwrap();
    let any = s.seen_anywhere(&[id("ann")]).await.unwrap();
    assert_eq!(
        (any[0].last_seen_ms, any[0].space.as_ref()),
        (Some(T0), Some(&sp))
    );
    let waiting: u64 = r.scard(&unidx).await.unwrap();
    assert_eq!(waiting, 0);
}

#[tokio::test]
async fn users_stored_before_indexing_are_indexed_once() {
    let server = common::RedisServer::standalone();
    let clock = ManualClock::new(T0);
    let s = store(&server.url(), &clock, "ls-old", SpaceConfig::default()).await;
    let mut r = raw(&server.url()).await;
    let sp = space("room");
    s.heartbeat(
        &sp,
        &[
            herenow_core::Heartbeat::now(user("ann")),
            herenow_core::Heartbeat::now(user("bob")),
        ],
    )
    .await
    .unwrap();
    s.leave(&sp, &[user("bob")]).await.unwrap();
    // What an earlier version leaves: no indexes, and a shard whose state
    // does not say it was walked.
    let state = space_key(&s, &sp, "state");
    for who in ["ann", "bob"] {
        let [seen, _, _] = s.user_keys(&id(who));
        let _: () = r.del(&seen).await.unwrap();
    }
    let _: () = r.hdel(&state, "ix").await.unwrap();
    assert!(
        s.seen_anywhere(&[id("ann")]).await.unwrap()[0]
            .last_seen_ms
            .is_none()
    );
    // One step walks the sorted set, the next the remembered set (small
    // sets: one `ZSCAN` each); each tick indexes what the walk found.
    for _ in 0..3 {
        s.tick().await.unwrap();
    }
    let any = s.seen_anywhere(&[id("ann"), id("bob")]).await.unwrap();
    assert_eq!(any[0].last_seen_ms, Some(T0));
    assert_eq!(any[0].status, Status::Online);
    assert_eq!(any[1].last_seen_ms, Some(T0));
    assert_eq!(any[1].status, Status::Offline);
    let ix: Option<String> = r.hget(&state, "ix").await.unwrap();
    assert_eq!(ix.as_deref(), Some("done"));
}

#[tokio::test]
async fn a_space_that_only_remembers_waits_in_the_registry_of_due_times() {
    let server = common::RedisServer::standalone();
    let clock = ManualClock::new(T0);
    let s = store(&server.url(), &clock, "ls-due", SpaceConfig::default()).await;
    let mut r = raw(&server.url()).await;
    let [_, _, shards, due] = s.registry_keys();
    let sp = space("room");
    s.set_config(
        &sp,
        SpaceConfig {
            remember_ms: 20 * 60_000,
            ..SpaceConfig::default()
        },
    )
    .await
    .unwrap();
    s.heartbeat(&sp, &[herenow_core::Heartbeat::now(user("ann"))])
        .await
        .unwrap();
    s.leave(&sp, &[user("ann")]).await.unwrap();
    // Presence is gone: the space leaves the registry of names once its
    // writers' marks are old, and waits for its remembered time's horizon.
    clock.advance(Duration::from_secs(180));
    settle(&s).await;
    assert!(s.spaces(None, 100).await.unwrap().is_empty());
    let at: Option<u64> = r.zscore(&due, "room").await.unwrap();
    assert_eq!(at, Some(T0 + 20 * 60_000));
    let n: Option<String> = r.hget(&shards, "room").await.unwrap();
    assert_eq!(n.as_deref(), Some("1"), "its members keep their shard");
    assert_eq!(last_seen(&s, &sp, "ann").await.1, Some(T0));
    // At the horizon the due visit forgets it, and the space leaves the
    // user's index (its mark is older than the grace) and the registry.
    clock.advance(Duration::from_secs(17 * 60));
    settle(&s).await;
    assert_eq!(last_seen(&s, &sp, "ann").await.1, None);
    let at: Option<u64> = r.zscore(&due, "room").await.unwrap();
    assert_eq!(at, None);
    let n: Option<String> = r.hget(&shards, "room").await.unwrap();
    assert_eq!(n, None);
    let [seen, _, _] = s.user_keys(&id("ann"));
    let left: u64 = r.zcard(&seen).await.unwrap();
    assert_eq!(left, 0);
    let ru: u64 = r.zcard(space_key(&s, &sp, "ru")).await.unwrap();
    assert_eq!(ru, 0);
}

#[tokio::test]
async fn erasure_finds_every_friend_set_through_the_reverse_index() {
    let server = common::RedisServer::standalone();
    let clock = ManualClock::new(T0);
    let s = store(&server.url(), &clock, "ls-friends", SpaceConfig::default()).await;
    let mut r = raw(&server.url()).await;
    let followers = |who: &str| s.user_keys(&id(who))[1].clone();
    let sorted = |mut v: Vec<String>| {
        v.sort();
        v
    };
    s.set_friends(&id("bob"), &[id("ann"), id("cy")])
        .await
        .unwrap();
    s.set_friends(&id("dee"), &[id("ann")]).await.unwrap();
    let f: Vec<String> = r.smembers(followers("ann")).await.unwrap();
    assert_eq!(sorted(f), ["bob", "dee"]);
    // Replacing, adding and removing keep it.
    s.set_friends(&id("bob"), &[id("cy")]).await.unwrap();
    s.add_friends(&id("eve"), &[id("ann")]).await.unwrap();
    s.remove_friends(&id("dee"), &[id("ann")]).await.unwrap();
    let f: Vec<String> = r.smembers(followers("ann")).await.unwrap();
    assert_eq!(f, ["eve"]);
    let f: Vec<String> = r.smembers(followers("cy")).await.unwrap();
    assert_eq!(f, ["bob"]);
    // ann's own set, and her place in eve's.
    s.set_friends(&id("ann"), &[id("cy")]).await.unwrap();
    let report = s.erase_user(&id("ann")).await.unwrap();
    assert_eq!(
        report,
        ErasureReport {
            presence: 0,
            remembered: 0,
            friend_set: true,
            listed_by: 1,
        }
    );
    assert!(s.friends(&id("eve")).await.unwrap().is_empty());
    let f: Vec<String> = r.smembers(followers("cy")).await.unwrap();
    assert_eq!(f, ["bob"], "ann follows nobody any more");
    let left: u64 = r.exists(followers("ann")).await.unwrap();
    assert_eq!(left, 0);
    assert_eq!(
        s.erase_user(&id("ann")).await.unwrap(),
        ErasureReport::default()
    );
}

/// Runs an inline command on whichever of `ports` holds its key (the one
/// that does not answer `MOVED`): a client of an earlier version.
fn raw_on_owner(ports: &[u16], cmd: &str) -> String {
    for &p in ports {
        let r = common::raw_command(p, cmd).unwrap();
        if !r.starts_with("-MOVED") {
            assert!(!r.starts_with('-'), "{cmd}: {r}");
            return r;
        }
    }
    panic!("no node took {cmd}");
}

/// Friend sets written before the reverse index existed (issue 8) are
/// indexed once, when a store opens, so erasure finds them; the migration
/// is recorded and runs again only when its record is deleted.
async fn old_friend_sets_are_indexed_at_open(url: &str, ports: &[u16]) {
    // Written the old way: the sets alone, no reverse index. Enough owners
    // for their sets to spread over a cluster's masters.
    raw_on_owner(ports, "SADD mig:friends:bob ann cy");
    for i in 0..12 {
        raw_on_owner(ports, &format!("SADD mig:friends:o{i} ann"));
    }
    // Another prefix's set is not this store's.
    raw_on_owner(ports, "SADD other:friends:zed ann");
    let clock = ManualClock::new(T0);
    let s = store(url, &clock, "mig", SpaceConfig::default()).await;
    let report = s.erase_user(&id("ann")).await.unwrap();
    assert_eq!(report.listed_by, 13, "{report:?}");
    assert_eq!(s.friends(&id("bob")).await.unwrap(), [id("cy")]);
    assert!(s.friends(&id("o7")).await.unwrap().is_empty());
    assert_eq!(
        raw_on_owner(ports, "SISMEMBER other:friends:zed ann"),
        ":1\r\n"
    );

    // Recorded: a store opened later does not scan again...
    raw_on_owner(ports, "SADD mig:friends:fay ann");
    drop(store(url, &clock, "mig", SpaceConfig::default()).await);
    assert_eq!(s.erase_user(&id("ann")).await.unwrap().listed_by, 0);
    // ...unless the record is deleted (servers of an earlier version wrote
    // friend sets after it ran).
    raw_on_owner(ports, "HDEL mig:migrations followers");
    let again = store(url, &clock, "mig", SpaceConfig::default()).await;
    assert_eq!(again.erase_user(&id("ann")).await.unwrap().listed_by, 1);
    assert!(again.friends(&id("fay")).await.unwrap().is_empty());
}

#[tokio::test]
async fn old_friend_sets_are_indexed_at_open_standalone() {
    let server = common::RedisServer::standalone();
    old_friend_sets_are_indexed_at_open(&server.url(), &[server.port]).await;
}

#[tokio::test]
async fn old_friend_sets_are_indexed_at_open_cluster() {
    let cluster = common::RedisCluster::start();
    let ports: Vec<u16> = cluster.nodes.iter().map(|n| n.port).collect();
    old_friend_sets_are_indexed_at_open(&cluster.url(), &ports).await;
}

#[tokio::test]
async fn erasure_waits_for_buffered_writes() {
    let mut server = common::RedisServer::standalone();
    let clock = ManualClock::new(T0);
    let s = store(&server.url(), &clock, "ls-held", SpaceConfig::default()).await;
    let sp = space("room");
    s.heartbeat(&sp, &[herenow_core::Heartbeat::now(user("ann"))])
        .await
        .unwrap();
    server.stop();
    // Accepted into the buffer; an erasure now could be undone by it.
    s.heartbeat(&sp, &[herenow_core::Heartbeat::now(user("ann"))])
        .await
        .unwrap();
    let e = s.erase_user(&id("ann")).await.unwrap_err();
    assert!(matches!(e, Error::Unavailable { .. }), "{e:?}");
}

#[tokio::test]
async fn a_policy_written_before_remembering_remembers_by_the_defaults() {
    let server = common::RedisServer::standalone();
    let clock = ManualClock::new(T0);
    let defaults = SpaceConfig {
        remember_ms: 60_000,
        remember_guests: true,
        ..SpaceConfig::default()
    };
    let s = store(&server.url(), &clock, "ls-policy", defaults).await;
    let mut r = raw(&server.url()).await;
    let sp = space("room");
    // The four thresholds only, as an earlier version wrote them.
    let config = space_key(&s, &sp, "config");
    let _: () = r
        .hset_multiple(
            &config,
            &[
                ("online", "1000"),
                ("away", "2000"),
                ("window", "2000"),
                ("retention", "4000"),
            ],
        )
        .await
        .unwrap();
    let c = s.config(&sp).await.unwrap();
    assert_eq!(
        (c.retention_ms, c.remember_ms, c.remember_guests),
        (4_000, 60_000, true)
    );
    let g = MemberKey::guest(id("g1"));
    s.heartbeat(&sp, &[herenow_core::Heartbeat::now(g.clone())])
        .await
        .unwrap();
    s.leave(&sp, std::slice::from_ref(&g)).await.unwrap();
    clock.advance(Duration::from_secs(59));
    assert_eq!(
        s.status(&sp, std::slice::from_ref(&g)).await.unwrap()[0].last_seen_ms,
        Some(T0)
    );
    clock.advance(Duration::from_secs(1));
    assert_eq!(s.status(&sp, &[g]).await.unwrap()[0].last_seen_ms, None);
}

#[tokio::test]
async fn a_returning_user_costs_no_index_write() {
    let server = common::RedisServer::standalone();
    let clock = ManualClock::new(T0);
    let s = store(&server.url(), &clock, "ls-return", SpaceConfig::default()).await;
    let mut r = raw(&server.url()).await;
    let sp = space("room");
    let [seen, _, _] = s.user_keys(&id("ann"));
    s.heartbeat(&sp, &[herenow_core::Heartbeat::now(user("ann"))])
        .await
        .unwrap();
    s.leave(&sp, &[user("ann")]).await.unwrap();
    clock.advance(Duration::from_secs(60));
    // Back from remembered: present again, and the index already lists
    // the space (its mark stays the first join's).
    let rep = s
        .heartbeat(&sp, &[herenow_core::Heartbeat::now(user("ann"))])
        .await
        .unwrap();
    assert_eq!(rep.joined, 1);
    let mark: Option<u64> = r.zscore(&seen, "room").await.unwrap();
    assert_eq!(mark, Some(T0));
    let waiting: u64 = r.scard(space_key(&s, &sp, "unidx")).await.unwrap();
    assert_eq!(waiting, 0);
    // A user new to the space is marked at its join.
    let other = space("hall");
    s.attach(&other, &attach(user("ann"), "h1", false))
        .await
        .unwrap();
    let mark: Option<u64> = r.zscore(&seen, "hall").await.unwrap();
    assert_eq!(mark, Some(T0 + 60_000));
}
