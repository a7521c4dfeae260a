//! Every key name the Redis store uses, and how a space is split over
//! shards: the one place that knows the key layout (the table is in the
//! [crate documentation](crate)), so the scripts' callers never format a
//! key themselves.
//!
//! # Big spaces: shards
//!
//! A sorted set holds at most 2^32−1 members (seed 004) and lives on one
//! node of a cluster. A space configured with N > 1 shards
//! ([`RedisOptions::shards`](crate::RedisOptions::shards), or per space
//! [`RedisOptions::space_shards`](crate::RedisOptions::space_shards)) keeps
//! its members in N copies of the default layout, each under its own hash
//! tag, so the shards spread over the cluster's slots and nodes:
//!
//! - shard 0 is `P:{S}:…`, exactly the unsharded layout (N = 1 is today's
//!   layout, no migration);
//! - shard k ≥ 1 is `P:{S#k}:…` (`#` is not allowed in space names, so no
//!   other space can own that tag).
//!
//! A member always lives in shard [`shard_of`]`(kind, id, N)`. Each shard
//! keeps its own members' metadata, connections, event sequence,
//! watermarks and sweep lease (a store sweeps the shards whose lease it
//! holds), and a copy of the space's policy (written to every shard by
//! `set_config`, read from shard 0 by `config`). Events are published on
//! each shard's channel, numbered per shard; a subscriber listens to all N
//! and takes each shard's snapshot with its own sequence number, so every
//! member's events arrive in order (events of members in different shards
//! have no order between them).
//!
//! Changing N remaps members, so a space keeps the N it was created with:
//! the registry records it (`P:{spaces}:shards`) when it is first written,
//! and a store configured with another N refuses to write heartbeats or
//! connections to it ([`Error::Internal`](herenow_core::Error::Internal),
//! logged; its reads and leaves are not checked, so every server on one
//! Redis must be configured alike). A space dropped from the registry
//! (empty) may come back with another N.
//!
//! Connection ids are unique per space: with N > 1 a member's connections
//! live in its shard, and a claim key `P:{S#j}:claim:CONN` (in the shard j
//! the connection id hashes to, expiring with the connection) says which
//! member owns the id, so another member's attach with the same id is
//! refused as it is with one shard.

use std::collections::HashMap;

use redis::ScriptInvocation;

use herenow_core::{ConnId, MemberKey, MemberKind, SpaceName};

/// Most shards a space may have.
pub const MAX_SHARDS: u16 = 1024;

/// The shard of a member in a space of `shards` shards: FNV-1a (64 bits)
/// of `u:ID` or `g:ID`, modulo `shards` — stable across processes,
/// versions and platforms, so any tool can compute it. Always 0 for one
/// shard.
pub fn shard_of(kind: MemberKind, id: &str, shards: u16) -> u16 {
    hash_mod(&[kind.letter().as_bytes()[0], b':'], id, shards)
}

/// How many slots users' indexes of spaces and the reverse index of
/// friend sets are spread over (see [`user_bucket`]).
pub const USER_BUCKETS: u16 = 256;

/// The bucket of a user's index of spaces and of its followers: FNV-1a of
/// `x:ID`, modulo [`USER_BUCKETS`]. Each bucket is one hash tag, `{~B}`
/// (`~` is not allowed in space names, so no space's tag is one), so the
/// indexes of many users are written and read by one script per bucket
/// rather than one command per user.
pub fn user_bucket(id: &str) -> u16 {
    hash_mod(b"x:", id, USER_BUCKETS)
}

/// The shard holding the claim on connection id `conn`: FNV-1a of
/// `c:CONN`, modulo `shards`.
pub fn claim_shard(conn: &str, shards: u16) -> u16 {
    hash_mod(b"c:", conn, shards)
}

fn hash_mod(prefix: &[u8], s: &str, shards: u16) -> u16 {
    if shards <= 1 {
        return 0;
    }
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in prefix.iter().chain(s.as_bytes()) {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    (h % u64::from(shards)) as u16
}

/// `s` with the glob characters of `SCAN … MATCH` escaped.
fn escape_glob(s: &str) -> String {
    let mut p = String::with_capacity(s.len() + 10);
    for c in s.chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '\\') {
            p.push('\\');
        }
        p.push(c);
    }
    p
}

/// The hash tag of shard `k` of `space`: `{S}` for shard 0, `{S#k}` after.
fn tag(space: &SpaceName, k: u16) -> String {
    if k == 0 {
        format!("{{{}}}", space.as_str())
    } else {
        format!("{{{}#{k}}}", space.as_str())
    }
}

