//! The floor under a single heartbeat over a socket (issue 10): an axum
//! server on the same runtime, allocator and listener setup as
//! `herenow serve`, with one route, `POST /v1/spaces/{space}/heartbeat`,
//! that reads the body and answers `{"accepted":1}` without looking at
//! it. What `herenow serve` costs a request above this is its own (JSON,
//! checks, layers, metrics, the store); what this costs is hyper's,
//! tokio's and the kernel's.
//!
//! ```sh
//! cargo build --release -p herenow-server --example bare_server
//! taskset -c 0 target/release/examples/bare_server 127.0.0.1:8090 &
//! taskset -c 1 wrk -t1 -c64 -d5s -s scripts/loads/single.lua http://127.0.0.1:8090
//! ```
//!
//! `scripts/bench-http-floor.sh` runs it and `herenow serve` in turns.

use axum::Router;
use axum::body::Bytes;
use axum::extract::Path;
use axum::http::header::CONTENT_TYPE;
use axum::response::IntoResponse;
use axum::routing::post;

/// The binary's allocator (`crates/herenow/src/main.rs`).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

async fn heartbeat(Path(space): Path<String>, body: Bytes) -> impl IntoResponse {
    // Touch what a real handler would have to, so neither is optimized out.
    std::hint::black_box((space.len(), body.len()));
    ([(CONTENT_TYPE, "application/json")], r#"{"accepted":1}"#)
}

#[tokio::main]
async fn main() {
    let addr = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:8090".into());
    let app = Router::new().route("/v1/spaces/{space}/heartbeat", post(heartbeat));
    let listener = tokio::net::TcpListener::bind(&addr).await.expect("bind");
    eprintln!("listening on {addr}");
    axum::serve(listener, app).await.expect("serve");
}
