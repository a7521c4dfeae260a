//! `herenow serve --demo`: simulated visitors, so a newcomer sees a living
//! page at once.
//!
//! A few hundred visitors come and go over three spaces (`lobby`, `docs`,
//! `game-7`). Users carry a `name` in their metadata, guests do not. Each
//! visitor heartbeats every 10–30 s while active; now and then one pauses
//! for a minute or two (it turns `away`, then comes `back`), changes its
//! metadata (an `update`), and finally either leaves explicitly or just goes
//! silent, so the store times it out. Each space's target population rises
//! and falls on its own slow wave, so the history chart moves.
//!
//! The simulator talks to the store through [`PresenceStore`] only, paces
//! itself with `tokio::time` (so tests run it under paused time), and never
//! stops for a store error: it logs it and carries on.

use std::sync::Arc;
use std::time::Duration;

use herenow_core::{Heartbeat, MemberId, MemberKey, Metadata, PresenceStore, SpaceName};
use tokio::time::{Instant, MissedTickBehavior};
use tokio_util::sync::CancellationToken;

/// How often the simulation takes a step.
const STEP: Duration = Duration::from_secs(1);

/// The most visitors alive at once, over all spaces. It keeps every batch
/// far below the store's batch limit, whatever the targets say.
const MAX_VISITORS: usize = 1_000;

/// The most arrivals in one space in one step, so a deficit fills over
/// several seconds rather than in one burst of joins.
const MAX_ARRIVALS_PER_STEP: usize = 12;

/// A simulated space: its name and the shape of its population wave.
struct SpacePlan {
    name: &'static str,
    /// The population the wave swings around, in visitors.
    base: f64,
    /// How far the population swings around the mean, as a fraction of it.
    swing: f64,
    /// How long one full wave takes, crest to crest.
    period: Duration,
    /// Where on the wave the simulation starts, in radians.
    phase: f64,
    /// Share of arrivals that are signed-in users rather than guests.
    user_share: f64,
}

const PLANS: [SpacePlan; 3] = [
    SpacePlan {
        name: "lobby",
        base: 170.0,
        swing: 0.45,
        period: Duration::from_secs(14 * 60),
        phase: 0.0,
        user_share: 0.6,
    },
    SpacePlan {
        name: "docs",
        base: 70.0,
        swing: 0.5,
        period: Duration::from_secs(9 * 60),
        phase: 2.0,
        user_share: 0.5,
    },
    SpacePlan {
        name: "game-7",
        base: 24.0,
        swing: 0.6,
        period: Duration::from_secs(5 * 60),
        phase: 4.0,
        user_share: 0.9,
    },
];

#[rustfmt::skip]
const FIRST_NAMES: [&str; 40] = [
    "Ada", "Alan", "Grace", "Linus", "Barbara", "Dennis", "Margaret", "Ken", "Frances", "Edsger",
    "Radia", "Donald", "Sophie", "Guido", "Katherine", "Bjarne", "Hedy", "John", "Shafi", "Leslie",
    "Annie", "Niklaus", "Mary", "Tim", "Joan", "Vint", "Lynn", "Bob", "Karen", "Whitfield", "Adele",
    "Butler", "Evelyn", "Rob", "Jean", "Brian", "Carol", "Yukihiro", "Ida", "Rasmus",
];

#[rustfmt::skip]
const LAST_NAMES: [&str; 20] = [
    "Lovelace", "Turing", "Hopper", "Torvalds", "Liskov", "Ritchie", "Hamilton", "Thompson",
    "Allen", "Dijkstra", "Perlman", "Knuth", "Wilson", "van Rossum", "Johnson", "Stroustrup",
    "Lamarr", "Backus", "Goldwasser", "Lamport",
];

#[rustfmt::skip]
const DOC_PAGES: [&str; 6] = [
    "/docs/quickstart", "/docs/api", "/docs/events", "/docs/redis", "/docs/metrics", "/docs/faq",
];

const DEVICES: [&str; 3] = ["desktop", "phone", "tablet"];

/// Simulates visitors on `store` until `stop` is cancelled; returns soon
/// after, even in the middle of a store call.
pub async fn run(store: Arc<dyn PresenceStore>, stop: CancellationToken) {
    // Any seed will do; the clock makes every run a little different.
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0x9e37_79b9_7f4a_7c15);
    run_seeded(store, stop, seed).await;
}

