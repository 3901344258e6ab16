//! The follower's side of one partition: find where the local log parted from the
//! leader's after a leader change, truncate there, then fetch.
//!
//! The follower owns its [`LeaderEpochCache`] and its LEO/HW view while it is a
//! follower; the driver owns the log itself. Every [`FollowerAction::Truncate`] has
//! already been applied to the cache here, and the driver must truncate the log to the
//! same offset (and persist [`FollowerState::epoch_cache`]) before sending the next
//! request.
//!
//! Truncation follows Kafka's `AbstractFetcherThread` rule for an answer
//! `(leader_epoch, leader_end)` from OffsetsForLeaderEpoch or a Fetch `diverging_epoch`:
//!
//! - answer undefined (`end_offset == -1`): the leader cannot place our epoch; truncate
//!   to our high watermark;
//! - answer epoch undefined, or we know no epoch `<=` it: truncate to
//!   `min(leader_end, our LEO)`;
//! - our largest epoch `<=` the answer's epoch is the answer's epoch: truncate to
//!   `min(leader_end, our end offset for it, our LEO)`; done;
//! - it is an older epoch (the leader answered with an epoch we never saw): truncate
//!   to `min(our end offset for it, our LEO)` and ask again with our now-latest epoch.
//!
//! After truncation the follower's HW is `min(HW, LEO)`; after each fetch it is
//! `min(leader HW, LEO)`.

use super::epoch_cache::{EpochEndOffset, LeaderEpochCache, UNDEFINED_EPOCH};
use super::leader::ReplicaId;

/// How the follower discovers divergence.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TruncationMode {
    /// Ask with OffsetsForLeaderEpoch before fetching (KIP-101/279).
    OffsetsForLeaderEpoch,
    /// Fetch at once with `last_fetched_epoch`; the leader answers with
    /// `diverging_epoch` when the logs differ (Fetch v12+, KIP-595).
    FetchDivergingEpoch,
}

/// Where the follower is in its protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FollowerPhase {
    /// Waiting for an OffsetsForLeaderEpoch answer for `requested_epoch`.
    AwaitingEpochEndOffset {
        /// The epoch asked about.
        requested_epoch: i32,
    },
    /// Fetching from the LEO.
    Fetching,
}

/// Something the driver must do.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum FollowerAction {
    /// Send OffsetsForLeaderEpoch to the leader; answer with
    /// [`FollowerState::on_epoch_end_offset`].
    SendOffsetsForLeaderEpoch {
        /// Our view of the leader epoch (`current_leader_epoch`), for fencing.
        current_leader_epoch: i32,
        /// The epoch whose end offset we ask for (`leader_epoch`).
        leader_epoch: i32,
    },
    /// Truncate the local log to `offset` (it becomes the LEO). The epoch cache here is
    /// already truncated.
    Truncate {
        /// The new LEO.
        offset: i64,
    },
    /// Send Fetch to the leader; answer with [`FollowerState::on_fetch_response`] or
    /// [`FollowerState::on_diverging_epoch`].
    Fetch {
        /// `fetch_offset`: our LEO.
        fetch_offset: i64,
        /// `last_fetched_epoch`: the epoch of our last batch, or -1.
        last_fetched_epoch: i32,
        /// `current_leader_epoch`, for fencing.
        current_leader_epoch: i32,
    },
    /// The follower's HW changed (moves with the leader's, so it may go down after a
    /// truncation or a new leader with a lagging HW).
    HighWatermarkChanged {
        /// The new HW.
        high_watermark: i64,
    },
}

/// A batch the driver appended to the local log from a fetch response (after its CRC
/// checked out).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AppendedBatch {
    /// First offset of the batch.
    pub base_offset: i64,
    /// Last offset of the batch.
    pub last_offset: i64,
    /// The batch's `partition_leader_epoch`.
    pub leader_epoch: i32,
}

/// Why an event was refused. A refusal leaves the state unchanged.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FollowerError {
    /// An answer arrived that the current phase did not ask for.
    #[error("unexpected {what} in phase {phase:?}")]
    Unexpected {
        /// What arrived.
        what: &'static str,
        /// The phase at the time.
        phase: FollowerPhase,
    },
    /// A new leader epoch is not newer than the current one.
    #[error("leader epoch {got} is not newer than {current}")]
    StaleLeaderEpoch {
        /// The epoch given.
        got: i32,
        /// The current epoch.
        current: i32,
    },
    /// Fetched batches do not continue the log, or are malformed.
    #[error(
        "batch [{base_offset}, {last_offset}] epoch {epoch} does not continue LEO {log_end_offset}"
    )]
    NonContiguous {
        /// Batch base offset.
        base_offset: i64,
        /// Batch last offset.
        last_offset: i64,
        /// Batch epoch.
        epoch: i32,
        /// Our LEO.
        log_end_offset: i64,
    },
}

