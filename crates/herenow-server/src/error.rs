//! [`ServerError`]: why the server could not start, or stopped.

use std::path::PathBuf;

use crate::config::ConfigError;

/// Why the server stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// The configuration is not usable (a non-loopback address without API
    /// keys, say).
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The store could not be started or restored.
    #[error("store: {0}")]
    Store(#[from] herenow_core::Error),
    /// The Redis store named by `--store` could not be reached (or refused
    /// the connection) at start. The server does not start: it never falls
    /// back to the memory store, which would split presence in two.
    #[error(
        "cannot start the {kind} store at {address}: {source}; \
         herenow does not fall back to the memory store"
    )]
    StoreConnect {
        /// `redis` or `redis-cluster`.
        kind: &'static str,
        /// The address as given, password redacted.
        address: String,
        /// What `connect` answered: `Unavailable` when Redis did not
        /// answer within the timeout, `Invalid` for a spec it cannot use.
        #[source]
        source: herenow_core::Error,
    },
    /// The snapshot file exists but cannot be loaded: corrupt, truncated,
    /// or not a herenow snapshot. The server refuses to start empty over it.
    #[error(
        "cannot restore {}: {source}; move the file away to start empty",
        path.display()
    )]
    Snapshot {
        /// The snapshot that cannot be loaded, to move away by hand.
        path: PathBuf,
        /// What is wrong with it.
        #[source]
        source: herenow_core::Error,
    },
    /// The memory store's journal in the data directory cannot be opened,
    /// replayed or written: a corrupt record (not a torn tail, which is
    /// cut), a file that cannot be read, a full disk.
    #[error("the journal in {}: {source}", dir.display())]
    Journal {
        /// The data directory.
        dir: PathBuf,
        /// What went wrong, naming the file and offset where it applies.
        #[source]
        source: herenow_journal::JournalError,
    },
    /// Reading or writing the data directory failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done, naming the file.
        what: String,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
}
