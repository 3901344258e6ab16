//! The controller's replicated state: what replaying the metadata log produces.
//!
//! [`ControllerState::apply`] is the only way to change it, so a controller that
//! restarts and replays its log reaches exactly the state it had. Apply validates every
//! record against the state (a CRC-valid but inconsistent log is an error, not a
//! panic) and asserts the invariants afterwards.

use std::collections::{BTreeMap, BTreeSet};

use baton_protocol::acl::AclBinding;
use baton_protocol::sasl::ScramCredential;
use baton_protocol::Uuid;

use super::records::{
    LeaderMoveRecord, ListenerRecord, MetadataLogEntry, MetadataRecord, MoveState,
    PartitionChangeRecord, PartitionRecord, ReassignmentRecord, NO_LEADER,
};

/// The topic config that allows electing an out-of-sync replica.
pub const UNCLEAN_LEADER_ELECTION: &str = "unclean.leader.election.enable";

/// A registered broker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokerInfo {
    /// Broker id.
    pub broker_id: i32,
    /// The process incarnation that registered.
    pub incarnation_id: u64,
    /// KRaft's broker epoch: the log offset of the registration record. Heartbeats must
    /// carry it.
    pub broker_epoch: i64,
    /// Advertised host.
    pub host: String,
    /// Advertised port.
    pub port: u16,
    /// The broker's listeners beyond its first, by name.
    pub listeners: Vec<ListenerRecord>,
    /// The broker's rack (`broker.rack`), if any.
    pub rack: Option<String>,
    /// Fenced brokers may not lead nor be added to an ISR.
    pub fenced: bool,
    /// In controlled shutdown: leaderships are being moved away; not eligible for new
    /// leaderships or ISR additions.
    pub in_controlled_shutdown: bool,
}

impl BrokerInfo {
    /// The advertised host and port of the listener named `listener` (ignoring
    /// case), or of the first listener for `None`; `None` if the broker has no
    /// such listener.
    pub fn endpoint(&self, listener: Option<&str>) -> Option<(&str, u16)> {
        match listener {
            None => Some((self.host.as_str(), self.port)),
            Some(name) => self
                .listeners
                .iter()
                .find(|l| l.name.eq_ignore_ascii_case(name))
                .map(|l| (l.host.as_str(), l.port)),
        }
    }

    /// Whether it may lead or join an ISR.
    pub fn is_eligible(&self) -> bool {
        !self.fenced && !self.in_controlled_shutdown
    }
}

/// A topic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicInfo {
    /// Name.
    pub name: String,
    /// Id.
    pub topic_id: Uuid,
    /// Config overrides.
    pub configs: Vec<(String, String)>,
    /// Partition count.
    pub partitions: i32,
}

impl TopicInfo {
    /// A config override's value.
    pub fn config(&self, key: &str) -> Option<&str> {
        self.configs
            .iter()
            .rev()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// Whether unclean leader election is enabled for this topic.
    pub fn unclean_election(&self) -> bool {
        self.config(UNCLEAN_LEADER_ELECTION) == Some("true")
    }
}

/// A partition's state.
///
/// Invariants: `isr ⊆ replicas`, no duplicates; `leader == NO_LEADER` or
/// `leader ∈ isr`; `leader_epoch` and `partition_epoch` never decrease.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionInfo {
    /// Topic id.
    pub topic_id: Uuid,
    /// Index.
    pub partition: i32,
    /// Assigned replicas, preferred first.
    pub replicas: Vec<i32>,
    /// In-sync replicas.
    pub isr: Vec<i32>,
    /// Leader, or [`NO_LEADER`].
    pub leader: i32,
    /// Bumped on every leader change.
    pub leader_epoch: i32,
    /// Bumped on every change.
    pub partition_epoch: i32,
    /// Replicas a reassignment in progress adds (a subset of `replicas`).
    pub adding_replicas: Vec<i32>,
    /// Replicas a reassignment in progress removes (a subset of `replicas`,
    /// disjoint from `adding_replicas`).
    pub removing_replicas: Vec<i32>,
}

