//! The memory store's journal on disk: what makes `--data-dir` lose
//! nothing it acknowledged.
//!
//! The store records every change it applies ([`herenow_memory::changes`]);
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

use herenow_core::{Error, Result};
use herenow_journal::{Durability, Journal, JournalError, JournalOptions, OpenReport};
use herenow_memory::MemoryStore;
use herenow_memory::changes::{Change, ChangeLog, ChangeRef, Durable};

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
        match change.durability() {
            Durability::Lazy => {
                self.journal
                    .append_lazy_with(|buf| change.encode_into(buf))
                    .map_err(unavailable)?;
                Ok(None)
            }
            Durability::Sync => {
                let ack = self
                    .journal
                    .append_with(Durability::Sync, |buf| change.encode_into(buf))
                    .map_err(unavailable)?;
                Ok(Some(Box::pin(async move {
                    ack.durable().await.map_err(unavailable)
                })))
            }
        }
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

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use herenow_core::{
        Heartbeat, ManualClock, MemberId, MemberKey, PresenceStore, SpaceConfig, SpaceName,
    };

    use super::*;

    const T0: u64 = 1_700_000_000_000;

    /// A fresh directory under the system's temporary one, removed on
    /// drop.
    struct TempDir(std::path::PathBuf);

    impl TempDir {
        fn new(name: &str) -> Self {
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos();
            let dir = std::env::temp_dir().join(format!(
                "herenow-server-journal-{name}-{}-{nanos}",
                std::process::id()
            ));
            std::fs::create_dir_all(&dir).unwrap();
            TempDir(dir)
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    /// A data directory whose journal holds `records`, whole and
    /// checksummed: what the file says, not what a store wrote.
    fn journal_of(name: &str, records: &[Vec<u8>]) -> TempDir {
        let dir = TempDir::new(name);
        let (j, _) = Journal::open(&dir.0, 0, JournalOptions::default(), |_| Ok(())).unwrap();
        for r in records {
            let _ = j.append(r, Durability::Lazy).unwrap();
        }
        j.close();
        dir
    }

    fn store() -> MemoryStore {
        MemoryStore::new(Arc::new(ManualClock::new(T0)), SpaceConfig::default())
    }

    /// Issue 13, "Fuzz the parsers": a record that is no change (unknown
    /// version, garbage, a truncated change) refuses the start, naming
    /// the file and the offset; the store is not half-replayed past it.
    #[test]
    fn issue_13_a_record_that_is_no_change_refuses_the_start() {
        let lobby = SpaceName::new("lobby").unwrap();
        let ann = MemberKey::user(MemberId::new("ann").unwrap());
        let good = Change::Heartbeats {
            space: lobby.clone(),
            now: T0,
            beats: vec![Heartbeat {
                member: ann.clone(),
                at_ms: None,
                meta: None,
            }],
        }
        .encode();
        for bad in [
            vec![9, 1, 2, 3],
            vec![1, 0xff, 0xff, 0xff, 0xff, 0x0f],
            good[..good.len() - 3].to_vec(),
        ] {
            let dir = journal_of("bad", &[good.clone(), bad.clone()]);
            let memory = store();
            let e = open(&memory, &dir.0, 0).unwrap_err();
            assert!(
                matches!(e, JournalError::Replay { offset, .. } if offset > 0),
                "{bad:?}: {e}"
            );
        }
    }

    /// Issue 13: records whose times are at the ends of `u64` replay (as
    /// heartbeats now, by the store's clock), and the store serves.
    #[tokio::test]
    async fn issue_13_records_at_the_ends_of_time_replay() {
        let lobby = SpaceName::new("lobby").unwrap();
        let ann = MemberKey::user(MemberId::new("ann").unwrap());
        let records: Vec<Vec<u8>> = [0, u64::MAX]
            .into_iter()
            .map(|now| {
                Change::Heartbeats {
                    space: lobby.clone(),
                    now,
                    beats: vec![Heartbeat {
                        member: ann.clone(),
                        at_ms: None,
                        meta: None,
                    }],
                }
                .encode()
            })
            .collect();
        let dir = journal_of("ends", &records);
        let memory = store();
        let (_log, report) = open(&memory, &dir.0, 0).unwrap();
        assert_eq!(report.records, 2);
        let st = memory.status(&lobby, &[ann]).await.unwrap();
        assert_eq!(st[0].last_seen_ms, Some(T0));
    }
}
