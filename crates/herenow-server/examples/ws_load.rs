//! WebSocket load generator: `scripts/bench-ws.sh` runs it against a
//! release `herenow serve`.
//!
//! ```text
//! cargo run --release -p herenow-server --example ws_load -- \
//!     --url ws://127.0.0.1:7700/v1/ws --secret S [--connections 10000] \
//!     [--subscribers 100] [--ping-secs 10] [--hold-secs 30] [--probes 100]
//! ```
//!
//! 1. Opens `--connections` sockets (at most 256 handshakes at a time),
//!    each `hello` with its own user token (signed here with the server's
//!    `--token-secret`), then `join`s space `load`; the first
//!    `--subscribers` of them also `subscribe` to it and read the snapshot.
//!    Every socket pings every `--ping-secs`, starting at a random offset.
//! 2. Holds that for `--hold-secs` and prints `ready`/`steady` lines with
//!    timestamps, so a script can sample the server's memory and CPU.
//! 3. Measures join→event latency: `--probes` new users join, one every
//!    50 ms; every subscriber notes when it sees each join event. Prints
//!    p50/p99/max over all (probe, subscriber) pairs, then closes.
//!
//! The result is one line of JSON on stdout; progress goes to stderr.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use futures::{SinkExt, StreamExt};
use herenow_core::{MemberId, MemberKey};
use herenow_server::TokenSecret;
use herenow_server::token::{self, Spaces, Tokens};
use parking_lot::Mutex;
use serde_json::{Value, json};
use tokio::sync::Semaphore;
use tokio_tungstenite::tungstenite::Message;

struct Args {
    url: String,
    /// Signs tokens as the server does, with its `--token-secret`.
    tokens: Tokens,
    connections: usize,
    subscribers: usize,
    ping_secs: u64,
    hold_secs: u64,
    probes: usize,
    space: String,
}

fn args() -> Args {
    let (mut url, mut secret, mut space) = (
        "ws://127.0.0.1:7700/v1/ws".to_owned(),
        String::new(),
        "load".to_owned(),
    );
    let (mut connections, mut subscribers, mut ping_secs, mut hold_secs, mut probes) =
        (10_000, 100, 10, 30, 100);
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut val = || it.next().unwrap_or_else(|| panic!("{flag} needs a value"));
        match flag.as_str() {
            "--url" => url = val(),
            "--secret" => secret = val(),
            "--connections" => connections = val().parse().expect("a number"),
            "--subscribers" => subscribers = val().parse().expect("a number"),
            "--ping-secs" => ping_secs = val().parse().expect("a number"),
            "--hold-secs" => hold_secs = val().parse().expect("a number"),
            "--probes" => probes = val().parse().expect("a number"),
            "--space" => space = val(),
            other => panic!("unknown flag {other}"),
        }
    }
    let secret =
        TokenSecret::new(secret).expect("--secret: the server's --token-secret, at least 32 bytes");
    Args {
        url,
        tokens: Tokens::new(&secret),
        connections,
        subscribers,
        ping_secs,
        hold_secs,
        probes,
        space,
    }
}

/// A user token for `space`, minted as the server mints them.
fn token(a: &Args, user: &str) -> String {
    let member = MemberKey::user(MemberId::new(user).expect("a valid member id"));
    let spaces = Spaces::parse(&[a.space.as_str()]).expect("a valid space");
    a.tokens
        .mint(&member, &spaces, token::now_s(), token::DEFAULT_TTL_S)
        .expect("sign a token")
}

/// When each probe's join was sent, and the latencies seen.
#[derive(Default)]
struct Probes {
    sent: Mutex<HashMap<String, Instant>>,
    latencies_us: Mutex<Vec<u64>>,
}

#[derive(Default)]
struct Counters {
    connected: AtomicU64,
    failed: AtomicU64,
    pings: AtomicU64,
    events: AtomicU64,
    errors: AtomicU64,
}