/// Follower-side state of one partition.
#[derive(Debug, Clone)]
pub struct FollowerState {
    /// The leader we follow.
    leader_id: ReplicaId,
    /// The leader epoch we follow. Invariant: never decreases.
    leader_epoch: i32,
    /// Detection mode.
    mode: TruncationMode,
    /// The local log's epoch cache. Invariant: every entry starts below `log_end_offset`
    /// (or the cache is empty).
    cache: LeaderEpochCache,
    /// Local LEO. Invariant: `>= 0`.
    log_end_offset: i64,
    /// Local HW. Invariant: `0 <= high_watermark <= log_end_offset`.
    high_watermark: i64,
    /// Protocol phase.
    phase: FollowerPhase,
    /// Actions not yet taken by the driver.
    outbox: Vec<FollowerAction>,
}

impl FollowerState {
    /// Starts following `leader_id` at `leader_epoch` with the local log's epoch cache,
    /// LEO and HW. Emits the first request.
    pub fn new(
        leader_id: ReplicaId,
        leader_epoch: i32,
        mode: TruncationMode,
        cache: LeaderEpochCache,
        log_end_offset: i64,
        high_watermark: i64,
    ) -> Self {
        assert!(log_end_offset >= 0 && high_watermark >= 0);
        let mut cache = cache;
        // A cache entry at or past the LEO describes nothing in the log.
        cache.truncate_from_end(log_end_offset);
        let mut s = FollowerState {
            leader_id,
            leader_epoch,
            mode,
            cache,
            log_end_offset,
            high_watermark: high_watermark.min(log_end_offset),
            phase: FollowerPhase::Fetching,
            outbox: Vec::new(),
        };
        s.start();
        s.check_invariants();
        s
    }

    /// The leader followed.
    pub fn leader_id(&self) -> ReplicaId {
        self.leader_id
    }

    /// The leader epoch followed.
    pub fn leader_epoch(&self) -> i32 {
        self.leader_epoch
    }

    /// The local epoch cache (persist it after a truncation or a new epoch).
    pub fn epoch_cache(&self) -> &LeaderEpochCache {
        &self.cache
    }

    /// Local LEO.
    pub fn log_end_offset(&self) -> i64 {
        self.log_end_offset
    }

    /// Local HW.
    pub fn high_watermark(&self) -> i64 {
        self.high_watermark
    }

    /// The current phase.
    pub fn phase(&self) -> FollowerPhase {
        self.phase
    }

    /// The next fetch offset (the LEO) once fetching.
    pub fn fetch_offset(&self) -> Option<i64> {
        (self.phase == FollowerPhase::Fetching).then_some(self.log_end_offset)
    }

    /// Removes and returns the actions for the driver, oldest first.
    pub fn take_actions(&mut self) -> Vec<FollowerAction> {
        std::mem::take(&mut self.outbox)
    }

    /// Ends the follower role, returning the epoch cache, LEO and HW.
    pub fn into_parts(self) -> (LeaderEpochCache, i64, i64) {
        (self.cache, self.log_end_offset, self.high_watermark)
    }

    /// A new leader (or the same one at a newer epoch): start over with truncation.
    pub fn on_leader_change(
        &mut self,
        leader_id: ReplicaId,
        leader_epoch: i32,
    ) -> Result<(), FollowerError> {
        if leader_epoch <= self.leader_epoch {
            return Err(FollowerError::StaleLeaderEpoch {
                got: leader_epoch,
                current: self.leader_epoch,
            });
        }
        self.leader_id = leader_id;
        self.leader_epoch = leader_epoch;
        self.start();
        Ok(())
    }

    /// The leader's OffsetsForLeaderEpoch answer.
    pub fn on_epoch_end_offset(&mut self, answer: EpochEndOffset) -> Result<(), FollowerError> {
        if !matches!(self.phase, FollowerPhase::AwaitingEpochEndOffset { .. }) {
            return Err(FollowerError::Unexpected {
                what: "OffsetsForLeaderEpoch answer",
                phase: self.phase,
            });
        }
        let complete = self.truncate_for(answer);
        if complete {
            self.begin_fetching();
        } else {
            self.ask_epoch_end_offset();
        }
        self.check_invariants();
        Ok(())
    }

