//! Issue 3, "Big spaces": a space split over N shard keys spread over the
//! cluster's slots; reads merge the shards and pages stay exact. (The
//! whole contract suite also runs with four shards: tests/contract.rs.)

use herenow_testkit as common;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use herenow_core::{
    Attach, ConnId, Error, Heartbeat, InvalidInput, KindFilter, ListQuery, LiveConnections,
    ManualClock, MemberId, MemberKey, MemberKind, Order, PresenceStore, SpaceConfig, SpaceName,
};
use herenow_redis::key_names::shard_of;
use herenow_redis::{RedisOptions, RedisStore};

const T0: u64 = 1_700_000_000_000;

fn user(id: &str) -> MemberKey {
    MemberKey::user(MemberId::new(id).unwrap())
}

fn guest(id: &str) -> MemberKey {
    MemberKey::guest(MemberId::new(id).unwrap())
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

/// Runs `cmd` on whichever node of the cluster owns its key.
fn on_cluster(cluster: &common::RedisCluster, cmd: &str) -> String {
    for n in &cluster.nodes {
        let r = common::raw_command(n.port, cmd).unwrap();
        if !r.starts_with("-MOVED") {
            return r;
        }
    }
    panic!("no node owns {cmd}");
}

fn int_reply(r: &str) -> i64 {
    r.trim().trim_start_matches(':').parse().unwrap()
}

/// Every page of a listing, as `kind:id`.
async fn all_pages(s: &RedisStore, sp: &SpaceName, mut q: ListQuery) -> Vec<String> {
    let mut got = Vec::new();
    loop {
        let p = s.list(sp, &q).await.unwrap();
        got.extend(
            p.members
                .iter()
                .map(|m| format!("{}:{}", m.member.kind.as_str(), m.member.id)),
        );
        match p.next_cursor {
            Some(c) => q.cursor = Some(c),
            None => return got,
        }
    }
}

#[tokio::test]
async fn a_space_over_four_shards_on_a_cluster() {
    let cluster = common::RedisCluster::start();
    let clock = ManualClock::new(T0);
    let s = store(&cluster.url(), &clock, "sh", 4).await;
    let sp = SpaceName::new("big").unwrap();
    assert_eq!(s.shards_of(&sp), 4);

    // Each shard's keys share one slot; the shards have slots of their own.
    let shard_keys = s.shard_keys(&sp);
    assert_eq!(shard_keys.len(), 4);
    assert_eq!(
        shard_keys[0],
        s.space_keys(&sp),
        "shard 0 is the unsharded layout"
    );
    let mut slots = HashSet::new();
    for keys in &shard_keys {
        let slot: HashSet<String> = keys
            .iter()
            .map(|k| on_cluster(&cluster, &format!("CLUSTER KEYSLOT {k}")))
            .collect();
        assert_eq!(
            slot.len(),
            1,
            "keys of one shard in several slots: {keys:?}"
        );
        slots.extend(slot);
    }
    assert_eq!(slots.len(), 4, "shards share slots: {slots:?}");

    // 2,000 users and 500 guests, many in the same millisecond, in
    // batches bigger than one script call.
    let mut beats = Vec::new();
    let mut want = Vec::new();
    for i in 0..2_500u64 {
        let id = format!("m{i:04}");
        let member = if i % 5 == 0 { guest(&id) } else { user(&id) };
        let at = T0 - (i % 50) * 1_000;
        want.push((at, member.kind, id));
        beats.push(Heartbeat {
            member,
            at_ms: Some(at),
            meta: None,
        });
    }
    for chunk in beats.chunks(1_250) {
        let r = s.heartbeat(&sp, chunk).await.unwrap();
        assert_eq!((r.accepted, r.joined), (1_250, 1_250));
    }

    // Every member lives in its shard, and every shard has some.
    let mut per_shard = [0i64; 4];
    for (k, keys) in shard_keys.iter().enumerate() {
        per_shard[k] = int_reply(&on_cluster(&cluster, &format!("ZCARD {}", keys[0])))
            + int_reply(&on_cluster(&cluster, &format!("ZCARD {}", keys[1])));
    }
    assert_eq!(per_shard.iter().sum::<i64>(), 2_500);
    assert!(per_shard.iter().all(|&n| n > 400), "{per_shard:?}");
    for (_, kind, id) in want.iter().take(50) {
        let k = shard_of(*kind, id, 4) as usize;
        let zset = if *kind == MemberKind::User { 0 } else { 1 };
        let r = on_cluster(&cluster, &format!("ZSCORE {} {id}", shard_keys[k][zset]));
        assert!(!r.starts_with("$-1"), "{id} not in shard {k}: {r}");
    }

    // Counts sum; status finds each member in its shard, in order.
    let c = s.count(&sp, Some(600_000)).await.unwrap();
    assert_eq!((c.users, c.guests), (2_000, 500));
    let asked: Vec<MemberKey> = (0..200u64)
        .map(|i| {
            let id = format!("m{:04}", (i * 37) % 2_500);
            if ((i * 37) % 2_500) % 5 == 0 {
                guest(&id)
            } else {
                user(&id)
            }
        })
        .chain([user("nobody")])
        .collect();
    let st = s.status(&sp, &asked).await.unwrap();
    for (m, got) in asked.iter().zip(&st) {
        assert_eq!(&got.member, m);
        let want_at = want
            .iter()
            .find(|(_, k, id)| *k == m.kind && id == m.id.as_str())
            .map(|w| w.0);
        assert_eq!(got.last_seen_ms, want_at, "{m:?}");
    }

    // Most recent first: pages merge the shards exactly, (score, kind, id)
    // descending with users above guests.
    let mut recent = want.clone();
    recent.sort_by(|a, b| {
        b.0.cmp(&a.0)
            .then_with(|| a.1.cmp(&b.1))
            .then_with(|| b.2.cmp(&a.2))
    });
    let recent: Vec<String> = recent
        .iter()
        .map(|(_, k, id)| format!("{}:{id}", k.as_str()))
        .collect();
    for limit in [1_000, 333, 7] {
        let q = ListQuery {
            limit,
            kinds: KindFilter::All,
            window_ms: Some(600_000),
            ..ListQuery::default()
        };
        assert_eq!(all_pages(&s, &sp, q).await, recent, "limit {limit}");
    }
    // By id, too.
    let mut by_id = want.clone();
    by_id.sort_by(|a, b| (a.2.as_bytes(), a.1).cmp(&(b.2.as_bytes(), b.1)));
    let by_id: Vec<String> = by_id
        .iter()
        .map(|(_, k, id)| format!("{}:{id}", k.as_str()))
        .collect();
    let q = ListQuery {
        limit: 400,
        order: Some(Order::Id),
        kinds: KindFilter::All,
        window_ms: Some(600_000),
        cursor: None,
    };
    assert_eq!(all_pages(&s, &sp, q).await, by_id);

    // The space is listed once, with every shard's members.
    let listed = s.spaces(None, 100).await.unwrap();
    let me: Vec<_> = listed.iter().filter(|x| x.space == sp).collect();
    assert_eq!(me.len(), 1);
    assert_eq!(me[0].members.total(), 2_500);

    // A subscriber's snapshot merges the shards.
    let sub = s.subscribe(&sp).await.unwrap();
    assert_eq!(sub.snapshot.len(), 2_500);
    assert_eq!(sub.snapshot_omitted, 0);
}

/// A space keeps the shard count it was created with: a store configured
/// with another one refuses to write to it rather than split its members
/// differently. Per-space counts override the default.
#[tokio::test]
async fn a_space_keeps_its_shard_count() {
    let server = common::RedisServer::standalone();
    let clock = ManualClock::new(T0);
    let one = store(&server.url(), &clock, "keep", 1).await;
    let four = store(&server.url(), &clock, "keep", 4).await;
    let a = SpaceName::new("a").unwrap();
    let b = SpaceName::new("b").unwrap();
    one.heartbeat(&a, &[Heartbeat::now(user("x"))])
        .await
        .unwrap();
    let e = four
        .heartbeat(&a, &[Heartbeat::now(user("y"))])
        .await
        .unwrap_err();
    assert!(matches!(e, Error::Internal(_)), "{e:?}");
    four.heartbeat(&b, &[Heartbeat::now(user("y"))])
        .await
        .unwrap();
    assert!(
        one.heartbeat(&b, &[Heartbeat::now(user("z"))])
            .await
            .is_err()
    );
    assert_eq!(one.count(&a, None).await.unwrap().users, 1);
    assert_eq!(four.count(&b, None).await.unwrap().users, 1);

    // Per space: `b` in four shards, everything else in one.
    let opts = RedisOptions {
        prefix: "keep".into(),
        space_shards: HashMap::from([(b.clone(), 4)]),
        ..RedisOptions::default()
    };
    let mixed = RedisStore::connect(
        &server.url(),
        Arc::new(clock.clone()),
        SpaceConfig::default(),
        opts,
    )
    .await
    .unwrap();
    assert_eq!((mixed.shards_of(&a), mixed.shards_of(&b)), (1, 4));
    mixed
        .heartbeat(&a, &[Heartbeat::now(user("w"))])
        .await
        .unwrap();
    mixed
        .heartbeat(&b, &[Heartbeat::now(user("w"))])
        .await
        .unwrap();
    assert_eq!(mixed.count(&b, None).await.unwrap().users, 2);

    // Out of range.
    for bad in [0u16, 5_000] {
        let r = RedisStore::connect(
            &server.url(),
            Arc::new(clock.clone()),
            SpaceConfig::default(),
            RedisOptions {
                shards: bad,
                ..RedisOptions::default()
            },
        )
        .await;
        assert!(matches!(r, Err(Error::Invalid(_))), "{bad}");
    }
}

/// Connection ids stay unique per space when the members holding them
/// live in different shards.
#[tokio::test]
async fn connection_ids_are_unique_across_shards() {
    let server = common::RedisServer::standalone();
    let clock = ManualClock::new(T0);
    let s = store(&server.url(), &clock, "claims", 4).await;
    let sp = SpaceName::new("room").unwrap();
    // Two users in different shards.
    let (a, b) = ("ada", "early");
    assert_ne!(
        shard_of(MemberKind::User, a, 4),
        shard_of(MemberKind::User, b, 4)
    );
    let attach = |id: &str, conn: &str| Attach {
        member: user(id),
        conn: ConnId::new(conn).unwrap(),
        meta: None,
        invisible: false,
        ttl_ms: 30_000,
    };
    let r = s.attach(&sp, &attach(a, "tab-1")).await.unwrap();
    assert!(r.opened && r.joined);
    let e = s.attach(&sp, &attach(b, "tab-1")).await.unwrap_err();
    assert!(
        matches!(e, Error::Invalid(InvalidInput::ConnIdTaken)),
        "{e:?}"
    );
    // Pings renew; the owner's detach frees the id for someone else.
    s.attach(&sp, &attach(a, "tab-1")).await.unwrap();
    let conns = s.connections(&sp, &[user(a), user(b)]).await.unwrap();
    assert_eq!((conns[0].len(), conns[1].len()), (1, 0));
    assert!(
        s.detach(&sp, &user(b), &ConnId::new("tab-1").unwrap())
            .await
            .is_ok_and(|r| !r.found),
        "another member cannot close it"
    );
    let r = s
        .detach(&sp, &user(a), &ConnId::new("tab-1").unwrap())
        .await
        .unwrap();
    assert!(r.found && r.left);
    let r = s.attach(&sp, &attach(b, "tab-1")).await.unwrap();
    assert!(r.opened && r.joined);
}
