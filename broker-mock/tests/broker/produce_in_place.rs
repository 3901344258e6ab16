//! Produce requests of many sizes and shapes over real TCP: large frames (read into a
//! buffer of their own and stored without a copy), small pipelined frames (sharing the
//! read buffer, copied into the log), frames trickled in small pieces, several
//! partitions and batches per request. What is fetched back must be exactly what was
//! sent, with the base offset and leader epoch filled in and a valid CRC.

use std::time::Duration;

use baton_broker::{Broker, BrokerConfig};
use baton_protocol::messages::*;
use baton_protocol::record::{batches, RecordBatch, RecordBatchBuilder, TimestampType};
use baton_testkit::wire::*;
use bytes::{Bytes, BytesMut};
use tokio::io::AsyncWriteExt;

/// A batch of `n` records with values of up to `max_value` bytes.
fn batch(rng: &mut Rng, n: usize, max_value: u64) -> Bytes {
    let mut b = RecordBatchBuilder::new(1_700_000_000_000);
    for i in 0..n {
        let len = rng.below(max_value + 1) as usize;
        let value: Vec<u8> = (0..len).map(|j| (i * 31 + j) as u8).collect();
        let key = format!("k{}", rng.below(1000));
        b.push(
            1_700_000_000_000 + i as i64,
            Some(key.as_bytes()),
            Some(&value),
            &[],
        );
    }
    b.finish()
}

/// One request: for each partition, the batches sent.
fn request(
    rng: &mut Rng,
    topic: &str,
    partitions: i32,
    large: bool,
) -> (ProduceRequest, Vec<(i32, Vec<Bytes>)>) {
    let max_value = if large { 6000 } else { 200 };
    let mut sent = Vec::new();
    let mut data = Vec::new();
    let mut chosen: Vec<i32> = (0..partitions).collect();
    // A random, non-empty subset of partitions in random order.
    for i in (1..chosen.len()).rev() {
        chosen.swap(i, rng.below(i as u64 + 1) as usize);
    }
    chosen.truncate(1 + rng.below(partitions as u64) as usize);
    for p in chosen {
        let n_batches = 1 + rng.below(3) as usize;
        let mut blob = BytesMut::new();
        let mut list = Vec::new();
        for _ in 0..n_batches {
            let n = 1 + rng.below(40) as usize;
            let b = batch(rng, n, max_value);
            blob.extend_from_slice(&b);
            list.push(b);
        }
        data.push(PartitionProduceData {
            index: p,
            records: Some(blob.freeze().into()),
        });
        sent.push((p, list));
    }
    let req = ProduceRequest {
        transactional_id: None,
        acks: 1,
        timeout_ms: 5000,
        topic_data: vec![TopicProduceData {
            name: topic.into(),
            partition_data: data,
        }],
    };
    (req, sent)
}

