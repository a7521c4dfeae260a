//! [`Members`]: one task per presence channel on this server that reads
//! the channel's space from the store once and hands its member events
//! to every local socket subscribed to it.
//!
//! Each feed keeps the channel's roster (its users and their
//! `user_info`) from one store subscription: the snapshot, then the
//! events. A socket joins by asking the feed first whether its user fits
//! under the app's member cap ([`Members::admit`]), then, once its live
//! connection is written, entering ([`Admitted::enter`]): the feed queues
//! the roster it holds at that point, with the socket's own user in it,
//! and every member event after it. So a socket's roster and events come
//! from one sequence, and a member event is serialized once and queued to
//! each socket by the feed, without waking the socket's session.
//!
//! A socket whose queue has no room for a member event *lags* and gets
//! the roster again (the policy is `pusher::socket`'s module doc); it is
//! closed through its [`Ender`] only if its queue stays full past its
//! stall limit. When the store's own event queue overflows (or closes), the
//! feed subscribes again and every socket gets the new roster.
//!
//! A feed ends once no socket holds it or is admitted to it; a socket that
//! finds it ended (its request unanswered) asks a new one.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use herenow_core::{
    Event, EventKind, MemberKey, MemberKind, Metadata, PresenceStore, RecvError, SpaceName,
    Subscription,
};
use parking_lot::Mutex;
use tokio::sync::mpsc::error::TrySendError;
use tokio::sync::{mpsc, oneshot};
use tokio::time::{Instant, timeout};

use super::frames;
use super::{Ender, RESERVE};
use crate::socket::{Out, Pieces, queue};

/// How often lagging sockets are looked at.
const LAG_CHECK: Duration = Duration::from_millis(20);

/// The longest pause between subscribing attempts while the store fails.
const RESUBSCRIBE_MAX: Duration = Duration::from_secs(1);

/// A socket as a feed sees it.
pub(crate) struct Listener {
    /// The socket's number (`crate::pusher::hub::Sockets`).
    pub(crate) number: u64,
    /// Its member: the events of its own user are not sent to it.
    pub(crate) member: MemberKey,
    /// Its member's `user_info`, for rosters sent before the store's
    /// snapshot shows it.
    pub(crate) meta: Option<Metadata>,
    pub(crate) queue: queue::Sender<Out>,
    /// Closes the socket when it stays too slow.
    pub(crate) ender: Arc<Ender>,
    /// How long its queue may stay without room.
    pub(crate) stall: Duration,
}

/// Why a socket cannot join a presence channel.
#[derive(Debug)]
pub(crate) enum JoinError {
    /// The channel holds `max` users already.
    Full(usize),
    /// The store did not answer in time.
    Unavailable,
}

enum Command {
    Admit {
        member: MemberKey,
        max: usize,
        reply: oneshot::Sender<Result<(), usize>>,
    },
    /// An admitted socket of this user gave up before entering.
    Abandon {
        member: String,
    },
    Enter {
        listener: Listener,
        reply: oneshot::Sender<()>,
    },
    Resend {
        number: u64,
    },
    Leave {
        number: u64,
    },
}

struct Handle {
    id: u64,
    tx: mpsc::UnboundedSender<Command>,
}

/// This server's presence channel feeds, by space.
#[derive(Default)]
pub(crate) struct Members {
    feeds: Arc<Mutex<HashMap<SpaceName, Handle>>>,
    next: std::sync::atomic::AtomicU64,
}

/// A socket admitted to a feed: [`enter`](Self::enter) once its live
/// connection is written; dropping it instead gives its place back.
pub(crate) struct Admitted {
    tx: mpsc::UnboundedSender<Command>,
    /// The user's id.
    member: String,
    entered: bool,
}

impl Admitted {
    /// Enters `listener`: its roster is queued when this returns `true`;
    /// `false` when the feed ended meanwhile (ask again).
    pub(crate) async fn enter(mut self, listener: Listener, wait: Duration) -> bool {
        self.entered = true;
        let (reply, answer) = oneshot::channel();
        if self.tx.send(Command::Enter { listener, reply }).is_err() {
            return false;
        }
        matches!(timeout(wait, answer).await, Ok(Ok(())))
    }
}

