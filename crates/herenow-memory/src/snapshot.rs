//! Snapshots of a [`MemoryStore`]: every space's members, policy and the
//! friend sets, as bytes.
//!
//! The format is a fixed magic line, a format version, a CRC-32 of the body
//! and a postcard body. Reading checks all three, so a truncated, corrupt or
//! foreign file is refused with an error that says which, never a panic and
//! never a silently empty store. Writing the bytes to disk (temp file,
//! fsync, rename) is the server's job: this crate does no I/O.

use std::collections::BTreeSet;
use std::sync::Arc;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use herenow_core::conn::ConnId;
use herenow_core::error::{Error, Result};
use herenow_core::id::{MemberId, MemberKey, MemberKind, SpaceName};
use herenow_core::meta::Metadata;
use herenow_core::outbox::{OutboxEvent, SpaceHook};
use herenow_core::policy::SpaceConfig;
use herenow_core::store::Heartbeat;
use herenow_core::time::Millis;

use super::MemoryStore;
use super::seen::RememberedEntry;
use super::stripes::{self, Stripes};
use crate::legacy::{OutboxEventV1, SpaceConfigV2};

#[cfg(test)]
mod fuzz;

const MAGIC: &[u8; 17] = b"herenow snapshot\n";
/// Version 2 added `mark`; version 3 the remembered last-seen times, the
/// fingerprint seed and the remembering policy; version 4 the webhook
/// outbox's undelivered events; version 5 the spaces' webhook endpoints;
/// version 6 the outbox messages' bodies; version 7 the spaces' grace and
/// which members live connections held. Older versions are still read
/// (mark 0, nothing remembered, remembering by the defaults, no events
/// waiting, no endpoints, no bodies, the default grace, no member held).
const VERSION: u32 = 7;
const HEADER: usize = MAGIC.len() + 4 + 4;

#[derive(Serialize, Deserialize)]
#[cfg_attr(test, derive(Debug, PartialEq))]
struct Body {
    taken_ms: Millis,
    spaces: Vec<SpaceDump>,
    friends: Vec<(String, Vec<String>)>,
    mark: u64,
    /// The seed of the remembered times' fingerprints.
    seen_seed: u64,
    /// Remembered last-seen times by space: (fingerprint, guest, ms).
    remembered: Vec<(String, Vec<RememberedEntry>)>,
    /// The webhook outbox's events not yet acknowledged, oldest first.
    outbox: Vec<OutboxEvent>,
    /// The webhook endpoints spaces name, by space.
    hooks: Vec<(String, Vec<SpaceHook>)>,
}

impl Body {
    /// Reads a body of `version`, older ones upgraded: postcard writes a
    /// struct as its fields in sequence with no framing, so an older body
    /// is today's fields in their forms then, less those added since.
    /// Policies lacking fields take them from `defaults`; `seed` stands for
    /// the fingerprint seed of a body without one; what else a body lacks
    /// comes empty (mark 0).
    fn read(
        version: u32,
        mut r: &[u8],
        defaults: SpaceConfig,
        seed: u64,
    ) -> postcard::Result<Self> {
        let r = &mut r;
        let taken_ms = take(r)?;
        let spaces = match version {
            1 | 2 => {
                let old: Vec<SpaceDumpV2> = take(r)?;
                old.into_iter().map(|s| s.upgrade(defaults)).collect()
            }
            3..=6 => {
                let old: Vec<SpaceDumpV6> = take(r)?;
                old.into_iter().map(|s| s.upgrade(defaults)).collect()
            }
            _ => take(r)?,
        };
        let friends = take(r)?;
        let mark = if version >= 2 { take(r)? } else { 0 };
        let (seen_seed, remembered) = if version >= 3 {
            (take(r)?, take(r)?)
        } else {
            (seed, Vec::new())
        };
        let outbox = match version {
            ..=3 => Vec::new(),
            4 | 5 => {
                let old: Vec<OutboxEventV1> = take(r)?;
                old.into_iter().map(OutboxEvent::from).collect()
            }
            _ => take(r)?,
        };
        let hooks = if version >= 5 { take(r)? } else { Vec::new() };
        Ok(Body {
            taken_ms,
            spaces,
            friends,
            mark,
            seen_seed,
            remembered,
            outbox,
            hooks,
        })
    }
}

