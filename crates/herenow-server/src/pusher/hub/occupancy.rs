//! [`Occupancy`]: this server's public and private channels in the store,
//! so their subscription counts, the channel list and the webhooks are the
//! same whichever server is asked.
//!
//! For every public or private channel (encrypted ones included) some
//! local socket subscribes to, the server holds one live connection
//! ([`Pusher::occupancy_conn`](super::Pusher::occupancy_conn)) of the guest
//! named by the channel in the app's occupancy space
//! (`pusher-channels:{app_id}`), its metadata `{"subscriptions":N}`: this
//! server's sockets on the channel. A channel's subscription count is the
//! sum over its connections; it is occupied while it has one, so the
//! guest's `join` and `leave` are `channel_occupied` / `channel_vacated`.
//!
//! [`sync`](Occupancy::sync) writes a channel's count after its local
//! subscribers changed, one write at a time per server: each covers every
//! change before it (a burst of subscriptions is a few writes), and none
//! overtakes an older one (a detach landing after the attach that followed
//! it). A socket waits for it before it is told it subscribed, so a count
//! read after that includes it. [`refresh`](Occupancy::refresh) attaches
//! every held connection again (they expire a TTL after their server
//! stops) and retries what failed.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use herenow_core::{Attach, ConnId, MemberId, MemberKey, Metadata, PresenceStore, SpaceName};
use tokio_util::sync::CancellationToken;

use super::Channels;

/// A channel of one app.
type Key = (Arc<str>, Box<str>);

/// What this server wrote of its channels.
#[derive(Default)]
struct Written {
    /// The count the store holds for this server, by channel, and the
    /// local changes it reflects ([`Channels::changes`]).
    counts: HashMap<Key, (usize, u64)>,
    /// Channels whose last write failed: tried again by the refresh.
    failed: HashSet<Key>,
    /// Channels last written vacant (detached), with the local changes
    /// that reflects; forgotten at each refresh.
    vacant: HashMap<Key, u64>,
}

/// This server's channel counts in the store; one write at a time.
#[derive(Default)]
pub(crate) struct Occupancy {
    written: tokio::sync::Mutex<Written>,
}

/// Where a server's channel counts go, and how often they are refreshed.
#[derive(Clone)]
pub(crate) struct OccupancyWrites {
    pub(crate) store: Arc<dyn PresenceStore>,
    pub(crate) ttl_ms: u64,
    /// The longest one store call may take.
    pub(crate) wait: Duration,
    pub(crate) refresh_every: Duration,
    pub(crate) stop: CancellationToken,
}

/// Where a channel's connection is written, and how.
pub(crate) struct OccupancyTarget<'a> {
    pub(crate) writes: &'a OccupancyWrites,
    /// The app's occupancy space.
    pub(crate) space: &'a str,
    /// This server's connection for the channel.
    pub(crate) conn: &'a str,
}

impl Occupancy {
    /// Writes `channel`'s local count unless a write since local change
    /// number `seen` ([`Channels::changes`], read after the caller's
    /// change) covered it. A failed write is logged and tried again at the
    /// next refresh.
    pub(crate) async fn sync(
        &self,
        channels: &Channels,
        app: &Arc<str>,
        channel: &str,
        seen: u64,
        target: &OccupancyTarget<'_>,
    ) {
        let mut written = self.written.lock().await;
        let key = (app.clone(), Box::<str>::from(channel));
        let covered = written.counts.get(&key).is_some_and(|&(_, at)| at >= seen)
            || written.vacant.get(&key).is_some_and(|&at| at >= seen);
        if covered && !written.failed.contains(&key) {
            return;
        }
        write(&mut written, channels, key, target, false).await;
    }

    /// Attaches every held connection again and retries failed writes;
    /// `target_of` gives where each channel's connection goes.
    pub(crate) async fn refresh(
        &self,
        channels: &Channels,
        target_of: impl Fn(&str, &str) -> Option<(String, String)>,
        writes: &OccupancyWrites,
    ) {
        let mut written = self.written.lock().await;
        written.vacant.clear();
        let keys: Vec<Key> = written
            .counts
            .keys()
            .chain(written.failed.iter())
            .cloned()
            .collect();
        for key in keys {
            let Some((space, conn)) = target_of(&key.0, &key.1) else {
                continue;
            };
            let target = OccupancyTarget {
                writes,
                space: &space,
                conn: &conn,
            };
            write(&mut written, channels, key, &target, true).await;
        }
    }
}

