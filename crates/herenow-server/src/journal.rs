//! The memory store's journal on disk: what makes `--data-dir` lose
//! nothing it acknowledged.
//!
//! The store records every change it applies ([`herenow_core::changes`]);
//! [`DiskLog`] appends them to a [`herenow_journal::Journal`] in the data
//! directory. Friend sets and configuration are synced before their `2xx`
//! (group commit: concurrent writes share one `fdatasync`); heartbeats and
//! leaves are synced at least every [`LAZY_SYNC`], so a crash sets a last
//! seen back by at most that.
//!
//! Start is *snapshot + replay*: the snapshot carries the number of the
//! first journal file it does not cover ([`MemoryStore::snapshot_marked`]);
//! [`open`] replays that file and the later ones into the store, then
//! hands the store its log. [`fold`] keeps start time bounded: it moves
//! the journal to a new file, writes a snapshot covering everything
//! before it, and deletes the older files.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use herenow_core::changes::{Change, ChangeLog, ChangeRef, Durability, Durable};
use herenow_core::{Error, MemoryStore, Result};
use herenow_journal::{Journal, JournalError, JournalOptions, OpenReport};

/// The longest a heartbeat waits for its `fdatasync`: half a second, so
/// "at most the last second" holds with room to spare.
pub const LAZY_SYNC: Duration = Duration::from_millis(500);

/// The store's [`ChangeLog`] over a journal on disk.
#[derive(Debug)]
pub struct DiskLog {
    journal: Journal,
}

fn unavailable(e: JournalError) -> Error {
    Error::Unavailable {
        reason: format!("the data directory's journal: {e}"),
        source: Some(Box::new(e)),
    }
}

impl ChangeLog for DiskLog {
    /// Encodes `change` straight into the journal's buffer. A lazy change
    /// (a heartbeat, a leave) costs no allocation and returns `None`; only
    /// a synced one gets a future to await.
    fn record(&self, change: ChangeRef<'_>) -> Result<Option<Durable>> {
        let durability = match change.durability() {
            Durability::Sync => herenow_journal::Durability::Sync,
            Durability::Lazy => herenow_journal::Durability::Lazy,
        };
        let ack = self
            .journal
            .append_with(durability, |buf| change.encode_into(buf))
            .map_err(unavailable)?;
        Ok(ack.is_pending().then(|| -> Durable {
            Box::pin(async move { ack.durable().await.map_err(unavailable) })
        }))
    }
}

impl DiskLog {
    /// The journal's counters since open: records, bytes, `fdatasync`
    /// calls (fewer than synced records when group commit works).
    pub fn stats(&self) -> herenow_journal::JournalStats {
        self.journal.stats()
    }
}

/// Replays the journal in `dir` from file `mark` (the restored snapshot's)
/// into `memory`, then makes it `memory`'s change log. Off the async
/// threads: it reads files.
pub fn open(
    memory: &MemoryStore,
    dir: &Path,
    mark: u64,
) -> Result<(Arc<DiskLog>, OpenReport), JournalError> {
    let options = JournalOptions {
        lazy_sync: LAZY_SYNC,
        ..JournalOptions::default()
    };
    let (journal, report) = Journal::open(dir, mark, options, |bytes| {
        let change = Change::decode(bytes).map_err(|e| e.to_string())?;
        memory.apply_change(&change).map_err(|e| e.to_string())
    })?;
    let log = Arc::new(DiskLog { journal });
    memory.set_change_log(log.clone());
    Ok((log, report))
}

/// Folds the journal into a snapshot: every change recorded before this
/// call ends up in `write`'s snapshot, and the journal files holding only
/// such changes are deleted once the snapshot is on disk. Returns the
/// snapshot's size.
pub async fn fold<E>(
    memory: &Arc<MemoryStore>,
    log: &DiskLog,
    write: impl FnOnce(Vec<u8>) -> std::result::Result<(), E> + Send + 'static,
) -> std::result::Result<usize, FoldError<E>>
where
    E: Send + 'static,
{
    // Records queued before the rotation are of changes already applied,
    // so the snapshot taken after it holds them all.
    let mark = log.journal.rotate().await.map_err(FoldError::Journal)?;
    let store = memory.clone();
    let size = tokio::task::spawn_blocking(move || {
        let bytes = store.snapshot_marked(mark);
        let size = bytes.len();
        write(bytes).map(|()| size)
    })
    .await
    .map_err(|e| FoldError::Panicked(e.to_string()))?
    .map_err(FoldError::Write)?;
    log.journal
        .remove_before(mark)
        .map_err(FoldError::Journal)?;
    Ok(size)
}

/// Why a fold failed; the journal files stay until a fold succeeds, so
/// nothing is lost, only start time grows.
#[derive(Debug, thiserror::Error)]
pub enum FoldError<E> {
    /// Rotating or pruning the journal failed.
    #[error(transparent)]
    Journal(JournalError),
    /// Writing the snapshot failed.
    #[error("writing the snapshot failed")]
    Write(E),
    /// The snapshot task panicked.
    #[error("the snapshot task panicked: {0}")]
    Panicked(String),
}
