//! Spinning before sleeping, for threads that wait on a busy space.
//!
//! A batch of 1,000 heartbeats holds a space for some tens of
//! microseconds. A writer that finds the space taken and goes to sleep
//! (the mutex parks it) is woken by the unlock, and on a virtual machine
//! that wake-up (a futex, then an interrupt to another CPU) can take as
//! long as the batch itself: between two batches the space then sits
//! free, its next writer not yet running. Likewise an owner thread that
//! sleeps between batches is woken by every batch staged after it went
//! to sleep.
//!
//! So where there are cores to spare for it, the waiting thread spins
//! first, for at most [`spin_budget`]: one writer per space at a time
//! (the others sleep as before, so at most one core per busy space
//! spins), watching the lock without writing to it, and taking it the
//! moment it is free; an owner watches its queue the same way before it
//! sleeps. Below a few threads writing at once spinning takes the CPU
//! the lock holder or the request parser needs, so it is off there.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use parking_lot::{Mutex, MutexGuard};

use super::owner::writers_at_once;

/// The spin budget in nanoseconds; `u64::MAX` until first read.
static SPIN_NS: AtomicU64 = AtomicU64::new(u64::MAX);

/// How long a thread waiting on a busy space spins before it sleeps:
/// what [`set_spin`] or `HERENOW_SPACE_SPIN_US` says, else
/// [`default_spin`] of the threads writing at once.
pub(super) fn spin_budget() -> Duration {
    let ns = SPIN_NS.load(Ordering::Relaxed);
    if ns != u64::MAX {
        return Duration::from_nanos(ns);
    }
    let budget = std::env::var("HERENOW_SPACE_SPIN_US")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
        .map(Duration::from_micros)
        .unwrap_or_else(|| default_spin(writers_at_once()));
    // A concurrent first read computes the same.
    SPIN_NS.store(
        (budget.as_nanos() as u64).min(u64::MAX - 1),
        Ordering::Relaxed,
    );
    budget
}

/// The default spin: none below 8 threads writing at once (where the
/// cores are few, a spinning thread takes one the lock holder needs),
/// else 50 µs, about a batch of 1,000 heartbeats' hold.
fn default_spin(at_once: usize) -> Duration {
    if at_once < 8 {
        Duration::ZERO
    } else {
        Duration::from_micros(50)
    }
}

/// Sets the spin budget over the default and `HERENOW_SPACE_SPIN_US`
/// (zero: never spin). For tests and benchmarks.
pub fn set_spin(budget: Duration) {
    SPIN_NS.store(
        (budget.as_nanos() as u64).min(u64::MAX - 1),
        Ordering::Relaxed,
    );
}

/// Spins until `ready` says so or the budget is spent; returns what
/// `ready` last said. Reads only: the lines `ready` watches stay shared
/// until their writer changes them.
pub(super) fn spin_until(budget: Duration, mut ready: impl FnMut() -> bool) -> bool {
    if budget.is_zero() {
        return ready();
    }
    let start = Instant::now();
    loop {
        for _ in 0..32 {
            if ready() {
                return true;
            }
            std::hint::spin_loop();
        }
        if start.elapsed() >= budget {
            return ready();
        }
    }
}

/// Locks `mutex`, spinning first for at most [`spin_budget`] if no
/// other thread spins on it (`spinner` marks the one that does).
pub(super) fn lock<'a, T>(mutex: &'a Mutex<T>, spinner: &AtomicBool) -> MutexGuard<'a, T> {
    lock_within(mutex, spinner, spin_budget())
}

/// [`lock`], spinning for at most `budget`.
fn lock_within<'a, T>(
    mutex: &'a Mutex<T>,
    spinner: &AtomicBool,
    budget: Duration,
) -> MutexGuard<'a, T> {
    if !budget.is_zero() && !spinner.swap(true, Ordering::Acquire) {
        let mut guard = None;
        spin_until(budget, || {
            if mutex.is_locked() {
                return false;
            }
            guard = mutex.try_lock();
            guard.is_some()
        });
        spinner.store(false, Ordering::Release);
        if let Some(guard) = guard {
            return guard;
        }
    }
    mutex.lock()
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::AtomicBool;
    use std::time::Duration;

    use parking_lot::Mutex;

    use super::{default_spin, lock_within, spin_until};

    #[test]
    fn spinning_needs_eight_threads_writing_at_once() {
        assert_eq!(default_spin(1), Duration::ZERO);
        assert_eq!(default_spin(7), Duration::ZERO);
        assert_eq!(default_spin(8), Duration::from_micros(50));
        assert_eq!(default_spin(64), Duration::from_micros(50));
    }

    #[test]
    fn spin_until_stops_at_ready_or_budget() {
        let mut calls = 0;
        assert!(spin_until(Duration::from_secs(5), || {
            calls += 1;
            calls == 3
        }));
        assert_eq!(calls, 3);
        assert!(!spin_until(Duration::from_micros(20), || false));
        let mut once = 0;
        assert!(!spin_until(Duration::ZERO, || {
            once += 1;
            false
        }));
        assert_eq!(once, 1, "no budget: asked once");
    }

    #[test]
    fn a_spinning_lock_excludes_and_frees_the_spinner_mark() {
        // Four threads add under the lock, spinning or sleeping: no
        // increment is lost, and the mark is free at the end.
        let mutex = Arc::new(Mutex::new(0u64));
        let spinner = Arc::new(AtomicBool::new(false));
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let (mutex, spinner) = (mutex.clone(), spinner.clone());
                std::thread::spawn(move || {
                    for _ in 0..10_000 {
                        *lock_within(&mutex, &spinner, Duration::from_micros(50)) += 1;
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(*mutex.lock(), 40_000);
        assert!(!spinner.load(std::sync::atomic::Ordering::Relaxed));
    }
}
