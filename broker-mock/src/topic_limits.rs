//! The partition and topic ceilings of [`BrokerLimits`], checked one way for both
//! places that create topics: a standalone broker (`state.rs`, under its topic table's
//! write lock) and a cluster's controller (`cluster/controller_server.rs`, under its
//! state lock), so that the check and the creation are one step.
//!
//! A CreateTopics request is checked topic by topic, in order: a topic asking for more
//! than `max_partitions_per_request` on its own is `INVALID_PARTITIONS`; one that
//! would push the request's sum past it, or the broker's totals past `max_partitions`
//! or `max_topics`, is `POLICY_VIOLATION`. Each message names the limit and its value.

use baton_protocol::ErrorCode;

use crate::limits::BrokerLimits;

/// Topics and partitions counted against the limits.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Usage {
    /// Topics, internal ones included.
    pub topics: usize,
    /// Partitions of all those topics.
    pub partitions: usize,
}

impl Usage {
    /// `self` plus `other`.
    pub fn plus(self, other: Usage) -> Usage {
        Usage {
            topics: self.topics.saturating_add(other.topics),
            partitions: self.partitions.saturating_add(other.partitions),
        }
    }
}

/// Why a topic is refused: the error code and message of its result.
pub(crate) type Refusal = (ErrorCode, String);

/// What one CreateTopics request has created (or, with `validate_only`, validated)
/// so far, against `max_partitions_per_request`.
#[derive(Debug, Default)]
pub(crate) struct RequestBudget {
    used: Usage,
}

impl RequestBudget {
    /// Whether one more topic of `partitions` partitions fits this request.
    pub fn check(&self, limits: &BrokerLimits, partitions: usize) -> Result<(), Refusal> {
        let limit = limits.max_partitions_per_request;
        if partitions > limit {
            return Err((
                ErrorCode::InvalidPartitions,
                format!(
                    "Number of partitions {partitions} is above the broker's limit of {limit} \
                     partitions per request (max_partitions_per_request)."
                ),
            ));
        }
        if self.used.partitions.saturating_add(partitions) > limit {
            return Err((
                ErrorCode::PolicyViolation,
                format!(
                    "creating {partitions} partitions would exceed the broker's limit of {limit} \
                     partitions per request (max_partitions_per_request); this request already \
                     creates {}",
                    self.used.partitions
                ),
            ));
        }
        Ok(())
    }

    /// Counts a topic of `partitions` partitions as created by this request.
    pub fn charge(&mut self, partitions: usize) {
        self.used = self.used.plus(Usage {
            topics: 1,
            partitions,
        });
    }

    /// What this request has created or validated so far.
    pub fn used(&self) -> Usage {
        self.used
    }
}

/// Whether one more topic of `partitions` partitions fits the broker-wide totals,
/// given what `exists`.
pub(crate) fn check_totals(
    limits: &BrokerLimits,
    exists: Usage,
    partitions: usize,
) -> Result<(), Refusal> {
    if exists.topics >= limits.max_topics {
        return Err((
            ErrorCode::PolicyViolation,
            format!(
                "creating a topic would exceed the broker's limit of {} topics (max_topics); \
                 {} exist",
                limits.max_topics, exists.topics
            ),
        ));
    }
    if exists.partitions.saturating_add(partitions) > limits.max_partitions {
        return Err((
            ErrorCode::PolicyViolation,
            format!(
                "creating {partitions} partitions would exceed the broker's limit of {} \
                 partitions (max_partitions); {} exist",
                limits.max_partitions, exists.partitions
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> BrokerLimits {
        BrokerLimits {
            max_partitions: 100,
            max_topics: 3,
            max_partitions_per_request: 50,
            ..BrokerLimits::default()
        }
    }

    #[test]
    fn request_budget_per_topic_then_sum() {
        let l = limits();
        let mut b = RequestBudget::default();
        assert_eq!(b.check(&l, 51).unwrap_err().0, ErrorCode::InvalidPartitions);
        b.check(&l, 50).unwrap();
        b.charge(30);
        let (code, msg) = b.check(&l, 21).unwrap_err();
        assert_eq!(code, ErrorCode::PolicyViolation);
        assert!(
            msg.contains("limit of 50") && msg.contains("already creates 30"),
            "{msg}"
        );
        b.check(&l, 20).unwrap();
        assert_eq!(
            b.used(),
            Usage {
                topics: 1,
                partitions: 30
            }
        );
    }

    #[test]
    fn totals_count_topics_and_partitions() {
        let l = limits();
        let at = |topics, partitions| Usage { topics, partitions };
        check_totals(&l, at(2, 90), 10).unwrap();
        let (code, msg) = check_totals(&l, at(2, 90), 11).unwrap_err();
        assert_eq!(code, ErrorCode::PolicyViolation);
        assert!(msg.contains("(max_partitions); 90 exist"), "{msg}");
        let (_, msg) = check_totals(&l, at(3, 0), 1).unwrap_err();
        assert!(
            msg.contains("limit of 3 topics (max_topics); 3 exist"),
            "{msg}"
        );
        // Huge counts saturate instead of wrapping past the check.
        assert!(check_totals(&l, at(0, usize::MAX), usize::MAX).is_err());
    }
}