impl PartitionInfo {
    /// Whether a reassignment is in progress.
    pub fn is_reassigning(&self) -> bool {
        !self.adding_replicas.is_empty() || !self.removing_replicas.is_empty()
    }

    /// The replicas before the reassignment in progress (all replicas if none).
    pub fn original_replicas(&self) -> Vec<i32> {
        self.replicas
            .iter()
            .copied()
            .filter(|r| !self.adding_replicas.contains(r))
            .collect()
    }

    /// The replicas the reassignment in progress ends with (all replicas if none).
    pub fn target_replicas(&self) -> Vec<i32> {
        self.replicas
            .iter()
            .copied()
            .filter(|r| !self.removing_replicas.contains(r))
            .collect()
    }

    /// Whether there is no leader.
    pub fn is_offline(&self) -> bool {
        self.leader == NO_LEADER
    }

    /// The preferred leader (first replica).
    pub fn preferred_leader(&self) -> Option<i32> {
        self.replicas.first().copied()
    }
}

/// A planned leadership move in progress.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeaderMove {
    /// Current leader.
    pub from: i32,
    /// Successor.
    pub to: i32,
    /// Phase: [`MoveState::Requested`] or [`MoveState::Draining`].
    pub state: MoveState,
}

/// Why a record could not be applied.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ApplyError {
    /// The entry's offset is not the next one.
    #[error("entry offset {got}, expected {expected}")]
    OffsetGap {
        /// Offset found.
        got: i64,
        /// Offset expected.
        expected: i64,
    },
    /// The entry's controller epoch is older than one already applied.
    #[error("controller epoch {got} older than {current}")]
    StaleControllerEpoch {
        /// Epoch found.
        got: i32,
        /// Epoch applied before.
        current: i32,
    },
    /// The record contradicts the state.
    #[error("inconsistent record at offset {offset}: {reason}")]
    Inconsistent {
        /// Entry offset.
        offset: i64,
        /// What is wrong.
        reason: String,
    },
}

/// Everything the metadata log describes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ControllerState {
    /// Offset the next entry must have. Invariant: never decreases.
    next_offset: i64,
    /// Highest controller epoch applied. Invariant: never decreases.
    controller_epoch: i32,
    /// Brokers by id.
    brokers: BTreeMap<i32, BrokerInfo>,
    /// Topics by id.
    topics: BTreeMap<Uuid, TopicInfo>,
    /// Topic ids by name. Invariant: the inverse of `topics`.
    topic_names: BTreeMap<String, Uuid>,
    /// Partitions by (topic id, index). Invariant: each topic's are `0..partitions`.
    partitions: BTreeMap<(Uuid, i32), PartitionInfo>,
    /// Planned moves by partition. Invariant: `from` is the partition's leader and
    /// `to` is in its ISR.
    moves: BTreeMap<(Uuid, i32), LeaderMove>,
    /// The cluster's ACL bindings, applied by every node's authorizer.
    acls: BTreeSet<AclBinding>,
    /// SCRAM credentials by user and mechanism.
    scram: BTreeMap<(String, i8), ScramCredential>,
    /// Bumped by every SCRAM record, so a node copies the credentials only when
    /// they changed.
    scram_version: u64,
    /// The cluster-wide dynamic broker defaults (`log.retention.ms`, ...).
    broker_defaults: BTreeMap<String, String>,
}

impl ControllerState {
    /// An empty state.
    pub fn new() -> Self {
        ControllerState::default()
    }

    /// Offset the next entry gets.
    pub fn next_offset(&self) -> i64 {
        self.next_offset
    }

    /// Highest controller epoch applied (0 if none).
    pub fn controller_epoch(&self) -> i32 {
        self.controller_epoch
    }

    /// A broker.
    pub fn broker(&self, id: i32) -> Option<&BrokerInfo> {
        self.brokers.get(&id)
    }

    /// All brokers by id.
    pub fn brokers(&self) -> impl Iterator<Item = &BrokerInfo> {
        self.brokers.values()
    }

