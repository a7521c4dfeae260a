//! Live connections on top of the member entries (the rules are in
//! [`crate::conn`]): a visible attach is a heartbeat "now"; the last
//! visible connection to go makes its member leave, others only
//! `disconnect`.
//!
//! The bookkeeping (by id, by member, by expiry) is
//! [`ConnTable`](crate::memory::conns::ConnTable)'s; this module decides the
//! events.

use super::Space;
use super::events::{Cause, Presence};
use crate::conn::{Attach, AttachReport, ConnId, Connection, DetachReport};
use crate::error::InvalidInput;
use crate::event::{EventKind, LeaveReason};
use crate::id::MemberKey;
use crate::limits;
use crate::memory::conns::Conn;
use crate::memory::seen::SightingNote;
use crate::policy::Status;
use crate::store::{HeartbeatReport, check_batch};
use crate::time::Millis;

impl Space {
    /// Opens, refreshes or changes a connection (see [`crate::conn`] for the
    /// rules). Checks everything before changing anything.
    pub fn attach(&mut self, a: &Attach, now: Millis) -> Result<AttachReport, InvalidInput> {
        a.check()?;
        let prev = self.conns.get(&a.conn);
        match prev {
            Some(p) if p.member != a.member => return Err(InvalidInput::ConnIdTaken),
            None if self.conns.count(&a.member) >= limits::MAX_CONNS_PER_MEMBER => {
                return Err(InvalidInput::TooManyConnections);
            }
            _ => {}
        }
        let was_visible = prev.is_some_and(|p| !p.invisible);
        let meta_changed = prev.is_some_and(|p| p.meta != a.meta);
        let others = self.conns.visible_others(&a.member, &a.conn);
        let prev = self.conns.upsert(
            &a.conn,
            Conn {
                member: a.member.clone(),
                meta: a.meta.clone(),
                invisible: a.invisible,
                expires: now.saturating_add(a.ttl_ms),
            },
        );
        let mut report = AttachReport {
            opened: prev.is_none(),
            ..AttachReport::default()
        };
        let cause = Cause {
            conn: &a.conn,
            meta: a.meta.as_ref(),
            opened: !was_visible,
            meta_changed,
        };
        if !a.invisible {
            let mut beat = HeartbeatReport::default();
            // The member shows the metadata of the connection that last
            // changed it.
            let meta = if meta_changed || !was_visible {
                a.meta.as_ref()
            } else {
                None
            };
            self.apply(
                a.member.kind,
                &a.member.id,
                now,
                meta,
                now,
                &mut beat,
                Some(cause),
            );
            report.joined = beat.joined == 1;
        } else if was_visible {
            report.left = self.conn_gone(&a.member, others, LeaveReason::Explicit, cause, now);
        }
        Ok(report)
    }

    /// Whether connection `conn` is open here for a member other than
    /// `member` (a striped space keeps connection ids unique across its
    /// stripes with it).
    pub fn conn_held_by_other(&self, conn: &ConnId, member: &MemberKey) -> bool {
        self.conns.get(conn).is_some_and(|c| c.member != *member)
    }

    /// Closes a connection of `member` at `now`. A connection id that is
    /// unknown or belongs to someone else is not found.
    pub fn detach(&mut self, member: &MemberKey, conn: &ConnId, now: Millis) -> DetachReport {
        if self.conns.get(conn).is_none_or(|c| c.member != *member) {
            return DetachReport::default();
        }
        let left = self.drop_conn(conn, LeaveReason::Explicit, now);
        DetachReport { found: true, left }
    }

    /// Removes a connection and announces it; returns whether its member
    /// left.
    pub(super) fn drop_conn(&mut self, conn: &ConnId, reason: LeaveReason, now: Millis) -> bool {
        let Some(c) = self.conns.remove(conn) else {
            return false;
        };
        if c.invisible {
            return false;
        }
        let others = self.conns.visible_others(&c.member, conn);
        let cause = Cause {
            conn,
            meta: c.meta.as_ref(),
            opened: false,
            meta_changed: false,
        };
        self.conn_gone(&c.member, others, reason, cause, now)
    }

    /// A visible connection of `member` went away (closed, expired or
    /// turned invisible) and `others` visible ones remain: `disconnect`, or
    /// `leave` if it was the last. Returns whether the member left. The
    /// last-seen time remembered is `now` when the connection was closed
    /// (a goodbye, like a leave) and its last ping when it expired.
    fn conn_gone(
        &mut self,
        member: &MemberKey,
        others: usize,
        reason: LeaveReason,
        cause: Cause<'_>,
        now: Millis,
    ) -> bool {
        let Some(slot) = self.find(member.kind, member.id.as_str()) else {
            return false;
        };
        let key = self.entries[slot as usize].key();
        let presence = self.presence(key);
        if presence == Presence::Gone {
            return false;
        }
        if others > 0 {
            self.emit_caused(
                EventKind::Disconnect,
                slot,
                presence.status(),
                Some(key.0),
                None,
                Some(cause),
            );
            return false;
        }
        self.emit_caused(
            EventKind::Leave,
            slot,
            Status::Offline,
            Some(key.0),
            Some(reason),
            Some(cause),
        );
        self.remove(slot);
        let ended = match reason {
            LeaveReason::Explicit => key.0.max(now),
            LeaveReason::Timeout | LeaveReason::Expired => key.0,
        };
        self.sightings
            .push(SightingNote::Ended(member.kind, member.id.clone(), ended));
        true
    }

    /// Each member's live connections, by id, in the order asked.
    pub fn connections(&self, members: &[MemberKey]) -> Result<Vec<Vec<Connection>>, InvalidInput> {
        check_batch(members.len())?;
        Ok(members.iter().map(|m| self.conns.of(m)).collect())
    }

    /// Live connections in the space, visible or not: the store keeps a
    /// space that has any, even with no member.
    pub fn connection_count(&self) -> usize {
        self.conns.len()
    }
}
