//! Produce (key 0), versions 3–10.
//!
//! Each partition's records must be whole v2 batches (magic 2) with valid CRCs and
//! consistent record counts, or nothing of that partition is appended
//! (`CORRUPT_MESSAGE`, or `INVALID_RECORD` for control batches and count mismatches).
//! The broker assigns offsets and stamps its leader epoch in place (both outside the
//! CRC); with topic config `message.timestamp.type=LogAppendTime` it also stamps the
//! append time (rewriting the CRC). `acks` may be 0, 1 or -1 (on one node -1 equals
//! 1); anything else is `INVALID_REQUIRED_ACKS`. With `acks=0` no response is sent.
//! Unknown topics are `UNKNOWN_TOPIC_OR_PARTITION` unless the broker auto-creates
//! topics.
//!
//! Batches with a producer id are checked against the partition's producer state
//! before offsets are assigned (see [`crate::producer_state`]): a retried batch is
//! not appended again and gets its original base offset; a sequence gap is
//! `OUT_OF_ORDER_SEQUENCE_NUMBER`, a stale epoch `INVALID_PRODUCER_EPOCH`.
//! Transactional batches (attribute TRANSACTIONAL) follow the same rules and open
//! a transaction on the partition, which holds its last stable offset back until
//! the coordinator's marker (WriteTxnMarkers) ends it; a non-transactional batch
//! from a producer with an open transaction is `INVALID_TXN_STATE`, a
//! transactional batch without a producer id `INVALID_RECORD`, and a batch that
//! would open more transactions on a partition than
//! `BrokerLimits::max_producers_per_partition` `POLICY_VIOLATION` (with a message
//! naming the limit from v8; Kafka has no such limit).
//!
//! With an authorizer, every topic needs Write (else `TOPIC_AUTHORIZATION_FAILED`
//! on each of its partitions, and an unknown topic is not auto-created), and a
//! transactional id needs Write on it (else `TRANSACTIONAL_ID_AUTHORIZATION_FAILED`
//! on every partition), as in Kafka.
//!
//! A transactional batch that would open a transaction on the partition is first
//! verified with the transaction coordinator (KIP-890 part 1, `txn::verify`): if
//! the partition is not in the producer's ongoing transaction it is refused with
//! INVALID_TXN_STATE and nothing is appended.
//!
//! Deviations from Apache Kafka: several batches
//! per partition are accepted (Kafka takes exactly one from a v2 producer);
//! compressed batches are stored without decompressing their records;
//! `max.message.bytes` applies only where a topic sets it (Kafka's broker default
//! is 1 MiB): a batch larger than it is `MESSAGE_TOO_LARGE`; a null or empty
//! records field is `CORRUPT_MESSAGE`.
//!
//! This handler decodes the request, takes each partition's records out of the
//! frame, calls [`produce_batch`] per partition and builds the response; the
//! sequence of checks, the append and the `acks=all` wait live in
//! `partition/produce.rs`.

use baton_protocol::messages::{
    PartitionProduceResponse, ProduceRequest, ProduceResponse, ProduceResponseLeaderIdAndEpoch,
    ProduceResponseNodeEndpoint, TopicProduceResponse,
};
use baton_protocol::record::BatchSegments;
use baton_protocol::ErrorCode;
use bytes::{Buf, Bytes, BytesMut};
use tokio::sync::oneshot;

use baton_protocol::acl::{AclOperation, ResourceType};

use crate::acl::RequestContext;
use crate::partition::{produce_batch, replication_result, ProduceRecords, ProduceSettings};
use crate::replication::ProduceOutcome;
use crate::state::BrokerState;
use crate::txn::verify::Refused;

/// An `acks=all` partition waiting for the high watermark: (topic index, partition
/// index in the response, outcome).
pub(crate) type Wait = (usize, usize, oneshot::Receiver<ProduceOutcome>);

/// Why a produce is POLICY_VIOLATION: the only limit a produce can reach.
const OPEN_TRANSACTIONS_LIMIT: &str = "the partition has as many open transactions as \
     BrokerLimits::max_producers_per_partition allows";

fn failed(index: i32, code: ErrorCode) -> PartitionProduceResponse {
    PartitionProduceResponse {
        index,
        error_code: code.code(),
        base_offset: -1,
        log_append_time_ms: -1,
        log_start_offset: -1,
        error_message: (code == ErrorCode::PolicyViolation)
            .then(|| OPEN_TRANSACTIONS_LIMIT.to_owned()),
        ..Default::default()
    }
}

/// A frame's memory is reused for the log only when the frame fills most of its
/// allocation, so that a small request never pins a large read buffer.
fn fills_allocation(buf: &BytesMut) -> bool {
    buf.capacity() <= buf.len() + buf.len() / 8 + 64
}

