//! KIP-227 incremental fetch sessions: the broker's I/O-free session cache.
//!
//! A fetcher (consumer or follower) opens a session with a full Fetch request
//! (`session_id` 0, `session_epoch` 0); the broker caches the request's partitions with
//! their fetch parameters and the last response values it sent for them, and answers
//! with a new session id. Later requests are incremental (`session_id` set, the
//! session's next epoch): they name only the partitions whose fetch parameters
//! changed, plus `forgotten_topics_data` to drop, and the broker reads every
//! partition of the session but answers only those with something new — records, a
//! changed high watermark or log start offset, an error, a diverging epoch, a
//! preferred read replica. What Apache Kafka does (`FetchManager`, `FetchSession`,
//! `FetchSessionCacheShard`), with these rules:
//!
//! - `session_epoch` -1 (`FINAL_EPOCH`) never creates a session; a full request that
//!   names a session closes it.
//! - An incremental request for an unknown session is `FETCH_SESSION_ID_NOT_FOUND`;
//!   with an epoch other than the session's next one `INVALID_FETCH_SESSION_EPOCH`;
//!   with a request version on the other side of v13 than the session's (topic ids
//!   versus names) `FETCH_SESSION_TOPIC_ID_ERROR`. An incremental request that leaves
//!   the session empty closes it and is answered without a session.
//! - The cache holds at most `max.incremental.fetch.session.cache.slots` sessions
//!   ([`BrokerLimits::max_fetch_sessions`](crate::BrokerLimits::max_fetch_sessions)).
//!   When full, a new session may evict, as Kafka's does: first any session unused
//!   for [`EVICTION_MS`]; else, for a follower's (privileged) session, the smallest
//!   consumer session or follower session older than [`EVICTION_MS`]; for a
//!   consumer's, the smallest session older than [`EVICTION_MS`] — in both cases
//!   only if that one is not larger (privilege first, then partition count) than the
//!   new one. Otherwise the fetch is answered without a session (session id 0).
//! - Beyond Kafka: the partitions of all sessions together are bounded by
//!   [`BrokerLimits::max_fetch_session_partitions`](crate::BrokerLimits::max_fetch_session_partitions).
//!   A full fetch that would pass it gets no session; an incremental one that would
//!   closes its session with `FETCH_SESSION_ID_NOT_FOUND` (the fetcher falls back to
//!   a full fetch).
//!
//! Invariants: `total_partitions` is the sum of the sessions' partition counts and is
//! at most `max_partitions`; `sessions.len() <= max_slots`; a session's `epoch` is
//! the epoch its next request must carry (never 0 or negative).

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use baton_protocol::messages::{FetchPartition, FetchResponsePartitionData};
use baton_protocol::{ErrorCode, Uuid};

/// The session id of "no session".
pub(crate) const INVALID_SESSION_ID: i32 = 0;
/// The epoch of a full request that opens a session.
pub(crate) const INITIAL_EPOCH: i32 = 0;
/// The epoch of a full request that wants no session (and closes the one named).
pub(crate) const FINAL_EPOCH: i32 = -1;
/// How long a session must be unused before any new session may evict it, and how
/// old a session must be before a consumer's new session of at least its size may
/// (Kafka's fixed `MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS`, 120 s).
pub(crate) const EVICTION_MS: u64 = 120_000;

/// The epoch after `epoch`: 1 after `i32::MAX`; stays final once final.
fn next_epoch(epoch: i32) -> i32 {
    if epoch < 0 {
        FINAL_EPOCH
    } else if epoch == i32::MAX {
        1
    } else {
        epoch + 1
    }
}

/// One partition as a session names it: by topic id for v13+ sessions (the name
/// empty), by topic name before (the id zero).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct PartitionKey {
    /// The topic id (v13+), else zero.
    pub topic_id: Uuid,
    /// The topic name (v4–v12), else empty; shared by the topic's partitions.
    pub topic: Arc<str>,
    /// The partition index.
    pub partition: i32,
}

