//! Answers: statuses, window counts, "who's online" pages in both orders,
//! subscription snapshots and the export for store snapshots.
//!
//! Nothing here changes the space. Recent-order walks go through
//! [`NewestFirst`]; counts go through the block index
//! ([`Space::count_since`]).

use std::collections::BinaryHeap;

use compact_str::CompactString;

use herenow_core::cursor::{IdCursor, RecentCursor};
use herenow_core::error::InvalidInput;
use herenow_core::event::{EventReceiver, Subscription};
use herenow_core::id::{MemberId, MemberKey, MemberKind};
use herenow_core::limits;
use herenow_core::meta::Metadata;
use herenow_core::policy::Status;
use herenow_core::store::{Counts, KindFilter, ListQuery, MemberStatus, Order, Page, check_batch};
use herenow_core::time::Millis;

use super::Space;
use super::entry::{Key, NIL};
use super::events::MarkedStatus;
use super::walk::NewestFirst;

/// A member's place in a space's recency order: last seen, then the
/// heartbeat's sequence number (unique across a striped space's stripes).
pub type Recency = (Millis, u64);

impl Space {
    /// What a listing says of the member in `slot`.
    pub fn member_status(&self, slot: u32, now: Millis) -> MemberStatus {
        let e = &self.entries[slot as usize];
        MemberStatus {
            member: MemberKey {
                kind: e.kind(),
                id: MemberId::from_compact_unchecked(e.id.clone()),
            },
            status: self.config.status(Some(e.ts), now),
            last_seen_ms: Some(e.ts),
            meta: self.meta.get(&slot).cloned(),
        }
    }

    /// Last seen and status of each member, in the order given; a member
    /// the space does not hold is offline with no last seen.
    pub fn status(
        &self,
        members: &[MemberKey],
        now: Millis,
    ) -> Result<Vec<MemberStatus>, InvalidInput> {
        check_batch(members.len())?;
        Ok(members.iter().map(|m| self.status_of(m, now)).collect())
    }

    /// One member's last seen and status; offline with no last seen if
    /// the space does not hold it.
    pub fn status_of(&self, m: &MemberKey, now: Millis) -> MemberStatus {
        match self.find(m.kind, m.id.as_str()) {
            Some(slot) => self.member_status(slot, now),
            None => MemberStatus {
                member: m.clone(),
                status: Status::Offline,
                last_seen_ms: None,
                meta: None,
            },
        }
    }

    /// Members seen within the window, by kind: exact, and from the block
    /// index in a large space, so it never walks the members.
    pub fn count(&self, window_ms: Option<Millis>, now: Millis) -> Result<Counts, InvalidInput> {
        let window = self.config.check_window(window_ms)?;
        let [users, guests] = self.count_since(now.saturating_sub(window));
        Ok(Counts { users, guests })
    }

    /// Of `members`, those seen within the window, most recent first.
    pub fn online_among(
        &self,
        members: &[MemberKey],
        window_ms: Option<Millis>,
        limit: usize,
        now: Millis,
    ) -> Result<Vec<MemberStatus>, InvalidInput> {
        // Written apart from `online_among_in`: its (stripe, slot) pairs
        // and indirection slow a whole space down (the engine bench's
        // `online_friends_500`).
        let window = self.config.check_window(window_ms)?;
        let cutoff = now.saturating_sub(window);
        let slots = members
            .iter()
            .filter_map(|m| self.find(m.kind, m.id.as_str()))
            .filter(|&s| self.entries[s as usize].ts >= cutoff)
            .collect();
        let slots = newest(slots, limit, |a: &u32, b: &u32| {
            newest_first(&self.entries[*a as usize], &self.entries[*b as usize])
        });
        Ok(slots
            .into_iter()
            .map(|s| self.member_status(s, now))
            .collect())
    }

    /// One page of the members seen within the window.
    pub fn list(&self, query: &ListQuery, now: Millis) -> Result<Page, InvalidInput> {
        // The engine keeps times: most recent first unless asked otherwise.
        let (order, cutoff) = self.list_bounds(query, now)?;
        match order {
            Order::Recent => self.list_recent(query, cutoff, now),
            Order::Id => self.list_by_id(query, cutoff, now),
        }
    }

    fn list_recent(
        &self,
        q: &ListQuery,
        cutoff: Millis,
        now: Millis,
    ) -> Result<Page, InvalidInput> {
        let mut members = Vec::with_capacity(q.limit.min(64));
        let mut last = None;
        for (_, slot) in self.recent_from(q, cutoff)? {
            if members.len() == q.limit {
                let last = last.expect("limit is at least 1");
                return Ok(Page {
                    members,
                    next_cursor: Some(self.recent_cursor(last)),
                    order: Order::Recent,
                });
            }
            members.push(self.member_status(slot, now));
            last = Some(slot);
        }
        Ok(Page {
            members,
            next_cursor: None,
            order: Order::Recent,
        })
    }

