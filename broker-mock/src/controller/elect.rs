//! ElectLeaders decisions (KIP-183 preferred, KIP-460 unclean) on one partition.

use baton_protocol::Uuid;

use super::decisions::{Controller, ControllerError};
use super::records::{MetadataRecord, PartitionChangeRecord};

/// Which leader an election looks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ElectionType {
    /// The first replica, if it is an eligible ISR member.
    Preferred,
    /// For a partition without a leader: an eligible ISR member, else the first
    /// eligible replica out of sync (the ISR then restarts with it).
    Unclean,
}

impl Controller {
    /// Runs an election on one partition. Errors: UNKNOWN_TOPIC_OR_PARTITION;
    /// ELECTION_NOT_NEEDED when the preferred replica leads already (preferred) or
    /// the partition has a leader (unclean); PREFERRED_LEADER_NOT_AVAILABLE when the
    /// preferred replica is fenced, shutting down or out of the ISR;
    /// ELIGIBLE_LEADERS_NOT_AVAILABLE when no replica may lead (unclean). An admin's
    /// unclean election does not need the topic's `unclean.leader.election.enable`,
    /// as in Kafka. Returns the new leader.
    pub fn elect_leader(
        &mut self,
        topic_id: Uuid,
        partition: i32,
        election: ElectionType,
    ) -> Result<i32, ControllerError> {
        let key = (topic_id, partition);
        let p = self.partition_to_change(topic_id, partition)?;
        let state = self.state();
        let (leader, isr) = match election {
            ElectionType::Preferred => {
                let preferred = p.preferred_leader().expect("replicas are never empty");
                if p.leader == preferred {
                    return Err(ControllerError::ElectionNotNeeded);
                }
                if !p.isr.contains(&preferred) || !state.is_eligible(preferred) {
                    return Err(ControllerError::PreferredLeaderNotAvailable(preferred));
                }
                (preferred, None)
            }
            ElectionType::Unclean => {
                if !p.is_offline() {
                    return Err(ControllerError::ElectionNotNeeded);
                }
                let clean = p
                    .replicas
                    .iter()
                    .copied()
                    .find(|r| p.isr.contains(r) && state.is_eligible(*r));
                match clean {
                    Some(c) => (c, None),
                    None => {
                        let u = p
                            .replicas
                            .iter()
                            .copied()
                            .find(|r| state.is_eligible(*r))
                            .ok_or(ControllerError::EligibleLeadersNotAvailable)?;
                        (u, Some(vec![u]))
                    }
                }
            }
        };
        if self.state().leader_move(topic_id, partition).is_some() {
            self.abort_move(key);
        }
        self.append(MetadataRecord::PartitionChange(PartitionChangeRecord {
            topic_id,
            partition,
            isr,
            leader: Some(leader),
        }));
        Ok(leader)
    }
}
