//! The seeds' own Redis layouts, so a site that already runs the seeds'
//! code can point herenow at the same keys and both see the same "who's
//! online" ([`SeedLayoutStore`]).
//!
//! The default layout ([`RedisStore`](crate::RedisStore)) is herenow's own
//! and answers everything. The layouts here are the ones the seed documents
//! write, read back and written exactly as the seeds' Python and Go code do
//! (member ids are written raw, with no kind prefix), so they answer only
//! what those keys can tell. Everything else is
//! [`Error::Unsupported`] naming the layout (`redis layout rotation`, …),
//! which the server turns into a 501: never a wrong or an empty answer.
//!
//! | [`SeedLayout`] | seed | keys | precision of last-seen |
//! | --- | --- | --- | --- |
//! | `sorted-set` ([`sorted_set`]) | 001, 004 | one sorted set, score = whole UNIX seconds (`whos_online:users`, `presence:{space}`) | 1 s |
//! | `minute-buckets` ([`minute_buckets`]) | 002 | a set per minute of the hour with `EXPIRE` (`active.users:{minute}`) | 1 min |
//! | `rotation` ([`rotation`]) | 000 | `wo_user_current` / `wo_user_old` (`wo_user_{generation}`), rotated by [`tick`](herenow_core::PresenceStore::tick) | none: unsupported |
//!
//! # Key templates
//!
//! A template is a key name with placeholders: `{space}` (the space's
//! name), `{minute}` (two digits, `00`–`59`) and `{generation}` (`current`
//! or `old`). A template without `{space}` serves every space from the same
//! keys (seed 001's `whos_online:users`); with `{space}` each space has its
//! own. Any other `{…}` is kept literally, which is how a template carries a
//! Redis Cluster hash tag: `{wo}_user_{generation}` gives `{wo}_user_current`
//! and `{wo}_user_old`, both in the slot of `wo`, and `presence:{{space}}` gives
//! `presence:{room}`. On a cluster, the layouts that run one command over
//! several keys (`SUNION`, `RENAME`) need all of a space's keys in one slot:
//! [`SeedLayoutStore::connect`] refuses a `rotation` or `minute-buckets`
//! template whose keys would land in different slots.
//!
//! # Guests
//!
//! Seed 000 tracks guests (by address) in a second pair of sets. Guests
//! live under their own template (`wo_guest_{generation}`, say), of the same
//! layout as the users'. Without a guest template the store tracks no
//! guests: a guest heartbeat, leave, status or guest-only listing is
//! `Unsupported`, and counts report no guests (none can exist in herenow's
//! view of those keys).
//!
//! # Time
//!
//! "Now" is the injected [`Clock`], as in the default layout, so tests can
//! drive time: the minute of a bucket, the cut-off of a window, when a
//! rotation is due and what the sorted-set sweep forgets all come from it.
//! The one exception is what the seeds themselves expire with `EXPIRE`
//! (the minute buckets): those keys still expire by Redis's own clock, as
//! they do for the seed's code.
//!
//! # What no layout here answers
//!
//! Metadata, friends (and so online friends), events and subscriptions,
//! live connections (attach and detach), setting a space's policy and
//! listing spaces are `Unsupported` in every layout: the seeds' keys hold none of it. [`config`] answers the fixed
//! policy the layout applies (derived from the defaults given at
//! construction; see [`SeedLayoutStore::connect`]).
//!
//! [`config`]: herenow_core::PresenceStore::config

pub mod minute_buckets;
pub mod rotation;
pub mod sorted_set;

use std::collections::BTreeSet;
use std::fmt;
use std::future::Future;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use parking_lot::Mutex;
use redis::{RedisResult, Value};

use herenow_core::cursor;
use herenow_core::store::check_batch;
use herenow_core::{
    Attach, AttachReport, Clock, ConnId, Counts, DetachReport, Error, Heartbeat, HeartbeatReport,
    InvalidInput, KindFilter, ListQuery, MemberId, MemberKey, MemberKind, MemberStatus, Millis,
    Order, Page, PresenceStore, Result, SpaceConfig, SpaceName, SpaceSummary, Subscription,
    TickReport, limits,
};

use crate::client::{RedisClient, Target};
use crate::reply::{bad_reply, timed};

