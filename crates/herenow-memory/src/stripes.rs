//! A space split over stripes, so that several threads can write one busy
//! space at once: ARCHITECTURE.md, "A busy space written from many
//! threads", says how (a member in one stripe for good, keys unique across
//! stripes, one event channel, reads locking every stripe in order).
//!
//! Beyond that: connection ids stay unique per space (an attach locks
//! every stripe and refuses an id another member holds in any of them);
//! the policy and the `Seen` registration are the same in every stripe;
//! occupancy is shared (`occupancy.rs`). Each stripe keeps its own
//! watermarks and sweep, moved to the same thresholds, so a member's status
//! never depends on its stripe. A whole space is one stripe, and every
//! path here then goes straight to it.
//!
//! Lock order: the space map, then stripes in increasing number, then the
//! outbox; only erasure holds several spaces.

use std::sync::Arc;

use parking_lot::{Mutex, MutexGuard};

use herenow_core::conn::{Attach, AttachReport, Connection};
use herenow_core::cursor::IdCursor;
use herenow_core::error::InvalidInput;
use herenow_core::event::Subscription;
use herenow_core::id::MemberKey;
use herenow_core::limits;
use herenow_core::policy::SpaceConfig;
use herenow_core::store::{Counts, ListQuery, MemberStatus, Order, Page, check_batch};
use herenow_core::time::Millis;

use super::occupancy::Occupancy;
use super::space::{Recency, Space, online_among_in};

/// The most stripes a space may have.
pub const MAX_STRIPES: usize = 64;

/// The stripes a server's spaces get unless told otherwise, for `writers`
/// threads writing at once (its runtime's workers): whole spaces below 8,
/// four stripes from 8 on. A whole space stops scaling at about the
/// point where 8 threads write it at once, and stripes cost every write a
/// split and every read a merge: they start where that cost buys
/// parallel writers, and more than four give one space no more.
pub fn default_space_stripes(writers: usize) -> usize {
    if writers >= 8 { 4 } else { 1 }
}

/// The stripe of `member` in a space of `stripes` stripes: a hash of its
/// id (XXH3, with the kind as its seed) that never changes, so a journal
/// replayed or a snapshot restored is split again by the same rule,
/// whatever the number of stripes then.
pub(super) fn stripe_of(stripes: usize, member: &MemberKey) -> usize {
    if stripes <= 1 {
        return 0;
    }
    let h = xxhash_rust::xxh3::xxh3_64_with_seed(member.id.as_str().as_bytes(), member.kind as u64);
    // Multiply-shift: the high bits of h times n, no division.
    ((u128::from(h) * stripes as u128) >> 64) as usize
}

/// Splits `items` by the stripe of each one's member, keeping their order
/// within a stripe; `None` for a whole space (nothing to split). Each
/// member is hashed once and each part allocated once, at its size: the
/// split is on every heartbeat batch's path.
pub(super) fn split<T: Clone>(
    stripes: usize,
    items: &[T],
    member: impl Fn(&T) -> &MemberKey,
) -> Option<Vec<Vec<T>>> {
    split_map(stripes, items, member, T::clone)
}

/// [`split`] without copies: each part borrows its items.
pub(super) fn split_refs<T>(
    stripes: usize,
    items: &[T],
    member: impl Fn(&T) -> &MemberKey,
) -> Option<Vec<Vec<&T>>> {
    split_map(stripes, items, member, |t| t)
}

/// [`split`], each item put in its part as `map` makes it.
fn split_map<'a, T, U>(
    stripes: usize,
    items: &'a [T],
    member: impl Fn(&T) -> &MemberKey,
    map: impl Fn(&'a T) -> U,
) -> Option<Vec<Vec<U>>> {
    if stripes <= 1 {
        return None;
    }
    let of: Vec<u8> = items
        .iter()
        .map(|item| stripe_of(stripes, member(item)) as u8)
        .collect();
    let mut sizes = vec![0usize; stripes];
    for &k in &of {
        sizes[k as usize] += 1;
    }
    let mut out: Vec<Vec<U>> = sizes.into_iter().map(Vec::with_capacity).collect();
    for (item, &k) in items.iter().zip(&of) {
        out[k as usize].push(map(item));
    }
    Some(out)
}

/// A space's stripes: one lock each.
pub(super) struct Stripes {
    cells: Box<[Mutex<Space>]>,
}

