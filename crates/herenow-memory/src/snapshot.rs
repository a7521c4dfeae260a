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
            // As `set_friends` bounds them: an online-friends query reads
            // the whole set.
            if set.len() > herenow_core::limits::MAX_FRIENDS {
                let most = herenow_core::limits::MAX_FRIENDS;
                return Err(bad(format!(
                    "holds {} friends of one user, over {most}",
                    set.len()
                )));
            }
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
mod tests;
