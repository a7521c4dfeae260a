//! The contract every [`PresenceStore`] must keep: one suite of presence
//! scenarios, run against every store (memory, Redis, Redis Cluster).
//!
//! The suite has a core part every store runs, and one part per
//! [`Capability`] (a few scenarios need two), run for every store that
//! offers it. A store crate enables the `contract` feature in its
//! dev-dependencies and calls [`run`] with the capabilities its store
//! claims ([`run_all`] for all of them), and a factory that builds a
//! fresh, empty store reading time from the given [`ManualClock`]. Each scenario uses its own space
//! names, so a factory may return stores that share a backend.
//!
//! Scenarios panic with a description on failure, like any test. They never
//! sleep to wait for state: time moves by the manual clock, and events are
//! awaited with a deadline (stores that deliver events asynchronously, such
//! as Redis pub/sub, need one).
//!
//! Why one file past 800 lines: it is the suite's index (the part each
//! scenario belongs to, `run`, `run_all`) with the core scenarios beside it;
//! the capabilities' larger scenario groups already have files of their own
//! (`connections`, `follow`, `outbox`, `relay`, `remembered`).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use crate::conn::{Attach, AttachReport, ConnId, DetachReport};
use crate::error::{Error, InvalidInput};
use crate::event::{Event, EventKind, LeaveReason, Subscription};
use crate::id::{MemberId, MemberKey, SpaceName};
use crate::meta::Metadata;
use crate::policy::{SpaceConfig, Status};
use crate::store::Capability;
use crate::store::{Heartbeat, KindFilter, ListQuery, MemberStatus, Order, PresenceStore};
use crate::time::Clock;
use crate::time::ManualClock;

/// A store as the scenarios hold it.
type Store = Arc<dyn PresenceStore>;

/// The time every scenario starts at.
pub const T0: u64 = 1_700_000_000_000;

/// Builds a fresh store on a clock. Called once per scenario.
pub type Factory = Arc<
    dyn Fn(ManualClock) -> Pin<Box<dyn Future<Output = Arc<dyn PresenceStore>> + Send>>
        + Send
        + Sync,
>;

/// One scenario: its name, the capabilities it needs besides the core
/// trait (none: the core part), and its body.
pub type Scenario = (
    &'static str,
    &'static [Capability],
    fn(Arc<dyn PresenceStore>, ManualClock) -> Pin<Box<dyn Future<Output = ()> + Send>>,
);

mod connections;
mod follow;
mod grace;
mod listing;
mod outbox;
mod relay;
mod remembered;
mod time;

use self::{connections::*, follow::*, grace::*, listing::*, outbox::*, relay::*};
use self::{remembered::*, time::*};

macro_rules! scenarios {
    ($($needs:expr => [$($name:ident),* $(,)?]),* $(,)?) => {
        /// Every scenario of the contract, by name, with what it needs
        /// besides the core trait: the core part first, then one part per
        /// capability (and per pair, for the few that need two).
        pub fn scenarios() -> Vec<Scenario> {
            vec![$($((stringify!($name), $needs, |s, c| Box::pin($name(s, c)))),*),*]
        }
    };
}

use Capability::{Following, LiveConnections, Relay, SpaceWebhooks, UserIndex, WebhookOutbox};

