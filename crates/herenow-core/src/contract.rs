//! The contract every [`PresenceStore`] must keep: one suite of presence
//! scenarios, run against every store (memory, Redis, Redis Cluster).
//!
//! A store crate enables the `contract` feature in its dev-dependencies and
//! calls [`run_all`] with a factory that builds a fresh, empty store reading
//! time from the given [`ManualClock`]. Each scenario uses its own space
//! names, so a factory may return stores that share a backend.
//!
//! Scenarios panic with a description on failure, like any test. They never
//! sleep to wait for state: time moves by the manual clock, and events are
//! awaited with a deadline (stores that deliver events asynchronously, such
//! as Redis pub/sub, need one).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use crate::conn::{Attach, ConnId};
use crate::error::{Error, InvalidInput};
use crate::event::{Event, EventKind, LeaveReason, Subscription};
use crate::id::{MemberId, MemberKey, SpaceName};
use crate::meta::Metadata;
use crate::policy::{SpaceConfig, Status};
use crate::store::{Heartbeat, KindFilter, ListQuery, Order, PresenceStore};
use crate::time::Clock;
use crate::time::ManualClock;

/// The time every scenario starts at.
pub const T0: u64 = 1_700_000_000_000;

/// Builds a fresh store on a clock. Called once per scenario.
pub type Factory = Arc<
    dyn Fn(ManualClock) -> Pin<Box<dyn Future<Output = Arc<dyn PresenceStore>> + Send>>
        + Send
        + Sync,
>;

/// One scenario: its name and body.
pub type Scenario = (
    &'static str,
    fn(Arc<dyn PresenceStore>, ManualClock) -> Pin<Box<dyn Future<Output = ()> + Send>>,
);

macro_rules! scenarios {
    ($($name:ident),* $(,)?) => {
        /// Every scenario of the contract, by name.
        pub fn scenarios() -> Vec<Scenario> {
            vec![$((stringify!($name), |s, c| Box::pin($name(s, c)))),*]
        }
    };
}

scenarios!(
    heartbeat_and_status,
    newest_time_wins,
    bad_batches_change_nothing,
    leave_is_immediate,
    users_and_guests_apart,
    recent_order_pages_completely,
    pages_stable_under_writes,
    id_order_pages,
    window_and_counts,
    metadata_kept_and_replaced,
    friends_and_online_friends,
    online_among_ad_hoc,
    expiry_after_retention,
    events_follow_status,
    config_per_space,
    spaces_listed,
    big_batches,
    connections_join_first_leave_last,
    connections_expire_without_pings,
    invisible_connections,
    connection_bad_input,
    leave_keeps_last_seen,
    expiry_keeps_last_seen,
    remembered_until_the_horizon,
    seen_anywhere_over_spaces,
    erase_forgets_everywhere,
);

/// Runs every scenario, each on a fresh store from `factory`.
pub async fn run_all(factory: Factory) {
    for (name, scenario) in scenarios() {
        let clock = ManualClock::new(T0);
        let store = factory(clock.clone()).await;
        eprintln!("contract: {name}");
        scenario(store, clock).await;
    }
}

fn space(name: &str) -> SpaceName {
    SpaceName::new(name).expect("valid space name")
}

fn user(id: &str) -> MemberKey {
    MemberKey::user(MemberId::new(id).expect("valid id"))
}

fn guest(id: &str) -> MemberKey {
    MemberKey::guest(MemberId::new(id).expect("valid id"))
}

fn beat(m: MemberKey) -> Heartbeat {
    Heartbeat::now(m)
}

fn beat_at(m: MemberKey, at: u64) -> Heartbeat {
    Heartbeat {
        member: m,
        at_ms: Some(at),
        meta: None,
    }
}

fn ids(members: &[crate::store::MemberStatus]) -> Vec<String> {
    members.iter().map(|m| m.member.id.to_string()).collect()
}

/// Runs background work until it reports nothing left to do.
async fn settle(store: &Arc<dyn PresenceStore>) {
    for _ in 0..100 {
        let r = store.tick().await.expect("tick");
        if r.expired == 0 && r.transitions == 0 && r.connections_expired == 0 {
            return;
        }
    }
}

/// The next event, waiting at most two seconds.
async fn next_event(sub: &mut Subscription) -> Arc<Event> {
    tokio::time::timeout(Duration::from_secs(2), sub.events.recv())
        .await
        .expect("an event within 2 s")
        .expect("an event, not an error")
}

/// Asserts no event arrives within a short grace period.
async fn no_event(sub: &mut Subscription) {
    if let Ok(Ok(e)) = tokio::time::timeout(Duration::from_millis(150), sub.events.recv()).await {
        panic!("unexpected event {e:?}");
    }
}

fn is_invalid(r: &Error) -> bool {
    matches!(r, Error::Invalid(_))
}

async fn heartbeat_and_status(s: Arc<dyn PresenceStore>, clock: ManualClock) {
    let sp = space("c-status");
    let r = s.heartbeat(&sp, &[beat(user("ada"))]).await.unwrap();
    assert_eq!((r.accepted, r.joined), (1, 1));
    let st = s.status(&sp, &[user("ada"), user("nobody")]).await.unwrap();
    assert_eq!(st[0].status, Status::Online);
    assert_eq!(st[0].last_seen_ms, Some(T0));
    assert_eq!(st[1].status, Status::Offline);
    assert_eq!(st[1].last_seen_ms, None);
    assert_eq!(ids(&st), ["ada", "nobody"], "answers keep the order asked");
    clock.advance(Duration::from_secs(60));
    assert_eq!(
        s.status(&sp, &[user("ada")]).await.unwrap()[0].status,
        Status::Away
    );
    clock.advance(Duration::from_secs(240));
    assert_eq!(
        s.status(&sp, &[user("ada")]).await.unwrap()[0].status,
        Status::Offline
    );
    // Unknown space: everyone offline, nothing created.
    let st = s.status(&space("c-nowhere"), &[user("ada")]).await.unwrap();
    assert_eq!(st[0].status, Status::Offline);
}

async fn newest_time_wins(s: Arc<dyn PresenceStore>, _clock: ManualClock) {
    let sp = space("c-newest");
    s.heartbeat(&sp, &[beat_at(user("a"), T0 - 10_000)])
        .await
        .unwrap();
    let r = s
        .heartbeat(&sp, &[beat_at(user("a"), T0 - 20_000)])
        .await
        .unwrap();
    assert_eq!(r.stale, 1);
    assert_eq!(
        s.status(&sp, &[user("a")]).await.unwrap()[0].last_seen_ms,
        Some(T0 - 10_000)
    );
    s.heartbeat(&sp, &[beat(user("a"))]).await.unwrap();
    assert_eq!(
        s.status(&sp, &[user("a")]).await.unwrap()[0].last_seen_ms,
        Some(T0)
    );
    // Older than the retention: not presence (only remembered, see
    // `expiry_keeps_last_seen`).
    let r = s
        .heartbeat(&sp, &[beat_at(user("b"), T0 - 16 * 60_000)])
        .await
        .unwrap();
    assert_eq!(r.stale, 1);
    let st = s.status(&sp, &[user("b")]).await.unwrap();
    assert_eq!(st[0].status, Status::Offline);
    assert_eq!(s.count(&sp, Some(15 * 60_000)).await.unwrap().users, 1);
}

