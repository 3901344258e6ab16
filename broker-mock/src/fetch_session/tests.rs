use baton_protocol::messages::{FetchPartition, FetchResponsePartitionData};
use baton_protocol::{ErrorCode, Uuid};
use bytes::Bytes;

use super::*;

fn key(p: i32) -> PartitionKey {
    PartitionKey {
        topic_id: Uuid::ZERO,
        topic: std::sync::Arc::from("t"),
        partition: p,
    }
}

fn req(p: i32, offset: i64) -> (PartitionKey, FetchPartition) {
    (
        key(p),
        FetchPartition {
            partition: p,
            fetch_offset: offset,
            partition_max_bytes: 1024,
            ..Default::default()
        },
    )
}

fn resp(p: i32, hw: i64, data: bool) -> FetchResponsePartitionData {
    FetchResponsePartitionData {
        partition_index: p,
        high_watermark: hw,
        last_stable_offset: hw,
        log_start_offset: 0,
        records: Some(if data {
            Bytes::from_static(b"x")
        } else {
            Bytes::new()
        }),
        ..Default::default()
    }
}

fn meta(session_id: i32, epoch: i32) -> RequestMeta {
    RequestMeta {
        session_id,
        epoch,
        version: 12,
        privileged: false,
    }
}

/// Opens a session over partitions `0..n`, all at high watermark 10.
fn open(cache: &mut FetchSessionCache, n: i32, privileged: bool, now: u64) -> i32 {
    let fetch: Vec<_> = (0..n).map(|p| req(p, 0)).collect();
    let mut m = meta(0, INITIAL_EPOCH);
    m.privileged = privileged;
    let r = cache.resolve(m, fetch, Vec::new(), now).expect("full");
    let read = r
        .partitions
        .into_iter()
        .map(|(k, q)| {
            let p = k.partition;
            (k, q, resp(p, 10, false))
        })
        .collect();
    let (err, id, out) = cache.finish(r.context, read, now);
    assert_eq!(err, ErrorCode::None);
    assert_eq!(
        out.len(),
        n as usize,
        "a full response carries every partition"
    );
    id
}

#[test]
fn a_full_fetch_opens_a_session_and_incremental_ones_send_only_changes() {
    let mut cache = FetchSessionCache::new(10, 1000, 7);
    let id = open(&mut cache, 5, false, 0);
    assert_ne!(id, INVALID_SESSION_ID);
    assert_eq!(cache.epoch(id), Some(1));
    assert_eq!(cache.total_partitions(), 5);

    // Nothing named: every session partition is read, none changed.
    let r = cache
        .resolve(meta(id, 1), Vec::new(), Vec::new(), 1)
        .unwrap();
    assert_eq!(r.partitions.len(), 5);
    let read: Vec<_> = r
        .partitions
        .into_iter()
        .map(|(k, q)| {
            let p = k.partition;
            (k, q, resp(p, if p == 3 { 11 } else { 10 }, p == 1))
        })
        .collect();
    let (err, got, out) = cache.finish(r.context, read, 1);
    assert_eq!((err, got), (ErrorCode::None, id));
    let sent: Vec<i32> = out.iter().map(|(k, _)| k.partition).collect();
    assert_eq!(sent, vec![1, 3], "new data and a moved high watermark only");

    // The partition that returned data moved to the end of the fetch order.
    let r = cache
        .resolve(meta(id, 2), vec![req(1, 1)], Vec::new(), 2)
        .unwrap();
    let order: Vec<i32> = r.partitions.iter().map(|(k, _)| k.partition).collect();
    assert_eq!(order, vec![0, 2, 3, 4, 1]);
    assert_eq!(
        r.partitions[4].1.fetch_offset, 1,
        "the new offset is cached"
    );
}