scenarios!(
    &[] => [
        heartbeat_and_status,
        newest_time_wins,
        bad_batches_change_nothing,
        leave_is_immediate,
        users_and_guests_apart,
        recent_order_pages_completely,
        pages_stable_under_writes,
        id_order_pages,
        window_and_counts,
        metadata_kept_and_replaced,
        friends_and_online_friends,
        online_among_ad_hoc,
        expiry_after_retention,
        events_follow_status,
        config_per_space,
        spaces_listed,
        big_batches,
        leave_keeps_last_seen,
        expiry_keeps_last_seen,
        forgotten_times_are_counted,
    ],
    &[LiveConnections] => [
        connections_join_first_leave_last,
        connections_expire_without_pings,
        invisible_connections,
        connection_bad_input,
        a_member_back_within_the_grace_never_left,
        a_member_not_back_leaves_once_when_the_grace_ends,
        a_second_tab_keeps_its_member_through_the_grace,
        a_grace_of_zero_leaves_at_once,
        lingering_refuses_what_is_not_its_own,
    ],
    &[UserIndex] => [
        remembered_until_the_horizon,
        seen_anywhere_over_spaces,
        erase_forgets_everywhere,
    ],
    &[LiveConnections, UserIndex] => [leave_after_timeout_keeps_last_heartbeat],
    &[Following] => [
        followed_users_are_fed_from_every_space,
        followed_users_go_offline_by_time,
    ],
    &[Following, LiveConnections] => [invisible_users_are_not_fed],
    &[Following, UserIndex] => [friend_set_changes_are_fed],
    &[Relay] => [
        relayed_messages_reach_every_feed_in_order,
        relay_refuses_what_is_past_its_bounds,
    ],
    &[WebhookOutbox] => [
        outbox_keeps_events_until_acknowledged,
        outbox_reclaims_what_a_consumer_left,
        outbox_keeps_a_claiming_consumer_in_charge,
        outbox_follows_a_member_in_order,
        outbox_keeps_messages_in_order_with_the_space,
        outbox_is_bounded,
    ],
    // Last: it opens the outbox for good on a shared backend.
    &[WebhookOutbox, SpaceWebhooks] => [outbox_keeps_spaces_endpoints],
);

/// Runs the core part and the part of every capability in `claims`, each
/// scenario on a fresh store from `factory`. A store that does not offer
/// a capability it claims fails, naming it. A new backend claims none
/// and runs the core part alone.
pub async fn run(factory: Factory, claims: &[Capability]) {
    for (name, needs, scenario) in scenarios() {
        if !needs.iter().all(|c| claims.contains(c)) {
            continue;
        }
        let clock = ManualClock::new(T0);
        let store = factory(clock.clone()).await;
        for c in claims {
            assert!(
                c.is_offered_by(&*store),
                "the {} store claims {c} but does not offer it",
                store.name()
            );
        }
        eprintln!("contract: {name}");
        scenario(store, clock).await;
    }
}

/// Runs every part: the core and each capability's, for a store that
/// offers them all (the memory store, herenow's Redis layout).
pub async fn run_all(factory: Factory) {
    run(factory, &Capability::ALL).await;
}

// A capability a scenario's part needs.
fn live(s: &dyn PresenceStore) -> &dyn crate::capability::LiveConnections {
    s.live_connections()
        .expect("the store offers live connections")
}

fn following(s: &dyn PresenceStore) -> &dyn crate::capability::Following {
    s.following().expect("the store offers following users")
}

fn outbox(s: &dyn PresenceStore) -> &dyn crate::capability::WebhookOutbox {
    s.webhook_outbox()
        .expect("the store offers a webhook outbox")
}

fn endpoints(s: &dyn PresenceStore) -> &dyn crate::capability::SpaceWebhooks {
    s.space_webhooks()
        .expect("the store offers spaces' webhook endpoints")
}

fn relay(s: &dyn PresenceStore) -> &dyn crate::capability::Relay {
    s.relay().expect("the store offers a relay")
}

fn users(s: &dyn PresenceStore) -> &dyn crate::capability::UserIndex {
    s.user_index().expect("the store offers a user index")
}

fn space(name: &str) -> SpaceName {
    SpaceName::new(name).expect("valid space name")
}

fn id(id: &str) -> MemberId {
    MemberId::new(id).expect("valid id")
}

fn conn(id: &str) -> ConnId {
    ConnId::new(id).expect("valid connection id")
}

fn attach(member: MemberKey, c: &str, meta: Option<&str>, invisible: bool) -> Attach {
    Attach {
        member,
        conn: conn(c),
        meta: meta.map(|m| Metadata::from_json(m).expect("valid metadata")),
        invisible,
        ttl_ms: 30_000,
    }
}

/// Attaches `a` in `sp`, which must succeed.
async fn attach_ok(s: &Store, sp: &SpaceName, a: &Attach) -> AttachReport {
    live(&**s).attach(sp, a).await.unwrap()
}

/// Detaches `m`'s connection `c` in `sp`, which must succeed.
async fn detach_ok(s: &Store, sp: &SpaceName, m: MemberKey, c: &str) -> DetachReport {
    live(&**s).detach(sp, &m, &conn(c)).await.unwrap()
}

