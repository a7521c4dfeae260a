//! Issue 11, webhooks: the Redis outbox with several stores on one Redis
//! (a standalone server and a 3-master cluster, started here). Each event
//! is handed to one consumer; a consumer that dies is taken over after
//! its idle time (the stores' `ManualClock`), in order, with the same ids;
//! a store whose outbox is closed writes no stream; streams are capped
//! with what is trimmed counted; a stream its writer never indexed is
//! found by the periodic `SCAN`; the switch every store follows is a
//! lease its openers renew (for spaces' endpoints alone, only while a
//! space names some), and streams expire the keep time after their
//! newest event. The contract suite (tests/contract.rs) runs the shared
//! scenarios on one store.

use herenow_testkit as common;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use herenow_core::outbox::{OutboxEvent, OutboxKind, OutboxOptions};
use herenow_core::{
    Capability, Error, Heartbeat, ManualClock, MemberId, MemberKey, PresenceStore, SpaceConfig,
    SpaceName, SpaceWebhooks, WebhookOutbox,
};
use herenow_redis::{
    LayoutOptions, RedisOptions, RedisStore, SeedLayout, SeedLayoutStore, key_names::shard_of,
};

const T0: u64 = 1_700_000_000_000;
const IDLE: u64 = 30_000;

fn user(id: &str) -> MemberKey {
    MemberKey::user(MemberId::new(id).unwrap())
}

fn beat(id: &str) -> Heartbeat {
    Heartbeat {
        member: user(id),
        at_ms: None,
        meta: None,
    }
}

fn space(name: &str) -> SpaceName {
    SpaceName::new(name).unwrap()
}

async fn store(url: &str, clock: &ManualClock, prefix: &str, shards: u16) -> RedisStore {
    let opts = RedisOptions {
        prefix: prefix.into(),
        shards,
        ..RedisOptions::default()
    };
    RedisStore::connect(url, Arc::new(clock.clone()), SpaceConfig::default(), opts)
        .await
        .expect("connect")
}

async fn open(url: &str, clock: &ManualClock, prefix: &str, shards: u16) -> RedisStore {
    let s = store(url, clock, prefix, shards).await;
    s.outbox_open(OutboxOptions::default()).await.unwrap();
    s
}

/// Claims for `consumer` until a claim comes back empty.
async fn drain(s: &RedisStore, consumer: &str) -> Vec<OutboxEvent> {
    let mut all = Vec::new();
    for _ in 0..100 {
        let got = s.outbox_claim(consumer, 7, IDLE).await.unwrap();
        if got.is_empty() {
            break;
        }
        all.extend(got);
    }
    all
}

async fn ack(s: &RedisStore, events: &[OutboxEvent]) {
    // An acknowledgement is a batch: a round that claimed nothing has none.
    if events.is_empty() {
        return;
    }
    let ids: Vec<String> = events.iter().map(|e| e.id.clone()).collect();
    s.outbox_ack(&ids).await.unwrap();
}

/// How a test reaches Redis itself: one server, or whichever node of the
/// cluster owns the key.
enum Raw<'a> {
    One(&'a common::RedisServer),
    Cluster(&'a common::RedisCluster),
}

impl Raw<'_> {
    fn cmd(&self, cmd: &str) -> String {
        match self {
            Raw::One(s) => common::raw_command(s.port, cmd).unwrap(),
            Raw::Cluster(c) => {
                for n in &c.nodes {
                    let r = common::raw_command(n.port, cmd).unwrap();
                    if !r.starts_with("-MOVED") {
                        return r;
                    }
                }
                panic!("no node owns {cmd}");
            }
        }
    }

    fn int(&self, cmd: &str) -> i64 {
        let r = self.cmd(cmd);
        r.trim()
            .trim_start_matches(':')
            .parse()
            .unwrap_or_else(|_| panic!("{cmd}: {r}"))
    }
}

