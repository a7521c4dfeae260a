//! Online-count history: each space's `count` within its window, sampled
//! every [`INTERVAL`] into a ring of 24 hours, for the page's chart and
//! `GET /v1/spaces/{space}/history`.
//!
//! Bounded: a ring holds at most [`SAMPLES`] samples (16 bytes each), and at
//! most [`MAX_SPACES`] spaces are tracked; spaces beyond that are not
//! sampled until a tracked space disappears. A space's ring is dropped as
//! soon as the store no longer lists the space.

use std::collections::{HashMap, HashSet, VecDeque};
use std::time::Duration;

use herenow_core::{Millis, PresenceStore, SpaceName};
use parking_lot::Mutex;

/// Time between samples.
pub const INTERVAL: Duration = Duration::from_secs(10);
/// Samples kept per space: 24 hours' worth.
pub const SAMPLES: usize = 24 * 60 * 60 / 10;
/// Spaces tracked at most.
pub const MAX_SPACES: usize = 1_000;
/// Spaces asked of the store per call while listing them.
const PAGE: usize = 1_000;

/// One sample: online users and guests at a time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sample {
    /// When, by the store's clock.
    pub at_ms: Millis,
    /// Users online within the space's window.
    pub users: u32,
    /// Guests online within the space's window.
    pub guests: u32,
}

/// Per-space rings of count samples, [`INTERVAL`] apart and 24 hours
/// long, for at most [`MAX_SPACES`] spaces.
#[derive(Default)]
pub struct History {
    rings: Mutex<HashMap<SpaceName, VecDeque<Sample>>>,
}

impl History {
    /// A history tracking no space yet; [`sample`](Self::sample) adds them.
    pub fn new() -> Self {
        Self::default()
    }

    /// Takes one sample of every tracked space, starts tracking new spaces
    /// while there is room, and drops the rings of spaces that are gone.
    pub async fn sample(&self, store: &dyn PresenceStore) -> Result<(), herenow_core::Error> {
        let mut listed = HashSet::new();
        let mut after: Option<SpaceName> = None;
        loop {
            let page = store.spaces(after.as_ref(), PAGE).await?;
            let full = page.len() == PAGE;
            after = page.last().map(|s| s.space.clone());
            listed.extend(page.into_iter().map(|s| s.space));
            if !full {
                break;
            }
        }
        let wanted: Vec<SpaceName> = {
            let mut rings = self.rings.lock();
            rings.retain(|space, _| listed.contains(space));
            let room = MAX_SPACES.saturating_sub(rings.len());
            let mut wanted: Vec<SpaceName> = rings.keys().cloned().collect();
            let mut new: Vec<&SpaceName> =
                listed.iter().filter(|s| !rings.contains_key(*s)).collect();
            // Deterministic choice when there is not room for all.
            new.sort_unstable();
            wanted.extend(new.into_iter().take(room).cloned());
            wanted
        };
        let now = store.now_ms();
        let mut samples = Vec::with_capacity(wanted.len());
        let mut first_error = None;
        for space in wanted {
            match store.count(&space, None).await {
                Ok(c) => samples.push((
                    space,
                    Sample {
                        at_ms: now,
                        users: u32::try_from(c.users).unwrap_or(u32::MAX),
                        guests: u32::try_from(c.guests).unwrap_or(u32::MAX),
                    },
                )),
                Err(e) => {
                    first_error.get_or_insert(e);
                }
            }
        }
        let mut rings = self.rings.lock();
        for (space, sample) in samples {
            let ring = rings.entry(space).or_default();
            if ring.len() == SAMPLES {
                ring.pop_front();
            }
            ring.push_back(sample);
        }
        first_error.map_or(Ok(()), Err)
    }

    /// The samples of `space` taken at or after `since_ms`, oldest first.
    pub fn since(&self, space: &SpaceName, since_ms: Millis) -> Vec<Sample> {
        let rings = self.rings.lock();
        let Some(ring) = rings.get(space) else {
            return Vec::new();
        };
        // Samples are in time order: skip the old ones by binary search.
        let start = ring.partition_point(|s| s.at_ms < since_ms);
        ring.range(start..).copied().collect()
    }

    /// How many spaces are tracked.
    pub fn spaces(&self) -> usize {
        self.rings.lock().len()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use herenow_core::{Heartbeat, ManualClock, MemberId, MemberKey, SpaceConfig};
    use herenow_memory::MemoryStore;

    use super::*;

    #[tokio::test]
    async fn samples_and_drops_spaces() {
        let clock = ManualClock::new(1_000_000);
        let store = MemoryStore::new(Arc::new(clock.clone()), SpaceConfig::default());
        let lobby = SpaceName::new("lobby").unwrap();
        let a = MemberKey::user(MemberId::new("a").unwrap());
        store.heartbeat(&lobby, &[Heartbeat::now(a)]).await.unwrap();
        let history = History::new();
        history.sample(&store).await.unwrap();
        clock.advance(INTERVAL);
        history.sample(&store).await.unwrap();
        let all = history.since(&lobby, 0);
        assert_eq!(all.len(), 2);
        assert_eq!(all[0].users, 1);
        assert_eq!(history.since(&lobby, 1_000_001).len(), 1);

        // Past the retention the member is swept and the idle space
        // dropped; its ring goes with it.
        clock.advance(Duration::from_secs(16 * 60));
        store.tick().await.unwrap();
        history.sample(&store).await.unwrap();
        assert_eq!(history.spaces(), 0);
    }
}
