//! The one cursor format of every store's listings.
//!
//! A cursor is opaque to clients but not to stores: it names the last
//! member a page returned, so the next page starts right after it (keyset
//! pagination: no member is skipped or repeated unless it moved). Every
//! store writes and reads cursors here, so the format exists once:
//!
//! - most recent first: `r.<last seen, hex ms>.<tiebreak, hex>.<u|g>.<hex id>`;
//! - by id: `i.<u|g>.<hex id>`.
//!
//! Ids are written in hex so no separator can appear in them, and are
//! checked as [`MemberId`]s on the way back in. The tiebreak is the
//! store's own order among members seen in the same millisecond (the
//! memory engine's sequence number); stores that break ties by kind and
//! id write 0 and ignore it.

use std::fmt::Write as _;

use crate::error::InvalidInput;
use crate::id::{MemberId, MemberKey, MemberKind};
use crate::limits;
use crate::store::Order;
use crate::time::Millis;

/// Where a most-recent-first page ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecentCursor {
    /// The last member's last-seen time.
    pub at_ms: Millis,
    /// The store's own order among members with the same time (0 if it
    /// has none).
    pub tiebreak: u64,
    /// The last member returned.
    pub member: MemberKey,
}

/// Where a by-id page ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IdCursor {
    /// The last member returned.
    pub member: MemberKey,
}

/// A decoded cursor of either order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Cursor {
    /// Of a most-recent-first listing.
    Recent(RecentCursor),
    /// Of a by-id listing.
    Id(IdCursor),
}

impl Cursor {
    /// Decodes a cursor that must belong to a listing in `order`: a cursor
    /// of the other order, or one that is not a cursor, is
    /// [`InvalidInput::BadCursor`].
    pub fn decode(s: &str, order: Order) -> Result<Cursor, InvalidInput> {
        let cursor = match order {
            Order::Recent => RecentCursor::decode(s).map(Cursor::Recent),
            Order::Id => IdCursor::decode(s).map(Cursor::Id),
        };
        cursor.ok_or(InvalidInput::BadCursor)
    }

    /// The text to hand back to the client.
    pub fn encode(&self) -> String {
        match self {
            Cursor::Recent(c) => c.encode(),
            Cursor::Id(c) => c.encode(),
        }
    }
}

impl RecentCursor {
    /// `r.<at>.<tiebreak>.<kind>.<hex id>`.
    pub fn encode(&self) -> String {
        let id = self.member.id.as_str();
        let mut s = String::with_capacity(32 + 2 * id.len());
        let _ = write!(
            s,
            "r.{:x}.{:x}.{}.",
            self.at_ms,
            self.tiebreak,
            self.member.kind.letter()
        );
        push_hex(&mut s, id);
        s
    }

    /// The cursor `s` encodes, or `None` if it is not a recent-order
    /// cursor.
    pub fn decode(s: &str) -> Option<RecentCursor> {
        let mut parts = s.strip_prefix("r.")?.splitn(4, '.');
        let at_ms = u64::from_str_radix(parts.next()?, 16).ok()?;
        let tiebreak = u64::from_str_radix(parts.next()?, 16).ok()?;
        let kind = MemberKind::from_letter(parts.next()?)?;
        let id = unhex_id(parts.next()?)?;
        Some(RecentCursor {
            at_ms,
            tiebreak,
            member: MemberKey { kind, id },
        })
    }
}

impl IdCursor {
    /// `i.<kind>.<hex id>`.
    pub fn encode(&self) -> String {
        let id = self.member.id.as_str();
        let mut s = String::with_capacity(4 + 2 * id.len());
        s.push_str("i.");
        s.push_str(self.member.kind.letter());
        s.push('.');
        push_hex(&mut s, id);
        s
    }

    /// The cursor `s` encodes, or `None` if it is not a by-id cursor.
    pub fn decode(s: &str) -> Option<IdCursor> {
        let (kind, hex) = s.strip_prefix("i.")?.split_once('.')?;
        let kind = MemberKind::from_letter(kind)?;
        let id = unhex_id(hex)?;
        Some(IdCursor {
            member: MemberKey { kind, id },
        })
    }
}

fn push_hex(s: &mut String, id: &str) {
    for b in id.bytes() {
        let _ = write!(s, "{b:02x}");
    }
}