/// Two stores, both consuming: every event is handed to exactly one of
/// them, each space's to one consumer, each member's in order.
async fn two_consumers_split_the_events(url: &str, prefix: &str, shards: u16) {
    let clock = ManualClock::new(T0);
    let (a, b) = (
        open(url, &clock, prefix, shards).await,
        open(url, &clock, prefix, shards).await,
    );
    let spaces: Vec<SpaceName> = (0..12).map(|i| space(&format!("room-{i}"))).collect();
    for (i, sp) in spaces.iter().enumerate() {
        // Half written through each store: the streams are Redis', not
        // the writer's.
        let w = if i % 2 == 0 { &a } else { &b };
        w.heartbeat(sp, &[beat("ann"), beat("bob")]).await.unwrap();
        w.leave(sp, &[user("ann")]).await.unwrap();
        w.heartbeat(sp, &[beat("ann")]).await.unwrap();
    }
    // Claims interleave, each store claiming a little at a time.
    // Both claim before either acknowledges: a space one holds is not
    // the other's.
    let (mut all, mut by_a, mut by_b) = (Vec::new(), 0, 0);
    for _ in 0..100 {
        let x = a.outbox_claim("a", 3, IDLE).await.unwrap();
        let y = b.outbox_claim("b", 3, IDLE).await.unwrap();
        if x.is_empty() && y.is_empty() {
            break;
        }
        let xs: HashSet<&SpaceName> = x.iter().map(|e| &e.space).collect();
        assert!(y.iter().all(|e| !xs.contains(&e.space)), "{x:?} {y:?}");
        ack(&a, &x).await;
        ack(&b, &y).await;
        (by_a, by_b) = (by_a + x.len(), by_b + y.len());
        all.extend(x);
        all.extend(y);
    }
    // Occupied, join ann, join bob, leave ann, join ann: five per space.
    assert_eq!(all.len(), 5 * spaces.len());
    let ids: HashSet<&str> = all.iter().map(|e| e.id.as_str()).collect();
    assert_eq!(ids.len(), 5 * spaces.len(), "no event handed out twice");
    assert!(by_a > 0 && by_b > 0, "both consumed");
    for sp in &spaces {
        let ann: Vec<OutboxKind> = all
            .iter()
            .filter(|e| &e.space == sp && e.member == Some(user("ann")))
            .map(|e| e.kind)
            .collect();
        // Acknowledged batch by batch, so a space may change consumers
        // between batches, but never mid-order.
        assert_eq!(
            ann,
            [OutboxKind::Join, OutboxKind::Leave, OutboxKind::Join],
            "{sp:?}"
        );
    }
    assert!(a.outbox_claim("a", 100, 0).await.unwrap().is_empty());
    let stats = a.outbox_stats().await.unwrap();
    assert_eq!((stats.depth, stats.pending), (0, 0), "{stats:?}");
}

/// A consumer claims and dies without acknowledging: nobody gets the
/// space's events (not even newer ones) until its claim is idle long
/// enough; then the next consumer gets them all, the abandoned ones first
/// with the same ids, a member's in order.
async fn a_dead_consumer_is_taken_over(url: &str, prefix: &str, shards: u16) {
    let clock = ManualClock::new(T0);
    let sp = space("lobby");
    let heir = open(url, &clock, prefix, shards).await;
    let first = {
        let dead = open(url, &clock, prefix, shards).await;
        dead.heartbeat(&sp, &[beat("ann"), beat("bob")])
            .await
            .unwrap();
        dead.leave(&sp, &[user("ann")]).await.unwrap();
        let got = dead.outbox_claim("dead", 100, IDLE).await.unwrap();
        assert_eq!(got.len(), 4, "occupied, two joins, a leave: {got:?}");
        got
        // Dropped here, never acknowledging.
    };
    clock.advance(Duration::from_secs(10));
    heir.heartbeat(&sp, &[beat("ann")]).await.unwrap();
    assert!(
        drain(&heir, "heir").await.is_empty(),
        "still the dead one's"
    );
    clock.advance(Duration::from_secs(25));
    let again = drain(&heir, "heir").await;
    assert_eq!(again.len(), 5, "{again:?}");
    for e in &first {
        assert!(again.contains(e), "{e:?} again, with its id");
    }
    let ann: Vec<(OutboxKind, u64)> = again
        .iter()
        .filter(|e| e.member == Some(user("ann")))
        .map(|e| (e.kind, e.at_ms))
        .collect();
    assert_eq!(
        ann,
        [
            (OutboxKind::Join, T0),
            (OutboxKind::Leave, T0),
            (OutboxKind::Join, T0 + 10_000)
        ]
    );
    ack(&heir, &again).await;
    assert!(heir.outbox_claim("other", 100, 0).await.unwrap().is_empty());
    assert_eq!(heir.outbox_stats().await.unwrap().pending, 0);
}