/// Lingers `m`'s connection `c` in `sp`, which must succeed.
async fn linger_ok(s: &Store, sp: &SpaceName, m: MemberKey, c: &str) -> DetachReport {
    live(&**s).linger(sp, &m, &conn(c)).await.unwrap()
}

/// Sets `sp`'s policy to the default one with `change` made, which must
/// succeed.
async fn configure(s: &Store, sp: &SpaceName, change: impl FnOnce(&mut SpaceConfig)) {
    let mut config = SpaceConfig::default();
    change(&mut config);
    s.set_config(sp, config).await.unwrap();
}

/// `m`'s status in `sp`.
async fn status_of(s: &Store, sp: &SpaceName, m: MemberKey) -> MemberStatus {
    s.status(sp, &[m]).await.unwrap().remove(0)
}

fn user(id: &str) -> MemberKey {
    MemberKey::user(self::id(id))
}

fn guest(id: &str) -> MemberKey {
    MemberKey::guest(self::id(id))
}

fn beat(m: MemberKey) -> Heartbeat {
    Heartbeat::now(m)
}

/// A heartbeat "now" carrying `meta`.
fn beat_meta(m: MemberKey, meta: Option<Metadata>) -> Heartbeat {
    Heartbeat {
        meta,
        ..Heartbeat::now(m)
    }
}

fn beat_at(m: MemberKey, at: u64) -> Heartbeat {
    Heartbeat {
        member: m,
        at_ms: Some(at),
        meta: None,
    }
}

fn ids(members: &[MemberStatus]) -> Vec<String> {
    members.iter().map(|m| m.member.id.to_string()).collect()
}

/// Runs background work until it reports nothing left to do.
async fn settle(store: &Store) {
    for _ in 0..100 {
        let r = store.tick().await.expect("tick");
        if r.expired == 0 && r.transitions == 0 && r.connections_expired == 0 {
            return;
        }
    }
}

/// The next event, waiting at most two seconds.
async fn next_event(sub: &mut Subscription) -> Arc<Event> {
    tokio::time::timeout(Duration::from_secs(2), sub.events.recv())
        .await
        .expect("an event within 2 s")
        .expect("an event, not an error")
}

/// Asserts no event arrives within a short grace period.
async fn no_event(sub: &mut Subscription) {
    if let Ok(Ok(e)) = tokio::time::timeout(Duration::from_millis(150), sub.events.recv()).await {
        panic!("unexpected event {e:?}");
    }
}

fn is_invalid(r: &Error) -> bool {
    matches!(r, Error::Invalid(_))
}

async fn heartbeat_and_status(s: Store, clock: ManualClock) {
    let sp = space("c-status");
    let r = s.heartbeat(&sp, &[beat(user("ada"))]).await.unwrap();
    assert_eq!((r.accepted, r.joined), (1, 1));
    let st = s.status(&sp, &[user("ada"), user("nobody")]).await.unwrap();
    assert_eq!(st[0].status, Status::Online);
    assert_eq!(st[0].last_seen_ms, Some(T0));
    assert_eq!(st[1].status, Status::Offline);
    assert_eq!(st[1].last_seen_ms, None);
    assert_eq!(ids(&st), ["ada", "nobody"], "answers keep the order asked");
    clock.advance(Duration::from_secs(60));
    assert_eq!(status_of(&s, &sp, user("ada")).await.status, Status::Away);
    clock.advance(Duration::from_secs(240));
    assert_eq!(
        status_of(&s, &sp, user("ada")).await.status,
        Status::Offline
    );
    // Unknown space: everyone offline, nothing created.
    let st = s.status(&space("c-nowhere"), &[user("ada")]).await.unwrap();
    assert_eq!(st[0].status, Status::Offline);
}

