//! Scenarios of remembered last seen (issue 8): leave and expiry keep the
//! time, the horizon ends it, last seen anywhere, and erasure.

use super::*;

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

pub(super) async fn leave_keeps_last_seen(s: Store, clock: ManualClock) {
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
    let page = s.list(&sp, &ListQuery::default()).await.unwrap();
    assert!(page.members.is_empty());
    // Back again: present with the new time; a second leave remembers it.
    clock.advance(Duration::from_secs(10));
    s.heartbeat(&sp, &[beat(user("ann"))]).await.unwrap();
    let st = status_of(&s, &sp, user("ann")).await;
    assert_eq!(
        (st.status, st.last_seen_ms),
        (Status::Online, Some(T0 + 15_000))
    );
    clock.advance(Duration::from_secs(1));
    s.leave(&sp, &[user("ann")]).await.unwrap();
    assert_eq!(
        status_of(&s, &sp, user("ann")).await.last_seen_ms,
        Some(T0 + 16_000)
    );
    // Leaving again while absent changes nothing.
    clock.advance(Duration::from_secs(1));
    assert_eq!(s.leave(&sp, &[user("ann")]).await.unwrap(), 0);
    assert_eq!(
        status_of(&s, &sp, user("ann")).await.last_seen_ms,
        Some(T0 + 16_000)
    );
}

/// A goodbye from a member whose presence already ended is not a
/// sighting (issue 8; the memory and Redis stores once differed here, seed
/// 2 of the Redis model walk): one that timed out and is still stored
/// keeps its last heartbeat when it then leaves or closes its last
/// connection, as the timeout `leave` said. Only a present member is
/// remembered at the time it says goodbye.
pub(super) async fn leave_after_timeout_keeps_last_heartbeat(s: Store, clock: ManualClock) {
    let sp = space("c-rem-late-bye");
    s.set_config(&sp, short_retention()).await.unwrap();
    s.heartbeat(&sp, &[beat(user("ann"))]).await.unwrap();
    // bob's connection outlives his presence: it does not ping.
    let bob = attach(user("bob"), "late-bob", None, false);
    attach_ok(&s, &sp, &bob).await;
    let mut sub = s.subscribe(&sp).await.unwrap();
    // Past away_ms, before retention_ms: timed out, still stored.
    clock.advance(Duration::from_secs(3));
    settle(&s).await;
    let mut leaves = 0;
    while leaves < 2 {
        let e = next_event(&mut sub).await;
        if e.kind == EventKind::Away {
            continue;
        }
        assert_eq!(
            (e.kind, e.reason, e.last_seen_ms),
            (EventKind::Leave, Some(LeaveReason::Timeout), Some(T0))
        );
        leaves += 1;
    }
    assert_eq!(s.leave(&sp, &[user("ann")]).await.unwrap(), 0);
    let r = live(&*s)
        .detach(&sp, &user("bob"), &bob.conn)
        .await
        .unwrap();
    assert!(r.found && !r.left, "{r:?}");
    assert_eq!(s.leave(&sp, &[user("bob")]).await.unwrap(), 0);
    no_event(&mut sub).await;
    let st = s.status(&sp, &[user("ann"), user("bob")]).await.unwrap();
    for m in &st {
        assert_eq!(
            (m.status, m.last_seen_ms),
            (Status::Offline, Some(T0)),
            "{m:?}"
        );
    }
    // Past the retention nothing moves either.
    clock.advance(Duration::from_secs(5));
    settle(&s).await;
    let st = s.status(&sp, &[user("ann"), user("bob")]).await.unwrap();
    for m in &st {
        assert_eq!(
            (m.status, m.last_seen_ms),
            (Status::Offline, Some(T0)),
            "{m:?}"
        );
    }
    assert_eq!(
        users(&*s).seen_anywhere(&[id("ann")]).await.unwrap()[0].last_seen_ms,
        Some(T0)
    );
}

