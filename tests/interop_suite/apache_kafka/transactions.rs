//! Baton's transactional producer and read_committed consumers against Apache
//! Kafka: the scenarios of `baton_testkit::transactions` on the shared single
//! node (commit and abort as read_committed and read_uncommitted consumers see
//! them, offsets committed in a transaction, zombie fencing, the outcome of a
//! dropped commit future, a transaction past its timeout, the exactly-once
//! pipeline killed and restarted).

use baton_testkit::transactions as scenario;

use super::{client, create_topic};
use crate::apache_kafka_util::single_node;

/// Committed transactions are read at read_committed; aborted ones only at
/// read_uncommitted; unsent records of an aborted transaction come back with
/// `TransactionAborted`; records outside a transaction are refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn committed_records_are_read_and_aborted_ones_only_uncommitted() {
    let kafka = single_node();
    let _logs = kafka.logs_on_failure();
    let client = client().await;
    let topic = create_topic(&client, "ak-txn", 2).await;
    scenario::committed_records_are_read_and_aborted_ones_only_uncommitted(&client, &topic).await;
}

/// Offsets sent with the transaction become the group's only when it commits: a
/// consumer of the group resumes after the committed transaction's offsets, not
/// after an aborted one's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn offsets_sent_to_a_transaction_commit_with_it() {
    let kafka = single_node();
    let _logs = kafka.logs_on_failure();
    let client = client().await;
    let input = create_topic(&client, "ak-txn-in", 1).await;
    let output = create_topic(&client, "ak-txn-out", 1).await;
    scenario::offsets_sent_to_a_transaction_commit_with_it(&client, &input, &output).await;
}

/// A second producer with the same transactional id fences the first: the
/// first's open transaction is aborted, and its next transactional call fails
/// with the fatal `ProducerFenced`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_newer_producer_fences_the_zombie_and_aborts_its_transaction() {
    let kafka = single_node();
    let _logs = kafka.logs_on_failure();
    let client = client().await;
    let topic = create_topic(&client, "ak-txn-zombie", 1).await;
    scenario::a_newer_producer_fences_the_zombie_and_aborts_its_transaction(&client, &topic).await;
}

/// A commit future dropped at various points (timeouts from zero up, and a
/// `select!` against a sleep) has a defined outcome: either the commit was
/// handed to the producer's task and completes (then a following abort finds no
/// transaction), or the transaction is still open and the abort ends it. The
/// reported outcome matches what a read_committed consumer sees.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropped_commit_future_has_the_outcome_a_read_committed_consumer_sees() {
    let kafka = single_node();
    let _logs = kafka.logs_on_failure();
    let client = client().await;
    let topic = create_topic(&client, "ak-txn-drop", 2).await;
    scenario::dropped_commit_future_has_the_outcome_a_read_committed_consumer_sees(&client, &topic)
        .await;
}

/// The exactly-once pipeline: a Baton consume-transform-produce loop, killed
/// mid-run (its task aborted, wherever it was) and restarted with the same
/// transactional id and static group member; its output, read at
/// read_committed, holds every input record exactly once, in input order per
/// partition.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exactly_once_pipeline_survives_a_kill_and_restart() {
    let kafka = single_node();
    let _logs = kafka.logs_on_failure();
    let client = client().await;
    let input = create_topic(&client, "ak-eos-in", 3).await;
    let output = create_topic(&client, "ak-eos-out", 3).await;
    scenario::exactly_once_pipeline_survives_a_kill_and_restart(&client, &input, &output).await;
}

/// A transaction left open past the transaction timeout is aborted by the
/// coordinator (which checks every 10 s by default): its commit fails with the
/// abortable `AbortedOnTimeout`, the abort that follows gets the producer a new
/// epoch, and the next transaction commits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transaction_past_its_timeout_is_aborted_and_the_producer_goes_on() {
    let kafka = single_node();
    let _logs = kafka.logs_on_failure();
    let client = client().await;
    let topic = create_topic(&client, "ak-txn-timeout", 1).await;
    scenario::a_transaction_past_its_timeout_is_aborted_and_the_producer_goes_on(&client, &topic)
        .await;
}
