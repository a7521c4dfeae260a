//! What the Pusher protocol's sockets share in one server: the apps, the
//! local sockets' channels (`channels`) and their counts in the store
//! (`occupancy`), the sockets (`sockets`) and their ids, the protocol's
//! messages (`frames`), one feed per presence channel (`members`), and
//! the relay between servers (`relayed`), read by one task per server.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use arc_swap::ArcSwap;
use herenow_core::{PresenceStore, RecvError};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::pusher::config::{PusherApp, PusherConfig};

mod apps;
mod channels;
pub(crate) mod frames;
mod members;
mod occupancy;
mod quota;
mod relayed;
mod sockets;

pub use apps::AppsChange;
pub use channels::Channels;
pub(crate) use channels::{QUEUE, RESERVE, Subscriber};
pub(crate) use members::{JoinError, Listener, Members};
pub(crate) use occupancy::OccupancyWrites;
pub(crate) use occupancy::count as occupancy_count;
use occupancy::{Occupancy, OccupancyTarget};
pub(crate) use quota::{Quota, Slot};
pub(crate) use relayed::{Relayed, TOPIC};
pub(crate) use sockets::{Ender, Sockets};

/// The Pusher side of a server: its apps and the local sockets'
/// channels. `None` in `AppState` when no app is configured.
pub struct Pusher {
    /// The apps as served now: swapped whole by a reload (`apps`).
    apps: ArcSwap<Vec<Arc<PusherApp>>>,
    /// Bumped by every swap of `apps`, so a socket sees at the cost of one
    /// load whether its app's settings may have changed.
    apps_version: AtomicU64,
    /// Each app's sockets on this server, against its `max_connections`.
    pub(crate) quota: Quota,
    pub(crate) channels: Channels,
    /// Every socket, for what closes sockets from elsewhere.
    pub(crate) sockets: Sockets,
    /// The presence channels' member feeds.
    pub(crate) members: Members,
    /// This server's public and private channels' counts in the store.
    occupancy: Occupancy,
    /// Whether the task refreshing them runs.
    occupancy_refresh: std::sync::Once,
    /// Whether this server reads its relay feed (`None`: not started;
    /// `Some(false)`: opening it; `Some(true)`: reading).
    relay: parking_lot::Mutex<Option<watch::Receiver<bool>>>,
    /// This process's random part of socket ids.
    prefix: u64,
    next: AtomicU64,
}

impl Pusher {
    /// The Pusher side for `config`; `None` when it names no app.
    pub fn new(config: &PusherConfig) -> Option<Arc<Self>> {
        if !config.is_enabled() {
            return None;
        }
        Some(Arc::new(Self {
            apps: ArcSwap::from_pointee(config.served_apps().into_iter().map(Arc::new).collect()),
            apps_version: AtomicU64::new(0),
            quota: Quota::default(),
            channels: Channels::default(),
            sockets: Sockets::default(),
            members: Members::default(),
            occupancy: Occupancy::default(),
            occupancy_refresh: std::sync::Once::new(),
            relay: parking_lot::Mutex::new(None),
            prefix: random_prefix(),
            next: AtomicU64::new(1),
        }))
    }

    /// A number for a new socket, unique in this process.
    pub(crate) fn next_socket(&self) -> u64 {
        self.next.fetch_add(1, Ordering::Relaxed)
    }

    /// Socket `number`'s id, `N.M` as the protocol has it: this process's
    /// random number and the socket's, so servers sharing a store (and a
    /// restarted server) do not hand out the same id.
    pub(crate) fn socket_id(&self, number: u64) -> String {
        format!("{}.{number}", self.prefix)
    }

    /// The live connection that stands for this server's sockets on
    /// `channel` in its app's occupancy space: one per server and
    /// channel (however many local sockets subscribe), `o`, this
    /// process's number and 96 bits of the channel name's SHA-256.
    pub(crate) fn occupancy_conn(&self, channel: &str) -> String {
        use sha2::{Digest, Sha256};
        let digest = Sha256::digest(channel.as_bytes());
        format!("o{}.{}", self.prefix, super::sign::hex(&digest[..12]))
    }

    /// The app with this public key, as served now.
    pub(crate) fn by_key(&self, key: &str) -> Option<Arc<PusherApp>> {
        self.apps.load().iter().find(|a| a.key == key).cloned()
    }

    /// The app with this id, as served now.
    pub(crate) fn by_id(&self, id: &str) -> Option<Arc<PusherApp>> {
        self.apps.load().iter().find(|a| a.id == id).cloned()
    }

    /// A number that changes whenever the apps' settings may have (a
    /// reload): a socket holding its app looks it up again when it moved.
    pub(crate) fn apps_version(&self) -> u64 {
        self.apps_version.load(Ordering::Acquire)
    }