/// While no store on the Redis opened the outbox, scripts run unchanged:
/// no stream, nothing indexed. Once one store opens it, every store on the
/// Redis captures (it reads the switch when it connects and on every
/// tick), so a server without webhook endpoints loses no event that the
/// servers with endpoints must deliver.
async fn a_closed_outbox_writes_nothing(raw: &Raw<'_>, url: &str, prefix: &str, shards: u16) {
    let clock = ManualClock::new(T0);
    let closed = store(url, &clock, prefix, shards).await;
    let sp = space("quiet");
    let members: Vec<Heartbeat> = (0..20).map(|i| beat(&format!("m{i}"))).collect();
    closed.heartbeat(&sp, &members).await.unwrap();
    closed.leave(&sp, &[user("m1")]).await.unwrap();
    clock.advance(Duration::from_secs(600));
    closed.tick().await.unwrap();
    for k in 0..shards {
        let tag = if k == 0 {
            "quiet".to_owned()
        } else {
            format!("quiet#{k}")
        };
        assert_eq!(raw.int(&format!("EXISTS {prefix}:{{{tag}}}:wh")), 0);
        assert_eq!(raw.int(&format!("EXISTS {prefix}:{{{tag}}}:whs")), 0);
    }
    assert_eq!(raw.int(&format!("EXISTS {prefix}:{{quiet}}:whocc")), 0);
    assert_eq!(raw.int(&format!("ZCARD {prefix}:{{~outbox}}:streams")), 0);
    assert_eq!(closed.outbox_stats().await.unwrap().depth, 0);

    // Another server opens the outbox; this one learns it at its next tick.
    let opener = open(url, &clock, prefix, shards).await;
    closed.tick().await.unwrap();
    let loud = space("loud");
    closed.heartbeat(&loud, &[beat("ann")]).await.unwrap();
    let got = drain(&opener, "deliverer").await;
    assert!(
        got.iter()
            .any(|e| e.space == loud && e.member.as_ref().is_some_and(|m| m.id.as_str() == "ann")),
        "the join made through the server without endpoints is captured: {got:?}"
    );
    ack(&opener, &got).await;
}

/// The stream keeps at most the cap; the oldest go, counted.
async fn the_cap_trims_and_counts(raw: &Raw<'_>, url: &str, prefix: &str) {
    let clock = ManualClock::new(T0);
    let s = store(url, &clock, prefix, 1).await;
    s.outbox_open(OutboxOptions {
        max_events: 5,
        ..OutboxOptions::default()
    })
    .await
    .unwrap();
    let sp = space("crowd");
    for i in 0..4 {
        let batch: Vec<Heartbeat> = (0..5).map(|j| beat(&format!("m{i}-{j}"))).collect();
        s.heartbeat(&sp, &batch).await.unwrap();
    }
    assert_eq!(raw.int(&format!("XLEN {prefix}:{{crowd}}:wh")), 5);
    let stats = s.outbox_stats().await.unwrap();
    // Occupied and twenty joins into room for five.
    assert_eq!((stats.depth, stats.trimmed), (5, 16), "{stats:?}");
    let got = drain(&s, "one").await;
    let who: Vec<String> = got
        .iter()
        .map(|e| e.member.as_ref().unwrap().id.to_string())
        .collect();
    assert_eq!(who, ["m3-0", "m3-1", "m3-2", "m3-3", "m3-4"]);
    ack(&s, &got).await;
    // Drained: the stream is gone, its trimmed count kept.
    assert!(s.outbox_claim("one", 10, IDLE).await.unwrap().is_empty());
    assert_eq!(raw.int(&format!("EXISTS {prefix}:{{crowd}}:wh")), 0);
    let stats = s.outbox_stats().await.unwrap();
    assert_eq!((stats.depth, stats.trimmed), (0, 16), "{stats:?}");
}

