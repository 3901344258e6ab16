//! Retention and log start offset tests, on disk and in memory.

use std::path::Path;

use baton_protocol::record::{set_base_offset, RecordBatchBuilder};
use bytes::{Bytes, BytesMut};

use super::*;

/// A batch of `n` records at `base`, every record stamped `ts`, values of `len` bytes.
fn batch(base: i64, n: usize, ts: i64, len: usize) -> Bytes {
    let mut b = RecordBatchBuilder::new(ts);
    let value = vec![b'v'; len];
    for _ in 0..n {
        b.push(ts, Some(b"k"), Some(&value), &[]);
    }
    let mut buf = BytesMut::from(&b.finish()[..]);
    set_base_offset(&mut buf, base);
    buf.freeze()
}

/// Appends `count` two-record batches of about 300 bytes, stamped `ts0`, `ts0 + 10`...
fn fill(log: &mut Log, count: usize, ts0: i64) {
    for i in 0..count {
        let b = batch(log.log_end_offset(), 2, ts0 + 10 * i as i64, 120);
        log.append(b).unwrap();
    }
}

fn disk(dir: &Path) -> Log {
    Log::open(dir, 1024, 100).unwrap().0
}

fn segments(log: &Log) -> usize {
    match log {
        Log::Disk(l) => l.segment_count(),
        Log::Memory(_) => unreachable!("disk only"),
    }
}

fn first_offset_read(log: &Log) -> i64 {
    let b = log.read(log.log_start_offset(), 1).unwrap();
    header::BatchHeader::parse(&b[0]).unwrap().base_offset
}

#[test]
fn size_retention_deletes_oldest_whole_segments_below_the_bound() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = disk(dir.path());
    fill(&mut log, 20, 1_000);
    let before = segments(&log);
    assert!(before >= 5, "{before} segments");
    let total = log.size_bytes();
    let policy = RetentionPolicy {
        retention_bytes: Some(total / 2),
        ..RetentionPolicy::default()
    };
    // Nothing past the bound (the high watermark) goes: with the bound at the
    // start, nothing at all.
    let out = log.apply_retention(&policy, 0, 0).unwrap();
    assert!(!out.deleted_any());
    assert_eq!(log.log_start_offset(), 0);

    let out = log
        .apply_retention(&policy, 0, log.log_end_offset())
        .unwrap();
    assert!(out.deleted_by_size > 0);
    assert!(log.size_bytes() >= total / 2, "kept at least the limit");
    assert!(
        log.size_bytes() < total / 2 + 1024,
        "deleted down to the limit"
    );
    assert_eq!(segments(&log), before - out.deleted_by_size);
    let start = log.log_start_offset();
    assert!(start > 0);
    assert_eq!(first_offset_read(&log), start, "start is a segment base");
    assert_eq!(out.start_after, start);
    // Deleted segment files are gone; the start survives a reopen.
    let logs = std::fs::read_dir(dir.path())
        .unwrap()
        .filter(|e| e.as_ref().unwrap().path().extension() == Some("log".as_ref()))
        .count();
    assert_eq!(logs, segments(&log));
    drop(log);
    let log = disk(dir.path());
    assert_eq!(log.log_start_offset(), start);
    assert_eq!(log.log_end_offset(), 40);
}

#[test]
fn time_retention_deletes_segments_whose_newest_batch_is_old() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = disk(dir.path());
    fill(&mut log, 20, 1_000); // timestamps 1000..1190
    let leo = log.log_end_offset();
    let policy = RetentionPolicy {
        retention_ms: Some(100),
        ..RetentionPolicy::default()
    };
    // At now = 1250, batches stamped before 1150 are expired; a segment goes only
    // when its newest batch is.
    let out = log.apply_retention(&policy, 1_250, leo).unwrap();
    assert!(out.deleted_by_time > 0);
    let start = log.log_start_offset();
    let first = log.read(start, 1).unwrap();
    let h = header::BatchHeader::parse(&first[0]).unwrap();
    assert_eq!(h.base_offset, start);
    // The first segment left holds a batch that has not expired.
    let Log::Disk(d) = &log else { unreachable!() };
    let infos = d.segment_infos();
    assert!(1_250 - infos[0].max_ts <= 100, "{infos:?}");
    // Everything expired, bound at the end: all goes, the log restarts at its end.
    let out = log.apply_retention(&policy, 10_000, leo).unwrap();
    assert!(out.deleted_any());
    assert_eq!(log.log_start_offset(), leo);
    assert_eq!(log.log_end_offset(), leo);
    assert!(log.read(leo, 1 << 20).unwrap().is_empty());
    // Appending goes on from there.
    log.append(batch(leo, 1, 20_000, 10)).unwrap();
    assert_eq!(log.log_end_offset(), leo + 1);
    drop(log);
    let log = disk(dir.path());
    assert_eq!(log.log_start_offset(), leo);
    assert_eq!(log.log_end_offset(), leo + 1);
}