impl Drop for Admitted {
    fn drop(&mut self) {
        if !self.entered {
            let _ = self.tx.send(Command::Abandon {
                member: std::mem::take(&mut self.member),
            });
        }
    }
}

impl Members {
    /// Asks `space`'s feed (started if none runs) whether `member` may
    /// join channel `channel`: it may when it is in the roster already
    /// or the roster holds fewer than `max` users.
    pub(crate) async fn admit(
        &self,
        store: &Arc<dyn PresenceStore>,
        space: &SpaceName,
        channel: &str,
        member: &MemberKey,
        max: usize,
        wait: Duration,
    ) -> Result<Admitted, JoinError> {
        let deadline = Instant::now() + wait;
        // A feed that ended between the look-up and the request leaves
        // it unanswered: the next try starts a new one.
        for _ in 0..3 {
            let tx = self.feed(store, space, channel, wait);
            let (reply, answer) = oneshot::channel();
            let admit = Command::Admit {
                member: member.clone(),
                max,
                reply,
            };
            if tx.send(admit).is_err() {
                continue;
            }
            match tokio::time::timeout_at(deadline, answer).await {
                Ok(Ok(Ok(()))) => {
                    return Ok(Admitted {
                        tx,
                        member: member.id.as_str().to_owned(),
                        entered: false,
                    });
                }
                Ok(Ok(Err(max))) => return Err(JoinError::Full(max)),
                Ok(Err(_)) => continue,
                Err(_) => return Err(JoinError::Unavailable),
            }
        }
        Err(JoinError::Unavailable)
    }

    /// Sends socket `number` the roster of `space` again (it subscribed
    /// again).
    pub(crate) fn resend(&self, space: &SpaceName, number: u64) {
        if let Some(h) = self.feeds.lock().get(space) {
            let _ = h.tx.send(Command::Resend { number });
        }
    }

    /// Socket `number` leaves `space`'s feed.
    pub(crate) fn leave(&self, space: &SpaceName, number: u64) {
        if let Some(h) = self.feeds.lock().get(space) {
            let _ = h.tx.send(Command::Leave { number });
        }
    }

    /// The running feed of `space`, or a new one.
    fn feed(
        &self,
        store: &Arc<dyn PresenceStore>,
        space: &SpaceName,
        channel: &str,
        wait: Duration,
    ) -> mpsc::UnboundedSender<Command> {
        let mut feeds = self.feeds.lock();
        if let Some(h) = feeds.get(space) {
            return h.tx.clone();
        }
        let (tx, rx) = mpsc::unbounded_channel();
        let id = self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        feeds.insert(space.clone(), Handle { id, tx: tx.clone() });
        let feed = Feed {
            id,
            space: space.clone(),
            channel: channel.into(),
            store: store.clone(),
            wait,
            commands: rx,
            feeds: self.feeds.clone(),
            roster: BTreeMap::new(),
            omitted: 0,
            roster_text: None,
            listeners: Vec::new(),
            admitted: 0,
            unseen: HashMap::new(),
        };
        tokio::spawn(feed.run());
        tx
    }

    /// Feeds running now.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.feeds.lock().len()
    }
}

struct Member {
    listener: Listener,
    /// Since when its member events are skipped, waiting for room.
    lagging: Option<Instant>,
}

struct Feed {
    id: u64,
    space: SpaceName,
    channel: Arc<str>,
    store: Arc<dyn PresenceStore>,
    wait: Duration,
    commands: mpsc::UnboundedReceiver<Command>,
    feeds: Arc<Mutex<HashMap<SpaceName, Handle>>>,
    /// The channel's users and their `user_info`.
    roster: BTreeMap<String, Option<Metadata>>,
    /// Present members the store's snapshot left out (past its bound):
    /// counted against the member cap until they leave.
    omitted: usize,
    /// The roster's `subscription_succeeded`, made once per change.
    roster_text: Option<Pieces>,
    listeners: Vec<Member>,
    /// Sockets admitted and not yet entered (or given up).
    admitted: usize,
    /// Users admitted here whose join the roster does not show yet, with
    /// their sockets: counted against the member cap, so users admitted
    /// before the store's events reach the feed cannot pass it together.
    unseen: HashMap<String, usize>,
}