/// A writer that dies between its script and the index update leaves a
/// stream nobody indexed: the periodic `SCAN` finds it.
async fn an_unindexed_stream_is_found(raw: &Raw<'_>, url: &str, prefix: &str) {
    let clock = ManualClock::new(T0);
    let s = open(url, &clock, prefix, 1).await;
    // The first claim runs a full pass (nothing yet).
    assert!(s.outbox_claim("one", 10, IDLE).await.unwrap().is_empty());
    let sp = space("lost");
    s.heartbeat(&sp, &[beat("ann")]).await.unwrap();
    // As if the writer had died before indexing.
    assert_eq!(
        raw.int(&format!("ZREM {prefix}:{{~outbox}}:streams lost")),
        1
    );
    assert!(s.outbox_claim("one", 10, IDLE).await.unwrap().is_empty());
    // Another server starting now scans at once.
    let fresh = open(url, &clock, prefix, 1).await;
    let got = drain(&fresh, "fresh").await;
    assert_eq!(got.len(), 2, "{got:?}");
    ack(&fresh, &got).await;
    // And this one at its next pass.
    s.heartbeat(&sp, &[beat("bob")]).await.unwrap();
    raw.cmd(&format!("ZREM {prefix}:{{~outbox}}:streams lost"));
    assert!(s.outbox_claim("one", 10, IDLE).await.unwrap().is_empty());
    clock.advance(Duration::from_secs(61));
    let got = drain(&s, "one").await;
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(got[0].member, Some(user("bob")));
}

/// The tags of `name`'s shards' streams that exist.
fn streams_of(raw: &Raw<'_>, prefix: &str, name: &str, shards: u16) -> Vec<String> {
    (0..shards)
        .map(|k| {
            if k == 0 {
                name.to_owned()
            } else {
                format!("{name}#{k}")
            }
        })
        .filter(|tag| raw.int(&format!("EXISTS {prefix}:{{{tag}}}:wh")) == 1)
        .collect()
}

/// The switch is a lease: the store whose server opened the outbox
/// writes it with an expiry and renews it every tick; the others capture
/// while it lasts and stop once it lapses (every server with webhooks
/// gone that long), and what they captured expires with its streams.
/// Streams, their state and the index live the keep time after their
/// newest event. A switch an earlier version left without an expiry gets
/// one.
async fn the_switch_is_a_lease(raw: &Raw<'_>, url: &str, prefix: &str, shards: u16) {
    const HOUR: i64 = 3_600_000;
    let switch = format!("{prefix}:{{~outbox}}:open");
    let keep = format!("{prefix}:{{~outbox}}:keep");
    let in_hour = |ttl: i64| ttl > HOUR - 60_000 && ttl <= HOUR;
    let clock = ManualClock::new(T0);
    let opener = store(url, &clock, prefix, shards).await;
    opener
        .outbox_open(OutboxOptions {
            keep_ms: HOUR as u64,
            ..OutboxOptions::default()
        })
        .await
        .unwrap();
    assert!(in_hour(raw.int(&format!("PTTL {switch}"))));
    assert!(raw.cmd(&format!("GET {keep}")).contains("3600000"));

    let follower = store(url, &clock, prefix, shards).await;
    let members: Vec<Heartbeat> = (0..8).map(|i| beat(&format!("m{i}"))).collect();
    follower.heartbeat(&space("a"), &members).await.unwrap();
    let tags = streams_of(raw, prefix, "a", shards);
    assert!(
        !tags.is_empty(),
        "the follower captures while the switch is on"
    );
    for tag in &tags {
        assert!(
            in_hour(raw.int(&format!("PTTL {prefix}:{{{tag}}}:wh"))),
            "{tag}"
        );
    }
    assert!(in_hour(
        raw.int(&format!("PTTL {prefix}:{{~outbox}}:streams"))
    ));
    // What a claim writes beside a stream lives as long as the stream.
    let got = opener.outbox_claim("one", 3, IDLE).await.unwrap();
    assert!(!got.is_empty());
    let claimed = got[0].id.split('/').next().unwrap().to_owned();
    assert!(
        in_hour(raw.int(&format!("PTTL {prefix}:{{{claimed}}}:whs"))),
        "{claimed}"
    );

    // The lease runs out (as when no server with webhooks renewed it for
    // an hour): the follower stops capturing at its next tick.
    raw.cmd(&format!("DEL {switch} {keep}"));
    follower.tick().await.unwrap();
    follower.heartbeat(&space("b"), &members).await.unwrap();
    assert!(streams_of(raw, prefix, "b", shards).is_empty());
    assert!(!opener.outbox_stats().await.unwrap().open);
    // The opener's next tick renews it; the follower's next captures.
    opener.tick().await.unwrap();
    assert!(in_hour(raw.int(&format!("PTTL {switch}"))));
    follower.tick().await.unwrap();
    follower.heartbeat(&space("c"), &members).await.unwrap();
    assert!(!streams_of(raw, prefix, "c", shards).is_empty());

    // A switch without an expiry or a keep time (an earlier version's):
    // the follower gives it the default lease and keeps events a day.
    drop(opener);
    raw.cmd(&format!("SET {switch} 100000"));
    raw.cmd(&format!("DEL {keep}"));
    follower.tick().await.unwrap();
    let day = 24 * HOUR;
    assert!(raw.int(&format!("PTTL {switch}")) > day - 60_000);
    follower.heartbeat(&space("d"), &members).await.unwrap();
    let tags = streams_of(raw, prefix, "d", shards);
    assert!(!tags.is_empty());
    for tag in &tags {
        let ttl = raw.int(&format!("PTTL {prefix}:{{{tag}}}:wh"));
        assert!(ttl > day - 60_000 && ttl <= day, "{tag}: {ttl}");
    }
}

