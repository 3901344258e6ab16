//! Every transition of the transaction state machine and every refusal.

use super::*;

const T: i32 = 60_000;

fn limits() -> TxnLimits {
    TxnLimits::default()
}

fn ids(start: i64) -> impl FnMut() -> Result<i64, ErrorCode> {
    let mut next = start;
    move || {
        next += 1;
        Ok(next - 1)
    }
}

fn p(topic: &str, partition: i32) -> (String, i32) {
    (topic.to_owned(), partition)
}

fn ready(o: InitOutcome) -> TxnMetadata {
    match o {
        InitOutcome::Ready(m) => m,
        other => panic!("expected Ready, got {other:?}"),
    }
}

fn written(o: AddOutcome) -> TxnMetadata {
    match o {
        AddOutcome::Write(m) => m,
        other => panic!("expected Write, got {other:?}"),
    }
}

fn prepared(o: EndOutcome) -> TxnMetadata {
    match o {
        EndOutcome::Prepare(m) => m,
        other => panic!("expected Prepare, got {other:?}"),
    }
}

/// A new id with one ongoing transaction on `t-0`.
fn ongoing() -> TxnMetadata {
    let m =
        ready(TxnMetadata::init_producer_id(None, T, (-1, -1), &mut ids(7), &limits(), 0).unwrap());
    written(m.add_partitions(7, 0, &[p("t", 0)], &limits(), 10).unwrap())
}

#[test]
fn state_ids_and_names_round_trip() {
    for s in TxnState::ALL {
        assert_eq!(TxnState::from_id(s.id()), Some(s));
        assert_eq!(TxnState::from_name(s.name()), Some(s));
    }
    assert_eq!(TxnState::PrepareAbort.id(), 3);
    assert_eq!(TxnState::PrepareEpochFence.id(), 7);
    assert_eq!(TxnState::from_id(8), None);
    assert_eq!(TxnState::from_id(-1), None);
    assert_eq!(TxnState::from_name("ongoing"), None);
}

#[test]
fn new_id_gets_epoch_zero_and_bumps_on_each_init() {
    let m =
        ready(TxnMetadata::init_producer_id(None, T, (-1, -1), &mut ids(7), &limits(), 5).unwrap());
    assert_eq!(
        (m.producer_id, m.producer_epoch, m.state),
        (7, 0, TxnState::Empty)
    );
    let again = ready(
        TxnMetadata::init_producer_id(Some(&m), T, (-1, -1), &mut ids(100), &limits(), 6).unwrap(),
    );
    assert_eq!((again.producer_id, again.producer_epoch), (7, 1));
    assert_eq!(again.last_producer_epoch, 0);
}

#[test]
fn timeout_beyond_the_maximum_is_refused() {
    let l = TxnLimits {
        max_timeout_ms: 1000,
        ..limits()
    };
    for bad in [0, -5, 1001] {
        assert_eq!(
            TxnMetadata::init_producer_id(None, bad, (-1, -1), &mut ids(1), &l, 0),
            Err(ErrorCode::InvalidTransactionTimeout)
        );
    }
    assert!(TxnMetadata::init_producer_id(None, 1000, (-1, -1), &mut ids(1), &l, 0).is_ok());
}

#[test]
fn exhausted_epoch_takes_a_new_producer_id() {
    let mut m = TxnMetadata::new(7, T, 0);
    m.producer_epoch = MAX_EPOCH;
    let next = ready(
        TxnMetadata::init_producer_id(Some(&m), T, (-1, -1), &mut ids(50), &limits(), 1).unwrap(),
    );
    assert_eq!((next.producer_id, next.producer_epoch), (50, 0));
    assert_eq!(next.last_producer_id, 7);
}