/// [`run`] with a chosen seed, so tests see the same crowd every time.
async fn run_seeded(store: Arc<dyn PresenceStore>, stop: CancellationToken, seed: u64) {
    let spaces: Vec<SpaceName> = match PLANS.iter().map(|p| SpaceName::new(p.name)).collect() {
        Ok(s) => s,
        Err(e) => {
            // The names are constants; this is a bug, but not worth a panic.
            tracing::error!(error = %e, "demo: bad space name; not simulating");
            return;
        }
    };
    let mut sim = Sim::new(seed, spaces);
    let start = Instant::now();
    let mut ticker = tokio::time::interval(STEP);
    // After a stall, carry on at the normal pace rather than catching up in
    // a burst of heartbeats.
    ticker.set_missed_tick_behavior(MissedTickBehavior::Delay);
    tracing::info!("demo: simulating visitors in lobby, docs and game-7");
    loop {
        tokio::select! {
            biased;
            _ = stop.cancelled() => break,
            _ = ticker.tick() => {}
        }
        let now = Instant::now();
        tokio::select! {
            biased;
            _ = stop.cancelled() => break,
            _ = sim.step(&*store, now, now - start) => {}
        }
    }
    tracing::info!("demo: stopped");
}

/// What a visitor does when its current activity runs out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ending {
    /// Says goodbye: an explicit leave.
    Leave,
    /// Closes the tab: stops heartbeating and is timed out by the store
    /// (through away to leave).
    Vanish,
}

/// One simulated visitor.
struct Visitor {
    /// Index into the simulation's spaces.
    space: usize,
    key: MemberKey,
    /// The display name's first and last parts, for users.
    name: Option<(&'static str, &'static str)>,
    /// Metadata to send with the next heartbeat (first one, or a change).
    pending_meta: Option<Metadata>,
    next_beat: Instant,
    /// Heartbeats still to send before the visitor ends.
    beats_left: u32,
    ending: Ending,
}

/// The simulation's state: the visitors alive and the random source.
struct Sim {
    rng: XorShift,
    spaces: Vec<SpaceName>,
    visitors: Vec<Visitor>,
    /// Ids are numbered so no two visitors of one run collide.
    next_id: u64,
    /// Store errors so far, to log only some of them.
    errors: u64,
}

impl Sim {
    fn new(seed: u64, spaces: Vec<SpaceName>) -> Self {
        Self {
            rng: XorShift::new(seed),
            spaces,
            visitors: Vec::new(),
            next_id: 1,
            errors: 0,
        }
    }

    /// The population a space aims for, `elapsed` into the run.
    fn target(&self, space: usize, elapsed: Duration) -> usize {
        let plan = &PLANS[space];
        let turn = elapsed.as_secs_f64() / plan.period.as_secs_f64();
        let wave = (turn * std::f64::consts::TAU + plan.phase).sin();
        (plan.base * (1.0 + plan.swing * wave)).max(0.0).round() as usize
    }