/// The next value in `r`, which moves past it. Like `postcard::from_bytes`,
/// bytes after the last value read are left unread.
fn take<T: DeserializeOwned>(r: &mut &[u8]) -> postcard::Result<T> {
    let (value, rest) = postcard::take_from_bytes(r)?;
    *r = rest;
    Ok(value)
}

#[derive(Serialize, Deserialize)]
#[cfg_attr(test, derive(Debug, PartialEq))]
struct SpaceDump {
    name: String,
    config: SpaceConfig,
    /// Oldest first: restoring in this order links every member at the head.
    members: Vec<MemberDump>,
}

/// A space of versions 3 to 6: the policy had no grace, the members no
/// `held`.
#[derive(Serialize, Deserialize)]
struct SpaceDumpV6 {
    name: String,
    config: SpaceConfigV2,
    members: Vec<MemberDumpV6>,
}

impl SpaceDumpV6 {
    fn upgrade(self, defaults: SpaceConfig) -> SpaceDump {
        SpaceDump {
            name: self.name,
            config: self.config.upgrade(defaults.grace_ms),
            members: self
                .members
                .into_iter()
                .map(MemberDumpV6::upgrade)
                .collect(),
        }
    }
}

/// A member of versions 1 to 6.
#[derive(Serialize, Deserialize)]
struct MemberDumpV6 {
    guest: bool,
    id: String,
    last_seen_ms: Millis,
    meta: Option<String>,
}

impl MemberDumpV6 {
    fn upgrade(self) -> MemberDump {
        MemberDump {
            guest: self.guest,
            id: self.id,
            last_seen_ms: self.last_seen_ms,
            meta: self.meta,
            held: false,
        }
    }
}

/// A space of versions 1 and 2: the policy had four fields.
#[derive(Serialize, Deserialize)]
struct SpaceDumpV2 {
    name: String,
    config: [Millis; 4],
    members: Vec<MemberDumpV6>,
}

impl SpaceDumpV2 {
    fn upgrade(self, defaults: SpaceConfig) -> SpaceDump {
        let [online_ms, away_ms, window_ms, retention_ms] = self.config;
        SpaceDump {
            name: self.name,
            config: SpaceConfig {
                online_ms,
                away_ms,
                window_ms,
                retention_ms,
                ..defaults
            },
            members: self
                .members
                .into_iter()
                .map(MemberDumpV6::upgrade)
                .collect(),
        }
    }
}

#[derive(Serialize, Deserialize)]
#[cfg_attr(test, derive(Debug, PartialEq))]
struct MemberDump {
    guest: bool,
    id: String,
    last_seen_ms: Millis,
    meta: Option<String>,
    /// A visible live connection held the member present (restored in its
    /// grace: [`MemoryStore::restore`]).
    held: bool,
}

/// What [`MemoryStore::restore`] brought back.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RestoreReport {
    /// Spaces restored, empty ones included (their policy is kept).
    pub spaces: u64,
    /// Members restored (members already past their retention are not).
    pub members: u64,
    /// Remembered last-seen times restored.
    pub remembered: u64,
    /// Users with a friend set (friend sets are global, not per space).
    pub friend_sets: u64,
    /// When the snapshot was taken, by the clock of the store that took
    /// it: how old the restored state is.
    pub taken_ms: Millis,
    /// The number the snapshot was taken with (see
    /// [`MemoryStore::snapshot_marked`]); 0 for snapshots without one.
    pub mark: u64,
}

fn bad(what: impl Into<String>) -> Error {
    Error::Snapshot { what: what.into() }
}

impl MemoryStore {
    /// The whole store as snapshot bytes. Spaces are locked one at a
    /// time, never all together, so each space is consistent in itself but
    /// the snapshot is not one instant across spaces.
    pub fn snapshot(&self) -> Vec<u8> {
        self.snapshot_marked(0)
    }

