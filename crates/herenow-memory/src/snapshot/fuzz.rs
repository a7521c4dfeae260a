//! A snapshot file is read back at start: whatever bytes it holds restore
//! or are refused with [`Error::Snapshot`], never a panic, and a length
//! that claims more than the body holds is refused without being
//! allocated. Mutations of real snapshots are tried with their checksum
//! fixed, so the decoder behind the checksum is reached.

use proptest::prelude::*;

use herenow_core::fuzzing::{T0, cases, mutated, mutations};
use herenow_core::store::{Heartbeat, PresenceStore};
use herenow_core::time::ManualClock;

use super::*;
use crate::changes::Change;
use crate::changes::fuzz::{change, varint};

fn store() -> MemoryStore {
    MemoryStore::new(Arc::new(ManualClock::new(T0)), SpaceConfig::default())
}

/// A store holding what `changes` leave, swept once (so nothing past its
/// retention waits for the sweep), and its snapshot.
fn snapshot_of(changes: &[Change]) -> (MemoryStore, Vec<u8>) {
    let s = store();
    for c in changes {
        let _ = s.apply_change(c);
    }
    tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
        .block_on(s.tick())
        .unwrap();
    let bytes = s.snapshot_marked(7);
    (s, bytes)
}

/// `body` under a valid header of `version`, checksum and all.
pub(super) fn framed(version: u32, body: &[u8]) -> Vec<u8> {
    let mut out = MAGIC.to_vec();
    out.extend_from_slice(&version.to_le_bytes());
    out.extend_from_slice(&crc32fast::hash(body).to_le_bytes());
    out.extend_from_slice(body);
    out
}

thread_local! {
    /// An empty store, kept across refusals: a refused snapshot must
    /// leave the store as it was (and a store costs milliseconds to make).
    static EMPTY: std::cell::RefCell<Option<MemoryStore>> = const { std::cell::RefCell::new(None) };
}

/// Restores `bytes` into an empty store: refused with `Error::Snapshot`,
/// leaving the store empty, or restored into a store whose own snapshot
/// restores again.
fn restores_or_refuses(bytes: &[u8]) {
    let s = EMPTY.take().unwrap_or_else(store);
    match s.restore(bytes) {
        Ok(_) => {
            store().restore(&s.snapshot()).unwrap();
        }
        Err(e) => {
            assert!(matches!(e, Error::Snapshot { .. }), "{e:?}");
            assert!(s.spaces.read().is_empty(), "a refused snapshot left spaces");
            assert!(
                s.friends.read().is_empty(),
                "a refused snapshot left friends"
            );
            assert_eq!(
                s.shared.seen.usage().0,
                0,
                "a refused snapshot left sightings"
            );
            assert!(
                s.shared.outbox.export().is_empty(),
                "a refused snapshot left events"
            );
            EMPTY.set(Some(s));
        }
    }
}

/// The content of a snapshot in one order: spaces by name, friend sets by
/// user, remembered times sorted (maps and shards list them in no fixed
/// order). A space with no members and the default policy is left out:
/// it is what any unknown space is (restore creates one for a space whose
/// remembered times outlived it).
fn content(bytes: &[u8]) -> Body {
    assert_eq!(&bytes[17..21], &VERSION.to_le_bytes());
    let mut body: Body = postcard::from_bytes(&bytes[HEADER..]).unwrap();
    body.spaces
        .retain(|s| !s.members.is_empty() || s.config != SpaceConfig::default());
    body.spaces.sort_by(|a, b| a.name.cmp(&b.name));
    body.friends.sort();
    body.remembered.sort();
    for (_, list) in &mut body.remembered {
        list.sort();
    }
    body
}