/// Takes every partition's records out of `req`, indexed like its topics and
/// partitions. When `frame` (the request the records were decoded from) is the only
/// other holder of their memory and fills its allocation, the records become
/// disjoint, uniquely owned pieces of it, so the log stores them without a copy;
/// otherwise they stay shared slices and the log copies them.
fn take_records(req: &mut ProduceRequest, frame: Bytes) -> Vec<Vec<Option<ProduceRecords>>> {
    let mut out: Vec<Vec<Option<ProduceRecords>>> = Vec::with_capacity(req.topic_data.len());
    // (start in the frame, length, topic index, partition index)
    let mut spans = Vec::new();
    let base = frame.as_ptr() as usize;
    let mut all_in_frame = true;
    for (ti, t) in req.topic_data.iter_mut().enumerate() {
        let mut row = Vec::with_capacity(t.partition_data.len());
        for (pi, p) in t.partition_data.iter_mut().enumerate() {
            let records = p.records.take().map(BatchSegments::into_bytes);
            if let Some(r) = records.as_ref().filter(|r| !r.is_empty()) {
                let start = (r.as_ptr() as usize).wrapping_sub(base);
                if start
                    .checked_add(r.len())
                    .is_some_and(|end| end <= frame.len())
                {
                    spans.push((start, r.len(), ti, pi));
                } else {
                    all_in_frame = false;
                }
            }
            row.push(records.map(ProduceRecords::Shared));
        }
        out.push(row);
    }
    if !all_in_frame || spans.is_empty() {
        return out;
    }
    spans.sort_unstable();
    if spans.windows(2).any(|w| w[0].0 + w[0].1 > w[1].0) {
        return out;
    }
    // Let go of the shared slices, then try to own the frame.
    for &(_, _, ti, pi) in &spans {
        out[ti][pi] = None;
    }
    let frame = match frame.try_into_mut() {
        Ok(mut whole) if fills_allocation(&whole) => {
            let mut consumed = 0;
            for &(start, len, ti, pi) in &spans {
                whole.advance(start - consumed);
                out[ti][pi] = Some(ProduceRecords::Owned(whole.split_to(len)));
                consumed = start + len;
            }
            return out;
        }
        Ok(whole) => whole.freeze(),
        Err(frame) => frame,
    };
    for &(start, len, ti, pi) in &spans {
        out[ti][pi] = Some(ProduceRecords::Shared(frame.slice(start..start + len)));
    }
    out
}

