//! What the memory store tells its journal, so a crash loses nothing it
//! acknowledged.
//!
//! The memory store applies every write to its own structures and then
//! hands a [`ChangeRef`] to a [`ChangeLog`], if it was given one. The log
//! (the server's, over `herenow-journal`) does the I/O; core only says
//! what changed, encoded as bytes, and how durable it must be before the
//! write is acknowledged:
//!
//! - friend sets, space configuration and erasures are
//!   [`Durability::Sync`]: the store's call returns only once they are on
//!   disk;
//! - heartbeats and leaves are [`Durability::Lazy`]: on disk within about
//!   a second, so a crash may set a last-seen time back by that much (the
//!   promise Redis makes with `appendfsync everysec`).
//!
//! A change is recorded while the store still holds the lock it applied
//! the change under, so the journal's order is the order of application
//! for everything one lock orders (one space, the friend sets). Replaying
//! a journal suffix over a snapshot that already holds part of it gives
//! the same state: heartbeats keep the newest time, and every other change
//! assigns (a set, a config, membership of one friend) rather than
//! accumulates.
//!
//! Two shapes of one format: [`ChangeRef`] borrows the store call's own
//! arguments, so recording a heartbeat clones no id and allocates nothing
//! (it is encoded straight into the journal's buffer); [`Change`] owns its
//! data and is what [`Change::decode`] gives back at replay. Both encode
//! to the same bytes, so journals written by either replay alike.

use std::future::Future;
use std::pin::Pin;

use serde::{Deserialize, Serialize, Serializer};

use crate::error::{Error, Result};
use crate::id::{MemberId, MemberKey, SpaceName};
use crate::meta::Metadata;
use crate::policy::SpaceConfig;
use crate::time::Millis;
use crate::values::Heartbeat;

/// The format version written first in every encoded change.
const VERSION: u8 = 1;

/// One heartbeat as the store applied it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Beat {
    /// The member whose heartbeat this was.
    pub member: MemberKey,
    /// The explicit time, if the caller gave one (else the change's `now`).
    pub at_ms: Option<Millis>,
    /// New metadata, if any. Kept as its JSON text: the compact binary
    /// format cannot carry a raw JSON value.
    #[serde(with = "meta_text")]
    pub meta: Option<Metadata>,
}

mod meta_text {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    use crate::meta::Metadata;

    pub fn serialize<S: Serializer>(meta: &Option<Metadata>, s: S) -> Result<S::Ok, S::Error> {
        meta.as_ref().map(Metadata::as_json).serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Metadata>, D::Error> {
        Option::<String>::deserialize(d)?
            .map(|text| Metadata::from_json(&text).map_err(serde::de::Error::custom))
            .transpose()
    }
}

/// A write the memory store applied.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Change {
    /// Heartbeats of one call, with the store's time when it applied them.
    Heartbeats {
        /// Where the beats were applied.
        space: SpaceName,
        /// "Now" for beats without an explicit time.
        now: Millis,
        /// The beats, in call order.
        beats: Vec<Beat>,
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
}

impl Change {
    /// How durable this change must be before its write is acknowledged.
    pub fn durability(&self) -> Durability {
        match self {
            Change::Heartbeats { .. } | Change::Leave { .. } => Durability::Lazy,
            Change::SetConfig { .. }
            | Change::SetFriends { .. }
            | Change::AddFriends { .. }
            | Change::RemoveFriends { .. }
            | Change::Erase { .. } => Durability::Sync,
        }
    }

    /// The change as journal bytes: a version byte, then postcard.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = vec![VERSION];
        postcard::to_io(self, &mut out).expect("writing to a Vec cannot fail");
        out
    }

    /// A change from [`encode`](Self::encode)'s bytes; every id and
    /// metadata is checked again on the way in.
    pub fn decode(bytes: &[u8]) -> Result<Change> {
        match bytes.split_first() {
            Some((&VERSION, body)) => postcard::from_bytes(body).map_err(|e| Error::Snapshot {
                what: format!("journal record does not decode: {e}"),
            }),
            Some((v, _)) => Err(Error::Snapshot {
                what: format!("journal record has unknown version {v}"),
            }),
            None => Err(Error::Snapshot {
                what: "journal record is empty".into(),
            }),
        }
    }
}

/// A write the memory store applied, borrowing the call's arguments: what
/// the store hands its [`ChangeLog`]. It encodes to exactly the bytes of
/// the matching [`Change`] (same variants in the same order, same fields,
/// heartbeats as [`Beat`]s), so [`Change::decode`] reads it back.
#[derive(Clone, Copy, Debug, Serialize)]
#[serde(rename = "Change")]
pub enum ChangeRef<'a> {
    /// See [`Change::Heartbeats`].
    Heartbeats {
        /// Where the beats were applied.
        space: &'a SpaceName,
        /// "Now" for beats without an explicit time.
        now: Millis,
        /// The call's beats, in call order, encoded as [`Beat`]s.
        #[serde(serialize_with = "beats_as_owned")]
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
}

