//! A space split over stripes answers exactly as a whole one: random
//! operations run against a store of whole spaces and a store of spaces
//! in 1 to 5 stripes, on one clock, and every answer is compared
//! (statuses, counts, every page in both orders, online-among, the
//! subscription snapshot, each member's events, connection-id refusals).
//!
//! Where a whole space orders members seen in the same millisecond by
//! when their heartbeats came, a striped one may order them otherwise (each
//! stripe numbers its own heartbeats): most-recent-first answers are
//! compared as (last seen, member) in that one order, and checked to come
//! most recent first.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use proptest::prelude::*;

use herenow_core::{
    Attach, Clock, ConnId, Error, Heartbeat, InvalidInput, ListQuery, LiveConnections, ManualClock,
    MemberId, MemberKey, MemberStatus, Order, PresenceStore, SpaceConfig, SpaceName,
};
use herenow_memory::MemoryStore;

const T0: u64 = 1_700_000_000_000;
const MEMBERS: u8 = 24;

#[derive(Clone, Debug)]
enum Op {
    /// Heartbeats of these members, each now or `back` ms ago.
    Beat(Vec<(u8, Option<u32>)>),
    Leave(Vec<u8>),
    Attach {
        member: u8,
        conn: u8,
        invisible: bool,
    },
    Detach {
        member: u8,
        conn: u8,
    },
    Wait(u32),
    Tick,
}

fn member(i: u8) -> MemberKey {
    let id = MemberId::new(&format!("m{i}")).unwrap();
    if i.is_multiple_of(3) {
        MemberKey::guest(id)
    } else {
        MemberKey::user(id)
    }
}

fn op() -> impl Strategy<Value = Op> {
    let m = 0..MEMBERS;
    prop_oneof![
        6 => proptest::collection::vec((m.clone(), proptest::option::of(0..200_000u32)), 1..12)
            .prop_map(Op::Beat),
        1 => proptest::collection::vec(m.clone(), 1..4).prop_map(Op::Leave),
        2 => (m.clone(), 0..4u8, any::<bool>())
            .prop_map(|(member, conn, invisible)| Op::Attach { member, conn, invisible }),
        1 => (m, 0..4u8).prop_map(|(member, conn)| Op::Detach { member, conn }),
        3 => (0..90_000u32).prop_map(Op::Wait),
        2 => Just(Op::Tick),
    ]
}

/// What both stores must agree on after an operation.
fn outcome<T: std::fmt::Debug>(r: &herenow_core::Result<T>) -> String {
    match r {
        Ok(v) => format!("{v:?}"),
        Err(Error::Invalid(e)) => format!("refused: {e:?}"),
        Err(e) => panic!("{e}"),
    }
}

/// Most-recent-first answers: checked to be in that order, then put in
/// the one order (last seen, then member) for comparison.
fn recent(mut v: Vec<MemberStatus>) -> Vec<(Option<u64>, MemberKey, String)> {
    assert!(
        v.windows(2).all(|w| w[0].last_seen_ms >= w[1].last_seen_ms),
        "not most recent first: {v:?}"
    );
    herenow_core::store::sort_most_recent_first(&mut v);
    v.into_iter()
        .map(|s| (s.last_seen_ms, s.member, format!("{:?}", s.status)))
        .collect()
}

async fn pages(store: &MemoryStore, space: &SpaceName, order: Order) -> Vec<MemberStatus> {
    let mut all = Vec::new();
    let mut cursor = None;
    loop {
        let page = store
            .list(
                space,
                &ListQuery {
                    order: Some(order),
                    limit: 5,
                    cursor,
                    ..ListQuery::default()
                },
            )
            .await
            .unwrap();
        all.extend(page.members);
        match page.next_cursor {
            Some(c) => cursor = Some(c),
            None => return all,
        }
    }
}

