//! Cleaning whole logs, in memory and on disk: what survives, what the active
//! segment and the uncleanable range keep, the crash-safe swap, corruption.

use std::collections::BTreeMap;
use std::fs;

use baton_protocol::record::{set_base_offset, RecordBatch, RecordBatchBuilder};
use bytes::{Bytes, BytesMut};

use super::*;
use crate::log::swap_files::GAPS_MARKER;

const NOW: i64 = 10_000_000;

fn settings() -> TopicCleaning {
    TopicCleaning {
        compact: true,
        delete_retention_ms: 1_000,
        min_compaction_lag_ms: 0,
        max_compaction_lag_ms: i64::MAX,
        min_cleanable_dirty_ratio: 0.5,
    }
}

/// A batch of `(key, value)` records (value `None` a tombstone) at the log end.
fn append(log: &mut Log, ts: i64, recs: &[(&str, Option<&str>)]) {
    let mut b = RecordBatchBuilder::new(ts);
    for (k, v) in recs {
        b.push(ts, Some(k.as_bytes()), v.map(str::as_bytes), &[]);
    }
    let mut buf = BytesMut::from(&b.finish()[..]);
    set_base_offset(&mut buf, log.log_end_offset());
    log.append(buf.freeze()).unwrap();
}

/// Every record of the log: offset to (key, value).
fn table(log: &Log) -> BTreeMap<i64, (String, Option<String>)> {
    let mut out = BTreeMap::new();
    let mut at = log.log_start_offset();
    loop {
        let batches = log.read(at, usize::MAX).unwrap();
        if batches.is_empty() {
            return out;
        }
        crate::partition::read_verified(log, at, usize::MAX).expect("reads check out");
        for b in batches {
            let b = RecordBatch::parse(b).unwrap();
            b.verify_crc().unwrap();
            for r in b.records().unwrap() {
                let r = r.unwrap();
                let s = |x: Option<Bytes>| x.map(|v| String::from_utf8(v.to_vec()).unwrap());
                out.insert(r.offset, (s(r.key).unwrap(), s(r.value)));
            }
            at = b.last_offset() + 1;
        }
    }
}

/// The latest value per key (tombstones remove the key), as a reader of the whole
/// log builds it.
fn latest(log: &Log) -> BTreeMap<String, String> {
    let mut t = BTreeMap::new();
    for (_, (k, v)) in table(log) {
        match v {
            Some(v) => t.insert(k, v),
            None => t.remove(&k),
        };
    }
    t
}

/// Writes 30 batches of overwrites of 5 keys (k2 deleted), then one more.
fn fill(log: &mut Log) {
    for i in 0..30 {
        let k = format!("k{}", i % 5);
        let v = format!("v{i}");
        let recs: Vec<(&str, Option<&str>)> = if i == 27 {
            vec![(&k, None)]
        } else {
            vec![(&k, Some(&v)), ("pad", Some("x"))]
        };
        append(log, 1_000 + i, &recs);
    }
    // A last batch of a key of its own: the log's last batch is never cleaned.
    append(log, 1_030, &[("end", Some("x"))]);
}

#[test]
fn a_memory_log_keeps_the_latest_value_of_every_key_at_its_offset() {
    let mut log = Log::memory();
    fill(&mut log);
    let before = latest(&log);
    let before_table = table(&log);
    let end = log.log_end_offset();
    let mut point = CleanPoint::default();
    let stats = clean_log(&mut log, end, &settings(), 1 << 20, NOW, &mut point)
        .unwrap()
        .expect("a fresh log is all dirty");
    assert_eq!(stats.clean_end, end - 1, "all but the last batch");
    assert!(log.may_have_gaps());
    assert_eq!(latest(&log), before, "readers see the same table");
    let after = table(&log);
    for (o, kv) in &after {
        assert_eq!(
            before_table.get(o),
            Some(kv),
            "offsets and records unchanged"
        );
    }
    // One record per key is left (the tombstone of k2 too, until its horizon).
    assert_eq!(after.len(), 7, "{after:?}");
    assert_eq!(log.log_end_offset(), end);
    assert_eq!(point.first_dirty, end - 1);
    assert_eq!(point.next_horizon, Some(NOW + 1_000));

    // Nothing new: not worth cleaning until the horizon passes; then the tombstone goes.
    assert_eq!(
        clean_log(&mut log, end, &settings(), 1 << 20, NOW + 999, &mut point).unwrap(),
        None
    );
    let stats = clean_log(&mut log, end, &settings(), 1 << 20, NOW + 1_000, &mut point)
        .unwrap()
        .expect("the horizon passed");
    assert_eq!(stats.tombstones_removed, 1);
    assert_eq!(table(&log).len(), 6);
    assert_eq!(latest(&log), before);
}

