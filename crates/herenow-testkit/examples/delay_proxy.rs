//! A TCP proxy that holds every byte for a fixed time in each direction:
//! Redis "on another machine" for benchmarks on one machine (a network
//! round trip of twice the delay), where the kernel's `netem` is not
//! available.
//!
//! `cargo run --release -p herenow-testkit --example delay_proxy -- LISTEN_PORT TARGET_PORT DELAY_US`
//!
//! Each connection gets two threads per direction: one reads and stamps
//! what it read with the time it may leave, the other sends it then, in
//! order. Sleeps are timed with a 1 ns timer slack and end in a short spin,
//! so the delay holds to a few microseconds.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [listen, target, delay] = args.as_slice() else {
        eprintln!("usage: delay_proxy LISTEN_PORT TARGET_PORT DELAY_US");
        std::process::exit(2);
    };
    let delay = Duration::from_micros(delay.parse().expect("DELAY_US: a number"));
    let target = format!("127.0.0.1:{target}");
    let listener = TcpListener::bind(format!("127.0.0.1:{listen}")).expect("bind LISTEN_PORT");
    eprintln!("delay_proxy: 127.0.0.1:{listen} -> {target}, {delay:?} each way");
    for client in listener.incoming() {
        let Ok(client) = client else { continue };
        let Ok(server) = TcpStream::connect(&target) else {
            continue;
        };
        for s in [&client, &server] {
            let _ = s.set_nodelay(true);
        }
        pipe(
            client.try_clone().unwrap(),
            server.try_clone().unwrap(),
            delay,
        );
        pipe(server, client, delay);
    }
}

/// Copies `from` to `to`, each read held back by `delay`.
fn pipe(mut from: TcpStream, mut to: TcpStream, delay: Duration) {
    let (tx, rx) = mpsc::channel::<(Instant, Vec<u8>)>();
    thread::spawn(move || {
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            match from.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    if tx
                        .send((Instant::now() + delay, buf[..n].to_vec()))
                        .is_err()
                    {
                        break;
                    }
                }
            }
        }
        let _ = from.shutdown(Shutdown::Both);
    });
    thread::spawn(move || {
        // SAFETY: prctl(PR_SET_TIMERSLACK) only changes this thread's
        // timer slack.
        #[cfg(target_os = "linux")]
        unsafe {
            libc_prctl(29, 1);
        }
        for (due, bytes) in rx {
            wait_until(due);
            if to.write_all(&bytes).is_err() {
                break;
            }
        }
        let _ = to.shutdown(Shutdown::Both);
    });
}

fn wait_until(due: Instant) {
    let spin = Duration::from_micros(20);
    loop {
        let now = Instant::now();
        if now >= due {
            return;
        }
        let left = due - now;
        if left > spin {
            thread::sleep(left - spin);
        } else {
            std::hint::spin_loop();
        }
    }
}

#[cfg(target_os = "linux")]
unsafe extern "C" {
    #[link_name = "prctl"]
    fn libc_prctl(option: i32, arg: u64) -> i32;
}