impl Feed {
    async fn run(mut self) {
        let Some(mut events) = self.subscribe(true).await else {
            // Out of the registry, its requests unanswered: their sockets
            // try again, with a new feed.
            self.unregister(&mut self.feeds.lock());
            return;
        };
        let mut lag_check = tokio::time::interval(LAG_CHECK);
        lag_check.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            let lagging = self.listeners.iter().any(|m| m.lagging.is_some());
            tokio::select! {
                biased;
                Some(command) = self.commands.recv() => {
                    // An entering socket's roster shows every event that
                    // reached the feed already, its own join among them
                    // (it enters once its connection is written): so the
                    // sockets entering together in a storm share one
                    // roster rather than each getting its own.
                    let lost = matches!(command, Command::Enter { .. })
                        && !self.catch_up(&mut events);
                    self.command(command);
                    if lost && !self.start_over(&mut events).await {
                        return;
                    }
                }
                item = events.recv() => match item {
                    Ok(event) => self.on_event(&event),
                    Err(RecvError::Lagged(_) | RecvError::Closed) => {
                        if !self.start_over(&mut events).await {
                            return;
                        }
                    }
                },
                _ = lag_check.tick(), if lagging => self.check_lagging(),
            }
            if self.listeners.is_empty() && self.admitted == 0 && self.retire() {
                return;
            }
        }
    }

    /// Takes the events waiting now; `false` when some were missed (or
    /// the subscription closed): then [`start_over`](Self::start_over).
    fn catch_up(&mut self, events: &mut herenow_core::EventReceiver) -> bool {
        loop {
            match events.try_recv() {
                Ok(Some(event)) => self.on_event(&event),
                Ok(None) => return true,
                Err(_) => return false,
            }
        }
    }

    /// Missed events: a new subscription, and every socket gets its
    /// roster. `false` when the feed ends instead.
    async fn start_over(&mut self, events: &mut herenow_core::EventReceiver) -> bool {
        match self.subscribe(false).await {
            Some(fresh) => *events = fresh,
            None => return false,
        }
        for m in &mut self.listeners {
            m.lagging.get_or_insert_with(Instant::now);
        }
        self.check_lagging();
        true
    }

    /// A new store subscription and the roster from its snapshot; `None`
    /// when the first attempt failed (`first`: sockets are waiting to be
    /// told) or no socket is left to wait for the store.
    async fn subscribe(&mut self, first: bool) -> Option<herenow_core::EventReceiver> {
        let mut pause = Duration::from_millis(50);
        loop {
            match timeout(self.wait, self.store.subscribe(&self.space)).await {
                Ok(Ok(sub)) => return Some(self.take_snapshot(sub)),
                Ok(Err(e)) => {
                    tracing::debug!(space = %self.space, error = %e, "a presence channel's subscription failed")
                }
                Err(_) => {
                    tracing::debug!(space = %self.space, "a presence channel's subscription timed out")
                }
            }
            if first {
                return None;
            }
            // Meanwhile requests are answered from the roster held (a
            // fresh one follows once the store answers), and leaving
            // sockets are let go.
            while let Ok(command) = self.commands.try_recv() {
                self.command(command);
            }
            if self.listeners.is_empty() && self.admitted == 0 && self.retire() {
                return None;
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(RESUBSCRIBE_MAX);
        }
    }

    fn take_snapshot(&mut self, sub: Subscription) -> herenow_core::EventReceiver {
        self.roster = sub
            .snapshot
            .into_iter()
            .filter(|m| m.member.kind == MemberKind::User)
            .map(|m| (m.member.id.as_str().to_owned(), m.meta))
            .collect();
        self.omitted = usize::try_from(sub.snapshot_omitted).unwrap_or(usize::MAX);
        let roster = &self.roster;
        self.unseen.retain(|id, _| !roster.contains_key(id));
        self.roster_text = None;
        sub.events
    }

    /// Takes this feed out of the registry unless a request arrived
    /// meanwhile (handled then): `true` when it is out.
    fn retire(&mut self) -> bool {
        let mut feeds = self.feeds.lock();
        if let Ok(command) = self.commands.try_recv() {
            drop(feeds);
            self.command(command);
            return false;
        }
        self.unregister(&mut feeds);
        true
    }

    fn unregister(&self, feeds: &mut HashMap<SpaceName, Handle>) {
        if feeds.get(&self.space).is_some_and(|h| h.id == self.id) {
            feeds.remove(&self.space);
        }
    }

    fn command(&mut self, command: Command) {
        match command {
            Command::Admit { member, max, reply } => {
                let id = member.id.as_str();
                let listed = self.roster.contains_key(id);
                let users = self.roster.len() + self.omitted + self.unseen.len();
                let fits = listed || self.unseen.contains_key(id) || users < max;
                let answer = if fits { Ok(()) } else { Err(max) };
                if reply.send(answer).is_ok() && fits {
                    self.admitted += 1;
                    if !listed {
                        *self.unseen.entry(id.to_owned()).or_default() += 1;
                    }
                }
            }
            Command::Abandon { member } => {
                self.admitted = self.admitted.saturating_sub(1);
                self.unsee(&member);
            }
            Command::Enter { listener, reply } => {
                self.admitted = self.admitted.saturating_sub(1);
                let text = self.roster_for(&listener.member, listener.meta.as_ref());
                let mut m = Member {
                    listener,
                    lagging: None,
                };
                push(&mut m, Out::Pieces(text));
                self.listeners.push(m);
                let _ = reply.send(());
            }
            Command::Resend { number } => {
                if let Some(i) = self.position(number) {
                    self.send_roster(i);
                }
            }
            Command::Leave { number } => {
                if let Some(i) = self.position(number) {
                    let left = self.listeners.remove(i);
                    self.unsee(left.listener.member.id.as_str());
                }
            }
        }
    }

    fn position(&self, number: u64) -> Option<usize> {
        self.listeners
            .iter()
            .position(|m| m.listener.number == number)
    }

    /// Queues the roster for listener `i`.
    fn send_roster(&mut self, i: usize) {
        let l = &self.listeners[i].listener;
        let (member, meta) = (l.member.clone(), l.meta.clone());
        let text = self.roster_for(&member, meta.as_ref());
        push(&mut self.listeners[i], Out::Pieces(text));
    }

    /// The roster as `member`'s socket gets it: with its own user, who
    /// may not be in the store's snapshot or events yet.
    fn roster_for(&mut self, member: &MemberKey, meta: Option<&Metadata>) -> Pieces {
        let id = member.id.as_str();
        let listed = self
            .roster
            .iter()
            .map(|(id, meta)| (id.as_str(), meta.as_ref()));
        if !self.roster.contains_key(id) {
            return frames::presence_succeeded(&self.channel, listed.chain([(id, meta)]));
        }
        self.roster_text
            .get_or_insert_with(|| frames::presence_succeeded(&self.channel, listed))
            .clone()
    }

    /// A store event: the roster follows it, and a join or leave goes to
    /// every socket but the member's own.
    fn on_event(&mut self, event: &Arc<Event>) {
        // Guests of the space (herenow's own API) are not Pusher members.
        if event.member.kind != MemberKind::User {
            return;
        }
        let id = event.member.id.as_str();
        let text = match event.kind {
            EventKind::Join => {
                self.unseen.remove(id);
                self.roster.insert(id.to_owned(), event.meta.clone());
                frames::member_added(&self.channel, id, event.meta.as_ref())
            }
            EventKind::Leave => {
                if self.roster.remove(id).is_none() {
                    self.omitted = self.omitted.saturating_sub(1);
                }
                frames::member_removed(&self.channel, id)
            }
            EventKind::Update => {
                self.roster.insert(id.to_owned(), event.meta.clone());
                self.roster_text = None;
                return;
            }
            _ => return,
        };
        self.roster_text = None;
        let mut gone = false;
        for m in &mut self.listeners {
            if m.listener.member == event.member || m.lagging.is_some() {
                continue;
            }
            gone |= !push(m, Out::Text(text.clone()));
        }
        if gone {
            self.listeners.retain(|m| !m.listener.queue.is_closed());
        }
    }

    /// One socket of `member` counted in `unseen` left or gave up.
    fn unsee(&mut self, member: &str) {
        if let Some(n) = self.unseen.get_mut(member) {
            *n -= 1;
            if *n == 0 {
                self.unseen.remove(member);
            }
        }
    }

    /// Sends lagging sockets with room their roster again; closes those
    /// that stayed full past their stall limit.
    fn check_lagging(&mut self) {
        let now = Instant::now();
        let mut i = 0;
        while i < self.listeners.len() {
            let Some(since) = self.listeners[i].lagging else {
                i += 1;
                continue;
            };
            let q = &self.listeners[i].listener.queue;
            if q.is_closed() {
                self.listeners.swap_remove(i);
                continue;
            }
            // Half the queue free (and more than the reserve): room for
            // the roster and what follows.
            let room = q.capacity();
            if room > RESERVE && room >= q.max_capacity() / 2 {
                self.listeners[i].lagging = None;
                self.send_roster(i);
            } else if now.duration_since(since) >= self.listeners[i].listener.stall {
                let m = self.listeners.swap_remove(i);
                m.listener
                    .ender
                    .end(4100, "too slow: the send queue stayed full");
                continue;
            }
            i += 1;
        }
    }
}