    /// The whole store as snapshot bytes, carrying `mark`, a number
    /// opaque to the store that [`restore`](Self::restore) hands back: the
    /// server stores the journal file the snapshot covers everything
    /// before, so a start replays only what came after.
    pub fn snapshot_marked(&self, mark: u64) -> Vec<u8> {
        let spaces: Vec<Arc<Stripes>> = self.spaces.read().values().cloned().collect();
        let spaces = spaces
            .iter()
            .map(|s| {
                let mut all = s.lock_all();
                // Oldest first across the stripes, as a whole space exports.
                let mut members: Vec<_> = all
                    .stripes_mut()
                    .flat_map(|s| {
                        let s = &*s;
                        s.export()
                            .into_iter()
                            .map(move |(key, ts, meta)| (s.held(&key), key, ts, meta))
                    })
                    .collect();
                members.sort_by_key(|(_, _, ts, _)| *ts);
                let s = all.first();
                SpaceDump {
                    name: s.name().to_string(),
                    config: s.config(),
                    members: members
                        .into_iter()
                        .map(|(held, key, ts, meta)| MemberDump {
                            guest: key.kind == MemberKind::Guest,
                            id: key.id.to_string(),
                            last_seen_ms: ts,
                            meta: meta.map(|m| m.as_json().to_owned()),
                            held,
                        })
                        .collect(),
                }
            })
            .collect();
        let friends = self
            .friends
            .read()
            .iter()
            .map(|(u, set)| (u.to_string(), set.iter().map(|f| f.to_string()).collect()))
            .collect();
        // After the spaces: a member who leaves in between is present in
        // its space's dump and remembered here (restore keeps the
        // presence), and the journal's leave, replayed, remembers it again;
        // the other order could lose the remembered time.
        let remembered = self
            .shared
            .seen
            .remembered_entries()
            .into_iter()
            .map(|(space, list)| (space.to_string(), list))
            .collect();
        let body = Body {
            taken_ms: self.shared.clock.now_ms(),
            spaces,
            friends,
            mark,
            seen_seed: self.shared.seen.seed(),
            remembered,
            // Last: an event captured meanwhile is in the journal after
            // the snapshot's mark too, and restoring it twice keeps one.
            outbox: self.shared.outbox.export(),
            hooks: self.hooks.export(),
        };
        let body = postcard::to_stdvec(&body).expect("snapshot body serializes");
        let mut out = Vec::with_capacity(HEADER + body.len());
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&VERSION.to_le_bytes());
        out.extend_from_slice(&crc32fast::hash(&body).to_le_bytes());
        out.extend_from_slice(&body);
        out
    }

    /// Loads snapshot bytes into this (empty) store. Every id, name and
    /// policy is checked again as if it came from a client.
    pub fn restore(&self, bytes: &[u8]) -> Result<RestoreReport> {
        if bytes.len() < MAGIC.len() || &bytes[..MAGIC.len()] != MAGIC {
            return Err(bad("is not a herenow snapshot (wrong magic bytes)"));
        }
        if bytes.len() < HEADER {
            return Err(bad("is truncated (no header)"));
        }
        let version = u32::from_le_bytes(bytes[17..21].try_into().expect("4 bytes"));
        if !(1..=VERSION).contains(&version) {
            return Err(bad(format!(
                "has format version {version}; this herenow reads versions 1 to {VERSION}"
            )));
        }
        let crc = u32::from_le_bytes(bytes[21..25].try_into().expect("4 bytes"));
        let body = &bytes[HEADER..];
        if crc32fast::hash(body) != crc {
            return Err(bad("is corrupt (checksum mismatch)"));
        }
        let undecodable = |e: postcard::Error| bad(format!("cannot be decoded: {e}"));
        let body = Body::read(version, body, self.defaults(), self.shared.seen.seed())
            .map_err(undecodable)?;

        // Build everything first, then swap it in: a bad record leaves the
        // store as it was.
        let now = self.shared.clock.now_ms();
        let mut report = RestoreReport {
            taken_ms: body.taken_ms,
            mark: body.mark,
            ..Default::default()
        };
        let mut spaces = Vec::with_capacity(body.spaces.len());
        for dump in body.spaces {
            let name = SpaceName::new(&dump.name)
                .map_err(|e| bad(format!("holds a bad space name: {e}")))?;
            dump.config
                .validate()
                .map_err(|e| bad(format!("space {name}: {e}")))?;
            let mut space = stripes::make(&name, dump.config, now, self.stripes, |_| {});
            let mut beats = Vec::with_capacity(dump.members.len());
            let mut held = Vec::new();
            for m in dump.members {
                let id = MemberId::new(&m.id).map_err(|e| bad(format!("space {name}: {e}")))?;
                let meta = m
                    .meta
                    .map(|j| Metadata::from_json(&j))
                    .transpose()
                    .map_err(|e| bad(format!("space {name}: {e}")))?;
                let kind = if m.guest {
                    MemberKind::Guest
                } else {
                    MemberKind::User
                };
                if m.held {
                    held.push(beats.len());
                }
                beats.push(Heartbeat {
                    member: MemberKey { kind, id },
                    at_ms: Some(m.last_seen_ms.min(now)),
                    meta,
                });
            }
            let parts = stripes::split_refs(space.len(), &beats, |b| &b.member)
                .unwrap_or_else(|| vec![beats.iter().collect()]);
            for (stripe, part) in space.iter_mut().zip(&parts) {
                for chunk in part.chunks(herenow_core::limits::MAX_BATCH) {
                    let r = stripe
                        .heartbeat(chunk, now)
                        .map_err(|e| bad(format!("space {name}: {e}")))?;
                    report.members += r.accepted;
                }
            }
            // Members a connection held: the process whose connection it
            // was is gone, so each lives out the grace from now, unless it
            // comes back (see `herenow_core::conn`).
            for (n, &i) in held.iter().enumerate() {
                let beat = &beats[i];
                let conn = ConnId::new(&format!("restored.{n}"))
                    .unwrap_or_else(|_| unreachable!("a valid connection id"));
                let k = stripes::stripe_of(space.len(), &beat.member);
                space[k].hold_in_grace(&beat.member, &conn, beat.meta.clone(), now);
            }
            report.spaces += 1;
            spaces.push((name, space));
        }
        let mut friends = std::collections::HashMap::new();
        for (user, list) in body.friends {
            let user =
                MemberId::new(&user).map_err(|e| bad(format!("holds a bad user id: {e}")))?;
            let set = list
                .iter()
                .map(|f| MemberId::new(f))
                .collect::<Result<BTreeSet<_>, _>>()
                .map_err(|e| bad(format!("holds a bad friend id: {e}")))?;
            friends.insert(user, set);
        }
        report.friend_sets = friends.len() as u64;
        let mut remembered = Vec::with_capacity(body.remembered.len());
        for (name, list) in body.remembered {
            let name = SpaceName::new(&name)
                .map_err(|e| bad(format!("remembers a bad space name: {e}")))?;
            remembered.push((name, list));
        }
        let mut hooks = Vec::with_capacity(body.hooks.len());
        for (name, list) in body.hooks {
            let name = SpaceName::new(&name)
                .map_err(|e| bad(format!("names webhooks of a bad space name: {e}")))?;
            SpaceHook::check_all(&list)
                .map_err(|e| bad(format!("space {name}'s webhooks: {e}")))?;
            hooks.push((name, list));
        }
        // The fingerprints in the snapshot were made with its seed.
        self.shared.seen.set_seed(body.seen_seed);
        let mut map = self.spaces.write();
        for (name, mut space) in spaces {
            let seen_id = self.shared.seen.register(&name, &space[0].config());
            for stripe in &mut space {
                self.tap(stripe, seen_id);
                self.shared.absorb(stripe);
            }
            map.insert(name, Arc::new(Stripes::new(space)));
        }
        for (name, list) in remembered {
            let space = map
                .entry(name.clone())
                .or_insert_with(|| Arc::new(self.new_space(&name, now)));
            if let Some(id) = space.lock_all().first().seen_id() {
                self.shared.seen.restore_remembered(id, &list);
                report.remembered += list.len() as u64;
            }
        }
        drop(map);
        *self.friends.write() = friends;
        self.shared.outbox.restore(&body.outbox);
        for (name, list) in hooks {
            self.restore_hooks(&name, &list)?;
        }
        Ok(report)
    }
}