/// Which of the seeds' key layouts a [`SeedLayoutStore`] reads and writes
/// (`--redis-layout`). Parses from `sorted-set`, `minute-buckets`,
/// `rotation`. herenow's own layout is not one of them: it is
/// [`RedisStore`](crate::RedisStore)'s.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SeedLayout {
    /// Seeds 001 and 004: one sorted set, score = whole UNIX seconds.
    SortedSet,
    /// Seed 002: a set per minute of the hour, with `EXPIRE`.
    MinuteBuckets,
    /// Seed 000: a "current" and an "old" set, rotated periodically.
    Rotation,
}

impl SeedLayout {
    /// The name used on the command line and in errors.
    pub fn as_str(self) -> &'static str {
        match self {
            SeedLayout::SortedSet => "sorted-set",
            SeedLayout::MinuteBuckets => "minute-buckets",
            SeedLayout::Rotation => "rotation",
        }
    }

    /// The placeholder that tells apart the keys of one space, if the
    /// layout has several keys per space.
    fn part_placeholder(self) -> Option<&'static str> {
        match self {
            SeedLayout::MinuteBuckets => Some(MINUTE),
            SeedLayout::Rotation => Some(GENERATION),
            SeedLayout::SortedSet => None,
        }
    }
}

impl fmt::Display for SeedLayout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for SeedLayout {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        match s {
            "sorted-set" => Ok(SeedLayout::SortedSet),
            "minute-buckets" => Ok(SeedLayout::MinuteBuckets),
            "rotation" => Ok(SeedLayout::Rotation),
            _ => Err(bad_config(
                "a seed's redis layout is one of sorted-set, minute-buckets, rotation",
            )),
        }
    }
}

const SPACE: &str = "{space}";
const MINUTE: &str = "{minute}";
const GENERATION: &str = "{generation}";

/// A checked key template (`--redis-key`): see the module documentation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyTemplate {
    text: String,
    per_space: bool,
    part: Option<&'static str>,
}

impl KeyTemplate {
    /// Checks `text` for `layout`: `{minute}` is required by
    /// `minute-buckets` and allowed nowhere else, `{generation}` likewise
    /// for `rotation`; `{space}` is optional everywhere.
    pub fn parse(text: &str, layout: SeedLayout) -> Result<Self> {
        if text.is_empty() {
            return Err(bad_config("the redis key template is empty"));
        }
        if text.chars().any(|c| c.is_control() || c == ' ') {
            return Err(bad_config(
                "the redis key template contains a space or a control character",
            ));
        }
        let part = layout.part_placeholder();
        match layout {
            SeedLayout::SortedSet => {}
            SeedLayout::MinuteBuckets if !text.contains(MINUTE) => {
                return Err(bad_config(
                    "a minute-buckets key template needs {minute} (e.g. active.users:{minute})",
                ));
            }
            SeedLayout::Rotation if !text.contains(GENERATION) => {
                return Err(bad_config(
                    "a rotation key template needs {generation} (e.g. wo_user_{generation})",
                ));
            }
            SeedLayout::MinuteBuckets | SeedLayout::Rotation => {}
        }
        for other in [MINUTE, GENERATION] {
            if Some(other) != part && text.contains(other) {
                return Err(bad_config(
                    "the redis key template has a placeholder its layout does not use",
                ));
            }
        }
        Ok(Self {
            text: text.to_owned(),
            per_space: text.contains(SPACE),
            part,
        })
    }

    /// The template as given.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// Whether each space has keys of its own.
    pub fn per_space(&self) -> bool {
        self.per_space
    }

    /// The key of `space` with the layout's part (`current`, `07`, …); the
    /// part is ignored by the sorted-set layout, which has one key.
    pub fn render(&self, space: &SpaceName, part: &str) -> String {
        let mut key = self.text.replace(SPACE, space.as_str());
        if let Some(p) = self.part {
            key = key.replace(p, part);
        }
        key
    }
}

