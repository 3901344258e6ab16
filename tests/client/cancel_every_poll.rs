//! Every public async method of the SDK, dropped after each of its polls in
//! turn: for k = 1, 2, 3, … the call is started afresh against the in-process
//! broker (real sockets on 127.0.0.1), polled k times with a real waker
//! (waiting for each wake-up, so the broker and the client's tasks progress)
//! and dropped if still pending, until a k where it completes
//! ([`poll_drop`](super::poll_drop)). After every drop the test checks the
//! outcome the method's "Cancel safety" section promises: the record is handed
//! back or still tracked to a final outcome, read back exactly once; a commit
//! left the old or the new offset; an admin operation happened or did not and a
//! retry gives the expected answer; a recv lost and duplicated nothing; and the
//! client (the same connection, the same consumer) stays usable.
//!
//! [`every_public_async_method_has_a_cancellation_case`] scans `client/src` and
//! fails when a public async method (or a public future or stream) has no case
//! here, so the coverage stays exhaustive.

use std::collections::BTreeSet;
use std::fmt::Debug;
use std::future::Future;
use std::path::Path;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use baton_broker::{AuthorizerConfig, Broker, BrokerConfig, BrokerHandle};
use baton_kafka::connection::{Connection, ConnectionConfig};
use baton_kafka::{
    AccessControlEntry, AclBinding, AclBindingFilter, AclOperation, AclPermissionType, Admin,
    AdminError, AlterConfigOp, CancelOutcome, CancellationToken, Client, ConfigResource, Consumer,
    ConsumerGroupMetadata, DeliveryFuture, DescribeConfigsOptions, ElectionType, GroupConsumer,
    GroupOffsetReset, GroupOffsetsQuery, IsolationLevel, ListGroupsFilter, NewPartitions, NewTopic,
    OffsetAndMetadata, OffsetSpec, PatternType, ProduceError, Producer, ProducerRecord,
    Reassignment, RebalanceContext, RebalanceListener, RecordsToDelete, ResourcePattern,
    ResourceType, SaslMechanism, ScramChange, StartOffset, TopicPartition, TransactionError,
    TransactionOutcome,
};
use baton_protocol::messages::{ApiVersionsRequest, MetadataRequest, ProduceRequest};
use baton_protocol::ErrorCode;
use baton_testkit::client::{broker_and_client, consume_from_start, create_topic, produce_values};
use baton_testkit::proxy::{Proxied, ProxyState};
use baton_testkit::topic_name;
use bytes::{Bytes, BytesMut};
use futures_core::Stream;
use tokio::time::Instant;

use super::poll_drop::{poll_at_most, polls};

/// Which test covers each public async method, public future and public stream
/// of `client/src` (`file::item`, the file relative to `client/src`).
const COVERED: &[(&str, &str)] = &[
    (
        "producer/mod.rs::send",
        "producer_send_never_accepts_a_dropped_record",
    ),
    (
        "producer/mod.rs::send_with_cancel",
        "producer_send_never_accepts_a_dropped_record",
    ),
    (
        "producer/mod.rs::SendFuture",
        "producer_send_never_accepts_a_dropped_record",
    ),
    (
        "producer/delivery.rs::DeliveryFuture",
        "dropped_delivery_waits_still_deliver_exactly_once",
    ),
    (
        "producer/delivery.rs::until_cancelled",
        "dropped_delivery_waits_still_deliver_exactly_once",
    ),
    (
        "producer/delivery.rs::InFlight",
        "a_dropped_in_flight_wait_still_delivers_exactly_once",
    ),
    (
        "producer/mod.rs::flush",
        "dropped_flush_and_close_still_deliver_everything",
    ),
    (
        "producer/mod.rs::flush_timeout",
        "dropped_flush_and_close_still_deliver_everything",
    ),
    (
        "producer/mod.rs::close",
        "dropped_flush_and_close_still_deliver_everything",
    ),
    (
        "producer/mod.rs::close_timeout",
        "dropped_flush_and_close_still_deliver_everything",
    ),
    (
        "producer/transaction.rs::init_transactions",
        "transactional_calls_dropped_after_each_poll",
    ),
    (
        "producer/transaction.rs::begin_transaction",
        "transactional_calls_dropped_after_each_poll",
    ),
    (
        "producer/transaction.rs::send_offsets_to_transaction",
        "transactional_calls_dropped_after_each_poll",
    ),
    (
        "producer/transaction.rs::commit_transaction",
        "transactional_calls_dropped_after_each_poll",
    ),
    (
        "producer/transaction.rs::abort_transaction",
        "transactional_calls_dropped_after_each_poll",
    ),
    (
        "producer/transaction.rs::transaction_outcome",
        "transactional_calls_dropped_after_each_poll",
    ),
    (
        "consumer/mod.rs::build",
        "consumer_calls_dropped_after_each_poll",
    ),
    (
        "consumer/mod.rs::recv",
        "consumer_calls_dropped_after_each_poll",
    ),
    (
        "consumer/mod.rs::Consumer",
        "consumer_calls_dropped_after_each_poll",
    ),
    (
        "consumer/mod.rs::add_partitions",
        "consumer_calls_dropped_after_each_poll",
    ),
    (
        "consumer/mod.rs::assign",
        "consumer_calls_dropped_after_each_poll",
    ),
    (
        "group/builder.rs::build",
        "group_consumer_calls_dropped_after_each_poll",
    ),
    (
        "group/mod.rs::recv",
        "group_consumer_calls_dropped_after_each_poll",
    ),
    (
        "group/mod.rs::commit",
        "group_consumer_calls_dropped_after_each_poll",
    ),
    (
        "group/mod.rs::commit_offsets",
        "group_consumer_calls_dropped_after_each_poll",
    ),
    (
        "group/mod.rs::PendingCommit",
        "group_consumer_calls_dropped_after_each_poll",
    ),
    (
        "group/mod.rs::GroupStream",
        "group_consumer_calls_dropped_after_each_poll",
    ),
    ("group/mod.rs::close", "group_close_dropped_after_each_poll"),
    (
        "group/listener.rs::commit",
        "listener_commits_dropped_after_each_poll",
    ),
    (
        "group/listener.rs::commit_offsets",
        "listener_commits_dropped_after_each_poll",
    ),
    (
        "client.rs::build",
        "client_and_connection_calls_dropped_after_each_poll",
    ),
    (
        "client.rs::refresh_metadata",
        "client_and_connection_calls_dropped_after_each_poll",
    ),
    (
        "client.rs::broker_connection",
        "client_and_connection_calls_dropped_after_each_poll",
    ),
    (
        "connection.rs::connect",
        "client_and_connection_calls_dropped_after_each_poll",
    ),
    (
        "connection.rs::from_stream",
        "client_and_connection_calls_dropped_after_each_poll",
    ),
    (
        "connection.rs::send",
        "client_and_connection_calls_dropped_after_each_poll",
    ),
    (
        "connection.rs::send_with_timeout",
        "client_and_connection_calls_dropped_after_each_poll",
    ),
    (
        "connection.rs::send_no_response",
        "client_and_connection_calls_dropped_after_each_poll",
    ),
    (
        "admin.rs::describe_cluster",
        "admin_reads_dropped_after_each_poll",
    ),
    (
        "admin.rs::list_offsets",
        "admin_reads_dropped_after_each_poll",
    ),
    (
        "admin.rs::describe_acls",
        "admin_reads_dropped_after_each_poll",
    ),
    (
        "admin/cluster.rs::describe_cluster_info",
        "admin_reads_dropped_after_each_poll",
    ),
    (
        "admin/log_dirs.rs::describe_log_dirs",
        "admin_reads_dropped_after_each_poll",
    ),
    (
        "admin/list_groups.rs::list_groups",
        "admin_reads_dropped_after_each_poll",
    ),
    (
        "admin/group_lag.rs::consumer_group_lag",
        "admin_reads_dropped_after_each_poll",
    ),
    (
        "admin/describe_groups.rs::describe_groups",
        "admin_reads_dropped_after_each_poll",
    ),
    (
        "admin/scram.rs::describe_user_scram_credentials",
        "admin_reads_dropped_after_each_poll",
    ),
    (
        "admin/list_reassignments.rs::list_partition_reassignments",
        "admin_reads_dropped_after_each_poll",
    ),
    (
        "admin/list_group_offsets.rs::list_consumer_group_offsets",
        "admin_reads_dropped_after_each_poll",
    ),
    (
        "admin/list_group_offsets.rs::group_offsets",
        "admin_reads_dropped_after_each_poll",
    ),
    (
        "admin/configs.rs::describe_configs",
        "admin_reads_dropped_after_each_poll",
    ),
    (
        "admin/reset_group_offsets.rs::plan_consumer_group_offsets_reset",
        "admin_reads_dropped_after_each_poll",
    ),
    (
        "admin.rs::create_topics",
        "admin_topic_changes_dropped_after_each_poll",
    ),
    (
        "admin.rs::create_topic",
        "admin_topic_changes_dropped_after_each_poll",
    ),
    (
        "admin.rs::delete_topics",
        "admin_topic_changes_dropped_after_each_poll",
    ),
    (
        "admin/create_partitions.rs::create_partitions",
        "admin_topic_changes_dropped_after_each_poll",
    ),
    (
        "admin/delete_records.rs::delete_records",
        "admin_topic_changes_dropped_after_each_poll",
    ),
    (
        "admin/configs.rs::incremental_alter_configs",
        "admin_topic_changes_dropped_after_each_poll",
    ),
    (
        "admin/alter_reassignments.rs::alter_partition_reassignments",
        "admin_topic_changes_dropped_after_each_poll",
    ),
    (
        "admin/elect_leaders.rs::elect_leaders",
        "admin_topic_changes_dropped_after_each_poll",
    ),
    (
        "admin/alter_group_offsets.rs::alter_consumer_group_offsets",
        "admin_group_changes_dropped_after_each_poll",
    ),
    (
        "admin/delete_group_offsets.rs::delete_consumer_group_offsets",
        "admin_group_changes_dropped_after_each_poll",
    ),
    (
        "admin/delete_groups.rs::delete_groups",
        "admin_group_changes_dropped_after_each_poll",
    ),
    (
        "admin/reset_group_offsets.rs::reset_consumer_group_offsets",
        "admin_group_changes_dropped_after_each_poll",
    ),
    (
        "admin.rs::create_acls",
        "admin_security_changes_dropped_after_each_poll",
    ),
    (
        "admin.rs::delete_acls",
        "admin_security_changes_dropped_after_each_poll",
    ),
    (
        "admin/scram.rs::alter_user_scram_credentials",
        "admin_security_changes_dropped_after_each_poll",
    ),
];