/// A hex-encoded id, checked as a [`MemberId`].
fn unhex_id(hex: &str) -> Option<MemberId> {
    if hex.is_empty() || !hex.len().is_multiple_of(2) || hex.len() > 2 * limits::MAX_ID_BYTES {
        return None;
    }
    let bytes: Option<Vec<u8>> = (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(hex.get(i..i + 2)?, 16).ok())
        .collect();
    let id = String::from_utf8(bytes?).ok()?;
    MemberId::new(&id).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(kind: MemberKind, id: &str) -> MemberKey {
        MemberKey {
            kind,
            id: MemberId::new(id).unwrap(),
        }
    }

    #[test]
    fn cursors_round_trip_any_id() {
        let recent = RecentCursor {
            at_ms: 1_700_000_000_123,
            tiebreak: 42,
            member: key(MemberKind::Guest, "Zoë 🙂.with.dots"),
        };
        assert_eq!(RecentCursor::decode(&recent.encode()), Some(recent.clone()));
        let by_id = IdCursor {
            member: key(MemberKind::User, "alpha"),
        };
        assert_eq!(IdCursor::decode(&by_id.encode()), Some(by_id.clone()));
        assert_eq!(
            Cursor::decode(&recent.encode(), Order::Recent),
            Ok(Cursor::Recent(recent.clone()))
        );
        assert_eq!(Cursor::Id(by_id.clone()).encode(), by_id.encode());
    }

    #[test]
    fn a_cursor_of_the_other_order_or_garbage_is_refused() {
        let recent = RecentCursor {
            at_ms: 5,
            tiebreak: 0,
            member: key(MemberKind::User, "a"),
        }
        .encode();
        let by_id = IdCursor {
            member: key(MemberKind::User, "a"),
        }
        .encode();
        assert_eq!(
            Cursor::decode(&recent, Order::Id),
            Err(InvalidInput::BadCursor)
        );
        assert_eq!(
            Cursor::decode(&by_id, Order::Recent),
            Err(InvalidInput::BadCursor)
        );
        for bad in [
            "",
            "r",
            "r.",
            "r.1.0.u.",
            "r.zz.0.u.61",
            "r.1.0.x.61",
            "r.1.0.u.6",
            "i.u.",
            "i.q.61",
            "i.u.zz",
            "x.u.61",
            "r.1.0.u.00",
        ] {
            assert!(
                Cursor::decode(bad, Order::Recent).is_err()
                    && Cursor::decode(bad, Order::Id).is_err(),
                "{bad:?} accepted"
            );
        }
        let too_long = format!("i.u.{}", "61".repeat(limits::MAX_ID_BYTES + 1));
        assert!(IdCursor::decode(&too_long).is_none());
    }

    #[test]
    fn kind_letters_round_trip() {
        for kind in MemberKind::ALL {
            assert_eq!(MemberKind::from_letter(kind.letter()), Some(kind));
        }
        assert_eq!(MemberKind::from_letter("x"), None);
    }
}

/// Cursors come from clients: whatever text arrives decodes to a cursor or
/// is refused, never a panic, and what decodes re-encodes to a cursor that
/// decodes to the same place.
#[cfg(test)]
mod fuzz {
    use proptest::prelude::*;

    use super::*;
    use crate::fuzzing::{cases, member_key, mutated, mutations};

    /// Both orders on `s`: a refusal is `BadCursor`; a cursor re-encodes
    /// within its bound and decodes to itself.
    fn decodes_or_refuses(s: &str) {
        for order in [Order::Recent, Order::Id] {
            match Cursor::decode(s, order) {
                Ok(c) => {
                    let again = c.encode();
                    assert!(again.len() <= 40 + 2 * limits::MAX_ID_BYTES, "{again}");
                    assert_eq!(Cursor::decode(&again, order), Ok(c), "{s:?}");
                }
                Err(e) => assert_eq!(e, InvalidInput::BadCursor),
            }
        }
    }

    fn cursors() -> impl Strategy<Value = Cursor> {
        prop_oneof![
            (any::<u64>(), any::<u64>(), member_key()).prop_map(|(at_ms, tiebreak, member)| {
                Cursor::Recent(RecentCursor {
                    at_ms,
                    tiebreak,
                    member,
                })
            }),
            member_key().prop_map(|member| Cursor::Id(IdCursor { member })),
        ]
    }

    proptest! {
        #![proptest_config(cases(2000))]

        #[test]
        fn fuzz_any_text_decodes_or_is_refused(s in any::<String>()) {
            decodes_or_refuses(&s);
        }

        #[test]
        fn fuzz_cursor_shaped_text_decodes_or_is_refused(
            s in "[ri]\\.[0-9a-fA-F+ugx.-]{0,48}"
        ) {
            decodes_or_refuses(&s);
        }

        #[test]
        fn fuzz_cursors_round_trip(c in cursors()) {
            let order = match c {
                Cursor::Recent(_) => Order::Recent,
                Cursor::Id(_) => Order::Id,
            };
            prop_assert_eq!(Cursor::decode(&c.encode(), order), Ok(c));
        }

        #[test]
        fn fuzz_mutated_cursors_decode_or_are_refused(c in cursors(), m in mutations()) {
            let bytes = mutated(c.encode().as_bytes(), &m);
            decodes_or_refuses(&String::from_utf8_lossy(&bytes));
        }
    }

    /// An id far over the limit is refused on its length, before any of
    /// it is decoded.
    #[test]
    fn fuzz_a_huge_cursor_is_refused_by_its_length() {
        let huge = format!("i.u.{}", "61".repeat(1 << 20));
        assert_eq!(
            Cursor::decode(&huge, Order::Id),
            Err(InvalidInput::BadCursor)
        );
        let huge = format!("r.1.0.u.{}", "61".repeat(1 << 20));
        assert_eq!(
            Cursor::decode(&huge, Order::Recent),
            Err(InvalidInput::BadCursor)
        );
    }
}
