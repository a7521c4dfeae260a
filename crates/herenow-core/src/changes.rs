//! What the memory store tells its journal, so a crash loses nothing it
//! acknowledged.
//!
//! The memory store applies every write to its own structures and then
//! hands a [`Change`] to a [`ChangeLog`], if it was given one. The log
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

use std::future::Future;
use std::pin::Pin;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::id::{MemberId, MemberKey, SpaceName};
use crate::meta::Metadata;
use crate::policy::SpaceConfig;
use crate::time::Millis;

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
    /// the change under, so it must not block for long (queue, don't
    /// write); the returned future is awaited after the lock is released.
    fn record(&self, change: &Change) -> Result<Durable>;
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
        fn record(&self, change: &Change) -> Result<Durable> {
            self.0.lock().unwrap().push(change.encode());
            Ok(Box::pin(async { Ok(()) }))
        }
    }

    /// A log whose disk failed: nothing may be acknowledged.
    struct Broken;

    impl ChangeLog for Broken {
        fn record(&self, _: &Change) -> Result<Durable> {
            Ok(Box::pin(async {
                Err(Error::Unavailable {
                    reason: "disk full".into(),
                    source: None,
                })
            }))
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