    /// A Fetch response carried `diverging_epoch`: truncate and fetch again.
    pub fn on_diverging_epoch(&mut self, answer: EpochEndOffset) -> Result<(), FollowerError> {
        if self.phase != FollowerPhase::Fetching {
            return Err(FollowerError::Unexpected {
                what: "diverging epoch",
                phase: self.phase,
            });
        }
        // Complete or not, the next fetch carries our (possibly older) last epoch and
        // the leader answers again if we still differ.
        self.truncate_for(answer);
        self.begin_fetching();
        self.check_invariants();
        Ok(())
    }

    /// A Fetch response without divergence: the driver appended `batches` (possibly
    /// none) to the local log; the leader's HW was `leader_high_watermark`. Emits the
    /// next fetch.
    pub fn on_fetch_response(
        &mut self,
        batches: &[AppendedBatch],
        leader_high_watermark: i64,
    ) -> Result<(), FollowerError> {
        if self.phase != FollowerPhase::Fetching {
            return Err(FollowerError::Unexpected {
                what: "fetch response",
                phase: self.phase,
            });
        }
        // Validate everything before changing anything.
        let mut leo = self.log_end_offset;
        let mut latest = self.cache.latest_epoch().unwrap_or(UNDEFINED_EPOCH);
        for b in batches {
            // A compacted leader's batches may skip offsets (Kafka's followers
            // accept any batch at or past their log end); never going back.
            if b.base_offset < leo
                || b.last_offset < b.base_offset
                || b.leader_epoch < latest
                || b.leader_epoch > self.leader_epoch
                || b.leader_epoch < 0
            {
                return Err(FollowerError::NonContiguous {
                    base_offset: b.base_offset,
                    last_offset: b.last_offset,
                    epoch: b.leader_epoch,
                    log_end_offset: leo,
                });
            }
            leo = b.last_offset + 1;
            latest = b.leader_epoch;
        }
        for b in batches {
            self.cache
                .assign(b.leader_epoch, b.base_offset)
                .expect("validated: epochs and offsets only grow");
        }
        self.log_end_offset = leo;
        self.set_high_watermark(leader_high_watermark.max(0).min(leo));
        self.emit_fetch();
        self.check_invariants();
        Ok(())
    }

    /// Emits the first request for the current leader.
    fn start(&mut self) {
        match self.mode {
            TruncationMode::OffsetsForLeaderEpoch => self.ask_epoch_end_offset(),
            TruncationMode::FetchDivergingEpoch => self.begin_fetching(),
        }
    }

    /// Asks the leader about our latest epoch; with no epoch known, falls back to
    /// truncating to the HW (what Kafka does on an undefined answer) and fetches.
    fn ask_epoch_end_offset(&mut self) {
        match self.cache.latest_epoch() {
            Some(epoch) => {
                self.phase = FollowerPhase::AwaitingEpochEndOffset {
                    requested_epoch: epoch,
                };
                self.outbox.push(FollowerAction::SendOffsetsForLeaderEpoch {
                    current_leader_epoch: self.leader_epoch,
                    leader_epoch: epoch,
                });
            }
            None => {
                self.truncate_to(self.high_watermark);
                self.begin_fetching();
            }
        }
    }

    /// Enters the fetching phase and emits a fetch.
    fn begin_fetching(&mut self) {
        self.phase = FollowerPhase::Fetching;
        self.emit_fetch();
    }

    fn emit_fetch(&mut self) {
        self.outbox.push(FollowerAction::Fetch {
            fetch_offset: self.log_end_offset,
            last_fetched_epoch: self.cache.latest_epoch().unwrap_or(UNDEFINED_EPOCH),
            current_leader_epoch: self.leader_epoch,
        });
    }

    /// Applies Kafka's truncation rule for `answer`; returns whether truncation is
    /// complete (false: ask again with the new latest epoch).
    fn truncate_for(&mut self, answer: EpochEndOffset) -> bool {
        let leo = self.log_end_offset;
        if answer.is_undefined() {
            self.truncate_to(self.high_watermark);
            return true;
        }
        if answer.epoch == UNDEFINED_EPOCH {
            self.truncate_to(answer.end_offset.min(leo));
            return true;
        }
        let ours = self.cache.end_offset_for(answer.epoch, leo);
        if ours.is_undefined() || ours.epoch == UNDEFINED_EPOCH {
            self.truncate_to(answer.end_offset.min(leo));
            return true;
        }
        if ours.epoch != answer.epoch {
            // Our floor epoch is not our latest (else the answer's epoch would be newer
            // than all of ours and `ours` undefined), so this removes at least one
            // cache entry: the exchange terminates.
            self.truncate_to(ours.end_offset.min(leo));
            return false;
        }
        self.truncate_to(ours.end_offset.min(answer.end_offset).min(leo));
        true
    }