async fn bad_batches_change_nothing(s: Arc<dyn PresenceStore>, _clock: ManualClock) {
    let sp = space("c-bad");
    let batch = [beat(user("a")), beat_at(user("b"), T0 + 61_000)];
    let e = s.heartbeat(&sp, &batch).await.unwrap_err();
    assert!(
        matches!(e, Error::Invalid(InvalidInput::AtInFuture { .. })),
        "{e:?}"
    );
    assert!(is_invalid(&s.heartbeat(&sp, &[]).await.unwrap_err()));
    let big = vec![beat(user("a")); 10_001];
    let e = s.heartbeat(&sp, &big).await.unwrap_err();
    assert!(
        matches!(e, Error::Invalid(InvalidInput::BatchTooLarge { .. })),
        "{e:?}"
    );
    assert_eq!(
        s.count(&sp, None).await.unwrap().total(),
        0,
        "a refused batch writes nothing"
    );
    let e = s.status(&sp, &vec![user("a"); 10_001]).await.unwrap_err();
    assert!(is_invalid(&e));
    let e = s.leave(&sp, &vec![user("a"); 10_001]).await.unwrap_err();
    assert!(is_invalid(&e));
}

async fn leave_is_immediate(s: Arc<dyn PresenceStore>, _clock: ManualClock) {
    let sp = space("c-leave");
    s.heartbeat(&sp, &[beat(user("a")), beat(user("b"))])
        .await
        .unwrap();
    assert_eq!(s.leave(&sp, &[user("a"), user("zed")]).await.unwrap(), 1);
    let st = s.status(&sp, &[user("a"), user("b")]).await.unwrap();
    assert_eq!(st[0].status, Status::Offline);
    assert_eq!(st[1].status, Status::Online);
    assert_eq!(s.count(&sp, None).await.unwrap().users, 1);
    assert_eq!(
        s.leave(&space("c-leave-none"), &[user("a")]).await.unwrap(),
        0
    );
}

async fn users_and_guests_apart(s: Arc<dyn PresenceStore>, _clock: ManualClock) {
    let sp = space("c-kinds");
    s.heartbeat(
        &sp,
        &[beat(user("x")), beat(guest("x")), beat(guest("10.0.0.7"))],
    )
    .await
    .unwrap();
    let c = s.count(&sp, None).await.unwrap();
    assert_eq!((c.users, c.guests), (1, 2));
    let list = |kinds| {
        let s = s.clone();
        let sp = sp.clone();
        async move {
            s.list(
                &sp,
                &ListQuery {
                    kinds,
                    ..Default::default()
                },
            )
            .await
            .unwrap()
            .members
            .len()
        }
    };
    assert_eq!(list(KindFilter::Users).await, 1);
    assert_eq!(list(KindFilter::Guests).await, 2);
    assert_eq!(list(KindFilter::All).await, 3);
    s.leave(&sp, &[guest("x")]).await.unwrap();
    assert_eq!(
        s.status(&sp, &[user("x")]).await.unwrap()[0].status,
        Status::Online
    );
    assert_eq!(
        s.status(&sp, &[guest("x")]).await.unwrap()[0].status,
        Status::Offline
    );
}

async fn recent_order_pages_completely(s: Arc<dyn PresenceStore>, _clock: ManualClock) {
    let sp = space("c-pages");
    let beats: Vec<_> = (0..250u64)
        .map(|i| beat_at(user(&format!("m{i:03}")), T0 - 250 + i))
        .collect();
    s.heartbeat(&sp, &beats).await.unwrap();
    let mut q = ListQuery {
        limit: 7,
        ..Default::default()
    };
    let mut got = Vec::new();
    loop {
        let p = s.list(&sp, &q).await.unwrap();
        assert!(p.members.len() <= 7);
        got.extend(ids(&p.members));
        match p.next_cursor {
            Some(c) => q.cursor = Some(c),
            None => break,
        }
    }
    let want: Vec<String> = (0..250u64).rev().map(|i| format!("m{i:03}")).collect();
    assert_eq!(got, want, "most recent first, every member once");
    let e = s
        .list(
            &sp,
            &ListQuery {
                cursor: Some("garbage".into()),
                ..Default::default()
            },
        )
        .await;
    assert!(
        matches!(e, Err(Error::Invalid(InvalidInput::BadCursor))),
        "{e:?}"
    );
    for limit in [0, 1001] {
        let e = s
            .list(
                &sp,
                &ListQuery {
                    limit,
                    ..Default::default()
                },
            )
            .await;
        assert!(
            matches!(e, Err(Error::Invalid(InvalidInput::LimitOutOfRange { .. }))),
            "{e:?}"
        );
    }
}

async fn pages_stable_under_writes(s: Arc<dyn PresenceStore>, clock: ManualClock) {
    let sp = space("c-stable");
    let beats: Vec<_> = (0..100u64)
        .map(|i| beat_at(user(&format!("m{i:03}")), T0 - 1000 + i * 5))
        .collect();
    s.heartbeat(&sp, &beats).await.unwrap();
    let mut q = ListQuery {
        limit: 10,
        ..Default::default()
    };
    let mut got = Vec::new();
    let mut moved = Vec::new();
    let mut round = 0u64;
    loop {
        let p = s.list(&sp, &q).await.unwrap();
        got.extend(ids(&p.members));
        // Between pages, some members heartbeat (moving to the front) and
        // some leave; newcomers arrive.
        round += 1;
        clock.advance(Duration::from_millis(1));
        let mover = format!("m{:03}", (round * 37) % 100);
        moved.push(mover.clone());
        s.heartbeat(
            &sp,
            &[beat(user(&mover)), beat(user(&format!("new{round}")))],
        )
        .await
        .unwrap();
        match p.next_cursor {
            Some(c) => q.cursor = Some(c),
            None => break,
        }
    }
    let mut seen = std::collections::HashSet::new();
    for id in &got {
        assert!(
            seen.insert(id.clone()) || moved.contains(id),
            "{id} repeated without moving"
        );
    }
    for i in 0..100u64 {
        let id = format!("m{i:03}");
        assert!(
            seen.contains(&id) || moved.contains(&id),
            "{id} skipped without moving"
        );
    }
}

