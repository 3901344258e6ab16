//! Planner tests: the per-record rules on hand-built batches.

use baton_protocol::record::control::{control_batch, EndTxnMarker};
use baton_protocol::record::{set_base_offset, Compression, RecordBatch, RecordBatchBuilder};
use bytes::{Bytes, BytesMut};

use super::*;

const NOW: i64 = 1_000_000;
const RETENTION: i64 = 1_000;

/// One record: key and value (`None` is null).
type Rec<'a> = (Option<&'a str>, Option<&'a str>);

fn build(base: i64, pid: i64, txn: bool, codec: Compression, recs: &[Rec<'_>]) -> RecordBatch {
    let mut b = RecordBatchBuilder::new(100)
        .producer(
            pid,
            if pid >= 0 { 0 } else { -1 },
            if pid >= 0 { base as i32 } else { -1 },
        )
        .transactional(txn)
        .compression(codec)
        .partition_leader_epoch(3);
    for (i, (k, v)) in recs.iter().enumerate() {
        b.push(
            100 + i as i64,
            k.map(str::as_bytes),
            v.map(str::as_bytes),
            &[],
        );
    }
    let mut buf = BytesMut::from(&b.finish()[..]);
    set_base_offset(&mut buf, base);
    RecordBatch::parse(buf.freeze()).unwrap()
}

fn plain(base: i64, recs: &[Rec<'_>]) -> RecordBatch {
    build(base, -1, false, Compression::None, recs)
}

fn marker(base: i64, pid: i64, commit: bool) -> RecordBatch {
    let m = EndTxnMarker {
        commit,
        coordinator_epoch: 0,
    };
    let mut buf = BytesMut::from(&control_batch(pid, 0, m, 100)[..]);
    set_base_offset(&mut buf, base);
    RecordBatch::parse(buf.freeze()).unwrap()
}

/// Runs passes 1 and 2 over `log` and cleans every batch.
fn clean_all(log: &[RecordBatch], now: i64) -> Vec<Cleaned> {
    let mut txn = TxnIndex::new(1 << 20);
    for b in log {
        txn.observe(b).unwrap();
    }
    let mut keys = KeyMap::new(1 << 20);
    for b in log {
        assert!(keys.observe(b, &txn).unwrap());
    }
    log.iter()
        .map(|b| clean_batch(b, &keys, &txn, now, RETENTION).unwrap())
        .collect()
}

/// The batch a decision leaves (`None` when dropped), CRC-checked.
fn result(orig: &RecordBatch, c: &Cleaned) -> Option<RecordBatch> {
    let out = match &c.decision {
        Decision::Keep => orig.clone(),
        Decision::Drop => return None,
        Decision::Rewrite(b) => RecordBatch::parse(b.clone()).unwrap(),
    };
    out.verify_crc().expect("written batches carry a valid CRC");
    assert_eq!(out.base_offset(), orig.base_offset());
    assert_eq!(out.last_offset_delta(), orig.last_offset_delta());
    assert_eq!(out.producer_id(), orig.producer_id());
    assert_eq!(out.producer_epoch(), orig.producer_epoch());
    assert_eq!(out.base_sequence(), orig.base_sequence());
    assert_eq!(out.partition_leader_epoch(), orig.partition_leader_epoch());
    Some(out)
}

/// `(offset, key, value)` of every record of `b`.
fn records(b: &RecordBatch) -> Vec<(i64, Option<String>, Option<String>)> {
    let s = |x: &Option<Bytes>| x.as_ref().map(|v| String::from_utf8(v.to_vec()).unwrap());
    b.records()
        .unwrap()
        .map(|r| r.unwrap())
        .map(|r| (r.offset, s(&r.key), s(&r.value)))
        .collect()
}

fn rec(o: i64, k: &str, v: &str) -> (i64, Option<String>, Option<String>) {
    (o, Some(k.into()), Some(v.into()))
}

#[test]
fn the_latest_record_of_each_key_survives_with_its_offset() {
    let log = [
        plain(
            0,
            &[
                (Some("a"), Some("1")),
                (Some("b"), Some("1")),
                (Some("a"), Some("2")),
            ],
        ),
        plain(3, &[(Some("c"), Some("1")), (Some("b"), Some("2"))]),
        plain(5, &[(Some("c"), Some("2"))]),
    ];
    let out = clean_all(&log, NOW);
    let first = result(&log[0], &out[0]).unwrap();
    assert_eq!(records(&first), [rec(2, "a", "2")]);
    assert_eq!(first.last_offset(), 2);
    assert_eq!(out[0].removed, 2);
    let second = result(&log[1], &out[1]).unwrap();
    assert_eq!(records(&second), [rec(4, "b", "2")]);
    assert_eq!(out[2].decision, Decision::Keep);
}

#[test]
fn a_batch_whose_records_all_go_is_dropped_unless_its_producer_needs_it() {
    let log = [
        build(0, 7, false, Compression::None, &[(Some("a"), Some("1"))]),
        build(1, 7, false, Compression::None, &[(Some("b"), Some("1"))]),
        build(2, 8, false, Compression::None, &[(Some("a"), Some("2"))]),
        build(
            3,
            7,
            false,
            Compression::None,
            &[(Some("b"), Some("2")), (Some("a"), Some("3"))],
        ),
        build(5, 8, false, Compression::None, &[(Some("b"), Some("3"))]),
        plain(6, &[(Some("a"), Some("4"))]),
    ];
    let out = clean_all(&log, NOW);
    assert_eq!(out[0].decision, Decision::Drop, "producer 7 wrote later");
    assert_eq!(out[1].decision, Decision::Drop);
    assert_eq!(out[2].decision, Decision::Drop, "producer 8 wrote later");
    // Producer 7's last batch lost both records: it stays, empty, for its sequence.
    let empty = result(&log[3], &out[3]).unwrap();
    assert_eq!(empty.record_count(), 0);
    assert_eq!(empty.last_offset(), 4);
    assert_eq!(empty.compression(), Compression::None);
    assert_eq!(out[4].decision, Decision::Keep);
}

#[test]
fn tombstones_stay_until_their_delete_horizon_then_go() {
    let log = [
        plain(0, &[(Some("a"), Some("1")), (Some("b"), Some("1"))]),
        plain(2, &[(Some("a"), None)]),
    ];
    let out = clean_all(&log, NOW);
    assert_eq!(
        out[0].decision,
        Decision::Rewrite(result(&log[0], &out[0]).unwrap().into_bytes())
    );
    let stamped = result(&log[1], &out[1]).unwrap();
    assert!(stamped.has_delete_horizon());
    assert_eq!(stamped.base_timestamp(), NOW + RETENTION);
    assert_eq!(out[1].horizon, Some(NOW + RETENTION));
    let recs: Vec<_> = stamped.records().unwrap().map(|r| r.unwrap()).collect();
    assert_eq!(
        recs[0].timestamp, 100,
        "record timestamps survive the new base"
    );
    assert_eq!(recs[0].value, None);

    // Before the horizon the stamped batch stays as it is; after it the tombstone
    // goes, and with it the batch.
    let later = [result(&log[0], &out[0]).unwrap(), stamped];
    let again = clean_all(&later, NOW + RETENTION - 1);
    assert_eq!(again[1].decision, Decision::Keep);
    let past = clean_all(&later, NOW + RETENTION);
    assert_eq!(past[1].decision, Decision::Drop);
    assert_eq!(past[1].tombstones_removed, 1);
}

#[test]
fn records_without_key_are_removed() {
    let log = [plain(0, &[(None, Some("x")), (Some("a"), Some("1"))])];
    let out = clean_all(&log, NOW);
    let b = result(&log[0], &out[0]).unwrap();
    assert_eq!(records(&b), [rec(1, "a", "1")]);
}

#[test]
fn aborted_transactions_go_committed_ones_count_and_open_ones_stay_untouched() {
    let log = [
        plain(0, &[(Some("a"), Some("1")), (Some("b"), Some("1"))]),
        build(
            2,
            5,
            true,
            Compression::None,
            &[(Some("a"), Some("aborted"))],
        ),
        marker(3, 5, false),
        build(
            4,
            6,
            true,
            Compression::None,
            &[(Some("b"), Some("committed"))],
        ),
        marker(5, 6, true),
        build(6, 7, true, Compression::None, &[(Some("b"), Some("open"))]),
    ];
    let out = clean_all(&log, NOW);
    // `a` keeps its committed value: the aborted write does not supersede it.
    let first = result(&log[0], &out[0]).unwrap();
    assert_eq!(records(&first), [rec(0, "a", "1")]);
    // The aborted batch is its producer's last: it stays, empty.
    assert_eq!(result(&log[1], &out[1]).unwrap().record_count(), 0);
    assert_eq!(out[2].decision, Decision::Keep, "markers stay");
    assert_eq!(
        out[3].decision,
        Decision::Keep,
        "the committed value is b's latest"
    );
    assert_eq!(out[4].decision, Decision::Keep);
    assert_eq!(
        out[5].decision,
        Decision::Keep,
        "an undecided transaction is untouched"
    );
}

#[test]
fn compressed_batches_are_recompressed_with_their_codec() {
    for codec in [
        Compression::Gzip,
        Compression::Snappy,
        Compression::Lz4,
        Compression::Zstd,
    ] {
        let log = [
            build(
                0,
                -1,
                false,
                codec,
                &[(Some("a"), Some("1")), (Some("b"), Some("1"))],
            ),
            plain(2, &[(Some("a"), Some("2"))]),
        ];
        let out = clean_all(&log, NOW);
        let b = result(&log[0], &out[0]).unwrap();
        assert_eq!(b.compression(), codec);
        assert_eq!(records(&b), [rec(1, "b", "1")]);
    }
}

#[test]
fn the_key_map_refuses_a_batch_that_may_not_fit() {
    let txn = TxnIndex::new(1 << 20);
    let mut keys = KeyMap::new(2 * (1 + KEY_OVERHEAD));
    assert!(keys
        .observe(&plain(0, &[(Some("a"), Some("1"))]), &txn)
        .unwrap());
    assert!(keys
        .observe(&plain(1, &[(Some("b"), Some("1"))]), &txn)
        .unwrap());
    assert!(!keys
        .observe(&plain(2, &[(Some("c"), Some("1"))]), &txn)
        .unwrap());
    assert_eq!(keys.len(), 2);
    assert_eq!(keys.latest(b"c"), None);
}

#[test]
fn the_transaction_index_is_bounded() {
    let mut txn = TxnIndex::new(TXN_ENTRY * 3);
    let mut err = None;
    for i in 0..10 {
        if let Err(e) = txn.observe(&build(
            i,
            100 + i,
            true,
            Compression::None,
            &[(Some("a"), Some("1"))],
        )) {
            err = Some(e);
            break;
        }
    }
    assert!(matches!(err, Some(CleanError::TxnIndexFull(_))));
}
