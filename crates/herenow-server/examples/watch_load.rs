//! Contact-list load generator for watching contact lists (issue 9):
//! `scripts/bench-watch.sh` runs it against a release `herenow serve`.
//!
//! ```text
//! cargo run --release -p herenow-server --example watch_load -- \
//!     --url ws://127.0.0.1:7700/v1/ws --secret S [--users 10000] \
//!     [--contacts 200] [--flips 100] [--flip-ms 50] [--hold-secs 20] \
//!     [--settle-secs 3] [--seed 9] [--server-pid PID] [--clk-tck 100]
//! ```
//!
//! 1. Opens one socket per user `u0`..`u{users-1}` (at most 256
//!    handshakes at a time), each `hello` with its own token (signed here
//!    with the server's `--token-secret`, `watch: any`). Every socket
//!    pings every `ping_ms` of its `welcome`, starting at a random offset.
//! 2. Each socket `watch`es `--contacts` users drawn from all users
//!    (seeded, never itself, no repeats), anywhere, and waits for its
//!    `watching` answer (at most 256 watches in flight).
//! 3. Holds for `--hold-secs` (pings only).
//! 4. Flips: `--flips` watched users (seeded) each open a second socket;
//!    one after another, one every `--flip-ms`, they `join` space `flip`
//!    (online), then one after another they `leave` it (offline). Every
//!    socket watching a flipped user notes when that user's `status`
//!    arrives: latency over every (flip, watcher) pair, against a count
//!    known in advance from the draw; and over flips, the latency of each
//!    flip's first status (the fan-out's head).
//!
//! With `--server-pid` (same machine), the server's RSS (`VmRSS`) is read
//! before the sockets, and `--settle-secs` after opening them and after
//! watching; its CPU time (`utime + stime`) over the hold and over the
//! watch and flip phases. The client's own CPU is read the same way, since
//! both share the machine.
//!
//! The result is one line of JSON on stdout; progress goes to stderr. A
//! refused `watch` (a store that cannot follow users answers
//! `unsupported`) ends the run: the JSON says `watch_refused` with the
//! code, and the exit status is 2.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use futures::{SinkExt, StreamExt};
use herenow_core::{MemberId, MemberKey};
use herenow_server::TokenSecret;
use herenow_server::protocol::dto::WatchGrant;
use herenow_server::token::{self, Spaces, Tokens};
use parking_lot::Mutex;
use serde_json::{Value, json};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc};
use tokio_tungstenite::tungstenite::Message;
use tokio_util::sync::CancellationToken;

/// Handshakes, and watches, in flight at once.
const IN_FLIGHT: usize = 256;
/// The space flipped users join and leave.
const FLIP_SPACE: &str = "flip";

struct Args {
    url: String,
    /// Signs tokens as the server does, with its `--token-secret`.
    tokens: Tokens,
    users: usize,
    contacts: usize,
    flips: usize,
    flip_ms: u64,
    hold_secs: u64,
    settle_secs: u64,
    seed: u64,
    server_pid: Option<u32>,
    clk_tck: f64,
}

fn args() -> Args {
    let (mut url, mut secret) = ("ws://127.0.0.1:7700/v1/ws".to_owned(), String::new());
    let (mut users, mut contacts, mut flips, mut flip_ms) = (10_000, 200, 100, 50);
    let (mut hold_secs, mut settle_secs, mut seed, mut server_pid, mut clk_tck) =
        (20, 3, 9, None, 100.0);
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut val = || it.next().unwrap_or_else(|| panic!("{flag} needs a value"));
        match flag.as_str() {
            "--url" => url = val(),
            "--secret" => secret = val(),
            "--users" => users = val().parse().expect("a number"),
            "--contacts" => contacts = val().parse().expect("a number"),
            "--flips" => flips = val().parse().expect("a number"),
            "--flip-ms" => flip_ms = val().parse().expect("a number"),
            "--hold-secs" => hold_secs = val().parse().expect("a number"),
            "--settle-secs" => settle_secs = val().parse().expect("a number"),
            "--seed" => seed = val().parse().expect("a number"),
            "--server-pid" => server_pid = Some(val().parse().expect("a pid")),
            "--clk-tck" => clk_tck = val().parse().expect("a number"),
            other => panic!("unknown flag {other}"),
        }
    }
    assert!(
        contacts < users,
        "--contacts must be below --users (nobody watches themselves)"
    );
    assert!(flips <= users, "--flips must be at most --users");
    let secret =
        TokenSecret::new(secret).expect("--secret: the server's --token-secret, at least 32 bytes");
    Args {
        url,
        tokens: Tokens::new(&secret),
        users,
        contacts,
        flips,
        flip_ms,
        hold_secs,
        settle_secs,
        seed,
        server_pid,
        clk_tck,
    }
}