/// Tuning of a [`SeedLayoutStore`].
#[derive(Clone, Debug)]
pub struct LayoutOptions {
    /// Longest wait for any one command, connecting included; a call that
    /// takes longer fails with [`Error::Unavailable`].
    pub timeout: Duration,
    /// `rotation`: how often "current" becomes "old". A member stays listed
    /// between one and two periods after its last heartbeat, so the
    /// layout's window is twice this. Seed 000 uses five minutes.
    pub rotate_every: Duration,
    /// `rotation`: whether this store's `tick` rotates. Switch it off when
    /// the seed's own cron job keeps rotating the same keys (two rotators
    /// would age members out twice as fast).
    pub rotate: bool,
    /// `sorted-set`: most members one expiry command removes
    /// (`ZRANGEBYSCORE … LIMIT 0 N` then `ZREM`, in one short script).
    pub expire_batch: usize,
    /// `sorted-set`: most expiry batches per key per `tick`.
    pub tick_batches: usize,
    /// Most members a listing reads from Redis before it sorts them (set
    /// layouts, and the sorted set listed by id). A larger union is
    /// `Unsupported` rather than a slow, memory-hungry or truncated answer.
    pub max_scan: usize,
    /// `minute-buckets`: minutes to add to UTC to get the minute the seed's
    /// code puts in key names. Seed 002 uses the host's local time
    /// (`time.localtime`), whose minute equals UTC's in every zone whose
    /// offset is a whole number of hours; in India (+5:30) this is 330.
    pub utc_offset_minutes: i32,
    /// Most spaces remembered for background work (sorted-set expiry,
    /// rotation) when the template has `{space}`. Spaces this store has
    /// not touched since it started are not swept by it.
    pub max_known_spaces: usize,
}

impl Default for LayoutOptions {
    fn default() -> Self {
        Self {
            timeout: Duration::from_secs(2),
            rotate_every: Duration::from_secs(5 * 60),
            rotate: true,
            expire_batch: 1_000,
            tick_batches: 16,
            max_scan: 100_000,
            utc_offset_minutes: 0,
            max_known_spaces: 100_000,
        }
    }
}

/// A presence store over one of the seeds' layouts on Redis or Redis
/// Cluster; see the [module documentation](self) for what each layout
/// answers. Cheap to share as `Arc<dyn PresenceStore>`; any number of
/// stores, and the seed's own code, may use the same keys.
pub struct SeedLayoutStore {
    client: RedisClient,
    layout: SeedLayout,
    users: KeyTemplate,
    guests: Option<KeyTemplate>,
    clock: Arc<dyn Clock>,
    /// The policy the layout applies: the defaults, adjusted to what the
    /// layout can tell (see [`connect`](Self::connect)).
    policy: SpaceConfig,
    opts: LayoutOptions,
    /// Spaces touched since start, for background work on per-space keys.
    known: Mutex<BTreeSet<SpaceName>>,
    /// The `store` of every `Unsupported` answer: `redis layout <name>`.
    label: String,
}

impl SeedLayoutStore {
    /// Connects to `spec` (`redis://HOST:PORT[/DB]` or
    /// `redis+cluster://H1:P1,…`) and serves `layout` from the keys of
    /// `key_template`, guests from `guest_template` (same layout) or not at
    /// all.
    ///
    /// The policy the store applies ([`config`](PresenceStore::config)) is
    /// `defaults`, adjusted to the layout:
    /// - `sorted-set`: `defaults` as given;
    /// - `minute-buckets`: the window rounded up to whole minutes (at most
    ///   59: key names repeat every hour); buckets are written with
    ///   `EXPIRE` of that many minutes, as seed 002 does, so the retention
    ///   is the window;
    /// - `rotation`: window and retention are twice
    ///   [`LayoutOptions::rotate_every`], the longest a member stays in the
    ///   union.
    ///
    /// Fails with [`Error::Invalid`] for a bad spec, template or policy
    /// (and, on a cluster, a template whose keys of one space would span
    /// several slots), and with [`Error::Unavailable`] if Redis does not
    /// answer within the timeout. It never falls back to anything else.
    pub async fn connect(
        spec: &str,
        layout: SeedLayout,
        key_template: &str,
        guest_template: Option<&str>,
        clock: Arc<dyn Clock>,
        defaults: SpaceConfig,
        options: LayoutOptions,
    ) -> Result<SeedLayoutStore> {
        defaults.validate()?;
        let target = Target::parse(spec)?;
        let users = KeyTemplate::parse(key_template, layout)?;
        let guests = guest_template
            .map(|t| KeyTemplate::parse(t, layout))
            .transpose()?;
        if guests.as_ref().is_some_and(|g| g.text == users.text) {
            return Err(bad_config(
                "the guest key template must differ from the user key template",
            ));
        }
        if target.is_cluster() {
            for t in std::iter::once(&users).chain(guests.as_ref()) {
                check_one_slot(t, layout)?;
            }
        }
        let policy = policy_for(layout, defaults, &options)?;
        if options.expire_batch == 0 || options.tick_batches == 0 || options.max_scan == 0 {
            return Err(bad_config(
                "expire_batch, tick_batches and max_scan must be positive",
            ));
        }
        let client = timed(
            options.timeout,
            "connect",
            RedisClient::open(&target, options.timeout, |_| {}),
        )
        .await?;
        let store = SeedLayoutStore {
            client,
            layout,
            users,
            guests,
            clock,
            policy,
            opts: options,
            known: Mutex::new(BTreeSet::new()),
            label: format!("redis layout {}", layout.as_str()),
        };
        // Fail now, loudly, rather than at the first heartbeat.
        let mut c = store.client.clone();
        store
            .io("ping", redis::cmd("PING").query_async::<()>(&mut c))
            .await?;
        Ok(store)
    }