/// The names of one shard's keys (of the space itself when it has one
/// shard): all share the shard's hash tag, so any script may take them
/// together.
#[derive(Clone)]
pub(crate) struct SpaceKeys {
    /// Users: id → last seen in ms.
    pub zu: String,
    /// Guests: id → last seen in ms.
    pub zg: String,
    /// `u:ID` / `g:ID` → metadata JSON.
    pub meta: String,
    /// The event sequence and the watermarks.
    pub state: String,
    /// The space's policy, absent for the defaults.
    pub config: String,
    /// The event channel (numbered per shard).
    pub channel: String,
    /// The sweep lease: who may run background work on the shard.
    pub lease: String,
    /// Live connections (see [`crate::conn_scripts`]): id → expiry.
    pub conns: String,
    /// Connection id → its record (member, visibility, metadata).
    pub cinfo: String,
    /// Member → its connection ids and their visibility.
    pub mconn: String,
    /// Remembered users: id → last seen in ms, once no longer present.
    pub ru: String,
    /// Remembered guests (spaces that remember guests).
    pub rg: String,
    /// Users stored or remembered anew whose index of spaces may not list
    /// this space yet (see [`Keys::seen`]).
    pub unidx: String,
    /// The shard's outbox tag ([`Keys::outbox_tag`]), not a key: its
    /// stream is [`Keys::stream`] of it.
    pub outbox: String,
    /// Which shard of its space this is.
    pub shard: u16,
}

impl SpaceKeys {
    /// The keys stored (not the channel), in the order the connection
    /// scripts take them (see [`crate::conn_scripts`]).
    fn stored(&self) -> [&String; 12] {
        [
            &self.zu,
            &self.zg,
            &self.meta,
            &self.state,
            &self.config,
            &self.lease,
            &self.conns,
            &self.cinfo,
            &self.mconn,
            &self.ru,
            &self.rg,
            &self.unidx,
        ]
    }

    /// [`stored`](Self::stored), as
    /// [`RedisStore::space_keys`](crate::RedisStore::space_keys) lists them.
    pub fn names(&self) -> Vec<String> {
        self.stored().map(String::clone).to_vec()
    }

    /// Adds the [`stored`](Self::stored) keys to a connection script's
    /// call.
    pub fn add_to(&self, inv: &mut ScriptInvocation<'_>) {
        for k in self.stored() {
            inv.key(k);
        }
    }
}

/// The key names of one store: its prefix and how many shards each space
/// has ([`RedisOptions::shards`](crate::RedisOptions::shards) and
/// [`space_shards`](crate::RedisOptions::space_shards)).
#[derive(Debug)]
pub(crate) struct Keys {
    prefix: String,
    shards: u16,
    space_shards: HashMap<SpaceName, u16>,
}

impl Keys {
    /// Names under `prefix`, checking every shard count is within
    /// 1..=[`MAX_SHARDS`] (`None` otherwise).
    pub fn new(prefix: &str, shards: u16, space_shards: HashMap<SpaceName, u16>) -> Option<Self> {
        let valid = std::iter::once(&shards)
            .chain(space_shards.values())
            .all(|n| (1..=MAX_SHARDS).contains(n));
        valid.then(|| Keys {
            prefix: prefix.to_owned(),
            shards,
            space_shards,
        })
    }

    /// How many shards `space` has.
    pub fn shards(&self, space: &SpaceName) -> u16 {
        self.space_shards.get(space).copied().unwrap_or(self.shards)
    }

    /// The keys of shard 0: the whole space when it has one shard.
    pub fn space(&self, space: &SpaceName) -> SpaceKeys {
        self.shard(space, 0)
    }

    /// The keys of every shard of `space`, shard 0 first.
    pub fn all(&self, space: &SpaceName) -> Vec<SpaceKeys> {
        (0..self.shards(space))
            .map(|k| self.shard(space, k))
            .collect()
    }

    /// The keys of shard `k` of `space`.
    pub fn shard(&self, space: &SpaceName, k: u16) -> SpaceKeys {
        let base = format!("{}:{}", self.prefix, tag(space, k));
        SpaceKeys {
            zu: format!("{base}:u"),
            zg: format!("{base}:g"),
            meta: format!("{base}:meta"),
            state: format!("{base}:state"),
            config: format!("{base}:config"),
            channel: format!("{base}:events"),
            lease: format!("{base}:lease"),
            conns: format!("{base}:conns"),
            cinfo: format!("{base}:cinfo"),
            mconn: format!("{base}:mconn"),
            ru: format!("{base}:ru"),
            rg: format!("{base}:rg"),
            unidx: format!("{base}:unidx"),
            outbox: Self::outbox_tag(space, k),
            shard: k,
        }
    }

