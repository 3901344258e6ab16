use baton_protocol::record::{set_base_offset, RecordBatch, RecordBatchBuilder};
use baton_protocol::ErrorCode;
use bytes::{Bytes, BytesMut};
use proptest::prelude::*;
use proptest::test_runner::{Config, RngSeed};

use super::rebuild::rebuild;
use super::table::{
    increment_sequence, Duplicate, BATCHES_PER_PRODUCER, MAX_PRODUCERS_PER_PARTITION,
};
use super::*;
use crate::log::Log;
use baton_protocol::record::control::{control_batch, EndTxnMarker};

fn b(pid: i64, epoch: i16, seq: i32, count: i32) -> ProducerBatch {
    ProducerBatch {
        producer_id: pid,
        producer_epoch: epoch,
        base_sequence: seq,
        last_offset_delta: count - 1,
        transactional: false,
        max_timestamp: -1,
    }
}

/// [`b`], transactional.
fn tx(pid: i64, epoch: i16, seq: i32, count: i32) -> ProducerBatch {
    ProducerBatch {
        transactional: true,
        ..b(pid, epoch, seq, count)
    }
}

/// A table plus a log end, applying the produce path's rule: check, then record
/// each batch at the next offsets.
#[derive(Default)]
struct Sim {
    table: ProducerStateTable,
    end: i64,
}

impl Sim {
    fn produce(&mut self, batches: &[ProducerBatch]) -> Result<i64, ErrorCode> {
        match self.table.check(batches)? {
            Verdict::Duplicate(d) => Ok(d.base_offset),
            Verdict::Append => {
                let base = self.end;
                for batch in batches {
                    self.table.record(batch, self.end, -1);
                    self.end += batch.last_offset_delta as i64 + 1;
                }
                Ok(base)
            }
        }
    }
}

#[test]
fn retry_is_deduplicated_with_its_original_offset() {
    let mut s = Sim::default();
    assert_eq!(s.produce(&[b(7, 0, 0, 3)]), Ok(0));
    assert_eq!(s.produce(&[b(7, 0, 3, 2)]), Ok(3));
    assert_eq!(s.produce(&[b(-1, -1, -1, 4)]), Ok(5));
    // Both retries answer with the first append's offsets; nothing moves.
    assert_eq!(s.produce(&[b(7, 0, 0, 3)]), Ok(0));
    assert_eq!(s.produce(&[b(7, 0, 3, 2)]), Ok(3));
    assert_eq!(s.end, 9);
    let d = s.table.check(&[b(7, 0, 3, 2)]).unwrap();
    assert_eq!(
        d,
        Verdict::Duplicate(Duplicate {
            base_offset: 3,
            last_offset: 4,
            log_append_time_ms: -1
        })
    );
}

#[test]
fn gaps_and_overlaps_are_out_of_order() {
    let mut s = Sim::default();
    s.produce(&[b(1, 0, 0, 5)]).unwrap();
    // A gap.
    assert_eq!(
        s.produce(&[b(1, 0, 6, 1)]),
        Err(ErrorCode::OutOfOrderSequenceNumber)
    );
    // An overlap that is not an exact retry.
    assert_eq!(
        s.produce(&[b(1, 0, 2, 4)]),
        Err(ErrorCode::OutOfOrderSequenceNumber)
    );
    // An unknown producer must start at 0.
    assert_eq!(
        s.produce(&[b(2, 0, 1, 1)]),
        Err(ErrorCode::OutOfOrderSequenceNumber)
    );
    assert_eq!(s.produce(&[b(1, 0, 5, 1)]), Ok(5));
    assert_eq!(s.end, 6);
}

#[test]
fn stale_epoch_is_rejected_and_new_epoch_resets() {
    let mut s = Sim::default();
    s.produce(&[b(1, 3, 0, 2)]).unwrap();
    s.produce(&[b(1, 3, 2, 2)]).unwrap();
    assert_eq!(
        s.produce(&[b(1, 2, 4, 1)]),
        Err(ErrorCode::InvalidProducerEpoch)
    );
    // A newer epoch must start at sequence 0.
    assert_eq!(
        s.produce(&[b(1, 4, 4, 1)]),
        Err(ErrorCode::OutOfOrderSequenceNumber)
    );
    assert_eq!(s.produce(&[b(1, 4, 0, 1)]), Ok(4));
    let e = s.table.get(1).unwrap();
    assert_eq!(e.epoch(), 4);
    assert_eq!(
        e.batches().count(),
        1,
        "the old epoch's batches are forgotten"
    );
    // A retry from the old epoch is now stale, not a duplicate.
    assert_eq!(
        s.produce(&[b(1, 3, 2, 2)]),
        Err(ErrorCode::InvalidProducerEpoch)
    );
    assert_eq!(s.produce(&[b(1, 4, 1, 1)]), Ok(5));
}