/// Queues `out` for `m` unless only the reserve is left; one that does
/// not fit starts the lag. `false` when the socket is gone.
fn push(m: &mut Member, out: Out) -> bool {
    match m.listener.queue.try_send_leaving(out, RESERVE) {
        Ok(()) => true,
        Err(TrySendError::Closed(_)) => false,
        Err(TrySendError::Full(_)) => {
            m.lagging.get_or_insert_with(Instant::now);
            true
        }
    }
}

#[cfg(test)]
mod tests {
    use herenow_core::{Heartbeat, MemberId};
    use herenow_memory::MemoryStore;

    use super::*;

    const WAIT: Duration = Duration::from_secs(5);

    fn user(id: &str) -> MemberKey {
        MemberKey::user(MemberId::new(id).unwrap())
    }

    fn listener(number: u64, id: &str, cap: usize) -> (Listener, queue::Receiver<Out>) {
        let (queue, rx) = queue::channel(cap);
        let l = Listener {
            number,
            member: user(id),
            meta: None,
            queue,
            ender: Arc::new(Ender::default()),
            stall: Duration::from_secs(30),
        };
        (l, rx)
    }

    async fn next(rx: &mut queue::Receiver<Out>) -> serde_json::Value {
        match timeout(WAIT, rx.recv()).await.expect("a message in time") {
            Some(Out::Text(t)) => serde_json::from_str(&t).unwrap(),
            Some(Out::Pieces(p)) => serde_json::from_str(&p.to_text()).unwrap(),
            other => panic!("{other:?}"),
        }
    }