#[test]
fn segment_ms_rolls_the_active_segment_by_age() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = Log::open(dir.path(), 1 << 20, 100).unwrap().0;
    fill(&mut log, 3, 5_000);
    assert_eq!(segments(&log), 1);
    let policy = RetentionPolicy {
        segment_ms: Some(1_000),
        ..RetentionPolicy::default()
    };
    let out = log.apply_retention(&policy, 5_500, 0).unwrap();
    assert!(!out.rolled, "not old enough yet");
    let out = log.apply_retention(&policy, 6_001, 0).unwrap();
    assert!(out.rolled);
    assert_eq!(segments(&log), 2);
    // An empty active segment does not roll again.
    let out = log.apply_retention(&policy, 60_000, 0).unwrap();
    assert!(!out.rolled);
    assert_eq!(segments(&log), 2);
}

#[test]
fn advance_start_inside_a_segment_is_persisted_and_only_moves_forward() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = disk(dir.path());
    fill(&mut log, 20, 1_000);
    let n = segments(&log);
    assert!(log.advance_start(3).unwrap());
    assert_eq!(log.log_start_offset(), 3);
    assert_eq!(segments(&log), n, "the first segment still holds offset 3");
    // Reading at the start gives the batch holding it.
    let b = log.read(3, 1).unwrap();
    let h = header::BatchHeader::parse(&b[0]).unwrap();
    assert!(h.base_offset <= 3 && 3 <= h.last_offset);
    assert!(!log.advance_start(2).unwrap(), "never backwards");
    assert_eq!(log.log_start_offset(), 3);
    // Far ahead: whole segments go, capped at the log end.
    assert!(log.advance_start(1_000).unwrap());
    assert_eq!(log.log_start_offset(), 40);
    assert_eq!(segments(&log), 1);
    drop(log);
    let mut log = disk(dir.path());
    assert_eq!(log.log_start_offset(), 40);
    // A full restart at a lower offset moves it back (a replica's reset).
    log.truncate_fully_and_start_at(7).unwrap();
    assert_eq!((log.log_start_offset(), log.log_end_offset()), (7, 7));
    drop(log);
    let log = disk(dir.path());
    assert_eq!((log.log_start_offset(), log.log_end_offset()), (7, 7));
}

#[test]
fn a_stored_start_past_the_recovered_end_restarts_the_log_there() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = disk(dir.path());
    fill(&mut log, 4, 1_000);
    drop(log);
    start_offset::write(dir.path(), 100).unwrap();
    let log = disk(dir.path());
    assert_eq!((log.log_start_offset(), log.log_end_offset()), (100, 100));
}

#[test]
fn a_damaged_start_file_is_a_typed_error() {
    let dir = tempfile::tempdir().unwrap();
    drop(disk(dir.path()));
    for bad in ["", "x", "-5", "123456789012345678901234567890"] {
        std::fs::write(dir.path().join(start_offset::FILE_NAME), bad).unwrap();
        let err = Log::open(dir.path(), 1024, 100).unwrap_err();
        assert!(matches!(err, LogError::Corrupt { .. }), "{bad:?}: {err}");
    }
}

#[test]
fn memory_retention_treats_batches_as_segments() {
    let mut log = Log::memory();
    fill(&mut log, 10, 1_000); // 20 offsets, timestamps 1000..1090
    let leo = log.log_end_offset();
    let policy = RetentionPolicy {
        retention_ms: Some(50),
        ..RetentionPolicy::default()
    };
    // Bound at 6: at most the first three batches may go.
    let out = log.apply_retention(&policy, 1_100, 6).unwrap();
    assert_eq!(out.deleted_by_time, 3);
    assert_eq!(log.log_start_offset(), 6);
    let out = log.apply_retention(&policy, 1_100, leo).unwrap();
    // Batches stamped 1030, 1040 are more than 50 ms old at 1100; 1050 is not.
    assert_eq!(out.deleted_by_time, 2);
    assert_eq!(log.log_start_offset(), 10);
    let one = log.size_bytes() / 5;
    let policy = RetentionPolicy {
        retention_bytes: Some(2 * one),
        ..RetentionPolicy::default()
    };
    let out = log.apply_retention(&policy, 0, leo).unwrap();
    assert_eq!(out.deleted_by_size, 3);
    assert_eq!(log.log_start_offset(), 16);
    assert!(log.advance_start(17).unwrap());
    assert_eq!(log.log_start_offset(), 17);
    assert_eq!(log.read(17, 1).unwrap().len(), 1);
    assert!(log.advance_start(1_000).unwrap());
    assert_eq!(log.log_start_offset(), leo);
    assert!(log.read(leo, 1 << 20).unwrap().is_empty());
}