/// An endpoint a space may name.
fn a_hook() -> herenow_core::outbox::SpaceHook {
    herenow_core::outbox::SpaceHook {
        url: "https://example.com/hook".into(),
        kinds: vec![OutboxKind::Join],
        secret: "whsec_c2VjcmV0".into(),
    }
}

/// Whether `s`'s tick turns the switch back on after it lapsed (deleted
/// here, as when its lease ran out).
async fn renews(raw: &Raw<'_>, s: &RedisStore, switch: &str) -> bool {
    raw.cmd(&format!("DEL {switch}"));
    s.tick().await.unwrap();
    raw.int(&format!("EXISTS {switch}")) == 1
}

/// A space naming endpoints turns the switch on for the default lease
/// when it is off, and leaves one that is on as it is.
async fn space_hooks_turn_the_switch_on(raw: &Raw<'_>, url: &str, prefix: &str) {
    let switch = format!("{prefix}:{{~outbox}}:open");
    let clock = ManualClock::new(T0);
    let s = store(url, &clock, prefix, 1).await;
    let hooks = [a_hook()];
    s.set_space_hooks(&space("hooked"), &hooks).await.unwrap();
    let ttl = raw.int(&format!("PTTL {switch}"));
    assert!(ttl > 24 * 3_600_000 - 60_000, "{ttl}");
    s.heartbeat(&space("hooked"), &[beat("ann")]).await.unwrap();
    assert_eq!(raw.int(&format!("EXISTS {prefix}:{{hooked}}:wh")), 1);
    // One on already (a server's own cap) stays.
    raw.cmd(&format!("SET {switch} 7 PX 5000000"));
    s.set_space_hooks(&space("other"), &hooks).await.unwrap();
    assert!(raw.cmd(&format!("GET {switch}")).contains('7'));
}

