//! Interoperability tests: the JavaScript Kafka clients' transactions.
//!
//! kafkajs 2.2.4 and @platformatic/kafka 2.12, pinned in `tests/interop/js/`
//! (`package.json`, `package-lock.json`; `npm ci` by `.ci/run`, or on first use by
//! `baton_testkit::tools::node`), through one script, `tests/interop/js/txn.mjs`.
//! Each library runs the transaction scenario of `interop_txn_util` (commits,
//! an abort, offsets sent to the transaction for a consumer group), then both
//! libraries read its output at read_committed (only the committed records, each
//! once) and the library itself at read_uncommitted (the aborted records too, so
//! the abort did write them).
//!
//! Apache Kafka (the shared single node of `apache_kafka_util`) is the referee:
//! the same scenario passes there, which proves the scripts and the checks.

use std::process::Command;

use crate::apache_kafka_util::single_node;
use crate::interop_txn_util::{
    check_read, check_transact, records, run_client, Scenario, BATCH, BATCHES, INPUT_RECORDS,
    OUTPUT_PARTITIONS,
};
use baton_testkit::tools::node::{module_dir, node};

/// The JavaScript libraries of `txn.mjs`.
const LIBS: [&str; 2] = ["kafkajs", "platformatic"];

/// `node txn.mjs LIB COMMAND BOOTSTRAP ARGS...`.
fn txn_mjs(lib: &str, command: &str, bootstrap: &str, args: &[String]) -> Command {
    let mut cmd = Command::new(node());
    cmd.arg(module_dir().join("txn.mjs"))
        .args([lib, command, bootstrap])
        .args(args)
        .current_dir(module_dir());
    cmd
}

/// `lib` runs the scenario on `bootstrap`; every library reads it back.
fn transactions_commit_and_abort(lib: &str, bootstrap: Vec<String>) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    let scenario = runtime.block_on(Scenario::create(bootstrap.clone(), &format!("js-{lib}")));
    let bootstrap = bootstrap.join(",");

    let what = format!("{lib} transact");
    let out = run_client(
        &mut txn_mjs(
            lib,
            "transact",
            &bootstrap,
            &[
                scenario.input.clone(),
                scenario.output.clone(),
                scenario.group.clone(),
                scenario.txn_id.clone(),
                OUTPUT_PARTITIONS.to_string(),
                BATCH.to_string(),
                BATCHES.to_string(),
            ],
        ),
        &what,
    );
    check_transact(&out, &what);

    let committed = Scenario::committed();
    for reader in LIBS {
        let what = format!("{reader} read_committed of {lib}'s transactions");
        let group = format!("{}-{reader}-committed", scenario.output);
        let out = run_client(
            &mut txn_mjs(
                reader,
                "read",
                &bootstrap,
                &[
                    scenario.output.clone(),
                    group,
                    INPUT_RECORDS.to_string(),
                    "committed".into(),
                ],
            ),
            &what,
        );
        let seen = records(&out);
        check_read(&seen, &committed, &what).unwrap_or_else(|e| panic!("{e}"));
        println!("{what}: {} records, none aborted", seen.len());
    }

    let mut everything = committed;
    everything.extend(Scenario::aborted());
    let what = format!("{lib} read_uncommitted of its transactions");
    let out = run_client(
        &mut txn_mjs(
            lib,
            "read",
            &bootstrap,
            &[
                scenario.output.clone(),
                format!("{}-{lib}-uncommitted", scenario.output),
                everything.len().to_string(),
                "uncommitted".into(),
            ],
        ),
        &what,
    );
    check_read(&records(&out), &everything, &what).unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn kafkajs_transactions_commit_and_abort_on_apache_kafka() {
    let kafka = single_node();
    let _logs = kafka.logs_on_failure();
    transactions_commit_and_abort("kafkajs", kafka.bootstrap());
}

#[test]
fn platformatic_transactions_commit_and_abort_on_apache_kafka() {
    let kafka = single_node();
    let _logs = kafka.logs_on_failure();
    transactions_commit_and_abort("platformatic", kafka.bootstrap());
}
