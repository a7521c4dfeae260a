//! What the memory store tells its journal, so a crash loses nothing it
//! acknowledged (ARCHITECTURE.md, "Durability of the embedded store").
//!
//! The store applies every write, then hands a [`ChangeRef`] to its
//! [`ChangeLog`] while it still holds the lock it applied the change under,
//! so the journal's order is the order of application for everything one
//! lock orders. This module only says what changed, as bytes, and how
//! durable it must be ([`ChangeRef::durability`]); the log does the I/O. The
//! outbox's events are journaled with the changes that caused them, so a
//! crash loses both or neither. Replaying a suffix over a snapshot that
//! holds part of it gives the same state: heartbeats keep the newest time,
//! and every other change assigns rather than accumulates.
//!
//! Two shapes of one format: [`ChangeRef`] borrows the store call's own
//! arguments, so recording a heartbeat clones and allocates nothing;
//! [`Change`] owns its data and is what [`Change::decode`] gives back.
//! Both encode to the same bytes.

#[cfg(test)]
pub(crate) mod fuzz;
mod wire;

use std::future::Future;
use std::pin::Pin;

use serde::{Deserialize, Serialize};

use herenow_core::error::{Error, Result};
use herenow_core::id::{MemberId, MemberKey, SpaceName};
use herenow_core::outbox::{OutboxEvent, SpaceHook};
use herenow_core::policy::{DEFAULT_GRACE_MS, SpaceConfig};
use herenow_core::time::Millis;
use herenow_core::values::Heartbeat;
use herenow_journal::Durability;

use crate::legacy::{OutboxEventV1, SpaceConfigV2};

/// The format version written first in every encoded change. Version 2
/// added [`OutboxEvent::body`], version 3 [`SpaceConfig::grace_ms`];
/// version 1 and 2 records are still read ([`decode_old`]).
pub(crate) const VERSION: u8 = 3;

/// [`Change::SetConfig`]'s variant number, as postcard writes it.
const SET_CONFIG: u32 = 2;
/// [`Change::OutboxAdd`]'s variant number, as postcard writes it.
const OUTBOX_ADD: u32 = 7;

/// A write the memory store applied.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Change {
    /// Heartbeats of one call, with the store's time when it applied them.
    Heartbeats {
        /// Where the beats were applied.
        space: SpaceName,
        /// "Now" for beats without an explicit time.
        now: Millis,
        /// The beats as the call gave them, in call order: a beat
        /// without a time of its own was at `now`.
        #[serde(with = "heartbeat_records")]
        beats: Vec<Heartbeat>,
    },
    /// Explicit goodbyes at `at`.
    Leave {
        /// The space they left.
        space: SpaceName,
        /// When they left: a replay leaves a member only if it was last
        /// seen no later, so a heartbeat after the leave survives.
        at: Millis,
        /// The members that said goodbye, in call order.
        members: Vec<MemberKey>,
    },
    /// A space's new time policy.
    SetConfig {
        /// The space configured.
        space: SpaceName,
        /// The policy it has from now on, already validated.
        config: SpaceConfig,
    },
    /// A user's friend set replaced.
    SetFriends {
        /// Whose set (friend sets are global, not per space).
        user: MemberId,
        /// The whole new set.
        friends: Vec<MemberId>,
    },
    /// Friends added to a user's set.
    AddFriends {
        /// Whose set grew.
        user: MemberId,
        /// The user ids added; those already friends change nothing.
        friends: Vec<MemberId>,
    },
    /// Friends removed from a user's set.
    RemoveFriends {
        /// Whose set shrank.
        user: MemberId,
        /// The user ids removed; those not friends change nothing.
        friends: Vec<MemberId>,
    },
    /// A user erased everywhere (presence, remembered times, friend set,
    /// and its place in other users' friend sets).
    Erase {
        /// The user.
        user: MemberId,
    },
    /// Events the webhook outbox captured, in order.
    OutboxAdd {
        /// The events, their ids given.
        events: Vec<OutboxEvent>,
    },
    /// Outbox events acknowledged (delivered).
    OutboxAck {
        /// Their ids.
        ids: Vec<String>,
    },
    /// A space's webhook endpoints replaced.
    SetHooks {
        /// The space.
        space: SpaceName,
        /// Its endpoints from now on; none removes them.
        hooks: Vec<SpaceHook>,
    },
    /// Heartbeats of one call none of which carried a time or metadata
    /// (nearly all of them): [`Change::Heartbeats`] without a member's
    /// kind and two empty options per beat, users first, then guests:
    /// three bytes fewer per member (a fifth of a batch of 10-byte ids),
    /// which the journal's writer and the kernel pay for per byte.
    PlainBeats {
        /// Where the beats were applied.
        space: SpaceName,
        /// When they were applied: every beat's time.
        now: Millis,
        /// The users who beat, in call order.
        users: Vec<MemberId>,
        /// The guests who beat, in call order.
        guests: Vec<MemberId>,
    },
}

