use herenow_core::capability::UserIndex;
use herenow_core::store::PresenceStore;

use super::*;

/// The body of version 6, before the grace and held members.
#[derive(Serialize)]
struct BodyV6 {
    taken_ms: Millis,
    spaces: Vec<SpaceDumpV6>,
    friends: Vec<(String, Vec<String>)>,
    mark: u64,
    seen_seed: u64,
    remembered: Vec<(String, Vec<RememberedEntry>)>,
    outbox: Vec<OutboxEvent>,
    hooks: Vec<(String, Vec<SpaceHook>)>,
}

/// The body of version 5, before outbox messages' bodies.
#[derive(Serialize)]
struct BodyV5 {
    taken_ms: Millis,
    spaces: Vec<SpaceDumpV6>,
    friends: Vec<(String, Vec<String>)>,
    mark: u64,
    seen_seed: u64,
    remembered: Vec<(String, Vec<RememberedEntry>)>,
    outbox: Vec<OutboxEventV1>,
    hooks: Vec<(String, Vec<SpaceHook>)>,
}

/// The body of version 1, before `mark`.
#[derive(Serialize)]
struct BodyV1 {
    taken_ms: Millis,
    spaces: Vec<SpaceDumpV2>,
    friends: Vec<(String, Vec<String>)>,
}

#[tokio::test]
async fn a_version_5_snapshot_keeps_its_waiting_webhook_events() {
    use herenow_core::capability::WebhookOutbox;
    let store = MemoryStore::default();
    store.outbox_open(Default::default()).await.unwrap();
    let lobby = SpaceName::new("lobby").unwrap();
    let ann = MemberKey::user(MemberId::new("ann").unwrap());
    store
        .heartbeat(&lobby, &[Heartbeat::now(ann)])
        .await
        .unwrap();
    let bytes = store.snapshot();
    let body: Body = postcard::from_bytes(&bytes[HEADER..]).unwrap();
    let v5 = BodyV5 {
        taken_ms: body.taken_ms,
        spaces: body.spaces.into_iter().map(SpaceDump::downgrade).collect(),
        friends: body.friends,
        mark: body.mark,
        seen_seed: body.seen_seed,
        remembered: body.remembered,
        outbox: body.outbox.iter().map(OutboxEventV1::from).collect(),
        hooks: body.hooks,
    };
    let restored = MemoryStore::default();
    restored
        .restore(&super::fuzz::framed(
            5,
            &postcard::to_allocvec(&v5).unwrap(),
        ))
        .unwrap();
    let events = |s: MemoryStore| async move { s.outbox_claim("c", 10, 0).await.unwrap() };
    let before = events(store).await;
    assert_eq!(before.len(), 2, "{before:?}");
    assert_eq!(events(restored).await, before);
}

impl SpaceDump {
    /// The space as versions 3 to 6 wrote it.
    fn downgrade(self) -> SpaceDumpV6 {
        SpaceDumpV6 {
            name: self.name,
            config: self.config.into(),
            members: self
                .members
                .into_iter()
                .map(|m| MemberDumpV6 {
                    guest: m.guest,
                    id: m.id,
                    last_seen_ms: m.last_seen_ms,
                    meta: m.meta,
                })
                .collect(),
        }
    }
}

