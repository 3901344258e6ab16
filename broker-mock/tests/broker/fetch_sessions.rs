//! KIP-227 incremental fetch sessions over raw frames: a session's incremental
//! requests and responses carry only changed partitions, epochs and session
//! errors, `forgotten_topics_data`, eviction at the cache's slot limit, and
//! long-polling within a session.

use baton_broker::{Broker, BrokerConfig, BrokerLimits};
use baton_protocol::messages::*;
use baton_protocol::{ErrorCode, Uuid};
use baton_testkit::wire::*;

/// A consumer's Fetch of `partitions` of `topic` (by name and id, so it serves v12
/// and v13) from `offset`, in session `session_id` at `epoch`.
fn fetch(
    topic: &str,
    topic_id: Uuid,
    partitions: &[(i32, i64)],
    session_id: i32,
    epoch: i32,
) -> FetchRequest {
    FetchRequest {
        replica_id: -1,
        max_wait_ms: 0,
        min_bytes: 0,
        max_bytes: 50 << 20,
        session_id,
        session_epoch: epoch,
        topics: if partitions.is_empty() {
            Vec::new()
        } else {
            vec![FetchTopic {
                topic: topic.into(),
                topic_id,
                partitions: partitions
                    .iter()
                    .map(|&(partition, fetch_offset)| FetchPartition {
                        partition,
                        fetch_offset,
                        partition_max_bytes: 1 << 20,
                        ..Default::default()
                    })
                    .collect(),
            }]
        },
        ..Default::default()
    }
}

/// The partitions a response carries, as (index, record values), in order.
fn carried(resp: &FetchResponse) -> Vec<(i32, Vec<String>)> {
    resp.responses
        .iter()
        .flat_map(|t| t.partitions.iter())
        .map(|p| {
            assert_eq!(p.error_code, 0, "partition {}", p.partition_index);
            (p.partition_index, values(&p.records))
        })
        .collect()
}

async fn topic_id(c: &mut Client, topic: &str) -> Uuid {
    let md = c
        .call(
            &MetadataRequest {
                topics: Some(vec![MetadataRequestTopic {
                    name: Some(topic.into()),
                    topic_id: Uuid::ZERO,
                }]),
                ..Default::default()
            },
            12,
        )
        .await;
    md.topics[0].topic_id
}

#[tokio::test]
async fn incremental_fetches_of_1000_partitions_carry_only_changed_partitions() {
    let broker = Broker::start(BrokerConfig::in_memory()).await.unwrap();
    let mut c = Client::connect(broker.local_addr()).await;
    for version in [12, 13] {
        let topic = topic_name("sessions");
        create_topic(&mut c, &topic, 1000).await;
        let id = topic_id(&mut c, &topic).await;
        let base: i64 = 0;
        let all: Vec<(i32, i64)> = (0..1000).map(|p| (p, base)).collect();
        // The full fetch opens a session and carries every partition.
        let resp = c.call(&fetch(&topic, id, &all, 0, 0), version).await;
        assert_eq!(resp.error_code, 0);
        assert_ne!(resp.session_id, 0, "a session is opened");
        assert_eq!(carried(&resp).len(), 1000);
        let session = resp.session_id;

        // Nothing changed: an incremental fetch naming nothing gets nothing.
        let resp = c.call(&fetch(&topic, id, &[], session, 1), version).await;
        assert_eq!((resp.error_code, resp.session_id), (0, session));
        assert_eq!(carried(&resp).len(), 0);

        // Records on three partitions: exactly those come back.
        for p in [7, 500, 999] {
            let r = c
                .call(
                    &produce_req(&topic, p, 1, records(1, &[&format!("v{p}")])),
                    9,
                )
                .await;
            assert_eq!(r.responses[0].partition_responses[0].error_code, 0);
        }
        let resp = c.call(&fetch(&topic, id, &[], session, 2), version).await;
        assert_eq!(
            carried(&resp),
            vec![
                (7, vec!["v7".to_owned()]),
                (500, vec!["v500".to_owned()]),
                (999, vec!["v999".to_owned()]),
            ]
        );
        // The consumer names the three at their new offsets: no change to report.
        let next = base + 1;
        let moved = [(7, next), (500, next), (999, next)];
        let resp = c
            .call(&fetch(&topic, id, &moved, session, 3), version)
            .await;
        assert_eq!(carried(&resp).len(), 0);

        // Forgetting partition 7: its new records are no longer sent.
        let mut req = fetch(&topic, id, &[], session, 4);
        req.forgotten_topics_data = vec![ForgottenTopic {
            topic: topic.clone(),
            topic_id: id,
            partitions: vec![7],
        }];
        let resp = c.call(&req, version).await;
        assert_eq!(carried(&resp).len(), 0);
        for p in [7, 8] {
            c.call(
                &produce_req(&topic, p, 1, records(1, &[&format!("w{p}")])),
                9,
            )
            .await;
        }
        let resp = c.call(&fetch(&topic, id, &[], session, 5), version).await;
        assert_eq!(carried(&resp), vec![(8, vec![format!("w8")])]);
        // A partition the session does not hold is added and answered (8 moves on
        // past its record; unnamed, it would be read from its old offset again).
        let resp = c
            .call(
                &fetch(&topic, id, &[(7, base), (8, next)], session, 6),
                version,
            )
            .await;
        assert_eq!(
            carried(&resp),
            vec![(7, vec!["v7".to_owned(), "w7".to_owned()])]
        );
        // Close the session (epoch -1), so the second round starts clean.
        let resp = c.call(&fetch(&topic, id, &[], session, -1), version).await;
        assert_eq!(resp.session_id, 0);
        let resp = c.call(&fetch(&topic, id, &[], session, 1), version).await;
        assert_eq!(
            resp.error_code,
            ErrorCode::FetchSessionIdNotFound.code(),
            "closed"
        );
    }
    broker.shutdown().await;
}

