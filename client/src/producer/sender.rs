//! The sender task: drains ready batches, groups them per leader into Produce
//! requests, and settles each record's outcome.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use baton_protocol::messages::{
    PartitionProduceData, ProduceRequest, ProduceResponse, TopicProduceData,
};
use baton_protocol::ErrorCode;
use tokio::time::Instant;

use super::accumulator::Batch;
use super::{Acks, AttemptError, ProduceError, RecordMetadata, Shared};
use crate::client::ClientError;

/// Runs until the producer is closed and holds no more records.
pub(crate) async fn run(shared: Arc<Shared>) {
    let cfg = shared.config.clone();
    loop {
        let notified = shared.wake.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        let (ready, expired, next, done) = {
            let mut acc = shared.lock();
            let (ready, expired, next) = acc.drain(Instant::now(), cfg.linger, cfg.batch_size);
            let done = acc.closed && acc.is_idle() && ready.is_empty();
            (ready, expired, next, done)
        };
        for batch in expired {
            fail_expired(&shared, batch);
        }
        if done {
            return;
        }
        if !ready.is_empty() {
            dispatch(&shared, ready).await;
            continue;
        }
        match next {
            Some(at) => {
                tokio::select! {
                    _ = &mut notified => {}
                    _ = tokio::time::sleep_until(at) => {}
                }
            }
            None => notified.await,
        }
    }
}

/// Fails every record of a batch whose delivery deadline passed.
fn fail_expired(shared: &Shared, batch: Batch) {
    let Batch {
        topic,
        partition,
        records,
        attempts,
        last_error,
        ..
    } = batch;
    for p in records {
        let _ = p.tx.send(Err(ProduceError::DeliveryTimeout {
            topic: topic.to_string(),
            partition,
            timeout: shared.config.delivery_timeout,
            attempts,
            last_error: last_error.clone().map(Box::new),
            record: Box::new(p.record),
        }));
    }
}

/// Finds each batch's leader and starts one request task per leader (more if the
/// batches exceed `max_request_size` together).
async fn dispatch(shared: &Arc<Shared>, ready: Vec<Batch>) {
    let mut groups: BTreeMap<i32, Vec<(Batch, u64)>> = BTreeMap::new();
    for batch in ready {
        match shared
            .client
            .inner
            .leader(&batch.topic, batch.partition)
            .await
        {
            Ok((leader, generation)) => groups.entry(leader).or_default().push((batch, generation)),
            Err(e) => settle_failure(shared, batch, None, AttemptError::Client(e)),
        }
    }
    for (leader, batches) in groups {
        let mut chunk = Vec::new();
        let mut size = 0;
        for (mut batch, generation) in batches {
            let len = batch
                .encoded(shared.config.compression, shared.config.compression_level)
                .len();
            if !chunk.is_empty() && size + len > shared.config.max_request_size {
                tokio::spawn(send_request(
                    shared.clone(),
                    leader,
                    std::mem::take(&mut chunk),
                ));
                size = 0;
            }
            size += len;
            chunk.push((batch, generation));
        }
        if !chunk.is_empty() {
            tokio::spawn(send_request(shared.clone(), leader, chunk));
        }
    }
}