#[tokio::test]
async fn members_connections_held_are_restored_in_their_grace_and_leave_after_it() {
    use herenow_core::capability::LiveConnections;
    use herenow_core::conn::{Attach, ConnId};
    use herenow_core::time::{Clock, ManualClock};
    use std::time::Duration;
    let clock = ManualClock::new(1_000_000);
    let store = MemoryStore::new(Arc::new(clock.clone()), SpaceConfig::default());
    let lobby = SpaceName::new("lobby").unwrap();
    let ann = MemberKey::user(MemberId::new("ann").unwrap());
    let bob = MemberKey::user(MemberId::new("bob").unwrap());
    let meta = Metadata::from_json(r#"{"name":"Ann"}"#).unwrap();
    let attach = |member: &MemberKey, conn: &str, meta: Option<Metadata>| Attach {
        member: member.clone(),
        conn: ConnId::new(conn).unwrap(),
        meta,
        invisible: false,
        ttl_ms: 30_000,
    };
    store
        .attach(&lobby, &attach(&ann, "a1", Some(meta.clone())))
        .await
        .unwrap();
    store
        .heartbeat(&lobby, &[Heartbeat::now(bob.clone())])
        .await
        .unwrap();
    let bytes = store.snapshot();

    // The process dies; a new one restores and its clock has moved on.
    clock.advance(Duration::from_secs(2));
    let restored = MemoryStore::new(Arc::new(clock.clone()), SpaceConfig::default());
    restored.restore(&bytes).unwrap();
    let conns = restored
        .connections(&lobby, &[ann.clone(), bob.clone()])
        .await
        .unwrap();
    assert_eq!(conns[0].len(), 1, "ann is held in her grace");
    assert!(conns[0][0].lingering);
    assert_eq!(conns[0][0].expires_ms, clock.now_ms() + 5_000);
    assert!(conns[1].is_empty(), "bob's heartbeats keep their own rules");

    // Ann comes back within the grace: nothing to tell.
    let mut sub = restored.subscribe(&lobby).await.unwrap();
    let back = restored
        .attach(&lobby, &attach(&ann, "a2", Some(meta.clone())))
        .await
        .unwrap();
    assert!(back.resumed && !back.joined);
    clock.advance(Duration::from_secs(6));
    restored.tick().await.unwrap();
    assert!(sub.events.try_recv().unwrap().is_none(), "no event at all");

    // A version 6 snapshot (no grace, nobody held) still reads.
    let body: Body = postcard::from_bytes(&bytes[HEADER..]).unwrap();
    let v6 = BodyV6 {
        taken_ms: body.taken_ms,
        spaces: body.spaces.into_iter().map(SpaceDump::downgrade).collect(),
        friends: body.friends,
        mark: body.mark,
        seen_seed: body.seen_seed,
        remembered: body.remembered,
        outbox: body.outbox,
        hooks: body.hooks,
    };
    let old = MemoryStore::new(Arc::new(clock.clone()), SpaceConfig::default());
    old.restore(&super::fuzz::framed(
        6,
        &postcard::to_allocvec(&v6).unwrap(),
    ))
    .unwrap();
    assert_eq!(old.config(&lobby).await.unwrap().grace_ms, 5_000);
    let conns = old.connections(&lobby, &[ann]).await.unwrap();
    assert!(conns[0].is_empty());
}

#[tokio::test]
async fn a_marked_snapshot_hands_its_mark_back_and_version_1_still_reads() {
    let store = MemoryStore::default();
    let lobby = SpaceName::new("lobby").unwrap();
    let ann = MemberKey::user(MemberId::new("ann").unwrap());
    store
        .heartbeat(&lobby, &[Heartbeat::now(ann.clone())])
        .await
        .unwrap();
    let restored = MemoryStore::default();
    let report = restored.restore(&store.snapshot_marked(7)).unwrap();
    assert_eq!((report.mark, report.members), (7, 1));

    // A version 1 file, as herenow wrote it before marks.
    let v1 = BodyV1 {
        taken_ms: 1,
        spaces: vec![SpaceDumpV2 {
            name: "lobby".into(),
            config: [5_000, 20_000, 30_000, 60_000],
            members: vec![MemberDumpV6 {
                guest: false,
                id: "ann".into(),
                last_seen_ms: store.shared.clock.now_ms(),
                meta: None,
            }],
        }],
        friends: vec![("ann".into(), vec!["bob".into()])],
    };
    let body = postcard::to_stdvec(&v1).unwrap();
    let mut bytes = MAGIC.to_vec();
    bytes.extend_from_slice(&1u32.to_le_bytes());
    bytes.extend_from_slice(&crc32fast::hash(&body).to_le_bytes());
    bytes.extend_from_slice(&body);
    let old = MemoryStore::default();
    let report = old.restore(&bytes).unwrap();
    assert_eq!((report.mark, report.members, report.friend_sets), (0, 1, 1));
    let config = old.config(&lobby).await.unwrap();
    assert_eq!((config.online_ms, config.retention_ms), (5_000, 60_000));
    assert_eq!(config.remember_ms, SpaceConfig::default().remember_ms);
}

#[test]
fn a_friend_set_past_the_bound_is_refused() {
    let bytes = MemoryStore::default().snapshot();
    let mut body: Body = postcard::from_bytes(&bytes[HEADER..]).unwrap();
    let most = herenow_core::limits::MAX_FRIENDS;
    let friends: Vec<String> = (0..=most).map(|i| format!("u{i}")).collect();
    body.friends = vec![("ann".into(), friends)];
    let encode = |body: &Body| {
        let body = postcard::to_stdvec(body).unwrap();
        let mut out = bytes[..HEADER - 4].to_vec();
        out.extend_from_slice(&crc32fast::hash(&body).to_le_bytes());
        out.extend_from_slice(&body);
        out
    };
    let err = MemoryStore::default().restore(&encode(&body)).unwrap_err();
    assert!(
        err.to_string()
            .contains("5001 friends of one user, over 5000"),
        "{err}"
    );
    // At the bound, it restores.
    body.friends[0].1.pop();
    let restored = MemoryStore::default();
    assert_eq!(restored.restore(&encode(&body)).unwrap().friend_sets, 1);
}

/// Versions 2 to 4, written as postcard writes a struct (its fields in
/// sequence), read back with what each held.
#[tokio::test]
async fn versions_2_to_4_still_read() {
    let store = MemoryStore::default();
    let lobby = SpaceName::new("lobby").unwrap();
    let ann = MemberKey::user(MemberId::new("ann").unwrap());
    store
        .heartbeat(&lobby, &[Heartbeat::now(ann)])
        .await
        .unwrap();
    store
        .set_friends(
            &MemberId::new("ann").unwrap(),
            &[MemberId::new("bob").unwrap()],
        )
        .await
        .unwrap();
    let body: Body = postcard::from_bytes(&store.snapshot_marked(9)[HEADER..]).unwrap();
    let spaces: Vec<SpaceDumpV6> = body.spaces.into_iter().map(SpaceDump::downgrade).collect();
    let (taken, friends, seed) = (body.taken_ms, &body.friends, body.seen_seed);
    let no_spaces: Vec<SpaceDumpV2> = Vec::new();
    let no_events: Vec<OutboxEventV1> = Vec::new();
    let v2 = postcard::to_stdvec(&(taken, &no_spaces, friends, 9u64)).unwrap();
    let v3 = (taken, &spaces, friends, 9u64, seed, &body.remembered);
    let v4 = postcard::to_stdvec(&(v3, &no_events)).unwrap();
    let v3 = postcard::to_stdvec(&v3).unwrap();
    for (version, body, members) in [(2, v2, 0), (3, v3, 1), (4, v4, 1)] {
        let old = MemoryStore::default();
        let report = old.restore(&super::fuzz::framed(version, &body)).unwrap();
        assert_eq!(
            (report.mark, report.members, report.friend_sets),
            (9, members, 1),
            "version {version}"
        );
        if version >= 3 {
            assert_eq!(old.shared.seen.seed(), seed);
        }
    }
}

#[tokio::test]
async fn remembered_times_survive_a_snapshot_with_their_fingerprints() {
    let clock = herenow_core::time::ManualClock::new(1_700_000_000_000);
    let store = MemoryStore::new(Arc::new(clock.clone()), SpaceConfig::default());
    let lobby = SpaceName::new("lobby").unwrap();
    let key = |id: &str| MemberKey::user(MemberId::new(id).unwrap());
    store
        .heartbeat(
            &lobby,
            &[Heartbeat::now(key("ann")), Heartbeat::now(key("bob"))],
        )
        .await
        .unwrap();
    store.leave(&lobby, &[key("ann")]).await.unwrap();
    let bytes = store.snapshot();

    // Another store, with another random seed until it restores.
    let restored = MemoryStore::new(Arc::new(clock.clone()), SpaceConfig::default());
    assert_ne!(restored.shared.seen.seed(), store.shared.seen.seed());
    let report = restored.restore(&bytes).unwrap();
    assert_eq!((report.members, report.remembered), (1, 1));
    let st = restored
        .status(&lobby, &[key("ann"), key("bob")])
        .await
        .unwrap();
    assert_eq!(st[0].status, herenow_core::policy::Status::Offline);
    assert_eq!(st[0].last_seen_ms, Some(1_700_000_000_000));
    assert_eq!(st[1].status, herenow_core::policy::Status::Online);
    let anywhere = restored
        .seen_anywhere(&[MemberId::new("ann").unwrap(), MemberId::new("bob").unwrap()])
        .await
        .unwrap();
    assert_eq!(anywhere[0].space.as_ref(), Some(&lobby));
    assert_eq!(anywhere[1].status, herenow_core::policy::Status::Online);
}
