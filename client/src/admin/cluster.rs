//! [`Admin::describe_cluster_info`]: DescribeCluster (API key 60, KIP-700): the
//! cluster id, the controller, the brokers with their racks, and the operations
//! the caller may perform on the cluster.

use std::collections::BTreeSet;

use baton_protocol::acl::AclOperation;
use baton_protocol::messages::DescribeClusterRequest;
use baton_protocol::ErrorCode;

use super::retry::retriable_code;
use super::{Admin, AdminError};
use crate::client::ClientError;
use crate::metadata::BrokerMetadata;

/// The cluster as DescribeCluster describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ClusterDescription {
    /// The cluster id.
    pub cluster_id: String,
    /// The controller's node id as brokers report it (with KRaft, a broker that
    /// forwards to the active controller), if any.
    pub controller_id: Option<i32>,
    /// The brokers, by node id, with their racks.
    pub brokers: Vec<BrokerMetadata>,
    /// The operations the caller's principal may perform on the cluster, if asked
    /// for and the broker reports them.
    pub authorized_operations: Option<BTreeSet<AclOperation>>,
}

/// The operations in Kafka's authorized-operations bit field (bit n set: the
/// operation with code n is allowed). `i32::MIN` means "not reported".
fn operations(bits: i32) -> Option<BTreeSet<AclOperation>> {
    if bits == i32::MIN {
        return None;
    }
    Some(
        (0..31)
            .filter(|n| bits & (1 << n) != 0)
            .filter_map(|n| AclOperation::from_code(n as i8))
            .collect(),
    )
}

impl Admin {
    /// Describes the cluster with the DescribeCluster API: its id, controller and
    /// brokers, and, with `include_authorized_operations`, what this client's
    /// principal may do to it. (For topics and partitions, see
    /// [`Admin::describe_cluster`].) Retriable errors are retried until the
    /// operation timeout.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: this only reads.
    pub async fn describe_cluster_info(
        &self,
        include_authorized_operations: bool,
    ) -> Result<ClusterDescription, AdminError> {
        let req = DescribeClusterRequest {
            include_cluster_authorized_operations: include_authorized_operations,
            endpoint_type: 1,
        };
        let resp = self
            .with_retries("describe cluster", || async {
                let resp = self.controller_attempt(&req).await?;
                retriable_code(resp.error_code, || "describe cluster".to_owned())?;
                Ok(resp)
            })
            .await?;
        if resp.error_code != 0 {
            return Err(AdminError::Client(ClientError::Broker {
                code: ErrorCode::from_code(resp.error_code),
                context: resp
                    .error_message
                    .unwrap_or_else(|| "describe cluster".to_owned()),
            }));
        }
        let mut brokers: Vec<BrokerMetadata> = resp
            .brokers
            .into_iter()
            .map(|b| BrokerMetadata {
                node_id: b.broker_id,
                host: b.host,
                port: b.port,
                rack: b.rack,
            })
            .collect();
        brokers.sort_by_key(|b| b.node_id);
        Ok(ClusterDescription {
            cluster_id: resp.cluster_id,
            controller_id: (resp.controller_id >= 0).then_some(resp.controller_id),
            brokers,
            authorized_operations: operations(resp.cluster_authorized_operations)
                .filter(|_| include_authorized_operations),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn authorized_operations_bits() {
        assert_eq!(operations(i32::MIN), None);
        let ops = operations((1 << 8) | (1 << 10) | (1 << 30)).unwrap();
        assert_eq!(
            ops.into_iter().collect::<Vec<_>>(),
            vec![AclOperation::Describe, AclOperation::DescribeConfigs]
        );
    }
}