    /// Truncates the local log to `offset` (no-op when `offset >= LEO`).
    fn truncate_to(&mut self, offset: i64) {
        let offset = offset.max(0);
        if offset >= self.log_end_offset {
            return;
        }
        self.cache.truncate_from_end(offset);
        self.log_end_offset = offset;
        self.outbox.push(FollowerAction::Truncate { offset });
        if self.high_watermark > offset {
            self.set_high_watermark(offset);
        }
    }

    fn set_high_watermark(&mut self, hw: i64) {
        if hw != self.high_watermark {
            self.high_watermark = hw;
            self.outbox
                .push(FollowerAction::HighWatermarkChanged { high_watermark: hw });
        }
    }

    fn check_invariants(&self) {
        assert!(0 <= self.high_watermark && self.high_watermark <= self.log_end_offset);
        if let Some(latest) = self.cache.latest() {
            assert!(
                latest.start_offset < self.log_end_offset,
                "epoch cache entry {latest:?} at or past LEO {}",
                self.log_end_offset
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::replication::epoch_cache::EpochEntry;
    use crate::replication::test_rng::Rng;

    /// A log as one (epoch, value) per offset, with a cache derived from it.
    #[derive(Debug, Clone, Default, PartialEq)]
    struct ModelLog {
        records: Vec<(i32, u64)>,
        /// The epoch this replica last led at, assigned at its LEO (may have written
        /// nothing yet).
        led_epoch: Option<i32>,
    }

    impl ModelLog {
        fn leo(&self) -> i64 {
            self.records.len() as i64
        }

        fn cache(&self) -> LeaderEpochCache {
            let mut c = LeaderEpochCache::new();
            for (i, (e, _)) in self.records.iter().enumerate() {
                c.assign(*e, i as i64).unwrap();
            }
            if let Some(e) = self.led_epoch {
                if c.latest_epoch().is_none_or(|l| l < e) {
                    c.assign(e, self.leo()).unwrap();
                }
            }
            c
        }
    }

    /// Runs a follower against a leader until it fetches with nothing left to do;
    /// returns the follower's final log and how many truncations happened.
    fn reconcile(
        follower: &ModelLog,
        follower_hw: i64,
        leader: &ModelLog,
        leader_epoch: i32,
        mode: TruncationMode,
    ) -> (ModelLog, Vec<i64>) {
        let leader_cache = leader.cache();
        let mut log = follower.clone();
        log.led_epoch = None;
        let mut f = FollowerState::new(2, leader_epoch, mode, log.cache(), log.leo(), follower_hw);
        let mut truncations = Vec::new();
        for _round in 0..100 {
            let actions = f.take_actions();
            assert!(!actions.is_empty());
            let mut next = None;
            for a in actions {
                match a {
                    FollowerAction::Truncate { offset } => {
                        log.records.truncate(offset as usize);
                        truncations.push(offset);
                    }
                    FollowerAction::SendOffsetsForLeaderEpoch {
                        current_leader_epoch,
                        leader_epoch: asked,
                    } => {
                        assert_eq!(current_leader_epoch, leader_epoch);
                        next = Some(Err(leader_cache.end_offset_for(asked, leader.leo())));
                    }
                    FollowerAction::Fetch {
                        fetch_offset,
                        last_fetched_epoch,
                        ..
                    } => {
                        assert_eq!(fetch_offset, log.leo());
                        next = Some(Ok((fetch_offset, last_fetched_epoch)));
                    }
                    FollowerAction::HighWatermarkChanged { .. } => {}
                }
            }
            match next.expect("a request each round") {
                Err(answer) => f.on_epoch_end_offset(answer).unwrap(),
                Ok((fetch_offset, last_epoch)) => {
                    if let Some(div) =
                        leader_cache.diverging_epoch(fetch_offset, last_epoch, leader.leo())
                    {
                        f.on_diverging_epoch(div).unwrap();
                        continue;
                    }
                    // Serve everything from fetch_offset as one batch per epoch run.
                    assert!(fetch_offset <= leader.leo(), "fetch beyond leader LEO");
                    if fetch_offset == leader.leo() {
                        f.on_fetch_response(&[], leader.leo()).unwrap();
                        return (log, truncations);
                    }
                    let mut batches = Vec::new();
                    let mut i = fetch_offset as usize;
                    while i < leader.records.len() {
                        let e = leader.records[i].0;
                        let start = i;
                        while i < leader.records.len() && leader.records[i].0 == e {
                            log.records.push(leader.records[i]);
                            i += 1;
                        }
                        batches.push(AppendedBatch {
                            base_offset: start as i64,
                            last_offset: i as i64 - 1,
                            leader_epoch: e,
                        });
                    }
                    f.on_fetch_response(&batches, leader.leo()).unwrap();
                    assert_eq!(f.log_end_offset(), log.leo());
                    assert_eq!(f.epoch_cache(), &log.cache());
                }
            }
        }
        panic!("follower did not converge");
    }

    fn log(runs: &[(i32, usize, u64)]) -> ModelLog {
        let mut l = ModelLog::default();
        for &(epoch, n, tag) in runs {
            for i in 0..n {
                l.records.push((epoch, tag * 1000 + i as u64));
            }
        }
        l
    }

    const MODES: [TruncationMode; 2] = [
        TruncationMode::OffsetsForLeaderEpoch,
        TruncationMode::FetchDivergingEpoch,
    ];

    #[test]
    fn classic_uncommitted_tail_is_replaced() {
        // Old leader A wrote 0..10 at epoch 1, only 0..5 reached B (HW 5). B leads at
        // epoch 2 and writes 3 different records. A returns as a follower.
        let a = log(&[(1, 10, 1)]);
        let mut b = log(&[(1, 5, 1), (2, 3, 2)]);
        b.led_epoch = Some(2);
        for mode in MODES {
            let (out, truncs) = reconcile(&a, 5, &b, 2, mode);
            assert_eq!(
                out,
                ModelLog {
                    records: b.records.clone(),
                    led_epoch: None
                },
                "{mode:?}"
            );
            assert_eq!(truncs, vec![5], "{mode:?}");
        }
    }

    #[test]
    fn follower_epoch_unknown_to_leader_needs_two_rounds() {
        // Follower briefly led epoch 3 (wrote 10..15, never replicated); the leader
        // went 1 -> 2 (at 8) -> 4 (at 12).
        let f = log(&[(1, 10, 1), (3, 5, 3)]);
        let mut l = log(&[(1, 8, 1), (2, 4, 2), (4, 6, 4)]);
        l.led_epoch = Some(4);
        let (out, truncs) = reconcile(&f, 8, &l, 4, TruncationMode::OffsetsForLeaderEpoch);
        assert_eq!(out.records, l.records);
        assert_eq!(
            truncs,
            vec![10, 8],
            "first to our end of epoch 1, then the leader's"
        );
        let (out, _) = reconcile(&f, 8, &l, 4, TruncationMode::FetchDivergingEpoch);
        assert_eq!(out.records, l.records);
    }

    #[test]
    fn follower_behind_without_divergence_does_not_truncate() {
        let f = log(&[(1, 4, 1)]);
        let mut l = log(&[(1, 8, 1), (3, 2, 3)]);
        l.led_epoch = Some(3);
        for mode in MODES {
            let (out, truncs) = reconcile(&f, 2, &l, 3, mode);
            assert_eq!(out.records, l.records);
            assert!(truncs.is_empty(), "{mode:?}");
        }
    }

    #[test]
    fn empty_follower_and_undefined_answers() {
        let mut l = log(&[(1, 3, 1)]);
        l.led_epoch = Some(1);
        let (out, truncs) = reconcile(&ModelLog::default(), 0, &l, 1, MODES[0]);
        assert_eq!(out.records, l.records);
        assert!(truncs.is_empty());
        // An undefined answer falls back to the HW.
        let mut f = FollowerState::new(
            1,
            9,
            TruncationMode::OffsetsForLeaderEpoch,
            log(&[(5, 10, 5)]).cache(),
            10,
            4,
        );
        f.take_actions();
        f.on_epoch_end_offset(EpochEndOffset::UNDEFINED).unwrap();
        assert_eq!(
            f.take_actions(),
            vec![
                FollowerAction::Truncate { offset: 4 },
                FollowerAction::Fetch {
                    fetch_offset: 4,
                    last_fetched_epoch: 5,
                    current_leader_epoch: 9
                }
            ]
        );
        assert!(f.on_epoch_end_offset(EpochEndOffset::UNDEFINED).is_err());
        assert!(f.on_leader_change(3, 9).is_err(), "epoch never decreases");
        f.on_leader_change(3, 10).unwrap();
        assert_eq!(
            f.phase(),
            FollowerPhase::AwaitingEpochEndOffset { requested_epoch: 5 }
        );
    }

    #[test]
    fn follower_hw_is_min_of_leader_hw_and_leo() {
        let mut f = FollowerState::new(
            1,
            2,
            TruncationMode::FetchDivergingEpoch,
            LeaderEpochCache::new(),
            0,
            0,
        );
        f.take_actions();
        let b = |base, last| AppendedBatch {
            base_offset: base,
            last_offset: last,
            leader_epoch: 2,
        };
        f.on_fetch_response(&[b(0, 4)], 50).unwrap();
        assert_eq!(f.high_watermark(), 5);
        f.on_fetch_response(&[b(5, 9)], 7).unwrap();
        assert_eq!(f.high_watermark(), 7);
        assert!(f.on_fetch_response(&[b(9, 12)], 7).is_err(), "overlap");
        let bad_epoch = AppendedBatch {
            base_offset: 10,
            last_offset: 10,
            leader_epoch: 3,
        };
        assert!(
            f.on_fetch_response(&[bad_epoch], 7).is_err(),
            "epoch newer than leader"
        );
        assert_eq!(f.log_end_offset(), 10);
        assert_eq!(
            f.epoch_cache().entries(),
            &[EpochEntry {
                epoch: 2,
                start_offset: 0
            }]
        );
        f.on_fetch_response(&[b(12, 13)], 7).unwrap();
        assert_eq!(
            f.log_end_offset(),
            14,
            "a compacted leader's gap is accepted"
        );
    }

    /// Random histories of three replicas with leader changes (clean or not) and
    /// partial replication; then every replica reconciles with a chosen leader and must
    /// end with exactly the leader's log, truncating to exactly the longest common
    /// prefix.
    #[test]
    fn random_histories_converge_to_leader_log() {
        for seed in 0..300u64 {
            let mut rng = Rng::new(seed);
            let mut logs = vec![ModelLog::default(); 3];
            let mut epoch = 0;
            let mut leader = 0usize;
            let mut tag = 0u64;
            logs[0].led_epoch = Some(0);
            for _ in 0..rng.below(12) + 1 {
                match rng.below(3) {
                    0 => {
                        // New leader: any replica (unclean included).
                        epoch += 1 + rng.below(2) as i32;
                        leader = rng.below(3) as usize;
                        logs[leader].led_epoch = Some(epoch);
                    }
                    1 => {
                        let n = rng.below(5) as usize;
                        for _ in 0..n {
                            tag += 1;
                            logs[leader].records.push((epoch, tag));
                        }
                    }
                    _ => {
                        // Oracle replication of a prefix of the leader's log.
                        let f = rng.below(3) as usize;
                        if f != leader {
                            let src = logs[leader].records.clone();
                            let lcp = lcp(&logs[f].records, &src);
                            let upto = lcp + rng.below((src.len() - lcp) as u64 + 1) as usize;
                            logs[f].records.truncate(lcp);
                            logs[f].records.extend_from_slice(&src[lcp..upto]);
                        }
                    }
                }
            }
            for f in 0..3 {
                if f == leader {
                    continue;
                }
                for mode in MODES {
                    let common = lcp(&logs[f].records, &logs[leader].records) as i64;
                    let hw = rng.below(common as u64 + 1) as i64;
                    let (out, truncs) = reconcile(&logs[f], hw, &logs[leader], epoch, mode);
                    assert_eq!(
                        out.records, logs[leader].records,
                        "seed {seed} {mode:?}: follower {f} {:?} leader {:?}",
                        logs[f], logs[leader]
                    );
                    let lowest = truncs.iter().copied().min().unwrap_or(logs[f].leo());
                    assert!(
                        lowest >= common,
                        "seed {seed} {mode:?}: truncated to {lowest}, below common prefix {common}"
                    );
                }
            }
        }
    }

    fn lcp(a: &[(i32, u64)], b: &[(i32, u64)]) -> usize {
        a.iter().zip(b).take_while(|(x, y)| x == y).count()
    }
}
