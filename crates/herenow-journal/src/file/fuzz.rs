//! Journal files are read back at start, after any crash: whatever bytes
//! a file holds replay or are refused, never a panic, and no record claims
//! more memory than the file holds. These try [`scan`] on noise, on
//! journals the writer's own framing ([`write_length`], [`seal_all`])
//! lays out, and on those cut, flipped and extended.
//!
//! `cargo test -p herenow-journal fuzz`; `PROPTEST_CASES=100000` for a
//! longer run.

use proptest::prelude::*;

use super::*;

/// `n` cases for a run of the test suite, or `PROPTEST_CASES` when it is
/// set (`ProptestConfig::with_cases` alone would ignore it).
fn cases(n: u32) -> ProptestConfig {
    if std::env::var_os("PROPTEST_CASES").is_some() {
        ProptestConfig::default()
    } else {
        ProptestConfig::with_cases(n)
    }
}

/// A file holding `records`, framed as the writer frames them.
fn journal(records: &[Vec<u8>]) -> Vec<u8> {
    let mut body = Vec::new();
    for r in records {
        let mut record = vec![0; RECORD_HEAD];
        record.extend_from_slice(r);
        write_length(&mut record);
        body.extend_from_slice(&record);
    }
    seal_all(&mut body);
    let mut file = HEADER.to_vec();
    file.extend_from_slice(&body);
    file
}

/// Where each record of `records` ends in [`journal`]'s layout.
fn ends(records: &[Vec<u8>]) -> Vec<usize> {
    records
        .iter()
        .scan(HEADER.len(), |at, r| {
            *at += RECORD_HEAD + r.len();
            Some(*at)
        })
        .collect()
}

/// What [`scan`] makes of `bytes`: its answer and the payloads it handed
/// over, checked against what any answer must respect.
fn scanned(bytes: &[u8], last: bool) -> (Result<Scanned, ScanError>, Vec<Vec<u8>>) {
    let mut payloads = Vec::new();
    let r = scan(bytes, last, &mut |p: &[u8]| {
        assert!(p.len() <= MAX_RECORD);
        payloads.push(p.to_vec());
        Ok(())
    });
    match &r {
        Ok(Scanned::TornAt(at)) => {
            assert!(last, "only the newest file has a torn tail");
            assert!((HEADER.len()..bytes.len()).contains(at), "{at}");
        }
        Ok(Scanned::InHeader) => assert!(last && bytes.len() < HEADER.len()),
        Ok(Scanned::Whole) => {}
        Err(ScanError::Corrupt { offset, .. }) => assert!(*offset <= bytes.len()),
        Err(ScanError::Replay { .. }) => unreachable!("apply refuses nothing"),
    }
    (r, payloads)
}

/// Records as the journal accepts them: 1 byte or more (an empty one is
/// refused at append, `JournalError::Empty`: it would be eight zero
/// bytes, which replay takes for unwritten space).
fn records() -> impl Strategy<Value = Vec<Vec<u8>>> {
    let payload = prop_oneof![
        4 => proptest::collection::vec(any::<u8>(), 1..40),
        1 => proptest::collection::vec(Just(0u8), 1..16),
        1 => proptest::collection::vec(any::<u8>(), 100..400),
    ];
    proptest::collection::vec(payload, 0..12)
}

/// Damage in place, as a disk or a crash leaves it: bytes changed, or
/// the file cut.
#[derive(Clone, Debug)]
enum Damage {
    Flip(usize, u8),
    Set(usize, u8),
    Cut(usize),
}

fn damage() -> impl Strategy<Value = Damage> {
    prop_oneof![
        (any::<usize>(), 1u8..).prop_map(|(a, m)| Damage::Flip(a, m)),
        (
            any::<usize>(),
            prop_oneof![Just(0u8), Just(0xff), any::<u8>()]
        )
            .prop_map(|(a, b)| Damage::Set(a, b)),
        any::<usize>().prop_map(Damage::Cut),
    ]
}

impl Damage {
    fn apply(&self, bytes: &mut Vec<u8>) {
        let n = bytes.len();
        match *self {
            Damage::Flip(at, mask) => bytes[at % n] ^= mask,
            Damage::Set(at, b) => bytes[at % n] = b,
            Damage::Cut(at) => bytes.truncate(at % (n + 1)),
        }
    }
}

