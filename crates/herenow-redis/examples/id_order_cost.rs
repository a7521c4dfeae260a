//! What a by-id page costs without an index by id: the first page (limit 100) of `order=id` over windows of
//! 1k to 50k members, on a redis-server this example starts itself.
//!
//! ```sh
//! cargo run --release -p herenow-redis --example id_order_cost
//! ```

use std::sync::Arc;
use std::time::Instant;

use herenow_core::{
    Heartbeat, KindFilter, ListQuery, MemberId, MemberKey, Order, PresenceStore, SpaceConfig,
    SpaceName, SystemClock,
};
use herenow_redis::{RedisOptions, RedisStore};

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let server = herenow_testkit::RedisServer::standalone();
    let opts = RedisOptions {
        id_order_max: 1_000_000,
        ..RedisOptions::default()
    };
    let s = RedisStore::connect(
        &server.url(),
        Arc::new(SystemClock),
        SpaceConfig::default(),
        opts,
    )
    .await
    .expect("connect");
    let mut have = 0usize;
    println!(
        "members in the window | first page by id (limit 100), median of 9 | most recent first"
    );
    for n in [1_000usize, 5_000, 10_000, 20_000, 50_000] {
        let sp = SpaceName::new("cost").unwrap();
        let beats: Vec<Heartbeat> = (have..n)
            .map(|i| {
                Heartbeat::now(MemberKey::user(
                    MemberId::new(&format!("u:{i:09}")).unwrap(),
                ))
            })
            .collect();
        for chunk in beats.chunks(1_000) {
            s.heartbeat(&sp, chunk).await.unwrap();
        }
        have = n;
        let time = |order| {
            let s = &s;
            let sp = sp.clone();
            async move {
                let mut t = Vec::new();
                for _ in 0..9 {
                    let q = ListQuery {
                        order: Some(order),
                        kinds: KindFilter::All,
                        limit: 100,
                        ..ListQuery::default()
                    };
                    let started = Instant::now();
                    let p = s.list(&sp, &q).await.unwrap();
                    t.push(started.elapsed());
                    assert_eq!(p.members.len(), 100);
                }
                t.sort();
                t[4]
            }
        };
        let by_id = time(Order::Id).await;
        let recent = time(Order::Recent).await;
        println!("{n:>21} | {by_id:>40.2?} | {recent:.2?}");
    }
}
