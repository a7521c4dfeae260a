//! The shutdown of a server with many Pusher presence sockets: some read,
//! some stopped reading behind a join storm with their queues full; the
//! server's `serve` still returns within its grace periods, and a socket
//! that still reads is told to reconnect (`4200`).

mod support;

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::pusher::{KEY, config, hmac_hex};
use support::ws::{Client, Read, Server};

const CHANNEL: &str = "presence-crowd";

/// Subscribes `c` to the channel as `user`; waits for its roster when
/// `wait` says so.
async fn join(c: &mut Client, user: &str, wait: bool) {
    let hello = c.recv().await;
    assert_eq!(hello["event"], "pusher:connection_established");
    let data: Value = serde_json::from_str(hello["data"].as_str().unwrap()).unwrap();
    let socket_id = data["socket_id"].as_str().unwrap().to_owned();
    let channel_data = json!({"user_id": user}).to_string();
    let auth = format!(
        "{KEY}:{}",
        hmac_hex(&format!("{socket_id}:{CHANNEL}:{channel_data}"))
    );
    c.send(json!({"event": "pusher:subscribe",
        "data": {"channel": CHANNEL, "auth": auth, "channel_data": channel_data}}))
        .await;
    if wait {
        loop {
            let m = c.recv().await;
            if m["event"] == "pusher_internal:subscription_succeeded" {
                return;
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_ends_within_its_grace_whatever_the_sockets_do() {
    const READING: usize = 150;
    const STALLED: usize = 20;
    const STORM: usize = 3_000;
    let mut s = Server::start_with(config()).await;
    let url = format!("ws://{}/app/{KEY}?protocol=7", s.addr);
    let mut reading = Vec::new();
    for i in 0..READING {
        let mut c = s.connect_to(&url).await;
        join(&mut c, &format!("r{i}"), true).await;
        reading.push(c);
    }
    // Sockets with small receive buffers that read nothing more once
    // subscribed: the storm fills the kernel's buffers and their queues.
    let mut stalled = Vec::new();
    for i in 0..STALLED {
        let mut c = s.connect_small(&url, 4096).await;
        join(&mut c, &format!("s{i}"), false).await;
        stalled.push(c);
    }
    support::join_storm(&s.store, CHANNEL, STORM, 500, 500).await;

    let began = Instant::now();
    s.stop().await;
    let took = began.elapsed();
    // Sessions close at once; a writer whose client reads nothing has
    // 5 s for what is queued and the close.
    assert!(
        took < Duration::from_secs(15),
        "shutdown took {took:?} with {READING} reading and {STALLED} stalled sockets"
    );
    // A socket that reads gets what was queued, then the close 4200.
    let first = &mut reading[0];
    let closed = tokio::time::timeout(Duration::from_secs(20), async {
        loop {
            match first.read().await {
                Read::Json(_) => {}
                Read::Closed(code) => return code,
            }
        }
    })
    .await
    .expect("a reading socket was not closed");
    assert_eq!(closed, Some(4200));
    drop(stalled);
}