#[tokio::test]
async fn session_epochs_and_errors_follow_kafka() {
    let broker = Broker::start(BrokerConfig::in_memory()).await.unwrap();
    let mut c = Client::connect(broker.local_addr()).await;
    let topic = topic_name("epochs");
    create_topic(&mut c, &topic, 2).await;
    let id = topic_id(&mut c, &topic).await;
    let both = [(0, 0), (1, 0)];

    // Epoch -1 never opens a session; a v6 request has no sessions at all.
    let resp = c.call(&fetch(&topic, id, &both, 0, -1), 12).await;
    assert_eq!((resp.error_code, resp.session_id), (0, 0));
    assert_eq!(carried(&resp).len(), 2);
    let resp = c.call(&fetch(&topic, id, &both, 0, 0), 6).await;
    assert_eq!(carried(&resp).len(), 2);

    let resp = c.call(&fetch(&topic, id, &both, 0, 0), 12).await;
    let session = resp.session_id;
    assert_ne!(session, 0);
    let err = |r: &FetchResponse| (r.error_code, r.responses.len());
    // An unknown session id.
    let resp = c
        .call(
            &fetch(&topic, id, &[], session.wrapping_add(1).max(1), 1),
            12,
        )
        .await;
    assert_eq!(err(&resp), (ErrorCode::FetchSessionIdNotFound.code(), 0));
    // The wrong epoch: a replay of epoch 0's successor twice, or a jump.
    let resp = c.call(&fetch(&topic, id, &[], session, 2), 12).await;
    assert_eq!(err(&resp), (ErrorCode::InvalidFetchSessionEpoch.code(), 0));
    // A v13 request in a session opened by names.
    let resp = c.call(&fetch(&topic, id, &[], session, 1), 13).await;
    assert_eq!(err(&resp), (ErrorCode::FetchSessionTopicIdError.code(), 0));
    // The errors changed nothing: epoch 1 is still next, then 2.
    let resp = c.call(&fetch(&topic, id, &[], session, 1), 12).await;
    assert_eq!((resp.error_code, resp.session_id), (0, session));
    let resp = c.call(&fetch(&topic, id, &[], session, 1), 12).await;
    assert_eq!(err(&resp), (ErrorCode::InvalidFetchSessionEpoch.code(), 0));
    let resp = c.call(&fetch(&topic, id, &[], session, 2), 12).await;
    assert_eq!(resp.error_code, 0);

    // A partition error is sent in every incremental response until it clears.
    let mut req = fetch(&topic, id, &[(1, 99)], session, 3);
    req.topics[0].partitions[0].current_leader_epoch = -1;
    let resp = c.call(&req, 12).await;
    let p = &resp.responses[0].partitions[0];
    assert_eq!(
        (p.partition_index, p.error_code),
        (1, ErrorCode::OffsetOutOfRange.code())
    );
    let resp = c.call(&fetch(&topic, id, &[], session, 4), 12).await;
    assert_eq!(
        resp.responses[0].partitions[0].error_code,
        ErrorCode::OffsetOutOfRange.code()
    );
    let resp = c.call(&fetch(&topic, id, &[(1, 0)], session, 5), 12).await;
    assert_eq!(
        carried(&resp).len(),
        1,
        "the recovered partition is sent once"
    );
    let resp = c.call(&fetch(&topic, id, &[], session, 6), 12).await;
    assert_eq!(carried(&resp).len(), 0);

    // Forgetting every partition closes the session.
    let mut req = fetch(&topic, id, &[], session, 7);
    req.forgotten_topics_data = vec![ForgottenTopic {
        topic: topic.clone(),
        topic_id: id,
        partitions: vec![0, 1],
    }];
    let resp = c.call(&req, 12).await;
    assert_eq!((resp.error_code, resp.session_id), (0, 0));
    let resp = c.call(&fetch(&topic, id, &[], session, 8), 12).await;
    assert_eq!(err(&resp), (ErrorCode::FetchSessionIdNotFound.code(), 0));
    broker.shutdown().await;
}

