//! Idempotent produce over TCP with raw protocol frames: InitProducerId, retries
//! deduplicated with their original offsets, sequence gaps and stale epochs
//! rejected, and deduplication that survives a restart and a crash.

use baton_broker::{Broker, BrokerConfig};
use baton_protocol::messages::*;
use baton_protocol::record::RecordBatchBuilder;
use baton_protocol::ErrorCode;
use baton_testkit::wire::*;
use bytes::Bytes;

/// A batch of `values` from producer `pid` at `epoch`, first sequence `seq`.
fn idempotent(pid: i64, epoch: i16, seq: i32, values: &[&str]) -> Bytes {
    let mut b = RecordBatchBuilder::new(1_000).producer(pid, epoch, seq);
    for (i, v) in values.iter().enumerate() {
        b.push(1_000 + i as i64, None, Some(v.as_bytes()), &[]);
    }
    b.finish()
}

/// Produces `records` (acks=all, v9) and returns (error code, base offset).
async fn produce(c: &mut Client, topic: &str, records: Bytes) -> (i16, i64) {
    let resp = c.call(&produce_req(topic, 0, -1, records), 9).await;
    let p = &resp.responses[0].partition_responses[0];
    (p.error_code, p.base_offset)
}

async fn stored_values(c: &mut Client, topic: &str) -> Vec<String> {
    let resp = c.call(&fetch_req(topic, 0, 0, 0, 0), 12).await;
    values(&resp.responses[0].partitions[0].records)
}

async fn init_producer_id(c: &mut Client, transactional_id: Option<&str>) -> (i16, i64, i16) {
    let req = InitProducerIdRequest {
        transactional_id: transactional_id.map(str::to_owned),
        transaction_timeout_ms: 60_000,
        producer_id: -1,
        producer_epoch: -1,
    };
    let resp = c.call(&req, 4).await;
    (resp.error_code, resp.producer_id, resp.producer_epoch)
}

#[tokio::test]
async fn init_producer_id_versions_and_transactional_ids() {
    let broker = Broker::start(BrokerConfig::in_memory()).await.unwrap();
    let mut c = Client::connect(broker.local_addr()).await;
    let apis = c.call(&ApiVersionsRequest::default(), 3).await;
    let init = apis.api_keys.iter().find(|a| a.api_key == 22).unwrap();
    assert_eq!((init.min_version, init.max_version), (0, 5));

    let mut ids = Vec::new();
    for version in 0..=5 {
        let req = InitProducerIdRequest {
            transactional_id: None,
            transaction_timeout_ms: -1,
            // Naming a current id (v3+) still yields a new one, as in Kafka.
            producer_id: if version >= 3 { 77 } else { -1 },
            producer_epoch: if version >= 3 { 4 } else { -1 },
        };
        let resp = c.call(&req, version).await;
        assert_eq!(resp.error_code, 0, "v{version}");
        assert_eq!(resp.producer_epoch, 0, "v{version}");
        assert!(resp.producer_id >= 0);
        ids.push(resp.producer_id);
    }
    let mut unique = ids.clone();
    unique.sort_unstable();
    unique.dedup();
    assert_eq!(unique.len(), ids.len(), "ids {ids:?}");

    // A transactional id goes to the transaction coordinator (broker/transactions.rs).
    let (code, pid, epoch) = init_producer_id(&mut c, Some("txn")).await;
    assert_eq!((code, epoch), (0, 0));
    assert!(pid >= 0);
    let (code, _, _) = init_producer_id(&mut c, Some("")).await;
    assert_eq!(code, ErrorCode::InvalidRequest.code());
    broker.shutdown().await;
}

#[tokio::test]
async fn retries_are_deduplicated_across_restarts() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = BrokerConfig::on_disk(dir.path()).with_segment_bytes(400);
    let broker = Broker::start(cfg.clone()).await.unwrap();
    let mut c = Client::connect(broker.local_addr()).await;
    let topic = topic_name("idem");
    create_topic(&mut c, &topic, 1).await;

    let (code, pid, epoch) = init_producer_id(&mut c, None).await;
    assert_eq!((code, epoch), (0, 0));

    let first = idempotent(pid, 0, 0, &["a", "b", "c"]);
    let second = idempotent(pid, 0, 3, &["d", "e"]);
    assert_eq!(produce(&mut c, &topic, first.clone()).await, (0, 0));
    // The same bytes again: the original offset, nothing appended.
    assert_eq!(produce(&mut c, &topic, first.clone()).await, (0, 0));
    assert_eq!(produce(&mut c, &topic, second.clone()).await, (0, 3));
    assert_eq!(produce(&mut c, &topic, first.clone()).await, (0, 0));
    assert_eq!(produce(&mut c, &topic, second.clone()).await, (0, 3));
    // A sequence gap.
    let gap = idempotent(pid, 0, 9, &["x"]);
    let (code, _) = produce(&mut c, &topic, gap).await;
    assert_eq!(code, ErrorCode::OutOfOrderSequenceNumber.code());
    // An unknown producer that does not start at 0.
    let stranger = idempotent(pid + 1_000_000, 0, 5, &["x"]);
    let (code, _) = produce(&mut c, &topic, stranger).await;
    assert_eq!(code, ErrorCode::OutOfOrderSequenceNumber.code());
    assert_eq!(
        stored_values(&mut c, &topic).await,
        ["a", "b", "c", "d", "e"]
    );
    broker.shutdown().await;

    // A clean restart: the state comes back from the log.
    let broker = Broker::start(cfg.clone()).await.unwrap();
    let mut c = Client::connect(broker.local_addr()).await;
    assert_eq!(produce(&mut c, &topic, second.clone()).await, (0, 3));
    assert_eq!(produce(&mut c, &topic, first.clone()).await, (0, 0));
    let third = idempotent(pid, 0, 5, &["f"]);
    assert_eq!(produce(&mut c, &topic, third.clone()).await, (0, 5));
    // Ids allocated after the restart are new.
    let (_, pid2, _) = init_producer_id(&mut c, None).await;
    assert_ne!(pid2, pid);
    drop(broker); // a crash: no shutdown, no flush

    let broker = Broker::start(cfg).await.unwrap();
    let mut c = Client::connect(broker.local_addr()).await;
    assert_eq!(produce(&mut c, &topic, third).await, (0, 5));
    // A newer epoch must restart at sequence 0, and then fences the old one.
    let (code, _) = produce(&mut c, &topic, idempotent(pid, 1, 6, &["g"])).await;
    assert_eq!(code, ErrorCode::OutOfOrderSequenceNumber.code());
    assert_eq!(
        produce(&mut c, &topic, idempotent(pid, 1, 0, &["g"])).await,
        (0, 6)
    );
    let (code, _) = produce(&mut c, &topic, idempotent(pid, 0, 6, &["h"])).await;
    assert_eq!(code, ErrorCode::InvalidProducerEpoch.code());
    assert_eq!(
        stored_values(&mut c, &topic).await,
        ["a", "b", "c", "d", "e", "f", "g"]
    );
    broker.shutdown().await;
}
