//! KIP-890 part 1, the partition leader's defence against hanging transactions: a
//! transactional batch from a producer that has no open transaction on the
//! partition is appended only if the transaction coordinator confirms that the
//! partition is in the producer's ongoing transaction (AddPartitionsToTxn v4
//! `verify_only`: answered by this node's coordinator directly, or sent over an
//! inter-node [`Rpc`](crate::rpc::Rpc) to the coordinator's node). A batch that
//! arrives after its transaction ended (a late retry of an aborted transaction)
//! would otherwise open a transaction no marker will ever close, and hold the
//! partition's last stable offset back for good.
//!
//! Refusals, as Apache Kafka maps them: a partition not in the transaction (or a
//! coordinator-side refusal) is INVALID_TXN_STATE (TRANSACTION_ABORTABLE for
//! Produce v11+, once the broker serves it); a fenced producer is INVALID_PRODUCER_EPOCH; a coordinator that
//! cannot answer now is NOT_ENOUGH_REPLICAS, which the producer retries.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use baton_protocol::messages::{
    AddPartitionsToTxnRequest, AddPartitionsToTxnTopic, AddPartitionsToTxnTransaction,
    ProduceRequest,
};
use baton_protocol::record::batches;
use baton_protocol::ErrorCode;

use crate::state::BrokerState;

/// How long a verification over the network may take.
const VERIFY_TIMEOUT: Duration = Duration::from_secs(5);

/// Partitions of a produce refused by verification, with their codes.
pub(crate) type Refused = HashMap<(String, i32), ErrorCode>;

/// Verifies the transactional batches of `req` that open a transaction on a
/// partition this node leads; returns the partitions to refuse.
///
/// # Cancel safety
///
/// Cancel safe: it only asks; nothing is appended or changed.
pub(crate) async fn verify(
    state: &Arc<BrokerState>,
    req: &ProduceRequest,
    version: i16,
) -> Refused {
    let mut refused = Refused::new();
    let Some(id) = req.transactional_id.as_deref().filter(|id| !id.is_empty()) else {
        return refused;
    };
    // (producer id, epoch) → partitions needing the coordinator's word.
    let mut wanted: BTreeMap<(i64, i16), Vec<(String, i32)>> = BTreeMap::new();
    for t in &req.topic_data {
        let Some(topic) = state.topic(&t.name) else {
            continue;
        };
        for p in &t.partition_data {
            let Some(batch) = p
                .records
                .clone()
                .and_then(|r| batches(r.into_bytes()).next()?.ok())
                .filter(|b| b.is_transactional() && b.producer_id() >= 0)
            else {
                continue;
            };
            let Some(partition) = topic.partition(p.index) else {
                continue;
            };
            let open = {
                let st = partition.lock();
                !st.is_leader()
                    || st
                        .producers()
                        .get(batch.producer_id())
                        .is_some_and(|e| e.txn_first_offset().is_some())
            };
            if !open {
                wanted
                    .entry((batch.producer_id(), batch.producer_epoch()))
                    .or_default()
                    .push((t.name.clone(), p.index));
            }
        }
    }
    for ((pid, epoch), partitions) in wanted {
        let answers = ask(state, id, pid, epoch, &partitions).await;
        for (tp, code) in partitions.into_iter().zip(answers) {
            let code = match code {
                ErrorCode::None => continue,
                ErrorCode::ProducerFenced | ErrorCode::InvalidProducerEpoch => {
                    ErrorCode::InvalidProducerEpoch
                }
                ErrorCode::NotCoordinator
                | ErrorCode::CoordinatorNotAvailable
                | ErrorCode::CoordinatorLoadInProgress
                | ErrorCode::ConcurrentTransactions
                | ErrorCode::RequestTimedOut => ErrorCode::NotEnoughReplicas,
                _ if version >= 11 => ErrorCode::TransactionAbortable,
                _ => ErrorCode::InvalidTxnState,
            };
            tracing::debug!(transactional_id = id, topic = %tp.0, partition = tp.1, ?code, "transactional batch refused by verification");
            refused.insert(tp, code);
        }
    }
    refused
}

/// The coordinator's answer for each of `partitions`: NONE when it is in the
/// producer's ongoing transaction.
async fn ask(
    state: &Arc<BrokerState>,
    id: &str,
    pid: i64,
    epoch: i16,
    partitions: &[(String, i32)],
) -> Vec<ErrorCode> {
    let all = |code: ErrorCode| vec![code; partitions.len()];
    let node = match state.txn.coordinator_node(&**state, id) {
        None => state.config.node_id,
        Some(Ok(node)) => node,
        Some(Err(code)) => return all(code),
    };
    if node == state.config.node_id {
        let st = state.clone();
        let (id, parts) = (id.to_owned(), partitions.to_vec());
        let local =
            baton_env::spawn_blocking(move || st.txn.verify(&*st, &id, pid, epoch, &parts)).await;
        return match local {
            Ok(Ok(found)) => found
                .into_iter()
                .map(|ok| {
                    if ok {
                        ErrorCode::None
                    } else {
                        ErrorCode::InvalidTxnState
                    }
                })
                .collect(),
            Ok(Err(code)) => all(code),
            Err(_) => all(ErrorCode::CoordinatorNotAvailable),
        };
    }
    let Some(link) = state.mode.replica() else {
        return all(ErrorCode::CoordinatorNotAvailable);
    };
    let Some(addr) = link.broker_addr(node) else {
        return all(ErrorCode::CoordinatorNotAvailable);
    };
    let mut topics: Vec<AddPartitionsToTxnTopic> = Vec::new();
    for (t, p) in partitions {
        match topics.last_mut() {
            Some(last) if last.name == *t => last.partitions.push(*p),
            _ => topics.push(AddPartitionsToTxnTopic {
                name: t.clone(),
                partitions: vec![*p],
            }),
        }
    }
    let req = AddPartitionsToTxnRequest {
        transactions: vec![AddPartitionsToTxnTransaction {
            transactional_id: id.to_owned(),
            producer_id: pid,
            producer_epoch: epoch,
            verify_only: true,
            topics,
        }],
        ..Default::default()
    };
    let mut rpc = state.txn.peers.take(link, addr);
    let resp = match rpc.call(&req, 4, VERIFY_TIMEOUT).await {
        Ok(r) => {
            state.txn.peers.give(addr, rpc);
            r
        }
        Err(e) => {
            tracing::debug!(error = %e, "transaction verification failed");
            return all(ErrorCode::CoordinatorNotAvailable);
        }
    };
    if resp.error_code != 0 {
        return all(ErrorCode::from_code(resp.error_code));
    }
    let found: HashMap<(String, i32), i16> = resp
        .results_by_transaction
        .iter()
        .flat_map(|r| &r.topic_results)
        .flat_map(|t| {
            t.results_by_partition
                .iter()
                .map(move |p| ((t.name.clone(), p.partition_index), p.partition_error_code))
        })
        .collect();
    partitions
        .iter()
        .map(|tp| {
            found
                .get(tp)
                .map_or(ErrorCode::InvalidTxnState, |c| ErrorCode::from_code(*c))
        })
        .collect()
}
