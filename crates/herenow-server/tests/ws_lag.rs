//! A join storm and a slow reader (issue 15): a subscriber that falls
//! behind is told (`lagged`), catches up with a fresh snapshot marked
//! `resync`, and ends with exactly the room's members, on the memory store
//! and on Redis; it is not cut.

mod support;

use std::collections::BTreeSet;
use std::time::Duration;

use herenow_core::{Heartbeat, ManualClock, SpaceName};
use serde_json::Value;
use support::ws::{Read, Server};
use support::{T0, user_key};

/// Members that join in the storm (a snapshot holds them all: at most
/// 10,000), and how many of them leave after.
const JOINS: usize = 9_000;
const LEAVES: usize = 500;

/// What a client keeps, the way `/client.js` keeps it: events apply only
/// while synced; a `lagged` notice drops what it knew until the fresh
/// snapshot is whole.
#[derive(Default)]
struct View {
    members: BTreeSet<String>,
    pending: Option<BTreeSet<String>>,
    synced: bool,
    resyncs: usize,
    lagged: usize,
}

impl View {
    fn apply(&mut self, m: &Value) {
        match m["type"].as_str() {
            Some("snapshot") => {
                let page = self.pending.get_or_insert_with(BTreeSet::new);
                for member in m["members"].as_array().unwrap() {
                    page.insert(member["id"].as_str().unwrap().to_owned());
                }
                if m["last"] == true {
                    self.members = self.pending.take().unwrap();
                    self.synced = true;
                    if m["resync"] == true {
                        self.resyncs += 1;
                    }
                }
            }
            Some("event") if self.synced => {
                let e = &m["event"];
                let id = e["id"].as_str().unwrap().to_owned();
                if e["type"] == "leave" {
                    self.members.remove(&id);
                } else {
                    self.members.insert(id);
                }
            }
            Some("event") => {}
            Some("lagged") => {
                self.lagged += 1;
                self.synced = false;
                self.pending = None;
            }
            other => panic!("unexpected message {other:?}: {m}"),
        }
    }
}

async fn storm_then_read(s: &Server) {
    let (mut slow, _) = s.hello("slow", &["*"]).await;
    assert!(slow.subscribe("storm").await.is_empty());
    let storm = SpaceName::new("storm").unwrap();
    // Joins with 800 bytes of metadata each, so the burst (about 9 MB)
    // outgrows the kernel's socket buffers and the queue while the reader
    // reads nothing.
    let ids = support::join_storm(&s.store, "storm", JOINS, 800, 1_000).await;
    let leaving: Vec<_> = ids[..LEAVES].iter().map(|id| user_key(id)).collect();
    s.store.leave(&storm, &leaving).await.unwrap();
    let expected: BTreeSet<String> = ids[LEAVES..].iter().cloned().collect();

    // Now read as a client does, until its view is the room.
    let mut view = View {
        synced: true,
        ..View::default()
    };
    let done = tokio::time::timeout(Duration::from_secs(120), async {
        loop {
            match slow.read().await {
                Read::Json(m) => view.apply(&m),
                Read::Closed(code) => panic!("the slow reader was cut with {code:?}"),
            }
            if view.synced && view.members == expected {
                return;
            }
        }
    })
    .await;
    assert!(
        done.is_ok(),
        "the view never matched the room: {} members, {} expected, synced {}",
        view.members.len(),
        expected.len(),
        view.synced
    );
    assert!(view.lagged >= 1, "the storm never made the reader lag");
    assert!(view.resyncs >= 1, "no resync snapshot after the lag");
    // And it goes on: a later join arrives as an event.
    s.store
        .heartbeat(&storm, &[Heartbeat::now(user_key("late"))])
        .await
        .unwrap();
    loop {
        let m = slow.recv().await;
        view.apply(&m);
        if view.members.contains("late") {
            break;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_reader_catches_up_with_exactly_the_room_on_memory() {
    let s = Server::start().await;
    storm_then_read(&s).await;
}

#[cfg(feature = "redis")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_reader_catches_up_with_exactly_the_room_on_redis() {
    use herenow_testkit as common;

    let redis = common::RedisServer::standalone();
    let clock = ManualClock::new(T0);
    let s = Server::on_redis(&redis.url(), herenow_server::Config::default(), &clock).await;
    storm_then_read(&s).await;
}
