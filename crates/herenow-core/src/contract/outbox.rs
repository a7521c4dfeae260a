//! The webhook outbox ([`crate::outbox`]): what a store keeps for
//! backends, claimed by one consumer at a time, acknowledged once told.
//!
//! A factory may share one backend between scenarios, and another
//! scenario's space may have left events behind: every claim here keeps
//! the events of its own spaces and acknowledges the rest away.

use super::*;
use crate::limits;
use crate::outbox::{OutboxEvent, OutboxKind, OutboxOptions, SpaceHook};

/// Claims for `consumer` and returns the events of `spaces`, in order,
/// acknowledging (discarding) every other space's.
async fn claim(s: &Store, consumer: &str, idle_ms: u64, spaces: &[&SpaceName]) -> Vec<OutboxEvent> {
    let mut mine = Vec::new();
    // Enough rounds to get past leftovers of other scenarios.
    for _ in 0..50 {
        let got = outbox(&**s)
            .outbox_claim(consumer, 100, idle_ms)
            .await
            .expect("claim");
        if got.is_empty() {
            break;
        }
        let (keep, other): (Vec<_>, Vec<_>) =
            got.into_iter().partition(|e| spaces.contains(&&e.space));
        let others: Vec<String> = other.into_iter().map(|e| e.id).collect();
        if !others.is_empty() {
            outbox(&**s).outbox_ack(&others).await.expect("ack");
        }
        let done = keep.is_empty();
        mine.extend(keep);
        if done && others.is_empty() {
            break;
        }
    }
    mine
}

/// Opens the outbox with the default options.
async fn open_outbox(s: &Store) {
    outbox(&**s)
        .outbox_open(OutboxOptions::default())
        .await
        .unwrap();
}

async fn ack(s: &Store, events: &[OutboxEvent]) {
    let ids: Vec<String> = events.iter().map(|e| e.id.clone()).collect();
    outbox(&**s).outbox_ack(&ids).await.expect("ack");
}

/// (kind, member id) of each event, `-` for a space's own events.
fn said(events: &[OutboxEvent]) -> Vec<(OutboxKind, String)> {
    events
        .iter()
        .map(|e| {
            (
                e.kind,
                e.member
                    .as_ref()
                    .map_or_else(|| "-".to_owned(), |m| m.id.to_string()),
            )
        })
        .collect()
}

fn k(kind: OutboxKind, id: &str) -> (OutboxKind, String) {
    (kind, id.to_owned())
}

/// The events about member `id` (or, for `-`, the space's own), in the
/// order claimed. A store may keep a big space's shards apart, so order
/// is promised per member, and `occupied` / `vacated` are checked apart.
fn of(events: &[OutboxEvent], id: &str) -> Vec<(OutboxKind, String)> {
    said(events).into_iter().filter(|(_, m)| m == id).collect()
}

