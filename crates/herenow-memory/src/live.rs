//! [`LiveConnections`] for the memory store: each call takes the lock of
//! the member's stripe (or every stripe, for an attach, whose connection id
//! must be unique in the space) and lets [`Space`] apply the rules of
//! [`herenow_core::conn`].

use async_trait::async_trait;

use herenow_core::capability::LiveConnections;
use herenow_core::conn::{Attach, AttachReport, ConnId, Connection, DetachReport};
use herenow_core::error::Result;
use herenow_core::id::{MemberKey, SpaceName};
use herenow_core::store::check_batch;
use herenow_core::time::Millis;

use super::MemoryStore;
use super::space::Space;

impl MemoryStore {
    /// Ends a connection of `member` in `space` with `end` (a detach or a
    /// linger), under its stripe's lock. A space that does not exist is
    /// not created: nothing there to end.
    fn end_conn(
        &self,
        space: &SpaceName,
        member: &MemberKey,
        end: impl FnOnce(&mut Space, Millis) -> DetachReport,
    ) -> DetachReport {
        let spaces = self.spaces.read();
        match spaces.get(space) {
            Some(s) => {
                let mut s = s.cell_of(member).lock();
                let report = end(&mut s, self.shared.clock.now_ms());
                self.shared.absorb(&mut s);
                report
            }
            None => DetachReport::default(),
        }
    }
}

#[async_trait]
impl LiveConnections for MemoryStore {
    async fn attach(&self, space: &SpaceName, attach: &Attach) -> Result<AttachReport> {
        attach.check()?;
        let now = self.shared.clock.now_ms();
        Ok(self.with_space(space, |st| {
            let mut all = st.lock_all();
            let (out, s) = all.attach(attach, now);
            self.shared.absorb(s);
            out
        })?)
    }

    async fn detach(
        &self,
        space: &SpaceName,
        member: &MemberKey,
        conn: &ConnId,
    ) -> Result<DetachReport> {
        Ok(self.end_conn(space, member, |s, now| s.detach(member, conn, now)))
    }

    async fn linger(
        &self,
        space: &SpaceName,
        member: &MemberKey,
        conn: &ConnId,
    ) -> Result<DetachReport> {
        Ok(self.end_conn(space, member, |s, now| s.linger(member, conn, now)))
    }

    async fn connections(
        &self,
        space: &SpaceName,
        members: &[MemberKey],
    ) -> Result<Vec<Vec<Connection>>> {
        check_batch(members.len())?;
        Ok(self.read(space, |s| match s {
            Some(s) => s.connections(members),
            None => Ok(vec![Vec::new(); members.len()]),
        })?)
    }
}