    /// Ids of brokers eligible for leadership and placement, ascending.
    pub fn eligible_brokers(&self) -> Vec<i32> {
        self.brokers
            .values()
            .filter(|b| b.is_eligible())
            .map(|b| b.broker_id)
            .collect()
    }

    /// Whether `id` is registered and eligible.
    pub fn is_eligible(&self, id: i32) -> bool {
        self.brokers.get(&id).is_some_and(|b| b.is_eligible())
    }

    /// A topic by id.
    pub fn topic(&self, id: Uuid) -> Option<&TopicInfo> {
        self.topics.get(&id)
    }

    /// A topic by name.
    pub fn topic_by_name(&self, name: &str) -> Option<&TopicInfo> {
        self.topic_names
            .get(name)
            .and_then(|id| self.topics.get(id))
    }

    /// All topics by id.
    pub fn topics(&self) -> impl Iterator<Item = &TopicInfo> {
        self.topics.values()
    }

    /// How many topics exist.
    pub fn topic_count(&self) -> usize {
        self.topics.len()
    }

    /// How many partitions exist, of all topics.
    pub fn partition_count(&self) -> usize {
        self.partitions.len()
    }

    /// A partition.
    pub fn partition(&self, topic_id: Uuid, partition: i32) -> Option<&PartitionInfo> {
        self.partitions.get(&(topic_id, partition))
    }

    /// All partitions, by topic id then index.
    pub fn partitions(&self) -> impl Iterator<Item = &PartitionInfo> {
        self.partitions.values()
    }

    /// The planned move of a partition, if any.
    pub fn leader_move(&self, topic_id: Uuid, partition: i32) -> Option<&LeaderMove> {
        self.moves.get(&(topic_id, partition))
    }

    /// All planned moves.
    pub fn leader_moves(&self) -> impl Iterator<Item = ((Uuid, i32), &LeaderMove)> {
        self.moves.iter().map(|(k, v)| (*k, v))
    }

    /// The cluster's ACL bindings.
    pub fn acls(&self) -> &BTreeSet<AclBinding> {
        &self.acls
    }

    /// SCRAM credentials by user and mechanism (`ScramHash::kafka_type`).
    pub fn scram_credentials(&self) -> &BTreeMap<(String, i8), ScramCredential> {
        &self.scram
    }

    /// The cluster-wide dynamic broker defaults, by key.
    pub fn broker_defaults(&self) -> &BTreeMap<String, String> {
        &self.broker_defaults
    }

    /// Changes with every SCRAM record applied.
    pub fn scram_version(&self) -> u64 {
        self.scram_version
    }