#[test]
fn init_during_an_ongoing_transaction_fences_and_aborts_it() {
    let m = ongoing();
    let out =
        TxnMetadata::init_producer_id(Some(&m), T, (-1, -1), &mut ids(99), &limits(), 20).unwrap();
    let InitOutcome::AbortFirst(abort) = out else {
        panic!("{out:?}")
    };
    assert_eq!(abort.state, TxnState::PrepareAbort);
    assert_eq!((abort.producer_id, abort.producer_epoch), (7, 1));
    assert_eq!(
        abort.partitions.len(),
        1,
        "markers are owed to the partition"
    );
    // The old producer (epoch 0) is fenced.
    assert_eq!(
        abort.end(7, 0, true, false, 21),
        Err(ErrorCode::ProducerFenced)
    );
    // The retried InitProducerId waits for the abort, then bumps again.
    assert_eq!(
        TxnMetadata::init_producer_id(Some(&abort), T, (-1, -1), &mut ids(99), &limits(), 22),
        Err(ErrorCode::ConcurrentTransactions)
    );
    let done = abort.complete(23).unwrap();
    assert_eq!(done.state, TxnState::CompleteAbort);
    assert!(done.partitions.is_empty());
    let next = ready(
        TxnMetadata::init_producer_id(Some(&done), T, (-1, -1), &mut ids(99), &limits(), 24)
            .unwrap(),
    );
    assert_eq!((next.producer_id, next.producer_epoch), (7, 2));
}

#[test]
fn kip360_names_the_current_producer() {
    let m =
        ready(TxnMetadata::init_producer_id(None, T, (-1, -1), &mut ids(7), &limits(), 0).unwrap());
    // Naming the current id and epoch keeps the id and bumps.
    let b = ready(
        TxnMetadata::init_producer_id(Some(&m), T, (7, 0), &mut ids(9), &limits(), 1).unwrap(),
    );
    assert_eq!((b.producer_id, b.producer_epoch), (7, 1));
    // A retry of that bump (naming the old epoch) gets the same answer.
    let r = ready(
        TxnMetadata::init_producer_id(Some(&b), T, (7, 0), &mut ids(9), &limits(), 2).unwrap(),
    );
    assert_eq!((r.producer_id, r.producer_epoch), (7, 1));
    // An unknown id or a stale epoch is fenced.
    assert_eq!(
        TxnMetadata::init_producer_id(Some(&b), T, (8, 1), &mut ids(9), &limits(), 3),
        Err(ErrorCode::ProducerFenced)
    );
    let mut c = b.clone();
    c.state = TxnState::CompleteCommit;
    assert_eq!(
        TxnMetadata::init_producer_id(Some(&c), T, (7, 5), &mut ids(9), &limits(), 3),
        Err(ErrorCode::ProducerFenced)
    );
}

#[test]
fn dead_and_fence_states_refuse_init() {
    let mut m = TxnMetadata::new(7, T, 0);
    m.state = TxnState::Dead;
    assert_eq!(
        TxnMetadata::init_producer_id(Some(&m), T, (-1, -1), &mut ids(9), &limits(), 1),
        Err(ErrorCode::InvalidTxnState)
    );
    m.state = TxnState::PrepareEpochFence;
    assert_eq!(
        TxnMetadata::init_producer_id(Some(&m), T, (-1, -1), &mut ids(9), &limits(), 1),
        Err(ErrorCode::ConcurrentTransactions)
    );
}

#[test]
fn add_partitions_starts_and_extends_a_transaction() {
    let m = ongoing();
    assert_eq!(m.state, TxnState::Ongoing);
    assert_eq!(m.start_ms, 10);
    assert_eq!(
        m.add_partitions(7, 0, &[p("t", 0)], &limits(), 11),
        Ok(AddOutcome::Unchanged)
    );
    let more = written(m.add_partitions(7, 0, &[p("u", 3)], &limits(), 12).unwrap());
    assert_eq!(more.partitions.len(), 2);
    assert_eq!(more.start_ms, 10, "the start time stays");
}