/// A [`Heartbeat`] serialized as the [`Beat`] it becomes at replay.
#[derive(Serialize)]
#[serde(rename = "Beat")]
struct BeatRef<'a> {
    member: &'a MemberKey,
    at_ms: Option<Millis>,
    /// As [`Beat::meta`]: the JSON text.
    meta: Option<&'a str>,
}

fn beats_as_owned<S: Serializer>(beats: &&[Heartbeat], s: S) -> Result<S::Ok, S::Error> {
    s.collect_seq(beats.iter().map(|b| BeatRef {
        member: &b.member,
        at_ms: b.at_ms,
        meta: b.meta.as_ref().map(Metadata::as_json),
    }))
}

impl ChangeRef<'_> {
    /// How durable this change must be before its write is acknowledged:
    /// as [`Change::durability`].
    pub fn durability(&self) -> Durability {
        match self {
            ChangeRef::Heartbeats { .. } | ChangeRef::Leave { .. } => Durability::Lazy,
            ChangeRef::SetConfig { .. }
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
    /// written by hand in postcard's format (about twice as fast as going
    /// through serde); the rest go through postcard itself. The tests pin
    /// both to the owned [`Change`]'s bytes.
    pub fn encode_into(&self, out: &mut Vec<u8>) {
        out.push(VERSION);
        match *self {
            ChangeRef::Heartbeats { space, now, beats } => {
                wire::varint(out, 0);
                wire::str(out, space.as_str());
                wire::varint(out, now);
                wire::varint(out, beats.len() as u64);
                for b in beats {
                    wire::key(out, &b.member);
                    match b.at_ms {
                        None => out.push(0),
                        Some(at) => {
                            out.push(1);
                            wire::varint(out, at);
                        }
                    }
                    match &b.meta {
                        None => out.push(0),
                        Some(meta) => {
                            out.push(1);
                            wire::str(out, meta.as_json());
                        }
                    }
                }
            }
            ChangeRef::Leave { space, at, members } => {
                wire::varint(out, 1);
                wire::str(out, space.as_str());
                wire::varint(out, at);
                wire::varint(out, members.len() as u64);
                for m in members {
                    wire::key(out, m);
                }
            }
            _ => {
                postcard::to_io(self, &mut *out).expect("writing to a Vec cannot fail");
            }
        }
    }

    /// The change's journal bytes in a new `Vec`.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        self.encode_into(&mut out);
        out
    }
}

/// postcard's encoding of the values on the hot path: unsigned integers
/// (lengths, times, enum variants) as LEB128 varints, strings as length
/// and bytes, a struct as its fields in order.
mod wire {
    use crate::id::{MemberKey, MemberKind};

    pub(super) fn varint(out: &mut Vec<u8>, mut v: u64) {
        while v >= 0x80 {
            out.push(v as u8 | 0x80);
            v >>= 7;
        }
        out.push(v as u8);
    }

    pub(super) fn str(out: &mut Vec<u8>, s: &str) {
        varint(out, s.len() as u64);
        out.extend_from_slice(s.as_bytes());
    }

    /// `MemberKey { kind, id }`, the kind by its variant's index.
    pub(super) fn key(out: &mut Vec<u8>, key: &MemberKey) {
        out.push(match key.kind {
            MemberKind::User => 0,
            MemberKind::Guest => 1,
        });
        str(out, key.id.as_str());
    }
}

