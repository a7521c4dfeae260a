//! Live connections on Redis, where the contract suite cannot look: several
//! servers sharing one member's connections, a server that stops without
//! closing its own, outages, the sweep's budget and the space registry.

use herenow_testkit as common;

use std::sync::Arc;
use std::time::Duration;

use herenow_core::{
    Attach, Clock, ConnId, Error, Event, EventKind, Heartbeat, LeaveReason, LiveConnections,
    ManualClock, MemberId, MemberKey, PresenceStore, SpaceConfig, SpaceName, Status, Subscription,
};
use herenow_redis::{RedisOptions, RedisStore};

const T0: u64 = 1_700_000_000_000;
const TTL_MS: u64 = 30_000;

fn user(id: &str) -> MemberKey {
    MemberKey::user(MemberId::new(id).unwrap())
}

fn attach(member: MemberKey, conn: &str) -> Attach {
    Attach {
        member,
        conn: ConnId::new(conn).unwrap(),
        meta: None,
        invisible: false,
        ttl_ms: TTL_MS,
    }
}

fn conn(id: &str) -> ConnId {
    ConnId::new(id).unwrap()
}

async fn store(url: &str, clock: &ManualClock, opts: RedisOptions) -> RedisStore {
    RedisStore::connect(url, Arc::new(clock.clone()), SpaceConfig::default(), opts)
        .await
        .expect("connect")
}

fn opts(prefix: &str) -> RedisOptions {
    RedisOptions {
        prefix: prefix.into(),
        ..RedisOptions::default()
    }
}

async fn next_event(sub: &mut Subscription) -> Event {
    let e = tokio::time::timeout(Duration::from_secs(2), sub.events.recv())
        .await
        .expect("an event within 2 s")
        .expect("an event, not an error");
    (*e).clone()
}

async fn no_event(sub: &mut Subscription) {
    if let Ok(Ok(e)) = tokio::time::timeout(Duration::from_millis(150), sub.events.recv()).await {
        panic!("unexpected event {e:?}");
    }
}

fn what(e: &Event) -> (EventKind, &str, Option<&str>) {
    (
        e.kind,
        e.member.id.as_str(),
        e.conn.as_ref().map(ConnId::as_str),
    )
}

async fn conn_ids(s: &RedisStore, sp: &SpaceName, m: MemberKey) -> Vec<String> {
    s.connections(sp, &[m]).await.unwrap()[0]
        .iter()
        .map(|c| c.conn.to_string())
        .collect()
}