#[test]
fn sequences_wrap_from_i32_max_to_zero() {
    assert_eq!(b(1, 0, i32::MAX - 1, 4).last_sequence(), 1);
    assert_eq!(b(1, 0, i32::MAX, 1).last_sequence(), i32::MAX);
    let mut t = ProducerStateTable::new();
    t.record(&b(1, 0, i32::MAX - 2, 3), 0, -1);
    assert_eq!(t.get(1).unwrap().last_seq(), i32::MAX);
    assert_eq!(t.check(&[b(1, 0, 0, 2)]), Ok(Verdict::Append));
    t.record(&b(1, 0, i32::MAX - 1, 4), 3, -1);
    assert_eq!(t.get(1).unwrap().last_seq(), 1);
    assert_eq!(t.check(&[b(1, 0, 2, 1)]), Ok(Verdict::Append));
    assert!(matches!(
        t.check(&[b(1, 0, i32::MAX - 1, 4)]),
        Ok(Verdict::Duplicate(Duplicate { base_offset: 3, .. }))
    ));
}

#[test]
fn only_the_last_five_batches_are_remembered() {
    let mut s = Sim::default();
    for i in 0..6 {
        assert_eq!(s.produce(&[b(9, 0, i * 2, 2)]), Ok(i as i64 * 2));
    }
    let e = s.table.get(9).unwrap();
    assert_eq!(e.batches().count(), BATCHES_PER_PRODUCER);
    // The oldest batch fell out of the window: its retry is out of order.
    assert_eq!(
        s.produce(&[b(9, 0, 0, 2)]),
        Err(ErrorCode::OutOfOrderSequenceNumber)
    );
    // The five most recent are all still recognised.
    for i in 1..6 {
        assert_eq!(s.produce(&[b(9, 0, i * 2, 2)]), Ok(i as i64 * 2));
    }
    assert_eq!(s.end, 12);
}

#[test]
fn requests_with_several_batches() {
    let mut s = Sim::default();
    // Checked in order against what the earlier ones leave.
    assert_eq!(
        s.produce(&[b(1, 0, 0, 2), b(1, 0, 2, 2), b(2, 0, 0, 1)]),
        Ok(0)
    );
    assert_eq!(s.produce(&[b(1, 0, 5, 1), b(1, 0, 4, 1)]).ok(), None);
    // A whole retry answers with the first batch's original offset.
    assert_eq!(s.produce(&[b(1, 0, 0, 2), b(1, 0, 2, 2)]), Ok(0));
    // Retried and new batches mixed.
    assert_eq!(
        s.produce(&[b(1, 0, 2, 2), b(1, 0, 4, 1)]),
        Err(ErrorCode::OutOfOrderSequenceNumber)
    );
    // The same new batch twice in one request.
    assert_eq!(
        s.produce(&[b(1, 0, 4, 1), b(1, 0, 4, 1)]),
        Err(ErrorCode::OutOfOrderSequenceNumber)
    );
    assert_eq!(s.end, 5);
}

#[test]
fn non_idempotent_batches_pass_and_bad_sequences_are_invalid() {
    let t = ProducerStateTable::new();
    assert_eq!(
        t.check(&[b(-1, -1, -1, 1), b(-1, -1, 5, 1)]),
        Ok(Verdict::Append)
    );
    assert_eq!(t.check(&[b(3, 0, -1, 1)]), Err(ErrorCode::InvalidRecord));
}

#[test]
fn producer_count_is_bounded_and_the_oldest_goes_first() {
    let mut t = ProducerStateTable::new();
    for pid in 0..MAX_PRODUCERS_PER_PARTITION as i64 {
        t.record(&b(pid, 0, 0, 1), pid, -1);
    }
    // Producer 0 writes again, so producer 1 now has the oldest last batch.
    t.record(&b(0, 0, 1, 1), MAX_PRODUCERS_PER_PARTITION as i64, -1);
    t.record(&b(100_000, 0, 0, 1), 100_000, -1);
    assert_eq!(t.len(), MAX_PRODUCERS_PER_PARTITION);
    assert!(t.get(0).is_some());
    assert!(t.get(1).is_none());
}

#[test]
fn configured_producer_limit_evicts_the_oldest_first() {
    let mut t = ProducerStateTable::with_max_producers(3);
    assert_eq!(t.max_producers(), 3);
    for pid in 0..3 {
        t.record(&b(pid, 0, 0, 1), pid * 10, -1);
    }
    // Producer 0 writes again, so producer 1's last batch is now the oldest.
    t.record(&b(0, 0, 1, 1), 30, -1);
    t.record(&b(7, 0, 0, 1), 40, -1);
    assert_eq!(t.len(), 3);
    assert!(
        t.get(1).is_none(),
        "the oldest last batch is forgotten first"
    );
    for pid in [0, 2, 7] {
        assert!(t.get(pid).is_some(), "producer {pid}");
    }
    // Forgotten means unknown: its next batch must start at sequence 0 again.
    assert_eq!(
        t.check(&[b(1, 0, 1, 1)]),
        Err(ErrorCode::OutOfOrderSequenceNumber)
    );
    // A limit of 0 still keeps the producer being written.
    let mut one = ProducerStateTable::with_max_producers(0);
    one.record(&b(1, 0, 0, 1), 0, -1);
    one.record(&b(2, 0, 0, 1), 1, -1);
    assert_eq!((one.len(), one.get(2).is_some()), (1, true));
}