    /// Applies one entry. On error the state is unchanged.
    pub fn apply(&mut self, entry: &MetadataLogEntry) -> Result<(), ApplyError> {
        if entry.offset != self.next_offset {
            return Err(ApplyError::OffsetGap {
                got: entry.offset,
                expected: self.next_offset,
            });
        }
        if entry.controller_epoch < self.controller_epoch {
            return Err(ApplyError::StaleControllerEpoch {
                got: entry.controller_epoch,
                current: self.controller_epoch,
            });
        }
        let bad = |reason: String| ApplyError::Inconsistent {
            offset: entry.offset,
            reason,
        };
        match &entry.record {
            MetadataRecord::RegisterBroker(r) => {
                // A registration (or re-registration by a new incarnation) starts fenced.
                // Re-registration must follow a fence so no stale leadership survives.
                if let Some(b) = self.brokers.get(&r.broker_id) {
                    if !b.fenced {
                        return Err(bad(format!(
                            "broker {} re-registered while unfenced",
                            r.broker_id
                        )));
                    }
                }
                self.brokers.insert(
                    r.broker_id,
                    BrokerInfo {
                        broker_id: r.broker_id,
                        incarnation_id: r.incarnation_id,
                        broker_epoch: entry.offset,
                        host: r.host.clone(),
                        port: r.port,
                        listeners: r.listeners.clone(),
                        rack: r.rack.clone(),
                        fenced: true,
                        in_controlled_shutdown: false,
                    },
                );
            }
            MetadataRecord::FenceBroker { broker_id } => {
                let id = *broker_id;
                if !self.brokers.contains_key(&id) {
                    return Err(bad(format!("fence of unknown broker {id}")));
                }
                let leads = self.partitions.values().any(|p| p.leader == id);
                if leads {
                    return Err(bad(format!("fence of broker {id} that still leads")));
                }
                let b = self.brokers.get_mut(&id).expect("checked");
                b.fenced = true;
                b.in_controlled_shutdown = false;
            }
            MetadataRecord::UnfenceBroker { broker_id } => {
                let b = self
                    .brokers
                    .get_mut(broker_id)
                    .ok_or_else(|| bad(format!("unfence of unknown broker {broker_id}")))?;
                b.fenced = false;
            }
            MetadataRecord::BrokerShutdownRequested { broker_id } => {
                let b = self
                    .brokers
                    .get_mut(broker_id)
                    .ok_or_else(|| bad(format!("shutdown of unknown broker {broker_id}")))?;
                b.in_controlled_shutdown = true;
            }
            MetadataRecord::Topic(t) => {
                if self.topics.contains_key(&t.topic_id) || self.topic_names.contains_key(&t.name) {
                    return Err(bad(format!("topic {} exists", t.name)));
                }
                self.topic_names.insert(t.name.clone(), t.topic_id);
                self.topics.insert(
                    t.topic_id,
                    TopicInfo {
                        name: t.name.clone(),
                        topic_id: t.topic_id,
                        configs: t.configs.clone(),
                        partitions: 0,
                    },
                );
            }
            MetadataRecord::Partition(p) => self.apply_partition(p).map_err(bad)?,
            MetadataRecord::PartitionChange(c) => self.apply_change(c).map_err(bad)?,
            MetadataRecord::LeaderMove(m) => self.apply_move(m).map_err(bad)?,
            MetadataRecord::Reassignment(r) => self.apply_reassignment(r).map_err(bad)?,
            MetadataRecord::TopicConfig {
                topic_id,
                key,
                value,
            } => {
                let t = self
                    .topics
                    .get_mut(topic_id)
                    .ok_or_else(|| bad("config of unknown topic".into()))?;
                t.configs.retain(|(k, _)| k != key);
                if let Some(v) = value {
                    t.configs.push((key.clone(), v.clone()));
                }
            }
            MetadataRecord::BrokerDefaultConfig { key, value } => match value {
                Some(v) => {
                    self.broker_defaults.insert(key.clone(), v.clone());
                }
                None => {
                    self.broker_defaults.remove(key);
                }
            },
            MetadataRecord::RemoveTopic { topic_id } => {
                let t = self
                    .topics
                    .remove(topic_id)
                    .ok_or_else(|| bad("removal of unknown topic".into()))?;
                self.topic_names.remove(&t.name);
                self.partitions.retain(|(id, _), _| id != topic_id);
                self.moves.retain(|(id, _), _| id != topic_id);
            }
            MetadataRecord::AccessControlEntry(b) => {
                if !self.acls.insert(b.clone()) {
                    return Err(bad(format!("ACL {b:?} exists")));
                }
            }
            MetadataRecord::RemoveAccessControlEntry(b) => {
                if !self.acls.remove(b) {
                    return Err(bad(format!("removal of unknown ACL {b:?}")));
                }
            }
            MetadataRecord::UserScramCredential { name, credential } => {
                let key = (name.clone(), credential.hash().kafka_type());
                self.scram.insert(key, credential.clone());
                self.scram_version += 1;
            }
            MetadataRecord::RemoveUserScramCredential { name, hash } => {
                if self
                    .scram
                    .remove(&(name.clone(), hash.kafka_type()))
                    .is_none()
                {
                    return Err(bad(format!(
                        "removal of unknown SCRAM credential of {name}"
                    )));
                }
                self.scram_version += 1;
            }
        }
        self.next_offset += 1;
        self.controller_epoch = entry.controller_epoch;
        // Only a partition's own records change it (a fence requires that the broker
        // leads nothing, a removal drops whole partitions), so checking the touched
        // one keeps every partition's invariant at O(1) per record instead of a scan
        // of all partitions per record (O(n²) to create a topic of n partitions).
        let touched = match &entry.record {
            MetadataRecord::Partition(p) => Some((p.topic_id, p.partition)),
            MetadataRecord::PartitionChange(c) => Some((c.topic_id, c.partition)),
            MetadataRecord::LeaderMove(m) => Some((m.topic_id, m.partition)),
            MetadataRecord::Reassignment(r) => Some((r.topic_id, r.partition)),
            _ => None,
        };
        self.check_invariants(touched);
        Ok(())
    }