/// Two servers hold one member's connections (a phone on one, a laptop on
/// the other): one `join`, then `connect`; closing one is a `disconnect`.
/// A third server attaches and then stops without closing anything: its
/// connections expire through the others' sweep within their TTL.
async fn one_member_across_servers(url: &str) {
    let clock = ManualClock::new(T0);
    let a = store(url, &clock, opts("across")).await;
    let b = store(url, &clock, opts("across")).await;
    let sp = SpaceName::new("lobby").unwrap();
    let mut sub = b.subscribe(&sp).await.unwrap();

    let r = a
        .attach(&sp, &attach(user("ann"), "a-phone"))
        .await
        .unwrap();
    assert!(r.opened && r.joined, "{r:?}");
    assert_eq!(
        what(&next_event(&mut sub).await),
        (EventKind::Join, "ann", Some("a-phone"))
    );
    let r = b
        .attach(&sp, &attach(user("ann"), "b-laptop"))
        .await
        .unwrap();
    assert!(r.opened && !r.joined, "{r:?}");
    assert_eq!(
        what(&next_event(&mut sub).await),
        (EventKind::Connect, "ann", Some("b-laptop"))
    );
    for s in [&a, &b] {
        assert_eq!(conn_ids(s, &sp, user("ann")).await, ["a-phone", "b-laptop"]);
    }

    let r = a.detach(&sp, &user("ann"), &conn("a-phone")).await.unwrap();
    assert!(r.found && !r.left, "{r:?}");
    let e = next_event(&mut sub).await;
    assert_eq!(what(&e), (EventKind::Disconnect, "ann", Some("a-phone")));
    assert_eq!(e.status, Status::Online);
    assert_eq!(conn_ids(&b, &sp, user("ann")).await, ["b-laptop"]);

    // A server that stops without a word: its sockets are gone, nobody
    // detaches them.
    let c = store(url, &clock, opts("across")).await;
    c.attach(&sp, &attach(user("ann"), "c-tab")).await.unwrap();
    c.attach(&sp, &attach(user("bo"), "c-bo")).await.unwrap();
    drop(c);
    assert_eq!(
        what(&next_event(&mut sub).await),
        (EventKind::Connect, "ann", Some("c-tab"))
    );
    assert_eq!(
        what(&next_event(&mut sub).await),
        (EventKind::Join, "bo", Some("c-bo"))
    );
    // The laptop closes: ann stays through the stopped server's tab.
    b.detach(&sp, &user("ann"), &conn("b-laptop"))
        .await
        .unwrap();
    assert_eq!(
        what(&next_event(&mut sub).await),
        (EventKind::Disconnect, "ann", Some("b-laptop"))
    );

    // Nothing expires before the TTL...
    clock.advance(Duration::from_millis(TTL_MS - 1));
    assert_eq!(b.tick().await.unwrap().connections_expired, 0);
    no_event(&mut sub).await;
    // ...and everything right after it, swept by a surviving server.
    clock.advance(Duration::from_millis(2));
    let r = b.tick().await.unwrap();
    assert_eq!(r.connections_expired, 2, "{r:?}");
    let mut left = Vec::new();
    for _ in 0..2 {
        let e = next_event(&mut sub).await;
        assert_eq!(e.reason, Some(LeaveReason::Timeout));
        left.push(what(&e).1.to_owned() + "/" + what(&e).2.unwrap());
        assert_eq!(e.kind, EventKind::Leave);
    }
    left.sort();
    assert_eq!(left, ["ann/c-tab", "bo/c-bo"]);
    let st = a.status(&sp, &[user("ann"), user("bo")]).await.unwrap();
    assert!(st.iter().all(|m| m.status == Status::Offline), "{st:?}");
    let conns = a
        .connections(&sp, &[user("ann"), user("bo")])
        .await
        .unwrap();
    assert!(conns.iter().all(Vec::is_empty), "{conns:?}");
    assert_eq!(a.count(&sp, None).await.unwrap().total(), 0);
}

#[tokio::test]
async fn one_member_across_servers_standalone() {
    let server = common::RedisServer::standalone();
    one_member_across_servers(&server.url()).await;
}

#[tokio::test]
async fn one_member_across_servers_cluster() {
    let cluster = common::RedisCluster::start();
    one_member_across_servers(&cluster.url()).await;
}

/// Whether ann's and bo's one connection each is in its grace.
async fn lingering(s: &RedisStore, sp: &SpaceName) -> bool {
    let c = s.connections(sp, &[user("ann"), user("bo")]).await.unwrap();
    c.iter().all(|m| m.len() == 1 && m[0].lingering)
}

