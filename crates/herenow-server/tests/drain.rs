//! The shutdown's drain (issue 43, "rollouts without a blink"): once the
//! shutdown begins, `/readyz` answers `503`, a new socket is refused
//! (no listener, or `503` / Pusher's `4200`), every socket is told to
//! reconnect now (`/v1/ws`: `1012`; Pusher: `4200`) with its members
//! handed to the grace, and `serve` waits for the sockets for the drain
//! at most, even for one whose client reads nothing.

mod support;

use std::time::{Duration, Instant};

use herenow_core::SpaceName;
use herenow_server::Config;
use serde_json::json;
use support::http::get;
use support::pusher::{KEY, socket, subscribe};
use support::ws::{Client, Read, Server};
use support::{PATIENCE, user_key};

/// Reads `c` until the server closes it: the code, and when it came.
async fn close_of(mut c: Client) -> (Option<u16>, Instant) {
    let code = c.closed().await;
    (code, Instant::now())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue_43_a_shutdown_tells_sockets_to_reconnect_refuses_new_ones_and_ends_within_the_drain()
{
    let drain = Duration::from_secs(1);
    let mut s = Server::start_with(Config {
        drain,
        ..support::pusher::config()
    })
    .await;
    let room = SpaceName::new("room").unwrap();
    let (mut ann, _) = s.hello("ann", &["room", "storm"]).await;
    ann.ok(json!({"type": "join", "space": "room"})).await;
    let (mut pusher, _) = socket(&s).await;
    subscribe(&mut pusher, "news").await;
    // A socket that reads nothing behind a join storm of about 9 MB: its
    // writer is stuck behind the kernel's buffers, and would hold the
    // close for the writer's own grace (5 s) but for the drain.
    let mut stuck = s
        .connect_small(&format!("ws://{}/v1/ws", s.addr), 4096)
        .await;
    let token = s.token("stuck", &["storm"]);
    let welcome = stuck
        .request(json!({"type": "hello", "token": token}))
        .await;
    assert_eq!(welcome["type"], "welcome", "{welcome}");
    assert!(stuck.subscribe("storm").await.is_empty());
    support::join_storm(&s.store, "storm", 9_000, 800, 1_000).await;

    let ann_closed = tokio::spawn(close_of(ann));
    let pusher_closed = tokio::spawn(close_of(pusher));
    let began = Instant::now();
    s.begin_stop();
    tokio::time::timeout(PATIENCE, async {
        while !s.state.shutdown_token().is_cancelled() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .expect("the shutdown never began");

    // A load balancer that asks is told to send clients elsewhere.
    let app = herenow_server::app(s.state.clone());
    get(&app, "/readyz").await.unavailable("shutting-down");
    // A new socket is refused: the listener is gone, or the upgrade is
    // answered 503.
    assert!(
        tokio_tungstenite::connect_async(format!("ws://{}/v1/ws", s.addr))
            .await
            .is_err(),
        "a /v1/ws upgrade was accepted during the drain"
    );
    // A Pusher one is refused too, or told to reconnect (elsewhere) at once.
    let url = format!("ws://{}/app/{KEY}?protocol=7", s.addr);
    if let Ok(Ok((ws, _))) =
        tokio::time::timeout(PATIENCE, tokio_tungstenite::connect_async(url)).await
    {
        let mut late = Client { ws };
        let code = loop {
            match late.read().await {
                Read::Json(m) => assert_eq!(m["event"], "pusher:error", "{m}"),
                Read::Closed(code) => break code,
            }
        };
        assert_eq!(code, Some(4200));
    }

    s.stop().await;
    let took = began.elapsed();
    assert!(
        took < drain + Duration::from_secs(2),
        "serve returned {took:?} after the shutdown began, past its drain of {drain:?}"
    );
    assert_eq!(
        s.state.open_websockets(),
        1,
        "the stuck socket is still open: the drain, not the socket, ended the wait"
    );
    // Both sockets that read were told to reconnect at once, within the
    // drain.
    let (code, at) = ann_closed.await.unwrap();
    assert_eq!(code, Some(1012));
    assert!(at - began < drain, "1012 came {:?} after", at - began);
    let (code, at) = pusher_closed.await.unwrap();
    assert_eq!(code, Some(4200));
    assert!(at - began < drain, "4200 came {:?} after", at - began);
    // ann is handed to the grace: present until it ends, unless it comes
    // back (to another server) before.
    let conns = s
        .store
        .live_connections()
        .unwrap()
        .connections(&room, &[user_key("ann")])
        .await
        .unwrap();
    assert!(conns[0].len() == 1 && conns[0][0].lingering, "{conns:?}");
    drop(stuck);
}
