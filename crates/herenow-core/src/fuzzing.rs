//! Test support for the property tests that fuzz herenow's decoders
//! (cursors here; snapshots and journal records in herenow-memory, which
//! turns on the `fuzzing` feature for its tests): strategies for valid
//! ids, names and values, and mutations of valid encodings (flips, cuts,
//! insertions), so a decoder is tried on what is almost right as well as
//! on noise. (Journal records' own strategy, `changes::fuzz::change`,
//! lives beside them in herenow-memory.)
//!
//! The tests themselves live next to what they test, in modules named
//! `fuzz`: `cargo test -p herenow-core -p herenow-memory fuzz` runs them
//! all, and `PROPTEST_CASES=100000` runs them longer.

use proptest::prelude::*;

use crate::conn::ConnId;
use crate::event::LeaveReason;
use crate::id::{MemberId, MemberKey, MemberKind, SpaceName};
use crate::limits;
use crate::meta::Metadata;
use crate::outbox::{OutboxEvent, OutboxKind};
use crate::policy::{SpaceConfig, Status};
use crate::time::Millis;
use crate::values::Heartbeat;

/// `n` cases for a run of the test suite, or `PROPTEST_CASES` when it is
/// set (`ProptestConfig::with_cases` alone would ignore it): a longer run
/// is `PROPTEST_CASES=100000 cargo test … fuzz`.
pub fn cases(n: u32) -> ProptestConfig {
    if std::env::var_os("PROPTEST_CASES").is_some() {
        ProptestConfig::default()
    } else {
        ProptestConfig::with_cases(n)
    }
}

/// A valid member id: mostly short, some at the length limit, any
/// non-control characters (multi-byte ones included).
pub fn member_id() -> impl Strategy<Value = MemberId> {
    prop_oneof![
        6 => "[a-z0-9._@:-]{1,12}",
        3 => "[^\\p{Cc}]{1,24}",
        1 => Just("x".repeat(limits::MAX_ID_BYTES)),
    ]
    .prop_filter_map("a valid member id", |s| MemberId::new(&s).ok())
}

/// A valid member key, user or guest.
pub fn member_key() -> impl Strategy<Value = MemberKey> {
    (any::<bool>(), member_id()).prop_map(|(guest, id)| MemberKey {
        kind: if guest {
            MemberKind::Guest
        } else {
            MemberKind::User
        },
        id,
    })
}

/// A valid space name: mostly one of a few, so changes meet in a space
/// (and the tests do not pay for a new space each time).
pub fn space_name() -> impl Strategy<Value = SpaceName> {
    prop_oneof![
        4 => proptest::sample::select(&["lobby", "room:1", "a"][..]).prop_map(String::from),
        1 => "[A-Za-z0-9._:@-]{1,20}".prop_map(String::from),
    ]
    .prop_filter_map("a valid space name", |s| SpaceName::new(&s).ok())
}

/// One change to an encoding. Positions are taken modulo the length, so
/// any value fits any input.
#[derive(Clone, Debug)]
pub enum Mutation {
    /// XOR one byte with a non-zero mask.
    Flip(usize, u8),
    /// Set one byte.
    Set(usize, u8),
    /// Keep only the first bytes.
    Truncate(usize),
    /// Insert bytes.
    Insert(usize, Vec<u8>),
    /// Remove a run of bytes.
    Remove(usize, usize),
    /// Append bytes.
    Extend(Vec<u8>),
}

impl Mutation {
    /// Applies the mutation to `bytes`.
    pub fn apply(&self, bytes: &mut Vec<u8>) {
        let n = bytes.len();
        match self {
            Mutation::Flip(at, mask) if n > 0 => bytes[at % n] ^= (*mask).max(1),
            Mutation::Set(at, b) if n > 0 => bytes[at % n] = *b,
            Mutation::Truncate(at) => bytes.truncate(at % (n + 1)),
            Mutation::Insert(at, more) => {
                let at = at % (n + 1);
                bytes.splice(at..at, more.iter().copied());
            }
            Mutation::Remove(at, len) if n > 0 => {
                let at = at % n;
                let end = (at + len % 16 + 1).min(n);
                bytes.drain(at..end);
            }
            Mutation::Extend(more) => bytes.extend_from_slice(more),
            _ => {}
        }
    }
}

/// One mutation, bytes that matter to decoders (0, 0xff, varint
/// continuation bits, ASCII) weighted up.
pub fn mutation() -> impl Strategy<Value = Mutation> {
    let byte = prop_oneof![Just(0u8), Just(0xff), Just(0x80), Just(0x7f), any::<u8>()];
    let bytes = proptest::collection::vec(byte.clone(), 1..12);
    prop_oneof![
        4 => (any::<usize>(), any::<u8>()).prop_map(|(a, m)| Mutation::Flip(a, m)),
        3 => (any::<usize>(), byte).prop_map(|(a, b)| Mutation::Set(a, b)),
        2 => any::<usize>().prop_map(Mutation::Truncate),
        2 => (any::<usize>(), bytes.clone()).prop_map(|(a, b)| Mutation::Insert(a, b)),
        1 => (any::<usize>(), any::<usize>()).prop_map(|(a, l)| Mutation::Remove(a, l)),
        1 => bytes.prop_map(Mutation::Extend),
    ]
}