pub(super) async fn expiry_keeps_last_seen(s: Store, clock: ManualClock) {
    let sp = space("c-rem-expiry");
    s.set_config(&sp, short_retention()).await.unwrap();
    s.heartbeat(&sp, &[beat(user("ann"))]).await.unwrap();
    clock.advance(Duration::from_secs(6));
    settle(&s).await;
    let st = status_of(&s, &sp, user("ann")).await;
    assert_eq!((st.status, st.last_seen_ms), (Status::Offline, Some(T0)));
    assert_eq!(s.count(&sp, None).await.unwrap().total(), 0);
    // A backfilled heartbeat older than the retention is not presence,
    // but it is a sighting: remembered when newer than what is.
    let old = clock.now_ms() - 5_000;
    let r = s
        .heartbeat(&sp, &[beat_at(user("bob"), old)])
        .await
        .unwrap();
    assert_eq!((r.accepted, r.joined), (0, 0));
    let st = status_of(&s, &sp, user("bob")).await;
    assert_eq!((st.status, st.last_seen_ms), (Status::Offline, Some(old)));
    assert_eq!(s.count(&sp, None).await.unwrap().total(), 0);
    s.heartbeat(&sp, &[beat_at(user("ann"), T0 - 1)])
        .await
        .unwrap();
    assert_eq!(
        status_of(&s, &sp, user("ann")).await.last_seen_ms,
        Some(T0),
        "an older sighting does not move a remembered time back"
    );
}

pub(super) async fn remembered_until_the_horizon(s: Store, clock: ManualClock) {
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
    let st = status_of(&s, &sp, user("ann")).await;
    assert_eq!(st.last_seen_ms, None);
    assert_eq!(
        users(&*s).seen_anywhere(&[id("ann")]).await.unwrap()[0].last_seen_ms,
        None
    );

    // remember_ms 0 turns it off; a shorter horizon applies to what is
    // already remembered.
    let off = space("c-rem-off");
    configure(&s, &off, |c| c.remember_ms = 0).await;
    s.heartbeat(&off, &[beat(user("ann"))]).await.unwrap();
    s.leave(&off, &[user("ann")]).await.unwrap();
    assert_eq!(status_of(&s, &off, user("ann")).await.last_seen_ms, None);
    let shrink = space("c-rem-shrink");
    s.heartbeat(&shrink, &[beat(user("bob"))]).await.unwrap();
    s.leave(&shrink, &[user("bob")]).await.unwrap();
    clock.advance(Duration::from_secs(60));
    assert!(
        status_of(&s, &shrink, user("bob"))
            .await
            .last_seen_ms
            .is_some()
    );
    configure(&s, &shrink, |c| c.remember_ms = 30_000).await;
    assert_eq!(status_of(&s, &shrink, user("bob")).await.last_seen_ms, None);
    let too_long = SpaceConfig {
        remember_ms: crate::limits::MAX_REMEMBER_MS + 1,
        ..SpaceConfig::default()
    };
    assert!(is_invalid(
        &s.set_config(&shrink, too_long).await.unwrap_err()
    ));
}

/// Remembered times the sweep drops at the horizon are counted in
/// `TickReport::forgotten` (the server's `herenow_forgotten_total`), once
/// each, users and guests alike.
pub(super) async fn forgotten_times_are_counted(s: Store, clock: ManualClock) {
    let config = SpaceConfig {
        remember_ms: 10_000,
        remember_guests: true,
        ..SpaceConfig::default()
    };
    // One space where someone stays present, one that only remembers.
    let (busy, quiet) = (space("c-forget-busy"), space("c-forget-quiet"));
    for sp in [&busy, &quiet] {
        s.set_config(sp, config).await.unwrap();
    }
    s.heartbeat(
        &busy,
        &[beat(user("ann")), beat(guest("g1")), beat(user("cy"))],
    )
    .await
    .unwrap();
    s.heartbeat(&quiet, &[beat(user("bob"))]).await.unwrap();
    s.leave(&busy, &[user("ann"), guest("g1")]).await.unwrap();
    s.leave(&quiet, &[user("bob")]).await.unwrap();
    // A store may need several rounds to go over all it remembers.
    async fn forgotten(s: &Store) -> u64 {
        let mut n = 0;
        for _ in 0..16 {
            n += s.tick().await.expect("tick").forgotten;
        }
        n
    }
    assert_eq!(forgotten(&s).await, 0);
    clock.advance(Duration::from_millis(9_999));
    s.heartbeat(&busy, &[beat(user("cy"))]).await.unwrap();
    assert_eq!(forgotten(&s).await, 0, "not before the horizon");
    // Past the horizon, and past any delay a store puts on revisiting a
    // space that only remembers.
    clock.advance(Duration::from_secs(20));
    s.heartbeat(&busy, &[beat(user("cy"))]).await.unwrap();
    assert_eq!(forgotten(&s).await, 3);
    assert_eq!(forgotten(&s).await, 0, "each counted once");
    let st = s.status(&busy, &[user("ann"), user("cy")]).await.unwrap();
    assert_eq!(st[0].last_seen_ms, None);
    assert_eq!(st[1].status, Status::Online);
}