async fn id_order_pages(s: Arc<dyn PresenceStore>, _clock: ManualClock) {
    let sp = space("c-byid");
    let names = [
        "delta", "alpha", "charlie", "bravo", "echo", "foxtrot", "golf",
    ];
    let beats: Vec<_> = names.iter().map(|n| beat(user(n))).collect();
    s.heartbeat(&sp, &beats).await.unwrap();
    s.heartbeat(&sp, &[beat(guest("alpha"))]).await.unwrap();
    let mut q = ListQuery {
        limit: 3,
        order: Order::Id,
        kinds: KindFilter::All,
        ..Default::default()
    };
    let mut got = Vec::new();
    loop {
        let p = s.list(&sp, &q).await.unwrap();
        got.extend(
            p.members
                .iter()
                .map(|m| format!("{}:{}", m.member.kind.as_str(), m.member.id)),
        );
        match p.next_cursor {
            Some(c) => q.cursor = Some(c),
            None => break,
        }
    }
    assert_eq!(
        got,
        [
            "user:alpha",
            "guest:alpha",
            "user:bravo",
            "user:charlie",
            "user:delta",
            "user:echo",
            "user:foxtrot",
            "user:golf"
        ]
    );
}

async fn window_and_counts(s: Arc<dyn PresenceStore>, _clock: ManualClock) {
    let sp = space("c-window");
    let ages = [
        0u64, 30_000, 59_999, 60_000, 299_999, 300_000, 599_999, 600_000, 600_001, 899_000,
    ];
    let beats: Vec<_> = ages
        .iter()
        .enumerate()
        .map(|(i, age)| {
            let m = if i % 2 == 0 {
                user(&format!("u{i}"))
            } else {
                guest(&format!("g{i}"))
            };
            beat_at(m, T0 - age)
        })
        .collect();
    s.heartbeat(&sp, &beats).await.unwrap();
    for window in [1u64, 30_000, 60_000, 300_000, 600_000, 900_000] {
        let want_u = ages
            .iter()
            .enumerate()
            .filter(|(i, a)| i % 2 == 0 && **a <= window)
            .count() as u64;
        let want_g = ages
            .iter()
            .enumerate()
            .filter(|(i, a)| i % 2 == 1 && **a <= window)
            .count() as u64;
        let c = s.count(&sp, Some(window)).await.unwrap();
        assert_eq!((c.users, c.guests), (want_u, want_g), "window {window}");
        let p = s
            .list(
                &sp,
                &ListQuery {
                    window_ms: Some(window),
                    kinds: KindFilter::All,
                    limit: 1000,
                    ..Default::default()
                },
            )
            .await
            .unwrap();
        assert_eq!(
            p.members.len() as u64,
            want_u + want_g,
            "list in window {window}"
        );
    }
    // Default window: 10 minutes.
    assert_eq!(s.count(&sp, None).await.unwrap().total(), 8);
    let e = s.count(&sp, Some(900_001)).await.unwrap_err();
    assert!(
        matches!(e, Error::Invalid(InvalidInput::WindowOutOfRange { .. })),
        "{e:?}"
    );
    let e = s.count(&sp, Some(0)).await.unwrap_err();
    assert!(is_invalid(&e));
    // Status comes with every listed member.
    let p = s
        .list(
            &sp,
            &ListQuery {
                kinds: KindFilter::All,
                ..Default::default()
            },
        )
        .await
        .unwrap();
    let statuses: Vec<Status> = p.members.iter().map(|m| m.status).collect();
    assert_eq!(
        &statuses[..4],
        [Status::Online, Status::Online, Status::Online, Status::Away]
    );
}