/// Handles a decoded Produce request; `frame` is the request frame `req` was
/// decoded from (its records are slices of it).
pub(crate) fn handle(
    state: &BrokerState,
    ctx: &RequestContext,
    mut req: ProduceRequest,
    frame: Bytes,
    _version: i16,
    refused: &Refused,
) -> (Option<ProduceResponse>, Vec<Wait>) {
    let inputs = take_records(&mut req, frame);
    let transaction_refused = req.transactional_id.as_ref().is_some_and(|id| {
        !state.allowed(ctx, AclOperation::Write, ResourceType::TransactionalId, id)
    });
    let settings = ProduceSettings {
        acks: req.acks,
        deadline_ms: state
            .mode
            .replica()
            .map_or(0, |c| c.now_ms() + req.timeout_ms.max(0) as u64),
        clock: &state.clock,
    };
    let mut appended = false;
    let mut waits = Vec::new();
    let mut responses = Vec::with_capacity(req.topic_data.len());
    for (ti, (topic_data, topic_inputs)) in req.topic_data.into_iter().zip(inputs).enumerate() {
        let refusal = if transaction_refused {
            Some(ErrorCode::TransactionalIdAuthorizationFailed)
        } else if !state.allowed(
            ctx,
            AclOperation::Write,
            ResourceType::Topic,
            &topic_data.name,
        ) {
            Some(ErrorCode::TopicAuthorizationFailed)
        } else {
            None
        };
        if let Some(code) = refusal {
            responses.push(TopicProduceResponse {
                partition_responses: topic_data
                    .partition_data
                    .iter()
                    .map(|p| failed(p.index, code))
                    .collect(),
                name: topic_data.name,
            });
            continue;
        }
        let topic = if settings.acks_valid() {
            state.topic_or_auto_create(&topic_data.name, true)
        } else {
            None
        };
        let timestamp_type = topic
            .as_ref()
            .map(|t| t.config.timestamp_type())
            .unwrap_or_default();
        let compacted = topic.as_ref().is_some_and(|t| t.config.is_compacted());
        let max_batch = topic.as_ref().and_then(|t| t.config.max_message_bytes());
        let partition_responses = topic_data
            .partition_data
            .into_iter()
            .zip(topic_inputs)
            .enumerate()
            .map(|(pi, (pd, records))| {
                if !refused.is_empty() {
                    if let Some(code) = refused.get(&(topic_data.name.clone(), pd.index)) {
                        return failed(pd.index, *code);
                    }
                }
                let partition = topic.as_ref().and_then(|t| t.partition(pd.index));
                if compacted && partition.is_some() {
                    if let Err(code) = records.as_ref().map_or(Ok(()), |r| {
                        crate::log::compaction::check_keys(match r {
                            ProduceRecords::Owned(b) => b,
                            ProduceRecords::Shared(b) => b,
                        })
                    }) {
                        return failed(pd.index, code);
                    }
                }
                if let (Some(max), Some(r), true) = (max_batch, &records, partition.is_some()) {
                    let bytes = match r {
                        ProduceRecords::Owned(b) => &b[..],
                        ProduceRecords::Shared(b) => &b[..],
                    };
                    if largest_batch(bytes) > max {
                        return failed(pd.index, ErrorCode::MessageTooLarge);
                    }
                }
                match produce_batch(partition.map(|p| &**p), records, timestamp_type, settings) {
                    Ok(batch) => {
                        appended = true;
                        if let Some(rx) = batch.replicated {
                            waits.push((ti, pi, rx));
                        }
                        PartitionProduceResponse {
                            index: pd.index,
                            error_code: 0,
                            base_offset: batch.info.base_offset,
                            log_append_time_ms: batch.info.log_append_time_ms,
                            log_start_offset: batch.info.log_start_offset,
                            ..Default::default()
                        }
                    }
                    Err(code) => {
                        if code == ErrorCode::CorruptMessage {
                            state
                                .metrics
                                .corruption(crate::metrics::CorruptionSite::Produce);
                        }
                        failed(pd.index, code)
                    }
                }
            })
            .collect();
        responses.push(TopicProduceResponse {
            name: topic_data.name,
            partition_responses,
        });
    }
    if appended {
        state.notify_append();
    }
    if req.acks == 0 {
        return (None, Vec::new());
    }
    let response = ProduceResponse {
        responses,
        throttle_time_ms: 0,
        ..Default::default()
    };
    (Some(response), waits)
}

/// KIP-951: in v10+ responses, a partition answered `NOT_LEADER_OR_FOLLOWER` or
/// `FENCED_LEADER_EPOCH` names the leader and epoch this node knows from the cluster
/// metadata, and the response carries those leaders' endpoints, so a client can
/// retry at the new leader without a Metadata round trip. Nothing is added when the
/// partition has no leader, or when the metadata still names this node (its own view
/// is about to change; a hint pointing back here would only bounce the client).
/// `listener` is the index of the listener the request arrived on: the hints name
/// the leaders by their endpoints of that listener.
pub(crate) fn add_leader_hints(
    state: &BrokerState,
    response: &mut ProduceResponse,
    version: i16,
    listener: usize,
) {
    if version < 10 {
        return;
    }
    let Some(link) = state.mode.replica() else {
        return;
    };
    let img = link.image();
    let mut leaders = std::collections::BTreeSet::new();
    for t in &mut response.responses {
        let Some(topic) = img.topic_by_name(&t.name) else {
            continue;
        };
        for p in &mut t.partition_responses {
            let code = ErrorCode::from_code(p.error_code);
            if !matches!(
                code,
                ErrorCode::NotLeaderOrFollower | ErrorCode::FencedLeaderEpoch
            ) {
                continue;
            }
            let Some(info) = img.partition(topic.topic_id, p.index) else {
                continue;
            };
            if info.leader < 0 || info.leader == state.config.node_id {
                continue;
            }
            p.current_leader = ProduceResponseLeaderIdAndEpoch {
                leader_id: info.leader,
                leader_epoch: info.leader_epoch,
            };
            leaders.insert(info.leader);
        }
    }
    response.node_endpoints = leaders
        .into_iter()
        .filter_map(|id| img.broker(id))
        .filter_map(|b| {
            let (host, port) = b.endpoint(state.listener_name(listener))?;
            Some(ProduceResponseNodeEndpoint {
                node_id: b.broker_id,
                host: host.to_owned(),
                port: i32::from(port),
                rack: None,
            })
        })
        .collect();
}

/// Fills in the outcome of each `acks=all` wait (a lost waiter counts as
/// NOT_LEADER_OR_FOLLOWER: the leadership ended).
pub(crate) async fn finish(
    mut response: ProduceResponse,
    waits: Vec<Wait>,
    timeout_ms: i32,
) -> ProduceResponse {
    for (ti, pi, rx) in waits {
        let code = replication_result(rx, timeout_ms).await;
        if code != ErrorCode::None {
            if let Some(p) = response
                .responses
                .get_mut(ti)
                .and_then(|t| t.partition_responses.get_mut(pi))
            {
                p.error_code = code.code();
            }
        }
    }
    response
}

