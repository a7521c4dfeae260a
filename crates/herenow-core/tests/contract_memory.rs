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
        async fn attach(&self, s: &SpaceName, a: &Attach) -> Result<AttachReport> {
            self.0.attach(s, a).await
        }
        async fn detach(&self, s: &SpaceName, m: &MemberKey, c: &ConnId) -> Result<DetachReport> {
            self.0.detach(s, m, c).await
        }
        async fn connections(
            &self,
            s: &SpaceName,
            m: &[MemberKey],
        ) -> Result<Vec<Vec<Connection>>> {
            self.0.connections(s, m).await
        }
        async fn subscribe(&self, s: &SpaceName) -> Result<Subscription> {
            self.0.subscribe(s).await
        }
        async fn tick(&self) -> Result<TickReport> {
            self.0.tick().await
        }
        async fn seen_anywhere(&self, u: &[MemberId]) -> Result<Vec<SeenAnywhere>> {
            self.0.seen_anywhere(u).await
        }
        async fn erase_user(&self, u: &MemberId) -> Result<ErasureReport> {
            self.0.erase_user(u).await
        }
        fn user_feed(&self) -> Result<UserFeed> {
            self.0.user_feed()
        }
        async fn follow(&self, u: &[MemberId]) -> Result<()> {
            self.0.follow(u).await
        }
        async fn unfollow(&self, u: &[MemberId]) -> Result<()> {
            self.0.unfollow(u).await
        }
        async fn outbox_open(&self, o: OutboxOptions) -> Result<()> {
            self.0.outbox_open(o).await
        }
        async fn outbox_claim(&self, c: &str, n: usize, idle: Millis) -> Result<Vec<OutboxEvent>> {
            self.0.outbox_claim(c, n, idle).await
        }
        async fn outbox_ack(&self, ids: &[String]) -> Result<()> {
            self.0.outbox_ack(ids).await
        }
        async fn outbox_stats(&self) -> Result<OutboxStats> {
            self.0.outbox_stats().await
        }
        async fn space_hooks(&self, s: &SpaceName) -> Result<Vec<SpaceHook>> {
            self.0.space_hooks(s).await
        }
        async fn set_space_hooks(&self, s: &SpaceName, h: &[SpaceHook]) -> Result<()> {
            self.0.set_space_hooks(s, h).await
        }
        async fn space_hooks_version(&self) -> Result<u64> {
            self.0.space_hooks_version().await
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
