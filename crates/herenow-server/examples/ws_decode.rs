//! What decoding a WebSocket frame costs: a `ping` and a `join` with
//! metadata through `ws::wire::decode`, the mean of N decodes each
//! (default 2,000,000), ROUNDS times (default 3).
//!
//! `cargo run --release -p herenow-server --example ws_decode`

use std::time::Instant;

use herenow_server::ws::wire::decode;

fn env(name: &str, default: u32) -> u32 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn main() {
    let (rounds, n) = (env("ROUNDS", 3), env("N", 2_000_000));
    let frames = [
        r#"{"type":"ping","ref":17}"#,
        r#"{"type":"join","space":"room:1","ref":"r-2","meta":{"page":"/home","device":"web"}}"#,
    ];
    for round in 1..=rounds {
        for frame in frames {
            let started = Instant::now();
            for _ in 0..n {
                std::hint::black_box(decode(std::hint::black_box(frame)).is_ok());
            }
            println!(
                "round {round}: {} bytes, {:.0} ns per decode",
                frame.len(),
                started.elapsed().as_nanos() as f64 / f64::from(n)
            );
        }
    }
}