    /// The layout this store serves.
    pub fn layout(&self) -> SeedLayout {
        self.layout
    }

    /// The key template of users, then of guests (if any), as given.
    pub fn templates(&self) -> (&str, Option<&str>) {
        (
            self.users.as_str(),
            self.guests.as_ref().map(|g| g.as_str()),
        )
    }

    /// The policy this store applies to every space.
    pub fn policy(&self) -> SpaceConfig {
        self.policy
    }

    fn unsupported(&self, what: &'static str) -> Error {
        Error::Unsupported {
            what,
            store: self.label.clone(),
        }
    }

    /// The template of `kind`, or `Unsupported` for guests without one.
    fn template(&self, kind: MemberKind) -> Result<&KeyTemplate> {
        match kind {
            MemberKind::User => Ok(&self.users),
            MemberKind::Guest => self
                .guests
                .as_ref()
                .ok_or_else(|| self.unsupported("guests (no guest key template is configured)")),
        }
    }

    /// The kinds a query reads: guests only if they have a template
    /// (without one there are none to read).
    fn kinds(&self, filter: KindFilter) -> Result<Vec<(MemberKind, &KeyTemplate)>> {
        match filter {
            KindFilter::Users => Ok(vec![(MemberKind::User, &self.users)]),
            KindFilter::Guests => Ok(vec![(MemberKind::Guest, self.template(MemberKind::Guest)?)]),
            KindFilter::All => Ok(std::iter::once((MemberKind::User, &self.users))
                .chain(self.guests.as_ref().map(|g| (MemberKind::Guest, g)))
                .collect()),
        }
    }

    /// Remembers `space` for background work, when keys are per space.
    fn touch(&self, space: &SpaceName) {
        if !self.users.per_space() || self.layout == SeedLayout::MinuteBuckets {
            return;
        }
        let mut known = self.known.lock();
        if known.len() < self.opts.max_known_spaces && !known.contains(space) {
            known.insert(space.clone());
        }
    }

    /// The spaces background work visits: every known space, or one
    /// stand-in when every space shares the same keys.
    fn sweep_spaces(&self) -> Vec<SpaceName> {
        if self.users.per_space() {
            self.known.lock().iter().cloned().collect()
        } else {
            vec![SpaceName::new("all").expect("a valid space name")]
        }
    }

    fn forget(&self, space: &SpaceName) -> bool {
        self.users.per_space() && self.known.lock().remove(space)
    }

    /// Runs one Redis call under the timeout, mapping failures.
    async fn io<T>(
        &self,
        what: &'static str,
        f: impl Future<Output = RedisResult<T>>,
    ) -> Result<T> {
        timed(self.opts.timeout, what, f).await
    }

    /// The window of a query, checked against the layout's policy.
    fn window(&self, asked: Option<Millis>) -> Result<Millis> {
        Ok(self
            .policy
            .check_window(asked.unwrap_or(self.policy.window_ms))?)
    }

    /// Refuses metadata and guests without a template before anything is
    /// written, so a batch is applied whole or not at all.
    fn check_beats(&self, beats: &[Heartbeat]) -> Result<()> {
        check_batch(beats.len())?;
        let now = self.clock.now_ms();
        for b in beats {
            if b.meta.is_some() {
                return Err(self.unsupported("metadata"));
            }
            self.template(b.member.kind)?;
            if let Some(at) = b.at_ms
                && at > now + limits::MAX_FUTURE_SKEW_MS
            {
                return Err(InvalidInput::AtInFuture { at_ms: at }.into());
            }
        }
        Ok(())
    }

    fn check_members(&self, members: &[MemberKey]) -> Result<()> {
        check_batch(members.len())?;
        for m in members {
            self.template(m.kind)?;
        }
        Ok(())
    }
}

