//! KIP-392 fetching from the closest replica: the broker's replica selectors
//! (Kafka's `replica.selector.class`), I/O-free.
//!
//! A partition leader asked by a consumer's Fetch (v11+, with a `rack_id`) runs the
//! configured selector over the leader and its in-sync followers that hold the
//! fetch offset; if it picks a follower, the leader answers
//! `preferred_read_replica` with that follower's id instead of records, and the
//! consumer fetches from the follower (which serves consumers up to its high
//! watermark) until the follower fails it or its metadata is refreshed.

/// Kafka's `org.apache.kafka.common.replica.RackAwareReplicaSelector`.
pub const RACK_AWARE_CLASS: &str = "org.apache.kafka.common.replica.RackAwareReplicaSelector";

/// Which replica a leader tells a consumer to fetch from (`replica.selector.class`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum ReplicaSelector {
    /// Always the leader (Kafka's default, no selector configured): consumers are
    /// never sent elsewhere.
    #[default]
    LeaderOnly,
    /// Kafka's `RackAwareReplicaSelector`: the leader if it is in the consumer's
    /// rack (or no replica is, or the consumer names none), else the in-sync
    /// follower of that rack with the largest log end offset (the most recently
    /// caught up on a tie).
    RackAware,
}

impl ReplicaSelector {
    /// The selector for a `replica.selector.class` value: Kafka's class name (or
    /// its simple name) for [`RackAware`](Self::RackAware), an empty value for
    /// [`LeaderOnly`](Self::LeaderOnly); `None` for any other class.
    pub fn from_class_name(name: &str) -> Option<Self> {
        match name.trim() {
            "" => Some(ReplicaSelector::LeaderOnly),
            RACK_AWARE_CLASS | "RackAwareReplicaSelector" => Some(ReplicaSelector::RackAware),
            _ => None,
        }
    }
}

/// One replica as a selector sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ReplicaView<'a> {
    /// The broker id.
    pub id: i32,
    /// The broker's rack, if it has one.
    pub rack: Option<&'a str>,
    /// The replica's log end offset as the leader knows it.
    pub log_end_offset: i64,
    /// Milliseconds since the replica was last caught up with the leader (0 for the
    /// leader itself).
    pub since_caught_up_ms: u64,
}

/// The replica a consumer in `client_rack` should read from: `None` for the
/// leader (which then serves the fetch itself). `followers` are the candidates:
/// in-sync followers that hold the fetch offset.
pub(crate) fn select(
    selector: ReplicaSelector,
    client_rack: &str,
    leader: ReplicaView<'_>,
    followers: &[ReplicaView<'_>],
) -> Option<i32> {
    match selector {
        ReplicaSelector::LeaderOnly => None,
        ReplicaSelector::RackAware => {
            if client_rack.is_empty() || leader.rack == Some(client_rack) {
                return None;
            }
            followers
                .iter()
                .filter(|f| f.id != leader.id && f.rack == Some(client_rack))
                // Largest log end offset, then the most recently caught up, then
                // the smallest id (so the choice is stable).
                .max_by(|a, b| {
                    a.log_end_offset
                        .cmp(&b.log_end_offset)
                        .then(b.since_caught_up_ms.cmp(&a.since_caught_up_ms))
                        .then(b.id.cmp(&a.id))
                })
                .map(|f| f.id)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(id: i32, rack: Option<&str>, leo: i64, since: u64) -> ReplicaView<'_> {
        ReplicaView {
            id,
            rack,
            log_end_offset: leo,
            since_caught_up_ms: since,
        }
    }

    #[test]
    fn rack_aware_picks_the_most_caught_up_follower_of_the_clients_rack() {
        let leader = view(1, Some("a"), 10, 0);
        let followers = [
            view(2, Some("b"), 8, 0),
            view(3, Some("b"), 10, 50),
            view(4, Some("b"), 10, 5),
            view(5, Some("c"), 10, 0),
        ];
        let sel = ReplicaSelector::RackAware;
        assert_eq!(select(sel, "b", leader, &followers), Some(4));
        assert_eq!(select(sel, "c", leader, &followers), Some(5));
        assert_eq!(
            select(sel, "a", leader, &followers),
            None,
            "the leader's rack"
        );
        assert_eq!(
            select(sel, "z", leader, &followers),
            None,
            "no replica there"
        );
        assert_eq!(select(sel, "", leader, &followers), None, "no client rack");
        let leader_only = ReplicaSelector::LeaderOnly;
        assert_eq!(select(leader_only, "b", leader, &followers), None);
    }

    #[test]
    fn class_names_map_to_selectors() {
        assert_eq!(
            ReplicaSelector::from_class_name(RACK_AWARE_CLASS),
            Some(ReplicaSelector::RackAware)
        );
        assert_eq!(
            ReplicaSelector::from_class_name(""),
            Some(ReplicaSelector::LeaderOnly)
        );
        assert_eq!(ReplicaSelector::from_class_name("com.example.Mine"), None);
    }
}
