//! Replaying the journal: [`MemoryStore::apply_change`] applies a
//! journaled [`Change`] as the store applied it first, at start before
//! serving (the server reads the journal; see [`crate::changes`]).

use herenow_core::error::Result;
use herenow_core::id::MemberKey;
use herenow_core::store::Heartbeat;

use crate::MemoryStore;
use crate::changes::Change;
use crate::friends::{add_friends, remove_friends, set_friends};

impl MemoryStore {
    /// Applies a journaled change, as at start before serving. Replaying a
    /// journal suffix over a snapshot that already holds part of it gives
    /// the state the store had (see [`crate::changes`]).
    pub fn apply_change(&self, change: &Change) -> Result<()> {
        match change {
            Change::Heartbeats { space, now, beats } => {
                // As at restore: each beat at its own time (its record's
                // for a beat "now"), at most the store's clock, judged by
                // that clock: a record's "now" may be any u64.
                let clock = self.shared.clock.now_ms();
                let beats: Vec<Heartbeat> = beats
                    .iter()
                    .map(|b| Heartbeat {
                        member: b.member.clone(),
                        at_ms: Some(b.at_ms.unwrap_or(*now).min(clock)),
                        meta: b.meta.clone(),
                    })
                    .collect();
                self.beats_here(space, &beats, clock)?;
            }
            Change::PlainBeats {
                space,
                now,
                users,
                guests,
            } => {
                // As `Heartbeats`, every beat at the record's time.
                let clock = self.shared.clock.now_ms();
                let at = (*now).min(clock);
                let beats: Vec<Heartbeat> = users
                    .iter()
                    .map(|id| MemberKey::user(id.clone()))
                    .chain(guests.iter().map(|id| MemberKey::guest(id.clone())))
                    .map(|member| Heartbeat {
                        member,
                        at_ms: Some(at),
                        meta: None,
                    })
                    .collect();
                self.beats_here(space, &beats, clock)?;
            }
            Change::Leave { space, at, members } => {
                if self.spaces.read().contains_key(space) {
                    self.leave_here(space, members, *at, |_, _| Ok(()))?;
                }
            }
            Change::SetConfig { space, config } => {
                config.validate()?;
                let now = self.shared.clock.now_ms();
                self.with_space(space, |st| self.configure(&mut st.lock_all(), *config, now));
            }
            Change::SetFriends { user, friends } => {
                set_friends(&mut self.friends.write(), user, friends)?;
            }
            Change::AddFriends { user, friends } => {
                add_friends(&mut self.friends.write(), user, friends)?;
            }
            Change::RemoveFriends { user, friends } => {
                remove_friends(&mut self.friends.write(), user, friends);
            }
            Change::Erase { user } => {
                self.erase(user)?;
            }
            Change::OutboxAdd { events } => self.shared.outbox.restore(events),
            Change::OutboxAck { ids } => self.shared.outbox.restore_acks(ids),
            Change::SetHooks { space, hooks } => self.restore_hooks(space, hooks)?,
        }
        Ok(())
    }
}
