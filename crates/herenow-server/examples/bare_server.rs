//! The floor under a single heartbeat over a socket (issue 10): an axum
//! server on the same runtime, allocator and listener setup as
//! `herenow serve`, with one route, `POST /v1/spaces/{space}/heartbeat`,
//! that reads the body and answers `{"accepted":1}` without looking at
//! it. What `herenow serve` costs a request above this is its own (JSON,
//! checks, layers, metrics, the store); what this costs is hyper's,
//! tokio's and the kernel's.
//!
//! With a second argument `hyper`, the same answer comes from hyper's own
//! HTTP/1 connection loop and a `service_fn`, without axum's router or
//! `axum::serve`: the floor under the floor, to see what axum costs.
//!
//! ```sh
//! cargo build --release -p herenow-server --example bare_server
//! taskset -c 0 target/release/examples/bare_server 127.0.0.1:8090 [hyper] &
//! taskset -c 1 wrk -t1 -c64 -d5s -s scripts/loads/single.lua http://127.0.0.1:8090
//! ```
//!
//! `scripts/bench-http-floor.sh` runs it and `herenow serve` in turns
//! (`FLOOR=hyper` for the second kind).

use std::convert::Infallible;

use axum::Router;
use axum::body::Bytes;
use axum::extract::Path;
use axum::http::header::CONTENT_TYPE;
use axum::http::{HeaderValue, Request, Response};
use axum::response::IntoResponse;
use axum::routing::post;
use axum::serve::ListenerExt;
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;

/// The binary's allocator (`crates/herenow/src/main.rs`).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

const ANSWER: &str = r#"{"accepted":1}"#;

async fn heartbeat(Path(space): Path<String>, body: Bytes) -> impl IntoResponse {
    // Touch what a real handler would have to, so neither is optimized out.
    std::hint::black_box((space.len(), body.len()));
    ([(CONTENT_TYPE, "application/json")], ANSWER)
}

/// The same answer from hyper alone (any path: the load sends one).
async fn hyper_heartbeat(
    req: Request<hyper::body::Incoming>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let path = req.uri().path().len();
    let body = req
        .into_body()
        .collect()
        .await
        .map_or(0, |b| b.to_bytes().len());
    std::hint::black_box((path, body));
    let mut answer = Response::new(Full::new(Bytes::from_static(ANSWER.as_bytes())));
    answer
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    Ok(answer)
}

#[tokio::main]
async fn main() {
    let mut args = std::env::args().skip(1);
    let addr = args.next().unwrap_or_else(|| "127.0.0.1:8090".into());
    let hyper_only = args.next().as_deref() == Some("hyper");
    let listener = tokio::net::TcpListener::bind(&addr).await.expect("bind");
    eprintln!("listening on {addr}");
    if !hyper_only {
        let app = Router::new().route("/v1/spaces/{space}/heartbeat", post(heartbeat));
        // No Nagle, as herenow's listener (`listener.rs`) and hyper's
        // mode below.
        let listener = listener.tap_io(|tcp| {
            let _ = tcp.set_nodelay(true);
        });
        axum::serve(listener, app).await.expect("serve");
        return;
    }
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        // As herenow's listener does (`listener.rs`).
        let _ = stream.set_nodelay(true);
        tokio::spawn(async move {
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(
                    TokioIo::new(stream),
                    hyper::service::service_fn(hyper_heartbeat),
                )
                .await;
        });
    }
}