#[tokio::test]
async fn the_session_cache_is_bounded_and_evicts_like_kafka() {
    let limits = BrokerLimits {
        max_fetch_sessions: 2,
        ..BrokerLimits::default()
    };
    let broker = Broker::start(BrokerConfig::in_memory().with_limits(limits))
        .await
        .unwrap();
    let mut c = Client::connect(broker.local_addr()).await;
    let topic = topic_name("evict");
    create_topic(&mut c, &topic, 4).await;
    let id = topic_id(&mut c, &topic).await;
    let open = |n: i32| {
        fetch(
            &topic,
            id,
            &(0..n).map(|p| (p, 0)).collect::<Vec<_>>(),
            0,
            0,
        )
    };

    let big = c.call(&open(4), 12).await.session_id;
    let small = c.call(&open(2), 12).await.session_id;
    assert!(big != 0 && small != 0);
    // The cache is full and both sessions are young: a consumer gets none.
    let resp = c.call(&open(4), 12).await;
    assert_eq!((resp.error_code, resp.session_id), (0, 0));
    assert_eq!(carried(&resp).len(), 4, "it is still answered in full");
    // A follower's session is privileged: it evicts the smallest consumer session.
    let mut follower = open(1);
    follower.replica_id = 7;
    let resp = c.call(&follower, 12).await;
    assert_ne!(resp.session_id, 0);
    let resp = c.call(&fetch(&topic, id, &[], small, 1), 12).await;
    assert_eq!(resp.error_code, ErrorCode::FetchSessionIdNotFound.code());
    let resp = c.call(&fetch(&topic, id, &[], big, 1), 12).await;
    assert_eq!(resp.error_code, 0, "the larger session stays");
    broker.shutdown().await;

    // Zero slots turn sessions off.
    let limits = BrokerLimits {
        max_fetch_sessions: 0,
        ..BrokerLimits::default()
    };
    let broker = Broker::start(BrokerConfig::in_memory().with_limits(limits))
        .await
        .unwrap();
    let mut c = Client::connect(broker.local_addr()).await;
    create_topic(&mut c, &topic, 1).await;
    let id = topic_id(&mut c, &topic).await;
    let resp = c.call(&fetch(&topic, id, &[(0, 0)], 0, 0), 12).await;
    assert_eq!((resp.error_code, resp.session_id), (0, 0));
    broker.shutdown().await;
}

#[tokio::test]
async fn an_incremental_fetch_without_changes_long_polls() {
    let broker = Broker::start(BrokerConfig::in_memory()).await.unwrap();
    let mut c = Client::connect(broker.local_addr()).await;
    let topic = topic_name("poll");
    create_topic(&mut c, &topic, 3).await;
    let id = topic_id(&mut c, &topic).await;
    let resp = c
        .call(&fetch(&topic, id, &[(0, 0), (1, 0), (2, 0)], 0, 0), 12)
        .await;
    let session = resp.session_id;
    assert_ne!(session, 0);
    // A long-polling incremental fetch, then a produce behind it on the same
    // connection: the fetch can only hold the record if the produce woke it.
    let mut req = fetch(&topic, id, &[], session, 1);
    req.max_wait_ms = 60_000;
    req.min_bytes = 1;
    let f = c.send(&req, 12).await;
    let p = c
        .send(&produce_req(&topic, 1, 1, records(5, &["wake"])), 9)
        .await;
    let (got, resp) = c.recv::<FetchRequest>(12).await;
    assert_eq!(got, f);
    assert_eq!((resp.error_code, resp.session_id), (0, session));
    assert_eq!(carried(&resp), vec![(1, vec!["wake".to_owned()])]);
    assert_eq!(c.recv::<ProduceRequest>(9).await.0, p);
    // A short wait with no change answers with no partitions at its deadline.
    let mut req = fetch(&topic, id, &[(1, 1)], session, 2);
    req.max_wait_ms = 50;
    req.min_bytes = 1;
    let resp = c.call(&req, 12).await;
    assert_eq!((resp.error_code, carried(&resp).len()), (0, 0));
    broker.shutdown().await;
}