    fn ids(roster: &serde_json::Value) -> Vec<String> {
        let data: serde_json::Value =
            serde_json::from_str(roster["data"].as_str().unwrap()).unwrap();
        let mut ids: Vec<String> = data["presence"]["ids"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap().to_owned())
            .collect();
        ids.sort();
        ids
    }

    /// Waits until every feed ended (each ends on its own task).
    async fn all_ended(members: &Members) {
        let deadline = Instant::now() + WAIT;
        while members.len() > 0 {
            assert!(Instant::now() < deadline, "the feed never ended");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    async fn beat(store: &Arc<dyn PresenceStore>, space: &SpaceName, id: &str) {
        store
            .heartbeat(space, &[Heartbeat::now(user(id))])
            .await
            .unwrap();
    }

    #[tokio::test]
    async fn a_socket_gets_the_roster_then_the_events_and_after_lag_the_roster_again() {
        let store: Arc<dyn PresenceStore> = Arc::new(MemoryStore::default());
        let space = SpaceName::new("presence-x").unwrap();
        let members = Members::default();
        beat(&store, &space, "ann").await;
        let admitted = members
            .admit(&store, &space, "presence-x", &user("bob"), 10, WAIT)
            .await
            .unwrap();
        // A queue with room for the roster and two events past the reserve.
        let (bob, mut rx) = listener(1, "bob", RESERVE + 3);
        assert!(admitted.enter(bob, WAIT).await);
        let roster = next(&mut rx).await;
        assert_eq!(roster["event"], "pusher_internal:subscription_succeeded");
        assert_eq!(ids(&roster), ["ann", "bob"], "its own user included");
        // Its own user's join is not sent to it; another's is.
        beat(&store, &space, "bob").await;
        beat(&store, &space, "cy").await;
        let added = next(&mut rx).await;
        assert_eq!(added["event"], "pusher_internal:member_added", "{added}");
        assert!(added["data"].as_str().unwrap().contains("\"cy\""));
        // Past the queue's room: skipped, then the roster once drained.
        for id in ["d1", "d2", "d3", "d4"] {
            beat(&store, &space, id).await;
        }
        store.leave(&space, &[user("ann")]).await.unwrap();
        // Read as a client does: it ends with the exact roster.
        let want = ["bob", "cy", "d1", "d2", "d3", "d4"];
        let mut rosters = 0;
        loop {
            let m = next(&mut rx).await;
            if m["event"] == "pusher_internal:subscription_succeeded" {
                rosters += 1;
                if ids(&m) == want {
                    break;
                }
            }
        }
        assert_eq!(rosters, 1, "one roster, once the queue had room");
        // The last socket leaving ends the feed.
        members.leave(&space, 1);
        all_ended(&members).await;
    }

    #[tokio::test]
    async fn a_full_channel_refuses_a_new_user_and_admits_one_present() {
        let store: Arc<dyn PresenceStore> = Arc::new(MemoryStore::default());
        let space = SpaceName::new("presence-full").unwrap();
        let members = Members::default();
        beat(&store, &space, "ann").await;
        beat(&store, &space, "bob").await;
        let full = members
            .admit(&store, &space, "presence-full", &user("cy"), 2, WAIT)
            .await;
        assert!(matches!(full, Err(JoinError::Full(2))), "{:?}", full.err());
        let again = members
            .admit(&store, &space, "presence-full", &user("ann"), 2, WAIT)
            .await;
        assert!(again.is_ok());
        // Given up before entering: the feed ends with nobody in it.
        drop(again);
        all_ended(&members).await;
    }

    #[tokio::test]
    async fn users_admitted_before_the_store_tells_their_join_count_against_the_cap() {
        let store: Arc<dyn PresenceStore> = Arc::new(MemoryStore::default());
        let space = SpaceName::new("presence-one").unwrap();
        let members = Members::default();
        let admit = |who: &'static str| {
            let (store, space, members) = (store.clone(), space.clone(), &members);
            async move {
                members
                    .admit(&store, &space, "presence-one", &user(who), 1, WAIT)
                    .await
            }
        };
        // Ann is admitted and enters; the store has no join of hers yet
        // (nothing attached), as when her join is still on its way.
        let ann = admit("ann").await.unwrap();
        let (listener, mut rx) = listener(1, "ann", RESERVE + 4);
        assert!(ann.enter(listener, WAIT).await);
        next(&mut rx).await;
        assert!(matches!(admit("bob").await, Err(JoinError::Full(1))));
        // A second socket of hers is no new user.
        let again = admit("ann").await.unwrap();
        drop(again);
        // Her socket leaves before her join was seen: her place is free.
        members.leave(&space, 1);
        let bob = admit("bob").await.unwrap();
        // Admitted, not entered: counted until given up.
        assert!(matches!(admit("cy").await, Err(JoinError::Full(1))));
        drop(bob);
        assert!(admit("cy").await.is_ok());
    }
}
