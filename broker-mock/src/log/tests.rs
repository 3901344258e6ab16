//! Log tests: the same operations on disk and in memory give the same reads, and
//! recovery cuts torn or corrupt data.

use std::fs::{self, OpenOptions};
use std::io::Write;
use std::path::Path;

use baton_protocol::record::{set_base_offset, RecordBatch, RecordBatchBuilder};
use bytes::{Bytes, BytesMut};

use super::*;

/// A batch of `n` records at `base` with timestamps `ts, ts+1, ...`.
fn batch(base: i64, n: usize, ts: i64, value_len: usize) -> Bytes {
    let mut b = RecordBatchBuilder::new(ts);
    let value = vec![b'v'; value_len];
    for i in 0..n {
        b.push(ts + i as i64, Some(b"k"), Some(&value), &[]);
    }
    let mut buf = BytesMut::from(&b.finish()[..]);
    set_base_offset(&mut buf, base);
    buf.freeze()
}

fn offsets(batches: &[Bytes]) -> Vec<(i64, i64)> {
    batches
        .iter()
        .map(|b| {
            let rb = RecordBatch::parse(b.clone()).unwrap();
            rb.verify_crc().unwrap();
            (rb.base_offset(), rb.last_offset())
        })
        .collect()
}

fn fill(log: &mut Log, batches: usize) -> Vec<Bytes> {
    let mut out = Vec::new();
    for i in 0..batches {
        let b = batch(
            log.log_end_offset(),
            1 + i % 3,
            1_000 + 10 * i as i64,
            50 + i * 7,
        );
        log.append(b.clone()).unwrap();
        out.push(b);
    }
    out
}

fn disk(dir: &Path) -> Log {
    let (log, rec) = Log::open(dir, 1024, 100).unwrap();
    assert_eq!(rec, Recovery::default());
    log
}

#[test]
fn append_read_roll_and_index_lookup() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = disk(dir.path());
    let written = fill(&mut log, 60);
    let Log::Disk(d) = &log else { unreachable!() };
    assert!(d.segment_count() > 3, "segments should roll at 1 KiB");
    assert!(dir.path().join("00000000000000000000.log").exists());
    assert!(dir.path().join("00000000000000000000.index").exists());
    // Every batch can be read by any offset inside it.
    let mut expected = 0;
    for b in &written {
        let rb = RecordBatch::parse(b.clone()).unwrap();
        for o in rb.base_offset()..=rb.last_offset() {
            let got = log.read(o, 1).unwrap();
            assert_eq!(got.len(), 1, "KIP-74: at least one batch");
            assert_eq!(got[0], *b);
        }
        expected = rb.next_offset();
    }
    assert_eq!(log.log_end_offset(), expected);
    assert!(log.read(expected, 1000).unwrap().is_empty());
    // A big read crosses segments and returns whole batches only.
    let all = log.read(0, usize::MAX).unwrap();
    assert_eq!(all, written);
    let some = log.read(0, 500).unwrap();
    assert!(some.iter().map(Bytes::len).sum::<usize>() <= 500);
    assert_eq!(some[..], written[..some.len()]);
}

#[test]
fn in_memory_matches_on_disk() {
    let dir = tempfile::tempdir().unwrap();
    let mut d = disk(dir.path());
    let mut m = Log::memory();
    fill(&mut d, 40);
    fill(&mut m, 40);
    let check = |d: &Log, m: &Log| {
        assert_eq!(d.log_start_offset(), m.log_start_offset());
        assert_eq!(d.log_end_offset(), m.log_end_offset());
        for from in 0..=d.log_end_offset() + 1 {
            for max in [0, 1, 100, 400, 5000] {
                assert_eq!(
                    d.read(from, max).unwrap(),
                    m.read(from, max).unwrap(),
                    "from {from} max {max}"
                );
            }
        }
        for ts in [0, 1_000, 1_095, 1_200, 5_000] {
            assert_eq!(
                d.find_batch_by_timestamp(ts).unwrap(),
                m.find_batch_by_timestamp(ts).unwrap()
            );
        }
        assert_eq!(
            d.max_timestamp_batch().unwrap(),
            m.max_timestamp_batch().unwrap()
        );
    };
    check(&d, &m);
    for to in [70, 41, 5] {
        d.truncate_to(to).unwrap();
        m.truncate_to(to).unwrap();
        check(&d, &m);
        fill(&mut d, 5);
        fill(&mut m, 5);
        check(&d, &m);
    }
}

