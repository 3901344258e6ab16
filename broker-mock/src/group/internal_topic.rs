//! The compacted internal topics the coordinators create on first use
//! (`__consumer_offsets`, `__transaction_state`): at once on a single node, through
//! the controller in a cluster, one creation request at a time; and the wait for
//! an append to them to be replicated.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use baton_protocol::messages::{CreatableTopic, CreatableTopicConfig, CreateTopicsRequest};
use baton_protocol::{ErrorCode, Message};
use tokio::sync::oneshot;

use super::host::GroupHost;
use crate::replication::ProduceOutcome;
use crate::topics::{Topic, TopicConfig};

/// Replication factor asked for an internal topic in a cluster (Kafka's
/// `offsets.topic.replication.factor` and
/// `transaction.state.log.replication.factor`), lowered to the number of brokers.
const REPLICATION_FACTOR: usize = 3;

/// One internal topic and its creation request in flight.
#[derive(Debug)]
pub(crate) struct InternalTopic {
    name: &'static str,
    /// Suffix of the client id used towards the controller (`node-<id>-<suffix>`).
    client_suffix: &'static str,
    /// A request to create the topic through the controller is under way.
    creating: Arc<AtomicBool>,
}

impl InternalTopic {
    /// The topic `name`, asked of the controller under client id
    /// `node-<id>-<client_suffix>`.
    pub fn new(name: &'static str, client_suffix: &'static str) -> Self {
        InternalTopic {
            name,
            client_suffix,
            creating: Arc::new(AtomicBool::new(false)),
        }
    }

    /// The topic, created with `partitions()` partitions if missing: at once on a
    /// single node; in a cluster a creation request goes to the controller and the
    /// caller gets COORDINATOR_NOT_AVAILABLE meanwhile. `partitions` is only called
    /// when the topic is missing.
    pub fn get_or_create(
        &self,
        host: &dyn GroupHost,
        partitions: impl FnOnce() -> i32,
    ) -> Result<Arc<Topic>, ErrorCode> {
        if let Some(t) = host.topic(self.name) {
            return Ok(t);
        }
        let partitions = partitions().max(1);
        if !host.mode().is_replica() {
            let mut config = TopicConfig::default();
            config
                .entries
                .insert("cleanup.policy".to_owned(), "compact".to_owned());
            return match host.create_topic(self.name, partitions, 1, config) {
                Ok(t) => Ok(t),
                Err((code, reason)) => host.topic(self.name).ok_or_else(|| {
                    tracing::warn!(?code, reason, "creating {} refused", self.name);
                    ErrorCode::CoordinatorNotAvailable
                }),
            };
        }
        self.request(host, partitions);
        Err(ErrorCode::CoordinatorNotAvailable)
    }

    /// Asks the controller to create the topic with `partitions` partitions (one
    /// request at a time; nothing on a single node).
    pub fn request(&self, host: &dyn GroupHost, partitions: i32) {
        let Some(link) = host.mode().replica().cloned() else {
            return;
        };
        if self.creating.swap(true, Ordering::AcqRel) {
            return;
        }
        let brokers = link.image().brokers().count().max(1);
        let rf = REPLICATION_FACTOR.min(brokers) as i16;
        let name = self.name;
        let req = CreateTopicsRequest {
            topics: vec![CreatableTopic {
                name: name.to_owned(),
                num_partitions: partitions.max(1),
                replication_factor: rf,
                assignments: Vec::new(),
                configs: vec![CreatableTopicConfig {
                    name: "cleanup.policy".to_owned(),
                    value: Some("compact".to_owned()),
                }],
            }],
            timeout_ms: 30_000,
            validate_only: false,
        };
        let creating = self.creating.clone();
        let client_id = format!("node-{}-{}", link.node_id, self.client_suffix);
        tokio::spawn(async move {
            let mut rpc = link.rpc(link.options.controller, client_id);
            let version = CreateTopicsRequest::MAX_VERSION;
            match rpc.call(&req, version, Duration::from_secs(30)).await {
                Ok(resp) => {
                    let code = resp.topics.first().map_or(0, |t| t.error_code);
                    if code != 0 && code != ErrorCode::TopicAlreadyExists.code() {
                        tracing::warn!(code, "creating {name} failed");
                    } else {
                        tracing::info!(rf, "{name} requested");
                    }
                }
                Err(e) => {
                    tracing::warn!(error = %e, "cannot ask the controller for {name}")
                }
            }
            creating.store(false, Ordering::Release);
        });
    }
}

/// Waits (on a blocking-pool thread) until the high watermark covers an append to
/// an internal topic (`None`: nothing to wait for); an error is the append's, as
/// `map_error` turns it into the coordinator's answer (a lost wait is
/// NOT_LEADER_OR_FOLLOWER before mapping).
pub(crate) fn await_replicated(
    wait: Option<oneshot::Receiver<ProduceOutcome>>,
    map_error: fn(ErrorCode) -> ErrorCode,
) -> Result<(), ErrorCode> {
    let Some(rx) = wait else {
        return Ok(());
    };
    match rx
        .blocking_recv()
        .unwrap_or(ProduceOutcome::NotLeader)
        .error_code()
    {
        ErrorCode::None => Ok(()),
        code => Err(map_error(code)),
    }
}
