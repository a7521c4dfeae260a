//! Engine tests: targeted cases, and a property test against a naive model.

use std::collections::HashMap;

use proptest::prelude::*;

use herenow_core::InvalidInput;
use herenow_core::event::{EventKind, LeaveReason, RecvError};
use herenow_core::id::{MemberId, MemberKey, MemberKind, SpaceName};
use herenow_core::meta::Metadata;
use herenow_core::policy::{SpaceConfig, Status};
use herenow_core::store::{Heartbeat, KindFilter, ListQuery, Order};

use super::space::{INDEX_ABOVE, Space};

const T0: u64 = 1_700_000_000_000;

fn space() -> Space {
    Space::new(SpaceName::new("test").unwrap(), SpaceConfig::default(), T0)
}

fn user(id: &str) -> MemberKey {
    MemberKey::user(MemberId::new(id).unwrap())
}

fn guest(id: &str) -> MemberKey {
    MemberKey::guest(MemberId::new(id).unwrap())
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

fn ids(page: &herenow_core::store::Page) -> Vec<String> {
    page.members
        .iter()
        .map(|m| m.member.id.to_string())
        .collect()
}

#[test]
fn heartbeat_then_status_moves_with_time() {
    let mut s = space();
    s.heartbeat(&[beat(user("ada"))], T0).unwrap();
    let st = |s: &Space, now| s.status(&[user("ada"), user("bob")], now).unwrap();
    let r = st(&s, T0 + 59_999);
    assert_eq!(r[0].status, Status::Online);
    assert_eq!(r[0].last_seen_ms, Some(T0));
    assert_eq!(r[1].status, Status::Offline);
    assert_eq!(r[1].last_seen_ms, None);
    assert_eq!(st(&s, T0 + 60_000)[0].status, Status::Away);
    assert_eq!(st(&s, T0 + 300_000)[0].status, Status::Offline);
    s.check_invariants();
}

#[test]
fn newest_time_wins() {
    let mut s = space();
    s.heartbeat(&[beat_at(user("a"), T0 - 10)], T0).unwrap();
    let r = s.heartbeat(&[beat_at(user("a"), T0 - 20)], T0).unwrap();
    assert_eq!((r.accepted, r.stale), (0, 1));
    assert_eq!(
        s.status(&[user("a")], T0).unwrap()[0].last_seen_ms,
        Some(T0 - 10)
    );
    s.check_invariants();
}

#[test]
fn bad_batches_change_nothing() {
    let mut s = space();
    let batch = vec![beat(user("a")), beat_at(user("b"), T0 + 61_000)];
    assert!(matches!(
        s.heartbeat(&batch, T0),
        Err(InvalidInput::AtInFuture { .. })
    ));
    assert!(s.is_empty());
    assert_eq!(
        s.heartbeat::<Heartbeat>(&[], T0),
        Err(InvalidInput::EmptyBatch)
    );
    let big = vec![beat(user("a")); 10_001];
    assert!(matches!(
        s.heartbeat(&big, T0),
        Err(InvalidInput::BatchTooLarge { .. })
    ));
    assert!(s.is_empty());
}

#[test]
fn heartbeats_older_than_retention_are_stale() {
    let mut s = space();
    let r = s
        .heartbeat(&[beat_at(user("a"), T0 - 15 * 60_000)], T0)
        .unwrap();
    assert_eq!(r.stale, 1);
    assert!(s.is_empty());
}

#[test]
fn users_and_guests_are_apart() {
    let mut s = space();
    s.heartbeat(&[beat(user("x")), beat(guest("x")), beat(guest("y"))], T0)
        .unwrap();
    let c = s.count(None, T0).unwrap();
    assert_eq!((c.users, c.guests), (1, 2));
    let q = |kinds| ListQuery {
        kinds,
        ..Default::default()
    };
    assert_eq!(s.list(&q(KindFilter::Users), T0).unwrap().members.len(), 1);
    assert_eq!(s.list(&q(KindFilter::Guests), T0).unwrap().members.len(), 2);
    assert_eq!(s.list(&q(KindFilter::All), T0).unwrap().members.len(), 3);
    s.leave(&[guest("x")], T0).unwrap();
    assert_eq!(
        s.status(&[user("x")], T0).unwrap()[0].status,
        Status::Online
    );
    s.check_invariants();
}

#[test]
fn recent_order_and_pages() {
    let mut s = space();
    for i in 0..10u64 {
        s.heartbeat(&[beat(user(&format!("m{i}")))], T0 + i)
            .unwrap();
    }
    let mut q = ListQuery {
        limit: 4,
        ..Default::default()
    };
    // No order asked: the engine keeps times, so most recent first, and
    // the page says so.
    let p1 = s.list(&q, T0 + 10).unwrap();
    assert_eq!(ids(&p1), ["m9", "m8", "m7", "m6"]);
    assert_eq!(p1.order, Order::Recent);
    q.cursor = p1.next_cursor.clone();
    // m7 heartbeats between pages: it moved, so it may not reappear;
    // nobody unchanged is skipped or repeated.
    s.heartbeat(&[beat(user("m7"))], T0 + 11).unwrap();
    let p2 = s.list(&q, T0 + 11).unwrap();
    assert_eq!(ids(&p2), ["m5", "m4", "m3", "m2"]);
    q.cursor = p2.next_cursor.clone();
    // The order the page named continues it as well as no order does.
    q.order = Some(p2.order);
    let p3 = s.list(&q, T0 + 11).unwrap();
    assert_eq!(ids(&p3), ["m1", "m0"]);
    assert_eq!((p3.next_cursor, p3.order), (None, Order::Recent));
}

#[test]
fn cursor_survives_its_anchor_moving() {
    let mut s = space();
    for i in 0..6u64 {
        s.heartbeat(&[beat(user(&format!("m{i}")))], T0 + i)
            .unwrap();
    }
    let mut q = ListQuery {
        limit: 2,
        ..Default::default()
    };
    let p1 = s.list(&q, T0 + 6).unwrap();
    assert_eq!(ids(&p1), ["m5", "m4"]);
    // The anchor (m4) itself moves to the front.
    s.heartbeat(&[beat(user("m4"))], T0 + 7).unwrap();
    q.cursor = p1.next_cursor;
    assert_eq!(ids(&s.list(&q, T0 + 7).unwrap()), ["m3", "m2"]);
}

#[test]
fn id_order_pages() {
    let mut s = space();
    for id in ["delta", "alpha", "charlie", "bravo", "echo"] {
        s.heartbeat(&[beat(user(id))], T0).unwrap();
    }
    let mut q = ListQuery {
        limit: 2,
        order: Some(Order::Id),
        ..Default::default()
    };
    let mut all = Vec::new();
    loop {
        let p = s.list(&q, T0).unwrap();
        assert_eq!(p.order, Order::Id);
        all.extend(ids(&p));
        match p.next_cursor {
            Some(c) => q.cursor = Some(c),
            None => break,
        }
    }
    assert_eq!(all, ["alpha", "bravo", "charlie", "delta", "echo"]);
}

#[test]
fn bad_queries_are_refused() {
    let s = space();
    let q = ListQuery {
        limit: 0,
        ..Default::default()
    };
    assert!(matches!(
        s.list(&q, T0),
        Err(InvalidInput::LimitOutOfRange { .. })
    ));
    let q = ListQuery {
        limit: 1001,
        ..Default::default()
    };
    assert!(matches!(
        s.list(&q, T0),
        Err(InvalidInput::LimitOutOfRange { .. })
    ));
    let q = ListQuery {
        window_ms: Some(16 * 60_000),
        ..Default::default()
    };
    assert!(matches!(
        s.list(&q, T0),
        Err(InvalidInput::WindowOutOfRange { .. })
    ));
    for bad in [
        "", "x", "r1.2", "rzz.1.1", "iq00", "iu0", "iuzz", "r1.2.3.4",
    ] {
        let q = ListQuery {
            cursor: Some(bad.into()),
            ..Default::default()
        };
        assert_eq!(s.list(&q, T0), Err(InvalidInput::BadCursor), "{bad:?}");
        let q = ListQuery {
            cursor: Some(bad.into()),
            order: Some(Order::Id),
            ..Default::default()
        };
        assert_eq!(s.list(&q, T0), Err(InvalidInput::BadCursor), "{bad:?}");
    }
    assert!(matches!(
        s.count(Some(0), T0),
        Err(InvalidInput::WindowOutOfRange { .. })
    ));
}

#[test]
fn events_follow_status() {
    let mut s = space();
    let mut sub = s.subscribe(T0);
    assert!(sub.snapshot.is_empty());
    let meta = Metadata::from_json(r#"{"name":"Ada"}"#).unwrap();
    s.heartbeat(
        &[Heartbeat {
            member: user("ada"),
            at_ms: None,
            meta: Some(meta),
        }],
        T0,
    )
    .unwrap();
    let next = |sub: &mut herenow_core::event::Subscription| sub.events.try_recv().unwrap();
    let e = next(&mut sub).unwrap();
    assert_eq!((e.kind, e.status), (EventKind::Join, Status::Online));
    assert_eq!(e.meta.as_ref().unwrap().as_json(), r#"{"name":"Ada"}"#);
    // Same heartbeat again: nothing to say.
    s.heartbeat(&[beat(user("ada"))], T0 + 1000).unwrap();
    assert!(next(&mut sub).is_none());
    // New metadata: update.
    let meta = Metadata::from_json(r#"{"name":"Ada L."}"#).unwrap();
    s.heartbeat(
        &[Heartbeat {
            member: user("ada"),
            at_ms: None,
            meta: Some(meta),
        }],
        T0 + 2000,
    )
    .unwrap();
    assert_eq!(next(&mut sub).unwrap().kind, EventKind::Update);
    // Silence: away, then back.
    s.tick(T0 + 2000 + 60_000, 1000);
    assert_eq!(next(&mut sub).unwrap().kind, EventKind::Away);
    s.heartbeat(&[beat(user("ada"))], T0 + 70_000).unwrap();
    assert_eq!(next(&mut sub).unwrap().kind, EventKind::Back);
    // Long silence: leave by timeout, once.
    s.tick(T0 + 70_000 + 60_000, 1000);
    assert_eq!(next(&mut sub).unwrap().kind, EventKind::Away);
    s.tick(T0 + 70_000 + 300_000, 1000);
    let e = next(&mut sub).unwrap();
    assert_eq!(
        (e.kind, e.reason),
        (EventKind::Leave, Some(LeaveReason::Timeout))
    );
    // Expiry of a member already gone says nothing more.
    s.tick(T0 + 70_000 + 900_000, 1000);
    assert!(next(&mut sub).is_none());
    assert!(s.is_empty());
    // Coming back after leaving is a join.
    s.heartbeat(&[beat(user("ada"))], T0 + 2_000_000).unwrap();
    assert_eq!(next(&mut sub).unwrap().kind, EventKind::Join);
    s.leave(&[user("ada")], T0).unwrap();
    let e = next(&mut sub).unwrap();
    assert_eq!(
        (e.kind, e.reason),
        (EventKind::Leave, Some(LeaveReason::Explicit))
    );
}

#[test]
fn snapshot_holds_present_members_only() {
    let mut s = space();
    s.heartbeat(
        &[
            beat_at(user("old"), T0 - 400_000),
            beat_at(user("idle"), T0 - 120_000),
            beat(user("new")),
        ],
        T0,
    )
    .unwrap();
    s.tick(T0, 1000);
    let sub = s.subscribe(T0);
    let got: Vec<(String, Status)> = sub
        .snapshot
        .iter()
        .map(|m| (m.member.id.to_string(), m.status))
        .collect();
    assert_eq!(
        got,
        [
            ("new".into(), Status::Online),
            ("idle".into(), Status::Away)
        ]
    );
}

#[test]
fn lagging_subscriber_is_told() {
    let mut s = space();
    let mut sub = s.subscribe(T0);
    for i in 0..(herenow_core::limits::EVENT_QUEUE + 10) {
        s.heartbeat(&[beat(user(&format!("u{i}")))], T0).unwrap();
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let r = rt.block_on(sub.events.recv());
    assert!(matches!(r, Err(RecvError::Lagged(_))));
}

#[test]
fn tick_is_bounded_and_resumes() {
    let mut s = space();
    let beats: Vec<_> = (0..3000)
        .map(|i| beat_at(user(&format!("u{i}")), T0 + i))
        .collect();
    s.heartbeat(&beats, T0 + 5000).unwrap();
    let mut sub = s.subscribe(T0 + 5000);
    let later = T0 + 5000 + 60_000;
    let w = s.tick(later, 1000);
    assert!(w.more);
    assert_eq!(w.transitions, 1000);
    let mut total = w.transitions;
    loop {
        let w = s.tick(later, 1000);
        total += w.transitions;
        if !w.more {
            break;
        }
    }
    assert_eq!(total, 3000);
    let mut aways = 0;
    while let Some(e) = sub.events.try_recv().unwrap() {
        assert_eq!(e.kind, EventKind::Away);
        aways += 1;
    }
    // Every member announced away exactly once.
    assert_eq!(aways, 3000);
    s.check_invariants();
    // Expiry in bounded steps too.
    let gone = later + 16 * 60_000;
    let mut expired = 0;
    loop {
        let w = s.tick(gone, 700);
        expired += w.expired;
        s.check_invariants();
        if !w.more {
            break;
        }
    }
    assert_eq!(expired, 3000);
    assert!(s.is_empty());
}

#[test]
fn large_space_counts_and_backfills_exactly() {
    let mut s = space();
    // Spread 3,000 members over 9 minutes, some crowded into one second.
    let mut beats = Vec::new();
    for i in 0..3000u64 {
        let at = if i % 3 == 0 {
            T0 - 5_000 - (i % 700)
        } else {
            T0 - i * 180
        };
        let m = if i % 5 == 0 {
            guest(&format!("g{i}"))
        } else {
            user(&format!("u{i}"))
        };
        beats.push(beat_at(m, at));
    }
    s.heartbeat(&beats, T0).unwrap();
    assert!(s.len() > INDEX_ABOVE);
    s.check_invariants();
    let naive = |window: u64| {
        let mut c = [0u64; 2];
        for b in &beats {
            if b.at_ms.unwrap() >= T0 - window {
                c[b.member.kind.index()] += 1;
            }
        }
        c
    };
    for window in [
        1, 1000, 5_000, 5_001, 5_700, 60_000, 123_457, 300_000, 540_000, 900_000,
    ] {
        let c = s.count(Some(window), T0).unwrap();
        assert_eq!([c.users, c.guests], naive(window), "window {window}");
    }
    // Shrinking back below the threshold drops the index.
    let leaves: Vec<MemberKey> = beats.iter().skip(100).map(|b| b.member.clone()).collect();
    s.leave(&leaves, T0).unwrap();
    s.check_invariants();
    assert_eq!(s.len(), 100);
}

#[test]
fn heap_per_member_is_small() {
    let mut s = space();
    let beats: Vec<_> = (0..10_000)
        .map(|i| beat(user(&format!("user-{i:06}"))))
        .collect();
    for (i, chunk) in beats.chunks(1000).enumerate() {
        s.heartbeat(chunk, T0 + i as u64 * 50).unwrap();
    }
    // Entry, index and block cost only (ids fit inline): a loose ceiling
    // to catch regressions, not the figure itself.
    let per = s.heap_bytes() / s.len();
    assert!(per < 150, "{per} bytes per member");
}

// ----- property test against a naive model ---------------------------------

#[derive(Clone, Debug)]
enum Op {
    Beat {
        guest: bool,
        id: u16,
        back_ms: Option<u32>,
    },
    Bulk {
        from: u16,
        n: u16,
        back_ms: u32,
    },
    Leave {
        guest: bool,
        id: u16,
    },
    Advance(u32),
    Tick(u16),
    Check {
        window_ms: u32,
        limit: u8,
        kinds: u8,
        by_id: bool,
    },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (any::<bool>(), 0..60u16, proptest::option::of(0..400_000u32))
            .prop_map(|(guest, id, back_ms)| Op::Beat { guest, id, back_ms }),
        1 => (0..2000u16, 1..800u16, 0..200_000u32).prop_map(|(from, n, back_ms)| Op::Bulk { from, n, back_ms }),
        2 => (any::<bool>(), 0..60u16).prop_map(|(guest, id)| Op::Leave { guest, id }),
        3 => (0..200_000u32).prop_map(Op::Advance),
        2 => (1..3000u16).prop_map(Op::Tick),
        3 => (1..900_000u32, 1..40u8, 0..3u8, any::<bool>())
            .prop_map(|(window_ms, limit, kinds, by_id)| Op::Check { window_ms, limit, kinds, by_id }),
    ]
}

type ModelRow<'a> = (&'a (MemberKind, String), &'a (u64, u64));

/// The model: (kind, id) → (last seen, sequence), the order the engine
/// promises.
#[derive(Default)]
struct Model {
    members: HashMap<(MemberKind, String), (u64, u64)>,
    seq: u64,
}

impl Model {
    fn beat(&mut self, kind: MemberKind, id: String, at: u64, now: u64, retention: u64) {
        if now.saturating_sub(at) >= retention {
            return;
        }
        match self.members.get_mut(&(kind, id.clone())) {
            Some((ts, _)) if at <= *ts => {}
            Some(e) => {
                self.seq += 1;
                *e = (at, self.seq);
            }
            None => {
                self.seq += 1;
                self.members.insert((kind, id), (at, self.seq));
            }
        }
    }
}

fn key_of(guest: bool, id: String) -> MemberKey {
    let id = MemberId::new(&id).unwrap();
    if guest {
        MemberKey::guest(id)
    } else {
        MemberKey::user(id)
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn engine_agrees_with_model(ops in proptest::collection::vec(op(), 1..60)) {
        let config = SpaceConfig::default();
        let mut now = T0;
        let mut s = Space::new(SpaceName::new("p").unwrap(), config, now);
        let mut model = Model::default();
        for op in ops {
            match op {
                Op::Beat { guest, id, back_ms } => {
                    let at = back_ms.map(|b| now - b as u64);
                    let key = key_of(guest, format!("m{id}"));
                    let kind = key.kind;
                    s.heartbeat(&[Heartbeat { member: key, at_ms: at, meta: None }], now).unwrap();
                    model.beat(kind, format!("m{id}"), at.unwrap_or(now), now, config.retention_ms);
                }
                Op::Bulk { from, n, back_ms } => {
                    let beats: Vec<Heartbeat> = (from..from.saturating_add(n))
                        .map(|i| {
                            let at = now - (back_ms as u64 * i as u64 / 2000);
                            beat_at(key_of(i % 7 == 0, format!("b{i}")), at)
                        })
                        .collect();
                    s.heartbeat(&beats, now).unwrap();
                    for b in beats {
                        model.beat(b.member.kind, b.member.id.to_string(), b.at_ms.unwrap(), now, config.retention_ms);
                    }
                }
                Op::Leave { guest, id } => {
                    let key = key_of(guest, format!("m{id}"));
                    s.leave(std::slice::from_ref(&key), now).unwrap();
                    model.members.remove(&(key.kind, key.id.to_string()));
                }
                Op::Advance(ms) => now += ms as u64,
                Op::Tick(budget) => {
                    loop {
                        if !s.tick(now, budget as usize).more { break; }
                    }
                    let cut = now - config.retention_ms;
                    model.members.retain(|_, (ts, _)| *ts > cut);
                }
                Op::Check { window_ms, limit, kinds, by_id } => {
                    s.check_invariants();
                    let window = (window_ms as u64).min(config.retention_ms);
                    let kinds = [KindFilter::Users, KindFilter::Guests, KindFilter::All][kinds as usize];
                    let cutoff = now - window;
                    let mut expect: Vec<ModelRow> = model
                        .members
                        .iter()
                        .filter(|(k, v)| v.0 >= cutoff && kinds.admits(k.0))
                        .collect();
                    if by_id {
                        expect.sort_by(|a, b| (&a.0.1, a.0.0).cmp(&(&b.0.1, b.0.0)));
                    } else {
                        expect.sort_by(|a, b| b.1.cmp(a.1));
                    }
                    let expect: Vec<(MemberKind, String, u64)> =
                        expect.into_iter().map(|(k, v)| (k.0, k.1.clone(), v.0)).collect();
                    // Page through everything.
                    let mut q = ListQuery {
                        window_ms: Some(window),
                        kinds,
                        order: Some(if by_id { Order::Id } else { Order::Recent }),
                        limit: limit as usize,
                        cursor: None,
                    };
                    let mut got = Vec::new();
                    loop {
                        let page = s.list(&q, now).unwrap();
                        prop_assert!(page.members.len() <= limit as usize);
                        got.extend(page.members.iter().map(|m| (m.member.kind, m.member.id.to_string(), m.last_seen_ms.unwrap())));
                        match page.next_cursor {
                            Some(c) => q.cursor = Some(c),
                            None => break,
                        }
                    }
                    prop_assert_eq!(&got, &expect);
                    let c = s.count(Some(window), now).unwrap();
                    let users = expect.iter().filter(|m| m.0 == MemberKind::User).count() as u64;
                    let guests = expect.iter().filter(|m| m.0 == MemberKind::Guest).count() as u64;
                    if kinds == KindFilter::All {
                        prop_assert_eq!((c.users, c.guests), (users, guests));
                    }
                    // Status of a few ids, known and unknown.
                    for id in 0..5u16 {
                        let key = key_of(false, format!("m{id}"));
                        let st = &s.status(std::slice::from_ref(&key), now).unwrap()[0];
                        let m = model.members.get(&(MemberKind::User, format!("m{id}"))).map(|v| v.0);
                        prop_assert_eq!(st.last_seen_ms, m);
                        prop_assert_eq!(st.status, config.status(m, now));
                    }
                }
            }
        }
        s.check_invariants();
    }
}

/// A space left holding only remembered times is dropped like any idle
/// space (not listed, no struct kept), and its remembered times still
/// answer under its name, and come back with it.
#[tokio::test]
async fn remembered_times_outlive_their_idle_space() {
    use std::sync::Arc;

    use herenow_core::capability::UserIndex;
    use herenow_core::store::PresenceStore;
    use herenow_core::time::ManualClock;

    let clock = ManualClock::new(T0);
    let store = super::MemoryStore::new(Arc::new(clock.clone()), SpaceConfig::default());
    let room = SpaceName::new("dm-ann-bob").unwrap();
    store.heartbeat(&room, &[beat(user("ann"))]).await.unwrap();
    store.leave(&room, &[user("ann")]).await.unwrap();
    let report = store.tick().await.unwrap();
    assert_eq!(report.spaces_dropped, 1);
    assert!(store.spaces(None, 10).await.unwrap().is_empty());
    let st = store
        .status(&room, &[user("ann"), user("bob")])
        .await
        .unwrap();
    assert_eq!(st[0].last_seen_ms, Some(T0));
    assert_eq!(st[1].last_seen_ms, None);
    let anywhere = store
        .seen_anywhere(&[MemberId::new("ann").unwrap()])
        .await
        .unwrap();
    assert_eq!(anywhere[0].space.as_ref(), Some(&room));
    // The space comes back under the same id: bob joins, ann still
    // remembered.
    store.heartbeat(&room, &[beat(user("bob"))]).await.unwrap();
    let st = store.status(&room, &[user("ann")]).await.unwrap();
    assert_eq!(st[0].last_seen_ms, Some(T0));
    // Past the horizon the sweep forgets ann, and the id is released.
    store.leave(&room, &[user("bob")]).await.unwrap();
    clock.advance(std::time::Duration::from_millis(
        SpaceConfig::default().remember_ms,
    ));
    for _ in 0..4 {
        store.tick().await.unwrap();
    }
    assert_eq!(store.seen_usage().0, 0);
    let st = store.status(&room, &[user("ann")]).await.unwrap();
    assert_eq!(st[0].last_seen_ms, None);
}

/// Issue 9: a watcher reads a user "anywhere" as soon as the feed says
/// the user changed (the server's dispatcher does). Whatever thread it
/// reads on, it must find what the change did: online after a join
/// (never "offline, never seen"), offline with the leave's time after a
/// leave. The writer runs on another thread and waits for each read, so
/// the answer is exact, and a store that fed the change before the `Seen`
/// table had it fails within a few hundred rounds.
#[test]
fn seen_anywhere_on_a_fed_change_finds_the_change() {
    use std::sync::Arc;
    use std::sync::mpsc;

    use herenow_core::capability::{Following, UserIndex};
    use herenow_core::follow::UserChange;
    use herenow_core::store::PresenceStore;
    use herenow_core::time::{Clock, ManualClock};

    const ROUNDS: u64 = 2_000;
    let runtime = || {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
    };
    let clock = ManualClock::new(T0);
    let store = Arc::new(super::MemoryStore::new(
        Arc::new(clock.clone()),
        SpaceConfig::default(),
    ));
    let room = SpaceName::new("room").unwrap();
    let bob = [MemberId::new("bob").unwrap()];
    let rt = runtime();
    let mut feed = store.user_feed().unwrap();
    rt.block_on(store.follow(&bob)).unwrap();
    let (read, wait) = mpsc::channel::<()>();
    let writer = {
        let (store, room, clock) = (store.clone(), room.clone(), clock.clone());
        std::thread::spawn(move || {
            let rt = runtime();
            for _ in 0..ROUNDS {
                clock.advance(std::time::Duration::from_millis(1));
                rt.block_on(store.heartbeat(&room, &[beat(user("bob"))]))
                    .unwrap();
                wait.recv().unwrap();
                clock.advance(std::time::Duration::from_millis(1));
                rt.block_on(store.leave(&room, &[user("bob")])).unwrap();
                wait.recv().unwrap();
            }
        })
    };
    for _ in 0..ROUNDS * 2 {
        let Ok(UserChange::Presence(event)) = rt.block_on(feed.recv()) else {
            panic!("the feed carries bob's presence only");
        };
        let seen = rt.block_on(store.seen_anywhere(&bob)).unwrap();
        let now = clock.now_ms();
        let want = match event.kind {
            EventKind::Join => (Status::Online, event.last_seen_ms),
            // A leave is remembered at its own time, which is now.
            EventKind::Leave => (Status::Offline, Some(now)),
            other => panic!("unexpected {other:?}"),
        };
        assert_eq!(
            (seen[0].status, seen[0].last_seen_ms),
            want,
            "bob read on his {:?}",
            event.kind
        );
        read.send(()).unwrap();
    }
    writer.join().unwrap();
}

#[test]
fn online_among_answers_the_newest_in_the_shared_order() {
    // Many members share a millisecond, users and guests alike, some are
    // outside the window, and the question repeats some of them: the
    // answer is what sorting every status would give, cut at the limit.
    let mut s = space();
    let mut all = Vec::new();
    for i in 0..700u64 {
        let m = if i % 3 == 0 {
            guest(&format!("m{:03}", i % 350))
        } else {
            user(&format!("m{:03}", i % 350))
        };
        let at = T0 - 1_000 * (i % 40) - if i % 7 == 0 { 700_000 } else { 0 };
        s.heartbeat(&[beat_at(m.clone(), at)], T0).unwrap();
        all.push(m);
    }
    let asked: Vec<MemberKey> = all
        .iter()
        .step_by(2)
        .chain(all.iter().take(90))
        .cloned()
        .collect();
    for limit in [0, 1, 7, 100, 1_000] {
        let got = s.online_among(&asked, None, limit, T0).unwrap();
        let mut unique = asked.clone();
        unique.sort();
        unique.dedup();
        let mut want: Vec<_> = s
            .status(&unique, T0)
            .unwrap()
            .into_iter()
            .filter(|st| st.last_seen_ms.is_some_and(|t| t >= T0 - 600_000))
            .collect();
        herenow_core::store::sort_most_recent_first(&mut want);
        want.truncate(limit);
        assert_eq!(got, want, "limit {limit}");
    }
}
