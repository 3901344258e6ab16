//! The transaction scenario every third-party client runs (`interop_js.rs`,
//! `interop_confluent_txn.rs`), its checks, and the clients that run it
//! ([`TxnClient`]).
//!
//! The test writes the input: [`INPUT_RECORDS`] records `in-<i>` on partition 0 of
//! a one-partition input topic. The client's `transact` command is a
//! consume-transform-produce loop over it in batches of [`BATCH`]: a consumer in a
//! group reads the input, and a transactional producer writes `out-<i>-a<attempt>`
//! (key `k-<i>`) to partition `i % OUTPUT_PARTITIONS` of the output topic, with the
//! group's next input offset sent to the transaction. Batch 0 commits; batch 1 is
//! aborted once (attempt 0), the group's committed offset is read back (still
//! batch 0's end: the aborted offsets are dropped), then batch 1 is redone and
//! commits (attempt 1); batch 2 commits. Every batch writes to every output
//! partition, so a reader that has every record of the last batch has read past the
//! aborted ones.
//!
//! Each client prints one flat JSON object per line: `{"event": "commit" |
//! "abort" | "committed-offset" | "record" | "read" | ...}`; lines that are not
//! JSON objects (client logs) are skipped.

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;
use std::time::Duration;

use baton_broker::{Broker, BrokerConfig, BrokerHandle};
use baton_kafka::{Admin, Client, NewTopic, Producer, ProducerRecord};
use baton_testkit::tools::node::{module_dir, node};
use baton_testkit::tools::process::{run, Finished};
use baton_testkit::tools::{python, scripts_dir};
use bytes::Bytes;

use crate::interop_go_util::GoResult as JsonLine;

/// Records per transaction.
pub const BATCH: usize = 10;
/// Batches of input (batch 1 is aborted once, then redone).
pub const BATCHES: usize = 3;
/// Records of the input topic.
pub const INPUT_RECORDS: usize = BATCH * BATCHES;
/// Partitions of the output topic.
pub const OUTPUT_PARTITIONS: i32 = 3;
/// Longest one client command may run (the scripts give up on their own sooner).
pub const RUN_TIMEOUT: Duration = Duration::from_secs(150);

/// A baton-broker on 127.0.0.1 port 0, in memory, served by a runtime of its own
/// while the clients run as child processes; shut down on drop.
pub struct BatonBroker {
    runtime: tokio::runtime::Runtime,
    broker: Option<BrokerHandle>,
}

impl BatonBroker {
    /// Starts the broker.
    pub fn start() -> BatonBroker {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("tokio runtime");
        let broker = runtime
            .block_on(Broker::start(BrokerConfig::in_memory()))
            .expect("broker starts");
        BatonBroker {
            runtime,
            broker: Some(broker),
        }
    }

    /// Its bootstrap address.
    pub fn bootstrap(&self) -> Vec<String> {
        vec![self.broker.as_ref().expect("running").bootstrap()]
    }
}

impl Drop for BatonBroker {
    fn drop(&mut self) {
        if let Some(broker) = self.broker.take() {
            self.runtime.block_on(broker.shutdown());
        }
    }
}

/// A third-party client with the scenario's two commands, `transact` and `read`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TxnClient {
    /// kafkajs 2.2.4 (`tests/interop/js/txn.mjs kafkajs`).
    Kafkajs,
    /// @platformatic/kafka 2.12 (`tests/interop/js/txn.mjs platformatic`).
    Platformatic,
    /// confluent-kafka, librdkafka inside (`tests/interop/confluent_txn.py`).
    Confluent,
}