/// User `i`'s token: space `flip`, watching anyone.
fn token(a: &Args, i: usize) -> String {
    let member = MemberKey::user(MemberId::new(&format!("u{i}")).expect("a valid member id"));
    let spaces = Spaces::parse(&[FLIP_SPACE]).expect("a valid space");
    a.tokens
        .mint_watching(
            &member,
            &spaces,
            WatchGrant::Any,
            token::now_s(),
            token::DEFAULT_TTL_S,
        )
        .expect("sign a token")
}

/// SplitMix64: a seeded draw that stays the same across library versions,
/// so a run's contact lists can be drawn again.
struct Draw(u64);

impl Draw {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    /// `k` distinct values of `0..n`, none equal to `not`.
    fn distinct(&mut self, n: usize, k: usize, not: Option<usize>) -> Vec<usize> {
        let mut seen = HashSet::with_capacity(k);
        let mut out = Vec::with_capacity(k);
        while out.len() < k {
            let x = self.below(n);
            if Some(x) != not && seen.insert(x) {
                out.push(x);
            }
        }
        out
    }
}

/// When each flip was sent: per user, `[online, offline]` in ns since
/// `base` (0: not flipped), and the latencies seen with their flip
/// (`2 * user + offline`).
struct Flips {
    base: Instant,
    sent_ns: Vec<[AtomicU64; 2]>,
    latencies_us: Mutex<Vec<(usize, u64)>>,
}

impl Flips {
    fn mark(&self, user: usize, online: bool) {
        let ns = self.base.elapsed().as_nanos() as u64;
        self.sent_ns[user][usize::from(!online)].store(ns.max(1), Ordering::Release);
    }

    /// Notes a `status` that arrived at `at`; false when no flip
    /// explains it.
    fn seen(&self, v: &Value, at: Instant) -> bool {
        let user = v["id"]
            .as_str()
            .and_then(|id| id.strip_prefix('u'))
            .and_then(|n| n.parse::<usize>().ok())
            .filter(|&n| n < self.sent_ns.len());
        let online = match v["status"].as_str() {
            Some("online") => true,
            Some("offline") => false,
            _ => return false,
        };
        let Some(user) = user else { return false };
        let sent = self.sent_ns[user][usize::from(!online)].load(Ordering::Acquire);
        if sent == 0 {
            return false;
        }
        let now = at.duration_since(self.base).as_nanos() as u64;
        self.latencies_us.lock().push((
            2 * user + usize::from(!online),
            now.saturating_sub(sent) / 1_000,
        ));
        true
    }
}

#[derive(Default)]
struct Counters {
    connected: AtomicU64,
    failed: AtomicU64,
    watched: AtomicU64,
    watch_failed: AtomicU64,
    pings: AtomicU64,
    statuses: AtomicU64,
    unexplained: AtomicU64,
    errors: AtomicU64,
    /// The first refused watch's code.
    refusal: Mutex<Option<String>>,
}