async fn newest_time_wins(s: Store, _clock: ManualClock) {
    let sp = space("c-newest");
    s.heartbeat(&sp, &[beat_at(user("a"), T0 - 10_000)])
        .await
        .unwrap();
    let r = s
        .heartbeat(&sp, &[beat_at(user("a"), T0 - 20_000)])
        .await
        .unwrap();
    assert_eq!(r.stale, 1);
    assert_eq!(
        status_of(&s, &sp, user("a")).await.last_seen_ms,
        Some(T0 - 10_000)
    );
    s.heartbeat(&sp, &[beat(user("a"))]).await.unwrap();
    assert_eq!(status_of(&s, &sp, user("a")).await.last_seen_ms, Some(T0));
    // Older than the retention: not presence (only remembered, see
    // `expiry_keeps_last_seen`).
    let r = s
        .heartbeat(&sp, &[beat_at(user("b"), T0 - 16 * 60_000)])
        .await
        .unwrap();
    assert_eq!(r.stale, 1);
    let st = status_of(&s, &sp, user("b")).await;
    assert_eq!(st.status, Status::Offline);
    assert_eq!(s.count(&sp, Some(15 * 60_000)).await.unwrap().users, 1);
}

async fn bad_batches_change_nothing(s: Store, _clock: ManualClock) {
    let sp = space("c-bad");
    let batch = [beat(user("a")), beat_at(user("b"), T0 + 61_000)];
    let e = s.heartbeat(&sp, &batch).await.unwrap_err();
    assert!(
        matches!(e, Error::Invalid(InvalidInput::AtInFuture { .. })),
        "{e:?}"
    );
    assert!(is_invalid(&s.heartbeat(&sp, &[]).await.unwrap_err()));
    let big = vec![beat(user("a")); 10_001];
    let e = s.heartbeat(&sp, &big).await.unwrap_err();
    assert!(
        matches!(e, Error::Invalid(InvalidInput::BatchTooLarge { .. })),
        "{e:?}"
    );
    assert_eq!(
        s.count(&sp, None).await.unwrap().total(),
        0,
        "a refused batch writes nothing"
    );
    let e = s.status(&sp, &vec![user("a"); 10_001]).await.unwrap_err();
    assert!(is_invalid(&e));
    let e = s.leave(&sp, &vec![user("a"); 10_001]).await.unwrap_err();
    assert!(is_invalid(&e));
}

async fn leave_is_immediate(s: Store, _clock: ManualClock) {
    let sp = space("c-leave");
    s.heartbeat(&sp, &[beat(user("a")), beat(user("b"))])
        .await
        .unwrap();
    assert_eq!(s.leave(&sp, &[user("a"), user("zed")]).await.unwrap(), 1);
    let st = s.status(&sp, &[user("a"), user("b")]).await.unwrap();
    assert_eq!(st[0].status, Status::Offline);
    assert_eq!(st[1].status, Status::Online);
    assert_eq!(s.count(&sp, None).await.unwrap().users, 1);
    assert_eq!(
        s.leave(&space("c-leave-none"), &[user("a")]).await.unwrap(),
        0
    );
}

async fn users_and_guests_apart(s: Store, _clock: ManualClock) {
    let sp = space("c-kinds");
    s.heartbeat(
        &sp,
        &[beat(user("x")), beat(guest("x")), beat(guest("10.0.0.7"))],
    )
    .await
    .unwrap();
    let c = s.count(&sp, None).await.unwrap();
    assert_eq!((c.users, c.guests), (1, 2));
    let list = |kinds| {
        let s = s.clone();
        let sp = sp.clone();
        async move {
            s.list(
                &sp,
                &ListQuery {
                    kinds,
                    ..Default::default()
                },
            )
            .await
            .unwrap()
            .members
            .len()
        }
    };
    assert_eq!(list(KindFilter::Users).await, 1);
    assert_eq!(list(KindFilter::Guests).await, 2);
    assert_eq!(list(KindFilter::All).await, 3);
    s.leave(&sp, &[guest("x")]).await.unwrap();
    assert_eq!(status_of(&s, &sp, user("x")).await.status, Status::Online);
    assert_eq!(status_of(&s, &sp, guest("x")).await.status, Status::Offline);
}

