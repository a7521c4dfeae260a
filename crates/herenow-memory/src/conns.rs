//! A space's live connections (see [`herenow_core::conn`]): a table by id, the
//! ids of each member, and an expiry order.
//!
//! It is bookkeeping only; [`super::Space`] decides the events.

use std::collections::{BTreeSet, HashMap};

use herenow_core::conn::{ConnId, Connection};
use herenow_core::id::MemberKey;
use herenow_core::meta::Metadata;
use herenow_core::time::Millis;

/// What a space keeps of a connection; its id is the key it is kept
/// under.
#[derive(Clone, Debug)]
pub(super) struct Conn {
    pub member: MemberKey,
    pub meta: Option<Metadata>,
    pub invisible: bool,
    pub expires: Millis,
    /// It ended without a goodbye and lives out its member's grace: the
    /// next connection of the member takes its place without a word.
    pub lingering: bool,
}

/// The connections of one space, in three views kept in step by
/// [`ConnTable::upsert`] and [`ConnTable::remove`].
#[derive(Default)]
pub(super) struct ConnTable {
    conns: HashMap<ConnId, Conn, foldhash::fast::RandomState>,
    by_member: HashMap<MemberKey, Vec<ConnId>, foldhash::fast::RandomState>,
    expiry: BTreeSet<(Millis, ConnId)>,
}

impl ConnTable {
    /// Live connections, visible or not.
    pub fn len(&self) -> usize {
        self.conns.len()
    }

    /// The connection `id`, whoever holds it: callers check the holder.
    pub fn get(&self, id: &ConnId) -> Option<&Conn> {
        self.conns.get(id)
    }

    /// How many connections `member` holds.
    pub fn count(&self, member: &MemberKey) -> usize {
        self.by_member.get(member).map_or(0, Vec::len)
    }

    /// How many of `member`'s connections other than `except` are visible.
    pub fn visible_others(&self, member: &MemberKey, except: &ConnId) -> usize {
        self.by_member.get(member).map_or(0, |ids| {
            ids.iter()
                .filter(|id| *id != except && self.conns.get(*id).is_some_and(|c| !c.invisible))
                .count()
        })
    }

    /// Whether `member` holds a visible connection.
    pub fn holds_visible(&self, member: &MemberKey) -> bool {
        self.by_member.get(member).is_some_and(|ids| {
            ids.iter()
                .any(|id| self.conns.get(id).is_some_and(|c| !c.invisible))
        })
    }

    /// A visible connection of `member` in its grace, if any: the one that
    /// expires first.
    pub fn lingering_of(&self, member: &MemberKey) -> Option<ConnId> {
        self.by_member
            .get(member)?
            .iter()
            .filter_map(|id| {
                let c = self.conns.get(id)?;
                (c.lingering && !c.invisible).then_some((c.expires, id))
            })
            .min()
            .map(|(_, id)| id.clone())
    }

    /// Inserts or replaces; returns the previous state.
    pub fn upsert(&mut self, id: &ConnId, conn: Conn) -> Option<Conn> {
        self.expiry.insert((conn.expires, id.clone()));
        let member = conn.member.clone();
        let prev = self.conns.insert(id.clone(), conn);
        match &prev {
            Some(p) => {
                if p.expires != self.conns[id].expires {
                    self.expiry.remove(&(p.expires, id.clone()));
                }
            }
            None => self.by_member.entry(member).or_default().push(id.clone()),
        }
        prev
    }

    /// Removes a connection from all three views; returns it, for the
    /// caller to announce.
    pub fn remove(&mut self, id: &ConnId) -> Option<Conn> {
        let conn = self.conns.remove(id)?;
        self.expiry.remove(&(conn.expires, id.clone()));
        if let Some(ids) = self.by_member.get_mut(&conn.member) {
            ids.retain(|c| c != id);
            if ids.is_empty() {
                self.by_member.remove(&conn.member);
            }
        }
        Some(conn)
    }

    /// The connection that expires first, if it expired at or before `now`.
    pub fn first_expired(&self, now: Millis) -> Option<ConnId> {
        self.expiry
            .first()
            .filter(|(at, _)| *at <= now)
            .map(|(_, id)| id.clone())
    }

    /// `member`'s connections, by id.
    pub fn of(&self, member: &MemberKey) -> Vec<Connection> {
        let mut out: Vec<Connection> = self
            .by_member
            .get(member)
            .into_iter()
            .flatten()
            .filter_map(|id| {
                self.conns.get(id).map(|c| Connection {
                    conn: id.clone(),
                    meta: c.meta.clone(),
                    invisible: c.invisible,
                    expires_ms: c.expires,
                    lingering: c.lingering,
                })
            })
            .collect();
        herenow_core::conn::sort_connections(&mut out);
        out
    }

    /// Bytes of heap held (an estimate).
    pub fn heap_bytes(&self) -> usize {
        self.conns.capacity() * 96 + self.by_member.capacity() * 64 + self.expiry.len() * 48
    }

    /// Panics if the three views disagree. For tests.
    pub fn check_invariants(&self) {
        assert_eq!(self.expiry.len(), self.conns.len(), "expiry and table");
        let listed: usize = self.by_member.values().map(Vec::len).sum();
        assert_eq!(listed, self.conns.len(), "members' lists and table");
        for (id, c) in &self.conns {
            assert!(self.expiry.contains(&(c.expires, id.clone())), "expiry");
            assert!(
                self.by_member[&c.member].contains(id),
                "connection missing from its member's list"
            );
        }
    }
}
