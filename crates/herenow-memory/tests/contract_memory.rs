//! The shared contract suite against the memory store.

use std::sync::Arc;

use herenow_core::contract::{self, Factory};
use herenow_core::{PresenceStore, SpaceConfig};
use herenow_memory::MemoryStore;

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

/// A memory store behind a thin wrapper that forwards only the core
/// primitives, so the trait's default `online_friends` / `online_among`
/// are what callers get; with `capabilities` it also forwards the memory
/// store's capabilities, without them it is a store of the core trait
/// alone.
mod forward {
    use async_trait::async_trait;

    use herenow_core::*;
    use herenow_memory::MemoryStore;

    pub struct Primitives {
        pub inner: MemoryStore,
        pub capabilities: bool,
    }

    impl Primitives {
        fn inner_if_offered(&self) -> Option<&MemoryStore> {
            self.capabilities.then_some(&self.inner)
        }
    }

    #[async_trait]
    impl PresenceStore for Primitives {
        fn name(&self) -> &'static str {
            if self.capabilities {
                "primitives"
            } else {
                "core-only"
            }
        }
        fn now_ms(&self) -> Millis {
            self.inner.now_ms()
        }
        async fn heartbeat(&self, s: &SpaceName, b: &[Heartbeat]) -> Result<HeartbeatReport> {
            self.inner.heartbeat(s, b).await
        }
        async fn leave(&self, s: &SpaceName, m: &[MemberKey]) -> Result<u64> {
            self.inner.leave(s, m).await
        }
        async fn status(&self, s: &SpaceName, m: &[MemberKey]) -> Result<Vec<MemberStatus>> {
            self.inner.status(s, m).await
        }
        async fn list(&self, s: &SpaceName, q: &ListQuery) -> Result<Page> {
            self.inner.list(s, q).await
        }
        async fn count(&self, s: &SpaceName, w: Option<Millis>) -> Result<Counts> {
            self.inner.count(s, w).await
        }
        async fn config(&self, s: &SpaceName) -> Result<SpaceConfig> {
            self.inner.config(s).await
        }
        async fn set_config(&self, s: &SpaceName, c: SpaceConfig) -> Result<()> {
            self.inner.set_config(s, c).await
        }
        async fn spaces(&self, a: Option<&SpaceName>, l: usize) -> Result<Vec<SpaceSummary>> {
            self.inner.spaces(a, l).await
        }
        async fn set_friends(&self, u: &MemberId, f: &[MemberId]) -> Result<u64> {
            self.inner.set_friends(u, f).await
        }
        async fn add_friends(&self, u: &MemberId, f: &[MemberId]) -> Result<u64> {
            self.inner.add_friends(u, f).await
        }
        async fn remove_friends(&self, u: &MemberId, f: &[MemberId]) -> Result<u64> {
            self.inner.remove_friends(u, f).await
        }
        async fn friends(&self, u: &MemberId) -> Result<Vec<MemberId>> {
            self.inner.friends(u).await
        }
        async fn subscribe(&self, s: &SpaceName) -> Result<Subscription> {
            self.inner.subscribe(s).await
        }
        async fn tick(&self) -> Result<TickReport> {
            self.inner.tick().await
        }
        fn live_connections(&self) -> Option<&dyn LiveConnections> {
            self.inner_if_offered()?.live_connections()
        }
        fn following(&self) -> Option<&dyn Following> {
            self.inner_if_offered()?.following()
        }
        fn webhook_outbox(&self) -> Option<&dyn WebhookOutbox> {
            self.inner_if_offered()?.webhook_outbox()
        }
        fn space_webhooks(&self) -> Option<&dyn SpaceWebhooks> {
            self.inner_if_offered()?.space_webhooks()
        }
        fn user_index(&self) -> Option<&dyn UserIndex> {
            self.inner_if_offered()?.user_index()
        }
        fn relay(&self) -> Option<&dyn Relay> {
            self.inner_if_offered()?.relay()
        }
    }
}

/// The trait's default `online_friends` / `online_among`, as a store that
/// overrides nothing gets them.
#[tokio::test]
async fn default_derived_queries_keep_the_contract() {
    let factory: Factory = Arc::new(|clock| {
        Box::pin(async move {
            let inner = MemoryStore::new(Arc::new(clock), SpaceConfig::default());
            Arc::new(forward::Primitives {
                inner,
                capabilities: true,
            }) as Arc<dyn PresenceStore>
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
            Arc::new(forward::Primitives {
                inner,
                capabilities: false,
            }) as Arc<dyn PresenceStore>
        })
    });
    contract::run(factory, &[]).await;
}