/// One to four mutations, applied in order.
pub fn mutations() -> impl Strategy<Value = Vec<Mutation>> {
    proptest::collection::vec(mutation(), 1..5)
}

/// `bytes` with every mutation applied.
pub fn mutated(bytes: &[u8], mutations: &[Mutation]) -> Vec<u8> {
    let mut out = bytes.to_vec();
    for m in mutations {
        m.apply(&mut out);
    }
    out
}

/// Metadata, or none: small objects, some of them at the size limit.
pub fn metadata() -> impl Strategy<Value = Option<Metadata>> {
    prop_oneof![
        2 => Just(None),
        2 => ("[a-z]{1,8}", any::<i64>())
            .prop_map(|(k, v)| Metadata::from_json(&format!(r#"{{"{k}":{v}}}"#)).ok()),
        1 => "[^\"\\\\\\p{Cc}]{0,40}"
            .prop_map(|v| Metadata::from_json(&format!(r#"{{"name":"{v}"}}"#)).ok()),
        1 => Just(Metadata::from_json(&format!(
            r#"{{"k":"{}"}}"#,
            "v".repeat(limits::MAX_META_BYTES - 8)
        ))
        .ok()),
    ]
}

/// A time: any `u64`, weighted to the edges of varint bytes, to the
/// present, and to the far end.
pub fn millis() -> impl Strategy<Value = Millis> {
    prop_oneof![
        3 => T0 - 3_600_000..T0 + 120_000,
        1 => (0u32..10).prop_map(|b| 1u64 << (7 * b)),
        1 => (0u32..10).prop_map(|b| (1u64 << (7 * b)) - 1),
        1 => Just(u64::MAX),
        1 => any::<u64>(),
    ]
}

/// "Now" in the fuzz tests' stores.
pub const T0: Millis = 1_700_000_000_000;

/// A heartbeat as a store call takes it.
pub fn heartbeat() -> impl Strategy<Value = Heartbeat> {
    (member_key(), proptest::option::of(millis()), metadata()).prop_map(|(member, at_ms, meta)| {
        Heartbeat {
            member,
            at_ms,
            meta,
        }
    })
}

/// A space policy: valid ones mostly, anything sometimes (a record may
/// carry what `validate` refuses).
pub fn space_config() -> impl Strategy<Value = SpaceConfig> {
    prop_oneof![
        3 => Just(SpaceConfig::default()),
        1 => (1u64..=limits::MAX_RETENTION_MS, any::<bool>()).prop_map(|(r, g)| SpaceConfig {
            retention_ms: r,
            window_ms: r,
            online_ms: r.min(60_000),
            away_ms: r.min(300_000),
            remember_guests: g,
            ..SpaceConfig::default()
        }),
        1 => (
            (millis(), millis(), millis(), millis()),
            (millis(), any::<bool>(), millis())
        )
            .prop_map(
                |(
                    (online_ms, away_ms, window_ms, retention_ms),
                    (remember_ms, remember_guests, grace_ms),
                )| {
                    SpaceConfig {
                        online_ms,
                        away_ms,
                        window_ms,
                        retention_ms,
                        remember_ms,
                        remember_guests,
                        grace_ms,
                    }
                }
            ),
    ]
}

/// An outbox event as a journal or snapshot carries it.
pub fn outbox_event() -> impl Strategy<Value = OutboxEvent> {
    let kind = prop_oneof![
        Just(OutboxKind::Join),
        Just(OutboxKind::Away),
        Just(OutboxKind::Back),
        Just(OutboxKind::Leave),
        Just(OutboxKind::Update),
        Just(OutboxKind::Occupied),
        Just(OutboxKind::Vacated),
        Just(OutboxKind::Message),
    ];
    let status = proptest::option::of(prop_oneof![
        Just(Status::Online),
        Just(Status::Away),
        Just(Status::Offline)
    ]);
    let reason = proptest::option::of(prop_oneof![
        Just(LeaveReason::Explicit),
        Just(LeaveReason::Timeout),
        Just(LeaveReason::Expired)
    ]);
    let conn = proptest::option::of("[a-z0-9_.:-]{1,16}".prop_map(|c| ConnId::new(&c).unwrap()));
    (
        "[a-z0-9-]{1,24}",
        millis(),
        space_name(),
        kind,
        proptest::option::of(member_key()),
        status,
        proptest::option::of(millis()),
        metadata(),
        reason,
        conn,
        proptest::option::of("[ -~]{0,40}"),
    )
        .prop_map(
            |(id, at_ms, space, kind, member, status, last_seen_ms, meta, reason, conn, body)| {
                OutboxEvent {
                    id,
                    at_ms,
                    space,
                    kind,
                    member,
                    status,
                    last_seen_ms,
                    meta,
                    reason,
                    conn,
                    body,
                }
            },
        )
}