/// The size of the largest record batch in `records` (each batch is its 12-byte
/// offset and length prefix plus the length), walking the length fields only; a
/// truncated tail counts as what is present.
fn largest_batch(records: &[u8]) -> usize {
    let mut rest = records;
    let mut largest = 0;
    while rest.len() >= 12 {
        let len = i32::from_be_bytes([rest[8], rest[9], rest[10], rest[11]]);
        let size = 12usize.saturating_add(usize::try_from(len).unwrap_or(0));
        largest = largest.max(size.min(rest.len()));
        rest = &rest[size.min(rest.len())..];
    }
    largest.max(rest.len())
}

#[cfg(test)]
mod tests {
    use baton_protocol::envelope;
    use baton_protocol::messages::{PartitionProduceData, TopicProduceData};
    use baton_protocol::record::RecordBatchBuilder;

    use super::*;

    fn batch(values: &[&str]) -> Bytes {
        let mut b = RecordBatchBuilder::new(0);
        for v in values {
            b.push(0, None, Some(v.as_bytes()), &[]);
        }
        b.finish()
    }

    /// A request frame body (no size prefix) in `buf`, with two topics and three
    /// partitions, one of them without records.
    fn encode(buf: &mut BytesMut) -> Vec<Vec<Option<Bytes>>> {
        let records = vec![
            vec![Some(batch(&["a", "b"])), None],
            vec![Some(batch(&["c"]))],
        ];
        let req = ProduceRequest {
            transactional_id: None,
            acks: 1,
            timeout_ms: 1000,
            topic_data: records
                .iter()
                .enumerate()
                .map(|(t, parts)| TopicProduceData {
                    name: format!("t{t}"),
                    partition_data: parts
                        .iter()
                        .enumerate()
                        .map(|(p, r)| PartitionProduceData {
                            index: p as i32,
                            records: r.clone().map(Into::into),
                        })
                        .collect(),
                })
                .collect(),
        };
        let frame = envelope::encode_request(1, Some("test"), &req, 9).unwrap();
        buf.extend_from_slice(&frame[4..]);
        records
    }

    /// Per topic, per partition: (owned?, bytes).
    type Seen = Vec<Vec<Option<(bool, Vec<u8>)>>>;

    fn contents(inputs: &[Vec<Option<ProduceRecords>>]) -> Seen {
        inputs
            .iter()
            .map(|row| {
                row.iter()
                    .map(|i| {
                        i.as_ref().map(|i| match i {
                            ProduceRecords::Owned(b) => (true, b.to_vec()),
                            ProduceRecords::Shared(b) => (false, b.to_vec()),
                        })
                    })
                    .collect()
            })
            .collect()
    }

    fn expect(records: &[Vec<Option<Bytes>>], owned: bool) -> Seen {
        records
            .iter()
            .map(|row| {
                row.iter()
                    .map(|r| r.as_ref().map(|r| (owned, r.to_vec())))
                    .collect()
            })
            .collect()
    }

    #[test]
    fn a_frame_that_owns_its_memory_gives_owned_records() {
        let mut buf = BytesMut::new();
        let records = encode(&mut buf);
        // Exactly sized and not shared.
        let frame = Bytes::from(buf.to_vec());
        let (_, mut req) = crate::wire::decode::<ProduceRequest>(frame.clone(), 9).unwrap();
        let inputs = take_records(&mut req, frame);
        assert_eq!(contents(&inputs), expect(&records, true));
    }

    #[test]
    fn a_shared_frame_gives_shared_records() {
        let mut buf = BytesMut::new();
        let records = encode(&mut buf);
        let frame = Bytes::from(buf.to_vec());
        let other_holder = frame.clone();
        let (_, mut req) = crate::wire::decode::<ProduceRequest>(frame.clone(), 9).unwrap();
        let inputs = take_records(&mut req, frame);
        assert_eq!(contents(&inputs), expect(&records, false));
        drop(other_holder);
    }

    #[test]
    fn a_frame_in_a_much_larger_allocation_is_copied() {
        let mut buf = BytesMut::with_capacity(1 << 20);
        let records = encode(&mut buf);
        let frame = buf.freeze();
        let (_, mut req) = crate::wire::decode::<ProduceRequest>(frame.clone(), 9).unwrap();
        let inputs = take_records(&mut req, frame);
        assert_eq!(contents(&inputs), expect(&records, false));
    }
}
