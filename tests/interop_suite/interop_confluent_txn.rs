//! Interoperability tests: confluent-kafka's (librdkafka's) transactional
//! producer and read_committed consumer, through `tests/interop/confluent_txn.py`
//! (init_transactions, begin_transaction, produce, send_offsets_to_transaction with
//! the consumer's group metadata, commit_transaction and abort_transaction), in
//! the transaction scenario of `interop_txn_util`, against baton-broker and against
//! Apache Kafka (the shared single node of `apache_kafka_util`), the referee that
//! proves the script and the checks.

use crate::apache_kafka_util::single_node;
use crate::interop_txn_util::{transactions_commit_and_abort, BatonBroker, TxnClient};

#[test]
fn confluent_transactions_commit_and_abort_on_apache_kafka() {
    let kafka = single_node();
    let _logs = kafka.logs_on_failure();
    transactions_commit_and_abort(
        TxnClient::Confluent,
        &[TxnClient::Confluent, TxnClient::Kafkajs],
        kafka.bootstrap(),
    );
}

#[test]
fn confluent_transactions_commit_and_abort_on_baton_broker() {
    let broker = BatonBroker::start();
    transactions_commit_and_abort(
        TxnClient::Confluent,
        &[TxnClient::Confluent, TxnClient::Kafkajs],
        broker.bootstrap(),
    );
}
