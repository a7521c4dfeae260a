//! Erasing a user everywhere ([`UserIndex::erase_user`](herenow_core::UserIndex::erase_user)): the one
//! write that locks several spaces.

use std::sync::Arc;

use herenow_core::error::Result;
use herenow_core::id::MemberId;
use herenow_core::store::ErasureReport;
#[cfg(doc)]
use herenow_core::store::PresenceStore;

use super::MemoryStore;
use super::stripes::Stripes;
use crate::changes::{ChangeRef, Durable};

impl MemoryStore {
    /// Erases `user` everywhere (see [`UserIndex::erase_user`](herenow_core::UserIndex::erase_user)): the
    /// spaces it has sightings in and the friend sets are locked together
    /// and the erasure journaled under those locks, so the journal orders
    /// it exactly against every write it could race with there.
    pub(super) fn erase(&self, user: &MemberId) -> Result<(ErasureReport, Option<Durable>)> {
        let _one_at_a_time = self.erasing.lock();
        let ids = self.shared.seen.user_spaces(user.as_str());
        let held: Vec<Arc<Stripes>> = {
            let names = self.shared.seen.names(&ids);
            let spaces = self.spaces.read();
            names
                .iter()
                .filter_map(|n| spaces.get(n).cloned())
                .collect()
        };
        // Only erasure locks several spaces, one erasure at a time, and it
        // takes no other lock before them: no deadlock.
        let mut spaces: Vec<_> = held.iter().map(|s| s.lock_all()).collect();
        let mut guards: Vec<&mut crate::Space> =
            spaces.iter_mut().flat_map(|s| s.stripes_mut()).collect();
        let mut friends = self.friends.write();
        let mut report = ErasureReport::default();
        for g in guards.iter_mut() {
            if g.erase_user(user) {
                report.presence += 1;
            }
        }
        report.remembered = self.shared.seen.forget_user(user.as_str());
        for g in guards.iter_mut() {
            self.shared.tell_followers(g);
            self.shared.to_outbox(g);
        }
        report.friend_set = friends.remove(user).is_some();
        if report.friend_set {
            self.shared.follow.friends(user);
        }
        friends.retain(|owner, set| {
            if set.remove(user) {
                report.listed_by += 1;
                self.shared.follow.friends(owner);
            }
            !set.is_empty()
        });
        let durable = self.shared.record(ChangeRef::Erase { user })?;
        drop(friends);
        drop(guards);
        drop(spaces);
        Ok((report, durable))
    }
}