// ---- Rebuilding from the log ----

fn encode(pid: i64, epoch: i16, seq: i32, count: i32, ts: i64) -> Bytes {
    encode_as(pid, epoch, seq, count, ts, false)
}

fn encode_as(pid: i64, epoch: i16, seq: i32, count: i32, ts: i64, transactional: bool) -> Bytes {
    let mut builder = RecordBatchBuilder::new(ts)
        .producer(pid, epoch, seq)
        .transactional(transactional);
    for i in 0..count {
        builder.push(ts + i as i64, None, Some(b"v"), &[]);
    }
    builder.finish()
}

/// The produce path over a real log: check, assign offsets, append, record.
fn produce_to_log(
    log: &mut Log,
    table: &mut ProducerStateTable,
    batches: &[Bytes],
) -> Result<i64, ErrorCode> {
    let parsed: Vec<RecordBatch> = batches
        .iter()
        .map(|b| RecordBatch::parse(b.clone()).unwrap())
        .collect();
    let headers: Vec<ProducerBatch> = parsed.iter().map(ProducerBatch::of).collect();
    if let Verdict::Duplicate(d) = table.check(&headers)? {
        return Ok(d.base_offset);
    }
    let base = log.log_end_offset();
    for (batch, header) in parsed.iter().zip(&headers) {
        let at = log.log_end_offset();
        let mut buf = BytesMut::from(&batch.as_bytes()[..]);
        set_base_offset(&mut buf, at);
        log.append(buf.freeze()).unwrap();
        table.record(header, at, -1);
    }
    Ok(base)
}

/// The marker path over a real log: check, append at the log end, record.
fn marker_to_log(
    log: &mut Log,
    table: &mut ProducerStateTable,
    pid: i64,
    epoch: i16,
    marker: EndTxnMarker,
    ts: i64,
) -> Result<i64, ErrorCode> {
    table.check_marker(pid, epoch, marker.coordinator_epoch)?;
    let at = log.log_end_offset();
    let mut buf = BytesMut::from(control_batch(pid, epoch, marker, ts));
    set_base_offset(&mut buf, at);
    log.append(buf.freeze()).unwrap();
    table.record_marker(pid, epoch, marker, at, ts);
    Ok(at)
}

/// One step of a random producer workload.
#[derive(Debug, Clone)]
enum Op {
    /// Producer `p` sends its next batch of `n` records, and with `two` a second
    /// one-record batch in the same request.
    Next { p: usize, n: i32, two: bool },
    /// Producer `p` retries one of its last 7 batches.
    Retry { p: usize, back: usize },
    /// Producer `p` sends with a sequence gap.
    Gap { p: usize },
    /// Producer `p` bumps its epoch and restarts at sequence 0.
    Bump { p: usize },
    /// A producer without idempotence writes.
    Plain { n: i32 },
    /// The log is truncated to `frac`/16 of its length.
    Truncate { frac: i64 },
    /// Producer `p` sends its next batch of `n` records in a transaction.
    TxnNext { p: usize, n: i32 },
    /// A coordinator ends producer `p`'s transaction (commit or abort), with a
    /// producer epoch `bump` above the client's (fencing).
    End { p: usize, commit: bool, bump: i16 },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0usize..4, 1i32..5, any::<bool>()).prop_map(|(p, n, two)| Op::Next { p, n, two }),
        3 => (0usize..4, 0usize..7).prop_map(|(p, back)| Op::Retry { p, back }),
        1 => (0usize..4).prop_map(|p| Op::Gap { p }),
        1 => (0usize..4).prop_map(|p| Op::Bump { p }),
        1 => (1i32..4).prop_map(|n| Op::Plain { n }),
        1 => (0i64..16).prop_map(|frac| Op::Truncate { frac }),
        4 => (0usize..4, 1i32..4).prop_map(|(p, n)| Op::TxnNext { p, n }),
        3 => (0usize..4, any::<bool>(), 0i16..2).prop_map(|(p, commit, bump)| Op::End { p, commit, bump }),
    ]
}

/// A client-side view of one producer: its epoch, next sequence and sent batches.
#[derive(Debug, Default, Clone)]
struct Client {
    epoch: i16,
    next_seq: i32,
    sent: Vec<(i16, i32, i32)>,
}