type Ws =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// Opens a socket, says hello and joins; returns it once `ok` arrives.
async fn open(a: &Args, user: &str, subscribe: bool) -> Result<Ws, String> {
    let (mut ws, _) = tokio_tungstenite::connect_async(a.url.as_str())
        .await
        .map_err(|e| e.to_string())?;
    let t = token(a, user);
    send(&mut ws, json!({"type": "hello", "token": t})).await?;
    expect(&mut ws, "welcome").await?;
    send(
        &mut ws,
        json!({"type": "join", "space": a.space, "meta": {"n": user}, "ref": 1}),
    )
    .await?;
    expect(&mut ws, "ok").await?;
    if subscribe {
        send(
            &mut ws,
            json!({"type": "subscribe", "space": a.space, "page_size": 1000}),
        )
        .await?;
        loop {
            let m = recv(&mut ws).await?;
            if m["type"] == "snapshot" && m["last"] == true {
                break;
            }
        }
    }
    Ok(ws)
}

async fn send(ws: &mut Ws, v: Value) -> Result<(), String> {
    ws.send(Message::text(v.to_string()))
        .await
        .map_err(|e| e.to_string())
}

async fn recv(ws: &mut Ws) -> Result<Value, String> {
    loop {
        match ws.next().await {
            Some(Ok(Message::Text(t))) => {
                return serde_json::from_str(t.as_str()).map_err(|e| e.to_string());
            }
            Some(Ok(Message::Close(c))) => return Err(format!("closed: {c:?}")),
            Some(Ok(_)) => {}
            Some(Err(e)) => return Err(e.to_string()),
            None => return Err("closed".into()),
        }
    }
}

async fn expect(ws: &mut Ws, typ: &str) -> Result<Value, String> {
    let m = tokio::time::timeout(Duration::from_secs(30), recv(ws))
        .await
        .map_err(|_| format!("no {typ} within 30 s"))??;
    if m["type"] != typ {
        return Err(format!("expected {typ}, got {m}"));
    }
    Ok(m)
}