fn policy_for(layout: SeedLayout, d: SpaceConfig, opts: &LayoutOptions) -> Result<SpaceConfig> {
    let span = match layout {
        SeedLayout::SortedSet => return Ok(d),
        SeedLayout::MinuteBuckets => {
            let minutes = d.window_ms.div_ceil(60_000);
            if minutes > 59 {
                return Err(bad_config(
                    "minute buckets cover at most 59 minutes: their key names repeat every hour",
                ));
            }
            minutes * 60_000
        }
        SeedLayout::Rotation => {
            let period = opts.rotate_every.as_millis() as Millis;
            if period < 1_000 {
                return Err(bad_config(
                    "the rotation period must be at least one second",
                ));
            }
            2 * period
        }
    };
    let policy = SpaceConfig {
        online_ms: d.online_ms.min(span),
        away_ms: d.away_ms.min(span),
        window_ms: span,
        retention_ms: span,
    };
    policy.validate()?;
    Ok(policy)
}

/// On a cluster, every key of one space must share a slot for the
/// multi-key commands of the set layouts (`SUNION`, `RENAME`, scripts).
fn check_one_slot(t: &KeyTemplate, layout: SeedLayout) -> Result<()> {
    let parts: &[&str] = match layout {
        SeedLayout::MinuteBuckets => &["00", "59", minute_buckets::TEMP_PART],
        SeedLayout::Rotation => &["current", "old", rotation::MARK_PART, rotation::TEMP_PART],
        SeedLayout::SortedSet => return Ok(()),
    };
    let space = SpaceName::new("s").expect("a valid space name");
    let first = t.render(&space, parts[0]);
    if parts
        .iter()
        .any(|p| slot_tag(&t.render(&space, p)) != slot_tag(&first))
    {
        return Err(bad_config(
            "on a cluster this layout's keys must share a hash tag: put one in the template, \
             e.g. {wo}_user_{generation} or active.users:{au}:{minute}",
        ));
    }
    Ok(())
}

/// The part of a key Redis Cluster hashes: the first non-empty `{…}`, else
/// the whole key.
fn slot_tag(key: &str) -> &str {
    if let Some(open) = key.find('{')
        && let Some(len) = key[open + 1..].find('}')
        && len > 0
    {
        return &key[open + 1..open + 1 + len];
    }
    key
}

/// KEYS: a scratch key in the same slot, then the sets. The size of their
/// union, without sending the members to the client: `SUNIONSTORE` into
/// the scratch key, which is deleted in the same script (so concurrent
/// counts may share it, and it never outlives the call).
static UNION_COUNT: std::sync::LazyLock<redis::Script> = std::sync::LazyLock::new(|| {
    redis::Script::new(
        r"
local n = redis.call('SUNIONSTORE', KEYS[1], unpack(KEYS, 2))
redis.call('DEL', KEYS[1])
return n
",
    )
});

impl SeedLayoutStore {
    /// Status answers for `members` from their last-seen times (in the
    /// same order), by this layout's policy. Layouts keep no metadata.
    pub(super) fn answer(
        &self,
        members: &[MemberKey],
        seen: Vec<Option<Millis>>,
        now: Millis,
    ) -> Vec<MemberStatus> {
        members
            .iter()
            .zip(seen)
            .map(|(m, t)| MemberStatus {
                member: m.clone(),
                status: self.policy.status(t, now),
                last_seen_ms: t,
                meta: None,
            })
            .collect()
    }
}

impl SeedLayoutStore {
    /// The size of the union of `sets`, using `scratch` (same slot).
    async fn union_count(&self, scratch: String, sets: &[String]) -> Result<u64> {
        let mut inv = UNION_COUNT.prepare_invoke();
        inv.key(scratch);
        for k in sets {
            inv.key(k);
        }
        let mut c = self.client.clone();
        self.io("count", inv.invoke_async(&mut c)).await
    }

    /// Refuses to read whole sets whose sizes add up past
    /// [`LayoutOptions::max_scan`].
    async fn check_scan(&self, sets: &[String]) -> Result<()> {
        let mut pipe = redis::pipe();
        for k in sets {
            pipe.cmd("SCARD").arg(k);
        }
        let mut c = self.client.clone();
        let sizes: Vec<u64> = self.io("list", pipe.query_async(&mut c)).await?;
        if sizes.iter().sum::<u64>() > self.opts.max_scan as u64 {
            return Err(
                self.unsupported("listing a union of sets larger than max_scan (count it instead)")
            );
        }
        Ok(())
    }
}

fn bad_config(why: &'static str) -> Error {
    Error::Invalid(InvalidInput::BadConfig { why })
}

