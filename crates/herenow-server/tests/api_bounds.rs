//! Failure and bounds: a store that is down answers `503` with
//! `Retry-After` (never a 500), `/readyz` says so, a stuck store call is
//! cut off by the request timeout, and the connection bound holds.

mod support;

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use axum::http::{StatusCode, header};
use herenow_core::{
    Counts, Error, Heartbeat, HeartbeatReport, ListQuery, MemberId, MemberKey, MemberStatus,
    Millis, Page, PresenceStore, Result, SpaceConfig, SpaceName, SpaceSummary, Subscription,
    TickReport,
};
use herenow_server::{Config, app, run};
use support::http::get;
use support::state_over;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// A store that is down (`hang: false`) or never answers (`hang: true`).
struct Broken {
    hang: bool,
}

impl Broken {
    async fn fail<T>(&self) -> Result<T> {
        if self.hang {
            std::future::pending::<()>().await;
        }
        Err(Error::Unavailable {
            reason: "the test store is down".into(),
            source: None,
        })
    }
}

#[async_trait]
impl PresenceStore for Broken {
    fn name(&self) -> &'static str {
        "broken"
    }
    fn now_ms(&self) -> Millis {
        1_700_000_000_000
    }
    async fn heartbeat(&self, _: &SpaceName, _: &[Heartbeat]) -> Result<HeartbeatReport> {
        self.fail().await
    }
    async fn leave(&self, _: &SpaceName, _: &[MemberKey]) -> Result<u64> {
        self.fail().await
    }
    async fn status(&self, _: &SpaceName, _: &[MemberKey]) -> Result<Vec<MemberStatus>> {
        self.fail().await
    }
    async fn list(&self, _: &SpaceName, _: &ListQuery) -> Result<Page> {
        self.fail().await
    }
    async fn count(&self, _: &SpaceName, _: Option<Millis>) -> Result<Counts> {
        self.fail().await
    }
    async fn config(&self, _: &SpaceName) -> Result<SpaceConfig> {
        self.fail().await
    }
    async fn set_config(&self, _: &SpaceName, _: SpaceConfig) -> Result<()> {
        self.fail().await
    }
    async fn spaces(&self, _: Option<&SpaceName>, _: usize) -> Result<Vec<SpaceSummary>> {
        self.fail().await
    }
    async fn set_friends(&self, _: &MemberId, _: &[MemberId]) -> Result<u64> {
        self.fail().await
    }
    async fn add_friends(&self, _: &MemberId, _: &[MemberId]) -> Result<u64> {
        self.fail().await
    }
    async fn remove_friends(&self, _: &MemberId, _: &[MemberId]) -> Result<u64> {
        self.fail().await
    }
    async fn friends(&self, _: &MemberId) -> Result<Vec<MemberId>> {
        self.fail().await
    }
    async fn subscribe(&self, _: &SpaceName) -> Result<Subscription> {
        self.fail().await
    }
    async fn tick(&self) -> Result<TickReport> {
        self.fail().await
    }
}

#[tokio::test]
async fn a_down_store_is_503_with_retry_after() {
    let state = state_over(Arc::new(Broken { hang: false }), &Config::default());
    let app = app(state.clone());
    for uri in [
        "/v1/spaces/lobby/count",
        "/v1/spaces/lobby/online",
        "/v1/spaces/lobby/members/a",
        "/v1/spaces/lobby/events",
        "/v1/spaces",
    ] {
        let a = get(&app, uri).await;
        assert_eq!(a.status, StatusCode::SERVICE_UNAVAILABLE, "{uri}");
        assert_eq!(a.headers[header::RETRY_AFTER], "1", "{uri}");
        assert_eq!(a.json()["code"], "store-unavailable", "{uri}");
    }
    let a = get(&app, "/readyz").await;
    assert_eq!(a.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(a.json()["code"], "not-ready");
    // Alive all the same.
    assert_eq!(get(&app, "/healthz").await.status, StatusCode::OK);
    // The ticker survives a failing round.
    assert!(state.tick().await.is_none());
}

#[tokio::test(start_paused = true)]
async fn a_stuck_store_call_is_cut_off_by_the_request_timeout() {
    let config = Config {
        request_timeout: Duration::from_millis(500),
        ..Config::default()
    };
    let state = state_over(Arc::new(Broken { hang: true }), &config);
    let app = app(state);
    let a = get(&app, "/v1/spaces/lobby/count").await;
    assert_eq!(a.status, StatusCode::SERVICE_UNAVAILABLE);
    assert!(a.headers.contains_key(header::RETRY_AFTER));
    assert_eq!(a.json()["code"], "timeout");
}

/// Sends a keep-alive request and reads one answer's head.
async fn ask(stream: &mut TcpStream) -> String {
    stream
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let mut buf = vec![0u8; 1024];
    let n = stream.read(&mut buf).await.unwrap();
    String::from_utf8_lossy(&buf[..n]).into_owned()
}

#[tokio::test]
async fn connections_beyond_the_bound_wait_for_a_free_slot() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let config = Config {
        max_connections: 1,
        ..Config::default()
    };
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(run(listener, config, async {
        let _ = stopped.await;
    }));

    let mut first = TcpStream::connect(addr).await.unwrap();
    assert!(ask(&mut first).await.starts_with("HTTP/1.1 200"));

    // The kernel completes the handshake, but the server does not take
    // the connection while the first holds the only slot.
    let mut second = TcpStream::connect(addr).await.unwrap();
    let waiting = tokio::time::timeout(Duration::from_millis(300), ask(&mut second)).await;
    assert!(waiting.is_err(), "a second connection was served");

    // Once the first closes, the second is answered.
    drop(first);
    let mut buf = vec![0u8; 1024];
    let n = tokio::time::timeout(Duration::from_secs(10), second.read(&mut buf))
        .await
        .expect("the second connection was never served")
        .unwrap();
    assert!(String::from_utf8_lossy(&buf[..n]).starts_with("HTTP/1.1 200"));

    stop.send(()).unwrap();
    drop(second);
    tokio::time::timeout(Duration::from_secs(10), server)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
}
