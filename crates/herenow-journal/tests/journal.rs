//! The journal against real files: replay order, group commit, rotation,
//! and every kind of damage a crash can and cannot leave.

use std::fs::{self, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use herenow_journal::{Durability, HEADER, Journal, JournalError, JournalOptions, MAX_RECORD};

struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> Self {
        let dir = std::env::temp_dir().join(format!(
            "herenow-journal-{name}-{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos()
        ));
        fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

fn open(
    dir: &Path,
    from: u64,
) -> Result<(Journal, Vec<Vec<u8>>, herenow_journal::OpenReport), JournalError> {
    let mut seen = Vec::new();
    let (j, report) = Journal::open(dir, from, JournalOptions::default(), |r| {
        seen.push(r.to_vec());
        Ok(())
    })?;
    Ok((j, seen, report))
}

fn records(n: usize) -> Vec<Vec<u8>> {
    (0..n).map(|i| format!("record {i}").into_bytes()).collect()
}

fn only_file(dir: &Path) -> PathBuf {
    let mut files: Vec<PathBuf> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "log"))
        .collect();
    files.sort();
    files.pop().unwrap()
}

#[tokio::test]
async fn records_replay_in_append_order_whatever_their_durability() {
    let dir = TempDir::new("order");
    let (j, seen, report) = open(&dir.0, 0).unwrap();
    assert!(seen.is_empty());
    assert_eq!(report.records, 0);
    let all = records(100);
    for (i, r) in all.iter().enumerate() {
        let d = if i % 3 == 0 {
            Durability::Sync
        } else {
            Durability::Lazy
        };
        let ack = j.append(r.clone(), d).unwrap();
        if d == Durability::Sync {
            ack.durable().await.unwrap();
        }
    }
    j.close();
    let (_j, seen, report) = open(&dir.0, 0).unwrap();
    assert_eq!(seen, all);
    assert_eq!(report.records, 100);
    assert_eq!(report.torn, None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_sync_appends_share_fsyncs() {
    let dir = TempDir::new("group");
    let (j, _, _) = open(&dir.0, 0).unwrap();
    let acks: Vec<_> = records(200)
        .into_iter()
        .map(|r| j.append(r, Durability::Sync).unwrap())
        .collect();
    for a in acks {
        a.durable().await.unwrap();
    }
    let stats = j.stats();
    assert_eq!(stats.records, 200);
    // Group commit: 200 durable appends queued together are not 200 syncs.
    assert!(stats.syncs < 50, "{} syncs for 200 appends", stats.syncs);
}

#[tokio::test]
async fn a_record_cut_short_by_a_crash_is_cut_off_and_the_rest_replays() {
    let dir = TempDir::new("short");
    let (j, _, _) = open(&dir.0, 0).unwrap();
    for r in records(10) {
        j.append(r, Durability::Sync)
            .unwrap()
            .durable()
            .await
            .unwrap();
    }
    j.close();
    let path = only_file(&dir.0);
    let good = fs::metadata(&path).unwrap().len();
    // Half a record: a length of 100 and a few bytes of it.
    let mut f = OpenOptions::new().append(true).open(&path).unwrap();
    f.write_all(&100u32.to_le_bytes()).unwrap();
    f.write_all(&[1, 2, 3, 4, 5, 6]).unwrap();
    drop(f);

    let (j, seen, report) = open(&dir.0, 0).unwrap();
    assert_eq!(seen, records(10));
    let torn = report.torn.expect("a torn tail");
    assert_eq!(torn.offset, good);
    assert_eq!(torn.cut, 10);
    assert_eq!(fs::metadata(&path).unwrap().len(), good);
    // The journal goes on after the cut.
    j.append(b"after".to_vec(), Durability::Sync)
        .unwrap()
        .durable()
        .await
        .unwrap();
    j.close();
    let (_j, seen, report) = open(&dir.0, 0).unwrap();
    assert_eq!(seen.len(), 11);
    assert_eq!(seen[10], b"after");
    assert_eq!(report.torn, None);
}

#[tokio::test]
async fn a_bad_checksum_on_the_last_record_or_zeros_at_the_end_are_a_torn_tail() {
    for damage in ["checksum", "zeros"] {
        let dir = TempDir::new(damage);
        let (j, _, _) = open(&dir.0, 0).unwrap();
        for r in records(5) {
            j.append(r, Durability::Sync)
                .unwrap()
                .durable()
                .await
                .unwrap();
        }
        j.close();
        let path = only_file(&dir.0);
        let len = fs::metadata(&path).unwrap().len();
        let mut bytes = fs::read(&path).unwrap();
        let cut_at = match damage {
            "checksum" => {
                // Flip the last payload byte of the last record.
                *bytes.last_mut().unwrap() ^= 0xff;
                len - (8 + b"record 4".len() as u64)
            }
            _ => {
                bytes.extend_from_slice(&[0u8; 4096]);
                len
            }
        };
        fs::write(&path, &bytes).unwrap();
        let (_j, seen, report) = open(&dir.0, 0).unwrap();
        let expect = if damage == "checksum" { 4 } else { 5 };
        assert_eq!(seen, records(expect), "{damage}");
        assert_eq!(report.torn.unwrap().offset, cut_at, "{damage}");
    }
}

#[tokio::test]
async fn damage_before_the_end_is_corruption_naming_the_file() {
    let dir = TempDir::new("corrupt");
    let (j, _, _) = open(&dir.0, 0).unwrap();
    for r in records(5) {
        j.append(r, Durability::Sync)
            .unwrap()
            .durable()
            .await
            .unwrap();
    }
    j.close();
    let path = only_file(&dir.0);
    let mut bytes = fs::read(&path).unwrap();
    // The first record's payload, with four good records behind it.
    bytes[HEADER.len() + 8] ^= 0xff;
    fs::write(&path, &bytes).unwrap();
    match open(&dir.0, 0) {
        Err(JournalError::Corrupt {
            path: p, offset, ..
        }) => {
            assert_eq!(p, path);
            assert_eq!(offset, HEADER.len() as u64);
        }
        other => panic!("expected Corrupt, got {:?}", other.map(|(_, s, r)| (s, r))),
    }
    // A foreign file is refused too.
    fs::write(&path, b"something else entirely").unwrap();
    assert!(matches!(
        open(&dir.0, 0),
        Err(JournalError::Corrupt { offset: 0, .. })
    ));
}

#[tokio::test]
async fn rotation_folds_older_files_away() {
    let dir = TempDir::new("rotate");
    let (j, _, _) = open(&dir.0, 0).unwrap();
    j.append(b"old".to_vec(), Durability::Sync)
        .unwrap()
        .durable()
        .await
        .unwrap();
    let n = j.rotate().await.unwrap();
    assert_eq!(j.stats().file, n);
    j.append(b"new".to_vec(), Durability::Lazy).unwrap();
    j.close();
    // Before the snapshot is written, both files replay.
    let (j, seen, report) = open(&dir.0, 0).unwrap();
    assert_eq!(seen, vec![b"old".to_vec(), b"new".to_vec()]);
    assert_eq!(report.files, 2);
    // Once a snapshot covers everything before `n`, only `n` replays.
    j.remove_before(n).unwrap();
    j.close();
    let (_j, seen, report) = open(&dir.0, n).unwrap();
    assert_eq!(seen, vec![b"new".to_vec()]);
    assert_eq!(report.files, 1);
}

#[tokio::test]
async fn a_file_cut_inside_its_header_is_empty_and_an_older_damaged_file_is_not_a_tail() {
    let dir = TempDir::new("header");
    let (j, _, _) = open(&dir.0, 0).unwrap();
    j.append(b"kept".to_vec(), Durability::Sync)
        .unwrap()
        .durable()
        .await
        .unwrap();
    let n = j.rotate().await.unwrap();
    j.close();
    // The crash came while the new file's header was being written.
    let newest = only_file(&dir.0);
    fs::write(&newest, &HEADER[..5]).unwrap();
    let (j, seen, report) = open(&dir.0, 0).unwrap();
    assert_eq!(seen, vec![b"kept".to_vec()]);
    assert_eq!(report.torn.unwrap().offset, 0);
    j.close();
    assert_eq!(fs::read(&newest).unwrap(), HEADER);
    // The same cut in the older file (with a newer one behind it) cannot
    // come from a crash.
    let older = dir.0.join(format!("journal-{:016x}.log", n - 1));
    let mut bytes = fs::read(&older).unwrap();
    bytes.truncate(bytes.len() - 2);
    fs::write(&older, &bytes).unwrap();
    assert!(matches!(open(&dir.0, 0), Err(JournalError::Corrupt { .. })));
}

#[tokio::test]
async fn a_record_over_the_limit_is_refused_before_it_is_queued() {
    let dir = TempDir::new("large");
    let (j, _, _) = open(&dir.0, 0).unwrap();
    assert!(matches!(
        j.append(vec![0; MAX_RECORD + 1], Durability::Sync),
        Err(JournalError::TooLarge(_))
    ));
    assert_eq!(j.stats().records, 0);
}

#[tokio::test]
async fn a_replay_function_that_refuses_a_record_stops_the_open() {
    let dir = TempDir::new("refuse");
    let (j, _, _) = open(&dir.0, 0).unwrap();
    j.append(b"bad".to_vec(), Durability::Sync)
        .unwrap()
        .durable()
        .await
        .unwrap();
    j.close();
    let r = Journal::open(&dir.0, 0, JournalOptions::default(), |_| Err("no".into()));
    assert!(matches!(r, Err(JournalError::Replay { .. })));
}