/// Writes `key`'s local count: attached with it (also when unchanged, if
/// `again`), or detached at zero.
async fn write(
    written: &mut Written,
    channels: &Channels,
    key: Key,
    target: &OccupancyTarget<'_>,
    again: bool,
) {
    let (n, at) = channels.count_at(&key.0, &key.1);
    let held = written.counts.get(&key).map_or(0, |&(n, _)| n);
    if n == held && !written.failed.contains(&key) && !(again && n > 0) {
        return;
    }
    let (Ok(space), Ok(id), Ok(conn)) = (
        SpaceName::new(target.space),
        MemberId::new(&key.1),
        ConnId::new(target.conn),
    ) else {
        tracing::warn!(
            channel = &*key.1,
            "a channel's occupancy cannot be named in the store"
        );
        return;
    };
    let member = MemberKey::guest(id);
    let Some(live) = target.writes.store.live_connections() else {
        return;
    };
    let call = async {
        if n == 0 {
            live.detach(&space, &member, &conn).await.map(drop)
        } else {
            let meta = Metadata::from_json(&format!("{{\"subscriptions\":{n}}}"))
                .unwrap_or_else(|_| unreachable!("a small JSON object is valid metadata"));
            let attach = Attach {
                member,
                conn,
                meta: Some(meta),
                invisible: false,
                ttl_ms: target.writes.ttl_ms,
            };
            live.attach(&space, &attach).await.map(drop)
        }
    };
    let done = match tokio::time::timeout(target.writes.wait, call).await {
        Ok(Ok(())) => true,
        Ok(Err(e)) => {
            tracing::debug!(channel = &*key.1, error = %e, "a channel's count was not written; retried at the next refresh");
            false
        }
        Err(_) => {
            tracing::debug!(
                channel = &*key.1,
                "a channel's count took longer than the request timeout; retried at the next refresh"
            );
            false
        }
    };
    if !done {
        written.failed.insert(key);
        return;
    }
    written.failed.remove(&key);
    if n == 0 {
        written.counts.remove(&key);
        written.vacant.insert(key, at);
    } else {
        written.vacant.remove(&key);
        written.counts.insert(key, (n, at));
    }
}

/// A channel's subscriptions on every server: the sum of its
/// connections' counts (`None` from a store without live connections).
pub(crate) async fn count(
    store: &Arc<dyn PresenceStore>,
    space: &str,
    channel: &str,
) -> herenow_core::Result<Option<usize>> {
    let (Ok(space), Ok(id)) = (SpaceName::new(space), MemberId::new(channel)) else {
        return Ok(Some(0));
    };
    let Some(live) = store.live_connections() else {
        return Ok(None);
    };
    let conns = live.connections(&space, &[MemberKey::guest(id)]).await?;
    Ok(Some(
        conns
            .iter()
            .flatten()
            .filter_map(|c| c.meta.as_ref())
            .map(|m| subscriptions_of(m.as_json()))
            .sum(),
    ))
}

/// The count a connection's metadata holds.
fn subscriptions_of(json: &str) -> usize {
    #[derive(serde::Deserialize)]
    struct Count {
        subscriptions: usize,
    }
    serde_json::from_str::<Count>(json).map_or(0, |c| c.subscriptions)
}

#[cfg(test)]
mod tests {
    use herenow_core::{ManualClock, SpaceConfig};
    use herenow_memory::MemoryStore;

    use super::super::{Ender, Subscriber};
    use super::*;
    use crate::socket::queue;

    const SPACE: &str = "pusher-channels:1";
    const CONN: &str = "o1.abc";

    fn subscriber(n: u64) -> Subscriber {
        // Only counted here: nothing is sent to it.
        let (tx, _) = queue::channel(4);
        Subscriber {
            socket_id: Arc::from(format!("1.{n}")),
            queue: tx,
            ender: Arc::new(Ender::default()),
        }
    }

    /// Sockets joining and leaving at once, each syncing after its change
    /// as a session does: the store ends with the exact count, then none.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_changes_end_with_the_exact_count() {
        let clock = ManualClock::new(1_700_000_000_000);
        let store: Arc<dyn PresenceStore> =
            Arc::new(MemoryStore::new(Arc::new(clock), SpaceConfig::default()));
        let channels = Arc::new(Channels::default());
        let occupancy = Arc::new(Occupancy::default());
        let app: Arc<str> = Arc::from("1");
        let change = |join: bool, n: u64| {
            let (store, channels, occupancy, app) = (
                store.clone(),
                channels.clone(),
                occupancy.clone(),
                app.clone(),
            );
            tokio::spawn(async move {
                if join {
                    channels.join(&app, "news", n, subscriber(n));
                } else {
                    channels.leave(&app, "news", n);
                }
                let seen = channels.changes();
                let writes = OccupancyWrites {
                    store,
                    ttl_ms: 60_000,
                    wait: Duration::from_secs(5),
                    refresh_every: Duration::from_secs(60),
                    stop: CancellationToken::new(),
                };
                let target = OccupancyTarget {
                    writes: &writes,
                    space: SPACE,
                    conn: CONN,
                };
                occupancy.sync(&channels, &app, "news", seen, &target).await;
            })
        };
        let joins: Vec<_> = (0..200).map(|n| change(true, n)).collect();
        for j in joins {
            j.await.unwrap();
        }
        assert_eq!(count(&store, SPACE, "news").await.unwrap(), Some(200));
        let leaves: Vec<_> = (0..150).map(|n| change(false, n)).collect();
        for l in leaves {
            l.await.unwrap();
        }
        assert_eq!(count(&store, SPACE, "news").await.unwrap(), Some(50));
        let leaves: Vec<_> = (150..200).map(|n| change(false, n)).collect();
        for l in leaves {
            l.await.unwrap();
        }
        assert_eq!(count(&store, SPACE, "news").await.unwrap(), Some(0));
        let sub = store
            .subscribe(&SpaceName::new(SPACE).unwrap())
            .await
            .unwrap();
        assert!(sub.snapshot.is_empty(), "the channel is vacant");
    }

    #[test]
    fn a_connections_count_is_read_back() {
        assert_eq!(subscriptions_of(r#"{"subscriptions":12}"#), 12);
        assert_eq!(subscriptions_of(r#"{"other":1}"#), 0);
        assert_eq!(subscriptions_of("[]"), 0);
    }
}
