//! `occupied` / `vacated` for a space split over stripes
//! (`stripes.rs`): each stripe knows only its own members, so it
//! announces when *it* fills or empties; the space is occupied while any
//! stripe is. [`Occupancy`] turns the stripes' announcements into the
//! space's, in the order they reach the outbox.
//!
//! It keeps each stripe's present count as of the stripe's last hand-over
//! to the outbox (not its live count: another stripe may have changed
//! since, under its own lock, and not yet handed over). Hand-overs take
//! one lock in turn, so the outbox sees one sequence: a stripe's filling
//! is the space's only if no other stripe was occupied as the outbox
//! knows, its emptying likewise. A whole space (one stripe) has none.

use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;

use herenow_core::event::Event;
use herenow_core::outbox::OutboxKind;

/// What a stripe captured for the outbox: a member event, or its own
/// `occupied` / `vacated` (no event).
pub(super) type Captured = Vec<(OutboxKind, Option<std::sync::Arc<Event>>)>;

/// The stripes' present counts as the outbox knows them.
pub(super) struct Occupancy {
    lock: Mutex<()>,
    present: Box<[AtomicU64]>,
}

impl Occupancy {
    /// For a space of `stripes` stripes, none of them occupied.
    pub(super) fn new(stripes: usize) -> Self {
        Self {
            lock: Mutex::new(()),
            present: (0..stripes).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    /// Hands stripe `stripe`'s `captured` events to `add` as the space's:
    /// its `occupied` / `vacated` kept only while no other stripe is
    /// occupied; `present` is the stripe's count after them. Called under
    /// the stripe's lock, on every write of it (nothing to do, and no lock
    /// taken, when it captured nothing and its count did not change).
    pub(super) fn hand_over(
        &self,
        stripe: usize,
        present: u64,
        captured: Captured,
        add: impl FnOnce(Captured),
    ) {
        let mine = &self.present[stripe];
        if captured.is_empty() && mine.load(Ordering::Relaxed) == present {
            return;
        }
        let _turn = self.lock.lock();
        let others = self
            .present
            .iter()
            .enumerate()
            .any(|(k, p)| k != stripe && p.load(Ordering::Relaxed) > 0);
        let events: Captured = if others {
            captured
                .into_iter()
                .filter(|(kind, _)| !matches!(kind, OutboxKind::Occupied | OutboxKind::Vacated))
                .collect()
        } else {
            captured
        };
        if !events.is_empty() {
            add(events);
        }
        mine.store(present, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(c: &Captured) -> Vec<OutboxKind> {
        c.iter().map(|(k, _)| *k).collect()
    }

    fn pass(
        o: &Occupancy,
        stripe: usize,
        present: u64,
        captured: &[OutboxKind],
    ) -> Vec<OutboxKind> {
        let mut out = Vec::new();
        o.hand_over(
            stripe,
            present,
            captured.iter().map(|k| (*k, None)).collect(),
            |c| out = kinds(&c),
        );
        out
    }

    #[test]
    fn the_space_fills_with_its_first_stripe_and_empties_with_its_last() {
        use OutboxKind::{Join, Leave, Occupied, Vacated};
        let o = Occupancy::new(3);
        assert_eq!(pass(&o, 0, 1, &[Occupied, Join]), [Occupied, Join]);
        assert_eq!(
            pass(&o, 2, 1, &[Occupied, Join]),
            [Join],
            "already occupied"
        );
        assert_eq!(
            pass(&o, 0, 0, &[Leave, Vacated]),
            [Leave],
            "stripe 2 still is"
        );
        assert_eq!(pass(&o, 2, 0, &[Leave, Vacated]), [Leave, Vacated]);
        // A stripe that fills and empties in one hand-over, alone.
        assert_eq!(
            pass(&o, 1, 0, &[Occupied, Join, Leave, Vacated]),
            [Occupied, Join, Leave, Vacated]
        );
    }

    #[test]
    fn counts_changed_without_capture_still_count() {
        use OutboxKind::{Join, Occupied};
        let o = Occupancy::new(2);
        // Stripe 0 filled while the outbox was closed: nothing captured.
        assert_eq!(pass(&o, 0, 4, &[]), Vec::<OutboxKind>::new());
        assert_eq!(pass(&o, 1, 1, &[Occupied, Join]), [Join]);
    }
}