proptest! {
    #![proptest_config(cases(2000))]

    #[test]
    fn fuzz_journals_round_trip(records in records(), last in any::<bool>()) {
        let (r, payloads) = scanned(&journal(&records), last);
        prop_assert_eq!(r, Ok(Scanned::Whole));
        prop_assert_eq!(payloads, records);
    }

    #[test]
    fn fuzz_any_bytes_replay_or_are_refused(
        bytes in proptest::collection::vec(any::<u8>(), 0..512),
        last in any::<bool>(),
    ) {
        let _ = scanned(&bytes, last);
        let mut framed = HEADER.to_vec();
        framed.extend_from_slice(&bytes);
        let _ = scanned(&framed, last);
    }

    /// A file cut anywhere (a crash mid-write) replays the records before
    /// the cut; in the newest file the rest is a torn tail, in an older
    /// one it is corruption unless the cut fell between records.
    #[test]
    fn fuzz_cut_journals_replay_what_precedes_the_cut(
        records in records(),
        cut in any::<usize>(),
    ) {
        let file = journal(&records);
        let cut = cut % (file.len() + 1);
        let whole = ends(&records).iter().filter(|&&e| e <= cut).count();
        let boundary = cut == HEADER.len() || ends(&records).contains(&cut);
        let (r, payloads) = scanned(&file[..cut], true);
        prop_assert_eq!(&payloads[..], &records[..whole]);
        prop_assert_eq!(r, Ok(if cut < HEADER.len() {
            Scanned::InHeader
        } else if boundary {
            Scanned::Whole
        } else {
            Scanned::TornAt(if whole == 0 { HEADER.len() } else { ends(&records)[whole - 1] })
        }));
        let (r, payloads) = scanned(&file[..cut], false);
        prop_assert_eq!(r.is_ok(), cut >= HEADER.len() && boundary);
        prop_assert_eq!(&payloads[..], &records[..whole]);
    }

    /// Damage in place never makes up a record: what replays is the
    /// records before the damage, unchanged.
    #[test]
    fn fuzz_damaged_journals_replay_a_prefix(
        records in records(),
        damage in proptest::collection::vec(damage(), 1..4),
        last in any::<bool>(),
    ) {
        let mut file = journal(&records);
        for d in &damage {
            if !file.is_empty() {
                d.apply(&mut file);
            }
        }
        let (_, payloads) = scanned(&file, last);
        prop_assert!(payloads.len() <= records.len());
        prop_assert_eq!(&payloads[..], &records[..payloads.len()]);
    }

    /// Bytes added after whole records: the records replay, and the rest
    /// is a torn tail, corruption, or (by a one in 2^32 chance) records.
    #[test]
    fn fuzz_extended_journals_replay_their_records_first(
        records in records(),
        more in proptest::collection::vec(any::<u8>(), 1..64),
        last in any::<bool>(),
    ) {
        let mut file = journal(&records);
        file.extend_from_slice(&more);
        let (_, payloads) = scanned(&file, last);
        prop_assert!(payloads.len() >= records.len());
        prop_assert_eq!(&payloads[..records.len()], &records[..]);
    }
}

/// A record claiming 4 GiB, or `MAX_RECORD` with a few bytes after it,
/// is refused by its length: nothing of that size is read or allocated.
#[test]
fn fuzz_a_record_claiming_4_gib_is_refused_by_its_length() {
    for (len, last) in [
        (u32::MAX, true),
        (u32::MAX, false),
        (MAX_RECORD as u32 + 1, true),
    ] {
        let mut file = HEADER.to_vec();
        file.extend_from_slice(&len.to_le_bytes());
        file.extend_from_slice(&[1, 2, 3, 4, 5, 6]);
        let (r, payloads) = scanned(&file, last);
        assert!(payloads.is_empty());
        assert_eq!(
            r,
            Err(ScanError::Corrupt {
                offset: HEADER.len(),
                why: "a record claims a length above the limit"
            })
        );
    }
    // Within the limit but past the end: a torn tail in the newest file.
    let mut file = HEADER.to_vec();
    file.extend_from_slice(&(MAX_RECORD as u32).to_le_bytes());
    file.extend_from_slice(&[1, 2, 3, 4, 5, 6]);
    assert_eq!(scanned(&file, true).0, Ok(Scanned::TornAt(HEADER.len())));
}
