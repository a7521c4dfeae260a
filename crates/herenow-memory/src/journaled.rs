//! The memory store over a change log (`crate::changes`): replay
//! rebuilds what the store acknowledged, a failed log refuses writes, and
//! the borrowed and owned changes are one format, byte for byte. Here, not
//! in `changes/`, so that `changes` stays a leaf the store builds on.

use std::sync::{Arc, Mutex};

use herenow_core::error::{Error, Result};
use herenow_core::id::MemberKind;
use herenow_core::id::{MemberId, MemberKey, SpaceName};
use herenow_core::meta::Metadata;
use herenow_core::policy::SpaceConfig;
use herenow_core::store::{Heartbeat, PresenceStore};
use herenow_core::time::{ManualClock, Millis};

use super::MemoryStore;
use crate::changes::*;
use herenow_journal::Durability;

/// The clock of the replay tests' stores.
const T0: Millis = 1_700_000_000_000;

/// A log that keeps encoded changes in memory, durable at once.
#[derive(Default)]
struct Kept(Mutex<Vec<Vec<u8>>>);

impl ChangeLog for Kept {
    fn record(&self, change: ChangeRef<'_>) -> Result<Option<Durable>> {
        self.0.lock().unwrap().push(change.encode());
        Ok(None)
    }
}

/// A log whose disk failed: nothing may be acknowledged.
struct Broken;

impl ChangeLog for Broken {
    fn record(&self, _: ChangeRef<'_>) -> Result<Option<Durable>> {
        Ok(Some(Box::pin(async {
            Err(Error::Unavailable {
                reason: "disk full".into(),
                source: None,
            })
        })))
    }
}

fn id(s: &str) -> MemberId {
    MemberId::new(s).unwrap()
}

#[tokio::test]
async fn replaying_the_journal_rebuilds_what_the_store_acknowledged() {
    let clock = Arc::new(ManualClock::new(1_700_000_000_000));
    let store = MemoryStore::new(clock.clone(), SpaceConfig::default());
    let log = Arc::new(Kept::default());
    assert!(store.set_change_log(log.clone()));
    let lobby = SpaceName::new("lobby").unwrap();
    let ann = MemberKey::user(id("ann"));
    let guest = MemberKey::guest(id("10.0.0.7"));
    let staying = MemberKey::guest(id("10.0.0.8"));
    store
        .heartbeat(
            &lobby,
            &[
                Heartbeat::now(guest.clone()),
                Heartbeat::now(ann.clone()),
                Heartbeat::now(staying.clone()),
            ],
        )
        .await
        .unwrap();
    clock.advance(std::time::Duration::from_secs(1));
    store
        .heartbeat(&lobby, &[Heartbeat::now(ann.clone())])
        .await
        .unwrap();
    store
        .leave(&lobby, std::slice::from_ref(&guest))
        .await
        .unwrap();
    let config = SpaceConfig {
        online_ms: 30_000,
        ..SpaceConfig::default()
    };
    store.set_config(&lobby, config).await.unwrap();
    store
        .set_friends(&id("ann"), &[id("bob"), id("cy")])
        .await
        .unwrap();
    store.add_friends(&id("ann"), &[id("dee")]).await.unwrap();
    store
        .remove_friends(&id("ann"), &[id("bob")])
        .await
        .unwrap();

    let replayed = MemoryStore::new(clock.clone(), SpaceConfig::default());
    for bytes in log.0.lock().unwrap().iter() {
        replayed
            .apply_change(&Change::decode(bytes).unwrap())
            .unwrap();
    }
    assert_eq!(
        replayed.friends(&id("ann")).await.unwrap(),
        vec![id("cy"), id("dee")]
    );
    assert_eq!(replayed.config(&lobby).await.unwrap(), config);
    let status = replayed
        .status(&lobby, &[ann, guest, staying])
        .await
        .unwrap();
    assert_eq!(status[0].last_seen_ms, Some(1_700_000_001_000));
    assert_eq!(status[1].member.kind, MemberKind::Guest);
    assert_eq!(status[1].last_seen_ms, None, "the guest left");
    assert_eq!(status[2].member.kind, MemberKind::Guest);
    assert_eq!(status[2].last_seen_ms, Some(1_700_000_000_000));
}