    /// One step: arrivals, then the heartbeats and goodbyes that are due.
    async fn step(&mut self, store: &dyn PresenceStore, now: Instant, elapsed: Duration) {
        let mut population = vec![0usize; self.spaces.len()];
        for v in &self.visitors {
            population[v.space] += 1;
        }
        let targets: Vec<usize> = (0..self.spaces.len())
            .map(|i| self.target(i, elapsed))
            .collect();

        for (space, (&have, &want)) in population.iter().zip(&targets).enumerate() {
            let mut arrivals = if have < want {
                // Close a tenth of the gap per second: the page fills within
                // a minute of start, and follows the wave after that.
                (want - have).div_ceil(10).min(MAX_ARRIVALS_PER_STEP)
            } else {
                0
            };
            // A trickle even above target, so there is always some churn;
            // in proportion to the space, or it would swamp a small one.
            if self.rng.chance(PLANS[space].base / 1_500.0) {
                arrivals += 1;
            }
            for _ in 0..arrivals {
                if self.visitors.len() >= MAX_VISITORS {
                    break;
                }
                let v = self.new_visitor(space, now);
                self.visitors.push(v);
            }
        }

        let mut beats: Vec<Vec<Heartbeat>> = vec![Vec::new(); self.spaces.len()];
        let mut leaves: Vec<Vec<MemberKey>> = vec![Vec::new(); self.spaces.len()];
        let mut i = 0;
        while i < self.visitors.len() {
            if self.visitors[i].next_beat > now {
                i += 1;
                continue;
            }
            let space = self.visitors[i].space;
            // Over target, sessions end sooner, so the population follows
            // the wave down as well as up.
            let crowded = population[space] > targets[space] + targets[space] / 10 + 1;
            let done = self.visitors[i].beats_left == 0 || (crowded && self.rng.chance(0.08));
            if done {
                let v = self.visitors.swap_remove(i);
                population[space] = population[space].saturating_sub(1);
                if v.ending == Ending::Leave {
                    leaves[space].push(v.key);
                }
                continue;
            }
            let pause = self.rng.chance(0.06);
            let change_meta = self.rng.chance(0.05);
            let next = if pause {
                // Long enough to turn away (default online_ms is 60 s),
                // short enough to come back before the timeout.
                self.rng.range(70, 160)
            } else {
                self.rng.range(10, 30)
            };
            let meta = if change_meta {
                Some(self.meta_for(space, self.visitors[i].name))
            } else {
                None
            };
            let v = &mut self.visitors[i];
            v.beats_left -= 1;
            v.next_beat = now + Duration::from_secs(next);
            beats[space].push(Heartbeat {
                member: v.key.clone(),
                at_ms: None,
                meta: v.pending_meta.take().or(meta),
            });
            i += 1;
        }

        for (space, name) in self.spaces.iter().enumerate() {
            if !beats[space].is_empty() {
                let result = store.heartbeat(name, &beats[space]).await;
                if let Err(e) = result {
                    store_error(&mut self.errors, "heartbeat", name, &e);
                }
            }
            if !leaves[space].is_empty() {
                let result = store.leave(name, &leaves[space]).await;
                if let Err(e) = result {
                    store_error(&mut self.errors, "leave", name, &e);
                }
            }
        }
    }

    fn new_visitor(&mut self, space: usize, now: Instant) -> Visitor {
        let n = self.next_id;
        self.next_id += 1;
        let is_user = self.rng.chance(PLANS[space].user_share);
        let (key, name) = if is_user {
            let first = *self.rng.pick(&FIRST_NAMES);
            let last = *self.rng.pick(&LAST_NAMES);
            let id = format!("{}{}", first.to_lowercase(), n);
            (MemberKey::user(member_id(&id)), Some((first, last)))
        } else {
            let id = format!("guest-{:06x}", self.rng.next() & 0xff_ffff);
            (MemberKey::guest(member_id(&id)), None)
        };
        let meta = self.meta_for(space, name);
        Visitor {
            space,
            key,
            name,
            pending_meta: Some(meta),
            // Due at once: arriving is the first heartbeat.
            next_beat: now,
            // From a few minutes to a quarter of an hour at 10–30 s a beat.
            beats_left: self.rng.range(4, 45) as u32,
            ending: if self.rng.chance(0.6) {
                Ending::Leave
            } else {
                Ending::Vanish
            },
        }
    }

    /// Metadata for a visitor of `space`: its name (users), the device, and
    /// in `docs` the page being read, which changes now and then.
    fn meta_for(&mut self, space: usize, name: Option<(&str, &str)>) -> Metadata {
        let mut obj = serde_json::Map::new();
        if let Some((first, last)) = name {
            obj.insert("name".into(), format!("{first} {last}").into());
        }
        obj.insert("device".into(), (*self.rng.pick(&DEVICES)).into());
        if PLANS[space].name == "docs" {
            obj.insert("page".into(), (*self.rng.pick(&DOC_PAGES)).into());
        }
        let json = serde_json::Value::Object(obj).to_string();
        // Small objects of known keys: always within the limits.
        Metadata::from_json(&json).unwrap_or_else(|_| empty_meta())
    }
}

/// Logs a failed store call: the first few, then one in a hundred, so a
/// broken store does not flood the log once a second.
fn store_error(errors: &mut u64, what: &str, space: &SpaceName, e: &herenow_core::Error) {
    *errors += 1;
    if *errors <= 5 || (*errors).is_multiple_of(100) {
        tracing::warn!(
            space = %space,
            error = %e,
            errors = *errors,
            "demo: {what} failed; carrying on"
        );
    }
}

fn member_id(id: &str) -> MemberId {
    // Ids built above are short ASCII; a fallback keeps this total anyway.
    MemberId::new(id).unwrap_or_else(|_| MemberId::new("demo").expect("constant id is valid"))
}

fn empty_meta() -> Metadata {
    Metadata::from_json("{}").expect("the empty object is valid metadata")
}