impl Change {
    /// The change as journal bytes: a version byte, then postcard.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = vec![VERSION];
        postcard::to_io(self, &mut out).expect("writing to a Vec cannot fail");
        out
    }

    /// A change from [`encode`](Self::encode)'s bytes; every id and
    /// metadata is checked again on the way in.
    pub fn decode(bytes: &[u8]) -> Result<Change> {
        let undecodable = |e: postcard::Error| Error::Snapshot {
            what: format!("journal record does not decode: {e}"),
        };
        match bytes.split_first() {
            Some((&VERSION, body)) => postcard::from_bytes(body).map_err(undecodable),
            Some((v @ (1 | 2), body)) => decode_old(*v, body).map_err(undecodable),
            Some((v, _)) => Err(Error::Snapshot {
                what: format!("journal record has unknown version {v}"),
            }),
            None => Err(Error::Snapshot {
                what: "journal record is empty".into(),
            }),
        }
    }
}

/// A version 1 or 2 record's body: the same as version 3's but for a
/// [`Change::SetConfig`]'s policy, which had no grace (read with the
/// default one), and in version 1 for the outbox events of
/// [`Change::OutboxAdd`], which had no body.
fn decode_old(version: u8, body: &[u8]) -> postcard::Result<Change> {
    match postcard::take_from_bytes::<u32>(body) {
        Ok((SET_CONFIG, rest)) => {
            let (space, config): (SpaceName, SpaceConfigV2) = postcard::from_bytes(rest)?;
            Ok(Change::SetConfig {
                space,
                config: config.upgrade(DEFAULT_GRACE_MS),
            })
        }
        Ok((OUTBOX_ADD, events)) if version == 1 => {
            let events: Vec<OutboxEventV1> = postcard::from_bytes(events)?;
            Ok(Change::OutboxAdd {
                events: events.into_iter().map(OutboxEvent::from).collect(),
            })
        }
        _ => postcard::from_bytes(body),
    }
}

/// A write the memory store applied, borrowing the call's arguments: what
/// the store hands its [`ChangeLog`]. It encodes to exactly the bytes of
/// the matching [`Change`] (same variants in the same order, same fields),
/// so [`Change::decode`] reads it back. Heartbeats encode as
/// [`Change::PlainBeats`] when every beat is plain, else as
/// [`Change::Heartbeats`] (serde's view of this type, used for the rare
/// variants, knows only the second form).
#[derive(Clone, Copy, Debug, Serialize)]
#[serde(rename = "Change")]
pub enum ChangeRef<'a> {
    /// See [`Change::Heartbeats`].
    Heartbeats {
        /// Where the beats were applied.
        space: &'a SpaceName,
        /// "Now" for beats without an explicit time.
        now: Millis,
        /// The call's beats, in call order.
        #[serde(serialize_with = "heartbeat_records::serialize")]
        beats: &'a [Heartbeat],
    },
    /// See [`Change::Leave`].
    Leave {
        /// The space they left.
        space: &'a SpaceName,
        /// When they left.
        at: Millis,
        /// The members that said goodbye, in call order.
        members: &'a [MemberKey],
    },
    /// See [`Change::SetConfig`].
    SetConfig {
        /// The space configured.
        space: &'a SpaceName,
        /// Its new policy, already validated.
        config: SpaceConfig,
    },
    /// See [`Change::SetFriends`].
    SetFriends {
        /// Whose set.
        user: &'a MemberId,
        /// The whole new set.
        friends: &'a [MemberId],
    },
    /// See [`Change::AddFriends`].
    AddFriends {
        /// Whose set grew.
        user: &'a MemberId,
        /// The user ids added.
        friends: &'a [MemberId],
    },
    /// See [`Change::RemoveFriends`].
    RemoveFriends {
        /// Whose set shrank.
        user: &'a MemberId,
        /// The user ids removed.
        friends: &'a [MemberId],
    },
    /// See [`Change::Erase`].
    Erase {
        /// The user.
        user: &'a MemberId,
    },
    /// See [`Change::OutboxAdd`].
    OutboxAdd {
        /// The events, in order.
        events: &'a [OutboxEvent],
    },
    /// See [`Change::OutboxAck`].
    OutboxAck {
        /// Their ids.
        ids: &'a [String],
    },
    /// See [`Change::SetHooks`].
    SetHooks {
        /// The space.
        space: &'a SpaceName,
        /// Its endpoints from now on.
        hooks: &'a [SpaceHook],
    },
}