#[cfg(test)]
mod tests {
    use herenow_core::capability::UserIndex;
    use herenow_core::store::PresenceStore;

    use super::*;

    /// The body of version 6, before the grace and held members.
    #[derive(Serialize)]
    struct BodyV6 {
        taken_ms: Millis,
        spaces: Vec<SpaceDumpV6>,
        friends: Vec<(String, Vec<String>)>,
        mark: u64,
        seen_seed: u64,
        remembered: Vec<(String, Vec<RememberedEntry>)>,
        outbox: Vec<OutboxEvent>,
        hooks: Vec<(String, Vec<SpaceHook>)>,
    }

    /// The body of version 5, before outbox messages' bodies.
    #[derive(Serialize)]
    struct BodyV5 {
        taken_ms: Millis,
        spaces: Vec<SpaceDumpV6>,
        friends: Vec<(String, Vec<String>)>,
        mark: u64,
        seen_seed: u64,
        remembered: Vec<(String, Vec<RememberedEntry>)>,
        outbox: Vec<OutboxEventV1>,
        hooks: Vec<(String, Vec<SpaceHook>)>,
    }

    /// The body of version 1, before `mark`.
    #[derive(Serialize)]
    struct BodyV1 {
        taken_ms: Millis,
        spaces: Vec<SpaceDumpV2>,
        friends: Vec<(String, Vec<String>)>,
    }