fn run_workload(log: &mut Log, ops: &[Op]) -> ProducerStateTable {
    let mut table = ProducerStateTable::new();
    let mut clients = vec![Client::default(); 4];
    let pid = |p: usize| 1000 + p as i64;
    for (i, op) in ops.iter().enumerate() {
        let ts = i as i64;
        match *op {
            Op::Next { p, n, two } => {
                let c = &mut clients[p];
                let mut batches = vec![encode(pid(p), c.epoch, c.next_seq, n, ts)];
                let mut planned = vec![(c.epoch, c.next_seq, n)];
                if two {
                    let s = increment_sequence(c.next_seq, n);
                    batches.push(encode(pid(p), c.epoch, s, 1, ts));
                    planned.push((c.epoch, s, 1));
                }
                if produce_to_log(log, &mut table, &batches).is_ok() {
                    for (e, s, n) in planned {
                        c.next_seq = increment_sequence(s, n);
                        c.sent.push((e, s, n));
                    }
                }
            }
            Op::Retry { p, back } => {
                let c = &clients[p];
                if let Some(&(e, s, n)) = c.sent.iter().rev().nth(back) {
                    let before = log.log_end_offset();
                    let r = produce_to_log(log, &mut table, &[encode(pid(p), e, s, n, ts)]);
                    // A retry never appends.
                    assert_eq!(log.log_end_offset(), before, "retry appended: {op:?}");
                    // One of the last five batches of the latest epoch written is recognised.
                    let last_epoch = c.sent.last().map(|x| x.0);
                    let recent = c
                        .sent
                        .iter()
                        .rev()
                        .take(back + 1)
                        .all(|x| Some(x.0) == last_epoch);
                    if back < BATCHES_PER_PRODUCER && recent {
                        assert!(r.is_ok(), "retry {op:?} rejected: {r:?}");
                    } else {
                        assert!(r.is_err(), "old retry {op:?} accepted: {r:?}");
                    }
                }
            }
            Op::Gap { p } => {
                let c = &clients[p];
                let s = increment_sequence(c.next_seq, 1);
                let before = log.log_end_offset();
                let r = produce_to_log(log, &mut table, &[encode(pid(p), c.epoch, s, 1, ts)]);
                assert!(r.is_err(), "a gap was accepted: {op:?}");
                assert_eq!(log.log_end_offset(), before);
            }
            Op::Bump { p } => {
                let c = &mut clients[p];
                c.epoch += 1;
                c.next_seq = 0;
            }
            Op::Plain { n } => {
                produce_to_log(log, &mut table, &[encode(-1, -1, -1, n, ts)]).unwrap();
            }
            Op::TxnNext { p, n } => {
                let c = &mut clients[p];
                let batch = encode_as(pid(p), c.epoch, c.next_seq, n, ts, true);
                if produce_to_log(log, &mut table, &[batch]).is_ok() {
                    c.sent.push((c.epoch, c.next_seq, n));
                    c.next_seq = increment_sequence(c.next_seq, n);
                }
            }
            Op::End { p, commit, bump } => {
                let c = &mut clients[p];
                let marker = EndTxnMarker {
                    commit,
                    coordinator_epoch: 0,
                };
                let before = table.get(pid(p)).and_then(|e| e.txn_first_offset());
                let epoch_before = table.get(pid(p)).map(|e| e.epoch());
                let r = marker_to_log(log, &mut table, pid(p), c.epoch + bump, marker, ts);
                let at = r.expect("a marker at the client's epoch or newer is accepted");
                let after = table.get(pid(p)).unwrap();
                assert_eq!(after.txn_first_offset(), None);
                if let (Some(first), false) = (before, commit) {
                    let last = *table.txns().aborted().last().unwrap();
                    assert_eq!(
                        (last.producer_id, last.first_offset, last.last_offset),
                        (pid(p), first, at)
                    );
                }
                if epoch_before != Some(c.epoch + bump) {
                    // The partition moved to the marker's epoch: older batches are
                    // no longer retries.
                    c.sent.clear();
                }
                if bump > 0 {
                    c.epoch += bump;
                    c.next_seq = 0;
                }
            }
            Op::Truncate { frac } => {
                let to = log.log_end_offset() * frac / 16;
                log.truncate_to(to).unwrap();
                table = rebuild(log, ProducerLimits::default(), 0).unwrap();
                // The clients lost their unreplicated tail: resume from the log.
                for (p, c) in clients.iter_mut().enumerate() {
                    c.sent.clear();
                    match table.get(pid(p)) {
                        Some(e) if e.epoch() == c.epoch => {
                            c.next_seq = increment_sequence(e.last_seq(), 1)
                        }
                        Some(e) if e.epoch() > c.epoch => {
                            c.epoch = e.epoch() + 1;
                            c.next_seq = 0;
                        }
                        Some(_) | None => {
                            c.epoch += 1;
                            c.next_seq = 0;
                        }
                    }
                }
            }
        }
    }
    table
}

