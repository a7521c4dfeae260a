//! herenow-journal: an append-only, checksummed, group-committed log of
//! opaque records, so the embedded store loses nothing it acknowledged.
//!
//! It knows files and `fsync`, and nothing of presence: a record is bytes
//! the caller encoded. The memory store's durability is *snapshot +
//! journal*: every change is appended here; a periodic snapshot folds the
//! journal (the writer moves to a new file, the snapshot is written, the
//! older files are deleted); a start loads the snapshot and replays the
//! files it does not cover. `file.rs` names the files and reads them back
//! (a torn tail told from corruption), `writer.rs` holds the writer and
//! sync threads.
//!
//! # Promises
//!
//! - An append encodes its record straight into a buffer shared with one
//!   writer thread ([`Journal::append_with`] lets the caller encode in
//!   place): no message, allocation or thread wake-up per record. The
//!   writer checksums and writes what gathered, a batch per write call.
//! - A [`Durability::Sync`] append's [`Ack`] resolves once the record is
//!   on disk (`fdatasync`). Appends waiting at the same time share one
//!   `fdatasync` (group commit): a sync thread beside the writer syncs
//!   everything written so far, and what is written while it runs shares
//!   the next one.
//! - A [`Durability::Lazy`] append has nothing to wait for. It is written
//!   within 10 ms and synced within [`JournalOptions::lazy_sync`] (1 s,
//!   like Redis's `appendfsync everysec`), or sooner by any `Sync` append
//!   behind it: a crash of the machine loses at most that last second of
//!   lazy records, a crash of the process alone the last 10 ms, however
//!   long the disk takes to sync (the writer never waits for a sync but
//!   at a rotation or the close).
//! - Replay yields the records in the order they were appended.
//!
//! # Format
//!
//! Files `journal-<16 hex digits>.log` in the data directory, numbered in
//! order. Each starts with the line `herenow-journal 1\n` and holds
//! records `[length: u32 LE][CRC-32 of payload: u32 LE][payload]`.
//!
//! A crash or power cut can leave the newest file with a torn tail: a
//! record cut short, a checksum that does not match on the last record,
//! or zeros the file system allocated but never wrote. That tail is cut
//! off, logged with its byte offset, and the journal goes on from there.
//! Damage anywhere else — a bad record followed by more data, or any
//! defect in an older file — is corruption, not a crash, and
//! [`Journal::open`] refuses it with [`JournalError::Corrupt`] naming the
//! file and offset: starting over it would silently lose acknowledged
//! writes.

#![forbid(unsafe_code)]

mod file;
mod writer;

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

pub use file::{HEADER, MAX_RECORD};

/// How soon a record must be on disk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Durability {
    /// On disk before the append resolves: friend sets, configuration,
    /// erasures — writes the caller acknowledges as durable.
    Sync,
    /// Written at once, synced within [`JournalOptions::lazy_sync`]:
    /// heartbeats, whose newest time a crash may set back by that much.
    Lazy,
}

/// Tuning of a [`Journal`].
#[derive(Clone, Debug)]
pub struct JournalOptions {
    /// The longest a lazy record waits for its `fdatasync`.
    pub lazy_sync: Duration,
    /// Bytes buffered for the writer thread before an append blocks
    /// (1 MiB at least): the bound on the journal's memory when the disk
    /// is slower than the appenders. The writer's spare buffer can grow
    /// as large.
    pub max_buffered: usize,
}

impl Default for JournalOptions {
    fn default() -> Self {
        Self {
            lazy_sync: Duration::from_secs(1),
            max_buffered: 64 * 1024 * 1024,
        }
    }
}

