//! The hand-off between appenders and the writer thread, and the writer
//! and sync threads.
//!
//! Appenders encode records into one shared buffer under a mutex
//! ([`Shared::append`]), each behind a head holding its length. The writer
//! swaps that buffer for its empty spare, fills in the checksums (the one
//! per-byte cost of framing, kept off appenders, which run under a space's
//! lock) and writes it with one call. The sync thread ([`Syncer`]) calls
//! `fdatasync` when a `Sync` record was written or the oldest unsynced lazy
//! write is due; it is apart so that a slow `fdatasync` (seconds on a busy
//! disk) never keeps lazy records in memory past [`WRITE_EVERY`]. A
//! rotation or the close is synced by the writer itself.
//!
//! An appender wakes the sleeping writer only when it must act: a `Sync`
//! record (group commit: those written while one `fdatasync` runs share the
//! next), a buffer past [`WAKE_BYTES`], or a first record while no write is
//! due within [`WRITE_EVERY`]. `Sync` records are numbered in append order;
//! after each `fdatasync` the number of the last one covered is published
//! on a `watch` channel, which every [`Ack`](crate::Ack) waits on.

use std::fs::File;
use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};
use tokio::sync::{oneshot, watch};

use crate::file::{self, RECORD_HEAD};
use crate::{Durability, JournalError, MAX_RECORD};

/// Buffered bytes at which an appender wakes a napping writer: big
/// enough that a write call carries many records, small enough to keep
/// the page cache fed steadily.
const WAKE_BYTES: usize = 1024 * 1024;

/// The longest a lazy record waits in the buffer before it is written
/// (it is synced later, within `lazy_sync`): what a crash of the process
/// alone, not of the machine, can lose of it.
pub(crate) const WRITE_EVERY: Duration = Duration::from_millis(10);

/// What the writer has made durable, published after every `fdatasync`.
#[derive(Clone, Debug, Default)]
pub(crate) struct Synced {
    /// Every record numbered up to this one is on disk.
    pub(crate) upto: u64,
    /// Why the journal stopped, once it has.
    pub(crate) failed: Option<Arc<str>>,
}

/// The state appenders and the writer share, behind [`Shared::state`].
struct State {
    /// Framed records not yet taken by the writer.
    buf: Vec<u8>,
    /// Records appended since open; the number of the newest.
    records: u64,
    /// Bytes appended since open, record heads included.
    bytes: u64,
    /// The number of the newest `Sync` record (0: none yet).
    sync_wanted: u64,
    /// A rotation asked for and not yet done.
    rotate: Option<oneshot::Sender<Result<u64, String>>>,
    /// `close` was called: write and sync what is buffered, then stop.
    closing: bool,
    /// Set by the first write or sync error (or the writer's end): from
    /// then on every append is refused, so nothing is acknowledged that
    /// may not be on disk.
    failed: Option<Arc<str>>,
    /// The writer waits on [`Shared::work`].
    sleeping: bool,
    /// ... and only a wake-up brings it back before the next write is
    /// due: the first record into an empty buffer must wake it.
    wake_on_first: bool,
}

/// The half of the journal both sides hold.
pub(crate) struct Shared {
    state: Mutex<State>,
    /// Wakes the writer.
    work: Condvar,
    /// Wakes appenders waiting for room in a full buffer.
    room: Condvar,
    /// What is synced; the writer holds the sender.
    synced: watch::Receiver<Synced>,
    /// The most bytes buffered before an append waits for the writer.
    max_buffered: usize,
    /// `fdatasync` calls since open.
    pub(crate) syncs: AtomicU64,
    /// The number of the file being written.
    pub(crate) file: AtomicU64,
}

fn closed() -> JournalError {
    JournalError::Failed("the journal closed".into())
}

impl Shared {
    /// The shared half, and the sender of what is synced for the writer.
    pub(crate) fn new(number: u64, max_buffered: usize) -> (Arc<Shared>, watch::Sender<Synced>) {
        let (tx, rx) = watch::channel(Synced::default());
        let shared = Shared {
            state: Mutex::new(State {
                buf: Vec::new(),
                records: 0,
                bytes: 0,
                sync_wanted: 0,
                rotate: None,
                closing: false,
                failed: None,
                sleeping: false,
                wake_on_first: false,
            }),
            work: Condvar::new(),
            room: Condvar::new(),
            synced: rx,
            max_buffered: max_buffered.max(WAKE_BYTES),
            syncs: AtomicU64::new(0),
            file: AtomicU64::new(number),
        };
        (Arc::new(shared), tx)
    }