/// Sends `frame` whole, or in small pieces with pauses so the broker reads it in parts.
async fn write_frame(c: &mut Client, rng: &mut Rng, frame: &[u8], trickle: bool) {
    if !trickle {
        c.send_raw(frame).await.unwrap();
        return;
    }
    let mut at = 0;
    while at < frame.len() {
        let n = (1 + rng.below(30_000) as usize).min(frame.len() - at);
        c.send_raw(&frame[at..at + n]).await.unwrap();
        c.stream().flush().await.unwrap();
        at += n;
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

/// Every batch of `partition`, fetched from offset 0.
async fn fetch_all(c: &mut Client, topic: &str, partition: i32) -> Vec<Bytes> {
    let mut out = Vec::new();
    let mut from = 0;
    loop {
        let resp = c.call(&fetch_req(topic, partition, from, 0, 0), 12).await;
        let p = &resp.responses[0].partitions[0];
        assert_eq!(p.error_code, 0);
        let got: Vec<Bytes> = batches(p.records.clone().unwrap_or_default())
            .map(|b| b.unwrap().into_bytes())
            .collect();
        if got.is_empty() {
            return out;
        }
        for b in got {
            from = RecordBatch::parse(b.clone()).unwrap().next_offset();
            out.push(b);
        }
        if from >= p.high_watermark {
            return out;
        }
    }
}

async fn round_trip(config: BrokerConfig, log_append_time: bool) {
    let seed = seed();
    let mut rng = Rng::new(seed);
    let broker = Broker::start(config).await.unwrap();
    let mut c = Client::connect(broker.local_addr()).await;
    let topic = topic_name("in-place");
    let partitions = 3;
    let configs: &[(&str, &str)] = if log_append_time {
        &[("message.timestamp.type", "LogAppendTime")]
    } else {
        &[]
    };
    let r = c.call(&create_req(&topic, partitions, configs), 7).await;
    assert_eq!(r.topics[0].error_code, 0);

    // Per partition: (expected base offset, batch as sent).
    let mut expected: Vec<Vec<(i64, Bytes)>> = vec![Vec::new(); partitions as usize];
    let mut next = vec![0i64; partitions as usize];
    for round in 0..24 {
        // Pipelined: several frames written at once, then their responses read.
        let frames = 1 + rng.below(4) as usize;
        let large = round % 3 != 0;
        let trickle = round % 4 == 1;
        let mut wire = BytesMut::new();
        let mut pending = Vec::new();
        for f in 0..frames {
            let corr = round * 10 + f as i32;
            let (req, sent) = request(&mut rng, &topic, partitions, large);
            wire.extend_from_slice(&Client::encode(corr, &req, 9));
            pending.push((corr, sent));
        }
        write_frame(&mut c, &mut rng, &wire, trickle).await;
        for (corr, sent) in pending {
            let (got, resp) = c.recv::<ProduceRequest>(9).await;
            assert_eq!(got, corr, "seed {seed}");
            let parts = &resp.responses[0].partition_responses;
            for (p, list) in sent {
                let pr = parts.iter().find(|r| r.index == p).unwrap();
                assert_eq!(pr.error_code, 0, "seed {seed}");
                let pi = p as usize;
                assert_eq!(pr.base_offset, next[pi], "seed {seed}");
                for b in list {
                    let count = RecordBatch::parse(b.clone()).unwrap().record_count() as i64;
                    expected[pi].push((next[pi], b));
                    next[pi] += count;
                }
            }
        }
    }

    for p in 0..partitions {
        let stored = fetch_all(&mut c, &topic, p).await;
        let want = &expected[p as usize];
        assert_eq!(stored.len(), want.len(), "seed {seed} partition {p}");
        for (got, (base, sent)) in stored.iter().zip(want) {
            let parsed = RecordBatch::parse(got.clone()).unwrap();
            parsed.verify_crc().unwrap();
            assert_eq!(parsed.base_offset(), *base, "seed {seed}");
            assert_eq!(parsed.partition_leader_epoch(), 0, "seed {seed}");
            assert_eq!(got.len(), sent.len(), "seed {seed}");
            if log_append_time {
                assert_eq!(parsed.timestamp_type(), TimestampType::LogAppendTime);
                // Attributes, max timestamp and CRC were rewritten; the records were not.
                assert_eq!(got[61..], sent[61..], "seed {seed}");
            } else {
                // Only the base offset and leader epoch differ from what was sent.
                assert_eq!(got[8..12], sent[8..12], "seed {seed}");
                assert_eq!(got[16..], sent[16..], "seed {seed}");
            }
        }
    }
    broker.shutdown().await;
}

#[tokio::test]
async fn produced_batches_come_back_exactly_in_memory() {
    round_trip(BrokerConfig::in_memory(), false).await;
}

#[tokio::test]
async fn produced_batches_come_back_exactly_on_disk() {
    let dir = tempfile::tempdir().unwrap();
    round_trip(BrokerConfig::on_disk(dir.path()), false).await;
}

#[tokio::test]
async fn log_append_time_is_stamped_on_large_frames() {
    round_trip(BrokerConfig::in_memory(), true).await;
}

#[tokio::test]
async fn a_corrupt_batch_in_a_large_frame_leaves_the_other_partitions_stored() {
    let broker = Broker::start(BrokerConfig::in_memory()).await.unwrap();
    let mut c = Client::connect(broker.local_addr()).await;
    let topic = topic_name("in-place-corrupt");
    create_topic(&mut c, &topic, 2).await;
    let mut rng = Rng::new(7);
    let good = batch(&mut rng, 30, 5000);
    let mut bad = BytesMut::from(&batch(&mut rng, 30, 5000)[..]);
    let n = bad.len();
    bad[n - 3] ^= 0x55;
    let req = ProduceRequest {
        transactional_id: None,
        acks: 1,
        timeout_ms: 5000,
        topic_data: vec![TopicProduceData {
            name: topic.clone(),
            partition_data: vec![
                PartitionProduceData {
                    index: 0,
                    records: Some(bad.freeze().into()),
                },
                PartitionProduceData {
                    index: 1,
                    records: Some(good.clone().into()),
                },
            ],
        }],
    };
    let resp = c.call(&req, 9).await;
    let parts = &resp.responses[0].partition_responses;
    assert_eq!(
        parts[0].error_code,
        baton_protocol::ErrorCode::CorruptMessage.code()
    );
    assert_eq!((parts[1].error_code, parts[1].base_offset), (0, 0));
    assert!(fetch_all(&mut c, &topic, 0).await.is_empty());
    let stored = fetch_all(&mut c, &topic, 1).await;
    assert_eq!(stored.len(), 1);
    assert_eq!(stored[0][16..], good[16..]);
    broker.shutdown().await;
}
