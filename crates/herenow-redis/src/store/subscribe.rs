//! Event subscriptions: subscribe to every shard's channel first, then
//! read every shard's snapshot with the sequence number it reflects, so
//! the [`Router`](crate::events::Router) can drop what a snapshot already
//! shows and deliver the rest in order.

use redis::Value;
use tokio::sync::broadcast;

use herenow_core::store::sort_most_recent_first;
use herenow_core::{
    Error, EventReceiver, MemberId, MemberKey, MemberKind, MemberStatus, Millis, Result, SpaceName,
    Status, Subscription, limits,
};

use super::RedisStore;
use crate::reply::{array, bad_reply, int, meta_of, opt_string};
use crate::scripts;

impl RedisStore {
    /// [`PresenceStore::subscribe`](herenow_core::PresenceStore::subscribe):
    /// one subscriber id and one sender on every shard's channel. A
    /// failure part-way removes the subscriber everywhere; channels left
    /// without listeners are dropped by the next prune.
    pub(super) async fn subscribe(&self, space: &SpaceName) -> Result<Subscription> {
        let shards = self.ctx.keys.all(space);
        let (tx, rx) = broadcast::channel(limits::EVENT_QUEUE);
        let id = {
            let _guard = self.sub_lock.lock().await;
            self.prune_channels().await;
            let id = self.router.new_id();
            for k in &shards {
                let new = self
                    .router
                    .add_pending_as(id, &k.channel, space, tx.clone());
                if new {
                    let mut c = self.ctx.client.clone();
                    let channel = k.channel.clone();
                    if let Err(e) = self
                        .ctx
                        .io("subscribe", async move { c.subscribe(&channel).await })
                        .await
                    {
                        self.router.remove_channel(&k.channel);
                        self.router.remove_everywhere(id);
                        return Err(e);
                    }
                }
            }
            id
        };
        drop(tx);
        // Subscribed first, snapshot second: every event the snapshot does
        // not reflect arrives on the channel, and the sequence number says
        // which ones it does.
        let now = self.ctx.clock.now_ms();
        let snaps = futures::future::try_join_all(shards.iter().map(|k| async move {
            let v: Value = self
                .ctx
                .invoke(
                    "subscribe",
                    scripts::SNAPSHOT
                        .key(&k.zu)
                        .key(&k.zg)
                        .key(&k.meta)
                        .key(&k.state)
                        .key(&k.config)
                        .arg(now)
                        .arg(&self.ctx.defaults_args()[..])
                        .arg(limits::MAX_SNAPSHOT),
                )
                .await?;
            array(v)
        }))
        .await;
        let snaps = match snaps {
            Ok(v) => v,
            Err(e) => {
                self.router.remove_everywhere(id);
                return Err(e);
            }
        };
        let (present, seqs, mut snapshot) = match read_snapshots(snaps) {
            Ok(r) => r,
            Err(e) => {
                self.router.remove_everywhere(id);
                return Err(e);
            }
        };
        sort_most_recent_first(&mut snapshot);
        snapshot.truncate(limits::MAX_SNAPSHOT);
        for (k, seq) in shards.iter().zip(seqs) {
            if !self.router.activate(&k.channel, id, seq) {
                return Err(Error::Unavailable {
                    reason: "the event stream broke while subscribing".into(),
                    source: None,
                });
            }
        }
        Ok(Subscription {
            snapshot_omitted: present.saturating_sub(snapshot.len() as u64),
            snapshot,
            events: EventReceiver::new(rx),
        })
    }

    /// Unsubscribes from channels nobody listens to any more.
    pub(super) async fn prune_channels(&self) {
        for channel in self.router.take_idle() {
            let mut c = self.ctx.client.clone();
            // A failure only leaves a subscription whose messages are
            // ignored; the next prune does not retry it, which is harmless.
            let _ = self
                .ctx
                .io("unsubscribe", async move { c.unsubscribe(&channel).await })
                .await;
        }
    }
}

/// Reads the snapshot scripts' replies, one per shard: the members present
/// (all of them, counted), each shard's sequence number, and the members
/// sent (at most [`limits::MAX_SNAPSHOT`] per kind and shard).
fn read_snapshots(snaps: Vec<Vec<Value>>) -> Result<(u64, Vec<u64>, Vec<MemberStatus>)> {
    let mut present = 0u64;
    let mut seqs = Vec::with_capacity(snaps.len());
    let mut snapshot = Vec::new();
    for v in snaps {
        seqs.push(int(v.first())? as u64);
        present += int(v.get(1))? as u64 + int(v.get(2))? as u64;
        for (part, kind) in v.into_iter().skip(3).zip(MemberKind::ALL) {
            let flat = array(part)?;
            let mut it = flat.into_iter();
            while let Some(id) = it.next() {
                let id = opt_string(Some(id))?.ok_or_else(|| bad_reply("a member id"))?;
                let score = int(it.next().as_ref())? as Millis;
                let status = match int(it.next().as_ref())? {
                    1 => Status::Away,
                    _ => Status::Online,
                };
                let meta = meta_of(it.next())?;
                snapshot.push(MemberStatus {
                    member: MemberKey {
                        kind,
                        id: MemberId::new(&id).map_err(|_| bad_reply("a stored member id"))?,
                    },
                    status,
                    last_seen_ms: Some(score),
                    meta,
                });
            }
        }
    }
    Ok((present, seqs, snapshot))
}
