//! Journal records are read back from disk at start: whatever bytes a
//! record holds decode to a change or are refused, never a panic, and a
//! length that claims more than the record holds is refused without being
//! allocated. The hand-written encoder (`wire.rs`, with its `unsafe`
//! writes into spare capacity) must give serde's bytes for any input.

use proptest::prelude::*;

use herenow_core::fuzzing::{
    cases, heartbeat, member_id, member_key, metadata, millis, mutated, mutations, outbox_event,
    space_config, space_name,
};
use herenow_core::id::{MemberKey, MemberKind};
use herenow_journal::Durability;

use super::*;

/// Test-only forms of what the store builds as [`ChangeRef`]s.
impl Change {
    /// The heartbeats of one call in the form [`ChangeRef::Heartbeats`]
    /// writes for them: [`Change::PlainBeats`] when no beat carries a time
    /// or metadata, else [`Change::Heartbeats`].
    pub(crate) fn heartbeats(space: SpaceName, now: Millis, beats: Vec<Heartbeat>) -> Change {
        if beats.iter().all(Heartbeat::is_plain) {
            let (guests, users): (Vec<_>, Vec<_>) = beats
                .into_iter()
                .map(|b| b.member)
                .partition(|m| m.kind == MemberKind::Guest);
            Change::PlainBeats {
                space,
                now,
                users: users.into_iter().map(|m| m.id).collect(),
                guests: guests.into_iter().map(|m| m.id).collect(),
            }
        } else {
            Change::Heartbeats { space, now, beats }
        }
    }

    /// How durable this change must be before its write is acknowledged:
    /// the table, written apart, that the journal's own
    /// `ChangeRef::durability` is checked against.
    pub(crate) fn durability(&self) -> Durability {
        match self {
            Change::Heartbeats { .. }
            | Change::PlainBeats { .. }
            | Change::Leave { .. }
            | Change::OutboxAdd { .. }
            | Change::OutboxAck { .. } => Durability::Lazy,
            Change::SetConfig { .. }
            | Change::SetHooks { .. }
            | Change::SetFriends { .. }
            | Change::AddFriends { .. }
            | Change::RemoveFriends { .. }
            | Change::Erase { .. } => Durability::Sync,
        }
    }
}

impl ChangeRef<'_> {
    /// The change's journal bytes in a new `Vec`.
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        self.encode_into(&mut out);
        out
    }
}

/// Any change a journal record can hold, fields anywhere in their types'
/// ranges (replay must cope with what a store never wrote).
pub(crate) fn change() -> impl Strategy<Value = Change> {
    let beats = proptest::collection::vec(
        (member_key(), proptest::option::of(millis()), metadata()).prop_map(
            |(member, at_ms, meta)| Heartbeat {
                member,
                at_ms,
                meta,
            },
        ),
        0..8,
    );
    let ids = || proptest::collection::vec(member_id(), 0..6);
    prop_oneof![
        4 => (space_name(), millis(), beats)
            .prop_map(|(space, now, beats)| Change::Heartbeats { space, now, beats }),
        2 => (space_name(), millis(), proptest::collection::vec(member_key(), 0..6))
            .prop_map(|(space, at, members)| Change::Leave { space, at, members }),
        1 => (space_name(), space_config())
            .prop_map(|(space, config)| Change::SetConfig { space, config }),
        1 => (member_id(), ids()).prop_map(|(user, friends)| Change::SetFriends { user, friends }),
        1 => (member_id(), ids()).prop_map(|(user, friends)| Change::AddFriends { user, friends }),
        1 => (member_id(), ids())
            .prop_map(|(user, friends)| Change::RemoveFriends { user, friends }),
        1 => member_id().prop_map(|user| Change::Erase { user }),
        1 => proptest::collection::vec(outbox_event(), 0..4)
            .prop_map(|events| Change::OutboxAdd { events }),
        1 => proptest::collection::vec("[a-z0-9-]{1,24}", 0..4)
            .prop_map(|ids| Change::OutboxAck { ids }),
        2 => (space_name(), millis(), proptest::collection::vec(member_id(), 0..6),
              proptest::collection::vec(member_id(), 0..6))
            .prop_map(|(space, now, users, guests)| Change::PlainBeats { space, now, users, guests }),
    ]
}

/// A decoded change is one [`Change::encode`] gives back, byte for byte
/// where the input was canonical, and always decodes to itself again.
fn decodes_or_refuses(bytes: &[u8]) {
    match Change::decode(bytes) {
        Ok(c) => assert_eq!(Change::decode(&c.encode()).unwrap(), c),
        Err(e) => assert!(matches!(e, Error::Snapshot { .. }), "{e:?}"),
    }
}

