//! Scenarios of listing who is online page by page: most recent first,
//! complete and stable while others write, and by id.

use super::*;

pub(super) async fn recent_order_pages_completely(s: Store, _clock: ManualClock) {
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
        // A store that keeps times lists most recent first when no order
        // is asked, and says so.
        assert_eq!(p.order, Order::Recent);
        got.extend(ids(&p.members));
        match p.next_cursor {
            Some(c) => q.cursor = Some(c),
            None => break,
        }
    }
    let want: Vec<String> = (0..250u64).rev().map(|i| format!("m{i:03}")).collect();
    assert_eq!(got, want, "most recent first, every member once");
    // A cursor of a listing that asked for no order continues the one
    // that asks for the order its page named.
    let first = s
        .list(
            &sp,
            &ListQuery {
                limit: 7,
                ..Default::default()
            },
        )
        .await
        .unwrap();
    let next = s
        .list(
            &sp,
            &ListQuery {
                limit: 7,
                order: Some(first.order),
                cursor: first.next_cursor.clone(),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(ids(&next.members), want[7..14]);
    let empty = s
        .list(&space("c-pages-never"), &ListQuery::default())
        .await
        .unwrap();
    assert_eq!((empty.members.len(), empty.order), (0, Order::Recent));
    // A bad cursor is refused, in a space that never had a member too.
    for name in [sp.clone(), space("c-pages-never")] {
        let e = s
            .list(
                &name,
                &ListQuery {
                    cursor: Some("garbage".into()),
                    ..Default::default()
                },
            )
            .await;
        assert!(
            matches!(e, Err(Error::Invalid(InvalidInput::BadCursor))),
            "{name}: {e:?}"
        );
    }
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

pub(super) async fn pages_stable_under_writes(s: Store, clock: ManualClock) {
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

pub(super) async fn id_order_pages(s: Store, _clock: ManualClock) {
    let sp = space("c-byid");
    let names = [
        "delta", "alpha", "charlie", "bravo", "echo", "foxtrot", "golf",
    ];
    let beats: Vec<_> = names.iter().map(|n| beat(user(n))).collect();
    s.heartbeat(&sp, &beats).await.unwrap();
    s.heartbeat(&sp, &[beat(guest("alpha"))]).await.unwrap();
    let mut q = ListQuery {
        limit: 3,
        order: Some(Order::Id),
        kinds: KindFilter::All,
        ..Default::default()
    };
    let mut got = Vec::new();
    loop {
        let p = s.list(&sp, &q).await.unwrap();
        assert_eq!(p.order, Order::Id);
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
