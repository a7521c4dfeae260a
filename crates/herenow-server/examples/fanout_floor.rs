//! The floor under a presence event's fan-out (issue 44): what a bare
//! tokio program spends to write one event frame to each of N sockets,
//! so that herenow's cost per recipient can be read against it.
//!
//! It does what the Pusher probes of `scripts/bench-peerload.sh` ask of
//! the server for each probe, and nothing else: N TCP sockets are open,
//! each with its own writer task and queue (a socket that stops reading
//! must not hold up the others, which is why herenow has them too), and
//! for each of `EVENTS` events, 50 ms apart, the same WebSocket text frame
//! (a `pusher_internal:member_added` of herenow's size, encoded once) is
//! queued to every socket and written. No WebSocket library, no JSON, no
//! store: the frame's bytes, tokio's scheduler, and the kernel's TCP send
//! path. The sockets' other ends are read by a child process (this
//! program with `read`, reading as peerload's members do), so the CPU
//! time reported is the writing side's alone, from the first event queued
//! to the last byte written.
//!
//! With `rosters` as a third argument it also writes, before each event,
//! the roster a probe gets when it enters (`subscription_succeeded` with
//! the N members, the probes before it and itself, as peerload's members are
//! named, `u0`… with `{"name": "u0"}`), encoded before the clock starts
//! and written whole: every byte the server must send during the probes,
//! at the least cost of writing it.
//!
//! ```sh
//! cargo build --release -p herenow-server --example fanout_floor
//! target/release/examples/fanout_floor 5000 100
//! target/release/examples/fanout_floor 5000 100 rosters
//! ```
//!
//! `scripts/bench-peerload.sh` runs it beside the Pusher probes of herenow
//! and prints both per recipient.

use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, mpsc};

/// The binary's allocator (`crates/herenow/src/main.rs`).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// What one event says, as herenow's Pusher socket writes it for a
/// peerload probe.
const EVENT: &str = r#"{"event":"pusher_internal:member_added","channel":"presence-bench","data":"{\"user_id\":\"probe-42\",\"user_info\":{\"name\":\"probe-42\"}}"}"#;

/// Each socket's queue, as herenow's Pusher queue.
const QUEUE: usize = 512;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("read") {
        read(&args[2], args[3].parse().expect("N"));
        return;
    }
    let n: usize = args.get(1).map_or(5_000, |a| a.parse().expect("N"));
    let events: usize = args.get(2).map_or(100, |a| a.parse().expect("EVENTS"));
    assert!(n > 0 && events > 0, "N and EVENTS are at least 1");
    // Every frame a socket gets fits its queue: none is dropped, so the
    // count of frames written reaches the total.
    assert!(2 * events <= QUEUE, "EVENTS is at most {}", QUEUE / 2);
    let rosters = match args.get(3).map(String::as_str) {
        None => false,
        Some("rosters") => true,
        Some(other) => panic!("the third argument is `rosters` or nothing, not {other:?}"),
    };
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a runtime")
        .block_on(serve(n, events, rosters));
}