    /// What [`Space::list`] checks of a query before listing: its limit
    /// and window. Returns the order it lists in and the window's cutoff.
    pub fn list_bounds(
        &self,
        query: &ListQuery,
        now: Millis,
    ) -> Result<(Order, Millis), InvalidInput> {
        query.check_limit()?;
        let window = self.config.check_window(query.window_ms)?;
        Ok((query.order_or(Order::Recent), now.saturating_sub(window)))
    }

    /// The members a most-recent-first listing walks, newest first, from
    /// `q`'s cursor on, while seen at or after `cutoff`: (key, slot).
    pub fn recent_from(
        &self,
        q: &ListQuery,
        cutoff: Millis,
    ) -> Result<impl Iterator<Item = (Recency, u32)> + '_, InvalidInput> {
        // Cursor: the key of the last member returned, and its slot as a
        // hint: if that member has not moved, the next page starts right
        // after it without a search.
        let after = match &q.cursor {
            None => None,
            Some(c) => Some(RecentCursor::decode(c).ok_or(InvalidInput::BadCursor)?),
        };
        let after = after.map(|c| {
            let key: Key = (c.at_ms, c.tiebreak);
            (key, self.find(c.member.kind, c.member.id.as_str()))
        });
        let walk = NewestFirst::new(&self.entries, q.kinds, |kind| match after {
            None => self.lists[kind.index()].head,
            Some((key, slot)) => {
                let hint = slot.map(|s| &self.entries[s as usize]);
                match hint {
                    Some(e) if e.kind() == kind && e.key() == key => e.next,
                    _ => {
                        let mut s = self.seek_le(kind, key);
                        while s != NIL && self.entries[s as usize].key() >= key {
                            s = self.entries[s as usize].next;
                        }
                        s
                    }
                }
            }
        });
        Ok(walk
            .map(|slot| (self.entries[slot as usize].key(), slot))
            .take_while(move |((ts, _), _)| *ts >= cutoff))
    }

    /// The most-recent-first cursor that continues after the member in
    /// `slot`.
    pub fn recent_cursor(&self, slot: u32) -> String {
        let e = &self.entries[slot as usize];
        let (at_ms, tiebreak) = e.key();
        RecentCursor {
            at_ms,
            tiebreak,
            member: MemberKey {
                kind: e.kind(),
                id: MemberId::from_compact_unchecked(e.id.clone()),
            },
        }
        .encode()
    }

    fn list_by_id(&self, q: &ListQuery, cutoff: Millis, now: Millis) -> Result<Page, InvalidInput> {
        let after = match &q.cursor {
            None => None,
            Some(c) => {
                let c = IdCursor::decode(c).ok_or(InvalidInput::BadCursor)?;
                Some((c.member.id, c.member.kind))
            }
        };
        // The `limit + 1` smallest (id, kind) after the cursor: a bounded
        // max-heap over one pass of the slab.
        let mut heap: BinaryHeap<(&str, MemberKind, u32)> = BinaryHeap::with_capacity(q.limit + 1);
        for (slot, e) in self.entries.iter().enumerate() {
            if e.is_free() || e.ts < cutoff || !q.kinds.admits(e.kind()) {
                continue;
            }
            let item = (e.id.as_str(), e.kind(), slot as u32);
            if let Some((id, kind)) = &after
                && (item.0, item.1) <= (id.as_str(), *kind)
            {
                continue;
            }
            if heap.len() <= q.limit {
                heap.push(item);
            } else if heap.peek().is_some_and(|top| item < *top) {
                heap.pop();
                heap.push(item);
            }
        }
        let mut items = heap.into_sorted_vec();
        let more = items.len() > q.limit;
        items.truncate(q.limit);
        let next_cursor = if more {
            items.last().map(|(id, kind, _)| {
                IdCursor {
                    member: MemberKey {
                        kind: *kind,
                        id: MemberId::from_compact_unchecked(CompactString::from(*id)),
                    },
                }
                .encode()
            })
        } else {
            None
        };
        let members = items
            .into_iter()
            .map(|(_, _, s)| self.member_status(s, now))
            .collect();
        Ok(Page {
            members,
            next_cursor,
            order: Order::Id,
        })
    }

    /// A snapshot of the members present (by the watermarks), most recent
    /// first, and a receiver for every event after it. The caller holds the
    /// space's lock, so no event can fall between the two.
    pub fn subscribe(&self, now: Millis) -> Subscription {
        let events = self.events_receiver();
        let snapshot: Vec<MemberStatus> = self
            .present_newest()
            .take(limits::MAX_SNAPSHOT)
            .map(|(_, slot)| self.snapshot_entry(slot, now))
            .collect();
        let snapshot_omitted = if snapshot.len() == limits::MAX_SNAPSHOT {
            self.present_count().saturating_sub(snapshot.len() as u64)
        } else {
            0
        };
        Subscription {
            snapshot,
            snapshot_omitted,
            events,
        }
    }

    /// A receiver for every event from now on (a striped space's
    /// subscription takes its snapshot itself, from every stripe).
    pub fn events_receiver(&self) -> EventReceiver {
        EventReceiver::new(self.events.subscribe())
    }

    /// The members present (by the watermarks), most recent first, as
    /// (key, slot).
    pub fn present_newest(&self) -> impl Iterator<Item = (Recency, u32)> + '_ {
        self.newest_first(KindFilter::All)
            .map(|slot| (self.entries[slot as usize].key(), slot))
            .take_while(|(key, _)| self.marked_status(*key) != MarkedStatus::Gone)
    }

    /// How many members are present (by the watermarks).
    pub fn present_count(&self) -> u64 {
        let [u, g] = self.count_since(self.gone_mark.0.saturating_add(1));
        u + g
    }

    /// What a subscription snapshot says of the present member in `slot`
    /// (from [`Space::present_newest`]): its status as the events told.
    pub fn snapshot_entry(&self, slot: u32, now: Millis) -> MemberStatus {
        let mut status = self.member_status(slot, now);
        status.status = self
            .marked_status(self.entries[slot as usize].key())
            .status();
        status
    }

    /// Every stored member with its last-seen time and metadata, for
    /// snapshots: oldest first, so a restore links each at its list's head.
    pub fn export(&self) -> Vec<(MemberKey, Millis, Option<Metadata>)> {
        let mut out = Vec::with_capacity(self.len());
        out.extend(self.oldest_first().map(|slot| {
            let e = &self.entries[slot as usize];
            (
                MemberKey {
                    kind: e.kind(),
                    id: MemberId::from_compact_unchecked(e.id.clone()),
                },
                e.ts,
                self.meta.get(&slot).cloned(),
            )
        }));
        out
    }
}

