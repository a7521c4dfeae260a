//! What one single heartbeat costs in the server's own stack, without a
//! socket: `POST /v1/spaces/load/heartbeat` through the whole application
//! (`app(state)`: every layer, the router, the handler, the memory store)
//! and through the `/v1` routes alone (no layers), with `oneshot`, on one
//! thread. The difference is what the layers cost; what is left of a
//! request's time over a socket is hyper's and the kernel's.
//!
//! ```sh
//! cargo run --release -p herenow-server --example http_stack
//! ROUNDS=11 N=200000 cargo run --release -p herenow-server --example http_stack
//! # instructions per request: the difference of two runs, over 20,000
//! STACK=full N=20000 ROUNDS=1 valgrind --tool=callgrind target/release/examples/http_stack
//! STACK=full N=40000 ROUNDS=1 valgrind --tool=callgrind target/release/examples/http_stack
//! ```

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Instant;

use axum::body::Body;
use axum::http::Request;
use axum::response::Response;
use herenow_core::{SpaceConfig, SystemClock};
use herenow_memory::MemoryStore;
use herenow_server::{AppState, Backend, Config};
use tower::{Service, ServiceExt};

/// The binary's allocator (`crates/herenow/src/main.rs`), so these figures
/// are the served ones.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

const USERS: usize = 100_000;

fn request(i: usize) -> Request<Body> {
    let id = (i * 7919) % USERS;
    Request::post("/v1/spaces/load/heartbeat")
        .header("content-type", "application/json")
        .body(Body::from(format!("{{\"id\":\"user-{id}\"}}")))
        .unwrap()
}

async fn run<S>(service: &S, n: usize, offset: usize) -> f64
where
    S: Service<Request<Body>, Response = Response, Error = Infallible> + Clone,
{
    let requests: Vec<Request<Body>> = (0..n).map(|i| request(offset + i)).collect();
    let started = Instant::now();
    for req in requests {
        let answer = service.clone().oneshot(req).await.unwrap();
        assert!(answer.status().is_success(), "{}", answer.status());
        drop(answer);
    }
    started.elapsed().as_nanos() as f64 / n as f64
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let env = |k: &str, d: usize| {
        std::env::var(k)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(d)
    };
    let (n, rounds) = (env("N", 100_000), env("ROUNDS", 5));
    let store = Arc::new(MemoryStore::new(
        Arc::new(SystemClock),
        SpaceConfig::default(),
    ));
    let state = AppState::new(Backend::memory(store), &Config::default());
    let full = herenow_server::app(state.clone());
    let bare = herenow_server::measure::unguarded_routes(state);
    // Every member present first, as on a live site.
    run(&full, USERS, 0).await;
    // STACK=full or STACK=bare times one of them only (for callgrind:
    // two runs with different N give the instructions per request).
    let stack = std::env::var("STACK").unwrap_or_default();
    let (mut full_ns, mut bare_ns) = (Vec::new(), Vec::new());
    for r in 0..rounds {
        if stack != "bare" {
            full_ns.push(run(&full, n, r * n).await);
        }
        if stack != "full" {
            bare_ns.push(run(&bare, n, r * n).await);
        }
    }
    println!("single heartbeat through the router, median of {rounds} rounds of {n}:");
    if !full_ns.is_empty() {
        println!(
            "  whole application: {:>6.0} ns/request",
            median(full_ns.clone())
        );
    }
    if !bare_ns.is_empty() {
        println!(
            "  /v1 routes alone:  {:>6.0} ns/request",
            median(bare_ns.clone())
        );
    }
    if !full_ns.is_empty() && !bare_ns.is_empty() {
        println!(
            "  the layers:        {:>6.0} ns/request",
            median(full_ns) - median(bare_ns)
        );
    }
}