#[test]
fn add_partitions_refusals() {
    let m = ongoing();
    assert_eq!(
        m.add_partitions(8, 0, &[p("t", 1)], &limits(), 11),
        Err(ErrorCode::InvalidProducerIdMapping)
    );
    assert_eq!(
        m.add_partitions(7, 1, &[p("t", 1)], &limits(), 11),
        Err(ErrorCode::ProducerFenced)
    );
    let l = TxnLimits {
        max_partitions: 1,
        ..limits()
    };
    assert_eq!(
        m.add_partitions(7, 0, &[p("t", 1)], &l, 11),
        Err(ErrorCode::PolicyViolation)
    );
    let prep = prepared(m.end(7, 0, true, false, 12).unwrap());
    assert_eq!(
        prep.add_partitions(7, 0, &[p("t", 1)], &limits(), 13),
        Err(ErrorCode::ConcurrentTransactions)
    );
    let mut dead = m.clone();
    dead.state = TxnState::Dead;
    assert_eq!(
        dead.add_partitions(7, 0, &[p("t", 1)], &limits(), 13),
        Err(ErrorCode::InvalidTxnState)
    );
}

#[test]
fn a_new_transaction_after_completion_forgets_the_old_partitions() {
    let m = ongoing();
    let done = prepared(m.end(7, 0, true, false, 11).unwrap())
        .complete(12)
        .unwrap();
    let again = written(
        done.add_partitions(7, 0, &[p("u", 0)], &limits(), 20)
            .unwrap(),
    );
    assert_eq!(again.partitions.len(), 1);
    assert_eq!(again.start_ms, 20);
}

#[test]
fn verify_only_checks_membership() {
    let m = ongoing();
    assert_eq!(m.verify_partition(7, 0, &p("t", 0)), Ok(true));
    assert_eq!(m.verify_partition(7, 0, &p("t", 1)), Ok(false));
    assert_eq!(
        m.verify_partition(7, 1, &p("t", 0)),
        Err(ErrorCode::ProducerFenced)
    );
    assert_eq!(
        m.verify_partition(6, 0, &p("t", 0)),
        Err(ErrorCode::InvalidProducerIdMapping)
    );
    let done = prepared(m.end(7, 0, false, false, 11).unwrap());
    assert_eq!(done.verify_partition(7, 0, &p("t", 0)), Ok(false));
}

#[test]
fn end_commit_and_abort() {
    let m = ongoing();
    let c = prepared(m.end(7, 0, true, false, 11).unwrap());
    assert_eq!(c.state, TxnState::PrepareCommit);
    assert_eq!(c.producer_epoch, 0, "v1 keeps the epoch");
    let a = prepared(m.end(7, 0, false, false, 11).unwrap());
    assert_eq!(a.state, TxnState::PrepareAbort);
    // While markers are written: the same end again is CONCURRENT_TRANSACTIONS,
    // the other end is INVALID_TXN_STATE.
    assert_eq!(
        c.end(7, 0, true, false, 12),
        Err(ErrorCode::ConcurrentTransactions)
    );
    assert_eq!(
        c.end(7, 0, false, false, 12),
        Err(ErrorCode::InvalidTxnState)
    );
    assert_eq!(
        a.end(7, 0, false, false, 12),
        Err(ErrorCode::ConcurrentTransactions)
    );
    assert_eq!(
        a.end(7, 0, true, false, 12),
        Err(ErrorCode::InvalidTxnState)
    );
    // After: the same end is a successful retry, the other one INVALID_TXN_STATE.
    let cc = c.complete(13).unwrap();
    assert_eq!(cc.state, TxnState::CompleteCommit);
    assert_eq!(cc.end(7, 0, true, false, 14), Ok(EndOutcome::Done(7, 0)));
    assert_eq!(
        cc.end(7, 0, false, false, 14),
        Err(ErrorCode::InvalidTxnState)
    );
    let ca = a.complete(13).unwrap();
    assert_eq!(ca.end(7, 0, false, false, 14), Ok(EndOutcome::Done(7, 0)));
    assert_eq!(
        ca.end(7, 0, true, false, 14),
        Err(ErrorCode::InvalidTxnState)
    );
    assert!(cc.complete(15).is_none(), "only Prepare* completes");
}

