//! Scenarios of the grace (see [`crate::conn`]): a connection that ends
//! without a goodbye lingers; the member's next connection takes its place
//! without a word, or the member leaves once when the grace ends.

use super::*;

pub(super) async fn a_member_back_within_the_grace_never_left(s: Store, clock: ManualClock) {
    let sp = space("g-back");
    let name = Some(r#"{"name":"Ann"}"#);
    attach_ok(&s, &sp, &attach(user("ann"), "g-tab1", name, false)).await;
    let mut sub = s.subscribe(&sp).await.unwrap();
    assert_eq!(ids(&sub.snapshot), ["ann"]);

    // The page reloads: its socket closes without a goodbye.
    clock.advance(Duration::from_millis(500));
    let r = linger_ok(&s, &sp, user("ann"), "g-tab1").await;
    assert!(r.found && !r.left, "{r:?}");
    no_event(&mut sub).await;
    // In her grace she is present: listed, counted, online.
    let page = s.list(&sp, &ListQuery::default()).await.unwrap();
    assert_eq!(ids(&page.members), ["ann"]);
    assert_eq!(s.count(&sp, None).await.unwrap().users, 1);
    let st = status_of(&s, &sp, user("ann")).await;
    assert_eq!(st.status, Status::Online);
    assert_eq!(st.last_seen_ms, Some(T0 + 500), "seen when it ended");
    let conns = live(&*s).connections(&sp, &[user("ann")]).await.unwrap();
    assert_eq!(conns[0].len(), 1);
    assert!(conns[0][0].lingering);
    assert_eq!(conns[0][0].expires_ms, T0 + 500 + 5_000);
    // Lingering twice changes nothing.
    let again = linger_ok(&s, &sp, user("ann"), "g-tab1").await;
    assert!(again.found && !again.left);
    let conns = live(&*s).connections(&sp, &[user("ann")]).await.unwrap();
    assert_eq!(conns[0][0].expires_ms, T0 + 500 + 5_000);

    // The new page connects (any server, any protocol: a new id) and
    // takes the old connection's place: no join, no connect.
    clock.advance(Duration::from_millis(1_500));
    let r = attach_ok(&s, &sp, &attach(user("ann"), "g-tab2", name, false)).await;
    assert!(r.opened && r.resumed && !r.joined, "{r:?}");
    no_event(&mut sub).await;
    let conns = live(&*s).connections(&sp, &[user("ann")]).await.unwrap();
    assert_eq!(conns[0].len(), 1);
    assert_eq!(conns[0][0].conn, conn("g-tab2"));
    assert!(!conns[0][0].lingering);

    // Past the old connection's grace: still nothing to tell.
    clock.advance(Duration::from_secs(10));
    settle(&s).await;
    no_event(&mut sub).await;
    let st = status_of(&s, &sp, user("ann")).await;
    assert_eq!(st.status, Status::Online);

    // Back with other metadata: only the update says so.
    linger_ok(&s, &sp, user("ann"), "g-tab2").await;
    let r = live(&*s)
        .attach(
            &sp,
            &attach(user("ann"), "g-tab3", Some(r#"{"name":"Ann B."}"#), false),
        )
        .await
        .unwrap();
    assert!(r.resumed && !r.joined);
    let e = next_event(&mut sub).await;
    assert_eq!((e.kind, e.member.id.as_str()), (EventKind::Update, "ann"));
    clock.advance(Duration::from_secs(10));
    settle(&s).await;
    no_event(&mut sub).await;
}

pub(super) async fn a_member_not_back_leaves_once_when_the_grace_ends(
    s: Store,
    clock: ManualClock,
) {
    let sp = space("g-gone");
    attach_ok(&s, &sp, &attach(user("bob"), "g-b1", None, false)).await;
    let mut sub = s.subscribe(&sp).await.unwrap();
    clock.advance(Duration::from_secs(3));
    linger_ok(&s, &sp, user("bob"), "g-b1").await;
    clock.advance(Duration::from_millis(4_900));
    settle(&s).await;
    no_event(&mut sub).await;
    assert_eq!(s.count(&sp, None).await.unwrap().users, 1);

    clock.advance(Duration::from_millis(200));
    settle(&s).await;
    let e = next_event(&mut sub).await;
    assert_eq!(
        (e.kind, e.member.id.as_str(), e.last_seen_ms, e.reason),
        (
            EventKind::Leave,
            "bob",
            Some(T0 + 3_000),
            Some(LeaveReason::Explicit)
        ),
        "one leave when the grace ends, a goodbye late, last seen when the connection ended"
    );
    no_event(&mut sub).await;
    let st = status_of(&s, &sp, user("bob")).await;
    assert_eq!(st.status, Status::Offline);
    assert_eq!(st.last_seen_ms, Some(T0 + 3_000));
    assert_eq!(s.count(&sp, None).await.unwrap().users, 0);
    let conns = live(&*s).connections(&sp, &[user("bob")]).await.unwrap();
    assert!(conns[0].is_empty());

    // Coming back after the grace is a join like any other (on a
    // connection with a TTL past `online_ms`, for what follows).
    let long = Attach {
        ttl_ms: 120_000,
        ..attach(user("bob"), "g-b2", None, false)
    };
    let r = attach_ok(&s, &sp, &long).await;
    assert!(r.joined && !r.resumed);
    assert_eq!(next_event(&mut sub).await.kind, EventKind::Join);

    // Away (connected but idle past online_ms) when the connection ends:
    // away through the grace, never `back`, last seen at the last ping.
    clock.advance(Duration::from_secs(61));
    settle(&s).await;
    assert_eq!(next_event(&mut sub).await.kind, EventKind::Away);
    let idle_since = T0 + 3_000 + 5_100;
    linger_ok(&s, &sp, user("bob"), "g-b2").await;
    no_event(&mut sub).await;
    let st = status_of(&s, &sp, user("bob")).await;
    assert_eq!(
        (st.status, st.last_seen_ms),
        (Status::Away, Some(idle_since))
    );
    clock.advance(Duration::from_secs(6));
    settle(&s).await;
    let e = next_event(&mut sub).await;
    assert_eq!(
        (e.kind, e.reason),
        (EventKind::Leave, Some(LeaveReason::Explicit))
    );
    let st = status_of(&s, &sp, user("bob")).await;
    assert_eq!(st.last_seen_ms, Some(idle_since));
}

pub(super) async fn a_second_tab_keeps_its_member_through_the_grace(s: Store, clock: ManualClock) {
    let sp = space("g-tabs");
    attach_ok(&s, &sp, &attach(user("cy"), "g-c1", None, false)).await;
    attach_ok(&s, &sp, &attach(user("cy"), "g-c2", None, false)).await;
    let mut sub = s.subscribe(&sp).await.unwrap();
    // One tab closes: it lingers, then goes as a connection only.
    linger_ok(&s, &sp, user("cy"), "g-c1").await;
    no_event(&mut sub).await;
    clock.advance(Duration::from_secs(6));
    // The other tab pings on.
    attach_ok(&s, &sp, &attach(user("cy"), "g-c2", None, false)).await;
    settle(&s).await;
    let e = next_event(&mut sub).await;
    assert_eq!(
        (e.kind, e.conn.as_ref().map(ConnId::as_str)),
        (EventKind::Disconnect, Some("g-c1"))
    );
    no_event(&mut sub).await;
    let st = status_of(&s, &sp, user("cy")).await;
    assert_eq!(st.status, Status::Online);

    // An explicit goodbye of the last tab is not delayed.
    let r = detach_ok(&s, &sp, user("cy"), "g-c2").await;
    assert!(r.found && r.left);
    let e = next_event(&mut sub).await;
    assert_eq!(
        (e.kind, e.reason),
        (EventKind::Leave, Some(LeaveReason::Explicit))
    );
}

pub(super) async fn a_grace_of_zero_leaves_at_once(s: Store, clock: ManualClock) {
    let sp = space("g-zero");
    configure(&s, &sp, |c| c.grace_ms = 0).await;
    attach_ok(&s, &sp, &attach(user("dee"), "g-d1", None, false)).await;
    let mut sub = s.subscribe(&sp).await.unwrap();
    clock.advance(Duration::from_secs(1));
    let r = linger_ok(&s, &sp, user("dee"), "g-d1").await;
    assert!(r.found && r.left, "{r:?}");
    let e = next_event(&mut sub).await;
    assert_eq!(
        (e.kind, e.reason),
        (EventKind::Leave, Some(LeaveReason::Explicit))
    );
    // As for a detach: last seen when the connection ended.
    let st = status_of(&s, &sp, user("dee")).await;
    assert_eq!(st.last_seen_ms, Some(T0 + 1_000));
    let r = attach_ok(&s, &sp, &attach(user("dee"), "g-d2", None, false)).await;
    assert!(r.joined && !r.resumed);
}

pub(super) async fn lingering_refuses_what_is_not_its_own(s: Store, clock: ManualClock) {
    let sp = space("g-bad");
    attach_ok(&s, &sp, &attach(user("eve"), "g-e1", None, false)).await;
    let mut sub = s.subscribe(&sp).await.unwrap();
    // Unknown connection, another member's, an unknown space: not found,
    // nothing changed.
    for (space_name, member, c) in [
        ("g-bad", user("eve"), "g-nope"),
        ("g-bad", user("mallory"), "g-e1"),
        ("g-bad", guest("eve"), "g-e1"),
        ("g-nowhere", user("eve"), "g-e1"),
    ] {
        let r = live(&*s)
            .linger(&space(space_name), &member, &conn(c))
            .await
            .unwrap();
        assert!(!r.found && !r.left, "{space_name} {member:?} {c}: {r:?}");
    }
    let conns = live(&*s).connections(&sp, &[user("eve")]).await.unwrap();
    assert!(!conns[0][0].lingering);
    // An invisible connection that ends goes at once: it held nobody.
    attach_ok(&s, &sp, &attach(user("fay"), "g-f1", None, true)).await;
    let r = linger_ok(&s, &sp, user("fay"), "g-f1").await;
    assert!(r.found && !r.left);
    let conns = live(&*s).connections(&sp, &[user("fay")]).await.unwrap();
    assert!(conns[0].is_empty());
    // Another member's connection is never taken over.
    linger_ok(&s, &sp, user("eve"), "g-e1").await;
    let r = attach_ok(&s, &sp, &attach(user("gus"), "g-g1", None, false)).await;
    assert!(r.joined && !r.resumed);
    assert_eq!(next_event(&mut sub).await.kind, EventKind::Join);
    clock.advance(Duration::from_secs(6));
    settle(&s).await;
    let e = next_event(&mut sub).await;
    assert_eq!((e.kind, e.member.id.as_str()), (EventKind::Leave, "eve"));
}
