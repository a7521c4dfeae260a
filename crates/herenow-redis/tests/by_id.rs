//! Issue 3, "Redis memory ≤ a plain sorted set": the default layout keeps
//! no second copy of the members for `order=id`; listing by id reads the
//! window in slices and sorts it, exactly, up to
//! `RedisOptions::id_order_max`.

use herenow_testkit as common;

use std::sync::Arc;

use herenow_core::{
    Error, Heartbeat, KindFilter, ListQuery, ManualClock, MemberId, MemberKey, Order,
    PresenceStore, SpaceConfig, SpaceName,
};
use herenow_redis::{RedisOptions, RedisStore};

const T0: u64 = 1_700_000_000_000;

fn user(id: &str) -> MemberKey {
    MemberKey::user(MemberId::new(id).unwrap())
}

fn guest(id: &str) -> MemberKey {
    MemberKey::guest(MemberId::new(id).unwrap())
}

async fn store(url: &str, clock: &ManualClock, opts: RedisOptions) -> RedisStore {
    RedisStore::connect(url, Arc::new(clock.clone()), SpaceConfig::default(), opts)
        .await
        .expect("connect")
}

/// Every page of a by-id listing, as `kind:id`.
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
async fn a_space_stores_each_member_once() {
    let server = common::RedisServer::standalone();
    let clock = ManualClock::new(T0);
    let opts = RedisOptions {
        prefix: "once".into(),
        ..RedisOptions::default()
    };
    let s = store(&server.url(), &clock, opts).await;
    let sp = SpaceName::new("room").unwrap();
    s.heartbeat(
        &sp,
        &[Heartbeat::now(user("a")), Heartbeat::now(guest("b"))],
    )
    .await
    .unwrap();
    let keys = common::raw_command(server.port, "KEYS once:{room}:*").unwrap();
    assert!(keys.contains("once:{room}:u"), "{keys}");
    assert!(
        !keys.contains(":iu") && !keys.contains(":ig"),
        "no index by id any more: {keys}"
    );
    for k in ["u", "g"] {
        let n = common::raw_command(server.port, &format!("ZCARD once:{{room}}:{k}")).unwrap();
        assert_eq!(n.trim(), ":1", "{k}");
    }
}

/// More members than one slice reads, users and guests sharing ids, some
/// outside the window: every page is exact, across slices and kinds.
#[tokio::test]
async fn id_pages_are_exact_across_slices() {
    let server = common::RedisServer::standalone();
    let clock = ManualClock::new(T0);
    let opts = RedisOptions {
        prefix: "slices".into(),
        ..RedisOptions::default()
    };
    let s = store(&server.url(), &clock, opts).await;
    let sp = SpaceName::new("big").unwrap();
    let mut want = Vec::new();
    let mut beats = Vec::new();
    for i in 0..5_000u64 {
        let id = format!("m{:05}", (i * 7_919) % 5_000);
        // Many members share a millisecond: slices resume inside a group.
        let at = T0 - (i % 300) * 1_000 - (i % 3);
        let old = i % 10 == 0;
        let member = if i % 4 == 0 { guest(&id) } else { user(&id) };
        if !old {
            want.push((id.clone(), member.kind));
        }
        beats.push(Heartbeat {
            member,
            at_ms: Some(if old { T0 - 700_000 } else { at }),
            meta: None,
        });
    }
    for chunk in beats.chunks(1_000) {
        s.heartbeat(&sp, chunk).await.unwrap();
    }
    want.sort_by(|a, b| (a.0.as_bytes(), a.1).cmp(&(b.0.as_bytes(), b.1)));
    let want: Vec<String> = want
        .into_iter()
        .map(|(id, kind)| format!("{}:{id}", kind.as_str()))
        .collect();
    for limit in [1_000, 333] {
        let q = ListQuery {
            limit,
            order: Some(Order::Id),
            kinds: KindFilter::All,
            window_ms: Some(600_000),
            cursor: None,
        };
        assert_eq!(all_pages(&s, &sp, q).await, want, "limit {limit}");
    }
    // One kind only.
    let q = ListQuery {
        limit: 1_000,
        order: Some(Order::Id),
        kinds: KindFilter::Guests,
        window_ms: Some(600_000),
        cursor: None,
    };
    let guests: Vec<String> = want
        .iter()
        .filter(|m| m.starts_with("guest:"))
        .cloned()
        .collect();
    assert_eq!(all_pages(&s, &sp, q).await, guests);
}

/// Past `id_order_max` members in the window, `order=id` is refused as
/// unsupported (naming the limit); a narrower window, or `order=recent`,
/// still answers.
#[tokio::test]
async fn id_order_over_the_bound_is_unsupported() {
    let server = common::RedisServer::standalone();
    let clock = ManualClock::new(T0);
    let opts = RedisOptions {
        prefix: "bound".into(),
        id_order_max: 10,
        ..RedisOptions::default()
    };
    let s = store(&server.url(), &clock, opts).await;
    let sp = SpaceName::new("crowd").unwrap();
    let beats: Vec<Heartbeat> = (0..12u64)
        .map(|i| Heartbeat {
            member: user(&format!("u{i:02}")),
            at_ms: Some(T0 - i * 10_000),
            meta: None,
        })
        .collect();
    s.heartbeat(&sp, &beats).await.unwrap();
    let by_id = |window_ms| ListQuery {
        order: Some(Order::Id),
        window_ms: Some(window_ms),
        ..ListQuery::default()
    };
    let e = s.list(&sp, &by_id(600_000)).await.unwrap_err();
    assert!(matches!(e, Error::Unsupported { .. }), "{e:?}");
    // Ten members seen within 95 s: at the bound, listed.
    let p = s.list(&sp, &by_id(95_000)).await.unwrap();
    assert_eq!(p.members.len(), 10);
    assert_eq!(p.members[0].member.id.as_str(), "u00");
    let p = s
        .list(
            &sp,
            &ListQuery {
                window_ms: Some(600_000),
                ..ListQuery::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(p.members.len(), 12);
}