    /// Adds the record `encode` appends to the buffer, behind its length
    /// (the writer adds the checksum). Returns the
    /// record's number when it is `Sync` (to wait for with
    /// [`wait_synced`](Self::wait_synced)), `None` when it is lazy.
    #[inline]
    pub(crate) fn append(
        &self,
        durability: Durability,
        encode: impl FnOnce(&mut Vec<u8>),
    ) -> Result<Option<u64>, JournalError> {
        let mut st = self.state.lock();
        if st.buf.len() >= self.max_buffered || st.failed.is_some() || st.closing {
            self.wait_for_room(&mut st)?;
        }
        let was_empty = st.buf.is_empty();
        let start = st.buf.len();
        st.buf.extend_from_slice(&[0; RECORD_HEAD]);
        let len = {
            // Should `encode` panic, the half-written record goes: the
            // buffer must hold whole records only.
            let mut partial = Partial {
                buf: &mut st.buf,
                start,
            };
            encode(partial.buf);
            let len = partial.buf.len() - start - RECORD_HEAD;
            if len > MAX_RECORD {
                return Err(JournalError::TooLarge(len));
            }
            if len == 0 {
                return Err(JournalError::Empty);
            }
            file::write_length(&mut partial.buf[start..]);
            partial.start = usize::MAX;
            len
        };
        st.records += 1;
        st.bytes += (RECORD_HEAD + len) as u64;
        let number = st.records;
        let sync = durability == Durability::Sync;
        if sync {
            st.sync_wanted = number;
        }
        if st.sleeping && (sync || st.buf.len() >= WAKE_BYTES || (was_empty && st.wake_on_first)) {
            st.sleeping = false;
            self.work.notify_one();
        }
        Ok(sync.then_some(number))
    }

    /// Waits while the buffer is full; refuses the append once the
    /// journal failed or is closing. Out of line: the append's path
    /// rarely comes here.
    #[cold]
    #[inline(never)]
    fn wait_for_room(
        &self,
        st: &mut parking_lot::MutexGuard<'_, State>,
    ) -> Result<(), JournalError> {
        while st.buf.len() >= self.max_buffered && st.failed.is_none() && !st.closing {
            self.room.wait(st);
        }
        if let Some(why) = &st.failed {
            return Err(JournalError::Failed(why.to_string()));
        }
        if st.closing {
            return Err(closed());
        }
        Ok(())
    }

    /// Resolves once record `number` is synced, or the journal failed
    /// before it was.
    pub(crate) async fn wait_synced(&self, number: u64) -> Result<(), JournalError> {
        let mut rx = self.synced.clone();
        let outcome = rx
            .wait_for(|s| s.upto >= number || s.failed.is_some())
            .await
            .map(|s| (s.upto >= number, s.failed.clone()));
        match outcome {
            Ok((true, _)) => Ok(()),
            Ok((false, failed)) => Err(JournalError::Failed(
                failed.map_or_else(|| "the journal closed".into(), |w| w.to_string()),
            )),
            Err(_) => Err(closed()),
        }
    }

    /// Asks the writer to move to a new file after writing everything
    /// appended so far to the current one.
    pub(crate) fn request_rotate(
        &self,
    ) -> Result<oneshot::Receiver<Result<u64, String>>, JournalError> {
        let (tx, rx) = oneshot::channel();
        let mut st = self.state.lock();
        if let Some(why) = &st.failed {
            return Err(JournalError::Failed(why.to_string()));
        }
        if st.closing {
            return Err(closed());
        }
        // Two rotations at once: the first one's caller learns of the
        // second file through its own.
        if st.rotate.replace(tx).is_some() {
            tracing::debug!("a journal rotation replaced one not yet done");
        }
        st.sleeping = false;
        self.work.notify_one();
        Ok(rx)
    }

    /// Asks the writer to write and sync what is buffered, then stop.
    pub(crate) fn request_close(&self) {
        let mut st = self.state.lock();
        st.closing = true;
        st.sleeping = false;
        self.work.notify_one();
        self.room.notify_all();
    }

    /// Records and bytes appended since open.
    pub(crate) fn appended(&self) -> (u64, u64) {
        let st = self.state.lock();
        (st.records, st.bytes)
    }
}

/// A record being encoded into the buffer; cut off again if dropped
/// before it is sealed (`start` is then `usize::MAX`).
struct Partial<'a> {
    buf: &'a mut Vec<u8>,
    start: usize,
}

impl Drop for Partial<'_> {
    fn drop(&mut self) {
        if self.start != usize::MAX {
            self.buf.truncate(self.start);
        }
    }
}

/// What one round of the writer does, taken under the lock.
struct Job {
    /// A `Sync` record is among the bytes taken.
    sync: bool,
    rotate: Option<oneshot::Sender<Result<u64, String>>>,
    close: bool,
    /// The number of the last record taken.
    upto: u64,
}