    fn apply_partition(&mut self, p: &PartitionRecord) -> Result<(), String> {
        let topic = self
            .topics
            .get(&p.topic_id)
            .ok_or("partition of unknown topic")?;
        if p.partition != topic.partitions {
            return Err(format!(
                "partition {} out of order (next is {})",
                p.partition, topic.partitions
            ));
        }
        check_assignment(&p.replicas, &p.isr, p.leader)?;
        if p.leader_epoch < 0 || p.partition_epoch < 0 {
            return Err("negative epoch".into());
        }
        self.partitions.insert(
            (p.topic_id, p.partition),
            PartitionInfo {
                topic_id: p.topic_id,
                partition: p.partition,
                replicas: p.replicas.clone(),
                isr: p.isr.clone(),
                leader: p.leader,
                leader_epoch: p.leader_epoch,
                partition_epoch: p.partition_epoch,
                adding_replicas: Vec::new(),
                removing_replicas: Vec::new(),
            },
        );
        self.topics
            .get_mut(&p.topic_id)
            .expect("checked")
            .partitions += 1;
        Ok(())
    }

    fn apply_change(&mut self, c: &PartitionChangeRecord) -> Result<(), String> {
        let key = (c.topic_id, c.partition);
        let p = self
            .partitions
            .get(&key)
            .ok_or("change of unknown partition")?;
        let isr = c.isr.clone().unwrap_or_else(|| p.isr.clone());
        let leader = c.leader.unwrap_or(p.leader);
        check_assignment(&p.replicas, &isr, leader)?;
        if leader != NO_LEADER && !self.brokers.contains_key(&leader) {
            return Err(format!("leader {leader} is not a registered broker"));
        }
        let leader_changed = leader != p.leader;
        let p = self.partitions.get_mut(&key).expect("checked");
        p.isr = isr;
        p.partition_epoch += 1;
        if leader_changed {
            p.leader = leader;
            p.leader_epoch += 1;
            // A leadership change ends any planned move.
            self.moves.remove(&key);
        }
        // A move whose successor left the ISR cannot complete.
        if let Some(m) = self.moves.get(&key) {
            if !self.partitions[&key].isr.contains(&m.to) {
                self.moves.remove(&key);
            }
        }
        Ok(())
    }

    fn apply_reassignment(&mut self, r: &ReassignmentRecord) -> Result<(), String> {
        let key = (r.topic_id, r.partition);
        let p = self
            .partitions
            .get(&key)
            .ok_or("reassignment of unknown partition")?;
        check_assignment(&r.replicas, &r.isr, r.leader)?;
        check_reassigning(&r.replicas, &r.adding, &r.removing)?;
        if r.leader != NO_LEADER && !self.brokers.contains_key(&r.leader) {
            return Err(format!("leader {} is not a registered broker", r.leader));
        }
        let leader_changed = r.leader != p.leader;
        let p = self.partitions.get_mut(&key).expect("checked");
        p.replicas = r.replicas.clone();
        p.isr = r.isr.clone();
        p.adding_replicas = r.adding.clone();
        p.removing_replicas = r.removing.clone();
        p.partition_epoch += 1;
        if leader_changed {
            p.leader = r.leader;
            p.leader_epoch += 1;
            self.moves.remove(&key);
        }
        if let Some(m) = self.moves.get(&key) {
            if !self.partitions[&key].isr.contains(&m.to) {
                self.moves.remove(&key);
            }
        }
        Ok(())
    }