    /// Starts reading the relay feed of `store` unless started, and waits
    /// (at most `wait`) until the feed is open, so nothing relayed from
    /// now on is missed here. `false` when it is not open in time (the
    /// store is unavailable). The store has a relay: `Backend::check`
    /// refuses Pusher apps on one without.
    pub(crate) async fn relay_ready(
        self: &Arc<Self>,
        store: &Arc<dyn PresenceStore>,
        stop: &CancellationToken,
        wait: Duration,
    ) -> bool {
        let mut ready = {
            let mut relay = self.relay.lock();
            match &*relay {
                Some(rx) => rx.clone(),
                None => {
                    let (tx, rx) = watch::channel(false);
                    tokio::spawn(read_relay(self.clone(), store.clone(), stop.clone(), tx));
                    *relay = Some(rx.clone());
                    rx
                }
            }
        };
        matches!(
            tokio::time::timeout(wait, ready.wait_for(|r| *r)).await,
            Ok(Ok(_))
        )
    }

    /// Sends `msg` to every server sharing the store, this one included,
    /// through the relay, once.
    pub(crate) async fn send(
        &self,
        store: &Arc<dyn PresenceStore>,
        wait: Duration,
        msg: Relayed,
    ) -> herenow_core::Result<()> {
        let relay = store
            .relay()
            .ok_or_else(|| store.lacks(herenow_core::Capability::Relay))?;
        // This server's own feed is open already if it has sockets (each
        // waits for it); one without sockets has nobody to deliver to.
        match tokio::time::timeout(wait, relay.relay_send(TOPIC, &msg.encode())).await {
            Ok(r) => r,
            Err(_) => Err(herenow_core::Error::Unavailable {
                reason: "the store took longer than the request timeout".into(),
                source: None,
            }),
        }
    }

    /// Writes this server's count of `channel` (public or private) of
    /// `app` to the store, after its local subscribers changed (see
    /// `occupancy`); starts the refresh of every count the first time.
    pub(crate) async fn sync_occupancy(
        self: &Arc<Self>,
        app: &PusherApp,
        channel: &str,
        writes: &OccupancyWrites,
    ) {
        // Read before any wait: at least the number of the caller's change.
        let seen = self.channels.changes();
        self.occupancy_refresh.call_once(|| {
            tokio::spawn(refresh_occupancy(self.clone(), writes.clone()));
        });
        let space = app.occupancy_space();
        let conn = self.occupancy_conn(channel);
        let target = OccupancyTarget {
            writes,
            space: &space,
            conn: &conn,
        };
        let app_id: Arc<str> = Arc::from(app.id.as_str());
        self.occupancy
            .sync(&self.channels, &app_id, channel, seen, &target)
            .await;
    }
}

/// The task that attaches this server's channel counts again every
/// refresh interval, until `stop`.
async fn refresh_occupancy(pusher: Arc<Pusher>, writes: OccupancyWrites) {
    loop {
        tokio::select! {
            () = writes.stop.cancelled() => return,
            () = tokio::time::sleep(writes.refresh_every) => {}
        }
        let target_of = |app_id: &str, channel: &str| {
            pusher
                .by_id(app_id)
                .map(|app| (app.occupancy_space(), pusher.occupancy_conn(channel)))
        };
        pusher
            .occupancy
            .refresh(&pusher.channels, target_of, &writes)
            .await;
    }
}

/// The task that reads this server's relay feed until `stop`: opens it
/// (again after a failure, with a pause), says so on `ready`, and
/// delivers each Pusher message; after a lag every socket is closed.
async fn read_relay(
    pusher: Arc<Pusher>,
    store: Arc<dyn PresenceStore>,
    stop: CancellationToken,
    ready: watch::Sender<bool>,
) {
    let Some(relay) = store.relay() else {
        return;
    };
    loop {
        let mut feed = tokio::select! {
            () = stop.cancelled() => return,
            feed = relay.relay_feed() => match feed {
                Ok(feed) => feed,
                Err(e) => {
                    tracing::warn!(error = %e, "cannot open the Pusher relay feed; trying again");
                    tokio::select! {
                        () = stop.cancelled() => return,
                        () = tokio::time::sleep(Duration::from_millis(500)) => continue,
                    }
                }
            },
        };
        ready.send_replace(true);
        loop {
            let next = tokio::select! {
                () = stop.cancelled() => return,
                next = feed.recv() => next,
            };
            match next {
                Ok(m) if m.topic == TOPIC => match Relayed::decode(&m.payload) {
                    Some(msg) => pusher.deliver(msg),
                    None => tracing::warn!("an unreadable Pusher message on the relay"),
                },
                Ok(_) => {}
                Err(RecvError::Lagged(_)) => {
                    let (code, reason) = relayed::LAG_CLOSE;
                    tracing::warn!(
                        sockets = pusher.sockets.len(),
                        "the Pusher relay feed lagged; closing this server's sockets"
                    );
                    pusher.sockets.end_all(code, reason);
                }
                Err(RecvError::Closed) => break,
            }
        }
    }
}

/// A random number of up to 15 digits.
fn random_prefix() -> u64 {
    u64::from_le_bytes(crate::socket::random_bytes()) % 1_000_000_000_000_000
}