/// Sends one Produce request with `batches` to `leader` and settles each batch.
async fn send_request(shared: Arc<Shared>, leader: i32, mut batches: Vec<(Batch, u64)>) {
    let cfg = &shared.config;
    let mut topics: BTreeMap<Arc<str>, Vec<PartitionProduceData>> = BTreeMap::new();
    for (batch, _) in batches.iter_mut() {
        batch.attempts += 1;
        // Encoded (and compressed) at the first attempt; a retry gets the same bytes.
        let records = batch.encoded(cfg.compression, cfg.compression_level);
        topics
            .entry(batch.topic.clone())
            .or_default()
            .push(PartitionProduceData {
                index: batch.partition,
                records: Some(records),
            });
    }
    let req = ProduceRequest {
        transactional_id: None,
        acks: cfg.acks.wire(),
        timeout_ms: cfg.request_timeout.as_millis().min(i32::MAX as u128) as i32,
        topic_data: topics
            .into_iter()
            .map(|(name, partition_data)| TopicProduceData {
                name: name.to_string(),
                partition_data,
            })
            .collect(),
    };
    let result: Result<Option<ProduceResponse>, ClientError> = async {
        let conn = shared.client.inner.node_connection(leader).await?;
        if cfg.acks == Acks::None {
            conn.send_no_response(&req).await?;
            Ok(None)
        } else {
            // A little longer than the broker's own timeout, so that the broker's
            // REQUEST_TIMED_OUT answer wins the race when it comes.
            let timeout = cfg.request_timeout + Duration::from_secs(1);
            Ok(Some(conn.send_with_timeout(&req, timeout).await?))
        }
    }
    .await;
    match result {
        Err(e) => {
            for (batch, generation) in batches {
                settle_failure(
                    &shared,
                    batch,
                    Some(generation),
                    AttemptError::Client(e.clone()),
                );
            }
        }
        Ok(None) => {
            for (batch, _) in batches {
                settle_success(&shared, batch, -1, -1);
            }
        }
        Ok(Some(resp)) => {
            let mut by_partition = HashMap::new();
            for t in resp.responses {
                for p in t.partition_responses {
                    by_partition.insert((t.name.clone(), p.index), p);
                }
            }
            for (batch, generation) in batches {
                match by_partition.remove(&(batch.topic.to_string(), batch.partition)) {
                    None => settle_failure(
                        &shared,
                        batch,
                        Some(generation),
                        AttemptError::Broker {
                            code: ErrorCode::NetworkException,
                            message: Some("partition missing from the Produce response".into()),
                        },
                    ),
                    Some(p) if p.error_code == 0 => {
                        settle_success(&shared, batch, p.base_offset, p.log_append_time_ms)
                    }
                    Some(p) => settle_failure(
                        &shared,
                        batch,
                        Some(generation),
                        AttemptError::Broker {
                            code: ErrorCode::from_code(p.error_code),
                            message: p.error_message,
                        },
                    ),
                }
            }
        }
    }
}

/// Reports every record of a delivered batch, then frees its partition.
fn settle_success(shared: &Shared, batch: Batch, base_offset: i64, log_append_time: i64) {
    let topic = batch.topic.clone();
    let partition = batch.partition;
    let Batch { records, done, .. } = batch;
    for (i, p) in records.into_iter().enumerate() {
        let offset = if base_offset >= 0 {
            base_offset + i as i64
        } else {
            -1
        };
        let timestamp = if log_append_time >= 0 {
            log_append_time
        } else {
            p.timestamp
        };
        let _ = p.tx.send(Ok(RecordMetadata {
            topic: topic.to_string(),
            partition,
            offset,
            timestamp,
            record: p.record,
        }));
    }
    drop(done);
    shared.lock().finish_attempt(&topic, partition, None);
    shared.wake.notify_one();
}

/// A failed attempt: retriable errors put the batch back at the front of its queue
/// after a backoff (the sender expires it at its deadline); others fail its records.
fn settle_failure(shared: &Shared, mut batch: Batch, generation: Option<u64>, error: AttemptError) {
    let topic = batch.topic.clone();
    let partition = batch.partition;
    if error.is_retriable() {
        tracing::debug!(%topic, partition, attempts = batch.attempts, %error, "retrying batch");
        if let Some(g) = generation {
            shared.client.inner.metadata.invalidate(g);
        }
        let shift = batch.attempts.saturating_sub(1).min(10);
        let backoff =
            (shared.config.retry_backoff * (1u32 << shift)).min(shared.config.retry_backoff_max);
        batch.retry_at = Some(Instant::now() + backoff);
        batch.last_error = Some(error);
        shared.lock().finish_attempt(&topic, partition, Some(batch));
    } else {
        let Batch { records, done, .. } = batch;
        for p in records {
            let record = Box::new(p.record);
            let e = match &error {
                AttemptError::Client(source) => ProduceError::Client {
                    topic: topic.to_string(),
                    partition: Some(partition),
                    source: source.clone(),
                    record,
                },
                AttemptError::Broker { code, message } => ProduceError::Rejected {
                    topic: topic.to_string(),
                    partition,
                    code: *code,
                    message: message.clone(),
                    record,
                },
            };
            let _ = p.tx.send(Err(e));
        }
        drop(done);
        shared.lock().finish_attempt(&topic, partition, None);
    }
    shared.wake.notify_one();
}