#[test]
fn end_refusals() {
    let m = ongoing();
    assert_eq!(
        m.end(8, 0, true, false, 11),
        Err(ErrorCode::InvalidProducerIdMapping)
    );
    assert_eq!(m.end(7, 1, true, false, 11), Err(ErrorCode::ProducerFenced));
    let empty = TxnMetadata::new(7, T, 0);
    assert_eq!(
        empty.end(7, 0, true, false, 1),
        Err(ErrorCode::InvalidTxnState)
    );
    assert_eq!(
        empty.end(7, 0, false, false, 1),
        Err(ErrorCode::InvalidTxnState)
    );
}

#[test]
fn end_v2_bumps_the_epoch_and_recognises_retries() {
    let m = ongoing();
    let c = prepared(m.end(7, 0, true, true, 11).unwrap());
    assert_eq!((c.producer_epoch, c.last_producer_epoch), (1, 0));
    assert_eq!(c.client_txn_version, 2);
    assert_eq!(
        c.end(7, 0, true, true, 12),
        Err(ErrorCode::ConcurrentTransactions)
    );
    let done = c.complete(13).unwrap();
    assert_eq!(done.end(7, 0, true, true, 14), Ok(EndOutcome::Done(7, 1)));
    assert_eq!(
        done.end(7, 0, false, true, 14),
        Err(ErrorCode::ProducerFenced)
    );
    // v2 may abort with no transaction open (it bumps the epoch).
    let a = prepared(done.end(7, 1, false, true, 15).unwrap());
    assert_eq!((a.state, a.producer_epoch), (TxnState::PrepareAbort, 2));
    assert!(a.partitions.is_empty());
    // A v1 client never gets a retry by the old epoch.
    let c1 = prepared(m.end(7, 0, true, false, 11).unwrap())
        .complete(12)
        .unwrap();
    assert_eq!(c1.end(7, 0, true, false, 13), Ok(EndOutcome::Done(7, 0)));
}

#[test]
fn timed_out_transactions_abort_with_a_bumped_epoch() {
    let m = ongoing();
    assert!(m.abort_timed_out(10 + i64::from(T)).is_none());
    let a = m.abort_timed_out(11 + i64::from(T)).unwrap();
    assert_eq!((a.state, a.producer_epoch), (TxnState::PrepareAbort, 1));
    assert_eq!(
        m.end(7, 0, true, false, 1),
        Ok(EndOutcome::Prepare({
            let mut c = m.clone();
            c.state = TxnState::PrepareCommit;
            c.last_update_ms = 1;
            c
        }))
    );
    assert_eq!(a.end(7, 0, true, false, 1), Err(ErrorCode::ProducerFenced));
    let mut tired = m.clone();
    tired.producer_epoch = MAX_EPOCH;
    let t = tired.abort_timed_out(i64::MAX).unwrap();
    assert_eq!(t.producer_epoch, MAX_EPOCH, "an exhausted epoch is kept");
    assert!(TxnMetadata::new(7, T, 0)
        .abort_timed_out(i64::MAX)
        .is_none());
}

#[test]
fn a_producer_aborted_by_a_timeout_recovers_by_naming_its_epoch() {
    let m = ongoing();
    let done = m.abort_timed_out(i64::MAX).unwrap().complete(1).unwrap();
    assert_eq!((done.producer_epoch, done.last_producer_epoch), (1, 0));
    // KIP-360: the fenced producer names (id, old epoch) and gets the current one.
    let r = ready(
        TxnMetadata::init_producer_id(Some(&done), T, (7, 0), &mut ids(9), &limits(), 2).unwrap(),
    );
    assert_eq!(
        (r.producer_id, r.producer_epoch, r.state),
        (7, 1, TxnState::Empty)
    );
    // Naming the current epoch bumps it.
    let b = ready(
        TxnMetadata::init_producer_id(Some(&r), T, (7, 1), &mut ids(9), &limits(), 3).unwrap(),
    );
    assert_eq!(b.producer_epoch, 2);
}
