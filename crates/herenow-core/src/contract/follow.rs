//! Following users across spaces ([`crate::follow`]): the feed a server
//! reads to serve watchers of contact lists.

use super::*;
use crate::follow::{UserChange, UserFeed};

/// The next change, waiting at most two seconds.
async fn next_change(feed: &mut UserFeed) -> UserChange {
    tokio::time::timeout(Duration::from_secs(2), feed.recv())
        .await
        .expect("a change within 2 s")
        .expect("a change, not an error")
}

/// The next change, which must be a presence event: its kind, space,
/// user, status and last seen.
async fn next_presence(feed: &mut UserFeed) -> Arc<Event> {
    match next_change(feed).await {
        UserChange::Presence(e) => e,
        other => panic!("expected a presence change, got {other:?}"),
    }
}

/// Asserts no change arrives within a short grace period.
async fn no_change(feed: &mut UserFeed) {
    if let Ok(Ok(c)) = tokio::time::timeout(Duration::from_millis(150), feed.recv()).await {
        panic!("unexpected change {c:?}");
    }
}

pub(super) async fn followed_users_are_fed_from_every_space(s: Store, clock: ManualClock) {
    let (a, b) = (space("c-follow-a"), space("c-follow-b"));
    let mut feed = following(&*s).user_feed().unwrap();
    following(&*s).follow(&[id("ann")]).await.unwrap();
    // A user nobody follows, and a guest with a followed user's id, are
    // nobody's business.
    s.heartbeat(&a, &[beat(user("bob")), beat(guest("ann"))])
        .await
        .unwrap();
    no_change(&mut feed).await;
    s.heartbeat(&a, &[beat(user("ann"))]).await.unwrap();
    let e = next_presence(&mut feed).await;
    assert_eq!(
        (e.kind, &e.space, e.member.id.as_str(), e.status),
        (EventKind::Join, &a, "ann", Status::Online)
    );
    assert_eq!(e.last_seen_ms, Some(T0));
    // A heartbeat that changes no status, or only metadata, says nothing.
    s.heartbeat(&a, &[beat(user("ann"))]).await.unwrap();
    no_change(&mut feed).await;
    // Away by time, decided by the store's clock, then back.
    clock.advance(Duration::from_secs(60));
    settle(&s).await;
    let e = next_presence(&mut feed).await;
    assert_eq!((e.kind, e.status), (EventKind::Away, Status::Away));
    s.heartbeat(&a, &[beat(user("ann"))]).await.unwrap();
    let e = next_presence(&mut feed).await;
    assert_eq!((e.kind, e.status), (EventKind::Back, Status::Online));
    assert_eq!(e.last_seen_ms, Some(T0 + 60_000));
    // Another space of the same user is followed too.
    s.heartbeat(&b, &[beat(user("ann"))]).await.unwrap();
    let e = next_presence(&mut feed).await;
    assert_eq!((e.kind, &e.space), (EventKind::Join, &b));
    s.leave(&a, &[user("ann")]).await.unwrap();
    let e = next_presence(&mut feed).await;
    assert_eq!(
        (e.kind, &e.space, e.status, e.reason),
        (
            EventKind::Leave,
            &a,
            Status::Offline,
            Some(LeaveReason::Explicit)
        )
    );
    // Followed twice, unfollowed once: still followed.
    following(&*s).follow(&[id("ann")]).await.unwrap();
    following(&*s).unfollow(&[id("ann")]).await.unwrap();
    s.leave(&b, &[user("ann")]).await.unwrap();
    assert_eq!(next_presence(&mut feed).await.kind, EventKind::Leave);
    // Unfollowed as often as followed: nothing more.
    following(&*s).unfollow(&[id("ann")]).await.unwrap();
    s.heartbeat(&a, &[beat(user("ann"))]).await.unwrap();
    no_change(&mut feed).await;
}

pub(super) async fn followed_users_go_offline_by_time(s: Store, clock: ManualClock) {
    let sp = space("c-follow-time");
    let mut feed = following(&*s).user_feed().unwrap();
    following(&*s).follow(&[id("cy")]).await.unwrap();
    s.heartbeat(&sp, &[beat(user("cy"))]).await.unwrap();
    assert_eq!(next_presence(&mut feed).await.kind, EventKind::Join);
    clock.advance(Duration::from_secs(60));
    settle(&s).await;
    assert_eq!(next_presence(&mut feed).await.kind, EventKind::Away);
    // Silent past `away_ms` (5 minutes by default): offline, by timeout,
    // with the last heartbeat as last seen.
    clock.advance(Duration::from_secs(5 * 60));
    settle(&s).await;
    let e = next_presence(&mut feed).await;
    assert_eq!(
        (e.kind, e.status, e.reason),
        (
            EventKind::Leave,
            Status::Offline,
            Some(LeaveReason::Timeout)
        )
    );
    assert_eq!(e.last_seen_ms, Some(T0));
    no_change(&mut feed).await;
}

pub(super) async fn invisible_users_are_not_fed(s: Store, _clock: ManualClock) {
    let sp = space("c-follow-invisible");
    let mut feed = following(&*s).user_feed().unwrap();
    following(&*s).follow(&[id("dee")]).await.unwrap();
    let attach = |c: &str, invisible: bool| attach(user("dee"), c, None, invisible);
    // An invisible device: watchers see nothing.
    attach_ok(&s, &sp, &attach("w-hidden", true)).await;
    no_change(&mut feed).await;
    // A visible one joins; hiding it again is a leave.
    attach_ok(&s, &sp, &attach("w-shown", false)).await;
    let e = next_presence(&mut feed).await;
    assert_eq!((e.kind, e.status), (EventKind::Join, Status::Online));
    attach_ok(&s, &sp, &attach("w-shown", true)).await;
    let e = next_presence(&mut feed).await;
    assert_eq!((e.kind, e.status), (EventKind::Leave, Status::Offline));
}

pub(super) async fn friend_set_changes_are_fed(s: Store, _clock: ManualClock) {
    let mut feed = following(&*s).user_feed().unwrap();
    following(&*s).follow(&[id("fa")]).await.unwrap();
    s.set_friends(&id("fa"), &[id("fb")]).await.unwrap();
    assert_eq!(next_change(&mut feed).await, UserChange::Friends(id("fa")));
    s.add_friends(&id("fa"), &[id("fc")]).await.unwrap();
    assert_eq!(next_change(&mut feed).await, UserChange::Friends(id("fa")));
    // Someone else's set: not followed.
    s.set_friends(&id("fb"), &[id("fa")]).await.unwrap();
    no_change(&mut feed).await;
    s.remove_friends(&id("fa"), &[id("fb")]).await.unwrap();
    assert_eq!(next_change(&mut feed).await, UserChange::Friends(id("fa")));
    // Erasing a friend takes it out of the followed user's set.
    users(&*s).erase_user(&id("fc")).await.unwrap();
    assert_eq!(next_change(&mut feed).await, UserChange::Friends(id("fa")));
    assert!(s.friends(&id("fa")).await.unwrap().is_empty());
    no_change(&mut feed).await;
}