async fn window_and_counts(s: Store, _clock: ManualClock) {
    let sp = space("c-window");
    let ages = [
        0u64, 30_000, 59_999, 60_000, 299_999, 300_000, 599_999, 600_000, 600_001, 899_000,
    ];
    let beats: Vec<_> = ages
        .iter()
        .enumerate()
        .map(|(i, age)| {
            let m = if i % 2 == 0 {
                user(&format!("u{i}"))
            } else {
                guest(&format!("g{i}"))
            };
            beat_at(m, T0 - age)
        })
        .collect();
    s.heartbeat(&sp, &beats).await.unwrap();
    for window in [1u64, 30_000, 60_000, 300_000, 600_000, 900_000] {
        let want_u = ages
            .iter()
            .enumerate()
            .filter(|(i, a)| i % 2 == 0 && **a <= window)
            .count() as u64;
        let want_g = ages
            .iter()
            .enumerate()
            .filter(|(i, a)| i % 2 == 1 && **a <= window)
            .count() as u64;
        let c = s.count(&sp, Some(window)).await.unwrap();
        assert_eq!((c.users, c.guests), (want_u, want_g), "window {window}");
        let p = s
            .list(
                &sp,
                &ListQuery {
                    window_ms: Some(window),
                    kinds: KindFilter::All,
                    limit: 1000,
                    ..Default::default()
                },
            )
            .await
            .unwrap();
        assert_eq!(
            p.members.len() as u64,
            want_u + want_g,
            "list in window {window}"
        );
    }
    // Default window: 10 minutes.
    assert_eq!(s.count(&sp, None).await.unwrap().total(), 8);
    let e = s.count(&sp, Some(900_001)).await.unwrap_err();
    assert!(
        matches!(e, Error::Invalid(InvalidInput::WindowOutOfRange { .. })),
        "{e:?}"
    );
    let e = s.count(&sp, Some(0)).await.unwrap_err();
    assert!(is_invalid(&e));
    // Status comes with every listed member.
    let p = s
        .list(
            &sp,
            &ListQuery {
                kinds: KindFilter::All,
                ..Default::default()
            },
        )
        .await
        .unwrap();
    let statuses: Vec<Status> = p.members.iter().map(|m| m.status).collect();
    assert_eq!(
        &statuses[..4],
        [Status::Online, Status::Online, Status::Online, Status::Away]
    );
}