impl Stripes {
    /// The stripes of one space, built by [`make`], in stripe order.
    pub(super) fn new(spaces: Vec<Space>) -> Self {
        assert!(!spaces.is_empty(), "a space has at least one stripe");
        Self {
            cells: spaces.into_iter().map(Mutex::new).collect(),
        }
    }

    /// How many stripes.
    pub(super) fn len(&self) -> usize {
        self.cells.len()
    }

    /// Stripe `k`.
    pub(super) fn cell(&self, k: usize) -> &Mutex<Space> {
        &self.cells[k]
    }

    /// The stripe `member` lives in.
    pub(super) fn cell_of(&self, member: &MemberKey) -> &Mutex<Space> {
        &self.cells[stripe_of(self.cells.len(), member)]
    }

    /// Every stripe, locked in order.
    pub(super) fn lock_all(&self) -> Locked<'_> {
        Locked {
            guards: self.cells.iter().map(|c| c.lock()).collect(),
        }
    }
}

/// Builds the stripes of a new space: `n` of them, sharing the first
/// one's event channel and an occupancy when `n > 1`; `prepare` then sets
/// up each (the store's taps and its `Seen` id).
pub(super) fn make(
    name: &herenow_core::id::SpaceName,
    config: SpaceConfig,
    now: Millis,
    n: usize,
    mut prepare: impl FnMut(&mut Space),
) -> Vec<Space> {
    let n = n.clamp(1, MAX_STRIPES);
    let occupancy = (n > 1).then(|| Arc::new(Occupancy::new(n)));
    let mut out: Vec<Space> = Vec::with_capacity(n);
    for k in 0..n {
        let events = out.first().map(Space::events_sender);
        let mut s = Space::new_stripe(name.clone(), config, now, k as u64, n as u64, events);
        if let Some(o) = &occupancy {
            s.set_occupancy(o.clone(), k);
        }
        prepare(&mut s);
        out.push(s);
    }
    out
}

/// Every stripe of a space, locked: reads answer for the whole space.
pub(super) struct Locked<'a> {
    guards: Vec<MutexGuard<'a, Space>>,
}