/// A server dies (its store dropped: no shutdown, no detach, its beats
/// stop): within seconds a surviving server hands its connections to the
/// grace. A member who comes back through the survivor within it never
/// left; one who does not leaves once when it ends.
async fn a_dead_servers_connections_go_to_the_grace(url: &str) {
    let clock = ManualClock::new(T0);
    let a = store(url, &clock, opts("reaped")).await;
    let b = store(url, &clock, opts("reaped")).await;
    let sp = SpaceName::new("lobby").unwrap();
    a.attach(&sp, &attach(user("ann"), "a-ann")).await.unwrap();
    a.attach(&sp, &attach(user("bo"), "a-bo")).await.unwrap();
    let mut sub = b.subscribe(&sp).await.unwrap();
    b.tick().await.unwrap(); // b has seen a beat
    let died = std::time::Instant::now();
    drop(a);
    while !lingering(&b, &sp).await {
        assert!(
            died.elapsed() < Duration::from_secs(10),
            "the dead server's connections never went to the grace"
        );
        b.tick().await.unwrap();
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let took = died.elapsed();
    eprintln!("a dead server's connections were in their grace after {took:?}");
    assert!(took < Duration::from_secs(5), "{took:?}");
    no_event(&mut sub).await;
    let reaped_at = clock.now_ms();

    // Ann's page reconnects to the survivor: nobody is told.
    clock.advance(Duration::from_secs(2));
    let r = b.attach(&sp, &attach(user("ann"), "b-ann")).await.unwrap();
    assert!(r.resumed && !r.joined, "{r:?}");
    no_event(&mut sub).await;
    // Bo does not come back: one leave when the grace ends, last seen
    // when his server was last heard of (its last beat; the test's clock
    // had not moved since).
    clock.advance(Duration::from_secs(4));
    b.tick().await.unwrap();
    let e = next_event(&mut sub).await;
    assert_eq!(what(&e), (EventKind::Leave, "bo", Some("a-bo")));
    let st = b.status(&sp, &[user("ann"), user("bo")]).await.unwrap();
    assert_eq!(st[0].status, Status::Online);
    assert_eq!(st[1].status, Status::Offline);
    assert_eq!(st[1].last_seen_ms, Some(reaped_at));
    no_event(&mut sub).await;
}

#[tokio::test]
async fn a_dead_servers_connections_go_to_the_grace_standalone() {
    let server = common::RedisServer::standalone();
    a_dead_servers_connections_go_to_the_grace(&server.url()).await;
}

#[tokio::test]
async fn a_dead_servers_connections_go_to_the_grace_cluster() {
    let cluster = common::RedisCluster::start();
    a_dead_servers_connections_go_to_the_grace(&cluster.url()).await;
}

/// Attach and detach are never buffered: while Redis is down they answer
/// `Unavailable` (the client retries), and the buffer stays empty. A
/// heartbeat at the same moment is buffered as always.
#[tokio::test]
async fn connections_are_not_buffered_during_an_outage() {
    let mut server = common::RedisServer::standalone();
    let clock = ManualClock::new(T0);
    let s = store(
        &server.url(),
        &clock,
        RedisOptions {
            timeout: Duration::from_millis(500),
            ..opts("outage")
        },
    )
    .await;
    let sp = SpaceName::new("down").unwrap();
    s.attach(&sp, &attach(user("ann"), "o-1")).await.unwrap();
    server.stop();
    let e = s
        .attach(&sp, &attach(user("ann"), "o-2"))
        .await
        .unwrap_err();
    assert!(matches!(e, Error::Unavailable { .. }), "{e:?}");
    let e = s.detach(&sp, &user("ann"), &conn("o-1")).await.unwrap_err();
    assert!(matches!(e, Error::Unavailable { .. }), "{e:?}");
    // Refused at once now that writes are held, without waiting for Redis.
    let e = s
        .attach(&sp, &attach(user("ann"), "o-1"))
        .await
        .unwrap_err();
    assert!(matches!(e, Error::Unavailable { .. }), "{e:?}");
    assert!(e.is_retryable());
    let e = s.connections(&sp, &[user("ann")]).await.unwrap_err();
    assert!(matches!(e, Error::Unavailable { .. }), "{e:?}");
    assert_eq!(s.stats().buffered, 0);
    s.heartbeat(&sp, &[Heartbeat::now(user("bo"))])
        .await
        .expect("heartbeats are still buffered");
    assert_eq!(s.stats().buffered, 1);
}

/// The sweep closes expired connections in steps of its budget and goes
/// on until none is left, within one `tick`.
#[tokio::test]
async fn the_sweep_closes_connections_in_bounded_steps() {
    let server = common::RedisServer::standalone();
    let clock = ManualClock::new(T0);
    let s = store(
        &server.url(),
        &clock,
        RedisOptions {
            tick_budget: 2,
            ..opts("budget")
        },
    )
    .await;
    let sp = SpaceName::new("crowd").unwrap();
    for i in 0..7 {
        s.attach(&sp, &attach(user(&format!("m{i}")), &format!("x-{i}")))
            .await
            .unwrap();
    }
    assert_eq!(s.count(&sp, None).await.unwrap().users, 7);
    clock.advance(Duration::from_millis(TTL_MS));
    let r = s.tick().await.unwrap();
    assert_eq!(r.connections_expired, 7, "{r:?}");
    assert_eq!(s.count(&sp, None).await.unwrap().users, 0);
    assert_eq!(s.tick().await.unwrap().connections_expired, 0);
}

/// A space that holds only connections (here an invisible one: no member
/// is present) stays in the registry, so the sweep keeps finding it and
/// expires the connection; only then is the space dropped.
#[tokio::test]
async fn a_space_with_only_connections_is_kept_until_they_expire() {
    let server = common::RedisServer::standalone();
    let clock = ManualClock::new(T0);
    let s = store(&server.url(), &clock, opts("registry")).await;
    let sp = SpaceName::new("quiet").unwrap();
    let hidden = Attach {
        invisible: true,
        ttl_ms: herenow_core::limits::MAX_CONN_TTL_MS,
        ..attach(user("dee"), "h-1")
    };
    s.attach(&sp, &hidden).await.unwrap();
    assert_eq!(s.count(&sp, None).await.unwrap().total(), 0);
    // Long past the registry's grace for spaces nobody writes to.
    clock.advance(Duration::from_secs(5 * 60));
    let r = s.tick().await.unwrap();
    assert_eq!((r.spaces_dropped, r.connections_expired), (0, 0), "{r:?}");
    assert_eq!(s.spaces(None, 10).await.unwrap().len(), 1);
    clock.advance(Duration::from_secs(5 * 60));
    let r = s.tick().await.unwrap();
    assert_eq!((r.spaces_dropped, r.connections_expired), (1, 1), "{r:?}");
    assert!(conn_ids(&s, &sp, user("dee")).await.is_empty());
    assert!(s.spaces(None, 10).await.unwrap().is_empty());
}

/// A tiny deterministic generator, so a failure replays exactly.
struct Lcg(u64);

impl Lcg {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 33) % n
    }
}