async fn metadata_kept_and_replaced(s: Store, _clock: ManualClock) {
    let sp = space("c-meta");
    let meta = |j: &str| Some(Metadata::from_json(j).unwrap());
    s.heartbeat(&sp, &[beat_meta(user("ada"), meta(r#"{"name":"Ada"}"#))])
        .await
        .unwrap();
    let st = &status_of(&s, &sp, user("ada")).await;
    assert_eq!(st.meta.as_ref().unwrap().as_json(), r#"{"name":"Ada"}"#);
    // A heartbeat without metadata keeps it.
    s.heartbeat(&sp, &[beat(user("ada"))]).await.unwrap();
    let p = s.list(&sp, &ListQuery::default()).await.unwrap();
    assert_eq!(
        p.members[0].meta.as_ref().unwrap().as_json(),
        r#"{"name":"Ada"}"#
    );
    s.heartbeat(&sp, &[beat_meta(user("ada"), meta(r#"{"name":"Ada L."}"#))])
        .await
        .unwrap();
    let st = &status_of(&s, &sp, user("ada")).await;
    assert_eq!(st.meta.as_ref().unwrap().as_json(), r#"{"name":"Ada L."}"#);
    // Leaving forgets it.
    s.leave(&sp, &[user("ada")]).await.unwrap();
    s.heartbeat(&sp, &[beat(user("ada"))]).await.unwrap();
    assert_eq!(status_of(&s, &sp, user("ada")).await.meta, None);
}

async fn friends_and_online_friends(s: Store, clock: ManualClock) {
    let sp = space("c-friends");
    let me = id("c-me");
    assert_eq!(
        s.set_friends(&me, &[id("b"), id("c"), id("d"), id("c-me")])
            .await
            .unwrap(),
        3,
        "self is not a friend"
    );
    assert_eq!(s.add_friends(&me, &[id("e"), id("b")]).await.unwrap(), 4);
    assert_eq!(
        s.remove_friends(&me, &[id("d"), id("zzz")]).await.unwrap(),
        3
    );
    let f: Vec<String> = s
        .friends(&me)
        .await
        .unwrap()
        .iter()
        .map(|m| m.to_string())
        .collect();
    assert_eq!(f, ["b", "c", "e"]);
    s.heartbeat(
        &sp,
        &[
            beat_at(user("b"), T0 - 700_000),
            beat_at(user("c"), T0 - 5_000),
            beat(user("x")),
        ],
    )
    .await
    .unwrap();
    s.heartbeat(&sp, &[beat(guest("e"))]).await.unwrap();
    clock.advance(Duration::from_secs(1));
    s.heartbeat(&sp, &[beat(user("e"))]).await.unwrap();
    let on = s.online_friends(&sp, &me, None, 100).await.unwrap();
    assert_eq!(
        ids(&on),
        ["e", "c"],
        "friends within the window, most recent first; guests are not friends"
    );
    let on = s
        .online_friends(&sp, &me, Some(900_000), 100)
        .await
        .unwrap();
    assert_eq!(ids(&on), ["e", "c", "b"]);
    let on = s.online_friends(&sp, &me, Some(900_000), 1).await.unwrap();
    assert_eq!(ids(&on), ["e"]);
    assert!(
        s.online_friends(&sp, &id("nobody"), None, 10)
            .await
            .unwrap()
            .is_empty()
    );
    let many: Vec<MemberId> = (0..5001).map(|i| id(&format!("f{i}"))).collect();
    let e = s.set_friends(&me, &many).await.unwrap_err();
    assert!(
        matches!(e, Error::Invalid(InvalidInput::TooManyFriends { .. })),
        "{e:?}"
    );
    assert_eq!(
        s.friends(&me).await.unwrap().len(),
        3,
        "a refused set leaves the old one"
    );
    s.set_friends(&me, &[]).await.unwrap();
    assert!(s.friends(&me).await.unwrap().is_empty());
}

async fn online_among_ad_hoc(s: Store, _clock: ManualClock) {
    let sp = space("c-among");
    s.heartbeat(
        &sp,
        &[
            beat_at(user("a"), T0 - 2),
            beat_at(user("b"), T0 - 1),
            beat(guest("g")),
        ],
    )
    .await
    .unwrap();
    let on = s
        .online_among(
            &sp,
            &[user("a"), user("nope"), guest("g"), user("b"), user("a")],
            None,
            100,
        )
        .await
        .unwrap();
    let got: Vec<String> = on.iter().map(|m| format!("{:?}", m.member)).collect();
    assert_eq!(got, ["guest:g", "user:b", "user:a"]);
}

async fn spaces_listed(s: Store, _clock: ManualClock) {
    for name in ["c-sp-b", "c-sp-a", "c-sp-c"] {
        s.heartbeat(&space(name), &[beat(user("x")), beat(guest("y"))])
            .await
            .unwrap();
    }
    let all = s.spaces(None, 1000).await.unwrap();
    let ours: Vec<&str> = all
        .iter()
        .map(|x| x.space.as_str())
        .filter(|n| n.starts_with("c-sp-"))
        .collect();
    assert_eq!(ours, ["c-sp-a", "c-sp-b", "c-sp-c"]);
    let a = all.iter().find(|x| x.space.as_str() == "c-sp-a").unwrap();
    assert_eq!((a.members.users, a.members.guests), (1, 1));
    let after = s.spaces(Some(&space("c-sp-a")), 1).await.unwrap();
    assert_eq!(after.len(), 1);
    assert!(after[0].space.as_str() > "c-sp-a");
}

async fn big_batches(s: Store, _clock: ManualClock) {
    let sp = space("c-big");
    let beats: Vec<_> = (0..10_000u64)
        .map(|i| beat_at(user(&format!("u{i}")), T0 - (i % 600_000)))
        .collect();
    let r = s.heartbeat(&sp, &beats).await.unwrap();
    assert_eq!(r.accepted, 10_000);
    assert_eq!(s.count(&sp, None).await.unwrap().users, 10_000);
    let keys: Vec<MemberKey> = (0..10_000u64).map(|i| user(&format!("u{i}"))).collect();
    let st = s.status(&sp, &keys).await.unwrap();
    assert!(st.iter().all(|m| m.last_seen_ms.is_some()));
    assert_eq!(s.count(&sp, Some(5_000)).await.unwrap().users, 5_001);
    assert_eq!(s.leave(&sp, &keys[..5000]).await.unwrap(), 5000);
    assert_eq!(s.count(&sp, None).await.unwrap().users, 5_000);
}