fn seeded(cases: u32, seed: u64) -> Config {
    Config {
        cases,
        rng_seed: RngSeed::Fixed(seed),
        ..Config::default()
    }
}

proptest! {
    #![proptest_config(seeded(128, 0x1de4_0b07))]

    /// After any workload, the state rebuilt from the log equals the live state,
    /// with the high watermark anywhere in the log.
    #[test]
    fn rebuilt_state_equals_live_state(
        ops in proptest::collection::vec(op(), 0..80),
        hw_frac in 0..=16i64,
    ) {
        let mut log = Log::memory();
        let mut live = run_workload(&mut log, &ops);
        let rebuilt = rebuild(&log, ProducerLimits::default(), 0).unwrap();
        prop_assert_eq!(&live, &rebuilt);
        let hw = log.log_end_offset() * hw_frac / 16;
        live.on_high_watermark(hw);
        let rebuilt = rebuild(&log, ProducerLimits::default(), hw).unwrap();
        prop_assert_eq!(live, rebuilt);
    }
}

#[test]
fn rebuild_from_a_reopened_disk_log() {
    let dir = tempfile::tempdir().unwrap();
    let ops: Vec<Op> = (0..40)
        .map(|i| match i % 5 {
            0..=2 => Op::Next {
                p: i % 3,
                n: 1 + (i as i32 % 3),
                two: i % 7 == 0,
            },
            3 => Op::Retry { p: i % 3, back: 1 },
            _ => Op::Plain { n: 2 },
        })
        .collect();
    let live = {
        let (mut log, _) = Log::open(dir.path(), 1 << 12, 256).unwrap();
        let live = run_workload(&mut log, &ops);
        log.flush().unwrap();
        live
    };
    assert!(!live.is_empty());
    let (log, _) = Log::open(dir.path(), 1 << 12, 256).unwrap();
    assert_eq!(rebuild(&log, ProducerLimits::default(), 0).unwrap(), live);
    // A rebuild keeps the configured limit.
    let small = rebuild(
        &log,
        ProducerLimits {
            max_producers: 1,
            ..ProducerLimits::default()
        },
        0,
    )
    .unwrap();
    assert_eq!((small.len(), small.max_producers()), (1, 1));
    assert!(live.len() > 1);
}

// ---- Through the partition's produce path ----

#[test]
fn partition_dedups_and_truncation_rolls_the_state_back() {
    use crate::partition::Partition;
    use baton_protocol::record::TimestampType;

    let p = Partition::new("t", 0, 1, Log::memory(), ProducerLimits::default());
    let mut st = p.lock();
    let append = |st: &mut crate::partition::PartitionState, bytes: &Bytes| {
        st.append_records(bytes, TimestampType::CreateTime, 0)
            .map(|i| i.base_offset)
    };
    let b0 = encode(5, 0, 0, 2, 0);
    let b1 = encode(5, 0, 2, 3, 0);
    let b2 = encode(5, 0, 5, 1, 0);
    assert_eq!(append(&mut st, &b0), Ok(0));
    assert_eq!(append(&mut st, &b1), Ok(2));
    assert_eq!(append(&mut st, &b2), Ok(5));
    assert_eq!(append(&mut st, &b1), Ok(2));
    assert_eq!(st.log_end_offset(), 6);
    assert_eq!(
        append(&mut st, &encode(5, 0, 7, 1, 0)),
        Err(ErrorCode::OutOfOrderSequenceNumber)
    );
    // Truncating b1 and b2 away: b0 is still a retry, b1 is new again.
    st.truncate_to(2).unwrap();
    assert_eq!(append(&mut st, &b0), Ok(0));
    assert_eq!(append(&mut st, &b2).ok(), None);
    assert_eq!(append(&mut st, &b1), Ok(2));
    assert_eq!(st.log_end_offset(), 5);
    // b2, lost with the truncation, now follows b1 again.
    assert_eq!(append(&mut st, &b2), Ok(5));
    assert_eq!(append(&mut st, &b2), Ok(5));
    assert_eq!(st.log_end_offset(), 6);
}

// ---- Transactions ----

fn commit(coordinator_epoch: i32) -> EndTxnMarker {
    EndTxnMarker {
        commit: true,
        coordinator_epoch,
    }
}

fn abort(coordinator_epoch: i32) -> EndTxnMarker {
    EndTxnMarker {
        commit: false,
        coordinator_epoch,
    }
}