// A store costs milliseconds to make in a debug build (its follow feed's
// queue), so the tests that make one per case run fewer cases.
proptest! {
    #![proptest_config(cases(128))]

    /// Restoring a snapshot and taking another gives the same content:
    /// every space, policy, member, time and metadata, friend set,
    /// remembered time and waiting webhook event.
    #[test]
    fn fuzz_snapshots_round_trip(changes in proptest::collection::vec(change(), 0..16)) {
        let (_, bytes) = snapshot_of(&changes);
        let restored = store();
        let report = restored.restore(&bytes).unwrap();
        prop_assert_eq!((report.mark, report.taken_ms), (7, T0));
        prop_assert_eq!(content(&restored.snapshot_marked(7)), content(&bytes));
    }

    #[test]
    fn fuzz_mutated_snapshots_restore_or_are_refused(
        changes in proptest::collection::vec(change(), 0..8),
        m in mutations(),
    ) {
        let (_, bytes) = snapshot_of(&changes);
        // As read from a damaged file: the checksum catches it.
        restores_or_refuses(&mutated(&bytes, &m));
        // As if the damage had been checksummed: the decoder itself.
        restores_or_refuses(&framed(VERSION, &mutated(&bytes[HEADER..], &m)));
        for older in 1..VERSION {
            restores_or_refuses(&framed(older, &mutated(&bytes[HEADER..], &m)));
        }
    }
}

proptest! {
    #![proptest_config(cases(1000))]

    #[test]
    fn fuzz_any_bytes_restore_or_are_refused(
        bytes in proptest::collection::vec(any::<u8>(), 0..512),
        version in 0u32..6,
    ) {
        restores_or_refuses(&bytes);
        // Behind a valid header, so the body's decoder is reached.
        restores_or_refuses(&framed(version, &bytes));
    }
}

/// Bodies whose lengths claim 4 GiB (spaces, a space's name, its
/// members, a friend set, the outbox), checksummed as if written so, are
/// refused as truncated: claims are checked against the bytes there.
#[test]
fn fuzz_a_snapshot_claiming_4_gib_is_refused() {
    let huge = u64::from(u32::MAX);
    let taken = {
        let mut v = Vec::new();
        varint(T0, &mut v);
        v
    };
    let mut spaces = taken.clone();
    varint(huge, &mut spaces);
    let mut name = taken.clone();
    name.push(1);
    varint(huge, &mut name);
    let mut members = taken.clone();
    members.extend_from_slice(&[1, 1, b'a']);
    // The default policy, then a member list of 4 Gi entries.
    let config = postcard::to_stdvec(&SpaceConfig::default()).unwrap();
    members.extend_from_slice(&config);
    varint(huge, &mut members);
    let mut friends = taken.clone();
    friends.push(0);
    varint(huge, &mut friends);
    let mut outbox = taken;
    // No spaces, friends; mark, seed; no remembered; then the outbox.
    outbox.extend_from_slice(&[0, 0, 0, 0, 0]);
    varint(huge, &mut outbox);
    for body in [spaces, name, members, friends, outbox] {
        let e = store().restore(&framed(VERSION, &body)).unwrap_err();
        assert!(matches!(e, Error::Snapshot { .. }), "{e:?}");
    }
}

/// A restored store answers as the snapshotted one did, member by member.
#[test]
fn fuzz_support_a_restored_store_answers_alike() {
    let lobby = SpaceName::new("lobby").unwrap();
    let ann = MemberKey::user(MemberId::new("ann").unwrap());
    let (s, bytes) = snapshot_of(&[Change::Heartbeats {
        space: lobby.clone(),
        now: T0 - 1_000,
        beats: vec![Heartbeat {
            member: ann.clone(),
            at_ms: None,
            meta: Some(Metadata::from_json(r#"{"n":1}"#).unwrap()),
        }],
    }]);
    let restored = store();
    restored.restore(&bytes).unwrap();
    let key = std::slice::from_ref(&ann);
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let before = rt.block_on(s.status(&lobby, key)).unwrap();
    assert_eq!(before[0].last_seen_ms, Some(T0 - 1_000));
    assert_eq!(rt.block_on(restored.status(&lobby, key)).unwrap(), before);
    assert_eq!(content(&restored.snapshot_marked(7)), content(&bytes));
}