/// The public async methods (`pub async fn`, a `pub fn` returning `impl
/// Future`), public futures (`impl Future for`) and public streams (`impl
/// Stream for`) of the `.rs` files under `dir`, as `file::item`.
fn public_async_items(root: &Path, dir: &Path, out: &mut BTreeSet<String>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            public_async_items(root, &path, out);
            continue;
        }
        if path.extension().is_none_or(|e| e != "rs") {
            continue;
        }
        let file = path
            .strip_prefix(root)
            .unwrap()
            .to_string_lossy()
            .replace('\\', "/");
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<&str> = text.lines().map(str::trim_start).collect();
        for (i, line) in lines.iter().enumerate() {
            let ident = |rest: &str| -> String {
                rest.chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect()
            };
            if let Some(rest) = line.strip_prefix("pub async fn ") {
                out.insert(format!("{file}::{}", ident(rest)));
            } else if let Some(rest) = line.strip_prefix("pub fn ") {
                // The signature: up to its body's brace (or a `;`).
                let mut signature = String::new();
                for l in &lines[i..] {
                    signature.push_str(l);
                    if l.contains('{') || l.contains(';') {
                        break;
                    }
                }
                if signature.contains("-> impl Future") {
                    out.insert(format!("{file}::{}", ident(rest)));
                }
            } else if line.starts_with("impl") {
                for marker in ["Future for ", "Stream for "] {
                    if let Some(at) = line.find(marker) {
                        out.insert(format!("{file}::{}", ident(&line[at + marker.len()..])));
                    }
                }
            }
        }
    }
}

#[test]
fn every_public_async_method_has_a_cancellation_case() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("client/src");
    let mut found = BTreeSet::new();
    public_async_items(&root, &root, &mut found);
    let covered: BTreeSet<String> = COVERED.iter().map(|(m, _)| m.to_string()).collect();
    let missing: Vec<_> = found.difference(&covered).collect();
    let stale: Vec<_> = covered.difference(&found).collect();
    assert!(
        missing.is_empty(),
        "public async methods without a cancellation case in cancel_every_poll.rs: {missing:?}"
    );
    assert!(
        stale.is_empty(),
        "cancellation cases naming methods that no longer exist: {stale:?}"
    );
}

/// A value in a buffer of its own, so `try_into_mut` tells whether the
/// producer still holds it: `text` padded with dots to `len` bytes.
fn owned(text: &str, len: usize) -> Bytes {
    let mut buf = BytesMut::from(text.as_bytes());
    buf.resize(len.max(text.len()), b'.');
    buf.freeze()
}

fn record(topic: &str, value: Bytes) -> ProducerRecord {
    ProducerRecord::new(topic.to_string())
        .partition(0)
        .value(value)
}

/// Reads partition 0 of `topic` from the start until `want.len()` records
/// arrived, checks their values are `want` in order, and that the log holds
/// nothing more (each record once).
async fn assert_log(client: &Client, topic: &str, want: &[Bytes]) {
    let read = consume_from_start(client, topic, 1, want.len(), 0).await;
    let values: Vec<Bytes> = read.into_iter().map(|r| r.value.unwrap()).collect();
    assert_eq!(values, want, "the log holds each record once, in order");
    assert_eq!(
        end_offset(client, topic, 0).await,
        want.len() as i64,
        "nothing else was written"
    );
}

async fn end_offset(client: &Client, topic: &str, partition: i32) -> i64 {
    offset_at(client, topic, partition, OffsetSpec::Latest).await
}

async fn offset_at(client: &Client, topic: &str, partition: i32, spec: OffsetSpec) -> i64 {
    Admin::new(client)
        .list_offsets([(topic.to_string(), partition, spec)])
        .await
        .expect("list offsets")[0]
        .offset
}