#[test]
fn a_transaction_opens_at_its_first_batch_and_its_marker_closes_it() {
    let mut s = Sim::default();
    assert_eq!(s.produce(&[b(1, 0, 0, 2)]), Ok(0));
    assert_eq!(s.produce(&[tx(2, 0, 0, 3)]), Ok(2));
    assert_eq!(s.produce(&[tx(3, 0, 0, 1)]), Ok(5));
    assert_eq!(s.produce(&[tx(2, 0, 3, 1)]), Ok(6));
    assert_eq!(s.table.first_unstable_offset(), Some(2));
    assert_eq!(s.table.get(2).unwrap().txn_first_offset(), Some(2));
    // Producer 2 commits at offset 7: its transaction stays unstable until the
    // high watermark passes the marker; then producer 3's (at 5) holds on.
    let ended = s.table.record_marker(2, 0, commit(0), 7, 100);
    assert_eq!(
        ended,
        Some(EndedTxn {
            first_offset: 2,
            commit: true
        })
    );
    assert_eq!(s.table.first_unstable_offset(), Some(2));
    assert_eq!(s.table.txns().unreplicated().collect::<Vec<_>>(), [(2, 7)]);
    s.table.on_high_watermark(7);
    assert_eq!(s.table.first_unstable_offset(), Some(2));
    s.table.on_high_watermark(8);
    assert_eq!(s.table.first_unstable_offset(), Some(5));
    assert_eq!(s.table.txns().unreplicated().count(), 0);
    assert_eq!(s.table.txns().aborted().count(), 0);
    // Producer 3 aborts at offset 8.
    s.end = 8;
    s.table.record_marker(3, 0, abort(0), 8, 100);
    assert_eq!(s.table.first_unstable_offset(), Some(5));
    s.table.on_high_watermark(9);
    assert_eq!(s.table.first_unstable_offset(), None);
    let aborted = AbortedTxn {
        producer_id: 3,
        first_offset: 5,
        last_offset: 8,
    };
    assert_eq!(s.table.txns().aborted_overlapping(0, 4), vec![]);
    assert_eq!(s.table.txns().aborted_overlapping(0, 5), vec![aborted]);
    assert_eq!(s.table.txns().aborted_overlapping(8, 20), vec![aborted]);
    assert_eq!(s.table.txns().aborted_overlapping(9, 20), vec![]);
    // A marker without an open transaction is filed and ends nothing.
    assert_eq!(s.table.record_marker(3, 0, commit(0), 9, 100), None);
    // Sequences go on across transactions of one epoch.
    s.end = 10;
    assert_eq!(s.produce(&[tx(2, 0, 4, 1)]), Ok(10));
    assert_eq!(s.table.first_unstable_offset(), Some(10));
}

#[test]
fn transactional_batches_follow_the_transaction_rules() {
    let mut s = Sim::default();
    // A transactional batch needs a producer id.
    assert_eq!(
        s.produce(&[tx(-1, -1, -1, 1)]),
        Err(ErrorCode::InvalidRecord)
    );
    s.produce(&[tx(1, 0, 0, 1)]).unwrap();
    // A plain idempotent batch in the middle of an open transaction.
    assert_eq!(s.produce(&[b(1, 0, 1, 1)]), Err(ErrorCode::InvalidTxnState));
    // A retry of a transactional batch is deduplicated like an idempotent one.
    assert_eq!(s.produce(&[tx(1, 0, 0, 1)]), Ok(0));
    assert_eq!(
        s.produce(&[tx(1, 0, 2, 1)]),
        Err(ErrorCode::OutOfOrderSequenceNumber)
    );
    assert_eq!(s.end, 1);
}

#[test]
fn marker_epochs_fence_producers_and_coordinators() {
    let mut s = Sim::default();
    s.produce(&[tx(1, 3, 0, 2)]).unwrap();
    assert_eq!(
        s.table.check_marker(1, 2, 0),
        Err(ErrorCode::InvalidProducerEpoch)
    );
    assert_eq!(s.table.check_marker(1, 3, 5), Ok(()));
    s.table.record_marker(1, 3, commit(5), 2, 0);
    assert_eq!(s.table.get(1).unwrap().coordinator_epoch(), 5);
    assert_eq!(
        s.table.check_marker(1, 3, 4),
        Err(ErrorCode::TransactionCoordinatorFenced)
    );
    // A newer producer epoch fences the producer: its epoch moves up and its
    // batches are forgotten, so its old epoch is stale and the new one starts at 0.
    s.end = 3;
    s.produce(&[tx(1, 3, 2, 1)]).unwrap();
    assert_eq!(s.table.check_marker(1, 4, 5), Ok(()));
    s.table.record_marker(1, 4, abort(5), 4, 0);
    s.end = 5;
    let e = s.table.get(1).unwrap();
    assert_eq!((e.epoch(), e.last_seq(), e.batches().count()), (4, -1, 0));
    assert_eq!(
        s.produce(&[tx(1, 3, 3, 1)]),
        Err(ErrorCode::InvalidProducerEpoch)
    );
    assert_eq!(
        s.produce(&[tx(1, 4, 1, 1)]),
        Err(ErrorCode::OutOfOrderSequenceNumber)
    );
    assert_eq!(s.produce(&[tx(1, 4, 0, 1)]), Ok(5));
    // A marker for a producer the partition never saw is filed too.
    assert_eq!(s.table.check_marker(9, 0, 0), Ok(()));
    s.table.record_marker(9, 0, abort(1), 6, 0);
    assert_eq!(s.table.get(9).unwrap().coordinator_epoch(), 1);
}