impl Locked<'_> {
    /// The first stripe: the policy, the name, the `Seen` id and the event
    /// channel are the same in every stripe.
    pub(super) fn first(&self) -> &Space {
        &self.guards[0]
    }

    /// Each stripe, for writes that touch all of them.
    pub(super) fn stripes_mut(&mut self) -> impl Iterator<Item = &mut Space> {
        self.guards.iter_mut().map(|g| &mut **g)
    }

    /// [`Space::attach`] in the member's stripe, refused
    /// ([`InvalidInput::ConnIdTaken`]) if another member holds the
    /// connection id in any stripe: ids are unique per space. Returns the
    /// member's stripe too, for the store to absorb what it noted.
    pub(super) fn attach(
        &mut self,
        a: &Attach,
        now: Millis,
    ) -> (Result<AttachReport, InvalidInput>, &mut Space) {
        let mine = stripe_of(self.guards.len(), &a.member);
        let taken = self
            .guards
            .iter()
            .enumerate()
            .any(|(k, s)| k != mine && s.conn_held_by_other(&a.conn, &a.member));
        let s = &mut *self.guards[mine];
        let out = if taken {
            Err(InvalidInput::ConnIdTaken)
        } else {
            s.attach(a, now)
        };
        (out, s)
    }

    fn whole(&self) -> Option<&Space> {
        (self.guards.len() == 1).then(|| &*self.guards[0])
    }

    /// Runs `f` on each stripe with the items of `items` that live there
    /// (in their order), skipping stripes with none; returns each call's
    /// answer with the places its items had in `items`.
    fn per_stripe<T, R>(
        &self,
        items: &[T],
        member: impl Fn(&T) -> &MemberKey,
        mut f: impl FnMut(&Space, &[T]) -> R,
    ) -> Vec<(Vec<usize>, R)>
    where
        T: Clone,
    {
        let n = self.guards.len();
        let mut places: Vec<Vec<usize>> = vec![Vec::new(); n];
        let mut parts: Vec<Vec<T>> = vec![Vec::new(); n];
        for (i, item) in items.iter().enumerate() {
            let k = stripe_of(n, member(item));
            places[k].push(i);
            parts[k].push(item.clone());
        }
        places
            .into_iter()
            .zip(parts)
            .zip(self.guards.iter())
            .filter(|((p, _), _)| !p.is_empty())
            .map(|((p, part), g)| {
                let r = f(g, &part);
                (p, r)
            })
            .collect()
    }

    /// [`Space::status`] of the whole space: each member asked of its
    /// stripe.
    pub(super) fn status(
        &self,
        members: &[MemberKey],
        now: Millis,
    ) -> Result<Vec<MemberStatus>, InvalidInput> {
        if let Some(s) = self.whole() {
            return s.status(members, now);
        }
        check_batch(members.len())?;
        let n = self.guards.len();
        Ok(members
            .iter()
            .map(|m| self.guards[stripe_of(n, m)].status_of(m, now))
            .collect())
    }

    /// [`Space::connections`] of the whole space.
    pub(super) fn connections(
        &self,
        members: &[MemberKey],
    ) -> Result<Vec<Vec<Connection>>, InvalidInput> {
        if let Some(s) = self.whole() {
            return s.connections(members);
        }
        check_batch(members.len())?;
        let mut out: Vec<Vec<Connection>> = vec![Vec::new(); members.len()];
        for (places, answer) in self.per_stripe(members, |m| m, |s, part| s.connections(part)) {
            for (i, conns) in places.into_iter().zip(answer?) {
                out[i] = conns;
            }
        }
        Ok(out)
    }

    /// [`Space::count`] of the whole space: the stripes' counts summed.
    pub(super) fn count(
        &self,
        window_ms: Option<Millis>,
        now: Millis,
    ) -> Result<Counts, InvalidInput> {
        let mut total = Counts::default();
        for g in &self.guards {
            let c = g.count(window_ms, now)?;
            total.users += c.users;
            total.guests += c.guests;
        }
        Ok(total)
    }

    /// Members stored, by kind, in every stripe.
    pub(super) fn totals(&self) -> Counts {
        let mut total = Counts::default();
        for g in &self.guards {
            let c = g.totals();
            total.users += c.users;
            total.guests += c.guests;
        }
        total
    }

    /// Bytes of heap every stripe holds.
    pub(super) fn heap_bytes(&self) -> usize {
        self.guards.iter().map(|g| g.heap_bytes()).sum()
    }

    /// Whether the space holds nothing the store must keep: no member, no
    /// connection, no subscriber, the default policy.
    pub(super) fn is_idle(&self, defaults: SpaceConfig) -> bool {
        self.first().subscribers() == 0
            && self.first().config() == defaults
            && self
                .guards
                .iter()
                .all(|g| g.is_empty() && g.connection_count() == 0)
    }

    /// [`Space::online_among`] of the whole space: each member looked up
    /// in its stripe, the newest `limit` chosen across stripes, and only
    /// those made answers.
    pub(super) fn online_among(
        &self,
        members: &[MemberKey],
        window_ms: Option<Millis>,
        limit: usize,
        now: Millis,
    ) -> Result<Vec<MemberStatus>, InvalidInput> {
        if let Some(s) = self.whole() {
            return s.online_among(members, window_ms, limit, now);
        }
        let n = self.guards.len();
        online_among_in(
            &self.guards,
            |m| stripe_of(n, m),
            members,
            window_ms,
            limit,
            now,
        )
    }

    /// [`Space::list`] of the whole space: most recent first, the stripes'
    /// walks from the cursor merged by key (each walked only as far as the
    /// page takes from it); by id, the stripes' pages merged by id.
    pub(super) fn list(&self, query: &ListQuery, now: Millis) -> Result<Page, InvalidInput> {
        if let Some(s) = self.whole() {
            return s.list(query, now);
        }
        let (order, cutoff) = self.first().list_bounds(query, now)?;
        let limit = query.limit;
        if order == Order::Recent {
            let walks = self
                .guards
                .iter()
                .map(|g| g.recent_from(query, cutoff))
                .collect::<Result<Vec<_>, _>>()?;
            let mut members = Vec::with_capacity(limit.min(64));
            let mut last: Option<(usize, u32)> = None;
            for (k, slot) in NewestOf::new(walks) {
                if members.len() == limit {
                    let (k, slot) = last.expect("limit is at least 1");
                    return Ok(Page {
                        members,
                        next_cursor: Some(self.guards[k].recent_cursor(slot)),
                        order,
                    });
                }
                members.push(self.guards[k].member_status(slot, now));
                last = Some((k, slot));
            }
            return Ok(Page {
                members,
                next_cursor: None,
                order,
            });
        }
        let mut pages = Vec::with_capacity(self.guards.len());
        for g in &self.guards {
            pages.push(g.list(query, now)?);
        }
        let more = pages.iter().any(|p| p.next_cursor.is_some());
        let mut members: Vec<MemberStatus> = pages.into_iter().flat_map(|p| p.members).collect();
        members.sort_unstable_by(|a, b| {
            (a.member.id.as_str(), a.member.kind).cmp(&(b.member.id.as_str(), b.member.kind))
        });
        let more = more || members.len() > limit;
        members.truncate(limit);
        let next_cursor = more.then(|| members.last()).flatten().map(|m| {
            IdCursor {
                member: m.member.clone(),
            }
            .encode()
        });
        Ok(Page {
            members,
            next_cursor,
            order,
        })
    }

    /// [`Space::subscribe`] of the whole space: one receiver (the stripes
    /// share a channel) and the stripes' present members merged newest
    /// first by key, as a whole space lists them, under every stripe's
    /// lock; each stripe is walked only as far as the merge takes from it.
    pub(super) fn subscribe(&self, now: Millis) -> Subscription {
        if let Some(s) = self.whole() {
            return s.subscribe(now);
        }
        let events = self.first().events_receiver();
        let walks = self.guards.iter().map(|g| g.present_newest()).collect();
        let snapshot: Vec<MemberStatus> = NewestOf::new(walks)
            .take(limits::MAX_SNAPSHOT)
            .map(|(k, slot)| self.guards[k].snapshot_entry(slot, now))
            .collect();
        let snapshot_omitted = if snapshot.len() == limits::MAX_SNAPSHOT {
            let present: u64 = self.guards.iter().map(|g| g.present_count()).sum();
            present.saturating_sub(snapshot.len() as u64)
        } else {
            0
        };
        Subscription {
            snapshot,
            snapshot_omitted,
            events,
        }
    }
}

