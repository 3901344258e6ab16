//! The on-disk log under disk faults injected in its own write and fsync path
//! (`faults::disk`): a failed append changes nothing the log serves, the log goes
//! offline, and reopening it recovers exactly the batches that were written whole.

use std::path::Path;

use baton_protocol::record::{set_base_offset, RecordBatchBuilder};
use bytes::{Bytes, BytesMut};

use super::*;
use crate::error::LogError;
use crate::faults::disk::{self, DiskFault};

/// A batch of `n` records at `base`.
fn batch(base: i64, n: usize) -> Bytes {
    let mut b = RecordBatchBuilder::new(1_000);
    for i in 0..n {
        b.push(1_000 + i as i64, Some(b"k"), Some(&[b'v'; 40]), &[]);
    }
    let mut buf = BytesMut::from(&b.finish()[..]);
    set_base_offset(&mut buf, base);
    buf.freeze()
}

/// Opens the log in `dir` and appends `batches` batches of 2 records.
fn filled(dir: &Path, segment_bytes: u64, batches: usize) -> Log {
    let (mut log, rec) = Log::open(dir, segment_bytes, 100).unwrap();
    assert_eq!(rec, Recovery::default());
    for _ in 0..batches {
        let b = batch(log.log_end_offset(), 2);
        log.append(b).unwrap();
    }
    log
}

fn segment_bytes_on_disk(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .unwrap()
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().ends_with(".log"))
        .map(|e| e.metadata().unwrap().len())
        .sum()
}

/// One write fault: the append fails with an I/O error, the end offset and what is
/// read stay, the log is offline after it, and a reopen (fault cleared) finds the
/// batches written before, nothing of the failed one, and takes appends again.
fn write_fault_keeps_the_log_as_persisted(fault: DiskFault) {
    let dir = tempfile::tempdir().unwrap();
    let mut log = filled(dir.path(), 1 << 20, 3);
    let end = log.log_end_offset();
    let stored = log.read(0, 1 << 20).unwrap();
    let size = segment_bytes_on_disk(dir.path());
    disk::set(dir.path(), fault);
    let err = log.append(batch(end, 2)).unwrap_err();
    assert!(matches!(err, LogError::Io { .. }), "{fault:?}: {err}");
    assert_eq!(log.log_end_offset(), end, "{fault:?}: end offset moved");
    assert!(log.offline_reason().is_some(), "{fault:?}: still online");
    // Offline: nothing more is taken or served, even with the disk healthy again.
    disk::set(dir.path(), DiskFault::None);
    assert!(matches!(
        log.append(batch(end, 2)),
        Err(LogError::Offline { .. })
    ));
    assert!(matches!(
        log.read(0, 1 << 20),
        Err(LogError::Offline { .. })
    ));
    assert!(matches!(log.flush(), Err(LogError::Offline { .. })));
    drop(log);
    // The short write's prefix was cut again: the files hold the old batches only.
    assert_eq!(segment_bytes_on_disk(dir.path()), size, "{fault:?}");
    let (mut log, rec) = Log::open(dir.path(), 1 << 20, 100).unwrap();
    assert_eq!(rec, Recovery::default(), "{fault:?}");
    assert_eq!(log.log_end_offset(), end);
    assert_eq!(log.read(0, 1 << 20).unwrap(), stored);
    log.append(batch(end, 2)).unwrap();
    assert_eq!(log.log_end_offset(), end + 2);
}

#[test]
fn enospc_on_write_leaves_end_offset_and_takes_the_log_offline() {
    write_fault_keeps_the_log_as_persisted(DiskFault::NoSpace);
}

#[test]
fn eio_on_write_leaves_end_offset_and_takes_the_log_offline() {
    write_fault_keeps_the_log_as_persisted(DiskFault::FailWrite);
}

#[test]
fn short_write_leaves_no_partial_batch_and_takes_the_log_offline() {
    write_fault_keeps_the_log_as_persisted(DiskFault::ShortWrite);
}

#[test]
fn eio_on_fsync_fails_the_rolling_append_and_the_flush() {
    let dir = tempfile::tempdir().unwrap();
    // Each batch is over 100 bytes: every append after the first rolls (and syncs).
    let mut log = filled(dir.path(), 150, 2);
    let end = log.log_end_offset();
    let Log::Disk(d) = &log else { unreachable!() };
    let segments = d.segment_count();
    disk::set(dir.path(), DiskFault::FailFsync);
    let err = log.append(batch(end, 2)).unwrap_err();
    assert!(matches!(err, LogError::Io { .. }), "{err}");
    assert_eq!(log.log_end_offset(), end);
    let Log::Disk(d) = &log else { unreachable!() };
    assert_eq!(d.segment_count(), segments, "no segment rolled");
    assert!(log.offline_reason().is_some());
    drop(log);

    // A failing fsync of a flush takes the log offline too.
    disk::set(dir.path(), DiskFault::None);
    let (mut log, rec) = Log::open(dir.path(), 1 << 20, 100).unwrap();
    assert_eq!(rec, Recovery::default());
    assert_eq!(log.log_end_offset(), end);
    disk::set(dir.path(), DiskFault::FailFsync);
    assert!(matches!(log.flush(), Err(LogError::Io { .. })));
    assert!(log.offline_reason().is_some());
    disk::set(dir.path(), DiskFault::None);
}

#[test]
fn torn_tail_is_cut_at_the_last_whole_batch_on_recovery() {
    let dir = tempfile::tempdir().unwrap();
    let log = filled(dir.path(), 1 << 20, 4);
    let batches = log.read(0, 1 << 20).unwrap();
    let last_len = batches[3].len() as u64;
    drop(log);
    // Less than the last batch: that batch is damaged, the three before intact.
    let torn = disk::tear_tail(dir.path(), last_len - 10).unwrap();
    assert_eq!(torn, last_len - 10);
    let (log, rec) = Log::open(dir.path(), 1 << 20, 100).unwrap();
    assert!(rec.truncated_bytes > 0, "{rec:?}");
    assert_eq!(
        rec.corrupt_offset, None,
        "a torn tail is not corruption: {rec:?}"
    );
    assert_eq!(log.log_end_offset(), 6);
    assert_eq!(log.read(0, 1 << 20).unwrap(), batches[..3].to_vec());
}

#[test]
fn failed_index_write_rolls_the_batch_back_and_takes_the_log_offline() {
    let dir = tempfile::tempdir().unwrap();
    // Index interval 100 bytes: every append after the first adds an index entry.
    let mut log = filled(dir.path(), 1 << 20, 3);
    let end = log.log_end_offset();
    let stored = log.read(0, 1 << 20).unwrap();
    let size = segment_bytes_on_disk(dir.path());
    // A fault on the index file alone: the batch's data write succeeds first.
    let index = dir.path().join(format!("{:020}.index", 0));
    disk::set(&index, DiskFault::FailWrite);
    let err = log.append(batch(end, 2)).unwrap_err();
    disk::set(&index, DiskFault::None);
    assert!(matches!(err, LogError::Io { .. }), "{err}");
    assert_eq!(log.log_end_offset(), end, "the batch does not count");
    assert!(log.offline_reason().is_some());
    drop(log);
    assert_eq!(
        segment_bytes_on_disk(dir.path()),
        size,
        "its data was cut again"
    );
    let (log, rec) = Log::open(dir.path(), 1 << 20, 100).unwrap();
    assert_eq!(rec, Recovery::default());
    assert_eq!(log.log_end_offset(), end);
    assert_eq!(log.read(0, 1 << 20).unwrap(), stored);
}
