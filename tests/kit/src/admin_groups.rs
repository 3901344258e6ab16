//! The group administration scenario of `Admin` (list, describe and delete groups;
//! list, alter, reset and delete their committed offsets; lag), shared by the
//! suites that run it against `baton-broker` (`tests/client/admin_groups.rs`) and
//! against Apache Kafka (`tests/interop_suite/apache_kafka/admin_groups.rs`).

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use baton_kafka::{
    Admin, AdminError, Client, GroupDescription, GroupListing, GroupOffsetReset, GroupOffsetsQuery,
    GroupProtocol, GroupState, GroupType, ListGroupsFilter, Producer, TopicPartition,
};
use baton_protocol::ErrorCode;

use crate::consumer_group::{member_builder, produce, wait_until, History, Member, Tp};
use crate::topic_name;

/// How long any one step may take on a loaded machine.
const WITHIN: Duration = Duration::from_secs(120);

/// Calls `f` every 100 ms until it returns `Ok`; panics naming `what` after two
/// minutes, with the last `Err` of `f` (what it saw).
pub async fn eventually<T, F, Fut>(what: &str, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, String>>,
{
    let deadline = tokio::time::Instant::now() + WITHIN;
    loop {
        match f().await {
            Ok(v) => return v,
            Err(last) => assert!(
                tokio::time::Instant::now() < deadline,
                "waited {WITHIN:?} for {what}; last seen: {last}"
            ),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Every partition of `topic`, in order.
fn all_partitions(topic: &str, partitions: i32) -> Vec<TopicPartition> {
    (0..partitions)
        .map(|p| TopicPartition::new(topic, p))
        .collect()
}

/// The listing of `group` once it is in `state`.
async fn listed_in(admin: &Admin, group: &str, state: GroupState) -> GroupListing {
    eventually(&format!("{group} listed as {state}"), || async {
        let all = admin
            .list_groups(&ListGroupsFilter::all())
            .await
            .map_err(|e| e.to_string())?;
        match all.into_iter().find(|g| g.group_id == group) {
            Some(g) if g.state.as_ref() == Some(&state) => Ok(g),
            other => Err(format!("{other:?}")),
        }
    })
    .await
}

/// The description of `group` once `done` holds for it.
async fn described(
    admin: &Admin,
    group: &str,
    what: &str,
    done: impl Fn(&GroupDescription) -> bool + Sync,
) -> GroupDescription {
    eventually(what, || async {
        let mut d = admin
            .describe_groups([group])
            .await
            .map_err(|e| e.to_string())?;
        let d = d.pop().ok_or("no description")?;
        if done(&d) {
            Ok(d)
        } else {
            Err(format!("{d:?}"))
        }
    })
    .await
}

/// The codes of an [`AdminError::Groups`], or a panic naming `what`.
fn group_codes<T: std::fmt::Debug>(
    what: &str,
    r: Result<T, AdminError>,
) -> Vec<(String, ErrorCode)> {
    match r {
        Err(AdminError::Groups(failures)) => {
            failures.into_iter().map(|f| (f.group, f.code)).collect()
        }
        other => panic!("{what}: expected a group failure, got {other:?}"),
    }
}

/// One classic group and one consumer-protocol group (KIP-848), each with one
/// member reading `topic` (of `partitions` partitions, written only here), are
/// administered:
/// - listed (with state and type, and by type and state filters) and described
///   (members, their assignments, epochs for the consumer protocol);
/// - while their members run: deleting the groups fails with NON_EMPTY_GROUP,
///   altering or resetting their offsets with [`AdminError::GroupActive`],
///   deleting their offsets of the subscribed topic with GROUP_SUBSCRIBED_TO_TOPIC;
/// - once stopped: their committed offsets are listed (both groups in one call)
///   and equal the log end offsets, the lag is 0 and then the records produced
///   since; the classic group is rewound to the earliest offsets and a new member
///   reads every record again; offsets are shifted and clamped; the consumer
///   group's offsets of partition 0 are deleted (those of a missing topic are
///   UNKNOWN_TOPIC_OR_PARTITION); both groups are deleted, which a second
///   deletion, and deleting their offsets, report as GROUP_ID_NOT_FOUND.
pub async fn group_admin_lifecycle(client: &Client, topic: &str, partitions: i32) {
    let admin = Admin::new(client);
    let classic = topic_name("admin-classic");
    let k848 = topic_name("admin-k848");
    let everything = all_partitions(topic, partitions);
    let producer = Producer::builder(client).build();
    let mut expected: BTreeMap<Tp, i64> = BTreeMap::new();
    produce(&producer, topic, partitions, 60, &mut expected).await;

    let classic_history = Arc::new(History::default());
    let k848_history = Arc::new(History::default());
    let classic_member = Member::start(
        member_builder(client, &classic, topic).group_protocol(GroupProtocol::Classic),
        0,
        &classic_history,
    )
    .await;
    let k848_member = Member::start(member_builder(client, &k848, topic), 0, &k848_history).await;
    wait_until(&classic_history, WITHIN, "classic member read 60", |h| {
        h.distinct() >= 60
    })
    .await;
    wait_until(
        &k848_history,
        WITHIN,
        "consumer-protocol member read 60",
        |h| h.distinct() >= 60,
    )
    .await;

    // Listing: both groups, with their types; filters by type and state.
    let c = listed_in(&admin, &classic, GroupState::Stable).await;
    assert_eq!(c.group_type, Some(GroupType::Classic), "{c:?}");
    assert_eq!(c.protocol_type, "consumer", "{c:?}");
    let k = listed_in(&admin, &k848, GroupState::Stable).await;
    assert_eq!(k.group_type, Some(GroupType::Consumer), "{k:?}");
    let only_consumer = admin
        .list_groups(&ListGroupsFilter::all().types([GroupType::Consumer]))
        .await
        .expect("list consumer-protocol groups");
    assert!(
        only_consumer.iter().any(|g| g.group_id == k848),
        "{only_consumer:?}"
    );
    assert!(
        !only_consumer.iter().any(|g| g.group_id == classic),
        "{only_consumer:?}"
    );
    let only_empty = admin
        .list_groups(&ListGroupsFilter::all().states([GroupState::Empty]))
        .await
        .expect("list empty groups");
    assert!(
        !only_empty
            .iter()
            .any(|g| g.group_id == classic || g.group_id == k848),
        "{only_empty:?}"
    );

    // Describing: one member each, owning every partition.
    let d = described(
        &admin,
        &classic,
        "classic group described, one member owning all",
        |d| {
            d.state == GroupState::Stable
                && d.members.len() == 1
                && d.members[0].assignment == everything
        },
    )
    .await;
    assert_eq!(d.group_type, GroupType::Classic, "{d:?}");
    assert!(!d.assignor.is_empty(), "{d:?}");
    assert_eq!(
        d.members[0].subscribed_topics,
        vec![topic.to_string()],
        "{d:?}"
    );
    assert!(d.group_epoch.is_none(), "{d:?}");
    let d = described(
        &admin,
        &k848,
        "consumer group described, one member owning all",
        |d| {
            d.state == GroupState::Stable
                && d.members.len() == 1
                && d.members[0].assignment == everything
                && d.members[0].target_assignment.as_ref() == Some(&everything)
        },
    )
    .await;
    assert_eq!(d.group_type, GroupType::Consumer, "{d:?}");
    assert!(d.group_epoch.is_some_and(|e| e > 0), "{d:?}");
    assert!(d.assignment_epoch.is_some_and(|e| e > 0), "{d:?}");
    assert!(d.members[0].member_epoch.is_some_and(|e| e > 0), "{d:?}");
    assert_eq!(
        d.members[0].subscribed_topics,
        vec![topic.to_string()],
        "{d:?}"
    );
    let unknown = topic_name("admin-unknown");
    let d = admin
        .describe_groups([unknown.as_str()])
        .await
        .expect("describe unknown");
    assert_eq!(d[0].state, GroupState::Dead, "{d:?}");

    // Live groups refuse deletion, offset changes and offset deletion.
    let codes = group_codes(
        "deleting live groups",
        admin.delete_groups([classic.as_str(), k848.as_str()]).await,
    );
    assert_eq!(
        codes,
        vec![
            (classic.clone(), ErrorCode::NonEmptyGroup),
            (k848.clone(), ErrorCode::NonEmptyGroup)
        ]
    );
    for group in [&classic, &k848] {
        match admin
            .reset_consumer_group_offsets(
                group.as_str(),
                everything.clone(),
                GroupOffsetReset::Earliest,
            )
            .await
        {
            Err(AdminError::GroupActive { group: g, code }) => {
                assert_eq!(&g, group);
                eprintln!("{group}: altering a live group refused with {code}");
            }
            other => panic!("{group}: expected GroupActive, got {other:?}"),
        }
        match admin
            .delete_consumer_group_offsets(group.as_str(), everything.clone())
            .await
        {
            Err(AdminError::GroupOffsets(failures)) => {
                assert_eq!(failures.len(), everything.len(), "{failures:?}");
                assert!(
                    failures
                        .iter()
                        .all(|f| f.code == ErrorCode::GroupSubscribedToTopic),
                    "{failures:?}"
                );
            }
            other => panic!("{group}: expected GROUP_SUBSCRIBED_TO_TOPIC, got {other:?}"),
        }
    }

    // Stopped (commit on close, leave): offsets listed for both groups at once.
    classic_member.stop().await;
    k848_member.stop().await;
    listed_in(&admin, &classic, GroupState::Empty).await;
    listed_in(&admin, &k848, GroupState::Empty).await;
    let found = admin
        .list_consumer_group_offsets([
            GroupOffsetsQuery::all(classic.as_str()),
            GroupOffsetsQuery::partitions(k848.as_str(), everything.clone()),
        ])
        .await
        .expect("list both groups' offsets");
    assert_eq!(found.len(), 2);
    for g in &found {
        let got: BTreeMap<Tp, i64> = g
            .offsets
            .iter()
            .map(|(tp, o)| ((tp.topic.to_string(), tp.partition), o.offset))
            .collect();
        assert_eq!(
            got, expected,
            "{}: committed offsets are the log end",
            g.group
        );
    }

    // Lag: none, then what was produced since.
    let lag = admin
        .consumer_group_lag(classic.as_str())
        .await
        .expect("lag");
    assert_eq!(lag.len(), partitions as usize, "{lag:?}");
    assert!(lag.iter().all(|l| l.lag == 0), "{lag:?}");
    produce(&producer, topic, partitions, 30, &mut expected).await;
    producer.close().await;
    let lag = admin
        .consumer_group_lag(classic.as_str())
        .await
        .expect("lag");
    assert_eq!(lag.iter().map(|l| l.lag).sum::<i64>(), 30, "{lag:?}");

    // Rewind to the earliest offsets: a new member reads everything again.
    let planned = admin
        .reset_consumer_group_offsets(classic.as_str(), [], GroupOffsetReset::Earliest)
        .await
        .expect("rewind the stopped group");
    assert_eq!(planned.len(), partitions as usize, "{planned:?}");
    assert!(planned.values().all(|&o| o == 0), "{planned:?}");
    let again = Arc::new(History::default());
    let member = Member::start(
        member_builder(client, &classic, topic).group_protocol(GroupProtocol::Classic),
        0,
        &again,
    )
    .await;
    wait_until(
        &again,
        WITHIN,
        "every record read again after the rewind",
        |h| h.distinct() >= 90,
    )
    .await;
    member.stop().await;
    listed_in(&admin, &classic, GroupState::Empty).await;

    // Shift back by 5 from the end, and past the start (clamped to 0).
    let shifted = admin
        .reset_consumer_group_offsets(
            classic.as_str(),
            everything.clone(),
            GroupOffsetReset::ShiftBy(-5),
        )
        .await
        .expect("shift");
    for (tp, o) in &shifted {
        let end = expected[&(tp.topic.to_string(), tp.partition)];
        assert_eq!(*o, end - 5, "{tp:?}");
    }
    let clamped = admin
        .plan_consumer_group_offsets_reset(
            classic.as_str(),
            everything.clone(),
            GroupOffsetReset::ShiftBy(-1_000),
        )
        .await
        .expect("plan");
    assert!(clamped.values().all(|&o| o == 0), "{clamped:?}");
    let offsets = admin
        .group_offsets(classic.as_str())
        .await
        .expect("offsets");
    assert_eq!(
        offsets
            .iter()
            .map(|(tp, o)| (tp.clone(), o.offset))
            .collect::<BTreeMap<_, _>>(),
        shifted
    );

    // Offsets of a partition no member subscribes to any more are deleted.
    admin
        .delete_consumer_group_offsets(k848.as_str(), [TopicPartition::new(topic, 0)])
        .await
        .expect("delete the offsets of partition 0");
    let left = admin.group_offsets(k848.as_str()).await.expect("offsets");
    assert_eq!(
        left.keys().cloned().collect::<Vec<_>>(),
        everything[1..].to_vec(),
        "partition 0 gone, the others kept"
    );

    // A topic that does not exist is refused per partition.
    let missing = TopicPartition::new(topic_name("admin-missing").as_str(), 0);
    match admin
        .delete_consumer_group_offsets(classic.as_str(), [missing])
        .await
    {
        Err(AdminError::GroupOffsets(f)) => {
            assert_eq!(f.len(), 1, "{f:?}");
            assert_eq!(f[0].code, ErrorCode::UnknownTopicOrPartition, "{f:?}");
        }
        other => panic!("expected UNKNOWN_TOPIC_OR_PARTITION, got {other:?}"),
    }

    // Both stopped groups are deleted; a second deletion finds nothing.
    admin
        .delete_groups([classic.as_str(), k848.as_str()])
        .await
        .expect("delete the stopped groups");
    let listed = admin
        .list_groups(&ListGroupsFilter::all())
        .await
        .expect("list");
    assert!(
        !listed
            .iter()
            .any(|g| g.group_id == classic || g.group_id == k848),
        "{listed:?}"
    );
    assert!(admin
        .group_offsets(classic.as_str())
        .await
        .expect("offsets")
        .is_empty());
    let codes = group_codes(
        "deleting again",
        admin.delete_groups([classic.as_str()]).await,
    );
    assert_eq!(codes, vec![(classic.clone(), ErrorCode::GroupIdNotFound)]);
}