/// The stripes' walks, each newest first by key, merged into one:
/// (stripe, slot), newest first. Keys are unique across stripes, so the
/// order is the one a whole space would have. The newest head is found by
/// a scan of the heads: at most [`MAX_STRIPES`], a comparison or two for
/// the usual few, cheaper than a heap's upkeep at these sizes
/// (`examples/striped_reads.rs` compares them).
struct NewestOf<I> {
    walks: Vec<I>,
    heads: Vec<Option<(Recency, u32)>>,
}

impl<I: Iterator<Item = (Recency, u32)>> NewestOf<I> {
    fn new(mut walks: Vec<I>) -> Self {
        let heads = walks.iter_mut().map(Iterator::next).collect();
        Self { walks, heads }
    }
}

impl<I: Iterator<Item = (Recency, u32)>> Iterator for NewestOf<I> {
    type Item = (usize, u32);

    fn next(&mut self) -> Option<(usize, u32)> {
        let (k, &(_, slot)) = self
            .heads
            .iter()
            .enumerate()
            .filter_map(|(k, h)| h.as_ref().map(|h| (k, h)))
            .max_by_key(|(_, (key, _))| *key)?;
        self.heads[k] = self.walks[k].next();
        Some((k, slot))
    }
}

#[cfg(test)]
mod tests {
    use herenow_core::id::MemberId;

    use super::*;

    #[test]
    fn spaces_are_striped_from_eight_writer_threads() {
        for (writers, stripes) in [(1, 1), (2, 1), (4, 1), (7, 1), (8, 4), (16, 4), (64, 4)] {
            assert_eq!(default_space_stripes(writers), stripes, "{writers} writers");
        }
    }

    #[test]
    fn members_spread_over_every_stripe_and_stay_put() {
        let mut seen = [0usize; 4];
        for i in 0..4000 {
            let m = MemberKey::user(MemberId::new(&format!("user-{i}")).unwrap());
            let k = stripe_of(4, &m);
            assert_eq!(k, stripe_of(4, &m));
            seen[k] += 1;
        }
        assert!(seen.iter().all(|&n| (800..1200).contains(&n)), "{seen:?}");
        let m = MemberKey::guest(MemberId::new("x").unwrap());
        assert_eq!(stripe_of(1, &m), 0);
    }
}