/// Why the journal could not be opened or written.
#[derive(Debug, thiserror::Error)]
pub enum JournalError {
    /// A file system call failed.
    #[error("{what} {}: {source}", path.display())]
    Io {
        /// What was being done, as a phrase ("removing folded journal").
        what: &'static str,
        /// The file or directory it was done to.
        path: PathBuf,
        /// The operating system's error.
        #[source]
        source: io::Error,
    },
    /// A journal file is damaged where a crash cannot have damaged it.
    #[error(
        "journal {} is corrupt at byte {offset}: {why}; move it away (and lose what it holds) to start",
        path.display()
    )]
    Corrupt {
        /// The damaged file, to move away by hand.
        path: PathBuf,
        /// Where the damage starts, in bytes from the start of the file.
        offset: u64,
        /// What is wrong, as a phrase.
        why: &'static str,
    },
    /// The caller's replay function refused a record.
    #[error("replaying {} at byte {offset}: {why}", path.display())]
    Replay {
        /// The file holding the refused record.
        path: PathBuf,
        /// Where the record starts, in bytes from the start of the file.
        offset: u64,
        /// The caller's reason.
        why: String,
    },
    /// A record larger than [`MAX_RECORD`].
    #[error("a journal record of {0} bytes is larger than the limit of {MAX_RECORD}")]
    TooLarge(usize),
    /// An empty record: on disk it would be eight zero bytes, which
    /// replay cannot tell from space allocated and never written.
    #[error("a journal record must hold at least one byte")]
    Empty,
    /// The journal failed earlier (a write or sync error) or was closed;
    /// nothing more is accepted, so nothing is acknowledged that is not
    /// on disk.
    #[error("the journal is not writable: {0}")]
    Failed(String),
}

/// A torn tail cut off at open.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TornTail {
    /// The newest file, the only one a crash can tear.
    pub path: PathBuf,
    /// Where the file now ends.
    pub offset: u64,
    /// Bytes cut off.
    pub cut: u64,
}

/// What [`Journal::open`] found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OpenReport {
    /// Records handed to `replay`, over every file.
    pub records: u64,
    /// Journal files replayed (those numbered `from` or higher), empty
    /// ones included.
    pub files: u64,
    /// The torn tail cut off the newest file, if there was one.
    pub torn: Option<TornTail>,
}

/// Counters, for metrics and tests.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct JournalStats {
    /// Records appended since open.
    pub records: u64,
    /// Bytes appended since open (record headers included).
    pub bytes: u64,
    /// `fdatasync` calls since open: fewer than `Sync` appends when group
    /// commit works.
    pub syncs: u64,
    /// The number of the file being written.
    pub file: u64,
}

/// The journal: appends go into a buffer that a writer thread, which
/// owns the file, writes, and a sync thread it starts syncs.
pub struct Journal {
    shared: Arc<writer::Shared>,
    thread: Option<std::thread::JoinHandle<()>>,
    dir: PathBuf,
}

/// Resolves when an append is as durable as it asked to be.
#[must_use = "a Sync append is durable only once its Ack resolves"]
pub struct Ack(Option<(u64, Arc<writer::Shared>)>);

impl Ack {
    /// Whether there is anything to wait for: `false` for a lazy append,
    /// which needs no future at all.
    pub fn is_pending(&self) -> bool {
        self.0.is_some()
    }

    /// Waits for the record's `fdatasync` (at once for lazy appends).
    pub async fn durable(self) -> Result<(), JournalError> {
        match self.0 {
            None => Ok(()),
            Some((number, shared)) => shared.wait_synced(number).await,
        }
    }
}

impl Journal {
    /// Opens the journal in `dir` (creating it), replays every record of
    /// files numbered `from` or higher through `replay` in order, deletes
    /// older files (a snapshot covers them), cuts a torn tail, and starts
    /// the writer at the end of the newest file.
    pub fn open(
        dir: &Path,
        from: u64,
        options: JournalOptions,
        mut replay: impl FnMut(&[u8]) -> Result<(), String>,
    ) -> Result<(Journal, OpenReport), JournalError> {
        fs::create_dir_all(dir).map_err(file::io_err("creating", dir))?;
        let mut files = file::list(dir)?;
        for &(n, ref path) in &files {
            if n < from {
                fs::remove_file(path).map_err(file::io_err("removing folded journal", path))?;
            }
        }
        files.retain(|(n, _)| *n >= from);
        let mut report = OpenReport::default();
        let last = files.len().checked_sub(1);
        for (i, (_, path)) in files.iter().enumerate() {
            let torn = file::replay(path, Some(i) == last, &mut replay, &mut report.records)?;
            report.files += 1;
            if let Some(t) = torn {
                tracing::warn!(
                    file = %t.path.display(),
                    offset = t.offset,
                    cut = t.cut,
                    "journal had a torn tail (a crash mid-write); cut it off"
                );
                report.torn = Some(t);
            }
        }
        let (number, file) = match files.last() {
            Some((n, path)) => (*n, file::open_append(path)?),
            None => {
                let n = from.max(1);
                (n, file::create(dir, n)?)
            }
        };
        let (shared, published) = writer::Shared::new(number, options.max_buffered);
        let state = writer::Writer::new(
            dir.to_owned(),
            number,
            file,
            shared.clone(),
            published,
            options.lazy_sync,
        );
        let thread = std::thread::Builder::new()
            .name("herenow-journal".into())
            .spawn(move || state.run())
            .map_err(file::io_err("starting the writer thread for", dir))?;
        Ok((
            Journal {
                shared,
                thread: Some(thread),
                dir: dir.to_owned(),
            },
            report,
        ))
    }