/// What a call answered, comparable across stores.
fn outcome<T: std::fmt::Debug>(r: herenow_core::Result<T>) -> String {
    match r {
        Ok(v) => format!("{v:?}"),
        Err(Error::Invalid(i)) => format!("invalid {i:?}"),
        Err(e) => panic!("unexpected error {e:?}"),
    }
}

/// The events a call caused, in an order that does not depend on how a
/// store breaks ties between members.
fn sorted(mut events: Vec<Event>) -> Vec<String> {
    let mut out: Vec<String> = events
        .drain(..)
        .map(|e| {
            format!(
                "{:?} {} {:?} {:?} {:?} {:?} {:?}",
                e.kind, e.member.id, e.conn, e.status, e.last_seen_ms, e.reason, e.meta
            )
        })
        .collect();
    out.sort();
    out
}

/// The memory engine is the reference: the same random calls (attach,
/// ping, metadata and visibility changes, detach, heartbeats, leaves, time
/// and sweeps) on both stores give the same answers, the same events and
/// the same connections.
#[tokio::test]
async fn same_answers_and_events_as_the_memory_engine() {
    use futures::FutureExt;

    let server = common::RedisServer::standalone();
    let mut seen = std::collections::BTreeMap::new();
    // Thresholds short enough for the walk to see members go away, come
    // back, time out and expire while their connections live on; members
    // that go away are remembered (the default), so their remembered
    // last-seen times are compared too.
    let policy = SpaceConfig {
        online_ms: 4_000,
        away_ms: 12_000,
        window_ms: 12_000,
        retention_ms: 30_000,
        ..SpaceConfig::default()
    };
    for seed in [1_u64, 2, 3] {
        let clock = ManualClock::new(T0);
        let mem = herenow_memory::MemoryStore::new(Arc::new(clock.clone()), policy);
        let red = RedisStore::connect(
            &server.url(),
            Arc::new(clock.clone()),
            policy,
            opts(&format!("model{seed}")),
        )
        .await
        .unwrap();
        let sp = SpaceName::new("model").unwrap();
        let mut msub = mem.subscribe(&sp).await.unwrap();
        let mut rsub = red.subscribe(&sp).await.unwrap();
        let members: Vec<MemberKey> = ["ann", "bo", "cy"].into_iter().map(user).collect();
        let metas = [None, Some(r#"{"a":1}"#), Some(r#"{"a":2}"#)];
        let mut rng = Lcg(seed);
        for step in 0..300 {
            let m = members[rng.below(3) as usize].clone();
            let c = conn(&format!("c{}", rng.below(5)));
            let (label, a, b) = match rng.below(20) {
                0..=8 => {
                    let at = Attach {
                        member: m,
                        conn: c,
                        meta: metas[rng.below(3) as usize]
                            .map(|j| herenow_core::Metadata::from_json(j).unwrap()),
                        invisible: rng.below(5) == 0,
                        ttl_ms: [3_000, 8_000, 30_000][rng.below(3) as usize],
                    };
                    (
                        format!("attach {at:?}"),
                        outcome(mem.attach(&sp, &at).await),
                        outcome(red.attach(&sp, &at).await),
                    )
                }
                9..=11 => (
                    format!("detach {m:?} {c}"),
                    outcome(mem.detach(&sp, &m, &c).await),
                    outcome(red.detach(&sp, &m, &c).await),
                ),
                12..=15 => {
                    clock.advance(Duration::from_millis(rng.below(4_000)));
                    let (mut x, mut y) = (0, 0);
                    for _ in 0..10 {
                        let r = mem.tick().await.unwrap();
                        x += r.connections_expired + r.transitions;
                        let r = red.tick().await.unwrap();
                        y += r.connections_expired + r.transitions;
                    }
                    (
                        format!("tick at {}", herenow_core::Clock::now_ms(&clock) - T0),
                        x.to_string(),
                        y.to_string(),
                    )
                }
                16 => {
                    let beat = Heartbeat {
                        meta: metas[rng.below(3) as usize]
                            .map(|j| herenow_core::Metadata::from_json(j).unwrap()),
                        ..Heartbeat::now(m)
                    };
                    (
                        format!("heartbeat {beat:?}"),
                        outcome(mem.heartbeat(&sp, std::slice::from_ref(&beat)).await),
                        outcome(red.heartbeat(&sp, &[beat]).await),
                    )
                }
                17 => (
                    format!("leave {m:?}"),
                    outcome(mem.leave(&sp, std::slice::from_ref(&m)).await),
                    outcome(red.leave(&sp, &[m]).await),
                ),
                _ => {
                    clock.advance(Duration::from_millis(rng.below(4_000)));
                    (String::from("advance"), String::new(), String::new())
                }
            };
            assert_eq!(a, b, "seed {seed} step {step}: {label}");
            let mut mine = Vec::new();
            while let Some(Ok(e)) = msub.events.recv().now_or_never() {
                mine.push((*e).clone());
            }
            let mut theirs = Vec::new();
            for _ in 0..mine.len() {
                theirs.push(next_event(&mut rsub).await);
            }
            for e in &mine {
                *seen.entry(format!("{:?}", e.kind)).or_insert(0_u32) += 1;
            }
            assert_eq!(
                sorted(mine),
                sorted(theirs),
                "seed {seed} step {step}: events of {label}"
            );
            if step % 10 == 9 {
                assert_eq!(
                    mem.connections(&sp, &members).await.unwrap(),
                    red.connections(&sp, &members).await.unwrap(),
                    "seed {seed} step {step}: connections"
                );
                assert_eq!(
                    mem.status(&sp, &members).await.unwrap(),
                    red.status(&sp, &members).await.unwrap(),
                    "seed {seed} step {step}: status"
                );
            }
        }
        no_event(&mut rsub).await;
    }
    eprintln!("events compared: {seen:?}");
    // The walk reaches every kind of event a connection can cause.
    for kind in [
        "Join",
        "Connect",
        "Update",
        "Disconnect",
        "Leave",
        "Away",
        "Back",
    ] {
        assert!(seen.contains_key(kind), "no {kind} in {seen:?}");
    }
}