/// A store opened for spaces' endpoints alone (a server without
/// endpoints of its own) renews the switch, and captures, only while some
/// space names endpoints: spaces that named some are listed, and one
/// whose endpoints are gone is taken off when a look finds it so (at the
/// next tick after the version moved, up to 64 a tick). The list is a
/// superset: while it holds anything the store renews.
async fn spaces_with_endpoints_keep_the_switch_on(raw: &Raw<'_>, url: &str, prefix: &str) {
    let switch = format!("{prefix}:{{~outbox}}:open");
    let hooked = format!("{prefix}:{{~outbox}}:hooked");
    let hooks = [a_hook()];
    let clock = ManualClock::new(T0);
    let s = store(url, &clock, prefix, 1).await;
    s.outbox_open(OutboxOptions {
        for_spaces: true,
        ..OutboxOptions::default()
    })
    .await
    .unwrap();
    // No space names endpoints: the lease is not renewed, and once it
    // lapsed nothing is captured.
    assert!(!renews(raw, &s, &switch).await);
    s.heartbeat(&space("quiet"), &[beat("ann")]).await.unwrap();
    assert_eq!(raw.int(&format!("EXISTS {prefix}:{{quiet}}:wh")), 0);

    // A space names endpoints through another server: the version moves,
    // and at its next tick this store renews and captures.
    let other = store(url, &clock, prefix, 1).await;
    other.set_space_hooks(&space("x"), &hooks).await.unwrap();
    assert_eq!(raw.int(&format!("SISMEMBER {hooked} x")), 1);
    assert!(renews(raw, &s, &switch).await);
    s.heartbeat(&space("busy"), &[beat("ann")]).await.unwrap();
    assert_eq!(raw.int(&format!("EXISTS {prefix}:{{busy}}:wh")), 1);
    // Between looks it renews without reading the list.
    assert!(renews(raw, &s, &switch).await);

    // Cleared: listed until the next look, then off; the store renews no
    // more, and once the lease lapsed captures nothing.
    other.set_space_hooks(&space("x"), &[]).await.unwrap();
    assert_eq!(raw.int(&format!("SISMEMBER {hooked} x")), 1);
    s.tick().await.unwrap();
    assert_eq!(raw.int(&format!("SISMEMBER {hooked} x")), 0);
    assert!(!renews(raw, &s, &switch).await);
    s.heartbeat(&space("later"), &[beat("ann")]).await.unwrap();
    assert_eq!(raw.int(&format!("EXISTS {prefix}:{{later}}:wh")), 0);

    // Many spaces listed whose endpoints are gone: renewed while any is
    // left, taken off a sample per tick, then no more.
    let names: Vec<String> = (0..150).map(|i| format!("gone-{i}")).collect();
    raw.cmd(&format!("SADD {hooked} {}", names.join(" ")));
    other.set_space_hooks(&space("x"), &[]).await.unwrap(); // moves the version
    let mut ticks = 0;
    while raw.int(&format!("SCARD {hooked}")) > 0 {
        let renewed = renews(raw, &s, &switch).await;
        ticks += 1;
        assert!(ticks <= 5, "never emptied");
        if raw.int(&format!("SCARD {hooked}")) > 0 {
            assert!(renewed, "tick {ticks}");
        }
    }
    assert!(ticks >= 3, "a sample per tick: {ticks}");
    assert!(!renews(raw, &s, &switch).await);
}

/// Spaces that named endpoints before the list existed are listed by a
/// one-time migration when a store connects.
async fn old_hooked_spaces_are_listed(raw: &Raw<'_>, url: &str, prefix: &str) {
    raw.cmd(&format!("SET {prefix}:{{old-room}}:hooks []"));
    let clock = ManualClock::new(T0);
    let _s = store(url, &clock, prefix, 1).await;
    assert_eq!(
        raw.int(&format!("SISMEMBER {prefix}:{{~outbox}}:hooked old-room")),
        1
    );
    assert_eq!(raw.int(&format!("HEXISTS {prefix}:migrations hooked")), 1);
}

#[tokio::test]
async fn outbox_on_one_server() {
    let server = common::RedisServer::standalone();
    let raw = Raw::One(&server);
    let url = server.url();
    two_consumers_split_the_events(&url, "split", 1).await;
    two_consumers_split_the_events(&url, "split4", 4).await;
    a_dead_consumer_is_taken_over(&url, "dead", 1).await;
    a_dead_consumer_is_taken_over(&url, "dead4", 4).await;
    a_closed_outbox_writes_nothing(&raw, &url, "closed", 1).await;
    a_closed_outbox_writes_nothing(&raw, &url, "closed4", 4).await;
    the_cap_trims_and_counts(&raw, &url, "cap").await;
    an_unindexed_stream_is_found(&raw, &url, "scan").await;
    the_switch_is_a_lease(&raw, &url, "lease", 1).await;
    the_switch_is_a_lease(&raw, &url, "lease4", 4).await;
    space_hooks_turn_the_switch_on(&raw, &url, "hooks").await;
    spaces_with_endpoints_keep_the_switch_on(&raw, &url, "forspaces").await;
    old_hooked_spaces_are_listed(&raw, &url, "migrated").await;
}