    fn apply_move(&mut self, m: &LeaderMoveRecord) -> Result<(), String> {
        let key = (m.topic_id, m.partition);
        let p = self
            .partitions
            .get(&key)
            .ok_or("move of unknown partition")?;
        let current = self.moves.get(&key).copied();
        match m.state {
            MoveState::Requested => {
                if current.is_some() {
                    return Err("a move is already in progress".into());
                }
                if p.leader != m.from || m.from == m.to || !p.isr.contains(&m.to) {
                    return Err(format!(
                        "move {} -> {} does not fit leader {} ISR {:?}",
                        m.from, m.to, p.leader, p.isr
                    ));
                }
                self.moves.insert(
                    key,
                    LeaderMove {
                        from: m.from,
                        to: m.to,
                        state: MoveState::Requested,
                    },
                );
            }
            MoveState::Draining { .. } => match current {
                Some(c) if c.from == m.from && c.to == m.to && c.state == MoveState::Requested => {
                    self.moves.get_mut(&key).expect("present").state = m.state;
                }
                _ => return Err("draining without a requested move".into()),
            },
            MoveState::HandedOver | MoveState::Aborted => match current {
                Some(c) if c.from == m.from && c.to == m.to => {
                    if m.state == MoveState::HandedOver
                        && !matches!(c.state, MoveState::Draining { .. })
                    {
                        return Err("handover before draining".into());
                    }
                    self.moves.remove(&key);
                }
                _ => return Err("end of a move not in progress".into()),
            },
        }
        Ok(())
    }

    /// Asserts the invariants of partition `touched` (its assignment, and its
    /// planned move if any) and of the topic tables.
    fn check_invariants(&self, touched: Option<(Uuid, i32)>) {
        if let Some(p) = touched.and_then(|key| self.partitions.get(&key)) {
            assert!(
                check_assignment(&p.replicas, &p.isr, p.leader).is_ok()
                    && check_reassigning(&p.replicas, &p.adding_replicas, &p.removing_replicas)
                        .is_ok(),
                "partition invariant broken: {p:?}"
            );
        }
        if let Some((key, m)) = touched.and_then(|key| Some((key, self.moves.get(&key)?))) {
            let p = &self.partitions[&key];
            assert!(
                p.leader == m.from && p.isr.contains(&m.to),
                "move {m:?} on {p:?}"
            );
        }
        assert_eq!(self.topics.len(), self.topic_names.len());
    }
}

/// Checks `isr ⊆ replicas`, no duplicates, leader in ISR (unless none).
fn check_assignment(replicas: &[i32], isr: &[i32], leader: i32) -> Result<(), String> {
    let mut seen = std::collections::BTreeSet::new();
    if replicas.is_empty() || !replicas.iter().all(|r| *r >= 0 && seen.insert(*r)) {
        return Err(format!("bad replicas {replicas:?}"));
    }
    let mut seen_isr = std::collections::BTreeSet::new();
    if !isr
        .iter()
        .all(|r| replicas.contains(r) && seen_isr.insert(*r))
    {
        return Err(format!("ISR {isr:?} not a subset of replicas {replicas:?}"));
    }
    if leader != NO_LEADER && !isr.contains(&leader) {
        return Err(format!("leader {leader} not in ISR {isr:?}"));
    }
    Ok(())
}

/// Checks that the replicas being added and removed are replicas, each once, and
/// that no replica is both.
fn check_reassigning(replicas: &[i32], adding: &[i32], removing: &[i32]) -> Result<(), String> {
    let mut seen = BTreeSet::new();
    let ok = adding
        .iter()
        .chain(removing)
        .all(|r| replicas.contains(r) && seen.insert(*r));
    if !ok || (!removing.is_empty() && removing.len() == replicas.len()) {
        return Err(format!(
            "adding {adding:?} / removing {removing:?} do not fit replicas {replicas:?}"
        ));
    }
    Ok(())
}