#[test]
fn nothing_at_or_past_the_bound_is_cleaned() {
    let mut log = Log::memory();
    fill(&mut log);
    let before = table(&log);
    let mut point = CleanPoint::default();
    // The bound falls inside the batch at 40..41: only batches before it are cleaned.
    clean_log(&mut log, 41, &settings(), 1 << 20, NOW, &mut point)
        .unwrap()
        .unwrap();
    assert_eq!(point.first_dirty, 40);
    let after = table(&log);
    let kept: BTreeMap<_, _> = before.range(40..).map(|(o, kv)| (*o, kv.clone())).collect();
    let after_tail: BTreeMap<_, _> = after.range(40..).map(|(o, kv)| (*o, kv.clone())).collect();
    assert_eq!(after_tail, kept);
}

#[test]
fn min_compaction_lag_keeps_young_records() {
    let mut log = Log::memory();
    fill(&mut log);
    let before = table(&log);
    let mut s = settings();
    // Batches stamped 1_000 + i; with the lag, those from 1_010 on are too young.
    s.min_compaction_lag_ms = NOW - 1_010 + 1;
    let mut point = CleanPoint::default();
    let end = log.log_end_offset();
    let stats = clean_log(&mut log, end, &s, 1 << 20, NOW, &mut point)
        .unwrap()
        .unwrap();
    assert_eq!(stats.clean_end, 20);
    let after = table(&log);
    assert_eq!(
        after.range(20..).collect::<Vec<_>>(),
        before.range(20..).collect::<Vec<_>>()
    );
}

#[test]
fn the_dedupe_buffer_bounds_the_cleaned_range() {
    let mut log = Log::memory();
    fill(&mut log);
    let before = latest(&log);
    let mut point = CleanPoint::default();
    let end = log.log_end_offset();
    // Room for about three keys: the key map fills after a few batches.
    let stats = clean_log(
        &mut log,
        end,
        &settings(),
        2 * 3 * (3 + plan::KEY_OVERHEAD),
        NOW,
        &mut point,
    )
    .unwrap()
    .unwrap();
    assert!(stats.clean_end < end && stats.clean_end > 0, "{stats:?}");
    assert_eq!(latest(&log), before);
}

#[test]
fn a_disk_log_rewrites_whole_segments_and_never_the_active_one() {
    let dir = tempfile::tempdir().unwrap();
    let (mut log, _) = Log::open(dir.path(), 600, 64).unwrap();
    fill(&mut log);
    let Log::Disk(d) = &log else { unreachable!() };
    assert!(d.segment_count() > 3);
    let active_base = d.cleanable_segments(i64::MAX).last().unwrap().1;
    let before = latest(&log);
    let before_table = table(&log);
    let end = log.log_end_offset();
    let mut point = CleanPoint::default();
    let stats = clean_log(&mut log, end, &settings(), 1 << 20, NOW, &mut point)
        .unwrap()
        .unwrap();
    assert_eq!(stats.clean_end, active_base);
    assert!(stats.ranges_rewritten > 0);
    let after = table(&log);
    assert_eq!(
        after.range(active_base..).collect::<Vec<_>>(),
        before_table.range(active_base..).collect::<Vec<_>>(),
        "the active segment is untouched"
    );
    assert!(after.len() < before_table.len());
    assert_eq!(latest(&log), before);
    assert!(dir.path().join(GAPS_MARKER).exists());
    drop(log);

    // Reopened, recovery accepts the gaps and cuts nothing.
    let (log, rec) = Log::open(dir.path(), 600, 64).unwrap();
    assert_eq!(rec, crate::log::Recovery::default());
    assert_eq!(table(&log), after);
    assert_eq!(log.log_end_offset(), end);
}

/// Names of the files in `dir`.
fn files(dir: &std::path::Path) -> Vec<String> {
    let mut v: Vec<_> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    v.sort();
    v
}