proptest! {
    #![proptest_config(cases(1000))]

    #[test]
    fn fuzz_changes_round_trip(c in change()) {
        let bytes = c.encode();
        prop_assert_eq!(Change::decode(&bytes).unwrap(), c);
    }

    /// The borrowed form, written by hand for heartbeats and leaves, is
    /// the owned form's bytes (and serde's) for any ids, times and
    /// metadata, appended after whatever the buffer held.
    #[test]
    fn fuzz_borrowed_changes_are_the_owned_bytes(
        space in space_name(),
        now in millis(),
        beats in proptest::collection::vec(heartbeat(), 0..24),
        members in proptest::collection::vec(member_key(), 0..24),
        before in proptest::collection::vec(any::<u8>(), 0..64),
    ) {
        let owned_beats = beats.clone();
        // The same members beating plainly: the compact form.
        let plain: Vec<Heartbeat> = members.iter().cloned().map(Heartbeat::now).collect();
        let owned_plain = plain.clone();
        let pairs = [
            (
                ChangeRef::Heartbeats { space: &space, now, beats: &beats },
                Change::heartbeats(space.clone(), now, owned_beats),
            ),
            (
                ChangeRef::Heartbeats { space: &space, now, beats: &plain },
                Change::heartbeats(space.clone(), now, owned_plain),
            ),
            (
                ChangeRef::Leave { space: &space, at: now, members: &members },
                Change::Leave { space: space.clone(), at: now, members: members.clone() },
            ),
        ];
        let compact = matches!(pairs[1].1, Change::PlainBeats { .. });
        prop_assert!(compact);
        for (borrowed, owned) in pairs {
            let mut buf = before.clone();
            borrowed.encode_into(&mut buf);
            prop_assert_eq!(&buf[..before.len()], &before[..]);
            prop_assert_eq!(&buf[before.len()..], &owned.encode()[..]);
            if !matches!(owned, Change::PlainBeats { .. }) {
                let mut through_serde = vec![VERSION];
                postcard::to_io(&borrowed, &mut through_serde).unwrap();
                prop_assert_eq!(&buf[before.len()..], &through_serde[..]);
            }
        }
    }

    #[test]
    fn fuzz_any_bytes_decode_or_are_refused(
        bytes in proptest::collection::vec(any::<u8>(), 0..256)
    ) {
        decodes_or_refuses(&bytes);
        let mut versioned = vec![VERSION];
        versioned.extend_from_slice(&bytes);
        decodes_or_refuses(&versioned);
    }

    #[test]
    fn fuzz_mutated_records_decode_or_are_refused(c in change(), m in mutations()) {
        decodes_or_refuses(&mutated(&c.encode(), &m));
    }
}

/// A varint of `n`, as postcard writes lengths.
pub(crate) fn varint(mut n: u64, out: &mut Vec<u8>) {
    while n >= 0x80 {
        out.push(n as u8 | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

/// Records whose lengths claim 4 GiB (a list of beats, a space name, a
/// friend list, an outbox id) are refused as truncated: the claim is
/// checked against the bytes there, not allocated.
#[test]
fn fuzz_a_record_claiming_4_gib_is_refused() {
    let huge = u64::from(u32::MAX);
    let mut beats = vec![VERSION, 0, 1, b'a', 0];
    varint(huge, &mut beats);
    let mut name = vec![VERSION, 0];
    varint(huge, &mut name);
    name.extend_from_slice(b"abc");
    let mut friends = vec![VERSION, 3, 1, b'a'];
    varint(huge, &mut friends);
    let mut acks = vec![VERSION, 8, 1];
    varint(huge, &mut acks);
    let mut many_acks = vec![VERSION, 8];
    varint(u64::MAX, &mut many_acks);
    for bytes in [beats, name, friends, acks, many_acks] {
        assert!(
            matches!(Change::decode(&bytes), Err(Error::Snapshot { .. })),
            "{bytes:?}"
        );
    }
    // The same claims as the last field of a valid record's prefix.
    let valid = Change::Leave {
        space: SpaceName::new("a").unwrap(),
        at: 1,
        members: vec![MemberKey::user(
            herenow_core::id::MemberId::new("b").unwrap(),
        )],
    }
    .encode();
    let mut cut = valid[..valid.len() - 2].to_vec();
    varint(huge, &mut cut);
    assert!(Change::decode(&cut).is_err());
}