impl TxnClient {
    /// The client's name in messages.
    pub fn name(self) -> &'static str {
        match self {
            TxnClient::Kafkajs => "kafkajs",
            TxnClient::Platformatic => "platformatic",
            TxnClient::Confluent => "confluent-kafka",
        }
    }

    /// The client's `command` (`transact` or `read`) on `bootstrap` with `args`.
    pub fn command(self, command: &str, bootstrap: &str, args: &[String]) -> Command {
        let mut cmd = match self {
            TxnClient::Kafkajs | TxnClient::Platformatic => {
                let mut cmd = Command::new(node());
                cmd.arg(module_dir().join("txn.mjs"))
                    .arg(self.name())
                    .current_dir(module_dir());
                cmd
            }
            TxnClient::Confluent => {
                let mut cmd = Command::new(python());
                cmd.arg(scripts_dir().join("confluent_txn.py"))
                    .current_dir(scripts_dir());
                cmd
            }
        };
        cmd.args([command, bootstrap]).args(args);
        cmd
    }
}

/// `writer` runs the scenario on `bootstrap`; each of `readers` reads the output
/// at read_committed (exactly the committed records), and `writer` reads it at
/// read_uncommitted (the aborted records too, so the abort did write them).
pub fn transactions_commit_and_abort(
    writer: TxnClient,
    readers: &[TxnClient],
    bootstrap: Vec<String>,
) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    let tag = format!("txn-{}", writer.name());
    let scenario = runtime.block_on(Scenario::create(bootstrap.clone(), &tag));
    let bootstrap = bootstrap.join(",");

    let what = format!("{} transact", writer.name());
    let args = [
        scenario.input.clone(),
        scenario.output.clone(),
        scenario.group.clone(),
        scenario.txn_id.clone(),
        OUTPUT_PARTITIONS.to_string(),
        BATCH.to_string(),
        BATCHES.to_string(),
    ];
    let out = run_client(&mut writer.command("transact", &bootstrap, &args), &what);
    check_transact(&out, &what);

    let read = |reader: TxnClient, expected: &BTreeSet<String>, isolation: &str| {
        let what = format!(
            "{} read_{isolation} of {}'s transactions",
            reader.name(),
            writer.name()
        );
        let args = [
            scenario.output.clone(),
            format!("{}-{}-{isolation}", scenario.output, reader.name()),
            expected.len().to_string(),
            isolation.to_string(),
        ];
        let out = run_client(&mut reader.command("read", &bootstrap, &args), &what);
        let seen = records(&out);
        check_read(&seen, expected, &what).unwrap_or_else(|e| panic!("{e}"));
        println!("{what}: {} records as expected", seen.len());
    };
    let committed = Scenario::committed();
    for &reader in readers {
        read(reader, &committed, "committed");
    }
    let mut everything = committed;
    everything.extend(Scenario::aborted());
    read(writer, &everything, "uncommitted");
}

/// Records Kafka's TransactionalMessageCopier copies.
const COPIER_RECORDS: usize = 1_000;

/// Apache Kafka's own exactly-once tool, `TransactionalMessageCopier` (the
/// kafka-tools jar), copies [`COPIER_RECORDS`] input records to the output topic in
/// transactions of 50 with its consumer's offsets (`--use-group-metadata`),
/// aborting some transactions at random and rewinding to the committed offset; then
/// confluent-kafka reads the output at read_committed: every input value exactly
/// once.
pub fn copier_copies_exactly_once(bootstrap: Vec<String>) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    let scenario = runtime.block_on(Scenario::create_sized(
        bootstrap.clone(),
        "copier",
        COPIER_RECORDS,
    ));
    let bootstrap = bootstrap.join(",");
    let mut copier =
        crate::interop_java_util::java("org.apache.kafka.tools.TransactionalMessageCopier");
    copier.args([
        "--broker-list",
        &bootstrap,
        "--input-topic",
        &scenario.input,
        "--input-partition",
        "0",
        "--output-topic",
        &scenario.output,
        "--transactional-id",
        &scenario.txn_id,
        "--consumer-group",
        &scenario.group,
        "--transaction-size",
        "50",
        "--enable-random-aborts",
        "--use-group-metadata",
    ]);
    let out = run_client(&mut copier, "TransactionalMessageCopier");
    println!(
        "TransactionalMessageCopier: {}",
        out.stdout.lines().last().unwrap_or_default()
    );
    let expected: BTreeSet<String> = (0..COPIER_RECORDS).map(|i| format!("in-{i}")).collect();
    let what = "confluent-kafka read_committed of TransactionalMessageCopier's output";
    let args = [
        scenario.output.clone(),
        format!("{}-reader", scenario.output),
        COPIER_RECORDS.to_string(),
        "committed".to_string(),
    ];
    let out = run_client(
        &mut TxnClient::Confluent.command("read", &bootstrap, &args),
        what,
    );
    check_values(&records(&out), &expected, what).unwrap_or_else(|e| panic!("{e}"));
}

