//! The memory store's [`Relay`]: the store is one process, so a relayed
//! message goes straight to every feed open on it (several servers in one
//! process sharing the store each get it).

use async_trait::async_trait;

use herenow_core::capability::Relay;
use herenow_core::error::Result;
use herenow_core::relay::RelayFeed;

use super::MemoryStore;

#[async_trait]
impl Relay for MemoryStore {
    async fn relay_feed(&self) -> Result<RelayFeed> {
        Ok(self.relay.feed())
    }

    async fn relay_send(&self, topic: &str, payload: &[u8]) -> Result<()> {
        self.relay.relay(topic, payload)
    }
}