async fn metadata_kept_and_replaced(s: Arc<dyn PresenceStore>, _clock: ManualClock) {
    let sp = space("c-meta");
    let meta = |j: &str| Some(Metadata::from_json(j).unwrap());
    s.heartbeat(
        &sp,
        &[Heartbeat {
            member: user("ada"),
            at_ms: None,
            meta: meta(r#"{"name":"Ada"}"#),
        }],
    )
    .await
    .unwrap();
    let st = &s.status(&sp, &[user("ada")]).await.unwrap()[0];
    assert_eq!(st.meta.as_ref().unwrap().as_json(), r#"{"name":"Ada"}"#);
    // A heartbeat without metadata keeps it.
    s.heartbeat(&sp, &[beat(user("ada"))]).await.unwrap();
    let p = s.list(&sp, &ListQuery::default()).await.unwrap();
    assert_eq!(
        p.members[0].meta.as_ref().unwrap().as_json(),
        r#"{"name":"Ada"}"#
    );
    s.heartbeat(
        &sp,
        &[Heartbeat {
            member: user("ada"),
            at_ms: None,
            meta: meta(r#"{"name":"Ada L."}"#),
        }],
    )
    .await
    .unwrap();
    let st = &s.status(&sp, &[user("ada")]).await.unwrap()[0];
    assert_eq!(st.meta.as_ref().unwrap().as_json(), r#"{"name":"Ada L."}"#);
    // Leaving forgets it.
    s.leave(&sp, &[user("ada")]).await.unwrap();
    s.heartbeat(&sp, &[beat(user("ada"))]).await.unwrap();
    assert_eq!(s.status(&sp, &[user("ada")]).await.unwrap()[0].meta, None);
}

async fn friends_and_online_friends(s: Arc<dyn PresenceStore>, clock: ManualClock) {
    let sp = space("c-friends");
    let id = |s: &str| MemberId::new(s).unwrap();
    let me = id("c-me");
    assert_eq!(
        s.set_friends(&me, &[id("b"), id("c"), id("d"), id("c-me")])
            .await
            .unwrap(),
        3,
        "self is not a friend"
    );
    assert_eq!(s.add_friends(&me, &[id("e"), id("b")]).await.unwrap(), 4);
    assert_eq!(
        s.remove_friends(&me, &[id("d"), id("zzz")]).await.unwrap(),
        3
    );
    let f: Vec<String> = s
        .friends(&me)
        .await
        .unwrap()
        .iter()
        .map(|m| m.to_string())
        .collect();
    assert_eq!(f, ["b", "c", "e"]);
    s.heartbeat(
        &sp,
        &[
            beat_at(user("b"), T0 - 700_000),
            beat_at(user("c"), T0 - 5_000),
            beat(user("x")),
        ],
    )
    .await
    .unwrap();
    s.heartbeat(&sp, &[beat(guest("e"))]).await.unwrap();
    clock.advance(Duration::from_secs(1));
    s.heartbeat(&sp, &[beat(user("e"))]).await.unwrap();
    let on = s.online_friends(&sp, &me, None, 100).await.unwrap();
    assert_eq!(
        ids(&on),
        ["e", "c"],
        "friends within the window, most recent first; guests are not friends"
    );
    let on = s
        .online_friends(&sp, &me, Some(900_000), 100)
        .await
        .unwrap();
    assert_eq!(ids(&on), ["e", "c", "b"]);
    let on = s.online_friends(&sp, &me, Some(900_000), 1).await.unwrap();
    assert_eq!(ids(&on), ["e"]);
    assert!(
        s.online_friends(&sp, &id("nobody"), None, 10)
            .await
            .unwrap()
            .is_empty()
    );
    let many: Vec<MemberId> = (0..5001).map(|i| id(&format!("f{i}"))).collect();
    let e = s.set_friends(&me, &many).await.unwrap_err();
    assert!(
        matches!(e, Error::Invalid(InvalidInput::TooManyFriends { .. })),
        "{e:?}"
    );
    assert_eq!(
        s.friends(&me).await.unwrap().len(),
        3,
        "a refused set leaves the old one"
    );
    s.set_friends(&me, &[]).await.unwrap();
    assert!(s.friends(&me).await.unwrap().is_empty());
}

async fn online_among_ad_hoc(s: Arc<dyn PresenceStore>, _clock: ManualClock) {
    let sp = space("c-among");
    s.heartbeat(
        &sp,
        &[
            beat_at(user("a"), T0 - 2),
            beat_at(user("b"), T0 - 1),
            beat(guest("g")),
        ],
    )
    .await
    .unwrap();
    let on = s
        .online_among(
            &sp,
            &[user("a"), user("nope"), guest("g"), user("b"), user("a")],
            None,
            100,
        )
        .await
        .unwrap();
    let got: Vec<String> = on.iter().map(|m| format!("{:?}", m.member)).collect();
    assert_eq!(got, ["guest:g", "user:b", "user:a"]);
}

async fn expiry_after_retention(s: Arc<dyn PresenceStore>, clock: ManualClock) {
    let sp = space("c-expiry");
    let mut sub = s.subscribe(&sp).await.unwrap();
    s.heartbeat(&sp, &[beat(user("a"))]).await.unwrap();
    clock.advance(Duration::from_secs(60));
    s.heartbeat(&sp, &[beat(user("b"))]).await.unwrap();
    clock.advance(Duration::from_secs(15 * 60 - 60));
    settle(&s).await;
    // a is past its retention: no longer present (only remembered, see
    // `expiry_keeps_last_seen`). b is still present.
    assert_eq!(s.count(&sp, Some(15 * 60_000)).await.unwrap().users, 1);
    assert_eq!(
        s.status(&sp, &[user("b")]).await.unwrap()[0].last_seen_ms,
        Some(T0 + 60_000)
    );
    clock.advance(Duration::from_secs(60));
    settle(&s).await;
    assert_eq!(s.count(&sp, Some(15 * 60_000)).await.unwrap().users, 0);
    assert!(
        s.spaces(None, 1000)
            .await
            .unwrap()
            .iter()
            .all(|x| x.space != sp || x.members.total() == 0)
    );
    // Each member joined, went away, and left by timeout: once each.
    let mut left = Vec::new();
    for _ in 0..6 {
        let e = next_event(&mut sub).await;
        if e.kind == EventKind::Leave {
            assert_eq!(e.reason, Some(LeaveReason::Timeout));
            left.push(e.member.id.to_string());
        }
    }
    left.sort();
    assert_eq!(left, ["a", "b"]);
    no_event(&mut sub).await;
}

async fn events_follow_status(s: Arc<dyn PresenceStore>, clock: ManualClock) {
    let sp = space("c-events");
    s.heartbeat(&sp, &[beat(user("early"))]).await.unwrap();
    let mut sub = s.subscribe(&sp).await.unwrap();
    assert_eq!(ids(&sub.snapshot), ["early"]);
    assert_eq!(sub.snapshot[0].status, Status::Online);
    let meta = Some(Metadata::from_json(r#"{"name":"Ada"}"#).unwrap());
    s.heartbeat(
        &sp,
        &[Heartbeat {
            member: user("ada"),
            at_ms: None,
            meta: meta.clone(),
        }],
    )
    .await
    .unwrap();
    let e = next_event(&mut sub).await;
    assert_eq!(
        (e.kind, e.member.id.as_str(), e.status),
        (EventKind::Join, "ada", Status::Online)
    );
    assert_eq!(e.meta, meta);
    s.heartbeat(&sp, &[beat(user("ada"))]).await.unwrap();
    let meta2 = Some(Metadata::from_json(r#"{"name":"Ada L."}"#).unwrap());
    s.heartbeat(
        &sp,
        &[Heartbeat {
            member: user("ada"),
            at_ms: None,
            meta: meta2.clone(),
        }],
    )
    .await
    .unwrap();
    let e = next_event(&mut sub).await;
    assert_eq!(
        e.kind,
        EventKind::Update,
        "a repeated heartbeat says nothing; new metadata is an update"
    );
    assert_eq!(e.meta, meta2);
    clock.advance(Duration::from_secs(61));
    settle(&s).await;
    let mut away: Vec<String> = Vec::new();
    for _ in 0..2 {
        let e = next_event(&mut sub).await;
        assert_eq!(e.kind, EventKind::Away);
        away.push(e.member.id.to_string());
    }
    away.sort();
    assert_eq!(away, ["ada", "early"]);
    s.heartbeat(&sp, &[beat(user("ada"))]).await.unwrap();
    assert_eq!(next_event(&mut sub).await.kind, EventKind::Back);
    s.leave(&sp, &[user("ada")]).await.unwrap();
    let e = next_event(&mut sub).await;
    assert_eq!(
        (e.kind, e.reason),
        (EventKind::Leave, Some(LeaveReason::Explicit))
    );
    clock.advance(Duration::from_secs(300));
    settle(&s).await;
    let e = next_event(&mut sub).await;
    assert_eq!(
        (e.kind, e.member.id.as_str(), e.reason),
        (EventKind::Leave, "early", Some(LeaveReason::Timeout))
    );
    no_event(&mut sub).await;
    // A second subscriber's snapshot agrees with what the first was told.
    let sub2 = s.subscribe(&sp).await.unwrap();
    assert!(sub2.snapshot.is_empty());
}

async fn config_per_space(s: Arc<dyn PresenceStore>, clock: ManualClock) {
    let sp = space("c-config");
    assert_eq!(s.config(&sp).await.unwrap(), SpaceConfig::default());
    let fast = SpaceConfig {
        online_ms: 5_000,
        away_ms: 20_000,
        window_ms: 30_000,
        retention_ms: 60_000,
        remember_ms: 3_600_000,
        remember_guests: true,
    };
    s.set_config(&sp, fast).await.unwrap();
    assert_eq!(s.config(&sp).await.unwrap(), fast);
    assert_eq!(
        s.config(&space("c-config-other")).await.unwrap(),
        SpaceConfig::default()
    );
    s.heartbeat(&sp, &[beat(user("a"))]).await.unwrap();
    clock.advance(Duration::from_secs(5));
    assert_eq!(
        s.status(&sp, &[user("a")]).await.unwrap()[0].status,
        Status::Away
    );
    let bad = SpaceConfig {
        online_ms: 10,
        away_ms: 5,
        ..fast
    };
    assert!(is_invalid(&s.set_config(&sp, bad).await.unwrap_err()));
    assert_eq!(
        s.config(&sp).await.unwrap(),
        fast,
        "a refused config changes nothing"
    );
    let e = s.count(&sp, Some(61_000)).await.unwrap_err();
    assert!(
        matches!(e, Error::Invalid(InvalidInput::WindowOutOfRange { .. })),
        "window beyond this space's retention"
    );
}

async fn spaces_listed(s: Arc<dyn PresenceStore>, _clock: ManualClock) {
    for name in ["c-sp-b", "c-sp-a", "c-sp-c"] {
        s.heartbeat(&space(name), &[beat(user("x")), beat(guest("y"))])
            .await
            .unwrap();
    }
    let all = s.spaces(None, 1000).await.unwrap();
    let ours: Vec<&str> = all
        .iter()
        .map(|x| x.space.as_str())
        .filter(|n| n.starts_with("c-sp-"))
        .collect();
    assert_eq!(ours, ["c-sp-a", "c-sp-b", "c-sp-c"]);
    let a = all.iter().find(|x| x.space.as_str() == "c-sp-a").unwrap();
    assert_eq!((a.members.users, a.members.guests), (1, 1));
    let after = s.spaces(Some(&space("c-sp-a")), 1).await.unwrap();
    assert_eq!(after.len(), 1);
    assert!(after[0].space.as_str() > "c-sp-a");
}

async fn big_batches(s: Arc<dyn PresenceStore>, _clock: ManualClock) {
    let sp = space("c-big");
    let beats: Vec<_> = (0..10_000u64)
        .map(|i| beat_at(user(&format!("u{i}")), T0 - (i % 600_000)))
        .collect();
    let r = s.heartbeat(&sp, &beats).await.unwrap();
    assert_eq!(r.accepted, 10_000);
    assert_eq!(s.count(&sp, None).await.unwrap().users, 10_000);
    let keys: Vec<MemberKey> = (0..10_000u64).map(|i| user(&format!("u{i}"))).collect();
    let st = s.status(&sp, &keys).await.unwrap();
    assert!(st.iter().all(|m| m.last_seen_ms.is_some()));
    assert_eq!(s.count(&sp, Some(5_000)).await.unwrap().users, 5_001);
    assert_eq!(s.leave(&sp, &keys[..5000]).await.unwrap(), 5000);
    assert_eq!(s.count(&sp, None).await.unwrap().users, 5_000);
}

// ----- live connections ---------------------------------------------------

fn conn(id: &str) -> ConnId {
    ConnId::new(id).expect("valid connection id")
}

fn attach(member: MemberKey, c: &str, meta: Option<&str>, invisible: bool) -> Attach {
    Attach {
        member,
        conn: conn(c),
        meta: meta.map(|m| Metadata::from_json(m).expect("valid metadata")),
        invisible,
        ttl_ms: 30_000,
    }
}

fn conn_ids(conns: &[crate::conn::Connection]) -> Vec<String> {
    conns.iter().map(|c| c.conn.to_string()).collect()
}

async fn connections_join_first_leave_last(s: Arc<dyn PresenceStore>, _clock: ManualClock) {
    let sp = space("c-conns");
    let mut sub = s.subscribe(&sp).await.unwrap();
    let phone = attach(user("ann"), "c-phone", Some(r#"{"device":"phone"}"#), false);
    let r = s.attach(&sp, &phone).await.unwrap();
    assert!(r.opened && r.joined && !r.left, "{r:?}");
    let e = next_event(&mut sub).await;
    assert_eq!(
        (
            e.kind,
            e.member.id.as_str(),
            e.conn.as_ref().map(ConnId::as_str)
        ),
        (EventKind::Join, "ann", Some("c-phone"))
    );
    assert_eq!(e.meta, phone.meta);
    let st = s.status(&sp, &[user("ann")]).await.unwrap();
    assert_eq!(st[0].status, Status::Online);
    assert_eq!(st[0].last_seen_ms, Some(T0));

    // A second device: no join, a `connect` with its own metadata.
    let laptop = attach(
        user("ann"),
        "c-laptop",
        Some(r#"{"device":"laptop"}"#),
        false,
    );
    let r = s.attach(&sp, &laptop).await.unwrap();
    assert!(r.opened && !r.joined, "{r:?}");
    let e = next_event(&mut sub).await;
    assert_eq!(
        (e.kind, e.conn.as_ref().map(ConnId::as_str)),
        (EventKind::Connect, Some("c-laptop"))
    );
    assert_eq!(e.meta, laptop.meta);
    let conns = s
        .connections(&sp, &[user("ann"), user("nobody")])
        .await
        .unwrap();
    assert_eq!(conn_ids(&conns[0]), ["c-laptop", "c-phone"]);
    assert_eq!(conns[0][0].meta, laptop.meta);
    assert_eq!(conns[0][1].meta, phone.meta);
    assert!(
        conns[0]
            .iter()
            .all(|c| !c.invisible && c.expires_ms == T0 + 30_000)
    );
    assert!(conns[1].is_empty());

    // A ping with the same state says nothing; new metadata is an update
    // naming the connection.
    let r = s.attach(&sp, &phone).await.unwrap();
    assert!(!r.opened && !r.joined);
    no_event(&mut sub).await;
    let typing = attach(
        user("ann"),
        "c-phone",
        Some(r#"{"device":"phone","typing":true}"#),
        false,
    );
    s.attach(&sp, &typing).await.unwrap();
    let e = next_event(&mut sub).await;
    assert_eq!(
        (e.kind, e.conn.as_ref().map(ConnId::as_str)),
        (EventKind::Update, Some("c-phone"))
    );
    assert_eq!(e.meta, typing.meta);

    // Closing one device: a `disconnect`, still online; the last: `leave`.
    let r = s.detach(&sp, &user("ann"), &conn("c-phone")).await.unwrap();
    assert!(r.found && !r.left, "{r:?}");
    let e = next_event(&mut sub).await;
    assert_eq!(
        (e.kind, e.conn.as_ref().map(ConnId::as_str), e.status),
        (EventKind::Disconnect, Some("c-phone"), Status::Online)
    );
    let st = s.status(&sp, &[user("ann")]).await.unwrap();
    assert_eq!(st[0].status, Status::Online);
    let r = s
        .detach(&sp, &user("ann"), &conn("c-laptop"))
        .await
        .unwrap();
    assert!(r.found && r.left, "{r:?}");
    let e = next_event(&mut sub).await;
    assert_eq!(
        (e.kind, e.reason, e.conn.as_ref().map(ConnId::as_str)),
        (
            EventKind::Leave,
            Some(LeaveReason::Explicit),
            Some("c-laptop")
        )
    );
    let st = s.status(&sp, &[user("ann")]).await.unwrap();
    assert_eq!(st[0].status, Status::Offline);
    assert!(s.connections(&sp, &[user("ann")]).await.unwrap()[0].is_empty());
    // Closing again, or someone else's connection, finds nothing.
    let r = s
        .detach(&sp, &user("ann"), &conn("c-laptop"))
        .await
        .unwrap();
    assert!(!r.found && !r.left);
    s.attach(&sp, &attach(user("bo"), "c-bo", None, false))
        .await
        .unwrap();
    assert_eq!(next_event(&mut sub).await.kind, EventKind::Join);
    let r = s.detach(&sp, &user("ann"), &conn("c-bo")).await.unwrap();
    assert!(!r.found);
    no_event(&mut sub).await;
    assert_eq!(s.count(&sp, None).await.unwrap().users, 1);
}

async fn connections_expire_without_pings(s: Arc<dyn PresenceStore>, clock: ManualClock) {
    let sp = space("c-ghosts");
    let mut sub = s.subscribe(&sp).await.unwrap();
    s.attach(&sp, &attach(user("cy"), "g-tab1", None, false))
        .await
        .unwrap();
    s.attach(&sp, &attach(user("cy"), "g-tab2", None, false))
        .await
        .unwrap();
    s.attach(&sp, &attach(guest("visitor"), "g-guest", None, false))
        .await
        .unwrap();
    for _ in 0..3 {
        next_event(&mut sub).await;
    }
    clock.advance(Duration::from_secs(20));
    // tab2 and the guest keep pinging; tab1 vanished without a close.
    s.attach(&sp, &attach(user("cy"), "g-tab2", None, false))
        .await
        .unwrap();
    s.attach(&sp, &attach(guest("visitor"), "g-guest", None, false))
        .await
        .unwrap();
    no_event(&mut sub).await;
    clock.advance(Duration::from_secs(11));
    settle(&s).await;
    let e = next_event(&mut sub).await;
    assert_eq!(
        (
            e.kind,
            e.member.id.as_str(),
            e.conn.as_ref().map(ConnId::as_str)
        ),
        (EventKind::Disconnect, "cy", Some("g-tab1"))
    );
    assert_eq!(
        conn_ids(&s.connections(&sp, &[user("cy")]).await.unwrap()[0]),
        ["g-tab2"]
    );
    no_event(&mut sub).await;
    // Now everything goes silent: both leave by timeout, within the TTL.
    clock.advance(Duration::from_secs(20));
    settle(&s).await;
    let mut left: Vec<(String, Option<LeaveReason>)> = Vec::new();
    for _ in 0..2 {
        let e = next_event(&mut sub).await;
        assert_eq!(e.kind, EventKind::Leave);
        left.push((e.member.id.to_string(), e.reason));
    }
    left.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(
        left,
        [
            ("cy".to_owned(), Some(LeaveReason::Timeout)),
            ("visitor".to_owned(), Some(LeaveReason::Timeout)),
        ]
    );
    let counts = s.count(&sp, None).await.unwrap();
    assert_eq!(counts.total(), 0, "no ghosts after the TTL");
    let st = s.status(&sp, &[user("cy")]).await.unwrap();
    assert_eq!(st[0].status, Status::Offline);
    let conns = s
        .connections(&sp, &[user("cy"), guest("visitor")])
        .await
        .unwrap();
    assert!(conns.iter().all(Vec::is_empty));
}

async fn invisible_connections(s: Arc<dyn PresenceStore>, _clock: ManualClock) {
    let sp = space("c-invisible");
    let mut sub = s.subscribe(&sp).await.unwrap();
    // Invisible from the start: no event, not listed, not counted.
    let r = s
        .attach(
            &sp,
            &attach(user("dee"), "i-hidden", Some(r#"{"x":1}"#), true),
        )
        .await
        .unwrap();
    assert!(r.opened && !r.joined);
    no_event(&mut sub).await;
    let st = s.status(&sp, &[user("dee")]).await.unwrap();
    assert_eq!((st[0].status, st[0].last_seen_ms), (Status::Offline, None));
    assert_eq!(s.count(&sp, None).await.unwrap().total(), 0);
    assert!(
        s.list(&sp, &ListQuery::default())
            .await
            .unwrap()
            .members
            .is_empty()
    );
    let conns = s.connections(&sp, &[user("dee")]).await.unwrap();
    assert_eq!(conn_ids(&conns[0]), ["i-hidden"]);
    assert!(conns[0][0].invisible);
    // A visible device joins; turning it invisible is a leave, and back a
    // join again.
    let r = s
        .attach(&sp, &attach(user("dee"), "i-shown", None, false))
        .await
        .unwrap();
    assert!(r.joined);
    assert_eq!(next_event(&mut sub).await.kind, EventKind::Join);
    let r = s
        .attach(&sp, &attach(user("dee"), "i-shown", None, true))
        .await
        .unwrap();
    assert!(r.left && !r.opened, "{r:?}");
    let e = next_event(&mut sub).await;
    assert_eq!(
        (e.kind, e.reason, e.conn.as_ref().map(ConnId::as_str)),
        (
            EventKind::Leave,
            Some(LeaveReason::Explicit),
            Some("i-shown")
        )
    );
    assert_eq!(s.count(&sp, None).await.unwrap().total(), 0);
    let r = s
        .attach(&sp, &attach(user("dee"), "i-shown", None, false))
        .await
        .unwrap();
    assert!(r.joined);
    assert_eq!(next_event(&mut sub).await.kind, EventKind::Join);
    // Closing the invisible one says nothing.
    let r = s
        .detach(&sp, &user("dee"), &conn("i-hidden"))
        .await
        .unwrap();
    assert!(r.found && !r.left);
    no_event(&mut sub).await;
    assert_eq!(s.count(&sp, None).await.unwrap().users, 1);
}

async fn connection_bad_input(s: Arc<dyn PresenceStore>, _clock: ManualClock) {
    let sp = space("c-conn-bad");
    let mut short = attach(user("eve"), "b-1", None, false);
    short.ttl_ms = 0;
    let err = s.attach(&sp, &short).await.unwrap_err();
    assert!(
        matches!(
            err,
            Error::Invalid(InvalidInput::ConnTtlOutOfRange { ttl_ms: 0 })
        ),
        "{err:?}"
    );
    s.attach(&sp, &attach(user("eve"), "b-1", None, false))
        .await
        .unwrap();
    // Another member cannot take over a connection id.
    let err = s
        .attach(&sp, &attach(user("mallory"), "b-1", None, false))
        .await
        .unwrap_err();
    assert!(
        matches!(err, Error::Invalid(InvalidInput::ConnIdTaken)),
        "{err:?}"
    );
    let st = s.status(&sp, &[user("mallory")]).await.unwrap();
    assert_eq!(st[0].status, Status::Offline);
    // A member's connections are bounded.
    for i in 1..crate::limits::MAX_CONNS_PER_MEMBER {
        s.attach(
            &sp,
            &attach(user("eve"), &format!("b-more-{i}"), None, true),
        )
        .await
        .unwrap();
    }
    let err = s
        .attach(&sp, &attach(user("eve"), "b-one-too-many", None, false))
        .await
        .unwrap_err();
    assert!(
        matches!(err, Error::Invalid(InvalidInput::TooManyConnections)),
        "{err:?}"
    );
    let conns = s.connections(&sp, &[user("eve")]).await.unwrap();
    assert_eq!(conns[0].len(), crate::limits::MAX_CONNS_PER_MEMBER);
    // Bad batches of look-ups.
    assert!(is_invalid(&s.connections(&sp, &[]).await.unwrap_err()));
}

/// A space whose retention is seconds, not minutes, so expiry is quick.
fn short_retention() -> SpaceConfig {
    SpaceConfig {
        online_ms: 1_000,
        away_ms: 2_000,
        window_ms: 2_000,
        retention_ms: 4_000,
        ..SpaceConfig::default()
    }
}

async fn leave_keeps_last_seen(s: Arc<dyn PresenceStore>, clock: ManualClock) {
    let sp = space("c-rem-leave");
    s.heartbeat(&sp, &[beat(user("ann")), beat(guest("g1"))])
        .await
        .unwrap();
    clock.advance(Duration::from_secs(5));
    assert_eq!(s.leave(&sp, &[user("ann"), guest("g1")]).await.unwrap(), 2);
    let st = s
        .status(&sp, &[user("ann"), guest("g1"), user("never")])
        .await
        .unwrap();
    // The leave's own time, and offline although that time is fresh.
    assert_eq!(st[0].status, Status::Offline);
    assert_eq!(st[0].last_seen_ms, Some(T0 + 5_000));
    // Guests are not remembered by default; the never seen are not.
    assert_eq!((st[1].status, st[1].last_seen_ms), (Status::Offline, None));
    assert_eq!((st[2].status, st[2].last_seen_ms), (Status::Offline, None));
    // Remembered is not present: not listed, not counted.
    assert_eq!(s.count(&sp, None).await.unwrap().total(), 0);
    assert!(
        s.list(&sp, &ListQuery::default())
            .await
            .unwrap()
            .members
            .is_empty()
    );
    // Back again: present with the new time; a second leave remembers it.
    clock.advance(Duration::from_secs(10));
    s.heartbeat(&sp, &[beat(user("ann"))]).await.unwrap();
    let st = s.status(&sp, &[user("ann")]).await.unwrap();
    assert_eq!(
        (st[0].status, st[0].last_seen_ms),
        (Status::Online, Some(T0 + 15_000))
    );
    clock.advance(Duration::from_secs(1));
    s.leave(&sp, &[user("ann")]).await.unwrap();
    assert_eq!(
        s.status(&sp, &[user("ann")]).await.unwrap()[0].last_seen_ms,
        Some(T0 + 16_000)
    );
    // Leaving again while absent changes nothing.
    clock.advance(Duration::from_secs(1));
    assert_eq!(s.leave(&sp, &[user("ann")]).await.unwrap(), 0);
    assert_eq!(
        s.status(&sp, &[user("ann")]).await.unwrap()[0].last_seen_ms,
        Some(T0 + 16_000)
    );
}

async fn expiry_keeps_last_seen(s: Arc<dyn PresenceStore>, clock: ManualClock) {
    let sp = space("c-rem-expiry");
    s.set_config(&sp, short_retention()).await.unwrap();
    s.heartbeat(&sp, &[beat(user("ann"))]).await.unwrap();
    clock.advance(Duration::from_secs(6));
    settle(&s).await;
    let st = s.status(&sp, &[user("ann")]).await.unwrap();
    assert_eq!(
        (st[0].status, st[0].last_seen_ms),
        (Status::Offline, Some(T0))
    );
    assert_eq!(s.count(&sp, None).await.unwrap().total(), 0);
    // A backfilled heartbeat older than the retention is not presence,
    // but it is a sighting: remembered when newer than what is.
    let old = clock.now_ms() - 5_000;
    let r = s
        .heartbeat(&sp, &[beat_at(user("bob"), old)])
        .await
        .unwrap();
    assert_eq!((r.accepted, r.joined), (0, 0));
    let st = s.status(&sp, &[user("bob")]).await.unwrap();
    assert_eq!(
        (st[0].status, st[0].last_seen_ms),
        (Status::Offline, Some(old))
    );
    assert_eq!(s.count(&sp, None).await.unwrap().total(), 0);
    s.heartbeat(&sp, &[beat_at(user("ann"), T0 - 1)])
        .await
        .unwrap();
    assert_eq!(
        s.status(&sp, &[user("ann")]).await.unwrap()[0].last_seen_ms,
        Some(T0),
        "an older sighting does not move a remembered time back"
    );
}

async fn remembered_until_the_horizon(s: Arc<dyn PresenceStore>, clock: ManualClock) {
    let sp = space("c-rem-horizon");
    let config = SpaceConfig {
        remember_ms: 10_000,
        remember_guests: true,
        ..SpaceConfig::default()
    };
    s.set_config(&sp, config).await.unwrap();
    assert_eq!(s.config(&sp).await.unwrap(), config);
    s.heartbeat(&sp, &[beat(user("ann")), beat(guest("g1"))])
        .await
        .unwrap();
    s.leave(&sp, &[user("ann"), guest("g1")]).await.unwrap();
    clock.advance(Duration::from_millis(9_999));
    let st = s.status(&sp, &[user("ann"), guest("g1")]).await.unwrap();
    assert_eq!(st[0].last_seen_ms, Some(T0));
    assert_eq!(st[1].last_seen_ms, Some(T0), "this space remembers guests");
    // At the horizon: forgotten, whether or not a sweep ran yet.
    clock.advance(Duration::from_millis(1));
    let st = s.status(&sp, &[user("ann"), guest("g1")]).await.unwrap();
    assert_eq!((st[0].last_seen_ms, st[1].last_seen_ms), (None, None));
    settle(&s).await;
    let st = s.status(&sp, &[user("ann")]).await.unwrap();
    assert_eq!(st[0].last_seen_ms, None);
    assert_eq!(
        s.seen_anywhere(&[id("ann")]).await.unwrap()[0].last_seen_ms,
        None
    );

    // remember_ms 0 turns it off; a shorter horizon applies to what is
    // already remembered.
    let off = space("c-rem-off");
    s.set_config(
        &off,
        SpaceConfig {
            remember_ms: 0,
            ..SpaceConfig::default()
        },
    )
    .await
    .unwrap();
    s.heartbeat(&off, &[beat(user("ann"))]).await.unwrap();
    s.leave(&off, &[user("ann")]).await.unwrap();
    assert_eq!(
        s.status(&off, &[user("ann")]).await.unwrap()[0].last_seen_ms,
        None
    );
    let shrink = space("c-rem-shrink");
    s.heartbeat(&shrink, &[beat(user("bob"))]).await.unwrap();
    s.leave(&shrink, &[user("bob")]).await.unwrap();
    clock.advance(Duration::from_secs(60));
    assert!(
        s.status(&shrink, &[user("bob")]).await.unwrap()[0]
            .last_seen_ms
            .is_some()
    );
    s.set_config(
        &shrink,
        SpaceConfig {
            remember_ms: 30_000,
            ..SpaceConfig::default()
        },
    )
    .await
    .unwrap();
    assert_eq!(
        s.status(&shrink, &[user("bob")]).await.unwrap()[0].last_seen_ms,
        None
    );
    let too_long = SpaceConfig {
        remember_ms: crate::limits::MAX_REMEMBER_MS + 1,
        ..SpaceConfig::default()
    };
    assert!(is_invalid(
        &s.set_config(&shrink, too_long).await.unwrap_err()
    ));
}

fn id(s: &str) -> MemberId {
    MemberId::new(s).expect("valid id")
}

async fn seen_anywhere_over_spaces(s: Arc<dyn PresenceStore>, clock: ManualClock) {
    let (a, b) = (space("c-any-a"), space("c-any-b"));
    s.heartbeat(&a, &[beat(user("ann"))]).await.unwrap();
    clock.advance(Duration::from_secs(1));
    s.leave(&a, &[user("ann")]).await.unwrap();
    let got = s.seen_anywhere(&[id("ann"), id("nobody")]).await.unwrap();
    assert_eq!(got.len(), 2);
    assert_eq!(got[0].id, id("ann"));
    assert_eq!(got[0].status, Status::Offline);
    assert_eq!(got[0].last_seen_ms, Some(T0 + 1_000));
    assert_eq!(got[0].space.as_ref(), Some(&a));
    assert_eq!(got[1], crate::store::SeenAnywhere::unseen(id("nobody")));

    clock.advance(Duration::from_secs(2));
    s.heartbeat(&b, &[beat(user("ann"))]).await.unwrap();
    let got = s.seen_anywhere(&[id("ann")]).await.unwrap();
    assert_eq!(got[0].status, Status::Online);
    assert_eq!(got[0].last_seen_ms, Some(T0 + 3_000));
    assert_eq!(got[0].space.as_ref(), Some(&b));

    // Online somewhere beats a newer time elsewhere only in status: the
    // time and space are the newest sighting.
    clock.advance(Duration::from_secs(120));
    s.heartbeat(&a, &[beat(user("ann"))]).await.unwrap();
    s.leave(&a, &[user("ann")]).await.unwrap();
    let got = s.seen_anywhere(&[id("ann")]).await.unwrap();
    assert_eq!(got[0].status, Status::Away, "away in b, left a");
    assert_eq!(got[0].last_seen_ms, Some(T0 + 123_000));
    assert_eq!(got[0].space.as_ref(), Some(&a));
    // Guests are not users: a guest "ann" is not the user ann.
    s.heartbeat(&b, &[beat(guest("gus"))]).await.unwrap();
    assert_eq!(
        s.seen_anywhere(&[id("gus")]).await.unwrap()[0].last_seen_ms,
        None
    );

    assert!(is_invalid(&s.seen_anywhere(&[]).await.unwrap_err()));
    let too_many: Vec<MemberId> = (0..=crate::limits::MAX_BATCH)
        .map(|i| id(&format!("u{i}")))
        .collect();
    assert!(is_invalid(&s.seen_anywhere(&too_many).await.unwrap_err()));
    let many: Vec<MemberId> = (0..crate::limits::MAX_BATCH)
        .map(|i| id(&format!("u{i}")))
        .collect();
    assert_eq!(s.seen_anywhere(&many).await.unwrap().len(), many.len());
}

async fn erase_forgets_everywhere(s: Arc<dyn PresenceStore>, clock: ManualClock) {
    let (a, b) = (space("c-erase-a"), space("c-erase-b"));
    s.heartbeat(&a, &[beat(user("ann")), beat(user("bob"))])
        .await
        .unwrap();
    s.heartbeat(&b, &[beat(user("ann"))]).await.unwrap();
    s.leave(&b, &[user("ann")]).await.unwrap();
    s.set_friends(&id("ann"), &[id("bob")]).await.unwrap();
    s.set_friends(&id("bob"), &[id("ann"), id("cy")])
        .await
        .unwrap();
    let mut sub = s.subscribe(&a).await.unwrap();
    clock.advance(Duration::from_secs(1));

    let report = s.erase_user(&id("ann")).await.unwrap();
    assert_eq!(report.presence, 1);
    assert_eq!(report.remembered, 1);
    assert!(report.friend_set);
    assert_eq!(report.listed_by, 1);
    let e = next_event(&mut sub).await;
    assert_eq!(
        (e.kind, e.member.id.to_string(), e.reason),
        (EventKind::Leave, "ann".into(), Some(LeaveReason::Explicit))
    );
    for sp in [&a, &b] {
        let st = s.status(sp, &[user("ann")]).await.unwrap();
        assert_eq!((st[0].status, st[0].last_seen_ms), (Status::Offline, None));
    }
    assert_eq!(
        s.seen_anywhere(&[id("ann")]).await.unwrap()[0].last_seen_ms,
        None
    );
    assert!(s.friends(&id("ann")).await.unwrap().is_empty());
    assert_eq!(s.friends(&id("bob")).await.unwrap(), vec![id("cy")]);
    // bob is untouched.
    assert_eq!(
        s.status(&a, &[user("bob")]).await.unwrap()[0].status,
        Status::Online
    );
    // Erasing someone unknown (or twice) is not an error and does nothing.
    assert_eq!(
        s.erase_user(&id("ann")).await.unwrap(),
        crate::store::ErasureReport::default()
    );
    // The user may come back as new.
    s.heartbeat(&a, &[beat(user("ann"))]).await.unwrap();
    assert_eq!(
        s.status(&a, &[user("ann")]).await.unwrap()[0].status,
        Status::Online
    );
}
