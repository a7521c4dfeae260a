//! How long a lazy record (a heartbeat) waits before its bytes are in the
//! journal's file, where a crash of the process can no longer lose it,
//! while `Sync` appends (friend sets, configs) keep `fdatasync` busy.
//!
//! `cargo run --release -p herenow-journal --example lazy_write_lag -- [SECONDS] [DIR]`
//!
//! Appends a lazy record every 5 ms for SECONDS (default 20) in a fresh
//! folder under DIR (default the system's temporary folder), with two
//! threads appending `Sync` records back to back, and prints the
//! percentiles of the time from each lazy append to its last byte being in
//! the file. Run it with a busy disk beside it (say `dd ... conv=fdatasync`
//! in a loop) to see what a slow sync does to it.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use herenow_journal::{Durability, HEADER, Journal, JournalOptions};

fn main() {
    let mut args = std::env::args().skip(1);
    let seconds: u64 = args.next().map_or(20, |s| s.parse().expect("SECONDS"));
    let base = args.next().map_or_else(std::env::temp_dir, PathBuf::from);
    let dir = base.join(format!("herenow-lazy-lag-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create the folder");
    let (journal, _) = Journal::open(&dir, 0, JournalOptions::default(), |_| Ok(())).expect("open");
    let journal = Arc::new(journal);
    let stop = Arc::new(AtomicBool::new(false));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("a runtime");
    let syncers: Vec<_> = (0..2)
        .map(|_| {
            let (journal, stop) = (journal.clone(), stop.clone());
            rt.spawn(async move {
                while !stop.load(Ordering::Relaxed) {
                    let ack = journal.append(&[7; 200], Durability::Sync).expect("append");
                    ack.durable().await.expect("synced");
                }
            })
        })
        .collect();

    let file = std::fs::read_dir(&dir)
        .expect("read the folder")
        .map(|e| e.expect("an entry").path())
        .find(|p| p.extension().is_some_and(|e| e == "log"))
        .expect("the journal's file");
    let ends = Instant::now() + Duration::from_secs(seconds);
    let mut lags = Vec::new();
    while Instant::now() < ends {
        let appended = Instant::now();
        let _lazy = journal.append(&[1; 100], Durability::Lazy).expect("append");
        // Every byte appended so far, this record's included (and maybe a
        // `Sync` record appended just after it: a slight overestimate).
        let want = HEADER.len() as u64 + journal.stats().bytes;
        while std::fs::metadata(&file).map_or(0, |m| m.len()) < want {
            std::thread::sleep(Duration::from_micros(200));
        }
        lags.push(appended.elapsed());
        std::thread::sleep(Duration::from_millis(5));
    }
    stop.store(true, Ordering::Relaxed);
    for s in syncers {
        rt.block_on(s).expect("the sync appender");
    }
    let syncs = journal.stats().syncs;
    lags.sort();
    let at = |q: f64| lags[((lags.len() - 1) as f64 * q) as usize].as_secs_f64() * 1e3;
    println!(
        "{} lazy records, {syncs} fdatasync calls: in the file after p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms",
        lags.len(),
        at(0.5),
        at(0.99),
        at(1.0)
    );
    drop(journal);
    let _ = std::fs::remove_dir_all(&dir);
}
