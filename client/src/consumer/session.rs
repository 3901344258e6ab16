//! Fetch sessions (KIP-227): what the consumer's fetch task remembers of the
//! session it holds with one broker, and how it turns the partitions it wants
//! fetched into a full or an incremental Fetch request.
//!
//! A session starts with a full request (`session_id` 0, `session_epoch` 0,
//! every partition). If the broker answers with a non-zero `session_id`, later
//! requests are incremental: they carry only partitions that are new to the
//! session or whose fetch state (offset, leader epochs, byte limit) changed, list
//! the partitions that left it in `forgotten_topics_data`, and number themselves
//! with an epoch that grows by one per request. A broker that answers
//! FETCH_SESSION_ID_NOT_FOUND or INVALID_FETCH_SESSION_EPOCH, or any failure of
//! the request, sends the session back to a full request; a broker that answers
//! a full request with `session_id` 0 (no session: too old, or its cache is
//! full) keeps getting full requests, as the Java client does.
//!
//! I/O-free: the fetch task calls [`FetchSession::build`] for each request and
//! [`FetchSession::on_response`] / [`FetchSession::on_failure`] with its outcome.

use std::collections::HashMap;
use std::sync::Arc;

use baton_protocol::messages::{FetchPartition, FetchTopic, ForgottenTopic};
use baton_protocol::{ErrorCode, Uuid};

/// The session id of "no session" and the epoch of a full request.
const INITIAL_EPOCH: i32 = 0;

/// One partition the fetch task wants in the next request.
#[derive(Debug, Clone)]
pub(crate) struct Want {
    pub(crate) topic: Arc<str>,
    pub(crate) topic_id: Uuid,
    pub(crate) fetch: FetchPartition,
}

/// What the broker holds for one partition of the session: the fields of the
/// request that last carried it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Sent {
    topic_id: Uuid,
    fetch_offset: i64,
    current_leader_epoch: i32,
    last_fetched_epoch: i32,
    log_start_offset: i64,
    partition_max_bytes: i32,
}

impl Sent {
    fn of(w: &Want) -> Sent {
        Sent {
            topic_id: w.topic_id,
            fetch_offset: w.fetch.fetch_offset,
            current_leader_epoch: w.fetch.current_leader_epoch,
            last_fetched_epoch: w.fetch.last_fetched_epoch,
            log_start_offset: w.fetch.log_start_offset,
            partition_max_bytes: w.fetch.partition_max_bytes,
        }
    }
}

/// The parts of a Fetch request a session decides.
#[derive(Debug, Default)]
pub(crate) struct Built {
    pub(crate) session_id: i32,
    pub(crate) session_epoch: i32,
    pub(crate) topics: Vec<FetchTopic>,
    pub(crate) forgotten: Vec<ForgottenTopic>,
    /// Partitions in `topics` (the rest of the session's are left out).
    pub(crate) sent_partitions: usize,
}

/// The fetch session with one broker.
///
/// Invariant: `parts` is what the broker holds if the last request it answered
/// without error was the last one built; any other outcome sets `epoch` back to
/// [`INITIAL_EPOCH`], so the next request is full and replaces it all.
#[derive(Debug, Default)]
pub(crate) struct FetchSession {
    /// The broker's id for the session, 0 for none.
    id: i32,
    /// The epoch of the next request: 0 for a full request, else 1.. (wrapping to 1).
    epoch: i32,
    /// The session's partitions as last sent.
    parts: HashMap<(Arc<str>, i32), Sent>,
}

impl FetchSession {
    /// Whether the next request is incremental.
    #[cfg(test)]
    pub(crate) fn is_incremental(&self) -> bool {
        self.id != 0 && self.epoch != INITIAL_EPOCH
    }

    /// The request for `wants` (every partition to fetch from this broker now):
    /// all of them for a full request, else only the new and the changed ones,
    /// with the session's others forgotten.
    pub(crate) fn build(&mut self, wants: &[Want]) -> Built {
        let full = self.id == 0 || self.epoch == INITIAL_EPOCH;
        let mut built = Built {
            session_id: self.id,
            session_epoch: if full { INITIAL_EPOCH } else { self.epoch },
            ..Built::default()
        };
        let mut next: HashMap<(Arc<str>, i32), Sent> = HashMap::with_capacity(wants.len());
        for w in wants {
            let key = (w.topic.clone(), w.fetch.partition);
            let sent = Sent::of(w);
            let changed = full || self.parts.get(&key) != Some(&sent);
            if changed {
                push_partition(&mut built.topics, w);
                built.sent_partitions += 1;
            }
            next.insert(key, sent);
        }
        if !full {
            let mut gone: Vec<(&(Arc<str>, i32), &Sent)> = self
                .parts
                .iter()
                .filter(|(k, _)| !next.contains_key(*k))
                .collect();
            gone.sort_by(|a, b| a.0.cmp(b.0));
            for ((topic, partition), sent) in gone {
                match built
                    .forgotten
                    .iter_mut()
                    .find(|f| f.topic == **topic && f.topic_id == sent.topic_id)
                {
                    Some(f) => f.partitions.push(*partition),
                    None => built.forgotten.push(ForgottenTopic {
                        topic: topic.to_string(),
                        topic_id: sent.topic_id,
                        partitions: vec![*partition],
                    }),
                }
            }
        }
        self.parts = next;
        built
    }