/// What a session remembers of one partition: the fetcher's last parameters and
/// the values last sent for it.
#[derive(Debug, Clone)]
struct CachedPartition {
    /// The fetch parameters last named for it (offset, epochs, max bytes).
    request: FetchPartition,
    /// The high watermark last sent; -1 before the first send and after an error,
    /// so the partition is sent again.
    high_watermark: i64,
    /// The log start offset last sent.
    log_start_offset: i64,
    /// The last stable offset last sent.
    last_stable_offset: i64,
}

impl CachedPartition {
    fn new(request: FetchPartition) -> Self {
        CachedPartition {
            request,
            high_watermark: -1,
            log_start_offset: -1,
            last_stable_offset: -1,
        }
    }

    /// Whether `resp` must be sent, remembering what it sends when `update`.
    fn must_respond(&mut self, resp: &FetchResponsePartitionData, update: bool) -> bool {
        let mut must = resp.records.as_ref().is_some_and(|r| !r.is_empty())
            || resp.preferred_read_replica >= 0
            || resp.diverging_epoch.epoch >= 0
            || resp.diverging_epoch.end_offset >= 0;
        if self.high_watermark != resp.high_watermark
            || self.log_start_offset != resp.log_start_offset
            || self.last_stable_offset != resp.last_stable_offset
        {
            must = true;
            if update {
                self.high_watermark = resp.high_watermark;
                self.log_start_offset = resp.log_start_offset;
                self.last_stable_offset = resp.last_stable_offset;
            }
        }
        if resp.error_code != 0 {
            must = true;
            if update {
                self.high_watermark = -1;
            }
        }
        must
    }
}

/// A session's partitions in fetch order (insertion order; a partition that
/// returned records moves to the end, so large partitions cannot starve the rest).
#[derive(Debug, Default)]
struct PartitionMap {
    order: BTreeMap<u64, PartitionKey>,
    entries: HashMap<PartitionKey, (u64, CachedPartition)>,
    next_seq: u64,
}

impl PartitionMap {
    fn len(&self) -> usize {
        self.entries.len()
    }

    fn upsert(&mut self, key: PartitionKey, request: FetchPartition) {
        match self.entries.get_mut(&key) {
            Some((_, cached)) => cached.request = request,
            None => {
                let seq = self.next_seq;
                self.next_seq += 1;
                self.order.insert(seq, key.clone());
                self.entries
                    .insert(key, (seq, CachedPartition::new(request)));
            }
        }
    }

    fn remove(&mut self, key: &PartitionKey) -> bool {
        match self.entries.remove(key) {
            Some((seq, _)) => {
                self.order.remove(&seq);
                true
            }
            None => false,
        }
    }

    fn move_to_end(&mut self, key: &PartitionKey) {
        if let Some((seq, _)) = self.entries.get_mut(key) {
            self.order.remove(seq);
            *seq = self.next_seq;
            self.next_seq += 1;
            self.order.insert(*seq, key.clone());
        }
    }

    fn iter(&self) -> impl Iterator<Item = (&PartitionKey, &CachedPartition)> {
        self.order
            .values()
            .filter_map(|k| self.entries.get(k).map(|(_, c)| (k, c)))
    }
}

/// One fetch session.
#[derive(Debug)]
struct Session {
    /// A follower's session: harder to evict.
    privileged: bool,
    /// Opened by a v13+ request (partitions named by topic id).
    uses_topic_ids: bool,
    created_ms: u64,
    last_used_ms: u64,
    /// The epoch the next request must carry.
    epoch: i32,
    partitions: PartitionMap,
    /// The partition count last accounted in the cache's totals and keys.
    cached_size: usize,
}

/// A session's eviction rank: privilege first, then size, then id (Kafka's
/// `EvictableKey`).
type EvictableKey = (bool, usize, i32);

