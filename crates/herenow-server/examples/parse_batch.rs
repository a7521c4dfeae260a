//! What parsing a batch body costs: the `bench-server.sh` body of 1,000
//! heartbeats read as `JsonBody::parse` reads it (one UTF-8 check of the
//! whole body, then `serde_json::from_str`, which trusts it) against
//! `serde_json::from_slice` (which checks every string on its own: what
//! `JsonBody::parse` did before). The two alternate, ROUNDS
//! times (default 3), each parsing the body N times (default 20,000).
//!
//! `cargo run --release -p herenow-server --example parse_batch`

use std::time::{Duration, Instant};

use herenow_server::measure::HeartbeatsBody;

fn env(name: &str, default: u32) -> u32 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The mean time of `n` parses of `body` by `parse`.
fn time(n: u32, body: &[u8], parse: impl Fn(&[u8]) -> usize) -> Duration {
    let started = Instant::now();
    for _ in 0..n {
        std::hint::black_box(parse(std::hint::black_box(body)));
    }
    started.elapsed() / n
}

fn main() {
    let (rounds, n) = (env("ROUNDS", 3), env("N", 20_000));
    let items: Vec<String> = (0..1000)
        .map(|i| format!(r#"{{"id":"user-{i}"}}"#))
        .collect();
    let body = format!(r#"{{"heartbeats":[{}]}}"#, items.join(",")).into_bytes();
    println!(
        "one body of 1,000 heartbeats ({} bytes), mean of {n} parses:",
        body.len()
    );
    for round in 1..=rounds {
        let bytes = time(n, &body, |b| {
            let parsed: HeartbeatsBody<'_> = serde_json::from_slice(b).unwrap();
            parsed.heartbeats.len()
        });
        let text = time(n, &body, |b| {
            let parsed: HeartbeatsBody<'_> =
                serde_json::from_str(std::str::from_utf8(b).unwrap()).unwrap();
            parsed.heartbeats.len()
        });
        println!(
            "  round {round}: from_slice {:.1} us, one check + from_str {:.1} us ({:.2}x)",
            bytes.as_secs_f64() * 1e6,
            text.as_secs_f64() * 1e6,
            text.as_secs_f64() / bytes.as_secs_f64()
        );
    }
}
