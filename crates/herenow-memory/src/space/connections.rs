//! Live connections on top of the member entries, by the rules of
//! [`herenow_core::conn`].
//!
//! The bookkeeping (by id, by member, by expiry) is
//! [`ConnTable`](crate::conns::ConnTable)'s; this module decides the
//! events.

use herenow_core::conn::{Attach, AttachReport, ConnId, Connection, DetachReport};
use herenow_core::error::InvalidInput;
use herenow_core::event::{EventKind, LeaveReason};
use herenow_core::id::MemberKey;
use herenow_core::limits;
use herenow_core::meta::Metadata;
use herenow_core::policy::Status;
use herenow_core::store::{HeartbeatReport, check_batch};
use herenow_core::time::Millis;

use super::Space;
use super::events::{Cause, MarkedStatus};
use crate::conns::Conn;
use crate::seen::SightingNote;

impl Space {
    /// Opens, refreshes or changes a connection (see [`herenow_core::conn`] for the
    /// rules). Checks everything before changing anything.
    pub fn attach(&mut self, a: &Attach, now: Millis) -> Result<AttachReport, InvalidInput> {
        a.check()?;
        let prev = self.conns.get(&a.conn);
        // A new visible connection takes the place of one of its member's
        // in their grace: the member never left, so nobody is told.
        let heir = (prev.is_none() && !a.invisible)
            .then(|| self.conns.lingering_of(&a.member))
            .flatten();
        match prev {
            Some(p) if p.member != a.member => return Err(InvalidInput::ConnIdTaken),
            None if heir.is_none()
                && self.conns.count(&a.member) >= limits::MAX_CONNS_PER_MEMBER =>
            {
                return Err(InvalidInput::TooManyConnections);
            }
            _ => {}
        }
        let resumed = heir.and_then(|id| self.conns.remove(&id));
        let prev = self.conns.get(&a.conn);
        let was_visible = prev.is_some_and(|p| !p.invisible) || resumed.is_some();
        let meta_changed = match (&resumed, prev) {
            (Some(r), _) => r.meta != a.meta,
            (None, p) => p.is_some_and(|p| p.meta != a.meta),
        };
        let others = self.conns.visible_others(&a.member, &a.conn);
        let prev = self.conns.upsert(
            &a.conn,
            Conn {
                member: a.member.clone(),
                meta: a.meta.clone(),
                invisible: a.invisible,
                expires: now.saturating_add(a.ttl_ms),
                lingering: false,
            },
        );
        let mut report = AttachReport {
            opened: prev.is_none(),
            resumed: resumed.is_some(),
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
            report.left =
                self.conn_gone(&a.member, others, LeaveReason::Explicit, cause, Some(now));
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

    /// `member`'s connection `conn` ended without a goodbye at `now` (see
    /// [`herenow_core::conn`]): a visible one lives on for the space's grace,
    /// its member seen `now`, and expires then unless the member's next
    /// connection takes its place; with no grace it is a detach.
    pub fn linger(&mut self, member: &MemberKey, conn: &ConnId, now: Millis) -> DetachReport {
        let Some(c) = self.conns.get(conn).filter(|c| c.member == *member) else {
            return DetachReport::default();
        };
        let grace = self.config.grace_ms;
        if grace == 0 || c.invisible {
            let left = self.drop_conn(conn, LeaveReason::Explicit, now);
            return DetachReport { found: true, left };
        }
        if !c.lingering {
            let c = Conn {
                expires: now.saturating_add(grace),
                lingering: true,
                ..c.clone()
            };
            self.conns.upsert(conn, c);
            // Last seen when the connection ended, not at its last ping,
            // if it held the member online (an away member stays away:
            // its last activity is what it was last seen at).
            let online = self
                .find(member.kind, member.id.as_str())
                .is_some_and(|slot| {
                    self.marked_status(self.entries[slot as usize].key()) == MarkedStatus::Online
                });
            if online {
                self.apply(
                    member.kind,
                    &member.id,
                    now,
                    None,
                    now,
                    &mut HeartbeatReport::default(),
                    None,
                );
            }
        }
        DetachReport {
            found: true,
            left: false,
        }
    }

    /// Holds `member` present through a connection `conn` already in its
    /// grace, from `now`: what a restarted store gives a member a
    /// connection of the process before held, since that process is gone.
    /// The member must be stored already; a held connection id is kept.
    pub fn hold_in_grace(
        &mut self,
        member: &MemberKey,
        conn: &ConnId,
        meta: Option<Metadata>,
        now: Millis,
    ) {
        if self.conns.get(conn).is_some() || self.find(member.kind, member.id.as_str()).is_none() {
            return;
        }
        self.conns.upsert(
            conn,
            Conn {
                member: member.clone(),
                meta,
                invisible: false,
                expires: now.saturating_add(self.config.grace_ms),
                lingering: true,
            },
        );
    }

    /// Whether `member` holds a visible live connection here.
    pub fn held(&self, member: &MemberKey) -> bool {
        self.conns.holds_visible(member)
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
        if c.lingering {
            // Its grace is over and its member did not come back: the
            // connection ended when it began lingering, a goodbye late.
            return self.conn_gone(&c.member, others, LeaveReason::Explicit, cause, None);
        }
        self.conn_gone(&c.member, others, reason, cause, Some(now))
    }

    /// A visible connection of `member` went away (closed, expired or
    /// turned invisible) and `others` visible ones remain: `disconnect`, or
    /// `leave` if it was the last. Returns whether the member left. The
    /// last-seen time remembered is `closed_at` when the connection was
    /// closed (a goodbye, like a leave), and the member's last heartbeat
    /// when it expired or lived out its grace (`closed_at` `None`: the
    /// grace began with that heartbeat).
    fn conn_gone(
        &mut self,
        member: &MemberKey,
        others: usize,
        reason: LeaveReason,
        cause: Cause<'_>,
        closed_at: Option<Millis>,
    ) -> bool {
        let Some(slot) = self.find(member.kind, member.id.as_str()) else {
            return false;
        };
        let key = self.entries[slot as usize].key();
        let marked = self.marked_status(key);
        if marked == MarkedStatus::Gone {
            return false;
        }
        if others > 0 {
            self.emit_caused(
                EventKind::Disconnect,
                slot,
                marked.status(),
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
        let ended = match (reason, closed_at) {
            (LeaveReason::Explicit, Some(now)) => key.0.max(now),
            _ => key.0,
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
