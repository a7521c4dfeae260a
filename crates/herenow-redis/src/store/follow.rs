//! Following users ([`crate::follow`]): counted subscriptions to users'
//! channels, the `friends` word after friend-set writes, and the restorer
//! that subscribes again after the link to Redis dropped and then makes
//! every feed lag.

use std::sync::Arc;

use redis::Value;
use tokio::sync::watch;

use herenow_core::store::check_batch;
use herenow_core::{MemberId, Result, UserFeed};

use super::{RedisStore, at_most};
use crate::ctx::Ctx;
use crate::follow::{ANNOUNCE, CHANNELS_PER_COMMAND, Follows};
use crate::relay::Relays;

/// Most [`ANNOUNCE`] calls in flight at once (erasing a user listed by
/// very many).
const ANNOUNCING: usize = 16;

impl RedisStore {
    /// [`Following::user_feed`](herenow_core::Following::user_feed).
    pub(super) fn user_feed(&self) -> Result<UserFeed> {
        Ok(self.follows.feed())
    }

    /// [`Following::follow`](herenow_core::Following::follow):
    /// subscribes to the channels of the users followed now and not
    /// before. On failure nothing stays counted (a retry counts once); a
    /// subscription that reached Redis anyway only brings messages that
    /// are dropped.
    pub(super) async fn follow(&self, users: &[MemberId]) -> Result<()> {
        check_batch(users.len())?;
        let _order = self.follows.order.lock().await;
        let new = self.follows.add(users);
        if let Err(e) = subscribe(&self.ctx, &new).await {
            let gone = self.follows.remove(users);
            let _ = unsubscribe(&self.ctx, &gone).await;
            return Err(e);
        }
        Ok(())
    }

    /// [`Following::unfollow`](herenow_core::Following::unfollow):
    /// unsubscribes from the channels of users no longer followed. Their
    /// messages are dropped from the moment their count reaches zero, so
    /// an unsubscribe that fails costs traffic, never a wrong change: it
    /// is logged and the call succeeds.
    pub(super) async fn unfollow(&self, users: &[MemberId]) -> Result<()> {
        check_batch(users.len())?;
        let _order = self.follows.order.lock().await;
        let gone = self.follows.remove(users);
        if let Err(e) = unsubscribe(&self.ctx, &gone).await {
            tracing::debug!(error = %e, "could not unsubscribe from users' channels");
        }
        Ok(())
    }

    /// Users followed now by this store (for metrics and tests).
    pub fn followed_users(&self) -> usize {
        self.follows.followed()
    }

    /// Says `friends` on each of `owners`' channels: their friend sets
    /// changed. Every server that follows one of them hears it.
    pub(super) async fn announce_friends(&self, owners: &[&str]) -> Result<()> {
        let calls: Vec<_> = owners
            .chunks(CHANNELS_PER_COMMAND)
            .map(|chunk| {
                let mut inv = ANNOUNCE.prepare_invoke();
                for o in chunk {
                    inv.arg(self.ctx.keys.user_channel(o));
                }
                async move { self.ctx.invoke::<Value>("friends", &inv).await }
            })
            .collect();
        let _: Vec<Value> = at_most(ANNOUNCING, calls).await?;
        Ok(())
    }
}

/// Subscribes to `channels`, at most [`CHANNELS_PER_COMMAND`] a command,
/// all sent at once.
pub(super) async fn subscribe(ctx: &Ctx, channels: &[String]) -> Result<()> {
    futures::future::try_join_all(channels.chunks(CHANNELS_PER_COMMAND).map(|chunk| {
        let mut c = ctx.client.clone();
        ctx.io("follow", async move { c.subscribe_users(chunk).await })
    }))
    .await?;
    Ok(())
}

/// Undoes [`subscribe`].
async fn unsubscribe(ctx: &Ctx, channels: &[String]) -> Result<()> {
    futures::future::try_join_all(channels.chunks(CHANNELS_PER_COMMAND).map(|chunk| {
        let mut c = ctx.client.clone();
        ctx.io("unfollow", async move { c.unsubscribe_users(chunk).await })
    }))
    .await?;
    Ok(())
}

/// The restorer, one task per store: each time the link to Redis drops,
/// subscribes to every followed user's channel (and the relay channel,
/// once listened to) again, with the replayer's backoff until Redis
/// answers, then makes every feed lag, user feeds and relay feeds, so
/// their readers catch up through a link that misses nothing any more.
/// Stops when the store stops (or is dropped).
pub(super) async fn restore(
    ctx: Arc<Ctx>,
    follows: Arc<Follows>,
    relays: Arc<Relays>,
    mut stop: watch::Receiver<bool>,
) {
    let most = ctx.opts.backoff_max.max(ctx.opts.backoff_min);
    loop {
        tokio::select! {
            () = follows.broken() => {}
            () = stopping(&mut stop) => return,
        }
        let mut wait = ctx.opts.backoff_min;
        loop {
            let done = {
                let _order = follows.order.lock().await;
                let mut channels = follows.channels();
                if relays.is_listening() {
                    channels.push(relays.channel().to_owned());
                }
                subscribe(&ctx, &channels).await
            };
            match done {
                Ok(()) => {
                    follows.lost();
                    relays.lost();
                    break;
                }
                Err(e) => {
                    tracing::debug!(error = %e, "could not subscribe to users' channels again");
                }
            }
            tokio::select! {
                () = tokio::time::sleep(wait) => {}
                () = stopping(&mut stop) => return,
            }
            wait = (wait * 2).min(most);
        }
    }
}

/// Returns once the store stops: shut down, or dropped.
async fn stopping(stop: &mut watch::Receiver<bool>) {
    // An error means the store was dropped.
    let _ = stop.wait_for(|stopped| *stopped).await;
}