/// A member id read from Redis. The seed's code may have written ids
/// herenow refuses (over 256 bytes, control characters, not UTF-8); those
/// are left out of answers and logged rather than failing every answer.
fn member_id(raw: &[u8]) -> Option<MemberId> {
    let id = std::str::from_utf8(raw)
        .ok()
        .and_then(|s| MemberId::new(s).ok());
    if id.is_none() {
        tracing::warn!(
            member = %String::from_utf8_lossy(raw),
            "a member id in a seed layout's key is not a valid herenow id; left out"
        );
    }
    id
}

/// The members of a set or list reply (`SMEMBERS`, `SUNION`, `ZRANGE`).
fn members_of(v: Value) -> Result<Vec<MemberId>> {
    let items = match v {
        Value::Array(a) | Value::Set(a) => a,
        Value::Nil => Vec::new(),
        other => return Err(bad_reply(&format!("{other:?} where members were expected"))),
    };
    let mut out = Vec::with_capacity(items.len());
    for item in items {
        match item {
            Value::BulkString(b) => out.extend(member_id(&b)),
            Value::SimpleString(s) => out.extend(member_id(s.as_bytes())),
            other => return Err(bad_reply(&format!("{other:?} as a member"))),
        }
    }
    Ok(out)
}

/// A listed member: who, and when last seen (if the layout knows).
struct Item {
    member: MemberKey,
    last_seen: Option<Millis>,
}

/// Sorts fully read items in the query's order and cuts the page after the
/// cursor: keyset pagination, exact for any set read whole.
fn page_of(
    mut items: Vec<Item>,
    order: Order,
    cursor: Option<&Cursor>,
    limit: usize,
    status_of: impl Fn(Option<Millis>) -> herenow_core::Status,
) -> Page {
    match order {
        Order::Recent => items.sort_by(|a, b| {
            b.last_seen
                .cmp(&a.last_seen)
                .then_with(|| a.member.cmp(&b.member))
        }),
        Order::Id => items.sort_by(|a, b| {
            a.member
                .id
                .cmp(&b.member.id)
                .then_with(|| a.member.kind.cmp(&b.member.kind))
        }),
    }
    let mut rest: Vec<Item> = items
        .into_iter()
        .filter(|i| cursor.is_none_or(|c| c.precedes(i)))
        .collect();
    let next_cursor = (rest.len() > limit).then(|| Cursor::after(&rest[limit - 1], order).encode());
    rest.truncate(limit);
    Page {
        members: rest
            .into_iter()
            .map(|i| MemberStatus {
                member: i.member,
                status: status_of(i.last_seen),
                last_seen_ms: i.last_seen,
                meta: None,
            })
            .collect(),
        next_cursor,
    }
}

/// Where a page ended: the last item's sort key. Recent pages carry the
/// time too, so a cursor of one order is refused by the other.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Cursor {
    at: Option<Millis>,
    kind: MemberKind,
    id: MemberId,
}

impl Cursor {
    fn after(item: &Item, order: Order) -> Cursor {
        Cursor {
            at: match order {
                Order::Recent => Some(item.last_seen.unwrap_or(0)),
                Order::Id => None,
            },
            kind: item.member.kind,
            id: item.member.id.clone(),
        }
    }

    /// Whether the cursor comes before `item`, in the cursor's order.
    fn precedes(&self, item: &Item) -> bool {
        let (kind, id) = (item.member.kind, item.member.id.as_str());
        match self.at {
            Some(at) => {
                let t = item.last_seen.unwrap_or(0);
                t < at || (t == at && (kind, id) > (self.kind, self.id.as_str()))
            }
            None => (id, kind) > (self.id.as_str(), self.kind),
        }
    }

    /// In the one cursor format of every store ([`herenow_core::cursor`]);
    /// ties of time are broken by kind and id, so the tiebreak is 0.
    fn encode(&self) -> String {
        let member = MemberKey {
            kind: self.kind,
            id: self.id.clone(),
        };
        match self.at {
            Some(at_ms) => cursor::RecentCursor {
                at_ms,
                tiebreak: 0,
                member,
            }
            .encode(),
            None => cursor::IdCursor { member }.encode(),
        }
    }

    fn decode(s: &str, order: Order) -> Result<Cursor> {
        Ok(match cursor::Cursor::decode(s, order)? {
            cursor::Cursor::Recent(c) => Cursor {
                at: Some(c.at_ms),
                kind: c.member.kind,
                id: c.member.id,
            },
            cursor::Cursor::Id(c) => Cursor {
                at: None,
                kind: c.member.kind,
                id: c.member.id,
            },
        })
    }
}

