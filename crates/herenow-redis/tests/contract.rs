//! The shared contract suite against a standalone server and a 3-master
//! cluster, both started by the test, with every space in one shard (the
//! default layout) and split over four (issue 3, "Big spaces"). Each
//! scenario gets a store with its own key prefix, so scenarios never see
//! each other's keys.

use herenow_testkit as common;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use herenow_core::contract::{Factory, run_all};
use herenow_core::{PresenceStore, SpaceConfig};
use herenow_redis::{RedisOptions, RedisStore};

static PREFIX: AtomicU64 = AtomicU64::new(0);

fn factory(url: String, shards: u16) -> Factory {
    Arc::new(move |clock| {
        let url = url.clone();
        Box::pin(async move {
            let n = PREFIX.fetch_add(1, Ordering::SeqCst);
            let opts = RedisOptions {
                prefix: format!("t{n}"),
                shards,
                ..RedisOptions::default()
            };
            let store = RedisStore::connect(&url, Arc::new(clock), SpaceConfig::default(), opts)
                .await
                .expect("connect to the test's redis");
            Arc::new(store) as Arc<dyn PresenceStore>
        })
    })
}

#[tokio::test]
async fn contract_standalone() {
    let server = common::RedisServer::standalone();
    run_all(factory(server.url(), 1)).await;
}

#[tokio::test]
async fn contract_cluster() {
    let cluster = common::RedisCluster::start();
    run_all(factory(cluster.url(), 1)).await;
}

#[tokio::test]
async fn contract_standalone_four_shards() {
    let server = common::RedisServer::standalone();
    run_all(factory(server.url(), 4)).await;
}

#[tokio::test]
async fn contract_cluster_four_shards() {
    let cluster = common::RedisCluster::start();
    run_all(factory(cluster.url(), 4)).await;
}