#[test]
fn truncate_to_cuts_at_batch_boundaries() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = disk(dir.path());
    for _ in 0..10 {
        let base = log.log_end_offset();
        log.append(batch(base, 3, 0, 100)).unwrap();
    }
    assert_eq!(log.log_end_offset(), 30);
    log.truncate_to(14).unwrap(); // inside the batch 12..=14: it goes
    assert_eq!(log.log_end_offset(), 12);
    assert_eq!(
        offsets(&log.read(0, usize::MAX).unwrap()).last(),
        Some(&(9, 11))
    );
    log.append(batch(12, 1, 0, 10)).unwrap();
    assert_eq!(log.log_end_offset(), 13);
    drop(log);
    let log = disk(dir.path());
    assert_eq!(log.log_end_offset(), 13);
    let mut log = log;
    log.truncate_to(0).unwrap();
    assert_eq!((log.log_start_offset(), log.log_end_offset()), (0, 0));
    assert!(log.read(0, 100).unwrap().is_empty());
}

#[test]
fn appends_must_not_go_backwards() {
    let mut log = Log::memory();
    log.append(batch(0, 2, 0, 1)).unwrap();
    assert!(matches!(
        log.append(batch(1, 1, 0, 1)),
        Err(LogError::NonMonotonic {
            expected: 2,
            got: 1
        })
    ));
    assert!(matches!(
        log.append(Bytes::from_static(b"short")),
        Err(LogError::InvalidBatch(_))
    ));
}

fn last_segment(dir: &Path) -> std::path::PathBuf {
    let mut logs: Vec<_> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "log"))
        .collect();
    logs.sort();
    logs.pop().unwrap()
}

#[test]
fn recovery_cuts_a_torn_tail() {
    for garbage in [&b"\x00\x00"[..], &[0xAB; 30][..], &batch(0, 2, 0, 40)[..50]] {
        let dir = tempfile::tempdir().unwrap();
        let mut log = disk(dir.path());
        let written = fill(&mut log, 12);
        let end = log.log_end_offset();
        drop(log);
        let seg = last_segment(dir.path());
        let before = fs::metadata(&seg).unwrap().len();
        OpenOptions::new()
            .append(true)
            .open(&seg)
            .unwrap()
            .write_all(garbage)
            .unwrap();
        let (log, rec) = Log::open(dir.path(), 1024, 100).unwrap();
        assert_eq!(rec.truncated_bytes, garbage.len() as u64);
        assert!(rec.reason.is_some());
        assert_eq!(fs::metadata(&seg).unwrap().len(), before);
        assert_eq!(log.log_end_offset(), end);
        assert_eq!(log.read(0, usize::MAX).unwrap(), written);
    }
}

#[test]
fn recovery_cuts_at_a_corrupt_batch_mid_segment() {
    let dir = tempfile::tempdir().unwrap();
    let (mut log, _) = Log::open(dir.path(), 1 << 20, 100).unwrap();
    let written = fill(&mut log, 10);
    // A second segment after the damage must go too.
    drop(log);
    let seg = dir.path().join("00000000000000000000.log");
    let mut data = fs::read(&seg).unwrap();
    let pos: usize = written[..4].iter().map(Bytes::len).sum();
    data[pos + 70] ^= 0x5A; // a record byte of the fifth batch: CRC fails
    fs::write(&seg, &data).unwrap();
    let later = dir.path().join("00000000000000099999.log");
    fs::write(&later, batch(99_999, 1, 0, 1)).unwrap();
    let (log, rec) = Log::open(dir.path(), 1 << 20, 100).unwrap();
    assert_eq!(rec.reason, Some("batch CRC mismatch"));
    assert_eq!(rec.removed_segments, 1);
    assert!(!later.exists());
    assert_eq!(fs::metadata(&seg).unwrap().len(), pos as u64);
    assert_eq!(log.read(0, usize::MAX).unwrap(), written[..4].to_vec());
    let next = RecordBatch::parse(written[3].clone())
        .unwrap()
        .next_offset();
    assert_eq!(log.log_end_offset(), next);
}