#[tokio::test]
async fn outbox_on_a_cluster() {
    let cluster = common::RedisCluster::start();
    let raw = Raw::Cluster(&cluster);
    let url = cluster.url();
    two_consumers_split_the_events(&url, "split", 1).await;
    two_consumers_split_the_events(&url, "split4", 4).await;
    a_dead_consumer_is_taken_over(&url, "dead", 1).await;
    a_dead_consumer_is_taken_over(&url, "dead4", 4).await;
    a_closed_outbox_writes_nothing(&raw, &url, "closed4", 4).await;
    the_cap_trims_and_counts(&raw, &url, "cap").await;
    an_unindexed_stream_is_found(&raw, &url, "scan").await;
    the_switch_is_a_lease(&raw, &url, "lease", 1).await;
    the_switch_is_a_lease(&raw, &url, "lease4", 4).await;
    space_hooks_turn_the_switch_on(&raw, &url, "hooks").await;
    spaces_with_endpoints_keep_the_switch_on(&raw, &url, "forspaces").await;
    old_hooked_spaces_are_listed(&raw, &url, "migrated").await;
}

/// A big space's `occupied` and `vacated` are decided across its shards:
/// one each, however many shards its members fill.
#[tokio::test]
async fn a_sharded_space_is_occupied_once() {
    let server = common::RedisServer::standalone();
    let clock = ManualClock::new(T0);
    let s = open(&server.url(), &clock, "occ", 4).await;
    let sp = space("big");
    let ids: Vec<String> = (0..16).map(|i| format!("m{i}")).collect();
    let shards: HashSet<u16> = ids
        .iter()
        .map(|id| shard_of(herenow_core::MemberKind::User, id, 4))
        .collect();
    assert!(shards.len() > 1, "members in several shards");
    let beats: Vec<Heartbeat> = ids.iter().map(|id| beat(id)).collect();
    s.heartbeat(&sp, &beats).await.unwrap();
    let keys: Vec<MemberKey> = ids.iter().map(|id| user(id)).collect();
    s.leave(&sp, &keys[..8]).await.unwrap();
    s.leave(&sp, &keys[8..]).await.unwrap();
    let got = drain(&s, "one").await;
    let mut count: HashMap<OutboxKind, usize> = HashMap::new();
    for e in &got {
        *count.entry(e.kind).or_default() += 1;
    }
    assert_eq!(count.get(&OutboxKind::Occupied), Some(&1), "{count:?}");
    assert_eq!(count.get(&OutboxKind::Vacated), Some(&1), "{count:?}");
    assert_eq!(count.get(&OutboxKind::Join), Some(&16));
    assert_eq!(count.get(&OutboxKind::Leave), Some(&16));
    let vacated = got.iter().find(|e| e.kind == OutboxKind::Vacated).unwrap();
    assert_eq!(vacated.space, sp);
}

/// The seeds' layouts capture nothing: they offer no webhook outbox (nor
/// spaces' endpoints), and webhooks are `Unsupported` there, naming the
/// layout.
#[tokio::test]
async fn seed_layouts_have_no_outbox() {
    let server = common::RedisServer::standalone();
    let clock = ManualClock::new(T0);
    let s = SeedLayoutStore::connect(
        &server.url(),
        SeedLayout::SortedSet,
        "whos_online:users",
        None,
        Arc::new(clock),
        SpaceConfig::default(),
        LayoutOptions::default(),
    )
    .await
    .unwrap();
    assert!(s.webhook_outbox().is_none());
    assert!(s.space_webhooks().is_none());
    let store: &dyn PresenceStore = &s;
    let err = store.lacks(Capability::WebhookOutbox);
    let Error::Unsupported { what, store } = err else {
        panic!("{err:?}");
    };
    assert_eq!(what, Capability::WebhookOutbox.phrase());
    assert!(store.contains("sorted-set"), "{store}");
}
