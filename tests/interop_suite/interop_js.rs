//! Interoperability tests: the JavaScript Kafka clients' transactions.
//!
//! kafkajs 2.2.4 and @platformatic/kafka 2.12, pinned in `tests/interop/js/`
//! (`package.json`, `package-lock.json`; `npm ci` by `.ci/run`, or on first use by
//! `baton_testkit::tools::node`), through one script, `tests/interop/js/txn.mjs`.
//! Each library runs the transaction scenario of `interop_txn_util` (commits, an
//! abort, offsets sent to the transaction for a consumer group), then both
//! libraries read its output at read_committed (only the committed records, each
//! once) and the library itself at read_uncommitted (the aborted records too, so
//! the abort did write them).
//!
//! Each runs against baton-broker (one in-memory node on 127.0.0.1 port 0) and
//! against Apache Kafka (the shared single node of `apache_kafka_util`), the
//! referee: the same scenario passes there, which proves the script and the checks.

use crate::apache_kafka_util::single_node;
use crate::interop_txn_util::{transactions_commit_and_abort, BatonBroker, TxnClient};

/// Both JavaScript libraries, as readers.
const JS: [TxnClient; 2] = [TxnClient::Kafkajs, TxnClient::Platformatic];

#[test]
fn kafkajs_transactions_commit_and_abort_on_apache_kafka() {
    let kafka = single_node();
    let _logs = kafka.logs_on_failure();
    transactions_commit_and_abort(TxnClient::Kafkajs, &JS, kafka.bootstrap());
}

#[test]
fn platformatic_transactions_commit_and_abort_on_apache_kafka() {
    let kafka = single_node();
    let _logs = kafka.logs_on_failure();
    transactions_commit_and_abort(TxnClient::Platformatic, &JS, kafka.bootstrap());
}

#[test]
fn kafkajs_transactions_commit_and_abort_on_baton_broker() {
    let broker = BatonBroker::start();
    transactions_commit_and_abort(TxnClient::Kafkajs, &JS, broker.bootstrap());
}

#[test]
fn platformatic_transactions_commit_and_abort_on_baton_broker() {
    let broker = BatonBroker::start();
    transactions_commit_and_abort(TxnClient::Platformatic, &JS, broker.bootstrap());
}