async fn run(ops: Vec<Op>, stripes: usize) {
    let clock = ManualClock::new(T0);
    let whole = MemoryStore::new(Arc::new(clock.clone()), SpaceConfig::default());
    let striped = MemoryStore::new(Arc::new(clock.clone()), SpaceConfig::default())
        .with_space_stripes(stripes);
    let space = SpaceName::new("room").unwrap();
    let mut subs = [
        whole.subscribe(&space).await.unwrap(),
        striped.subscribe(&space).await.unwrap(),
    ];
    let everyone: Vec<MemberKey> = (0..MEMBERS).map(member).collect();
    for op in ops {
        let now = clock.now_ms();
        let mut answers = Vec::new();
        for store in [&whole, &striped] {
            answers.push(match &op {
                Op::Beat(beats) => {
                    let beats: Vec<Heartbeat> = beats
                        .iter()
                        .map(|(m, back)| Heartbeat {
                            member: member(*m),
                            at_ms: back.map(|b| now - u64::from(b)),
                            meta: None,
                        })
                        .collect();
                    outcome(&store.heartbeat(&space, &beats).await)
                }
                Op::Leave(ms) => {
                    let ms: Vec<MemberKey> = ms.iter().map(|m| member(*m)).collect();
                    outcome(&store.leave(&space, &ms).await)
                }
                Op::Attach {
                    member: m,
                    conn,
                    invisible,
                } => {
                    let a = Attach {
                        member: member(*m),
                        conn: ConnId::new(&format!("c{conn}")).unwrap(),
                        meta: None,
                        invisible: *invisible,
                        ttl_ms: 60_000,
                    };
                    outcome(&store.attach(&space, &a).await)
                }
                Op::Detach { member: m, conn } => outcome(
                    &store
                        .detach(
                            &space,
                            &member(*m),
                            &ConnId::new(&format!("c{conn}")).unwrap(),
                        )
                        .await,
                ),
                Op::Wait(_) | Op::Tick => outcome(&store.tick().await.map(|_| ())),
            });
        }
        assert_eq!(answers[0], answers[1], "{op:?}");
        if let Op::Wait(ms) = op {
            clock.advance(Duration::from_millis(u64::from(ms)));
        }

        let [w, s] = [&whole, &striped];
        assert_eq!(
            w.status(&space, &everyone).await.unwrap(),
            s.status(&space, &everyone).await.unwrap()
        );
        assert_eq!(
            w.count(&space, None).await.unwrap(),
            s.count(&space, None).await.unwrap()
        );
        assert_eq!(
            pages(w, &space, Order::Id).await,
            pages(s, &space, Order::Id).await
        );
        assert_eq!(
            recent(pages(w, &space, Order::Recent).await),
            recent(pages(s, &space, Order::Recent).await)
        );
        assert_eq!(
            w.online_among(&space, &everyone, None, 7).await.unwrap(),
            s.online_among(&space, &everyone, None, 7).await.unwrap()
        );
        assert_eq!(
            w.connections(&space, &everyone).await.unwrap(),
            s.connections(&space, &everyone).await.unwrap()
        );
    }
    let [w, s] = [&whole, &striped];
    let (ws, ss) = (
        w.subscribe(&space).await.unwrap(),
        s.subscribe(&space).await.unwrap(),
    );
    assert_eq!(ws.snapshot_omitted, ss.snapshot_omitted);
    assert_eq!(recent(ws.snapshot), recent(ss.snapshot));
    // Each member's events, in order: the same in both.
    let mut events: [HashMap<MemberKey, Vec<String>>; 2] = Default::default();
    for (sub, out) in subs.iter_mut().zip(events.iter_mut()) {
        while let Ok(Ok(e)) = tokio::time::timeout(Duration::ZERO, sub.events.recv()).await {
            out.entry(e.member.clone()).or_default().push(format!(
                "{:?} {:?} {:?} {:?}",
                e.kind, e.status, e.last_seen_ms, e.reason
            ));
        }
    }
    assert_eq!(events[0], events[1]);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn a_striped_space_answers_as_a_whole_one(
        ops in proptest::collection::vec(op(), 1..40),
        stripes in 1usize..=5,
    ) {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(run(ops, stripes));
    }
}

/// A connection id is unique in a space whichever stripes its members
/// live in.
#[tokio::test]
async fn a_connection_id_is_refused_across_stripes() {
    let store = MemoryStore::default().with_space_stripes(8);
    let space = SpaceName::new("room").unwrap();
    // Members of two different stripes: among eight, some pair differs.
    let attach = |m: u8| Attach {
        member: member(m),
        conn: ConnId::new("shared").unwrap(),
        meta: None,
        invisible: false,
        ttl_ms: 60_000,
    };
    store.attach(&space, &attach(1)).await.unwrap();
    let refused = (2..MEMBERS)
        .filter(|m| !m.is_multiple_of(3))
        .map(attach)
        .collect::<Vec<_>>();
    for a in &refused {
        let r = store.attach(&space, a).await;
        assert!(
            matches!(r, Err(Error::Invalid(InvalidInput::ConnIdTaken))),
            "{:?}: {r:?}",
            a.member
        );
    }
    assert_eq!(
        store.connections(&space, &[member(2)]).await.unwrap(),
        vec![vec![]]
    );
}

/// A subscription's snapshot is capped at `MAX_SNAPSHOT` across the
/// stripes: the newest of all of them, in order, and the rest counted.
#[tokio::test]
async fn a_striped_snapshot_keeps_the_newest_of_every_stripe() {
    let clock = ManualClock::new(T0);
    let whole = MemoryStore::new(Arc::new(clock.clone()), SpaceConfig::default());
    let striped =
        MemoryStore::new(Arc::new(clock.clone()), SpaceConfig::default()).with_space_stripes(4);
    let space = SpaceName::new("big").unwrap();
    let cap = herenow_core::limits::MAX_SNAPSHOT;
    // Every member at its own millisecond, so the order is one.
    let beats: Vec<Heartbeat> = (0..cap + 2_000)
        .map(|i| Heartbeat {
            member: MemberKey::user(MemberId::new(&format!("u{i}")).unwrap()),
            at_ms: Some(T0 - 20_000 + i as u64),
            meta: None,
        })
        .collect();
    for store in [&whole, &striped] {
        for chunk in beats.chunks(5_000) {
            store.heartbeat(&space, chunk).await.unwrap();
        }
    }
    let (w, s) = (
        whole.subscribe(&space).await.unwrap(),
        striped.subscribe(&space).await.unwrap(),
    );
    assert_eq!(s.snapshot.len(), cap);
    assert_eq!(s.snapshot_omitted, 2_000);
    assert_eq!(
        s.snapshot[0].member.id.as_str(),
        format!("u{}", cap + 1_999)
    );
    assert_eq!(w.snapshot, s.snapshot);
    assert_eq!(w.snapshot_omitted, s.snapshot_omitted);
}