    /// The keys of the shard `member` lives in.
    pub fn of_member(&self, space: &SpaceName, member: &MemberKey) -> SpaceKeys {
        let n = self.shards(space);
        self.shard(space, shard_of(member.kind, member.id.as_str(), n))
    }

    /// Groups `n` items by the shard of `member(i)`: `(shard, indices)`,
    /// in shard order, only shards that have some.
    pub fn by_shard<'m>(
        &self,
        space: &SpaceName,
        n: usize,
        member: impl Fn(usize) -> &'m MemberKey,
    ) -> Vec<(u16, Vec<usize>)> {
        let shards = self.shards(space);
        if shards == 1 {
            return vec![(0, (0..n).collect())];
        }
        let mut groups: Vec<Vec<usize>> = vec![Vec::new(); usize::from(shards)];
        for i in 0..n {
            let m = member(i);
            groups[usize::from(shard_of(m.kind, m.id.as_str(), shards))].push(i);
        }
        groups
            .into_iter()
            .enumerate()
            .filter(|(_, g)| !g.is_empty())
            .map(|(k, g)| (k as u16, g))
            .collect()
    }

    /// The registry of spaces: names (for listing) and when a writer last
    /// marked each (for dropping empty ones).
    pub fn registry(&self) -> (String, String) {
        let p = &self.prefix;
        (
            format!("{p}:{{spaces}}:names"),
            format!("{p}:{{spaces}}:touched"),
        )
    }

    /// The registry's record of each space's shard count.
    pub fn registry_shards(&self) -> String {
        format!("{}:{{spaces}}:shards", self.prefix)
    }

    /// The registry of spaces holding only remembered times.
    pub fn due(&self) -> String {
        format!("{}:{{spaces}}:due", self.prefix)
    }

    /// A user's friend set: global, in a slot of its own.
    pub fn friends(&self, user: &str) -> String {
        format!("{}:friends:{user}", self.prefix)
    }

    /// A `SCAN … MATCH` pattern for every friend set under this prefix
    /// (glob characters of the prefix escaped).
    pub fn friends_pattern(&self) -> String {
        escape_glob(&self.prefix) + ":friends:*"
    }

    /// The owner of a friend set from its key name (`None`: not one).
    pub fn owner_of_friends<'a>(&self, key: &'a str) -> Option<&'a str> {
        key.strip_prefix(self.prefix.as_str())?
            .strip_prefix(":friends:")
    }

    /// The stores (servers) alive on this Redis: a sorted set, member =
    /// a store's [`lease owner`](crate::RedisStore::lease_owner) name,
    /// score = its last beat (ms). In the `{instances}` slot with the next
    /// two.
    pub fn instances(&self) -> String {
        format!("{}:{{instances}}:live", self.prefix)
    }

    /// The live connections store `owner` attached and has not ended: a
    /// set of `space \n kind letter:member id \n connection id`, what a
    /// reaper hands to the grace once the store stops beating.
    pub fn instance_conns(&self, owner: &str) -> String {
        format!("{}:{{instances}}:conns:{owner}", self.prefix)
    }

    /// The claim of the store reaping dead store `owner`'s connections.
    pub fn instance_reaper(&self, owner: &str) -> String {
        format!("{}:{{instances}}:reaper:{owner}", self.prefix)
    }

    /// The one-time migrations run on this prefix's data
    /// (`store/migrate.rs`).
    pub fn migrations(&self) -> String {
        format!("{}:migrations", self.prefix)
    }

    /// The reverse index of friend sets: the users whose friend set holds
    /// `user`, in `user`'s bucket.
    pub fn followers(&self, user: &str) -> String {
        format!(
            "{}:{{~{}}}:followers:{user}",
            self.prefix,
            user_bucket(user)
        )
    }

    /// A user's index of spaces, in its bucket.
    pub fn seen(&self, user: &str) -> String {
        format!("{}:{{~{}}}:seen:{user}", self.prefix, user_bucket(user))
    }

    /// Groups `ids` by [`user_bucket`]: the indices of each bucket's ids,
    /// one group per bucket that has some.
    pub fn by_bucket<S: AsRef<str>>(ids: &[S]) -> Vec<Vec<usize>> {
        let mut groups: HashMap<u16, Vec<usize>> = HashMap::new();
        for (i, id) in ids.iter().enumerate() {
            groups.entry(user_bucket(id.as_ref())).or_default().push(i);
        }
        groups.into_values().collect()
    }

    /// The prefix of every user's channel ([`user_channel`](Self::user_channel)).
    pub fn user_channels(&self) -> String {
        format!("{}:u:", self.prefix)
    }

    /// A user's channel ([`crate::follow`]). The scripts derive the same
    /// name from a space's channel.
    pub fn user_channel(&self, user: &str) -> String {
        format!("{}:u:{user}", self.prefix)
    }

    /// The channel messages between servers are relayed on
    /// ([`crate::relay`]).
    pub fn relay_channel(&self) -> String {
        format!("{}:relay", self.prefix)
    }

    /// The outbox tag of shard `k` of `space` ([`crate::outbox`]): `S` for
    /// shard 0, `S#k` after, the hash tag without its braces. It names the
    /// shard's stream in the index of streams and starts every event id.
    pub fn outbox_tag(space: &SpaceName, k: u16) -> String {
        let t = tag(space, k);
        t[1..t.len() - 1].to_owned()
    }

    /// The space and shard an outbox tag names (`None`: not a tag).
    pub fn parse_outbox_tag(tag: &str) -> Option<(SpaceName, u16)> {
        let (space, k) = match tag.split_once('#') {
            Some((s, k)) => (s, k.parse::<u16>().ok().filter(|&k| k >= 1)?),
            None => (tag, 0),
        };
        Some((SpaceName::new(space).ok()?, k))
    }

    /// The outbox stream of the shard tagged `tag` ([`outbox_tag`](Self::outbox_tag))
    /// and its state hash, in the shard's slot.
    pub fn stream(&self, tag: &str) -> (String, String) {
        let p = &self.prefix;
        (format!("{p}:{{{tag}}}:wh"), format!("{p}:{{{tag}}}:whs"))
    }

    /// Who delivers `space`'s events now, in the slot of shard 0.
    pub fn space_owner(&self, space: &SpaceName) -> String {
        format!("{}:{}:whown", self.prefix, tag(space, 0))
    }

    /// Which shards of a space split over several hold present members,
    /// in the slot of shard 0.
    pub fn occupancy(&self, space: &SpaceName) -> String {
        format!("{}:{}:whocc", self.prefix, tag(space, 0))
    }

    /// The index of outbox streams and the trimmed count of streams since
    /// deleted. `~` is not allowed in space names: no space owns the tag.
    pub fn outbox_index(&self) -> (String, String) {
        let p = &self.prefix;
        (
            format!("{p}:{{~outbox}}:streams"),
            format!("{p}:{{~outbox}}:trimmed"),
        )
    }

    /// The outbox's switch, a lease (see `store/outbox_lease.rs`).
    pub fn outbox_switch(&self) -> String {
        format!("{}:{{~outbox}}:open", self.prefix)
    }

    /// The outbox's keep time, set and renewed with the switch
    /// ([`outbox_switch`](Self::outbox_switch)), in its slot.
    pub fn outbox_keep(&self) -> String {
        format!("{}:{{~outbox}}:keep", self.prefix)
    }

    /// The webhook endpoints `space` names (a JSON string), in the slot of
    /// shard 0.
    pub fn space_hooks(&self, space: &SpaceName) -> String {
        format!("{}:{}:hooks", self.prefix, tag(space, 0))
    }

    /// The version of every space's webhook endpoints.
    pub fn hooks_version(&self) -> String {
        format!("{}:{{~outbox}}:hooksv", self.prefix)
    }

    /// The spaces that may name webhook endpoints (a superset; see
    /// `store/outbox_lease.rs`).
    pub fn hooked_spaces(&self) -> String {
        format!("{}:{{~outbox}}:hooked", self.prefix)
    }

    /// A `SCAN … MATCH` pattern for every space's endpoints key under this
    /// prefix.
    pub fn hooks_pattern(&self) -> String {
        escape_glob(&self.prefix) + ":{*}:hooks"
    }

    /// The space whose endpoints key `key` is (`None`: not one).
    pub fn space_of_hooks<'a>(&self, key: &'a str) -> Option<&'a str> {
        let name = self.tag_of(key, "}:hooks")?;
        SpaceName::new(name).ok().map(|_| name)
    }

    /// What stands between `P:{` and `suffix` in `key` (`None`: a key of
    /// another shape or prefix).
    fn tag_of<'a>(&self, key: &'a str, suffix: &str) -> Option<&'a str> {
        key.strip_prefix(self.prefix.as_str())?
            .strip_prefix(":{")?
            .strip_suffix(suffix)
    }

    /// A `SCAN … MATCH` pattern for every outbox stream under this prefix.
    pub fn stream_pattern(&self) -> String {
        escape_glob(&self.prefix) + ":{*}:wh"
    }

    /// The tag of an outbox stream from its key name (`None`: not one).
    pub fn tag_of_stream<'a>(&self, key: &'a str) -> Option<&'a str> {
        let t = self.tag_of(key, "}:wh")?;
        Self::parse_outbox_tag(t).map(|_| t)
    }

    /// The claim key of connection id `conn` (spaces of several shards).
    pub fn claim(&self, space: &SpaceName, conn: &ConnId) -> String {
        let n = self.shards(space);
        format!(
            "{}:{}:claim:{}",
            self.prefix,
            tag(space, claim_shard(conn.as_str(), n)),
            conn.as_str()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_shard_is_shard_zero() {
        for id in ["", "a", "alice", "🙂"] {
            assert_eq!(shard_of(MemberKind::User, id, 1), 0);
            assert_eq!(shard_of(MemberKind::Guest, id, 0), 0);
        }
    }

    /// The mapping is part of the key layout: it must never change.
    #[test]
    fn the_mapping_is_stable() {
        // FNV-1a 64 of "u:alice" is 0x536621b7aa09e6b6 (computed apart).
        let h: u64 = 0x5366_21b7_aa09_e6b6;
        assert_eq!(shard_of(MemberKind::User, "alice", 7), (h % 7) as u16);
        assert_eq!(shard_of(MemberKind::User, "alice", 1000), (h % 1000) as u16);
        let got: Vec<u16> = ["alice", "bob", "carol", "dave"]
            .iter()
            .map(|id| shard_of(MemberKind::User, id, 4))
            .collect();
        assert_eq!(got, FIXED);
        // A user and a guest with one id may live apart.
        assert_eq!(shard_of(MemberKind::Guest, "alice", 1), 0);
    }

    const FIXED: [u16; 4] = [2, 1, 3, 0];

    #[test]
    fn members_spread_over_shards() {
        let mut per = [0u32; 4];
        for i in 0..10_000 {
            per[shard_of(MemberKind::User, &format!("user-{i}"), 4) as usize] += 1;
        }
        assert!(per.iter().all(|&n| (2_200..2_800).contains(&n)), "{per:?}");
    }

    #[test]
    fn user_buckets_are_tags_of_their_own() {
        let k = Keys::new("p", 1, HashMap::new()).unwrap();
        let b = user_bucket("alice");
        assert!(b < USER_BUCKETS);
        assert_eq!(k.seen("alice"), format!("p:{{~{b}}}:seen:alice"));
        assert_eq!(k.followers("alice"), format!("p:{{~{b}}}:followers:alice"));
        let k = Keys::new("p*[x]", 1, HashMap::new()).unwrap();
        assert_eq!(k.friends_pattern(), r"p\*\[x\]:friends:*");
        assert_eq!(k.owner_of_friends("p*[x]:friends:ann"), Some("ann"));
        assert_eq!(k.owner_of_friends("p*[x]:friendsann"), None);
        assert_eq!(k.owner_of_friends("q:friends:ann"), None);
        let groups = Keys::by_bucket(&["a", "b", "a"]);
        assert_eq!(groups.iter().map(Vec::len).sum::<usize>(), 3);
        assert!(groups.iter().any(|g| g.contains(&0) && g.contains(&2)));
    }

    #[test]
    fn outbox_tags() {
        let k = Keys::new("p*", 4, HashMap::new()).unwrap();
        let s = SpaceName::new("room:1").unwrap();
        assert_eq!(Keys::outbox_tag(&s, 0), "room:1");
        assert_eq!(Keys::outbox_tag(&s, 3), "room:1#3");
        assert_eq!(Keys::parse_outbox_tag("room:1#3"), Some((s.clone(), 3)));
        assert_eq!(Keys::parse_outbox_tag("room:1"), Some((s.clone(), 0)));
        assert_eq!(Keys::parse_outbox_tag("room:1#0"), None);
        assert_eq!(Keys::parse_outbox_tag("room/1"), None);
        let (stream, state) = k.stream("room:1#3");
        assert_eq!(stream, "p*:{room:1#3}:wh");
        assert_eq!(state, "p*:{room:1#3}:whs");
        assert_eq!(k.tag_of_stream(&stream), Some("room:1#3"));
        assert_eq!(k.tag_of_stream("p*:{room:1}:whs"), None);
        assert_eq!(k.tag_of_stream("q:{room:1}:wh"), None);
        assert_eq!(k.stream_pattern(), r"p\*:{*}:wh");
    }

    #[test]
    fn tags() {
        let s = SpaceName::new("room:1").unwrap();
        assert_eq!(tag(&s, 0), "{room:1}");
        assert_eq!(tag(&s, 3), "{room:1#3}");
    }
}
