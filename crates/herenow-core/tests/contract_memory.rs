//! The shared contract suite against the memory store.
#![cfg(feature = "contract")]

use std::sync::Arc;

use herenow_core::contract::{self, Factory};
use herenow_core::{MemoryStore, PresenceStore, SpaceConfig};

#[tokio::test]
async fn memory_store_keeps_the_contract() {
    let factory: Factory = Arc::new(|clock| {
        Box::pin(async move {
            Arc::new(MemoryStore::new(Arc::new(clock), SpaceConfig::default()))
                as Arc<dyn PresenceStore>
        })
    });
    contract::run_all(factory).await;
}

/// The same contract with every space split over three stripes: reads
/// merge the stripes, so a striped space answers as a whole one.
#[tokio::test]
async fn striped_memory_store_keeps_the_contract() {
    let factory: Factory = Arc::new(|clock| {
        Box::pin(async move {
            Arc::new(
                MemoryStore::new(Arc::new(clock), SpaceConfig::default()).with_space_stripes(3),
            ) as Arc<dyn PresenceStore>
        })
    });
    contract::run_all(factory).await;
}

/// The trait's default `online_friends` / `online_among`, as a store that
/// overrides nothing gets them: a thin wrapper that forwards only the
/// primitives to a memory store.
mod defaults {
    use async_trait::async_trait;
    use herenow_core::*;

    pub struct Primitives(pub MemoryStore);

    #[async_trait]
    impl PresenceStore for Primitives {
        fn name(&self) -> &'static str {
            "primitives"
        }
        fn now_ms(&self) -> Millis {
            self.0.now_ms()
        }
        async fn heartbeat(&self, s: &SpaceName, b: &[Heartbeat]) -> Result<HeartbeatReport> {
            self.0.heartbeat(s, b).await
        }
        async fn leave(&self, s: &SpaceName, m: &[MemberKey]) -> Result<u64> {
            self.0.leave(s, m).await
        }
        async fn status(&self, s: &SpaceName, m: &[MemberKey]) -> Result<Vec<MemberStatus>> {
            self.0.status(s, m).await
        }
        async fn list(&self, s: &SpaceName, q: &ListQuery) -> Result<Page> {
            self.0.list(s, q).await
        }
        async fn count(&self, s: &SpaceName, w: Option<Millis>) -> Result<Counts> {
            self.0.count(s, w).await
        }
        async fn config(&self, s: &SpaceName) -> Result<SpaceConfig> {
            self.0.config(s).await
        }
        async fn set_config(&self, s: &SpaceName, c: SpaceConfig) -> Result<()> {
            self.0.set_config(s, c).await
        }
        async fn spaces(&self, a: Option<&SpaceName>, l: usize) -> Result<Vec<SpaceSummary>> {
            self.0.spaces(a, l).await
        }
        async fn set_friends(&self, u: &MemberId, f: &[MemberId]) -> Result<u64> {
            self.0.set_friends(u, f).await
        }
        async fn add_friends(&self, u: &MemberId, f: &[MemberId]) -> Result<u64> {
            self.0.add_friends(u, f).await
        }
        async fn remove_friends(&self, u: &MemberId, f: &[MemberId]) -> Result<u64> {
            self.0.remove_friends(u, f).await
        }
        async fn friends(&self, u: &MemberId) -> Result<Vec<MemberId>> {
            self.0.friends(u).await
        }
        async fn subscribe(&self, s: &SpaceName) -> Result<Subscription> {
            self.0.subscribe(s).await
        }
        async fn tick(&self) -> Result<TickReport> {
            self.0.tick().await
        }
        // The capabilities are the memory store's own.
        fn live_connections(&self) -> Option<&dyn LiveConnections> {
            self.0.live_connections()
        }
        fn following(&self) -> Option<&dyn Following> {
            self.0.following()
        }
        fn webhook_outbox(&self) -> Option<&dyn WebhookOutbox> {
            self.0.webhook_outbox()
        }
        fn space_webhooks(&self) -> Option<&dyn SpaceWebhooks> {
            self.0.space_webhooks()
        }
        fn user_index(&self) -> Option<&dyn UserIndex> {
            self.0.user_index()
        }
    }
}

#[tokio::test]
async fn default_derived_queries_keep_the_contract() {
    let factory: Factory = Arc::new(|clock| {
        Box::pin(async move {
            let inner = MemoryStore::new(Arc::new(clock), SpaceConfig::default());
            Arc::new(defaults::Primitives(inner)) as Arc<dyn PresenceStore>
        })
    });
    contract::run_all(factory).await;
}

/// A store that implements the core trait alone (the memory store's
/// presence, none of its capabilities) passes the core part: what a new
/// backend starts from.
#[tokio::test]
async fn a_core_only_store_keeps_the_core_part() {
    let factory: Factory = Arc::new(|clock| {
        Box::pin(async move {
            let inner = MemoryStore::new(Arc::new(clock), SpaceConfig::default());
            Arc::new(core_only::Presence(inner)) as Arc<dyn PresenceStore>
        })
    });
    contract::run(factory, &[]).await;
}

/// The memory store's presence, forwarded, and nothing else.
mod core_only {
    use async_trait::async_trait;
    use herenow_core::*;

    pub struct Presence(pub MemoryStore);

    #[async_trait]
    impl PresenceStore for Presence {
        fn name(&self) -> &'static str {
            "core-only"
        }
        fn now_ms(&self) -> Millis {
            self.0.now_ms()
        }
        async fn heartbeat(&self, s: &SpaceName, b: &[Heartbeat]) -> Result<HeartbeatReport> {
            self.0.heartbeat(s, b).await
        }
        async fn leave(&self, s: &SpaceName, m: &[MemberKey]) -> Result<u64> {
            self.0.leave(s, m).await
        }
        async fn status(&self, s: &SpaceName, m: &[MemberKey]) -> Result<Vec<MemberStatus>> {
            self.0.status(s, m).await
        }
        async fn list(&self, s: &SpaceName, q: &ListQuery) -> Result<Page> {
            self.0.list(s, q).await
        }
        async fn count(&self, s: &SpaceName, w: Option<Millis>) -> Result<Counts> {
            self.0.count(s, w).await
        }
        async fn config(&self, s: &SpaceName) -> Result<SpaceConfig> {
            self.0.config(s).await
        }
        async fn set_config(&self, s: &SpaceName, c: SpaceConfig) -> Result<()> {
            self.0.set_config(s, c).await
        }
        async fn spaces(&self, a: Option<&SpaceName>, l: usize) -> Result<Vec<SpaceSummary>> {
            self.0.spaces(a, l).await
        }
        async fn set_friends(&self, u: &MemberId, f: &[MemberId]) -> Result<u64> {
            self.0.set_friends(u, f).await
        }
        async fn add_friends(&self, u: &MemberId, f: &[MemberId]) -> Result<u64> {
            self.0.add_friends(u, f).await
        }
        async fn remove_friends(&self, u: &MemberId, f: &[MemberId]) -> Result<u64> {
            self.0.remove_friends(u, f).await
        }
        async fn friends(&self, u: &MemberId) -> Result<Vec<MemberId>> {
            self.0.friends(u).await
        }
        async fn subscribe(&self, s: &SpaceName) -> Result<Subscription> {
            self.0.subscribe(s).await
        }
        async fn tick(&self) -> Result<TickReport> {
            self.0.tick().await
        }
    }
}