#[test]
fn open_transactions_are_bounded_and_never_evicted() {
    let mut s = Sim {
        table: ProducerStateTable::with_max_producers(2),
        end: 0,
    };
    s.produce(&[tx(1, 0, 0, 1)]).unwrap();
    s.produce(&[tx(2, 0, 0, 1)]).unwrap();
    assert_eq!(
        s.produce(&[tx(3, 0, 0, 1)]),
        Err(ErrorCode::PolicyViolation)
    );
    // Idempotent producers still come and go, never pushing out 1 and 2.
    s.produce(&[b(4, 0, 0, 1)]).unwrap();
    s.produce(&[b(5, 0, 0, 1)]).unwrap();
    assert!(s.table.get(1).is_some() && s.table.get(2).is_some());
    assert!(s.table.get(4).is_none() && s.table.get(5).is_some());
    assert_eq!(s.table.len(), 3);
    assert_eq!(s.table.first_unstable_offset(), Some(0));
    // Once one closes, another may open.
    s.table.record_marker(1, 0, commit(0), 4, 0);
    s.end = 5;
    assert_eq!(s.produce(&[tx(3, 0, 0, 1)]), Ok(5));
}

#[test]
fn the_aborted_index_keeps_the_newest_entries() {
    let mut s = Sim {
        table: ProducerStateTable::with_limits(ProducerLimits {
            max_producers: 10,
            max_aborted_txns: 2,
        }),
        end: 0,
    };
    for pid in 1..=3 {
        s.produce(&[tx(pid, 0, 0, 1)]).unwrap();
        let at = s.end;
        s.table.record_marker(pid, 0, abort(0), at, 0);
        s.end += 1;
    }
    let kept: Vec<i64> = s.table.txns().aborted().map(|a| a.producer_id).collect();
    assert_eq!(kept, vec![2, 3]);
    assert_eq!(s.table.txns().aborted_overlapping(0, 100).len(), 2);
}

fn append_marker_at(st: &mut crate::partition::PartitionState, pid: i64, marker: EndTxnMarker) {
    st.append_marker(
        pid,
        0,
        marker,
        baton_protocol::record::TimestampType::CreateTime,
        0,
    )
    .unwrap();
}

#[test]
fn partition_last_stable_offset_and_truncation() {
    use crate::partition::Partition;
    use baton_protocol::record::TimestampType;

    let p = Partition::new("t", 0, 1, Log::memory(), ProducerLimits::default());
    let mut st = p.lock();
    let append = |st: &mut crate::partition::PartitionState, bytes: &Bytes| {
        st.append_records(bytes, TimestampType::CreateTime, 0)
            .map(|i| i.base_offset)
    };
    assert_eq!(append(&mut st, &encode(1, 0, 0, 2, 0)), Ok(0));
    assert_eq!(append(&mut st, &encode_as(2, 0, 0, 2, 0, true)), Ok(2));
    assert_eq!(append(&mut st, &encode(1, 0, 2, 1, 0)), Ok(4));
    assert_eq!((st.high_watermark(), st.last_stable_offset()), (5, 2));
    assert_eq!(
        st.max_readable(crate::partition::Isolation::ReadCommitted),
        2
    );
    append_marker_at(&mut st, 2, abort(0));
    assert_eq!((st.high_watermark(), st.last_stable_offset()), (6, 6));
    assert_eq!(
        st.aborted_transactions(0, 5),
        vec![AbortedTxn {
            producer_id: 2,
            first_offset: 2,
            last_offset: 5
        }]
    );
    // Truncating the marker away reopens the transaction; truncating its first
    // batch away forgets it.
    st.truncate_to(5).unwrap();
    assert_eq!(st.last_stable_offset(), 2);
    assert!(st.aborted_transactions(0, 5).is_empty());
    st.rebuild_producer_state();
    assert_eq!(st.last_stable_offset(), 2);
    st.truncate_to(2).unwrap();
    assert_eq!(st.last_stable_offset(), 2);
    assert_eq!(st.producers().txns().ongoing_len(), 0);
    // A stale marker is refused before anything is appended.
    append_marker_at(&mut st, 1, commit(3));
    assert_eq!(
        st.append_marker(1, 0, commit(2), TimestampType::CreateTime, 0)
            .map(|a| a.offset),
        Err(ErrorCode::TransactionCoordinatorFenced)
    );
    assert_eq!(st.log_end_offset(), 3);
}