    #[tokio::test]
    async fn a_version_5_snapshot_keeps_its_waiting_webhook_events() {
        use herenow_core::capability::WebhookOutbox;
        let store = MemoryStore::default();
        store.outbox_open(Default::default()).await.unwrap();
        let lobby = SpaceName::new("lobby").unwrap();
        let ann = MemberKey::user(MemberId::new("ann").unwrap());
        store
            .heartbeat(&lobby, &[Heartbeat::now(ann)])
            .await
            .unwrap();
        let bytes = store.snapshot();
        let body: Body = postcard::from_bytes(&bytes[HEADER..]).unwrap();
        let v5 = BodyV5 {
            taken_ms: body.taken_ms,
            spaces: body.spaces.into_iter().map(SpaceDump::downgrade).collect(),
            friends: body.friends,
            mark: body.mark,
            seen_seed: body.seen_seed,
            remembered: body.remembered,
            outbox: body.outbox.iter().map(OutboxEventV1::from).collect(),
            hooks: body.hooks,
        };
        let restored = MemoryStore::default();
        restored
            .restore(&super::fuzz::framed(
                5,
                &postcard::to_allocvec(&v5).unwrap(),
            ))
            .unwrap();
        let events = |s: MemoryStore| async move { s.outbox_claim("c", 10, 0).await.unwrap() };
        let before = events(store).await;
        assert_eq!(before.len(), 2, "{before:?}");
        assert_eq!(events(restored).await, before);
    }

    impl SpaceDump {
        /// The space as versions 3 to 6 wrote it.
        fn downgrade(self) -> SpaceDumpV6 {
            SpaceDumpV6 {
                name: self.name,
                config: self.config.into(),
                members: self
                    .members
                    .into_iter()
                    .map(|m| MemberDumpV6 {
                        guest: m.guest,
                        id: m.id,
                        last_seen_ms: m.last_seen_ms,
                        meta: m.meta,
                    })
                    .collect(),
            }
        }
    }

