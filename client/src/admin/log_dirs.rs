//! [`Admin::describe_log_dirs`]: DescribeLogDirs (API key 35, KIP-113, KIP-827),
//! sent to each broker asked about.

use std::collections::BTreeMap;

use baton_protocol::messages::DescribeLogDirsRequest;
use baton_protocol::ErrorCode;

use super::retry::retriable_code;
use super::{Admin, AdminError};

/// One partition replica in a log directory.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ReplicaLogInfo {
    /// The topic.
    pub topic: String,
    /// The partition.
    pub partition: i32,
    /// The size of its log segments in bytes.
    pub size: i64,
    /// How far the replica's log end offset is behind the partition's high
    /// watermark (0 on the leader and on a caught-up follower).
    pub offset_lag: i64,
    /// Whether this is a future replica being moved into the directory.
    pub is_future: bool,
}

/// One log directory of a broker.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct LogDirDescription {
    /// The directory's absolute path (an in-memory baton-broker node names a
    /// `memory:` directory).
    pub path: String,
    /// The directory's error (KAFKA_STORAGE_ERROR for a failed directory), if any.
    pub error: Option<ErrorCode>,
    /// The replicas in the directory.
    pub replicas: Vec<ReplicaLogInfo>,
    /// The total size of the directory's volume in bytes, if the broker says.
    pub total_bytes: Option<u64>,
    /// The usable (free) size of the directory's volume in bytes, if the broker says.
    pub usable_bytes: Option<u64>,
}

impl Admin {
    /// Describes the log directories of each of `brokers` (DescribeLogDirs): their
    /// paths, the partition replicas in them with their sizes and lags, and the
    /// volumes' total and usable bytes. Each broker is asked directly; retriable
    /// errors are retried until the operation timeout.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: this only reads.
    pub async fn describe_log_dirs(
        &self,
        brokers: impl IntoIterator<Item = i32>,
    ) -> Result<BTreeMap<i32, Vec<LogDirDescription>>, AdminError> {
        let req = DescribeLogDirsRequest { topics: None };
        let mut out = BTreeMap::new();
        for node in brokers {
            let resp = self
                .with_retries("describe log dirs", || async {
                    let resp = self.node_attempt(node, &req).await?;
                    retriable_code(resp.error_code, || format!("log dirs of broker {node}"))?;
                    Ok(resp)
                })
                .await?;
            if resp.error_code != 0 {
                return Err(AdminError::Client(crate::client::ClientError::Broker {
                    code: ErrorCode::from_code(resp.error_code),
                    context: format!("log dirs of broker {node}"),
                }));
            }
            let dirs = resp
                .results
                .into_iter()
                .map(|d| LogDirDescription {
                    path: d.log_dir,
                    error: (d.error_code != 0).then(|| ErrorCode::from_code(d.error_code)),
                    replicas: d
                        .topics
                        .into_iter()
                        .flat_map(|t| {
                            let topic = t.name;
                            t.partitions.into_iter().map(move |p| ReplicaLogInfo {
                                topic: topic.clone(),
                                partition: p.partition_index,
                                size: p.partition_size,
                                offset_lag: p.offset_lag,
                                is_future: p.is_future_key,
                            })
                        })
                        .collect(),
                    total_bytes: u64::try_from(d.total_bytes).ok(),
                    usable_bytes: u64::try_from(d.usable_bytes).ok(),
                })
                .collect();
            out.insert(node, dirs);
        }
        Ok(out)
    }
}