    /// The broker answered the request built last with top-level `error_code`
    /// and `session_id`.
    pub(crate) fn on_response(&mut self, error_code: i16, session_id: i32) {
        match ErrorCode::from_code(error_code) {
            ErrorCode::None => {}
            ErrorCode::FetchSessionIdNotFound => {
                // The broker has no such session: start a new one.
                self.id = 0;
                self.epoch = INITIAL_EPOCH;
                return;
            }
            _ => {
                // Close the session we have and open a new one (full request).
                self.epoch = INITIAL_EPOCH;
                return;
            }
        }
        if self.epoch == INITIAL_EPOCH || self.id == 0 {
            // The answer to a full request: the broker created a session, or none.
            self.id = session_id;
            self.epoch = if session_id == 0 { INITIAL_EPOCH } else { 1 };
        } else if session_id != self.id {
            // Not the session we asked about: start over.
            self.id = 0;
            self.epoch = INITIAL_EPOCH;
        } else {
            self.epoch = if self.epoch == i32::MAX {
                1
            } else {
                self.epoch + 1
            };
        }
    }

    /// The request built last failed (connection, timeout): the broker may or may
    /// not have applied it, so the next request is full.
    pub(crate) fn on_failure(&mut self) {
        self.epoch = INITIAL_EPOCH;
    }
}

fn push_partition(topics: &mut Vec<FetchTopic>, w: &Want) {
    match topics
        .iter_mut()
        .find(|t| t.topic == *w.topic && t.topic_id == w.topic_id)
    {
        Some(t) => t.partitions.push(w.fetch.clone()),
        None => topics.push(FetchTopic {
            topic: w.topic.to_string(),
            topic_id: w.topic_id,
            partitions: vec![w.fetch.clone()],
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn want(topic: &str, partition: i32, offset: i64) -> Want {
        Want {
            topic: Arc::from(topic),
            topic_id: Uuid::ZERO,
            fetch: FetchPartition {
                partition,
                current_leader_epoch: 3,
                fetch_offset: offset,
                last_fetched_epoch: -1,
                log_start_offset: -1,
                partition_max_bytes: 1024,
            },
        }
    }

    fn count(b: &Built) -> usize {
        b.topics.iter().map(|t| t.partitions.len()).sum()
    }

    #[test]
    fn full_then_incremental_with_only_changes_and_forgotten() {
        let mut s = FetchSession::default();
        let b = s.build(&[want("a", 0, 0), want("a", 1, 0), want("b", 0, 5)]);
        assert_eq!((b.session_id, b.session_epoch, count(&b)), (0, 0, 3));
        s.on_response(0, 77);
        assert!(s.is_incremental());
        // a/0 advanced; a/1 unchanged; b/0 left.
        let b = s.build(&[want("a", 0, 10), want("a", 1, 0)]);
        assert_eq!((b.session_id, b.session_epoch, count(&b)), (77, 1, 1));
        assert_eq!(b.topics[0].partitions[0].fetch_offset, 10);
        assert_eq!(b.forgotten.len(), 1);
        assert_eq!(
            (
                b.forgotten[0].topic.as_str(),
                &b.forgotten[0].partitions[..]
            ),
            ("b", &[0][..])
        );
        s.on_response(0, 77);
        let b = s.build(&[want("a", 0, 10), want("a", 1, 0)]);
        assert_eq!((b.session_epoch, count(&b), b.forgotten.len()), (2, 0, 0));
    }

    #[test]
    fn session_errors_and_failures_go_back_to_a_full_request() {
        let mut s = FetchSession::default();
        s.build(&[want("a", 0, 0)]);
        s.on_response(0, 5);
        s.build(&[want("a", 0, 1)]);
        s.on_response(ErrorCode::InvalidFetchSessionEpoch.code(), 0);
        let b = s.build(&[want("a", 0, 1)]);
        assert_eq!((b.session_id, b.session_epoch, count(&b)), (5, 0, 1));
        s.on_response(ErrorCode::FetchSessionIdNotFound.code(), 0);
        let b = s.build(&[want("a", 0, 1)]);
        assert_eq!((b.session_id, b.session_epoch), (0, 0));
        s.on_response(0, 9);
        s.build(&[want("a", 0, 2)]);
        s.on_failure();
        let b = s.build(&[want("a", 0, 2)]);
        assert_eq!((b.session_id, b.session_epoch, count(&b)), (9, 0, 1));
    }

    #[test]
    fn a_broker_without_sessions_gets_full_requests() {
        let mut s = FetchSession::default();
        s.build(&[want("a", 0, 0)]);
        s.on_response(0, 0);
        assert!(!s.is_incremental());
        let b = s.build(&[want("a", 0, 0)]);
        assert_eq!((b.session_id, b.session_epoch, count(&b)), (0, 0, 1));
    }
}