pub(super) async fn outbox_keeps_events_until_acknowledged(s: Store, _clock: ManualClock) {
    let sp = space("c-outbox-ack");
    // Nothing is kept before the outbox is open.
    s.heartbeat(&sp, &[beat(user("early"))]).await.unwrap();
    s.leave(&sp, &[user("early")]).await.unwrap();
    let kept = outbox(&*s).outbox_message(&sp, "early").await.unwrap();
    assert!(!kept, "a message is kept only while the outbox captures");
    open_outbox(&s).await;
    assert!(claim(&s, "one", 60_000, &[&sp]).await.is_empty());

    s.heartbeat(&sp, &[beat(user("ann")), beat(guest("10.0.0.1"))])
        .await
        .unwrap();
    let got = claim(&s, "one", 60_000, &[&sp]).await;
    assert_eq!(got.len(), 3, "{:?}", said(&got));
    assert_eq!(
        of(&got, "-"),
        [k(OutboxKind::Occupied, "-")],
        "the first join occupies the space"
    );
    assert_eq!(of(&got, "ann"), [k(OutboxKind::Join, "ann")]);
    let join = got.iter().find(|e| e.member == Some(user("ann"))).unwrap();
    assert_eq!(join.space, sp);
    assert_eq!(join.status, Some(Status::Online));
    assert_eq!((join.last_seen_ms, join.at_ms), (Some(T0), T0));
    assert!(got.iter().any(|e| e.member == Some(guest("10.0.0.1"))));
    let mut ids: Vec<&str> = got.iter().map(|e| e.id.as_str()).collect();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), 3, "ids are unique");

    // Claimed and not acknowledged: not handed out again before the idle
    // time, to this consumer or another.
    assert!(claim(&s, "one", 60_000, &[&sp]).await.is_empty());
    assert!(claim(&s, "two", 60_000, &[&sp]).await.is_empty());
    ack(&s, &got).await;
    // A heartbeat that changes no status says nothing; metadata does.
    s.heartbeat(&sp, &[beat(user("ann"))]).await.unwrap();
    s.heartbeat(
        &sp,
        &[beat_meta(
            user("ann"),
            Some(Metadata::from_json(r#"{"page":"/"}"#).unwrap()),
        )],
    )
    .await
    .unwrap();
    let got = claim(&s, "one", 60_000, &[&sp]).await;
    assert_eq!(said(&got), [k(OutboxKind::Update, "ann")]);
    assert_eq!(got[0].meta.as_ref().unwrap().as_json(), r#"{"page":"/"}"#);
    ack(&s, &got).await;
    // Acknowledging twice, or an id never given, is harmless.
    ack(&s, &got).await;
    outbox(&*s)
        .outbox_ack(&["no-such-event".to_owned()])
        .await
        .unwrap();
    // An acknowledgement is a batch: neither empty nor past the bound.
    for len in [0, limits::MAX_BATCH + 1] {
        let e = outbox(&*s).outbox_ack(&vec![String::new(); len]).await;
        assert!(matches!(e, Err(Error::Invalid(_))), "{len} ids: {e:?}");
    }
    // A consumer's name is bounded (stores keep one entry per name).
    for bad in [String::new(), "c".repeat(201)] {
        let e = outbox(&*s).outbox_claim(&bad, 1, 0).await;
        assert!(matches!(e, Err(Error::Invalid(_))), "{bad:?}: {e:?}");
    }
    assert!(claim(&s, "one", 0, &[&sp]).await.is_empty());
}

pub(super) async fn outbox_keeps_messages_in_order_with_the_space(s: Store, _clock: ManualClock) {
    let sp = space("c-outbox-message");
    open_outbox(&s).await;
    let message = |body: String| {
        let s = s.clone();
        let sp = sp.clone();
        async move { outbox(&*s).outbox_message(&sp, &body).await }
    };
    // Bodies are opaque: quotes, newlines, any character, kept as given.
    let first = r#"{"name":"client_event","data":"{\"a\":\"é\n\"}"}"#.to_owned();
    let largest = "x".repeat(limits::MAX_OUTBOX_MESSAGE_BYTES);
    s.heartbeat(&sp, &[beat(user("ann"))]).await.unwrap();
    assert!(message(first.clone()).await.unwrap());
    s.leave(&sp, &[user("ann")]).await.unwrap();
    assert!(message(largest.clone()).await.unwrap());
    let over = message("x".repeat(limits::MAX_OUTBOX_MESSAGE_BYTES + 1)).await;
    assert!(
        matches!(
            over,
            Err(Error::Invalid(InvalidInput::MessageTooLarge { .. }))
        ),
        "{over:?}"
    );
    let got = claim(&s, "one", 60_000, &[&sp]).await;
    // In order with the space's own events (a big space's shards, which
    // hold its members, may be claimed apart).
    assert_eq!(
        of(&got, "-"),
        [
            k(OutboxKind::Occupied, "-"),
            k(OutboxKind::Message, "-"),
            k(OutboxKind::Vacated, "-"),
            k(OutboxKind::Message, "-"),
        ],
        "each message in its place, the refused one not kept"
    );
    assert_eq!(
        of(&got, "ann"),
        [k(OutboxKind::Join, "ann"), k(OutboxKind::Leave, "ann")]
    );
    let messages: Vec<&OutboxEvent> = got
        .iter()
        .filter(|e| e.kind == OutboxKind::Message)
        .collect();
    let bodies: Vec<Option<&str>> = messages.iter().map(|e| e.body.as_deref()).collect();
    assert_eq!(bodies, [Some(first.as_str()), Some(largest.as_str())]);
    assert_eq!((&messages[0].space, messages[0].at_ms), (&sp, T0));
    assert!(
        got.iter()
            .all(|e| e.body.is_some() == (e.kind == OutboxKind::Message))
    );
    ack(&s, &got).await;
    assert!(claim(&s, "one", 0, &[&sp]).await.is_empty());
}

pub(super) async fn outbox_reclaims_what_a_consumer_left(s: Store, clock: ManualClock) {
    let sp = space("c-outbox-reclaim");
    open_outbox(&s).await;
    s.heartbeat(&sp, &[beat(user("ann"))]).await.unwrap();
    let first = claim(&s, "dead", 60_000, &[&sp]).await;
    assert_eq!(first.len(), 2, "occupied, join: {:?}", said(&first));
    // The consumer dies without acknowledging. Until its claim is idle
    // long enough, nobody else gets the space's events, not even newer
    // ones: a member's events stay in order.
    clock.advance(Duration::from_secs(5));
    s.heartbeat(&sp, &[beat(user("bob"))]).await.unwrap();
    assert!(claim(&s, "heir", 30_000, &[&sp]).await.is_empty());
    clock.advance(Duration::from_secs(30));
    let again = claim(&s, "heir", 30_000, &[&sp]).await;
    assert_eq!(again.len(), 3, "{:?}", said(&again));
    assert_eq!(of(&again, "bob"), [k(OutboxKind::Join, "bob")]);
    for e in &first {
        assert!(
            again.iter().any(|a| a == e),
            "the abandoned {e:?} again, with its id"
        );
    }
    ack(&s, &again).await;
    assert!(claim(&s, "heir", 0, &[&sp]).await.is_empty());
    let stats = outbox(&*s).outbox_stats().await.unwrap();
    assert_eq!(stats.pending, 0, "{stats:?}");
}

pub(super) async fn outbox_follows_a_member_in_order(s: Store, clock: ManualClock) {
    let (a, b) = (space("c-outbox-order-a"), space("c-outbox-order-b"));
    open_outbox(&s).await;
    s.heartbeat(&a, &[beat(user("ann"))]).await.unwrap();
    s.heartbeat(&b, &[beat(user("ann"))]).await.unwrap();
    clock.advance(Duration::from_secs(60));
    settle(&s).await;
    s.heartbeat(&a, &[beat(user("ann"))]).await.unwrap();
    s.leave(&a, &[user("ann")]).await.unwrap();
    // b: away, then gone by time.
    clock.advance(Duration::from_secs(300));
    settle(&s).await;
    let got = claim(&s, "one", 60_000, &[&a, &b]).await;
    let in_a: Vec<OutboxEvent> = got.iter().filter(|e| e.space == a).cloned().collect();
    assert_eq!(
        of(&in_a, "ann"),
        [
            k(OutboxKind::Join, "ann"),
            k(OutboxKind::Away, "ann"),
            k(OutboxKind::Back, "ann"),
            k(OutboxKind::Leave, "ann"),
        ]
    );
    assert_eq!(
        of(&in_a, "-"),
        [k(OutboxKind::Occupied, "-"), k(OutboxKind::Vacated, "-")]
    );
    let (ann, _): (Vec<_>, Vec<_>) = in_a.iter().partition(|e| e.member.is_some());
    assert_eq!(ann[3].reason, Some(LeaveReason::Explicit));
    assert_eq!(ann[3].status, Some(Status::Offline));
    assert_eq!(ann[2].at_ms, T0 + 60_000);
    let in_b: Vec<OutboxEvent> = got.iter().filter(|e| e.space == b).cloned().collect();
    assert_eq!(
        of(&in_b, "ann"),
        [
            k(OutboxKind::Join, "ann"),
            k(OutboxKind::Away, "ann"),
            k(OutboxKind::Leave, "ann"),
        ]
    );
    assert_eq!(
        of(&in_b, "-"),
        [k(OutboxKind::Occupied, "-"), k(OutboxKind::Vacated, "-")]
    );
    let left = in_b.iter().rfind(|e| e.member.is_some()).unwrap();
    assert_eq!(left.reason, Some(LeaveReason::Timeout));
    assert_eq!(left.last_seen_ms, Some(T0), "{left:?}");
    ack(&s, &got).await;
}

pub(super) async fn outbox_is_bounded(s: Store, _clock: ManualClock) {
    let sp = space("c-outbox-cap");
    outbox(&*s)
        .outbox_open(OutboxOptions {
            max_events: 4,
            ..OutboxOptions::default()
        })
        .await
        .unwrap();
    let before = outbox(&*s).outbox_stats().await.unwrap().trimmed;
    let beats: Vec<Heartbeat> = (0..10).map(|i| beat(user(&format!("m{i}")))).collect();
    s.heartbeat(&sp, &beats).await.unwrap();
    let stats = outbox(&*s).outbox_stats().await.unwrap();
    // 11 events (occupied and ten joins) into room for 4.
    assert!(stats.trimmed >= before + 7, "{stats:?}");
    let got = claim(&s, "one", 60_000, &[&sp]).await;
    assert!(got.len() <= 4, "{:?}", said(&got));
    // The oldest are trimmed, the newest kept: `occupied` came first, so
    // it is gone, and joins are left. (Which joins is the store's order:
    // a space split over stripes or shards numbers one call's events
    // stripe by stripe, each member's in order.)
    assert!(
        !got.is_empty()
            && got
                .iter()
                .all(|e| e.kind == OutboxKind::Join && e.space == sp),
        "the oldest are trimmed, the newest kept: {:?}",
        said(&got)
    );
    ack(&s, &got).await;
    open_outbox(&s).await;
}

pub(super) async fn outbox_keeps_a_claiming_consumer_in_charge(s: Store, clock: ManualClock) {
    let sp = space("c-outbox-alive");
    open_outbox(&s).await;
    s.heartbeat(&sp, &[beat(user("ann"))]).await.unwrap();
    let held = claim(&s, "alive", 30_000, &[&sp]).await;
    assert_eq!(held.len(), 2);
    // Its endpoint is slow: nothing acknowledged for minutes, but it keeps
    // claiming, so it is alive and nobody, itself included, gets its
    // events twice.
    for round in 0..6 {
        clock.advance(Duration::from_secs(20));
        if round % 2 == 0 {
            assert!(claim(&s, "alive", 30_000, &[&sp]).await.is_empty());
        } else {
            // A claim for nothing (its queues are full) says it lives too.
            let none = outbox(&*s).outbox_claim("alive", 0, 30_000).await.unwrap();
            assert!(none.is_empty());
        }
        assert!(claim(&s, "other", 30_000, &[&sp]).await.is_empty());
    }
    // New events of its space are its too.
    s.heartbeat(&sp, &[beat(user("bob"))]).await.unwrap();
    assert!(claim(&s, "other", 30_000, &[&sp]).await.is_empty());
    let more = claim(&s, "alive", 30_000, &[&sp]).await;
    assert_eq!(of(&more, "bob"), [k(OutboxKind::Join, "bob")]);
    ack(&s, &held).await;
    ack(&s, &more).await;
}

fn hook(url: &str, kinds: &[OutboxKind]) -> SpaceHook {
    SpaceHook {
        url: url.to_owned(),
        kinds: kinds.to_vec(),
        secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw".to_owned(),
    }
}

/// Runs last: naming endpoints opens the outbox, and a shared backend
/// keeps it open for scenarios after.
pub(super) async fn outbox_keeps_spaces_endpoints(s: Store, _clock: ManualClock) {
    let sp = space("c-outbox-hooks");
    let other = space("c-outbox-hooks-other");
    assert!(
        endpoints(&*s).space_hooks(&sp).await.unwrap().is_empty(),
        "none at first"
    );
    let v0 = endpoints(&*s).space_hooks_version().await.unwrap();

    let hooks = vec![
        hook(
            "https://example.com/presence?token=1",
            &[OutboxKind::Join, OutboxKind::Leave],
        ),
        hook("http://10.0.0.7:8080/hooks", &OutboxKind::ALL),
    ];
    endpoints(&*s).set_space_hooks(&sp, &hooks).await.unwrap();
    assert_eq!(
        endpoints(&*s).space_hooks(&sp).await.unwrap(),
        hooks,
        "kept as given"
    );
    assert!(endpoints(&*s).space_hooks(&other).await.unwrap().is_empty());
    let v1 = endpoints(&*s).space_hooks_version().await.unwrap();
    assert_ne!(v1, v0, "a set changes the version");

    // Naming endpoints opened the outbox: the space's events are kept.
    assert!(outbox(&*s).outbox_stats().await.unwrap().open);
    s.heartbeat(&sp, &[beat(user("ann"))]).await.unwrap();
    let got = claim(&s, "hooks", 60_000, &[&sp]).await;
    assert_eq!(of(&got, "ann"), [k(OutboxKind::Join, "ann")]);
    ack(&s, &got).await;

    // Bad sets are refused whole and change nothing.
    let nine: Vec<SpaceHook> = (0..9)
        .map(|i| hook(&format!("https://h{i}.example/"), &[OutboxKind::Join]))
        .collect();
    let twice = vec![
        hook("https://a.example/", &[OutboxKind::Join]),
        hook("https://a.example/", &[OutboxKind::Leave]),
    ];
    let long_url = "https://example.com/".to_owned() + &"a".repeat(2_100);
    for (why, bad) in [
        ("nine endpoints", nine),
        ("a URL twice", twice),
        ("no kinds", vec![hook("https://b.example/", &[])]),
        (
            "a kind twice",
            vec![hook(
                "https://b.example/",
                &[OutboxKind::Join, OutboxKind::Join],
            )],
        ),
        ("a long URL", vec![hook(&long_url, &[OutboxKind::Join])]),
        ("an empty URL", vec![hook("", &[OutboxKind::Join])]),
        (
            "no secret",
            vec![SpaceHook {
                secret: String::new(),
                ..hook("https://b.example/", &[OutboxKind::Join])
            }],
        ),
    ] {
        let e = endpoints(&*s).set_space_hooks(&sp, &bad).await;
        assert!(matches!(e, Err(Error::Invalid(_))), "{why}: {e:?}");
    }
    assert_eq!(
        endpoints(&*s).space_hooks(&sp).await.unwrap(),
        hooks,
        "unchanged"
    );

    // Eight is the bound, not more.
    let eight: Vec<SpaceHook> = (0..8)
        .map(|i| hook(&format!("https://h{i}.example/"), &[OutboxKind::Vacated]))
        .collect();
    endpoints(&*s)
        .set_space_hooks(&other, &eight)
        .await
        .unwrap();
    assert_eq!(endpoints(&*s).space_hooks(&other).await.unwrap(), eight);

    // None removes them.
    endpoints(&*s).set_space_hooks(&sp, &[]).await.unwrap();
    endpoints(&*s).set_space_hooks(&other, &[]).await.unwrap();
    assert!(endpoints(&*s).space_hooks(&sp).await.unwrap().is_empty());
    assert!(endpoints(&*s).space_hooks(&other).await.unwrap().is_empty());
    assert_ne!(endpoints(&*s).space_hooks_version().await.unwrap(), v1);
}