/// What a request's session handling decided, for [`FetchSessionCache::finish`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Context {
    /// Answer every partition, no session.
    Sessionless,
    /// Answer every partition and try to open a session for them.
    Full {
        /// A follower's request.
        privileged: bool,
        /// A v13+ request.
        uses_topic_ids: bool,
    },
    /// Answer only what changed, in session `id`, whose epoch is now `epoch`.
    Incremental {
        /// The session id.
        id: i32,
        /// The session's epoch after this request.
        epoch: i32,
    },
}

/// The session fields of a Fetch request.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RequestMeta {
    /// `session_id`.
    pub session_id: i32,
    /// `session_epoch`.
    pub epoch: i32,
    /// The request's version.
    pub version: i16,
    /// From a follower (`replica_id >= 0`).
    pub privileged: bool,
}

/// A request resolved against the cache: how to answer, and the partitions to read.
#[derive(Debug)]
pub(crate) struct Resolved {
    /// How to answer.
    pub context: Context,
    /// The partitions to read: the request's for full and sessionless requests,
    /// every partition of the session for incremental ones.
    pub partitions: Vec<(PartitionKey, FetchPartition)>,
}

/// The fetch sessions of one broker node.
#[derive(Debug)]
pub(crate) struct FetchSessionCache {
    max_slots: usize,
    max_partitions: usize,
    sessions: HashMap<i32, Session>,
    /// Sessions by last use.
    last_used: BTreeSet<(u64, i32)>,
    /// Sessions a follower's new session may evict (as of their last use).
    evictable_by_privileged: BTreeSet<EvictableKey>,
    /// Sessions any new session may evict (as of their last use).
    evictable_by_all: BTreeSet<EvictableKey>,
    /// Sum of `cached_size` over the sessions.
    total_partitions: usize,
    /// Sessions evicted so far.
    evictions: u64,
    rng: u64,
}

impl FetchSessionCache {
    /// A cache of at most `max_slots` sessions holding at most `max_partitions`
    /// partitions together; `seed` picks session ids.
    pub fn new(max_slots: usize, max_partitions: usize, seed: u64) -> Self {
        FetchSessionCache {
            max_slots,
            max_partitions,
            sessions: HashMap::new(),
            last_used: BTreeSet::new(),
            evictable_by_privileged: BTreeSet::new(),
            evictable_by_all: BTreeSet::new(),
            total_partitions: 0,
            evictions: 0,
            rng: seed | 1,
        }
    }

