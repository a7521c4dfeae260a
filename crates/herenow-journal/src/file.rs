//! Journal files: naming, the header, reading records back and telling a
//! torn tail from corruption.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use crate::{JournalError, TornTail};

#[cfg(test)]
mod fuzz;

/// The first bytes of every journal file.
pub const HEADER: &[u8] = b"herenow-journal 1\n";

/// The largest record: a friend set of 10,000 ids of 256 bytes fits.
/// (The smallest is one byte: see [`JournalError::Empty`].)
pub const MAX_RECORD: usize = 16 * 1024 * 1024;

/// Length and checksum before each payload.
pub(crate) const RECORD_HEAD: usize = 8;

/// Makes an I/O error [`JournalError::Io`], naming what was done to `path`.
pub(crate) fn io_err<'a>(
    what: &'static str,
    path: &'a Path,
) -> impl FnOnce(io::Error) -> JournalError + 'a {
    move |source| JournalError::Io {
        what,
        path: path.to_owned(),
        source,
    }
}

/// The path of file `number` in `dir`.
pub(crate) fn path_of(dir: &Path, number: u64) -> PathBuf {
    dir.join(format!("journal-{number:016x}.log"))
}

/// The journal files in `dir`, by number.
pub(crate) fn list(dir: &Path) -> Result<Vec<(u64, PathBuf)>, JournalError> {
    let mut files = Vec::new();
    for entry in fs::read_dir(dir).map_err(io_err("listing", dir))? {
        let entry = entry.map_err(io_err("listing", dir))?;
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        let Some(hex) = name
            .strip_prefix("journal-")
            .and_then(|n| n.strip_suffix(".log"))
        else {
            continue;
        };
        if hex.len() == 16
            && let Ok(n) = u64::from_str_radix(hex, 16)
        {
            files.push((n, entry.path()));
        }
    }
    files.sort();
    Ok(files)
}

/// Creates file `number` with its header, synced, and the directory entry
/// synced, so the file survives a crash as soon as it is written to.
pub(crate) fn create(dir: &Path, number: u64) -> Result<File, JournalError> {
    let path = path_of(dir, number);
    let mut file = OpenOptions::new()
        .create(true)
        .truncate(true)
        .write(true)
        .open(&path)
        .map_err(io_err("creating", &path))?;
    file.write_all(HEADER).map_err(io_err("writing", &path))?;
    file.sync_all().map_err(io_err("syncing", &path))?;
    sync_dir(dir)?;
    Ok(file)
}

/// Opens an existing (already checked and cut) file for appending.
pub(crate) fn open_append(path: &Path) -> Result<File, JournalError> {
    let mut file = OpenOptions::new()
        .write(true)
        .open(path)
        .map_err(io_err("opening", path))?;
    file.seek(SeekFrom::End(0))
        .map_err(io_err("seeking", path))?;
    Ok(file)
}

/// Syncs a directory, so renames, creations and deletions in it survive
/// a power cut.
pub(crate) fn sync_dir(dir: &Path) -> Result<(), JournalError> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io_err("syncing directory", dir))
}

/// Feeds every record of `path` to `apply`. In the newest file (`last`)
/// a torn tail is cut off and reported; anywhere else damage is
/// [`JournalError::Corrupt`].
pub(crate) fn replay(
    path: &Path,
    last: bool,
    apply: &mut impl FnMut(&[u8]) -> Result<(), String>,
    count: &mut u64,
) -> Result<Option<TornTail>, JournalError> {
    let mut bytes = Vec::new();
    File::open(path)
        .and_then(|mut f| f.read_to_end(&mut bytes))
        .map_err(io_err("reading", path))?;
    let counted = &mut |payload: &[u8]| {
        apply(payload)?;
        *count += 1;
        Ok(())
    };
    match scan(&bytes, last, counted) {
        Ok(Scanned::Whole) => Ok(None),
        Ok(Scanned::InHeader) => {
            rewrite_header(path)?;
            Ok(torn(path, 0, bytes.len()))
        }
        Ok(Scanned::TornAt(at)) => {
            cut(path, at as u64)?;
            Ok(torn(path, at, bytes.len() - at))
        }
        Err(ScanError::Corrupt { offset, why }) => Err(JournalError::Corrupt {
            path: path.to_owned(),
            offset: offset as u64,
            why,
        }),
        Err(ScanError::Replay { offset, why }) => Err(JournalError::Replay {
            path: path.to_owned(),
            offset: offset as u64,
            why,
        }),
    }
}

/// How a file's bytes end, as [`scan`] read them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Scanned {
    /// Every record whole.
    Whole,
    /// The file ends inside its header: it was being created when the
    /// process died, and holds nothing yet (newest file only).
    InHeader,
    /// A torn tail from this offset on (newest file only).
    TornAt(usize),
}

/// Why a file's bytes cannot be replayed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum ScanError {
    /// Damage a crash cannot explain.
    Corrupt {
        /// Where the damage starts.
        offset: usize,
        /// What is wrong there.
        why: &'static str,
    },
    /// `apply` refused the record at `offset`.
    Replay {
        /// Where the record starts.
        offset: usize,
        /// `apply`'s reason.
        why: String,
    },
}

