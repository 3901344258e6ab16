//! ElectLeaders, AlterPartitionReassignments and ListPartitionReassignments as the
//! controller answers them: request bodies turned into [`Controller`] decisions
//! (names resolved to topic ids, one result per partition), and the listing read
//! from a metadata image (the controller's own, or a node's copy).

use std::collections::BTreeMap;

use baton_protocol::messages::{
    AlterPartitionReassignmentsRequest, AlterPartitionReassignmentsResponse,
    ElectLeadersPartitionResult, ElectLeadersReplicaElectionResult, ElectLeadersRequest,
    ElectLeadersResponse, ListPartitionReassignmentsRequest, ListPartitionReassignmentsResponse,
    OngoingPartitionReassignment, OngoingTopicReassignment, ReassignablePartitionResponse,
    ReassignableTopicResponse, ELECTION_UNCLEAN,
};
use baton_protocol::ErrorCode;

use crate::controller::{Controller, ControllerError, ControllerState, ElectionType};

/// Most partitions one ElectLeaders or AlterPartitionReassignments request acts
/// on; each partition past it is answered INVALID_REQUEST, bounding the records
/// one request writes.
pub const MAX_PARTITIONS_PER_REQUEST: usize = 10_000;

/// Result of one election: error code and message.
fn outcome(r: Result<i32, ControllerError>) -> (ErrorCode, Option<String>) {
    match r {
        Ok(_) => (ErrorCode::None, None),
        Err(e) => (e.error_code(), Some(e.to_string())),
    }
}

/// Runs the elections `req` asks for. For a null partition list every partition
/// is tried and, as in Kafka, those needing no election are left out.
pub fn elect_leaders(ctl: &mut Controller, req: &ElectLeadersRequest) -> ElectLeadersResponse {
    let election = if req.election_type == ELECTION_UNCLEAN {
        ElectionType::Unclean
    } else {
        ElectionType::Preferred
    };
    let mut results: BTreeMap<String, Vec<ElectLeadersPartitionResult>> = BTreeMap::new();
    let all = req.topic_partitions.is_none();
    let wanted: Vec<(String, i32)> = match &req.topic_partitions {
        Some(topics) => topics
            .iter()
            .flat_map(|t| t.partitions.iter().map(|p| (t.topic.clone(), *p)))
            .collect(),
        None => ctl
            .state()
            .partitions()
            .filter_map(|p| Some((ctl.state().topic(p.topic_id)?.name.clone(), p.partition)))
            .collect(),
    };
    for (n, (topic, partition)) in wanted.into_iter().enumerate() {
        let (code, message) = if n >= MAX_PARTITIONS_PER_REQUEST {
            (
                ErrorCode::InvalidRequest,
                Some("too many partitions in one request".to_owned()),
            )
        } else {
            match ctl.state().topic_by_name(&topic).map(|t| t.topic_id) {
                None => outcome(Err(ControllerError::UnknownTopicOrPartition)),
                Some(id) => outcome(ctl.elect_leader(id, partition, election)),
            }
        };
        if all && code == ErrorCode::ElectionNotNeeded {
            continue;
        }
        results
            .entry(topic)
            .or_default()
            .push(ElectLeadersPartitionResult {
                partition_id: partition,
                error_code: code.code(),
                error_message: message,
            });
    }
    ElectLeadersResponse {
        throttle_time_ms: 0,
        error_code: 0,
        replica_election_results: results
            .into_iter()
            .map(
                |(topic, partition_result)| ElectLeadersReplicaElectionResult {
                    topic,
                    partition_result,
                },
            )
            .collect(),
    }
}

/// Starts or cancels the reassignments `req` asks for.
pub fn alter_reassignments(
    ctl: &mut Controller,
    req: &AlterPartitionReassignmentsRequest,
) -> AlterPartitionReassignmentsResponse {
    let mut n = 0;
    let responses = req
        .topics
        .iter()
        .map(|t| ReassignableTopicResponse {
            name: t.name.clone(),
            partitions: t
                .partitions
                .iter()
                .map(|p| {
                    n += 1;
                    let r = if n > MAX_PARTITIONS_PER_REQUEST {
                        Err(ControllerError::InvalidRequest(
                            "too many partitions in one request".into(),
                        ))
                    } else {
                        match ctl.state().topic_by_name(&t.name).map(|t| t.topic_id) {
                            None => Err(ControllerError::UnknownTopicOrPartition),
                            Some(id) => {
                                ctl.alter_reassignment(id, p.partition_index, p.replicas.clone())
                            }
                        }
                    };
                    let (code, message) = outcome(r.map(|()| 0));
                    ReassignablePartitionResponse {
                        partition_index: p.partition_index,
                        error_code: code.code(),
                        error_message: message,
                    }
                })
                .collect(),
        })
        .collect();
    AlterPartitionReassignmentsResponse {
        responses,
        ..Default::default()
    }
}

/// The reassignments in progress among the partitions `req` names (all for a null
/// list); unknown topics and partitions not being reassigned are left out, as in
/// Kafka.
pub fn list_reassignments(
    state: &ControllerState,
    req: &ListPartitionReassignmentsRequest,
) -> ListPartitionReassignmentsResponse {
    let mut topics: BTreeMap<String, Vec<OngoingPartitionReassignment>> = BTreeMap::new();
    let mut add = |name: &str, p: &crate::controller::PartitionInfo| {
        if p.is_reassigning() {
            topics
                .entry(name.to_owned())
                .or_default()
                .push(OngoingPartitionReassignment {
                    partition_index: p.partition,
                    replicas: p.replicas.clone(),
                    adding_replicas: p.adding_replicas.clone(),
                    removing_replicas: p.removing_replicas.clone(),
                });
        }
    };
    match &req.topics {
        None => {
            for p in state.partitions() {
                if let Some(t) = state.topic(p.topic_id) {
                    add(&t.name, p);
                }
            }
        }
        Some(wanted) => {
            for w in wanted {
                let Some(t) = state.topic_by_name(&w.name) else {
                    continue;
                };
                for &i in &w.partition_indexes {
                    if let Some(p) = state.partition(t.topic_id, i) {
                        add(&w.name, p);
                    }
                }
            }
        }
    }
    ListPartitionReassignmentsResponse {
        topics: topics
            .into_iter()
            .map(|(name, partitions)| OngoingTopicReassignment { name, partitions })
            .collect(),
        ..Default::default()
    }
}