type Ws =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// Opens a socket and says hello as user `i`; returns it with the
/// `welcome`'s `ping_ms`.
async fn open(a: &Args, i: usize) -> Result<(Ws, u64), String> {
    let (mut ws, _) = tokio_tungstenite::connect_async(a.url.as_str())
        .await
        .map_err(|e| e.to_string())?;
    send(&mut ws, json!({"type": "hello", "token": token(a, i)})).await?;
    let w = expect(&mut ws, "welcome").await?;
    Ok((ws, w["ping_ms"].as_u64().unwrap_or(10_000)))
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

/// A watcher's life after `hello`: ping on schedule, send its `watch`
/// when told (holding the in-flight permit until the last `watching`
/// page), and note every `status`.
async fn live(
    mut ws: Ws,
    ping: Duration,
    contacts: Vec<String>,
    mut go: mpsc::Receiver<OwnedSemaphorePermit>,
    flips: Arc<Flips>,
    counters: Arc<Counters>,
    stop: CancellationToken,
) {
    let offset = Duration::from_millis(rand_below(ping.as_millis() as u64));
    let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + offset, ping);
    let mut contacts = Some(contacts);
    let mut permit = None;
    loop {
        tokio::select! {
            _ = stop.cancelled() => {
                let _ = ws.close(None).await;
                return;
            }
            p = go.recv(), if contacts.is_some() => {
                let Some(p) = p else { continue };
                let users = contacts.take().unwrap_or_default();
                let msg = json!({"type": "watch", "users": users, "page_size": 1000, "ref": "w"});
                if send(&mut ws, msg).await.is_err() {
                    counters.watch_failed.fetch_add(1, Ordering::Relaxed);
                    counters.errors.fetch_add(1, Ordering::Relaxed);
                    return;
                }
                permit = Some(p);
            }
            _ = tick.tick() => {
                if send(&mut ws, json!({"type": "ping"})).await.is_err() {
                    counters.errors.fetch_add(1, Ordering::Relaxed);
                    return;
                }
                counters.pings.fetch_add(1, Ordering::Relaxed);
            }
            m = ws.next() => {
                let now = Instant::now();
                let t = match m {
                    Some(Ok(Message::Text(t))) => t,
                    Some(Ok(Message::Close(_)) | Err(_)) | None => {
                        counters.errors.fetch_add(1, Ordering::Relaxed);
                        if permit.take().is_some() {
                            counters.watch_failed.fetch_add(1, Ordering::Relaxed);
                        }
                        return;
                    }
                    Some(Ok(_)) => continue,
                };
                let Ok(v) = serde_json::from_str::<Value>(t.as_str()) else { continue };
                match v["type"].as_str() {
                    Some("status") => {
                        counters.statuses.fetch_add(1, Ordering::Relaxed);
                        if !flips.seen(&v, now) {
                            counters.unexplained.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                    Some("watching") if v["last"] == true && permit.is_some() => {
                        counters.watched.fetch_add(1, Ordering::Relaxed);
                        permit = None;
                    }
                    Some("error") => {
                        counters.errors.fetch_add(1, Ordering::Relaxed);
                        if v["ref"] == "w" && permit.take().is_some() {
                            counters.watch_failed.fetch_add(1, Ordering::Relaxed);
                            let mut r = counters.refusal.lock();
                            if r.is_none() {
                                eprintln!("watch refused: {v}");
                                *r = Some(v["code"].as_str().unwrap_or("?").to_owned());
                            }
                        }
                    }
                    _ => {}
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

/// `VmRSS` of `pid`, in KiB.
fn rss_kib(pid: Option<u32>) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{}/status", pid?)).ok()?;
    s.lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()
}

/// `utime + stime` of `pid` (`self` for this process), in clock ticks.
fn cpu_ticks(pid: &str) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name, which is in parentheses and may
    // hold spaces: state is field 3, utime 14, stime 15.
    let rest = &s[s.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    Some(f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?)
}

/// The server's and this client's CPU time from a start, in seconds and
/// as percent of one core (clock ticks: 10 ms steps at 100 Hz).
struct Cpu<'a> {
    a: &'a Args,
    server: Option<u64>,
    client: Option<u64>,
    at: Instant,
}

impl<'a> Cpu<'a> {
    fn start(a: &'a Args) -> Self {
        Self {
            a,
            server: a.server_pid.and_then(|p| cpu_ticks(&p.to_string())),
            client: cpu_ticks("self"),
            at: Instant::now(),
        }
    }

    fn percent(&self) -> Value {
        let secs = self.at.elapsed().as_secs_f64();
        let used = |t0: Option<u64>, now: Option<u64>| match (t0, now) {
            (Some(t0), Some(t1)) => Some((t1 - t0) as f64 / self.a.clk_tck),
            _ => None,
        };
        let server = used(
            self.server,
            self.a.server_pid.and_then(|p| cpu_ticks(&p.to_string())),
        );
        let client = used(self.client, cpu_ticks("self"));
        let pct =
            |u: Option<f64>| u.map_or(Value::Null, |u| json!((u / secs * 1000.0).round() / 10.0));
        let cpu_s = |u: Option<f64>| u.map_or(Value::Null, |u| json!((u * 100.0).round() / 100.0));
        json!({
            "secs": (secs * 10.0).round() / 10.0,
            "server_pct": pct(server),
            "client_pct": pct(client),
            "server_cpu_s": cpu_s(server),
            "client_cpu_s": cpu_s(client),
        })
    }
}

fn per_socket(from: Option<u64>, to: Option<u64>, n: u64) -> Value {
    match (from, to) {
        (Some(f), Some(t)) if n > 0 => json!((t.saturating_sub(f) * 1024) / n),
        _ => Value::Null,
    }
}

/// Waits until `done()` or `secs` pass; whether it is done.
async fn until(secs: u64, done: impl Fn() -> bool) -> bool {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while !done() {
        if Instant::now() > deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    true
}

#[tokio::main]
async fn main() {
    let a = Arc::new(args());
    let n = a.users;

    // The draw: each user's contacts, who watches whom, who flips.
    let mut draw = Draw(a.seed);
    let contacts: Vec<Vec<usize>> = (0..n)
        .map(|i| draw.distinct(n, a.contacts, Some(i)))
        .collect();
    let mut watchers = vec![0u64; n];
    for c in &contacts {
        for &u in c {
            watchers[u] += 1;
        }
    }
    let watched: Vec<usize> = (0..n).filter(|&u| watchers[u] > 0).collect();
    let flipped: Vec<usize> = draw
        .distinct(watched.len(), a.flips.min(watched.len()), None)
        .into_iter()
        .map(|k| watched[k])
        .collect();
    let want = 2 * flipped.iter().map(|&u| watchers[u]).sum::<u64>();

    let flips = Arc::new(Flips {
        base: Instant::now(),
        sent_ns: (0..n).map(|_| Default::default()).collect(),
        latencies_us: Mutex::new(Vec::with_capacity(want as usize)),
    });
    let counters = Arc::new(Counters::default());
    let stop = CancellationToken::new();
    let rss_before = rss_kib(a.server_pid);

    // 1. Open every socket.
    let gate = Arc::new(Semaphore::new(IN_FLIGHT));
    let started = Instant::now();
    let mut tasks = Vec::with_capacity(n);
    let mut go = Vec::with_capacity(n);
    for (i, c) in contacts.into_iter().enumerate() {
        let permit = gate.clone().acquire_owned().await.unwrap();
        let (tx, rx) = mpsc::channel(1);
        go.push(tx);
        let (a, flips, counters, stop) = (a.clone(), flips.clone(), counters.clone(), stop.clone());
        tasks.push(tokio::spawn(async move {
            let opened = open(&a, i).await;
            // Counted before the permit goes back, so the count is whole
            // once every permit is back.
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
            if let Ok((ws, ping_ms)) = opened {
                let users = c.into_iter().map(|u| format!("u{u}")).collect();
                let ping = Duration::from_millis(ping_ms.max(100));
                live(ws, ping, users, rx, flips, counters, stop).await;
            }
        }));
    }
    drop(gate.acquire_many(IN_FLIGHT as u32).await.unwrap());
    let open_secs = started.elapsed().as_secs_f64();
    let connected = counters.connected.load(Ordering::Relaxed);
    eprintln!(
        "opened {connected} sockets ({} failed) in {open_secs:.1} s",
        counters.failed.load(Ordering::Relaxed)
    );
    tokio::time::sleep(Duration::from_secs(a.settle_secs)).await;
    let rss_open = rss_kib(a.server_pid);

    // 2. Watch.
    let started = Instant::now();
    let cpu = Cpu::start(&a);
    for tx in &go {
        let permit = gate.clone().acquire_owned().await.unwrap();
        // A socket already gone drops its receiver: its permit comes back.
        let _ = tx.send(permit).await;
    }
    let all_answered = until(120, || {
        counters.watched.load(Ordering::Relaxed) + counters.watch_failed.load(Ordering::Relaxed)
            >= connected
    })
    .await;
    let watch_secs = started.elapsed().as_secs_f64();
    let watch_cpu = cpu.percent();
    let watching = counters.watched.load(Ordering::Relaxed);
    eprintln!(
        "{watching} watching, {} refused or failed, in {watch_secs:.1} s",
        counters.watch_failed.load(Ordering::Relaxed)
    );
    let refused = counters.refusal.lock().clone();
    let mut out = json!({
        "users": n,
        "contacts": a.contacts,
        "seed": a.seed,
        "connected": connected,
        "failed": counters.failed.load(Ordering::Relaxed),
        "open_secs": (open_secs * 10.0).round() / 10.0,
        "watching": watching,
        "watch_failed": counters.watch_failed.load(Ordering::Relaxed),
        "watch_answered_in_time": all_answered,
        "watch_secs": (watch_secs * 10.0).round() / 10.0,
        "watch_cpu": watch_cpu,
        "watch_refused": refused,
    });
    if refused.is_some() || watching == 0 {
        stop.cancel();
        println!("{out}");
        std::process::exit(2);
    }
    tokio::time::sleep(Duration::from_secs(a.settle_secs)).await;
    let rss_watch = rss_kib(a.server_pid);

    // 3. Hold.
    eprintln!("holding {} s", a.hold_secs);
    let pings0 = counters.pings.load(Ordering::Relaxed);
    let statuses0 = counters.statuses.load(Ordering::Relaxed);
    let cpu = Cpu::start(&a);
    tokio::time::sleep(Duration::from_secs(a.hold_secs)).await;
    let hold_cpu = cpu.percent();
    let pings_held = counters.pings.load(Ordering::Relaxed) - pings0;
    let statuses_held = counters.statuses.load(Ordering::Relaxed) - statuses0;

    // 4. Flip: second sockets for the flipped users, then online one by
    // one, then offline one by one.
    let mut flippers = Vec::with_capacity(flipped.len());
    for &u in &flipped {
        match open(&a, u).await {
            Ok((ws, _)) => flippers.push((u, ws)),
            Err(e) => eprintln!("flipper u{u}: {e}"),
        }
    }
    let want = 2 * flippers.iter().map(|&(u, _)| watchers[u]).sum::<u64>();
    eprintln!(
        "flipping {} users, one every {} ms ({want} (flip, watcher) pairs)",
        flippers.len(),
        a.flip_ms
    );
    let cpu = Cpu::start(&a);
    let gap = Duration::from_millis(a.flip_ms);
    for online in [true, false] {
        for (u, ws) in &mut flippers {
            let typ = if online { "join" } else { "leave" };
            flips.mark(*u, online);
            if let Err(e) = send(ws, json!({"type": typ, "space": FLIP_SPACE})).await {
                eprintln!("flip u{u}: {e}");
            }
            tokio::time::sleep(gap).await;
        }
    }
    let complete = until(15, || flips.latencies_us.lock().len() as u64 >= want).await;
    let flip_cpu = cpu.percent();
    let seen = flips.latencies_us.lock().clone();
    let mut lat: Vec<u64> = seen.iter().map(|&(_, l)| l).collect();
    lat.sort_unstable();
    // Each flip's first status: the path from the store to one socket,
    // without waiting behind the rest of the fan-out.
    let mut first = std::collections::HashMap::new();
    for &(flip, l) in &seen {
        let f = first.entry(flip).or_insert(l);
        *f = (*f).min(l);
    }
    let mut first: Vec<u64> = first.into_values().collect();
    first.sort_unstable();
    stop.cancel();
    for (_, mut ws) in flippers {
        let _ = ws.close(None).await;
    }
    for t in tasks {
        let _ = tokio::time::timeout(Duration::from_secs(5), t).await;
    }

    let kib = |r: Option<u64>| r.map_or(Value::Null, |k| json!(k));
    let more = json!({
        "server_rss_kib": {"before": kib(rss_before), "open": kib(rss_open), "watching": kib(rss_watch)},
        "bytes_per_socket_open": per_socket(rss_before, rss_open, connected),
        "bytes_per_watching_socket": per_socket(rss_open, rss_watch, watching),
        "bytes_per_socket_overall": per_socket(rss_before, rss_watch, connected),
        "hold_secs": a.hold_secs,
        "hold_cpu": hold_cpu,
        "pings_while_holding": pings_held,
        "statuses_while_holding": statuses_held,
        "flips": 2 * flipped.len(),
        "flip_ms": a.flip_ms,
        "flip_cpu": flip_cpu,
        "statuses": counters.statuses.load(Ordering::Relaxed),
        "unexplained_statuses": counters.unexplained.load(Ordering::Relaxed),
        "socket_errors": counters.errors.load(Ordering::Relaxed),
        "latency_samples": lat.len(),
        "latency_expected": want,
        "latency_complete": complete,
        "status_latency_us": {
            "p50": pct(&lat, 0.5),
            "p99": pct(&lat, 0.99),
            "max": lat.last().copied().unwrap_or(0),
        },
        "first_status_latency_us": {
            "p50": pct(&first, 0.5),
            "p99": pct(&first, 0.99),
            "max": first.last().copied().unwrap_or(0),
        },
    });
    if let (Value::Object(o), Value::Object(m)) = (&mut out, more) {
        o.extend(m);
    }
    println!("{out}");
}
