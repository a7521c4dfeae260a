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