/// The order of `sort_most_recent_first` (last seen, newest first, then
/// kind, then id), on entries.
fn newest_first(a: &super::entry::Entry, b: &super::entry::Entry) -> std::cmp::Ordering {
    b.ts.cmp(&a.ts)
        .then_with(|| a.kind().cmp(&b.kind()))
        .then_with(|| a.id.cmp(&b.id))
}

/// Of `found` (members' places, repeats possible), the `limit` first by
/// `order`, in that order: only those become answers (500 friends, 100
/// shown).
fn newest<T: Ord + Copy>(
    mut found: Vec<T>,
    limit: usize,
    order: impl Fn(&T, &T) -> std::cmp::Ordering,
) -> Vec<T> {
    found.sort_unstable();
    found.dedup();
    if found.len() > limit && limit > 0 {
        found.select_nth_unstable_by(limit - 1, &order);
    }
    found.truncate(limit);
    found.sort_unstable_by(order);
    found
}

/// [`Space::online_among`] of a space split over `stripes`, member `m`
/// living in `stripes[stripe_of(m)]`: only `(stripe, slot)` pairs are
/// gathered and cut to the `limit` newest across stripes, and only those
/// become answers.
pub(crate) fn online_among_in<S: std::ops::Deref<Target = Space>>(
    stripes: &[S],
    stripe_of: impl Fn(&MemberKey) -> usize,
    members: &[MemberKey],
    window_ms: Option<Millis>,
    limit: usize,
    now: Millis,
) -> Result<Vec<MemberStatus>, InvalidInput> {
    let config = &stripes[0].config;
    let window = config.check_window(window_ms)?;
    let cutoff = now.saturating_sub(window);
    let found = members
        .iter()
        .filter_map(|m| {
            let k = stripe_of(m);
            let space = &stripes[k];
            space
                .find(m.kind, m.id.as_str())
                .filter(|&slot| space.entries[slot as usize].ts >= cutoff)
                .map(|slot| (k as u32, slot))
        })
        .collect();
    let entry = |&(k, slot): &(u32, u32)| &stripes[k as usize].entries[slot as usize];
    let found = newest(found, limit, |a, b| newest_first(entry(a), entry(b)));
    Ok(found
        .into_iter()
        .map(|(k, slot)| stripes[k as usize].member_status(slot, now))
        .collect())
}