/// How a [`Heartbeat`] is written in a journal record: its member, its
/// own time if it has one, and its metadata as JSON text (the compact
/// binary format cannot carry a raw JSON value). [`Change`] and
/// [`ChangeRef`] both write their beats so.
mod heartbeat_records {
    use herenow_core::id::MemberKey;
    use herenow_core::meta::Metadata;
    use herenow_core::time::Millis;
    use herenow_core::values::Heartbeat;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    /// A heartbeat's record, borrowed from it for writing.
    #[derive(Serialize)]
    struct Record<'a> {
        member: &'a MemberKey,
        at_ms: Option<Millis>,
        meta: Option<&'a str>,
    }

    /// A heartbeat's record as read back: the same fields, owned.
    #[derive(Deserialize)]
    struct Read {
        member: MemberKey,
        at_ms: Option<Millis>,
        #[serde(with = "herenow_core::meta::as_text")]
        meta: Option<Metadata>,
    }

    pub(super) fn serialize<S: Serializer>(beats: &[Heartbeat], s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(beats.iter().map(|b| Record {
            member: &b.member,
            at_ms: b.at_ms,
            meta: b.meta.as_ref().map(Metadata::as_json),
        }))
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<Heartbeat>, D::Error> {
        let read = Vec::<Read>::deserialize(d)?;
        Ok(read
            .into_iter()
            .map(|r| Heartbeat {
                member: r.member,
                at_ms: r.at_ms,
                meta: r.meta,
            })
            .collect())
    }
}

impl ChangeRef<'_> {
    /// How durable this change must be before its write is acknowledged.
    pub fn durability(&self) -> Durability {
        match self {
            ChangeRef::Heartbeats { .. }
            | ChangeRef::Leave { .. }
            | ChangeRef::OutboxAdd { .. }
            | ChangeRef::OutboxAck { .. } => Durability::Lazy,
            ChangeRef::SetConfig { .. }
            | ChangeRef::SetHooks { .. }
            | ChangeRef::SetFriends { .. }
            | ChangeRef::AddFriends { .. }
            | ChangeRef::RemoveFriends { .. }
            | ChangeRef::Erase { .. } => Durability::Sync,
        }
    }

    /// Appends the change's journal bytes to `out` (the bytes
    /// [`Change::encode`] gives for the same change), allocating nothing
    /// beyond `out`'s growth.
    ///
    /// Heartbeats and leaves, one record per call on the hot path, are
    /// written by hand in postcard's format (`wire.rs`: serde's generic
    /// walk costs more than the record itself); the rest go through postcard
    /// itself.
    #[inline]
    pub fn encode_into(&self, out: &mut Vec<u8>) {
        match *self {
            ChangeRef::Heartbeats { space, now, beats } => {
                wire::any_heartbeats(out, VERSION, space, now, beats);
            }
            ChangeRef::Leave { space, at, members } => {
                wire::leave(out, VERSION, space, at, members);
            }
            _ => self.encode_with_postcard(out),
        }
    }

    /// The rare changes, through serde: out of line, so that the hot
    /// path's frame does not carry postcard's.
    #[inline(never)]
    fn encode_with_postcard(&self, out: &mut Vec<u8>) {
        out.push(VERSION);
        postcard::to_io(self, &mut *out).expect("writing to a Vec cannot fail");
    }
}

/// Resolves once a recorded change is as durable as it must be; an error
/// means it may not be, and the write must not be acknowledged.
pub type Durable = Pin<Box<dyn Future<Output = Result<()>> + Send>>;

/// Where the memory store records its changes (the server's journal).
pub trait ChangeLog: Send + Sync + 'static {
    /// Records `change`. Called while the store holds the lock it applied
    /// the change under, so it must not block for long (buffer, don't
    /// write). `None` when nothing is left to wait for (a lazy change,
    /// buffered: the common case, which must cost no allocation); else a
    /// future, awaited after the lock is released, that resolves once the
    /// change is as durable as [`ChangeRef::durability`] says.
    fn record(&self, change: ChangeRef<'_>) -> Result<Option<Durable>>;
}