#[test]
fn recovery_tells_mid_log_damage_from_a_torn_tail() {
    // A torn tail: no corrupt offset.
    let dir = tempfile::tempdir().unwrap();
    let (mut log, _) = Log::open(dir.path(), 1 << 20, 100).unwrap();
    fill(&mut log, 6);
    drop(log);
    let seg = dir.path().join("00000000000000000000.log");
    let len = fs::metadata(&seg).unwrap().len();
    OpenOptions::new()
        .write(true)
        .open(&seg)
        .unwrap()
        .set_len(len - 5)
        .unwrap();
    let (_, rec) = Log::open(dir.path(), 1 << 20, 100).unwrap();
    assert!(rec.reason.is_some());
    assert_eq!(rec.corrupt_offset, None);

    // Damage with valid batches after it, in each kind of field.
    for damage in ["crc", "length", "base offset", "gap"] {
        let dir = tempfile::tempdir().unwrap();
        let (mut log, _) = Log::open(dir.path(), 1 << 20, 100).unwrap();
        let written = fill(&mut log, 10);
        drop(log);
        let seg = dir.path().join("00000000000000000000.log");
        let mut data = fs::read(&seg).unwrap();
        let pos: usize = written[..4].iter().map(Bytes::len).sum();
        let first_lost = RecordBatch::parse(written[3].clone())
            .unwrap()
            .next_offset();
        match damage {
            "crc" => data[pos + 70] ^= 0x5A,
            "length" => data[pos + 8..pos + 12].copy_from_slice(&0x3FFF_0000_i32.to_be_bytes()),
            "base offset" => {
                data[pos..pos + 8].copy_from_slice(&(first_lost - 1).to_be_bytes());
            }
            _ => data[pos..pos + 8].copy_from_slice(&(first_lost + 5).to_be_bytes()),
        }
        fs::write(&seg, &data).unwrap();
        let (log, rec) = Log::open(dir.path(), 1 << 20, 100).unwrap();
        assert_eq!(rec.corrupt_offset, Some(first_lost), "{damage}: {rec:?}");
        assert_eq!(log.log_end_offset(), first_lost, "{damage}");
    }
}

#[test]
fn truncation_and_reads_survive_damaged_framing() {
    let dir = tempfile::tempdir().unwrap();
    let (mut log, _) = Log::open(dir.path(), 1 << 20, 100).unwrap();
    let written = fill(&mut log, 10);
    let pos: u64 = written[..4].iter().map(|b| b.len() as u64).sum();
    let bad = RecordBatch::parse(written[4].clone()).unwrap();
    // Damage the fifth batch's length field while the log is open.
    let (path, at, len) = locate_batch_in_dir(dir.path(), bad.base_offset())
        .unwrap()
        .unwrap();
    assert_eq!((at, len), (pos, written[4].len()));
    {
        use std::os::unix::fs::FileExt;
        let f = OpenOptions::new().write(true).open(path).unwrap();
        f.write_all_at(&0x3FFF_0000_i32.to_be_bytes(), at + 8)
            .unwrap();
    }
    // Reading from the start: the intact batches before the damage, then an error.
    let ok = crate::partition::read_verified(&log, 0, usize::MAX).unwrap();
    assert_eq!(ok, written[..4].to_vec());
    match crate::partition::read_verified(&log, bad.base_offset(), usize::MAX) {
        Err(crate::partition::ReadError::CorruptBatch { offset, .. }) => {
            assert_eq!(offset, bad.base_offset())
        }
        other => panic!("corruption expected, got {other:?}"),
    }
    // Cutting below the damage works although its header cannot be trusted.
    log.truncate_to(bad.base_offset()).unwrap();
    assert_eq!(log.log_end_offset(), bad.base_offset());
    assert_eq!(log.read(0, usize::MAX).unwrap(), written[..4].to_vec());
}

#[test]
fn reopen_keeps_everything_and_rebuilds_the_index() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = disk(dir.path());
    let written = fill(&mut log, 50);
    log.flush().unwrap();
    drop(log);
    // A lost index is rebuilt by the recovery scan.
    fs::remove_file(dir.path().join("00000000000000000000.index")).unwrap();
    let log = disk(dir.path());
    assert_eq!(log.read(0, usize::MAX).unwrap(), written);
    assert!(dir.path().join("00000000000000000000.index").exists());
    for (i, b) in written.iter().enumerate() {
        let rb = RecordBatch::parse(b.clone()).unwrap();
        assert_eq!(log.read(rb.last_offset(), 1).unwrap()[0], written[i]);
    }
}

#[test]
fn a_wrong_index_entry_is_noticed_by_the_reader() {
    let dir = tempfile::tempdir().unwrap();
    let (mut log, _) = Log::open(dir.path(), 1 << 20, 100).unwrap();
    let written = fill(&mut log, 20);
    let Log::Disk(d) = &mut log else {
        unreachable!()
    };
    d.skew_index_for_test();
    // Some offset's lookup now lands on a later batch: the checked read refuses it.
    let wrong = written.iter().any(|b| {
        let base = RecordBatch::parse(b.clone()).unwrap().base_offset();
        matches!(
            crate::partition::read_verified(&log, base, usize::MAX),
            Err(crate::partition::ReadError::CorruptBatch { .. })
        )
    });
    assert!(wrong, "a skewed index entry must be detected");
}