#[async_trait]
impl PresenceStore for SeedLayoutStore {
    fn name(&self) -> &'static str {
        "redis"
    }

    fn now_ms(&self) -> Millis {
        self.clock.now_ms()
    }

    async fn heartbeat(&self, space: &SpaceName, beats: &[Heartbeat]) -> Result<HeartbeatReport> {
        self.check_beats(beats)?;
        self.touch(space);
        match self.layout {
            SeedLayout::SortedSet => sorted_set::heartbeat(self, space, beats).await,
            SeedLayout::MinuteBuckets => minute_buckets::heartbeat(self, space, beats).await,
            SeedLayout::Rotation => rotation::heartbeat(self, space, beats).await,
        }
    }

    async fn leave(&self, space: &SpaceName, members: &[MemberKey]) -> Result<u64> {
        self.check_members(members)?;
        match self.layout {
            SeedLayout::SortedSet => sorted_set::leave(self, space, members).await,
            SeedLayout::MinuteBuckets => minute_buckets::leave(self, space, members).await,
            SeedLayout::Rotation => rotation::leave(self, space, members).await,
        }
    }

    async fn status(&self, space: &SpaceName, members: &[MemberKey]) -> Result<Vec<MemberStatus>> {
        self.check_members(members)?;
        self.touch(space);
        match self.layout {
            SeedLayout::SortedSet => sorted_set::status(self, space, members).await,
            SeedLayout::MinuteBuckets => minute_buckets::status(self, space, members).await,
            SeedLayout::Rotation => Err(self.unsupported("last-seen times and statuses")),
        }
    }

    async fn list(&self, space: &SpaceName, query: &ListQuery) -> Result<Page> {
        query.check_limit()?;
        let cursor = query
            .cursor
            .as_deref()
            .map(|c| Cursor::decode(c, query.order))
            .transpose()?;
        self.touch(space);
        match self.layout {
            SeedLayout::SortedSet => sorted_set::list(self, space, query, cursor.as_ref()).await,
            SeedLayout::MinuteBuckets => {
                minute_buckets::list(self, space, query, cursor.as_ref()).await
            }
            SeedLayout::Rotation => rotation::list(self, space, query, cursor.as_ref()).await,
        }
    }

    async fn count(&self, space: &SpaceName, window_ms: Option<Millis>) -> Result<Counts> {
        self.touch(space);
        match self.layout {
            SeedLayout::SortedSet => sorted_set::count(self, space, window_ms).await,
            SeedLayout::MinuteBuckets => minute_buckets::count(self, space, window_ms).await,
            SeedLayout::Rotation => rotation::count(self, space, window_ms).await,
        }
    }

    async fn config(&self, _space: &SpaceName) -> Result<SpaceConfig> {
        Ok(self.policy)
    }

    async fn set_config(&self, _space: &SpaceName, _config: SpaceConfig) -> Result<()> {
        Err(self.unsupported("setting a space's policy"))
    }

    async fn spaces(&self, _after: Option<&SpaceName>, _limit: usize) -> Result<Vec<SpaceSummary>> {
        Err(self.unsupported("listing spaces"))
    }

    async fn set_friends(&self, _user: &MemberId, _friends: &[MemberId]) -> Result<u64> {
        Err(self.unsupported("friends"))
    }

    async fn add_friends(&self, _user: &MemberId, _friends: &[MemberId]) -> Result<u64> {
        Err(self.unsupported("friends"))
    }

    async fn remove_friends(&self, _user: &MemberId, _friends: &[MemberId]) -> Result<u64> {
        Err(self.unsupported("friends"))
    }

    async fn friends(&self, _user: &MemberId) -> Result<Vec<MemberId>> {
        Err(self.unsupported("friends"))
    }

    async fn subscribe(&self, _space: &SpaceName) -> Result<Subscription> {
        Err(self.unsupported("events"))
    }

    /// The seeds' keys hold no connections: `Unsupported`, naming the
    /// layout. ([`connections`](PresenceStore::connections) keeps the
    /// trait's answer: nobody has any.)
    async fn attach(&self, _space: &SpaceName, _attach: &Attach) -> Result<AttachReport> {
        Err(self.unsupported("live connections"))
    }

    async fn detach(
        &self,
        _space: &SpaceName,
        _member: &MemberKey,
        _conn: &ConnId,
    ) -> Result<DetachReport> {
        Err(self.unsupported("live connections"))
    }

    async fn tick(&self) -> Result<TickReport> {
        match self.layout {
            SeedLayout::SortedSet => sorted_set::tick(self).await,
            // The seed's buckets expire by themselves (EXPIRE).
            SeedLayout::MinuteBuckets => Ok(TickReport::default()),
            SeedLayout::Rotation => rotation::tick(self).await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layouts_parse() {
        for l in [
            SeedLayout::SortedSet,
            SeedLayout::MinuteBuckets,
            SeedLayout::Rotation,
        ] {
            assert_eq!(l.as_str().parse::<SeedLayout>().unwrap(), l);
        }
        assert!("zset".parse::<SeedLayout>().is_err());
        // herenow's own layout is RedisStore's, not a seed's.
        assert!("herenow".parse::<SeedLayout>().is_err());
    }

    #[test]
    fn templates_render_and_check() {
        let room = SpaceName::new("room:1").unwrap();
        let t = KeyTemplate::parse("presence:{space}", SeedLayout::SortedSet).unwrap();
        assert_eq!(t.render(&room, ""), "presence:room:1");
        assert!(t.per_space());
        let t = KeyTemplate::parse("wo_user_{generation}", SeedLayout::Rotation).unwrap();
        assert_eq!(t.render(&room, "old"), "wo_user_old");
        assert!(!t.per_space());
        let t = KeyTemplate::parse("p:{{space}}:{minute}", SeedLayout::MinuteBuckets).unwrap();
        assert_eq!(t.render(&room, "07"), "p:{room:1}:07");
        assert!(KeyTemplate::parse("wo_user", SeedLayout::Rotation).is_err());
        assert!(KeyTemplate::parse("a:{minute}", SeedLayout::SortedSet).is_err());
        assert!(KeyTemplate::parse("a:{minute}:{generation}", SeedLayout::Rotation).is_err());
        assert!(KeyTemplate::parse("", SeedLayout::SortedSet).is_err());
    }

    #[test]
    fn cluster_templates_need_one_slot() {
        let ok = KeyTemplate::parse("{wo}_user_{generation}", SeedLayout::Rotation).unwrap();
        assert!(check_one_slot(&ok, SeedLayout::Rotation).is_ok());
        let seed = KeyTemplate::parse("wo_user_{generation}", SeedLayout::Rotation).unwrap();
        assert!(check_one_slot(&seed, SeedLayout::Rotation).is_err());
        let per_space =
            KeyTemplate::parse("au:{{space}}:{minute}", SeedLayout::MinuteBuckets).unwrap();
        assert!(check_one_slot(&per_space, SeedLayout::MinuteBuckets).is_ok());
        assert_eq!(slot_tag("a{}b{c}"), "a{}b{c}");
        assert_eq!(slot_tag("x{tag}y"), "tag");
    }

    #[test]
    fn cursors_round_trip() {
        for (c, order) in [
            (
                Cursor {
                    at: Some(42),
                    kind: MemberKind::Guest,
                    id: MemberId::new("a.b 🙂").unwrap(),
                },
                Order::Recent,
            ),
            (
                Cursor {
                    at: None,
                    kind: MemberKind::User,
                    id: MemberId::new("x").unwrap(),
                },
                Order::Id,
            ),
        ] {
            assert_eq!(Cursor::decode(&c.encode(), order).unwrap(), c);
        }
        assert!(Cursor::decode("i.u.61", Order::Recent).is_err());
        assert!(Cursor::decode("i.u.6", Order::Id).is_err());
        assert!(Cursor::decode("i.x.61", Order::Id).is_err());
    }

    #[test]
    fn policies_follow_the_layout() {
        let d = SpaceConfig::default();
        let o = LayoutOptions::default();
        assert_eq!(policy_for(SeedLayout::SortedSet, d, &o).unwrap(), d);
        let b = policy_for(SeedLayout::MinuteBuckets, d, &o).unwrap();
        assert_eq!((b.window_ms, b.retention_ms), (600_000, 600_000));
        let r = policy_for(SeedLayout::Rotation, d, &o).unwrap();
        assert_eq!((r.window_ms, r.retention_ms), (600_000, 600_000));
        let long = SpaceConfig {
            window_ms: 60 * 60_000,
            retention_ms: 60 * 60_000,
            ..d
        };
        assert!(policy_for(SeedLayout::MinuteBuckets, long, &o).is_err());
    }
}