/// The writing side: accepts `n` sockets from the reader, then fans
/// `events` frames out to all of them (and, with `rosters`, each
/// event's roster to one of them first).
async fn serve(n: usize, events: usize, rosters: bool) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("address").to_string();
    let exe = std::env::current_exe().expect("this program");
    let mut reader = Command::new(exe)
        .args(["read", &addr, &n.to_string()])
        .stdout(Stdio::piped())
        .spawn()
        .expect("the reader");
    let rosters: Vec<Arc<[u8]>> = match rosters {
        true => (0..events)
            .map(|p| Arc::from(text_frame(&roster(n, p))))
            .collect(),
        false => Vec::new(),
    };
    let total = (n * events + rosters.len()) as u64;
    let written = Arc::new(AtomicU64::new(0));
    let done = Arc::new(Notify::new());
    let mut queues = Vec::with_capacity(n);
    for _ in 0..n {
        let (mut socket, _) = listener.accept().await.expect("accept");
        socket.set_nodelay(true).expect("nodelay");
        let (tx, mut rx) = mpsc::channel::<Arc<[u8]>>(QUEUE);
        let (written, done) = (written.clone(), done.clone());
        tokio::spawn(async move {
            while let Some(frame) = rx.recv().await {
                if socket.write_all(&frame).await.is_err() {
                    return;
                }
                if written.fetch_add(1, Ordering::Relaxed) + 1 == total {
                    done.notify_one();
                }
            }
        });
        queues.push(tx);
    }
    let frame: Arc<[u8]> = Arc::from(text_frame(EVENT));
    let cpu0 = cpu_seconds();
    let t0 = Instant::now();
    let finished = done.notified();
    tokio::pin!(finished);
    finished.as_mut().enable();
    for event in 0..events {
        if event > 0 {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        if let Some(roster) = rosters.get(event) {
            let _ = queues[event % n].try_send(roster.clone());
        }
        for q in &queues {
            let _ = q.try_send(frame.clone());
        }
    }
    finished.await;
    let cpu = cpu_seconds() - cpu0;
    let wall = t0.elapsed().as_secs_f64();
    drop(queues);
    let deliveries = (n * events) as f64;
    println!(
        "{{\"n\": {n}, \"events\": {events}, \"frame_bytes\": {}, \"server_cpu_s\": {cpu:.3}, \
         \"wall_s\": {wall:.3}, \"us_per_delivery\": {:.3}}}",
        text_frame(EVENT).len(),
        cpu / deliveries * 1e6
    );
    let _ = reader.kill();
    let _ = reader.wait();
}

/// The reading side: `n` sockets to `addr`, read as peerload's members
/// read theirs (a task per socket on a two-thread tokio runtime, woken by
/// epoll: on loopback the kernel charges waking a reader to the writer),
/// until the writer goes.
fn read(addr: &str, n: usize) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    runtime.block_on(async {
        let mut readers = Vec::with_capacity(n);
        for _ in 0..n {
            let mut socket = TcpStream::connect(addr).await.expect("connect");
            readers.push(tokio::spawn(async move {
                let mut buf = vec![0u8; 4096];
                while matches!(socket.read(&mut buf).await, Ok(k) if k > 0) {}
            }));
        }
        for reader in readers {
            let _ = reader.await;
        }
    });
}

/// The `subscription_succeeded` a probe gets on entering as the
/// `probe`-th: the `n` members, the probes before it and itself, in herenow's
/// Pusher encoding (`data` a JSON string).
fn roster(n: usize, probe: usize) -> String {
    let ids: Vec<String> = (0..n)
        .map(|i| format!("u{i}"))
        .chain((0..=probe).map(|p| format!("probe-{p}")))
        .collect();
    let hash: serde_json::Map<String, serde_json::Value> = ids
        .iter()
        .map(|id| (id.clone(), serde_json::json!({ "name": id })))
        .collect();
    let data = serde_json::json!({"presence": {"ids": ids, "hash": hash, "count": ids.len()}});
    serde_json::json!({
        "event": "pusher_internal:subscription_succeeded",
        "channel": "presence-bench",
        "data": data.to_string(),
    })
    .to_string()
}

/// An unmasked WebSocket text frame holding `text` (RFC 6455 §5.2).
fn text_frame(text: &str) -> Vec<u8> {
    let len = text.len();
    let mut frame = vec![0x81];
    if len < 126 {
        frame.push(len as u8);
    } else if len <= usize::from(u16::MAX) {
        frame.push(126);
        frame.extend_from_slice(&(len as u16).to_be_bytes());
    } else {
        frame.push(127);
        frame.extend_from_slice(&(len as u64).to_be_bytes());
    }
    frame.extend_from_slice(text.as_bytes());
    frame
}

/// This process's CPU time so far (user and system), in seconds.
fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").expect("/proc/self/stat");
    // After the command's closing parenthesis: fields 14 and 15 are
    // utime and stime, in clock ticks (100 a second on Linux).
    let rest = &stat[stat.rfind(')').expect("a stat line") + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 =
        fields[11].parse::<u64>().unwrap_or(0) + fields[12].parse::<u64>().unwrap_or(0);
    ticks as f64 / 100.0
}