/// The writer thread's state: it owns the file.
pub(crate) struct Writer {
    dir: PathBuf,
    number: u64,
    file: Arc<File>,
    shared: Arc<Shared>,
    published: Arc<watch::Sender<Synced>>,
    /// The syncer's half: what is written and wants syncing.
    syncer: Arc<Syncer>,
    /// Records up to this number have been taken from the buffer.
    taken: u64,
    /// ... and written, when nothing failed.
    written: u64,
    /// When the buffer may be written next (one write per
    /// [`WRITE_EVERY`] unless a wake-up asks for more).
    next_write: Instant,
    /// The first write or sync error.
    failed: Option<Arc<str>>,
}

impl Writer {
    pub(crate) fn new(
        dir: PathBuf,
        number: u64,
        file: File,
        shared: Arc<Shared>,
        published: watch::Sender<Synced>,
        lazy_sync: Duration,
    ) -> Self {
        let file = Arc::new(file);
        let published = Arc::new(published);
        let syncer = Arc::new(Syncer {
            state: Mutex::new(SyncState {
                file: file.clone(),
                written: 0,
                wanted: 0,
                dirty_since: None,
                stop: false,
            }),
            wake: Condvar::new(),
            shared: shared.clone(),
            published: published.clone(),
            // The write came up to WRITE_EVERY after its records were
            // appended.
            sync_after: lazy_sync.saturating_sub(WRITE_EVERY),
        });
        Self {
            dir,
            number,
            file,
            shared,
            published,
            syncer,
            taken: 0,
            written: 0,
            next_write: Instant::now(),
            failed: None,
        }
    }

    /// Writes until closed, with the syncer on a thread of its own beside
    /// it (see the module doc).
    pub(crate) fn run(mut self) {
        let syncer = self.syncer.clone();
        std::thread::scope(|scope| {
            let sync_thread = std::thread::Builder::new()
                .name("herenow-journal-sync".into())
                .spawn_scoped(scope, || syncer.run());
            if let Err(e) = sync_thread {
                self.fail(format!("starting the journal's sync thread: {e}"));
            }
            // Stops the syncer however the writing ends, a panic included
            // (the scope waits for it before the panic goes on).
            let _stop = StopOnDrop(&syncer);
            self.write_until_closed();
        });
    }

    fn write_until_closed(&mut self) {
        let mut spare = Vec::with_capacity(64 * 1024);
        loop {
            let job = self.take(&mut spare);
            file::seal_all(&mut spare);
            self.write(&spare, job.sync);
            spare.clear();
            if job.rotate.is_some() || job.close {
                // Here, not by the syncer: everything in this file must
                // be synced before the syncer is handed the next one.
                self.sync_now();
            }
            if let Some(ack) = job.rotate {
                let _ = ack.send(self.rotate());
            }
            if job.close {
                break;
            }
        }
    }

    /// Sleeps until there is work, then swaps the buffer into `spare`.
    fn take(&mut self, spare: &mut Vec<u8>) -> Job {
        let shared = Arc::clone(&self.shared);
        let mut st = shared.state.lock();
        loop {
            if st.closing
                || st.rotate.is_some()
                || st.sync_wanted > self.taken
                || st.buf.len() >= WAKE_BYTES
            {
                break;
            }
            st.sleeping = true;
            st.wake_on_first = st.buf.is_empty();
            if st.buf.is_empty() {
                shared.work.wait(&mut st);
            } else if self.next_write <= Instant::now() {
                break;
            } else {
                shared.work.wait_until(&mut st, self.next_write);
            }
            st.sleeping = false;
        }
        st.sleeping = false;
        std::mem::swap(&mut st.buf, spare);
        let job = Job {
            sync: st.sync_wanted > self.taken,
            rotate: st.rotate.take(),
            close: st.closing,
            upto: st.records,
        };
        self.taken = job.upto;
        drop(st);
        shared.room.notify_all();
        self.next_write = Instant::now() + WRITE_EVERY;
        job
    }

    /// Writes `buf` and hands it to the syncer: at once when `sync` (a
    /// `Sync` record is in it), else by the lazy deadline.
    fn write(&mut self, buf: &[u8], sync: bool) {
        if buf.is_empty() || self.failed.is_some() {
            return;
        }
        match (&*self.file).write_all(buf) {
            Ok(()) => {
                self.written = self.taken;
                self.syncer.wrote(self.written, sync);
            }
            Err(e) => self.fail(format!("writing the journal: {e}")),
        }
    }

    /// Syncs the current file on this thread (before a rotation or the
    /// close) and publishes what that covers.
    fn sync_now(&mut self) {
        // After the syncer failed, a later `fdatasync` that succeeds says
        // nothing of the writes the failed one covered.
        if self.failed.is_some() || self.written == 0 || self.published.borrow().failed.is_some() {
            return;
        }
        match self.file.sync_data() {
            Ok(()) => {
                self.shared.syncs.fetch_add(1, Ordering::Relaxed);
                publish(&self.published, self.written);
            }
            Err(e) => self.fail(format!("syncing the journal: {e}")),
        }
    }