    /// Open sessions.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.sessions.len()
    }

    /// Partitions cached over all sessions.
    #[cfg(test)]
    pub fn total_partitions(&self) -> usize {
        self.total_partitions
    }

    /// Sessions evicted so far.
    #[cfg(test)]
    pub fn evictions(&self) -> u64 {
        self.evictions
    }

    /// Resolves a request's session fields (`fetch` its partitions, `forget` its
    /// `forgotten_topics_data`) at `now_ms`. `Err` is the top-level error to answer.
    pub fn resolve(
        &mut self,
        meta: RequestMeta,
        fetch: Vec<(PartitionKey, FetchPartition)>,
        forget: Vec<PartitionKey>,
        now_ms: u64,
    ) -> Result<Resolved, ErrorCode> {
        let full = meta.epoch == INITIAL_EPOCH || meta.epoch == FINAL_EPOCH;
        if full {
            if meta.session_id != INVALID_SESSION_ID {
                self.remove(meta.session_id);
            }
            let context = if meta.epoch == FINAL_EPOCH || self.max_slots == 0 {
                Context::Sessionless
            } else {
                Context::Full {
                    privileged: meta.privileged,
                    uses_topic_ids: meta.version >= 13,
                }
            };
            return Ok(Resolved {
                context,
                partitions: fetch,
            });
        }
        let id = meta.session_id;
        let Some(session) = self.sessions.get(&id) else {
            return Err(ErrorCode::FetchSessionIdNotFound);
        };
        if session.epoch != meta.epoch {
            return Err(ErrorCode::InvalidFetchSessionEpoch);
        }
        if session.uses_topic_ids != (meta.version >= 13) {
            return Err(ErrorCode::FetchSessionTopicIdError);
        }
        // What the update would make the session hold, checked against the limit
        // before anything changes.
        let mut after: HashSet<&PartitionKey> = session.partitions.entries.keys().collect();
        after.extend(fetch.iter().map(|(k, _)| k));
        for k in &forget {
            after.remove(k);
        }
        let new_size = after.len();
        let others = self.total_partitions - session.cached_size;
        if others + new_size > self.max_partitions {
            self.remove(id);
            return Err(ErrorCode::FetchSessionIdNotFound);
        }
        let session = self.sessions.get_mut(&id).expect("looked up above");
        for (k, p) in fetch.iter().cloned() {
            session.partitions.upsert(k, p);
        }
        for k in &forget {
            session.partitions.remove(k);
        }
        if session.partitions.len() == 0 {
            self.remove(id);
            return Ok(Resolved {
                context: Context::Sessionless,
                partitions: fetch,
            });
        }
        session.epoch = next_epoch(session.epoch);
        let epoch = session.epoch;
        let partitions = session
            .partitions
            .iter()
            .map(|(k, c)| (k.clone(), c.request.clone()))
            .collect();
        self.touch(id, now_ms);
        Ok(Resolved {
            context: Context::Incremental { id, epoch },
            partitions,
        })
    }

    /// Shapes the answer to a resolved request from what was read for its
    /// partitions (`read`: each partition's key, request and response, in the
    /// order resolved). Returns the top-level error, the session id to answer and
    /// the partitions to send: all of them for sessionless and full requests (a
    /// full one opens a session if the cache allows), only the changed ones for
    /// incremental ones.
    pub fn finish(
        &mut self,
        context: Context,
        read: Vec<(PartitionKey, FetchPartition, FetchResponsePartitionData)>,
        now_ms: u64,
    ) -> (
        ErrorCode,
        i32,
        Vec<(PartitionKey, FetchResponsePartitionData)>,
    ) {
        match context {
            Context::Sessionless => (
                ErrorCode::None,
                INVALID_SESSION_ID,
                read.into_iter().map(|(k, _, r)| (k, r)).collect(),
            ),
            Context::Full {
                privileged,
                uses_topic_ids,
            } => {
                let mut partitions = PartitionMap::default();
                for (k, req, resp) in &read {
                    partitions.upsert(k.clone(), req.clone());
                    if let Some((_, c)) = partitions.entries.get_mut(k) {
                        c.must_respond(resp, true);
                    }
                }
                let id = self.maybe_create(privileged, uses_topic_ids, partitions, now_ms);
                (
                    ErrorCode::None,
                    id,
                    read.into_iter().map(|(k, _, r)| (k, r)).collect(),
                )
            }
            Context::Incremental { id, epoch } => {
                let Some(session) = self.sessions.get_mut(&id) else {
                    // Evicted while the fetch waited: the next request learns it.
                    return (
                        ErrorCode::None,
                        id,
                        read.into_iter().map(|(k, _, r)| (k, r)).collect(),
                    );
                };
                if session.epoch != epoch {
                    return (ErrorCode::InvalidFetchSessionEpoch, id, Vec::new());
                }
                let mut out = Vec::new();
                for (k, _, resp) in read {
                    let Some((_, cached)) = session.partitions.entries.get_mut(&k) else {
                        continue;
                    };
                    if cached.must_respond(&resp, true) {
                        if resp.records.as_ref().is_some_and(|r| !r.is_empty()) {
                            session.partitions.move_to_end(&k);
                        }
                        out.push((k, resp));
                    }
                }
                (ErrorCode::None, id, out)
            }
        }
    }

    fn new_session_id(&mut self) -> i32 {
        loop {
            // xorshift64
            self.rng ^= self.rng << 13;
            self.rng ^= self.rng >> 7;
            self.rng ^= self.rng << 17;
            let id = (self.rng >> 33) as i32 & i32::MAX;
            if id != INVALID_SESSION_ID && !self.sessions.contains_key(&id) {
                return id;
            }
        }
    }

    fn maybe_create(
        &mut self,
        privileged: bool,
        uses_topic_ids: bool,
        partitions: PartitionMap,
        now_ms: u64,
    ) -> i32 {
        let size = partitions.len();
        if self.max_slots == 0 || size > self.max_partitions {
            return INVALID_SESSION_ID;
        }
        let room = self.sessions.len() < self.max_slots
            || self.try_evict(privileged, (privileged, size, 0), now_ms);
        if !room {
            return INVALID_SESSION_ID;
        }
        // The partition bound: evict stale sessions for room, else open none.
        while self.total_partitions + size > self.max_partitions {
            if !self.evict_stale(now_ms) {
                return INVALID_SESSION_ID;
            }
        }
        let id = self.new_session_id();
        self.sessions.insert(
            id,
            Session {
                privileged,
                uses_topic_ids,
                created_ms: now_ms,
                last_used_ms: now_ms,
                epoch: next_epoch(INITIAL_EPOCH),
                partitions,
                cached_size: 0,
            },
        );
        self.last_used.insert((now_ms, id));
        self.account(id, now_ms);
        id
    }

    fn evict_stale(&mut self, now_ms: u64) -> bool {
        match self.last_used.first().copied() {
            Some((used, id)) if now_ms.saturating_sub(used) > EVICTION_MS => {
                self.remove(id);
                self.evictions += 1;
                true
            }
            _ => false,
        }
    }

    /// Kafka's `tryEvict`: a stale session, else the least valuable evictable one
    /// if `key` ranks at least as high.
    fn try_evict(&mut self, privileged: bool, key: EvictableKey, now_ms: u64) -> bool {
        if self.evict_stale(now_ms) {
            return true;
        }
        let set = if privileged {
            &self.evictable_by_privileged
        } else {
            &self.evictable_by_all
        };
        match set.first().copied() {
            Some(victim) if key >= victim => {
                self.remove(victim.2);
                self.evictions += 1;
                true
            }
            _ => false,
        }
    }

    /// Records a use of session `id` at `now_ms`.
    fn touch(&mut self, id: i32, now_ms: u64) {
        let Some(s) = self.sessions.get_mut(&id) else {
            return;
        };
        self.last_used.remove(&(s.last_used_ms, id));
        s.last_used_ms = now_ms;
        self.last_used.insert((now_ms, id));
        self.account(id, now_ms);
    }

    /// Re-files session `id` under its current size in the totals and the
    /// evictable sets.
    fn account(&mut self, id: i32, now_ms: u64) {
        let Some(s) = self.sessions.get_mut(&id) else {
            return;
        };
        let old: EvictableKey = (s.privileged, s.cached_size, id);
        self.evictable_by_privileged.remove(&old);
        self.evictable_by_all.remove(&old);
        self.total_partitions -= s.cached_size;
        s.cached_size = s.partitions.len();
        self.total_partitions += s.cached_size;
        let key: EvictableKey = (s.privileged, s.cached_size, id);
        let old_enough = now_ms.saturating_sub(s.created_ms) > EVICTION_MS;
        if !s.privileged || old_enough {
            self.evictable_by_privileged.insert(key);
        }
        if old_enough {
            self.evictable_by_all.insert(key);
        }
        debug_assert!(self.total_partitions <= self.max_partitions);
    }

    /// Closes session `id`; whether it existed.
    pub fn remove(&mut self, id: i32) -> bool {
        let Some(s) = self.sessions.remove(&id) else {
            return false;
        };
        self.last_used.remove(&(s.last_used_ms, id));
        let key: EvictableKey = (s.privileged, s.cached_size, id);
        self.evictable_by_privileged.remove(&key);
        self.evictable_by_all.remove(&key);
        self.total_partitions -= s.cached_size;
        true
    }

    /// The epoch the next request of session `id` must carry.
    #[cfg(test)]
    fn epoch(&self, id: i32) -> Option<i32> {
        self.sessions.get(&id).map(|s| s.epoch)
    }
}

#[cfg(test)]
mod tests;