    /// Appends the record `encode` writes: it is handed the journal's
    /// buffer and appends the payload to it (appending only; what is
    /// already there belongs to other records), with the journal's lock
    /// held, so it should be quick and must not append to this journal.
    ///
    /// The order of appends is the order of replay, so a caller whose
    /// records must replay in the order it applied them appends while it
    /// still holds the lock it applied them under, and awaits the [`Ack`]
    /// after releasing it. Blocks only while
    /// [`JournalOptions::max_buffered`] bytes wait for the disk. A payload
    /// over [`MAX_RECORD`] is taken back out and refused with
    /// [`JournalError::TooLarge`], an empty one with
    /// [`JournalError::Empty`].
    pub fn append_with(
        &self,
        durability: Durability,
        encode: impl FnOnce(&mut Vec<u8>),
    ) -> Result<Ack, JournalError> {
        let number = self.shared.append(durability, encode)?;
        Ok(Ack(number.map(|n| (n, self.shared.clone()))))
    }

    /// Appends a [`Durability::Lazy`] record, as
    /// [`append_with`](Self::append_with) does, with nothing to wait for:
    /// the heartbeat's path, compiled without the `Sync` record's
    /// bookkeeping.
    #[inline]
    pub fn append_lazy_with(&self, encode: impl FnOnce(&mut Vec<u8>)) -> Result<(), JournalError> {
        self.shared.append(Durability::Lazy, encode).map(drop)
    }

    /// Appends `record`, as [`append_with`](Self::append_with) does.
    pub fn append(&self, record: &[u8], durability: Durability) -> Result<Ack, JournalError> {
        if record.len() > MAX_RECORD {
            return Err(JournalError::TooLarge(record.len()));
        }
        self.append_with(durability, |buf| buf.extend_from_slice(record))
    }

    /// Moves the writer to a new file and returns its number. Every
    /// record appended before the call goes to the older file, every one
    /// appended after it returns to the new one (one appended meanwhile
    /// may go to either, and was applied before `rotate` returned). So a
    /// snapshot taken after `rotate` returns covers every record of older
    /// files, which [`remove_before`](Self::remove_before) then deletes.
    pub async fn rotate(&self) -> Result<u64, JournalError> {
        let rx = self.shared.request_rotate()?;
        match rx.await {
            Ok(Ok(n)) => Ok(n),
            Ok(Err(why)) => Err(JournalError::Failed(why)),
            Err(_) => Err(JournalError::Failed("the journal closed".into())),
        }
    }

    /// Deletes the files numbered below `number` (folded into a snapshot
    /// that is already on disk).
    pub fn remove_before(&self, number: u64) -> Result<(), JournalError> {
        for (n, path) in file::list(&self.dir)? {
            if n < number {
                fs::remove_file(&path).map_err(file::io_err("removing folded journal", &path))?;
            }
        }
        file::sync_dir(&self.dir)
    }

    /// Counters since open; cheap (the append lock, briefly), for
    /// metrics.
    pub fn stats(&self) -> JournalStats {
        let (records, bytes) = self.shared.appended();
        JournalStats {
            records,
            bytes,
            syncs: self.shared.syncs.load(Ordering::Relaxed),
            file: self.shared.file.load(Ordering::Relaxed),
        }
    }

    /// Writes and syncs what is buffered, then stops the writer thread;
    /// later appends are refused.
    pub fn close(mut self) {
        self.stop();
    }

    fn stop(&mut self) {
        self.shared.request_close();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Journal {
    fn drop(&mut self) {
        self.stop();
    }
}

impl std::fmt::Debug for Journal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Journal")
            .field("dir", &self.dir)
            .field("stats", &self.stats())
            .finish()
    }
}
