//! [`Relay`](herenow_core::Relay) on Redis ([`crate::relay`]): the first
//! feed subscribes the store to the relay channel; a message is one
//! `PUBLISH`.

use redis::Value;

use herenow_core::Result;
use herenow_core::relay::{RelayFeed, check_relay};

use super::RedisStore;
use super::follow::subscribe;
use crate::relay::encode;

impl RedisStore {
    /// [`Relay::relay_feed`](herenow_core::Relay::relay_feed): listens on
    /// the relay channel from the first feed on. The feed is opened
    /// before the subscription is made, so it misses nothing published
    /// once this call returns.
    pub(super) async fn relay_feed(&self) -> Result<RelayFeed> {
        let feed = self.relays.feed();
        if !self.relays.is_listening() {
            // Under the follows' lock, as the restorer subscribes again.
            let _order = self.follows.order.lock().await;
            if !self.relays.is_listening() {
                subscribe(&self.ctx, &[self.relays.channel().to_owned()]).await?;
                self.relays.listen();
            }
        }
        Ok(feed)
    }

    /// [`Relay::relay_send`](herenow_core::Relay::relay_send): one
    /// `PUBLISH` on the relay channel.
    pub(super) async fn relay_send(&self, topic: &str, payload: &[u8]) -> Result<()> {
        check_relay(topic, payload)?;
        let mut cmd = redis::cmd("PUBLISH");
        cmd.arg(self.relays.channel()).arg(encode(topic, payload));
        self.ctx.query::<Value>("relay", &cmd).await?;
        Ok(())
    }
}