#[test]
fn session_errors_are_kafkas() {
    let mut cache = FetchSessionCache::new(10, 1000, 7);
    let id = open(&mut cache, 2, false, 0);
    assert_eq!(
        cache
            .resolve(meta(id + 1, 1), Vec::new(), Vec::new(), 1)
            .unwrap_err(),
        ErrorCode::FetchSessionIdNotFound
    );
    assert_eq!(
        cache
            .resolve(meta(id, 5), Vec::new(), Vec::new(), 1)
            .unwrap_err(),
        ErrorCode::InvalidFetchSessionEpoch
    );
    let mut v13 = meta(id, 1);
    v13.version = 13;
    assert_eq!(
        cache.resolve(v13, Vec::new(), Vec::new(), 1).unwrap_err(),
        ErrorCode::FetchSessionTopicIdError
    );
    // The right epoch still works after the refusals.
    assert!(cache
        .resolve(meta(id, 1), Vec::new(), Vec::new(), 1)
        .is_ok());
    // A full fetch naming the session closes it.
    let r = cache
        .resolve(meta(id, FINAL_EPOCH), vec![req(0, 0)], Vec::new(), 2)
        .unwrap();
    assert_eq!(r.context, Context::Sessionless);
    assert_eq!(cache.len(), 0);
    assert_eq!(cache.total_partitions(), 0);
}

#[test]
fn forgetting_every_partition_closes_the_session() {
    let mut cache = FetchSessionCache::new(10, 1000, 7);
    let id = open(&mut cache, 2, false, 0);
    let r = cache
        .resolve(meta(id, 1), Vec::new(), vec![key(0), key(1)], 1)
        .unwrap();
    assert_eq!(r.context, Context::Sessionless);
    assert!(r.partitions.is_empty());
    assert_eq!(cache.len(), 0);
}

#[test]
fn eviction_follows_privilege_size_and_age() {
    let mut cache = FetchSessionCache::new(2, 1000, 7);
    let a = open(&mut cache, 5, false, 0);
    let b = open(&mut cache, 3, false, 0);
    // Full, and neither is old enough: a consumer gets no session.
    assert_eq!(open(&mut cache, 10, false, 1), INVALID_SESSION_ID);
    // A follower may evict a consumer's session: the smallest goes.
    let f = open(&mut cache, 1, true, 2);
    assert_ne!(f, INVALID_SESSION_ID);
    assert_eq!(cache.epoch(b), None);
    assert!(cache.epoch(a).is_some());
    assert_eq!(cache.evictions(), 1);
    // A follower's young session is safe from another follower.
    let now = 3;
    cache
        .resolve(meta(a, 1), Vec::new(), Vec::new(), now)
        .unwrap();
    assert_ne!(open(&mut cache, 1, true, now), INVALID_SESSION_ID);
    assert_eq!(cache.epoch(a), None, "the consumer session went");
    assert!(cache.epoch(f).is_some());
    // Sessions unused for the eviction time go first, whoever asks.
    let later = 3 + EVICTION_MS + 1;
    assert_ne!(open(&mut cache, 1, false, later), INVALID_SESSION_ID);
    assert_eq!(cache.len(), 2);
}

#[test]
fn the_partition_bound_refuses_sessions_and_growth() {
    let mut cache = FetchSessionCache::new(10, 6, 7);
    let id = open(&mut cache, 5, false, 0);
    assert_eq!(open(&mut cache, 2, false, 0), INVALID_SESSION_ID);
    assert_eq!(cache.total_partitions(), 5);
    // Growing past it closes the session.
    let err = cache
        .resolve(meta(id, 1), vec![req(7, 0), req(8, 0)], Vec::new(), 1)
        .unwrap_err();
    assert_eq!(err, ErrorCode::FetchSessionIdNotFound);
    assert_eq!(cache.len(), 0);
    assert_eq!(cache.total_partitions(), 0);
}

#[test]
fn errors_are_always_sent_and_resent_after_they_clear() {
    let mut cache = FetchSessionCache::new(10, 1000, 7);
    let id = open(&mut cache, 1, false, 0);
    let mut epoch = 1;
    let mut round = |cache: &mut FetchSessionCache, r: FetchResponsePartitionData| {
        let res = cache
            .resolve(meta(id, epoch), Vec::new(), Vec::new(), 1)
            .unwrap();
        epoch += 1;
        let read = res
            .partitions
            .into_iter()
            .map(|(k, q)| (k, q, r.clone()))
            .collect();
        cache.finish(res.context, read, 1).2.len()
    };
    let mut bad = resp(0, -1, false);
    bad.error_code = ErrorCode::NotLeaderOrFollower.code();
    assert_eq!(round(&mut cache, bad.clone()), 1);
    assert_eq!(round(&mut cache, bad), 1, "errors are sent every time");
    assert_eq!(
        round(&mut cache, resp(0, 10, false)),
        1,
        "then the recovery"
    );
    assert_eq!(round(&mut cache, resp(0, 10, false)), 0);
}