#[tokio::test]
async fn a_write_the_journal_cannot_keep_is_not_acknowledged() {
    let store = MemoryStore::default();
    store.set_change_log(Arc::new(Broken));
    let err = store
        .set_friends(&id("ann"), &[id("bob")])
        .await
        .unwrap_err();
    assert!(err.is_retryable());
    let lobby = SpaceName::new("lobby").unwrap();
    let err = store
        .set_config(&lobby, SpaceConfig::default())
        .await
        .unwrap_err();
    assert!(err.is_retryable());
}

/// Issue 8: the store records borrowed changes, replay decodes owned
/// ones; the two must be one format, byte for byte, for every variant,
/// or journals written before (or after) would not replay.
#[test]
fn a_borrowed_change_encodes_to_the_bytes_of_the_owned_one() {
    let lobby = SpaceName::new("lobby").unwrap();
    let ann = id("ann");
    let friends = [id("bob"), id("cy")];
    let members = [MemberKey::user(id("ann")), MemberKey::guest(id("10.0.0.7"))];
    let heartbeats = [
        Heartbeat::now(members[0].clone()),
        Heartbeat {
            member: members[1].clone(),
            at_ms: Some(1_700_000_000_123),
            meta: Some(Metadata::from_json(r#"{"device":"phone","n":1}"#).unwrap()),
        },
        Heartbeat {
            member: MemberKey::user(id("dee")),
            at_ms: None,
            meta: Some(Metadata::from_json("{}").unwrap()),
        },
        // Lengths and times around the varints' byte boundaries.
        Heartbeat {
            member: MemberKey::user(id(&"x".repeat(200))),
            at_ms: Some(127),
            meta: Some(Metadata::from_json(&format!(r#"{{"k":"{}"}}"#, "v".repeat(150))).unwrap()),
        },
        Heartbeat {
            member: MemberKey::guest(id(&"y".repeat(127))),
            at_ms: Some(128),
            meta: None,
        },
    ];
    let beats = heartbeats.to_vec();
    // Users and guests interleaved: the compact form lists users first.
    let plain = [
        Heartbeat::now(MemberKey::user(id("ann"))),
        Heartbeat::now(MemberKey::guest(id("10.0.0.7"))),
        Heartbeat::now(MemberKey::user(id(&"z".repeat(130)))),
    ];
    let config = SpaceConfig {
        online_ms: 30_000,
        ..SpaceConfig::default()
    };
    let now = 1_700_000_000_000;
    let pairs: Vec<(ChangeRef<'_>, Change)> = vec![
        (
            ChangeRef::Heartbeats {
                space: &lobby,
                now,
                beats: &heartbeats,
            },
            Change::Heartbeats {
                space: lobby.clone(),
                now,
                beats,
            },
        ),
        (
            ChangeRef::Heartbeats {
                space: &lobby,
                now,
                beats: &plain,
            },
            Change::PlainBeats {
                space: lobby.clone(),
                now,
                users: vec![id("ann"), id(&"z".repeat(130))],
                guests: vec![id("10.0.0.7")],
            },
        ),
        (
            ChangeRef::Heartbeats {
                space: &lobby,
                now,
                beats: &[],
            },
            Change::PlainBeats {
                space: lobby.clone(),
                now,
                users: Vec::new(),
                guests: Vec::new(),
            },
        ),
        (
            ChangeRef::Leave {
                space: &lobby,
                at: now,
                members: &members,
            },
            Change::Leave {
                space: lobby.clone(),
                at: now,
                members: members.to_vec(),
            },
        ),
        (
            ChangeRef::SetConfig {
                space: &lobby,
                config,
            },
            Change::SetConfig {
                space: lobby.clone(),
                config,
            },
        ),
        (
            ChangeRef::SetFriends {
                user: &ann,
                friends: &friends,
            },
            Change::SetFriends {
                user: ann.clone(),
                friends: friends.to_vec(),
            },
        ),
        (
            ChangeRef::AddFriends {
                user: &ann,
                friends: &friends[..1],
            },
            Change::AddFriends {
                user: ann.clone(),
                friends: friends[..1].to_vec(),
            },
        ),
        (
            ChangeRef::RemoveFriends {
                user: &ann,
                friends: &[],
            },
            Change::RemoveFriends {
                user: ann.clone(),
                friends: Vec::new(),
            },
        ),
        (
            ChangeRef::Erase { user: &ann },
            Change::Erase { user: ann.clone() },
        ),
    ];
    for (borrowed, owned) in pairs {
        let bytes = borrowed.encode();
        assert_eq!(bytes, owned.encode(), "{owned:?}");
        // The hand-written variants agree with serde's view of them
        // (which knows heartbeats only in their general form).
        if !matches!(owned, Change::PlainBeats { .. }) {
            let mut through_serde = vec![VERSION];
            postcard::to_io(&borrowed, &mut through_serde).unwrap();
            assert_eq!(bytes, through_serde, "{owned:?}");
        }
        assert_eq!(Change::decode(&bytes).unwrap(), owned);
        assert_eq!(borrowed.durability(), owned.durability());
        // Appending goes after what the buffer already holds.
        let mut buf = b"before".to_vec();
        borrowed.encode_into(&mut buf);
        assert_eq!(&buf[6..], &bytes[..]);
    }
}

/// The bytes of journals already on disk: whatever shape the code
/// takes, these must still decode to the same changes.
#[test]
fn journal_records_of_format_1_still_decode() {
    let heartbeats: &[u8] = &[
        1, 0, 5, 108, 111, 98, 98, 121, 128, 208, 149, 255, 188, 49, 2, 1, 2, 97, 98, 1, 5, 1, 7,
        123, 34, 110, 34, 58, 49, 125, 0, 1, 99, 0, 0,
    ];
    let owned = Change::Heartbeats {
        space: SpaceName::new("lobby").unwrap(),
        now: 1_700_000_000_000,
        beats: vec![
            Heartbeat {
                member: MemberKey::guest(id("ab")),
                at_ms: Some(5),
                meta: Some(Metadata::from_json(r#"{"n":1}"#).unwrap()),
            },
            Heartbeat {
                member: MemberKey::user(id("c")),
                at_ms: None,
                meta: None,
            },
        ],
    };
    assert_eq!(Change::decode(heartbeats).unwrap(), owned);
    // Format 2 differs in its version byte only, but for outbox events.
    assert_eq!(owned.encode()[1..], heartbeats[1..]);
    let erase: &[u8] = &[1, 6, 3, 97, 110, 110];
    assert_eq!(
        Change::decode(erase).unwrap(),
        Change::Erase { user: id("ann") }
    );
    // Two `occupied` events of "room", before events had a body.
    use herenow_core::outbox::{OutboxEvent, OutboxKind};
    let outbox: &[u8] = &[
        1, 7, 2, 2, 101, 49, 42, 4, 114, 111, 111, 109, 5, 0, 0, 0, 0, 0, 0, 2, 101, 49, 42, 4,
        114, 111, 111, 109, 5, 0, 0, 0, 0, 0, 0,
    ];
    let occupied = OutboxEvent::of_space(
        "e1".into(),
        42,
        SpaceName::new("room").unwrap(),
        OutboxKind::Occupied,
    );
    assert_eq!(
        Change::decode(outbox).unwrap(),
        Change::OutboxAdd {
            events: vec![occupied.clone(), occupied]
        }
    );
}

#[test]
fn changes_round_trip_and_bad_bytes_are_refused() {
    let changes = [
        Change::Heartbeats {
            space: SpaceName::new("lobby").unwrap(),
            now: 1_700_000_000_000,
            beats: vec![Heartbeat {
                member: MemberKey::guest(MemberId::new("10.0.0.7").unwrap()),
                at_ms: Some(5),
                meta: Some(Metadata::from_json(r#"{"n":1}"#).unwrap()),
            }],
        },
        Change::SetFriends {
            user: MemberId::new("ann").unwrap(),
            friends: vec![MemberId::new("bob").unwrap()],
        },
        Change::SetConfig {
            space: SpaceName::new("s").unwrap(),
            config: SpaceConfig::default(),
        },
    ];
    for c in changes {
        assert_eq!(Change::decode(&c.encode()).unwrap(), c);
    }
    assert!(Change::decode(&[]).is_err());
    assert!(Change::decode(&[9, 1, 2]).is_err());
    assert!(Change::decode(&[VERSION, 0xff, 0xff, 0xff]).is_err());
}

#[tokio::test]
async fn undelivered_outbox_events_survive_replay_and_snapshot_with_their_ids() {
    use herenow_core::capability::WebhookOutbox;
    use herenow_core::outbox::{OutboxKind, OutboxOptions};
    let clock = Arc::new(ManualClock::new(1_700_000_000_000));
    let store = MemoryStore::new(clock.clone(), SpaceConfig::default());
    let log = Arc::new(Kept::default());
    assert!(store.set_change_log(log.clone()));
    store.outbox_open(OutboxOptions::default()).await.unwrap();
    let lobby = SpaceName::new("lobby").unwrap();
    let (ann, bob) = (MemberKey::user(id("ann")), MemberKey::user(id("bob")));
    store
        .heartbeat(&lobby, &[Heartbeat::now(ann.clone())])
        .await
        .unwrap();
    let first = store.outbox_claim("srv", 100, 60_000).await.unwrap();
    assert_eq!(first.len(), 2, "occupied, join ann");
    // Delivered and acknowledged: gone for good.
    store
        .outbox_ack(&first.iter().map(|e| e.id.clone()).collect::<Vec<_>>())
        .await
        .unwrap();
    // Claimed but never acknowledged, and never claimed: both come back.
    store
        .heartbeat(&lobby, &[Heartbeat::now(bob.clone())])
        .await
        .unwrap();
    let claimed = store.outbox_claim("srv", 100, 60_000).await.unwrap();
    store
        .leave(&lobby, std::slice::from_ref(&ann))
        .await
        .unwrap();
    let snapshot = store.snapshot();

    // The journal alone.
    let replayed = MemoryStore::new(clock.clone(), SpaceConfig::default());
    for record in log.0.lock().unwrap().iter() {
        replayed
            .apply_change(&Change::decode(record).unwrap())
            .unwrap();
    }
    // The snapshot alone, and the snapshot with the whole journal after it
    // (what a crash between a snapshot and its journal fold replays).
    let restored = MemoryStore::new(clock.clone(), SpaceConfig::default());
    restored.restore(&snapshot).unwrap();
    let both = MemoryStore::new(clock.clone(), SpaceConfig::default());
    both.restore(&snapshot).unwrap();
    for record in log.0.lock().unwrap().iter() {
        both.apply_change(&Change::decode(record).unwrap()).unwrap();
    }
    for s in [&replayed, &restored, &both] {
        // Nothing is captured again by the replay itself.
        let got = s.outbox_claim("next", 100, 60_000).await.unwrap();
        let kinds: Vec<OutboxKind> = got.iter().map(|e| e.kind).collect();
        assert_eq!(kinds, [OutboxKind::Join, OutboxKind::Leave]);
        assert_eq!(got[0], claimed[0], "the same event, with its id");
        assert_eq!(got[1].member, Some(ann.clone()));
        assert_eq!(s.outbox_stats().await.unwrap().depth, 2);
    }
}

#[tokio::test]
async fn spaces_webhooks_survive_the_journal_and_the_snapshot() {
    use herenow_core::capability::{SpaceWebhooks, WebhookOutbox};
    use herenow_core::outbox::{OutboxKind, SpaceHook};
    let clock = Arc::new(ManualClock::new(1_700_000_000_000));
    let store = MemoryStore::new(clock.clone(), SpaceConfig::default());
    let log = Arc::new(Kept::default());
    assert!(store.set_change_log(log.clone()));
    let lobby = SpaceName::new("lobby").unwrap();
    let hooks = vec![SpaceHook {
        url: "https://example.com/hooks".into(),
        kinds: vec![OutboxKind::Join, OutboxKind::Vacated],
        secret: "whsec_c2VjcmV0".into(),
    }];
    store.set_space_hooks(&lobby, &hooks).await.unwrap();
    let records = log.0.lock().unwrap().clone();
    assert_eq!(records.len(), 1);
    assert_eq!(
        ChangeRef::SetHooks {
            space: &lobby,
            hooks: &hooks
        }
        .durability(),
        Durability::Sync,
        "on disk before the 2xx, like a policy"
    );

    // Replayed: the endpoints are back, and they open the outbox again.
    let replayed = MemoryStore::new(clock.clone(), SpaceConfig::default());
    assert!(!replayed.outbox_stats().await.unwrap().open);
    for r in &records {
        replayed.apply_change(&Change::decode(r).unwrap()).unwrap();
    }
    assert_eq!(replayed.space_hooks(&lobby).await.unwrap(), hooks);
    assert!(replayed.outbox_stats().await.unwrap().open);

    // In a snapshot too.
    let restored = MemoryStore::new(clock.clone(), SpaceConfig::default());
    restored.restore(&replayed.snapshot()).unwrap();
    assert_eq!(restored.space_hooks(&lobby).await.unwrap(), hooks);
    assert!(restored.outbox_stats().await.unwrap().open);

    // A record naming bad endpoints (a bit flipped on disk, say) is
    // refused, not applied.
    let bad = Change::SetHooks {
        space: lobby.clone(),
        hooks: vec![SpaceHook {
            kinds: Vec::new(),
            ..hooks[0].clone()
        }],
    };
    assert!(restored.apply_change(&bad).is_err());
    assert_eq!(restored.space_hooks(&lobby).await.unwrap(), hooks);
}

/// Issue 13, "Fuzz the parsers" (found by `fuzz` below): a record "at the
/// end of time" overflowed `now + MAX_FUTURE_SKEW_MS` in replay. A
/// record's beats are judged by the store's clock, as a snapshot's
/// members are: this one is a heartbeat now.
#[tokio::test]
async fn issue_13_a_record_at_the_end_of_time_replays() {
    let s = MemoryStore::new(Arc::new(ManualClock::new(T0)), SpaceConfig::default());
    let space = SpaceName::new("_").unwrap();
    let ann = MemberKey::user(id("ann"));
    let change = Change::Heartbeats {
        space: space.clone(),
        now: u64::MAX,
        beats: vec![Heartbeat {
            member: ann.clone(),
            at_ms: None,
            meta: None,
        }],
    };
    s.apply_change(&change).unwrap();
    let at_max = Change::Heartbeats {
        space: space.clone(),
        now: 0,
        beats: vec![Heartbeat {
            member: MemberKey::user(id("bob")),
            at_ms: Some(u64::MAX),
            meta: None,
        }],
    };
    s.apply_change(&at_max).unwrap();
    let st = s
        .status(&space, &[ann, MemberKey::user(id("bob"))])
        .await
        .unwrap();
    assert_eq!(st[0].last_seen_ms, Some(T0));
    assert_eq!(st[1].last_seen_ms, Some(T0));
}

/// Issue 13: records far apart in time put a big space's members (and
/// its block index, one block per second of the span) over the whole
/// span; two records 53 years apart asked for 1.6 billion blocks. Beats
/// past the retention by the store's clock are stale, as at restore.
#[tokio::test]
async fn issue_13_records_years_apart_keep_the_block_index_small() {
    let s = MemoryStore::new(Arc::new(ManualClock::new(T0)), SpaceConfig::default());
    let space = SpaceName::new("big").unwrap();
    for (now, prefix) in [(0, "old"), (T0, "new")] {
        let beats = (0..600)
            .map(|i| Heartbeat {
                member: MemberKey::user(id(&format!("{prefix}{i}"))),
                at_ms: None,
                meta: None,
            })
            .collect();
        s.apply_change(&Change::Heartbeats {
            space: space.clone(),
            now,
            beats,
        })
        .unwrap();
    }
    let counts = s.count(&space, None).await.unwrap();
    assert_eq!(counts.users, 600);
    assert!(s.heap_bytes() < 1 << 20, "{} bytes", s.heap_bytes());
}

/// Replay applies whatever a journal's records decode to, fields anywhere
/// in their types' ranges and in any order: it answers `Ok` or an error
/// that refuses the start, never a panic.
mod fuzz {
    use proptest::prelude::*;

    use herenow_core::fuzzing::{cases, mutated, mutations};

    use super::*;
    use crate::changes::fuzz::change;

    fn store() -> MemoryStore {
        MemoryStore::new(Arc::new(ManualClock::new(T0)), SpaceConfig::default())
    }

    // A store costs milliseconds to make in a debug build (its follow
    // feed's queue): a few hundred cases, a few seconds.
    proptest! {
        #![proptest_config(cases(256))]

        #[test]
        fn fuzz_replaying_any_changes_cannot_panic(
            changes in proptest::collection::vec(change(), 1..12)
        ) {
            let s = store();
            for c in &changes {
                let _ = s.apply_change(c);
            }
            let _ = s.snapshot();
        }

        #[test]
        fn fuzz_replaying_mutated_records_cannot_panic(
            changes in proptest::collection::vec((change(), mutations()), 1..8)
        ) {
            let s = store();
            for (c, m) in &changes {
                if let Ok(c) = Change::decode(&mutated(&c.encode(), m)) {
                    let _ = s.apply_change(&c);
                }
            }
        }
    }
}

/// A replayed config change moves the space's remembered times to the new
/// horizon, as the write did, in the space and in "last seen anywhere": a
/// user remembered under the default 30 days is forgotten a minute after
/// leaving once the space remembers for one.
#[tokio::test]
async fn a_replayed_config_change_moves_the_remembered_horizon() {
    let clock = Arc::new(ManualClock::new(T0));
    let store = MemoryStore::new(clock.clone(), SpaceConfig::default());
    let log = Arc::new(Kept::default());
    assert!(store.set_change_log(log.clone()));
    let lobby = SpaceName::new("lobby").unwrap();
    let ann = MemberKey::user(id("ann"));
    store
        .heartbeat(&lobby, &[Heartbeat::now(ann.clone())])
        .await
        .unwrap();
    store
        .leave(&lobby, std::slice::from_ref(&ann))
        .await
        .unwrap();
    let short = SpaceConfig {
        remember_ms: 60_000,
        ..SpaceConfig::default()
    };
    store.set_config(&lobby, short).await.unwrap();

    let replayed = MemoryStore::new(clock.clone(), SpaceConfig::default());
    for record in log.0.lock().unwrap().iter() {
        replayed
            .apply_change(&Change::decode(record).unwrap())
            .unwrap();
    }
    clock.advance(std::time::Duration::from_secs(120));
    for s in [&store, &replayed] {
        let status = s.status(&lobby, std::slice::from_ref(&ann)).await.unwrap();
        assert_eq!(status[0].last_seen_ms, None, "past the one-minute horizon");
        let anywhere = s
            .user_index()
            .unwrap()
            .seen_anywhere(&[id("ann")])
            .await
            .unwrap();
        assert_eq!(anywhere[0].last_seen_ms, None, "nor remembered anywhere");
    }
}