pub(super) async fn seen_anywhere_over_spaces(s: Store, clock: ManualClock) {
    let (a, b) = (space("c-any-a"), space("c-any-b"));
    s.heartbeat(&a, &[beat(user("ann"))]).await.unwrap();
    clock.advance(Duration::from_secs(1));
    s.leave(&a, &[user("ann")]).await.unwrap();
    let got = users(&*s)
        .seen_anywhere(&[id("ann"), id("nobody")])
        .await
        .unwrap();
    assert_eq!(got.len(), 2);
    assert_eq!(got[0].id, id("ann"));
    assert_eq!(got[0].status, Status::Offline);
    assert_eq!(got[0].last_seen_ms, Some(T0 + 1_000));
    assert_eq!(got[0].space.as_ref(), Some(&a));
    assert_eq!(got[1], crate::store::SeenAnywhere::unseen(id("nobody")));

    clock.advance(Duration::from_secs(2));
    s.heartbeat(&b, &[beat(user("ann"))]).await.unwrap();
    let got = users(&*s).seen_anywhere(&[id("ann")]).await.unwrap();
    assert_eq!(got[0].status, Status::Online);
    assert_eq!(got[0].last_seen_ms, Some(T0 + 3_000));
    assert_eq!(got[0].space.as_ref(), Some(&b));

    // Online somewhere beats a newer time elsewhere only in status: the
    // time and space are the newest sighting.
    clock.advance(Duration::from_secs(120));
    s.heartbeat(&a, &[beat(user("ann"))]).await.unwrap();
    s.leave(&a, &[user("ann")]).await.unwrap();
    let got = users(&*s).seen_anywhere(&[id("ann")]).await.unwrap();
    assert_eq!(got[0].status, Status::Away, "away in b, left a");
    assert_eq!(got[0].last_seen_ms, Some(T0 + 123_000));
    assert_eq!(got[0].space.as_ref(), Some(&a));
    // Guests are not users: a guest "ann" is not the user ann.
    s.heartbeat(&b, &[beat(guest("gus"))]).await.unwrap();
    assert_eq!(
        users(&*s).seen_anywhere(&[id("gus")]).await.unwrap()[0].last_seen_ms,
        None
    );

    assert!(is_invalid(
        &users(&*s).seen_anywhere(&[]).await.unwrap_err()
    ));
    let too_many: Vec<MemberId> = (0..=crate::limits::MAX_BATCH)
        .map(|i| id(&format!("u{i}")))
        .collect();
    assert!(is_invalid(
        &users(&*s).seen_anywhere(&too_many).await.unwrap_err()
    ));
    let many: Vec<MemberId> = (0..crate::limits::MAX_BATCH)
        .map(|i| id(&format!("u{i}")))
        .collect();
    assert_eq!(
        users(&*s).seen_anywhere(&many).await.unwrap().len(),
        many.len()
    );
}

pub(super) async fn erase_forgets_everywhere(s: Store, clock: ManualClock) {
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

    let report = users(&*s).erase_user(&id("ann")).await.unwrap();
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
        users(&*s).seen_anywhere(&[id("ann")]).await.unwrap()[0].last_seen_ms,
        None
    );
    assert!(s.friends(&id("ann")).await.unwrap().is_empty());
    assert_eq!(s.friends(&id("bob")).await.unwrap(), vec![id("cy")]);
    // bob is untouched.
    assert_eq!(status_of(&s, &a, user("bob")).await.status, Status::Online);
    // Erasing someone unknown (or twice) is not an error and does nothing.
    assert_eq!(
        users(&*s).erase_user(&id("ann")).await.unwrap(),
        crate::store::ErasureReport::default()
    );
    // The user may come back as new.
    s.heartbeat(&a, &[beat(user("ann"))]).await.unwrap();
    assert_eq!(status_of(&s, &a, user("ann")).await.status, Status::Online);
}