#[test]
fn markers_follow_the_topic_timestamp_type() {
    use crate::partition::Partition;
    use baton_protocol::record::TimestampType;

    let p = Partition::new("t", 0, 1, Log::memory(), ProducerLimits::default());
    let mut st = p.lock();
    st.append_records(
        &encode_as(1, 0, 0, 1, 5, true),
        TimestampType::CreateTime,
        0,
    )
    .unwrap();
    for (pid, ty, now) in [
        (1, TimestampType::CreateTime, 1_000),
        (2, TimestampType::LogAppendTime, 2_000),
    ] {
        let at = st.append_marker(pid, 0, commit(0), ty, now).unwrap().offset;
        let stored = st.log().read(at, 1 << 10).unwrap();
        let batch = RecordBatch::parse(stored[0].clone()).unwrap();
        assert!(batch.is_control());
        assert_eq!((batch.timestamp_type(), batch.max_timestamp()), (ty, now));
        batch.verify_crc().unwrap();
    }
}

/// `bytes` stamped at `offset`, as a follower receives it from its leader.
fn at_offset(bytes: Bytes, offset: i64) -> Bytes {
    let mut buf = BytesMut::from(&bytes[..]);
    set_base_offset(&mut buf, offset);
    buf.freeze()
}

#[test]
fn a_completed_transaction_is_unstable_until_the_high_watermark_passes_its_marker() {
    use crate::partition::Partition;

    // A replica appends what its leader sends and learns the HW separately.
    let p = Partition::new_replica("t", 0, Log::memory(), ProducerLimits::default());
    let mut st = p.lock();
    st.append_replica_batch(at_offset(encode(1, 0, 0, 2, 0), 0))
        .unwrap();
    st.append_replica_batch(at_offset(encode_as(2, 0, 0, 2, 0, true), 2))
        .unwrap();
    st.append_replica_batch(at_offset(encode_as(3, 0, 0, 1, 0, true), 4))
        .unwrap();
    st.append_replica_batch(at_offset(control_batch(2, 0, commit(0), 0), 5))
        .unwrap();
    st.append_replica_batch(at_offset(control_batch(3, 0, abort(0), 0), 6))
        .unwrap();
    assert_eq!(st.log_end_offset(), 7);
    assert_eq!(st.producers().txns().ongoing_len(), 0);
    // Both transactions are complete, but no marker is below the HW yet.
    for (hw, lso) in [(2, 2), (5, 2), (6, 4), (7, 7)] {
        st.set_follower_high_watermark(hw);
        assert_eq!(
            (st.high_watermark(), st.last_stable_offset()),
            (hw, lso),
            "high watermark {hw}"
        );
    }
    assert_eq!(st.producers().txns().unreplicated().count(), 0);
    // A rebuild knows the HW: the markers below it are stable at once.
    st.rebuild_producer_state();
    assert_eq!(st.last_stable_offset(), 7);
    // Truncating the abort marker away reopens producer 3's transaction; with
    // the HW back at 5 the commit marker at 5 is not below it and holds too.
    st.truncate_to(6).unwrap();
    st.set_follower_high_watermark(5);
    st.rebuild_producer_state();
    assert_eq!(st.last_stable_offset(), 2);
    st.set_follower_high_watermark(6);
    assert_eq!(st.last_stable_offset(), 4);
    assert_eq!(
        st.producers().txns().ongoing().collect::<Vec<_>>(),
        [(4, 3)]
    );
    // A replica reopened over the log knows no HW (it starts at the log start):
    // the completed transaction is unstable again until it learns one.
    let reopened = rebuild(st.log(), ProducerLimits::default(), 0).unwrap();
    assert_eq!(reopened.txns().unreplicated().collect::<Vec<_>>(), [(2, 5)]);
    assert_eq!(reopened.first_unstable_offset(), Some(2));
}

#[test]
fn aborted_lookups_find_long_transactions_and_skip_far_markers() {
    let mut t = super::txn::TxnIndex::new(100);
    // Producer 1's transaction spans 0..=50; producers 2.. abort short ones later.
    t.begin(1, 0);
    t.end(1, 0, 50, false);
    for pid in 2..20 {
        let first = pid * 100;
        t.begin(pid, first);
        t.end(pid, first, first + 2, false);
    }
    let ids = |v: Vec<AbortedTxn>| v.into_iter().map(|a| a.producer_id).collect::<Vec<_>>();
    assert_eq!(ids(t.aborted_overlapping(10, 12)), [1]);
    assert_eq!(ids(t.aborted_overlapping(51, 250)), [2]);
    assert_eq!(ids(t.aborted_overlapping(0, 300)), [1, 2, 3]);
    assert_eq!(ids(t.aborted_overlapping(1_901, 5_000)), [19]);
    assert!(t.aborted_overlapping(1_903, 5_000).is_empty());
}