/// Reads the records of one file's `bytes` (no I/O: [`replay`] reads the
/// file and cuts what this finds torn), handing each payload to `apply`.
/// Lengths are checked against [`MAX_RECORD`] and against the bytes there
/// before anything is read: a payload is a slice of `bytes`, never a
/// buffer of the length a record claims.
pub(crate) fn scan(
    bytes: &[u8],
    last: bool,
    apply: &mut impl FnMut(&[u8]) -> Result<(), String>,
) -> Result<Scanned, ScanError> {
    let corrupt = |offset: usize, why: &'static str| ScanError::Corrupt { offset, why };
    if bytes.len() < HEADER.len() && HEADER.starts_with(bytes) {
        return if last {
            Ok(Scanned::InHeader)
        } else {
            Err(corrupt(0, "the file ends inside its header"))
        };
    }
    if !bytes.starts_with(HEADER) {
        return Err(corrupt(0, "not a herenow journal (bad header)"));
    }
    let mut at = HEADER.len();
    while at < bytes.len() {
        let defect = match check_record(&bytes[at..]) {
            Ok(len) => {
                let payload = &bytes[at + RECORD_HEAD..at + RECORD_HEAD + len];
                apply(payload).map_err(|why| ScanError::Replay { offset: at, why })?;
                at += RECORD_HEAD + len;
                continue;
            }
            Err(d) => d,
        };
        // Only the newest file can have been cut by a crash, and only at
        // its end.
        let tail_only = match defect {
            Defect::Short => true,
            Defect::Zeros => true,
            Defect::Checksum { end } => at + end == bytes.len(),
            Defect::TooLong => bytes[at..].iter().all(|&b| b == 0),
        };
        if !last || !tail_only {
            return Err(corrupt(at, defect.why()));
        }
        return Ok(Scanned::TornAt(at));
    }
    Ok(Scanned::Whole)
}

fn torn(path: &Path, at: usize, cut: usize) -> Option<TornTail> {
    Some(TornTail {
        path: path.to_owned(),
        offset: at as u64,
        cut: cut as u64,
    })
}

enum Defect {
    /// The record's head or body runs past the end of the file.
    Short,
    /// Nothing but zeros from here on (space allocated, never written).
    Zeros,
    /// The payload's checksum does not match; the record would end `end`
    /// bytes after its start.
    Checksum { end: usize },
    /// A length above [`MAX_RECORD`].
    TooLong,
}

impl Defect {
    fn why(&self) -> &'static str {
        match self {
            Defect::Short => "a record runs past the end of the file",
            Defect::Zeros => "zeros where a record should be",
            Defect::Checksum { .. } => "a record's checksum does not match",
            Defect::TooLong => "a record claims a length above the limit",
        }
    }
}

/// The payload length of the record at the start of `rest`.
fn check_record(rest: &[u8]) -> Result<usize, Defect> {
    if rest.len() < RECORD_HEAD {
        return Err(if rest.iter().all(|&b| b == 0) {
            Defect::Zeros
        } else {
            Defect::Short
        });
    }
    let len = u32::from_le_bytes(rest[0..4].try_into().expect("4 bytes")) as usize;
    let crc = u32::from_le_bytes(rest[4..8].try_into().expect("4 bytes"));
    if len == 0 && crc == 0 && rest.iter().all(|&b| b == 0) {
        return Err(Defect::Zeros);
    }
    if len > MAX_RECORD {
        return Err(Defect::TooLong);
    }
    let end = RECORD_HEAD + len;
    if rest.len() < end {
        return Err(Defect::Short);
    }
    if crc32fast::hash(&rest[RECORD_HEAD..end]) != crc {
        return Err(Defect::Checksum { end });
    }
    Ok(len)
}

fn cut(path: &Path, len: u64) -> Result<(), JournalError> {
    let file = OpenOptions::new()
        .write(true)
        .open(path)
        .map_err(io_err("opening", path))?;
    file.set_len(len)
        .map_err(io_err("cutting the torn tail of", path))?;
    file.sync_all().map_err(io_err("syncing", path))
}

fn rewrite_header(path: &Path) -> Result<(), JournalError> {
    let mut file = OpenOptions::new()
        .write(true)
        .truncate(true)
        .open(path)
        .map_err(io_err("opening", path))?;
    file.write_all(HEADER).map_err(io_err("writing", path))?;
    file.sync_all().map_err(io_err("syncing", path))
}

/// Writes the length into the head of `record`, a [`RECORD_HEAD`]
/// placeholder followed by the payload; the checksum is left for
/// [`seal_all`].
#[inline]
pub(crate) fn write_length(record: &mut [u8]) {
    let len = (record.len() - RECORD_HEAD) as u32;
    record[..4].copy_from_slice(&len.to_le_bytes());
}

/// Fills in the checksum of every record in `records`, whole records
/// whose heads hold their lengths (from [`write_length`]).
pub(crate) fn seal_all(records: &mut [u8]) {
    let mut rest = records;
    while !rest.is_empty() {
        let (head, tail) = rest.split_at_mut(RECORD_HEAD);
        let len = u32::from_le_bytes(head[..4].try_into().expect("4 bytes")) as usize;
        let (payload, next) = tail.split_at_mut(len);
        head[4..].copy_from_slice(&crc32fast::hash(payload).to_le_bytes());
        rest = next;
    }
}
