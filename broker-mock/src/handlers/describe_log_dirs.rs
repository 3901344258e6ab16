//! DescribeLogDirs (key 35), versions 1–4.
//!
//! A node has one log directory: its data directory, or, for an in-memory node,
//! `memory:/node-<id>`. Each partition replica the node hosts is listed with the
//! bytes of its batches and its offset lag (how far its log end offset is behind
//! its high watermark, as Kafka computes it: 0 on a leader). `topics` selects
//! partitions (null: all). From v4 the directory's volume reports its total and
//! usable bytes (statvfs on Unix); an in-memory node, or a volume that cannot be
//! queried, reports -1 ("unknown", the spec's default). With an authorizer, Describe on the cluster
//! is needed (else the top-level error and, before v3, each directory's, is
//! CLUSTER_AUTHORIZATION_FAILED).
//!
//! Deviations from Apache Kafka: no future logs
//! (AlterReplicaLogDirs is not supported); the listed partitions are bounded by
//! the node's own partition limits, so the answer cannot outgrow them.

use std::collections::BTreeMap;

use baton_protocol::acl::AclOperation;
use baton_protocol::messages::{
    DescribeLogDirsPartition, DescribeLogDirsRequest, DescribeLogDirsResponse,
    DescribeLogDirsResult, DescribeLogDirsTopic,
};
use baton_protocol::ErrorCode;

use crate::acl::RequestContext;
use crate::partition::Role;
use crate::state::BrokerState;

/// The node's one log directory, as DescribeLogDirs names it.
pub(crate) fn log_dir_name(state: &BrokerState) -> String {
    match &state.config.data_dir {
        Some(dir) => std::fs::canonicalize(dir)
            .unwrap_or_else(|_| dir.clone())
            .display()
            .to_string(),
        None => format!("memory:/node-{}", state.config.node_id),
    }
}

/// The total and usable bytes of the volume holding the node's data directory,
/// or -1 each when unknown.
fn volume_bytes(state: &BrokerState) -> (i64, i64) {
    #[cfg(unix)]
    if let Some(dir) = &state.config.data_dir {
        if let Ok(v) = rustix::fs::statvfs(dir) {
            let total = v.f_blocks.saturating_mul(v.f_frsize);
            let usable = v.f_bavail.saturating_mul(v.f_frsize);
            return (
                i64::try_from(total).unwrap_or(i64::MAX),
                i64::try_from(usable).unwrap_or(i64::MAX),
            );
        }
    }
    let _ = state;
    (-1, -1)
}

pub(crate) fn handle(
    state: &BrokerState,
    ctx: &RequestContext,
    req: DescribeLogDirsRequest,
    _version: i16,
) -> DescribeLogDirsResponse {
    if !state.allowed_on_cluster(ctx, AclOperation::Describe) {
        let code = ErrorCode::ClusterAuthorizationFailed.code();
        return DescribeLogDirsResponse {
            throttle_time_ms: 0,
            error_code: code,
            results: vec![DescribeLogDirsResult {
                error_code: code,
                log_dir: log_dir_name(state),
                topics: Vec::new(),
                total_bytes: -1,
                usable_bytes: -1,
            }],
        };
    }
    // Which partitions to list: `None` for all of a topic.
    let wanted: Option<BTreeMap<&str, &[i32]>> = req.topics.as_ref().map(|ts| {
        ts.iter()
            .map(|t| (t.topic.as_str(), t.partitions.as_slice()))
            .collect()
    });
    let mut topics = Vec::new();
    for topic in state.all_topics() {
        let selected = match &wanted {
            None => None,
            Some(w) => match w.get(topic.name.as_str()) {
                None => continue,
                Some(ps) => Some(*ps),
            },
        };
        let partitions: Vec<DescribeLogDirsPartition> = topic
            .partitions
            .iter()
            .filter(|p| selected.is_none_or(|ps| ps.contains(&p.index())))
            .filter_map(|p| {
                let st = p.lock();
                if st.is_deleted()
                    || matches!(st.role(), Role::NotReplica) && state.mode.is_replica()
                {
                    return None;
                }
                Some(DescribeLogDirsPartition {
                    partition_index: p.index(),
                    partition_size: i64::try_from(st.log().size_bytes()).unwrap_or(i64::MAX),
                    offset_lag: (st.high_watermark() - st.log_end_offset()).max(0),
                    is_future_key: false,
                })
            })
            .collect();
        if !partitions.is_empty() {
            topics.push(DescribeLogDirsTopic {
                name: topic.name.clone(),
                partitions,
            });
        }
    }
    let (total_bytes, usable_bytes) = volume_bytes(state);
    DescribeLogDirsResponse {
        throttle_time_ms: 0,
        error_code: 0,
        results: vec![DescribeLogDirsResult {
            error_code: 0,
            log_dir: log_dir_name(state),
            topics,
            total_bytes,
            usable_bytes,
        }],
    }
}