/// A connection's life after joining: ping on schedule, read everything,
/// note probe joins when subscribed.
async fn live(
    mut ws: Ws,
    ping: Duration,
    probes: Arc<Probes>,
    counters: Arc<Counters>,
    stop: tokio_util::sync::CancellationToken,
) {
    let offset = Duration::from_millis(rand_below(ping.as_millis() as u64));
    let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + offset, ping);
    loop {
        tokio::select! {
            _ = stop.cancelled() => {
                let _ = ws.close(None).await;
                return;
            }
            _ = tick.tick() => {
                if send(&mut ws, json!({"type": "ping"})).await.is_err() {
                    counters.errors.fetch_add(1, Ordering::Relaxed);
                    return;
                }
                counters.pings.fetch_add(1, Ordering::Relaxed);
            }
            m = ws.next() => {
                let Some(Ok(Message::Text(t))) = m else {
                    if matches!(m, None | Some(Err(_)) | Some(Ok(Message::Close(_)))) {
                        counters.errors.fetch_add(1, Ordering::Relaxed);
                        return;
                    }
                    continue;
                };
                let now = Instant::now();
                let Ok(v) = serde_json::from_str::<Value>(t.as_str()) else { continue };
                if v["type"] == "event" {
                    counters.events.fetch_add(1, Ordering::Relaxed);
                    let e = &v["event"];
                    if e["type"] == "join"
                        && let Some(id) = e["id"].as_str()
                        && let Some(at) = probes.sent.lock().get(id)
                    {
                        probes.latencies_us.lock().push(now.duration_since(*at).as_micros() as u64);
                    }
                } else if v["type"] == "error" {
                    counters.errors.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
    }
}

fn rand_below(n: u64) -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(n);
    h.finish() % n.max(1)
}

fn pct(sorted: &[u64], p: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

#[tokio::main]
async fn main() {
    let a = Arc::new(args());
    let probes = Arc::new(Probes::default());
    let counters = Arc::new(Counters::default());
    let stop = tokio_util::sync::CancellationToken::new();
    let gate = Arc::new(Semaphore::new(256));
    let started = Instant::now();
    let mut tasks = Vec::with_capacity(a.connections);
    for i in 0..a.connections {
        let permit = gate.clone().acquire_owned().await.unwrap();
        let (a, probes, counters, stop) =
            (a.clone(), probes.clone(), counters.clone(), stop.clone());
        tasks.push(tokio::spawn(async move {
            let user = format!("load-{i}");
            let opened = open(&a, &user, i < a.subscribers).await;
            // Counted before the permit goes back, so "ready" counts all.
            match &opened {
                Ok(_) => {
                    counters.connected.fetch_add(1, Ordering::Relaxed);
                }
                Err(e) => {
                    if counters.failed.fetch_add(1, Ordering::Relaxed) < 5 {
                        eprintln!("connection {i} failed: {e}");
                    }
                }
            }
            drop(permit);
            if let Ok(ws) = opened {
                live(ws, Duration::from_secs(a.ping_secs), probes, counters, stop).await;
            }
        }));
    }
    // Every handshake has finished once all permits are back.
    let _all = gate.acquire_many(256).await.unwrap();
    drop(_all);
    let connect_secs = started.elapsed().as_secs_f64();
    eprintln!(
        "ready {} connected, {} failed in {connect_secs:.1} s",
        counters.connected.load(Ordering::Relaxed),
        counters.failed.load(Ordering::Relaxed)
    );
    println!("ready");
    tokio::time::sleep(Duration::from_secs(a.hold_secs)).await;
    let pings_held = counters.pings.load(Ordering::Relaxed);
    eprintln!("steady: {pings_held} pings sent while holding");
    println!("steady");

    // Join→event latency.
    let mut probe_socks = Vec::new();
    for p in 0..a.probes {
        let id = format!("probe-{p}");
        let (mut ws, _) = match tokio_tungstenite::connect_async(a.url.as_str()).await {
            Ok(x) => x,
            Err(e) => {
                eprintln!("probe {p}: {e}");
                continue;
            }
        };
        let t = token(&a, &id);
        if send(&mut ws, json!({"type": "hello", "token": t}))
            .await
            .is_err()
            || expect(&mut ws, "welcome").await.is_err()
        {
            continue;
        }
        probes.sent.lock().insert(id.clone(), Instant::now());
        let _ = send(&mut ws, json!({"type": "join", "space": a.space})).await;
        probe_socks.push(ws);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Let the last events arrive (bounded).
    let want = a.probes * a.subscribers.min(a.connections);
    let deadline = Instant::now() + Duration::from_secs(10);
    while probes.latencies_us.lock().len() < want && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let mut lat = probes.latencies_us.lock().clone();
    lat.sort_unstable();
    stop.cancel();
    for mut ws in probe_socks {
        let _ = ws.close(None).await;
    }
    for t in tasks {
        let _ = tokio::time::timeout(Duration::from_secs(5), t).await;
    }
    let out = json!({
        "connections": a.connections,
        "connected": counters.connected.load(Ordering::Relaxed),
        "failed": counters.failed.load(Ordering::Relaxed),
        "subscribers": a.subscribers,
        "connect_secs": (connect_secs * 10.0).round() / 10.0,
        "hold_secs": a.hold_secs,
        "pings_while_holding": pings_held,
        "events_received": counters.events.load(Ordering::Relaxed),
        "socket_errors": counters.errors.load(Ordering::Relaxed),
        "latency_samples": lat.len(),
        "latency_expected": want,
        "join_to_event_us": {"p50": pct(&lat, 0.5), "p99": pct(&lat, 0.99), "max": lat.last().copied().unwrap_or(0)},
    });
    println!("{out}");
}