    #[tokio::test]
    async fn members_connections_held_are_restored_in_their_grace_and_leave_after_it() {
        use herenow_core::capability::LiveConnections;
        use herenow_core::conn::{Attach, ConnId};
        use herenow_core::time::{Clock, ManualClock};
        use std::time::Duration;
        let clock = ManualClock::new(1_000_000);
        let store = MemoryStore::new(Arc::new(clock.clone()), SpaceConfig::default());
        let lobby = SpaceName::new("lobby").unwrap();
        let ann = MemberKey::user(MemberId::new("ann").unwrap());
        let bob = MemberKey::user(MemberId::new("bob").unwrap());
        let meta = Metadata::from_json(r#"{"name":"Ann"}"#).unwrap();
        let attach = |member: &MemberKey, conn: &str, meta: Option<Metadata>| Attach {
            member: member.clone(),
            conn: ConnId::new(conn).unwrap(),
            meta,
            invisible: false,
            ttl_ms: 30_000,
        };
        store
            .attach(&lobby, &attach(&ann, "a1", Some(meta.clone())))
            .await
            .unwrap();
        store
            .heartbeat(&lobby, &[Heartbeat::now(bob.clone())])
            .await
            .unwrap();
        let bytes = store.snapshot();

        // The process dies; a new one restores and its clock has moved on.
        clock.advance(Duration::from_secs(2));
        let restored = MemoryStore::new(Arc::new(clock.clone()), SpaceConfig::default());
        restored.restore(&bytes).unwrap();
        let conns = restored
            .connections(&lobby, &[ann.clone(), bob.clone()])
            .await
            .unwrap();
        assert_eq!(conns[0].len(), 1, "ann is held in her grace");
        assert!(conns[0][0].lingering);
        assert_eq!(conns[0][0].expires_ms, clock.now_ms() + 5_000);
        assert!(conns[1].is_empty(), "bob's heartbeats keep their own rules");

        // Ann comes back within the grace: nothing to tell.
        let mut sub = restored.subscribe(&lobby).await.unwrap();
        let back = restored
            .attach(&lobby, &attach(&ann, "a2", Some(meta.clone())))
            .await
            .unwrap();
        assert!(back.resumed && !back.joined);
        clock.advance(Duration::from_secs(6));
        restored.tick().await.unwrap();
        assert!(sub.events.try_recv().unwrap().is_none(), "no event at all");

        // A version 6 snapshot (no grace, nobody held) still reads.
        let body: Body = postcard::from_bytes(&bytes[HEADER..]).unwrap();
        let v6 = BodyV6 {
            taken_ms: body.taken_ms,
            spaces: body.spaces.into_iter().map(SpaceDump::downgrade).collect(),
            friends: body.friends,
            mark: body.mark,
            seen_seed: body.seen_seed,
            remembered: body.remembered,
            outbox: body.outbox,
            hooks: body.hooks,
        };
        let old = MemoryStore::new(Arc::new(clock.clone()), SpaceConfig::default());
        old.restore(&super::fuzz::framed(
            6,
            &postcard::to_allocvec(&v6).unwrap(),
        ))
        .unwrap();
        assert_eq!(old.config(&lobby).await.unwrap().grace_ms, 5_000);
        let conns = old.connections(&lobby, &[ann]).await.unwrap();
        assert!(conns[0].is_empty());
    }

    #[tokio::test]
    async fn a_marked_snapshot_hands_its_mark_back_and_version_1_still_reads() {
        let store = MemoryStore::default();
        let lobby = SpaceName::new("lobby").unwrap();
        let ann = MemberKey::user(MemberId::new("ann").unwrap());
        store
            .heartbeat(&lobby, &[Heartbeat::now(ann.clone())])
            .await
            .unwrap();
        let restored = MemoryStore::default();
        let report = restored.restore(&store.snapshot_marked(7)).unwrap();
        assert_eq!((report.mark, report.members), (7, 1));

        // A version 1 file, as herenow wrote it before marks.
        let v1 = BodyV1 {
            taken_ms: 1,
            spaces: vec![SpaceDumpV2 {
                name: "lobby".into(),
                config: [5_000, 20_000, 30_000, 60_000],
                members: vec![MemberDumpV6 {
                    guest: false,
                    id: "ann".into(),
                    last_seen_ms: store.shared.clock.now_ms(),
                    meta: None,
                }],
            }],
            friends: vec![("ann".into(), vec!["bob".into()])],
        };
        let body = postcard::to_stdvec(&v1).unwrap();
        let mut bytes = MAGIC.to_vec();
        bytes.extend_from_slice(&1u32.to_le_bytes());
        bytes.extend_from_slice(&crc32fast::hash(&body).to_le_bytes());
        bytes.extend_from_slice(&body);
        let old = MemoryStore::default();
        let report = old.restore(&bytes).unwrap();
        assert_eq!((report.mark, report.members, report.friend_sets), (0, 1, 1));
        let config = old.config(&lobby).await.unwrap();
        assert_eq!((config.online_ms, config.retention_ms), (5_000, 60_000));
        assert_eq!(config.remember_ms, SpaceConfig::default().remember_ms);
    }

    /// Versions 2 to 4, written as postcard writes a struct (its fields in
    /// sequence), read back with what each held.
    #[tokio::test]
    async fn versions_2_to_4_still_read() {
        let store = MemoryStore::default();
        let lobby = SpaceName::new("lobby").unwrap();
        let ann = MemberKey::user(MemberId::new("ann").unwrap());
        store
            .heartbeat(&lobby, &[Heartbeat::now(ann)])
            .await
            .unwrap();
        store
            .set_friends(
                &MemberId::new("ann").unwrap(),
                &[MemberId::new("bob").unwrap()],
            )
            .await
            .unwrap();
        let body: Body = postcard::from_bytes(&store.snapshot_marked(9)[HEADER..]).unwrap();
        let spaces: Vec<SpaceDumpV6> = body.spaces.into_iter().map(SpaceDump::downgrade).collect();
        let (taken, friends, seed) = (body.taken_ms, &body.friends, body.seen_seed);
        let no_spaces: Vec<SpaceDumpV2> = Vec::new();
        let no_events: Vec<OutboxEventV1> = Vec::new();
        let v2 = postcard::to_stdvec(&(taken, &no_spaces, friends, 9u64)).unwrap();
        let v3 = (taken, &spaces, friends, 9u64, seed, &body.remembered);
        let v4 = postcard::to_stdvec(&(v3, &no_events)).unwrap();
        let v3 = postcard::to_stdvec(&v3).unwrap();
        for (version, body, members) in [(2, v2, 0), (3, v3, 1), (4, v4, 1)] {
            let old = MemoryStore::default();
            let report = old.restore(&super::fuzz::framed(version, &body)).unwrap();
            assert_eq!(
                (report.mark, report.members, report.friend_sets),
                (9, members, 1),
                "version {version}"
            );
            if version >= 3 {
                assert_eq!(old.shared.seen.seed(), seed);
            }
        }
    }

    #[tokio::test]
    async fn remembered_times_survive_a_snapshot_with_their_fingerprints() {
        let clock = herenow_core::time::ManualClock::new(1_700_000_000_000);
        let store = MemoryStore::new(Arc::new(clock.clone()), SpaceConfig::default());
        let lobby = SpaceName::new("lobby").unwrap();
        let key = |id: &str| MemberKey::user(MemberId::new(id).unwrap());
        store
            .heartbeat(
                &lobby,
                &[Heartbeat::now(key("ann")), Heartbeat::now(key("bob"))],
            )
            .await
            .unwrap();
        store.leave(&lobby, &[key("ann")]).await.unwrap();
        let bytes = store.snapshot();

        // Another store, with another random seed until it restores.
        let restored = MemoryStore::new(Arc::new(clock.clone()), SpaceConfig::default());
        assert_ne!(restored.shared.seen.seed(), store.shared.seen.seed());
        let report = restored.restore(&bytes).unwrap();
        assert_eq!((report.members, report.remembered), (1, 1));
        let st = restored
            .status(&lobby, &[key("ann"), key("bob")])
            .await
            .unwrap();
        assert_eq!(st[0].status, herenow_core::policy::Status::Offline);
        assert_eq!(st[0].last_seen_ms, Some(1_700_000_000_000));
        assert_eq!(st[1].status, herenow_core::policy::Status::Online);
        let anywhere = restored
            .seen_anywhere(&[MemberId::new("ann").unwrap(), MemberId::new("bob").unwrap()])
            .await
            .unwrap();
        assert_eq!(anywhere[0].space.as_ref(), Some(&lobby));
        assert_eq!(anywhere[1].status, herenow_core::policy::Status::Online);
    }
}