#[test]
fn a_leftover_cleaned_file_is_discarded_and_a_swap_file_completed() {
    let dir = tempfile::tempdir().unwrap();
    let (mut log, _) = Log::open(dir.path(), 600, 64).unwrap();
    fill(&mut log);
    let full = table(&log);
    let end = log.log_end_offset();
    drop(log);

    // A copy of the log cleaned elsewhere gives the cleaned first segment.
    let copy = tempfile::tempdir().unwrap();
    for f in files(dir.path()) {
        fs::copy(dir.path().join(&f), copy.path().join(&f)).unwrap();
    }
    let (mut cleaned, _) = Log::open(copy.path(), 600, 64).unwrap();
    clean_log(
        &mut cleaned,
        end,
        &settings(),
        1 << 20,
        NOW,
        &mut CleanPoint::default(),
    )
    .unwrap()
    .unwrap();
    let cleaned_table = table(&cleaned);
    drop(cleaned);
    let first = "00000000000000000000.log";
    let cleaned_bytes = fs::read(copy.path().join(first)).unwrap();
    assert_ne!(cleaned_bytes, fs::read(dir.path().join(first)).unwrap());

    // Crash before the rename to .swap: the old segment stays.
    fs::write(dir.path().join(format!("{first}.cleaned")), &cleaned_bytes).unwrap();
    let (log, rec) = Log::open(dir.path(), 600, 64).unwrap();
    assert_eq!(rec.reason, None);
    assert_eq!(table(&log), full);
    assert!(!files(dir.path()).iter().any(|f| f.ends_with(".cleaned")));
    drop(log);

    // Crash after it: the swap is completed.
    fs::write(dir.path().join(GAPS_MARKER), b"").unwrap();
    fs::write(dir.path().join(format!("{first}.swap")), &cleaned_bytes).unwrap();
    let (log, rec) = Log::open(dir.path(), 600, 64).unwrap();
    assert_eq!(rec.reason, None, "{rec:?}");
    assert!(!files(dir.path()).iter().any(|f| f.ends_with(".swap")));
    assert_eq!(fs::read(dir.path().join(first)).unwrap(), cleaned_bytes);
    let t = table(&log);
    let first_end = cleaned_table
        .keys()
        .copied()
        .filter(|o| *o < 12)
        .collect::<Vec<_>>();
    for o in first_end {
        assert_eq!(t.get(&o), cleaned_table.get(&o));
    }
}

#[test]
fn a_corrupt_batch_stops_the_cleaning() {
    let dir = tempfile::tempdir().unwrap();
    let (mut log, _) = Log::open(dir.path(), 600, 64).unwrap();
    fill(&mut log);
    let (path, at, len) = crate::log::locate_batch_in_dir(dir.path(), 4)
        .unwrap()
        .unwrap();
    let mut data = fs::read(&path).unwrap();
    data[at as usize + len - 1] ^= 0xff;
    fs::write(&path, &data).unwrap();
    let before = files(dir.path());
    let end = log.log_end_offset();
    let err = clean_log(
        &mut log,
        end,
        &settings(),
        1 << 20,
        NOW,
        &mut CleanPoint::default(),
    )
    .unwrap_err();
    assert!(
        matches!(err, CleanError::Corrupt { offset: 4, .. }),
        "{err:?}"
    );
    assert_eq!(files(dir.path()), before, "nothing was replaced");
}

#[test]
fn keys_are_required_on_compacted_topics() {
    let mut b = RecordBatchBuilder::new(0);
    b.push(0, Some(b"k"), Some(b"v"), &[]);
    let keyed = b.finish();
    assert_eq!(check_keys(&keyed), Ok(()));
    let mut b = RecordBatchBuilder::new(0);
    b.push(0, Some(b"k"), Some(b"v"), &[]);
    b.push(0, None, Some(b"v"), &[]);
    let keyless = b.finish();
    let mut both = keyed.to_vec();
    both.extend_from_slice(&keyless);
    assert_eq!(check_keys(&both), Err(ErrorCode::InvalidRecord));
    let mut broken = keyless.to_vec();
    broken[30] ^= 1;
    assert_eq!(check_keys(&broken), Ok(()), "left to the CRC check");
}

/// A batch at the log end from producer `pid` (transactional when `txn`).
fn append_from(log: &mut Log, pid: i64, txn: bool, recs: &[(&str, Option<&str>)]) {
    let mut b = RecordBatchBuilder::new(1_000)
        .producer(pid, 0, 0)
        .transactional(txn);
    for (k, v) in recs {
        b.push(1_000, Some(k.as_bytes()), v.map(str::as_bytes), &[]);
    }
    let mut buf = BytesMut::from(&b.finish()[..]);
    set_base_offset(&mut buf, log.log_end_offset());
    log.append(buf.freeze()).unwrap();
}