/// The topics and group of one run of the scenario.
#[derive(Debug, Clone)]
pub struct Scenario {
    /// One partition of `in-<i>` records.
    pub input: String,
    /// [`OUTPUT_PARTITIONS`] partitions, written in transactions.
    pub output: String,
    /// The consume-transform-produce loop's group.
    pub group: String,
    /// The transactional id.
    pub txn_id: String,
}

impl Scenario {
    /// Creates the topics on `bootstrap` and writes the input, named after `tag`.
    pub async fn create(bootstrap: Vec<String>, tag: &str) -> Scenario {
        Scenario::create_sized(bootstrap, tag, INPUT_RECORDS).await
    }

    /// [`Scenario::create`] with `input_records` input records.
    pub async fn create_sized(bootstrap: Vec<String>, tag: &str, input_records: usize) -> Scenario {
        let client = Client::builder(bootstrap)
            .client_id("interop-txn-setup")
            .build()
            .await
            .expect("client connects");
        let input = baton_testkit::topic_name(&format!("{tag}-in"));
        let output = baton_testkit::topic_name(&format!("{tag}-out"));
        Admin::new(&client)
            .create_topics([
                NewTopic::new(input.clone(), 1, 1),
                NewTopic::new(output.clone(), OUTPUT_PARTITIONS, 1),
            ])
            .await
            .expect("topics created");
        let producer = Producer::builder(&client).build();
        let mut deliveries = Vec::with_capacity(input_records);
        for i in 0..input_records {
            let record = ProducerRecord::new(input.clone())
                .partition(0)
                .value(Bytes::from(format!("in-{i}")));
            deliveries.push(producer.send(record).await.expect("input accepted"));
        }
        producer.flush().await;
        for d in deliveries {
            d.await.expect("input delivered");
        }
        let group = format!("{input}-group");
        let txn_id = format!("{output}-txn");
        Scenario {
            input,
            output,
            group,
            txn_id,
        }
    }

    /// The values a read_committed reader must see, each once.
    pub fn committed() -> BTreeSet<String> {
        (0..INPUT_RECORDS)
            .map(|i| {
                let attempt = if i / BATCH == 1 { 1 } else { 0 };
                format!("out-{i}-a{attempt}")
            })
            .collect()
    }

    /// The values of the aborted attempt.
    pub fn aborted() -> BTreeSet<String> {
        (BATCH..2 * BATCH).map(|i| format!("out-{i}-a0")).collect()
    }
}

/// The JSON object lines of `stdout`.
pub fn json_lines(stdout: &str) -> Vec<JsonLine> {
    stdout
        .lines()
        .map(str::trim)
        .filter(|l| l.starts_with('{') && l.ends_with('}'))
        .map(|l| JsonLine {
            json: l.to_string(),
        })
        .collect()
}

/// The text of a string field (no escapes in the scenario's strings).
pub fn string(line: &JsonLine, key: &str) -> Option<String> {
    let raw = line.raw(key)?;
    raw.strip_prefix('"')?.strip_suffix('"').map(str::to_owned)
}

/// Runs `cmd` to completion within [`RUN_TIMEOUT`]; panics with its output unless
/// it exits 0.
pub fn run_client(cmd: &mut std::process::Command, what: &str) -> Finished {
    let out = run(cmd, what, RUN_TIMEOUT).unwrap_or_else(|e| panic!("{what}: {e}"));
    if !out.status.success() {
        panic!("{}", out.describe(what));
    }
    out
}