/// How soon a change must be on disk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Durability {
    /// Before the write is acknowledged.
    Sync,
    /// Within about a second.
    Lazy,
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

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;
    use crate::id::MemberKind;
    use crate::memory::MemoryStore;
    use crate::store::{Heartbeat, PresenceStore};
    use crate::time::ManualClock;

    /// A log that keeps encoded changes in memory, durable at once.
    #[derive(Default)]
    struct Kept(Mutex<Vec<Vec<u8>>>);

    impl ChangeLog for Kept {
        fn record(&self, change: ChangeRef<'_>) -> Result<Option<Durable>> {
            self.0.lock().unwrap().push(change.encode());
            Ok(None)
        }
    }

    /// A log whose disk failed: nothing may be acknowledged.
    struct Broken;

    impl ChangeLog for Broken {
        fn record(&self, _: ChangeRef<'_>) -> Result<Option<Durable>> {
            Ok(Some(Box::pin(async {
                Err(Error::Unavailable {
                    reason: "disk full".into(),
                    source: None,
                })
            })))
        }
    }

    fn id(s: &str) -> MemberId {
        MemberId::new(s).unwrap()
    }

    #[tokio::test]
    async fn replaying_the_journal_rebuilds_what_the_store_acknowledged() {
        let clock = Arc::new(ManualClock::new(1_700_000_000_000));
        let store = MemoryStore::new(clock.clone(), SpaceConfig::default());
        let log = Arc::new(Kept::default());
        assert!(store.set_change_log(log.clone()));
        let lobby = SpaceName::new("lobby").unwrap();
        let ann = MemberKey::user(id("ann"));
        let guest = MemberKey::guest(id("10.0.0.7"));
        store
            .heartbeat(
                &lobby,
                &[Heartbeat::now(ann.clone()), Heartbeat::now(guest.clone())],
            )
            .await
            .unwrap();
        clock.advance(std::time::Duration::from_secs(1));
        store
            .heartbeat(&lobby, &[Heartbeat::now(ann.clone())])
            .await
            .unwrap();
        store
            .leave(&lobby, std::slice::from_ref(&guest))
            .await
            .unwrap();
        let config = SpaceConfig {
            online_ms: 30_000,
            ..SpaceConfig::default()
        };
        store.set_config(&lobby, config).await.unwrap();
        store
            .set_friends(&id("ann"), &[id("bob"), id("cy")])
            .await
            .unwrap();
        store.add_friends(&id("ann"), &[id("dee")]).await.unwrap();
        store
            .remove_friends(&id("ann"), &[id("bob")])
            .await
            .unwrap();

        let replayed = MemoryStore::new(clock.clone(), SpaceConfig::default());
        for bytes in log.0.lock().unwrap().iter() {
            replayed
                .apply_change(&Change::decode(bytes).unwrap())
                .unwrap();
        }
        assert_eq!(
            replayed.friends(&id("ann")).await.unwrap(),
            vec![id("cy"), id("dee")]
        );
        assert_eq!(replayed.config(&lobby).await.unwrap(), config);
        let status = replayed.status(&lobby, &[ann, guest]).await.unwrap();
        assert_eq!(status[0].last_seen_ms, Some(1_700_000_001_000));
        assert_eq!(status[1].member.kind, MemberKind::Guest);
        assert_eq!(status[1].last_seen_ms, None, "the guest left");
    }

    #[tokio::test]
    async fn a_write_the_journal_cannot_keep_is_not_acknowledged() {
        let store = MemoryStore::default();
        store.set_change_log(Arc::new(Broken));
        let err = store
            .set_friends(&id("ann"), &[id("bob")])
            .await
            .unwrap_err();
        assert!(err.is_retryable());
        let lobby = SpaceName::new("lobby").unwrap();
        let err = store
            .set_config(&lobby, SpaceConfig::default())
            .await
            .unwrap_err();
        assert!(err.is_retryable());
    }

    /// Issue 8: the store records borrowed changes, replay decodes owned
    /// ones; the two must be one format, byte for byte, for every variant,
    /// or journals written before (or after) would not replay.
    #[test]
    fn a_borrowed_change_encodes_to_the_bytes_of_the_owned_one() {
        let lobby = SpaceName::new("lobby").unwrap();
        let ann = id("ann");
        let friends = [id("bob"), id("cy")];
        let members = [MemberKey::user(id("ann")), MemberKey::guest(id("10.0.0.7"))];
        let heartbeats = [
            Heartbeat::now(members[0].clone()),
            Heartbeat {
                member: members[1].clone(),
                at_ms: Some(1_700_000_000_123),
                meta: Some(Metadata::from_json(r#"{"device":"phone","n":1}"#).unwrap()),
            },
            Heartbeat {
                member: MemberKey::user(id("dee")),
                at_ms: None,
                meta: Some(Metadata::from_json("{}").unwrap()),
            },
            // Lengths and times around the varints' byte boundaries.
            Heartbeat {
                member: MemberKey::user(id(&"x".repeat(200))),
                at_ms: Some(127),
                meta: Some(
                    Metadata::from_json(&format!(r#"{{"k":"{}"}}"#, "v".repeat(150))).unwrap(),
                ),
            },
            Heartbeat {
                member: MemberKey::guest(id(&"y".repeat(127))),
                at_ms: Some(128),
                meta: None,
            },
        ];
        let beats: Vec<Beat> = heartbeats
            .iter()
            .map(|h| Beat {
                member: h.member.clone(),
                at_ms: h.at_ms,
                meta: h.meta.clone(),
            })
            .collect();
        let config = SpaceConfig {
            online_ms: 30_000,
            ..SpaceConfig::default()
        };
        let now = 1_700_000_000_000;
        let pairs: Vec<(ChangeRef<'_>, Change)> = vec![
            (
                ChangeRef::Heartbeats {
                    space: &lobby,
                    now,
                    beats: &heartbeats,
                },
                Change::Heartbeats {
                    space: lobby.clone(),
                    now,
                    beats,
                },
            ),
            (
                ChangeRef::Heartbeats {
                    space: &lobby,
                    now,
                    beats: &[],
                },
                Change::Heartbeats {
                    space: lobby.clone(),
                    now,
                    beats: Vec::new(),
                },
            ),
            (
                ChangeRef::Leave {
                    space: &lobby,
                    at: now,
                    members: &members,
                },
                Change::Leave {
                    space: lobby.clone(),
                    at: now,
                    members: members.to_vec(),
                },
            ),
            (
                ChangeRef::SetConfig {
                    space: &lobby,
                    config,
                },
                Change::SetConfig {
                    space: lobby.clone(),
                    config,
                },
            ),
            (
                ChangeRef::SetFriends {
                    user: &ann,
                    friends: &friends,
                },
                Change::SetFriends {
                    user: ann.clone(),
                    friends: friends.to_vec(),
                },
            ),
            (
                ChangeRef::AddFriends {
                    user: &ann,
                    friends: &friends[..1],
                },
                Change::AddFriends {
                    user: ann.clone(),
                    friends: friends[..1].to_vec(),
                },
            ),
            (
                ChangeRef::RemoveFriends {
                    user: &ann,
                    friends: &[],
                },
                Change::RemoveFriends {
                    user: ann.clone(),
                    friends: Vec::new(),
                },
            ),
            (
                ChangeRef::Erase { user: &ann },
                Change::Erase { user: ann.clone() },
            ),
        ];
        for (borrowed, owned) in pairs {
            let bytes = borrowed.encode();
            assert_eq!(bytes, owned.encode(), "{owned:?}");
            // The hand-written variants agree with serde's view of them.
            let mut through_serde = vec![VERSION];
            postcard::to_io(&borrowed, &mut through_serde).unwrap();
            assert_eq!(bytes, through_serde, "{owned:?}");
            assert_eq!(Change::decode(&bytes).unwrap(), owned);
            assert_eq!(borrowed.durability(), owned.durability());
            // Appending goes after what the buffer already holds.
            let mut buf = b"before".to_vec();
            borrowed.encode_into(&mut buf);
            assert_eq!(&buf[6..], &bytes[..]);
        }
    }

    /// The bytes of journals already on disk: whatever shape the code
    /// takes, these must still decode to the same changes.
    #[test]
    fn journal_records_of_format_1_still_decode() {
        let heartbeats: &[u8] = &[
            1, 0, 5, 108, 111, 98, 98, 121, 128, 208, 149, 255, 188, 49, 2, 1, 2, 97, 98, 1, 5, 1,
            7, 123, 34, 110, 34, 58, 49, 125, 0, 1, 99, 0, 0,
        ];
        let owned = Change::Heartbeats {
            space: SpaceName::new("lobby").unwrap(),
            now: 1_700_000_000_000,
            beats: vec![
                Beat {
                    member: MemberKey::guest(id("ab")),
                    at_ms: Some(5),
                    meta: Some(Metadata::from_json(r#"{"n":1}"#).unwrap()),
                },
                Beat {
                    member: MemberKey::user(id("c")),
                    at_ms: None,
                    meta: None,
                },
            ],
        };
        assert_eq!(Change::decode(heartbeats).unwrap(), owned);
        assert_eq!(owned.encode(), heartbeats);
        let erase: &[u8] = &[1, 6, 3, 97, 110, 110];
        assert_eq!(
            Change::decode(erase).unwrap(),
            Change::Erase { user: id("ann") }
        );
    }

    #[test]
    fn changes_round_trip_and_bad_bytes_are_refused() {
        let changes = [
            Change::Heartbeats {
                space: SpaceName::new("lobby").unwrap(),
                now: 1_700_000_000_000,
                beats: vec![Beat {
                    member: MemberKey::guest(MemberId::new("10.0.0.7").unwrap()),
                    at_ms: Some(5),
                    meta: Some(Metadata::from_json(r#"{"n":1}"#).unwrap()),
                }],
            },
            Change::SetFriends {
                user: MemberId::new("ann").unwrap(),
                friends: vec![MemberId::new("bob").unwrap()],
            },
            Change::SetConfig {
                space: SpaceName::new("s").unwrap(),
                config: SpaceConfig::default(),
            },
        ];
        for c in changes {
            assert_eq!(Change::decode(&c.encode()).unwrap(), c);
        }
        assert!(Change::decode(&[]).is_err());
        assert!(Change::decode(&[9, 1, 2]).is_err());
        assert!(Change::decode(&[VERSION, 0xff, 0xff, 0xff]).is_err());
    }
}