/// Waits (polling, with a generous deadline) until `cond` holds.
async fn eventually(what: &str, mut cond: impl AsyncFnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !cond().await {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// `send` and `send_with_cancel` wait for buffer memory (a record fills the
/// buffer until it is delivered), are dropped after each poll: the record was
/// never accepted and the producer kept no reference to it; the completing
/// call's record is delivered; the log holds exactly the accepted records.
#[tokio::test]
async fn producer_send_never_accepts_a_dropped_record() {
    let (broker, client) = broker_and_client().await;
    let topic = create_topic(&client, "every-send", 1).await;
    let producer = Producer::builder(&client)
        .buffer_memory(400)
        .linger(Duration::ZERO)
        .build();
    let token = CancellationToken::new();
    let mut want = Vec::new();
    send_case("Producer::send", &producer, &topic, &mut want, |r| {
        producer.send(r)
    })
    .await;
    send_case(
        "Producer::send_with_cancel",
        &producer,
        &topic,
        &mut want,
        |r| producer.send_with_cancel(r, &token),
    )
    .await;
    producer.flush().await;
    assert_eq!(producer.outstanding(), 0);
    assert_log(&client, &topic, &want).await;
    producer.close().await;
    broker.shutdown().await;
}

async fn send_case<Fut>(
    what: &str,
    producer: &Producer,
    topic: &str,
    want: &mut Vec<Bytes>,
    send: impl Fn(ProducerRecord) -> Fut,
) where
    Fut: Future<Output = Result<DeliveryFuture, ProduceError>>,
{
    for k in polls(what) {
        let filler = owned(&format!("{what} filler {k}"), 250);
        // The handle is dropped: the filler is delivered anyway, then frees memory.
        drop(producer.send(record(topic, filler.clone())).await.unwrap());
        want.push(filler);
        let value = owned(&format!("{what} {k}"), 250);
        let watch = value.clone();
        match poll_at_most(what, k, send(record(topic, value))).await {
            Some(delivery) => {
                delivery.expect("accepted").await.expect("delivered");
                want.push(watch);
                return;
            }
            None => {
                watch
                    .try_into_mut()
                    .unwrap_or_else(|_| panic!("{what} dropped after {k} polls kept the record"));
            }
        }
    }
}

/// A `DeliveryFuture` and `until_cancelled` (with a token never cancelled)
/// dropped after each poll: the record is still delivered, once, and its
/// buffer released once delivered.
#[tokio::test]
async fn dropped_delivery_waits_still_deliver_exactly_once() {
    let (broker, client) = broker_and_client().await;
    let topic = create_topic(&client, "every-delivery", 1).await;
    let producer = Producer::builder(&client)
        .linger(Duration::from_millis(5))
        .build();
    let token = CancellationToken::new();
    let mut want = Vec::new();
    let mut watches = Vec::new();
    for k in polls("DeliveryFuture") {
        let value = owned(&format!("delivery {k}"), 0);
        want.push(value.clone());
        let d = producer.send(record(&topic, value)).await.unwrap();
        if let Some(r) = poll_at_most("DeliveryFuture", k, d).await {
            r.expect("delivered");
            break;
        }
        watches.push(want.last().unwrap().clone());
    }
    for k in polls("DeliveryFuture::until_cancelled") {
        let value = owned(&format!("until cancelled {k}"), 0);
        want.push(value.clone());
        let d = producer.send(record(&topic, value)).await.unwrap();
        let wait = d.until_cancelled(&token);
        if let Some(outcome) = poll_at_most("until_cancelled", k, wait).await {
            assert!(
                matches!(outcome, CancelOutcome::Delivered(_)),
                "{outcome:?}"
            );
            break;
        }
        watches.push(want.last().unwrap().clone());
    }
    producer.flush().await;
    assert_log(&client, &topic, &want).await;
    drop(want);
    for w in watches {
        w.try_into_mut()
            .expect("released once the dropped wait's record was delivered");
    }
    producer.close().await;
    broker.shutdown().await;
}

/// The `InFlight` handle of a record whose Produce response the proxy holds
/// back, dropped after each poll: the record is still delivered exactly once
/// (idempotence) once the response is let through.
#[tokio::test]
async fn a_dropped_in_flight_wait_still_delivers_exactly_once() {
    let (release, released) = tokio::sync::watch::channel(true);
    let setup = Proxied::start(
        "every-in-flight",
        ProxyState {
            hold: Some(Box::new(move |ex, _| {
                if ex.api_key != 0 || *released.borrow() {
                    return None;
                }
                let mut released = released.clone();
                Some(Box::pin(async move {
                    let _ = released.wait_for(|r| *r).await;
                }))
            })),
            ..ProxyState::default()
        },
    )
    .await;
    let client = setup.client.clone();
    let topic = create_topic(&client, "every-in-flight", 1).await;
    let producer = Producer::builder(&client).linger(Duration::ZERO).build();
    let mut want = vec![owned("first", 0)];
    producer
        .send(record(&topic, want[0].clone()))
        .await
        .unwrap()
        .await
        .unwrap();
    for k in polls("InFlight") {
        release.send_replace(false);
        let seen = setup.state.lock().unwrap().produce_requests;
        let value = owned(&format!("in flight {k}"), 0);
        want.push(value.clone());
        let d = producer.send(record(&topic, value)).await.unwrap();
        eventually("the Produce request reached the broker", async || {
            setup.state.lock().unwrap().produce_requests > seen
        })
        .await;
        let CancelOutcome::InFlight(in_flight) = d.cancel() else {
            panic!("a record whose response is held is in flight");
        };
        let done = if k == 1 {
            // The response is held: certainly pending.
            let r = poll_at_most("InFlight", k, in_flight).await;
            assert!(r.is_none(), "delivered while its response is held");
            release.send_replace(true);
            false
        } else {
            release.send_replace(true);
            match poll_at_most("InFlight", k, in_flight).await {
                Some(r) => {
                    r.expect("delivered");
                    true
                }
                None => false,
            }
        };
        producer.flush().await;
        if done {
            break;
        }
    }
    assert_log(&client, &topic, &want).await;
    producer.close().await;
    setup.shutdown().await;
}

/// `flush`, `flush_timeout`, `close` and `close_timeout` dropped after each
/// poll: the waiting stops only; every record is still delivered (once), a
/// dropped close leaves the producer closed, and the next call of the same
/// method completes.
#[tokio::test]
async fn dropped_flush_and_close_still_deliver_everything() {
    let (broker, client) = broker_and_client().await;
    let topic = create_topic(&client, "every-flush", 1).await;
    let mut want = Vec::new();
    let producer = Producer::builder(&client)
        .linger(Duration::from_millis(20))
        .build();
    for timed in [false, true] {
        let what = if timed { "flush_timeout" } else { "flush" };
        for k in polls(what) {
            let mut deliveries = Vec::new();
            for i in 0..3 {
                let value = owned(&format!("{what} {k} {i}"), 0);
                want.push(value.clone());
                deliveries.push(producer.send(record(&topic, value)).await.unwrap());
            }
            let done = if timed {
                poll_at_most(what, k, producer.flush_timeout(Duration::from_secs(60)))
                    .await
                    .map(|r| r.expect("flushed in time"))
            } else {
                poll_at_most(what, k, producer.flush()).await
            };
            for d in deliveries {
                d.await.expect("delivered although the flush was dropped");
            }
            if done.is_some() {
                break;
            }
        }
        producer.flush().await;
        assert_eq!(producer.outstanding(), 0);
    }
    producer.close().await;

    for timed in [false, true] {
        let what = if timed { "close_timeout" } else { "close" };
        for k in polls(what) {
            let producer = Producer::builder(&client)
                .linger(Duration::from_millis(20))
                .build();
            let mut deliveries = Vec::new();
            for i in 0..3 {
                let value = owned(&format!("{what} {k} {i}"), 0);
                want.push(value.clone());
                deliveries.push(producer.send(record(&topic, value)).await.unwrap());
            }
            let done = if timed {
                poll_at_most(what, k, producer.close_timeout(Duration::from_secs(60)))
                    .await
                    .map(|r| r.expect("closed in time"))
            } else {
                poll_at_most(what, k, producer.close()).await
            };
            let refused = producer
                .send(record(&topic, owned("after close", 0)))
                .await
                .expect_err("the producer stays closed");
            assert!(
                matches!(refused, ProduceError::Closed { .. }),
                "{refused:?}"
            );
            for d in deliveries {
                d.await.expect("delivered although the close was dropped");
            }
            producer.close().await;
            if done.is_some() {
                break;
            }
        }
    }
    assert_log(&client, &topic, &want).await;
    broker.shutdown().await;
}

/// Reads `topic` (1 partition) at read_committed until a record valued
/// `last` arrived, and returns the values before it.
async fn read_committed_until(client: &Client, topic: &str, last: &Bytes) -> Vec<Bytes> {
    let mut consumer = Consumer::builder(client)
        .assign(topic.to_string(), 0, StartOffset::Earliest)
        .isolation_level(IsolationLevel::ReadCommitted)
        .max_wait(Duration::from_millis(50))
        .build()
        .await
        .unwrap();
    let mut out = Vec::new();
    loop {
        let r = tokio::time::timeout(Duration::from_secs(60), consumer.recv())
            .await
            .expect("the last record arrives")
            .expect("consume");
        let v = r.value.unwrap();
        if v == *last {
            return out;
        }
        out.push(v);
    }
}

/// Every transactional call dropped after each poll, each outcome checked as
/// documented; at the end a read_committed consumer sees exactly the records
/// of the transactions that committed, and the group exactly the offsets the
/// last completed `send_offsets_to_transaction` sent.
#[tokio::test]
async fn transactional_calls_dropped_after_each_poll() {
    let (broker, client) = broker_and_client().await;
    let topic = create_topic(&client, "every-txn", 1).await;
    let id = topic_name("every-txn-id");
    let txn_producer = || {
        Producer::builder(&client)
            .transactional_id(id.clone())
            .linger(Duration::from_millis(2))
            .build()
    };

    // init_transactions: dropped, the producer stays uninitialized and may
    // call it again.
    let mut producer = txn_producer();
    for k in polls("init_transactions") {
        producer = txn_producer();
        match poll_at_most("init_transactions", k, producer.init_transactions()).await {
            Some(r) => {
                r.expect("initialized");
                break;
            }
            None => {
                producer
                    .begin_transaction()
                    .await
                    .expect_err("not initialized after a dropped init_transactions");
                producer.init_transactions().await.expect("init again");
            }
        }
    }

    let mut committed = Vec::new();
    let send_three = async |producer: &Producer, tag: &str| {
        let mut sent = Vec::new();
        for i in 0..3 {
            let value = owned(&format!("{tag} {i}"), 0);
            let d = producer.send(record(&topic, value.clone())).await.unwrap();
            sent.push((value, d));
        }
        sent
    };

    // begin_transaction: dropped, no transaction was opened (a record is
    // refused); the next begin opens one.
    for k in polls("begin_transaction") {
        if poll_at_most("begin_transaction", k, producer.begin_transaction())
            .await
            .is_some_and(|r| r.is_ok())
        {
            break;
        }
        let refused = producer
            .send(record(&topic, owned("outside", 0)))
            .await
            .expect_err("no transaction is open");
        assert!(
            matches!(
                &refused,
                ProduceError::Transaction {
                    error: TransactionError::NoTransaction,
                    ..
                }
            ),
            "{refused:?}"
        );
    }

    // send_offsets_to_transaction: dropped, the transaction stays open and a
    // later call's offsets count.
    let group = topic_name("every-txn-group");
    let tp = TopicPartition::new(topic.clone(), 0);
    let meta = ConsumerGroupMetadata::new(group.clone());
    let mut last_offsets = 0;
    for k in polls("send_offsets_to_transaction") {
        last_offsets = 10 * k as i64;
        let call = producer.send_offsets_to_transaction([(tp.clone(), last_offsets)], &meta);
        if let Some(r) = poll_at_most("send_offsets_to_transaction", k, call).await {
            r.expect("offsets sent");
            break;
        }
    }
    for (value, d) in send_three(&producer, "with offsets").await {
        d.await.expect("delivered");
        committed.push(value);
    }
    producer.commit_transaction().await.expect("commit");
    // The coordinator writes the transaction's markers after answering EndTxn;
    // the offsets become the group's then.
    eventually(
        "the committed transaction's offsets are the group's",
        async || committed_of(&client, &group, &tp).await.is_some(),
    )
    .await;
    assert_eq!(
        committed_of(&client, &group, &tp).await,
        Some(last_offsets),
        "the last offsets sent count"
    );

    // commit_transaction: dropped while flushing, the transaction stays open
    // (abort succeeds); dropped once handed over, it commits anyway (abort is
    // refused, and the outcome says committed).
    for k in polls("commit_transaction") {
        producer.begin_transaction().await.unwrap();
        let sent = send_three(&producer, &format!("commit {k}")).await;
        let done = poll_at_most("commit_transaction", k, producer.commit_transaction()).await;
        let completed = done.is_some();
        let was_committed = match done {
            Some(r) => {
                r.expect("commit");
                true
            }
            None => match producer.abort_transaction().await {
                Ok(()) => false,
                Err(TransactionError::InvalidState { .. }) => {
                    let outcome = producer.transaction_outcome().await;
                    assert!(
                        matches!(outcome, Some(TransactionOutcome::Committed)),
                        "{outcome:?}"
                    );
                    true
                }
                Err(e) => panic!("abort after commit dropped after {k} polls: {e}"),
            },
        };
        let reported = producer.last_transaction_outcome();
        assert!(
            matches!(
                (was_committed, &reported),
                (true, Some(TransactionOutcome::Committed))
                    | (false, Some(TransactionOutcome::Aborted))
            ),
            "commit dropped after {k} polls: committed={was_committed}, reported {reported:?}"
        );
        for (value, d) in sent {
            let r = d.await;
            if was_committed {
                r.expect("a committed transaction's record is delivered");
                committed.push(value);
            }
        }
        if completed {
            break;
        }
    }

    // abort_transaction: dropped, the abort finishes or may be called again;
    // either way nothing of the transaction is ever read at read_committed.
    for k in polls("abort_transaction") {
        producer.begin_transaction().await.unwrap();
        let sent = send_three(&producer, &format!("abort {k}")).await;
        let done = poll_at_most("abort_transaction", k, producer.abort_transaction()).await;
        let completed = done.is_some();
        match done {
            Some(r) => r.expect("abort"),
            None => match producer.abort_transaction().await {
                Ok(()) | Err(TransactionError::InvalidState { .. }) => {}
                Err(e) => panic!("abort again after one dropped after {k} polls: {e}"),
            },
        }
        let outcome = producer.transaction_outcome().await;
        assert!(
            matches!(outcome, Some(TransactionOutcome::Aborted)),
            "{outcome:?}"
        );
        for (_, d) in sent {
            let _ = d.await;
        }
        if completed {
            break;
        }
    }

    // transaction_outcome: only waits; dropped while a commit is ending, the
    // commit is unaffected.
    for k in polls("transaction_outcome") {
        producer.begin_transaction().await.unwrap();
        let sent = send_three(&producer, &format!("outcome {k}")).await;
        let committing = {
            let producer = producer.clone();
            tokio::spawn(async move { producer.commit_transaction().await })
        };
        let done = poll_at_most("transaction_outcome", k, producer.transaction_outcome()).await;
        if let Some(outcome) = &done {
            assert!(outcome.is_some(), "a transactional producer has an outcome");
        }
        committing.await.unwrap().expect("commit");
        let outcome = producer.transaction_outcome().await;
        assert!(
            matches!(outcome, Some(TransactionOutcome::Committed)),
            "{outcome:?}"
        );
        for (value, d) in sent {
            d.await.expect("delivered");
            committed.push(value);
        }
        if done.is_some() {
            break;
        }
    }

    let last = owned("the last transaction", 0);
    producer.begin_transaction().await.unwrap();
    producer.send(record(&topic, last.clone())).await.unwrap();
    producer.commit_transaction().await.unwrap();
    assert_eq!(
        read_committed_until(&client, &topic, &last).await,
        committed,
        "read_committed sees the committed transactions' records, once each"
    );
    producer.close().await;
    broker.shutdown().await;
}

/// Produces `value` to partition `partition` of `topic` and waits for it.
async fn produce_one(producer: &Producer, topic: &str, partition: i32, value: &str) {
    producer
        .send(
            ProducerRecord::new(topic.to_string())
                .partition(partition)
                .value(value.to_string()),
        )
        .await
        .unwrap()
        .await
        .unwrap();
}

/// Drives a receive of the record at `offset` (produced after a first poll
/// that certainly finds nothing) dropped after each poll; returns once a call
/// completed, checking it returned that very record.
async fn recv_each_poll(
    what: &str,
    producer: &Producer,
    topic: &str,
    offset: i64,
    mut recv: impl AsyncFnMut() -> (i64, Bytes),
) {
    assert!(
        poll_at_most(what, 1, recv()).await.is_none(),
        "{what}: nothing to receive before record {offset} is produced"
    );
    produce_one(producer, topic, 0, &format!("r{offset}")).await;
    for k in polls(what) {
        if let Some(got) = poll_at_most(what, k, recv()).await {
            assert_eq!(
                got,
                (offset, Bytes::from(format!("r{offset}"))),
                "{what}: no record skipped or repeated (completed at poll {k})"
            );
            return;
        }
    }
}

async fn recv_within(consumer: &mut Consumer) -> baton_kafka::ConsumerRecord {
    tokio::time::timeout(Duration::from_secs(60), consumer.recv())
        .await
        .expect("a record within a minute")
        .expect("recv")
}

/// A plain consumer's `build`, `recv`, stream polls, `add_partitions` and
/// `assign` dropped after each poll: nothing is lost or repeated, and a
/// dropped assignment change changed nothing.
#[tokio::test]
async fn consumer_calls_dropped_after_each_poll() {
    let (broker, client) = broker_and_client().await;
    let topic = create_topic(&client, "every-consumer", 2).await;
    let producer = Producer::builder(&client).linger(Duration::ZERO).build();
    let tp0 = TopicPartition::new(topic.clone(), 0);
    let tp1 = TopicPartition::new(topic.clone(), 1);
    produce_one(&producer, &topic, 1, "p1").await;

    let builder = || {
        Consumer::builder(&client)
            .assign(topic.clone(), 0, StartOffset::Earliest)
            .max_wait(Duration::from_millis(50))
    };
    let mut consumer = None;
    for k in polls("ConsumerBuilder::build") {
        if let Some(c) = poll_at_most("ConsumerBuilder::build", k, builder().build()).await {
            consumer = Some(c.expect("built"));
            break;
        }
    }
    let mut consumer = consumer.unwrap();
    assert_eq!(consumer.assignment(), vec![tp0.clone()]);

    let mut offset = 0;
    for _ in 0..3 {
        recv_each_poll("Consumer::recv", &producer, &topic, offset, async || {
            let r = consumer.recv().await.expect("recv");
            (r.offset, r.value.unwrap())
        })
        .await;
        offset += 1;
    }
    for _ in 0..3 {
        recv_each_poll(
            "Consumer as Stream",
            &producer,
            &topic,
            offset,
            async || {
                let r = std::future::poll_fn(|cx| Pin::new(&mut consumer).poll_next(cx))
                    .await
                    .expect("the stream goes on")
                    .expect("recv");
                (r.offset, r.value.unwrap())
            },
        )
        .await;
        offset += 1;
    }

    for k in polls("Consumer::add_partitions") {
        let call = consumer.add_partitions([(tp1.clone(), StartOffset::Earliest)]);
        if let Some(r) = poll_at_most("Consumer::add_partitions", k, call).await {
            r.expect("added");
            break;
        }
        assert_eq!(
            consumer.assignment(),
            vec![tp0.clone()],
            "dropped: unchanged"
        );
    }
    let mut assigned: Vec<_> = consumer.assignment();
    assigned.sort_by_key(|tp| tp.partition);
    assert_eq!(assigned, vec![tp0.clone(), tp1.clone()]);
    let r = recv_within(&mut consumer).await;
    assert_eq!(
        (r.partition, r.offset),
        (1, 0),
        "the added partition is read"
    );

    for k in polls("Consumer::assign") {
        // Keeps partition 1 (at its position) and drops partition 0.
        let call = consumer.assign([(tp1.clone(), StartOffset::Earliest)]);
        if let Some(r) = poll_at_most("Consumer::assign", k, call).await {
            r.expect("assigned");
            break;
        }
        assert_eq!(consumer.assignment().len(), 2, "dropped: unchanged");
    }
    assert_eq!(consumer.assignment(), vec![tp1.clone()]);
    produce_one(&producer, &topic, 0, "not read").await;
    produce_one(&producer, &topic, 1, "p1 again").await;
    let r = recv_within(&mut consumer).await;
    assert_eq!(
        (r.partition, r.offset),
        (1, 1),
        "partition 1 read on from its position"
    );
    producer.close().await;
    broker.shutdown().await;
}

/// The group's committed offset of `tp`, if any.
async fn committed_of(client: &Client, group: &str, tp: &TopicPartition) -> Option<i64> {
    Admin::new(client)
        .group_offsets(group.to_string())
        .await
        .expect("group offsets")
        .get(tp)
        .map(|o| o.offset)
}

/// The member ids the coordinator lists for `group`.
async fn members_of(client: &Client, group: &str) -> Vec<String> {
    let described = Admin::new(client)
        .describe_groups([group.to_string()])
        .await
        .expect("describe group");
    described[0]
        .members
        .iter()
        .map(|m| m.member_id.clone())
        .collect()
}

fn group_consumer(client: &Client, group: &str, topic: &str) -> baton_kafka::GroupConsumerBuilder {
    GroupConsumer::builder(client, group.to_string())
        .subscribe([topic.to_string()])
        .heartbeat_interval(Duration::from_millis(100))
        .session_timeout(Duration::from_secs(10))
        .max_wait(Duration::from_millis(50))
}

/// A group consumer's `build`, `recv`, `commit`, `commit_async`'s
/// `PendingCommit`, `commit_offsets` and its stream dropped after each poll:
/// no record is skipped or repeated, a commit leaves the old or the new offset
/// (a dropped `PendingCommit` still commits), and the member stays in the group.
#[tokio::test]
async fn group_consumer_calls_dropped_after_each_poll() {
    let (broker, client) = broker_and_client().await;
    let topic = create_topic(&client, "every-group", 1).await;
    let group = topic_name("every-group");
    let tp = TopicPartition::new(topic.clone(), 0);
    let producer = Producer::builder(&client).linger(Duration::ZERO).build();

    let mut consumer = None;
    for k in polls("GroupConsumerBuilder::build") {
        let build = group_consumer(&client, &group, &topic)
            .manual_commit()
            .build();
        if let Some(c) = poll_at_most("GroupConsumerBuilder::build", k, build).await {
            consumer = Some(c.expect("built"));
            break;
        }
    }
    let mut consumer = consumer.unwrap();

    let mut offset = 0;
    for _ in 0..3 {
        recv_each_poll(
            "GroupConsumer::recv",
            &producer,
            &topic,
            offset,
            async || {
                let r = consumer.recv().await.expect("recv");
                (r.offset, r.value.unwrap())
            },
        )
        .await;
        offset += 1;
    }
    let member = consumer.member_id();
    assert_eq!(members_of(&client, &group).await, vec![member.clone()]);

    // commit: the position moves by one record each round.
    for k in polls("GroupConsumer::commit") {
        let old = committed_of(&client, &group, &tp).await;
        recv_each_poll(
            "GroupConsumer::recv",
            &producer,
            &topic,
            offset,
            async || {
                let r = consumer.recv().await.expect("recv");
                (r.offset, r.value.unwrap())
            },
        )
        .await;
        offset += 1;
        let done = poll_at_most("GroupConsumer::commit", k, consumer.commit()).await;
        let now = committed_of(&client, &group, &tp).await;
        assert!(
            now == old || now == Some(offset),
            "commit dropped after {k} polls left {now:?} (old {old:?}, new {offset})"
        );
        assert_eq!(consumer.member_id(), member, "still the same member");
        assert_eq!(members_of(&client, &group).await, vec![member.clone()]);
        if let Some(r) = done {
            r.expect("commit");
            assert_eq!(now, Some(offset));
            break;
        }
    }

    // commit_async: a dropped PendingCommit still commits.
    for k in polls("PendingCommit") {
        recv_each_poll(
            "GroupConsumer::recv",
            &producer,
            &topic,
            offset,
            async || {
                let r = consumer.recv().await.expect("recv");
                (r.offset, r.value.unwrap())
            },
        )
        .await;
        offset += 1;
        let done = poll_at_most("PendingCommit", k, consumer.commit_async()).await;
        eventually("the dropped PendingCommit's commit lands", async || {
            committed_of(&client, &group, &tp).await == Some(offset)
        })
        .await;
        if let Some(r) = done {
            r.expect("commit");
            break;
        }
    }

    // commit_offsets: offsets above the position, growing each round.
    for k in polls("GroupConsumer::commit_offsets") {
        let old = committed_of(&client, &group, &tp).await;
        let new = 1_000 + k as i64;
        let call = consumer.commit_offsets([(tp.clone(), new)]);
        let done = poll_at_most("GroupConsumer::commit_offsets", k, call).await;
        let now = committed_of(&client, &group, &tp).await;
        assert!(
            now == old || now == Some(new),
            "commit_offsets dropped after {k} polls left {now:?} (old {old:?}, new {new})"
        );
        assert_eq!(members_of(&client, &group).await, vec![member.clone()]);
        if let Some(r) = done {
            r.expect("commit");
            assert_eq!(now, Some(new));
            break;
        }
    }

    // The stream goes on where recv stopped.
    let mut stream = consumer.into_stream();
    for _ in 0..3 {
        recv_each_poll("GroupStream", &producer, &topic, offset, async || {
            let r = std::future::poll_fn(|cx| Pin::new(&mut stream).poll_next(cx))
                .await
                .expect("the stream goes on")
                .expect("recv");
            (r.offset, r.value.unwrap())
        })
        .await;
        offset += 1;
    }
    drop(stream);
    producer.close().await;
    broker.shutdown().await;
}

/// `GroupConsumer::close` dropped after each poll (each round a consumer of a
/// group of its own, with auto-commit, having read one record): the group's
/// committed offset is none or the position, and the member is gone or still
/// the same one (LeaveGroup sent or not), never anything else.
#[tokio::test]
async fn group_close_dropped_after_each_poll() {
    let (broker, client) = broker_and_client().await;
    let topic = create_topic(&client, "every-close", 1).await;
    let tp = TopicPartition::new(topic.clone(), 0);
    let producer = Producer::builder(&client).linger(Duration::ZERO).build();
    produce_one(&producer, &topic, 0, "r0").await;
    for k in polls("GroupConsumer::close") {
        let group = topic_name("every-close");
        let mut consumer = group_consumer(&client, &group, &topic)
            .auto_commit_interval(Duration::from_secs(3600))
            .build()
            .await
            .unwrap();
        let r = tokio::time::timeout(Duration::from_secs(60), consumer.recv())
            .await
            .expect("a record")
            .unwrap();
        assert_eq!(r.offset, 0);
        let member = consumer.member_id();
        let done = poll_at_most("GroupConsumer::close", k, consumer.close()).await;
        let committed = committed_of(&client, &group, &tp).await;
        assert!(
            committed.is_none() || committed == Some(1),
            "close dropped after {k} polls left {committed:?}"
        );
        let members = members_of(&client, &group).await;
        assert!(
            members.is_empty() || members == vec![member.clone()],
            "close dropped after {k} polls left members {members:?}"
        );
        if let Some(r) = done {
            r.expect("closed");
            assert_eq!(committed, Some(1), "a completed close committed");
            assert!(members.is_empty(), "a completed close left the group");
            break;
        }
    }
    producer.close().await;
    broker.shutdown().await;
}

/// Runs the listener commit cases when partitions are first assigned.
struct CommittingListener {
    client: Client,
    group: String,
    topic: String,
    /// The offset the last, completed `commit_offsets` stored.
    done: Arc<Mutex<Option<i64>>>,
}

#[baton_kafka::async_trait]
impl RebalanceListener for CommittingListener {
    async fn on_assigned(&mut self, ctx: &mut RebalanceContext, partitions: &[TopicPartition]) {
        if partitions.is_empty() || self.done.lock().unwrap().is_some() {
            return;
        }
        let tp = TopicPartition::new(self.topic.clone(), 0);
        // Nothing consumed yet: a commit has nothing new to store; dropped or
        // not, the group has no offset.
        for k in polls("RebalanceContext::commit") {
            let done = poll_at_most("RebalanceContext::commit", k, ctx.commit()).await;
            assert_eq!(committed_of(&self.client, &self.group, &tp).await, None);
            if let Some(r) = done {
                r.expect("commit");
                break;
            }
        }
        for k in polls("RebalanceContext::commit_offsets") {
            let old = committed_of(&self.client, &self.group, &tp).await;
            let new = 10 + k as i64;
            let call = ctx.commit_offsets([(tp.clone(), new)]);
            let done = poll_at_most("RebalanceContext::commit_offsets", k, call).await;
            let now = committed_of(&self.client, &self.group, &tp).await;
            assert!(
                now == old || now == Some(new),
                "commit_offsets dropped after {k} polls left {now:?} (old {old:?}, new {new})"
            );
            if let Some(r) = done {
                r.expect("commit");
                assert_eq!(now, Some(new));
                *self.done.lock().unwrap() = Some(new);
                break;
            }
        }
    }
}

/// The rebalance listener's `commit` and `commit_offsets` dropped after each
/// poll (inside `on_assigned`): the offset is the old or the new one, and the
/// consumer goes on to read from the last completed commit.
#[tokio::test]
async fn listener_commits_dropped_after_each_poll() {
    let (broker, client) = broker_and_client().await;
    let topic = create_topic(&client, "every-listener", 1).await;
    let group = topic_name("every-listener");
    let done = Arc::new(Mutex::new(None));
    let mut consumer = group_consumer(&client, &group, &topic)
        .manual_commit()
        .listener(CommittingListener {
            client: client.clone(),
            group: group.clone(),
            topic: topic.clone(),
            done: done.clone(),
        })
        .build()
        .await
        .unwrap();
    // More records than the listener's commits can skip.
    produce_values(&client, &topic, 0, 100).await;
    let r = tokio::time::timeout(Duration::from_secs(60), consumer.recv())
        .await
        .expect("a record")
        .unwrap();
    let last = done.lock().unwrap().expect("the listener ran its cases");
    assert_eq!(r.offset, last, "reading starts at the committed offset");
    consumer.close().await.unwrap();
    broker.shutdown().await;
}

fn probe() -> ApiVersionsRequest {
    ApiVersionsRequest {
        client_software_name: "cancel-every-poll".into(),
        client_software_version: "1".into(),
    }
}

/// Checks `conn` is in sync: an ApiVersions and a Metadata request, in turn,
/// each get their own response (a response left over from a dropped request
/// would be taken for the next one's and fail to decode or mismatch).
async fn assert_in_sync(conn: &Connection, what: &str) {
    let versions = conn
        .send(&probe())
        .await
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    assert_eq!(versions.error_code, 0, "{what}");
    assert!(!versions.api_keys.is_empty(), "{what}");
    let metadata = conn
        .send(&MetadataRequest::default())
        .await
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    assert_eq!(metadata.brokers.len(), 1, "{what}");
}

/// The client's and the connection's calls dropped after each poll: a dropped
/// build or connect leaves nothing that breaks the next one; a dropped request
/// leaves its connection in sync (the next requests get their own responses);
/// the metadata snapshot is the old or the new one, never a mix.
#[tokio::test]
async fn client_and_connection_calls_dropped_after_each_poll() {
    let (broker, client) = broker_and_client().await;
    let bootstrap = broker.bootstrap();

    for k in polls("ClientBuilder::build") {
        let build = Client::builder([bootstrap.clone()]).build();
        if let Some(c) = poll_at_most("ClientBuilder::build", k, build).await {
            let c = c.expect("built");
            assert_eq!(c.refresh_metadata().await.unwrap().brokers.len(), 1);
            break;
        }
    }

    let admin = Admin::new(&client);
    for k in polls("Client::refresh_metadata") {
        let topic = topic_name("every-refresh");
        admin.create_topic(topic.clone(), 1, 1).await.unwrap();
        let before = client.metadata();
        let done = poll_at_most("refresh_metadata", k, client.refresh_metadata()).await;
        let after = client.metadata();
        assert!(
            Arc::ptr_eq(&before, &after) || after.topics.contains_key(&topic),
            "refresh dropped after {k} polls: the old snapshot or a whole new one"
        );
        let refreshed = client.refresh_metadata().await.expect("refresh again");
        assert!(refreshed.topics.contains_key(&topic));
        if let Some(m) = done {
            assert!(m.expect("refreshed").topics.contains_key(&topic));
            break;
        }
    }

    let node = *client.metadata().brokers.keys().next().unwrap();
    for k in polls("Client::broker_connection") {
        let call = client.broker_connection(node);
        let done = poll_at_most("broker_connection", k, call).await;
        let conn = client.broker_connection(node).await.expect("connect again");
        assert_in_sync(&conn, "broker_connection").await;
        if let Some(c) = done {
            assert_in_sync(&c.expect("connected"), "broker_connection").await;
            break;
        }
    }

    let config = ConnectionConfig::default();
    for k in polls("Connection::connect") {
        let done = poll_at_most("connect", k, Connection::connect(&bootstrap, &config)).await;
        if let Some(c) = done {
            assert_in_sync(&c.expect("connected"), "connect").await;
            break;
        }
        let conn = Connection::connect(&bootstrap, &config).await.unwrap();
        assert_in_sync(&conn, "connect again").await;
    }
    for k in polls("Connection::from_stream") {
        let stream = tokio::net::TcpStream::connect(broker.local_addr())
            .await
            .unwrap();
        let call = Connection::from_stream(stream, &bootstrap, &config);
        if let Some(c) = poll_at_most("from_stream", k, call).await {
            assert_in_sync(&c.expect("handshake"), "from_stream").await;
            break;
        }
    }

    let conn = Connection::connect(&bootstrap, &config).await.unwrap();
    for k in polls("Connection::send") {
        let done = poll_at_most("send", k, conn.send(&MetadataRequest::default())).await;
        assert_in_sync(&conn, &format!("send dropped after {k} polls")).await;
        if let Some(r) = done {
            assert_eq!(r.expect("response").brokers.len(), 1);
            break;
        }
    }
    for k in polls("Connection::send_with_timeout") {
        let request = probe();
        let call = conn.send_with_timeout(&request, Duration::from_secs(60));
        let done = poll_at_most("send_with_timeout", k, call).await;
        assert_in_sync(&conn, &format!("send_with_timeout dropped after {k} polls")).await;
        if let Some(r) = done {
            assert_eq!(r.expect("response").error_code, 0);
            break;
        }
    }
    // A Produce with acks = 0 is not answered.
    let unanswered = ProduceRequest {
        acks: 0,
        timeout_ms: 1_000,
        ..ProduceRequest::default()
    };
    for k in polls("Connection::send_no_response") {
        let done = poll_at_most("send_no_response", k, conn.send_no_response(&unanswered)).await;
        assert_in_sync(&conn, &format!("send_no_response dropped after {k} polls")).await;
        if let Some(r) = done {
            r.expect("written");
            break;
        }
    }
    broker.shutdown().await;
}

/// A broker with an authorizer that lets the (anonymous, plaintext) admin do
/// everything, and SCRAM enabled, so the ACL and SCRAM calls act for real.
async fn admin_broker() -> (BrokerHandle, Client) {
    let sasl = baton_broker::SaslSettings::new([SaslMechanism::ScramSha256]);
    let listener = baton_broker::ListenerConfig::new(
        "SASL",
        baton_broker::ListenerSecurity::new(baton_kafka::SecurityProtocol::SaslPlaintext)
            .with_sasl(sasl),
    );
    let broker = Broker::start(
        BrokerConfig::in_memory()
            .with_listener(listener)
            .with_authorizer(AuthorizerConfig {
                super_users: vec!["User:ANONYMOUS".into()],
                allow_everyone_if_no_acl_found: true,
            }),
    )
    .await
    .expect("broker starts");
    let client = Client::builder([broker.bootstrap()])
        .build()
        .await
        .expect("client connects");
    (broker, client)
}

/// Drives `call` dropped after each poll until it completes; after a drop the
/// same call again must give the same answer as before (it only reads), and
/// so must the completing one.
async fn read_only<T: Debug>(what: &str, mut call: impl AsyncFnMut() -> T) {
    let baseline = format!("{:?}", call().await);
    assert!(baseline.starts_with("Ok("), "{what}: {baseline}");
    for k in polls(what) {
        let (answer, done) = match poll_at_most(what, k, call()).await {
            Some(r) => (format!("{r:?}"), true),
            None => (format!("{:?}", call().await), false),
        };
        assert_eq!(answer, baseline, "{what} dropped after {k} polls");
        if done {
            return;
        }
    }
}

/// Every reading admin call dropped after each poll: the client stays usable,
/// and the same call answers as before.
#[tokio::test]
async fn admin_reads_dropped_after_each_poll() {
    let (broker, client) = admin_broker().await;
    let admin = Admin::new(&client);
    let topic = create_topic(&client, "every-admin-read", 1).await;
    produce_values(&client, &topic, 0, 5).await;
    let group = topic_name("every-admin-read");
    let tp = TopicPartition::new(topic.clone(), 0);
    admin
        .alter_consumer_group_offsets(group.clone(), [(tp.clone(), OffsetAndMetadata::new(2))])
        .await
        .unwrap();
    admin
        .create_acls([acl_binding(&topic, "reader")])
        .await
        .unwrap();
    admin
        .alter_user_scram_credentials([ScramChange::upsert(
            "reader",
            SaslMechanism::ScramSha256,
            "reader-secret",
        )])
        .await
        .unwrap();
    let node = *client.metadata().brokers.keys().next().unwrap();

    read_only("describe_cluster", async || admin.describe_cluster().await).await;
    read_only("describe_cluster_info", async || {
        admin.describe_cluster_info(false).await
    })
    .await;
    read_only("list_offsets", async || {
        admin
            .list_offsets([(topic.clone(), 0, OffsetSpec::Latest)])
            .await
    })
    .await;
    read_only("describe_acls", async || {
        admin.describe_acls(&AclBindingFilter::any()).await
    })
    .await;
    read_only("describe_log_dirs", async || {
        admin.describe_log_dirs([node]).await
    })
    .await;
    read_only("list_groups", async || {
        admin.list_groups(&ListGroupsFilter::all()).await
    })
    .await;
    read_only("consumer_group_lag", async || {
        admin.consumer_group_lag(group.clone()).await
    })
    .await;
    read_only("describe_groups", async || {
        admin.describe_groups([group.clone()]).await
    })
    .await;
    read_only("describe_user_scram_credentials", async || {
        admin.describe_user_scram_credentials(["reader"]).await
    })
    .await;
    read_only("list_partition_reassignments", async || {
        admin.list_partition_reassignments(None).await
    })
    .await;
    read_only("list_consumer_group_offsets", async || {
        admin
            .list_consumer_group_offsets([GroupOffsetsQuery::all(group.clone())])
            .await
    })
    .await;
    read_only("group_offsets", async || {
        admin.group_offsets(group.clone()).await
    })
    .await;
    read_only("describe_configs", async || {
        admin
            .describe_configs(
                [ConfigResource::topic(topic.clone())],
                DescribeConfigsOptions::default(),
            )
            .await
    })
    .await;
    read_only("plan_consumer_group_offsets_reset", async || {
        admin
            .plan_consumer_group_offsets_reset(
                group.clone(),
                [tp.clone()],
                GroupOffsetReset::Earliest,
            )
            .await
    })
    .await;
    broker.shutdown().await;
}

fn acl_binding(topic: &str, user: &str) -> AclBinding {
    AclBinding {
        pattern: ResourcePattern {
            resource_type: ResourceType::Topic,
            name: topic.into(),
            pattern_type: PatternType::Literal,
        },
        entry: AccessControlEntry {
            principal: format!("User:{user}"),
            host: "*".into(),
            operation: AclOperation::Read,
            permission_type: AclPermissionType::Allow,
        },
    }
}

/// The error codes of per-topic (or per-partition) failures, for retries that
/// may find the operation already done.
fn codes(e: &AdminError) -> Vec<ErrorCode> {
    match e {
        AdminError::Topics(errors) => errors.iter().map(|e| e.code).collect(),
        AdminError::Partitions(errors) => errors.iter().map(|e| e.code).collect(),
        AdminError::Groups(errors) => errors.iter().map(|e| e.code).collect(),
        other => panic!("unexpected error {other:?}"),
    }
}

/// Whether a retry of a call that may already have taken effect got the
/// answer that says so: success, or only `already` errors.
fn retried(what: &str, k: usize, r: Result<(), AdminError>, already: ErrorCode) {
    if let Err(e) = r {
        let codes = codes(&e);
        assert!(
            codes.iter().all(|c| *c == already),
            "{what} dropped after {k} polls, then retried: {e:?}"
        );
    }
}

/// The value of config `key` of `topic`.
async fn topic_config(admin: &Admin, topic: &str, key: &str) -> Option<String> {
    admin
        .describe_configs(
            [ConfigResource::topic(topic.to_string())],
            DescribeConfigsOptions::default(),
        )
        .await
        .unwrap()[0]
        .entries
        .iter()
        .find(|e| e.name == key)
        .and_then(|e| e.value.clone())
}

/// The topic changes of the admin client dropped after each poll: each
/// happened or did not, a retry says "done" or "already done", and the state
/// afterwards is the requested one.
#[tokio::test]
async fn admin_topic_changes_dropped_after_each_poll() {
    let (broker, client) = admin_broker().await;
    let admin = Admin::new(&client);
    let base = topic_name("every-admin");
    let name = |what: &str, k: usize| format!("{base}-{what}-{k}");

    for k in polls("create_topics") {
        let t = name("create-topics", k);
        let done = poll_at_most(
            "create_topics",
            k,
            admin.create_topics([NewTopic::new(t.clone(), 2, 1)]),
        )
        .await;
        let completed = done.is_some();
        match done {
            Some(r) => r.expect("created"),
            None => retried(
                "create_topics",
                k,
                admin.create_topics([NewTopic::new(t.clone(), 2, 1)]).await,
                ErrorCode::TopicAlreadyExists,
            ),
        }
        assert_eq!(end_offset(&client, &t, 1).await, 0, "two partitions");
        if completed {
            break;
        }
    }
    for k in polls("create_topic") {
        let t = name("create-topic", k);
        let done = poll_at_most("create_topic", k, admin.create_topic(t.clone(), 2, 1)).await;
        let completed = done.is_some();
        match done {
            Some(r) => r.expect("created"),
            None => retried(
                "create_topic",
                k,
                admin.create_topic(t.clone(), 2, 1).await,
                ErrorCode::TopicAlreadyExists,
            ),
        }
        assert_eq!(end_offset(&client, &t, 1).await, 0, "two partitions");
        if completed {
            break;
        }
    }
    for k in polls("delete_topics") {
        let t = name("delete", k);
        admin.create_topic(t.clone(), 1, 1).await.unwrap();
        let done = poll_at_most("delete_topics", k, admin.delete_topics([t.clone()])).await;
        let completed = done.is_some();
        match done {
            Some(r) => r.expect("deleted"),
            None => retried(
                "delete_topics",
                k,
                admin.delete_topics([t.clone()]).await,
                ErrorCode::UnknownTopicOrPartition,
            ),
        }
        eventually("the deleted topic can be created anew", async || {
            admin.create_topic(t.clone(), 1, 1).await.is_ok()
        })
        .await;
        if completed {
            break;
        }
    }
    for k in polls("create_partitions") {
        let t = name("partitions", k);
        admin.create_topic(t.clone(), 1, 1).await.unwrap();
        let call = admin.create_partitions([NewPartitions::increase_to(&t, 2)], false);
        let done = poll_at_most("create_partitions", k, call).await;
        let completed = done.is_some();
        match done {
            Some(r) => r.expect("created"),
            None => retried(
                "create_partitions",
                k,
                admin
                    .create_partitions([NewPartitions::increase_to(&t, 2)], false)
                    .await,
                ErrorCode::InvalidPartitions,
            ),
        }
        // The new partition is usable at once, whether the call completed or a
        // retry found it there.
        assert_eq!(end_offset(&client, &t, 1).await, 0, "two partitions");
        if completed {
            break;
        }
    }

    let t = name("records", 0);
    admin.create_topic(t.clone(), 1, 1).await.unwrap();
    produce_values(&client, &t, 0, 300).await;
    for k in polls("delete_records") {
        let old = offset_at(&client, &t, 0, OffsetSpec::Earliest).await;
        let new = k as i64;
        let call = admin.delete_records([RecordsToDelete::new(t.clone(), 0, new)]);
        let done = poll_at_most("delete_records", k, call).await;
        let now = offset_at(&client, &t, 0, OffsetSpec::Earliest).await;
        assert!(
            now == old || now == new,
            "delete_records dropped after {k} polls: log start {now} (old {old}, new {new})"
        );
        let completed = done.is_some();
        match done {
            Some(r) => assert_eq!(r.expect("deleted")[0].low_watermark, new),
            None => {
                admin
                    .delete_records([RecordsToDelete::new(t.clone(), 0, new)])
                    .await
                    .expect("retried");
            }
        }
        assert_eq!(offset_at(&client, &t, 0, OffsetSpec::Earliest).await, new);
        if completed {
            break;
        }
    }

    for k in polls("incremental_alter_configs") {
        let old = topic_config(&admin, &t, "retention.ms").await;
        let new = (3_600_000 + k).to_string();
        let change = || {
            [(
                ConfigResource::topic(t.clone()),
                vec![AlterConfigOp::set("retention.ms", new.clone())],
            )]
        };
        let call = admin.incremental_alter_configs(change(), false);
        let done = poll_at_most("incremental_alter_configs", k, call).await;
        let now = topic_config(&admin, &t, "retention.ms").await;
        assert!(
            now == old || now.as_ref() == Some(&new),
            "incremental_alter_configs dropped after {k} polls: {now:?} (old {old:?}, new {new})"
        );
        let completed = done.is_some();
        match done {
            Some(r) => r.expect("altered"),
            None => admin
                .incremental_alter_configs(change(), false)
                .await
                .expect("retried"),
        }
        assert_eq!(topic_config(&admin, &t, "retention.ms").await, Some(new));
        if completed {
            break;
        }
    }

    let node = *client.metadata().brokers.keys().next().unwrap();
    for k in polls("alter_partition_reassignments") {
        let call =
            admin.alter_partition_reassignments([Reassignment::to(t.clone(), 0, vec![node])]);
        let done = poll_at_most("alter_partition_reassignments", k, call).await;
        let completed = done.is_some();
        match done {
            Some(r) => r.expect("reassigned"),
            None => admin
                .alter_partition_reassignments([Reassignment::to(t.clone(), 0, vec![node])])
                .await
                .expect("retried"),
        }
        eventually("no reassignment is left ongoing", async || {
            admin
                .list_partition_reassignments(None)
                .await
                .unwrap()
                .is_empty()
        })
        .await;
        if completed {
            break;
        }
    }

    let elect = async || {
        format!(
            "{:?}",
            admin
                .elect_leaders(ElectionType::Preferred, Some(vec![(t.clone(), 0)]))
                .await
        )
    };
    let baseline = elect().await;
    for k in polls("elect_leaders") {
        let call = admin.elect_leaders(ElectionType::Preferred, Some(vec![(t.clone(), 0)]));
        let done = poll_at_most("elect_leaders", k, call).await;
        let answer = match &done {
            Some(r) => format!("{r:?}"),
            None => elect().await,
        };
        assert_eq!(answer, baseline, "elect_leaders dropped after {k} polls");
        if done.is_some() {
            break;
        }
    }
    assert_eq!(
        end_offset(&client, &t, 0).await,
        300,
        "the records are intact"
    );
    broker.shutdown().await;
}

/// The group changes of the admin client (on groups without members) dropped
/// after each poll: the committed offset is the old or the new one, a retry
/// succeeds (or finds the group gone), and the state is then the requested one.
#[tokio::test]
async fn admin_group_changes_dropped_after_each_poll() {
    let (broker, client) = admin_broker().await;
    let admin = Admin::new(&client);
    let topic = create_topic(&client, "every-admin-group", 2).await;
    produce_values(&client, &topic, 0, 300).await;
    let tp = TopicPartition::new(topic.clone(), 0);
    let tp1 = TopicPartition::new(topic.clone(), 1);
    let group = topic_name("every-admin-group");
    let at = |offset: i64| [(tp.clone(), OffsetAndMetadata::new(offset))];
    // A second partition's offset keeps the group alive throughout.
    admin
        .alter_consumer_group_offsets(group.clone(), [(tp1.clone(), OffsetAndMetadata::new(0))])
        .await
        .unwrap();

    for k in polls("alter_consumer_group_offsets") {
        let old = committed_of(&client, &group, &tp).await;
        let new = k as i64;
        let done = poll_at_most(
            "alter_consumer_group_offsets",
            k,
            admin.alter_consumer_group_offsets(group.clone(), at(new)),
        )
        .await;
        let now = committed_of(&client, &group, &tp).await;
        assert!(
            now == old || now == Some(new),
            "alter_consumer_group_offsets dropped after {k} polls: {now:?} (old {old:?}, new {new})"
        );
        let completed = done.is_some();
        match done {
            Some(r) => r.expect("altered"),
            None => admin
                .alter_consumer_group_offsets(group.clone(), at(new))
                .await
                .expect("retried"),
        }
        assert_eq!(committed_of(&client, &group, &tp).await, Some(new));
        if completed {
            break;
        }
    }

    for k in polls("reset_consumer_group_offsets") {
        let old = committed_of(&client, &group, &tp).await;
        let new = 100 + k as i64;
        let to = GroupOffsetReset::Offset(new);
        let call = admin.reset_consumer_group_offsets(group.clone(), [tp.clone()], to);
        let done = poll_at_most("reset_consumer_group_offsets", k, call).await;
        let now = committed_of(&client, &group, &tp).await;
        assert!(
            now == old || now == Some(new),
            "reset_consumer_group_offsets dropped after {k} polls: {now:?} (old {old:?}, new {new})"
        );
        let completed = done.is_some();
        let planned = match done {
            Some(r) => r.expect("reset"),
            None => admin
                .reset_consumer_group_offsets(group.clone(), [tp.clone()], to)
                .await
                .expect("retried"),
        };
        assert_eq!(planned.get(&tp), Some(&new));
        assert_eq!(committed_of(&client, &group, &tp).await, Some(new));
        if completed {
            break;
        }
    }

    for k in polls("delete_consumer_group_offsets") {
        admin
            .alter_consumer_group_offsets(group.clone(), at(k as i64))
            .await
            .unwrap();
        let call = admin.delete_consumer_group_offsets(group.clone(), [tp.clone()]);
        let done = poll_at_most("delete_consumer_group_offsets", k, call).await;
        let now = committed_of(&client, &group, &tp).await;
        assert!(
            now.is_none() || now == Some(k as i64),
            "delete_consumer_group_offsets dropped after {k} polls: {now:?}"
        );
        let completed = done.is_some();
        match done {
            Some(r) => r.expect("deleted"),
            None => admin
                .delete_consumer_group_offsets(group.clone(), [tp.clone()])
                .await
                .expect("retried"),
        }
        assert_eq!(committed_of(&client, &group, &tp).await, None);
        assert_eq!(committed_of(&client, &group, &tp1).await, Some(0));
        if completed {
            break;
        }
    }

    for k in polls("delete_groups") {
        let doomed = format!("{group}-doomed-{k}");
        admin
            .alter_consumer_group_offsets(doomed.clone(), at(1))
            .await
            .unwrap();
        let done = poll_at_most("delete_groups", k, admin.delete_groups([doomed.clone()])).await;
        let now = committed_of(&client, &doomed, &tp).await;
        assert!(
            now.is_none() || now == Some(1),
            "delete_groups dropped after {k} polls: {now:?}"
        );
        let completed = done.is_some();
        match done {
            Some(r) => r.expect("deleted"),
            None => retried(
                "delete_groups",
                k,
                admin.delete_groups([doomed.clone()]).await,
                ErrorCode::GroupIdNotFound,
            ),
        }
        assert_eq!(committed_of(&client, &doomed, &tp).await, None);
        if completed {
            break;
        }
    }
    assert_eq!(committed_of(&client, &group, &tp1).await, Some(0));
    broker.shutdown().await;
}

/// The ACLs naming `user`'s principal.
async fn acls_of(admin: &Admin, user: &str) -> Vec<AclBinding> {
    admin
        .describe_acls(&AclBindingFilter {
            principal: Some(format!("User:{user}")),
            ..AclBindingFilter::any()
        })
        .await
        .expect("describe acls")
}

/// The ACL and SCRAM changes of the admin client dropped after each poll:
/// each happened or did not, a retry succeeds without duplicating anything,
/// and the state is then the requested one.
#[tokio::test]
async fn admin_security_changes_dropped_after_each_poll() {
    let (broker, client) = admin_broker().await;
    let admin = Admin::new(&client);
    let topic = create_topic(&client, "every-admin-acl", 1).await;
    let base = topic_name("user");

    for k in polls("create_acls") {
        let user = format!("{base}-create-{k}");
        let call = admin.create_acls([acl_binding(&topic, &user)]);
        let done = poll_at_most("create_acls", k, call).await;
        assert!(
            acls_of(&admin, &user).await.len() <= 1,
            "create_acls dropped after {k} polls"
        );
        let completed = done.is_some();
        match done {
            Some(r) => r.expect("created"),
            None => admin
                .create_acls([acl_binding(&topic, &user)])
                .await
                .expect("retried"),
        }
        assert_eq!(
            acls_of(&admin, &user).await,
            vec![acl_binding(&topic, &user)],
            "exactly once"
        );
        if completed {
            break;
        }
    }

    for k in polls("delete_acls") {
        let user = format!("{base}-delete-{k}");
        admin
            .create_acls([acl_binding(&topic, &user)])
            .await
            .unwrap();
        let filter = AclBindingFilter {
            principal: Some(format!("User:{user}")),
            ..AclBindingFilter::any()
        };
        let done = poll_at_most("delete_acls", k, admin.delete_acls([filter.clone()])).await;
        let left = acls_of(&admin, &user).await.len();
        assert!(left <= 1, "delete_acls dropped after {k} polls");
        let completed = done.is_some();
        match done {
            Some(r) => assert_eq!(r.expect("deleted").len(), 1),
            None => {
                let deleted = admin.delete_acls([filter]).await.expect("retried");
                assert_eq!(deleted.len(), left, "a retry deletes what is left");
            }
        }
        assert!(acls_of(&admin, &user).await.is_empty());
        if completed {
            break;
        }
    }

    for k in polls("alter_user_scram_credentials") {
        let user = format!("{base}-scram-{k}");
        let change = || {
            [ScramChange::upsert(
                user.clone(),
                SaslMechanism::ScramSha256,
                "secret",
            )]
        };
        let done = poll_at_most(
            "alter_user_scram_credentials",
            k,
            admin.alter_user_scram_credentials(change()),
        )
        .await;
        let completed = done.is_some();
        match done {
            Some(r) => r.expect("altered"),
            None => admin
                .alter_user_scram_credentials(change())
                .await
                .expect("retried"),
        }
        let described = admin
            .describe_user_scram_credentials([user.clone()])
            .await
            .expect("described");
        assert_eq!(described.len(), 1);
        assert_eq!(described[0].credentials.len(), 1, "one credential, once");
        if completed {
            break;
        }
    }
    broker.shutdown().await;
}