/// Checks a `transact` run's events: two commits, the abort of batch 1, the
/// committed offset still at batch 0's end after it, the redo, the last batch, and
/// the final committed offset at the end of the input.
pub fn check_transact(out: &Finished, what: &str) {
    let lines = json_lines(&out.stdout);
    let event = |l: &JsonLine| string(l, "event").unwrap_or_default();
    let steps: Vec<(String, i64, i64)> = lines
        .iter()
        .filter(|l| matches!(event(l).as_str(), "commit" | "abort"))
        .map(|l| {
            (
                event(l),
                l.int("batch").unwrap_or(-1),
                l.int("attempt").unwrap_or(-1),
            )
        })
        .collect();
    let expected: Vec<(String, i64, i64)> = vec![
        ("commit".into(), 0, 0),
        ("abort".into(), 1, 0),
        ("commit".into(), 1, 1),
        ("commit".into(), 2, 0),
    ];
    assert_eq!(steps, expected, "{}", out.describe(what));
    let offsets: BTreeMap<String, i64> = lines
        .iter()
        .filter(|l| event(l) == "committed-offset")
        .map(|l| {
            (
                string(l, "after").unwrap_or_default(),
                l.int("offset").unwrap_or(-1),
            )
        })
        .collect();
    assert_eq!(
        offsets.get("abort"),
        Some(&(BATCH as i64)),
        "the aborted transaction's offsets are dropped; {}",
        out.describe(what)
    );
    assert_eq!(
        offsets.get("end"),
        Some(&(INPUT_RECORDS as i64)),
        "the committed transactions' offsets are the group's; {}",
        out.describe(what)
    );
}

/// What a reader printed: `(partition, offset, key, value)` per record.
pub fn records(out: &Finished) -> Vec<(i32, i64, String, String)> {
    json_lines(&out.stdout)
        .iter()
        .filter(|l| string(l, "event").as_deref() == Some("record"))
        .map(|l| {
            (
                l.int("partition").unwrap_or(-1) as i32,
                l.int("offset").unwrap_or(-1),
                string(l, "key").unwrap_or_default(),
                string(l, "value").unwrap_or_default(),
            )
        })
        .collect()
}

/// Checks what a reader saw: every value of `expected` exactly once, nothing else,
/// each on its partition (`i % OUTPUT_PARTITIONS` with key `k-<i>`), offsets rising
/// within each partition.
pub fn check_read(
    seen: &[(i32, i64, String, String)],
    expected: &BTreeSet<String>,
    what: &str,
) -> Result<(), String> {
    for (partition, _, key, value) in seen {
        let i: i32 = key
            .strip_prefix("k-")
            .and_then(|i| i.parse().ok())
            .ok_or_else(|| format!("{what}: key {key:?}"))?;
        if !value.starts_with(&format!("out-{i}-")) || *partition != i % OUTPUT_PARTITIONS {
            return Err(format!("{what}: {key}={value} on partition {partition}"));
        }
    }
    check_values(seen, expected, what)
}

/// Checks that a reader saw every value of `expected` exactly once and nothing
/// else, with offsets rising within each partition.
pub fn check_values(
    seen: &[(i32, i64, String, String)],
    expected: &BTreeSet<String>,
    what: &str,
) -> Result<(), String> {
    let mut values = BTreeMap::<&str, usize>::new();
    let mut last = BTreeMap::<i32, i64>::new();
    for (partition, offset, _, value) in seen {
        *values.entry(value).or_default() += 1;
        if let Some(prev) = last.insert(*partition, *offset) {
            if prev >= *offset {
                return Err(format!(
                    "{what}: partition {partition}: offset {offset} after {prev}"
                ));
            }
        }
    }
    let duplicated: Vec<_> = values.iter().filter(|(_, &n)| n > 1).collect();
    let unexpected: Vec<_> = values.keys().filter(|v| !expected.contains(**v)).collect();
    let missing: Vec<_> = expected
        .iter()
        .filter(|v| !values.contains_key(v.as_str()))
        .collect();
    if duplicated.is_empty() && unexpected.is_empty() && missing.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "{what}: {} records; duplicated {duplicated:?}, unexpected {unexpected:?}, \
             missing {missing:?}",
            seen.len()
        ))
    }
}
