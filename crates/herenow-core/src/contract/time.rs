//! Scenarios where the clock moves: expiry at the retention, the events
//! status changes with time bring, and per-space policy.

use super::*;

pub(super) async fn expiry_after_retention(s: Store, clock: ManualClock) {
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
        status_of(&s, &sp, user("b")).await.last_seen_ms,
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

pub(super) async fn events_follow_status(s: Store, clock: ManualClock) {
    let sp = space("c-events");
    s.heartbeat(&sp, &[beat(user("early"))]).await.unwrap();
    let mut sub = s.subscribe(&sp).await.unwrap();
    assert_eq!(ids(&sub.snapshot), ["early"]);
    assert_eq!(sub.snapshot[0].status, Status::Online);
    let meta = Some(Metadata::from_json(r#"{"name":"Ada"}"#).unwrap());
    s.heartbeat(&sp, &[beat_meta(user("ada"), meta.clone())])
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
    s.heartbeat(&sp, &[beat_meta(user("ada"), meta2.clone())])
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

pub(super) async fn config_per_space(s: Store, clock: ManualClock) {
    let sp = space("c-config");
    assert_eq!(s.config(&sp).await.unwrap(), SpaceConfig::default());
    let fast = SpaceConfig {
        online_ms: 5_000,
        away_ms: 20_000,
        window_ms: 30_000,
        retention_ms: 60_000,
        remember_ms: 3_600_000,
        remember_guests: true,
        grace_ms: 2_000,
    };
    s.set_config(&sp, fast).await.unwrap();
    assert_eq!(s.config(&sp).await.unwrap(), fast);
    assert_eq!(
        s.config(&space("c-config-other")).await.unwrap(),
        SpaceConfig::default()
    );
    s.heartbeat(&sp, &[beat(user("a"))]).await.unwrap();
    clock.advance(Duration::from_secs(5));
    assert_eq!(status_of(&s, &sp, user("a")).await.status, Status::Away);
    let bad = SpaceConfig {
        online_ms: 10,
        away_ms: 5,
        ..fast
    };
    assert!(is_invalid(&s.set_config(&sp, bad).await.unwrap_err()));
    let endless_grace = SpaceConfig {
        grace_ms: crate::limits::MAX_GRACE_MS + 1,
        ..fast
    };
    assert!(is_invalid(
        &s.set_config(&sp, endless_grace).await.unwrap_err()
    ));
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