fn append_marker(log: &mut Log, pid: i64, commit: bool) {
    use baton_protocol::record::control::{control_batch, EndTxnMarker};
    let m = EndTxnMarker {
        commit,
        coordinator_epoch: 0,
    };
    let mut buf = BytesMut::from(&control_batch(pid, 0, m, 1_000)[..]);
    set_base_offset(&mut buf, log.log_end_offset());
    log.append(buf.freeze()).unwrap();
}

#[test]
fn transactions_aborted_go_committed_count_open_ones_bound_the_range() {
    let mut log = Log::memory();
    append(&mut log, 1_000, &[("a", Some("1")), ("b", Some("1"))]); // 0, 1
    append_from(&mut log, 5, true, &[("a", Some("aborted"))]); // 2
    append_marker(&mut log, 5, false); // 3
    append_from(&mut log, 6, true, &[("b", Some("committed"))]); // 4
    append_marker(&mut log, 6, true); // 5
    append(&mut log, 1_000, &[("c", Some("1"))]); // 6
    append_from(&mut log, 7, true, &[("a", Some("open"))]); // 7: open, the LSO
    append(&mut log, 1_000, &[("c", Some("2"))]); // 8
    let mut point = CleanPoint::default();
    let stats = clean_log(&mut log, 7, &settings(), 1 << 20, NOW, &mut point)
        .unwrap()
        .unwrap();
    assert_eq!(stats.clean_end, 7);
    let t = table(&log);
    let kv = |k: &str, v: Option<&str>| (k.to_owned(), v.map(str::to_owned));
    assert_eq!(
        t.get(&0),
        Some(&kv("a", Some("1"))),
        "an abort supersedes nothing"
    );
    assert_eq!(t.get(&1), None, "superseded by the committed b");
    assert_eq!(t.get(&2), None, "aborted records go");
    assert_eq!(t.get(&4), Some(&kv("b", Some("committed"))));
    assert_eq!(
        t.get(&6),
        Some(&kv("c", Some("1"))),
        "c=2 is past the range"
    );
    assert_eq!(
        t.get(&7),
        Some(&kv("a", Some("open"))),
        "past the LSO: untouched"
    );
    assert_eq!(t.get(&8), Some(&kv("c", Some("2"))));
    // Producer 5's aborted batch stays, empty, for its producer state; the markers stay.
    let batches = log.read(0, usize::MAX).unwrap();
    let bases: Vec<(i64, i64, i32)> = batches
        .iter()
        .map(|b| {
            let b = RecordBatch::parse(b.clone()).unwrap();
            (b.base_offset(), b.last_offset(), b.record_count())
        })
        .collect();
    assert_eq!(
        bases,
        [
            (0, 1, 1),
            (2, 2, 0),
            (3, 3, 1),
            (4, 4, 1),
            (5, 5, 1),
            (6, 6, 1),
            (7, 7, 1),
            (8, 8, 1)
        ]
    );
}

#[test]
fn the_dirty_ratio_decides_unless_the_max_compaction_lag_passed() {
    let mut log = Log::memory();
    fill(&mut log);
    let mut point = CleanPoint::default();
    let end = log.log_end_offset();
    clean_log(&mut log, end, &settings(), 1 << 20, NOW, &mut point)
        .unwrap()
        .unwrap();
    // A little new data: far below a 0.9 dirty ratio.
    append(&mut log, 5_000, &[("k1", Some("new"))]);
    append(&mut log, 5_000, &[("end2", Some("x"))]);
    let end = log.log_end_offset();
    let mut s = settings();
    s.min_cleanable_dirty_ratio = 0.9;
    s.delete_retention_ms = i64::MAX / 4;
    assert_eq!(
        clean_log(&mut log, end, &s, 1 << 20, NOW, &mut point).unwrap(),
        None
    );
    // The dirty batch is older than max.compaction.lag.ms: cleaned anyway.
    s.max_compaction_lag_ms = NOW - 5_000 - 1;
    let stats = clean_log(&mut log, end, &s, 1 << 20, NOW, &mut point)
        .unwrap()
        .expect("past the max lag");
    assert_eq!(stats.clean_end, end - 1);
    assert_eq!(
        table(&log).values().filter(|(k, _)| k == "k1").count(),
        1,
        "the older k1 went"
    );
}