/// xorshift64*: a tiny, good-enough PRNG, so the demo needs no dependency.
struct XorShift(u64);

impl XorShift {
    fn new(seed: u64) -> Self {
        // The state must never be zero.
        Self(seed.max(1))
    }

    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// A float in [0, 1).
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }

    fn chance(&mut self, p: f64) -> bool {
        self.unit() < p
    }

    /// An integer in `lo..=hi`.
    fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next() % (hi - lo + 1)
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[(self.next() % items.len() as u64) as usize]
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use futures::FutureExt;
    use herenow_core::{EventKind, KindFilter, LeaveReason, ListQuery, ManualClock, SpaceConfig};
    use herenow_memory::MemoryStore;

    use super::*;

    const START_MS: u64 = 1_700_000_000_000;

    fn store() -> (ManualClock, Arc<MemoryStore>) {
        let clock = ManualClock::new(START_MS);
        let store = MemoryStore::new(Arc::new(clock.clone()), SpaceConfig::default());
        (clock, Arc::new(store))
    }

    /// Moves tokio's paused time and the store's clock together, one second
    /// at a time, running the store's background work as the server would.
    async fn advance(clock: &ManualClock, store: &MemoryStore, secs: u64) {
        for _ in 0..secs {
            tokio::time::sleep(Duration::from_secs(1)).await;
            clock.advance(Duration::from_secs(1));
            store.tick().await.expect("tick");
        }
    }

    async fn present(store: &MemoryStore, space: &str) -> HashSet<MemberKey> {
        let space = SpaceName::new(space).unwrap();
        let page = store
            .list(
                &space,
                &ListQuery {
                    // Seen within the away threshold: present, not timed out.
                    window_ms: Some(SpaceConfig::default().away_ms),
                    kinds: KindFilter::All,
                    limit: 1_000,
                    ..ListQuery::default()
                },
            )
            .await
            .unwrap();
        assert!(page.next_cursor.is_none(), "the demo stays under a page");
        page.members.into_iter().map(|m| m.member).collect()
    }

    #[tokio::test(start_paused = true)]
    async fn visitors_arrive_heartbeat_and_leave() {
        let (clock, store) = store();
        let game = SpaceName::new("game-7").unwrap();
        let mut sub = store.subscribe(&game).await.unwrap();
        let stop = CancellationToken::new();
        let task = tokio::spawn(run_seeded(store.clone(), stop.clone(), 42));

        advance(&clock, &store, 90).await;
        let early = present(&store, "lobby").await;
        assert!(early.len() > 50, "lobby filled up: {}", early.len());
        let counts = store
            .count(&SpaceName::new("lobby").unwrap(), None)
            .await
            .unwrap();
        assert!(counts.users > 0 && counts.guests > 0, "{counts:?}");
        let docs = present(&store, "docs").await;
        assert!(!docs.is_empty());
        let named = store
            .list(
                &SpaceName::new("lobby").unwrap(),
                &ListQuery {
                    kinds: KindFilter::Users,
                    ..ListQuery::default()
                },
            )
            .await
            .unwrap();
        assert!(
            named.members.iter().all(|m| m
                .meta
                .as_ref()
                .is_some_and(|j| j.as_json().contains("\"name\""))),
            "users carry a name"
        );

        let mut kinds: Vec<(EventKind, Option<LeaveReason>)> = Vec::new();
        for _ in 0..20 {
            advance(&clock, &store, 60).await;
            while let Some(ev) = sub.events.recv().now_or_never() {
                let ev = ev.expect("the subscriber keeps up");
                kinds.push((ev.kind, ev.reason));
            }
        }
        let n =
            |k: EventKind, r: Option<LeaveReason>| kinds.iter().filter(|e| **e == (k, r)).count();
        assert!(n(EventKind::Join, None) > 20, "joins in game-7");
        assert!(n(EventKind::Leave, Some(LeaveReason::Explicit)) > 0);
        assert!(n(EventKind::Leave, Some(LeaveReason::Timeout)) > 0);
        assert!(n(EventKind::Away, None) > 0);
        assert!(n(EventKind::Back, None) > 0);
        assert!(n(EventKind::Update, None) + n(EventKind::Join, None) > 0);

        // Twenty minutes on, most of the early crowd is gone.
        let late = present(&store, "lobby").await;
        let stayed = early.intersection(&late).count();
        assert!(
            stayed < early.len() / 2,
            "{stayed} of {} stayed",
            early.len()
        );
        assert!(!late.is_empty());

        stop.cancel();
        tokio::time::timeout(Duration::from_millis(10), task)
            .await
            .expect("the demo stops promptly")
            .expect("the demo does not panic");
    }

    #[tokio::test(start_paused = true)]
    async fn population_rises_and_falls() {
        let (clock, store) = store();
        let stop = CancellationToken::new();
        let task = tokio::spawn(run_seeded(store.clone(), stop.clone(), 7));
        let lobby = SpaceName::new("lobby").unwrap();
        let mut online = Vec::new();
        for _ in 0..30 {
            advance(&clock, &store, 30).await;
            let c = store.count(&lobby, Some(60_000)).await.unwrap();
            online.push(c.total());
        }
        let (lo, hi) = (
            *online[4..].iter().min().unwrap(),
            *online[4..].iter().max().unwrap(),
        );
        assert!(hi >= lo + lo / 2 + 10, "the lobby moves: {online:?}");
        stop.cancel();
        task.await.unwrap();
    }

    /// A store that is always down.
    struct Down;

    fn down<T>() -> herenow_core::Result<T> {
        Err(herenow_core::Error::Unavailable {
            reason: "test store is down".into(),
            source: None,
        })
    }

    #[async_trait::async_trait]
    impl PresenceStore for Down {
        fn name(&self) -> &'static str {
            "down"
        }
        fn now_ms(&self) -> u64 {
            START_MS
        }
        async fn heartbeat(
            &self,
            _: &SpaceName,
            _: &[Heartbeat],
        ) -> herenow_core::Result<herenow_core::HeartbeatReport> {
            down()
        }
        async fn leave(&self, _: &SpaceName, _: &[MemberKey]) -> herenow_core::Result<u64> {
            down()
        }
        async fn status(
            &self,
            _: &SpaceName,
            _: &[MemberKey],
        ) -> herenow_core::Result<Vec<herenow_core::MemberStatus>> {
            down()
        }
        async fn list(
            &self,
            _: &SpaceName,
            _: &ListQuery,
        ) -> herenow_core::Result<herenow_core::Page> {
            down()
        }
        async fn count(
            &self,
            _: &SpaceName,
            _: Option<u64>,
        ) -> herenow_core::Result<herenow_core::Counts> {
            down()
        }
        async fn config(&self, _: &SpaceName) -> herenow_core::Result<SpaceConfig> {
            down()
        }
        async fn set_config(&self, _: &SpaceName, _: SpaceConfig) -> herenow_core::Result<()> {
            down()
        }
        async fn spaces(
            &self,
            _: Option<&SpaceName>,
            _: usize,
        ) -> herenow_core::Result<Vec<herenow_core::SpaceSummary>> {
            down()
        }
        async fn set_friends(&self, _: &MemberId, _: &[MemberId]) -> herenow_core::Result<u64> {
            down()
        }
        async fn add_friends(&self, _: &MemberId, _: &[MemberId]) -> herenow_core::Result<u64> {
            down()
        }
        async fn remove_friends(&self, _: &MemberId, _: &[MemberId]) -> herenow_core::Result<u64> {
            down()
        }
        async fn friends(&self, _: &MemberId) -> herenow_core::Result<Vec<MemberId>> {
            down()
        }
        async fn subscribe(
            &self,
            _: &SpaceName,
        ) -> herenow_core::Result<herenow_core::Subscription> {
            down()
        }
        async fn tick(&self) -> herenow_core::Result<herenow_core::TickReport> {
            down()
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_store_that_is_down_is_survived() {
        let stop = CancellationToken::new();
        let task = tokio::spawn(run_seeded(Arc::new(Down), stop.clone(), 3));
        tokio::time::sleep(Duration::from_secs(600)).await;
        assert!(!task.is_finished(), "the demo keeps going");
        stop.cancel();
        task.await.expect("no panic on store errors");
    }

    #[test]
    fn xorshift_is_deterministic_and_in_range() {
        let mut a = XorShift::new(5);
        let mut b = XorShift::new(5);
        for _ in 0..1_000 {
            let x = a.range(10, 30);
            assert_eq!(x, b.range(10, 30));
            assert!((10..=30).contains(&x));
            let u = a.unit();
            b.unit();
            assert!((0.0..1.0).contains(&u));
        }
        assert_ne!(XorShift::new(0).next(), 0, "a zero seed still works");
    }
}
