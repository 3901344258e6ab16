//! OffsetDelete's group check (KIP-496): which committed offsets of a classic
//! group may be deleted, following Kafka's classic group rules.

use std::collections::BTreeSet;

use baton_protocol::messages::ConsumerProtocolSubscription;
use baton_protocol::ErrorCode;

use super::group::GroupState;
use super::registry::Groups;

impl Groups {
    /// The topics whose offsets OffsetDelete must keep for `group_id` (those its
    /// members subscribe to): none for an empty group; GROUP_ID_NOT_FOUND without
    /// the group; NON_EMPTY_GROUP for a group with members that does not run the
    /// `consumer` protocol type (its subscriptions cannot be read). A member's
    /// subscription is read from its metadata for the selected protocol, or from
    /// every protocol it offered while none is selected; metadata that does not
    /// decode counts as no topics.
    pub fn offset_delete_protected(&self, group_id: &str) -> Result<BTreeSet<String>, ErrorCode> {
        let group = self
            .groups
            .get(group_id)
            .filter(|g| g.state != GroupState::Dead)
            .ok_or(ErrorCode::GroupIdNotFound)?;
        if group.members.is_empty() {
            return Ok(BTreeSet::new());
        }
        if group.protocol_type.as_deref() != Some("consumer") {
            return Err(ErrorCode::NonEmptyGroup);
        }
        let mut topics = BTreeSet::new();
        for m in group.members.values() {
            let metadata: Vec<_> = match &group.protocol_name {
                Some(p) => vec![m.metadata_for(p)],
                None => m.protocols.iter().map(|(_, b)| b.clone()).collect(),
            };
            for bytes in metadata {
                if let Ok((_, sub)) = ConsumerProtocolSubscription::decode_versioned(bytes) {
                    topics.extend(sub.topics);
                }
            }
        }
        Ok(topics)
    }
}