    fn rotate(&mut self) -> Result<u64, String> {
        if let Some(why) = &self.failed {
            return Err(why.to_string());
        }
        let number = self.number + 1;
        match file::create(&self.dir, number) {
            Ok(f) => {
                self.file = Arc::new(f);
                self.syncer.switch(self.file.clone());
                self.number = number;
                self.shared.file.store(number, Ordering::Relaxed);
                Ok(number)
            }
            Err(e) => Err(e.to_string()),
        }
    }

    fn fail(&mut self, why: String) {
        self.failed = Some(fail(&self.shared, &self.published, why));
    }
}

/// Every record numbered up to `upto` is on disk.
fn publish(published: &watch::Sender<Synced>, upto: u64) {
    published.send_if_modified(|s| {
        let newer = s.upto < upto;
        if newer {
            s.upto = upto;
        }
        newer
    });
}

/// Stops the journal: logs `why`, refuses every later append (the first
/// reason stays) and fails every `Sync` append waiting. Returns `why`.
fn fail(shared: &Shared, published: &watch::Sender<Synced>, why: String) -> Arc<str> {
    tracing::error!(error = %why, "the journal failed; durable writes are refused from now on");
    let why: Arc<str> = why.into();
    stop_appends(shared, why.clone());
    published.send_modify(|s| {
        s.failed.get_or_insert_with(|| why.clone());
    });
    why
}

/// Refuses every later append with `why` (the first reason stays).
fn stop_appends(shared: &Shared, why: Arc<str>) {
    let mut st = shared.state.lock();
    st.failed.get_or_insert(why);
    drop(st);
    shared.room.notify_all();
}

impl Drop for Writer {
    /// However the thread ends (closed, or a panic), appends stop being
    /// accepted; dropping `published` fails every `Sync` append still
    /// waiting.
    fn drop(&mut self) {
        stop_appends(&self.shared, "the journal closed".into());
    }
}

/// Stops the syncer when dropped.
struct StopOnDrop<'a>(&'a Syncer);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.stop();
    }
}

/// What the writer hands the syncer, behind [`Syncer::state`].
struct SyncState {
    /// The file being written (the writer syncs a file itself before it
    /// moves to the next, so this one holds everything not yet synced).
    file: Arc<File>,
    /// The number of the last record written.
    written: u64,
    /// A `Sync` record up to this number waits for its `fdatasync`.
    wanted: u64,
    /// Written but not yet synced since this instant.
    dirty_since: Option<Instant>,
    /// The writer is done: stop.
    stop: bool,
}

/// The sync thread's half (when it syncs: the module doc); publishes what
/// each `fdatasync` covers.
struct Syncer {
    state: Mutex<SyncState>,
    wake: Condvar,
    shared: Arc<Shared>,
    published: Arc<watch::Sender<Synced>>,
    /// How long after the first unsynced write a sync is due.
    sync_after: Duration,
}

impl Syncer {
    /// The writer wrote records up to `written`; `sync`: one of them is a
    /// `Sync` record.
    fn wrote(&self, written: u64, sync: bool) {
        let mut st = self.state.lock();
        st.written = written;
        let had_deadline = st.dirty_since.is_some();
        st.dirty_since.get_or_insert_with(Instant::now);
        if sync {
            st.wanted = written;
        }
        // A sleeper with a deadline already wakes by itself for a lazy
        // write.
        if sync || !had_deadline {
            self.wake.notify_one();
        }
    }

    /// The writer moved to `file`, having synced the previous one.
    fn switch(&self, file: Arc<File>) {
        let mut st = self.state.lock();
        st.file = file;
        st.dirty_since = None;
    }

    fn stop(&self) {
        let mut st = self.state.lock();
        st.stop = true;
        self.wake.notify_one();
    }

    fn run(&self) {
        let mut synced = 0;
        loop {
            let (file, upto) = {
                let mut st = self.state.lock();
                loop {
                    if st.stop {
                        return;
                    }
                    let due = st.dirty_since.map(|t| t + self.sync_after);
                    if st.wanted > synced || due.is_some_and(|t| t <= Instant::now()) {
                        break;
                    }
                    match due {
                        Some(t) => {
                            self.wake.wait_until(&mut st, t);
                        }
                        None => self.wake.wait(&mut st),
                    }
                }
                st.dirty_since = None;
                (st.file.clone(), st.written)
            };
            match file.sync_data() {
                Ok(()) => {
                    self.shared.syncs.fetch_add(1, Ordering::Relaxed);
                    synced = upto;
                    publish(&self.published, upto);
                }
                Err(e) => {
                    fail(
                        &self.shared,
                        &self.published,
                        format!("syncing the journal: {e}"),
                    );
                    return;
                }
            }
        }
    }
}
