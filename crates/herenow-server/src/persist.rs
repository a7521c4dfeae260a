//! Snapshots of the memory store on disk, so a restart loses nothing.
//!
//! One file, `herenow.snapshot`, in the data directory. Writing is
//! crash-safe: the bytes go to a temporary file in the same directory,
//! which is fsynced, renamed over the old snapshot, and the directory is
//! fsynced so the rename itself survives a power cut. A reader therefore
//! sees the old snapshot or the new one, never half of one.
//!
//! Reading refuses a corrupt or foreign file with an error naming it: a
//! server that silently started empty would lose everyone's presence and
//! then overwrite the evidence with its next snapshot.

use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use herenow_memory::MemoryStore;
use herenow_memory::RestoreReport;

use crate::error::ServerError;

/// The snapshot's file name inside the data directory.
pub const SNAPSHOT_FILE: &str = "herenow.snapshot";

/// The snapshot's path inside `dir`.
pub fn snapshot_path(dir: &Path) -> PathBuf {
    dir.join(SNAPSHOT_FILE)
}

fn io_error(what: String) -> impl FnOnce(io::Error) -> ServerError {
    move |source| ServerError::Io { what, source }
}

/// Loads the snapshot in `dir` into `store`, creating `dir` if needed.
/// `Ok(None)` when there is no snapshot yet.
pub fn restore(store: &MemoryStore, dir: &Path) -> Result<Option<RestoreReport>, ServerError> {
    fs::create_dir_all(dir).map_err(io_error(format!(
        "creating data directory {}",
        dir.display()
    )))?;
    let path = snapshot_path(dir);
    let bytes = match fs::read(&path) {
        Ok(b) => b,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io_error(format!("reading snapshot {}", path.display()))(e)),
    };
    store
        .restore(&bytes)
        .map(Some)
        .map_err(|source| ServerError::Snapshot { path, source })
}

/// Writes `store`'s snapshot into `dir`, crash-safe; returns its size.
pub fn write(store: &MemoryStore, dir: &Path) -> Result<usize, ServerError> {
    let bytes = store.snapshot();
    write_bytes(dir, &bytes)?;
    Ok(bytes.len())
}

/// Writes snapshot bytes into `dir`, crash-safe.
pub fn write_bytes(dir: &Path, bytes: &[u8]) -> Result<(), ServerError> {
    let path = snapshot_path(dir);
    // Same directory, so the rename cannot cross file systems; the pid
    // keeps two servers pointed at one directory by mistake from writing
    // into the same temporary file.
    let tmp = dir.join(format!("{SNAPSHOT_FILE}.{}.tmp", std::process::id()));
    let result = (|| {
        let mut file =
            fs::File::create(&tmp).map_err(io_error(format!("creating {}", tmp.display())))?;
        file.write_all(bytes)
            .map_err(io_error(format!("writing {}", tmp.display())))?;
        file.sync_all()
            .map_err(io_error(format!("syncing {}", tmp.display())))?;
        drop(file);
        fs::rename(&tmp, &path).map_err(io_error(format!(
            "renaming {} to {}",
            tmp.display(),
            path.display()
        )))?;
        sync_dir(dir)
    })();
    if result.is_err() {
        // Best effort: do not leave a stray temporary file behind.
        let _ = fs::remove_file(&tmp);
    }
    result
}

#[cfg(unix)]
fn sync_dir(dir: &Path) -> Result<(), ServerError> {
    fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io_error(format!("syncing directory {}", dir.display())))
}

#[cfg(not(unix))]
fn sync_dir(_dir: &Path) -> Result<(), ServerError> {
    // Directories cannot be opened for syncing here; the rename is as
    // durable as the platform makes it.
    Ok(())
}
