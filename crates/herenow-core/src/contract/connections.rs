//! Scenarios of live connections: first joins, last leaves, expiry
//! without pings, invisible connections, and their bad input.

use super::*;

fn conn_ids(conns: &[crate::conn::Connection]) -> Vec<String> {
    conns.iter().map(|c| c.conn.to_string()).collect()
}

pub(super) async fn connections_join_first_leave_last(s: Store, _clock: ManualClock) {
    let sp = space("c-conns");
    let mut sub = s.subscribe(&sp).await.unwrap();
    let phone = attach(user("ann"), "c-phone", Some(r#"{"device":"phone"}"#), false);
    let r = attach_ok(&s, &sp, &phone).await;
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
    let st = status_of(&s, &sp, user("ann")).await;
    assert_eq!(st.status, Status::Online);
    assert_eq!(st.last_seen_ms, Some(T0));

    // A second device: no join, a `connect` with its own metadata.
    let laptop = attach(
        user("ann"),
        "c-laptop",
        Some(r#"{"device":"laptop"}"#),
        false,
    );
    let r = attach_ok(&s, &sp, &laptop).await;
    assert!(r.opened && !r.joined, "{r:?}");
    let e = next_event(&mut sub).await;
    assert_eq!(
        (e.kind, e.conn.as_ref().map(ConnId::as_str)),
        (EventKind::Connect, Some("c-laptop"))
    );
    assert_eq!(e.meta, laptop.meta);
    let conns = live(&*s)
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
    let r = attach_ok(&s, &sp, &phone).await;
    assert!(!r.opened && !r.joined);
    no_event(&mut sub).await;
    let typing = attach(
        user("ann"),
        "c-phone",
        Some(r#"{"device":"phone","typing":true}"#),
        false,
    );
    attach_ok(&s, &sp, &typing).await;
    let e = next_event(&mut sub).await;
    assert_eq!(
        (e.kind, e.conn.as_ref().map(ConnId::as_str)),
        (EventKind::Update, Some("c-phone"))
    );
    assert_eq!(e.meta, typing.meta);

    // Closing one device: a `disconnect`, still online; the last: `leave`.
    let r = detach_ok(&s, &sp, user("ann"), "c-phone").await;
    assert!(r.found && !r.left, "{r:?}");
    let e = next_event(&mut sub).await;
    assert_eq!(
        (e.kind, e.conn.as_ref().map(ConnId::as_str), e.status),
        (EventKind::Disconnect, Some("c-phone"), Status::Online)
    );
    let st = status_of(&s, &sp, user("ann")).await;
    assert_eq!(st.status, Status::Online);
    let r = detach_ok(&s, &sp, user("ann"), "c-laptop").await;
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
    let st = status_of(&s, &sp, user("ann")).await;
    assert_eq!(st.status, Status::Offline);
    assert!(live(&*s).connections(&sp, &[user("ann")]).await.unwrap()[0].is_empty());
    // Closing again, or someone else's connection, finds nothing.
    let r = detach_ok(&s, &sp, user("ann"), "c-laptop").await;
    assert!(!r.found && !r.left);
    attach_ok(&s, &sp, &attach(user("bo"), "c-bo", None, false)).await;
    assert_eq!(next_event(&mut sub).await.kind, EventKind::Join);
    let r = detach_ok(&s, &sp, user("ann"), "c-bo").await;
    assert!(!r.found);
    no_event(&mut sub).await;
    assert_eq!(s.count(&sp, None).await.unwrap().users, 1);
}

pub(super) async fn connections_expire_without_pings(s: Store, clock: ManualClock) {
    let sp = space("c-ghosts");
    let mut sub = s.subscribe(&sp).await.unwrap();
    attach_ok(&s, &sp, &attach(user("cy"), "g-tab1", None, false)).await;
    attach_ok(&s, &sp, &attach(user("cy"), "g-tab2", None, false)).await;
    attach_ok(&s, &sp, &attach(guest("visitor"), "g-guest", None, false)).await;
    for _ in 0..3 {
        next_event(&mut sub).await;
    }
    clock.advance(Duration::from_secs(20));
    // tab2 and the guest keep pinging; tab1 vanished without a close.
    attach_ok(&s, &sp, &attach(user("cy"), "g-tab2", None, false)).await;
    attach_ok(&s, &sp, &attach(guest("visitor"), "g-guest", None, false)).await;
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
        conn_ids(&live(&*s).connections(&sp, &[user("cy")]).await.unwrap()[0]),
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
    let st = status_of(&s, &sp, user("cy")).await;
    assert_eq!(st.status, Status::Offline);
    let conns = live(&*s)
        .connections(&sp, &[user("cy"), guest("visitor")])
        .await
        .unwrap();
    assert!(conns.iter().all(Vec::is_empty));
}

pub(super) async fn invisible_connections(s: Store, _clock: ManualClock) {
    let sp = space("c-invisible");
    let mut sub = s.subscribe(&sp).await.unwrap();
    // Invisible from the start: no event, not listed, not counted.
    let r = live(&*s)
        .attach(
            &sp,
            &attach(user("dee"), "i-hidden", Some(r#"{"x":1}"#), true),
        )
        .await
        .unwrap();
    assert!(r.opened && !r.joined);
    no_event(&mut sub).await;
    let st = status_of(&s, &sp, user("dee")).await;
    assert_eq!((st.status, st.last_seen_ms), (Status::Offline, None));
    assert_eq!(s.count(&sp, None).await.unwrap().total(), 0);
    let page = s.list(&sp, &ListQuery::default()).await.unwrap();
    assert!(page.members.is_empty());
    let conns = live(&*s).connections(&sp, &[user("dee")]).await.unwrap();
    assert_eq!(conn_ids(&conns[0]), ["i-hidden"]);
    assert!(conns[0][0].invisible);
    // A visible device joins; turning it invisible is a leave, and back a
    // join again.
    let r = attach_ok(&s, &sp, &attach(user("dee"), "i-shown", None, false)).await;
    assert!(r.joined);
    assert_eq!(next_event(&mut sub).await.kind, EventKind::Join);
    let r = attach_ok(&s, &sp, &attach(user("dee"), "i-shown", None, true)).await;
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
    let r = attach_ok(&s, &sp, &attach(user("dee"), "i-shown", None, false)).await;
    assert!(r.joined);
    assert_eq!(next_event(&mut sub).await.kind, EventKind::Join);
    // Closing the invisible one says nothing.
    let r = detach_ok(&s, &sp, user("dee"), "i-hidden").await;
    assert!(r.found && !r.left);
    no_event(&mut sub).await;
    assert_eq!(s.count(&sp, None).await.unwrap().users, 1);
}

pub(super) async fn connection_bad_input(s: Store, _clock: ManualClock) {
    let sp = space("c-conn-bad");
    let mut short = attach(user("eve"), "b-1", None, false);
    short.ttl_ms = 0;
    let err = live(&*s).attach(&sp, &short).await.unwrap_err();
    assert!(
        matches!(
            err,
            Error::Invalid(InvalidInput::ConnTtlOutOfRange { ttl_ms: 0 })
        ),
        "{err:?}"
    );
    attach_ok(&s, &sp, &attach(user("eve"), "b-1", None, false)).await;
    // Another member cannot take over a connection id.
    let err = live(&*s)
        .attach(&sp, &attach(user("mallory"), "b-1", None, false))
        .await
        .unwrap_err();
    assert!(
        matches!(err, Error::Invalid(InvalidInput::ConnIdTaken)),
        "{err:?}"
    );
    let st = status_of(&s, &sp, user("mallory")).await;
    assert_eq!(st.status, Status::Offline);
    // A member's connections are bounded.
    for i in 1..crate::limits::MAX_CONNS_PER_MEMBER {
        live(&*s)
            .attach(
                &sp,
                &attach(user("eve"), &format!("b-more-{i}"), None, true),
            )
            .await
            .unwrap();
    }
    let err = live(&*s)
        .attach(&sp, &attach(user("eve"), "b-one-too-many", None, false))
        .await
        .unwrap_err();
    assert!(
        matches!(err, Error::Invalid(InvalidInput::TooManyConnections)),
        "{err:?}"
    );
    let conns = live(&*s).connections(&sp, &[user("eve")]).await.unwrap();
    assert_eq!(conns[0].len(), crate::limits::MAX_CONNS_PER_MEMBER);
    // Bad batches of look-ups.
    assert!(is_invalid(
        &live(&*s).connections(&sp, &[]).await.unwrap_err()
    ));
}
